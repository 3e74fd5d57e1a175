"""What `facet search` says about the instruction: that BM25 alone did not read it, from the
response's own `instruction_read` (the API and the UI say it from the same field)."""

from __future__ import annotations

import pytest

from app.commands.search import print_results
from app.services.search import SearchResponse


@pytest.mark.parametrize(("mode", "reranker", "read"), [
    ("lexical", None, False), ("lexical", "minilm", True), ("dense", None, True), ("hybrid", None, True)])
def test_the_header_says_when_the_instruction_was_not_read(capsys, mode, reranker, read) -> None:
    response = SearchResponse("q", "Find refunds", "c", "bm25" if mode == "lexical" else "minilm",
                              reranker, [], {"total": 1.0}, mode)
    assert response.instruction_read is read
    print_results(response)
    out = capsys.readouterr().out
    assert "instruction: Find refunds" in out
    assert ("(not read: lexical search matches the words only)" in out) is not read


def test_no_instruction_is_never_read() -> None:
    assert SearchResponse("q", None, "c", "minilm", None, [], {}, "dense").instruction_read is False
    assert SearchResponse("q", None, "c", "minilm", None, [], {}).to_dict()["instruction_read"] is False


def test_a_note_is_shown_beside_results_and_in_the_no_results_line(capsys) -> None:
    """A word search of a collection with older term vectors: the note was shown only when
    nothing was found; with results (hybrid) the CLI said nothing of it."""
    from app.services.search import SearchResult

    note = "its term vectors are of an older definition; run `facet index` on its sources"
    hit = SearchResult(rank=1, score=0.5, doc_id="a", title=None, source="a.txt", chunk_no=0, text="x",
                       snippet="x", highlights=[], start=0, end=1, metadata={}, vector_score=0.5)
    print_results(SearchResponse("q", None, "c", "minilm", None, [hit], {"total": 1.0}, "hybrid", note=note))
    assert f"  note: {note}\n" in capsys.readouterr().out
    print_results(SearchResponse("q", None, "c", "bm25", None, [], {"total": 1.0}, "lexical", note=note))
    out = capsys.readouterr().out
    assert f"; {note})" in out and "note:" not in out


def test_the_query_line_names_each_model_it_loaded(capsys) -> None:
    """"(222 ms, after 4.2 s loading bm25)": the 4.2 s were the reranker's load."""
    timings = {"total": 4500.0, "load_reranker": 4200.0, "rerank": 250.0}
    print_results(SearchResponse("q", None, "c", "bm25", "instemb", [], timings, "lexical",
                                 reranker_spec="instemb"))
    assert "(300 ms, after 4.2 s loading instemb)" in capsys.readouterr().out
    timings = {"total": 6000.0, "load_model": 1200.0, "load_reranker": 4200.0, "rerank": 250.0}
    print_results(SearchResponse("q", None, "c", "minilm", "inbedder", [], timings, "dense",
                                 embedder_spec="minilm", reranker_spec="inbedder"))
    assert "(600 ms, after 1.2 s loading minilm and 4.2 s loading inbedder)" in capsys.readouterr().out


def test_a_huge_title_is_cut_on_the_result_line(capsys) -> None:
    """A Markdown file whose first heading ran 389 KB printed one 389,000-character line (the
    huge-inputs review of the seventh session of 2026-12-06); the JSON output keeps it whole."""
    from app.services.search import SearchResult

    title = "head " * 80_000
    hit = SearchResult(rank=1, score=0.5, doc_id="/d/big.md", title=title, source="/d/big.md",
                       chunk_no=0, text="x", snippet="x", highlights=[], start=0, end=1,
                       metadata={}, vector_score=0.5)
    print_results(SearchResponse("q", None, "c", "minilm", None, [hit], {"total": 1.0}, "dense"))
    lines = capsys.readouterr().out.splitlines()
    line = next(x for x in lines if x.lstrip().startswith("1."))
    assert len(line) < 400 and "(400,000 characters)" in line and "[/d/big.md #0]" in line, line
