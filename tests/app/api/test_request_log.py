"""What ``facet serve`` logs of its requests: the slow ones with their duration, texts and
client; who submitted, cancelled or deleted what; a client gone mid-body as a disconnect.

Before: an 89 s clustering logged only uvicorn's ``"POST /cluster HTTP/1.1" 200 OK``; ``job N
queued``, ``job N: cancellation asked`` and ``deleted collection X`` said nobody; a client that
dropped mid-body was logged as a 400 of its own ("the request body could not be read as JSON
(ClientDisconnect)"). Real parts: a served Facet over a temp data folder (the session's minilm).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api import create_app, server
from app.core import Facet
from tests.app.api.conftest import asgi_call, serving_facet

KEY = "s3cret-request-log-key-0123"


@pytest.fixture(scope="module")
def facet(minilm, tmp_path_factory) -> Iterator[Facet]:
    folder = tmp_path_factory.mktemp("reqlog")
    notes = folder / "notes"
    notes.mkdir()
    (notes / "a.txt").write_text("My card was charged twice for the same coffee.\n")
    (notes / "b.txt").write_text("How do I reset the PIN of my debit card?\n")
    facet = serving_facet(folder / "data", minilm, ui_mount=False, api_key=KEY)
    facet.index(notes, "notes")
    facet.index(notes, "doomed")
    yield facet
    facet.close()


@pytest.fixture(scope="module")
def client(facet) -> Iterator[TestClient]:
    with TestClient(create_app(facet), headers={"Authorization": f"Bearer {KEY}"}) as c:
        yield c


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "app.api.server"]


def test_a_slow_request_is_logged_with_its_duration_texts_and_client(client, caplog,
                                                                    monkeypatch) -> None:
    caplog.set_level(logging.INFO, logger="app.api.server")
    assert client.get("/health").status_code == 200  # fast: not logged
    assert not [line for line in _lines(caplog) if line.startswith("GET /health")]
    monkeypatch.setattr(server, "SLOW_REQUEST_S", 0.0, raising=False)  # every request is "slow"
    texts = ["card charged twice", "reset my PIN", "card declined abroad", "new PIN please"]
    assert client.post("/cluster", json={"instruction": "What is asked?", "texts": texts,
                                         "k": 2}).status_code == 200
    assert client.post("/search", json={"query": "card", "collection": "notes",
                                        "k": 1}).status_code == 200
    assert client.post("/v1/embeddings", json={"model": "minilm", "input": texts[:3]}).status_code == 200
    lines = _lines(caplog)
    cluster = next(line for line in lines if line.startswith("POST /cluster "))
    assert cluster.startswith("POST /cluster answered 200 in ") and " s (4 texts)" in cluster
    assert cluster.endswith("client testclient"), cluster
    assert any(line.startswith("POST /search answered 200 in ") and "(1 text)" in line
               for line in lines), lines
    assert any(line.startswith("POST /v1/embeddings answered 200 in ") and "(3 texts)" in line
               for line in lines), lines
    assert KEY not in caplog.text


def test_jobs_and_deletions_are_logged_with_their_client(client, facet, caplog,
                                                         monkeypatch) -> None:
    caplog.set_level(logging.INFO, logger="app.api.server")
    notes = Path(facet.settings.data_dir).parent / "notes"
    submitted = client.post("/jobs", json={"source": str(notes), "collection": "notes"})
    assert submitted.status_code == 202, submitted.text
    job = submitted.json()["id"]
    # The job may end before a cancel reaches it (400): the cancel's answer is the facade's.
    monkeypatch.setattr(facet, "cancel_job", lambda job_id, collection=None: facet.job(job_id))
    assert client.post(f"/jobs/{job}/cancel").status_code == 200
    assert client.delete("/collections/doomed").status_code == 200
    lines = _lines(caplog)
    assert f"job {job} queued by testclient (collection 'notes')" in lines, lines
    assert f"job {job}: cancellation asked by testclient" in lines, lines
    assert "deleted collection doomed (by testclient)" in lines, lines
    assert KEY not in caplog.text


def test_a_client_gone_mid_body_is_a_disconnect_not_a_400(client, caplog) -> None:
    caplog.set_level(logging.DEBUG, logger="app.api")
    parts = [{"type": "http.request", "body": b'{"query": "card", "coll', "more_body": True},
             {"type": "http.disconnect"}]

    async def receive() -> Any:
        return parts.pop(0) if parts else {"type": "http.disconnect"}

    sent = asgi_call(client, "POST", "/search",
                     [(b"content-type", b"application/json"), (b"content-length", b"400"),
                      (b"authorization", f"Bearer {KEY}".encode())], receive)
    said = [r.getMessage() for r in caplog.records if r.name.startswith("app.api")]
    assert not [line for line in said if "answered 400" in line], said
    assert "POST /search: the client disconnected before its request body was read; nothing " \
           "was done" in said, said
    assert [m["status"] for m in sent if m["type"] == "http.response.start"] != [400]
