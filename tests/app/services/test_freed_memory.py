"""``give_back_freed_memory``: the heap a batch freed goes back to the system (glibc kept it:
`facet index` of 5,000 SciFact abstracts with minilm grew to 1.2 GB, Facet holding ~100 MB)."""

import sys
from pathlib import Path

import pytest

from app.services.indexing import _malloc_trim, give_back_freed_memory


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not sys.platform.startswith("linux") or _malloc_trim() is None,
                    reason="glibc's malloc_trim (Linux)")
def test_freed_heap_is_returned_even_under_a_live_allocation() -> None:
    # Blocks under glibc's mmap threshold come from the heap, as torch's activation buffers
    # of a small batch do; one block kept at the top stops the heap from shrinking by itself.
    blocks = [bytearray(64 * 1024) for _ in range(3000)]  # ~190 MB
    top = blocks.pop()
    del blocks
    held = rss_mb()
    give_back_freed_memory()
    assert held - rss_mb() > 100, (held, rss_mb())
    assert len(top) == 64 * 1024


def test_a_job_gives_back_what_the_stores_optimize_freed(make_ctx, tmp_path, monkeypatch) -> None:
    """The store's optimize at a job's end builds its indexes in buffers it frees; glibc kept
    them: ~200 MB a 100,000 records stayed with a server or worker after the job (helper-540's
    measurement of 2026-12-07: 536 MB after a 100k-record job, 390 MB with the trim). The trim
    comes after the optimize. (The calls are recorded, each still made: the effect on memory
    is the one measured above, too slow and noisy for a test.)"""
    import app.services.indexing as indexing
    from app.services.indexing import IndexOptions, IndexService
    from indexer.store import EdgeStore

    calls: list[str] = []
    optimize, trim = EdgeStore.optimize, indexing.give_back_freed_memory

    def optimizing(self, *args, **kwargs):
        calls.append("optimize")
        return optimize(self, *args, **kwargs)

    def trimming() -> None:
        calls.append("trim")
        trim()

    monkeypatch.setattr(EdgeStore, "optimize", optimizing)
    monkeypatch.setattr(indexing, "give_back_freed_memory", trimming)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("A note about gardens and the weather in spring.")
    report = IndexService(make_ctx()).index(docs, "notes", IndexOptions(embedder="minilm"))
    assert report.docs_indexed == 1
    assert calls[-2:] == ["optimize", "trim"], calls
