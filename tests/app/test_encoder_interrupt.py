"""Ctrl-C while waiting on ``BatchingQueryEncoder`` stops the work it was waiting for (the real
minilm, a real SIGINT in the main thread).

With a serving facade (``Facet.for_serving()``, ``Facet.shared()``: LangChain's FacetEmbeddings
too), a KeyboardInterrupt during ``facet.embed`` of many texts reached the caller, but the model
thread went on encoding every abandoned piece (about 3 CPU seconds after the interrupt;
``cancelled_texts`` stayed 0): the waiting calls never cancelled what they had queued. Now any
exception while waiting takes that call's pieces not started yet off the queue (counted in
``stats.cancelled_texts``) and stops a loop of pieces, then reaches the caller."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

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


def test_a_request_its_async_caller_cancels_leaves_the_queue_at_once(minilm) -> None:
    """A future cancelled by its holder (asyncio cancels it when an HTTP client goes away) stayed
    queued and counted against ``max_pending_texts`` until the model thread came to it: the next
    query was refused ("64 texts are already waiting to be encoded", a 429) for room no one held."""
    gate = Gated(minilm)
    with serving(gate, max_pending_texts=64) as encoder:
        gate.arm()
        busy = encoder.submit(["hold the model thread"], embedder="gated")
        assert gate.entered.wait(10)
        gone = encoder.submit([f"text {i}" for i in range(64)], embedder="gated", role="document")
        assert encoder.pending_texts == 64
        assert gone.cancel()
        assert encoder.pending_texts == 0 and encoder.stats.cancelled_texts == 64
        query = encoder.submit(["a new query"], embedder="gated")  # not refused
        gate.release()
        assert query.result(timeout=30).shape == (1, 384) and busy.result(timeout=30).shape == (1, 384)


def test_a_request_whose_piece_fails_drops_its_pieces_not_started(minilm) -> None:
    """One piece of a 96-text ``submit`` failed: the caller had its error at once, and the model
    thread went on encoding the other 64 texts for it."""
    class FailsOn:
        def __init__(self) -> None:
            self.calls: list[int] = []

        def encode(self, texts: Any, **kwargs: Any) -> Any:
            self.calls.append(len(texts))
            if any("BAD" in t for t in texts):
                raise ValueError("a text this model refuses")
            return minilm.encode(texts, **kwargs)

        def __getattr__(self, name: str) -> Any:
            return getattr(minilm, name)

    model = FailsOn()
    gate = Gated(model)
    with serving(gate) as encoder:
        gate.arm()
        busy = encoder.submit(["hold the model thread"], embedder="gated")
        assert gate.entered.wait(10)
        texts = ["BAD " + "long " * 20] + [f"t {i}" for i in range(95)]  # the longest: the first piece
        failed = encoder.submit(texts, embedder="gated", role="document")
        model.calls.clear()
        gate.release()
        with pytest.raises(ValueError):
            failed.result(timeout=30)
        busy.result(timeout=30)
        wait_for(lambda: encoder.pending_texts == 0 and encoder.in_flight == 0)
        # The held query's one text, the failing piece (cut in parts, the bad text's part again
        # alone), and at most the piece the model thread had taken by then: a piece not started
        # is dropped, not encoded (every one was: 0 cancelled).
        assert encoder.stats.cancelled_texts >= 32, (model.calls, encoder.stats)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # (the thread's end)
def test_a_model_thread_ended_by_a_plugins_systemexit_is_started_again(minilm) -> None:
    """A plugin's SystemExit reached its caller and ended the model thread: every later request
    waited for ever (the thread was started only once)."""
    class ExitsOn:
        def encode(self, texts: Any, **kwargs: Any) -> Any:
            if "EXIT" in texts:
                raise SystemExit(3)
            return minilm.encode(texts, **kwargs)

        def __getattr__(self, name: str) -> Any:
            return getattr(minilm, name)

    cache = EmbedderCache("cpu")
    cache.put("exits", ExitsOn())  # type: ignore[arg-type]
    encoder = BatchingQueryEncoder(cache, threads=1)
    try:
        with pytest.raises(SystemExit):
            encoder.submit(["EXIT"], embedder="exits").result(timeout=30)
        wait_for(lambda: not encoder.working)
        assert encoder.submit(["after"], embedder="exits").result(timeout=30).shape == (1, 384)
    finally:
        encoder.close()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # (the thread's end)
def test_requests_queued_behind_a_systemexit_are_served_without_another_request(minilm) -> None:
    """The thread a plugin's SystemExit ended was started again only by the next submit: the
    requests already queued behind it waited until one came (for ever where none did)."""
    entered, release = threading.Event(), threading.Event()

    class ExitsOn:
        def encode(self, texts: Any, **kwargs: Any) -> Any:
            if "EXIT" in texts:
                entered.set()
                release.wait(30)
                raise SystemExit(3)
            return minilm.encode(texts, **kwargs)

        def __getattr__(self, name: str) -> Any:
            return getattr(minilm, name)

    cache = EmbedderCache("cpu")
    cache.put("exits", ExitsOn())  # type: ignore[arg-type]
    encoder = BatchingQueryEncoder(cache, threads=1)
    try:
        ended = encoder.submit(["EXIT"], embedder="exits", role="query")
        assert entered.wait(30)
        # Another key (role): a batch of its own, queued behind the one that will end the thread.
        queued = encoder.submit(["after"], embedder="exits", role="document")
        release.set()
        with pytest.raises(SystemExit):
            ended.result(timeout=30)
        assert queued.result(timeout=30).shape == (1, 384)
    finally:
        release.set()
        encoder.close()
