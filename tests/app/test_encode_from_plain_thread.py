"""Rerank's ``encode_from_plain`` goes through the query encoder: on a server's model thread
(every forward pass of its models there, at its thread count), in the calling thread with the
query thread count inline. It ran in the request thread beside the model thread."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from app.encoding import BatchingQueryEncoder, InlineQueryEncoder
from app.errors import InvalidRequestError

TEXTS = ["My card was declined at the supermarket", "How do I top up with a bank transfer?"]
INSTRUCTION = "Find messages about topping up"


def _threads_of_forward_passes(model) -> tuple[list[str], object]:
    names: list[str] = []
    handle = model.backbone.base_model().register_forward_pre_hook(
        lambda *_: names.append(threading.current_thread().name))
    return names, handle


def test_on_the_model_thread_as_encode_gives(cache, minilm) -> None:
    plain = minilm.encode(TEXTS, role="document")
    want = minilm.encode(TEXTS, role="document", instruction=INSTRUCTION)
    encoder = BatchingQueryEncoder(cache, threads=1)
    names, handle = _threads_of_forward_passes(minilm)
    try:
        got = encoder.encode_from_plain(plain, TEXTS, embedder="minilm", instruction=INSTRUCTION)
    finally:
        handle.remove()
        encoder.close()
    assert np.allclose(got, want, atol=1e-5)
    assert names and set(names) == {"facet-encoder"}, names
    assert encoder.pending_texts == 0 and encoder.in_flight == 0


def test_inline_and_its_refusals_in_the_applications_words(cache, minilm) -> None:
    plain = minilm.encode(TEXTS, role="document")
    encoder = InlineQueryEncoder(cache, query_threads=1)
    got = encoder.encode_from_plain(plain, TEXTS, embedder="minilm", instruction=INSTRUCTION)
    assert np.allclose(got, minilm.encode(TEXTS, role="document", instruction=INSTRUCTION), atol=1e-5)
    with pytest.raises(InvalidRequestError, match="one row per text"):
        encoder.encode_from_plain(plain[:1], TEXTS, embedder="minilm", instruction=INSTRUCTION)
    with pytest.raises(InvalidRequestError, match="instruction is too long"):
        encoder.encode_from_plain(plain, TEXTS, embedder="minilm", instruction="word " * 5000)
