"""An instruction over a model's limit, refused early and naming its field and model.

* Too long for the cluster explainer (InBedder reads fewer tokens than minilm): it was refused
  only after every text was encoded and k-means had run (3 min 10 s for 2,000 texts), because
  the early check probed only explainers whose name did not tell whether they answer.
* The refusal's ``param`` was null, though an unpaired surrogate in the same field named it,
  and "too long for this embedder" did not say that the explainer's limit was the one passed.

Real minilm, the tiny InBedder checkpoint (``max_length`` 64), SQLite and the edge store.
"""

from __future__ import annotations

import pytest

from app.errors import InvalidRequestError
from app.services.clustering import ClusterRequest, ClusterService
from app.services.search import SearchRequest, SearchService

TEXTS = ["My card has not arrived yet", "Where is my new card?", "I forgot my PIN",
         "How do I reset my PIN code?", "The exchange rate is wrong", "What rate do you apply?"]
# About 30 tokens: well within minilm's 127, over the tiny InBedder's limit (max_length 64).
FOR_MINILM = "What does the customer want from the bank? " * 3
# 200 tokens: over minilm's 127.
TOO_LONG = "word " * 200
THIS_EMBEDDER = "the instruction is too long for this embedder: "


def test_an_instruction_too_long_for_the_explainer_is_refused_before_any_text_is_encoded(
        make_ctx, tiny_inbedder_dir, monkeypatch) -> None:
    ctx = make_ctx()
    explainer = str(tiny_inbedder_dir)
    encoded: list[int] = []
    encode = ctx.encoder.encode

    def counted(texts, **kwargs):
        encoded.append(len(texts))
        return encode(texts, **kwargs)

    monkeypatch.setattr(ctx.encoder, "encode", counted)
    service = ClusterService(ctx)
    for progress in (True, False):
        stages: list[str] = []
        with pytest.raises(InvalidRequestError) as caught:
            service.cluster(ClusterRequest(FOR_MINILM, texts=TEXTS, k=2, embedder="minilm",
                                           explainer=explainer, answer_tokens=2),
                            progress=(lambda f, stage, seen=stages: seen.append(stage)) if progress else None)
        assert encoded == [], encoded
        assert not any(s.startswith(("encoding", "k-means")) or "answering" in s for s in stages), stages
        message = str(caught.value)
        assert message.startswith(f"the instruction is too long for the explainer {explainer}: "), message
        assert caught.value.param == "instruction"
    # The explainer loaded for the check is the one its answers use: loaded once.
    model = ctx.embedders.peek(explainer)
    assert model is not None
    result = service.cluster(ClusterRequest("What is it about?", texts=TEXTS, k=2, embedder="minilm",
                                            explainer=explainer, answer_tokens=2))
    assert ctx.embedders.peek(explainer) is model and result.answers is not None and encoded


def test_an_instruction_too_long_for_the_embedder_names_its_field(make_ctx) -> None:
    """The embedder's own refusal keeps its words ("for this embedder") and names the field,
    nested as the cluster request nests its search."""
    ctx = make_ctx()
    with pytest.raises(InvalidRequestError) as caught:
        ClusterService(ctx).cluster(ClusterRequest(TOO_LONG, texts=TEXTS, k=2, embedder="minilm"))
    assert str(caught.value).startswith(THIS_EMBEDDER) and caught.value.param == "instruction"


def test_a_search_names_the_instruction_for_its_embedder_and_its_reranker(support_ctx,
                                                                         tiny_inbedder_dir) -> None:
    search = SearchService(support_ctx)
    with pytest.raises(InvalidRequestError) as caught:
        search.search(SearchRequest("card declined", "support", instruction=TOO_LONG))
    assert str(caught.value).startswith(THIS_EMBEDDER) and caught.value.param == "instruction"
    # Within minilm's limit, over the reranker's.
    with pytest.raises(InvalidRequestError) as caught:
        search.search(SearchRequest("card declined", "support", instruction=FOR_MINILM,
                                    rerank=str(tiny_inbedder_dir)))
    assert str(caught.value).startswith(f"the instruction is too long for the reranker {tiny_inbedder_dir}: ")
    assert "tokens it reads" in str(caught.value) and "the embedder reads" not in str(caught.value)
    assert caught.value.param == "instruction"
    # Nested in a cluster request: the search's field.
    with pytest.raises(InvalidRequestError) as caught:
        ClusterService(support_ctx).cluster(ClusterRequest(
            "What is it about?", search=SearchRequest("card", "support", instruction=TOO_LONG, top_k=5)))
    assert str(caught.value).startswith(THIS_EMBEDDER) and caught.value.param == "search.instruction"


def test_the_explainer_that_is_also_the_embedder_is_this_embedder(make_ctx, tiny_inbedder_dir) -> None:
    """Both refuse the instruction: "too long for the explainer X" blamed only one of them."""
    spec = str(tiny_inbedder_dir)
    with pytest.raises(InvalidRequestError) as caught:
        ClusterService(make_ctx()).cluster(ClusterRequest(FOR_MINILM, texts=TEXTS, k=2, embedder=spec,
                                                          explainer=spec))
    assert str(caught.value).startswith(THIS_EMBEDDER) and caught.value.param == "instruction"
