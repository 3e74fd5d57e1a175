"""Odd names on the page: search results showed a key's bidi override (U+202E: "rtl\u202etxt.exe"
read as another name) and its ESC/BEL raw, and the Collections tab's jobs table carried raw
ESC and newlines in a job's message, where the CLI shows each escaped (``app.text.printable``).
"""

from __future__ import annotations

from dataclasses import replace

from app.errors import NotFoundError
from app.services.collections import JobInfo
from app.services.search import SearchResponse, SearchResult
from ui import render

RTL = "/docs/rtl\u202etxt.exe.txt"
ESC = "/docs/esc\x1b[31mred\x1b[0m.txt"


def _result(doc: str, title: str | None = None) -> SearchResult:
    return SearchResult(rank=1, score=0.9, doc_id=doc, title=title, source=doc, chunk_no=0,
                        text="t", snippet="t", highlights=[], start=0, end=1, metadata={},
                        vector_score=0.9)


def _job(message: str, errors: list[dict[str, str]] | None = None) -> JobInfo:
    return JobInfo(id=4, collection="odd", source="/docs", embedder="minilm", state="completed",
                   docs_seen=2, docs_indexed=1, docs_skipped=0, docs_failed=1, docs_deleted=0,
                   chunks_written=1, timings={}, started_at="2026-11-30T10:00:00",
                   finished_at=None, resumed_from=None, message=message, errors=errors or [])


def test_result_names_show_their_control_and_bidi_characters_escaped() -> None:
    page = render.results_html(SearchResponse("q", None, "c", "minilm", None,
                                              [_result(RTL), replace(_result(ESC), rank=2)], {}))
    assert "\u202e" not in page and "\x1b" not in page
    assert "rtl\\u202etxt.exe.txt" in page and "esc\\x1b[31mred\\x1b[0m.txt" in page
    # A title too, in its tooltip's path, and on the side-by-side comparison.
    titled = _result(RTL, title="bell\x07 \u202etitle")
    page = render.results_html(SearchResponse("q", None, "c", "minilm", None, [titled], {}))
    assert 'title="/docs/rtl\\u202etxt.exe.txt"' in page and "bell\\x07 \\u202etitle" in page
    a = SearchResponse("q", "A", "c", "minilm", None, [titled], {})
    compared = render.compare_html(a, a)
    assert "\u202e" not in compared and "\x07" not in compared


def test_job_messages_errors_and_keys_show_their_controls_escaped() -> None:
    message = f"removed 1 document (1 chunk) on request: /docs/new\nline\x1b]0;T\x07.txt, {RTL}"
    rows = render.job_rows([_job(message)])
    shown = rows[0][-1]
    assert "\n" not in shown and "\x1b" not in shown and "\u202e" not in shown
    assert "/docs/new\\x0aline\\x1b]0;T\\x07.txt, /docs/rtl\\u202etxt.exe.txt" in shown
    job = _job("1 failed", [{"document": ESC, "kind": "error", "message": f"{ESC} looks binary"}])
    job.removed_keys, job.removed_keys_total = [RTL], 1
    cells = [c for row in render.job_error_rows(job) for c in row]
    assert not any("\x1b" in c or "\u202e" in c for c in cells), cells
    assert "esc\\x1b[31mred\\x1b[0m.txt" in cells[0]
    bar = render.job_html(_job(message), 2)
    assert "\x1b" not in bar and "\\x0aline" in bar
    assert "\u202e" not in render.notices_html([f"{RTL} was not indexed"])


def test_an_error_toast_shows_a_keys_controls_escaped() -> None:
    from ui.handlers import ui_error

    error = ui_error(NotFoundError(f"no document '{RTL}' in collection 'odd'"))
    assert "\u202e" not in str(error.message) and "rtl\\u202etxt" in str(error.message)


def test_a_command_in_an_error_keeps_its_absolute_path() -> None:
    """The job's source folder is cut from the messages (the page shows paths relative to what
    was picked), but not inside `...`: the kept-version hint's `facet delete ... --document
    '/docs/a b.txt'` became `--document 'a b.txt'`, which names no document from any other
    folder."""
    message = ("/docs/a b.txt: cannot read it (Permission denied); its indexed version is kept "
               "and stays searchable (`facet delete odd --document '/docs/a b.txt'` removes it)")
    job = _job("1 failed", [{"document": "/docs/a b.txt", "kind": "error", "message": message}])
    [row] = render.job_error_rows(job)
    assert row[2] == ("a b.txt: cannot read it (Permission denied); its indexed version is kept "
                      "and stays searchable (`facet delete odd --document '/docs/a b.txt'` "
                      "removes it)"), row[2]
