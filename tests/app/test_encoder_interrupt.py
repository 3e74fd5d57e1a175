"""Ctrl-C while waiting on ``BatchingQueryEncoder`` stops the work it was waiting for (the real
minilm, a real SIGINT in the main thread).

With a serving facade (``Facet.for_serving()``, ``Facet.shared()``: LangChain's FacetEmbeddings
too), a KeyboardInterrupt during ``facet.embed`` of many texts reached the caller, but the model
thread went on encoding every abandoned piece (about 3 CPU seconds after the interrupt;
``cancelled_texts`` stayed 0): the waiting calls never cancelled what they had queued. Now any
exception while waiting takes that call's pieces not started yet off the queue (counted in
``stats.cancelled_texts``) and stops a loop of pieces, then reaches the caller."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from app.core import Facet
from app.encoding import BatchingQueryEncoder, EmbedderCache
from app.settings import FacetSettings
from tests.app.gated import Gated, hold, serving, wait_for

WORDS = ["card", "declined", "top", "up", "fee", "exchange", "rate", "transfer", "pending"]
# 20 pieces of 32 texts of about 60 words: seconds of work for one model thread.
MANY = [f"{i} " + " ".join(WORDS[(i + j) % len(WORDS)] for j in range(60)) for i in range(640)]
SHORT = [f"{i} {WORDS[i % len(WORDS)]}" for i in range(96)]  # three pieces of 32


def test_ctrl_c_during_a_serving_facades_embed_stops_the_model_thread(tmp_path, minilm,
                                                                      ctrl_c) -> None:
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facet = Facet.for_serving(FacetSettings(data_dir=tmp_path / "data"), embedders=cache)
    try:
        encoder = facet.encoder
        assert isinstance(encoder, BatchingQueryEncoder)
        ctrl_c(lambda: encoder.in_flight > 0)  # the model thread is in the first piece
        with pytest.raises(KeyboardInterrupt):
            facet.embed(MANY, embedder="minilm")
        # The piece in hand is finished; the rest were dropped, not encoded.
        wait_for(lambda: encoder.in_flight == 0 and encoder.pending_texts == 0, timeout=20)
        stats = encoder.stats
        assert stats.cancelled_texts > 0, stats
        assert stats.texts + stats.cancelled_texts == len(MANY), stats
        assert stats.texts < len(MANY) // 2, stats
        time.sleep(0.3)  # and it stays idle
        assert encoder.in_flight == 0 and encoder.stats.texts == stats.texts
        assert facet.embed(["still works"], embedder="minilm").vectors.shape == (1, minilm.dim)
    finally:
        facet.close()


@pytest.fixture
def gated_encoder(gated) -> Iterator[tuple[BatchingQueryEncoder, Gated]]:
    with serving(gated, batch_size=32) as encoder:
        yield encoder, gated


@pytest.mark.parametrize("bulk", [False, True])
def test_ctrl_c_drops_the_queued_pieces_and_stops_a_bulk_loop(gated_encoder, ctrl_c,
                                                              bulk) -> None:
    """The model thread held in a query, the call's first pieces wait in the queue: the
    interrupt takes them off at once (``bulk=False``: all three pieces of a large request;
    ``bulk=True``: the one piece queued, and the loop queues no more)."""
    encoder, gated = gated_encoder
    held = hold(encoder, gated)
    queued = len(SHORT) if not bulk else 32
    ctrl_c(lambda: encoder.pending_texts == queued)
    with pytest.raises(KeyboardInterrupt):
        encoder.encode(SHORT, embedder="gated", role="document", bulk=bulk)
    assert encoder.pending_texts == 0  # withdrawn before the model thread was free
    assert encoder.stats.cancelled_texts == queued
    gated.release()
    assert held.result(timeout=30).shape == (1, 384)
    time.sleep(0.3)
    assert encoder.pending_texts == 0 and encoder.in_flight == 0
    assert encoder.stats.texts == 1  # the held query only
    assert encoder.encode(["still works"], embedder="gated").shape == (1, 384)


def test_ctrl_c_while_a_bulk_piece_waits_for_room_queues_nothing(minilm, ctrl_c) -> None:
    gated = Gated(minilm)
    cache = EmbedderCache("cpu")
    cache.put("gated", gated)  # type: ignore[arg-type]
    encoder = BatchingQueryEncoder(cache, threads=1, batch_size=4, max_pending_texts=4)
    try:
        held = hold(encoder, gated)
        full = encoder.submit(["a", "b", "c", "d"], embedder="gated")
        ctrl_c(lambda: True)
        with pytest.raises(KeyboardInterrupt):
            encoder.encode(SHORT[:8], embedder="gated", role="document", bulk=True)
        assert encoder.pending_texts == 4
        gated.release()
        assert held.result(timeout=30).shape[0] == 1 and full.result(timeout=30).shape[0] == 4
        time.sleep(0.3)
        assert encoder.stats.texts == 5 and encoder.pending_texts == 0
    finally:
        gated.release()
        encoder.close()
