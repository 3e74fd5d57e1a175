"""``rerank: ""`` over HTTP is no rerank, as in process (``facet search --rerank ''``, the
in-process retriever): the README promises the remote retriever the same documents and errors,
and POST /search answered a 404 "rerank '' is not served here"."""

from __future__ import annotations

from app.services.search import SearchRequest
from tests.app.api.conftest import COLLECTION


def test_empty_rerank_is_no_rerank_as_in_process(client, facet) -> None:
    sent = client.post("/search", json={"query": "card payment", "collection": COLLECTION,
                                         "k": 3, "rerank": ""})
    assert sent.status_code == 200, sent.text
    answer = sent.json()
    assert answer["reranker"] is None and answer["reranker_spec"] is None
    local = facet.search(SearchRequest(query="card payment", collection=COLLECTION, top_k=3,
                                       rerank=""))
    assert [r["doc_id"] for r in answer["results"]] == [r.doc_id for r in local.results]
    # A blank one names no model: refused naming rerank, here and in process.
    blank = client.post("/search", json={"query": "card", "collection": COLLECTION, "rerank": "  "})
    assert blank.status_code == 404 and blank.json()["error"]["param"] == "rerank"


def test_schema_says_an_empty_rerank_is_none(client) -> None:
    schema = client.get("/openapi.json").json()["components"]["schemas"]["SearchBody"]
    assert "empty: no rerank" in schema["properties"]["rerank"]["description"]
