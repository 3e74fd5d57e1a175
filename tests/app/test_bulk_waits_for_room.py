"""The server's own bulk work waits for room in ``BatchingQueryEncoder``'s queue; callers'
requests over ``max_pending_texts`` are still refused (the real minilm).

Under ``facet serve`` an index job encodes through the server's encoder (``encode(...,
bulk=True)``); its pieces were refused like a client's flood (``BusyError``), so searches that
filled the queue failed the whole job ("10 texts are already waiting to be encoded (limit 40,
...)"). The model thread is held inside a query (a gate, not a sleep) so the queue is full at a
known moment."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pytest

from app.encoding import BatchingQueryEncoder
from app.errors import BusyError, FacetError
from tests.app.gated import Gated, hold, serving

WORDS = ["card", "declined", "top", "up", "fee", "exchange", "rate", "transfer", "pending"]
DOCS = [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(i * 7 % 12 + 1)) for i in range(40)]
LIMIT = 8
BATCH = 4


@pytest.fixture
def encoder(gated) -> Iterator[BatchingQueryEncoder]:
    with serving(gated, max_pending_texts=LIMIT, batch_size=BATCH, bulk_piece_ms=None) as encoder:
        yield encoder


def _full_queue(encoder: BatchingQueryEncoder, gated: Gated) -> list[Future[np.ndarray]]:
    """Hold the model thread inside a query, then queue ``LIMIT`` query texts behind it."""
    held = hold(encoder, gated)
    queued = [encoder.submit(["q1", "q2", "q3", "q4"], embedder="gated"),
              encoder.submit(["q5", "q6", "q7", "q8"], embedder="gated")]
    assert encoder.pending_texts == LIMIT
    return [held, *queued]


def test_a_bulk_encode_waits_for_room_while_queries_fill_the_queue(encoder, gated, minilm) -> None:
    want = minilm.encode(DOCS, role="document", batch_size=BATCH)
    queries = _full_queue(encoder, gated)
    stop = threading.Event()
    answered, refused = [0], [0]

    def search() -> None:
        """A client filling the queue with queries until refused, then waiting for their
        answers, round after round (as bursts of concurrent searches do; a client that never
        lets the queue empty holds bulk work back by design: queries go first)."""
        while not stop.is_set():
            burst: list[Future[np.ndarray]] = []
            try:
                while True:
                    burst.append(encoder.submit(["q1", "q2", "q3", "q4"], embedder="gated"))
            except BusyError:
                refused[0] += 1
            for future in burst:
                future.result(timeout=30)
            answered[0] += len(burst)

    with ThreadPoolExecutor(4) as pool:
        bulk = pool.submit(encoder.encode, DOCS, embedder="gated", role="document", bulk=True)
        time.sleep(0.2)
        # The queue is full: the first piece waits (it was refused: BusyError).
        assert not bulk.done(), bulk.exception()
        clients = [pool.submit(search)]
        gated.release()
        try:
            got = bulk.result(timeout=30)
        finally:
            stop.set()
            for client in clients:
                client.result(timeout=30)
    assert got.shape == (len(DOCS), minilm.dim)
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert answered[0] > 0 and refused[0] > 0
    for future in queries:
        assert future.result(timeout=30).shape[1] == minilm.dim


def test_a_callers_request_over_the_limit_is_still_refused(encoder, gated) -> None:
    queued = _full_queue(encoder, gated)
    with pytest.raises(BusyError, match=r"^8 texts are already waiting to be encoded; the 2 of "
                                        r"this request would pass the limit of 8 "
                                        r"\(FACET_MAX_PENDING_TEXTS\); retry in about \d+ "
                                        r"seconds?") as refused:
        encoder.submit(["c", "d"], embedder="gated")
    # The wait it says is the one its Retry-After says (it said "retry shortly" beside 23 s).
    said = int(str(refused.value).split("retry in about ")[1].split()[0])
    assert said == max(1, round(refused.value.retry_after_s))
    with pytest.raises(BusyError, match="the 6 of this request would pass the limit of 8"):
        encoder.encode(DOCS[:6], embedder="gated")  # not bulk: a caller's (POST /v1/embeddings)
    assert encoder.stats.busy_refusals == 2
    gated.release()
    assert [f.result(timeout=30).shape[0] for f in queued] == [1, 4, 4]
    # A request larger than the whole limit still goes into an empty queue.
    assert encoder.submit(DOCS[:LIMIT + 2], embedder="gated").result(timeout=30).shape[0] == 10


def test_closing_fails_a_bulk_caller_waiting_for_room(encoder, gated) -> None:
    queued = _full_queue(encoder, gated)
    with ThreadPoolExecutor(2) as pool:
        bulk = pool.submit(encoder.encode, DOCS[:8], embedder="gated", role="document", bulk=True)
        time.sleep(0.2)
        assert not bulk.done(), bulk.exception()
        closing = pool.submit(encoder.close)  # joins the model thread: held until released
        t0 = time.monotonic()
        error = bulk.exception(timeout=5)
        assert time.monotonic() - t0 < 5
        assert isinstance(error, FacetError) and "the query encoder is closed" in str(error), error
        assert not closing.done()  # the bulk caller did not wait for the model thread
        gated.release()
        closing.result(timeout=30)
    # What was queued before the close is finished.
    assert [f.result(timeout=5).shape[0] for f in queued] == [1, 4, 4]
