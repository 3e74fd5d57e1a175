"""Cancelling an index job (``Facet.cancel_job``): a queued job is cancelled at once and never
runs; a running one stops at its next batch boundary, ``cancelled``, what went in kept, and the
next job of the same source resumes it; an ended job is refused. Before, no job could be
cancelled at all. Real minilm, edge store, SQLite."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from app.errors import InvalidRequestError, NotFoundError
from app.services.indexing import IndexOptions, Progress
from app.services.search import SearchRequest
from app.settings import FacetSettings
from app.text import plural
from tests.app.services.conftest import write_corpus


def test_a_queued_job_is_cancelled_at_once_and_its_runner_skips_it(facet, tmp_path) -> None:
    write_corpus(tmp_path / "src", 3)
    prepared = facet.indexing.prepare(tmp_path / "src", "c", runner="thread")
    job = facet.cancel_job(prepared.job_id, "c")
    # The collection made for it, left empty, is kept (the job goes with it) and named, as a
    # background job's that indexed nothing (nothing said it; its searches said the job "has
    # not written its first documents", as if it would).
    made = ("collection 'c' was made for this job and holds no indexed document: `facet "
            "delete c` (DELETE /collections/c) removes it")
    assert (job.state, job.started_at, job.message) == (
        "cancelled", None, f"cancelled before it started; {made}")
    assert job.finished_at is not None
    # Its turn comes (the server's job thread): it is not run.
    report = facet.indexing.run(prepared)
    assert report.state == "cancelled"
    job = facet.job(prepared.job_id)
    assert (job.state, job.started_at, job.docs_seen) == ("cancelled", None, 0)
    assert facet.collection("c").documents_indexed == 0
    with pytest.raises(NotFoundError, match=(
            rf"nothing searchable yet: job {job.id} \(cancelled\) ended before it wrote any "
            r"document: index into it again, or delete it \(`facet delete c`\)")):
        facet.search(SearchRequest("card", "c"))


def test_a_running_job_stops_at_a_batch_boundary_and_the_next_job_resumes_it(facet, tmp_path) -> None:
    write_corpus(tmp_path / "src", 6)
    answers = []

    def cancel_once(_progress: Progress) -> None:
        # Called while the first batch is encoded and once it is written.
        if not answers:
            answers.append(facet.cancel_job(facet.jobs("c")[0].id))

    report = facet.index(tmp_path / "src", "c", IndexOptions(batch_chunks=1), progress=cancel_once)
    asked = answers[0]
    assert (asked.state, asked.cancel_requested) == ("running", True)
    assert report.state == "cancelled"
    assert 1 <= report.docs_indexed < 6
    job = facet.job(report.job_id)
    assert job.state == "cancelled" and job.started_at is not None
    assert job.message == (
        f"cancelled after {plural(report.docs_indexed, 'document')} indexed; index the "
        "same source again to resume: what was indexed is kept"
    )
    assert facet.collection("c").documents_indexed == report.docs_indexed  # kept, searchable
    # Refused once it has ended.
    with pytest.raises(InvalidRequestError, match=f"job {report.job_id} is cancelled"):
        facet.cancel_job(report.job_id)
    again = facet.index(tmp_path / "src", "c")
    assert (again.state, again.docs_skipped, again.docs_indexed) == (
        "completed",
        report.docs_indexed,
        6 - report.docs_indexed,
    )
    resumed = facet.job(again.job_id)
    assert resumed.resumed_from == report.job_id
    assert facet.job(report.job_id).message == (
        f"cancelled after {plural(report.docs_indexed, 'document')} indexed; resumed by job {again.job_id}"
    )


def test_an_ended_or_unknown_job_is_refused(facet, tmp_path) -> None:
    write_corpus(tmp_path / "src", 2)
    report = facet.index(tmp_path / "src", "c")
    with pytest.raises(InvalidRequestError, match=f"job {report.job_id} is completed"):
        facet.cancel_job(report.job_id)
    assert facet.job(report.job_id).state == "completed"
    with pytest.raises(NotFoundError):
        facet.cancel_job(report.job_id + 100)
    prepared = facet.indexing.prepare(tmp_path / "src", "c", runner="thread")
    with pytest.raises(InvalidRequestError):  # another collection's job
        facet.cancel_job(prepared.job_id, "other")
    assert facet.job(prepared.job_id).state == "queued"


def test_a_background_job_on_the_servers_thread_ends_cancelled(facet, tmp_path) -> None:
    """`facet serve` and the UI run jobs on a thread: cancelled while queued or running, the
    job ends ``cancelled`` before it has read the whole source."""
    write_corpus(tmp_path / "src", 40)
    submitted = facet.submit_index(tmp_path / "src", "c", IndexOptions(batch_chunks=1))
    facet.cancel_job(submitted.id)
    assert facet.job_runner.join(timeout=120)
    job = facet.job(submitted.id)
    assert job.state == "cancelled" and job.docs_indexed < 40


def test_the_index_tabs_cancel_button(facet, tmp_path) -> None:
    """The UI's Index tab: "Cancel job" beside the bar cancels its job and goes once the job
    has ended."""
    pytest.importorskip("gradio")
    from ui.app import LIGHT, build_ui
    from ui.handlers import UiHandlers

    handlers = UiHandlers(facet, facet.settings, tmp_path / "exports")
    write_corpus(tmp_path / "src", 2)
    queued = facet.indexing.prepare(tmp_path / "src", "c", runner="celery")  # waits for a worker
    assert handlers.cancel_button(queued.job_id).visible is True
    html, _errors, timer, button = handlers.cancel_job(queued.job_id, 2)
    assert 'data-state="cancelled"' in html, html
    assert (timer.active, button.visible) == (False, False)
    assert handlers.cancel_button(0).visible is False
    import gradio as gr

    with pytest.raises(gr.Error, match="is cancelled"):  # pressed again
        handlers.cancel_job(queued.job_id, 2)
    demo = build_ui(lambda: None, FacetSettings(data_dir=tmp_path / "data"))  # type: ignore[arg-type, return-value]
    events = {f.api_name: f for f in demo.fns.values()}
    assert events["cancel_job"].concurrency_id == LIGHT
    assert any(getattr(b, "elem_id", None) == "index-cancel-button" for b in demo.blocks.values())


def test_a_cancel_asked_while_the_last_batch_goes_in_ends_the_job_cancelled(facet, tmp_path) -> None:
    """A soak's cancels sent as the last batch was written were answered 200, cancel_requested,
    and the job then ended ``completed`` with no word of the cancel: it now ends ``cancelled``
    (as a worker's job does), what went in kept, and the next run of the source resumes it."""
    write_corpus(tmp_path / "src", 3)
    asked = []

    def cancel_after_the_last_batch(p: Progress) -> None:
        if not asked and p.docs_done == p.docs_total and p.stage is None:
            asked.append(facet.cancel_job(facet.jobs("c")[0].id))

    report = facet.index(tmp_path / "src", "c", progress=cancel_after_the_last_batch)
    assert asked and (asked[0].state, asked[0].cancel_requested) == ("running", True)
    assert (report.state, report.docs_indexed) == ("cancelled", 3)
    # Nothing is left to index: it said "index the same source again to resume" (until
    # 2026-11-30, seventh session); it names what it stopped before (a new collection: no sync
    # has anything to remove).
    assert facet.job(report.job_id).message == (
        "cancelled after every document had gone in (3 indexed), before optimizing the store; "
        "index the same source again to finish: nothing will be re-embedded")
    assert facet.collection("c").documents_indexed == 3
    again = facet.index(tmp_path / "src", "c")
    assert (again.state, again.docs_skipped, again.docs_indexed) == ("completed", 3, 0)
    assert facet.job(again.job_id).resumed_from == report.job_id
    assert facet.job(report.job_id).message == (
        "cancelled after every document had gone in (3 indexed), before optimizing the store; "
        f"finished by job {again.job_id}")


def _cancel_after_the_last_batch(facet, asked: list) -> Callable[[Progress], None]:
    def cancel(p: Progress) -> None:
        if not asked and p.docs_done == p.docs_total and p.stage is None:
            asked.append(facet.cancel_job(facet.jobs("c")[0].id))
    return cancel


@pytest.mark.parametrize("sync", [None, False])
def test_a_cancel_after_the_last_batch_names_the_sync_it_stopped_before(facet, tmp_path, sync) -> None:
    """A folder's run syncs after its last batch: the removals a cancel stopped before are
    named (and done by the next run); with ``--no-sync`` there are none to name."""
    src = tmp_path / "src"
    write_corpus(src, 4)
    facet.index(src, "c")
    (src / "doc000.txt").unlink()
    (src / "doc003.txt").write_text("a changed note about the hotel booking, written again.")
    asked: list = []
    report = facet.index(src, "c", IndexOptions(sync=sync),
                         progress=_cancel_after_the_last_batch(facet, asked))
    assert asked and (report.state, report.docs_indexed, report.docs_skipped) == ("cancelled", 1, 2)
    before = ("removing 1 document no longer in the source and optimizing the store"
              if sync is None else "optimizing the store")
    assert facet.job(report.job_id).message == (
        f"cancelled after every document had gone in (1 indexed), before {before}; index the "
        "same source again to finish: nothing will be re-embedded")
    again = facet.index(src, "c", IndexOptions(sync=sync))
    assert (again.state, again.docs_indexed, again.docs_skipped, again.docs_deleted) == (
        "completed", 0, 3, 1 if sync is None else 0)


def test_a_cancel_after_the_last_batch_counts_no_removal_of_a_hidden_file_kept(facet, tmp_path) -> None:
    """A hidden file indexed by itself stays when its folder syncs (``_keep_unwalked``); the
    cancel's message counted it among the removals it stopped before ("removing 2 documents")."""
    src = tmp_path / "src"
    write_corpus(src, 3)
    (src / ".hidden.txt").write_text("a hidden note about the hotel's late check-in")
    facet.index(src / ".hidden.txt", "c")
    facet.index(src, "c")
    (src / "doc000.txt").unlink()
    (src / "doc002.txt").write_text("a changed note about the hotel booking, written again.")
    asked: list = []
    report = facet.index(src, "c", progress=_cancel_after_the_last_batch(facet, asked))
    assert asked and report.state == "cancelled"
    assert facet.job(report.job_id).message.startswith(
        "cancelled after every document had gone in (1 indexed), before removing 1 document no "
        "longer in the source and optimizing the store")
    again = facet.index(src, "c")
    assert (again.state, again.docs_deleted) == ("completed", 1)


def test_a_cancel_before_the_last_batch_still_says_to_resume(facet, tmp_path) -> None:
    """One batch (one document) left when the cancel came: it is not said to be all in."""
    write_corpus(tmp_path / "src", 3)
    asked: list = []

    def cancel_before_the_last(p: Progress) -> None:
        if not asked and p.docs_done == p.docs_total - 1 and p.stage is None:
            asked.append(facet.cancel_job(facet.jobs("c")[0].id))

    report = facet.index(tmp_path / "src", "c", IndexOptions(batch_chunks=1),
                         progress=cancel_before_the_last)
    assert asked and (report.state, report.docs_indexed) == ("cancelled", 2)
    assert facet.job(report.job_id).message == (
        "cancelled after 2 documents indexed; index the same source again to resume: what was "
        "indexed is kept")


def test_a_worker_job_cancelled_during_its_last_chunk_says_as_the_in_process_one(facet, tmp_path,
                                                                                  monkeypatch) -> None:
    """The chunk protocol driven in process (what the worker's tasks call): a cancel that comes
    while the last chunk is written ends the job ``cancelled`` before the store's optimize, with
    the in-process runner's words; it said "index the same source again to resume"."""
    from app.services.distributed import ChunkedIndexService

    write_corpus(tmp_path / "src", 4)
    service = ChunkedIndexService(facet.context)
    prepared = facet.indexing.prepare(tmp_path / "src", "c", runner="celery")
    assert service.plan(prepared, 2) == [0, 1]
    assert service.run_chunk(prepared.job_id, 0).outcome == "done"
    claim = service._claim

    def cancel_once_claimed(session, job_id: int, number: int) -> bool:
        claimed = claim(session, job_id, number)
        facet.cancel_job(job_id)
        return claimed

    monkeypatch.setattr(service, "_claim", cancel_once_claimed)
    last = service.run_chunk(prepared.job_id, 1)
    assert (last.outcome, last.finished_job) == ("done", True)
    job = facet.job(prepared.job_id)
    assert (job.state, job.docs_indexed, job.chunks_done) == ("cancelled", 4, 2)
    assert job.message == (
        "cancelled after every document had gone in (4 indexed), before optimizing the store; "
        "index the same source again to finish: nothing will be re-embedded")
    again = facet.index(tmp_path / "src", "c")
    assert (again.state, again.docs_skipped, again.docs_indexed) == ("completed", 4, 0)


def test_a_job_cancelled_before_it_wrote_names_the_empty_collection_made_for_it(
        facet, tmp_path) -> None:
    """A running job cancelled before its first document went in ended "cancelled before any
    document was indexed: nothing was written", and the collection made for it stayed listed
    (0 documents), named nowhere; a queued one's cancel and a completed empty run say so. The
    chunk protocol (a worker's) here; the in-process runner's in test_cancel_big_document.py."""
    from app.services.distributed import ChunkedIndexService

    write_corpus(tmp_path / "src", 4)
    service = ChunkedIndexService(facet.context)
    prepared = facet.indexing.prepare(tmp_path / "src", "w", runner="celery")
    numbers = service.plan(prepared, 2)
    assert numbers == [0, 1] and facet.cancel_job(prepared.job_id).state == "running"
    for n in numbers:
        service.run_chunk(prepared.job_id, n)
    job = facet.job(prepared.job_id)
    assert (job.state, job.docs_indexed) == ("cancelled", 0)
    assert job.message == ("cancelled before any document was indexed: nothing was written; "
                           "collection 'w' was made for this job and holds no indexed document: "
                           "`facet delete w` (DELETE /collections/w) removes it")
    assert facet.collection("w").documents_indexed == 0

    # A collection that holds documents gets no such note. (The in-process runner's first run
    # cancelled before it wrote: test_cancel_big_document.py.)
    facet.index(tmp_path / "src", "w")
    (tmp_path / "src" / "new.txt").write_text("one more short document to index")
    again = facet.indexing.prepare(tmp_path / "src", "w", runner="celery")
    numbers = service.plan(again, 2)
    facet.cancel_job(again.job_id)
    for n in numbers:
        service.run_chunk(again.job_id, n)
    job = facet.job(again.job_id)
    assert job.state == "cancelled" and "made for this job" not in (job.message or "")


def test_a_worker_job_cancelled_during_its_optimize_completes_and_says_too_late(facet, tmp_path,
                                                                                 monkeypatch) -> None:
    """As the in-process runner: a cancel during the store's optimize is too late (it ended
    ``cancelled`` with "index the same source again to resume", every document in)."""
    from app.services.distributed import ChunkedIndexService

    write_corpus(tmp_path / "src", 2)
    service = ChunkedIndexService(facet.context)
    prepared = facet.indexing.prepare(tmp_path / "src", "c", runner="celery")
    optimize = service.store.optimize

    def cancel_while_optimizing(name: str) -> None:
        facet.cancel_job(prepared.job_id)
        optimize(name)

    monkeypatch.setattr(service.store, "optimize", cancel_while_optimizing)
    for n in service.plan(prepared, 2):
        service.run_chunk(prepared.job_id, n)
    job = facet.job(prepared.job_id)
    assert (job.state, job.cancel_requested, job.docs_indexed) == ("completed", True, 2)
    assert job.message == ("the cancel came after every document had gone in (while the store "
                           "was optimized), so the job completed")


def test_a_job_that_ends_as_the_cancel_comes_is_refused_not_answered_as_cancelled(facet, tmp_path,
                                                                                  monkeypatch) -> None:
    """The state was read (running), then the job completed, then the cancel's UPDATE matched
    no row: the answer was a 200 of a ``completed`` job with ``cancel_requested`` false."""
    from sqlalchemy import update

    from indexer import metadata as md

    write_corpus(tmp_path / "src", 2)
    prepared = facet.indexing.prepare(tmp_path / "src", "c", runner="thread")
    real_cancel = facet.indexing.cancel

    def ends_first(job_id: int) -> bool:  # the runner finishes between the read and the cancel
        with facet.indexing.sessions() as session:
            session.execute(update(md.IndexJob).where(md.IndexJob.id == job_id)
                            .values(state="completed", finished_at=md.utcnow()))
            session.commit()
        return real_cancel(job_id)

    monkeypatch.setattr(facet.indexing, "cancel", ends_first)
    with pytest.raises(InvalidRequestError, match=f"job {prepared.job_id} is completed; only a "
                                                  "queued or running job can be cancelled"):
        facet.cancel_job(prepared.job_id)
    assert not facet.job(prepared.job_id).cancel_requested


def test_a_cancel_during_the_stores_optimize_is_too_late_and_the_job_says_so(facet, tmp_path) -> None:
    write_corpus(tmp_path / "src", 2)
    asked = []

    def cancel_while_optimizing(p: Progress) -> None:
        if not asked and p.stage == "optimizing the store":
            asked.append(facet.cancel_job(facet.jobs("c")[0].id))

    report = facet.index(tmp_path / "src", "c", progress=cancel_while_optimizing)
    assert asked and report.state == "completed"
    job = facet.job(report.job_id)
    assert (job.state, job.cancel_requested) == ("completed", True)
    assert job.message == ("the cancel came after every document had gone in (while the store "
                           "was optimized), so the job completed")


def test_a_worker_job_cancelled_as_its_planner_starts_stays_cancelled_and_removes_nothing(
        facet, tmp_path, monkeypatch) -> None:
    """The planner read the row while it was queued; a cancel committed before it took the lease:
    it turned the ``cancelled`` job back to running, ran its sync (the deleted file's document
    removed) and ended it "cancelled before any document was indexed: nothing was written"."""
    from app.services import distributed
    from app.services.distributed import ChunkedIndexService

    write_corpus(tmp_path / "src", 4)
    facet.index(tmp_path / "src", "c")
    gone = sorted((tmp_path / "src").iterdir())[-1]
    gone.unlink()
    service = ChunkedIndexService(facet.context)
    prepared = facet.indexing.prepare(tmp_path / "src", "c", runner="celery")
    acquire = distributed.leases.acquire
    asked: list[bool] = []

    def cancelled_meanwhile(session, coll_id: int, job_id: int, ttl: float):  # type: ignore[no-untyped-def]
        if not asked:
            asked.append(facet.indexing.cancel(job_id))
        return acquire(session, coll_id, job_id, ttl)

    monkeypatch.setattr(distributed.leases, "acquire", cancelled_meanwhile)
    assert service.plan(prepared, 2) == [] and asked == [True]
    job = facet.job(prepared.job_id)
    assert (job.state, job.started_at, job.message) == ("cancelled", None, "cancelled before it started")
    assert facet.collection("c").documents_indexed == 4  # the deleted file's document kept
    monkeypatch.setattr(distributed.leases, "acquire", acquire)
    assert facet.index(tmp_path / "src", "c").docs_deleted == 1  # the lease was let go
