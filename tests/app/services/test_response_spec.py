"""Search and cluster responses name the embedder spec that ran, options included: they named
the collection's vector or the model ("minilm"), so a query read at
``minilm[instruction_weight=1]`` (the collection's recorded spec, or one asked for) looked like
plain minilm on every edge, and a reranker's options were dropped too. ``embedder`` and
``reranker`` keep their meaning (the vector, the model); ``embedder_spec`` and
``reranker_spec`` say what ran. Real minilm over a real store; nothing is mocked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.services.clustering import ClusterRequest, ClusterService
from app.services.indexing import IndexOptions, IndexService
from app.services.search import SearchRequest, SearchService
from indexer.lexical import LEXICAL_LABEL
from tests.app.cli_runner import invoke_cli

SPEC = "minilm[instruction_weight=1]"
OTHER = "minilm[instruction_weight=0.5]"
TEXTS = [
    "the card I ordered never arrived in the post",
    "my card payment was declined at the shop",
    "how do I top up my account with apple pay",
    "my transfer to a friend has not shown up yet",
]
QUERY, INSTRUCTION = "my new card has not come", "Find messages with the same customer intent"


@pytest.fixture
def indexed(make_ctx, tmp_path: Path):
    """A context whose collection ``c1`` was indexed with ``SPEC``."""
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps({"_id": f"r{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    ctx = make_ctx()
    IndexService(ctx).index(path, "c1", IndexOptions(embedder=SPEC))
    return ctx


def test_search_names_the_spec_that_encoded_the_query(indexed) -> None:
    """The collection's recorded spec (naming no embedder, or its vector), a spec asked for, and
    none for a word search; ``embedder`` stays the vector's name."""
    service = SearchService(indexed)
    for asked in (None, "minilm", SPEC):
        response = service.search(SearchRequest(QUERY, "c1", instruction=INSTRUCTION, embedder=asked))
        assert (response.embedder, response.embedder_spec) == ("minilm", SPEC), asked
        assert response.to_dict()["embedder_spec"] == SPEC
    other = service.search(SearchRequest(QUERY, "c1", instruction=INSTRUCTION, embedder=OTHER))
    assert (other.embedder, other.embedder_spec) == ("minilm", OTHER)
    hybrid = service.search(SearchRequest(QUERY, "c1", mode="hybrid"))
    assert hybrid.embedder_spec == SPEC
    lexical = service.search(SearchRequest(QUERY, "c1", mode="lexical"))
    assert (lexical.embedder, lexical.embedder_spec) == (LEXICAL_LABEL, None)
    assert lexical.reranker_spec is None


def test_search_names_the_rerankers_spec(indexed) -> None:
    """``reranker`` is the model ("minilm"), ``reranker_spec`` the spec that reranked."""
    service = SearchService(indexed)
    response = service.search(SearchRequest(QUERY, "c1", instruction=INSTRUCTION, rerank=OTHER, top_k=2))
    assert (response.reranker, response.reranker_spec) == ("minilm", OTHER)
    assert response.results and response.results[0].rerank_score is not None
    lexical = service.search(SearchRequest(QUERY, "c1", rerank=SPEC, mode="lexical"))
    assert (lexical.embedder_spec, lexical.reranker_spec) == (None, SPEC)


def test_cluster_names_the_spec_that_encoded_the_texts(make_ctx) -> None:
    ctx = make_ctx()
    response = ClusterService(ctx).cluster(ClusterRequest(INSTRUCTION, texts=TEXTS, k=2, embedder=SPEC))
    assert (response.embedder, response.embedder_spec) == ("minilm", SPEC)
    assert response.to_dict()["embedder_spec"] == SPEC


def test_facet_search_shows_the_spec(tmp_path: Path) -> None:
    """``facet search --json`` said ``"embedder": "minilm"`` of a query read at ``SPEC``, and
    the human header ``c1 · minilm``."""
    src = tmp_path / "docs"
    src.mkdir()
    for i, text in enumerate(TEXTS[:2]):
        (src / f"{i}.txt").write_text(text)
    env = {"FACET_DATA_DIR": str(tmp_path / "data")}
    indexed = invoke_cli("index", str(src), "-c", "c1", "-e", SPEC, env=env)
    assert indexed.returncode == 0, indexed.stderr
    found = invoke_cli("search", "cards", "-c", "c1", "--json", env=env)
    assert found.returncode == 0, found.stderr
    body = json.loads(found.stdout)
    assert (body["embedder"], body["embedder_spec"]) == ("minilm", SPEC)
    shown = invoke_cli("search", "cards", "-c", "c1", "-e", OTHER, "--rerank", SPEC, "-m", "dense", env=env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"c1 · {OTHER} · reranked by {SPEC}\n"), shown.stdout


def test_facet_cluster_shows_the_spec(tmp_path: Path) -> None:
    """``facet cluster`` named no embedder, and its ``--out`` JSON only the model."""
    texts, out = tmp_path / "texts.txt", tmp_path / "clusters.json"
    texts.write_text("\n".join(TEXTS))
    result = invoke_cli(
        "cluster",
        str(texts),
        "-i",
        INSTRUCTION,
        "-e",
        SPEC,
        "--explain",
        "",
        "--k",
        "2",
        "-o",
        str(out),
        env={"FACET_DATA_DIR": str(tmp_path / "data")},
    )
    assert result.returncode == 0, result.stderr
    assert f"), embedder {SPEC}\n" in result.stderr
    assert json.loads(out.read_text())["embedder_spec"] == SPEC
