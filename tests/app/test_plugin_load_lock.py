"""``EmbedderCache`` loads each name once, and a slow load holds no other name's requests; an
explainer registered as one whose model cannot answer is told as such."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from app.encoding import EmbedderCache, check_explainer
from app.errors import FacetError, InvalidRequestError
from embedders import register_embedder
from embedders.registry import unregister_embedder


class Tiny:
    dim = 4
    identity = "{}"

    def __init__(self, name: str) -> None:
        self.name = name

    def encode(self, texts, *, role="document", instruction=None, batch_size=32):
        return np.tile(np.array([1.0, 0.0, 0.0, 0.0], np.float32), (len(texts), 1))


@pytest.fixture
def slow_plugin():
    """``lock-slow`` loads when ``release`` is set (counting its loads); ``lock-fast`` at once."""
    release = threading.Event()
    started = threading.Event()
    loads: list[str] = []

    def slow(device=None, **kw):
        loads.append("lock-slow")
        started.set()
        assert release.wait(30)
        return Tiny("lock-slow")

    register_embedder("lock-slow", slow, "slow to load")
    register_embedder("lock-fast", lambda device=None, **kw: Tiny("lock-fast"), "fast")
    yield release, started, loads
    release.set()
    unregister_embedder("lock-slow")
    unregister_embedder("lock-fast")


def test_a_slow_load_does_not_hold_a_model_already_loaded(slow_plugin):
    """One lock around every load: an /v1/embeddings for a loaded model waited 7 s while
    another model loaded."""
    release, started, _loads = slow_plugin
    cache = EmbedderCache("cpu")
    fast = cache.get("lock-fast")
    loader = threading.Thread(target=cache.get, args=("lock-slow",), daemon=True)
    loader.start()
    assert started.wait(10)
    got: list[object] = []
    asker = threading.Thread(target=lambda: got.append(cache.get("lock-fast")), daemon=True)
    asker.start()
    asker.join(5)
    blocked = asker.is_alive()
    release.set()
    loader.join(10)
    asker.join(10)
    assert not blocked, "a loaded model's request waited for another model's load"
    assert got == [fast]
    assert sorted(cache.loaded()) == ["lock-fast", "lock-slow"]


def test_a_name_asked_for_twice_at_once_loads_once(slow_plugin):
    release, started, loads = slow_plugin
    cache = EmbedderCache("cpu")
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(cache.get("lock-slow")), daemon=True) for _ in range(4)]
    for thread in threads:
        thread.start()
    assert started.wait(10)
    time.sleep(0.2)
    release.set()
    for thread in threads:
        thread.join(10)
    assert loads == ["lock-slow"] and len(got) == 4 and all(m is got[0] for m in got)


def test_a_failed_load_is_tried_again():
    calls: list[int] = []

    def flaky(device=None, **kw):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("not yet")
        return Tiny("lock-flaky")

    register_embedder("lock-flaky", flaky, "fails once")
    try:
        cache = EmbedderCache("cpu")
        with pytest.raises(FacetError, match="failed to load: RuntimeError: not yet"):
            cache.get("lock-flaky")
        assert cache.get("lock-flaky").name == "lock-flaky" and len(calls) == 2
    finally:
        unregister_embedder("lock-flaky")


def test_an_explainer_registered_as_one_without_generate_answers_is_told_so():
    """`--explain tri-lies` said "it is not ... an embedder registered as an explainer" of one
    registered with explains=True."""
    register_embedder("lock-lies", lambda device=None, **kw: Tiny("lock-lies"), "says it explains", explains=True)
    register_embedder("lock-plain", lambda device=None, **kw: Tiny("lock-plain"), "plain")
    try:
        cache = EmbedderCache("cpu")
        with pytest.raises(InvalidRequestError, match=r"explainer 'lock-lies' does not generate answers: it is "
                                                      r"registered as an explainer .* but its model has no "
                                                      r"generate_answers"):
            check_explainer(cache, "lock-lies", None)
        with pytest.raises(InvalidRequestError, match="it is not an InBedder checkpoint nor an embedder "
                                                      "registered as an explainer"):
            check_explainer(cache, "lock-plain", None)
    finally:
        unregister_embedder("lock-lies")
        unregister_embedder("lock-plain")
