"""A server's own jobs (``ThreadJobRunner``) in its log: started, how they ended with the counts,
and the wait at shutdown for a running one. Nothing of them was logged, unlike a worker's."""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path
from typing import Any

import pytest

from app.core import Facet
from app.services.indexing import IndexOptions
from app.settings import FacetSettings


def _corpus(root: Path, count: int, words: int) -> Path:
    root.mkdir(parents=True)
    for i in range(count):
        (root / f"d{i:03d}.txt").write_text(f"note {i} about " + "trains " * words)
    return root


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "app.jobs"]


def _run(cache, tmp_path: Path, caplog: pytest.LogCaptureFixture, src: Path, name: str) -> Any:
    """``src`` indexed into ``name`` by a server's own job runner, its log captured; the job."""
    server = Facet.for_serving(FacetSettings(data_dir=tmp_path / "data"), embedders=cache)
    try:
        with caplog.at_level(logging.INFO, logger="app.jobs"):
            job = server.submit_index(src, name)
            assert server.job_runner.join(timeout=120)  # type: ignore[attr-defined]
    finally:
        server.close()
    return job


def test_a_server_job_logs_its_start_and_its_outcome(cache, tmp_path, caplog) -> None:
    src = _corpus(tmp_path / "docs", 3, 5)
    job = _run(cache, tmp_path, caplog, src, "notes")
    said = _said(caplog)
    assert said[0] == f"job {job.id} started (notes, {src}, embedder minilm)"
    assert re.fullmatch(
        rf"job {job.id} completed \(collection 'notes'\): 3 seen, 3 indexed, 0 unchanged, 0 failed, "
        r"0 deleted, 3 chunks in \d+\.\ds",
        said[1],
    ), said
    assert len(said) == 2, said  # closing with no job running waits for none


def test_shutdown_says_it_waits_for_the_running_job(cache, tmp_path, caplog) -> None:
    """SIGTERM on `facet serve` with a job running waited up to 30 s without a word."""
    src = _corpus(tmp_path / "many", 300, 40)
    settings = FacetSettings(data_dir=tmp_path / "data", chunk_tokens=64, chunk_overlap=8)
    server = Facet.for_serving(settings, embedders=cache)
    with caplog.at_level(logging.INFO, logger="app.jobs"):
        job = server.submit_index(src, "big", IndexOptions(batch_chunks=4))
        deadline = time.monotonic() + 120
        while server.job(job.id).docs_indexed < 8:
            assert time.monotonic() < deadline, server.job(job.id)
            time.sleep(0.05)
        server.close(reason="the server stopping")  # as `facet serve` closes it
    said = _said(caplog)
    assert said[0] == f"job {job.id} started (big, {src}, embedder minilm)"
    assert f"waiting up to 30s for job {job.id} to stop at its next batch boundary" in said, said
    assert (
        said.index(f"waiting up to 30s for job {job.id} to stop at its next batch boundary") < len(said) - 1
    )  # said before the job's end
    assert re.fullmatch(rf"job {job.id} interrupted \(collection 'big'\): \d+ seen, \d+ indexed, .*",
                        said[-1]), said


def test_a_job_whose_documents_failed_names_them(cache, tmp_path, caplog) -> None:
    """Its WARNING said how many failed and "see the job's errors": an operator had to run
    `facet jobs N` to learn which (the logs review of the seventh session of 2026-12-06)."""
    src = _corpus(tmp_path / "docs", 2, 5)
    for i in range(7):
        (src / f"empty{i}.txt").write_text("")
    job = _run(cache, tmp_path, caplog, src, "notes")
    end, = [r for r in caplog.records if r.name == "app.jobs" and "completed" in r.getMessage()]
    assert end.levelno == logging.WARNING
    named = ", ".join(str(src / f"empty{i}.txt") for i in range(5))
    assert re.fullmatch(
        rf"job {job.id} completed \(collection 'notes'\): 9 seen, 2 indexed, 0 unchanged, "
        rf"7 failed, 0 deleted, 2 chunks in \d+\.\ds: 7 of 9 documents failed, 2 indexed: see "
        rf"the job's errors; failed: {re.escape(named)} and 2 more", end.getMessage()), \
        end.getMessage()


def test_a_source_named_with_a_line_break_and_an_escape_is_logged_printable(cache, tmp_path,
                                                                            caplog) -> None:
    """A folder named "src\\n2026 WARNING fake\\x1b[31m" wrote a forged line and a raw escape
    into the log's "job N started" line (the verification round of the seventh session of
    2026-12-06)."""
    src = _corpus(tmp_path / "src\n2026 WARNING fake\x1b[31m", 1, 5)
    job = _run(cache, tmp_path, caplog, src, "odd")
    started = _said(caplog)[0]
    assert started.startswith(f"job {job.id} started (odd, ") and "\n" not in started
    assert "\x1b" not in started and "src\\x0a2026 WARNING fake\\x1b[31m" in started, started
