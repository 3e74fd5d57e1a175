"""A web server at FACET_QDRANT_URL is said before the model loads: a store's first reach check
sends one request, not only a TCP connect.

`python -m http.server` took the connection, so `facet index` loaded the embedder (10 s and
more) and only then met its first request's 404 ("answered but is not a Qdrant server?", exit
7). Only a listing's check sent a request (``ask``); the first check of each store object now
does too, and later ones within ``REACH_TTL_S`` send nothing, as before.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from indexer import store as store_module
from indexer.errors import StoreUnavailableError
from indexer.store import QdrantClientStore
from tests.app.web_stub import QuietHandler, serving
from tests.worker import qdrant_standin

ROOT = Path(__file__).resolve().parents[2]

# `facet index` in a fresh process, as `python -m app` runs it; then the modules it imported.
_INDEX_PROBE = (
    "import runpy, sys\n"
    "sys.argv = ['facet', *sys.argv[1:]]\n"
    "try:\n"
    "    runpy.run_module('app', run_name='__main__')\n"
    "finally:\n"
    "    print(sorted(m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules))\n"
)


def _counting(handler: type, seen: list[str]) -> Any:
    """``handler`` that adds each request it answers to ``seen``."""

    class Counted(handler):  # type: ignore[misc, valid-type]
        def log_request(self, *args: object) -> None:
            seen.append(self.requestline)

    return Counted


def test_facet_index_says_a_web_server_before_the_model_loads(tmp_path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Cats sleep most of the day and hunt at night.")
    (docs / "b.txt").write_text("The train was delayed by forty minutes this morning.")
    handler = functools.partial(QuietHandler, directory=str(tmp_path / "www"))
    with serving(handler) as url:
        env = dict(os.environ, FACET_DATA_DIR=str(tmp_path / "data"), FACET_QDRANT_URL=url)
        env.pop("FACET_VECTOR_BACKEND", None)  # a URL alone is the server
        result = subprocess.run(
            [sys.executable, "-c", _INDEX_PROBE, "index", str(docs), "--collection", "new", "--embedder", "minilm"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd=ROOT,
        )
    assert result.returncode == 7, result
    assert result.stderr.splitlines() == [
        f"error: Qdrant at {url} answered but is not a Qdrant server? (HTTP 404 File not found); "
        "check FACET_QDRANT_URL (unset it for the embedded store)"
    ], result.stderr
    # The embedder was never loaded: its libraries were not even imported.
    assert result.stdout.splitlines()[-1] == "[]", result.stdout


def test_one_request_per_store_not_per_check() -> None:
    seen: list[str] = []
    with serving(_counting(qdrant_standin._Handler, seen)) as url:
        store = QdrantClientStore(url=url)
        now = [1000.0]
        store._clock = lambda: now[0]  # type: ignore[method-assign]
        try:
            store.check_reachable()
            assert seen == ["GET /collections HTTP/1.1"]  # the first check asks
            now[0] += store_module.REACH_TTL_S / 2
            store.check_reachable()
            assert len(seen) == 1  # within the ttl: nothing sent, not even a connect
            now[0] += store_module.REACH_TTL_S
            store.check_reachable()
            assert len(seen) == 1  # after it: a TCP connect, as before; no request
            store.check_reachable(ask=True)
            assert len(seen) == 2  # a listing's check asks each time
        finally:
            store.close()


def test_a_web_server_is_asked_again_until_it_answers_as_qdrant(tmp_path) -> None:
    seen: list[str] = []
    handler = functools.partial(_counting(QuietHandler, seen), directory=str(tmp_path))
    with serving(handler) as url:
        store = QdrantClientStore(url=url)
        try:
            for sent in (1, 2):  # a failure is not remembered: no success recorded, so asked again
                with pytest.raises(StoreUnavailableError, match=r"answered but is not a Qdrant server\? \(HTTP 404"):
                    store.check_reachable()
                assert len(seen) == sent
        finally:
            store.close()


class _Slow(QuietHandler):
    def do_GET(self) -> None:
        time.sleep(5)  # longer than the check's request waits (a whole second at least); no answer


def test_a_server_too_slow_to_answer_the_first_check_is_not_down() -> None:
    with serving(_Slow) as url:
        store = QdrantClientStore(url=url)
        try:
            t0 = time.monotonic()
            store.check_reachable(timeout_s=0.5)  # it took the connection: busy, maybe
            assert time.monotonic() - t0 < 4  # its 1 s, not the 5 s answer
        finally:
            store.close()


class _PageEverywhere(QuietHandler):
    """A web server answering every path 200 with an HTML page (a catch-all front end)."""

    def do_GET(self) -> None:
        body = b"<html><body>hello</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_a_web_server_answering_200_with_a_page_is_not_qdrant() -> None:
    """It was "Qdrant at URL failed: JSONDecodeError: Expecting value: line 1 column 1"."""
    with serving(_PageEverywhere) as url:
        store = QdrantClientStore(url=url)
        try:
            with pytest.raises(StoreUnavailableError, match=r"answered but is not a Qdrant server\? \(HTTP 200"):
                store.check_reachable(timeout_s=2)
        finally:
            store.close()
