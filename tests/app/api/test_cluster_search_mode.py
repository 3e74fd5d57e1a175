"""POST /cluster's ``search`` takes POST /search's ``mode``.

docs/cli.md has ``facet cluster --collection --query`` work "as ``POST /cluster`` with
``search``", ``--mode`` among its options, but the API's cluster search had no ``mode``: every
search it ran was ``auto`` and ``{"search": {..., "mode": "lexical"}}`` was a 400 "unknown field
'search.mode'". Now it is POST /search's field (its values, its default), passed to the search
the route runs. Real minilm, real store, the app in process."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.api import create_app

from .conftest import serving_facet

TEXTS = {"a": "my card was declined at the shop", "b": "I lost my card yesterday",
         "c": "the card payment failed twice", "d": "please send a new card",
         "e": "what is the exchange rate for dollars", "f": "how do I change my address",
         "g": "my transfer has not arrived", "h": "can I open a savings account"}


def _found(client: TestClient, **mode: str) -> list[tuple[str, int]]:
    """What POST /search finds, per chunk (as a cluster's search reads it)."""
    r = client.post("/search", json={"query": "card", "collection": "notes", "k": 20,
                                      "group_by_document": False, **mode})
    assert r.status_code == 200, r.text
    return [(x["doc_id"], x["chunk_no"]) for x in r.json()["results"]]


def _clustered(client: TestClient, **mode: str) -> list[tuple[str, int]]:
    r = client.post("/cluster", json={"instruction": "What does the customer want?", "k": 2,
                                      "search": {"query": "card", "collection": "notes",
                                                 "k": 20, **mode}})
    assert r.status_code == 200, r.text
    payload = r.json()
    assert sum(c["size"] for c in payload["clusters"]) == len(payload["sources"])
    return [(s["doc_id"], s["chunk_no"]) for s in payload["sources"]]


def test_cluster_search_mode_is_the_search_mode(minilm, tmp_path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name, text in TEXTS.items():
        (src / f"{name}.txt").write_text(text)
    facet = serving_facet(tmp_path / "data", minilm)
    try:
        facet.index(src, "notes")
        with TestClient(create_app(facet)) as client:
            lexical = _found(client, mode="lexical")
            # Only the 4 texts holding "card": a dense or hybrid search finds all 8.
            assert len(lexical) == 4, lexical
            assert _clustered(client, mode="lexical") == lexical
            # No mode: POST /search's default (auto), as before.
            assert _clustered(client) == _found(client) == _found(client, mode="auto")
            assert len(_found(client)) == len(TEXTS)
            assert _clustered(client, mode="dense") == _found(client, mode="dense")

            r = client.post("/cluster", json={"instruction": "x", "search": {
                "query": "card", "collection": "notes", "mode": "fuzzy"}})
            error = r.json()["error"]
            assert r.status_code == 400 and error["param"] == "search.mode", r.text
            assert error["message"].startswith("search.mode: "), error
            assert "'lexical'" in error["message"], error
    finally:
        facet.close()


def test_cluster_search_mode_is_in_the_schema(client) -> None:
    """The same values and default as POST /search's ``mode`` (one type, not a second enum)."""
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    cluster_mode = schemas["ClusterSearch"]["properties"]["mode"]
    search_mode = schemas["SearchBody"]["properties"]["mode"]
    assert cluster_mode["default"] == search_mode["default"] == "auto"
    assert cluster_mode["anyOf"] == search_mode["anyOf"]
    assert {"enum": ["auto", "dense", "hybrid", "lexical"], "type": "string"} in cluster_mode["anyOf"]
    assert "mode" not in schemas["ClusterSearch"].get("required", [])
