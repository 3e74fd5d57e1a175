"""QdrantClientStore against a server over real HTTP when the server drops connections.

The server is the test stand-in (``tests/worker/qdrant_standin.py``: Qdrant's REST API over
qdrant-client's local mode; no Qdrant binary can run here), in a thread, with a switch that makes
it close the connection of the next N requests without replying: what a reset or a stale
keep-alive connection looks like to the client. qdrant-client and httpx are the real ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import numpy as np
import pytest

from indexer.errors import StoreUnavailableError
from indexer.store import PointRecord, QdrantClientStore, point_id
from tests.worker import qdrant_standin


class _Dropping(qdrant_standin._Handler):
    drop_next: ClassVar[int] = 0  # class-wide: how many of the next requests lose their connection
    seen: ClassVar[list[str]] = []

    def _serve(self) -> None:
        _Dropping.seen.append(f"{self.command} {self.path}")
        if _Dropping.drop_next > 0:
            _Dropping.drop_next -= 1
            self.close_connection = True
            self.connection.close()  # no reply: the client reads a closed connection
            return
        super()._serve()

    do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = _serve


@pytest.fixture()
def server_store() -> Iterator[QdrantClientStore]:
    _Dropping.drop_next = 0
    _Dropping.seen.clear()
    with qdrant_standin.in_process(_Dropping) as url:
        store = QdrantClientStore(url=url)
        try:
            yield store
        finally:
            store.close()


def _fill(store: QdrantClientStore, collection: str) -> np.ndarray:
    vecs = np.eye(4, dtype=np.float32)
    store.ensure_collection(collection, {"m": 4})
    store.upsert(collection, [PointRecord(point_id("d", i), {"m": vecs[i]}, {"doc_id": "d", "chunk_no": i})
                              for i in range(4)])
    return vecs


def test_a_read_that_loses_its_connection_is_sent_once_more(server_store) -> None:
    vecs = _fill(server_store, "dropped_reads")
    _Dropping.seen.clear()
    server_store.search("dropped_reads", "m", vecs[2], limit=1)
    undisturbed = list(_Dropping.seen)  # a search's requests (its vector check, then the query)
    _Dropping.seen.clear()
    _Dropping.drop_next = 1
    hits = server_store.search("dropped_reads", "m", vecs[2], limit=1)
    assert [h.payload["chunk_no"] for h in hits] == [2]
    assert _Dropping.seen == undisturbed[:1] + undisturbed  # the dropped request, sent again, then the rest
    _Dropping.drop_next = 1
    assert server_store.count("dropped_reads") == 4


def test_a_read_dropped_twice_and_a_dropped_write_are_unavailable_errors(server_store) -> None:
    vecs = _fill(server_store, "dropped_twice")
    _Dropping.seen.clear()
    _Dropping.drop_next = 2
    with pytest.raises(StoreUnavailableError, match=r"cannot reach Qdrant at http://127\.0\.0\.1"):
        server_store.search("dropped_twice", "m", vecs[0], limit=1)
    assert len(_Dropping.seen) == 2  # one retry, not a loop
    _Dropping.seen.clear()
    _Dropping.drop_next = 1
    with pytest.raises(StoreUnavailableError):  # writes are not resent by the store
        server_store.upsert("dropped_twice", [PointRecord(point_id("e", 0), {"m": vecs[0]}, {"doc_id": "e"})])
    assert len(_Dropping.seen) == 1
    assert server_store.count("dropped_twice") == 4  # and the dropped write was never applied


def test_term_vectors_of_a_collection_another_client_recreated_are_seen_within_the_ttl(server_store) -> None:
    """``has_lexical`` is cached (auto mode asks on every search), but only for ``LEXICAL_TTL_S``:
    a collection another process dropped and created again, with or without term vectors, reads
    right after that (it used to be cached until the process ended: auto mode then searched a
    re-created collection dense only, or asked for term vectors that were gone)."""
    other = QdrantClientStore(url=server_store.url)
    now = [1000.0]
    server_store._clock = lambda: now[0]  # type: ignore[method-assign]
    try:
        other.ensure_collection("c", {"m": 4})
        assert server_store.has_lexical("c") is False
        other.drop_collection("c")
        other.ensure_collection("c", {"m": 4}, lexical=True)
        now[0] += server_store.LEXICAL_TTL_S / 2
        assert server_store.has_lexical("c") is False  # within the ttl: the cached answer
        now[0] += server_store.LEXICAL_TTL_S
        assert server_store.has_lexical("c") is True
        other.drop_collection("c")
        other.ensure_collection("c", {"m": 4})
        now[0] += server_store.LEXICAL_TTL_S
        assert server_store.has_lexical("c") is False
    finally:
        other.close()
