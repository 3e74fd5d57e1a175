"""Benchmarks behind ``facet bench``: indexing throughput, store upsert/search, search latency,
and the SciFact consistency check (nDCG@10 through the search service vs a direct computation).

Every figure is measured when the function runs; nothing is cached or hard-coded.
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from app.services.context import EmbedderCache, ServiceContext
from app.services.indexing import IndexOptions, IndexService
from app.services.search import SearchRequest, SearchService
from app.settings import FacetSettings
from indexer.chunking import ChunkingConfig, chunk_text, tokenizer_spans
from indexer.parsing import ParsedDocument, parse_source
from indexer.store import PointRecord, VectorStore, point_id

logger = logging.getLogger(__name__)

SCIFACT_INSTRUCTION = ("Given a scientific claim, retrieve documents that support or refute "
                       "the claim")


def _ctx(data_dir: Path, embedders: EmbedderCache, **fields: Any) -> ServiceContext:
    return ServiceContext(FacetSettings(data_dir=data_dir, **fields), embedders=embedders)


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def bench_indexing(source: Path, embedder: str, embedders: EmbedderCache, *,
                   chunk_tokens: int = 200, chunk_overlap: int = 32) -> dict[str, Any]:
    """End-to-end ``IndexService.index`` vs bare ``encode`` on the same chunks."""
    model = embedders.get(embedder)
    spans = tokenizer_spans(model.backbone.tokenizer)
    config = ChunkingConfig(chunk_tokens, chunk_overlap)
    texts = [c.text for d in parse_source(source) if isinstance(d, ParsedDocument)
             for c in chunk_text(d.text, spans, config)]
    model.encode(texts[:64], role="document")  # warm-up
    t0 = time.perf_counter()
    model.encode(texts, role="document", batch_size=32)
    bare_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory(prefix="facet-bench-") as tmp, \
            _ctx(Path(tmp), embedders, chunk_tokens=chunk_tokens,
                 chunk_overlap=chunk_overlap) as ctx:
        report = IndexService(ctx).index(source, "bench", IndexOptions(embedder=embedder))
    assert report.chunks_written == len(texts), (report.chunks_written, len(texts))
    return {
        "source": str(source), "embedder": model.name, "documents": report.docs_indexed,
        "chunks": len(texts), "bare_encode_s": bare_s, "bare_chunks_per_s": len(texts) / bare_s,
        "end_to_end_s": report.elapsed_s, "end_to_end_chunks_per_s": len(texts) / report.elapsed_s,
        "end_to_end_docs_per_s": report.docs_per_s, "ratio": bare_s / report.elapsed_s,
        "stage_s": report.timings,
    }


def _synthetic(n: int, dim: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    vecs = rng.normal(size=(n, dim)).astype(np.float32)
    return np.asarray(vecs / np.linalg.norm(vecs, axis=1, keepdims=True), dtype=np.float32)


_WORDS = (
    "card", "payment", "refund", "transfer", "account", "balance", "fee", "exchange", "rate",
    "top", "up", "cash", "pin", "statement", "loan", "mortgage", "travel", "limit", "app",
    "verify", "identity", "declined", "pending",
)


def _synthetic_text(i: int) -> str:
    rng = np.random.default_rng(i)
    return " ".join(rng.choice(_WORDS, size=24))


def bench_store(store: VectorStore, n: int, dim: int, queries: int = 200,
                vector_name: str = "v") -> dict[str, Any]:
    """Upsert ``n`` synthetic unit vectors (with text payloads) and time searches."""
    v = vector_name
    vecs = _synthetic(n, dim)
    store.ensure_collection("bench", {v: dim})
    t0 = time.perf_counter()
    for start in range(0, n, 1000):
        store.upsert("bench", [PointRecord(point_id(f"d{i}", 0), {v: vecs[i]},
                                           {"doc_id": f"d{i}", "chunk_no": 0,
                                            "text": _synthetic_text(i), "meta": {"g": i % 10}})
                               for i in range(start, min(n, start + 1000))])
    store.flush()
    upsert_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    store.optimize("bench")
    optimize_s = time.perf_counter() - t0
    qvecs = _synthetic(queries, dim, seed=1)
    lat: list[float] = []
    filtered: list[float] = []
    recall_hits = 0
    for i, q in enumerate(qvecs):
        t0 = time.perf_counter()
        hits = store.search("bench", v, q, limit=10)
        lat.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        store.search("bench", v, q, limit=10, filters={"meta.g": i % 10})
        filtered.append((time.perf_counter() - t0) * 1000)
        if i < 20:  # recall@10 of the index against exact search
            exact = {h.id for h in store.search("bench", v, q, limit=10, exact=True)}
            recall_hits += len(exact & {h.id for h in hits})
    return {"backend": store.backend, "points": store.count("bench"), "dim": dim,
            "upsert_s": upsert_s, "upsert_points_per_s": n / upsert_s, "optimize_s": optimize_s,
            "search_p50_ms": _pct(lat, 50), "search_p95_ms": _pct(lat, 95),
            "filtered_p50_ms": _pct(filtered, 50), "filtered_p95_ms": _pct(filtered, 95),
            "recall_at_10_vs_exact": recall_hits / (10 * min(20, queries)), "queries": len(lat)}


def bench_search_latency(data_dir: Path, embedders: EmbedderCache, embedder: str,
                         rerank: str, queries: list[str], *, rerank_depth: int = 30
                         ) -> dict[str, Any]:
    """End-to-end ``SearchService.search`` latency on the ``bench`` collection in ``data_dir``."""
    out: dict[str, Any] = {}
    with _ctx(data_dir, embedders) as ctx:
        service = SearchService(ctx)
        for label, rr in (("no_rerank", None), ("rerank", rerank)):
            service.search(SearchRequest(queries[0], "bench", top_k=10, rerank=rr,
                                         rerank_depth=rerank_depth, embedder=embedder))  # warm-up
            lat = []
            for q in queries:
                t0 = time.perf_counter()
                service.search(SearchRequest(q, "bench", instruction="Find the customer's intent",
                                             top_k=10, rerank=rr, rerank_depth=rerank_depth,
                                             embedder=embedder))
                lat.append((time.perf_counter() - t0) * 1000)
            out[label] = {"p50_ms": _pct(lat, 50), "p95_ms": _pct(lat, 95), "queries": len(lat)}
    out["rerank_depth"] = rerank_depth
    return out


def build_search_bench_collection(data_dir: Path, embedders: EmbedderCache, embedder: str,
                                  n: int) -> None:
    """An edge collection of ``n`` chunks with synthetic vectors, registered in the metadata
    like an indexed one (one document per chunk), so the search service can query it."""
    from indexer import metadata as md

    model = embedders.get(embedder)
    with _ctx(data_dir, embedders) as ctx:
        bench_store(ctx.store, n, int(model.dim), queries=1, vector_name=model.name)
        sizes = ctx.store.vector_sizes("bench")
        if model.name not in sizes:
            raise RuntimeError("bench collection must use the embedder name as vector name")
        with ctx.sessions() as s:
            coll = md.create_collection(s, "bench", backend=ctx.store.backend, chunk_size=200,
                                        chunk_overlap=32, tokenizer=model.name)
            md.ensure_collection_embedder(s, coll, model.name, int(model.dim), model.identity)
            s.commit()


def ndcg_at_10(ranked: list[str], relevant: dict[str, int]) -> float:
    """nDCG@10 with graded gains ``rel`` (BEIR's linear gain) and log2 discounts."""
    dcg = sum(relevant.get(d, 0) / np.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted(relevant.values(), reverse=True)[:10]
    idcg = sum(g / np.log2(i + 2) for i, g in enumerate(ideal))
    return float(dcg / idcg) if idcg > 0 else 0.0


def _load_beir(folder: Path) -> tuple[dict[str, str], dict[str, dict[str, int]], dict[str, str]]:
    corpus = {}
    with (folder / "corpus.jsonl").open() as fh:
        for line in fh:
            rec = json.loads(line)
            title = rec.get("title") or ""
            corpus[str(rec["_id"])] = f"{title}\n{rec['text']}" if title else rec["text"]
    queries = {}
    with (folder / "queries.jsonl").open() as fh:
        for line in fh:
            rec = json.loads(line)
            queries[str(rec["_id"])] = rec["text"]
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    with (folder / "qrels" / "test.tsv").open() as fh:
        next(fh)
        for line in fh:
            q, d, score = line.split("\t")
            if int(score) > 0:
                qrels[q][d] = int(score)
    return queries, dict(qrels), corpus


def scifact_consistency(folder: Path, embedder: str, embedders: EmbedderCache,
                        log: Callable[[str], None] = logger.info,
                        max_docs: int | None = None) -> dict[str, Any]:
    """Index SciFact with the index service (one chunk per document, like the evaluator's
    whole documents), run the test queries through the search service, and compare nDCG@10
    with a direct computation: encode, exact cosine ranking, same instruction."""
    model = embedders.get(embedder)
    queries, qrels, corpus = _load_beir(folder)
    qids = [q for q in queries if q in qrels]
    if max_docs is not None and max_docs < len(corpus):
        # Every judged document plus a seeded sample of the others (same set on both paths).
        judged = {d for rel in qrels.values() for d in rel}
        others = [d for d in corpus if d not in judged]
        rng = np.random.default_rng(0)
        extra = rng.choice(len(others), size=max(0, max_docs - len(judged)), replace=False)
        keep = judged | {others[i] for i in extra}
        corpus = {d: t for d, t in corpus.items() if d in keep}
    with tempfile.TemporaryDirectory(prefix="facet-scifact-") as tmp:
        corpus_file = Path(tmp) / "corpus.jsonl"
        with corpus_file.open("w") as fh:
            for d, text in corpus.items():
                fh.write(json.dumps({"_id": d, "text": text}) + "\n")
        # Chunks longer than the encoder's max_length: each document is one chunk and the
        # encoder truncates it exactly as it truncates the whole document below.
        with _ctx(Path(tmp), embedders, chunk_tokens=100_000, chunk_overlap=0) as ctx:
            t0 = time.perf_counter()
            report = IndexService(ctx).index(corpus_file, "scifact",
                                             IndexOptions(embedder=embedder))
            index_s = time.perf_counter() - t0
            log(f"indexed {report.docs_indexed} docs / {report.chunks_written} chunks "
                f"in {index_s:.0f}s")
            service = SearchService(ctx)
            service_scores = []
            for q in qids:
                response = service.search(SearchRequest(queries[q], "scifact",
                                                        instruction=SCIFACT_INSTRUCTION,
                                                        top_k=100, embedder=embedder))
                ranked: list[str] = []
                for r in response.results:  # documents by their best chunk
                    if r.doc_id not in ranked:
                        ranked.append(r.doc_id)
                service_scores.append(ndcg_at_10(ranked, qrels[q]))
    doc_ids = list(corpus)
    t0 = time.perf_counter()
    dvec = model.encode([corpus[d] for d in doc_ids], role="document", batch_size=32)
    qvec = model.encode([queries[q] for q in qids], role="query", instruction=SCIFACT_INSTRUCTION)
    direct_s = time.perf_counter() - t0
    sims = qvec @ dvec.T  # (queries, docs)
    direct_scores = []
    for i, q in enumerate(qids):
        top = np.argsort(-sims[i], kind="stable")[:10]
        direct_scores.append(ndcg_at_10([doc_ids[j] for j in top], qrels[q]))
    service_ndcg = float(np.mean(service_scores))
    direct_ndcg = float(np.mean(direct_scores))
    return {"embedder": model.name, "queries": len(qids), "documents": len(doc_ids),
            "chunks": report.chunks_written, "service_ndcg10": service_ndcg,
            "direct_ndcg10": direct_ndcg, "abs_diff": abs(service_ndcg - direct_ndcg),
            "index_s": index_s, "direct_encode_s": direct_s}
