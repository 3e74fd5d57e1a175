"""What `facet worker` and `facet index` tell an operator: a line when a worker stops (SIGTERM),
the worker's own way out when its broker is down, the settings a worker reads under
`facet worker --help`, and `facet index` without --background saying it runs in this process
while a broker is set. Real parts: redis-server, `facet worker` subprocesses, minilm."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.app.cli_runner import invoke_cli

from .conftest import ROOT, Stack, free_port
from .test_wstart_worker import _one_error_line, _run


def _wait(predicate, what: str, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} after {timeout}s")


@pytest.mark.slow
def test_sigterm_mid_chunk_says_stopping_and_stopped(stack: Stack, tmp_path: Path) -> None:
    """Only Celery's "worker: Warm shutdown (MainProcess)" was said; the chunk finished and the
    worker exited with no Facet line."""
    src = tmp_path / "src"
    src.mkdir()
    words = " ".join(f"word{i} alpha beta gamma delta" for i in range(120))
    for i in range(60):  # one chunk task of 60 long documents: seconds of encoding
        (src / f"d{i:02d}.txt").write_text(f"document {i} {words}")
    stack.env["FACET_WORKER_CHUNK_DOCS"] = "60"
    stack.env["FACET_VISIBILITY_TIMEOUT_S"] = "600"
    worker = stack.start_worker(queues="index")
    done = stack.facet("index", str(src), "-c", "stopping", "--background")
    assert done.returncode == 0, done.stderr
    job_id = int(done.stdout.strip().splitlines()[-1])
    _wait(lambda: re.search(r"facet\.index_chunk\[[^\]]+\] received", worker.text()),
          "no chunk task received")
    time.sleep(0.5)  # in the pool's hands
    os.kill(worker.proc.pid, signal.SIGTERM)  # the main process, as `docker stop` does
    worker.proc.wait(timeout=240)
    text = worker.text()
    stopping = [ln for ln in text.splitlines() if " stopping (" in ln]
    assert len(stopping) == 1, text[-4000:]
    assert re.search(rf"finishing chunk \d+ of job {job_id}", stopping[0]), stopping[0]
    assert "queued tasks stay in the broker for the other workers" in stopping[0]
    stopped = [i for i, ln in enumerate(text.splitlines()) if re.search(r"worker \S+ stopped$", ln)]
    assert len(stopped) == 1, text[-4000:]
    assert text.splitlines().index(stopping[0]) < stopped[0]
    # the chunk it was finishing finished: the job is done
    from app.core import Facet

    facet = Facet(stack.settings())
    try:
        assert facet.job(job_id).state == "completed", facet.job(job_id)
    finally:
        facet.close()


def test_worker_with_its_broker_down_says_the_workers_way_out(stack: Stack) -> None:
    """It said "unset it to run jobs in this process" (facet serve's way out): unset, the
    worker refused to start ("facet worker needs FACET_BROKER_URL", exit 2)."""
    port = free_port()
    code, out = _run([sys.executable, "-m", "app", "worker", "--queues", "index"],
                     dict(stack.env, FACET_BROKER_URL=f"redis://127.0.0.1:{port}/0"))
    line = _one_error_line(out)
    assert code == 7, out
    assert f"cannot reach the broker at redis://127.0.0.1:{port}/0" in line, line
    assert "unset it" not in line and "in this process" not in line, line
    assert "start Redis" in line and "FACET_BROKER_URL" in line, line
    assert "facet worker takes its tasks from that broker" in line, line


def test_worker_help_names_the_settings_it_reads(tmp_path: Path) -> None:
    """`facet worker --help` listed its options alone."""
    shown = invoke_cli("worker", "--help", env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    for name in ("FACET_BROKER_URL", "FACET_DATA_DIR", "FACET_DATABASE_URL",
                 "FACET_WORKER_CHUNK_DOCS", "FACET_WORKER_PRELOAD", "FACET_VISIBILITY_TIMEOUT_S"):
        assert name in text, (name, shown.stdout)
    assert "match the server's" in text, shown.stdout


def test_worker_chunk_docs_says_which_process_reads_it() -> None:
    """Set on `facet serve` alone it silently did nothing: its description did not say the
    planning worker reads it."""
    from app.settings import FacetSettings

    said = FacetSettings.model_fields["worker_chunk_docs"].description or ""
    assert "facet worker" in said and "facet serve" in said, said
    [row] = [ln for ln in (ROOT / "docs" / "deploy.md").read_text().splitlines()
             if ln.startswith("| `FACET_WORKER_CHUNK_DOCS`")]
    assert "facet worker" in row and "not by `facet serve`" in row, row


@pytest.mark.slow
def test_index_without_background_says_it_runs_here_when_a_broker_is_set(
        stack: Stack, tmp_path: Path) -> None:
    """With FACET_BROKER_URL set and workers idle, "indexing SRC into collection C" did not
    say the job ran in this process (runner inline)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("card payment declined twice")
    done = stack.facet("index", str(src), "-c", "here", "-e", "minilm")
    assert done.returncode == 0, done.stderr
    [line] = [ln for ln in done.stderr.splitlines() if ln.startswith("indexing ")]
    assert line.endswith("into collection here in this process (--background sends it to the "
                         "workers)"), line
    # No broker: the line stays as it was.
    env = {k: v for k, v in stack.env.items() if k != "FACET_BROKER_URL"}
    plain = subprocess.run(
        [sys.executable, "-m", "app", "index", str(src), "-c", "here2", "-e", "minilm"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0, plain.stderr
    [line] = [ln for ln in plain.stderr.splitlines() if ln.startswith("indexing ")]
    assert line.endswith("into collection here2"), line
