"""Names and counts on the page: a key holding a tab or an invisible format character (U+200B
zero width space, U+200D, U+FEFF, U+2060: Unicode Cf) reached the page raw, so two keys that
differ by one looked identical (``app.text.printable`` escapes them now, as the CLI shows them);
and a removal's bar read "1,000 of 1000 documents removed", one count grouped, one not."""

from __future__ import annotations

from app.services.collections import CollectionInfo, JobInfo
from app.services.search import SearchResponse, SearchResult
from ui import render

ZWSP = "/docs/zw\u200bsp.txt"
TAB = "/docs/tab\there.txt"
FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # one emoji, a ZWJ sequence


def _result(doc: str, rank: int = 1, title: str | None = None, snippet: str = "t") -> SearchResult:
    return SearchResult(rank=rank, score=0.9, doc_id=doc, title=title, source=doc, chunk_no=0,
                        text=snippet, snippet=snippet, highlights=[], start=0, end=1, metadata={},
                        vector_score=0.9)


def _job(**counts: int) -> JobInfo:
    return JobInfo(id=4, collection="odd", source="/docs", embedder="minilm", state="completed",
                   docs_seen=counts.get("seen", 0), docs_indexed=0, docs_skipped=0, docs_failed=0,
                   docs_deleted=counts.get("deleted", 0), chunks_written=0, timings={},
                   started_at="2026-11-30T10:00:00", finished_at=None, resumed_from=None,
                   message="", errors=[])


def test_names_show_tabs_and_format_characters_escaped_but_not_a_documents_text() -> None:
    keys = [ZWSP, "/docs/zwsp.txt", TAB, "/docs/bom\ufeff.txt", "/docs/wj\u2060.txt",
            "/docs/zw\u200dj.txt", f"/docs/{FAMILY} caf\u00e9 \u6f22\u5b57.txt"]
    results = [_result(k, i + 1, snippet=f"a\tb{FAMILY} c\u200bd") for i, k in enumerate(keys)]
    page = render.results_html(SearchResponse("q", None, "c", "minilm", None, results, {}))
    for raw, shown in [("zw\u200bsp.txt", "zw\\u200bsp.txt"), ("tab\there.txt", "tab\\x09here.txt"),
                       ("bom\ufeff.txt", "bom\\ufeff.txt"), ("wj\u2060.txt", "wj\\u2060.txt"),
                       ("zw\u200dj.txt", "zw\\u200dj.txt")]:
        assert raw not in page and shown in page, shown
    # Two keys that differed by a U+200B only now read apart.
    assert render.name_html(ZWSP) != render.name_html("/docs/zwsp.txt")
    # Ordinary names stay as they are: an emoji ZWJ sequence, accents, CJK.
    assert f"{FAMILY} caf\u00e9 \u6f22\u5b57.txt" in page
    # The snippet is the document's own text: its tab and format characters stay.
    assert f"a\tb{FAMILY} c\u200bd" in page
    # Job errors, removed keys and notices, as the results.
    job = _job()
    job.errors = [{"document": TAB, "kind": "error", "message": f"{ZWSP} looks binary"}]
    job.removed_keys, job.removed_keys_total = [ZWSP], 1
    cells = [c for row in render.job_error_rows(job) for c in row]
    assert not any("\t" in c or "\u200b" in c for c in cells), cells
    assert "tab\\x09here.txt" in cells[0] and "zw\\u200bsp.txt looks binary" in cells[2]
    assert "zw\\u200bsp.txt" in render.notices_html([f"{ZWSP} was not indexed"])


def test_counts_are_written_alike_with_a_thousands_separator() -> None:
    removal = _job(deleted=1000)
    removal.removed_keys_total = 1000
    bar = render.job_html(removal, 0)
    assert "1,000 of 1,000 documents removed" in bar, bar
    assert "1,500 documents seen" in render.other_jobs_html([_job(seen=1500)])
    info = CollectionInfo(name="notes", backend="edge", embedders={"minilm": 384}, chunk_size=200,
                          chunk_overlap=20, documents=1200, documents_indexed=1200,
                          documents_failed=0, chunks=3400, points=2300,
                          created_at="2026-11-30T10:00:00Z", points_missing=1100)
    assert render.deleted_text(info, stray=False).startswith(
        "Deleted notes: 1,200 documents, 3,400 chunks.")
    assert render.deleted_text(info, stray=True).startswith("Deleted the vectors of notes (2,300 points)")
    assert render.points_cell(info) == ("2,300 (1,100 chunks of 3,400 missing from the store: index "
                                        "its sources again, or delete it again if a delete was "
                                        "cut short)")
    many = [_result(f"/d/{i}.txt", i + 1) for i in range(1000)]
    response = SearchResponse("q", None, "c", "minilm", None, many, {})
    assert render.search_summary(response, 5.0).startswith(
        '<div class="facet-info">1,000 results from'), render.search_summary(response, 5.0)
    assert "1,000 documents (1,000 matching chunks)" in render.search_summary(
        response, 5.0, group_by_document=True)
