"""Clients' requests are measured against ``max_pending_texts`` by the texts clients queued,
not the server's own bulk work waiting in the queue (the real minilm, a gated model thread).

With ``FACET_MAX_PENDING_TEXTS=8`` and an index job running, 154 single searches were refused
(429 "32 texts are already waiting to be encoded; the 1 of this request would pass the limit of
8"): the 32 waiting texts were the job's own piece. That piece still waits for room counting
everything, and a client's request of more than ``batch_size`` texts (queued as bulk pieces)
still counts against clients; the counters come back to 0 however the texts leave the queue
(encoded, withdrawn by an interrupt, cancelled by a client that went away)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from app.encoding import BatchingQueryEncoder
from app.errors import BusyError
from tests.app.gated import Gated, hold, serving, wait_for

WORDS = ["card", "declined", "top", "up", "fee", "exchange", "rate", "transfer", "pending"]
DOCS = [f"{i} " + " ".join(WORDS[(i + j) % len(WORDS)] for j in range(i % 9 + 1)) for i in range(32)]
LIMIT = 8
BATCH = 32


@pytest.fixture
def encoder(gated) -> Iterator[BatchingQueryEncoder]:
    with serving(gated, max_pending_texts=LIMIT, batch_size=BATCH, bulk_piece_ms=None) as encoder:
        yield encoder


def _own(encoder: BatchingQueryEncoder) -> int:
    with encoder._cond:
        return encoder._own_pending


@contextlib.contextmanager
def _opened_at_the_end(gated: Gated) -> Iterator[None]:
    """The gate released however the block ends (a failure does not wait out the gate)."""
    try:
        yield
    finally:
        gated.release()


def _settled(encoder: BatchingQueryEncoder) -> None:
    wait_for(lambda: encoder.pending_texts == 0 and encoder.in_flight == 0)
    assert _own(encoder) == 0


def test_a_search_is_not_refused_for_the_servers_own_waiting_piece(encoder, gated,
                                                                   minilm) -> None:
    held = hold(encoder, gated)
    with ThreadPoolExecutor(1) as pool, _opened_at_the_end(gated):
        job = pool.submit(encoder.encode, DOCS, embedder="gated", role="document", bulk=True)
        wait_for(lambda: encoder.pending_texts == BATCH)  # the job's piece waits, 4x the limit
        one = encoder.submit(["which card fee"], embedder="gated")  # was BusyError: 32 waiting
        assert _own(encoder) == BATCH
        # Clients' texts still count: 1 waits, 8 more would pass the limit.
        with pytest.raises(BusyError) as refused:
            encoder.submit(["a"] * LIMIT, embedder="gated")
        assert str(refused.value).startswith("1 text is already waiting to be encoded; the 8 ")
        seven = encoder.submit([f"q{i}" for i in range(LIMIT - 1)], embedder="gated")
        with pytest.raises(BusyError) as refused:
            encoder.submit(["b"], embedder="gated")
        assert str(refused.value).startswith(
            f"{LIMIT} texts are already waiting to be encoded; the 1 of this request would pass "
            f"the limit of {LIMIT}"), str(refused.value)
        assert encoder.pending_texts == BATCH + LIMIT and _own(encoder) == BATCH
        assert encoder.stats.busy_refusals == 2

        gated.release()
        vectors = job.result(timeout=30)
    np.testing.assert_allclose(vectors, minilm.encode(DOCS, role="document", batch_size=BATCH),
                               atol=1e-5)
    assert held.result(timeout=30).shape == (1, 384)
    assert one.result(timeout=30).shape == (1, 384) and seven.result(timeout=30).shape == (7, 384)
    _settled(encoder)


def test_a_clients_large_request_counts_and_cancelled_pieces_leave_no_count(encoder,
                                                                            gated) -> None:
    """A client's request of more than ``batch_size`` texts is queued as bulk pieces: they count
    against clients (they are not the server's own); cancelled, they leave no count behind."""
    held = hold(encoder, gated)
    with ThreadPoolExecutor(1) as pool, _opened_at_the_end(gated):
        job = pool.submit(encoder.encode, DOCS, embedder="gated", role="document", bulk=True)
        wait_for(lambda: encoder.pending_texts == BATCH)
        large = encoder.submit(DOCS + DOCS[:8], embedder="gated", role="document")  # 2 pieces
        assert encoder.pending_texts == 2 * BATCH + 8 and _own(encoder) == BATCH
        with pytest.raises(BusyError, match=r"^40 texts are already waiting to be encoded; "):
            encoder.submit(["x"], embedder="gated")
        assert large.cancel()  # the client went away: its pieces drop
        gated.release()
        assert job.result(timeout=30).shape == (BATCH, 384)
    assert held.result(timeout=30).shape == (1, 384)
    _settled(encoder)
    assert encoder.stats.cancelled_texts == 40
    assert encoder.submit(["x"], embedder="gated").result(timeout=30).shape == (1, 384)
    _settled(encoder)


def test_the_servers_own_piece_withdrawn_by_an_interrupt_leaves_no_count(encoder, gated,
                                                                         ctrl_c) -> None:
    held = hold(encoder, gated)
    ctrl_c(lambda: encoder.pending_texts == BATCH)
    with pytest.raises(KeyboardInterrupt):
        encoder.encode(DOCS + DOCS, embedder="gated", role="document", bulk=True)
    assert encoder.pending_texts == 0 and _own(encoder) == 0  # withdrawn at once
    # Its count gone too: clients have the whole limit again.
    eight = encoder.submit([f"q{i}" for i in range(LIMIT)], embedder="gated")
    with pytest.raises(BusyError, match=r"^8 texts are already waiting"):
        encoder.submit(["b"], embedder="gated")
    gated.release()
    assert held.result(timeout=30).shape == (1, 384) and eight.result(timeout=30).shape == (8, 384)
    _settled(encoder)
    assert encoder.stats.cancelled_texts == BATCH


def test_the_servers_own_work_items_do_not_count_against_clients(encoder, gated, minilm) -> None:
    """Bulk work items (a clustering's blend of stored vectors, its explanations' answers) are
    the server's own too: a search waiting behind one was refused for its texts."""
    held = hold(encoder, gated)
    plain = minilm.encode(DOCS[:LIMIT * 2], role="document")
    with ThreadPoolExecutor(1) as pool, _opened_at_the_end(gated):
        blend = pool.submit(encoder.encode_from_plain, plain, DOCS[:LIMIT * 2], embedder="gated",
                            role="document", instruction="Find fees", bulk=True)
        wait_for(lambda: encoder.pending_texts == LIMIT * 2)
        one = encoder.submit(["which card fee"], embedder="gated")  # was BusyError: 16 waiting
        assert _own(encoder) == LIMIT * 2
        gated.release()
        assert held.result(timeout=30).shape == (1, 384)
        assert one.result(timeout=30).shape == (1, 384)
        assert blend.result(timeout=60).shape == (LIMIT * 2, 384)
    _settled(encoder)
