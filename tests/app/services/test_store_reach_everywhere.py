"""Index, search and cluster say a Qdrant server out of reach in seconds, before any model loads.

Only listings checked the server (``CollectionService.check_store``). With FACET_QDRANT_URL on a
port nothing answered on, `facet index` loaded the embedder (10 s) and then waited the client's
30 s (45 s, exit 7); `facet search` took 34 s; POST /jobs answered 503 after 30 s; a search of a
name the metadata does not know said "unknown collection 'srv' (known: none)" (exit 3, a 404),
its store error taken for "no such vectors". The store now checks first (one TCP connect of
``REACH_TIMEOUT_S``, ``QdrantClientStore.check_reachable``); and a listing sends one request
after it, so that a web server on that port is not listed as "no collections yet".
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.api import create_app
from app.core import Facet
from app.errors import UnavailableError
from app.services.clustering import ClusterRequest
from app.services.collections import CollectionService
from app.services.context import EmbedderCache
from app.services.search import SearchRequest
from app.settings import FacetSettings
from indexer import metadata as md
from indexer import store
from indexer.errors import StoreUnavailableError
from tests.worker import qdrant_standin

from ..cli_runner import invoke_cli
from ..web_stub import QuietHandler, serving
from .conftest import write_corpus
from .test_listing_store_reach import _port

QUICK_S = 5  # the check's 2 s and some; the client waited 30 s, a model's load 10 s


@pytest.fixture(params=["refused", "no answer"])
def unreachable(request, monkeypatch) -> Iterator[str]:
    """A URL where a connect is refused, or gets no answer (a listener whose backlog is full)."""
    monkeypatch.setattr(store, "REACH_TIMEOUT_S", 0.5, raising=False)  # a check gives up sooner: a quicker test
    with _port(listen=request.param == "no answer", full=True) as port:
        yield f"http://127.0.0.1:{port}"


def _settings(data_dir: Path, url: str) -> FacetSettings:
    return FacetSettings(data_dir=data_dir, vector_backend="server", qdrant_url=url, chunk_tokens=64, chunk_overlap=8)


def _record(facet: Facet, name: str) -> None:
    """A collection the metadata knows (indexed into the server before it went away)."""
    with facet.context.sessions() as s:
        md.create_collection(s, name, backend="server", chunk_size=64, chunk_overlap=8, tokenizer="minilm")
        s.commit()


def _said_at_once(url: str, call: Callable[[], object]) -> None:
    t0 = time.monotonic()
    with pytest.raises(UnavailableError) as e:
        call()
    assert time.monotonic() - t0 < QUICK_S
    message = str(e.value)
    assert message.startswith(f"cannot reach Qdrant at {url}: ") and "\n" not in message, message
    assert "check FACET_QDRANT_URL" in message


def test_index_search_and_cluster_say_it_before_the_model_loads(unreachable, tmp_path) -> None:
    write_corpus(tmp_path / "docs", 2)
    # A fresh process's cache, as `facet index` or `facet search` starts with.
    with Facet(_settings(tmp_path / "data", unreachable), embedders=EmbedderCache("cpu")) as facet:
        _record(facet, "olds")
        for call in (
            lambda: facet.index(tmp_path / "docs", "srv"),
            lambda: facet.index(tmp_path / "docs", "olds"),
            lambda: facet.search(SearchRequest("cats", "olds")),
            lambda: facet.search(SearchRequest("cats", "olds", mode="dense")),
            # A name the metadata does not know: the server out of reach, not "unknown collection".
            lambda: facet.search(SearchRequest("cats", "srv")),
            lambda: facet.cluster(ClusterRequest("What is it about?", collection="olds")),
            lambda: facet.cluster(ClusterRequest("What is it about?", search=SearchRequest("cats", "olds"))),
        ):
            _said_at_once(unreachable, call)
            assert facet.context.embedders.peek("minilm") is None, "the embedder was loaded first"


def test_the_api_answers_503_at_once(unreachable, tmp_path) -> None:
    facet = Facet.for_serving(_settings(tmp_path / "data", unreachable), embedders=EmbedderCache("cpu"))
    try:
        _record(facet, "olds")
        write_corpus(tmp_path / "docs", 2)
        with TestClient(create_app(facet)) as client:
            for path, body in (
                ("/jobs", {"source": str(tmp_path / "docs"), "collection": "srv"}),
                ("/search", {"query": "cats", "collection": "olds"}),
                ("/search", {"query": "cats", "collection": "srv"}),  # not a 404
                # Its check before the wait for a turn called the service past the facade:
                # 500 "internal error (StoreUnavailableError)" and a traceback in the log.
                ("/cluster", {"instruction": "What is it about?", "collection": "olds"}),
            ):
                t0 = time.monotonic()
                response = client.post(path, json=body)
                assert time.monotonic() - t0 < QUICK_S, path
                assert response.status_code == 503, (path, response.text)
                assert response.headers.get("retry-after") == "5", (path, response.headers)
                assert response.json()["error"]["message"].startswith(f"cannot reach Qdrant at {unreachable}: ")
        assert facet.context.embedders.peek("minilm") is None
    finally:
        facet.close()


def test_the_cli_exits_7_in_one_line(unreachable, make_ctx, tmp_path) -> None:
    data = tmp_path / "data"
    ctx = make_ctx(data_dir=data, vector_backend="server", qdrant_url=unreachable)
    with ctx.sessions() as s:
        md.create_collection(s, "olds", backend="server", chunk_size=64, chunk_overlap=8, tokenizer="minilm")
        s.commit()
    write_corpus(tmp_path / "docs", 2)
    env = {"FACET_DATA_DIR": str(data), "FACET_VECTOR_BACKEND": "server", "FACET_QDRANT_URL": unreachable}
    for args in (
        ("index", str(tmp_path / "docs"), "--collection", "srv"),
        ("search", "cats", "--collection", "olds"),
        ("search", "cats", "--collection", "srv"),
        ("cluster", "--instruction", "What is it about?", "--collection", "olds"),
    ):
        t0 = time.monotonic()
        result = invoke_cli(*args, env=env)
        assert time.monotonic() - t0 < QUICK_S, args
        assert result.returncode == 7, (args, result)
        *progress, said = result.stderr.splitlines()  # (cluster reports its stage first)
        assert said.startswith(f"error: cannot reach Qdrant at {unreachable}: "), (args, said)
        assert all(line.strip().endswith("collecting the texts") for line in progress), progress


def test_a_listing_of_a_web_server_is_no_listing(make_ctx, tmp_path) -> None:
    """`python3 -m http.server` took the connection and listed "no collections yet" (exit 0)."""
    handler = functools.partial(QuietHandler, directory=str(tmp_path))
    with serving(handler) as url:
        service = CollectionService(make_ctx(vector_backend="server", qdrant_url=url))
        with pytest.raises(StoreUnavailableError) as e:
            service.list_all()
        assert str(e.value) == (
            f"Qdrant at {url} answered but is not a Qdrant server? (HTTP 404 File not "
            "found); check FACET_QDRANT_URL (unset it for the embedded store)"
        )
        env = {"FACET_DATA_DIR": str(tmp_path / "cli"), "FACET_VECTOR_BACKEND": "server", "FACET_QDRANT_URL": url}
        listed = invoke_cli("collections", env=env)
        # Its page of HTML was a search's "unknown collection 'srv' (known: none)" (exit 3).
        searched = invoke_cli("search", "cats", "--collection", "srv", env=env)
    assert listed.returncode == 7, listed
    assert "no collections" not in listed.stdout
    for result in (listed, searched):
        assert (result.returncode, result.stderr.splitlines()) == (7, [f"error: {e.value}"])
    # A Qdrant server (the tests' stand-in) is listed as before.
    with serving(qdrant_standin._Handler) as url:
        assert CollectionService(make_ctx(vector_backend="server", qdrant_url=url)).list_all() == []
