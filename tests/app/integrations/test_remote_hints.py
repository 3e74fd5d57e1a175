"""FacetRetriever's HTTP mode says why no answer came, with the hint that fits: a timeout is a
server busy or slow (raise ``timeout=``), https:// to a plain-HTTP server (or http:// to a TLS
one) is the wrong scheme; only a connection refused says to start ``facet serve`` (each case
said "start one with `facet serve`", to a user whose server was up). And a bad value
(``k=0``, an empty query, a bad filter) is a ``ValueError`` too, as Python's refusals of a bad
argument are: a chain's ``except ValueError`` missed ``InvalidRequestError``.

Small local servers on free ports (a silent socket, ``http.server``, a TLS socket with a
self-signed certificate); no facet serve."""

from __future__ import annotations

import http.server
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("langchain_core")

from app.core import Facet
from app.encoding import EmbedderCache
from app.errors import InvalidRequestError, UnavailableError
from app.integrations.langchain import FacetEmbeddings, FacetRetriever, TextTypeError
from app.services.search import SearchRequest
from app.settings import FacetSettings, InvalidSettingError


def _listening() -> tuple[socket.socket, int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    return server, server.getsockname()[1]


@pytest.fixture
def silent() -> Iterator[str]:
    """A server that takes connections (the kernel's backlog) and never answers."""
    server, port = _listening()
    with server:
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def plain_http() -> Iterator[int]:
    """``http.server`` on a free port (plain HTTP, as facet serve)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def tls_only(tmp_path: Path) -> Iterator[int]:
    """A TLS server (self-signed certificate) that hangs up on anything else."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    done = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                           "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                          capture_output=True)
    if done.returncode:
        pytest.skip("openssl could not make a certificate")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server, port = _listening()
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            try:
                with context.wrap_socket(conn, server_side=True):
                    pass
            except (OSError, ssl.SSLError):
                pass  # a plain-HTTP client: the handshake fails, the connection is closed
            finally:
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        stop.set()
        thread.join(5)
        server.close()


def _refusal(retriever: FacetRetriever) -> str:
    with pytest.raises(UnavailableError) as caught:
        retriever.invoke("card")
    return str(caught.value)


async def _arefusal(retriever: FacetRetriever) -> str:
    with pytest.raises(UnavailableError) as caught:
        await retriever.ainvoke("card")
    return str(caught.value)


def test_a_timeout_says_busy_or_slow_and_raise_timeout_not_start_a_server(silent) -> None:
    said = _refusal(FacetRetriever(collection="c", base_url=silent, timeout=0.3))
    assert "did not answer within 0.3 s" in said and "FacetRetriever(timeout=...)" in said, said
    assert "busy" in said, said
    assert "start one" not in said and "facet serve`" not in said, said


async def test_an_async_timeout_says_the_same(silent) -> None:
    said = await _arefusal(FacetRetriever(collection="c", base_url=silent, timeout=0.3))
    assert "busy" in said and "start one" not in said, said


def test_https_to_a_plain_http_server_says_use_http(plain_http) -> None:
    said = _refusal(FacetRetriever(collection="c", base_url=f"https://127.0.0.1:{plain_http}"))
    assert "does not speak HTTPS" in said, said
    assert f"use base_url='http://127.0.0.1:{plain_http}'" in said, said
    assert "start one" not in said, said


def test_http_to_a_tls_server_says_use_https(tls_only) -> None:
    said = _refusal(FacetRetriever(collection="c", base_url=f"http://127.0.0.1:{tls_only}",
                                   timeout=5))
    assert f"use base_url='https://127.0.0.1:{tls_only}'" in said, said
    assert "start one" not in said, said


def test_a_refused_connection_still_says_start_facet_serve() -> None:
    server, port = _listening()
    server.close()  # nothing listens there now
    said = _refusal(FacetRetriever(collection="c", base_url=f"http://127.0.0.1:{port}"))
    assert f"no Facet server answered at http://127.0.0.1:{port}/search" in said, said
    assert "start one with `facet serve`" in said, said


# ------------------------------------------------------------- bad values are ValueErrors


@pytest.mark.parametrize("options", [{"k": 0}, {"filter": {"stars": {"gte": [1]}}}])
def test_a_bad_option_is_a_value_error_in_http_mode(options) -> None:
    retriever = FacetRetriever(collection="c", base_url="http://127.0.0.1:9")  # nothing sent
    with pytest.raises(ValueError) as caught:
        retriever.invoke("card", **options)
    assert isinstance(caught.value, InvalidRequestError)


@pytest.mark.parametrize(("settings", "param"), [({"k": 0}, "k"), ({"k": 2.5}, "k"), ({"mode": "semantic"}, "mode")])
def test_a_refused_option_names_its_param(settings, param) -> None:
    """``param`` named the field for filters, the threshold and the query, and was None for
    k and mode (the RAG exploration of the sixth session of 2026-12-02)."""
    with pytest.raises(InvalidRequestError) as built:
        FacetRetriever(collection="c", **settings)
    assert built.value.param == param
    retriever = FacetRetriever(collection="c", base_url="http://127.0.0.1:9")  # nothing sent
    with pytest.raises(InvalidRequestError) as called:
        retriever.invoke("card", **settings)
    assert called.value.param == param


def test_bad_settings_are_value_errors_and_keep_their_own_words() -> None:
    """InvalidRequestError raised in the retriever's validators (now a ValueError, which pydantic
    wraps) comes out as raised, not reworded as "setting ?=...: Value error, ..."."""
    cases = {
        "FacetRetriever got unknown setting(s) filters (filters -> filter)": {"filters": {}},
        "FacetRetriever setting base_url='ftp://x': give the server's URL": {"base_url": "ftp://x"},
        "FacetRetriever takes facet= (search in process) or base_url=": {
            "base_url": "http://x", "facet": object()},
        "FacetRetriever option k=0: Input should be greater than or equal to 1": {"k": 0},
    }
    for start, settings in cases.items():
        with pytest.raises(ValueError) as caught:
            FacetRetriever(collection="c", **settings)
        assert type(caught.value) is InvalidRequestError and str(caught.value).startswith(start), (
            str(caught.value))
    with pytest.raises(InvalidRequestError, match=r"^FacetEmbeddings got unknown setting\(s\) modell"):
        FacetEmbeddings(modell="minilm")


def test_the_error_classes_keep_their_other_bases() -> None:
    assert issubclass(TextTypeError, TypeError) and issubclass(TextTypeError, ValueError)
    assert issubclass(InvalidSettingError, ValueError)
    assert not issubclass(UnavailableError, ValueError)


@pytest.fixture(scope="module")
def facet(minilm, tmp_path_factory) -> Iterator[Facet]:
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    data = tmp_path_factory.mktemp("hints")
    (data / "t.jsonl").write_text('{"text": "my card was declined"}\n{"text": "top up"}\n',
                                  encoding="utf-8")
    with Facet.for_serving(FacetSettings(data_dir=data / "data"), embedders=cache) as facet:
        facet.index(data / "t.jsonl", "c")
        yield facet


@pytest.mark.parametrize("bad", [{"top_k": 0}, {"query": "   "}, {"filters": {"x": {"near": 1}}}])
def test_a_bad_search_is_a_value_error_through_the_facade_and_the_retriever(facet, bad) -> None:
    request = {"query": "card", "collection": "c", **bad}
    with pytest.raises(ValueError):
        facet.search(SearchRequest(**request))
    options = {"k": 0} if "top_k" in bad else {"filter": bad["filters"]} if "filters" in bad else {}
    with pytest.raises(ValueError):
        FacetRetriever(collection="c", facet=facet).invoke(request["query"], **options)


def test_a_password_in_base_url_is_masked_and_a_query_string_refused() -> None:
    """A password in base_url (a proxy's) was shown by repr and every connection error, and a
    ``?api_key=`` in it was echoed and the route appended after it, "http://h:1/?api_key=k/search"
    (the security exploration of the sixth session of 2026-12-02)."""
    retriever = FacetRetriever(collection="c", base_url="http://user:hunter2pw@127.0.0.1:9", timeout=2)
    assert "hunter2pw" not in repr(retriever) and "user:***@127.0.0.1:9" in repr(retriever)
    with pytest.raises(UnavailableError) as unreachable:
        retriever.invoke("card")
    assert "hunter2pw" not in str(unreachable.value) and "http://user:***@127.0.0.1:9/search" in str(unreachable.value)
    with pytest.raises(InvalidRequestError) as refused:
        FacetRetriever(collection="c", base_url="http://127.0.0.1:9/?api_key=qskey")
    assert refused.value.param == "base_url" and "qskey" not in str(refused.value)
    assert "without a query string or fragment (the key goes in api_key=)" in str(refused.value)


def test_an_untrusted_certificate_says_which_ca_to_trust(tls_only) -> None:
    """A proxy's self-signed (or internal CA's) certificate was answered "start one with facet
    serve ... or check base_url" (the reverse-proxy exploration of 2026-12-03)."""
    said = _refusal(FacetRetriever(collection="c", base_url=f"https://127.0.0.1:{tls_only}", timeout=5))
    assert "answered with a certificate this process does not trust" in said, said
    assert "SSL_CERT_FILE" in said and "start one" not in said, said
