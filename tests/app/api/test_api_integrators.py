"""What a browser front-end and a generated OpenAPI client need of the API.

CORS (``FACET_CORS_ORIGINS``): a preflight was a 405 with no Access-Control-* header, so no
page on another origin could call the API. An invalid collection name answered 404 on ``GET
/jobs?collection=`` and ``DELETE /collections/{name}/documents`` where every other route
answered 400 "invalid collection name"; ``DELETE /collections/nope`` named ``param``
"collection" where the path names the resource; /openapi.json left codes out and declared
timestamps as plain strings. Real minilm, SQLite, the edge store, the app in process
(TestClient).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api import create_app
from app.core import Facet
from app.errors import BusyError, InvalidRequestError, NotFoundError
from app.settings import FacetSettings
from tests.app.api.conftest import serving_facet

KEY = "integrators-key-0123456789"
ORIGIN = "https://app.example.com"
AUTH = {"Authorization": f"Bearer {KEY}"}
PREFLIGHT = {"Origin": ORIGIN, "Access-Control-Request-Method": "POST",
             "Access-Control-Request-Headers": "authorization,content-type"}
BAD = "café"
INVALID = f"invalid collection name {BAD!r}: use 1-128 ASCII letters"


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("integrators")
    (root / "src").mkdir()
    (root / "src" / "lost.txt").write_text("I lost my card yesterday and need a new one")
    (root / "src" / "rate.txt").write_text("what is the exchange rate for dollars")
    return root


@pytest.fixture(scope="module")
def facet(minilm, source) -> Iterator[Facet]:
    facet = serving_facet(source / "data", minilm, api_key=KEY, cors_origins=[ORIGIN],
                          api_max_body_mb=0.01)
    facet.index(source / "src", "c")
    yield facet
    facet.close()


# ------------------------------------------------------------------------------------ CORS


def test_a_preflight_is_answered_without_the_key(client) -> None:
    r = client.options("/search", headers=PREFLIGHT)
    assert r.status_code == 200, r.text
    assert r.headers["access-control-allow-origin"] == ORIGIN
    assert {"GET", "POST", "DELETE"} <= set(r.headers["access-control-allow-methods"].split(", "))
    allowed = r.headers["access-control-allow-headers"].lower()
    assert "authorization" in allowed and "content-type" in allowed
    assert r.headers["access-control-allow-credentials"] == "true"
    # Another origin is not allowed (no allow-origin header).
    other = client.options("/search", headers=PREFLIGHT | {"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in other.headers


def test_real_answers_and_errors_carry_the_headers(client, facet, monkeypatch) -> None:
    """200, 401 (the key still checked), 404, 413 (the body limit still applies) and 429 (its
    Retry-After readable by the page)."""
    page = {"Origin": ORIGIN}
    ok = client.post("/search", json={"query": "card", "collection": "c"}, headers=AUTH | page)
    nokey = client.post("/search", json={"query": "card", "collection": "c"}, headers=page)
    missing = client.get("/collections/nope", headers=AUTH | page)
    large = client.post("/search", json={"query": "x" * 20_000, "collection": "c"},
                        headers=AUTH | page)

    def busy(*args: Any, **kwargs: Any) -> Any:
        raise BusyError("the encoder's queue is full", retry_after_s=3)

    monkeypatch.setattr(facet, "search", busy)
    full = client.post("/search", json={"query": "card", "collection": "c"}, headers=AUTH | page)
    for r, status in ((ok, 200), (nokey, 401), (missing, 404), (large, 413), (full, 429)):
        assert r.status_code == status, r.text
        assert r.headers.get("access-control-allow-origin") == ORIGIN, (status, r.headers)
    assert "retry-after" in full.headers["access-control-expose-headers"].lower()
    assert full.headers["retry-after"] == "3"


def test_no_cors_unless_set(minilm, tmp_path) -> None:
    facet = serving_facet(tmp_path / "data", minilm)
    try:
        with TestClient(create_app(facet)) as c:
            r = c.options("/search", headers=PREFLIGHT)
            got = c.get("/collections", headers={"Origin": ORIGIN})
        assert r.status_code == 405
        assert not [h for h in (*r.headers, *got.headers) if h.startswith("access-control-")]
    finally:
        facet.close()


def test_any_origin_is_without_credentials_and_a_bad_origin_is_refused(minilm, tmp_path) -> None:
    facet = serving_facet(tmp_path / "data", minilm, cors_origins=["*"])
    try:
        with TestClient(create_app(facet)) as c:
            r = c.options("/search", headers=PREFLIGHT)
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "*"
        assert "access-control-allow-credentials" not in r.headers
        for bad in ("https://app.example.com/", "app.example.com"):
            with pytest.raises(InvalidRequestError, match="FACET_CORS_ORIGINS holds"):
                create_app(settings=FacetSettings(data_dir=tmp_path / "data", cors_origins=[bad]))
    finally:
        facet.close()


# ----------------------------------------------------------------- names and params


@pytest.mark.parametrize(("method", "path", "param"), [
    ("GET", f"/jobs?collection={BAD}", "collection"),
    ("GET", f"/jobs/1?collection={BAD}", "collection"),
    ("POST", f"/jobs/1/cancel?collection={BAD}", "collection"),
    ("DELETE", f"/collections/{BAD}/documents?key=x", None),
    # As before, the reference: the same status and message.
    ("GET", f"/collections/{BAD}", None),
    ("DELETE", f"/collections/{BAD}", None),
])
def test_an_invalid_collection_name_is_the_same_400_everywhere(client, method, path,
                                                                param) -> None:
    r = client.request(method, path, headers=AUTH)
    searched = client.post("/search", json={"query": "card", "collection": BAD}, headers=AUTH)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["message"].startswith(INVALID) and error["param"] == param, error
    assert error["message"] == searched.json()["error"]["message"]


def test_an_unknown_collection_in_the_path_has_no_param(client, facet) -> None:
    for method, path in (("GET", "/collections/nope"), ("DELETE", "/collections/nope"),
                         ("DELETE", "/collections/nope/documents?key=x")):
        r = client.request(method, path, headers=AUTH)
        assert r.status_code == 404, r.text
        error = r.json()["error"]
        assert error["code"] == "collection_not_found" and error["param"] is None, (path, error)
    # The facade (the CLI's `facet delete`) still names the field, its message unchanged.
    with pytest.raises(NotFoundError, match=r"unknown collection 'nope' \(known: c\)") as caught:
        facet.delete_collection("nope")
    assert caught.value.param == "collection"


# ------------------------------------------------------------------------------ OpenAPI


def test_openapi_lists_every_code_and_the_timestamps_formats(client) -> None:
    spec = client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    code = schemas["ErrorDetail"]["properties"]["code"]["description"]
    for name in ("collection_not_found", "job_not_found", "source_not_found",
                 "document_not_found", "route_not_found", "model_not_found",
                 "method_not_allowed", "invalid_api_key", "request_too_large",
                 "unreadable_data", "busy", "unavailable", "model_error"):
        assert name in code, name
    job = schemas["JobInfo"]["properties"]
    for field in ("queued_at", "started_at", "finished_at"):
        strings = [b for b in job[field].get("anyOf", [job[field]]) if b.get("type") == "string"]
        assert strings and all(b.get("format") == "date-time" for b in strings), job[field]
    assert "default" not in job["queued_at"]
    # A document's too (it had no format, though always a timestamp: the API exploration).
    assert schemas["DocumentInfo"]["properties"]["updated_at"].get("format") == "date-time"
    created = schemas["ListedCollection"]["properties"]["created_at"]
    assert "format" not in created and '""' in created["description"]  # "" for a stray
    # What the server answers matches: every job's timestamps are ISO 8601 UTC.
    [listed] = client.get("/jobs", headers=AUTH).json()
    assert listed["queued_at"].endswith("Z") and listed["finished_at"].endswith("Z")


# ------------------------------------------------------------------------ 401 before the body


def test_no_body_is_read_before_the_key(client) -> None:
    """docs/api.md said a malformed body was a 400 before the 401; then that a body that was
    not JSON was. Now no body is read without the key (``_KeyBeforeBody``): each is a 401,
    nothing of the schema said (tests/app/api/test_key_before_body.py: not a byte read)."""
    plain = {"Content-Type": "application/json"}
    for body in (b"not json", b'{"query": 1, "collection": "c"}', b'{"bogus": 1}'):
        assert client.post("/search", content=body, headers=plain).status_code == 401
    doc = (Path(__file__).parents[3] / "docs" / "api.md").read_text()
    assert "whose body is malformed" not in doc and "whose body is not JSON (400)" not in doc
    assert "FACET_CORS_ORIGINS" in doc
