"""What the page says to a screen reader, at the handler and render level (the browser side is
``test_browser_a11y.py``): an index job's state changes are announced once each (its bar is
not live; a running job's counts change at every poll), a job that ended stopped refreshes the
stopped-jobs list once, the Search summary says why nothing was found and the notices, the
Compare summary is marked for its live area, and text boxes get a visible focus ring."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from app.errors import NotFoundError
from app.services.collections import JobInfo
from app.services.search import SearchResponse
from ui import render

gr = pytest.importorskip("gradio")


def _job(state: str = "running", **fields: Any) -> JobInfo:
    job = JobInfo(id=3, collection="up", source="/docs", embedder="minilm", state=state,  # type: ignore[arg-type]
                  docs_seen=1, docs_indexed=1, docs_skipped=0, docs_failed=0, docs_deleted=0,
                  chunks_written=1, timings={}, started_at="2026-12-01T10:00:00",
                  finished_at=None, resumed_from=None, message="encoding chunk 0/2", errors=[])
    return replace(job, **fields)


class _Jobs:
    """A facade stand-in holding the bar's job (``current``; None: gone with its collection)."""

    def __init__(self) -> None:
        self.current: JobInfo | None = _job("queued", docs_seen=0, docs_indexed=0)

    def job(self, job_id: int, errors: int = 100) -> JobInfo:
        if self.current is None:
            raise NotFoundError(f"no index job {job_id}")
        return self.current


@pytest.fixture
def handlers(tmp_path, monkeypatch) -> Any:
    from app.settings import FacetSettings
    from ui.handlers import UiHandlers

    jobs = _Jobs()
    h = UiHandlers(lambda: jobs, FacetSettings(data_dir=tmp_path), tmp_path)  # type: ignore[arg-type]
    h.jobs = jobs
    h.refreshed = 0

    def stopped_jobs() -> tuple[Any, Any]:
        h.refreshed += 1
        return gr.update(visible=True), gr.update(choices=[("job 3 into up", 3)], value=3)

    monkeypatch.setattr(h, "stopped_jobs", stopped_jobs)
    return h


def _poll(h: Any, said: str) -> tuple[Any, str, Any, Any]:
    return h.job_controls(3, said)  # type: ignore[no-any-return]


def test_each_state_of_the_bars_job_is_said_once_and_a_stopped_end_refreshes_the_list(
        handlers) -> None:
    h = handlers
    button, said, row, stopped = _poll(h, "")
    assert said == "Job 3 into up: queued." and button.visible is True
    assert row == stopped == gr.skip()  # the list left as it is
    h.jobs.current = _job("running")
    _, running, _, _ = _poll(h, said)
    assert running == "Job 3 into up: running."
    # The counts move at every poll: the announcement does not.
    h.jobs.current = _job("running", docs_seen=2, docs_indexed=2, chunks_written=5)
    assert _poll(h, running)[1] == running
    h.jobs.current = replace(h.jobs.current, cancel_requested=True)
    button, cancelling, _, _ = _poll(h, running)
    assert cancelling == "Job 3 into up: cancelling." and button.visible is False
    assert h.refreshed == 0
    h.jobs.current = _job("cancelled", docs_seen=2, docs_indexed=2, docs_skipped=1)
    button, ended, row, stopped = _poll(h, cancelling)
    assert ended == "Job 3 into up: cancelled, 2 indexed, 1 unchanged, 0 failed."
    assert h.refreshed == 1 and row["visible"] is True and stopped["value"] == 3
    # Polled on (another job runs): said and refreshed once only.
    _, again, row, _ = _poll(h, ended)
    assert again == ended and h.refreshed == 1 and row == gr.skip()
    h.jobs.current = None  # its collection deleted
    assert _poll(h, ended)[1] == "Job 3 is gone: its collection was deleted."
    assert h.job_controls(0, "")[1] == ""  # no job, nothing said


def test_the_search_summary_says_why_nothing_was_found_and_the_notices() -> None:
    response = SearchResponse(query="my card", instruction=None, collection="notes",
                              embedder="minilm", reranker=None, results=[], timings_ms={},
                              note="no document has a field 'lang'")
    notice = "k is a whole number of results from 1 to 50; searched with 50, not 100."
    summary = render.search_summary(response, 12, notices=[notice], filters={"lang": "en"})
    hidden = summary.split('<span class="facet-sr-only">', 1)[1]
    assert "No results: check the filters; no document has a field &#x27;lang&#x27;." in hidden
    assert "searched with 50, not 100." in hidden
    # A long notice is cut in what is said (the results show it whole).
    long = render.search_summary(response, 12, notices=["x" * 500], filters=None)
    assert "x" * 160 + "…" in long and "x" * 161 not in long
    assert "facet-sr-only" not in render.search_summary(
        replace(response, results=[object()], note=None), 12)  # type: ignore[list-item]


def test_the_compare_summary_is_marked_for_its_live_area() -> None:
    """``COMPARE_SUMMARY_JS`` copies it (and the notes above it) into the tab's live area."""
    a = SearchResponse(query="q", instruction="A", collection="notes", embedder="minilm",
                       reranker=None, results=[], timings_ms={}, note=None)
    b = replace(a, instruction="B", note="minilm reads no instruction")
    html = render.compare_html(a, b, ["The query was cut"])
    summary = html.split('<div class="facet-info facet-summary">', 1)[1].split("</div>", 1)[0]
    assert summary == "Neither instruction found a result."  # (it said "0 of the top 1 results")
    assert html.count("minilm reads no instruction") == 1  # shown once
    assert html.index("The query was cut") < html.index("facet-summary")


def test_text_boxes_and_pickers_have_a_visible_focus_ring() -> None:
    css = " ".join(render.CSS.split())
    assert ("input:not([type=radio]):not([type=checkbox]):focus-visible, textarea:focus-visible"
            in css)
    assert "outline: 2px solid #1a5fb4 !important" in css
