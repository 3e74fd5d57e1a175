"""Chunk tasks that must come back to the broker instead of being lost, on a real Redis and a
real worker.

* A Redis outage while a chunk task retries (``self.retry`` publishes the retry to the broker):
  the publish failed after the clients' ~1 s ``task_publish_retry_policy``, Celery rejected the
  message without requeue (a 69-frame traceback), and the chunk was in no queue and not in the
  unacknowledged set; its job went ``stalled`` and only the sweeper sent it again, minutes later,
  blaming a killed worker.
* A worker on another database than the server's (another FACET_DATA_DIR) took chunk tasks and
  dropped them at INFO as if their collection had been deleted; the job waited for the sweeper.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from app.core import Facet
from app.services.distributed import ChunkedIndexService
from indexer import metadata as md
from tests.app.services.conftest import write_corpus

from .conftest import RedisServer, Stack, free_port


def _wait_state(client: Facet, job_id: int, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.job(job_id)
        if job.state not in ("running", "stalled", "queued"):
            return job
        time.sleep(0.2)
    return client.job(job_id)


@pytest.mark.parametrize("down_s", [6.0, 18.0], ids=["within-the-publish-retries",
                                             "past-them"])
def test_a_chunk_retrying_while_redis_is_down_is_not_lost(stack: Stack, minilm, tmp_path: Path,
                                                          down_s: float) -> None:
    """The chunk's worker is held in its claim (the test holds the SQLite write lock) while Redis
    stops; the claim then finds the chunk claimed by another (live) worker, so the task retries
    (``ChunkBusy``) with the broker down. Redis comes back (AOF) ``down_s`` later: within the
    worker's publish retries (half FACET_VISIBILITY_TIMEOUT_S=30: ~15 s), the retry is
    published; past them, the message is handed back to the broker, and taken again as soon as
    it is up (not after the visibility timeout)."""
    import redis

    from app.remote import INDEX_CHUNK_TASK, celery_client
    from worker.recovery import broker_chunks

    (tmp_path / "redis").mkdir()
    server = RedisServer(free_port(), tmp_path / "redis")
    server.start()
    stack.env["FACET_BROKER_URL"] = server.url(0)
    # The job's lease (taken by the planning here) lapses only after a minute: the sweeper
    # (which re-sends a stalled job's missing chunks) cannot be what brings the chunk back.
    stack.env["FACET_LEASE_TTL_S"] = "60"
    stack.env["FACET_VISIBILITY_TIMEOUT_S"] = "30"
    src = tmp_path / "src"
    write_corpus(src, 3)  # one chunk
    client = Facet(stack.settings())
    client.embedder_cache.put("minilm", minilm)
    try:
        job_id, numbers = stack.plan_here(client, src, f"outage{int(down_s)}")
        assert numbers == [0]
        worker = stack.start_worker(queues="index")
        broker = redis.Redis.from_url(server.url(0))
        C = md.JobChunk
        with client.context.sessions() as held:
            # The write lock, held: the worker's claim (an UPDATE) waits on it.
            held.execute(update(C).where(C.job_id == job_id, C.number == 0).values(
                state="running", worker="w-other", attempts=1,
                claimed_until=md.utcnow() + dt.timedelta(seconds=2)))
            celery_client(stack.settings()).send_task(INDEX_CHUNK_TASK, args=[job_id, 0],
                                                      queue="index")
            deadline = time.monotonic() + 30
            while (broker.llen("index") or not broker.hlen("unacked")) and \
                    time.monotonic() < deadline:
                time.sleep(0.05)
            assert broker.llen("index") == 0  # taken: unacknowledged
            assert broker_chunks(broker) == {(job_id, 0)}
            time.sleep(1.0)  # the worker waits on the lock
            server.stop()
            held.commit()  # the claim fails: ChunkBusy, a retry published to a broker that is down
        if down_s > 15:
            # Past the publish retries: Redis comes back once the worker said it gave up
            # (the first try ~down_s - 3 s after the stop, on an idle machine).
            deadline = time.monotonic() + down_s + 60
            while "could not send its retry" not in worker.text() and \
                    time.monotonic() < deadline:
                time.sleep(0.1)
        else:
            time.sleep(down_s)
        server.start()
        started = time.monotonic()
        # Well before the visibility timeout (30 s after the delivery) would bring back a
        # message left unacknowledged, and the sweeper (the job stalls after 60 s) a lost one.
        job = _wait_state(client, job_id, 9)
        took = time.monotonic() - started
        text = worker.text()
        assert (job.state, job.chunks_done, job.docs_indexed) == ("completed", 1, 3), \
            (took, job, text[-4000:])
        assert "Traceback" not in text and "reject requeue=False" not in text, text[-4000:]
        handed_back = (f"WARNING worker.tasks: chunk 0 of job {job_id}: could not send its retry "
                       f"to the broker at {server.url(0)} for 15s (Error 111 connecting to")
        assert (handed_back in text) == (down_s > 15), text[-4000:]
        published = "facet.index_chunk[" in text and "] retry: Retry in " in text
        assert published == (down_s < 15), text[-4000:]
    finally:
        client.close()
        for w in stack.workers:
            w.kill()  # (its shutdown is not what this test reads)
        server.stop()


def test_a_chunk_taken_by_a_worker_on_another_database_goes_back_to_the_broker(
        stack: Stack, minilm, tmp_path: Path) -> None:
    """A worker whose FACET_DATA_DIR is not the server's takes the chunk first: it says so at
    WARNING (its database, the settings to fix) and sends the task back; the task is still in
    the broker when that worker stops, and the worker on the server's database, started next,
    completes the job (the sweeper cannot: the job's lease lapses only after a minute)."""
    import redis

    from app.remote import INDEX_CHUNK_TASK, celery_client
    from worker.recovery import broker_chunks

    stack.env["FACET_LEASE_TTL_S"] = "60"
    src = tmp_path / "src"
    write_corpus(src, 3)  # one chunk
    client = Facet(stack.settings())
    client.embedder_cache.put("minilm", minilm)
    try:
        job_id, numbers = stack.plan_here(client, src, "otherdb")
        assert numbers == [0]
        right = dict(stack.env)
        stack.env["FACET_DATA_DIR"] = str(tmp_path / "other-data")
        wrong = stack.start_worker(queues="index")
        stack.env.clear()
        stack.env.update(right)
        celery_client(stack.settings()).send_task(INDEX_CHUNK_TASK, args=[job_id, 0],
                                                  queue="index")
        said = (f"WARNING worker.tasks: chunk 0: index job {job_id} is not in this worker's "
                f"database (SQLite at {tmp_path / 'other-data' / 'facet.db'}), which has never "
                "had a job: the job was queued by a server on another database; a worker whose "
                "FACET_DATA_DIR / FACET_DATABASE_URL differ from the server's drops every job; "
                "start the worker with the server's FACET_DATA_DIR / FACET_DATABASE_URL; "
                "sending its task back to the broker for a worker on that database (in 3s, try 1 "
                "of 20)")
        deadline = time.monotonic() + 30
        while said not in wrong.text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert said in wrong.text(), wrong.text()[-4000:]
        time.sleep(0.5)
        broker = redis.Redis.from_url(stack.env["FACET_BROKER_URL"])
        assert broker_chunks(broker) == {(job_id, 0)}, wrong.text()[-4000:]  # not dropped
        assert "dropped" not in wrong.text() and "Traceback" not in wrong.text()
        assert client.job(job_id).chunks_done == 0

        # (Stopped first: with both consuming, which one Redis hands the retried task to is
        # the broker's choice; under load the wrong one took its own retry again and again.)
        wrong.stop()
        assert broker_chunks(broker) == {(job_id, 0)}, wrong.text()[-4000:]
        stack.start_worker(queues="index")
        job = _wait_state(client, job_id, 40)
        assert (job.state, job.chunks_done, job.docs_indexed) == ("completed", 1, 3), \
            (job, wrong.text()[-3000:], stack.workers[1].text()[-3000:])
    finally:
        client.close()


def test_run_chunk_tells_another_databases_job_from_a_deleted_collections(facet, tmp_path,
                                                                          caplog) -> None:
    """In process: a job id above any this database handed out raises ``JobGone`` (the task
    sends the chunk back); a deleted collection's job (an id it did hand out) is still dropped,
    at INFO, its line naming both causes."""
    import logging

    from app.services.distributed import JobGone

    write_corpus(tmp_path / "src", 2)
    report = facet.index(tmp_path / "src", "dropped")
    facet.delete_collection("dropped")
    service = ChunkedIndexService(facet.context)
    database = facet.context.settings.database_description(path=True)
    with pytest.raises(JobGone) as other:
        service.run_chunk(report.job_id + 5, 0)
    assert str(other.value) == (
        f"index job {report.job_id + 5} is not in this worker's database ({database}), which "
        f"never had it (its highest job id is {report.job_id}): the job was queued by a server "
        "on another database; a worker whose FACET_DATA_DIR / FACET_DATABASE_URL differ from the "
        "server's drops every job; start the worker with the server's FACET_DATA_DIR / "
        "FACET_DATABASE_URL; sending its task back to the broker for a worker on that database")
    with caplog.at_level(logging.INFO, logger="app.services.distributed"):
        gone = service.run_chunk(report.job_id, 0)
    assert (gone.outcome, gone.message) == ("gone", (
        f"index job {report.job_id} no longer exists in this worker's database ({database}): its "
        "collection was deleted, or the job was queued by a server on another database (a worker "
        "whose FACET_DATA_DIR / FACET_DATABASE_URL differ from the server's drops every job); "
        "dropping it"))
    said = [r for r in caplog.records if r.name == "app.services.distributed"
            and gone.message in r.getMessage()]
    assert [(r.levelname, r.getMessage()) for r in said] == [("INFO", f"chunk 0: {gone.message}")]
