"""Searching and clustering non-English text (real store, SQLite and minilm).

* Lexical search did not fold full-width Latin, half-width katakana, Arabic harakat and tatweel,
  Hebrew niqqud, Turkish "İ" or "ß" (``qdrant-bm25-en-pairs-v2`` does); a dense search for
  "istanbul" highlighted no "İstanbul".
* A collection of the older ``en-pairs-v1`` terms says so, naming what it misses (not Chinese
  text, which it reads) and what rewrites it.
* A query of invisible characters only (U+200B, U+FEFF, U+2060) was searched, and dense search
  returned arbitrary results; it is refused as an empty query.
* `facet search 🍕 -m lexical` said "no indexed word of the query is in it" of a text holding 🍕:
  the query has no term at all.
* Cluster keywords: "İzmir" came out as "i̇zmir", "Straße" and "strasse" were two words, and
  every word with an apostrophe was dropped ("İstanbul'da", "O'Brien").
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.api import create_app
from app.errors import InvalidRequestError
from app.services.indexing import IndexService
from app.services.search import (
    NO_QUERY_WORD,
    SearchRequest,
    SearchService,
    make_snippet,
    why_no_results,
)
from embedders.explain import explain_clusters, keyword_terms
from indexer import lexical as lex
from tests.app.cli_runner import invoke_cli

from ..api.conftest import serving_facet

ROWS = {
    "tr": "İstanbul'da bir gün geçirdik",
    "de": "Die Straße war lang und leer",
    "fw": "Ｃｏｍｐａｎｙ report number １２３",
    "kana": "ｶﾀｶﾅ の 本",
    "ar": "هذا كِتَاب جميل",
    "he": "שָׁלוֹם עולם",
    "fr": "un café noir",
    "pizza": "pizza night 🍕 with friends",
}


def _records(tmp_path: Path) -> Path:
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({"_id": k, "text": t}, ensure_ascii=False) + "\n"
                            for k, t in ROWS.items()), encoding="utf-8")
    return path


@pytest.fixture
def service(make_ctx, tmp_path) -> SearchService:
    ctx = make_ctx()
    IndexService(ctx).index(_records(tmp_path), "u")
    return SearchService(ctx)


def _highlighted(result) -> list[str]:
    return [result.snippet[a:b] for a, b in result.highlights]


@pytest.mark.parametrize(("query", "doc", "word"), [
    ("istanbul", "tr", "İstanbul"), ("strasse", "de", "Straße"), ("company", "fw", "Ｃｏｍｐａｎｙ"),
    ("123", "fw", "１２３"), ("カタカナ", "kana", "ｶﾀｶﾅ"), ("كتاب", "ar", "كِتَاب"),
    ("שלום", "he", "שָׁלוֹם"),
])
def test_a_lexical_search_finds_and_highlights_other_forms(service, query, doc, word) -> None:
    response = service.search(SearchRequest(query, "u", mode="lexical", top_k=3))
    assert [r.doc_id for r in response.results] == [doc]
    assert _highlighted(response.results[0]) == [word]
    assert response.note is None


def test_accents_still_tell_words_apart(service) -> None:
    assert service.search(SearchRequest("cafe", "u", mode="lexical")).results == []
    assert [r.doc_id for r in service.search(SearchRequest("café", "u", mode="lexical")).results] == ["fr"]


def test_a_dense_search_highlights_the_folded_word(service) -> None:
    results = service.search(SearchRequest("istanbul", "u", mode="dense", top_k=8)).results
    tr = next(r for r in results if r.doc_id == "tr")
    assert _highlighted(tr) == ["İstanbul"]
    de = next(r for r in service.search(SearchRequest("strasse", "u", mode="dense", top_k=8)).results
              if r.doc_id == "de")
    assert _highlighted(de) == ["Straße"]


def test_highlights_fold_without_a_definition() -> None:
    """The dense path (no lexical definition) folds as lexical search does."""
    for text, query, word in [("İstanbul'da", "istanbul", "İstanbul"), ("ﾊﾟﾝﾀﾞ がいる", "パンダ", "ﾊﾟﾝﾀﾞ"),
                              ("كتـــاب", "كتاب", "كتـــاب"), ("ﬁle", "file", "ﬁle")]:
        snippet, spans = make_snippet(text, query)
        assert [snippet[a:b] for a, b in spans] == [word], text
    # An older definition highlights what it matched: not folded.
    assert make_snippet("İstanbul", "istanbul", lexical="qdrant-bm25-en-pairs-v1")[1] == []


@pytest.mark.parametrize("query", ["\u200b", "\ufeff", "\u2060", " \u200b\u2060 \t", "\u200b\u00ad",
                                   # control, private-use and combining characters alone
                                   "\u0000\u0001", "\ue000", "\u0301\u0302"])
def test_a_query_of_invisible_characters_is_empty(service, query) -> None:
    for mode in ("dense", "lexical", "hybrid", "auto"):
        with pytest.raises(InvalidRequestError, match="the query is empty") as e:
            service.search(SearchRequest(query, "u", mode=mode))
        assert e.value.param == "query"
    # Such a character inside a query is no reason to refuse it.
    assert service.search(SearchRequest("pizza\u200b", "u", mode="dense")).results
    assert service.search(SearchRequest("pizza\u0000\ue000", "u", mode="dense")).results


@pytest.mark.parametrize("instruction", ["\u200b", " \ufeff\u2060 ", "\u00ad"])
def test_an_instruction_of_invisible_characters_is_none(service, instruction) -> None:
    """It was taken for an instruction: an auto search went dense (not hybrid), its scores
    changed, and the response said the instruction was read; the embedders now read none."""
    from embedders.contract import validate_instruction

    none = service.search(SearchRequest("pizza", "u"))
    invisible = service.search(SearchRequest("pizza", "u", instruction=instruction))
    assert none.mode == invisible.mode == "hybrid"
    assert invisible.instruction is None and invisible.instruction_read is False
    assert [(r.doc_id, r.score) for r in invisible.results] == [(r.doc_id, r.score) for r in none.results]
    assert validate_instruction(instruction) is None
    assert validate_instruction(" Find the food\u200b ") == "Find the food\u200b"


def test_a_query_with_no_term_says_so(service) -> None:
    response = service.search(SearchRequest("🍕", "u", mode="lexical"))
    assert response.results == []
    assert response.note == NO_QUERY_WORD
    assert why_no_results(response, None) == NO_QUERY_WORD
    filtered = service.search(SearchRequest("the", "u", mode="lexical", filters={"doc_id": "pizza"}))
    assert filtered.note == NO_QUERY_WORD
    # An indexed word the collection lacks is still "no indexed word of the query is in it".
    missing = service.search(SearchRequest("zebra", "u", mode="lexical"))
    assert why_no_results(missing, None).startswith("no indexed word of the query is in it")
    hybrid = service.search(SearchRequest("🍕", "u", mode="hybrid"))
    assert hybrid.results and NO_QUERY_WORD in (hybrid.note or "")


def test_the_cli_and_the_api_refuse_invisible_queries_and_explain_symbols(make_ctx, tmp_path,
                                                                          minilm) -> None:
    env = {"FACET_DATA_DIR": str(tmp_path / "data")}
    done = invoke_cli("index", str(_records(tmp_path)), "-c", "u", "-e", "minilm", env=env)
    assert done.returncode == 0, done.stderr
    blank = invoke_cli("search", "\u200b\ufeff", "-c", "u", env=env)
    assert (blank.returncode, blank.stdout) == (2, "")
    assert blank.stderr == "error: the query is empty: give the text to search for\n"
    pizza = invoke_cli("search", "🍕", "-c", "u", "-m", "lexical", env=env)
    assert pizza.returncode == 0, pizza.stderr
    assert NO_QUERY_WORD in pizza.stdout and "no indexed word" not in pizza.stdout
    facet = serving_facet(tmp_path / "data", minilm)
    try:
        with TestClient(create_app(facet)) as client:
            r = client.post("/search", json={"query": "\u2060", "collection": "u"})
            assert r.status_code == 400 and "query is empty" in r.json()["error"]["message"], r.text
            assert r.json()["error"]["param"] == "query"
    finally:
        facet.close()


def test_older_pairs_terms_say_what_they_miss_and_what_rewrites_them(make_ctx, tmp_path,
                                                                     monkeypatch) -> None:
    older = "qdrant-bm25-en-pairs-v1"
    path = _records(tmp_path)
    with monkeypatch.context() as m:  # what the Facet before the fold wrote
        m.setattr(lex, "LEXICAL_VERSION", older)
        m.setattr(lex, "LEXICAL_VECTOR", lex.vector_name(older))
        IndexService(make_ctx()).index(path, "u")
    ctx = make_ctx()
    service = SearchService(ctx)
    response = service.search(SearchRequest("istanbul", "u", mode="lexical"))
    assert response.results == []  # read as that definition reads it
    why = why_no_results(response, None)
    assert f"keeps the term vectors of {older}, an older definition" in why
    assert "another Unicode form" in why and "Chinese" not in why  # it reads Chinese
    assert "rewrite them as qdrant-bm25-en-pairs-v2" in why
    found = service.search(SearchRequest("İstanbul", "u", mode="lexical"))
    assert [r.doc_id for r in found.results] == ["tr"] and _highlighted(found.results[0]) == ["İstanbul"]
    IndexService(ctx).index(path, "u")  # rewrites the term vectors from the stored texts
    again = service.search(SearchRequest("istanbul", "u", mode="lexical"))
    assert [r.doc_id for r in again.results] == ["tr"] and again.note is None


@pytest.mark.parametrize(("text", "words"), [
    ("İstanbul'da, Ankara'ya, Türkiye'nin İzmir'den", ["istanbul", "ankara", "türkiye", "izmir"]),
    ("İstanbul’un havası", ["istanbul", "havası"]),  # a typographic apostrophe
    ("O'Brien's car met O'Brien", ["o'brien", "car", "met", "o'brien"]),
    ("aujourd'hui il pleut", ["aujourd'hui", "pleut"]),
    ("don't it's you're we'll they'd can't", []),
    ("Straße strasse STRASSE", ["strasse", "strasse", "strasse"]),
    ("Ｃｏｍｐａｎｙ", ["company"]),
])
def test_keywords_fold_and_keep_words_with_apostrophes(text: str, words: list[str]) -> None:
    assert keyword_terms(text) == words


def test_a_turkish_cluster_is_named_by_its_city() -> None:
    texts = ["İstanbul'da çok güzel bir gün", "İstanbul'a uçak bileti aldım",
             "İstanbul'un trafiği çok yoğun", "Dün İstanbul'dan döndüm",
             "Ankara'da toplantı var", "Ankara'ya tren bileti aldım",
             "Ankara'nın havası soğuk", "Yarın Ankara'dan geliyorum"]
    explained = explain_clusters(texts, [0] * 4 + [1] * 4, texts, top_k=3)
    assert [e.keywords[0] for e in explained] == ["istanbul", "ankara"]


@pytest.mark.parametrize("run", ["👩\u200d👩\u200d👧\u200d👦", "🇺🇸🇫🇷", "น้ำ", "\u1112\u1161\u11ab",
                                 "e\u0301\u0323", "ﾊﾟ", "می\u200c"],
                         ids=["family", "flags", "thai", "hangul-nfd", "marks", "half-width-katakana",
                              "persian-zwnj"])
def test_a_snippet_begins_and_ends_between_characters(run) -> None:
    """The second verification of the fifth session of 2026-12-06: a snippet cut inside an
    emoji sequence began "…\\u200d👨🏼" (the rest of a family); it begins and ends between
    user-perceived characters (the ``regex`` module's grapheme clusters are the oracle)."""
    regex = pytest.importorskip("regex")
    from app.services.search import make_snippet

    for lead in range(0, 7):  # every offset of the window against the run's characters
        text = "x" * lead + run * 120 + " lighthouse " + run * 120
        snippet, highlights = make_snippet(text, "lighthouse")
        body = snippet.strip("…")
        start = text.index(body)
        boundaries = {m.start() for m in regex.finditer(r"\X", text)} | {len(text)}
        assert start in boundaries and start + len(body) in boundaries, (lead, snippet[:8])
        assert [snippet[a:b] for a, b in highlights] == ["lighthouse"]


def test_a_snippet_inside_one_long_character_stays_a_snippet() -> None:
    """Its third verification: the snippet's end moved to the end of the character it was in,
    and a letter with 100,000 combining marks (or 50,000 joined emoji) made a snippet of
    100,014 characters; it is about the width asked for."""
    from app.services.search import make_snippet

    for run in ("a" + "\u0301" * 100_000, "\u200d".join("👨" * 50_000)):
        snippet, highlights = make_snippet("target word " + run + " tail", "target")
        assert len(snippet) <= 260 and [snippet[a:b] for a, b in highlights] == ["target"]
