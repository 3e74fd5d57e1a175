"""A process that forks after opening a ``Facet`` (gunicorn ``--preload``, multiprocessing's
fork start method): every child hung forever with no error, a search in the store's native
code, an embed waiting on the parent's model thread, a submitted job queued for a runner thread
that is not there. A child's copy of the parent's facade now refuses every call at once
(``InvalidRequestError`` saying to open one per worker after the fork), ``Facet.shared()`` opens
a fresh one there, and the parent's folder locks stay the parent's. Real forks, minilm, the edge
store, SQLite in a temp folder; a child that hangs is killed and fails the test in 20 s."""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.core import Facet
from app.encoding import EmbedderCache
from app.errors import ConflictError
from app.services.indexing import IndexOptions
from app.services.search import SearchRequest
from app.settings import FacetSettings

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")

CHILD_TIMEOUT_S = 20.0


def in_child(work: Callable[[], Any], timeout_s: float = CHILD_TIMEOUT_S) -> dict[str, Any]:
    """Run ``work`` in a forked child: what it returned (``value``) or raised (``error``,
    ``message``), as JSON through a pipe. A child that does not answer in ``timeout_s`` is
    killed and the test fails."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(read)
        try:
            try:
                said: dict[str, Any] = {"value": work()}
            except BaseException as e:
                said = {"error": type(e).__name__, "message": str(e),
                        "traceback": traceback.format_exc()}
            os.write(write, json.dumps(said, default=str).encode())
        finally:
            os._exit(0)
    os.close(write)
    try:
        ready, _, _ = select.select([read], [], [], timeout_s)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"the forked child hung: no answer in {timeout_s:g} s")
        chunks = []
        while chunk := os.read(read, 65536):
            chunks.append(chunk)
    finally:
        os.close(read)
    deadline = time.monotonic() + timeout_s
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child answered, then hung on its way out")
        time.sleep(0.05)
    return dict(json.loads(b"".join(chunks) or b"{}"))


@pytest.fixture
def settings(tmp_path: Path) -> FacetSettings:
    return FacetSettings(data_dir=tmp_path / "data", chunk_tokens=64, chunk_overlap=8,
                         store_wait_s=0.2)


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    root.mkdir()
    for name, text in {"card": "My card was declined at the shop.",
                       "refund": "I want a refund for my order.",
                       "pin": "I forgot the PIN of my card."}.items():
        (root / f"{name}.txt").write_text(text)
    return root


@pytest.fixture
def opened(settings: FacetSettings, cache: EmbedderCache, notes: Path) -> Iterator[Facet]:
    """A facade that indexed and searched "notes": its shard open, its folder lock held."""
    facet = Facet.open(settings, embedders=cache)
    facet.index(notes, "notes", IndexOptions(embedder="minilm"))
    assert facet.search(SearchRequest("refund", "notes", top_k=1)).results
    yield facet
    facet.close()


def refused_as_forked(said: dict[str, Any]) -> None:
    assert said.get("error") == "InvalidRequestError", said
    assert f"this Facet was opened in process {os.getpid()} before a fork" in said["message"]
    assert "open one in each worker process after the fork" in said["message"]


def test_search_on_the_parents_facade_is_refused_not_hung(opened: Facet,
                                                           settings: FacetSettings,
                                                           cache: EmbedderCache) -> None:
    refused_as_forked(in_child(lambda: len(opened.search(SearchRequest("card", "notes")).results)))

    def fresh() -> str:  # a facade of the child's own: the parent holds "notes", said so
        child = Facet.open(settings, embedders=cache)
        try:
            child.search(SearchRequest("card", "notes"))
        except ConflictError as e:
            return str(e)
        return "searched"

    busy = in_child(fresh)
    assert f"open in pid {os.getpid()}" in busy.get("value", ""), busy
    assert "FacetRetriever(base_url=...)" in busy["value"]
    # The parent goes on: its shard, lock and database are as they were.
    assert opened.search(SearchRequest("refund", "notes", top_k=1)).results
    assert [c.name for c in opened.collections()] == ["notes"]


def test_a_child_leaves_the_parents_folder_lock_held(opened: Facet, settings: FacetSettings) -> None:
    from indexer import store

    def child() -> list[str]:
        held = list(store._LOCKS._held)
        opened.close()  # the parent's: let go of nothing here
        return held

    said = in_child(child)
    assert said.get("value") == [], said  # the child counts none of the parent's locks as its own
    lock = Path(settings.data_dir) / "qdrant-edge" / "notes.lock"
    assert lock.exists(), sorted(p.name for p in lock.parent.iterdir())
    fd = os.open(lock, os.O_RDWR)
    try:
        with pytest.raises(BlockingIOError):  # still the parent's after the child closed its copy
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)
    assert opened.search(SearchRequest("refund", "notes", top_k=1)).results
    assert not opened._closed  # closed in the child only


def test_submit_index_on_the_parents_facade_is_refused(opened: Facet, notes: Path) -> None:
    job = opened.submit_index(notes, "more", IndexOptions(embedder="minilm"))
    deadline = time.monotonic() + 20
    while opened.job(job.id).state in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.1)
    refused_as_forked(in_child(
        lambda: opened.submit_index(notes, "other", IndexOptions(embedder="minilm")).state))
    refused_as_forked(in_child(lambda: opened.index(notes, "notes").docs_indexed))


def test_serving_facade_and_langchain_after_fork(settings: FacetSettings, cache: EmbedderCache,
                                                 environment: pytest.MonkeyPatch) -> None:
    from app.integrations.langchain import FacetEmbeddings

    facet = Facet.for_serving(settings, embedders=cache)  # a model thread
    try:
        assert len(facet.embed(["x"], embedder="minilm").vectors) == 1
        Facet.set_shared(facet)  # what LangChain objects made without facet= use
        refused_as_forked(in_child(lambda: len(facet.embed(["y"], embedder="minilm").vectors)))
        cached = FacetEmbeddings(model="minilm", facet=facet)
        refused_as_forked(in_child(lambda: len(cached.embed_query("y"))))

        def shared_in_child() -> bool:
            fresh = Facet.shared()  # not the parent's: one of the child's own
            try:
                return fresh is not facet and fresh._pid == os.getpid()
            finally:
                fresh.close()

        assert in_child(shared_in_child).get("value") is True
        assert len(facet.embed(["z"], embedder="minilm").vectors) == 1  # the parent's still serves
        assert Facet.shared() is facet
    finally:
        Facet.set_shared(None)
        facet.close()
