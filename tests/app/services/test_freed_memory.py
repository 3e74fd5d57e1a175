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
