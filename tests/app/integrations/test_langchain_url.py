"""FacetRetriever's ``base_url``: one without http(s):// is refused when the retriever is made
(it was taken, and each search then said no Facet server answered, with the server running),
and a server at it that is not Facet (``python -m http.server``) is named as such in one line
(the message was its HTML error page). A real ``http.server`` on a free port; no facet serve."""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

pytest.importorskip("langchain_core")

from app.errors import FacetError, InvalidRequestError, NotFoundError
from app.integrations.langchain import FacetRetriever

from ..web_stub import QuietHandler, serving

EXAMPLE = "e.g. http://127.0.0.1:8000"


@pytest.mark.parametrize(
    ("url", "example"),
    [
        ("127.0.0.1:28801", "e.g. http://127.0.0.1:28801"),  # the scheme left out
        ("localhost:8000", "e.g. http://localhost:8000"),
        ("ftp://x", EXAMPLE),
        ("http://", EXAMPLE),
        ("http://127.0.0.1:abc", EXAMPLE),
        ("", EXAMPLE),
    ],
)
def test_a_base_url_without_http_is_refused_when_made(url, example) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        FacetRetriever(collection="notes", base_url=url)
    assert str(refused.value) == (
        f"FacetRetriever setting base_url={url!r}: give the server's URL with http:// or https://, {example}"
    )


def test_http_and_https_urls_are_taken() -> None:
    for url in ("http://127.0.0.1:8000", "https://facet.example.org/v1/", "HTTP://[::1]:8000"):
        assert FacetRetriever(collection="notes", base_url=url).base_url == url


class _Page(BaseHTTPRequestHandler):
    """Answers a POST to /search 200 with a web page, any other 404 with one (a server that
    is not Facet, e.g. a site)."""

    def do_POST(self) -> None:
        body = b"<html><body>hello</body></html>"
        self.send_response(200 if self.path == "/search" else 404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[str]:
    """``python -m http.server``'s handler: a POST is 501 with an HTML page."""
    with serving(QuietHandler) as url:
        yield url


@pytest.fixture
def web_page() -> Iterator[str]:
    with serving(_Page) as url:
        yield url


async def test_a_server_that_is_not_facet_is_named_in_one_line(http_server) -> None:
    retriever = FacetRetriever(collection="notes", base_url=http_server)
    want = (
        f"the server at {http_server}/search answered HTTP 501 without Facet's JSON error "
        "body (text/html): is base_url a facet serve?"
    )
    with pytest.raises(FacetError) as sync:
        retriever.invoke("card not working")
    assert str(sync.value) == want
    with pytest.raises(FacetError) as asynchronous:
        await retriever.ainvoke("card not working")
    assert str(asynchronous.value) == want


def test_a_web_page_answering_200_is_named_too(web_page) -> None:
    """A 200 that is not JSON raised json's JSONDecodeError, not a FacetError."""
    with pytest.raises(FacetError) as error:
        FacetRetriever(collection="notes", base_url=web_page).invoke("card not working")
    assert str(error.value) == (
        f"the server at {web_page}/search answered HTTP 200 without "
        "Facet's JSON (text/html): is base_url a facet serve?"
    )
    # An error status keeps the class it maps to (404: NotFoundError), in the same words.
    missing = FacetRetriever(collection="notes", base_url=f"{web_page}/nowhere")
    with pytest.raises(NotFoundError) as not_found:
        missing.invoke("card not working")
    assert str(not_found.value) == (
        f"the server at {web_page}/nowhere/search answered HTTP 404 "
        "without Facet's JSON error body (text/html): is base_url a "
        "facet serve?"
    )


class _FacetErrors(BaseHTTPRequestHandler):
    """Answers as facet serve does: 401 without a Bearer key, else 404 unknown collection."""

    def do_POST(self) -> None:
        import json

        keyed = self.headers.get("Authorization", "").startswith("Bearer ")
        status, error = ((404, {"message": "unknown collection 'notes' (known: none)",
                                "type": "not_found_error", "param": "collection",
                                "code": "collection_not_found"}) if keyed else
                         (401, {"message": "missing or wrong API key", "type": "authentication_error",
                                "param": None, "code": "invalid_api_key"}))
        body = json.dumps({"error": error}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_base_url_with_a_password_keeps_it_out_of_messages_and_is_refused_with_a_key() -> None:
    """A base_url's user:password went out as httpx's Basic Authorization in place of the key's
    Bearer (every search a 401 "the key sent was refused"), and the password was printed in
    every error's message."""
    from app.errors import AuthenticationError

    with serving(_FacetErrors) as url:
        with_password = url.replace("http://", "http://alice:s3cretpw@")
        with pytest.raises(InvalidRequestError) as refused:
            FacetRetriever(collection="notes", base_url=with_password, api_key="k3y")
        assert "s3cretpw" not in str(refused.value) and "alice:***@" in str(refused.value)
        assert "would be sent in place of api_key" in str(refused.value)
        # Without a key (a proxy's Basic auth in front of an open server): taken; its errors
        # mask the password, and a 401 says no key was sent.
        retriever = FacetRetriever(collection="notes", base_url=with_password, api_key="")
        # Nor in its dumps (they gave it as typed), while a copy keeps the working URL.
        for dumped in (str(retriever.model_dump()), retriever.model_dump_json(), repr(retriever)):
            assert "s3cretpw" not in dumped and "alice:***@" in dumped, dumped
        assert retriever.model_copy().base_url == with_password
        with pytest.raises(AuthenticationError) as denied:
            retriever.invoke("card")
        assert "s3cretpw" not in str(denied.value) and "alice:***@" in str(denied.value)
        assert "no key was sent" in str(denied.value), denied.value
        keyed = FacetRetriever(collection="notes", base_url=url, api_key="k3y")
        with pytest.raises(NotFoundError, match=r"unknown collection 'notes'.*HTTP 404 from http"):
            keyed.invoke("card")


@pytest.mark.parametrize("url", ["ftp://bob:s3cretPW@host:8000", "bob:s3cretPW@127.0.0.1:8000"])
def test_a_refused_base_url_keeps_its_password_out_of_the_message(url) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        FacetRetriever(collection="notes", base_url=url)
    assert "s3cretPW" not in str(refused.value) and "bob:***@" in str(refused.value), refused.value
