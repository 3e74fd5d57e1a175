"""QdrantClientStore against a server that is gone: a refused request is not sent again, and the
reach check remembers a success for a few seconds only, a failure never.

A read whose connection was refused was logged as "Qdrant at URL dropped a collection_exists
request (ConnectError: ... Connection refused); sending it again" and sent again, to be refused
again: only a connection reset or closed without a reply is worth a second request
(docs/deploy.md). The server is the tests' stand-in (``tests/worker/qdrant_standin.py``).
"""

from __future__ import annotations

import logging
import socket

import pytest

from indexer import store as store_module
from indexer.errors import StoreUnavailableError
from indexer.store import QdrantClientStore
from tests.worker import qdrant_standin


class _OneShot(qdrant_standin._Handler):
    protocol_version = "HTTP/1.0"  # a connection per request: none kept open for the next one


def test_a_refused_read_is_not_sent_again(caplog) -> None:
    with qdrant_standin.in_process(_OneShot) as url:
        store = QdrantClientStore(url=url)
        store.ensure_collection("c", {"m": 4})
    # Gone within the seconds its last answer is trusted for: the request meets the refusal.
    try:
        caplog.set_level(logging.WARNING, logger="indexer.store")
        with pytest.raises(StoreUnavailableError, match=r"cannot reach Qdrant at .*: ConnectError: .*refused"):
            store.count("c")
    finally:
        store.close()
    sent_again = [r for r in caplog.records if "sending it again" in r.getMessage()]
    assert sent_again == []


def test_a_success_is_trusted_for_seconds_a_failure_never() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        store = QdrantClientStore(url=f"http://127.0.0.1:{server.getsockname()[1]}")
        now = [1000.0]
        store._clock = lambda: now[0]  # type: ignore[method-assign]
        try:
            with pytest.raises(StoreUnavailableError, match="ConnectionRefusedError"):
                store.check_reachable()
            server.listen(8)
            store.check_reachable()  # the failure was not remembered: connected again
            server.close()
            now[0] += store_module.REACH_TTL_S / 2
            store.check_reachable()  # within the ttl: not connected again
            now[0] += store_module.REACH_TTL_S
            with pytest.raises(StoreUnavailableError, match="ConnectionRefusedError"):
                store.check_reachable()
        finally:
            store.close()
