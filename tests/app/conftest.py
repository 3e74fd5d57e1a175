"""Fixtures shared by the tests under tests/app."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from app.encoding import EmbedderCache
from tests.app.gated import Gated, wait_for


@pytest.fixture
def cache(minilm) -> EmbedderCache:
    """An embedder cache holding the session's real minilm (loaded once), on the CPU."""
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    return cache


@pytest.fixture
def gated(minilm) -> Gated:
    """The session's minilm, whose next query call can be held (tests/app/gated.py)."""
    return Gated(minilm)


@pytest.fixture
def ctrl_c() -> Iterator[Callable[[Callable[[], bool]], threading.Thread]]:
    """``ctrl_c(when)``: a thread that, once ``when()`` holds, sends SIGINT to the main thread
    (as a terminal's Ctrl-C does: Python's handler raises KeyboardInterrupt there, in the
    middle of its wait)."""
    assert threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    main = threading.main_thread().ident
    assert main is not None
    started: list[threading.Thread] = []

    def arm(when: Callable[[], bool]) -> threading.Thread:
        def fire() -> None:
            wait_for(when)
            time.sleep(0.1)  # the main thread is inside its wait by then
            signal.pthread_kill(main, signal.SIGINT)

        thread = threading.Thread(target=fire, daemon=True)
        thread.start()
        started.append(thread)
        return thread

    try:
        yield arm
    finally:
        for thread in started:
            thread.join(timeout=30)
        signal.signal(signal.SIGINT, before)
