"""Gradio keeps server-side state per page load (its own copy of every component's config,
the results shown): 10,000 sessions by default, ~0.3 MB each, and a closed tab's were never
freed. The page caps them at ``ui.app.SESSION_CAPACITY``, least recently used out first, and a
page whose session went still works. Driven through Gradio's own HTTP API (the events a page
load and a search send), on the session's ``facet serve`` facade (tests/ui/conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import COLLECTION, PLANTED_ID, PLANTED_INSTRUCTION, PLANTED_QUERY

CAPACITY = 3


def _event(client: Any, api_name: str, data: list[Any], session: str) -> str:
    """One event of page ``session`` (its session hash, as the browser sends it): the event
    stream's text."""
    base = f"/ui/gradio_api/call/{api_name}"
    response = client.post(base, json={"data": data, "session_hash": session})
    assert response.status_code == 200, response.text
    return str(client.get(f"{base}/{response.json()['event_id']}").text)


def _load(client: Any, session: str) -> None:
    """What a page load asks first: the collection pickers."""
    assert COLLECTION in _event(client, "pickers", [None] * 5, session)


def _search(client: Any, session: str) -> str:
    return _event(client, "search", [PLANTED_QUERY, PLANTED_INSTRUCTION, COLLECTION, "minilm", 5,
                                     "", False, "minilm", False, "dense"], session)


def test_sessions_are_capped_least_recently_used_first_and_an_evicted_page_still_searches(
        ui_server, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("gradio")
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from ui import app as ui_app

    monkeypatch.setattr(ui_app, "SESSION_CAPACITY", CAPACITY)
    app = ui_app.mount_ui(FastAPI(), ui_server.facet, ui_server.facet.settings)
    held = next(r.app for r in app.routes if getattr(r, "path", "") == "/ui").state_holder
    with TestClient(app) as client:
        for page in ("page-0", "page-1", "page-2"):
            _load(client, page)
        # page-0 is in use (a search), so the next load evicts page-1, the one idle longest.
        assert PLANTED_ID in _search(client, "page-0")
        _load(client, "page-3")
        assert list(held.session_data) == ["page-2", "page-0", "page-3"]
        for i in range(4, 10):
            _load(client, f"page-{i}")
        assert len(held.session_data) == CAPACITY
        assert "page-0" not in held.session_data

        # A page loaded before its session went: its search still finds the planted document
        # (Gradio starts the session afresh from what the page sends), and the cap holds.
        result = _search(client, "page-0")
        assert "event: complete" in result and PLANTED_ID in result, result
        assert len(held.session_data) == CAPACITY and "page-0" in held.session_data


def test_the_standalone_page_has_the_same_cap(ui_server, monkeypatch: pytest.MonkeyPatch) -> None:
    """``launch()`` sets the Blocks' capacity from its own argument (default 10,000)."""
    pytest.importorskip("gradio")
    from ui import app as ui_app

    from .conftest import free_port

    monkeypatch.setattr(ui_app, "SESSION_CAPACITY", CAPACITY)
    demo = ui_app.launch_ui(ui_server.facet, port=free_port(), block=False)
    try:
        assert demo.server_app.state_holder.capacity == CAPACITY
    finally:
        demo.close()


def test_the_standalone_page_starts_when_its_first_start_check_is_refused(
        ui_server, monkeypatch: pytest.MonkeyPatch) -> None:
    """Gradio's start-up check is one HEAD of the page; refused (a loaded machine: the server
    thread not accepting yet), ``launch`` stopped with "When localhost is not accessible, a
    shareable link must be created" (a fresh clone's run of this file, the fifth session of
    2026-12-05). Two refusals now delay the start; the page answers."""
    pytest.importorskip("gradio")
    import httpx
    from gradio import networking

    from ui import app as ui_app

    from .conftest import free_port

    head = networking.httpx.head
    refused: list[str] = []

    def first_refused(url: str, **kwargs: object) -> httpx.Response:
        if len(refused) < 2:
            refused.append(url)
            raise httpx.ConnectError("connection refused (the test's)")
        return head(url, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(networking.httpx, "head", first_refused)
    demo = ui_app.launch_ui(ui_server.facet, port=free_port(), block=False)
    try:
        assert len(refused) == 2
        assert httpx.get(demo.local_url, timeout=30).status_code == 200
    finally:
        demo.close()
    assert networking.url_ok is not None and networking.url_ok.__name__ == "url_ok"  # put back
