"""A real model whose next query call can be held: the query encoder's model thread is then
busy, and what is submitted meanwhile stays queued (tests of the queue's limits)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

from app.encoding import BatchingQueryEncoder, EmbedderCache
from embedders.contract import Role


class Gated:
    """The real model; after ``arm()`` its next query call waits for ``release()``."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.entered = threading.Event()
        self._open = threading.Event()
        self._armed = False

    def arm(self) -> None:
        self._armed = True

    def release(self) -> None:
        self._open.set()

    def encode(self, texts: Any, **kwargs: Any) -> Any:
        if self._armed and Role.parse(kwargs.get("role", Role.QUERY)) is Role.QUERY:
            self._armed = False
            self.entered.set()
            assert self._open.wait(timeout=30)
        return self.model.encode(texts, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Poll ``condition`` until it holds (an assertion error after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


@contextlib.contextmanager
def serving(gated: Gated, **options: Any) -> Iterator[BatchingQueryEncoder]:
    """A one-thread query encoder over ``gated`` (registered as "gated"), built with
    ``options``; at the end the gate is opened and the encoder closed."""
    cache = EmbedderCache("cpu")
    cache.put("gated", gated)  # type: ignore[arg-type]
    encoder = BatchingQueryEncoder(cache, threads=1, **options)
    try:
        yield encoder
    finally:
        gated.release()
        encoder.close()


def hold(encoder: BatchingQueryEncoder, gated: Gated) -> Future[Any]:
    """The model thread held inside a query: what is queued next stays queued. Returns the
    held query's future."""
    gated.arm()
    held = encoder.submit(["held"], embedder="gated")
    assert gated.entered.wait(timeout=10)
    return held


def hold_clusterings(facet: Any, monkeypatch: Any, entered: Any,
                      wait_s: float) -> threading.Event:
    """Make each clustering of ``facet`` tell ``entered`` (an Event's set, a Semaphore's
    release) once it runs, then wait for the Event returned (at most ``wait_s``) before it
    clusters: turns held as long as a test needs."""
    release = threading.Event()
    real = facet.cluster
    tell = entered.set if isinstance(entered, threading.Event) else entered.release

    def held(request: Any, progress: Any = None) -> Any:
        tell()
        release.wait(timeout=wait_s)
        return real(request, progress)

    monkeypatch.setattr(facet, "cluster", held)
    return release
