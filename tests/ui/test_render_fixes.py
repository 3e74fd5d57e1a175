"""What a user found exploring the page in a browser (2026-12-01): the Index tab's bar showed the
server's data folder ("They are in 1 document: "/tmp/explore/uic/data/uploads/uploads/
fullwidth.txt"") where the errors table under it said "fullwidth.txt"; the results' metadata
column showed Python reprs (``['maritime', 'safety']``, ``True``) that the filter box cannot
take back; the jobs table's headers broke mid-word at 1360 px ("indexe|d", "faile|d"); and a
finished job's row showed nothing of its warnings (an empty message column)."""

from __future__ import annotations

import html
import json
from dataclasses import replace
from typing import Any

import pytest

from app.encoding import unread_message
from app.services.collections import JobInfo
from app.services.search import SearchResponse, SearchResult
from ui import render
from ui.inputs import parse_filter_text

UPLOADS = "/tmp/explore/uic/data/uploads/uploads"


def _job(state: str = "completed", **fields: Any) -> JobInfo:
    job = JobInfo(id=2, collection="uploads", source=UPLOADS, embedder="minilm", state=state,  # type: ignore[arg-type]
                  docs_seen=3, docs_indexed=3, docs_skipped=0, docs_failed=0, docs_deleted=0,
                  chunks_written=3, timings={}, started_at="2026-12-01T10:00:00",
                  finished_at="2026-12-01T10:00:05", resumed_from=None, message=None, errors=[])
    return replace(job, **fields)


def _unread(*keys: str) -> str:
    return unread_message("minilm", 1, 3, "chunks written", list(keys))


def test_the_job_bar_names_documents_as_the_errors_table_does_not_by_the_data_folder() -> None:
    warning = _unread(f"{UPLOADS}/fullwidth.txt", f"{UPLOADS}/sub/deep.txt")
    job = _job(errors=[{"document": "minilm", "kind": "warning", "message": warning}],
               errors_total=1,
               message=f"{UPLOADS}/gone.txt: could not be read; `facet jobs 2` shows it")
    # The page's notices under the bar (``UiHandlers._unread_job_notices``: the raw warning).
    bar = render.job_html(job, 3, notices=[warning])
    assert "/tmp/explore" not in bar and "/data/uploads" not in bar, bar
    assert "They are in 2 documents: &quot;fullwidth.txt&quot;, &quot;sub/deep.txt&quot;" in bar
    assert "gone.txt: could not be read" in bar
    # The errors table says the very same words (one rule, ``source_relative``).
    [[_, _, said]] = render.job_error_rows(job)
    assert html.escape(said, quote=True) in bar
    # A message given in the page's words (a stopped job's) is cut too.
    stopped = render.job_html(job, 3, message=f"stopped at {UPLOADS}/b.txt; resume it here")
    assert "stopped at b.txt; resume it here" in stopped and UPLOADS not in stopped


def test_a_key_quoted_as_json_is_cut_where_its_folder_holds_a_quote_or_a_backslash() -> None:
    source = '/srv/say "hi"\\x'
    warning = _unread(f"{source}/a.txt")
    assert json.dumps(source)[1:-1] in warning  # the key is escaped inside the warning
    job = _job(source=source, errors=[{"document": "minilm", "kind": "warning",
                                       "message": warning}], errors_total=1)
    [[_, _, said]] = render.job_error_rows(job)
    assert said.endswith('They are in 1 document: "a.txt"'), said
    bar = render.job_html(job, 1, notices=[warning])
    assert "They are in 1 document: &quot;a.txt&quot;" in bar and "srv" not in bar


def test_a_command_to_paste_keeps_its_absolute_path_and_a_root_source_cuts_nothing() -> None:
    text = f"{UPLOADS}/a.txt failed; `facet delete uploads --document '{UPLOADS}/a.txt'`"
    assert render.source_relative(text, UPLOADS) == (
        f"a.txt failed; `facet delete uploads --document '{UPLOADS}/a.txt'`")
    assert render.source_relative("/etc/a.txt failed", "/") == "/etc/a.txt failed"
    assert render.source_relative("/etc/a.txt failed", None) == "/etc/a.txt failed"


def _result(metadata: dict[str, Any]) -> SearchResult:
    return SearchResult(rank=1, score=0.9, doc_id="/d/a.txt", title=None, source="/d/a.txt",
                        chunk_no=0, text="t", snippet="t", highlights=[], start=0, end=1,
                        metadata=metadata, vector_score=0.9)


def _meta_cell(metadata: dict[str, Any]) -> str:
    page = render.results_html(SearchResponse("q", None, "c", "minilm", None,
                                              [_result(metadata)], {}))
    return page.split('<div class="facet-meta">', 1)[1].split("</div>", 1)[0]


def test_metadata_values_read_as_the_filter_box_takes_them_back() -> None:
    cell = _meta_cell({"tags": ["maritime", "safety"], "flag": True, "off": False,
                       "none": None, "year": 2020, "price": 6.5, "title": "Tom's <b>"})
    assert "[&#x27;maritime&#x27;" not in cell and "True" not in cell and "None" not in cell
    # A list as one item a value (a repeated key matches any of them): `tags:=[...]` was refused.
    assert ('<span dir="auto">tags</span>=<span dir="auto">maritime</span>; '
            '<span dir="auto">tags</span>=<span dir="auto">safety</span>') in cell
    # Each field as its filter item: "year: 2020" showed the number and the string alike. A
    # metadata field named as a result's own ("title") is named `meta.title`.
    for key, shown in [("flag", ":=true"), ("off", ":=false"), ("year", ":=2020"), ("price", ":=6.5"),
                       ("meta.title", "=Tom&#x27;s &lt;b&gt;")]:
        op, value = shown.split("=", 1)
        assert f'<span dir="auto">{key}</span>{op}=<span dir="auto">{value}</span>' in cell, key
    # No filter matches a null (`none:=null` was refused): shown as `key: value`.
    assert '<span dir="auto">none</span>: <span dir="auto">null</span>' in cell
    text = _meta_cell({"number": 2020, "string": "2020"})
    assert ('<span dir="auto">number</span>:=<span dir="auto">2020</span>' in text
            and '<span dir="auto">string</span>=<span dir="auto">2020</span>' in text), text


def test_each_shown_value_pasted_into_the_filter_box_is_the_value_itself() -> None:
    """A string after ``key=``, anything else after ``key:=`` (each item of a list: a repeated
    key matches any of them), as docs/ui.md describes the filter box."""
    for value in ["garden", "a b", 2020, -1.25, True, False]:
        shown = render.filter_value(value)
        typed = f"k={shown}" if isinstance(value, str) else f"k:={shown}"
        assert parse_filter_text(typed) == {"k": value}, (value, shown)
    shown = render.filter_value(["maritime", "safety", 3])
    items = json.loads(shown)
    typed = "; ".join(f"tags:={json.dumps(item)}" for item in items)
    assert parse_filter_text(typed) == {"tags": ["maritime", "safety", 3]}
    assert render.filter_value({"a": [1, None]}) == '{"a": [1, null]}'
    assert render.filter_value("caf\u00e9") == "caf\u00e9"


def test_the_jobs_tables_count_columns_fit_their_bold_monospace_headers() -> None:
    """Each header is bold 14 px monospace (0.6 em a letter) with 8 px of padding each side
    (measured in chromium, ``test_render_fixes_browser``): 72 px broke "indexed", 64 "failed"."""
    for header, width in zip(render.JOB_COLUMNS, render.JOB_COLUMN_WIDTHS, strict=True):
        if width.endswith("px"):
            assert float(width[:-2]) >= 16 + 0.6 * 14 * len(header) + 4, (header, width)


def test_a_jobs_row_says_how_many_errors_and_warnings_it_has_and_where_to_read_them() -> None:
    rows = render.job_rows([_job(errors_total=2), _job(errors_total=1, id=3),
                            _job(id=4),
                            _job(id=5, errors_total=3, docs_failed=3,
                                 message="3 of 3 documents failed, 0 indexed: see the job's errors")])
    said = {row[0]: row[render.JOB_COLUMNS.index("message")] for row in rows}
    assert said[2].startswith("2 errors and warnings: `facet jobs 2` (GET /jobs/2) lists them"), said[2]
    assert "Index tab" in said[2]
    assert said[3].startswith("1 error or warning: `facet jobs 3`")
    assert said[4] == ""
    assert said[5].startswith("3 of 3 documents failed, 0 indexed: see the job's errors; "
                              "3 errors and warnings: `facet jobs 5`")
    # The page's own words for a stopped job keep theirs, the count after them.
    [row] = render.job_rows([_job("cancelled", errors_total=1)], {2: "cancelled; resume it here"})
    assert row[-1].startswith("cancelled; resume it here; 1 error or warning")


def test_a_long_metadata_value_is_shown_longer_and_its_cut_is_said() -> None:
    """A value was cut at 80 characters with a bare "…": a list's second item was not shown at
    all, and the shown value pasted as a filter found nothing, with nothing to say so."""
    cell = _meta_cell({"intent": "card_declined_" + "z" * 150, "tags": ["a" * 100, "b"]})
    assert "z" * 150 in cell and '<span dir="auto">tags</span>=<span dir="auto">b</span>' in cell
    cell = _meta_cell({"tags": [f"tag{i:03}" for i in range(100)]})
    # "tags=tag000; " is 13 characters: 23 of them fill the 300.
    assert "tag022" in cell and "tag023" not in cell and "… (77 more values not shown)" in cell
    cell = _meta_cell({"note": "n" * 1000})
    assert "n" * 300 in cell and "n" * 301 not in cell
    assert "(700 more characters not shown)" in cell


def test_the_job_bar_and_its_announcement_count_the_documents_a_sync_removed() -> None:
    """An upload replaced by one without a record removed it (`facet jobs` said "removed 1"),
    and the bar said "2 indexed, 28 unchanged, 0 failed": the record left the collection
    unsaid (the UI review of 2026-12-06). None removed, nothing more is said."""
    job = _job(docs_seen=30, docs_indexed=2, docs_skipped=28, docs_deleted=1)
    bar = render.job_html(job, 30)
    assert "2 indexed, 28 unchanged, 0 failed, 1 removed, 3 chunks written" in bar, bar
    assert render.job_said(job).endswith("2 indexed, 28 unchanged, 0 failed, 1 removed.")
    plain = _job()
    assert "removed" not in render.job_html(plain, 3) and "removed" not in render.job_said(plain)


@pytest.mark.parametrize(("text", "closed"), [
    ("a\u202eevil\nnext", "a\u202eevil\u202c\nnext"),  # closed at its line's end
    ("\u202b\u202dx", "\u202b\u202dx\u202c\u202c"),  # two open: both closed, at the end
    ("\u202ea\u202cb\n", "\u202ea\u202cb\n"),  # closed by the text itself: nothing added
    ("\u2067a\u202cb", "\u2067a\u202cb\u2069"),  # a PDF does not close an isolate
    ("x\u2067y\u202ez\u2069w", "x\u2067y\u202ez\u2069w"),  # a PDI closes what opened in it
    ("plain \u05e9\u05dc\u05d5\u05dd", "plain \u05e9\u05dc\u05d5\u05dd"),  # no control: as is
    # Every line break str.splitlines knows (U+2028 is drawn as a space: it went on reversed).
    ("a\u202eb\u2028c", "a\u202eb\u202c\u2028c"), ("a\u202eb\r\nc", "a\u202eb\u202c\r\nc"),
    ("\u202bx\u2029y\x85z", "\u202bx\u202c\u2029y\x85z"),
])
def test_a_snippets_open_bidi_controls_are_closed_at_each_lines_end(text, closed) -> None:
    """(Where no chromium runs: the browser test in test_render_fixes_browser.py draws it.)"""
    assert render.bidi_closed(text) == closed
    assert render.highlight(text, []) == render.esc(closed)
