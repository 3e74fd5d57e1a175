"""What a search says when no word of the query is indexed, the timing of a spec with options,
an instruction turned off by a spec's options, and `-e bm25`."""

from __future__ import annotations

import json

import pytest

from app.errors import InvalidRequestError
from app.services.indexing import IndexService
from app.services.search import SearchRequest, SearchService, why_no_results
from tests.app.services.conftest import first_search_timings

ROWS = [("c1", "My card was declined at the supermarket", "eu"),
        ("c2", "How do I top up my account with a bank transfer?", "eu"),
        ("c3", "The exchange rate you applied was wrong", "us"),
        ("c4", "I lost my card yesterday, please block it", "us")]


@pytest.fixture
def regions(make_ctx, tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps({"_id": i, "text": t, "region": r}) + "\n" for i, t, r in ROWS))
    ctx = make_ctx()
    IndexService(ctx).index(path, "notes")
    return ctx


def test_a_filtered_word_search_of_no_indexed_word_says_so_not_check_the_filters(regions) -> None:
    """`facet search zzzqqq -m lexical -f region=eu` said "check the filters" though the filter
    matches 2 records."""
    service = SearchService(regions)
    response = service.search(SearchRequest("zzzqqq", "notes", mode="lexical", filters={"region": "eu"}))
    assert response.results == []
    why = why_no_results(response, {"region": "eu"})
    assert why.startswith("no indexed word of the query is in it"), why
    assert "check the filters" not in why
    # A query whose words are indexed, filtered out: still the filters.
    response = service.search(SearchRequest("exchange", "notes", mode="lexical", filters={"region": "eu"}))
    assert response.results == [] and why_no_results(response, {"region": "eu"}).startswith("check the filters")


def test_hybrid_says_when_the_word_side_found_nothing(regions) -> None:
    """`-m hybrid zzzqqq` quietly gave the dense side's results, at half the fused scale."""
    service = SearchService(regions)
    response = service.search(SearchRequest("zzzqqq", "notes", mode="hybrid", top_k=3))
    assert response.results
    assert "the word side found nothing (no indexed word of the query is in it)" in (response.note or "")
    words = service.search(SearchRequest("card", "notes", mode="hybrid", top_k=3))
    assert "word side" not in (words.note or "")


def test_a_spec_whose_options_turn_the_instruction_off_reads_none(regions) -> None:
    """`-e "minilm[instruction_weight=0]" -i ...` said instruction_read: true and auto picked
    dense "because of the instruction"."""
    from embedders.registry import reads_instructions

    assert not reads_instructions("minilm[instruction_weight=0]")
    assert not reads_instructions("minilm[instruction_weight=0.0]")
    assert reads_instructions("minilm[instruction_weight=0.5]") and reads_instructions("minilm")
    response = SearchService(regions).search(SearchRequest(
        "card", "notes", instruction="rivers", embedder="minilm[instruction_weight=0]", mode="dense"))
    assert response.instruction_read is False
    assert "the instruction was not read: minilm[instruction_weight=0]" in (response.note or "")


def test_bm25_as_the_embedder_is_a_lexical_search(regions) -> None:
    """`-e bm25` was refused as "unknown embedder 'bm25'", though a lexical response names it."""
    service = SearchService(regions)
    for mode in ("lexical", "auto"):
        response = service.search(SearchRequest("card", "notes", embedder="bm25", mode=mode))
        assert response.mode == "lexical" and response.embedder == "bm25" and response.results
    for mode in ("dense", "hybrid"):
        with pytest.raises(InvalidRequestError, match=r"bm25 is the word index.*--mode lexical"):
            service.search(SearchRequest("card", "notes", embedder="BM25", mode=mode))


def test_a_first_search_with_a_spec_with_options_times_the_torch_import_as_loading(regions) -> None:
    """"(1403 ms, after 0.2 s loading minilm[instruction_weight=1])": naming the spec imported
    torch before the cold check. A new process, so that torch is not imported yet."""
    regions.close()  # the new process opens the store
    timings = first_search_timings(regions.settings.data_dir,
                                   "SearchRequest('bank', 'notes', instruction='rivers', "
                                   "embedder='minilm[instruction_weight=1]', top_k=3)")
    told = sum(v for k, v in timings.items() if k != "total")
    assert timings["total"] - told < 300, timings  # nothing of a second left unnamed
