"""A worker's cache of parsed files (``_ParseCache``) must not serve a file's old text after an
edit of the same size: it stamped a file with (size, mtime), and a disk that keeps times to a
tick (2 s on FAT, whole seconds through exFAT's FUSE driver) left both as they were for an edit
within the tick, so the planner read the old text and called the file unchanged (the exFAT
exploration of the fourth session of 2026-12-02). The stamp now has the inode and ctime too, and
a file modified within ``RACY_NS`` of its read is read again each time. Real files: on this
test's disk with the mtime put back by ``os.utime`` (as a coarse clock leaves it), and on a real
exFAT image (skipped where it cannot be mounted)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from app.services.distributed import _ParseCache


def _texts(cache: _ParseCache, path: Path) -> list[str]:
    return [d.text.strip() for d in cache.read(str(path), max_bytes=1 << 20)[0].values()]


def test_an_old_file_is_read_once_and_a_same_size_edit_under_the_same_mtime_again(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("alpha alpha\n")
    an_hour_ago = time.time_ns() - 3600 * 10**9
    os.utime(path, ns=(an_hour_ago, an_hour_ago))
    cache = _ParseCache()
    first = cache.read(str(path), max_bytes=1 << 20)[0]
    assert cache.read(str(path), max_bytes=1 << 20)[0] is first  # (read once)
    path.write_text("omega omega\n")  # the same size, and the mtime put back to the same tick
    os.utime(path, ns=(an_hour_ago, an_hour_ago))
    assert _texts(cache, path) == ["omega omega"]


def test_a_file_written_just_now_is_read_again_on_a_disk_of_whole_seconds(exfat_folder: Path) -> None:
    path = exfat_folder / "a.txt"
    cache = _ParseCache()
    path.write_text("alpha alpha\n")
    assert _texts(cache, path) == ["alpha alpha"]
    path.write_text("omega omega\n")  # (within the same second, most runs: one stamp for both)
    assert _texts(cache, path) == ["omega omega"]
