"""BM25 term vectors for lexical and hybrid search.

Each chunk's text is stored beside its dense vectors as a sparse vector of BM25 term
weights (the saturated, length-normalised term frequencies); the vector store multiplies
them by each term's IDF over the collection at query time (Qdrant's ``idf`` modifier), so
the scores are BM25's. Queries are the set of their terms, weight 1.

The tokenizer, stemmer and stopwords are Qdrant's own BM25 model (``qdrant_edge.Bm25``,
English), computed in this process for every backend, so a collection is written and
searched with one definition of a term whichever Qdrant holds it. ``LEXICAL_VERSION`` names
that definition: a collection records it, and a search refuses a collection written under
another one (its stored terms would not match the query's).
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Sequence
from typing import Any

LEXICAL_VECTOR = "bm25"  # the sparse vector's name in the store (not an embedder name)
LEXICAL_VERSION = "qdrant-bm25-en-v1"
# BM25's k1 and b (Robertson's usual values) and the expected document length in terms:
# Facet's chunks hold up to 256 tokens by default.
BM25_K1, BM25_B, BM25_AVG_LEN = 1.2, 0.75, 256.0


@functools.cache
def _model() -> Any:
    import qdrant_edge

    return qdrant_edge.Bm25(qdrant_edge.Bm25Config(k=BM25_K1, b=BM25_B, avg_len=BM25_AVG_LEN,
                                                   language="english"))


def _nfc(text: str | None) -> str:
    """``text`` in Unicode's composed form (NFC), so that "café" typed with one code point for
    "é" and with "e" plus a combining accent are one term (they were two: a query found only
    the documents written the same way, where dense search found both). Text that is NFC
    already, nearly all text, is unchanged, so the terms of collections written before this
    (``LEXICAL_VERSION`` unchanged) still match."""
    return unicodedata.normalize("NFC", text or "")


def document_terms(text: str) -> tuple[list[int], list[float]]:
    """The BM25 term weights of a stored text: (term ids, weights); empty for no terms."""
    vec = _model().embed_document(_nfc(text))
    return list(vec.indices), [float(v) for v in vec.values]


def query_terms(text: str) -> tuple[list[int], list[float]]:
    """A query's terms, weight 1 each (the store applies the IDF)."""
    vec = _model().embed_query(_nfc(text))
    return list(vec.indices), [float(v) for v in vec.values]


def documents_terms(texts: Sequence[str]) -> list[tuple[list[int], list[float]]]:
    return [document_terms(t) for t in texts]
