"""``null`` for an optional field is its default, as omitting it is: clients generated from
/openapi.json send ``null`` for options left unset (the app in process over the conftest's
served Facet: real store, SQLite, minilm)."""

from __future__ import annotations

from .conftest import COLLECTION


def _results(response) -> list[tuple[str, int]]:
    assert response.status_code == 200, response.text
    return [(r["doc_id"], r["chunk_no"]) for r in response.json()["results"]]


def test_null_options_of_a_search_are_their_defaults(client) -> None:
    """``"mode": null``, ``"filters": null``, ``"group_by_document": null`` and ``"k": null``
    were each refused with a type error; they search as the omitted options do."""
    plain = {"query": "my card has not arrived", "collection": COLLECTION}
    nulls = {**plain, "mode": None, "filters": None, "group_by_document": None, "k": None,
             "rerank": None, "exact": None, "rerank_depth": None, "score_threshold": None}
    expected = client.post("/search", json=plain)
    got = client.post("/search", json=nulls)
    assert _results(got) == _results(expected) and len(_results(got)) == 10
    assert got.json()["mode"] == expected.json()["mode"]


def test_null_options_of_an_embedding_are_their_defaults(client) -> None:
    body = {"model": "minilm", "input": ["hello"]}
    got = client.post("/v1/embeddings", json={**body, "encoding_format": None, "role": None})
    assert got.status_code == 200, got.text
    assert got.json()["data"][0]["embedding"] == client.post("/v1/embeddings", json=body).json()["data"][0]["embedding"]


def test_a_required_field_sent_as_null_is_still_refused_by_name(client) -> None:
    response = client.post("/search", json={"query": None, "collection": COLLECTION})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == "query"
    # A value that is wrong, not null, is refused as before.
    response = client.post("/search", json={"query": "x", "collection": COLLECTION, "mode": "fuzzy"})
    assert response.status_code == 400 and response.json()["error"]["param"] == "mode"


def test_a_compressed_body_is_said_to_be_compressed(client) -> None:
    """A gzip body was refused as "not UTF-8 (byte 0x8b at offset 1 ...)"."""
    import gzip
    import json

    body = gzip.compress(json.dumps({"query": "card", "collection": COLLECTION}).encode())
    response = client.post("/search", content=body, headers={
        "content-type": "application/json", "content-encoding": "gzip"})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["message"] == (
        "the request body is sent with Content-Encoding: gzip, which this server does not "
        "decode; send it uncompressed")


def test_an_empty_explainer_is_none_as_the_cli_reads_it(client) -> None:
    """`facet cluster --explain ''` names clusters by keywords; `"explainer": ""` was a 404,
    "explainer '' is not served here"."""
    body = {"instruction": "topic", "texts": ["card lost", "card stolen", "rates up", "rates down"], "k": 2}
    got = client.post("/cluster", json={**body, "explainer": "  "})
    assert got.status_code == 200, got.text
    assert got.json()["explainer"] is None
    assert got.json()["labels"] == client.post("/cluster", json=body).json()["labels"]


def test_an_unknown_explainer_lists_only_the_served_models_that_answer(client) -> None:
    """The cluster parity review of the sixth session of 2026-12-06: ``"explainer": "nosuch"``
    listed every served embedder, and one picked from that list (minilm) was then refused as
    generating no answers. It lists those that answer, as the CLI does."""
    from embedders.registry import answers_questions

    body = {"instruction": "topic", "texts": ["a card", "a refund", "a card again"], "k": 2}
    got = client.post("/cluster", json={**body, "explainer": "nosuch"})
    assert got.status_code == 404 and got.json()["error"]["param"] == "explainer", got.text
    message = got.json()["error"]["message"]
    served = client.get("/v1/models").json()["data"]
    answering = [m["id"] for m in served if answers_questions(m["id"])]
    assert "minilm" in [m["id"] for m in served] and answering, served  # (both kinds served)
    listed = message.split("available: ")[1].split(" (the server's")[0].split(", ")
    assert listed == answering, message
    # The embedder field still lists every served model.
    got = client.post("/cluster", json={**body, "embedder": "nosuch"})
    assert "minilm" in got.json()["error"]["message"], got.text
