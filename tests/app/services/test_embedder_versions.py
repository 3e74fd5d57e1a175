"""A collection remembers which version of each embedder wrote it (``Embedder.identity``).

A retrained checkpoint keeps its registered name, and so does a changed served option
(``max_length``); their vectors are not comparable with the old ones. Indexing more into such
a collection, or searching it, must refuse and say why, rather than mix two models' vectors.
Here a "new version" is MiniLM itself served at another ``max_length``, or reading its
instruction through another prompt format (same name, same backbone, different identity): a real
model, no mock. A different ``max_length`` alone only matters for documents: searching with it
is allowed, indexing is not.
"""

from __future__ import annotations

import json

import pytest

from app.errors import ConflictError
from app.services.context import EmbedderCache, ServiceContext
from app.services.indexing import IndexService
from app.services.search import SearchRequest, SearchService
from app.settings import FacetSettings
from embedders.baselines import EncoderMeanEmbedder
from embedders.contract import PromptConfig
from indexer import metadata as md


@pytest.fixture
def records(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps({"_id": f"r{i}", "text": t}) + "\n" for i, t in enumerate(
        ["My card was declined at the supermarket", "How do I top up with a bank transfer?",
         "The exchange rate you applied was wrong"])))
    return path


def context(tmp_path, model) -> ServiceContext:
    cache = EmbedderCache("cpu")
    cache.put("minilm", model)
    return ServiceContext(FacetSettings(data_dir=tmp_path / "data", chunk_tokens=64, chunk_overlap=8),
                          embedders=cache)


def test_a_changed_embedder_cannot_add_to_or_search_a_collection_it_did_not_write(tmp_path, records, minilm):
    first = context(tmp_path, minilm)
    try:
        IndexService(first).index(records, "support")
        assert SearchService(first).search(SearchRequest("card", "support")).results
    finally:
        first.close()

    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps({"_id": "r9", "text": "Please block my lost card"}) + "\n")
    budget = EncoderMeanEmbedder(name="minilm", max_length=32, backbone=minilm.backbone)
    assert budget.name == minilm.name and budget.identity != minilm.identity
    later = context(tmp_path, budget)
    try:
        with pytest.raises(ConflictError, match=r"different version of .*max_length.*facet delete support"):
            IndexService(later).index(more, "support")
        # A short query reads the same at either budget: the search goes ahead.
        assert SearchService(later).search(SearchRequest("card", "support")).results
    finally:
        later.close()

    prompt = EncoderMeanEmbedder(name="minilm", backbone=minilm.backbone,
                                 prompts=PromptConfig(instruction_format="Task: {instruction} | "))
    assert prompt.name == minilm.name and prompt.identity != minilm.identity
    later = context(tmp_path, prompt)
    try:
        with pytest.raises(ConflictError, match=r"different version of .*prompts"):
            IndexService(later).index(more, "support")
        with pytest.raises(ConflictError, match=r"indexed by a different version of 'minilm' \(prompts"):
            SearchService(later).search(SearchRequest("card", "support"))
        with later.sessions() as session:  # nothing was written: no new job, no document
            coll = md.get_collection(session, "support")
            assert coll is not None and len(md.list_jobs(session, coll.id)) == 1
            assert md.count_documents(session, coll.id) == 3
    finally:
        later.close()

    # The version that wrote it still indexes and searches.
    again = context(tmp_path, minilm)
    try:
        IndexService(again).index(more, "support")
        assert SearchService(again).search(SearchRequest("lost card", "support")).results[0].doc_id == "r9"
    finally:
        again.close()
