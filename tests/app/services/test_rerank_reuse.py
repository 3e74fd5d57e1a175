"""Rerank reuses what the search has at hand: the query's vector, and the stored vectors of the
candidate chunks where the reranker is the embedder that wrote them (the same version). Reranking
with minilm took 3.5-5 s a search on a 2-core CPU, nearly all of it encoding those chunks again.

Forward passes are counted on the real backbones (a forward hook, per row), so what is asserted
is what the models ran; the scores are compared with ``SearchService.rerank_scores``, which
encodes everything (the old path)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest

from app.encoding import InlineQueryEncoder
from app.services.search import SearchRequest, SearchService
from indexer import metadata as md


@contextmanager
def _rows(model) -> Iterator[list[int]]:
    """Texts run through ``model``'s backbone from now on (a list that grows; forward hook)."""
    seen: list[int] = []
    body = model.backbone.base_model()  # the encoder itself; a decoder's body without its LM head
    handle = body.register_forward_pre_hook(
        lambda _module, args, kwargs: seen.append(int(kwargs["input_ids"].shape[0])), with_kwargs=True)
    try:
        yield seen
    finally:
        handle.remove()


@pytest.fixture
def minilm_rows(minilm) -> Iterator[list[int]]:
    with _rows(minilm) as seen:
        yield seen


def _reference(ctx, reranker: str, query: str, instruction: str | None, depth: int,
               *, instructed: bool = True, mode: str = "dense") -> list[tuple[str, float]]:
    """(chunk text, score) of the old path: the candidates, every one encoded by the reranker,
    in rerank order."""
    service = SearchService(ctx)
    hits = service.search(SearchRequest(query, "support", instruction=instruction, top_k=depth,
                                        mode=mode)).results
    texts = [h.text for h in hits]
    scores = SearchService.rerank_scores(InlineQueryEncoder(ctx.embedders), reranker, query, instruction,
                                         texts, doc_instruction=instruction if instructed else None)
    order = np.argsort(-np.asarray(scores), kind="stable")
    return [(texts[i], scores[i]) for i in order]


def _assert_same(response, want) -> None:
    got = [(r.text, r.rerank_score) for r in response.results]
    assert [t for t, _ in got] == [t for t, _ in want[:len(got)]]
    assert [s for _, s in got] == pytest.approx([s for _, s in want[:len(got)]], abs=1e-5)


def test_reranking_with_the_collections_embedder_encodes_the_query_once_and_no_chunk(
        support_ctx, minilm_rows) -> None:
    """Without an instruction the chunks are read bare, as they were support_ctx: their stored
    vectors are the reranker's. (The query went through minilm twice, and the 6 chunks once.)"""
    want = _reference(support_ctx, "minilm", "card problems", None, 6)
    minilm_rows.clear()
    response = SearchService(support_ctx).search(SearchRequest("card problems", "support", top_k=4,
                                                           rerank="minilm", rerank_depth=6, mode="dense"))
    assert minilm_rows == [1]  # the query, once
    assert response.reranker == "minilm" and len(response.results) == 4
    _assert_same(response, want)
    # The same with the chunks read bare under an instruction (RERANK_DOCUMENTS_INSTRUCTED off):
    # the query under the instruction is minilm's blend (its two readings), encoded once.
    instruction = "Find messages about topping up"
    want = _reference(support_ctx, "minilm", "it failed", instruction, 6, instructed=False)
    service = SearchService(support_ctx)
    service.rerank_documents_instructed = False
    minilm_rows.clear()
    response = service.search(SearchRequest("it failed", "support", instruction=instruction, top_k=4,
                                            rerank="minilm", rerank_depth=6))
    assert sum(minilm_rows) == 2, minilm_rows
    _assert_same(response, want)


def test_under_an_instruction_only_minilms_instructed_half_is_encoded(support_ctx, minilm_rows) -> None:
    """minilm reads an instructed chunk as a blend of the chunk bare (what is stored) and the
    chunk after the instruction: only the latter runs (6 rows, not 12), and the scores are those
    of encoding both."""
    instruction = "Find messages about topping up"
    want = _reference(support_ctx, "minilm", "it failed", instruction, 6)
    minilm_rows.clear()
    response = SearchService(support_ctx).search(SearchRequest("it failed", "support", instruction=instruction,
                                                           top_k=4, rerank="minilm", rerank_depth=6))
    assert sum(minilm_rows) == 2 + 6, minilm_rows  # the query's blend once; the chunks' instructed half
    _assert_same(response, want)


def test_another_embedder_or_another_version_encodes_the_chunks(support_ctx, minilm, minilm_rows,
                                                                prompteol) -> None:
    """What did not write the stored vectors reads the chunks itself: another embedder, and
    minilm where the collection records another version of it (a stored vector of other weights
    or settings must not stand in for the reranker's)."""
    support_ctx.embedders.put("backbone-prompteol", prompteol)
    want = _reference(support_ctx, "backbone-prompteol", "card problems", None, 5)
    with _rows(prompteol) as prompteol_rows:
        response = SearchService(support_ctx).search(SearchRequest(
            "card problems", "support", top_k=3, rerank="backbone-prompteol", rerank_depth=5, mode="dense"))
        assert sum(prompteol_rows) == 1 + 5, prompteol_rows  # the query and every chunk
    _assert_same(response, want)

    with support_ctx.sessions() as session:
        row = md.get_collection(session, "support").embedders[0]
        identity = json.loads(row.identity)
        row.identity = json.dumps({**identity, "max_length": 128}, sort_keys=True)
        session.commit()
    want = _reference(support_ctx, "minilm", "card", None, 5, mode="lexical")
    minilm_rows.clear()
    # Lexical: no query vector to compare with the stored ones (which would be refused).
    response = SearchService(support_ctx).search(SearchRequest("card", "support", top_k=3, rerank="minilm",
                                                           rerank_depth=5, mode="lexical"))
    assert sum(minilm_rows) == 1 + len(want), minilm_rows  # the query and every candidate
    _assert_same(response, want)


def test_a_grouped_search_reranks_rerank_depth_chunks_not_its_wider_fetch(support_ctx, prompteol) -> None:
    """Grouping by document fetches 4 x k chunks to find k documents; the reranker read all of
    them instead of the --rerank-depth asked for (3 asked, 8 encoded by an LLM reranker here;
    README: "the reranker reads the first --rerank-depth chunks")."""
    support_ctx.embedders.put("backbone-prompteol", prompteol)
    want = _reference(support_ctx, "backbone-prompteol", "card problems", None, 3)
    with _rows(prompteol) as prompteol_rows:
        response = SearchService(support_ctx).search(SearchRequest(
            "card problems", "support", top_k=2, rerank="backbone-prompteol", rerank_depth=3,
            mode="dense", group_by_document=True))
        assert sum(prompteol_rows) == 1 + 3, prompteol_rows  # the query and the 3 candidates
    assert len(response.results) == 2
    _assert_same(response, want)
