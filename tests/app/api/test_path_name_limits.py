"""A collection named by the path: one over 128 characters was refused by the path's own
validation, ``param`` "name" (a field the API has nowhere) and pydantic's words, where every
other name that is none (``-bad``) is "invalid collection name ...", ``param`` null; and the
limits of two optional query parameters sat beside their anyOf in /openapi.json, where clients
read the value's branch (the API exploration of the third session of 2026-12-07)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.api.server import create_app

LONG = "a" * 129


@pytest.fixture
def client(facet):
    with TestClient(create_app(facet), base_url="http://localhost") as c:
        yield c


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/collections/{}"), ("DELETE", "/collections/{}"), ("GET", "/collections/{}/documents"),
    ("DELETE", "/collections/{}/documents?key=k"), ("POST", "/collections/{}/uploads"),
])
def test_a_path_name_too_long_is_refused_as_any_name_that_is_none(client, method, path) -> None:
    for name in (LONG, "-bad"):
        files = [("files", ("a.txt", b"a note"))] if path.endswith("uploads") else None
        answer = client.request(method, path.format(name), files=files)
        assert answer.status_code == 400, (name[:8], answer.text)
        error = answer.json()["error"]
        assert error["param"] is None, error
        assert error["message"].startswith(f"invalid collection name {name!r}: use 1-128 ASCII"), error


def test_a_huge_name_is_not_echoed_whole(client) -> None:
    error = client.get("/collections/" + "b" * 5000).json()["error"]
    assert error["message"].startswith(f"invalid collection name {'b' * 60!r}… (5,000 characters): ")
    assert len(error["message"]) < 300, len(error["message"])


def test_optional_query_limits_sit_in_the_values_branch(client) -> None:
    spec = client.get("/openapi.json").json()

    def schema(path: str, method: str, name: str) -> dict:
        [found] = [p["schema"] for p in spec["paths"][path][method]["parameters"] if p["name"] == name]
        return found

    before = schema("/jobs", "get", "before")
    assert {"type": "integer", "minimum": 1} in before["anyOf"], before
    cancel = schema("/jobs/{job_id}/cancel", "post", "collection")
    assert cancel["anyOf"][0] == {"type": "string", "minLength": 1, "maxLength": 128,
                                  "pattern": "^(?:[A-Za-z0-9][A-Za-z0-9_.-]{0,127})$"}, cancel
    assert client.get("/jobs?before=0").json()["error"]["param"] == "before"


def test_the_log_line_of_a_huge_name_is_cut_and_says_it_once(client, caplog) -> None:
    """The answer was cut, the server's log line not: the path and a "collection '...'" label
    each held a 5,000-character name (10,250 characters; the verification round of the third
    session of 2026-12-07)."""
    import logging

    with caplog.at_level(logging.INFO, logger="app.api.errors"):
        client.get("/collections/" + "u" * 5000)
    [line] = [r.getMessage() for r in caplog.records if "answered 400" in r.getMessage()]
    assert len(line) < 1000, len(line)
    assert line.startswith(f"GET /collections/{'u' * 187}… (5,013 characters) answered 400: "), line[:300]
    assert "(5,000 characters)" in line and ", collection '" not in line, line
