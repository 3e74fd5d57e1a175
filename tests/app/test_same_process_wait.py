"""An index call into a collection that another job of the same process is writing waits for
it, by design (one writer per collection), and says so once in the log: the wait was silent,
for as long as that job writes. A second Facet of the process refused the collection with
advice for another process ("pid N ... serve readers and writers from one facet serve") where
N was this very process: it names the earlier Facet and its job instead.

The first job is held at its first progress report (an Event), so the second call meets it
writing at a known point: no timing guess."""
from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from app.core import Facet
from app.errors import ConflictError
from app.services.search import SearchRequest
from tests.app.services.conftest import write_corpus


def _held_writer(facet: Facet, src: Path, collection: str) -> tuple[threading.Thread,
                                                                      threading.Event,
                                                                      threading.Event, list[Any]]:
    started, go, out = threading.Event(), threading.Event(), []

    def progress(p: Any) -> None:
        started.set()
        assert go.wait(30)

    def run() -> None:
        out.append(facet.index(src, collection, progress=progress))

    writer = threading.Thread(target=run)
    writer.start()
    assert started.wait(30)
    return writer, go, started, out


def test_the_wait_behind_a_job_of_this_process_is_logged(facet, tmp_path: Path,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    write_corpus(tmp_path / "a", 3)
    write_corpus(tmp_path / "b", 2)
    caplog.set_level(logging.INFO, logger="app.services.indexing")
    writer, go, _, first = _held_writer(facet, tmp_path / "a", "qa")
    second: list[Any] = []
    waiter = threading.Thread(target=lambda: second.append(facet.index(tmp_path / "b", "qa")))
    waiter.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(
                "(this process) to finish writing 'qa'" in r.getMessage() for r in caplog.records):
            time.sleep(0.05)
    finally:
        go.set()
        writer.join(30)
        waiter.join(30)
    job = facet.jobs("qa")[-1].id  # the first one
    said = [r.getMessage() for r in caplog.records if "to finish writing" in r.getMessage()]
    assert len(said) == 1 and f"waits for job {job} (this process)" in said[0], said
    assert first[0].state == second[0].state == "completed"


def test_a_second_facet_of_this_process_is_told_which(facet, tmp_path: Path) -> None:
    write_corpus(tmp_path / "a", 3)
    facet.index(tmp_path / "a", "qa")
    writer, go, _, _ = _held_writer(facet, tmp_path / "a", "qa")
    other = Facet(facet.settings, embedders=facet.context.embedders)  # the setup cell run again
    try:
        with pytest.raises(ConflictError) as e:
            other.search(SearchRequest("bank card", "qa"))
    finally:
        go.set()
        writer.join(30)
        other.close()
    job = facet.jobs("qa")[0].id
    said = str(e.value)
    assert "another Facet of this process (an earlier one, not closed" in said, said
    assert f"still indexing into it (job {job})" in said, said
    assert "facet serve" not in said, said
