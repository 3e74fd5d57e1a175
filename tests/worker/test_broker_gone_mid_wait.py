"""A query waiting on the workers when the broker goes away is told so, in one line.

With ``FACET_ENCODE_ON_WORKERS`` a search sends its encode to the workers and waits; Redis
stopped meanwhile made `facet search` print an 80-frame traceback (exit 1) and ``POST /search``
answer 500: the result's ``forget()`` in a ``finally`` talked to the gone Redis and its
ConnectionError replaced the error being handled (itself "the worker failed: RuntimeError:
Retry limit exceeded", blaming a worker). A real redis-server of the test's own, stopped while
the call waits (no worker runs, so it would wait for one)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.worker.conftest import own_redis


def test_a_broker_gone_while_a_query_waits_is_said_as_such(tmp_path) -> None:
    from app.errors import UnavailableError
    from app.remote import CeleryQueryEncoder
    from app.settings import FacetSettings

    server = own_redis(tmp_path)
    settings = FacetSettings(data_dir=tmp_path / "data", broker_url=server.url(0),
                             encode_on_workers=True, worker_timeout_s=60.0, broker_timeout_s=1.0)
    encoder = CeleryQueryEncoder(settings)
    try:
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(encoder.encode, ["card fraud"], embedder="minilm")
            time.sleep(2.0)  # sent; no worker takes it, so the call waits for one
            assert not waiting.done()
            server.stop()
            t0 = time.monotonic()
            with pytest.raises(UnavailableError) as refused:
                waiting.result(timeout=120)
            took = time.monotonic() - t0
    finally:
        server.stop()
        encoder.close()
    message = str(refused.value)
    assert message.startswith(f"cannot reach the broker at {server.url(0)}"), message
    assert "set FACET_ENCODE_ON_WORKERS=false to encode in this process" in message, message
    assert "\n" not in message
    assert took < 60, took  # said when the broker went, not after the worker timeout
