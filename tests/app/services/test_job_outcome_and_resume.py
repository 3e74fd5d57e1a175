"""How an index job's record ends and what it resumes: a job whose documents failed ends
``completed`` with a message that says so (a client polling for "completed" read a run that
indexed nothing as a success), and the job after a server stop resumes the interrupted job even
when the stop also failed a queued duplicate that never ran. Real minilm, edge store, SQLite."""

from __future__ import annotations

from app.services.collections import CollectionService
from app.services.indexing import IndexOptions, IndexService
from app.text import plural
from indexer import metadata as md
from tests.app.services.conftest import write_corpus


def test_a_background_job_whose_every_document_failed_says_so(facet, tmp_path) -> None:
    """``submit_index`` (POST /jobs): an unreadable pdf, and a csv read by a column it lacks,
    ended ``completed`` with ``message: null`` (`facet index` exits 4 for the same)."""
    pdf = tmp_path / "corpus3.pdf"
    pdf.write_bytes(b"not a pdf at all")
    csv = tmp_path / "rows.csv"
    csv.write_text("id,text\n1,a note about trains\n")
    jobs = [facet.submit_index(pdf, "c10"), facet.submit_index(csv, "c11", IndexOptions(text_column="nope"))]
    assert facet.job_runner.join(timeout=120)
    for submitted in jobs:
        job = facet.job(submitted.id)
        assert (job.state, job.docs_indexed, job.docs_failed, job.errors_total) == ("completed", 0, 1, 1), job
        # ... and the collection made for it, kept with nothing indexed, is named (d66289a)
        assert job.message == ("1 of 1 documents failed, 0 indexed: see the job's errors; "
                               f"collection {job.collection!r} was made for this job and holds "
                               f"no indexed document: `facet delete {job.collection}` (DELETE "
                               f"/collections/{job.collection}) removes it")


def test_a_job_with_some_documents_failed_counts_them_and_a_clean_one_says_nothing(make_ctx, tmp_path) -> None:
    src = tmp_path / "src"
    write_corpus(src, 3)
    (src / "broken.pdf").write_bytes(b"not a pdf at all")
    ctx = make_ctx()
    catalog = CollectionService(ctx)
    report = IndexService(ctx).index(src, "c")
    assert (report.state, report.docs_indexed, report.docs_failed) == ("completed", 3, 1)
    assert catalog.job(report.job_id).message == ("1 of 4 documents failed, 3 indexed: see the job's errors")
    (src / "broken.pdf").unlink()
    clean = IndexService(ctx).index(src, "c")
    job = catalog.job(clean.job_id)
    assert (job.state, job.docs_failed, job.message) == ("completed", 0, None)


def test_the_job_after_a_server_stop_resumes_the_interrupted_job_past_its_failed_duplicate(make_ctx, tmp_path) -> None:
    """The server stopped with job A running (``interrupted``) and a duplicate B of it queued
    (failed "submit it again", never started). The next job skipped what A had indexed but
    linked nothing: it looked only at B, and A kept asking to be run again."""
    src = tmp_path / "src"
    write_corpus(src, 12)
    server = make_ctx()
    service = IndexService(server)
    running = service.prepare(src, "c", IndexOptions(batch_chunks=2))
    duplicate = service.prepare(src, "c")

    def stop_after_the_first_batch(progress) -> None:
        if progress.docs_done >= 2 and not progress.stage:  # as Facet.close sets it
            server.stop_reason = "the server stopping"
            server.stopping.set()

    stopped = service.run(running, stop_after_the_first_batch)
    # What Facet._abandon_job does with the jobs still queued when the server closes.
    service.fail(duplicate.job_id, "the server stopped before the job started; submit it again")
    assert stopped.state == "interrupted" and 0 < stopped.docs_indexed < 12
    kept = stopped.docs_indexed
    server.close()

    ctx = make_ctx()  # the server started again
    catalog = CollectionService(ctx)
    assert catalog.job(duplicate.job_id).state == "failed"
    with ctx.sessions() as s:
        assert md.get_job(s, duplicate.job_id).started_at is None  # type: ignore[union-attr]
    again = IndexService(ctx).index(src, "c")
    assert (again.docs_skipped, again.docs_indexed) == (kept, 12 - kept)
    assert catalog.job(again.job_id).resumed_from == running.job_id
    assert catalog.job(running.job_id).message == (
        f"stopped (the server stopping) with {plural(kept, 'document')} indexed; resumed by job {again.job_id}"
    )
    # Resumed once: a later run of the source resumes nothing.
    later = IndexService(ctx).index(src, "c")
    assert catalog.job(later.job_id).resumed_from is None


def test_a_stopped_job_that_a_later_completed_run_covered_is_not_resumed(make_ctx, tmp_path) -> None:
    """Looking past jobs that never ran must stop at one that ran: a completed run after the
    interrupted one did its work, even where its record names no ``resumed_from`` (one made
    before this fix, which looked only at the latest job)."""
    src = tmp_path / "src"
    write_corpus(src, 3)
    ctx = make_ctx()
    service = IndexService(ctx)
    first = service.index(src, "c")
    with ctx.sessions() as s:  # the first run, as if a Ctrl-C had stopped it
        job = md.get_job(s, first.job_id)
        assert job is not None
        job.state, job.message = "interrupted", "stopped (Ctrl-C) with 3 documents indexed; run it"
        s.commit()
    covering = service.index(src, "c")
    assert CollectionService(ctx).job(covering.job_id).resumed_from == first.job_id
    with ctx.sessions() as s:  # the link as an older Facet left it: none
        job = md.get_job(s, covering.job_id)
        assert job is not None
        job.resumed_from = None
        s.commit()
    unstarted = service.prepare(src, "c")
    service.fail(unstarted.job_id, "the server stopped before the job started; submit it again")
    later = service.index(src, "c")
    assert CollectionService(ctx).job(later.job_id).resumed_from is None
