"""With FACET_API_KEY set, a request without the key is refused before any of its body is read.

FastAPI read a route's body before checking the key, and the body limit buffered a chunked one
to the limit: a client without the key held up to FACET_API_MAX_BODY_MB (16 MB) of memory a
connection, and by sending its body slowly, for as long as it liked (the huge-inputs review of
the seventh session of 2026-12-06). Each call below answers from a client whose body never comes
after its first piece: the old code waited for it (the timeout fails the test)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import anyio
import pytest
from fastapi.testclient import TestClient

from app.api import create_app

from .conftest import asgi_call, serving_facet


@pytest.fixture(scope="module")
def keyed(minilm, tmp_path_factory) -> Iterator[TestClient]:
    facet = serving_facet(tmp_path_factory.mktemp("keyed") / "data", minilm, api_key="s3cret")
    try:
        with TestClient(create_app(facet)) as c:
            yield c
    finally:
        facet.close()


def _stalled(client: TestClient, method: str, path: str, headers: dict[str, str],
             piece: bytes = b'{"query": "') -> tuple[list[dict], int]:
    """The app's answer to a body that stops after ``piece``, and how many times the app asked
    for the body."""
    asked = 0

    async def receive() -> dict:
        nonlocal asked
        asked += 1
        if asked == 1:
            return {"type": "http.request", "body": piece, "more_body": True}
        await anyio.sleep(30)  # the client stalls; well past the timeout below
        return {"type": "http.disconnect"}

    async def within() -> dict:
        with anyio.fail_after(5):
            return await receive()

    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    return asgi_call(client, method, path, raw, within), asked


def _status(sent: list[dict]) -> int:
    return next(m["status"] for m in sent if m["type"] == "http.response.start")


def _message(sent: list[dict]) -> str:
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return json.loads(body)["error"]["message"]


@pytest.mark.parametrize("headers", [
    {"content-type": "application/json", "transfer-encoding": "chunked"},
    {"content-type": "application/json", "content-length": "5000"},
    {"content-type": "application/json", "content-length": "5000",
     "authorization": "Bearer wrong"},
], ids=["chunked", "declared", "wrong-key"])
@pytest.mark.parametrize("path", ["/search", "/v1/embeddings", "/jobs", "/no/such/route"])
def test_without_the_key_no_body_is_read(keyed, path, headers) -> None:
    sent, asked = _stalled(keyed, "POST", path, headers)
    assert _status(sent) == 401, sent
    assert "FACET_API_KEY" in _message(sent)
    start = next(m for m in sent if m["type"] == "http.response.start")
    assert (b"www-authenticate", b"Bearer") in start["headers"]
    assert asked == 0  # not one piece of the body was read


def test_with_the_key_the_body_is_read(keyed) -> None:
    # The same stalled body with the key: the app reads it, waiting for the rest (the
    # timeout of ``_stalled`` ends that; whatever the app then answers, it is not a 401).
    sent, asked = _stalled(keyed, "POST", "/search", {"content-type": "application/json",
                                                      "content-length": "5000",
                                                      "authorization": "Bearer s3cret"})
    assert asked == 2 and _status(sent) != 401, (asked, sent)
    ok = keyed.post("/v1/embeddings", json={"input": "x", "model": "minilm"},
                    headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 200


def test_a_route_that_takes_no_key_still_answers_as_before(keyed) -> None:
    # /health takes no key: a POST to it is its 405, not a 401.
    sent, _ = _stalled(keyed, "POST", "/health", {"content-length": "10"})
    assert _status(sent) == 405, sent
    # And a request without a body is the route's own refusal, as it was.
    assert keyed.get("/collections").status_code == 401
    assert keyed.get("/no/such/route").status_code == 404


def test_the_route_that_answers_the_method_decides(minilm, tmp_path) -> None:
    """The first route matching the path decided, whatever its method: a keyed POST on a path
    whose GET takes no key had its body read before the key was checked (none such today:
    helper-542's review; this app adds one)."""
    from typing import Any

    from fastapi import Body, Depends

    from app.api.server import _require_key

    def posted(body: Any = Body(...)) -> dict:  # (a body: FastAPI reads it before the key)
        return {"posted": body}

    facet = serving_facet(tmp_path / "data", minilm, api_key="s3cret")
    try:
        app = create_app(facet)
        app.add_api_route("/health", posted, methods=["POST"], dependencies=[Depends(_require_key)])
        with TestClient(app) as c:
            sent, asked = _stalled(c, "POST", "/health", {"content-length": "10"})
            assert _status(sent) == 401 and asked == 0, sent
            assert c.get("/health").status_code == 200  # its GET still takes no key
    finally:
        facet.close()
