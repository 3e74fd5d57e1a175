"""``facet ui`` on its own, without a login, refuses what ``facet serve`` refuses before its routes.

Unguarded, a page of another site pointing a name of its own at the UI's port (DNS rebinding)
read the whole page config (185 kB) and uploaded files into the UI's Gradio, and any page could
post multipart uploads to it cross-site (no preflight for a form). Now a ``Host`` that is not an
IP address, ``localhost``, a ``FACET_API_ALLOWED_HOSTS`` name or the ``--host`` name is a 400
(``untrusted_host``), and a browser's write from another site a 403, unless the UI has a login.
Real Gradio servers on free ports (``launch_ui``), requests with httpx.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from .conftest import free_port

EVIL = "rebind.attacker.example"


@contextmanager
def _launched(tmp_path: Path, host: str = "127.0.0.1", **settings: object) -> Iterator[str]:
    pytest.importorskip("gradio")
    from app.core import Facet
    from app.settings import FacetSettings
    from ui.app import launch_ui

    facet = Facet.for_serving(FacetSettings(data_dir=tmp_path / "data", **settings))
    port = free_port()
    demo = launch_ui(facet, host=host, port=port, block=False)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        demo.close()
        facet.close()


def _upload(url: str, **headers: str):
    import httpx

    return httpx.post(f"{url}/gradio_api/upload", headers=headers, timeout=30,
                      files={"files": ("a.txt", b"hello", "text/plain")})


def test_a_ui_without_a_login_refuses_other_names_and_other_sites_writes(tmp_path) -> None:
    import httpx

    with _launched(tmp_path) as url:
        port = url.rsplit(":", 1)[1]
        assert httpx.get(url, timeout=30).status_code == 200
        assert httpx.get(url, headers={"host": f"localhost:{port}"}, timeout=30).status_code == 200
        refused = httpx.get(f"{url}/config", headers={"host": f"{EVIL}:{port}"}, timeout=30)
        assert refused.status_code == 400, refused.text[:200]
        error = refused.json()["error"]
        assert error["code"] == "untrusted_host"
        assert error["message"].startswith(f"host '{EVIL}' is refused: this UI has no login, so it "
                                           "answers only its IP addresses, localhost"), error
        assert "set FACET_UI_AUTH (or FACET_API_KEY), or list the name in FACET_API_ALLOWED_HOSTS" \
            in error["message"]
        rebound = _upload(url, host=f"{EVIL}:{port}", origin=f"http://{EVIL}:{port}")
        assert rebound.status_code == 400, rebound.text[:200]

        cross = _upload(url, origin=f"http://{EVIL}")
        assert cross.status_code == 403, cross.text[:200]
        assert cross.json()["error"]["code"] == "cross_site_request"
        assert "set FACET_UI_AUTH (or FACET_API_KEY), or list that site in FACET_CORS_ORIGINS" \
            in cross.json()["error"]["message"]
        # The page's own uploads (same origin) and a client without a browser's Origin go on.
        assert _upload(url, origin=url).status_code == 200
        assert _upload(url).status_code == 200


def test_listed_names_and_sites_are_answered(tmp_path) -> None:
    import httpx

    with _launched(tmp_path, api_allowed_hosts=["facet.lan"],
                   cors_origins=["https://app.example.com"]) as url:
        port = url.rsplit(":", 1)[1]
        assert httpx.get(f"{url}/config", headers={"host": f"facet.lan:{port}"},
                         timeout=30).status_code == 200
        assert _upload(url, origin="https://app.example.com").status_code == 200


def test_a_ui_with_a_login_leaves_names_to_the_login(tmp_path) -> None:
    """Behind a login the page is not open to a rebinding page (it has no session there), as
    `facet serve` with a key: a reverse proxy's domain name is answered (the login page)."""
    import httpx

    with _launched(tmp_path, ui_auth="ana:a-long-random-password") as url:
        port = url.rsplit(":", 1)[1]
        page = httpx.get(url, headers={"host": f"facet.example.org:{port}"}, timeout=30)
        assert page.status_code == 200, page.text[:200]


def test_the_host_name_the_ui_listens_on_is_answered(tmp_path) -> None:
    """Gradio checks its own start through the ``--host`` name: refused, the UI would not start."""
    import httpx

    name = socket.gethostname()
    try:
        address = socket.gethostbyname(name)
    except OSError:
        pytest.skip(f"this machine's name {name!r} does not resolve")
    if not address.startswith("127.") or name.lower() == "localhost":
        pytest.skip(f"this machine's name {name!r} is not a loopback name ({address})")
    with _launched(tmp_path, host=name) as url:
        port = url.rsplit(":", 1)[1]
        assert httpx.get(url, headers={"host": f"{name}:{port}"}, timeout=30).status_code == 200


def test_the_ui_on_its_own_behind_a_proxys_prefix_says_its_urls_with_it(tmp_path) -> None:
    import httpx

    with _launched(tmp_path, root_path="/facet") as url:
        config = httpx.get(f"{url}/config", timeout=30)
        assert config.status_code == 200, config.text[:200]
        assert config.json()["root"].endswith("/facet"), config.json()["root"]


def test_a_ui_with_a_login_still_refuses_another_sites_writes(tmp_path) -> None:
    """Gradio's login is a cookie (SameSite=None), which a browser sends with any page's
    request: a page of another site uploaded a file into a logged-in UI (the verification round
    of 2026-12-03). Names stay the login's (above); writes from another site are refused."""
    with _launched(tmp_path, ui_auth="ana:a-long-random-password") as url:
        cross = _upload(url, origin="http://elsewhere.example")
        assert cross.status_code == 403, cross.text[:200]
        error = cross.json()["error"]
        assert error["code"] == "cross_site_request"
        assert "the page's login is a cookie, which a browser sends with any page's request" in error["message"]
        assert _upload(url, origin=url).status_code != 403  # its own page: the login's to answer
        import httpx

        out = httpx.get(f"{url}/logout", headers={"sec-fetch-site": "cross-site"}, timeout=30)
        assert out.status_code == 403, out.text[:200]  # (Gradio's GET logout: every session)


def test_a_served_ui_behind_the_api_key_refuses_another_sites_writes(tmp_path, minilm) -> None:
    """`facet serve` with FACET_API_KEY: the API's key is a header no other site's page can send,
    the mounted UI's login a cookie it can: refused under /ui only."""
    from fastapi.testclient import TestClient

    from app.api import create_app
    from tests.app.api.conftest import serving_facet

    facet = serving_facet(tmp_path / "data", minilm, api_key="k3y")
    try:
        with TestClient(create_app(facet)) as client:
            cross = client.post("/ui/gradio_api/upload", headers={"origin": "http://elsewhere.example"},
                                files={"files": ("a.txt", b"hello", "text/plain")})
            assert cross.status_code == 403 and cross.json()["error"]["code"] == "cross_site_request"
            api = client.post("/jobs/999999/cancel", headers={"origin": "http://elsewhere.example",
                                                              "authorization": "Bearer k3y"})
            assert api.status_code == 404, api.text  # past the guard: the key is the API's check
            # Gradio logs out on a GET, every session of the user: another site's <img> did it
            # (the security review of the seventh session of 2026-12-06). Its own page's passes.
            for headers in ({"sec-fetch-site": "cross-site"},
                            {"origin": "http://elsewhere.example"}):
                out = client.get("/ui/logout", headers=headers, follow_redirects=False)
                assert out.status_code == 403, (headers, out.text[:200])
            own = client.get("/ui/logout", headers={"sec-fetch-site": "same-origin"},
                             follow_redirects=False)
            assert own.status_code != 403, own.text[:200]
    finally:
        facet.close()


def _cors_checks(url: str, ui: str) -> None:
    """A page on another port of this machine (``http://localhost:3001``) gets no CORS answer
    from the page: no preflight passes, no answer carries Access-Control-* headers."""
    import httpx

    page = "http://localhost:3001"
    read = httpx.get(f"{url}{ui}/config", headers={"origin": page}, timeout=30)
    assert read.status_code in (200, 401)  # (401: behind the login, not logged in here)
    assert not [h for h in read.headers if h.lower().startswith("access-control-")], read.headers
    preflight = httpx.options(f"{url}{ui}/gradio_api/upload", timeout=30, headers={
        "origin": page, "access-control-request-method": "POST",
        "access-control-request-headers": "x-forwarded-host"})
    assert preflight.status_code == 403, preflight.text
    assert not [h for h in preflight.headers if h.lower().startswith("access-control-")]


def test_no_page_of_another_origin_gets_a_cors_answer_from_the_ui(tmp_path, minilm) -> None:
    """Gradio's own CORS middleware answered any localhost page's preflight with its origin,
    credentials and every header it asked for allowed (docs: FACET_CORS_ORIGINS unset, no CORS
    headers): a page on another port read a logged-in UI's config (the allowed roots' paths)
    and, sending X-Forwarded-Host (trusted from a proxy), uploaded and indexed files into it
    (the security review of 2026-12-06). `facet ui` on its own and the UI under `facet serve`,
    with a login and without; with FACET_CORS_ORIGINS, the listed site alone, as the API."""
    import httpx
    from fastapi.testclient import TestClient

    from app.api import create_app
    from tests.app.api.conftest import serving_facet

    with _launched(tmp_path / "a") as url:
        _cors_checks(url, "")
    with _launched(tmp_path / "b", ui_auth="ana:a-long-random-password") as url:
        _cors_checks(url, "")
    for n, settings in enumerate(({}, {"api_key": "k3y"})):
        facet = serving_facet(tmp_path / f"s{n}" / "data", minilm, **settings)
        try:
            with TestClient(create_app(facet)) as client:
                read = client.get("/ui/config", headers={"origin": "http://localhost:3001"})
                assert not [h for h in read.headers if h.lower().startswith("access-control-")]
                preflight = client.options("/ui/gradio_api/upload", headers={
                    "origin": "http://localhost:3001", "access-control-request-method": "POST",
                    "access-control-request-headers": "x-forwarded-host"})
                assert preflight.status_code == 403
                assert not [h for h in preflight.headers if h.lower().startswith("access-control-")]
        finally:
            facet.close()
    listed = "http://localhost:3000"
    # The listed site embeds the page: Gradio's front end sends x-gradio-user with each event
    # (queue/join), which the API's header list refused, and the embedded page never filled.
    gradio = {"origin": listed, "access-control-request-method": "POST",
              "access-control-request-headers": "content-type,x-gradio-user"}
    with _launched(tmp_path / "c", cors_origins=[listed]) as url:
        ok = httpx.options(f"{url}/gradio_api/upload", timeout=30, headers={
            "origin": listed, "access-control-request-method": "POST"})
        assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == listed
        join = httpx.options(f"{url}/gradio_api/queue/join", timeout=30, headers=gradio)
        assert join.status_code == 200, join.text
        assert "x-gradio-user" in join.headers["access-control-allow-headers"].lower()
        other = httpx.options(f"{url}/gradio_api/upload", timeout=30, headers={
            "origin": "http://localhost:3001", "access-control-request-method": "POST",
            "access-control-request-headers": "x-forwarded-host"})
        assert other.status_code == 400 and "access-control-allow-origin" not in other.headers
    facet = serving_facet(tmp_path / "s-listed" / "data", minilm, cors_origins=[listed])
    try:
        with TestClient(create_app(facet)) as client:
            join = client.options("/ui/gradio_api/queue/join", headers=gradio)
            assert join.status_code == 200, join.text
            assert join.headers["access-control-allow-origin"] == listed
    finally:
        facet.close()
