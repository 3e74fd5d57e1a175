"""A worker's cache of parsed files (``_ParseCache``) is bounded by the files' sizes.

It kept the last 4,096 files whatever their sizes: ten 36 MB jsonl shards read by one worker
process held 860 MB after the last (and a 190 MB jsonl after them 1.4 GB, with a 2.5 GB peak
while it was read whole). Now it keeps ``FACET_WORKER_PARSE_CACHE_MB`` of files by size, the
last one read whatever its size (the chunks of one large file read it once), and reads a record
file over the stream limit a line at a time."""

from __future__ import annotations

import json
import os
import time
import tracemalloc
from pathlib import Path

from app.services.distributed import _PARSED, ChunkedIndexService, _ParseCache


def _jsonl(path: Path, records: int, words: int = 50) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(records):
            fh.write(json.dumps({"id": f"{path.stem}-{i}", "text": "word " * words}) + "\n")
    an_hour_ago = time.time_ns() - 3600 * 10**9  # (not "racy": kept, as a settled file is)
    os.utime(path, ns=(an_hour_ago, an_hour_ago))
    return path


def test_files_are_kept_up_to_the_budget_by_size(tmp_path) -> None:
    a, b, c = (_jsonl(tmp_path / f"{n}.jsonl", 400) for n in "abc")
    size = a.stat().st_size
    cache = _ParseCache(max_bytes_kept=int(2.5 * size))
    first = {p: cache.documents(str(p), max_bytes=1 << 20) for p in (a, b)}
    assert all(len(docs) == 400 for docs in first.values())
    assert cache.documents(str(a), max_bytes=1 << 20) is first[a]  # both fit: read once
    cache.documents(str(c), max_bytes=1 << 20)  # a third does not: the least recent goes
    assert cache.documents(str(a), max_bytes=1 << 20) is first[a]  # (a was used after b)
    again = cache.documents(str(b), max_bytes=1 << 20)
    assert again is not first[b] and again == first[b]  # read again, the same documents


def test_the_last_file_is_kept_whatever_its_size(tmp_path) -> None:
    big = _jsonl(tmp_path / "big.jsonl", 400)
    cache = _ParseCache(max_bytes_kept=1000)  # far below its size
    docs = cache.documents(str(big), max_bytes=1 << 20)
    assert cache.documents(str(big), max_bytes=1 << 20) is docs  # its chunks read it once
    small = _jsonl(tmp_path / "small.jsonl", 2)
    cache.documents(str(small), max_bytes=1 << 20)
    assert cache.documents(str(big), max_bytes=1 << 20) is not docs  # then it made way


def test_a_large_record_file_is_not_held_whole_while_read(tmp_path) -> None:
    path = _jsonl(tmp_path / "corpus.jsonl", 2000, words=400)  # 4 MB
    size = path.stat().st_size

    def overhead(records_over: int) -> int:
        """What reading it took beyond the documents kept: the peak less what is held after."""
        cache = _ParseCache(records_over_bytes=records_over)
        tracemalloc.start()
        try:
            docs = cache.documents(str(path), max_bytes=1 << 20)
            current, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert len(docs) == 2000
        return peak - current

    assert overhead(1 << 20) < size / 2  # a line at a time
    assert overhead(1 << 40) > 2 * size  # whole: its bytes and its text at once


def test_a_worker_takes_its_bounds_from_the_settings(make_ctx) -> None:
    saved = (_PARSED.max_bytes_kept, _PARSED.records_over_bytes)
    try:
        ChunkedIndexService(make_ctx(worker_parse_cache_mb=3, stream_document_mb=2))
        assert (_PARSED.max_bytes_kept, _PARSED.records_over_bytes) == (3 << 20, 2 << 20)
    finally:
        _PARSED.configure(*saved)
