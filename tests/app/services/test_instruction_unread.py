"""An embedder registered as reading no instruction (``register_embedder(...,
reads_instructions=False)``, a hashing plugin): a search said ``instruction_read: true`` with no
note, and the instruction's only effect was to switch ``auto`` from hybrid to dense, changing
the ranking for a reason unrelated to it. Real SQLite, the edge store, minilm as a reranker.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator

import numpy as np
import pytest

from app.services.indexing import IndexOptions, IndexService
from app.services.search import SearchRequest, SearchService
from embedders.registry import reads_instructions, register_embedder, unregister_embedder


class WordHash:
    """Bag of hashed words: the same vector under any instruction."""

    dim = 64

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def identity(self) -> str:
        return json.dumps({"method": "word-hash", "name": self.name})

    def encode(self, texts, *, role="document", instruction=None, batch_size=32):
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i, zlib.crc32(word.encode()) % self.dim] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


@pytest.fixture
def word_hash() -> Iterator[str]:
    register_embedder("word-hash", lambda device=None, **kw: WordHash("word-hash"), "hashed words",
                      reads_instructions=False)
    register_embedder("word-hash-reads", lambda device=None, **kw: WordHash("word-hash-reads"),
                      "hashed words, said to read instructions")
    yield "word-hash"
    unregister_embedder("word-hash")
    unregister_embedder("word-hash-reads")


def test_an_instruction_its_embedder_does_not_read_is_said_and_leaves_auto_hybrid(
        make_ctx, tmp_path, word_hash) -> None:
    assert reads_instructions(word_hash) is False
    assert reads_instructions("word-hash-reads") and reads_instructions("minilm")
    src = tmp_path / "notes.jsonl"
    src.write_text("".join(json.dumps({"id": f"n{i}", "text": text}) + "\n" for i, text in enumerate(
        ["my card was declined", "refund for a top-up", "exchange rate on euros"])))
    ctx = make_ctx()
    IndexService(ctx).index(src, "notes", IndexOptions(embedder=word_hash))
    search = SearchService(ctx)
    plain = search.search(SearchRequest("card declined", "notes"))
    instructed = search.search(SearchRequest("card declined", "notes", instruction="Find refunds"))
    assert (plain.mode, instructed.mode) == ("hybrid", "hybrid")
    assert [r.doc_id for r in instructed.results] == [r.doc_id for r in plain.results]
    assert instructed.instruction_read is False
    assert instructed.note == ("the instruction was not read: word-hash reads no instruction (its "
                               "vectors are the same under any)")
    # Asked for dense: still not read, and said so.
    dense = search.search(SearchRequest("card declined", "notes", instruction="Find refunds", mode="dense"))
    assert dense.instruction_read is False and "word-hash reads no instruction" in (dense.note or "")
    # A reranker that reads it: read.
    reranked = search.search(SearchRequest("card declined", "notes", instruction="Find refunds",
                                           mode="dense", rerank="minilm"))
    assert reranked.instruction_read is True
    # (minilm reads it at its weak default blend: said so, not that it was unread)
    assert reranked.note is not None and reranked.note.startswith("the instruction barely steers: minilm")
    # No instruction: nothing said.
    assert plain.instruction_read is False and plain.note is None
    # The edges give that reason, not the word search's (the search was hybrid).
    from ui.render import search_summary

    summary = search_summary(instructed, 5.0)
    assert "BM25 does not read" not in summary and "the instruction was not read: see the note" in summary
    from ui.render import compare_html

    other = search.search(SearchRequest("card declined", "notes", instruction="Find the fees"))
    assert compare_html(instructed, other).count("word-hash reads no instruction") == 1
    lexical = search.search(SearchRequest("card declined", "notes", instruction="Find refunds", mode="lexical"))
    assert "by the words alone (BM25 does not read the instruction)" in search_summary(lexical, 5.0)


def test_the_cli_and_langchain_give_the_embedders_reason(make_ctx, tmp_path, word_hash, caplog) -> None:
    import logging

    from app.core import Facet
    from app.integrations.langchain import FacetRetriever
    from tests.app.cli_runner import invoke_cli

    src = tmp_path / "notes.txt"
    src.write_text("my card was declined")
    ctx = make_ctx()
    IndexService(ctx).index(src, "notes", IndexOptions(embedder=word_hash))
    ctx.close()
    out = invoke_cli("search", "card", "-c", "notes", "-i", "Find refunds",
                     env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert out.returncode == 0, out.stderr
    assert "instruction: Find refunds (not read: see the note)" in out.stdout
    assert "note: the instruction was not read: word-hash reads no instruction" in out.stdout
    facet = Facet(ctx.settings, embedders=ctx.embedders)
    try:
        with caplog.at_level(logging.WARNING, logger="app.integrations.langchain"):
            docs = FacetRetriever(collection="notes", instruction="Find refunds", facet=facet).invoke("card")
    finally:
        facet.close()
    assert docs and docs[0].metadata["instruction_read"] is False
    said = [r.getMessage() for r in caplog.records if r.name == "app.integrations.langchain"]
    assert len(said) == 1 and "word-hash reads no instruction" in said[0]
    assert "lexical search matches the words only" not in said[0]


def test_an_embedder_that_did_not_say_is_taken_to_read_instructions(make_ctx, tmp_path, word_hash) -> None:
    src = tmp_path / "notes.txt"
    src.write_text("my card was declined")
    ctx = make_ctx()
    IndexService(ctx).index(src, "notes", IndexOptions(embedder="word-hash-reads"))
    response = SearchService(ctx).search(SearchRequest("card", "notes", instruction="Find refunds"))
    assert (response.mode, response.instruction_read, response.note) == ("dense", True, None)


def test_a_clustering_by_an_embedder_that_reads_no_instruction_says_so(make_ctx, word_hash) -> None:
    from app.services.clustering import ClusterRequest, ClusterService

    texts = ["card declined", "card blocked", "refund please", "refund late"]
    result = ClusterService(make_ctx()).cluster(ClusterRequest("by topic", texts=texts, k=2,
                                                               embedder=word_hash))
    assert result.note == ("the instruction was not read: word-hash reads no instruction, so the "
                           "texts are grouped as they read bare")
    minilm = ClusterService(make_ctx()).cluster(ClusterRequest("by topic", texts=texts, k=2,
                                                               embedder="minilm[instruction_weight=1]"))
    assert minilm.note is None
