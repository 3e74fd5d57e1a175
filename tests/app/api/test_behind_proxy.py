"""`facet serve` behind a reverse proxy (the exploration of 2026-12-03): under a path prefix
(``FACET_ROOT_PATH`` / ``--root-path``, which uvicorn is given) the UI's own URLs, /docs and the
Location and Link headers carry it (they pointed at the proxy's root: 404s, the UI's queue and
login among them); behind a proxy that passes its upstream as ``Host`` and the client's in
``X-Forwarded-Host``, the page's own writes are not taken for another site's; a host name
allowed with its port matches. A real uvicorn server on a free port, requests with httpx, as a
proxy that removed the prefix would send them."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.api import create_app
from app.commands.demo import SAMPLE_FILE

from .conftest import serving_facet

PREFIX = "/facet"


@pytest.fixture(scope="module")
def served(minilm, tmp_path_factory) -> Iterator[str]:
    import socket

    import uvicorn

    facet = serving_facet(tmp_path_factory.mktemp("proxy") / "data", minilm, root_path=PREFIX + "/")
    assert facet.settings.root_path == PREFIX
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(facet), host="127.0.0.1", port=port,
                                           log_level="warning", root_path=facet.settings.root_path))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        facet.close()


def test_location_and_link_headers_carry_the_prefix(served, tmp_path: Path) -> None:
    made = []
    for name in ("p1", "p2"):
        answer = httpx.post(f"{served}/jobs", json={"source": str(SAMPLE_FILE), "collection": name},
                            timeout=60)
        assert answer.status_code == 202, answer.text
        job = answer.json()["id"]
        assert answer.headers["location"] == f"{PREFIX}/jobs/{job}"
        made.append(job)
    deadline = time.monotonic() + 120
    for job in made:  # (unfinished jobs are all listed on a first page)
        while httpx.get(f"{served}/jobs/{job}", timeout=30).json()["state"] in ("queued", "running"):
            assert time.monotonic() < deadline, "the jobs did not end"
            time.sleep(0.2)
    page = httpx.get(f"{served}/jobs", params={"limit": 1}, timeout=30)
    assert page.status_code == 200, page.text
    newest = page.json()[0]["id"]
    assert page.headers["link"] == f'<{PREFIX}/jobs?limit=1&before={newest}>; rel="next"'
    documents = httpx.get(f"{served}/collections/p1/documents", params={"limit": 1}, timeout=30)
    assert documents.headers["link"].startswith(f"<{PREFIX}/collections/p1/documents?limit=1&after=")


def test_the_docs_and_the_ui_point_under_the_prefix(served) -> None:
    docs = httpx.get(f"{served}/docs", timeout=30)
    assert docs.status_code == 200 and f'const SPEC = "{PREFIX}/openapi.json"' in docs.text
    pytest.importorskip("gradio")
    config = httpx.get(f"{served}/ui/config", timeout=30)
    assert config.status_code == 200, config.text[:200]
    assert config.json()["root"].endswith(f"{PREFIX}/ui"), config.json()["root"]


def test_a_proxys_forwarded_host_lets_the_pages_own_writes_through(served) -> None:
    """nginx passes its upstream as Host by default (127.0.0.1:8000) and the client's name in
    X-Forwarded-Host: the UI's own writes were refused as another site's (403)."""
    public = "intranet.example:8443"
    own = httpx.post(f"{served}/jobs/999999/cancel", timeout=30,
                     headers={"x-forwarded-host": public, "origin": f"https://{public}"})
    assert own.status_code == 404, own.text  # past the guard: no such job
    other = httpx.post(f"{served}/jobs/999999/cancel", timeout=30,
                       headers={"x-forwarded-host": public, "origin": "https://elsewhere.example"})
    assert other.status_code == 403 and other.json()["error"]["code"] == "cross_site_request"


def test_an_allowed_host_given_with_its_port_matches(minilm, tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    facet = serving_facet(tmp_path / "data", minilm, api_allowed_hosts=["Intranet.Example:8443"])
    try:
        assert facet.settings.api_allowed_hosts == ["intranet.example"]
        with TestClient(create_app(facet)) as client:
            answer = client.get("/collections", headers={"host": "intranet.example:8443"})
            assert answer.status_code == 200, answer.text
    finally:
        facet.close()


@pytest.mark.parametrize(("given", "kept"), [("/facet/", "/facet"), ("", ""), ("/", ""), (" /a/b ", "/a/b")])
def test_the_root_path_setting_is_read_as_a_path(given: str, kept: str) -> None:
    from app.settings import FacetSettings

    assert FacetSettings(root_path=given).root_path == kept


def test_facet_serve_refuses_a_root_path_that_is_no_path() -> None:
    from typer.testing import CliRunner

    from app.cli import cli

    result = CliRunner().invoke(cli, ["serve", "--root-path", "facet", "--port", "1"])
    assert result.exit_code == 2, result.output
    assert "--root-path 'facet' is not a URL path" in result.output


def test_facet_serve_gives_uvicorn_the_root_path(tmp_path: Path) -> None:
    from tests.app.served import facet_serve

    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "FACET_ROOT_PATH": "/facet",
           "FACET_UI_MOUNT": "false", "FACET_DEFAULT_EMBEDDER": "minilm"}
    with facet_serve(env, start_s=120) as url:
        docs = httpx.get(f"{url}/docs", timeout=30)
    assert docs.status_code == 200 and 'const SPEC = "/facet/openapi.json"' in docs.text, docs.text[:500]
