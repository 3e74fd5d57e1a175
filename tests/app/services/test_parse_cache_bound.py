"""A worker's cache of parsed files (``_ParseCache``) is bounded by what its documents take.

It kept the last 4,096 files whatever their sizes: ten 36 MB jsonl shards read by one worker
process held 860 MB after the last (and a 190 MB jsonl after them 1.4 GB, with a 2.5 GB peak
while it was read whole). Then it kept ``FACET_WORKER_PARSE_CACHE_MB`` of files by their size on
disk, which their documents take two to four times over, and held a record file over the stream
limit whole for its chunks (650 MB for that 190 MB jsonl; a corpus larger than memory could not
be indexed by workers). Now the budget is of the documents' memory (``_held``), and a record file
read a line at a time is kept as a window of its documents: the plan keeps its first ones, a
chunk asking for others reads it again from the first it asks for on."""

from __future__ import annotations

import json
import os
import time
import tracemalloc
from pathlib import Path

from app.services.distributed import _PARSED, ChunkedIndexService, _held, _ParseCache
from indexer.parsing import parse_file


def _jsonl(path: Path, records: int, words: int = 50, ids: list[str] | None = None) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(records):
            key = f"{path.stem}-{i}" if ids is None else ids[i]
            fh.write(json.dumps({"id": key, "text": f"record {i} " + "word " * words,
                                 "lang": "en"}) + "\n")
    an_hour_ago = time.time_ns() - 3600 * 10**9  # (not "racy": kept, as a settled file is)
    os.utime(path, ns=(an_hour_ago, an_hour_ago))
    return path


def _held_by(docs: dict) -> int:
    return sum(map(_held, docs.values()))


def test_what_documents_take_is_estimated_within_a_fifth_of_what_they_hold(tmp_path) -> None:
    path = _jsonl(tmp_path / "a.jsonl", 2000, words=60)
    tracemalloc.start()
    try:
        docs = _ParseCache().read(str(path), max_bytes=1 << 20)[0]
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert 0.8 * held < _held_by(docs) < 1.2 * held
    assert held > 1.5 * path.stat().st_size  # (what their size on disk said: far below)


def test_files_are_kept_up_to_the_budget_of_what_their_documents_take(tmp_path) -> None:
    a, b, c = (_jsonl(tmp_path / f"{n}.jsonl", 400) for n in "abc")
    one = _held_by(_ParseCache().read(str(a), max_bytes=1 << 20)[0])
    cache = _ParseCache(max_bytes_kept=int(2.5 * one))
    first = {p: cache.read(str(p), max_bytes=1 << 20)[0] for p in (a, b)}
    assert all(len(docs) == 400 for docs in first.values())
    assert cache.read(str(a), max_bytes=1 << 20)[0] is first[a]  # both fit: read once
    cache.read(str(c), max_bytes=1 << 20)  # a third does not: the least recent goes
    assert cache.read(str(a), max_bytes=1 << 20)[0] is first[a]  # (a was used after b)
    again = cache.read(str(b), max_bytes=1 << 20)[0]
    assert again is not first[b] and again == first[b]  # read again, the same documents


def test_the_last_file_is_kept_whatever_its_size(tmp_path) -> None:
    big = _jsonl(tmp_path / "big.jsonl", 400)
    cache = _ParseCache(max_bytes_kept=1000)  # far below its size
    docs = cache.read(str(big), max_bytes=1 << 20)[0]
    assert cache.read(str(big), max_bytes=1 << 20)[0] is docs  # its chunks read it once
    small = _jsonl(tmp_path / "small.jsonl", 2)
    cache.read(str(small), max_bytes=1 << 20)
    assert cache.read(str(big), max_bytes=1 << 20)[0] is not docs  # then it made way


def _counting_reads(monkeypatch) -> list[int]:
    """Counts the reads of a file from its top (each ``parse_file`` the cache calls)."""
    import app.services.distributed as distributed

    reads = [0]
    parse = distributed.parse_file

    def counted(*args, **kwargs):
        reads[0] += 1
        return parse(*args, **kwargs)

    monkeypatch.setattr(distributed, "parse_file", counted)
    return reads


def test_a_large_record_file_is_kept_a_window_at_a_time(tmp_path, monkeypatch) -> None:
    """The plan gives every document and keeps the first ones up to the budget; a chunk whose
    documents are kept reads nothing; the first that are not read the file once more, and the
    windows after go on from where that read stopped, never from the top again; what is held
    stays near the budget, and each chunk gets the very documents the file read whole gives."""
    path = _jsonl(tmp_path / "corpus.jsonl", 3000, words=100)  # 1.6 MB
    whole = {d.key: d for d in parse_file(path, max_bytes=1 << 20)}
    budget = _held_by(whole) // 5
    cache = _ParseCache(max_bytes_kept=budget, records_over_bytes=1 << 20)
    planned = list(cache.planned(str(path), max_bytes=1 << 20))
    assert [d.key for d in planned] == list(whole)
    reads = _counting_reads(monkeypatch)
    chunks = [{f"corpus-{i}" for i in range(start, min(start + 64, 3000))}
              for start in range(0, 3000, 64)]
    windows, held_most = 0, 0
    last = None
    for keys in chunks:
        tracemalloc.start()
        try:
            docs = cache.pick(str(path), keys, max_bytes=1 << 20)
            held_most = max(held_most, tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert docs is not None and {k: docs[k] for k in keys} == {k: whole[k] for k in keys}
        windows += docs is not last
        last = docs
    assert reads == [1]  # (read from the top once after the plan's window, then gone on)
    assert windows >= 5  # (a fifth of it at most at a time)
    assert held_most < 2 * budget  # (whole, it took five times the budget)
    # A chunk behind where the read stopped (another worker's, re-delivered): from the top.
    again = cache.pick(str(path), chunks[0], max_bytes=1 << 20)
    assert again is not last and set(again) >= chunks[0] and reads == [2]


def test_threads_asking_together_read_the_file_once(tmp_path, monkeypatch) -> None:
    """Four threads of a worker process taking a file's chunks in order (as a threads pool
    does), each with a little work after its pick: the file is read from the top once after
    the plan. Each thread that missed a window read the file again, at once (four threads: 19
    reads where one thread read 5)."""
    import queue
    import threading

    path = _jsonl(tmp_path / "corpus.jsonl", 3000, words=100)
    whole = {d.key: d for d in parse_file(path, max_bytes=1 << 20)}
    cache = _ParseCache(max_bytes_kept=_held_by(whole) // 8, records_over_bytes=1 << 20)
    list(cache.planned(str(path), max_bytes=1 << 20))
    reads = _counting_reads(monkeypatch)
    todo: queue.Queue[set[str]] = queue.Queue()
    for start in range(0, 3000, 64):
        todo.put({f"corpus-{i}" for i in range(start, min(start + 64, 3000))})
    wrong: list[str] = []

    def work() -> None:
        while True:
            try:
                keys = todo.get_nowait()
            except queue.Empty:
                return
            docs = cache.pick(str(path), keys, max_bytes=1 << 20) or {}
            wrong.extend(k for k in keys if docs.get(k) != whole[k])
            time.sleep(0.02)  # (the chunk's encoding)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not wrong
    assert reads[0] <= 6  # (1 or 2 here; 19 without the gate. A thread held up by a loaded
    # machine far behind the others reads from the top: not counted as a failure)


def test_two_large_files_whose_chunks_come_in_turn_keep_a_window_each(tmp_path,
                                                                      monkeypatch) -> None:
    """Two jobs' files in one worker process: each window held the whole budget and let the
    other's go, so each file was read from the top at every chunk (72 reads of each for 79
    chunks)."""
    paths = [_jsonl(tmp_path / f"{name}.jsonl", 2000, words=40) for name in "ab"]
    one = _held_by({d.key: d for d in parse_file(paths[0], max_bytes=1 << 20)})
    cache = _ParseCache(max_bytes_kept=one // 2, records_over_bytes=1 << 16)
    reads = _counting_reads(monkeypatch)
    for start in range(0, 2000, 64):
        for path in paths:
            keys = {f"{path.stem}-{i}" for i in range(start, min(start + 64, 2000))}
            docs = cache.pick(str(path), keys, max_bytes=1 << 20)
            assert docs is not None and keys <= docs.keys()
    assert reads[0] <= 4  # (each from the top once, at most twice)


def test_keys_a_changed_file_lost_are_not_looked_for_to_its_end_at_every_chunk(
        tmp_path, monkeypatch) -> None:
    """Planned, then 1% of its records removed: each chunk with a lost key read the whole file
    to find it was not there (76 reads for 79 chunks)."""
    path = _jsonl(tmp_path / "corpus.jsonl", 3000, words=40)
    cache = _ParseCache(max_bytes_kept=1 << 20, records_over_bytes=1 << 16)
    list(cache.planned(str(path), max_bytes=1 << 20))
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(line for i, line in enumerate(lines) if i % 100 != 7))
    an_hour_ago = time.time_ns() - 3600 * 10**9
    os.utime(path, ns=(an_hour_ago, an_hour_ago))
    reads = _counting_reads(monkeypatch)
    for start in range(0, 3000, 64):
        keys = {f"corpus-{i}" for i in range(start, min(start + 64, 3000))}
        docs = cache.pick(str(path), keys, max_bytes=1 << 20)
        assert docs is not None
        assert {k for k in keys if k not in docs} == {k for k in keys if int(k[7:]) % 100 == 7}
    assert reads[0] <= 2


def test_a_read_kept_open_is_closed_when_the_worker_lets_its_files_go(tmp_path) -> None:
    """A window's read stayed open with no end: a worker idle after its job held the file (a
    deleted upload's disk space with it)."""
    path = _jsonl(tmp_path / "corpus.jsonl", 2000, words=40)
    cache = _ParseCache(max_bytes_kept=1 << 16, records_over_bytes=1 << 16)

    def open_here() -> bool:
        return any(os.path.realpath(f"/proc/self/fd/{fd}") == str(path)
                   for fd in os.listdir("/proc/self/fd"))

    docs = cache.pick(str(path), {"corpus-10"}, max_bytes=1 << 20)
    assert docs is not None and "corpus-10" in docs
    assert open_here()  # (kept open to read on for the next chunks)
    cache.close_reads()
    assert not open_here()
    again = cache.pick(str(path), {"corpus-1500"}, max_bytes=1 << 20)
    assert again is not None and "corpus-1500" in again  # (from the top)


def test_reads_are_closed_only_once_no_collection_is_in_use(tmp_path, monkeypatch) -> None:
    """Letting one collection go closed every open read of the process, a busy job's too: its
    next chunk read its file from the top (7 reads with 6 small jobs beside it, against 1)."""
    import app.services.distributed as distributed

    class Store:
        def release(self, collection: str) -> None:
            pass

    path = _jsonl(tmp_path / "corpus.jsonl", 2000, words=40)
    cache = _ParseCache(max_bytes_kept=1 << 16, records_over_bytes=1 << 16)
    monkeypatch.setattr(distributed, "_PARSED", cache)
    idle = distributed._IdleRelease(Store(), 0)
    open_read = lambda: any(entry.rest is not None for entry in cache._files.values())  # noqa: E731
    with idle.using("big"):
        cache.pick(str(path), {"corpus-10"}, max_bytes=1 << 20)
        with idle.using("small"):
            pass  # (let go at once: idle_s 0)
        assert open_read()  # "big" is still in use
    assert not open_read()  # nothing in use: closed


def test_a_window_of_a_csv_with_a_repeated_id_keeps_only_the_first(tmp_path) -> None:
    """A csv gives a repeated id again under the same key (a jsonl's second is an error of its
    line): a window that started past the first row of a key kept the later one, and served it
    to the chunk that asked for that key (the review of the second session of 2026-12-07)."""
    path = tmp_path / "corpus.csv"
    rows = ["id,text"] + [f"k{i},record {i} " + "word " * 20 for i in range(400)]
    rows[1 + 300] = "k5,a later k5 " + "word " * 20
    path.write_text("\n".join(rows) + "\n")
    an_hour_ago = time.time_ns() - 3600 * 10**9
    os.utime(path, ns=(an_hour_ago, an_hour_ago))
    whole: dict = {}
    for d in parse_file(path, max_bytes=1 << 20):
        whole.setdefault(d.key, d)
    assert whole["k5"].text.startswith("record 5 ")
    for budget in (1, 3000, 1 << 30):
        cache = _ParseCache(max_bytes_kept=budget, records_over_bytes=0)
        window = cache.pick(str(path), {"k290"}, max_bytes=1 << 20)
        assert window is not None and all(whole[k] == d for k, d in window.items())
        first = cache.pick(str(path), {"k5", "k290"}, max_bytes=1 << 20)
        assert first is not None and first["k5"] == whole["k5"]


def test_a_window_of_a_file_with_a_repeated_id_gives_the_first(tmp_path) -> None:
    ids = [f"k{i}" for i in range(400)]
    ids[300] = "k5"  # the file gives k5 twice: the parser says the second is not indexed
    path = _jsonl(tmp_path / "corpus.jsonl", 400, words=20, ids=ids)
    cache = _ParseCache(records_over_bytes=1000)
    planned = list(cache.planned(str(path), max_bytes=1 << 20))
    assert [d.key for d in planned] == [d.key for d in parse_file(path, max_bytes=1 << 20)]
    assert f"{path}#L301" in {d.key for d in planned}
    fresh = _ParseCache(records_over_bytes=1000)
    docs = fresh.pick(str(path), {"k200", "k201"}, max_bytes=1 << 20)
    assert docs is not None and set(docs) >= {"k200", "k201", "k399", f"{path}#L301"}
    assert docs["k5"].text.startswith("record 5 ")  # (the window looks back: the first)


def test_a_window_gives_the_keys_asked_for_over_its_budget_and_not_what_the_file_lost(
        tmp_path) -> None:
    path = _jsonl(tmp_path / "corpus.jsonl", 400, words=20)
    cache = _ParseCache(max_bytes_kept=1000, records_over_bytes=1000)
    docs = cache.pick(str(path), {"corpus-10", "corpus-390"}, max_bytes=1 << 20)
    # (and a few before the first: a look-back of half the 1,000-byte budget at most)
    assert docs is not None and {"corpus-10", "corpus-390"} <= set(docs) and len(docs) <= 12
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:7] + lines[8:]))  # corpus-7 removed since
    docs = cache.pick(str(path), {"corpus-7", "corpus-8"}, max_bytes=1 << 20)
    assert docs is not None and "corpus-7" not in docs and "corpus-8" in docs


def test_a_worker_takes_its_bounds_from_the_settings(make_ctx) -> None:
    saved = (_PARSED.max_bytes_kept, _PARSED.records_over_bytes)
    try:
        ChunkedIndexService(make_ctx(worker_parse_cache_mb=3, stream_document_mb=2))
        assert (_PARSED.max_bytes_kept, _PARSED.records_over_bytes) == (3 << 20, 2 << 20)
    finally:
        _PARSED.configure(*saved)
