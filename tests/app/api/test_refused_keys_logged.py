"""Requests refused for a missing or wrong API key, and failed UI logins, are WARNINGs.

They were in uvicorn's INFO access lines only (among every other request), and a failed UI
login was not logged at all: an operator could not see a key or a user name being guessed.
Now the first refusal from a client is a WARNING naming it, the method and path, and later
ones in the same window are counted in one more line; a failed login names the user name
tried, never the password."""

from __future__ import annotations

import logging

from fastapi.testclient import TestClient

from app.api import create_app
from app.api.server import _RefusedKeys

from .conftest import serving_facet


def _warnings(caplog, logger: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == logger and r.levelno == logging.WARNING]


def test_a_refused_key_is_a_warning_naming_the_client_once_a_window(minilm, tmp_path,
                                                                     caplog) -> None:
    facet = serving_facet(tmp_path / "data", minilm, api_key="s3cret-key")
    try:
        with caplog.at_level(logging.INFO), TestClient(create_app(facet)) as c:
            assert c.get("/collections", headers={"Authorization": "Bearer guess-1"}
                         ).status_code == 401
            for n in range(4):
                assert c.get(f"/collections/c{n}", headers={"Authorization": f"Bearer g{n}"}
                             ).status_code == 401
            assert c.get("/collections", headers={"Authorization": "Bearer s3cret-key"}
                         ).status_code == 200
    finally:
        facet.close()
    # One WARNING in all for the five refusals (app.api.errors logged each at WARNING too).
    everywhere = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(everywhere) == 1, [r.getMessage() for r in everywhere]
    lines = _warnings(caplog, "app.api.server")
    assert lines == ["a request without the right API key from testclient: GET /collections "
                     "(401; others from it are counted for 60 s)"], lines
    assert not any("guess-1" in r.getMessage() or "s3cret" in r.getMessage()
                   for r in caplog.records)


def test_the_window_counts_the_refusals_it_did_not_log(caplog, monkeypatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr("app.api.server.time.monotonic", lambda: clock[0])
    refused = _RefusedKeys(window_s=60)
    with caplog.at_level(logging.WARNING):
        refused.note("10.0.0.5", "GET", "/collections")
        for _ in range(3):
            clock[0] += 10
            refused.note("10.0.0.5", "POST", "/search")
        refused.note("10.0.0.6", "GET", "/jobs")  # another client: its own first line
        clock[0] += 31  # the window of 10.0.0.5 is over
        refused.note("10.0.0.5", "GET", "/info")
    assert _warnings(caplog, "app.api.server") == [
        "a request without the right API key from 10.0.0.5: GET /collections (401; others "
        "from it are counted for 60 s)",
        "a request without the right API key from 10.0.0.6: GET /jobs (401; others from it "
        "are counted for 60 s)",
        "3 more requests without the right API key from 10.0.0.5 in the last 60 s; latest: "
        "GET /info"]


def test_clients_remembered_are_bounded(monkeypatch) -> None:
    monkeypatch.setattr(_RefusedKeys, "MAX_CLIENTS", 3)
    refused = _RefusedKeys()
    for n in range(10):
        refused.note(f"10.0.0.{n}", "GET", "/")
    assert list(refused._clients) == ["10.0.0.7", "10.0.0.8", "10.0.0.9"]


def test_a_failed_ui_login_is_a_warning_without_the_password(caplog) -> None:
    from app.settings import FacetSettings
    from ui.app import ui_auth

    pairs = ui_auth(FacetSettings(ui_auth="ana:s3cret"))
    key = ui_auth(FacetSettings(api_key="the-key"))
    assert pairs is not None and key is not None
    with caplog.at_level(logging.INFO):
        assert pairs("ana", "s3cret") and key("anyone", "the-key")
        assert not pairs("ana", "wrong-pw") and not key("mallory", "guess")
        assert not pairs("x" * 100, "pw")
    assert _warnings(caplog, "ui.app") == [
        "a UI login failed for user name 'ana' from an unknown client",
        "a UI login failed for user name 'mallory' from an unknown client",
        f"a UI login failed for user name '{'x' * 64}…' from an unknown client"]
    assert not any("wrong-pw" in r.getMessage() or "guess" in r.getMessage()
                   for r in caplog.records)


def test_a_failed_login_on_the_mounted_page_names_the_client(minilm, tmp_path, caplog) -> None:
    """Through the page's own /login route (``facet serve``'s /ui): the line names the client's
    address (Gradio calls the check with the user name and password only), as fail2ban needs."""
    facet = serving_facet(tmp_path / "data", minilm, ui_auth="ana:s3cret-pw")
    try:
        with caplog.at_level(logging.INFO), TestClient(create_app(facet)) as c:
            wrong = c.post("/ui/login", data={"username": "ana", "password": "guess-pw"})
            right = c.post("/ui/login", data={"username": "ana", "password": "s3cret-pw"})
    finally:
        facet.close()
    assert wrong.status_code >= 400 and right.status_code < 400, (wrong, right)
    assert _warnings(caplog, "ui.app") == ["a UI login failed for user name 'ana' from testclient"]
    assert not any("guess-pw" in r.getMessage() or "s3cret-pw" in r.getMessage()
                   for r in caplog.records)
