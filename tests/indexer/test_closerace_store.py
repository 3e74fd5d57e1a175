"""A closed ``EdgeStore`` opens no shard again: a call of another thread that waited for the
close (a search in flight while its ``Facet`` closed) is refused, and the folder lock is let go
for good. It reopened the shard, its folder lock held by a store nobody would close: the
collection was locked for the rest of the process. Real edge store in a temp folder."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from indexer.store import _LOCKS, EdgeStore, StoreClosedError


def test_an_edge_store_refuses_to_reopen_a_shard_once_closed(tmp_path: Path) -> None:
    """After ``close`` a call opens no shard (nor takes the folder's lock) again: it raises."""
    store = EdgeStore(tmp_path / "edge")
    store.ensure_collection("c", {"v": 2})
    assert store.count("c") == 0
    store.close()
    with pytest.raises(StoreClosedError, match="this Facet is closed"):
        store.count("c")
    again = EdgeStore(tmp_path / "edge")  # the folder's lock was let go
    try:
        assert again.count("c") == 0
    finally:
        again.close()


def test_a_call_in_flight_during_close_does_not_reopen_the_shard(tmp_path: Path) -> None:
    """A thread using the shard when ``close`` starts finishes that call (close waits for it);
    its next call is refused, and once both return no folder lock of the store is held."""
    store = EdgeStore(tmp_path / "edge")
    store.ensure_collection("c", {"v": 2})
    in_call, go_on = threading.Event(), threading.Event()
    outcome: list[object] = []

    def reader() -> None:
        try:
            with store._using("c"):  # a search's first call on the shard, in flight
                in_call.set()
                go_on.wait(30)
            outcome.append(store.count("c"))  # its next call, after the close
        except BaseException as e:  # (asserted below)
            outcome.append(e)

    thread = threading.Thread(target=reader)
    thread.start()
    assert in_call.wait(30)
    closer = threading.Thread(target=store.close)
    closer.start()
    closer.join(0.3)
    assert closer.is_alive()  # it waits for the call in flight
    go_on.set()
    closer.join(30)
    thread.join(30)
    assert len(outcome) == 1 and isinstance(outcome[0], StoreClosedError), outcome
    assert str(store._lock_path("c")) not in _LOCKS._held
    assert not store._shards
    with pytest.raises(StoreClosedError):  # nor is a collection created (its lock taken)
        store.ensure_collection("d", {"v": 2})
    assert str(store._lock_path("d")) not in _LOCKS._held
    again = EdgeStore(tmp_path / "edge")
    try:
        assert again.count("c") == 0
    finally:
        again.close()
