"""Bulk work is not starved by queries that never stop (``BatchingQueryEncoder``, the real
minilm).

Queries always went before bulk work, so under constant query load (three clients sending
4-text queries back to back, limit 8) a queued bulk piece sat for more than 30 s and an index
job stalled. A bulk request passed over by queries for ``bulk_max_delay_ms`` now goes before
newer queries, one piece (or timed part) at a time; queries still go first otherwise
(tests/app/test_encoding.py, test_query_wait.py)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor, TimeoutError

import numpy as np
import pytest

from app.encoding import BULK_PIECE_MS, BatchingQueryEncoder
from app.errors import BusyError

WORDS = ["card", "declined", "top", "up", "fee", "exchange", "rate", "transfer", "pending"]
DOCS = [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(i * 7 % 12 + 1)) for i in range(40)]
QUERY = ["card declined", "top up failed", "exchange rate", "transfer pending"]
LIMIT = 8
DELAY_MS = 100.0
BOUND_S = 15.0  # the old code: still waiting then


@pytest.mark.parametrize("bulk_piece_ms", [None, 1e-6])  # whole pieces, or timed parts of one text
def test_a_bulk_encode_finishes_under_queries_sent_back_to_back(cache, minilm,
                                                                bulk_piece_ms) -> None:
    encoder = BatchingQueryEncoder(cache, threads=1, max_pending_texts=LIMIT, batch_size=4,
                                   bulk_piece_ms=bulk_piece_ms, bulk_max_delay_ms=DELAY_MS)
    docs = DOCS if bulk_piece_ms is None else DOCS[:20]  # (one text a part: fewer parts)
    want = minilm.encode(docs, role="document", batch_size=4)
    stop = threading.Event()
    answered = [0]
    lock = threading.Lock()

    def client() -> None:
        """A client sending a 4-text query as soon as the last one is answered (or refused)."""
        while not stop.is_set():
            try:
                encoder.encode(QUERY, embedder="minilm", role="query")
            except BusyError:
                time.sleep(0.001)
                continue
            with lock:
                answered[0] += 1

    try:
        with ThreadPoolExecutor(4) as pool:
            clients = [pool.submit(client) for _ in range(3)]
            # The queries are running back to back before the bulk work comes.
            deadline = time.monotonic() + 30
            while answered[0] < 20:
                assert time.monotonic() < deadline
                time.sleep(0.01)
            t0 = time.monotonic()
            bulk = pool.submit(encoder.encode, docs, embedder="minilm", role="document",
                               bulk=True)
            try:
                got = bulk.result(timeout=BOUND_S)
            except TimeoutError:
                pytest.fail(f"the bulk encode of {len(docs)} texts was not done after {BOUND_S} s "
                            f"of constant queries ({answered[0]} answered): starved")
            finally:
                during = answered[0]
                stop.set()
                for future in clients:
                    future.result(timeout=60)
                bulk.result(timeout=120)  # (the old code: finishes once the queries stop)
            elapsed = time.monotonic() - t0
    finally:
        stop.set()
        encoder.close()
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert elapsed < BOUND_S
    assert during > 20  # queries were served all along


def test_the_default_bound_and_its_checks(cache) -> None:
    """By default a bulk request waits behind queries for at most four timed parts of bulk
    work, and at least a second."""
    assert BatchingQueryEncoder(cache).bulk_max_delay_s == pytest.approx(4 * BULK_PIECE_MS / 1000)
    assert BatchingQueryEncoder(cache, bulk_piece_ms=100).bulk_max_delay_s == 1.0
    assert BatchingQueryEncoder(cache, bulk_piece_ms=None).bulk_max_delay_s == 1.0
    assert BatchingQueryEncoder(cache, bulk_max_delay_ms=250).bulk_max_delay_s == 0.25
    with pytest.raises(ValueError, match="bulk_max_delay_ms"):
        BatchingQueryEncoder(cache, bulk_max_delay_ms=0)
