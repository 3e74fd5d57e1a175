"""Rerank under an instruction with the embedder that wrote the collection: minilm reads a chunk
as a blend of the chunk bare (its stored vector) and the chunk after the instruction, and the
embedder computes that blend from the stored vector itself (``encode_from_plain``). The search
service built and loaded a second model, ``minilm[instruction_weight=1]``, to encode the
instructed half and blended it in its own code."""

from __future__ import annotations

import numpy as np
import pytest

from app.encoding import InlineQueryEncoder
from app.services.search import SearchRequest, SearchService

INSTRUCTION = "Find messages about topping up"


def test_an_instructed_rerank_blends_the_stored_vectors_with_the_loaded_minilm_alone(support_ctx, minilm) -> None:
    """The scores are those of encoding every chunk under the instruction (to 1e-5), and the only
    model the cache holds afterwards is the collection's minilm."""
    service = SearchService(support_ctx)
    candidates = service.search(SearchRequest("it failed", "support", instruction=INSTRUCTION, top_k=6,
                                              mode="dense")).results
    texts = [h.text for h in candidates]
    scores = SearchService.rerank_scores(InlineQueryEncoder(support_ctx.embedders), "minilm", "it failed",
                                         INSTRUCTION, texts, doc_instruction=INSTRUCTION)
    order = np.argsort(-np.asarray(scores), kind="stable")
    want = [(texts[i], scores[i]) for i in order]

    seen: list[int] = []  # texts run through minilm's backbone (a forward hook)
    handle = minilm.backbone.base_model().register_forward_pre_hook(
        lambda _module, args, kwargs: seen.append(int(kwargs["input_ids"].shape[0])), with_kwargs=True)
    try:
        response = service.search(SearchRequest("it failed", "support", instruction=INSTRUCTION, top_k=4,
                                                rerank="minilm", rerank_depth=6, mode="dense"))
    finally:
        handle.remove()
    # The query's vector was kept from the search above (it was encoded again, 2 rows: its blend's
    # halves, until the sixth session of 2026-12-07); the chunks' instructed half only.
    assert sum(seen) == 6, seen
    assert service.rerank_documents_instructed and response.reranker == "minilm"
    got = [(r.text, r.rerank_score) for r in response.results]
    assert [t for t, _ in got] == [t for t, _ in want[:4]]
    assert [s for _, s in got] == pytest.approx([s for _, s in want[:4]], abs=1e-5)
    assert support_ctx.embedders.peek("minilm[instruction_weight=1]") is None
    assert support_ctx.embedders.loaded() == ["minilm"]
    assert support_ctx.embedders.peek("minilm") is minilm


def test_on_a_server_the_instructed_half_is_encoded_on_the_model_thread(support_ctx, minilm) -> None:
    """Through the query encoder: a server's model thread runs every forward pass of its models
    (at its thread count); the blend ran in the request thread beside it."""
    import threading

    from app.encoding import BatchingQueryEncoder

    service = SearchService(support_ctx)
    service.encoder = BatchingQueryEncoder(support_ctx.embedders, threads=1)
    names: list[str] = []
    handle = minilm.backbone.base_model().register_forward_pre_hook(
        lambda *_: names.append(threading.current_thread().name))
    try:
        response = service.search(SearchRequest("it failed", "support", instruction=INSTRUCTION, top_k=4,
                                                rerank="minilm", rerank_depth=6, mode="dense"))
    finally:
        handle.remove()
        service.encoder.close()
    assert len(response.results) == 4 and all(r.rerank_score is not None for r in response.results)
    assert names and set(names) == {"facet-encoder"}, names
