"""The LangChain adapter: langchain-tests' standard suites (retriever integration, embeddings
unit and integration), per-call options, async, and FacetEmbeddings inside langchain-qdrant's
QdrantVectorStore over qdrant-client (in memory and a local folder). Real minilm, real stores."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("langchain_core")

from langchain_core.documents import Document
from langchain_tests.integration_tests import EmbeddingsIntegrationTests, RetrieversIntegrationTests
from langchain_tests.unit_tests import EmbeddingsUnitTests

from app.core import Facet
from app.encoding import EmbedderCache
from app.errors import InvalidRequestError
from app.integrations.langchain import FacetEmbeddings, FacetRetriever
from app.services.search import SearchRequest
from app.settings import FacetSettings

COLLECTION = "bank"
INTENT = "Find messages with the same customer intent"
_STATE: dict[str, Facet] = {}


@pytest.fixture(scope="module", autouse=True)
def facet(minilm, tmp_path_factory, indexed_sample_copy) -> Iterator[Facet]:
    """Served over this module's own copy of the indexed sample (``SAMPLE_FILE`` as ``bank``)."""
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facet = Facet.for_serving(
        FacetSettings(data_dir=indexed_sample_copy(tmp_path_factory.mktemp("lc") / "data")), embedders=cache)
    _STATE["facet"] = facet
    yield facet
    _STATE.pop("facet")
    facet.close()


class TestFacetRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[FacetRetriever]:
        return FacetRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"collection": COLLECTION, "instruction": INTENT, "facet": _STATE["facet"]}

    @property
    def retriever_query_example(self) -> str:
        return "my card payment was declined"


class TestFacetEmbeddingsUnit(EmbeddingsUnitTests):
    @property
    def embeddings_class(self) -> type[FacetEmbeddings]:
        return FacetEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"model": "minilm", "query_instruction": INTENT}


class TestFacetEmbeddingsIntegration(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self) -> type[FacetEmbeddings]:
        return FacetEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"model": "minilm", "query_instruction": INTENT, "facet": _STATE["facet"]}


def test_documents_carry_payload_metadata_score_and_match_the_facade(facet) -> None:
    retriever = FacetRetriever(collection=COLLECTION, instruction=INTENT, k=5, facet=facet)
    docs = retriever.invoke("my card payment was declined")
    direct = facet.search(SearchRequest("my card payment was declined", COLLECTION, INTENT, top_k=5))
    assert [d.page_content for d in docs] == [r.text for r in direct.results]
    top = docs[0]
    assert top.metadata["score"] == pytest.approx(direct.results[0].score)
    assert top.metadata["intent"] == direct.results[0].metadata["intent"]  # payload metadata
    assert {"doc_id", "source", "chunk_no", "start", "end", "collection"} <= set(top.metadata)
    assert top.id and len({d.id for d in docs}) == 5
    scores = [d.metadata["score"] for d in docs]
    assert scores == sorted(scores, reverse=True)
    # What kind of score it is: a chain could not tell a cosine from a fused score.
    assert {d.metadata["mode"] for d in docs} == {direct.mode} == {"dense"}
    assert {d.metadata["mode"] for d in FacetRetriever(collection=COLLECTION, facet=facet).invoke(
        "card declined")} == {"hybrid"}


def test_a_misspelt_setting_is_refused_with_the_name_meant(facet) -> None:
    """`filters=` (the facade's and the API's name) and `search_kwargs=` (LangChain's habit)
    were ignored: the search ran unfiltered and nothing said so."""
    from app.errors import InvalidRequestError

    with pytest.raises(InvalidRequestError, match=r"unknown setting\(s\) filters \(filters -> filter\)"):
        FacetRetriever(collection=COLLECTION, filters={"intent": "card_arrival"}, facet=facet)
    with pytest.raises(InvalidRequestError, match=r"search_kwargs .*it takes collection, embedder"):
        FacetRetriever(collection=COLLECTION, search_kwargs={"k": 1}, facet=facet)
    # LangChain's own settings still pass.
    tagged = FacetRetriever(collection=COLLECTION, tags=["t"], metadata={"m": 1}, k=2, facet=facet)
    assert len(tagged.invoke("card declined")) == 2


def test_per_call_options_override_the_constructor(facet) -> None:
    retriever = FacetRetriever(collection=COLLECTION, instruction=INTENT, k=5, facet=facet)
    query = "it has not arrived"
    base = retriever.invoke(query)
    other = retriever.invoke(query, instruction="Find messages about exchange rates", k=2)
    assert len(other) == 2
    assert other[0].metadata["score"] != pytest.approx(base[0].metadata["score"])
    want = facet.search(SearchRequest(query, COLLECTION, "Find messages about exchange rates",
                                      top_k=2))
    assert [d.page_content for d in other] == [r.text for r in want.results]
    only = retriever.invoke(query, filter={"intent": "card_arrival"}, k=3)
    assert {d.metadata["intent"] for d in only} == {"card_arrival"}
    cut = retriever.invoke(query, score_threshold=base[1].metadata["score"])
    assert len(cut) == 2
    reranked = retriever.invoke(query, rerank="minilm", k=3)
    assert all(d.metadata["rerank_score"] is not None for d in reranked)
    words = retriever.invoke("card arrival", mode="lexical", k=3)
    want = facet.search(SearchRequest("card arrival", COLLECTION, INTENT, top_k=3, mode="lexical"))
    assert [d.page_content for d in words] == [r.text for r in want.results]
    assert all("card" in d.page_content.lower() or "arriv" in d.page_content.lower() for d in words)
    hybrid = FacetRetriever(collection=COLLECTION, instruction=INTENT, k=3, mode="hybrid", facet=facet)
    want = facet.search(SearchRequest(query, COLLECTION, INTENT, top_k=3, mode="hybrid"))
    assert [d.metadata["score"] for d in hybrid.invoke(query)] == pytest.approx([r.score for r in want.results])
    # The default, auto: with an instruction the embedder alone (base above), without one hybrid.
    plain = FacetRetriever(collection=COLLECTION, k=3, facet=facet).invoke(query)
    want = facet.search(SearchRequest(query, COLLECTION, top_k=3, mode="hybrid"))
    assert [d.page_content for d in plain] == [r.text for r in want.results]
    assert [d.metadata["score"] for d in plain] == pytest.approx([r.score for r in want.results])
    from app.errors import InvalidRequestError
    with pytest.raises(InvalidRequestError, match=r"unknown option\(s\) top_k \(top_k -> k\)"):
        retriever.invoke(query, top_k=3)
    # Per-call values are read by the constructor's rules ("2" is 2); a bad value is named.
    assert [d.page_content for d in retriever.invoke(query, k="2")] == [d.page_content for d in
                                                                       base[:2]]
    with pytest.raises(InvalidRequestError, match=r"group_by_document='maybe'.*valid boolean"):
        retriever.invoke(query, group_by_document="maybe")
    with pytest.raises(InvalidRequestError, match=r"k=0.*greater than or equal to 1"):
        retriever.invoke(query, k=0)


def test_a_per_call_none_clears_the_constructors_value_and_bad_input_is_named(facet) -> None:
    """``instruction=None`` per call searches without the retriever's instruction (it used to
    be read as "not given", so the constructor's stayed), as ``filter=None`` drops its filter;
    ``k=None`` keeps the retriever's k. A query or filter of the wrong type says so (a dict
    query was "the query is empty", a list filter an AttributeError)."""
    from app.errors import InvalidRequestError

    retriever = FacetRetriever(collection=COLLECTION, instruction=INTENT, k=3,
                               filter={"intent": "card_arrival"}, facet=facet)
    query = "it has not arrived"
    cleared = retriever.invoke(query, instruction=None, filter=None, k=None)
    want = facet.search(SearchRequest(query, COLLECTION, top_k=3))
    assert [d.page_content for d in cleared] == [r.text for r in want.results]
    assert len({d.metadata["intent"] for d in cleared}) > 1  # the filter went too
    with pytest.raises(InvalidRequestError, match="the query must be a string, got dict"):
        retriever.invoke({"query": "card"})  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match="filters must map payload fields to values"):
        retriever.invoke(query, filter=[("intent", "card_arrival")])


async def test_async_retrieval_equals_sync(facet) -> None:
    retriever = FacetRetriever(collection=COLLECTION, instruction=INTENT, k=3, facet=facet)
    sync = retriever.invoke("lost my card")
    docs = await retriever.ainvoke("lost my card", k=3)
    assert [d.page_content for d in docs] == [d.page_content for d in sync]
    many = await retriever.abatch(["lost my card", "exchange rate", "top up failed"])
    assert [len(d) for d in many] == [3, 3, 3]


def test_embeddings_roles_and_instructions(facet, minilm) -> None:
    emb = FacetEmbeddings(model="minilm", facet=facet)
    texts = ["my card was declined", "what is the exchange rate"]
    np.testing.assert_allclose(emb.embed_documents(texts), minilm.encode(texts, role="document"),
                               atol=1e-6)
    q = emb.with_instruction(INTENT)
    assert q.query_instruction == INTENT and q.document_instruction is None and emb.query_instruction is None
    np.testing.assert_allclose(q.embed_query(texts[0]),
                               minilm.encode(texts[:1], role="query", instruction=INTENT)[0],
                               atol=1e-6)
    both = q.with_instruction(document_instruction="Represent the intent")
    assert both.query_instruction == INTENT and both.document_instruction == "Represent the intent"
    assert not np.allclose(both.embed_documents(texts[:1])[0], emb.embed_documents(texts[:1])[0],
                           atol=1e-3)


def test_embeddings_refuse_an_empty_text_before_embedding_any(facet, monkeypatch) -> None:
    monkeypatch.setattr(facet.settings, "max_texts_per_call", 2)  # embedded in slices of 2
    emb = FacetEmbeddings(model="minilm", facet=facet)
    with pytest.raises(InvalidRequestError, match=r"texts\[3\] is empty"):
        emb.embed_documents(["a", "b", "c", ""])  # the index in the caller's list, not a slice's
    # A query is one text, not a list: "texts[0] is empty" named a list the caller never gave.
    with pytest.raises(InvalidRequestError, match=r"^the query is empty: give the text to embed$"):
        emb.embed_query(" ")


@pytest.mark.parametrize("where", ["memory", "folder"])
def test_embeddings_inside_langchain_qdrant(facet, tmp_path, where) -> None:
    from langchain_qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient

    emb = FacetEmbeddings(model="minilm", facet=facet, query_instruction=INTENT)
    texts = ["My card has not arrived yet", "The exchange rate you used is wrong",
             "I was charged twice for one purchase", "How do I top up with a bank transfer?"]
    client = QdrantClient(location=":memory:") if where == "memory" else \
        QdrantClient(path=str(tmp_path / "qdrant"))
    try:
        from qdrant_client.models import Distance, VectorParams

        client.create_collection("lc", vectors_config=VectorParams(size=384, distance=Distance.COSINE))
        store = QdrantVectorStore(client=client, collection_name="lc", embedding=emb)
        store.add_documents([Document(page_content=t, metadata={"n": i}) for i, t in enumerate(texts)])
        hits = store.similarity_search_with_score("where is my new card?", k=2)
        assert hits[0][0].page_content == texts[0] and hits[0][0].metadata["n"] == 0
        want = float(np.dot(emb.embed_query("where is my new card?"), emb.embed_documents(texts[:1])[0]))
        assert hits[0][1] == pytest.approx(want, abs=1e-4)
        retriever = store.as_retriever(search_kwargs={"k": 1})
        assert retriever.invoke("charged two times")[0].page_content == texts[2]
    finally:
        client.close()


def test_group_by_document_gives_k_distinct_documents(facet, tmp_path) -> None:
    """k counted chunks only: a RAG chain got two chunks of one long document where it asked
    for two documents (every other edge can group; the retriever could not)."""
    import json

    records = tmp_path / "ferries.jsonl"
    long = " ".join(f"Sentence {i} of the harbour report mentions the ferry timetable and the tide."
                    for i in range(60))
    records.write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "report", "text": long},
        {"id": "note", "text": "The ferry timetable changes at the spring tide."},
        {"id": "other", "text": "Knead the bread dough until it is smooth."}]))
    facet.index(records, "ferries")
    query = "harbour ferry timetable tide"
    flat = FacetRetriever(collection="ferries", k=3, mode="dense", facet=facet).invoke(query)
    assert sorted(d.metadata["doc_id"] for d in flat) == ["note", "report", "report"]
    grouped = FacetRetriever(collection="ferries", k=3, mode="dense", group_by_document=True,
                             facet=facet).invoke(query)
    assert sorted(d.metadata["doc_id"] for d in grouped) == ["note", "other", "report"]
    report = next(d for d in grouped if d.metadata["doc_id"] == "report")
    assert report.metadata["more_chunks"]
    per_call = FacetRetriever(collection="ferries", k=3, mode="dense", facet=facet).invoke(
        query, group_by_document=True)
    assert [d.metadata["doc_id"] for d in per_call] == [d.metadata["doc_id"] for d in grouped]
    # A per-call string is read as the constructor reads it: "false" does not group (it did,
    # being a non-empty string), "true" does.
    for off in ("false", "no", "0"):
        assert sorted(d.metadata["doc_id"] for d in FacetRetriever(
            collection="ferries", k=3, mode="dense", facet=facet).invoke(
                query, group_by_document=off)) == ["note", "report", "report"]
    assert [d.metadata["doc_id"] for d in FacetRetriever(
        collection="ferries", k=3, mode="dense", facet=facet).invoke(
            query, group_by_document="true")] == [d.metadata["doc_id"] for d in grouped]
