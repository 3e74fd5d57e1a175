"""What the full stack said wrongly (or not at all): a worker on another database than the
server's, a worker's ``-n`` with ``%h``, a result backend out of reach.

A real redis-server and real workers (``tests/worker/conftest.py``), real SQLite.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from app.errors import UnavailableError
from app.services.distributed import ChunkedIndexService, JobGone
from app.services.indexing import IndexOptions, PreparedJob

from .conftest import ROOT, Stack, Worker, free_port

pytestmark = pytest.mark.slow


def _start_worker(stack: Stack, *args: str, **env: str) -> Worker:
    """``facet worker ARGS`` in the stack's environment with ``env`` on top (stopped by the
    stack's teardown)."""
    log = stack.tmp / f"worker-{len(stack.workers)}.log"
    out = open(log, "wb")  # noqa: SIM115 (the child writes it)
    proc = subprocess.Popen([sys.executable, "-m", "app", "worker", *args],
                            env=dict(stack.env, **env), cwd=ROOT, stdout=out,
                            stderr=subprocess.STDOUT, start_new_session=True)
    out.close()
    worker = Worker(proc, log)
    stack.workers.append(worker)
    worker.wait_ready()
    return worker


def _wait_text(worker: Worker, text: str, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in worker.text():
            return worker.text()
        time.sleep(0.1)
    raise AssertionError(f"{text!r} not in the worker's log after {timeout}s:\n{worker.text()}")


def _job(job_id: int, source: str = "/nowhere") -> PreparedJob:
    return PreparedJob(job_id=job_id, collection="c9", source=source, embedder="minilm",
                       options=IndexOptions())


def test_a_worker_on_another_database_says_so_and_its_node_name(stack: Stack, tmp_path) -> None:
    from app.remote import INDEX_JOB_TASK, celery_client

    other = tmp_path / "other"
    worker = _start_worker(stack, "--queues", "index", "-n", "wx@%h", FACET_DATA_DIR=str(other))
    host = socket.gethostname()
    text = worker.text()
    start = next(line for line in text.splitlines() if "worker.main: worker " in line)
    # Celery's node name, %h expanded, as Celery's own banner says it
    from app import __version__

    # its version, as facet serve's start line: which workers still run the old one in an upgrade
    assert (f"worker wx@{host} (facet {__version__}): queues index, 1 process(es), data folder "
            f"{other}, ") in start, start
    assert "%h" not in start
    assert f"database SQLite at {other / 'facet.db'}" in start, start
    assert f"wx@{host}" in text  # Celery's banner: the same name
    # A job the server (another data folder) queued: this worker's database never had it
    celery_client(stack.settings()).send_task(INDEX_JOB_TASK, args=[_job(16).to_dict()],
                                              queue="index", ignore_result=True)
    text = _wait_text(worker, "index job 16 ")
    line = next(line for line in text.splitlines() if "index job 16 " in line)
    assert " WARNING worker.tasks: planning: index job 16 is not in this worker's database " \
           f"(SQLite at {other / 'facet.db'}), which has never had a job: " in line, line
    assert ("a worker whose FACET_DATA_DIR / FACET_DATABASE_URL differ from the server's "
            "drops every job") in line
    # Sent back for a worker on the right database, as a chunk task is (it was dropped).
    assert line.endswith("sending its task back to the broker for a worker on that database "
                         "(in 3s, try 1 of 20)"), line
    assert "its collection was deleted" not in line


def test_a_job_planned_by_a_worker_on_another_database_reaches_the_right_one(
        stack: Stack, minilm, tmp_path) -> None:
    """With a worker on another data folder beside the right one, about half the jobs stayed
    `queued ... not started` for ever: the wrong worker dropped their planner tasks (helper-460's
    fault injection, the fifth session of 2026-12-05). Sent back, the right worker plans them."""
    from app.core import Facet

    wrong = _start_worker(stack, "--queues", "index", FACET_DATA_DIR=str(tmp_path / "other"))
    client = Facet(stack.settings())
    client.embedder_cache.put("minilm", minilm)
    try:
        src = tmp_path / "src"
        src.mkdir()
        (src / "a.txt").write_text("the lighthouse keeper's log")
        job_id = client.submit_index(src, "elsewhere").id
        _wait_text(wrong, f"planning: index job {job_id} is not in this worker's database")
        stack.start_worker("index")  # the right database's
        deadline = time.monotonic() + 120
        while client.job(job_id).state in ("queued", "running") and time.monotonic() < deadline:
            time.sleep(0.2)
        job = client.job(job_id)
        assert (job.state, job.docs_indexed) == ("completed", 1), job
    finally:
        client.close()


def test_a_missing_job_is_told_apart_where_the_ids_allow(stack: Stack, minilm, tmp_path) -> None:
    from app.services.collections import CollectionService
    from app.services.context import EmbedderCache, ServiceContext
    from app.services.indexing import IndexService
    from app.settings import FacetSettings

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("a few words")
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    ctx = ServiceContext(FacetSettings(data_dir=tmp_path / "db"), embedders=cache)
    try:
        database = f"SQLite at {tmp_path / 'db' / 'facet.db'}"
        chunks = ChunkedIndexService(ctx)
        first = IndexService(ctx).prepare(src, "c9", runner="celery").job_id
        # An id above any this database handed out: never here
        with pytest.raises(JobGone) as gone:
            chunks.plan(_job(first + 5, str(src)))
        assert str(gone.value).startswith(
            f"index job {first + 5} is not in this worker's database ({database}), which never "
            f"had it (its highest job id is {first}): the job was queued by a server on another "
            "database;"), gone.value
        assert gone.value.elsewhere
        # An id it holds for another job (another collection, another source): never planned
        other = PreparedJob(job_id=first, collection="c10", source="/elsewhere", embedder="minilm",
                            options=IndexOptions())
        with pytest.raises(JobGone) as gone:
            chunks.plan(other)
        assert str(gone.value) == (
            f"index job {first} in this worker's database ({database}) indexes {str(src)!r} into "
            "'c9', not the '/elsewhere' into 'c10' that was queued: the job was queued by a server "
            "on another database; a worker whose FACET_DATA_DIR / FACET_DATABASE_URL differ from "
            "the server's drops every job; sending its task back to the broker for a worker on "
            "that database")
        assert gone.value.elsewhere
        assert CollectionService(ctx).job(first).state == "queued"  # left as it was
        # An id it handed out, whose collection was deleted since (once the job was cancelled:
        # a queued job refuses the delete): either can be
        assert IndexService(ctx).cancel(first)
        CollectionService(ctx).delete("c9")
        with pytest.raises(JobGone) as gone:
            chunks.plan(_job(first, str(src)))
        assert str(gone.value) == (
            f"index job {first} no longer exists in this worker's database ({database}): its "
            "collection was deleted, or the job was queued by a server on another database (a "
            "worker whose FACET_DATA_DIR / FACET_DATABASE_URL differ from the server's drops "
            "every job); dropping it")
        assert not gone.value.elsewhere  # (dropped: its collection was deleted, most likely)
    finally:
        ctx.close()


def test_a_result_backend_out_of_reach_is_named_within_the_timeout(stack: Stack,
                                                                   tmp_path) -> None:
    from app.remote import CeleryJobRunner, CeleryQueryEncoder

    port = free_port()  # nobody listens there
    backend = f"redis://:pw2@127.0.0.1:{port}/1"
    said = f"cannot reach the result backend at redis://:***@127.0.0.1:{port}/1 ("
    settings = stack.settings(result_backend=backend, broker_timeout_s=2)
    runner = CeleryJobRunner(settings)
    t0 = time.monotonic()
    with pytest.raises(UnavailableError) as e:
        runner.submit(_job(7))
    took = time.monotonic() - t0
    message = str(e.value)
    assert said in message, message
    assert "pw2" not in message and "\n" not in message and "broker at" not in message
    assert took < 4, took
    # An encode on the workers: the send itself fails fast (no 20 retries), and says why
    encoder = CeleryQueryEncoder(settings)
    try:
        t0 = time.monotonic()
        with pytest.raises(UnavailableError) as e:
            encoder.encode(["a query"], embedder="minilm")
        took = time.monotonic() - t0
    finally:
        encoder.close()
    message = str(e.value)
    assert said in message and "pw2" not in message and "\n" not in message, message
    assert took < 6, took


def test_facet_index_background_with_the_result_backend_down(stack: Stack, tmp_path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("a few words")
    port = free_port()
    stack.env.update(FACET_RESULT_BACKEND=f"redis://:pw2@127.0.0.1:{port}/1",
                     FACET_BROKER_TIMEOUT_S="2")
    t0 = time.monotonic()
    done = stack.facet("index", str(src), "-c", "c9", "--background")
    took = time.monotonic() - t0
    assert done.returncode == 7, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"error: cannot reach the result backend at redis://:***@127.0.0.1:{port}/1 ("), last
    assert "pw2" not in done.stderr and "Retry limit" not in done.stderr
    assert took < 15, took  # a process start included
    jobs = stack.facet("jobs")
    assert "\\x0a" not in jobs.stdout and "c9" not in jobs.stdout, jobs.stdout


def test_a_query_embedder_the_worker_cannot_load_is_the_workers_fault(stack: Stack) -> None:
    """The server checks a request's embedder by name before sending it; a worker without the
    plugin that registers it answered "unknown embedder ... valid names: (the worker's)", a 404
    model_not_found for a model /v1/models lists (the plugin exploration of the sixth session
    of 2026-12-02). It is unavailable (503), naming the worker and what to do."""
    from app.errors import UnknownModelError
    from app.remote import CeleryQueryEncoder
    from embedders.registry import register_embedder, unregister_embedder
    from tests.app.services.test_instruction_unread import WordHash

    stack.start_worker("query")
    encoder = CeleryQueryEncoder(stack.settings(worker_timeout_s=60))
    register_embedder("only-on-the-server", lambda device=None, **kw: WordHash("only-on-the-server"), "here")
    try:
        with pytest.raises(UnavailableError) as refused:
            encoder.encode(["a query"], embedder="only-on-the-server")
        # A name no process knows stays the client's: unknown, as the worker said it.
        with pytest.raises(UnknownModelError):
            encoder.encode(["a query"], embedder="known-nowhere")
    finally:
        unregister_embedder("only-on-the-server")
        encoder.close()
    message = str(refused.value)
    assert message.startswith("worker ") and " cannot load 'only-on-the-server', which this server can: " in message
    assert message.endswith("FACET_PLUGINS; start the workers with the plugins the server has)"), message


def _with_plugin(stack: Stack, tmp_path, module: str, source: str) -> None:
    """The stack's processes (workers, `facet` commands) load plugin ``module`` (``source``)."""
    folder = tmp_path / "plugins"
    folder.mkdir(exist_ok=True)
    (folder / f"{module}.py").write_text(source)
    stack.env.update(FACET_PLUGINS=module,
                     PYTHONPATH=os.pathsep.join([stack.env["PYTHONPATH"], str(folder)]))


HUNGRY_PLUGIN = '''
from embedders import register_embedder
from tests.app.services.test_instruction_unread import WordHash


class Hungry(WordHash):
    def encode(self, texts, **kwargs):
        raise MemoryError


register_embedder("hungry", lambda device=None, **kw: Hungry("hungry"), "runs out of memory")
'''


def test_a_models_memoryerror_in_a_query_leaves_the_worker_serving(stack: Stack, tmp_path) -> None:
    """A plugin's MemoryError in an encode task ended the whole worker (Celery: "Unrecoverable
    error: MemoryError"), the caller read "the worker failed: MemoryError: " and the next
    queries found no worker (the verification round of the sixth session of 2026-12-02). It is
    the model's error, naming the worker; the worker goes on serving."""
    from app.errors import ModelError
    from app.remote import CeleryQueryEncoder

    settings = stack.settings(worker_timeout_s=60)  # (FACET_PLUGINS is no setting: read before)
    _with_plugin(stack, tmp_path, "hungry_plugin", HUNGRY_PLUGIN)
    worker = stack.start_worker("query")
    encoder = CeleryQueryEncoder(settings)
    try:
        with pytest.raises(ModelError) as refused:
            encoder.encode(["a query"], embedder="hungry")
        assert encoder.encode(["a query"], embedder="minilm").shape == (1, 384)  # still serving
    finally:
        encoder.close()
    message = str(refused.value)
    assert message.startswith("encoding with 'hungry' ran out of memory on worker "), message
    assert message.endswith("(MemoryError); send fewer or shorter texts at a time"), message
    assert worker.proc.poll() is None and "Unrecoverable error" not in worker.text()


INTERRUPTING_PLUGIN = '''
from embedders import register_embedder
from tests.app.services.test_instruction_unread import WordHash


class Interrupting(WordHash):
    def encode(self, texts, **kwargs):
        raise KeyboardInterrupt


register_embedder("interrupting", lambda device=None, **kw: Interrupting("interrupting"), "raises Ctrl-C")
'''


@pytest.mark.parametrize("pool", [None, "solo"])
def test_a_plugins_keyboardinterrupt_in_a_query_is_its_error_and_the_worker_goes_on(stack: Stack, tmp_path,
                                                                                   pool) -> None:
    """A plugin raising KeyboardInterrupt in an encode task ended the pool process running it (a
    worker's pool processes ignore Ctrl-C, so no Ctrl-C raised it): the caller waited out
    FACET_WORKER_TIMEOUT_S and read "no worker answered". It is the plugin's error, at once; the
    worker goes on serving with the same process. With ``--pool solo`` the task runs in the
    worker's main process, whose SIGINT is Celery's (it raises nothing): it ended the worker."""
    from app.errors import FacetError
    from app.remote import CeleryQueryEncoder

    settings = stack.settings(worker_timeout_s=30)
    _with_plugin(stack, tmp_path, "interrupting_plugin", INTERRUPTING_PLUGIN)
    worker = stack.start_worker("query", pool=pool)
    encoder = CeleryQueryEncoder(settings)
    try:
        t0 = time.monotonic()
        with pytest.raises(FacetError) as refused:
            encoder.encode(["a query"], embedder="interrupting")
        took = time.monotonic() - t0
        assert encoder.encode(["a query"], embedder="minilm").shape == (1, 384)  # still serving
    finally:
        encoder.close()
    message = str(refused.value)
    assert "'interrupting'" in message and "KeyboardInterrupt raised by its code" in message, message
    assert took < 20, took
    assert worker.proc.poll() is None
    assert "exited with" not in worker.text() and "Unrecoverable error" not in worker.text()


def test_a_models_memoryerror_while_indexing_is_said_on_the_job_in_process_and_on_a_worker(
        stack: Stack, tmp_path) -> None:
    """A plugin's MemoryError while documents are indexed (untried until 2026-12-03): the job's
    row, and on a worker each document's error, read "MemoryError: " and nothing else. They say
    it is memory and what helps; the worker goes on, its chunk's documents listed as errors."""
    import json

    _with_plugin(stack, tmp_path, "hungry_plugin", HUNGRY_PLUGIN)
    src = tmp_path / "src"
    src.mkdir()
    for i in range(3):
        (src / f"d{i}.txt").write_text(f"document number {i} about lighthouses")
    said = "out of memory (MemoryError); index fewer chunks at a time (--batch-chunks, "

    def jobs(*args: str) -> subprocess.CompletedProcess[str]:
        """`facet jobs ...` on the stack's data, in this process (it needs no plugin: the
        plugin stays out of this process's registry): each subprocess cost ~1.5 s."""
        from tests.app.cli_runner import invoke_cli

        return invoke_cli("jobs", *args, env={k: stack.env[k] for k in (
            "FACET_DATA_DIR", "FACET_BROKER_URL", "FACET_QDRANT_URL")})

    here = stack.facet("index", str(src), "--collection", "in-process", "--embedder", "hungry")
    assert here.returncode == 1, here.stderr
    assert "error: out of memory (MemoryError)" in here.stderr
    [row] = json.loads(jobs("--json", "--collection", "in-process").stdout)
    assert row["state"] == "failed" and row["message"].startswith(said), row

    worker = stack.start_worker("index,query")
    sent = stack.facet("index", str(src), "--collection", "on-worker", "--embedder", "hungry",
                       "--background")
    assert sent.returncode == 0, sent.stderr
    job_id = int(sent.stdout.split()[0])
    followed = jobs(str(job_id), "--follow")
    job = json.loads(jobs(str(job_id), "--json").stdout)
    assert job["state"] == "completed" and job["docs_failed"] == 3, (job, followed.stdout)
    errors = jobs(str(job_id), "--errors", "3").stdout
    assert errors.count(f"chunk 0 failed: {said}") == 3, errors
    assert worker.proc.poll() is None
