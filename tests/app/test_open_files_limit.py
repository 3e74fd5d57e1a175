"""A server's soft open-files limit is raised to what its hard limit allows (``ulimit -n``):
started where the soft limit is the usual 1024 (often under a far higher hard limit), `facet
serve` kept it, and past it uvicorn dropped connections without a word and collections failed
to open. Real processes: `facet serve` and `facet ui` started with a soft limit of 256, its limit read from
/proc; the function in fresh interpreters, where a hard limit can be lowered for good. (The
worker's pool: tests/worker/test_open_files_limit_worker.py.)"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from app.files import OPEN_FILES_TARGET
from tests.app.served import free_port, wait_until_healthy

ROOT = Path(__file__).resolve().parents[2]
HARD = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
EXPECTED = OPEN_FILES_TARGET if HARD == resource.RLIM_INFINITY else min(HARD, OPEN_FILES_TARGET)

pytestmark = pytest.mark.skipif(not Path("/proc/self/limits").exists() or EXPECTED <= 256,
                                reason="needs Linux's /proc and a hard open-files limit over 256")


def soft_open_files(pid: int) -> int:
    """The soft "Max open files" of process ``pid``, as /proc says it."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError(f"no open-files line in /proc/{pid}/limits")


def _low_soft_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, HARD))


def test_facet_serve_raises_a_low_soft_limit_as_far_as_the_hard_one(tmp_path: Path) -> None:
    port = free_port()
    env = dict(os.environ, FACET_DATA_DIR=str(tmp_path / "data"), OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--port", str(port),
                             "--log-level", "warning"], env=env, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=_low_soft_limit)
    try:
        wait_until_healthy(proc, port, 120)
        assert soft_open_files(proc.pid) == EXPECTED
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_facet_ui_raises_it_too(tmp_path: Path) -> None:
    pytest.importorskip("gradio")
    port = free_port()
    env = dict(os.environ, FACET_DATA_DIR=str(tmp_path / "data"), OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-m", "app", "ui", "--port", str(port), "--preload", ""],
                            env=env, cwd=ROOT, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, preexec_fn=_low_soft_limit)
    try:
        deadline = time.monotonic() + 120
        while True:  # the page answers once Gradio has launched
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            try:
                if httpx.get(f"http://127.0.0.1:{port}/", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "facet ui did not start within 120 s"
            time.sleep(0.2)
        assert soft_open_files(proc.pid) == EXPECTED
    finally:
        proc.terminate()
        proc.wait(timeout=30)


RAISE = ("import resource, sys; from app.files import raise_open_files_limit; "
         "resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), int(sys.argv[2]))); "
         "print(raise_open_files_limit(int(sys.argv[3])), resource.getrlimit(resource.RLIMIT_NOFILE))")


@pytest.mark.parametrize(("soft", "hard", "target", "said"), [
    (256, 512, 4096, "(256, 512) (512, 512)"),  # raised to the hard limit, no further
    (256, 512, 300, "(256, 300) (300, 512)"),   # raised to the target, under the hard limit
    (256, 256, 4096, "None (256, 256)"),        # no room under the hard limit: kept
    (400, 512, 300, "None (400, 512)"),         # above the target: never lowered
])
def test_the_soft_limit_rises_to_the_hard_one_or_the_target_and_never_falls(
        soft: int, hard: int, target: int, said: str) -> None:
    done = subprocess.run([sys.executable, "-c", RAISE, str(soft), str(hard), str(target)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == said
