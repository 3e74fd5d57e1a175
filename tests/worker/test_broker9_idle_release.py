"""A worker lets a collection of the embedded store go once no chunk of it runs in the process.

A job whose chunk was lost with a killed worker waits for the broker to re-deliver it
(FACET_VISIBILITY_TIMEOUT_S, an hour by default) and shows ``stalled``, advising to run the same
``facet index ... --background`` again to go on now. A worker that had run the job's other
chunks kept the collection's embedded store open until the job's end, which never came: the
advised rerun (and every search, every POST /jobs) was refused as "open in pid N (facet
worker)" for that hour. Here the lost chunk is made exact: the test plans the job itself,
leaves chunk 0 claimed by a dead worker with its message in Redis' unacknowledged set (as a
``kill -9`` leaves it), and sends the other chunk tasks to a real worker.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from pathlib import Path

import pytest
from sqlalchemy import update

from app.core import Facet
from app.services.distributed import ChunkedIndexService
from indexer import metadata as md
from tests.app.services.conftest import make_ctx, write_corpus  # noqa: F401 (a fixture)

from .conftest import Stack

N_DOCS = 12  # 3 chunk tasks of 4 documents


def _wait(what, until, timeout: float = 60.0, every: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = what()
        if until(value):
            return value
        time.sleep(every)
    raise AssertionError(f"still {what()} after {timeout}s")


@pytest.mark.slow
def test_the_stalled_jobs_advised_rerun_goes_on_beside_the_worker_that_ran_its_chunks(
        stack: Stack, minilm, tmp_path: Path) -> None:
    import redis

    from app.remote import INDEX_CHUNK_TASK, celery_client
    from worker.recovery import UNACKED_KEY

    stack.env.pop("FACET_QDRANT_URL")  # the embedded edge store: one process holds a collection
    write_corpus(tmp_path / "src", N_DOCS)
    client = Facet(stack.settings())
    client.embedder_cache.put("minilm", minilm)
    try:
        job_id, numbers = stack.plan_here(client, tmp_path / "src", "k1")  # no worker yet
        broker = redis.Redis.from_url(stack.env["FACET_BROKER_URL"])
        assert numbers == [0, 1, 2]
        client.context.store.release("k1")  # (planned here: let the worker have it)
        # Chunk 0 as a worker killed mid-chunk leaves it: claimed by a dead process, its
        # message unacknowledged (re-delivered only after the visibility timeout).
        with client.context.sessions() as s:
            s.execute(update(md.JobChunk).where(md.JobChunk.job_id == job_id,
                                                md.JobChunk.number == 0)
                      .values(state="running", attempts=1, worker="gone:999999",
                              claimed_until=md.utcnow()))
            s.commit()
        sender = celery_client(stack.settings())
        sender.send_task(INDEX_CHUNK_TASK, args=[job_id, 0], queue="held")
        held = json.loads(broker.rpop("held"))
        broker.hset(UNACKED_KEY, "killed-worker-tag", json.dumps([held, "", "index"]))
        for n in numbers[1:]:
            sender.send_task(INDEX_CHUNK_TASK, args=[job_id, n], queue="index")
        worker = stack.start_worker(queues="index")
        _wait(lambda: client.job(job_id).chunks_done, lambda done: done == 2)
        stalled = _wait(lambda: client.job(job_id), lambda job: job.state == "stalled",
                        timeout=30)
        # The advice, followed as written.
        advised = re.search(r"so to go on now, run `([^`]+)` again", stalled.message or "")
        assert advised is not None, stalled.message
        command = shlex.split(advised.group(1))
        assert command[:2] == ["facet", "index"] and command[-1] == "--background", command
        rerun = stack.facet(*command[1:])
        assert rerun.returncode == 0, (rerun.stdout + rerun.stderr)[-2000:]
        again = int(rerun.stdout.strip().splitlines()[-1])
        job = _wait(lambda: client.job(again), lambda j: j.state in ("completed", "failed"),
                    timeout=60)
        assert (job.state, job.docs_indexed, job.docs_skipped) == ("completed", 4, 8), \
            (job, worker.text()[-3000:])
        assert client.job(job_id).state == "interrupted"  # the new job took its lapsed lease
        # (The worker lets the store go just after it commits the job's end: read once it has.)
        info = _wait(lambda: client.collection("k1"), lambda i: i.points is not None, timeout=10)
        assert info.documents_indexed == N_DOCS and info.points == info.chunks > 0
    finally:
        client.close()


def test_a_collection_is_let_go_after_an_idle_and_reopened_by_the_next_chunk(
        make_ctx, tmp_path: Path) -> None:  # noqa: F811 (the fixture imported above)
    """In process: the idle release's own rules (what a worker process does between chunks)."""
    write_corpus(tmp_path / "src", 6)
    ctx = make_ctx()
    service = ChunkedIndexService(ctx, idle_release_s=1.5)
    prepared = service.index.prepare(tmp_path / "src", "c", runner="celery")
    numbers = service.plan(prepared, 2)
    assert numbers == [0, 1, 2]
    assert service.idle is not None and service.idle.pending() == ["c"]
    assert service.run_chunk(prepared.job_id, 0).outcome == "done"
    assert ctx.store.is_open("c")  # kept between chunks that follow each other
    _wait(lambda: ctx.store.is_open("c"), lambda is_open: not is_open, timeout=5, every=0.02)
    assert service.idle.pending() == []
    ctx.store.check_free("c", wait_s=0)  # another process could open it now
    # The next chunk reopens it; the last one completes the job as before.
    assert service.run_chunk(prepared.job_id, 1).outcome == "done"
    last = service.run_chunk(prepared.job_id, 2)
    assert (last.outcome, last.finished_job) == ("done", True)
    points = ctx.store.count("c")
    assert points > 0
    # 0: let go at once after each chunk.
    now = ChunkedIndexService(ctx, idle_release_s=0)
    for path in (tmp_path / "src").iterdir():
        path.write_text(path.read_text() + " changed")
    prepared = now.index.prepare(tmp_path / "src", "c", runner="celery")
    for n in now.plan(prepared, 3):
        assert not ctx.store.is_open("c")
        assert now.run_chunk(prepared.job_id, n).outcome == "done"
    assert not ctx.store.is_open("c")
    assert ctx.store.count("c") == points  # the same documents, changed: the same chunks
