"""BM25 term vectors for lexical and hybrid search.

Each chunk's text is stored beside its dense vectors as a sparse vector of BM25 term
weights (the saturated, length-normalised term frequencies); the vector store multiplies
them by each term's IDF over the collection at query time (Qdrant's ``idf`` modifier), so
the scores are BM25's. Queries are the set of their terms, weight 1.

The tokenizer, stemmer and stopwords are Qdrant's own BM25 model (``qdrant_edge.Bm25``,
English stemmer and stopwords), computed in this process for every backend, so a collection
is written and searched with one definition of a term whichever Qdrant holds it. A version
names each definition, and each version has its own sparse vector name, so a collection's
vector says which definition wrote it (the edge store also records it beside the shard):
its queries are read the same way, and a collection written under an older definition keeps
working. New collections get ``LEXICAL_VERSION``:

- ``qdrant-bm25-en-v1`` (vector ``bm25``, until the sixth session of 2026-11-28): Qdrant's word
  tokenizer, which splits at spaces and punctuation only, so a run of Chinese, Japanese or Thai
  text between punctuation was one term and a query word inside it matched nothing.
- ``qdrant-bm25-multilingual-v1`` (vector ``bm25m``, a few hours of that session, never released):
  Qdrant's multilingual tokenizer, which segments those scripts by dictionary but drops every
  all-digit token ("404", "2020", "3.11": numbers were no longer found).
- ``qdrant-bm25-en-pairs-v1`` (vector ``bm25p``, until ``en-pairs-v2``): the word tokenizer, numbers kept, on text whose
  Chinese, Japanese, Korean and Thai runs are rewritten as their overlapping character pairs
  (``embedders.scripts.pairs``: "大熊猫" -> "大熊 熊猫", as Lucene's CJK bigram filter does) and,
  in documents, its single characters (猫, 책), so a word inside a run is found without a
  dictionary ("熊猫" in "大熊猫") and a one-character query too; English reads exactly as under
  ``en-v1``.
- ``qdrant-bm25-en-pairs-v2`` (vector ``bm25f``): ``en-pairs-v1`` on text folded first, documents
  and queries alike (``embedders.scripts.fold``): Unicode's compatibility forms (NFKC: full-width
  Latin and digits, "Ｃｏｍｐａｎｙ" is "company"; half-width katakana, "ｶﾀｶﾅ" is "カタカナ"; ligatures,
  "ﬁ" is "fi"), Turkish "İ" as "I" (the tokenizer's lower-casing gave "i" plus a combining dot:
  "istanbul" did not find "İstanbul"), "ß" as "ss" ("strasse" finds "Straße"), and Arabic
  harakat and tatweel and Hebrew niqqud removed (كِتَاب and كتـــاب are كتاب, שָׁלוֹם is שלום).
  Latin, Greek and Cyrillic accents are kept: "cafe" does not find "café". The definitions
  before it read text in composed form only (NFC).
"""

from __future__ import annotations

import functools
import unicodedata
from typing import Any

from embedders import scripts

LEXICAL_VERSION = "qdrant-bm25-en-pairs-v2"  # the definition new collections are written with
# version -> (the sparse vector's name in the store, Qdrant's tokenizer, unspaced runs as pairs,
# text folded first: ``embedders.scripts.fold``; else composed only, NFC)
DEFINITIONS: dict[str, tuple[str, str, bool, bool]] = {
    "qdrant-bm25-en-v1": ("bm25", "Word", False, False),
    "qdrant-bm25-multilingual-v1": ("bm25m", "Multilingual", False, False),
    "qdrant-bm25-en-pairs-v1": ("bm25p", "Word", True, False),
    LEXICAL_VERSION: ("bm25f", "Word", True, True),
}
# What a word search under each older definition misses that today's finds (the note of a
# collection it wrote: ``app.services.search``).
_OTHER_FORMS = ("words written in another Unicode form than the query's, such as full-width Latin "
                "or digits, half-width katakana, ligatures, Turkish İ, ß for ss, Arabic or Hebrew "
                "vowel marks")
MISSES: dict[str, str] = {
    "qdrant-bm25-en-v1": f"words inside Chinese, Japanese, Korean or Thai text, and {_OTHER_FORMS}",
    "qdrant-bm25-multilingual-v1": "words inside Chinese, Japanese, Korean or Thai text, numbers, "
                                   f"and {_OTHER_FORMS}",
    "qdrant-bm25-en-pairs-v1": _OTHER_FORMS,
}
LEXICAL_VECTOR = DEFINITIONS[LEXICAL_VERSION][0]  # a new collection's sparse vector
LEXICAL_VECTORS = frozenset(d[0] for d in DEFINITIONS.values())  # names no embedder may take
LEXICAL_LABEL = "bm25"  # how results name lexical search (the embedder field of a response)
# BM25's k1 and b (Robertson's usual values) and the expected document length in terms (a fixed
# constant, not the collection's average: each point's weights are written once, as it is
# upserted). A chunk holds up to 200 word-pieces by default, fewer BM25 terms once stopwords
# go, so short chunks barely differ in length; a smaller constant was no better on SciFact dev
# (BM25 alone, whole abstracts, `scripts/lexical_definitions.py --avg-len 256,128,64,32`, the
# fifth session of 2026-12-06): nDCG@10 74.56 at 256, 74.27 at 128, 74.66 at 64, 72.52 at 32.
BM25_K1, BM25_B, BM25_AVG_LEN = 1.2, 0.75, 256.0


def vector_name(version: str) -> str:
    """The sparse vector name of definition ``version``.

    Raises:
        KeyError: an unknown version.
    """
    return DEFINITIONS[version][0]


def version_of_vector(name: str) -> str | None:
    """The definition whose sparse vector is called ``name``; None for none."""
    return next((v for v, d in DEFINITIONS.items() if d[0] == name), None)


@functools.cache
def _model(version: str = LEXICAL_VERSION) -> Any:
    import qdrant_edge

    tokenizer = getattr(qdrant_edge.TokenizerType, DEFINITIONS[version][1])
    return qdrant_edge.Bm25(qdrant_edge.Bm25Config(k=BM25_K1, b=BM25_B, avg_len=BM25_AVG_LEN,
                                                   language="english", tokenizer=tokenizer))


def _pairs_of_runs(text: str, *, document: bool) -> str:
    """``text`` with each run of an unspaced script replaced, spaced, by its character pairs and,
    in a document, its single characters too (Lucene's unigrams beside the bigrams: a one-
    character word such as 猫 or 책 is a term; a query of one character is that character)."""
    def rewrite(m: Any) -> str:
        run = m.group()
        terms = scripts.pairs(run) + scripts.singles(run) if document else (
            scripts.pairs(run) or scripts.singles(run))
        return " " + " ".join(terms) + " "

    return scripts.UNSPACED_RUN.sub(rewrite, text)


def folds(version: str) -> bool:
    """Whether definition ``version`` reads text folded (``embedders.scripts.fold``), as search
    highlights then compare words; else in composed form only (NFC)."""
    return DEFINITIONS[version][3]


def _prepared(text: str | None, version: str, *, document: bool) -> str:
    """What definition ``version``'s tokenizer reads of ``text``."""
    text = scripts.fold(text) if folds(version) else _nfc(text)
    return _pairs_of_runs(text, document=document) if DEFINITIONS[version][2] else text


def _nfc(text: str | None) -> str:
    """``text`` in Unicode's composed form (NFC), so that "café" typed with one code point for
    "é" and with "e" plus a combining accent are one term (they were two: a query found only
    the documents written the same way, where dense search found both). Text that is NFC
    already, nearly all text, is unchanged, so the terms of collections written before this
    (``LEXICAL_VERSION`` unchanged) still match. The definitions before ``en-pairs-v2`` read
    text so; it folds more (``scripts.fold``)."""
    return unicodedata.normalize("NFC", text or "")


def document_terms(text: str, version: str = LEXICAL_VERSION) -> tuple[list[int], list[float]]:
    """The BM25 term weights of a stored text under definition ``version``: (term ids,
    weights); empty for no terms."""
    vec = _model(version).embed_document(_prepared(text, version, document=True))
    return list(vec.indices), [float(v) for v in vec.values]


def query_terms(text: str, version: str = LEXICAL_VERSION) -> tuple[list[int], list[float]]:
    """A query's terms under definition ``version``, weight 1 each (the store applies the IDF)."""
    vec = _model(version).embed_query(_prepared(text, version, document=False))
    return list(vec.indices), [float(v) for v in vec.values]

