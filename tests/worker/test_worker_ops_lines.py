"""What `facet worker` and `facet index` tell an operator: a line when a worker stops (SIGTERM),
the worker's own way out when its broker is down, the settings a worker reads under
`facet worker --help`, and `facet index` without --background saying it runs in this process
while a broker is set. Real parts: redis-server, `facet worker` subprocesses, minilm."""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from pathlib import Path
from unittest import mock

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
def test_sigterm_mid_chunk_says_stopping_and_stopped(stack: Stack, minilm, tmp_path: Path) -> None:
    """Only Celery's "worker: Warm shutdown (MainProcess)" was said; the chunk finished and the
    worker exited with no Facet line.

    The chunk is kept in the pool's hands for as long as the test needs (not by seconds of
    encoding, which a fast box finished before the signal and a slow one made long): the test
    plans the job itself and holds the metadata database's write lock, so the worker's claim of
    the chunk waits on it; the lock is let go once the worker said it is stopping."""
    from sqlalchemy import update

    from app.core import Facet
    from app.remote import INDEX_CHUNK_TASK, celery_client
    from indexer import metadata as md
    from tests.app.services.conftest import write_corpus

    write_corpus(tmp_path / "src", 3)  # one chunk task
    stack.env["FACET_VISIBILITY_TIMEOUT_S"] = "600"
    facet = Facet(stack.settings())
    facet.embedder_cache.put("minilm", minilm)
    try:
        job_id, numbers = stack.plan_here(facet, tmp_path / "src", "stopping")  # no worker yet
        assert numbers == [0]
        worker = stack.start_worker(queues="index")
        C = md.JobChunk
        with facet.context.sessions() as held:
            # The write lock, held: the worker's claim of the chunk (an UPDATE) waits on it.
            held.execute(update(C).where(C.job_id == job_id, C.number == 0)
                         .values(attempts=C.attempts))
            celery_client(stack.settings()).send_task(INDEX_CHUNK_TASK, args=[job_id, 0],
                                                      queue="index")
            _wait(lambda: re.search(r"facet\.index_chunk\[[^\]]+\] received", worker.text()),
                  "no chunk task received")
            time.sleep(1.0)  # in the pool's hands (it cannot finish: the lock is held here)
            os.kill(worker.proc.pid, signal.SIGTERM)  # the main process, as `docker stop` does
            _wait(lambda: " stopping (" in worker.text(), "no stopping line")
            assert worker.proc.poll() is None  # it waits for the chunk in hand
            held.rollback()  # the claim goes on: the chunk runs and completes the job
        worker.proc.wait(timeout=240)
        text = worker.text()
        stopping = [ln for ln in text.splitlines() if " stopping (" in ln]
        assert len(stopping) == 1, text[-4000:]
        assert re.search(rf"finishing chunk \d+ of job {job_id}", stopping[0]), stopping[0]
        assert "queued tasks stay in the broker for the other workers" in stopping[0]
        stopped = [i for i, ln in enumerate(text.splitlines())
                   if re.search(r"worker \S+ stopped$", ln)]
        assert len(stopped) == 1, text[-4000:]
        assert text.splitlines().index(stopping[0]) < stopped[0]
        # the chunk it was finishing finished: the job is done
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
    # In this process (the CLI's own code, as a subprocess runs it, without a second start-up).
    done = invoke_cli("index", str(src), "-c", "here", "-e", "minilm", env=stack.env)
    assert done.returncode == 0, done.stderr
    [line] = [ln for ln in done.stderr.splitlines() if ln.startswith("indexing ")]
    assert line.endswith("into collection here in this process (--background sends it to the "
                         "workers)"), line
    # No broker: the line stays as it was.
    env = {k: v for k, v in stack.env.items() if k != "FACET_BROKER_URL"}
    with mock.patch.dict(os.environ):
        os.environ.pop("FACET_BROKER_URL", None)
        plain = invoke_cli("index", str(src), "-c", "here2", "-e", "minilm", env=env)
    assert plain.returncode == 0, plain.stderr
    [line] = [ln for ln in plain.stderr.splitlines() if ln.startswith("indexing ")]
    assert line.endswith("into collection here2"), line
