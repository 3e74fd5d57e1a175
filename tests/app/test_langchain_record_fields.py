"""A record's own fields named as Facet's metadata keys (``score``, ``source``, ``mode``,
``collection``, ``doc_id``, ``note``, ``record``...) reach LangChain under ``metadata["record"]``:
``_document`` overwrote them with Facet's and they were lost, while the CLI, the API and the facade
kept them. In process and over HTTP (a real uvicorn serving the API on a local port), both of
which build their documents in ``_document``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from app.core import Facet
from app.integrations.langchain import FacetRetriever, to_document
from app.services.search import SearchRequest

from .served import records_served

COLLECTION = "meta"
# The record's own fields that Facet's keys name, as the user's repro indexed them (and more).
CLASHING = {"score": 5, "source": "web", "mode": "urgent", "collection": "support",
            "note": "vip", "doc_id": "mine", "rerank_score": 0.5, "record": "r-7"}
RECORDS = [
    {"id": "m1", "text": "Refund my card payment please", "tier": "gold", **CLASHING},
    {"id": "m2", "text": "I want a refund for the card charge", "intent": "refund"},
    {"id": "m3", "text": "Refund the payment to my card", "note": "call back"},
]


@pytest.fixture(scope="module")
def served(minilm, tmp_path_factory) -> Iterator[tuple[Facet, str]]:
    """(a facade over a collection of the records, the URL of the API serving it)."""
    with records_served(minilm, tmp_path_factory.mktemp("lcmeta"), RECORDS, COLLECTION) as both:
        yield both


def _by_id(docs: list[Any]) -> dict[str, dict[str, Any]]:
    return {d.metadata["doc_id"]: d.metadata for d in docs}


@pytest.mark.parametrize("where", ["in process", "http"])
def test_the_records_own_fields_are_kept_under_record(served, where) -> None:
    """The repro: the record's score 5, source "web", mode "urgent", collection "support" (and
    its doc_id, note, rerank_score and own "record") were gone from the metadata."""
    facet, url = served
    how: dict[str, Any] = {"facet": facet} if where == "in process" else {
        "base_url": url, "api_key": ""}
    docs = FacetRetriever(collection=COLLECTION, k=3, **how).invoke("refund")
    direct = {r.doc_id: r for r in facet.search(SearchRequest("refund", COLLECTION,
                                                              top_k=3)).results}
    meta = _by_id(docs)
    assert set(meta) == {"m1", "m2", "m3"}
    m1 = meta["m1"]
    # Every field of the record is there: the clashing ones under "record" (its own "record"
    # among them), the others where they were...
    assert m1["record"] == CLASHING
    assert m1["tier"] == "gold"
    # ...and Facet's keys keep their documented meaning.
    assert m1["score"] == pytest.approx(direct["m1"].score, abs=1e-6) and m1["score"] != 5
    assert m1["source"] == direct["m1"].source and m1["source"].endswith("x.jsonl")
    assert (m1["mode"], m1["collection"], m1["doc_id"]) == ("hybrid", COLLECTION, "m1")
    assert m1["rerank_score"] is None and "note" not in m1  # the search has no note
    # No clash, no "record"; a record's own "note" is under "record" even where the search set
    # none: metadata["note"] is only ever the search's.
    assert "record" not in meta["m2"] and meta["m2"]["intent"] == "refund"
    assert "note" not in meta["m3"] and meta["m3"]["record"] == {"note": "call back"}


def test_the_searchs_note_and_the_records_note_are_both_kept(served) -> None:
    """A search with a note (term vectors of an older definition) put it over the record's own
    ``note``, which was lost."""
    facet, _ = served
    response = facet.search(SearchRequest("refund", COLLECTION, top_k=3))
    m1 = next(r for r in response.results if r.doc_id == "m1")
    doc = to_document(m1, COLLECTION, response.mode, "older term vectors")
    assert doc.metadata["note"] == "older term vectors"
    assert doc.metadata["record"]["note"] == "vip" and doc.metadata["record"] == CLASHING
