"""``embedder: "bm25"`` over HTTP is a lexical search, as in process: a lexical response names
``bm25`` as its embedder, ``facet search -e bm25`` and the in-process retriever take it back,
and POST /search answered a 404 "embedder 'bm25' is not served here" (so did a remote
retriever given ``embedder="bm25"``)."""

from __future__ import annotations

from app.services.search import SearchRequest
from tests.app.api.conftest import COLLECTION


def test_bm25_is_a_lexical_search_as_in_process(client, facet) -> None:
    sent = client.post("/search", json={"query": "card payment", "collection": COLLECTION,
                                         "k": 3, "embedder": "BM25"})
    assert sent.status_code == 200, sent.text
    answer = sent.json()
    assert answer["mode"] == "lexical" and answer["embedder"] == "bm25"
    local = facet.search(SearchRequest(query="card payment", collection=COLLECTION, top_k=3,
                                       embedder="bm25"))
    assert [r["doc_id"] for r in answer["results"]] == [r.doc_id for r in local.results]
    # Beside a mode that encodes the query it needs a real embedder: the search's own refusal.
    dense = client.post("/search", json={"query": "card", "collection": COLLECTION,
                                          "embedder": "bm25", "mode": "dense"})
    assert dense.status_code == 400 and "not an embedder" in dense.json()["error"]["message"]


def test_bm25_in_a_clusters_search_is_lexical_but_never_the_clustering_embedder(client) -> None:
    sent = client.post("/cluster", json={"instruction": "Group by topic", "k": 2, "search": {
        "query": "card", "collection": COLLECTION, "k": 6, "embedder": "bm25"}})
    assert sent.status_code == 200, sent.text
    # The clustering's own embedder encodes texts: bm25 is no model there.
    refused = client.post("/cluster", json={"texts": ["a b", "c d", "e f"], "k": 2,
                                            "instruction": "Group by topic", "embedder": "bm25"})
    assert refused.status_code == 404 and refused.json()["error"]["param"] == "embedder"
