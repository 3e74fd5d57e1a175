"""A listing over a Qdrant server that nothing answers on says so, in one line.

A listing of no collections sent the server nothing: `facet collections` with a
FACET_QDRANT_URL nothing answered on said "no collections yet; create one with ..." (exit 0),
and GET /collections answered []. It now checks with one TCP connect of at most
``REACH_TIMEOUT_S`` (qdrant-client waits 30 s a request), and never for the embedded store.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

import pytest

from app.services import collections as listing
from app.services.collections import CollectionService
from indexer import metadata as md
from indexer.errors import StoreUnavailableError

from ..cli_runner import invoke_cli


@contextlib.contextmanager
def _port(*, listen: bool, full: bool = False) -> Iterator[int]:
    """A port of 127.0.0.1 held for the block: bound only (a connect is refused), listening, or
    listening with its backlog full (a connect gets no answer, as from a host that drops it)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        port = server.getsockname()[1]
        if not listen:
            yield port
            return
        server.listen(0)
        with contextlib.ExitStack() as queued:
            if full:  # the one connection the backlog takes, never accepted
                queued.enter_context(socket.create_connection(("127.0.0.1", port), timeout=1))
            yield port


def _server_ctx(make_ctx, port: int):
    return make_ctx(vector_backend="server", qdrant_url=f"http://127.0.0.1:{port}")


def test_an_empty_listing_says_the_server_cannot_be_reached(make_ctx, tmp_path) -> None:
    with _port(listen=False) as port:
        url = f"http://127.0.0.1:{port}"
        service = CollectionService(_server_ctx(make_ctx, port))
        for read in (service.list_all, lambda: service.get("c")):
            with pytest.raises(StoreUnavailableError) as e:
                read()
            assert str(e.value).startswith(f"cannot reach Qdrant at {url}: ConnectionRefusedError")
            assert "check FACET_QDRANT_URL" in str(e.value)
        # The CLI: one line and the exit code of a store out of reach, no "no collections yet".
        env = {"FACET_DATA_DIR": str(tmp_path / "data"), "FACET_VECTOR_BACKEND": "server", "FACET_QDRANT_URL": url}
        result = invoke_cli("collections", env=env)
    assert result.returncode == 7, result
    assert "no collections" not in result.stdout, result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot reach Qdrant at {url}"), lines


def test_a_listing_with_collections_says_it_before_asking_for_each(make_ctx, caplog) -> None:
    """With collections recorded each was asked for in turn (a refused connection sent twice,
    "sending it again" logged); the one check says it first."""
    with _port(listen=False) as port:
        ctx = _server_ctx(make_ctx, port)
        with ctx.sessions() as s:
            md.create_collection(s, "c", backend="server", chunk_size=64, chunk_overlap=8, tokenizer="t")
            s.commit()
        with pytest.raises(StoreUnavailableError, match="cannot reach Qdrant at"):
            CollectionService(ctx).list_all()
    assert "sending it again" not in caplog.text


def test_a_server_that_does_not_answer_is_given_up_on_quickly(make_ctx, monkeypatch) -> None:
    monkeypatch.setattr(listing, "REACH_TIMEOUT_S", 0.5, raising=False)
    with _port(listen=True, full=True) as port:
        service = CollectionService(_server_ctx(make_ctx, port))
        start = time.monotonic()
        with pytest.raises(StoreUnavailableError, match=r"no answer within 0\.5 s"):
            service.list_all()
    assert time.monotonic() - start < 5  # not qdrant-client's 30 s


def test_a_server_that_answers_lists_its_collections(make_ctx) -> None:
    """No false alarm: something takes the connection, and an empty metadata lists none."""
    with _port(listen=True) as port:
        assert CollectionService(_server_ctx(make_ctx, port)).list_all() == []


def test_the_server_is_found_where_qdrant_client_connects(monkeypatch) -> None:
    from indexer.store import _connect_target

    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    assert _connect_target("qdrant:6333") == ("qdrant", 6333)
    assert _connect_target("localhost") == ("localhost", 6333)  # its default port
    assert _connect_target("https://q.example.com/prefix") == ("q.example.com", 6333)
    assert _connect_target("http://[::1]:7000") == ("::1", 7000)
    assert _connect_target("http://q:notaport") is None  # qdrant-client's own request says it
    # Through a proxy a connect to the server says nothing: qdrant-client's request checks.
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    assert _connect_target("https://q.example.com") is None
    monkeypatch.setenv("NO_PROXY", "q.example.com")
    assert _connect_target("https://q.example.com") == ("q.example.com", 6333)
