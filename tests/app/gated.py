"""A real model whose next query call can be held: the query encoder's model thread is then
busy, and what is submitted meanwhile stays queued (tests of the queue's limits)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

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
