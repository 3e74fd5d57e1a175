"""A worker job on a data disk with too little room (``FACET_MIN_FREE_MB``, set above the free
space the disk really has): its planner and its chunk tasks stop before writing, the job fails
with the in-process run's resumable message, and the next run of the source goes on. Chunk
tasks wrote on regardless (a write past a full disk killed the pool process with a bus error,
the embedded store's files being memory-mapped). The tasks are run in process over the real
chunk protocol (minilm, SQLite, the edge store), then by a real worker over a real Redis."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from app.core import Facet
from app.services.distributed import ChunkedIndexService
from tests.app.services.conftest import write_corpus

from .conftest import Stack

STOPPED = "UnavailableError: stopped before writing more: the disk of the data folder "
# The planner's: nothing of the job written yet (it said "stopped" until 2026-12-01).
REFUSED = "UnavailableError: refused before writing anything: the disk of the data folder "


def _resumable(src: Path, name: str, kept: bool = True) -> str:
    """The resume hint; ``kept``: the job had indexed something ("what was indexed is kept" is
    said only then, since the fourth session of 2026-12-07)."""
    return (f"; run `facet index {src} --collection {name} --embedder minilm --background` again "
            "once it is back to resume" + (": what was indexed is kept" if kept else ""))


def _no_room(folder: Path) -> float:
    """A FACET_MIN_FREE_MB above what ``folder``'s disk has free."""
    return shutil.disk_usage(folder).free / 2**20 * 4


def test_a_chunk_task_stops_its_job_before_writing_on_a_full_disk(facet, tmp_path,
                                                                  monkeypatch) -> None:
    import worker.tasks as tasks

    src = tmp_path / "src"
    write_corpus(src, 6)
    service = ChunkedIndexService(facet.context)
    prepared = facet.indexing.prepare(src, "room", runner="celery")
    assert service.plan(prepared, 2) == [0, 1, 2]
    monkeypatch.setattr(tasks, "chunk_service", lambda: service)
    assert tasks.index_chunk.run(prepared.job_id, 0)["outcome"] == "done"

    monkeypatch.setattr(facet.context.settings, "min_free_mb", _no_room(tmp_path))
    stopped = tasks.index_chunk.run(prepared.job_id, 1)
    assert stopped["outcome"] == "skipped", stopped
    job = facet.job(prepared.job_id)
    assert (job.state, job.docs_indexed, job.docs_failed, job.chunks_done) == ("failed", 2, 0, 1)
    assert job.message.startswith(STOPPED) and "MiB free, under FACET_MIN_FREE_MB" in job.message
    assert job.message.endswith(_resumable(src, "room")), job.message
    assert stopped["message"] == job.message
    late = tasks.index_chunk.run(prepared.job_id, 2)  # the job failed: nothing more is written
    assert (late["outcome"], late["message"]) == ("skipped", "job is failed")

    monkeypatch.setattr(facet.context.settings, "min_free_mb", 0.0)  # room again: it resumes
    again = facet.index(src, "room")
    assert (again.state, again.docs_skipped, again.docs_indexed) == ("completed", 2, 4)


def test_a_planner_on_a_full_disk_fails_the_job_before_making_its_store_collection(
        facet, tmp_path, monkeypatch) -> None:
    import celery

    import worker.tasks as tasks

    src = tmp_path / "src"
    write_corpus(src, 3)
    prepared = facet.indexing.prepare(src, "room", runner="celery")
    service = ChunkedIndexService(facet.context)
    monkeypatch.setattr(tasks, "chunk_service", lambda: service)
    sent: list[Any] = []

    class Group:  # the chunk tasks it would send (no broker here)
        def __init__(self, signatures: Any) -> None:
            sent.extend(signatures)

        def apply_async(self, **_: Any) -> None:
            """Sent nowhere."""

    monkeypatch.setattr(celery, "group", Group)
    monkeypatch.setattr(facet.context.settings, "min_free_mb", _no_room(tmp_path))
    out = tasks.index_job.run(prepared.to_dict())
    assert out["state"] == "failed", out
    job = facet.job(prepared.job_id)
    assert (job.state, job.chunks_total, job.docs_seen) == ("failed", 0, 0)
    assert job.message.startswith(REFUSED) and job.message.endswith(_resumable(src, "room", kept=False))
    assert sent == [] and not facet.context.store.collection_exists("room")  # nothing mapped

    monkeypatch.setattr(facet.context.settings, "min_free_mb", 0.0)
    again = facet.index(src, "room")
    assert (again.state, again.docs_indexed) == ("completed", 3)


def test_a_real_worker_stops_its_chunks_on_a_full_data_disk(stack: Stack, minilm,
                                                           tmp_path) -> None:
    """The job is planned here (with room), its chunk tasks sent; the worker that takes them
    has no room (``FACET_MIN_FREE_MB`` in its environment alone)."""
    from app.remote import INDEX_CHUNK_TASK, celery_client

    src = tmp_path / "src"
    write_corpus(src, 8)  # FACET_WORKER_CHUNK_DOCS=4: two chunk tasks
    client = Facet(stack.settings())
    client.embedder_cache.put("minilm", minilm)
    try:
        job_id, numbers = stack.plan_here(client, src, "room")  # no worker yet
        assert numbers == [0, 1]
        sender = celery_client(stack.settings())
        for n in numbers:
            sender.send_task(INDEX_CHUNK_TASK, args=[job_id, n], queue="index")
        stack.env["FACET_MIN_FREE_MB"] = str(_no_room(stack.data))
        worker = stack.start_worker(queues="index")
        deadline = time.monotonic() + 120
        # (`stalled` while no worker holds its lease: the one planned here lapsed.)
        while client.job(job_id).state in ("running", "stalled") and time.monotonic() < deadline:
            time.sleep(0.2)
        job = client.job(job_id)
        assert (job.state, job.docs_indexed, job.chunks_done) == ("failed", 0, 0), \
            (job, worker.text()[-3000:])
        assert job.message.startswith(STOPPED) and job.message.endswith(_resumable(src, "room", kept=False))
        text = worker.text()
        assert f"job {job_id} failed: {STOPPED}" in text and "Traceback" not in text, text[-3000:]
        # Room again, and the lease let go: the next run indexes it all.
        again = client.index(src, "room")
        assert (again.state, again.docs_indexed) == ("completed", 8)
    finally:
        client.close()



def test_a_planner_with_nothing_to_send_returns_the_jobs_state_not_planned(
        facet, tmp_path, monkeypatch) -> None:
    """A job cancelled while queued, and one with nothing new to index, were both returned as
    ``{"state": "planned", "chunks": 0}`` while the worker logged "nothing to plan" (the first)
    or finished the job (the second)."""
    import worker.tasks as tasks

    src = tmp_path / "src"
    write_corpus(src, 2)
    monkeypatch.setattr(tasks, "chunk_service", lambda: ChunkedIndexService(facet.context))
    cancelled = facet.indexing.prepare(src, "plan", runner="celery")
    facet.cancel_job(cancelled.job_id)
    assert tasks.index_job.run(cancelled.to_dict()) == {
        "job_id": cancelled.job_id, "state": "cancelled", "chunks": 0}

    assert facet.index(src, "plan").docs_indexed == 2
    unchanged = facet.indexing.prepare(src, "plan", runner="celery")
    assert tasks.index_job.run(unchanged.to_dict()) == {
        "job_id": unchanged.job_id, "state": "completed", "chunks": 0}
    assert facet.job(unchanged.job_id).state == "completed"
    # prepare() registered both as this process's jobs, as a server sending them to its workers
    # does; no server lets them go here, and a later test whose database reuses the ids would
    # find them (as in test_distributed.py).
    from app.services import indexing

    for job_id in (cancelled.job_id, unchanged.job_id):
        indexing._ACTIVE_JOBS.discard(job_id)
