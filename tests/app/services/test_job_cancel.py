"""Cancelling an index job (``Facet.cancel_job``): a queued job is cancelled at once and never
runs; a running one stops at its next batch boundary, ``cancelled``, what went in kept, and the
next job of the same source resumes it; an ended job is refused. Before, no job could be
cancelled at all. Real minilm, edge store, SQLite."""

from __future__ import annotations

import pytest

from app.errors import InvalidRequestError, NotFoundError
from app.services.indexing import IndexOptions, Progress
from app.settings import FacetSettings
from tests.app.services.conftest import write_corpus


def test_a_queued_job_is_cancelled_at_once_and_its_runner_skips_it(facet, tmp_path) -> None:
    write_corpus(tmp_path / "src", 3)
    prepared = facet.indexing.prepare(tmp_path / "src", "c", runner="thread")
    job = facet.cancel_job(prepared.job_id, "c")
    assert (job.state, job.started_at, job.message) == ("cancelled", None, "cancelled before it started")
    assert job.finished_at is not None
    # Its turn comes (the server's job thread): it is not run.
    report = facet.indexing.run(prepared)
    assert report.state == "cancelled"
    job = facet.job(prepared.job_id)
    assert (job.state, job.started_at, job.docs_seen) == ("cancelled", None, 0)
    assert facet.collection("c").documents_indexed == 0


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
        f"cancelled after {report.docs_indexed} documents indexed; index the "
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
        f"cancelled after {report.docs_indexed} documents indexed; resumed by job {again.job_id}"
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
    assert facet.job(report.job_id).message.startswith("cancelled after 3 documents indexed")
    assert facet.collection("c").documents_indexed == 3


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
