"""What a browser session found on the Index and Collections tabs: after "Cancel job" the bar
still read "Job 2 into big running ... encoding chunk 64/194 of this batch" for 13 s with the
Cancel button shown; the collection's name and the state were bold together ("big running");
a running job's progress sat in the yellow box of a failure; the jobs table wrote "1535"
beside the bar's "2,488 chunks"; a collection whose only job was cancelled before it ran read
"missing" points."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from app.services.collections import CollectionInfo, JobInfo
from ui import render

gr = pytest.importorskip("gradio")


def _job(state: str = "running", **fields: Any) -> JobInfo:
    job = JobInfo(id=2, collection="big", source="/docs", embedder="minilm", state=state,  # type: ignore[arg-type]
                  docs_seen=1535, docs_indexed=1200, docs_skipped=0, docs_failed=3,
                  docs_deleted=0, chunks_written=4375, timings={}, started_at="2026-12-01T10:00:00",
                  finished_at=None, resumed_from=None,
                  message="encoding chunk 64/194 of this batch", errors=[])
    return replace(job, **fields)


class _Jobs:
    """A facade stand-in holding one running job, which a cancel marks as asked to stop."""

    def __init__(self) -> None:
        self.current = _job()

    def job(self, job_id: int, errors: int = 100) -> JobInfo:
        return self.current

    def jobs(self, *args: Any, **kwargs: Any) -> list[JobInfo]:
        return [self.current]

    def cancel_job(self, job_id: int) -> None:
        self.current = replace(self.current, cancel_requested=True)


def test_a_running_job_asked_to_stop_says_cancelling_and_its_cancel_button_goes(tmp_path) -> None:
    from app.settings import FacetSettings
    from ui.handlers import UiHandlers

    jobs = _Jobs()
    handlers = UiHandlers(lambda: jobs, FacetSettings(data_dir=tmp_path), tmp_path)  # type: ignore[arg-type]
    assert handlers.cancel_button(2).visible is True
    html, _errors, timer, button = handlers.cancel_job(2, 3000)
    assert ("<b>cancelling</b> (it stops within seconds; what it indexed so far is kept, the "
            "batch it is encoding is not written)") in html, html
    assert "<b>running</b>" not in html
    assert 'data-state="running"' in html and timer.active  # still polled until it ends
    assert button.visible is False  # not pressed again as if the first press had failed
    assert handlers.cancel_button(2).visible is False
    # Once it has ended, its own state again.
    ended = render.job_html(replace(jobs.current, state="cancelled"), 3000)
    assert "<b>cancelled</b>" in ended and "cancelling" not in ended


def test_the_bar_keeps_the_state_apart_from_the_name_and_progress_out_of_the_warning_box() -> None:
    bar = render.job_html(_job(), 3000)
    assert "<b>big</b> <b>running</b>" not in bar, bar
    assert "Job 2 into <b>big</b>: <b>running</b>, 1,535/3,000 documents seen" in bar, bar
    assert ('<div class="facet-info facet-job-message">encoding chunk 64/194 of this batch</div>'
            in bar), bar
    assert "facet-note" not in bar
    failed = render.job_html(_job("failed", message="ModelError: no such model"), 3000)
    assert '<div class="facet-note facet-job-message">ModelError: no such model</div>' in failed
    removal = render.job_html(_job("completed", removed_keys_total=1000, docs_deleted=1000), 0)
    assert "Removal job 2 from <b>big</b>: <b>completed</b>, 1,000 of 1,000 documents" in removal


def test_the_jobs_table_has_column_widths_so_its_headers_do_not_break(tmp_path) -> None:
    """Left to the content, long messages squeezed the other columns until their headers broke
    mid-word ("jo|b", "fa|il|ed"); its counts stay numbers (they sort as numbers)."""
    from app.settings import FacetSettings
    from ui.app import build_ui

    [row] = render.job_rows([_job("completed", message="")])
    cells = dict(zip(render.JOB_COLUMNS, row, strict=True))
    assert (cells["seen"], cells["chunks"]) == (1535, 4375)
    assert len(render.JOB_COLUMN_WIDTHS) == len(render.JOB_COLUMNS)
    demo = build_ui(lambda: None, FacetSettings(data_dir=tmp_path))  # type: ignore[arg-type, return-value]
    by_id = {b.elem_id: b for b in demo.blocks.values() if getattr(b, "elem_id", None)}
    assert by_id["jobs-table"].column_widths == render.JOB_COLUMN_WIDTHS


def _collection(**fields: Any) -> CollectionInfo:
    info = CollectionInfo(name="new", backend="edge", embedders={"minilm": 384}, chunk_size=200,
                          chunk_overlap=32, documents=0, documents_indexed=0, documents_failed=0,
                          chunks=0, points=None, created_at="2026-12-01 10:00:00")
    return replace(info, **fields)


def test_a_collection_with_nothing_written_yet_reads_none_yet_not_missing() -> None:
    """Its first job cancelled while queued: the store collection was never made (the CLI says
    "? points"); "missing" stays for a store that lacks a collection with chunks."""
    points = render.COLLECTION_COLUMNS.index("points")
    [never, lost] = render.collection_rows([_collection(),
                                            _collection(chunks=7, documents=3, store_missing=True)])
    assert never[points] == "none yet"
    assert lost[points] == "missing"


def test_the_unreadable_query_notice_names_the_pages_own_mode(monkeypatch, tmp_path) -> None:
    from app.services.search import SearchResponse
    from app.settings import FacetSettings
    from ui import handlers as module

    monkeypatch.setattr(module, "unread_count", lambda model, texts: 1)
    facet = SimpleNamespace(embedder_cache=SimpleNamespace(peek=lambda name: object()))
    handlers = module.UiHandlers(lambda: facet, FacetSettings(data_dir=tmp_path), tmp_path)  # type: ignore[arg-type]
    response = SearchResponse("\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35", None, "c", "minilm", None,
                              [], {})
    [notice] = handlers._unread_notice(response, "minilm")
    assert "word mode" not in notice
    assert "or set the mode to lexical (the words alone)" in notice, notice


def test_search_results_take_a_searchs_default_number_unless_the_box_is_set(minilm,
                                                                            tmp_path) -> None:
    """The box emptied, a search takes SEARCH_RESULTS_CLUSTERED results, as the CLI and API do;
    a number, that many; and the summary names the search and how many results it took."""
    from app.services.clustering import SEARCH_RESULTS_CLUSTERED
    from tests.ui.test_ui_api import _own_facet

    facet, handlers = _own_facet(minilm, tmp_path)
    asked: list[int] = []
    real = facet.cluster

    def cluster(request: Any, **kwargs: Any) -> Any:
        asked.append(request.search.top_k)
        return real(request, **kwargs)

    facet.cluster = cluster  # type: ignore[method-assign]
    try:
        source = tmp_path / "rows.jsonl"
        source.write_text("".join(f'{{"id": "r{i}", "text": "my card {i} was declined"}}\n'
                                  for i in range(9)))
        facet.index(source, "cards")

        def run(limit: float | None) -> str:
            summary, *_ = handlers.cluster("search results", "cards", "", limit, "card declined",
                                           "Find the customer's problem", "", None, None,
                                           "What does the customer want?", 2, "minilm",
                                           "keywords (no explainer)",
                                           progress=lambda *a, **k: None)
            return str(summary)

        summary = run(None)
        assert asked == [SEARCH_RESULTS_CLUSTERED], asked
        assert ("texts: all 9 results (of the top 100 asked for) of the search "
                '\u201c<span dir="auto">card declined</span>\u201d under '
                '\u201c<span dir="auto">Find the customer&#x27;s problem</span>\u201d in '
                "<b>cards</b> (a search&#x27;s default") in summary, summary
        run(500)
        run(5)
        run(0)
        assert asked == [SEARCH_RESULTS_CLUSTERED, 500, 5, 1000], asked
        assert "the top 5 results of the search" in run(5)
    finally:
        facet.close()


def test_choosing_search_results_sets_the_box_to_a_searchs_default(tmp_path) -> None:
    """The box starts at a collection's 500; it stayed there for a search, whose results then
    took 500 (the whole of a 308-message collection, whatever the query)."""
    from app.services.clustering import SEARCH_RESULTS_CLUSTERED
    from app.settings import FacetSettings
    from ui.app import build_ui
    from ui.handlers import CLUSTER_LIMIT_DEFAULT, SOURCE_COLLECTION, SOURCE_SEARCH

    demo = build_ui(lambda: None, FacetSettings(data_dir=tmp_path))  # type: ignore[arg-type, return-value]
    by_id = {b.elem_id: b for b in demo.blocks.values() if getattr(b, "elem_id", None)}
    assert by_id["cluster-limit"].value == CLUSTER_LIMIT_DEFAULT
    limit_id, source_id = by_id["cluster-limit"]._id, by_id["cluster-source"]._id
    [change] = [f for f in demo.fns.values()
                if [b._id for b in f.inputs] == [source_id]
                and limit_id in [b._id for b in f.outputs]]
    at = [b._id for b in change.outputs].index(limit_id)
    assert change.fn(SOURCE_SEARCH)[at]["value"] == SEARCH_RESULTS_CLUSTERED
    assert change.fn(SOURCE_COLLECTION)[at]["value"] == CLUSTER_LIMIT_DEFAULT


def _cancelled_in_uploads(facet: Any) -> Any:
    """The report of a job indexing collection notes' upload folder (four notes put there),
    cancelled at its first batch."""
    from app.services.indexing import IndexOptions

    folder = facet.upload_folder("notes")
    folder.mkdir(parents=True)
    for i in range(4):
        (folder / f"n{i}.txt").write_text(f"Note {i}: the lighthouse keeper's log for day {i}.")
    asked: list[int] = []

    def cancel_once(_progress: object) -> None:
        if not asked:
            asked.append(facet.cancel_job(facet.jobs("notes")[0].id).id)

    return facet.index(folder, "notes", IndexOptions(batch_chunks=1), progress=cancel_once)


def test_a_cancelled_upload_job_is_offered_to_resume_on_the_page(minilm, tmp_path) -> None:
    """A cancelled job's bar said "index the same source again to resume", which the page of an
    upload job could not do (its upload box emptied, "Index the uploads" asked for files, and
    Resume offered only jobs a restart stopped): it is offered to Resume, in the page's words."""
    from tests.ui.test_ui_api import _finished, _own_facet

    facet, handlers = _own_facet(minilm, tmp_path)
    try:
        cancelled = _cancelled_in_uploads(facet)
        assert cancelled.state == "cancelled" and 1 <= cancelled.docs_indexed < 4
        _, jobs = handlers.collections()
        said = next(r for r in jobs if r[0] == cancelled.job_id)[-1]
        assert "index the same source again" not in said and "press Resume" in said, said
        assert said.endswith("press Resume: what was indexed is kept"), said
        # One that wrote nothing says nothing was kept (its bar said "nothing was written; ...
        # press Resume: what was indexed is kept": the UI exploration of the fourth session of
        # 2026-12-07).
        import dataclasses

        nothing = dataclasses.replace(facet.job(cancelled.job_id), docs_indexed=0, chunks_written=0)
        hint = handlers._stopped_jobs([nothing])[cancelled.job_id].message or ""
        assert hint.endswith("press Resume") and "is kept" not in hint, hint
        row, picker = handlers.stopped_jobs()
        assert row["visible"] and picker["value"] == cancelled.job_id
        resumed_id, *_ = handlers.resume_index(cancelled.job_id)
        resumed = _finished(facet, resumed_id)
        assert (resumed.state, resumed.docs_skipped) == ("completed", cancelled.docs_indexed)
        assert facet.collection("notes").documents_indexed == 4
        assert not handlers.stopped_jobs()[0]["visible"]
    finally:
        facet.close()


def test_an_upload_job_cancelled_before_it_started_is_not_offered_to_resume(minilm,
                                                                          tmp_path) -> None:
    """Its uploaded files were taken back with the cancel, yet the page said "to go on, pick it
    as the stopped job on the Index tab and press Resume", and Resume indexed the folder
    without them: "0 documents seen ... nothing to index" (the UI review of the fourth session
    of 2026-12-06). It says to upload them again, and is not offered."""
    from tests.ui.test_browser_a11y import _Held
    from tests.ui.test_ui_api import _own_facet

    facet, handlers = _own_facet(minilm, tmp_path)
    runner = facet.job_runner
    try:
        upload = tmp_path / "readme.md"
        upload.write_text("# Readme\nThe lighthouse keeper's notes.")
        facet.job_runner = _Held()  # (never taken: it stays queued)
        job = facet.upload("queued", [upload]).job
        cancelled = facet.cancel_job(job.id)
        assert cancelled.state == "cancelled" and "taken back: readme.md" in (cancelled.message or "")
        _, jobs = handlers.collections()
        said = next(r for r in jobs if r[0] == job.id)[-1]
        assert "press Resume" not in said and "upload them again" in said, said
        assert not handlers.stopped_jobs()[0]["visible"]
    finally:
        facet.job_runner = runner
        facet.close()


def test_an_upload_into_a_picked_collection_deleted_meanwhile_says_it_makes_it_anew(
        minilm, tmp_path) -> None:
    """A page's Index tab picked 'sp2'; another page deleted it; the upload made it again,
    holding the new file alone, and said only "completed" (the UI review of the fourth session
    of 2026-12-06). The bar says so; a collection still there, or a name typed as a new one, is
    indexed as before, without it."""
    from tests.ui.test_ui_api import _finished, _own_facet

    facet, handlers = _own_facet(minilm, tmp_path)
    try:
        note = tmp_path / "readme.md"
        note.write_text("# Readme\nThe lighthouse keeper's notes.")
        job_id, _, html, *_ = handlers.index_upload([str(note)], None, "minilm", "sp2")
        assert "There is no collection" not in html  # (typed as a new one)
        _finished(facet, job_id)
        job_id, _, html, *_ = handlers.index_upload([str(note)], "sp2", "minilm")
        assert "There is no collection" not in html
        _finished(facet, job_id)
        facet.delete_collection("sp2")  # as another page's Delete
        job_id, _, html, *_ = handlers.index_upload([str(note)], "sp2", "minilm")
        assert "There is no collection" in html and "makes a new one" in html, html
        _finished(facet, job_id)
        (tmp_path / "folder").mkdir()
        (tmp_path / "folder" / "a.txt").write_text("A note in a folder.")
        facet.delete_collection("sp2")
        handlers.settings.ui_allowed_roots = [tmp_path / "folder"]
        job_id, _, html, *_ = handlers.index_folder(str(tmp_path / "folder"), "sp2", "minilm")
        assert "makes a new one" in html
        _finished(facet, job_id)
    finally:
        facet.close()


def test_a_delete_refused_for_a_job_says_the_pages_ways_to_wait_or_cancel(minilm,
                                                                          tmp_path) -> None:
    """A delete refused while a job indexed the collection said "wait for job 7 to finish
    (`facet jobs 7 --follow`, GET /jobs/7, or the UI's Collections tab) or cancel it (`facet
    jobs 7 --cancel`, POST /jobs/7/cancel)" on the Collections tab itself (the UI review of the
    fourth session of 2026-12-06): the page's own controls instead."""
    import gradio as gr

    from app.errors import ConflictError
    from app.services.collections import follow_hint
    from tests.ui.test_browser_a11y import _Held
    from tests.ui.test_ui_api import _own_facet
    from ui.handlers import ui_error

    running = ui_error(ConflictError(f"collection 'run1' is being indexed by job 7; "
                                     f"{follow_hint(7)} or cancel it (`facet jobs 7 --cancel`, "
                                     "POST /jobs/7/cancel), and delete it then")).message
    assert "/jobs/" not in running and "--follow" not in running, running
    assert "the Collections tab's jobs table shows it" in running
    # Only a page showing the job's bar has its Cancel job (a job of another page, of the
    # command line): the command stays beside it (the verification round).
    assert ("Cancel job, under its bar on the Index tab of a page that shows it, or `facet jobs 7 "
            "--cancel`") in running, running
    facet, handlers = _own_facet(minilm, tmp_path)
    runner = facet.job_runner
    try:
        note = tmp_path / "readme.md"
        note.write_text("# Readme\nThe lighthouse keeper's notes.")
        facet.job_runner = _Held()  # (never taken: it stays queued)
        facet.upload("held", [note])
        facet.upload("held", [note])
        with pytest.raises(gr.Error) as refused:
            handlers.delete_collection("held", "held")
        said = str(refused.value.message)
        assert "queued to index it" in said and "/jobs/" not in said, said
        assert ("each with Cancel job, under its bar on the Index tab of a page that shows it, or "
                "`facet jobs N --cancel`, N one of ") in said, said
    finally:
        facet.job_runner = runner
        facet.close()


def test_a_running_jobs_bar_counts_the_time_since_it_started() -> None:
    """The bar said "(2.0 s of work)" for the whole 100 s of one long batch: the stages' sum
    grows only as a stage ends (the UI review of the fourth session of 2026-12-06). A running
    job's says the time since it started, which goes on with each poll; an ended one's, its
    work."""
    import datetime as dt
    import re

    from ui.render import job_html

    started = (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=100)).replace(tzinfo=None)
    html = job_html(_job(started_at=started.isoformat(), timings={"parse_chunk": 2.0}), 1600)
    assert re.search(r"\(started 10[01] s ago\)", html) and "s of work" not in html, html
    done = job_html(_job(state="completed", timings={"parse_chunk": 2.0, "encode": 99.6}), 1600)
    assert "(101.6 s of work)" in done and "ago" not in done, done
    # A job cancelled within a batch: the stage it cut short is in no timing, and it read
    # "(0.1 s of work)" of 6 s of encoding. From its start to its end then.
    ended = started + dt.timedelta(seconds=6.2)
    cut = job_html(_job(state="cancelled", started_at=started.isoformat(), finished_at=ended.isoformat(),
                        timings={"parse_chunk": 0.1}), 1600)
    assert "(6.2 s of work)" in cut, cut
    # Not a job whose process died: the next run ends it, maybe days later (its stages then).
    later = started + dt.timedelta(days=2)
    died = job_html(_job(state="interrupted", started_at=started.isoformat(),
                         finished_at=later.isoformat(), timings={"parse_chunk": 0.1, "encode": 16.9}), 1600)
    assert "(17.0 s of work)" in died, died
    # Nor a worker job: a stalled one cancelled ends when a worker takes its next chunk.
    stalled = job_html(_job(state="cancelled", runner="celery", started_at=started.isoformat(),
                            finished_at=later.isoformat(), timings={"encode": 17.0}), 1600)
    assert "(17.0 s of work)" in stalled, stalled


def test_an_upload_job_a_restart_stopped_while_queued_is_still_offered_to_resume(minilm,
                                                                               tmp_path) -> None:
    """Its files were not taken back (only a cancel takes them back): it is offered to Resume,
    as before 1fd87f81, which said "upload them again" of every stopped upload job that never
    started (the verification round of the fourth session of 2026-12-06). The process that
    queued it ended (a server stopped): its pid is one that has exited."""
    import subprocess

    from indexer import metadata as md
    from tests.ui.test_browser_a11y import _Held
    from tests.ui.test_ui_api import _own_facet

    facet, handlers = _own_facet(minilm, tmp_path)
    runner = facet.job_runner
    try:
        note = tmp_path / "queued.txt"
        note.write_text("A note whose job waited in the queue when the server stopped.")
        facet.job_runner = _Held()  # (never taken: it stays queued)
        job = facet.upload("rho", [note]).job
        ended = subprocess.Popen(["true"])
        ended.wait()
        with facet.context.sessions() as session:
            row = md.get_job(session, job.id)
            assert row is not None
            row.pid = ended.pid
            session.commit()
        stopped = facet.job(job.id)
        assert stopped.state == "interrupted" and stopped.started_at is None, stopped
        assert (facet.upload_folder("rho") / "queued.txt").is_file()
        _, jobs = handlers.collections()
        said = next(r for r in jobs if r[0] == job.id)[-1]
        assert "press Resume" in said and "upload them again" not in said, said
        row_update, picker = handlers.stopped_jobs()
        assert row_update["visible"] and picker["value"] == job.id
    finally:
        facet.job_runner = runner
        facet.close()


def test_an_upload_job_cancelled_unstarted_does_not_hide_an_earlier_stopped_one(minilm,
                                                                              tmp_path) -> None:
    """Every upload job of a collection reads its one folder: a later one cancelled while
    queued (its files taken back) counted as having "gone on with the same files", and the
    earlier cancelled job left the Resume picker (the worker-stack review of the fourth session
    of 2026-12-06)."""
    from tests.ui.test_browser_a11y import _Held
    from tests.ui.test_ui_api import _own_facet

    facet, handlers = _own_facet(minilm, tmp_path)
    runner = facet.job_runner
    try:
        first = _cancelled_in_uploads(facet)
        assert first.state == "cancelled"
        note = tmp_path / "late.txt"
        note.write_text("A note whose upload was cancelled before its job started.")
        facet.job_runner = _Held()  # (never taken: it stays queued)
        late = facet.upload("notes", [note]).job
        assert facet.cancel_job(late.id).state == "cancelled"
        row, picker = handlers.stopped_jobs()
        assert row["visible"] and picker["value"] == first.job_id, picker
    finally:
        facet.job_runner = runner
        facet.close()
