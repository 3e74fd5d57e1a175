"""Error codes a client can switch on, trailing slashes, wrong methods and HEAD /health: the
app in process (TestClient) over the conftest's served Facet (real store, SQLite, minilm)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.api import create_app

from .conftest import serving_facet


def _error(response, status: int) -> dict:
    """The error object of a JSON error answer of ``status``."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json"), response.headers
    return response.json()["error"]


@pytest.mark.parametrize(("method", "url", "body", "code"), [
    ("GET", "/collections/nope", None, "collection_not_found"),
    ("POST", "/search", {"query": "card", "collection": "nope"}, "collection_not_found"),
    ("POST", "/cluster", {"instruction": "topic", "collection": "nope"}, "collection_not_found"),
    ("GET", "/jobs?collection=nope", None, "collection_not_found"),
    ("GET", "/jobs/99999", None, "job_not_found"),
    ("POST", "/jobs", {"source": "/no/such/folder", "collection": "x"}, "source_not_found"),
    ("GET", "/no/such/route", None, "route_not_found"),
    ("GET", "/v1/models/nope", None, "model_not_found"),  # unchanged
])
def test_each_404_says_what_was_not_found_in_its_code(client, method, url, body, code) -> None:
    """Every 404 was ``not_found_error`` with code null: a client told an unknown collection
    from an unknown job or endpoint only by parsing the message."""
    error = _error(client.request(method, url, json=body), 404)
    # model_not_found keeps OpenAI's type, as before.
    type_ = "invalid_request_error" if code == "model_not_found" else "not_found_error"
    assert (error["type"], error["code"]) == (type_, code), error


@pytest.mark.parametrize(("url", "meant"), [
    ("/collections/", "/collections"), ("/jobs/", "/jobs"), ("/health/", "/health"),
    ("/v1/models/", "/v1/models"), ("/v1/models/minilm/", "/v1/models/minilm"),
    ("/jobs/?limit=2", "/jobs?limit=2"),  # the query kept (it was dropped)
])
def test_a_trailing_slash_is_a_404_naming_the_route_meant(client, url, meant) -> None:
    """``GET /collections/`` was a 307 with an empty body to an absolute http:// URL (behind a
    TLS proxy, off it); ``/v1/models/`` was "model '' is not served here"."""
    error = _error(client.get(url, follow_redirects=False), 404)
    assert error["code"] == "route_not_found", error
    assert error["message"] == f"no such endpoint GET {url.split('?')[0]}; did you mean {meant}?"
    # Any method: POST /search/ names /search too.
    error = _error(client.post("/search/", json={"query": "x", "collection": "bank"}), 404)
    assert error["message"] == "no such endpoint POST /search/; did you mean /search?"


def test_the_ui_without_its_slash_is_sent_to_it_relatively(client) -> None:
    """The UI's mount took "/ui" by the router's redirect, now off: its own, relative one."""
    r = client.get("/ui", params={"__theme": "dark"}, follow_redirects=False)
    assert r.status_code == 307 and r.headers["location"] == "ui/?__theme=dark", r.headers


def test_a_wrong_method_is_a_json_405_with_allow(client) -> None:
    error = _error(client.delete("/collections"), 405)
    assert (error["type"], error["code"]) == ("invalid_request_error", "method_not_allowed")
    assert error["message"] == "method DELETE is not allowed on /collections; use GET, HEAD"
    assert client.delete("/collections").headers["allow"] == "GET, HEAD"
    assert _error(client.get("/search"), 405)["code"] == "method_not_allowed"


def test_a_405_names_every_method_of_the_path(client) -> None:
    """Starlette's 405 named the first route of the path only: "Allow: POST" and "use POST" on
    DELETE /jobs, which GET lists too; "GET" on PUT /collections/NAME, which DELETE removes."""
    r = client.delete("/jobs")
    assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD, POST", r.headers
    assert _error(r, 405)["message"] == "method DELETE is not allowed on /jobs; use GET, HEAD, POST"
    assert client.put("/collections/notes").headers["allow"] == "GET, HEAD, DELETE"
    assert client.get("/search").headers["allow"] == "POST"


def test_head_answers_as_get_without_a_body(client) -> None:
    """Uptime checkers ask with HEAD, and HTTP asks it wherever GET is: it was a 405 everywhere
    but /health (with a JSON Content-Type and no body). A route that answers GET answers HEAD
    with the GET's status and headers, no body; the spec lists the GETs only."""
    r = client.head("/health")
    assert r.status_code == 200 and r.content == b"", (r.status_code, r.content)
    for path in ("/health", "/ready", "/info", "/collections", "/jobs"):  # (/health's and
        # /ready's own HEAD routes answered no Content-Type and a Content-Length of 0)
        got, head = client.get(path), client.head(path)
        assert (head.status_code, head.content) == (got.status_code, b""), path
        assert head.headers["content-type"] == got.headers["content-type"], path
        assert head.headers["content-length"] == got.headers["content-length"], path
    missing = client.head("/collections/no-such-collection")
    assert missing.status_code == 404 and missing.content == b""
    assert client.head("/search").status_code == 405  # (POST only)
    paths = client.get("/openapi.json").json()["paths"]
    assert list(paths["/health"]) == ["get"] and "head" not in paths["/collections"]


def test_a_missing_or_wrong_key_has_its_code(minilm, tmp_path) -> None:
    facet = serving_facet(tmp_path / "data", minilm, api_key="s3cret", ui_mount=False)
    try:
        with TestClient(create_app(facet)) as c:
            for headers in ({}, {"Authorization": "Bearer wrong"}):
                error = _error(c.get("/collections", headers=headers), 401)
                assert (error["type"], error["code"]) == ("authentication_error",
                                                          "invalid_api_key"), error
            assert c.get("/collections", headers={"Authorization": "Bearer s3cret"}).is_success
    finally:
        facet.close()


def test_the_spec_lists_the_job_states(client) -> None:
    """``JobInfo.state`` was a bare string: a client generated from /openapi.json could not know
    the states to poll for. Every state the services end a job in, and ``stalled``, are listed."""
    from typing import get_args

    from app.services.collections import JobState
    from app.services.distributed import TERMINAL_JOB_STATES

    state = client.get("/openapi.json").json()["components"]["schemas"]["JobInfo"]["properties"]["state"]
    assert set(state["enum"]) == set(get_args(JobState))
    assert set(TERMINAL_JOB_STATES) | {"queued", "running", "stalled"} == set(state["enum"])
