"""How long bulk work holds the serving model thread at a time: ``FACET_BULK_PIECE_MS``, and
answer generation cut into decoding batches.

The target of the timed parts of bulk work (``BatchingQueryEncoder(bulk_piece_ms=...)``) was a
constant, ``BULK_PIECE_MS``, with no setting to change it. And an explainer's answers (cluster
names) ran as one block on the model thread: a query sent meanwhile waited for all of them.
Real minilm, and the tiny InBedder over SmolLM2 cut to two layers (tests/conftest.py)."""

from __future__ import annotations

import threading

import pytest

from app.core import Facet
from app.encoding import ANSWER_BATCH, BatchingQueryEncoder, EmbedderCache
from app.errors import InvalidRequestError
from app.settings import FacetSettings, get_settings


@pytest.mark.parametrize(("value", "expected"), [("250", 250.0), ("0", 0.0), ("off", 0.0),
                                                 (" OFF ", 0.0), ("1.5", 1.5), ("", 500.0)])
def test_the_setting_reads_milliseconds_or_off(environment, value, expected) -> None:
    environment.setenv("FACET_BULK_PIECE_MS", value)
    assert get_settings().bulk_piece_ms == expected
    environment.delenv("FACET_BULK_PIECE_MS")
    get_settings.cache_clear()
    assert get_settings().bulk_piece_ms == 500.0


@pytest.mark.parametrize(("value", "why"), [
    ("-5", "greater than or equal to 0"), ("fast", "valid number"), ("inf", "finite number"),
    ("nan", "finite number")])
def test_a_bad_value_is_a_settings_error_naming_it(environment, value, why) -> None:
    environment.setenv("FACET_BULK_PIECE_MS", value)
    with pytest.raises(InvalidRequestError, match=rf"FACET_BULK_PIECE_MS={value!r}: .*{why}"):
        get_settings()


@pytest.mark.parametrize(("ms", "seconds"), [(250.0, 0.25), (0.0, None)])
def test_the_setting_reaches_the_serving_encoder(tmp_path, minilm, ms, seconds) -> None:
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facet = Facet.for_serving(FacetSettings(data_dir=tmp_path / "data", bulk_piece_ms=ms),
                              embedders=cache)
    try:
        assert isinstance(facet.encoder, BatchingQueryEncoder)
        assert facet.encoder.bulk_piece_s == seconds
    finally:
        facet.close()


class HeldExplainer:
    """The real tiny InBedder, recording each ``generate_answers`` call in ``events``; the first
    waits for ``release`` (the model thread is then inside the answers)."""

    def __init__(self, model, events: list[str]) -> None:
        self.model = model
        self.events = events
        self.entered = threading.Event()
        self.release = threading.Event()

    def generate_answers(self, texts, instruction, max_new_tokens=None, batch_size=16):
        self.events.append(f"answers {len(texts)}")
        if not self.entered.is_set():
            self.entered.set()
            assert self.release.wait(timeout=60)
        return self.model.generate_answers(texts, instruction, max_new_tokens=max_new_tokens,
                                           batch_size=batch_size)

    def __getattr__(self, name):
        return getattr(self.model, name)


def test_a_query_is_served_between_the_decoding_batches_of_answers(minilm,
                                                                   tiny_inbedder_dir) -> None:
    from embedders import load_embedder

    model = load_embedder(str(tiny_inbedder_dir), device="cpu")
    events: list[str] = []
    held = HeldExplainer(model, events)
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    cache.put("held", held)  # type: ignore[arg-type]
    texts = [f"card {i} declined" + " again" * (i % 7) for i in range(ANSWER_BATCH + 8)]
    encoder = BatchingQueryEncoder(cache, threads=1)
    try:
        answers: list[list[str]] = []
        worker = threading.Thread(target=lambda: answers.append(encoder.generate_answers(
            texts, explainer="held", instruction="What is it about?", max_new_tokens=2)))
        worker.start()
        assert held.entered.wait(timeout=60)  # the model thread is inside the first batch
        query = encoder.submit(["card declined"], embedder="minilm", role="query")
        query.add_done_callback(lambda _f: events.append("query"))
        held.release.set()
        worker.join(timeout=120)
        assert query.result(timeout=60).shape == (1, 384)
        assert events == [f"answers {ANSWER_BATCH}", "query", "answers 8"]
        # The batches of one call, longest first: its answers, in the callers' order.
        assert answers == [model.generate_answers(texts, "What is it about?", max_new_tokens=2,
                                                  batch_size=ANSWER_BATCH)]
    finally:
        encoder.close()
