"""A long-running process keeps a bounded number of edge shards open.

Every collection a `facet serve` searched stayed open for its life: 8 search threads, 2 files and
~37 MB resident each (30 collections: 748 MB -> 1,872 MB, 20 -> 258 threads). The least recently
used shards beyond ``MAX_OPEN_SHARDS`` are closed, their folder locks let go, and reopened on use.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from indexer.store import _LOCKS, MAX_OPEN_SHARDS, SEARCH_THREADS, EdgeStore, PointRecord, point_id

DIM = 8
N = MAX_OPEN_SHARDS + 4


def _fill(store: EdgeStore, n: int) -> list[np.ndarray]:
    """``n`` tiny collections c0.. of 5 points each, released as an index job's end does."""
    rng = np.random.default_rng(0)
    queries = []
    for c in range(n):
        vecs = rng.normal(size=(5, DIM)).astype(np.float32)
        store.ensure_collection(f"c{c}", {"m": DIM})
        store.upsert(
            f"c{c}", [PointRecord(point_id(f"d{c}", i), {"m": vecs[i]}, {"doc_id": f"d{c}", "n": i}) for i in range(5)]
        )
        store.release(f"c{c}")
        queries.append(vecs[0])
    return queries


def _free_for_another_process(lock: Path) -> bool:
    """Whether another process can take ``lock`` now (as a CLI search or a job would)."""
    code = "import fcntl, os, sys; fcntl.flock(os.open(sys.argv[1], os.O_RDWR), fcntl.LOCK_EX | fcntl.LOCK_NB)"
    return subprocess.run([sys.executable, "-c", code, str(lock)], capture_output=True).returncode == 0


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))  # the engine's native threads too


def test_least_recently_used_shards_are_closed_and_reopened(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path / "edge")
    try:
        queries = _fill(store, N)
        before = {}
        for c in range(N):
            before[c] = store.search(f"c{c}", "m", queries[c], limit=3)
            assert len(store._shards) <= MAX_OPEN_SHARDS, sorted(store._shards)
        evicted = [f"c{c}" for c in range(N - MAX_OPEN_SHARDS)]
        assert sorted(store._shards) == sorted(f"c{c}" for c in range(N - MAX_OPEN_SHARDS, N))
        for name in evicted:
            lock = store._lock_path(name)
            assert str(lock) not in _LOCKS._held and _free_for_another_process(lock), name
        assert not _free_for_another_process(store._lock_path(f"c{N - 1}"))  # still open: held
        # Reopened transparently, the same hits; the least recent one closed for it.
        again = store.search("c0", "m", queries[0], limit=3)
        assert [(h.id, round(h.score, 5), h.payload) for h in again] == [
            (h.id, round(h.score, 5), h.payload) for h in before[0]
        ]
        assert store.is_open("c0") and not store.is_open(f"c{N - MAX_OPEN_SHARDS}")
        assert len(store._shards) == MAX_OPEN_SHARDS
    finally:
        store.close()
    assert not any(str(store._lock_path(f"c{c}")) in _LOCKS._held for c in range(N))


def test_shards_held_or_in_use_are_never_closed(tmp_path: Path) -> None:
    """A writer's collection (``hold``: kept until ``release``) and a shard another thread is
    calling into now stay open, however many others are opened meanwhile."""
    store = EdgeStore(tmp_path / "edge")
    try:
        queries = _fill(store, N)
        store.hold("c0")
        with store._using("c1") as in_use:  # a search in flight on c1
            for c in range(2, N):
                store.search(f"c{c}", "m", queries[c], limit=1)
            assert store._shards.get("c1") is in_use and store.is_open("c0")
            request = store._q.SearchRequest(query=store._q.Query.Nearest(queries[1].tolist(), using="m"), limit=1)
            assert len(in_use.search(request)) == 1
        assert len(store._shards) <= MAX_OPEN_SHARDS + 1  # c1 over the cap until the next open
        store.search("c2", "m", queries[2], limit=1)
        assert store.is_open("c0") and len(store._shards) <= MAX_OPEN_SHARDS
        assert not _free_for_another_process(store._lock_path("c0"))
        store.release("c0")
        assert _free_for_another_process(store._lock_path("c0"))
    finally:
        store.close()


def test_threads_stay_bounded_however_many_collections_are_searched(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path / "edge")
    try:
        queries = _fill(store, N)
        time.sleep(0.5)  # the released shards' pools end shortly after their close
        start = _threads()
        for c in range(N):
            store.search(f"c{c}", "m", queries[c], limit=1)
        bound = MAX_OPEN_SHARDS * SEARCH_THREADS + 4
        deadline = time.monotonic() + 5
        while _threads() - start > bound and time.monotonic() < deadline:
            time.sleep(0.1)  # closed shards' threads exit on their own time
        assert _threads() - start <= bound, (start, _threads())
    finally:
        store.close()


def test_a_vector_added_while_the_shard_was_closed_is_seen_on_reopen(tmp_path: Path) -> None:
    """Once a store closes a shard, another writer may add an embedder's vector to it (a CLI job
    beside a server that has not used the collection lately); the store's cached vector names
    were kept, so reopening missed the new vector ("no vector 'm2'")."""
    store = EdgeStore(tmp_path / "edge")
    other = EdgeStore(tmp_path / "edge")
    try:
        store.max_open_shards = 1
        queries = _fill(store, 2)
        store.search("c0", "m", queries[0], limit=1)
        store.search("c1", "m", queries[1], limit=1)  # c0 closed for it
        assert not store.is_open("c0")
        other.ensure_collection("c0", {"m": DIM, "m2": DIM})
        vec = np.ones(DIM, dtype=np.float32)
        other.upsert("c0", [PointRecord(point_id("new", 0), {"m": vec, "m2": vec}, {"doc_id": "new", "n": 0})])
        other.release("c0")
        assert store.vector_sizes("c0") == {"m": DIM, "m2": DIM}
        assert [h.payload["doc_id"] for h in store.search("c0", "m2", vec, limit=1)] == ["new"]
    finally:
        other.close()
        store.close()


def test_vector_names_read_while_closed_are_not_kept(tmp_path: Path) -> None:
    """Read while the shard is not open here (a listing, a search's vector check before it
    opens), the vector names are not cached: another process may add one before this store
    opens the shard."""
    store = EdgeStore(tmp_path / "edge")
    other = EdgeStore(tmp_path / "edge")
    try:
        _fill(store, 1)
        assert not store.is_open("c0") and store.vector_sizes("c0") == {"m": DIM}
        other.ensure_collection("c0", {"m": DIM, "m2": DIM})
        other.release("c0")
        assert store.vector_sizes("c0") == {"m": DIM, "m2": DIM}
    finally:
        other.close()
        store.close()
