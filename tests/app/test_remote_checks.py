"""Queries encoded on workers: the input is checked as the in-process encoders check it, and a
search's version check reads what the workers report even where this process has loaded the
model too. The workers are a stand-in here (an encoder that reports another identity, as
``CeleryQueryEncoder`` does): two workers of different versions need two checkpoints; the real
worker path is tests/worker/test_worker.py's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.core import Facet
from app.encoding import EmbedderCache, InlineQueryEncoder
from app.errors import ConflictError, InvalidRequestError
from app.remote import CeleryQueryEncoder
from app.services.search import SearchRequest
from app.settings import FacetSettings


def test_the_worker_encoder_checks_its_texts_before_sending_them() -> None:
    """encode("hello") sent five one-letter texts (5 vectors); None was a raw TypeError."""
    encoder = CeleryQueryEncoder(FacetSettings(broker_url="redis://127.0.0.1:1/0"))  # never reached
    try:
        with pytest.raises(InvalidRequestError, match="single string"):
            encoder.encode("hello", embedder="minilm")  # type: ignore[arg-type]
        with pytest.raises(InvalidRequestError):
            encoder.encode(None, embedder="minilm")  # type: ignore[arg-type]
    finally:
        encoder.close()


class _OtherVersionWorkers:
    """What ``CeleryQueryEncoder`` is to the services: encodes elsewhere, reports the identity."""

    def __init__(self, minilm: Any) -> None:
        cache = EmbedderCache("cpu")
        cache.put("minilm", minilm)
        self.inner = InlineQueryEncoder(cache)

    def encode(self, texts: Any, **kwargs: Any) -> Any:
        return self.inner.encode(texts, **kwargs)

    def submit(self, texts: Any, **kwargs: Any) -> Any:
        return self.inner.submit(texts, **kwargs)

    def reported_identity(self, embedder: str) -> str:
        return "minilm-retrained-elsewhere"

    def close(self) -> None:
        pass


def test_a_workers_other_version_is_refused_also_once_the_model_is_loaded_here(minilm, tmp_path: Path) -> None:
    """Refused until anything loaded minilm in this process (`facet serve`'s /v1/embeddings,
    preparing an index job): the check then read the local model, and the workers' other
    version was accepted."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("refunds are processed within five days")
    settings = FacetSettings(data_dir=tmp_path / "data")
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    with Facet.open(settings, embedders=cache) as facet:
        facet.index(src, "c")
    facet = Facet(settings, encoder=_OtherVersionWorkers(minilm), embedders=cache)  # minilm loaded here
    try:
        assert facet.context.embedders.peek("minilm") is not None
        with pytest.raises(ConflictError, match="different version"):
            facet.search(SearchRequest(collection="c", query="refund"))
    finally:
        facet.close()


def test_each_thread_reads_the_identity_of_the_worker_that_answered_it() -> None:
    """The identity a search checked was the last answer of any thread: under concurrent
    queries, another worker's; and a worker that reports none left the previous one's in place.
    (``_call`` stands for two workers of different versions.)"""
    import threading
    import time

    import numpy as np

    from app.remote import encode_result

    encoder = CeleryQueryEncoder(FacetSettings(broker_url="redis://127.0.0.1:1/0"))  # never reached

    def call(task: str, queue: str, kwargs: dict[str, Any], deadline: float | None = None) -> Any:
        answer = encode_result(np.ones((1, 4), dtype=np.float32))
        if kwargs["texts"] == ["A"]:
            answer["identity"] = "minilm|STALE"
        elif kwargs["texts"] == ["B"]:
            time.sleep(0.05)
            answer["identity"] = "minilm|GOOD"
        return answer

    encoder._call = call  # type: ignore[method-assign]
    seen: dict[str, str | None] = {}

    def search(query: str, check_after: float) -> None:
        encoder.encode([query], embedder="minilm")
        time.sleep(check_after)  # (the search checks its query after this)
        seen[query] = encoder.reported_identity("minilm")

    threads = [threading.Thread(target=search, args=("A", 0.15)), threading.Thread(target=search, args=("B", 0))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"A": "minilm|STALE", "B": "minilm|GOOD"}
    encoder.encode(["C"], embedder="minilm")  # a worker that reports none
    assert encoder.reported_identity("minilm") is None
    encoder.close()
