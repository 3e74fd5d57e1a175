"""A server without FACET_API_KEY, reached by a browser (the security exploration of the sixth
session of 2026-12-02): a page of another site could point a name of its own at the server (DNS
rebinding) and send it same-origin requests, indexing and reading back a file; and any page
could cancel jobs (a form POST to /jobs/ID/cancel needs no preflight) or push files into the
UI's Gradio, only uploads being checked. The Host must be an IP address, localhost or a name
listed in FACET_API_ALLOWED_HOSTS; a browser's write from another site is refused on every
route. Real app, real SQLite and store; requests through Starlette's TestClient."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from app.api import create_app

from .conftest import serving_facet

EVIL = "rebind.attacker.example:8000"


def _client(tmp_path: Path, minilm, **settings) -> tuple[TestClient, object]:
    facet = serving_facet(tmp_path / "data", minilm, **settings)
    return TestClient(create_app(facet)), facet


def test_a_keyless_server_answers_only_its_addresses_localhost_and_listed_names(tmp_path, minilm) -> None:
    client, facet = _client(tmp_path, minilm, api_allowed_hosts=["facet.lan"])
    try:
        with client:
            for host in ("127.0.0.1:8000", "localhost:8000", "[::1]:8000", "10.0.0.5", "facet.lan:8000",
                         "FACET.lan", "app.localhost:8000"):
                assert client.get("/collections", headers={"host": host}).status_code == 200, host
            refused = client.get("/collections", headers={"host": EVIL})
            assert refused.status_code == 400, refused.text
            error = refused.json()["error"]
            assert error["code"] == "untrusted_host"
            assert error["message"].startswith("host 'rebind.attacker.example' is refused: this server has no "
                                               "FACET_API_KEY"), error
            assert client.post("/search", json={"query": "card", "collection": "x"},
                               headers={"host": EVIL}).status_code == 400
    finally:
        facet.close()  # type: ignore[attr-defined]


def test_a_names_root_dot_is_the_same_name(tmp_path, minilm) -> None:
    """``localhost.`` and ``facet.lan.`` (fully qualified, as a resolver may be given them) were
    refused where ``localhost`` and ``facet.lan`` are answered; a listed name with its dot too."""
    client, facet = _client(tmp_path, minilm, api_allowed_hosts=["facet.lan", "team.example."])
    try:
        with client:
            for host in ("localhost.:8000", "localhost.", "app.localhost.", "facet.lan.:8000", "team.example",
                         "team.example.:8000"):
                assert client.get("/collections", headers={"host": host}).status_code == 200, host
            for host in ("rebind.attacker.example.:8000", "localhost..", "lan.", "."):
                answer = client.get("/collections", headers={"host": host})
                assert answer.status_code == 400 and answer.json()["error"]["code"] == "untrusted_host", host
    finally:
        facet.close()  # type: ignore[attr-defined]


def test_with_a_key_or_a_star_any_name_is_answered(tmp_path, minilm) -> None:
    for settings in ({"api_key": "k"}, {"api_allowed_hosts": ["*"]}):
        client, facet = _client(tmp_path / str(len(settings)) / next(iter(settings)), minilm, **settings)
        try:
            with client:
                answer = client.get("/health", headers={"host": EVIL})
                assert answer.status_code == 200, (settings, answer.text)
        finally:
            facet.close()  # type: ignore[attr-defined]


def test_a_write_from_another_sites_page_is_refused_on_every_route(tmp_path, minilm) -> None:
    client, facet = _client(tmp_path, minilm)
    try:
        with client:
            # A form's POST to cancel a job: refused before the route (it answered the job).
            cancel = client.post("/jobs/1/cancel", headers={"origin": "http://evil.example"})
            assert cancel.status_code == 403, cancel.text
            assert cancel.json()["error"]["code"] == "cross_site_request"
            assert cancel.json()["error"]["message"].startswith(
                "a request from a page of another site (http://evil.example) is refused")
            upload = client.post("/collections/c/uploads", files={"files": ("a.txt", b"words")},
                                 headers={"origin": "http://evil.example"})
            assert upload.status_code == 403 and upload.json()["error"]["message"].startswith("an upload from")
            # The server's own pages (its scheme may differ behind a TLS proxy), and reads: as before.
            own = client.post("/jobs/1/cancel", headers={"origin": "https://testserver"})
            assert own.status_code == 404, own.text  # no job 1: the route answered
            assert client.get("/collections", headers={"origin": "http://evil.example"}).status_code == 200
    finally:
        facet.close()  # type: ignore[attr-defined]
