"""The Collections table's points column says why a collection's points are not counted
(another process writing it, or holding it open) instead of "missing", which read like lost
data while a job was writing it; "missing" stays for a collection the store does not have."""

from __future__ import annotations

from app.services.collections import CollectionInfo
from ui.render import COLLECTION_COLUMNS, collection_rows

POINTS = COLLECTION_COLUMNS.index("points")


def _info(points: int | None, writer: str | None = None, open_in: str | None = None,
          disk_bytes: int | None = None) -> CollectionInfo:
    return CollectionInfo(
        name="notes",
        backend="edge",
        embedders={"minilm": 384},
        chunk_size=200,
        chunk_overlap=32,
        documents=5,
        documents_indexed=3,
        documents_failed=0,
        chunks=7,
        points=points,
        created_at="2026-01-01 00:00:00",
        writer=writer,
        open_in=open_in,
        disk_bytes=disk_bytes,
    )


def test_points_being_written_name_the_writer_not_missing() -> None:
    writer = "job 4 (pid 345 on host h, heartbeat 9s ago)"
    [row] = collection_rows([_info(None, writer=writer)])
    assert row[POINTS] == f"? (being written: {writer})"


def test_points_of_a_collection_open_elsewhere_say_where() -> None:
    [row] = collection_rows([_info(None, open_in="pid 77 on host h")])
    assert row[POINTS] == "? (open in pid 77 on host h; counted there)"


def test_points_counted_or_really_absent() -> None:
    counted, absent = collection_rows([_info(7), _info(None)])
    assert counted[POINTS] == 7
    assert absent[POINTS] == "missing"  # no writer, not open elsewhere: the store lacks it


def test_the_size_on_disk_is_shown_as_the_cli_shows_it() -> None:
    """`facet collections` and GET /collections gave it; the UI's table had no column for it."""
    sized, unknown = collection_rows([_info(7, disk_bytes=1_834_567), _info(7)])
    on_disk = COLLECTION_COLUMNS.index("on disk")
    assert sized[on_disk] == "1.8 MB" and unknown[on_disk] == ""
    assert len(sized) == len(COLLECTION_COLUMNS)
