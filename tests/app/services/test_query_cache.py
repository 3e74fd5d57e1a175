"""A search keeps its query's vector (``SearchService.query_vectors``): the same query searched
again (another page, filter or top_k in the UI, a RAG pipeline asking again) was encoded again,
150 of a 155 ms search with causal2vec on one CPU thread (`facet bench --parts search`). Real minilm
through the serving facade, whose model thread counts what it encodes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core import Facet
from app.encoding import EmbedderCache
from app.errors import ConflictError
from app.services.search import SearchRequest, SearchService
from app.settings import FacetSettings

TEXTS = [
    "My card has not arrived yet",
    "The exchange rate you used is wrong",
    "I forgot my PIN",
    "How do I reset my PIN code?",
    "Currency conversion rate seems bad",
]


def _open(minilm, tmp_path: Path, **fields) -> Facet:
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facet = Facet.for_serving(FacetSettings(data_dir=tmp_path / "data", **fields), embedders=cache)
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    facet.index(source, "bank")
    return facet


@pytest.fixture
def facet(minilm, tmp_path: Path) -> Iterator[Facet]:
    facet = _open(minilm, tmp_path)
    try:
        yield facet
    finally:
        facet.close()


@pytest.fixture
def blended(facet, monkeypatch) -> list[int]:
    """How many texts each ``encode_from_plain`` of the facade's encoder read (a reranker that
    blends the collection's stored vectors reads only the instructed half, on the model thread
    too, not counted by its ``stats``): the real method, counted."""
    counts: list[int] = []
    from_plain = facet.encoder.encode_from_plain

    def counted(plain, texts, **kwargs):
        counts.append(len(texts))
        return from_plain(plain, texts, **kwargs)

    monkeypatch.setattr(facet.encoder, "encode_from_plain", counted)
    return counts


def _encoded(facet: Facet) -> int:
    """Texts the facade's model thread has encoded so far."""
    return int(facet.encoder.stats.texts)  # type: ignore[attr-defined]


def _ranked(response) -> list[tuple[str, float]]:
    return [(r.doc_id, r.score) for r in response.results]


def test_the_same_query_is_encoded_once_and_ranks_alike(facet) -> None:
    indexed = _encoded(facet)
    first = facet.search(SearchRequest("lost my pin", "bank", mode="dense"))
    assert _encoded(facet) == indexed + 1
    # Another top_k, a filter, lexical-free dense again: the query's vector is kept.
    again = facet.search(SearchRequest("lost my pin", "bank", mode="dense"))
    fewer = facet.search(SearchRequest("lost my pin", "bank", mode="dense", top_k=2))
    assert _encoded(facet) == indexed + 1
    assert _ranked(again) == _ranked(first) and _ranked(fewer) == _ranked(first)[:2]
    assert again.timings_ms["encode_query"] < 50
    # What was kept is what encoding gives: a fresh service encodes it and ranks alike.
    fresh = SearchService(facet.context).search(
        SearchRequest("lost my pin", "bank", mode="dense"))
    assert [i for i, _ in _ranked(fresh)] == [i for i, _ in _ranked(first)]
    assert [s for _, s in _ranked(fresh)] == pytest.approx([s for _, s in _ranked(first)], abs=1e-5)


def test_another_query_instruction_or_embedder_encodes_again(facet) -> None:
    indexed = _encoded(facet)
    asks = [
        SearchRequest("lost my pin", "bank", mode="dense"),
        SearchRequest("lost my PIN", "bank", mode="dense"),  # case matters to the model
        SearchRequest("lost my pin", "bank", "What does the customer want?", mode="dense"),
        SearchRequest("lost my pin", "bank", "What is the tone?", mode="dense"),
    ]
    for i, request in enumerate(asks, 1):
        facet.search(request)
        assert _encoded(facet) == indexed + i, request
    # The instruction as read: stripped, so the same one again encodes nothing.
    facet.search(SearchRequest("lost my pin", "bank", "  What is the tone? ", mode="dense"))
    assert _encoded(facet) == indexed + len(asks)
    # Kept as digests: a long query or instruction does not make its key long.
    keys = list(facet.searching.query_vectors._entries)
    assert len(keys) == len(asks) and all(len(repr(key)) < 600 for key in keys)


def test_a_reranker_keeps_its_query_and_the_chunks_it_read(facet, blended) -> None:
    """Reranking encoded the query and every candidate chunk under the instruction again on
    each search: 397 of 560 ms at depth 30 with minilm (the bench's repeated-query row). This
    reranker blends the collection's stored vectors with the chunks read under the instruction
    (``blended``): counted with what is encoded."""

    def read() -> int:
        return _encoded(facet) + sum(blended)

    indexed = read()
    ask = "What does the customer want?"
    rerank = "minilm[instruction_weight=1]"
    first = facet.search(SearchRequest("lost my pin", "bank", ask, mode="dense", rerank=rerank,
                                       top_k=1, rerank_depth=2))
    # The query for each model, and the reranker's two chunks.
    assert read() == indexed + 4 and blended == [2] and first.reranker is not None
    again = facet.search(SearchRequest("lost my pin", "bank", ask, mode="dense", rerank=rerank,
                                       top_k=1, rerank_depth=2))
    assert read() == indexed + 4 and _ranked(again) == _ranked(first)
    # Deeper: only the chunks it had not read are read; the order is what reading all gives.
    deeper = facet.search(SearchRequest("lost my pin", "bank", ask, mode="dense", rerank=rerank,
                                        top_k=5, rerank_depth=5))
    assert read() == indexed + 4 + 3 and blended == [2, 3]
    fresh = SearchService(facet.context)
    fresh.query_vectors.max_bytes = 0
    alone = fresh.search(SearchRequest("lost my pin", "bank", ask, mode="dense", rerank=rerank,
                                       top_k=5, rerank_depth=5))
    assert blended == [2, 3, 5]
    assert [r.doc_id for r in alone.results] == [r.doc_id for r in deeper.results]
    assert [r.score for r in alone.results] == pytest.approx([r.score for r in deeper.results], abs=1e-5)
    # Without an instruction the stored vectors are read as they are: nothing encoded, none kept.
    kept = len(facet.searching.query_vectors)
    facet.search(SearchRequest("lost my pin", "bank", mode="dense", rerank=rerank, top_k=5,
                               rerank_depth=5))
    assert blended == [2, 3, 5] and len(facet.searching.query_vectors) == kept + 2  # its queries


def test_another_model_under_the_same_name_is_not_served_a_stale_vector(facet, minilm_namesake) -> None:
    indexed = _encoded(facet)
    facet.search(SearchRequest("lost my pin", "bank", mode="dense"))
    facet.embedder_cache.put("minilm", minilm_namesake[1])  # other prompts: other vectors
    # Its own vector is encoded (then refused: the collection was written by the other version).
    with pytest.raises(ConflictError, match="different version of 'minilm'"):
        facet.search(SearchRequest("lost my pin", "bank", mode="dense"))
    assert _encoded(facet) == indexed + 2


def test_none_kept_at_zero_megabytes(minilm, tmp_path: Path) -> None:
    facet = _open(minilm, tmp_path, query_cache_mb=0)
    try:
        indexed = _encoded(facet)
        for _ in range(3):
            facet.search(SearchRequest("lost my pin", "bank", mode="dense"))
        assert _encoded(facet) == indexed + 3 and len(facet.searching.query_vectors) == 0
        assert facet.info()["kept_vectors"]["misses"] == 0  # nothing looked up at 0 MB
    finally:
        facet.close()


def test_a_benchmark_encodes_every_query_whatever_the_environment_sets(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The latency benchmarks repeat their queries: a kept vector timed the cache, not the model."""
    from app.services.benchmark import bench_environ, bench_settings

    monkeypatch.setenv("facet_query_cache_mb", "64")
    assert bench_settings(tmp_path).query_cache_mb == 0
    environ = bench_environ(tmp_path)
    assert [(k, v) for k, v in environ.items() if k.upper() == "FACET_QUERY_CACHE_MB"] == [
        ("FACET_QUERY_CACHE_MB", "0")]


def test_each_entry_counts_its_key_too() -> None:
    """Counted by vector bytes alone, 16 MB of 16-wide vectors held 262,144 entries and took
    124 MB (about 470 bytes of key and array header each, beside a vector's 64)."""
    import numpy as np

    from app.encoding import ENTRY_BYTES, RecentVectors

    kept = RecentVectors(2 * (64 + ENTRY_BYTES))
    for i in range(3):
        kept.put(("spec", i), np.zeros(16, dtype=np.float32))
    assert len(kept) == 2 and kept.get(("spec", 0)) is None and kept.get(("spec", 2)) is not None
    kept.put(("spec", 2), np.zeros(16, dtype=np.float32))  # put again: counted once
    kept.put(("spec", 3), np.zeros(16, dtype=np.float32))
    assert len(kept) == 2 and kept.get(("spec", 1)) is None
    small = RecentVectors(64 + ENTRY_BYTES - 1)
    small.put("one", np.zeros(16, dtype=np.float32))  # larger than the whole cache: not kept
    assert len(small) == 0


def test_a_rerank_blend_is_kept_for_its_own_collection(facet, tmp_path, blended) -> None:
    """The reranker's chunks blended from one collection's stored vectors were served for the
    same texts in another, whose stored vectors may differ by float rounding (written on another
    device): its scores then depended on which collection was searched first."""
    source = tmp_path / "same.jsonl"
    source.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    facet.index(source, "bank2")
    for collection in ("bank", "bank2", "bank", "bank2"):
        facet.search(SearchRequest("lost my pin", collection, "What does the customer want?",
                                   mode="dense", rerank="minilm[instruction_weight=1]", top_k=2,
                                   rerank_depth=2))
    assert blended == [2, 2]  # once for each collection, then kept


def test_eval_collection_times_every_mode_encoding_its_queries(facet, tmp_path) -> None:
    """``facet eval --collection --mode dense,hybrid``: the hybrid row's ms/query was a kept
    vector's (the dense row had encoded every query), not a faster mode's."""
    from app.evaluation.collection import evaluate_collection
    from app.evaluation.loaders import load_beir

    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "title": "", "text": t}) + "\n"
                                               for i, t in enumerate(TEXTS)))
    (beir / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "forgot pin"}) + "\n"
                                        + json.dumps({"_id": "q2", "text": "bad rate"}) + "\n")
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\nq2\td1\t1\n")
    before = _encoded(facet)
    report = evaluate_collection(facet, "bank", load_beir(beir), modes=("dense", "hybrid"))
    # One search naming the embedder, then each query in each mode at each of its two depths
    # (nDCG@10, Recall@100), every one encoded as before the service kept vectors.
    assert _encoded(facet) - before == 1 + 2 * 2 * 2, _encoded(facet) - before
    assert [r.mode for r in report.results] == ["dense", "hybrid"]
    # What the service kept before is kept after.
    facet.search(SearchRequest("lost my pin", "bank", mode="dense"))
    counted = _encoded(facet)
    facet.search(SearchRequest("lost my pin", "bank", mode="dense"))
    assert _encoded(facet) == counted


def test_embedded_queries_are_kept_as_a_searchs_are(facet) -> None:
    """``Facet.embed`` of queries (LangChain's ``embed_query``, ``/v1/embeddings`` with
    ``role: query``) encoded a question asked again, where a search of it did not."""
    import asyncio

    import numpy as np

    from app.integrations.langchain import FacetEmbeddings

    indexed = _encoded(facet)
    first = facet.embed(["lost my pin", "bad rate"], role="query")
    assert _encoded(facet) == indexed + 2
    again = facet.embed(["bad rate", "lost my pin", "new one"], role="query")
    assert _encoded(facet) == indexed + 3  # only the new one
    assert np.allclose(again.vectors[:2], first.vectors[::-1], atol=1e-6)
    facet.search(SearchRequest("lost my pin", "bank", mode="dense"))  # a search reuses it too
    assert _encoded(facet) == indexed + 3
    awaited = asyncio.run(facet.aembed(["lost my pin", "new one"], role="query"))
    assert _encoded(facet) == indexed + 3 and np.allclose(awaited.vectors, again.vectors[[1, 2]], atol=1e-6)
    asyncio.run(facet.aembed(["asked async"], role="query"))
    facet.embed(["asked async"], role="query")
    assert _encoded(facet) == indexed + 4
    lc = FacetEmbeddings(facet=facet)
    assert np.allclose(lc.embed_query("lost my pin"), first.vectors[0], atol=1e-6)
    assert _encoded(facet) == indexed + 4
    # Documents are not kept (an index's bulk work would only push queries out).
    for _ in range(2):
        facet.embed(["lost my pin"], role="document")
    assert _encoded(facet) == indexed + 6


def test_an_embed_keeps_few_queries_and_refuses_an_instruction_of_another_type(facet) -> None:
    """More than KEPT_EMBED_MAX_TEXTS queries in one embed are bulk work: not kept (2,048 of
    them pushed out what the searches kept). An instruction of another type was an
    AttributeError from the key's digest, where a document embed refused it."""
    from app.errors import InvalidRequestError
    from app.services.search import KEPT_EMBED_MAX_TEXTS

    many = [f"question number {i}" for i in range(KEPT_EMBED_MAX_TEXTS + 1)]
    facet.embed(many, role="query")
    assert len(facet.searching.query_vectors) == 0
    facet.embed(many[:KEPT_EMBED_MAX_TEXTS], role="query")
    assert len(facet.searching.query_vectors) == KEPT_EMBED_MAX_TEXTS
    for role in ("query", "document"):
        with pytest.raises(InvalidRequestError) as refused:
            facet.embed(["a question"], role=role, instruction=5)  # type: ignore[arg-type]
        assert refused.value.param == "instruction", refused.value


def test_keeping_nothing_holds_in_its_own_thread_only(facet) -> None:
    """It swapped the service's cache for an empty one: every other thread's searches kept
    nothing meanwhile, and two overlapping ones left it empty for good."""
    import threading

    indexed = _encoded(facet)
    inside, release = threading.Event(), threading.Event()

    def measure() -> None:
        with facet.searching.keeping_nothing():
            with facet.searching.keeping_nothing():  # nested: still off
                facet.search(SearchRequest("lost my pin", "bank", mode="dense"))
            facet.search(SearchRequest("lost my pin", "bank", mode="dense"))
            inside.set()
            release.wait(30)

    thread = threading.Thread(target=measure)
    thread.start()
    assert inside.wait(30)
    assert _encoded(facet) == indexed + 2 and len(facet.searching.query_vectors) == 0
    for _ in range(2):  # this thread keeps its vector meanwhile
        facet.search(SearchRequest("card arrived", "bank", mode="dense"))
    release.set()
    thread.join(30)
    assert _encoded(facet) == indexed + 3
    for _ in range(2):  # and so does the measuring one's query, once it is over
        facet.search(SearchRequest("lost my pin", "bank", mode="dense"))
    assert _encoded(facet) == indexed + 4


def test_forgetting_a_collection_drops_its_rerank_vectors_not_the_queries(facet, blended) -> None:
    """Kept per collection, a reranker's chunks outlived the collection: one deleted and indexed
    again on another device would have been reranked with the old ones."""
    request = SearchRequest("lost my pin", "bank", "What does the customer want?", mode="dense",
                            rerank="minilm[instruction_weight=1]", top_k=2, rerank_depth=2)
    facet.search(request)
    encoded = _encoded(facet)
    facet.searching.forget("other")
    facet.search(request)
    assert blended == [2] and _encoded(facet) == encoded
    facet.searching.forget("bank")
    facet.search(request)
    assert blended == [2, 2] and _encoded(facet) == encoded  # the queries were still kept


def test_info_says_what_is_kept_and_how_often_it_is_found(facet) -> None:
    """``GET /info``'s ``kept_vectors``: whether FACET_QUERY_CACHE_MB suits the load."""
    before = facet.info()["kept_vectors"]
    assert before == {"entries": 0, "mb": 0.0, "limit_mb": 16.0, "hits": 0, "misses": 0}
    for _ in range(3):
        facet.search(SearchRequest("lost my pin", "bank", mode="dense"))
    kept = facet.info()["kept_vectors"]
    assert (kept["entries"], kept["hits"], kept["misses"]) == (1, 2, 1)
    assert kept["mb"] == round((384 * 4 + 512) / 2**20, 3)
    # An async embed reuses a call kept whole: one found in part is encoded whole, no hit said.
    import asyncio

    asyncio.run(facet.aembed(["lost my pin", "something new"], role="query"))
    kept = facet.info()["kept_vectors"]
    assert (kept["entries"], kept["hits"], kept["misses"]) == (2, 2, 3)
    asyncio.run(facet.aembed(["lost my pin", "something new"], role="query"))
    assert facet.info()["kept_vectors"]["hits"] == 4
