"""How long a query waits behind bulk work in ``BatchingQueryEncoder`` (the real minilm).

A piece of bulk work was ``batch_size`` (32) chunk-length texts, 6.6 s on the 2-core CPU under an
instruction, and a search that came meanwhile waited for all of it (p50 6.4 s during a
``/cluster``). The model thread now cuts bulk work into pieces of about ``bulk_piece_ms``, timed
from the pieces before, and serves waiting queries between them. Sizes are asserted with a
target far below or far above any machine's time per text, never on timings."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from app.encoding import BatchingQueryEncoder, EmbedderCache
from embedders.contract import Role

WORDS = ["card", "declined", "top", "up", "fee", "exchange", "rate", "transfer", "pending"]
# 40 texts of 1 to 20 words: more than one piece of 32, lengths that tie and differ.
DOCS = [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(i * 7 % 20 + 1)) for i in range(40)]
TINY_MS = 1e-6  # any measured time per text is more: pieces of one text
HUGE_MS = 1e9  # any measured time per text is less: pieces of ``batch_size``


class Recording:
    """The real minilm, recording the role and size of each call; ``hold()`` makes the next
    document call wait until ``release()`` (the model thread is then inside a bulk piece)."""

    def __init__(self, model) -> None:
        self.model = model
        self.calls: list[tuple[Role, int]] = []
        self.entered = threading.Event()
        self._gate: threading.Event | None = None
        self._held = threading.Event()

    def hold(self) -> None:
        self.entered.clear()
        self._held = self._gate = threading.Event()

    def release(self) -> None:
        self._held.set()

    def encode(self, texts, **kwargs):
        role = Role.parse(kwargs.get("role", Role.DOCUMENT))
        self.calls.append((role, len(texts)))
        gate = self._gate
        if gate is not None and role is Role.DOCUMENT:
            self._gate = None
            self.entered.set()
            assert gate.wait(timeout=60)
        return self.model.encode(texts, **kwargs)

    def __getattr__(self, name):
        return getattr(self.model, name)


@pytest.fixture
def spy(minilm) -> Recording:
    return Recording(minilm)


@pytest.fixture
def cache(minilm, spy) -> EmbedderCache:
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    cache.put("spy", spy)  # type: ignore[arg-type]
    return cache


def encoder_with(cache: EmbedderCache, bulk_piece_ms: float | None) -> BatchingQueryEncoder:
    return BatchingQueryEncoder(cache, threads=1, max_batch_texts=64, bulk_piece_ms=bulk_piece_ms)


def test_bulk_pieces_shrink_to_the_target_once_the_model_is_timed(cache, spy) -> None:
    small = encoder_with(cache, TINY_MS)
    try:
        small.encode(DOCS[:8], embedder="spy", role="document", bulk=True)
        assert spy.calls == [(Role.DOCUMENT, 8)]  # nothing timed yet: the piece as queued
        spy.calls.clear()
        small.encode(DOCS, embedder="spy", role="document", bulk=True)
        assert spy.calls == [(Role.DOCUMENT, 1)] * len(DOCS)  # timed: what fits the target
        spy.calls.clear()
        # A key not timed yet (a new clustering instruction) starts from the embedder's rate.
        small.encode(DOCS[:8], embedder="spy", role="document", instruction="Topic", bulk=True)
        assert spy.calls == [(Role.DOCUMENT, 1)] * 8
        # Queries are never cut: one batch, as before.
        spy.calls.clear()
        assert small.encode(DOCS[:8], embedder="spy", role="query").shape == (8, 384)
        assert spy.calls == [(Role.QUERY, 8)]
    finally:
        small.close()
    for target in (HUGE_MS, None):  # a long target, or none: the pieces of ``batch_size``
        spy.calls.clear()
        large = encoder_with(cache, target)
        try:
            for _ in range(2):  # untimed, then timed
                large.encode(DOCS, embedder="spy", role="document", bulk=True)
            assert spy.calls == [(Role.DOCUMENT, 32), (Role.DOCUMENT, 8)] * 2
        finally:
            large.close()


def test_a_query_is_served_inside_one_queued_piece_of_bulk_work(cache, spy, minilm) -> None:
    """Bulk work of ``batch_size`` texts was one call: a query sent while it ran waited for
    all of it. Now the query goes right after the timed part the model thread is in."""
    encoder = encoder_with(cache, TINY_MS)
    try:
        encoder.encode(DOCS[:4], embedder="spy", role="document", bulk=True)  # times the model
        spy.calls.clear()
        spy.hold()
        finished: list[str] = []
        bulk = encoder.submit(DOCS[:8], embedder="spy", role="document", bulk=True)
        bulk.add_done_callback(lambda _f: finished.append("bulk"))
        assert spy.entered.wait(timeout=60)  # the model thread is inside the bulk work
        query = encoder.submit(["card declined"], embedder="spy", role="query")
        query.add_done_callback(lambda _f: finished.append("query"))
        assert encoder.pending_texts == 1  # the query waits; the bulk work was taken
        spy.release()
        vectors = bulk.result(timeout=120)
        assert finished == ["query", "bulk"]
        assert spy.calls == [(Role.DOCUMENT, 1), (Role.QUERY, 1)] + [(Role.DOCUMENT, 1)] * 7
        np.testing.assert_allclose(query.result()[0], minilm.encode(["card declined"], role="query")[0], atol=1e-6)
        np.testing.assert_allclose(vectors, minilm.encode(DOCS[:8], role="document"), atol=1e-6)
    finally:
        encoder.close()


def test_bulk_vectors_are_those_of_one_call(cache, minilm) -> None:
    """Pieces of ``batch_size``, longest first, are the batches of one ``encode`` call: the same
    vectors bit for bit. Smaller pieces pad to another length and multiply other shapes, so
    float32 rounds differently: at most 1.2e-7 (one ulp at 1.0) on 200 AG News texts, under an
    instruction or not; 1e-6 allows that and catches any real mix-up (a row out of place, the
    wrong instruction) by orders of magnitude."""
    want = minilm.encode(DOCS, role="document", instruction="Topic")
    for target in (HUGE_MS, TINY_MS):
        encoder = encoder_with(cache, target)
        try:
            # Times the model; then an index job's or a clustering's call, and a /v1/embeddings one.
            encoder.encode(DOCS[:2], embedder="minilm", role="document", instruction="Topic", bulk=True)
            by_encode = encoder.encode(DOCS, embedder="minilm", role="document", instruction="Topic", bulk=True)
            future = encoder.submit(DOCS, embedder="minilm", role="document", instruction="Topic")
            by_submit = future.result(timeout=120)
            for got in (by_encode, by_submit):
                if target == HUGE_MS:
                    assert np.array_equal(got, want)
                else:
                    np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)
        finally:
            encoder.close()
