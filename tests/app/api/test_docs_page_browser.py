"""``/docs`` in a real browser (Debian's chromium, as the UI's tests drive it), with Swagger UI's
CDN made unreachable, silent, or answering with a stand-in script by Playwright's routing: the
machine's own network is never asked, whatever it can reach.

FastAPI's page loaded Swagger UI from cdn.jsdelivr.net and stayed blank without internet access,
where the embedded default runs. Now the page shows the server's own reference, read from
/openapi.json, when the script fails or has not come within ``SWAGGER_WAIT_MS``; Swagger UI where
it loads. A real uvicorn on a free port (no model is loaded for these pages)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from app.api import docs_page
from app.api.server import create_app
from app.settings import FacetSettings
from tests.app.served import free_port
from tests.ui.test_browser import CHROMIUM, FLAGS

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary: install Debian's "
                                                         "with `apt-get install -y chromium`")

CDN = "https://cdn.jsdelivr.net/**"
# Swagger UI's part in the page: a stand-in that says what it was given.
STAND_IN = """window.SwaggerUIBundle = function (config) {
  document.getElementById("swagger-ui").textContent = "swagger stand-in for " + config.url;
};
window.SwaggerUIBundle.presets = {apis: {}};
window.SwaggerUIBundle.SwaggerUIStandalonePreset = {};"""


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[str]:
    import uvicorn

    settings = FacetSettings(data_dir=tmp_path_factory.mktemp("docs") / "data", ui_mount=False,
                             api_key="s3cret")
    server = uvicorn.Server(uvicorn.Config(create_app(settings=settings), host="127.0.0.1",
                                           port=free_port(), log_level="warning",
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, name="docs-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    url = f"http://127.0.0.1:{server.config.port}"
    yield url
    server.should_exit = True
    thread.join(timeout=30)


@contextmanager
def _opened(url: str, cdn: Any, fragment: str = "") -> Iterator[Any]:
    """A browser page on ``url``/docs whose requests to the CDN ``cdn`` answers (a route
    handler)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        page = browser.new_page()
        page.set_default_timeout(30_000)
        page.route(CDN, cdn)
        page.goto(f"{url}/docs{fragment}", wait_until="domcontentloaded")  # ("load" waits on the CDN)
        yield page
        browser.close()


def test_without_the_cdn_the_page_is_the_servers_own_reference(served) -> None:
    with _opened(served, lambda route: route.abort("internetdisconnected")) as page:
        page.wait_for_selector("#facet-reference details", state="attached")
        assert page.is_hidden("#facet-loading")
        why = page.text_content("#facet-reference .why") or ""
        assert "could not be loaded from cdn.jsdelivr.net" in why, why
        heading = page.text_content("#facet-reference h1") or ""
        assert heading.startswith("Facet "), heading
        spec = httpx.get(f"{served}/openapi.json", timeout=30).json()
        shown = page.eval_on_selector_all(
            "#facet-reference section > details[id^='op-']",
            "ds => ds.map(d => d.querySelector('summary').textContent)")
        declared = [f"{m.upper()}{path}" for path, ops in spec["paths"].items() for m in ops]
        assert sorted(s.split(" \u2014 ")[0] for s in shown) == sorted(declared)
        # One operation opened: its parameters, its body's schema linked, its answers.
        search = page.locator("#op-" + spec["paths"]["/search"]["post"]["operationId"])
        assert search.locator("summary").inner_text().startswith("POST/search")
        search.locator("summary").click()
        assert "Needs Authorization: Bearer" in search.inner_text()
        link = search.locator("a[href='#schema-SearchBody']").first
        assert link.is_visible()
        assert "422" in search.inner_text() and "401" in search.inner_text()
        link.click()  # opens the schema it names
        schema = page.locator("#schema-SearchBody")
        page.wait_for_function("document.getElementById('schema-SearchBody').open")
        assert "instruction" in schema.inner_text() and "query" in schema.inner_text()
        # The limits of an optional field (pydantic keeps them inside its anyOf) are shown.
        jobs = page.locator("#op-" + spec["paths"]["/jobs"]["get"]["operationId"])
        jobs.locator("summary").click()
        row = jobs.locator("tr", has=page.locator("td", has_text="collection")).first
        assert "maxLength 128" in row.inner_text() and "pattern" in row.inner_text()
        # Every schema the spec has is there, by name.
        names = page.eval_on_selector_all("#schemas > details", "ds => ds.map(d => d.id)")
        assert names == [f"schema-{n}" for n in sorted(spec["components"]["schemas"])]


def test_a_cdn_that_does_not_answer_gives_the_reference_after_the_wait(served) -> None:
    held: list[Any] = []  # (never answered while the page is looked at)
    with _opened(served, lambda route: held.append(route)) as page:
        page.wait_for_selector("#facet-reference details", state="attached",
                               timeout=docs_page.SWAGGER_WAIT_MS + 20_000)
        assert "had not loaded from cdn.jsdelivr.net within 4 s" in (
            page.text_content("#facet-reference .why") or "")
        assert held  # the script was asked for


def test_where_swagger_ui_loads_it_is_the_page(served, monkeypatch) -> None:
    monkeypatch.setattr(docs_page, "SWAGGER_WAIT_MS", 60_000)  # (a loaded machine's routing)
    def cdn(route: Any) -> None:
        if route.request.url.endswith(".js"):
            route.fulfill(status=200, content_type="text/javascript", body=STAND_IN)
        else:
            route.fulfill(status=200, content_type="text/css", body="")

    with _opened(served, cdn) as page:
        page.wait_for_function("document.getElementById('swagger-ui').textContent.length > 0")
        assert page.text_content("#swagger-ui") == "swagger stand-in for /openapi.json"
        assert page.is_hidden("#facet-reference") and page.is_hidden("#facet-loading")
        assert page.locator("link[rel=stylesheet][href*='swagger-ui.css']").count() == 1


def test_a_link_to_a_schema_opens_it_on_load_and_when_followed_again(served) -> None:
    with _opened(served, lambda route: route.abort("internetdisconnected"), "#schema-ClusterBody") as page:
        page.wait_for_function("(document.getElementById('schema-ClusterBody') || {}).open")
        assert page.evaluate("document.activeElement.closest('#schema-ClusterBody') !== null")
        texts = page.locator("#schema-ClusterBody tr", has=page.locator("td", has_text="texts")).first
        assert "minItems 2" in texts.inner_text()
        page.evaluate("document.getElementById('schema-ClusterBody').open = false")
        page.locator("a[href='#schema-ClusterBody']").first.evaluate("a => a.click()")
        page.wait_for_function("document.getElementById('schema-ClusterBody').open")


def test_a_swagger_ui_that_fails_to_start_gives_the_reference(served, monkeypatch) -> None:
    monkeypatch.setattr(docs_page, "SWAGGER_WAIT_MS", 60_000)  # (the reference says why)
    def cdn(route: Any) -> None:
        route.fulfill(status=200, content_type="text/javascript",
                      body="window.SwaggerUIBundle = function () { throw new Error('boom'); };"
                           " window.SwaggerUIBundle.presets = {apis: {}};")

    with _opened(served, cdn) as page:
        page.wait_for_selector("#facet-reference details", state="attached")
        assert "failed to start (boom)" in (page.text_content("#facet-reference .why") or "")


def test_a_query_string_on_the_page_is_no_error(served) -> None:
    """The app refuses query parameters a route does not take (400); FastAPI's page was outside
    that check, and a link carrying one (a proxy's, a tracker's) opened it."""
    assert httpx.get(f"{served}/docs", params={"utm_source": "x"}, timeout=30).status_code == 200


def test_the_page_reads_the_spec_under_the_root_path() -> None:
    html = docs_page.docs_html("/facet/openapi.json", "Facet")
    assert 'const SPEC = "/facet/openapi.json"' in html
    tricky = docs_page.docs_html('/x</script><!--<script><b>"&/openapi.json', "T<i>")
    script = tricky.split("<script>", 1)[1].rsplit("</script>", 1)[0]
    assert "<" not in script.split("const SPEC = ", 1)[1].split(",", 1)[0]
    assert "<title>T&lt;i> - API</title>" in tricky
