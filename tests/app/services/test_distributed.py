"""The chunked job protocol in process (what the Celery tasks call): plan, chunks, finish.

No broker here: these tests drive ``ChunkedIndexService`` directly, one call per task, to
reach the cases a worker cannot be made to hit on cue (a document changed between planning
and its chunk, a chunk that killed its worker too often, a collection deleted mid-job, a
duplicate delivery). tests/worker/ runs the same code through real workers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select, update

from app.services.collections import CollectionService
from app.services.distributed import ChunkedIndexService
from app.services.indexing import IndexOptions, IndexService
from app.services.search import SearchRequest, SearchService
from indexer import metadata as md

from .conftest import write_corpus


def _plan(ctx, src: Path, name: str, chunk_docs: int = 2):
    service = ChunkedIndexService(ctx)
    prepared = IndexService(ctx).prepare(src, name, runner="celery")
    numbers = service.plan(prepared, chunk_docs)
    return service, prepared, numbers


def test_plan_run_finish_and_duplicate_delivery(make_ctx, tmp_path) -> None:
    write_corpus(tmp_path / "src", 5)
    ctx = make_ctx()
    service, prepared, numbers = _plan(ctx, tmp_path / "src", "c")
    assert numbers == [0, 1, 2]
    first = service.run_chunk(prepared.job_id, 0)
    again = service.run_chunk(prepared.job_id, 0)  # a re-delivered message: counts nothing
    assert (first.outcome, again.outcome) == ("done", "duplicate")
    outcomes = [service.run_chunk(prepared.job_id, n) for n in numbers[1:]]
    assert [o.outcome for o in outcomes] == ["done", "done"]
    assert [o.finished_job for o in outcomes] == [False, True]
    late = service.run_chunk(prepared.job_id, 1)  # after the job completed
    assert (late.outcome, late.message) == ("skipped", "job is completed")
    job = CollectionService(ctx).job(prepared.job_id)
    info = CollectionService(ctx).get("c")
    assert job.state == "completed" and job.docs_indexed == 5 and job.chunks_done == 3
    assert info.points == info.chunks == job.chunks_written
    # A second plan of the same source finds nothing to do.
    _, second, nothing = _plan(ctx, tmp_path / "src", "c")
    assert nothing == []
    assert CollectionService(ctx).job(second.job_id).docs_skipped == 5


def test_a_document_that_changed_after_planning(make_ctx, tmp_path, caplog) -> None:
    import logging

    files = write_corpus(tmp_path / "src", 4)
    ctx = make_ctx()
    service, prepared, numbers = _plan(ctx, tmp_path / "src", "c")
    paths = sorted(files)
    Path(paths[0]).write_text("an entirely new text about sailing boats and harbours")
    Path(paths[1]).unlink()
    with caplog.at_level(logging.INFO, logger="app.services.distributed"):
        for n in numbers:
            service.run_chunk(prepared.job_id, n)
    job = CollectionService(ctx).job(prepared.job_id)
    assert job.state == "completed"
    assert (job.docs_seen, job.docs_indexed, job.docs_failed) == (4, 3, 1)
    # The job's end in the worker's log, as the in-process runner logs it: it said "job 1
    # completed" and no more (the logs review of the seventh session of 2026-12-06).
    end, = [r for r in caplog.records if r.getMessage().startswith(f"job {job.id} completed")]
    assert end.levelno == logging.WARNING
    assert end.getMessage() == (
        f"job {job.id} completed (collection 'c'): 4 seen, 3 indexed, 0 unchanged, 1 failed, "
        f"0 deleted: 1 of 4 documents failed, 3 indexed: see the job's errors; failed: {paths[1]}")
    messages = {e["document"]: (e["kind"], e["message"]) for e in job.errors}
    assert messages[paths[0]][0] == "warning" and "changed after the job was planned" in \
        messages[paths[0]][1]
    # (It said the file "is no longer in" itself.)
    assert messages[paths[1]] == ("error", f"{paths[1]} was deleted after the job was planned; "
                                           "not indexed")
    hits = ctx.store.scroll("c", filters={"doc_id": paths[0]})
    assert [h.payload["text"] for h in hits] == [
        "an entirely new text about sailing boats and harbours"]
    info = CollectionService(ctx).get("c")
    assert info.points == info.chunks and info.documents_indexed == 3


def test_a_chunk_that_keeps_killing_its_worker_is_failed_not_rerun(make_ctx, tmp_path) -> None:
    write_corpus(tmp_path / "src", 4)
    ctx = make_ctx(worker_poison_limit=2)
    service, prepared, _numbers = _plan(ctx, tmp_path / "src", "c")
    with ctx.sessions() as s:  # two claims that never finished: two dead workers
        s.execute(update(md.JobChunk).where(md.JobChunk.job_id == prepared.job_id,
                                            md.JobChunk.number == 0)
                  .values(attempts=2, state="running", claimed_until=md.utcnow()))
        s.commit()
    poisoned = service.run_chunk(prepared.job_id, 0)
    assert poisoned.outcome == "poisoned" and "FACET_WORKER_POISON_LIMIT=2" in poisoned.message
    assert service.run_chunk(prepared.job_id, 1).finished_job
    job = CollectionService(ctx).job(prepared.job_id)
    assert job.state == "completed" and (job.docs_indexed, job.docs_failed) == (2, 2)
    assert "1 chunk failed" in (job.message or "")
    with ctx.sessions() as s:
        chunk = s.scalar(select(md.JobChunk).where(md.JobChunk.job_id == prepared.job_id,
                                                    md.JobChunk.number == 0))
        assert chunk is not None and (chunk.state, chunk.attempts) == ("failed", 3)


def test_a_failed_chunk_marks_its_documents_failed_and_the_next_job_clears_its_points(
        make_ctx, tmp_path, monkeypatch) -> None:
    files = sorted(write_corpus(tmp_path / "src", 4))
    ctx = make_ctx()
    service, prepared, numbers = _plan(ctx, tmp_path / "src", "c")
    for n in numbers:
        service.run_chunk(prepared.job_id, n)
    # The first document grows to several chunks; the chunk writing it fails after its points
    # reached the store (the flush raises), before the metadata says so.
    Path(files[0]).write_text(" ".join(f"harbour ferry timetable line {i}." for i in range(80)))
    service, prepared, numbers = _plan(ctx, tmp_path / "src", "c")
    assert numbers == [0]
    real_flush = ctx.store.flush

    def broken_flush() -> None:
        raise RuntimeError("disk went away")

    monkeypatch.setattr(ctx.store, "flush", broken_flush)
    outcome = service.run_chunk(prepared.job_id, 0)
    monkeypatch.setattr(ctx.store, "flush", real_flush)
    assert outcome.outcome == "failed" and outcome.finished_job
    info = CollectionService(ctx).get("c")
    # Counted as failed, as the job counts it, not left "pending" (in neither figure).
    assert (info.documents, info.documents_indexed, info.documents_failed) == (4, 3, 1)
    assert CollectionService(ctx).job(prepared.job_id).docs_failed == 1
    with ctx.sessions() as s:
        row = md.documents_by_key(s, md.get_collection(s, "c").id, [files[0]])[files[0]]
        assert row.status == "error" and "disk went away" in (row.error or "")
    assert info.points is not None and info.points > info.chunks  # the partial write's points

    # Back to one chunk: the next job deletes every point the failed write left, not only the
    # ones its old chunk rows name.
    Path(files[0]).write_text("a short note about ferries")
    service, prepared, numbers = _plan(ctx, tmp_path / "src", "c")
    for n in numbers:
        service.run_chunk(prepared.job_id, n)
    info = CollectionService(ctx).get("c")
    assert (info.documents_indexed, info.documents_failed) == (4, 0)
    assert info.points == info.chunks == 4
    assert [h.payload["text"] for h in ctx.store.scroll("c", filters={"doc_id": files[0]})] == [
        "a short note about ferries"]


def test_planning_keeps_the_records_of_a_file_that_failed_to_parse(make_ctx, tmp_path) -> None:
    import json

    src = tmp_path / "src"
    src.mkdir()
    lines = [json.dumps({"id": f"s{i}", "text": f"record {i} about {w}"})
             for i, w in enumerate(["wolves", "bears", "moose"])]
    (src / "d.jsonl").write_text("\n".join(lines) + "\n")
    ctx = make_ctx()
    service, prepared, numbers = _plan(ctx, src, "c")
    for n in numbers:
        service.run_chunk(prepared.job_id, n)
    (src / "d.jsonl").write_text("\n".join([lines[0], "{broken", lines[2]]) + "\n")
    _service, second, _numbers = _plan(ctx, src, "c")
    job = CollectionService(ctx).job(second.job_id)
    assert (job.docs_deleted, job.docs_failed) == (0, 1)
    assert ctx.store.count("c", {"doc_id": "s1"}) == 1
    assert any("kept: the file had errors" in e["message"] for e in job.errors)


def test_chunks_of_a_deleted_collection_are_dropped(make_ctx, tmp_path) -> None:
    write_corpus(tmp_path / "src", 4)
    ctx = make_ctx()
    service, prepared, numbers = _plan(ctx, tmp_path / "src", "c")
    service.run_chunk(prepared.job_id, numbers[0])
    # The job holds the lease: deleting refuses until the lease is gone...
    with ctx.sessions() as s:
        coll = md.get_collection(s, "c")
        assert coll is not None
        coll.lease_expires_at = md.utcnow()  # its workers stopped
        s.commit()
    CollectionService(ctx).delete("c")
    gone = service.run_chunk(prepared.job_id, numbers[1])
    assert gone.outcome == "gone"
    assert not ctx.store.collection_exists("c")  # nothing written back into a deleted collection


def test_a_busy_claim_is_retried_not_run_twice(make_ctx, tmp_path) -> None:
    from datetime import timedelta

    import pytest

    from app.services.distributed import ChunkBusy

    write_corpus(tmp_path / "src", 2)
    ctx = make_ctx()
    service, prepared, numbers = _plan(ctx, tmp_path / "src", "c")
    with ctx.sessions() as s:  # another live worker claims chunk 0 for the next minute
        s.execute(update(md.JobChunk).where(md.JobChunk.job_id == prepared.job_id)
                  .values(state="running", worker="other:1", attempts=1,
                          claimed_until=md.utcnow() + timedelta(seconds=60)))
        s.commit()
    with pytest.raises(ChunkBusy, match="claimed by other:1"):
        service.run_chunk(prepared.job_id, numbers[0])


def test_a_transient_store_outage_is_retried_without_losing_or_counting_twice(make_ctx,
                                                                               tmp_path) -> None:
    """The store fails once mid-chunk as a server outage would (a wrapper raising
    StoreUnavailableError: a Qdrant server cannot be stopped and restarted with its data here)."""
    import pytest

    from app.services.distributed import is_transient
    from indexer.errors import StoreUnavailableError

    write_corpus(tmp_path / "src", 4)
    ctx = make_ctx()
    service, prepared, numbers = _plan(ctx, tmp_path / "src", "c")
    real_upsert = ctx.store.upsert
    calls = {"n": 0}

    def flaky_upsert(collection, points):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 1:
            raise StoreUnavailableError("cannot reach Qdrant at http://qdrant:6333: timed out")
        return real_upsert(collection, points)

    ctx.store.upsert = flaky_upsert  # type: ignore[method-assign]
    with pytest.raises(StoreUnavailableError) as raised:
        service.run_chunk(prepared.job_id, numbers[0])
    assert is_transient(raised.value)
    service.release_claim(prepared.job_id, numbers[0])  # what the task does before its retry
    for n in numbers:
        service.run_chunk(prepared.job_id, n)
    job = CollectionService(ctx).job(prepared.job_id)
    info = CollectionService(ctx).get("c")
    assert job.state == "completed" and (job.docs_seen, job.docs_indexed) == (4, 4)
    assert info.points == info.chunks == job.chunks_written
    with ctx.sessions() as s:
        attempts = s.scalars(select(md.JobChunk.attempts).where(
            md.JobChunk.job_id == prepared.job_id).order_by(md.JobChunk.number)).all()
    assert list(attempts) == [1, 1]  # the outage did not count towards the poison limit


@pytest.mark.parametrize("b_commits_first", [True, False])
def test_a_chunk_taken_over_after_its_claim_lapsed_counts_once(make_ctx, tmp_path,
                                                               b_commits_first) -> None:
    """Worker A stalls past the claim's ttl mid-chunk (a starved machine) and the re-delivered
    task reaches worker B, which claims the lapsed chunk. Either B commits the chunk before A
    reaches its commit (A's write then meets B's rows), or B is still running when A commits
    (A no longer holds the claim). Both ways A's transaction is rolled back and the chunk's
    documents, chunks and points count once."""
    write_corpus(tmp_path / "src", 4)
    ctx = make_ctx(lease_ttl_s=60.0)  # no heartbeat renews A's claim during the test
    a, prepared, numbers = _plan(ctx, tmp_path / "src", "c")
    b = ChunkedIndexService(ctx)
    b.worker = "other-host:2"
    real_upsert = ctx.store.upsert
    taken_over: list[str] = []
    stalled = {"done": False}

    def stalled_upsert(collection, points):  # type: ignore[no-untyped-def]
        if not stalled["done"]:  # A's first write: its claim lapses and B takes the chunk
            stalled["done"] = True
            C = md.JobChunk
            with ctx.sessions() as s:
                s.execute(update(C).where(C.job_id == prepared.job_id, C.number == numbers[0])
                          .values(claimed_until=md.utcnow()))
                s.commit()
                if not b_commits_first:  # B claimed it and is still encoding
                    s.execute(update(C).where(C.job_id == prepared.job_id,
                                              C.number == numbers[0])
                              .values(worker=b.worker, attempts=C.attempts + 1))
                    s.commit()
            if b_commits_first:
                taken_over.append(b.run_chunk(prepared.job_id, numbers[0]).outcome)
        return real_upsert(collection, points)

    ctx.store.upsert = stalled_upsert  # type: ignore[method-assign]
    first = a.run_chunk(prepared.job_id, numbers[0])
    assert first.outcome == "duplicate", first
    assert "other-host:2 took the chunk over" in (first.message or "")
    if not b_commits_first:
        taken_over.append(b.run_chunk(prepared.job_id, numbers[0]).outcome)
    assert taken_over == ["done"]
    for n in numbers[1:]:
        assert a.run_chunk(prepared.job_id, n).outcome == "done"
    job = CollectionService(ctx).job(prepared.job_id)
    info = CollectionService(ctx).get("c")
    assert job.state == "completed" and job.chunks_done == job.chunks_total == len(numbers)
    assert (job.docs_seen, job.docs_indexed, job.docs_failed) == (4, 4, 0), job
    assert info.points == info.chunks == job.chunks_written
    ids = [h.id for h in ctx.store.scroll("c", limit=1000)]
    assert len(ids) == len(set(ids)) == info.points


def test_chunks_load_the_checkpoint_directory_the_collection_recorded(make_ctx, tmp_path, minilm,
                                                                     minilm_namesake) -> None:
    """The job row names the vector ("minilm"); a worker's chunk loads what the collection
    recorded for it, the checkpoint directory it was indexed from, not the registered model of
    that name (which failed every chunk as "a different version")."""
    directory, own = minilm_namesake
    write_corpus(tmp_path / "src", 3)
    ctx = make_ctx()
    service = ChunkedIndexService(ctx)
    prepared = IndexService(ctx).prepare(tmp_path / "src", "c", IndexOptions(embedder=str(directory)),
                                         runner="celery")
    outcomes = [service.run_chunk(prepared.job_id, n) for n in service.plan(prepared, 2)]
    assert [o.outcome for o in outcomes] == ["done", "done"]
    assert CollectionService(ctx).job(prepared.job_id).docs_indexed == 3
    response = SearchService(ctx).search(SearchRequest("bank card", "c", top_k=3, mode="dense"))
    texts = [r.text for r in response.results]
    want = own.encode(texts, role="document") @ own.encode(["bank card"], role="query")[0]
    assert [r.score for r in response.results] == pytest.approx(list(want), abs=1e-4)
    assert not np.allclose(own.encode(texts, role="document"), minilm.encode(texts, role="document"), atol=1e-3)


def test_a_finish_that_met_an_outage_is_completed_by_its_chunk_sent_again(make_ctx,
                                                                         tmp_path) -> None:
    """The last chunk commits, then the store is out of reach as its finisher optimises it. The
    retried task finds the chunk done; it used to return "duplicate" and leave the job running
    for ever ("stalled", every chunk done), since no chunk was left for the sweeper to send.
    Now the sweeper names the job's last chunk and that chunk's task completes the job."""
    from app.services.distributed import is_transient, stalled_chunks
    from indexer.errors import StoreUnavailableError

    write_corpus(tmp_path / "src", 4)
    ctx = make_ctx()
    service, prepared, numbers = _plan(ctx, tmp_path / "src", "c")
    assert service.run_chunk(prepared.job_id, numbers[0]).outcome == "done"
    real_optimize = ctx.store.optimize
    calls = {"n": 0}

    def flaky_optimize(collection):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 1:
            raise StoreUnavailableError("cannot reach Qdrant at http://qdrant:6333: timed out")
        return real_optimize(collection)

    ctx.store.optimize = flaky_optimize  # type: ignore[method-assign]
    with pytest.raises(StoreUnavailableError) as raised:
        service.run_chunk(prepared.job_id, numbers[1])
    assert is_transient(raised.value)
    with ctx.sessions() as s:  # its ttl passes: nobody renews the lease
        s.execute(update(md.Collection).values(lease_expires_at=md.utcnow()))
        s.commit()
    catalog = CollectionService(ctx)
    assert catalog.job(prepared.job_id).state == "stalled"
    assert stalled_chunks(ctx.sessions) == [(prepared.job_id, numbers[1])]
    again = service.run_chunk(prepared.job_id, numbers[1])
    assert (again.outcome, again.finished_job) == ("duplicate", True)
    job = catalog.job(prepared.job_id)
    assert job.state == "completed" and job.message is None
    assert (job.docs_indexed, job.chunks_done) == (4, 2)
    assert stalled_chunks(ctx.sessions) == []


def test_a_finish_whose_optimisation_fails_still_completes_the_job(make_ctx, tmp_path) -> None:
    from indexer.errors import StoreError

    write_corpus(tmp_path / "src", 4)
    ctx = make_ctx()
    service, prepared, numbers = _plan(ctx, tmp_path / "src", "c")

    def broken_optimize(collection):  # type: ignore[no-untyped-def]
        raise StoreError("optimizer crashed")

    ctx.store.optimize = broken_optimize  # type: ignore[method-assign]
    outcomes = [service.run_chunk(prepared.job_id, n) for n in numbers]
    assert [o.finished_job for o in outcomes] == [False, True]
    job = CollectionService(ctx).job(prepared.job_id)
    assert job.state == "completed" and job.docs_indexed == 4
    assert "could not be optimised (StoreError: optimizer crashed)" in (job.message or "")
    assert CollectionService(ctx).get("c").points == job.chunks_written


def test_a_plan_that_met_a_busy_store_is_planned_again_not_failed(make_ctx, tmp_path) -> None:
    """The collection is open in another process as a worker plans (an embedded store: a
    server that searched it, another pool process). Planning used to fail the job for good,
    so the task's retry found it failed and did nothing."""
    from app.errors import ConflictError
    from app.services.distributed import is_transient
    from indexer.errors import StoreBusyError

    write_corpus(tmp_path / "src", 4)
    ctx = make_ctx()
    service = ChunkedIndexService(ctx)
    prepared = IndexService(ctx).prepare(tmp_path / "src", "c", runner="celery")
    real_ensure = ctx.store.ensure_collection
    calls = {"n": 0}

    def busy_once(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 1:
            raise StoreBusyError("collection 'c' is open in pid 1 on host h", "c", None)
        return real_ensure(*args, **kwargs)

    ctx.store.ensure_collection = busy_once  # type: ignore[method-assign]
    with pytest.raises(ConflictError) as raised:
        service.plan(prepared, 2)
    assert is_transient(raised.value)
    assert CollectionService(ctx).job(prepared.job_id).state == "running"
    numbers = service.plan(prepared, 2)  # the task's retry
    assert numbers == [0, 1]
    for n in numbers:
        service.run_chunk(prepared.job_id, n)
    assert CollectionService(ctx).job(prepared.job_id).state == "completed"


def test_a_text_column_reaches_the_plan_and_every_chunk(make_ctx, tmp_path) -> None:
    """A job over records whose text is in another field (``--text-column``) was refused for
    the workers (a chunk knows only its job's id); the column is now on the job row."""
    import json

    src = tmp_path / "reviews.jsonl"
    src.write_text("".join(json.dumps({"_id": f"r{i}", "text": "header only",
                                       "review": f"review {i}: the card arrived late"}) + "\n"
                           for i in range(5)))
    ctx = make_ctx()
    service = ChunkedIndexService(ctx)
    prepared = IndexService(ctx).prepare(src, "c", IndexOptions(text_column="review"),
                                         runner="celery")
    for n in service.plan(prepared, 2):
        assert service.run_chunk(prepared.job_id, n).outcome == "done"
    job = CollectionService(ctx).job(prepared.job_id)
    assert job.state == "completed" and job.docs_indexed == 5 and job.message is None
    texts = sorted(h.payload["text"] for h in ctx.store.scroll("c", limit=100))
    assert texts == [f"review {i}: the card arrived late" for i in range(5)]


def test_a_moved_record_file_is_planned_again_so_its_source_follows(make_ctx, tmp_path) -> None:
    """The plan skipped records whose content was unchanged, so a renamed file's records kept
    the old path as their source (in the row and the payload) on the worker path too."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.jsonl").write_text('{"id": "r1", "text": "alpha apple"}\n{"id": "r2", "text": "beta banana"}\n')
    ctx = make_ctx()
    service, prepared, numbers = _plan(ctx, src, "c")
    for n in numbers:
        service.run_chunk(prepared.job_id, n)
    (src / "a.jsonl").rename(src / "b.jsonl")
    service, prepared, numbers = _plan(ctx, src, "c")
    assert numbers  # the two records are written again
    for n in numbers:
        service.run_chunk(prepared.job_id, n)
    assert {h.payload["source"] for h in ctx.store.scroll("c", limit=10)} == {str(src / "b.jsonl")}


def _run_job(ctx, src: Path, name: str) -> int:
    """Plan a job of ``src`` into ``name`` and run each of its chunks; the job's id."""
    service, prepared, numbers = _plan(ctx, src, name)
    for n in numbers:
        service.run_chunk(prepared.job_id, n)
    return prepared.job_id


def test_a_record_moved_to_another_file_of_the_job_is_no_conflict(make_ctx, tmp_path) -> None:
    """A chunk task warned "'r2' was a record of a.jsonl, which still exists" of a record
    the edited a.jsonl had given to a new b.jsonl, both files of the job's folder."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.jsonl").write_text('{"id": "r1", "text": "alpha apple"}\n{"id": "r2", "text": "beta banana"}\n')
    ctx = make_ctx()
    _run_job(ctx, src, "c")
    (src / "a.jsonl").write_text('{"id": "r1", "text": "alpha apple"}\n')
    (src / "b.jsonl").write_text('{"id": "r2", "text": "beta banana"}\n')
    job = CollectionService(ctx).job(_run_job(ctx, src, "c"))
    assert job.state == "completed" and job.docs_indexed == 1
    assert not any("was a record of" in e["message"] for e in job.errors), job.errors


def test_a_chunk_whose_document_errors_cannot_be_recorded_still_fails_and_ends_the_job(
        make_ctx, tmp_path, monkeypatch) -> None:
    """On PostgreSQL a key SQLite stored made recording the chunk's own error raise too: the
    chunk stayed `running`, was sent again every minute past the poison limit, and the job
    never ended. Recording each document's error fails here on cue."""
    import app.services.distributed as distributed

    write_corpus(tmp_path / "src", 2)
    ctx = make_ctx()
    service, prepared, numbers = _plan(ctx, tmp_path / "src", "c")

    def broken_flush() -> None:
        raise RuntimeError("disk went away")

    def unrecordable(*args, **kwargs) -> None:
        raise ValueError("value too long for type character varying(1024)")

    monkeypatch.setattr(ctx.store, "flush", broken_flush)
    monkeypatch.setattr(distributed, "note_document_error", unrecordable)
    outcome = service.run_chunk(prepared.job_id, numbers[0])
    assert outcome.outcome == "failed" and outcome.finished_job
    job = CollectionService(ctx).job(prepared.job_id)
    assert job.state == "completed" and (job.docs_seen, job.docs_failed) == (2, 2)
    [error] = job.errors
    assert error["document"] == "chunk 0" and "disk went away" in error["message"]
    assert "could not be recorded: ValueError" in error["message"]
    with ctx.sessions() as s:
        chunk = s.scalar(select(md.JobChunk).where(md.JobChunk.job_id == prepared.job_id))
        assert chunk.state == "failed" and chunk.claimed_until is None


def test_a_companion_embedder_that_cannot_load_is_warned_about_once_a_job(make_ctx, tmp_path,
                                                                          minilm) -> None:
    """Each chunk task had its own report: a job of three chunks listed the same "vectors are
    missing" warning three times (and tried to load the embedder each time); inline says it
    once."""
    import shutil

    from embedders.baselines import EncoderMeanEmbedder
    from embedders.contract import PromptConfig

    notes = str(EncoderMeanEmbedder(name="minilm-notes", backbone=minilm.backbone,
                                    prompts=PromptConfig(document="note: {instruction}{text}"))
                .save(tmp_path / "notes"))
    files = write_corpus(tmp_path / "src", 3)
    ctx = make_ctx()
    IndexService(ctx).index(tmp_path / "src", "c")
    IndexService(ctx).index(tmp_path / "src", "c", IndexOptions(embedder=notes))
    shutil.rmtree(notes)
    for i, path in enumerate(sorted(files)):
        Path(path).write_text(f"a rewritten note number {i} about lighthouses")
    from app.services.context import EmbedderCache, ServiceContext

    cache = EmbedderCache("cpu")  # a fresh worker: only minilm loaded
    cache.put("minilm", minilm)
    worker = ServiceContext(ctx.settings, embedders=cache)
    service = ChunkedIndexService(worker)
    prepared = IndexService(ctx).prepare(tmp_path / "src", "c", runner="celery")
    numbers = service.plan(prepared, 1)
    assert len(numbers) == 3
    assert [service.run_chunk(prepared.job_id, n).outcome for n in numbers] == ["done"] * 3
    job = CollectionService(ctx).job(prepared.job_id)
    warnings = [e for e in job.errors if e["kind"] == "warning"]
    assert len(warnings) == 1 and warnings[0]["document"] == "embedder minilm-notes"
    assert "vectors of the documents this run writes are missing" in warnings[0]["message"]
    assert job.docs_indexed == 3
    worker.close()


def test_a_plan_whose_model_cannot_load_fails_the_job_on_its_row(make_ctx, tmp_path) -> None:
    """A worker that cannot load the job's model (a checkpoint removed since the job was
    queued): the planner raised before it read the job, the task took the domain error as
    "recorded on the job row by plan()", and the job stayed `queued` for ever."""
    import dataclasses

    from app.errors import UnknownModelError

    write_corpus(tmp_path / "src", 2)
    ctx = make_ctx()
    prepared = IndexService(ctx).prepare(tmp_path / "src", "c", runner="celery")
    gone = dataclasses.replace(prepared, embedder=str(tmp_path / "gone-checkpoint"))
    with pytest.raises(UnknownModelError):
        ChunkedIndexService(ctx).plan(gone, 1)
    job = CollectionService(ctx).job(prepared.job_id)
    assert job.state == "failed" and job.finished_at is not None
    assert job.message is not None and job.message.startswith("UnknownModelError: ")
    assert "gone-checkpoint" in job.message


def test_a_moved_folder_indexed_by_chunk_tasks_says_it_moved_once(make_ctx, tmp_path) -> None:
    """Worker jobs copied a moved folder's vectors and removed the old entries as an in-process
    run does, but never said so (an in-process run warns once); each chunk task's moves are now
    summed into one note when the job completes."""
    import shutil

    write_corpus(tmp_path / "src", 5)
    ctx = make_ctx()
    first = IndexService(ctx).index(tmp_path / "src", "c")
    # Records with ids are copied, never moved: their chunks are not the moved note's (its
    # count was every chunk copied, and a worker job summed only the tasks that moved some).
    (tmp_path / "src" / "records.jsonl").write_text(
        '{"id": "r1", "text": "a record about tea"}\n{"id": "r2", "text": "a record about maps"}\n')
    assert IndexService(ctx).index(tmp_path / "src", "c").docs_indexed == 2
    shutil.move(tmp_path / "src", tmp_path / "moved")
    service, prepared, numbers = _plan(ctx, tmp_path / "moved", "c")
    assert len(numbers) == 4
    for n in numbers:
        service.run_chunk(prepared.job_id, n)

    job = CollectionService(ctx).job(prepared.job_id)
    assert (job.state, job.docs_indexed) == ("completed", 7)
    moved = [e["message"] for e in job.errors if e["document"] == "moved"]
    old, new = tmp_path / "src", tmp_path / "moved"
    assert moved == [f"5 documents moved ({first.chunks_written} chunks of this run re-used stored "
                     f"vectors, not encoded again): {old / 'doc000.txt'} is now {new / 'doc000.txt'} "
                     "and 4 others; their entries at the old paths, which no longer exist, were removed"]
    assert ctx.store.count("c") == first.chunks_written + 2


def test_a_chunked_job_that_left_its_new_collection_empty_says_so(make_ctx, tmp_path) -> None:
    """A worker job (as an in-process background one) keeps the collection made for it when
    it indexed nothing, and now names it: `facet collections` listed an empty collection its
    job's message ("1 of 1 documents failed") did not mention. A collection with other jobs
    gets no such note."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    ctx = make_ctx()
    service, prepared, numbers = _plan(ctx, src, "hollow")
    for n in numbers:
        service.run_chunk(prepared.job_id, n)
    job = CollectionService(ctx).job(prepared.job_id)
    assert (job.state, job.docs_failed, job.docs_indexed) == ("completed", 1, 0)
    assert job.message is not None and job.message.endswith(
        "; collection 'hollow' was made for this job and holds no indexed document: `facet "
        "delete hollow` (DELETE /collections/hollow) removes it"), job.message
    service, again, numbers = _plan(ctx, src, "hollow")
    for n in numbers:
        service.run_chunk(again.job_id, n)
    second = CollectionService(ctx).job(again.job_id)
    assert second.state == "completed" and "was made for this job" not in (second.message or "")
    # prepare() registered both jobs as this process's, as a server sending them to its workers
    # does; here no server lets them go, and a later test of this process (whose database
    # reuses the ids) found them there.
    from app.services import indexing

    for job_id in (prepared.job_id, again.job_id):
        indexing._ACTIVE_JOBS.discard(job_id)


def test_a_job_for_the_workers_into_a_collection_a_worker_writes_waits_then_runs(
        make_ctx, tmp_path) -> None:
    """Sent while a worker job writes its collection, a job is queued (not refused) and its
    plan waits for the lease (``WriterBusy``, the task retried), then runs. The sender is
    another server here: the first job was handed off (``handed_off``), as a server started
    since, or another one, sees it; that server refused it (409 "job 1 ... is still indexing")."""
    from app.services.distributed import WriterBusy

    write_corpus(tmp_path / "src", 4)
    write_corpus(tmp_path / "more", 2)
    ctx = make_ctx()
    service, first, numbers = _plan(ctx, tmp_path / "src", "c")  # holds the lease, planned
    IndexService(ctx).handed_off(first.job_id)
    second = IndexService(ctx).prepare(tmp_path / "more", "c", runner="celery")
    IndexService(ctx).handed_off(second.job_id)
    with pytest.raises(WriterBusy, match=rf"waiting for job {first.job_id} .* to finish writing 'c'"):
        service.plan(second, 2)
    assert CollectionService(ctx).job(second.job_id).state == "queued"
    assert [service.run_chunk(first.job_id, n).finished_job for n in numbers] == [False, True]
    more = service.plan(second, 2)  # the task's retry, once the lease is free
    assert [service.run_chunk(second.job_id, n).outcome for n in more] == ["done"]
    jobs = [CollectionService(ctx).job(j.job_id) for j in (first, second)]
    assert [(j.state, j.docs_indexed) for j in jobs] == [("completed", 4), ("completed", 2)]


@pytest.mark.parametrize("runner", ["inline", "celery"])
def test_an_error_noted_beside_an_indexed_document_ends_when_its_file_reads_as_indexed(
        make_ctx, tmp_path, runner) -> None:
    """A file caught empty (mid-write) keeps its indexed version with the error noted beside it;
    once it reads as it was indexed again, the run skips it as unchanged, and left the error on it
    for good (`facet documents`: indexed, "... is empty: no text to index")."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("hello world text")
    (src / "b.txt").write_text("another document")
    ctx = make_ctx()
    index = IndexService(ctx)
    index.index(src, "c")
    (src / "a.txt").write_text("")
    assert index.index(src, "c").docs_failed == 1

    def error_of_a() -> tuple[str, str | None]:
        with ctx.sessions() as s:
            row = s.query(md.Document).filter_by(key=str(src / "a.txt")).one()
            return row.status, row.error

    assert error_of_a()[0] == "indexed" and "is empty" in (error_of_a()[1] or "")
    (src / "a.txt").write_text("hello world text")
    if runner == "inline":
        report = index.index(src, "c")
        assert (report.docs_skipped, report.docs_failed) == (2, 0), report
    else:
        _service, _prepared, numbers = _plan(ctx, src, "c")
        assert numbers == []  # both unchanged
    assert error_of_a() == ("indexed", None)
    assert CollectionService(ctx).get("c").documents_failed == 0


def test_a_chunk_waits_for_another_worker_holding_the_store_before_any_work(make_ctx, tmp_path) -> None:
    """A second worker on the embedded store encoded each chunk in full (~7 s) and only then
    met the store another worker held, throwing the work away, each wait counted among its
    transient retries (the distributed exploration of the fourth session of 2026-12-07). Now
    it waits before claiming the chunk: ``ChunkBusy`` (a turn) for another `facet worker`; any
    other holder (a `facet serve`) is the transient error it was, also before any work. Real
    holder processes (``locked_by_another_process``)."""
    from app.services.distributed import ChunkBusy
    from indexer.errors import StoreBusyError

    from .conftest import locked_by_another_process

    write_corpus(tmp_path / "src", 3)
    ctx = make_ctx(store_wait_s=0.2)
    service, prepared, numbers = _plan(ctx, tmp_path / "src", "c")
    ctx.store.release("c")  # (this process let it go: another one may take it)
    for shown_as, raised in (("facet worker -n w2@vm", ChunkBusy), ("facet serve", StoreBusyError)):
        with locked_by_another_process(ctx.settings.data_dir, "c", opened=True, shown_as=shown_as):
            with pytest.raises(raised, match=r"collection 'c' is open in pid \d+") as waited:
                service.run_chunk(prepared.job_id, numbers[0])
            if raised is ChunkBusy:
                assert waited.value.retry_in_s == 5.0
        with ctx.sessions() as session:  # not claimed, not started: nothing was done
            chunk = session.scalar(select(md.JobChunk).where(md.JobChunk.job_id == prepared.job_id,
                                                             md.JobChunk.number == numbers[0]))
            assert (chunk.state, chunk.attempts) == ("queued", 0), (chunk.state, chunk.attempts)
    assert [service.run_chunk(prepared.job_id, n).outcome for n in numbers] == ["done"] * len(numbers)
    assert CollectionService(ctx).job(prepared.job_id).docs_indexed == 3


def _run_while_row_becomes(ctx, service: ChunkedIndexService, job_id: int, number: int,
                           **values):  # type: ignore[no-untyped-def]
    """``service.run_chunk`` of chunk ``number``, its row set to ``values`` as the run writes
    (another worker or a cancel acting while this run stalled past its claim)."""
    real_upsert = ctx.store.upsert

    def meanwhile(collection, points):  # type: ignore[no-untyped-def]
        C = md.JobChunk
        with ctx.sessions() as s:
            s.execute(update(C).where(C.job_id == job_id, C.number == number).values(**values))
            s.commit()
        return real_upsert(collection, points)

    ctx.store.upsert = meanwhile
    try:
        return service.run_chunk(job_id, number)
    finally:
        ctx.store.upsert = real_upsert


def test_a_chunk_handed_back_while_its_run_stalled_is_said_queued_not_taken_over(make_ctx,
                                                                             tmp_path) -> None:
    """Its claim lapsed, another worker claimed the chunk and handed it back (it met the store
    held): the stalled run said that worker "took the chunk over" while the chunk sat queued,
    run by none (the distributed exploration of the fourth session of 2026-12-07)."""
    write_corpus(tmp_path / "src", 2)
    ctx = make_ctx(lease_ttl_s=60.0)
    a, prepared, numbers = _plan(ctx, tmp_path / "src", "c")
    first = _run_while_row_becomes(ctx, a, prepared.job_id, numbers[0],
                                   state="queued", claimed_until=None, worker="other-host:2")
    assert first.outcome == "duplicate", first
    assert "the chunk went back to the queue, to run again" in (first.message or ""), first.message
    assert "took the chunk over" not in (first.message or "")
    assert a.run_chunk(prepared.job_id, numbers[0]).outcome == "done"  # it runs again, once
    assert CollectionService(ctx).job(prepared.job_id).docs_indexed == 2


def test_a_chunk_cancelled_while_its_run_stalled_and_a_store_check_that_fails_otherwise(
        make_ctx, tmp_path, monkeypatch) -> None:
    """Two cases of the verification round of the fourth session of 2026-12-07: a chunk the
    job's cancel marked while its run stalled was said "taken over" by this very worker; and
    the store check before the claim let any error other than "held" escape unrecorded (a
    Qdrant server refusing the key: the task failed on a traceback, the job said nothing),
    where the write would fail the chunk with its reason."""
    from indexer.errors import StoreError

    write_corpus(tmp_path / "src", 2)
    ctx = make_ctx(lease_ttl_s=60.0)
    a, prepared, numbers = _plan(ctx, tmp_path / "src", "c", chunk_docs=1)
    first = _run_while_row_becomes(ctx, a, prepared.job_id, numbers[0],
                                   state="cancelled", claimed_until=None)
    assert first.outcome == "duplicate", first
    assert (first.message or "").startswith("the claim lapsed and the job was cancelled meanwhile"), first
    assert a.worker not in (first.message or "")
    # Another thread of this very worker (a threads pool) ran it: said so, not "back to the queue".
    b, again, more = _plan(ctx, tmp_path / "src", "c2", chunk_docs=1)
    mine = _run_while_row_becomes(ctx, b, again.job_id, more[0], state="done", worker=b.worker)
    assert (mine.message or "").startswith("the claim lapsed and another run in this worker took "
                                           "the chunk over and finished it"), mine

    asked: list[str] = []

    def refused(collection, *, wait_s=None):  # type: ignore[no-untyped-def]
        asked.append(collection)
        raise StoreError("Qdrant at http://q:6333 refused the request: HTTP 401")

    monkeypatch.setattr(ctx.store, "check_free", refused)
    assert a.run_chunk(prepared.job_id, numbers[1]).outcome == "done"  # the write's to meet
    assert asked == ["c"]  # (the check before the claim ran, and let the error go on)
