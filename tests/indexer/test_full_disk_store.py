"""A full disk under the embedded store is said as a full disk (the disk-full exploration of the
third session of 2026-12-02). A shard's load writes a small structure file even to be read; on a
full disk the engine's "No space left on device (os error 28)" fell into the "gone or
unreadable (the data folder deleted, moved or unmounted while in use?)" refusal, a bad request
(`facet search` exit 2, `facet collections` "store files unreadable"), over data that was whole.

The engine's failure is stood in for by raising its exception text from ``EdgeStore._load``
(the real text, captured on a full 30 MiB ext4 image): a full disk cannot be made in CI without
root and a mount, and the same image with room reads the same data fine. Everything else is
real: the edge store, minilm, SQLite and the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from indexer.errors import StoreError, StoreUnavailableError, disk_full_text
from indexer.store import EdgeStore, PointRecord
from tests.app.cli_runner import invoke_cli, tiny_data_folder

# The engine's words, as a shard's load said them on a full disk (the path is filled in).
ENOSPC = ('Service runtime error: Failed to save structure on disk with error: No space left on '
          'device (os error 28) at path "{folder}/.atomicwriteKTHYVb"')


def _full_disk_load(monkeypatch: pytest.MonkeyPatch) -> None:
    def load(self: EdgeStore, collection: str) -> Any:
        raise Exception(ENOSPC.format(folder=self._dir(collection)))

    monkeypatch.setattr(EdgeStore, "_load", load)


def test_a_shard_that_cannot_open_for_a_full_disk_is_unavailable_not_gone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = EdgeStore(tmp_path / "edge")
    try:
        store.ensure_collection("c", {"v": 4})
        store.upsert("c", [PointRecord(id="00000000-0000-0000-0000-000000000001",
                                       vectors={"v": [1.0, 0.0, 0.5, 0.25]}, payload={"doc_id": "d"})])
    finally:
        store.close()
    _full_disk_load(monkeypatch)
    store = EdgeStore(tmp_path / "edge")
    try:
        with pytest.raises(StoreError) as refused:
            store.count("c")
    finally:
        store.close()
    said = str(refused.value)
    assert isinstance(refused.value, StoreUnavailableError), said  # (was a plain StoreError)
    assert "gone or unreadable" not in said and "deleted, moved or unmounted" not in said, said
    assert said.startswith("collection 'c': opening it failed (Service runtime error:"), said
    assert "No space left on device (os error 28)" in said, said
    assert said.endswith(f"the disk of the vector store {tmp_path / 'edge'} is full: free some space "
                         "there (or point FACET_DATA_DIR at a disk with room) and try again; "
                         "nothing was lost"), said


def test_search_and_listing_on_a_full_disk_say_it_is_full(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tiny_data_folder(tmp_path)
    _full_disk_load(monkeypatch)
    env = {"FACET_DATA_DIR": str(data)}
    searched = invoke_cli("search", "card", "-c", "tiny", env=env)
    assert searched.returncode == 7, searched.stderr  # unavailable (was 2, a bad request)
    assert "is full" in searched.stderr and "No space left on device" in searched.stderr, searched.stderr
    assert "gone or unreadable" not in searched.stderr, searched.stderr
    listed = invoke_cli("collections", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "is full" in listed.stdout and "gone or unreadable" not in listed.stdout, listed.stdout


def test_a_full_disk_is_measured_and_a_roomy_or_read_only_one_is_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import shutil

    assert disk_full_text(tmp_path) is None  # this disk has room
    real_usage, real_statvfs = shutil.disk_usage, os.statvfs
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real_usage(p)._replace(free=4096))
    said = disk_full_text(tmp_path, "the metadata database x.db", "FACET_DATABASE_URL")
    assert said == ("the disk of the metadata database x.db is full (4,096 bytes free): free some "
                    "space there (or point FACET_DATABASE_URL at a disk with room) and try again; "
                    "nothing was lost"), said

    class ReadOnly:  # a read-only mount (a squashfs reads 0 bytes free): not a full disk
        def __init__(self, path: Any) -> None:
            self.f_flag = real_statvfs(path).f_flag | os.ST_RDONLY

    monkeypatch.setattr(os, "statvfs", ReadOnly)
    assert disk_full_text(tmp_path) is None


def test_a_disk_that_reports_no_size_is_not_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A FUSE driver that reports no size (fusefat: 0 blocks, 0 free; `df` shows 0 0 0) was
    "full (0 bytes free)" to every command, FACET_MIN_FREE_MB=0 included (the exFAT/FAT
    exploration of the fourth session of 2026-12-02). Simulated (os.statvfs and
    shutil.disk_usage as that driver answers): such a mount cannot be made in CI."""
    import os
    import shutil

    from app.core import Facet
    from app.settings import FacetSettings

    real_statvfs, real_usage = os.statvfs, shutil.disk_usage

    class NoSize:
        def __init__(self, path: Any) -> None:
            self.f_flag = real_statvfs(path).f_flag
            self.f_blocks = self.f_bfree = self.f_bavail = 0

    monkeypatch.setattr(os, "statvfs", NoSize)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real_usage(p)._replace(total=0, used=0, free=0))
    assert disk_full_text(tmp_path) is None
    facet = Facet(FacetSettings(data_dir=tmp_path / "data", min_free_mb=64))
    try:
        facet.indexing.check_room()  # (refused: "has 0.0 MiB free, under FACET_MIN_FREE_MB")
    finally:
        facet.close()
