"""`facet search`'s text output cuts a long metadata value and shows a list as JSON.

A 2 MB field was printed whole under its result, and a list as Python's ``['card']``; --json
stays complete (it is ``SearchResponse.to_dict``, untouched)."""

from __future__ import annotations

from click.testing import CliRunner

from app.commands.search import print_results
from app.services.search import SearchResponse, SearchResult


def test_metadata_is_cut_and_lists_are_json() -> None:
    meta = {"blob": "x" * 5000, "tags": ["card", "fee"], "vip": True, "k" * 300: "v"}
    result = SearchResult(rank=1, score=0.5, doc_id="b1", title=None, source="f.jsonl", chunk_no=0,
                          text="card fees", snippet="card fees", highlights=[], start=0, end=9,
                          metadata=meta, vector_score=0.5)
    response = SearchResponse(query="card", instruction=None, collection="c", embedder="minilm",
                              reranker=None, results=[result], timings_ms={"total": 1.0})
    with CliRunner().isolation() as (out, _err, _both):
        print_results(response)
        printed = out.getvalue().decode()
    line = next(x for x in printed.splitlines() if "[b1 #0]" in x)
    assert f"blob={'x' * 120}… (5,000 characters) " in line, line
    assert 'tags=["card", "fee"] vip=true ' in line, line
    assert f"{'k' * 120}… (300 characters)=v" in line, line
    assert len(line) < 600, len(line)
    assert response.to_dict()["results"][0]["metadata"]["blob"] == "x" * 5000
