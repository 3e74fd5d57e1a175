"""Cancelling a worker job (runner ``celery``). A job cancelled while queued is skipped by the
worker that takes its task; a running one stops at its next chunk task, the chunks no worker is
writing are cancelled and the job ends ``cancelled`` (the next job of the source resumes it). And
a worker job that completes with documents failed says so, as the in-process runner does (its
message was null). The chunk protocol is driven in process (what the tasks call); the last test
runs a real worker over a real Redis."""

from __future__ import annotations

import time

from app.core import Facet
from app.services.distributed import ChunkedIndexService
from tests.app.services.conftest import write_corpus

from .conftest import Stack


def test_a_queued_worker_job_cancelled_is_skipped_by_its_planner(facet, tmp_path) -> None:
    write_corpus(tmp_path / "src", 3)
    prepared = facet.indexing.prepare(tmp_path / "src", "c", runner="celery")
    assert facet.cancel_job(prepared.job_id).state == "cancelled"
    assert ChunkedIndexService(facet.context).plan(prepared, 1) == []
    job = facet.job(prepared.job_id)
    assert (job.state, job.started_at, job.chunks_total, job.docs_seen) == ("cancelled", None, 0, 0)


def test_a_running_worker_job_stops_at_its_next_chunk_and_is_resumed(facet, tmp_path) -> None:
    write_corpus(tmp_path / "src", 6)
    service = ChunkedIndexService(facet.context)
    prepared = facet.indexing.prepare(tmp_path / "src", "c", runner="celery")
    numbers = service.plan(prepared, 2)
    assert numbers == [0, 1, 2]
    assert service.run_chunk(prepared.job_id, 0).outcome == "done"
    asked = facet.cancel_job(prepared.job_id)
    assert (asked.state, asked.cancel_requested) == ("running", True)
    stopped = service.run_chunk(prepared.job_id, 1)
    assert (stopped.outcome, stopped.message, stopped.finished_job) == ("skipped", "job cancelled", True)
    late = service.run_chunk(prepared.job_id, 2)
    assert (late.outcome, late.message) == ("skipped", "job is cancelled")
    job = facet.job(prepared.job_id)
    assert (job.state, job.docs_indexed, job.chunks_done) == ("cancelled", 2, 1)
    assert job.message == (
        "cancelled after 2 documents indexed; index the same source again to resume: what was indexed is kept"
    )
    assert facet.collection("c").documents_indexed == 2
    again = facet.index(tmp_path / "src", "c")
    assert (again.state, again.docs_skipped, again.docs_indexed) == ("completed", 2, 4)
    assert facet.job(again.job_id).resumed_from == prepared.job_id


def test_a_worker_job_with_failed_documents_says_so(facet, tmp_path) -> None:
    write_corpus(tmp_path / "src", 3)
    (tmp_path / "src" / "broken.pdf").write_bytes(b"not a pdf at all")
    service = ChunkedIndexService(facet.context)
    prepared = facet.indexing.prepare(tmp_path / "src", "c", runner="celery")
    for n in service.plan(prepared, 2):
        service.run_chunk(prepared.job_id, n)
    job = facet.job(prepared.job_id)
    assert (job.state, job.docs_indexed, job.docs_failed) == ("completed", 3, 1)
    assert job.message == "1 of 4 documents failed, 3 indexed: see the job's errors"


def test_a_real_worker_skips_a_job_cancelled_in_its_queue(stack: Stack, minilm, tmp_path) -> None:
    write_corpus(tmp_path / "a", 3)
    write_corpus(tmp_path / "b", 2)
    client = Facet(stack.settings())
    client.embedder_cache.put("minilm", minilm)
    try:
        queued = client.submit_index(tmp_path / "a", "a")  # to the broker: no worker yet
        assert client.cancel_job(queued.id).state == "cancelled"
        worker = stack.start_worker("index")
        # A job queued after it: the worker takes the cancelled job's task first.
        later = client.submit_index(tmp_path / "b", "b")
        deadline = time.monotonic() + 120
        while client.job(later.id).state != "completed" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert client.job(later.id).state == "completed"
        skipped = f"job {queued.id} is cancelled; nothing to plan"
        while skipped not in worker.text() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert skipped in worker.text()
        job = client.job(queued.id)
        assert (job.state, job.started_at, job.docs_seen) == ("cancelled", None, 0)
        assert client.collection("a").documents_indexed == 0
    finally:
        client.close()
