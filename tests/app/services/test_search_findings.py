"""Search findings checked against what the collection holds: tied scores give one list for
every k (dense too), the wrong-type filter hint for a field of whole floats and of booleans,
the point id in ``facet search --json``, highlights of what a word search matched, and a
refused filter named as the user gave it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.errors import InvalidRequestError
from app.services.indexing import IndexService
from app.services.search import SearchRequest, SearchService, make_snippet
from indexer.store import point_id
from tests.app.cli_runner import invoke_cli

DUPLICATE = "Identical note about the red kite bird soaring."


@pytest.fixture
def copies(make_ctx, tmp_path: Path):
    """Eight documents of one text (the indexer copies their vectors: every score ties) and one
    other, in collection ``dups``."""
    src = tmp_path / "dups"
    src.mkdir()
    for i in range(1, 9):
        (src / f"dup{i}.txt").write_text(DUPLICATE + "\n")
    (src / "other.txt").write_text("Something else about boats.\n")
    ctx = make_ctx()
    IndexService(ctx).index(src, "dups")
    return ctx


@pytest.mark.parametrize("mode", ["dense", "lexical", "hybrid"])
@pytest.mark.parametrize("exact", [False, True])
def test_tied_scores_give_one_list_for_every_k(copies, mode: str, exact: bool) -> None:
    """Each k's results are a prefix of k=9's, grouped or per chunk (a dense search gave dup2
    at k=1 and dup4, dup1, dup2 at k=3), with a filter too; ties come in point-id order."""
    service = SearchService(copies)

    def names(k: int, group: bool, filters: dict[str, object] | None = None) -> list[str]:
        response = service.search(SearchRequest("red kite", "dups", top_k=k, mode=mode, exact=exact,
                                                group_by_document=group, filters=filters or {}))
        return [Path(r.doc_id).name for r in response.results]

    full = names(9, False)
    assert len(full) == (8 if mode == "lexical" else 9)  # "other" holds no word of the query
    for k in range(1, 10):
        for group in (False, True):
            assert names(k, group) == full[:k], (k, group)
    tied = [n for n in full if n != "other.txt"]
    ids = [point_id(str(Path(copies.settings.data_dir).parent / "dups" / n), 0) for n in tied]
    assert ids == sorted(ids)
    source = str(Path(copies.settings.data_dir).parent / "dups" / tied[2])
    wanted = [source, str(Path(source).with_name(tied[5]))]
    for k in (1, 2):
        assert names(k, False, {"doc_id": wanted}) == [tied[2], tied[5]][:k]


def test_the_store_ranks_dense_ties_by_id_at_every_limit(copies) -> None:
    store = copies.store
    vector = copies.embedders.get("minilm").encode(["red kite"], role="query")[0]
    for exact in (False, True):
        full = store.search("dups", "minilm", vector, limit=9, exact=exact)
        assert [h.id for h in full[:8]] == sorted(h.id for h in full[:8])
        for k in range(1, 10):
            assert [h.id for h in store.search("dups", "minilm", vector, limit=k, exact=exact)] == \
                [h.id for h in full[:k]]


@pytest.fixture
def records(make_ctx, tmp_path: Path):
    def make(**fields: object):
        path = tmp_path / "records.jsonl"
        path.write_text(
            json.dumps({"_id": "a", "text": "Green tea is steeped briefly to avoid bitterness.",
                        "price": 6.0, "count": 2, "published": True}) + "\n"
            + json.dumps({"_id": "b", "text": "Paragraph 3: espresso is brewed under pressure.",
                          "price": 1.5, "count": 3, "published": False}) + "\n")
        ctx = make_ctx(**fields)
        IndexService(ctx).index(path, "recs")
        return ctx

    return make


def _note(service: SearchService, filters: dict[str, object]) -> str:
    response = service.search(SearchRequest("tea", "recs", mode="dense", filters=filters))
    assert response.results == []
    return response.note or ""


def test_a_whole_float_field_gets_the_number_hint(records) -> None:
    """`price=6` on records holding 6.0 said only "check the filters" (JSON text "6" against
    "6.0"); an integer field got the hint."""
    service = SearchService(records())
    assert "matched with price:=6 " in _note(service, {"price": "6"})
    assert "matched with price:=6.0 " in _note(service, {"price": "6.0"})
    assert "matched with count:=2 " in _note(service, {"count": "2"})
    assert "matched with" not in _note(service, {"price": "7"})  # no document holds 7


def test_a_boolean_field_filtered_with_a_string_is_told_what_works(records) -> None:
    edge = SearchService(records())
    note = _note(edge, {"published": "true"})
    assert "'published' holds true/false, not the string \"true\"" in note
    assert "the edge store (the default backend) cannot match true/false" in note
    assert "FACET_VECTOR_BACKEND=local or a Qdrant server, where published:=true" in note
    assert "local mode: one process at a time" in note
    assert "true/false" not in _note(edge, {"count": "true"})  # a field of integers

    local = SearchService(records(vector_backend="local"))
    note = _note(local, {"published": "false"})
    assert ("a field of true/false is matched with published:=false in the CLI and the UI's "
            "filter box, in JSON with the boolean: {\"published\": false}, not the string "
            "\"false\"") in note
    found = local.search(SearchRequest("tea", "recs", mode="dense", filters={"published": False}))
    assert [r.doc_id for r in found.results] == ["b"]


def test_a_refused_boolean_filter_names_the_key_as_given(records) -> None:
    service = SearchService(records())
    with pytest.raises(InvalidRequestError) as refused:
        service.search(SearchRequest("tea", "recs", mode="dense", filters={"published": True}))
    assert str(refused.value).startswith("filter 'published': the edge store cannot match")
    with pytest.raises(InvalidRequestError) as refused:
        service.search(SearchRequest("tea", "recs", mode="dense", filters={"meta.published": True}))
    assert str(refused.value).startswith("filter 'meta.published': ")


def test_word_search_highlights_what_it_matched(records) -> None:
    """A lexical hit on "bitterness" for "bitter" and on "3" of "Paragraph 3" showed no
    highlight; hybrid likewise; a dense search keeps the query's words as written."""
    service = SearchService(records())

    def marked(query: str, mode: str) -> dict[str, list[str]]:
        response = service.search(SearchRequest(query, "recs", mode=mode, top_k=2))
        return {r.doc_id: [r.snippet[a:b] for a, b in r.highlights] for r in response.results}

    for mode in ("lexical", "hybrid"):
        assert marked("bitter", mode)["a"] == ["bitterness"]
        assert marked("paragraph 3", mode)["b"] == ["Paragraph", "3"]
        assert marked("the tea", mode)["a"] == ["tea"]  # a stopword is no term
    assert marked("bitter", "dense")["a"] == []
    assert marked("Paragraph 3", "dense")["b"] == ["Paragraph"]
    # The same without a collection: the definition's terms (stems, numbers, Unicode forms).
    text = "Un Cafe\u0301 à Zürich; cafés 2020."
    snippet, spans = make_snippet(text, "café 2020 zurich", lexical="qdrant-bm25-en-pairs-v1")
    assert [snippet[a:b] for a, b in spans] == ["Cafe\u0301", "cafés", "2020"]


def test_cli_json_carries_each_results_point_id(records, tmp_path: Path) -> None:
    ctx = records()
    ctx.close()
    found = invoke_cli("search", "espresso", "-c", "recs", "--mode", "lexical", "--json",
                       env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert found.returncode == 0, found.stderr
    [hit] = json.loads(found.stdout)["results"]
    assert hit["id"] == point_id("b", 0)
    assert list(hit)[:2] == ["id", "rank"]  # as the HTTP API lists it


def test_the_word_terms_cache_keeps_short_words_only() -> None:
    """Counted by entries, the highlighter's word cache held 65,536 words of any length: an
    unspaced run of 1 KB is one word, 64 MB in all (the verification round of the seventh
    session of 2026-12-06). Long words are read each time; the highlight is the same."""
    from app.services import search

    search._cached_word_terms.cache_clear()
    long_word = "x" * 5000 + "cafe"
    text = f"a long run {long_word} and a café in Zurich"
    snippet, spans = make_snippet(text, "café zurich", width=10_000,
                                  lexical="qdrant-bm25-en-pairs-v1")
    assert [snippet[a:b] for a, b in spans] == ["café", "Zurich"]
    kept = search._cached_word_terms.cache_info().currsize
    assert kept > 0
    search._word_terms("y" * 5000, "qdrant-bm25-en-pairs-v1")  # a long word: not kept
    search._word_terms("yes", "qdrant-bm25-en-pairs-v1")  # a short one: kept
    assert search._cached_word_terms.cache_info().currsize == kept + 1
