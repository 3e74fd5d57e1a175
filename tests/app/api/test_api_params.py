"""Query parameters on every route, the ``param`` of a validation error, /search results' point
id and ``rerank_depth`` below ``k``: the real app over minilm (TestClient), nothing mocked."""

from __future__ import annotations

import pytest

from app.api.errors import error_body
from indexer.store import point_id

from .conftest import COLLECTION

SEARCH = {"query": "my card payment was declined", "collection": COLLECTION, "k": 3, "group_by_document": False}


def _unknown(name: str) -> dict:
    return error_body(
        f"unknown query parameter {name!r}; check its spelling against docs/api.md", "invalid_request_error", name
    )


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        ("post", "/search?k=1", SEARCH),
        ("post", "/search?colection=x", SEARCH),
        ("get", "/collections?limit=1", None),
        ("get", f"/collections/{COLLECTION}?colection=x", None),
        ("get", "/v1/models?limit=1", None),
        ("get", "/v1/models/minilm?colection=x", None),
        ("get", "/info?colection=x", None),
        ("get", "/health?colection=x", None),
        ("post", "/v1/embeddings?colection=x", {"input": "a text", "model": "minilm"}),
        (
            "post",
            "/cluster?colection=x",
            {"instruction": "topic", "k": 2, "texts": ["card lost", "card stolen", "exchange rates"]},
        ),
    ],
)
def test_every_route_refuses_a_query_parameter_it_does_not_take(client, method, url, body) -> None:
    """Only the job routes refused one: ``/search?k=1`` searched with the body's k (10 results),
    ``/collections?limit=1`` listed every collection, any parameter of the others was ignored.
    Each answers the 400 ``/jobs?colection=x`` answers."""
    name = url.partition("?")[2].partition("=")[0]
    r = client.request(method, url, json=body)
    assert r.status_code == 400, r.text
    assert r.json() == _unknown(name)
    if name != "limit":  # one /jobs takes
        assert client.get(f"/jobs?{name}=x").json() == _unknown(name)


def test_declared_query_parameters_and_the_ui_still_pass(client) -> None:
    """The check reads each route's declared parameters (its query model's fields too); the UI
    at /ui is another app, whose own query strings are not the API's to refuse."""
    assert client.post("/search", json=SEARCH).status_code == 200
    assert client.get("/jobs", params={"collection": COLLECTION, "limit": 5}).status_code == 200
    assert client.get("/health").json() == {"status": "ok"}
    r = client.get("/ui/", params={"__theme": "dark", "view": "api"})
    assert r.status_code == 200 and "unknown query parameter" not in r.text, r.text[:300]


@pytest.mark.parametrize(
    ("method", "url", "body", "param"),
    [
        ("get", "/jobs?limit=abc", None, "limit"),  # was "query.limit"
        ("get", "/jobs/abc", None, "job_id"),  # was "path.job_id"
        ("get", "/jobs?limit=0", None, "limit"),  # was null (the facade's check)
        ("get", "/jobs?limit=5000", None, "limit"),
        ("get", "/jobs/1?errors=-1", None, "errors"),
        ("get", "/jobs/1?errors=x", None, "errors"),  # was "query.errors"
        ("post", "/search", SEARCH | {"k": "5"}, "k"),
        ("post", "/search", SEARCH | {"query": 3}, "query"),  # a body field named like a place
        ("post", "/cluster", {"instruction": "x", "search": SEARCH | {"k": "5"}}, "search.k"),
        ("post", "/v1/embeddings", {"input": "x", "model": "minilm", "role": "passage"}, "role"),
    ],
)
def test_param_is_the_field_name_alone(client, method, url, body, param) -> None:
    """A query or path parameter was named with its place ("query.limit", "path.job_id"), a
    limit out of range not at all, while a body's field was "k": docs/api.md says a request
    validation error names the field."""
    r = client.request(method, url, json=body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param, error
    if "limit=" in url and "abc" not in url:
        value = url.rpartition("=")[2]
        assert error["message"] == f"limit must be from 1 to 1000, got {value}", error


def test_search_results_carry_their_point_id(client, facet) -> None:
    """A result had no id, while the LangChain adapter's Document.id is the point id: an HTTP
    client could not name the chunk it got. Each result's ``id`` is its point in the store."""
    results = client.post("/search", json=SEARCH).json()["results"]
    assert len(results) == 3
    for result in results:
        assert result["id"] == point_id(result["doc_id"], result["chunk_no"])
    stored = facet.context.store.retrieve(COLLECTION, [r["id"] for r in results])
    assert {hit.id: (hit.payload["doc_id"], hit.payload["chunk_no"]) for hit, _ in stored} == {
        r["id"]: (r["doc_id"], r["chunk_no"]) for r in results
    }
    spec = client.get("/openapi.json").json()
    ref = spec["paths"]["/search"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    answer = spec["components"]["schemas"][ref.rpartition("/")[2]]
    hit = spec["components"]["schemas"][answer["properties"]["results"]["items"]["$ref"].rpartition("/")[2]]
    assert "id" in hit["required"] and hit["properties"]["id"]["type"] == "string"


def test_rerank_depth_below_k_is_read_as_k_and_says_so(client) -> None:
    """``rerank_depth`` 1 with k 5 reranked 5 candidates, as the service (and so ``facet search
    --rerank-depth``) reads it, but nothing said so: /openapi.json and docs/api.md now do."""
    body = SEARCH | {"k": 5, "rerank": "minilm"}
    shallow = client.post("/search", json=body | {"rerank_depth": 1}).json()["results"]
    at_k = client.post("/search", json=body | {"rerank_depth": 5}).json()["results"]
    assert len(shallow) == 5 and all(r["rerank_score"] is not None for r in shallow)
    assert [r["id"] for r in shallow] == [r["id"] for r in at_k]
    spec = client.get("/openapi.json").json()
    depth = spec["components"]["schemas"]["SearchBody"]["properties"]["rerank_depth"]
    assert "one below k is read as k" in depth["description"], depth


@pytest.mark.parametrize(
    ("url", "name", "times"),
    [
        (f"/jobs?collection={COLLECTION}&collection=big", "collection", 2),
        ("/jobs?limit=1&limit=5&limit=9", "limit", 3),
        (f"/jobs/1?collection={COLLECTION}&errors=1&errors=2", "errors", 2),
    ],
)
def test_a_query_parameter_given_twice_is_refused(client, url, name, times) -> None:
    """``/jobs?collection=bank&collection=big`` quietly listed big's jobs (the last value won)."""
    r = client.get(url)
    assert r.status_code == 400, r.text
    assert r.json() == error_body(
        f"query parameter {name!r} given {times} times; give it once", "invalid_request_error", name
    )


def test_a_list_query_parameter_may_repeat() -> None:
    """Only a single-valued parameter is refused twice: a list-typed one is given once per item.
    (No route of the API takes one yet: a small app with the same check.)"""
    from fastapi import Depends, FastAPI, Query
    from fastapi.testclient import TestClient

    from app.api.server import _known_query

    app = FastAPI(dependencies=[Depends(_known_query)])

    @app.get("/tags")
    def tags(tag: list[str] | None = Query(None), n: int = 1) -> dict:
        return {"tag": tag, "n": n}

    with TestClient(app) as c:
        assert c.get("/tags?tag=a&tag=b&n=2").json() == {"tag": ["a", "b"], "n": 2}
