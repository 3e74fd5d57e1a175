"""A worker that cannot serve says so: ``facet worker`` refuses, in one line, what every task
would fail on (CUDA asked without a GPU, an unknown preload, the metadata database down); a
pool process whose preload fails logs one ERROR line; a worker's CUDA error is a 503, not a
422; the API listens at once with no worker; an encode's success line is short. Real parts:
redis-server, ``facet worker`` / Celery worker subprocesses, minilm."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from .conftest import ROOT, Stack, free_port

NO_GPU = ("device 'cuda' was requested but no CUDA GPU is available; use the cpu device "
          "(FACET_DEVICE=cpu)")
needs_no_gpu = pytest.mark.skipif(torch.cuda.is_available(),
                                  reason="needs a machine without a CUDA GPU")


def _run(args: list[str], env: dict[str, str], timeout: float = 40) -> tuple[int, str]:
    """Run ``args`` in its own process group; the exit status and the output (stderr with
    stdout). A worker that does not exit by ``timeout`` (it started serving) is killed and
    fails the test."""
    proc = subprocess.Popen(args, env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"the worker started instead of refusing within {timeout}s:\n{out[-3000:]}")
    return proc.returncode, out


def _facet_worker(stack: Stack, **env: str) -> tuple[int, str]:
    return _run([sys.executable, "-m", "app", "worker", "--queues", "query"],
                dict(stack.env, **env))


def _one_error_line(out: str) -> str:
    lines = [line for line in out.splitlines() if line.strip()]
    assert "Traceback" not in out, out
    assert len(lines) == 1, out
    return lines[0]


@needs_no_gpu
def test_facet_worker_refuses_cuda_without_a_gpu(stack: Stack) -> None:
    """It started, said "ready" to its healthcheck, and every job failed on the device."""
    code, out = _facet_worker(stack, FACET_DEVICE="cuda")
    line = _one_error_line(out)
    assert code == 7, out
    assert NO_GPU in line


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="needs a machine without mps")
def test_facet_worker_refuses_a_device_the_machine_lacks(stack: Stack) -> None:
    """FACET_DEVICE=mps on Linux: the worker started and every task failed on it (the check
    asked about CUDA alone); a query encoded in process says the same, exit 7 as for CUDA (it
    was exit 4, a data error)."""
    said = ("device 'mps' was requested but this machine or this torch build has none; use the "
            "cpu device (FACET_DEVICE=cpu)")
    code, out = _facet_worker(stack, FACET_DEVICE="mps")
    assert code == 7 and said in _one_error_line(out), out
    done = subprocess.run([sys.executable, "-m", "app", "embed", "hello"], cwd=ROOT,
                          env=dict(stack.env, FACET_DEVICE="mps"), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 7 and said in done.stderr, (done.returncode, done.stderr)


def test_facet_worker_refuses_an_unknown_preload(stack: Stack) -> None:
    """A 40-line traceback per pool process, then a worker with nothing loaded."""
    code, out = _facet_worker(stack, FACET_WORKER_PRELOAD='["nosuchmodel"]')
    line = _one_error_line(out)
    assert code == 2, out
    assert "unknown embedder 'nosuchmodel'" in line


def test_facet_worker_refuses_a_database_out_of_reach(stack: Stack) -> None:
    url = f"postgresql+psycopg://facet:secret@127.0.0.1:{free_port()}/facet"
    code, out = _facet_worker(stack, FACET_DATABASE_URL=url)
    line = _one_error_line(out)
    assert code == 7, out
    assert "cannot open the metadata database" in line and "secret" not in line


def _wait_for(log: Path, *needles: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if all(n in text for n in needles):
            return text
        time.sleep(0.1)
    raise AssertionError(f"not all of {needles} in the log after {timeout}s:\n{text[-4000:]}")


@needs_no_gpu
def test_a_pool_process_says_its_preload_failed_and_a_cuda_error_is_a_503(
        stack: Stack, minilm, caplog) -> None:
    """A worker started past ``facet worker``'s checks (``celery -A worker.app worker``, as the
    module says works too) on FACET_DEVICE=cuda: its pool process logged a traceback and the
    worker said "ready" alone; each query then came back to the client as a 422 DataError."""
    from fastapi.testclient import TestClient

    from app.api.server import create_app
    from app.core import Facet
    from app.encoding import EmbedderCache

    log = stack.tmp / "celery-worker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", "import logging, sys; logging.basicConfig(level=logging.INFO);"
             "from worker.app import celery_app; celery_app.worker_main(sys.argv[1:])",
             "worker", "-Q", "query", "-c", "1", "-l", "info", "-n", f"cuda-{os.getpid()}@%h",
             "--without-gossip", "--without-mingle"],
            env=dict(stack.env, FACET_DEVICE="cuda"), cwd=ROOT, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        text = _wait_for(log, "worker process could not load", " ready.")
        [line] = [ln for ln in text.splitlines() if "worker process could not load" in ln]
        assert "ERROR" in line and "minilm" in line and NO_GPU in line, line
        assert "Traceback" not in text, text

        cache = EmbedderCache("cpu")  # the API's own model (names, token counts) on its CPU
        cache.put("minilm", minilm)
        facet = Facet.for_serving(stack.settings(encode_on_workers=True, worker_timeout_s=30),
                                  embedders=cache)
        with TestClient(create_app(facet)) as client:
            r = client.post("/v1/embeddings", json={"input": "hello", "model": "minilm"})
        facet.close()
        assert r.status_code == 503, r.text
        error = r.json()["error"]
        assert error["type"] == "server_error" and error["code"] == "unavailable", error
        assert NO_GPU in error["message"]
        assert "retry-after" not in r.headers, r.headers  # (no GPU will not come by waiting)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def test_the_api_listens_at_once_while_no_worker_answers_its_warm_up(stack: Stack, minilm,
                                                                      caplog) -> None:
    """With FACET_ENCODE_ON_WORKERS and no worker, the warm-up waited FACET_WORKER_TIMEOUT_S
    (60 s by default) before the API listened: /health unanswered all that time."""
    from fastapi.testclient import TestClient

    from app.api.server import create_app
    from app.core import Facet
    from app.encoding import EmbedderCache

    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facet = Facet.for_serving(stack.settings(encode_on_workers=True, worker_timeout_s=15,
                                             broker_timeout_s=1), embedders=cache)
    started = time.monotonic()
    try:
        with caplog.at_level("WARNING"), TestClient(create_app(facet, preload=["minilm"])) as c:
            assert c.get("/health").status_code == 200
            answered = time.monotonic() - started
    finally:
        facet.close()
    assert answered < 6, f"/health answered {answered:.1f}s after the start"
    assert ("minilm was not warmed up: no worker answered on the 'query' queue within 1s "
            "at start-up") in caplog.text
    assert facet.settings.worker_timeout_s == 15  # each query still waits this long


def test_an_encode_success_line_carries_the_shape_not_the_vectors(stack: Stack) -> None:
    """Celery's success line of every query carried its base64 vectors (~1.5 kB at INFO)."""
    from app.remote import CeleryQueryEncoder

    worker = stack.start_worker(queues="query,index")
    encoder = CeleryQueryEncoder(stack.settings(encode_on_workers=True))
    try:
        assert encoder.encode(["hello"], embedder="minilm").shape == (1, 384)
    finally:
        encoder.close()
    text = _wait_for(worker.log, "Task facet.encode[", "succeeded in", timeout=30)
    [line] = [ln for ln in text.splitlines() if "Task facet.encode[" in ln and "succeeded" in ln]
    # The result after "succeeded in": the task id before it is hex and may hold "b64" itself.
    result = line.split("succeeded in", 1)[1]
    assert "'shape': [1, 384]" in result, line
    assert "'b64'" not in result and len(line) < 300, line
