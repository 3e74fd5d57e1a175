"""The fold of ``qdrant-bm25-en-pairs-v2`` (``embedders.scripts.fold``) and its lexical search.

Lexical search read text in composed form only (NFC): full-width Latin and digits, half-width
katakana, ligatures, Arabic with harakat or tatweel, Hebrew with niqqud, Turkish "İ" (lower-cased
to "i" plus a combining dot) and "ß" were other terms than the forms users type. The definition
``en-pairs-v2`` folds documents and queries alike; the older definitions read as they did, so
collections written under them keep answering their queries.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from embedders.scripts import fold, fold_with_offsets
from indexer import lexical as lex
from indexer.store import EdgeStore, PointRecord, QdrantClientStore, VectorStore, point_id

DIM = 4
FOLDED = [  # (as written in a text, as typed in a query)
    ("Ｃｏｍｐａｎｙ", "company"),  # full-width Latin
    ("１２３", "123"),  # full-width digits
    ("ｶﾀｶﾅ", "カタカナ"),  # half-width katakana
    ("ﾊﾟﾝﾀﾞ", "パンダ"),  # half-width, with the separate sound mark
    ("ﬁle", "file"),  # a ligature
    ("كِتَاب", "كتاب"),  # Arabic with harakat
    ("كتـــاب", "كتاب"),  # Arabic with tatweel
    ("שָׁלוֹם", "שלום"),  # Hebrew with niqqud
    ("İstanbul", "istanbul"),  # Turkish dotted capital I
    ("Straße", "strasse"),  # sharp s
    ("STRAẞE", "strasse"),  # capital sharp s
]


@pytest.mark.parametrize(("written", "typed"), FOLDED)
def test_the_fold_makes_one_form(written: str, typed: str) -> None:
    assert fold(written).lower() == fold(typed).lower()
    assert fold(fold(written)) == fold(written)  # folding folded text changes nothing


@pytest.mark.parametrize("word", ["café", "naïve", "Ελλάδα", "ёлка", "Dvořák", "आज़ादी", "אב־בית"])
def test_the_fold_keeps_accents_and_other_marks(word: str) -> None:
    """Latin, Greek and Cyrillic accents, Devanagari marks and the Hebrew maqaf stay."""
    assert fold(word) == unicodedata.normalize("NFC", word)
    assert fold(unicodedata.normalize("NFD", word)) == unicodedata.normalize("NFC", word)


def test_the_fold_keeps_where_each_character_came_from() -> None:
    text = "ﾊﾟﾝﾀﾞ at İstanbul"
    folded, where = fold_with_offsets(text)
    assert folded == fold(text) == "パンダ at Istanbul"
    assert len(where) == len(folded)
    assert text[where[0][0]:where[2][1]] == "ﾊﾟﾝﾀﾞ"
    start = folded.index("Istanbul")
    assert text[where[start][0]:where[start + 7][1]] == "İstanbul"
    assert fold_with_offsets("plain") == ("plain", [(i, i + 1) for i in range(5)])
    # A run of ASCII letters is taken whole but for a last one that a mark follows: it folds
    # with the mark ("Cafe" + U+0301 is "Café", its é from two characters of the text).
    folded, where = fold_with_offsets("Cafe\u0301 at ﬁve…")
    assert folded == "Café at five..."
    assert where[:4] == [(0, 1), (1, 2), (2, 3), (3, 5)] and where[8:10] == [(9, 10), (9, 10)]
    assert where[-3:] == [(12, 13)] * 3


def test_new_collections_get_the_folding_definition() -> None:
    assert lex.LEXICAL_VERSION == "qdrant-bm25-en-pairs-v2"
    assert lex.LEXICAL_VECTOR == "bm25f" and lex.folds(lex.LEXICAL_VERSION)
    assert lex.version_of_vector("bm25f") == lex.LEXICAL_VERSION
    assert len(lex.LEXICAL_VECTORS) == len(lex.DEFINITIONS)  # a vector name each
    # Every older definition says what its word search misses (the search note).
    assert set(lex.MISSES) == set(lex.DEFINITIONS) - {lex.LEXICAL_VERSION}


@pytest.mark.parametrize(("written", "typed"), FOLDED)
def test_a_folded_query_has_the_documents_terms(written: str, typed: str) -> None:
    document = set(lex.document_terms(f"a {written} b")[0])
    assert set(lex.query_terms(typed)[0]) <= document
    assert set(lex.query_terms(written)[0]) <= document


@pytest.mark.parametrize("older", ["qdrant-bm25-en-v1", "qdrant-bm25-en-pairs-v1"])
def test_older_definitions_read_as_they_did(older: str) -> None:
    """Their collections' terms were written without the fold: their queries are not folded."""
    for written, typed in [("İstanbul", "istanbul"), ("Ｃｏｍｐａｎｙ", "company"), ("كِتَاب", "كتاب")]:
        assert not set(lex.query_terms(typed, older)[0]) & set(lex.document_terms(written, older)[0])
    decomposed = unicodedata.normalize("NFD", "café")  # NFC, as before
    assert lex.query_terms(decomposed, older) == lex.query_terms("café", older)


def test_accents_are_not_folded_away() -> None:
    assert not set(lex.query_terms("cafe")[0]) & set(lex.document_terms("café")[0])


TEXTS = {
    "tr": "İstanbul'da güzel bir gün",
    "de": "Die Straße ist lang",
    "fw": "Ｃｏｍｐａｎｙ report １２３",
    "kana": "ｶﾀｶﾅ の 本",
    "ar": "هذا كِتَاب جميل",
    "he": "שָׁלוֹם עולם",
    "fr": "un café noir",
}


def _open(kind: str, root: Path) -> VectorStore:
    if kind == "edge":
        return EdgeStore(root / "edge")
    return QdrantClientStore(path=str(root / "local"))


@pytest.fixture(params=["edge", "local"])
def store(request, tmp_path: Path) -> Iterator[VectorStore]:
    s = _open(request.param, tmp_path)
    yield s
    s.close()


def _points() -> list[PointRecord]:
    rng = np.random.default_rng(0)
    return [PointRecord(point_id(d, 0), {"m": rng.normal(size=DIM).astype(np.float32)},
                        {"doc_id": d, "chunk_no": 0, "text": t}) for d, t in TEXTS.items()]


@pytest.mark.parametrize(("query", "doc"), [
    ("istanbul", "tr"), ("strasse", "de"), ("company", "fw"), ("123", "fw"), ("カタカナ", "kana"),
    ("كتاب", "ar"), ("שלום", "he"), ("ＳＴＲＡＳＳＥ", "de"), ("İSTANBUL", "tr"),
])
def test_the_store_finds_folded_words(store: VectorStore, query: str, doc: str) -> None:
    store.ensure_collection("c", {"m": DIM}, lexical=True)
    store.upsert("c", _points())
    assert store.lexical_version("c") == "qdrant-bm25-en-pairs-v2"
    assert [h.payload["doc_id"] for h in store.search_lexical("c", query, limit=5)] == [doc]
    assert store.search_lexical("c", "cafe", limit=5) == []  # accents kept
    assert [h.payload["doc_id"] for h in store.search_lexical("c", "café", limit=5)] == ["fr"]


def test_a_collection_of_the_older_pairs_definition_reads_as_it_did(tmp_path: Path,
                                                                    monkeypatch) -> None:
    """Written under ``en-pairs-v1`` (vector ``bm25p``), its queries are read its way ("istanbul"
    finds no "İstanbul") until the next index run rewrites it (the edge store, from its texts)."""
    older = "qdrant-bm25-en-pairs-v1"
    store = EdgeStore(tmp_path / "edge")
    try:
        with monkeypatch.context() as m:
            m.setattr(lex, "LEXICAL_VERSION", older)
            m.setattr(lex, "LEXICAL_VECTOR", lex.vector_name(older))
            store.ensure_collection("c", {"m": DIM}, lexical=True)
            store.upsert("c", _points())
        assert store.lexical_version("c") == older
        assert store.search_lexical("c", "istanbul", limit=5) == []
        assert [h.payload["doc_id"] for h in store.search_lexical("c", "İstanbul", limit=5)] == ["tr"]
        assert "qdrant-bm25-en-pairs-v2" in (store.older_lexical("c") or "")
        store.ensure_collection("c", {"m": DIM}, lexical=True)  # what `facet index` runs
        assert store.lexical_version("c") == lex.LEXICAL_VERSION
        assert [h.payload["doc_id"] for h in store.search_lexical("c", "istanbul", limit=5)] == ["tr"]
        assert store.older_lexical("c") is None
    finally:
        store.close()
