"""Fixtures shared by the tests under tests/app."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.encoding import EmbedderCache
from tests.app.gated import Gated, wait_for


@pytest.fixture(scope="session")
def _indexed_sample(minilm, tmp_path_factory) -> Path:
    """A data folder holding the bundled BANKING77 sample indexed with minilm as collection
    ``bank`` (job 1), closed; never served itself: ``indexed_sample_copy`` copies it."""
    from app.commands.demo import SAMPLE_FILE
    from app.core import Facet
    from app.settings import FacetSettings

    data = tmp_path_factory.mktemp("bank-template") / "data"
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facet = Facet.for_serving(FacetSettings(data_dir=data), embedders=cache)
    try:
        facet.index(SAMPLE_FILE, "bank")
    finally:
        facet.close()
    return data


@pytest.fixture(scope="session")
def indexed_sample_copy(_indexed_sample) -> Callable[[Path], Path]:
    """``copy(folder)``: a data folder at ``folder`` as ``_indexed_sample`` holds it, to serve and
    change at will. Indexing the sample took ~2.9 s in each of 13 modules; the copy takes ~10 ms.
    ``cp --sparse=always``: the edge store preallocates ~170 MB it has not written, which a plain
    copy (``shutil.copytree``) would write out per module."""
    def copy(folder: Path) -> Path:
        folder.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-a", "--sparse=always", str(_indexed_sample), str(folder)], check=True)
        return folder
    return copy


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
