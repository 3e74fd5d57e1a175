"""The Collections table's points column says why a collection's points are not counted
(another process writing it, or holding it open) instead of "missing", which read like lost
data while a job was writing it; "missing" stays for a collection the store does not have."""

from __future__ import annotations

from app.services.collections import CollectionInfo
from ui.render import COLLECTION_COLUMNS, collection_rows

POINTS = COLLECTION_COLUMNS.index("points")


def _info(points: int | None, writer: str | None = None, open_in: str | None = None) -> CollectionInfo:
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
