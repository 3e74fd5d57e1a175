"""Benchmarks behind ``facet bench``: indexing throughput, store upsert/search, search latency,
and the SciFact consistency check (nDCG@10 through index -> store -> search service vs
``facet eval``'s number for the same embedder).

Every figure is measured when the function runs; nothing is hard-coded. The box these run on
is shared, so timings alternate the things they compare (bare, end-to-end, bare, ...) and
report medians, CPU seconds beside wall seconds, and the load average.
"""

from __future__ import annotations

import csv
import json
import logging
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import numpy as np

from app.encoding import RecentVectors
from app.services.context import EmbedderCache, ServiceContext
from app.services.indexing import IndexOptions, IndexService
from app.services.search import SearchRequest, SearchService
from app.settings import FacetSettings
from embedders.contract import HasTokenizer
from indexer.chunking import ChunkingConfig, chunk_text, tokenizer_spans, whitespace_spans
from indexer.parsing import ParsedDocument, parse_source
from indexer.store import PointRecord, VectorStore, point_id

logger = logging.getLogger(__name__)


# What would send a benchmark's writes outside its own temporary data folder: the user's
# metadata database (FACET_DATABASE_URL), vector store (FACET_QDRANT_URL, FACET_VECTOR_BACKEND)
# or workers (FACET_BROKER_URL). A bench run with them set indexed its `bench` collection into
# the user's database, whose vectors went with the temporary folder; the `load-*` collections
# stayed listed there with their store files missing.
OUTSIDE_SETTINGS = ("database_url", "qdrant_url", "qdrant_api_key", "vector_backend",
                    "broker_url", "result_backend", "encode_on_workers")


# What a benchmark measures whatever the environment configures: every query encoded (the
# latency benchmarks repeat their queries, and a kept query vector timed the cache, not the model).
MEASURED = {"query_cache_mb": 0}


def bench_settings(data_dir: Path, **fields: Any) -> FacetSettings:
    """Settings for a benchmark's own data folder: its metadata in ``data_dir``'s facet.db, its
    vectors in the embedded store there, no workers, no query vectors kept (``MEASURED``),
    whatever the environment configures (the other settings, threads and limits, are read from
    it as usual)."""
    isolated: dict[str, Any] = {"database_url": None, "qdrant_url": None, "qdrant_api_key": None,
                                "vector_backend": "edge", "broker_url": None,
                                "result_backend": None, "encode_on_workers": False}
    return FacetSettings(data_dir=data_dir, **(isolated | MEASURED | fields))


def bench_environ(data_dir: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a benchmark's `facet serve` child on ``data_dir``: this process's,
    less what ``bench_settings`` overrides (its variables, in any case, as the settings read
    them) and the API key, with ``MEASURED``'s, plus ``extra``."""
    outside = {f"FACET_{name.upper()}" for name in (*OUTSIDE_SETTINGS, *MEASURED, "api_key")}
    environ = {k: v for k, v in os.environ.items() if k.upper() not in outside}
    measured = {f"FACET_{name.upper()}": str(value) for name, value in MEASURED.items()}
    return environ | {"FACET_DATA_DIR": str(data_dir)} | measured | (extra or {})


def _ctx(data_dir: Path, embedders: EmbedderCache, **fields: Any) -> ServiceContext:
    return ServiceContext(bench_settings(data_dir, **fields), embedders=embedders)


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def load_average() -> float:
    """The 1-minute load average (how busy the shared box was)."""
    return round(os.getloadavg()[0], 2)


def banking77_corpus(csv_path: Path, out: Path, n: int) -> Path:
    """The first ``n`` BANKING77 training texts as a jsonl corpus (one record per text)."""
    with csv_path.open(newline="") as fh, out.open("w") as dst:
        for i, row in enumerate(csv.DictReader(fh)):
            if i >= n:
                break
            dst.write(json.dumps({"id": f"b77-{i}", "text": row["text"],
                                  "intent": row["category"]}) + "\n")
    return out


def bench_indexing(source: Path, embedder: str, embedders: EmbedderCache, *, rounds: int = 3,
                   chunk_tokens: int = 200, chunk_overlap: int = 32,
                   log: Callable[[str], None] = logger.info) -> dict[str, Any]:
    """End-to-end ``IndexService.index`` vs bare ``encode`` on the same chunks.

    Runs alternate (bare, end-to-end into a fresh data folder, bare, ...) ``rounds`` times so
    that a change in the machine's load hits both; the ratio is of the medians. CPU seconds
    (``time.process_time``, all threads) are reported beside wall seconds: on a contended box
    they show whether the job does more work or only waits longer for the CPU.
    """
    model = embedders.get(embedder)
    tokenizer = model.tokenizer if isinstance(model, HasTokenizer) else None
    spans = tokenizer_spans(tokenizer) if tokenizer is not None else whitespace_spans
    config = ChunkingConfig(chunk_tokens, chunk_overlap)
    texts = [c.text for d in parse_source(source) if isinstance(d, ParsedDocument)
             for c in chunk_text(d.text, spans, config)]
    model.encode(texts[:64], role="document")  # warm-up
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="facet-bench-") as tmp:
        for r in range(rounds):
            load = load_average()
            t0, c0 = time.perf_counter(), time.process_time()
            model.encode(texts, role="document", batch_size=32)
            bare = {"kind": "bare", "round": r, "wall_s": time.perf_counter() - t0,
                    "cpu_s": time.process_time() - c0, "load": load}
            load = load_average()
            t0, c0 = time.perf_counter(), time.process_time()
            with _ctx(Path(tmp) / f"run{r}", embedders, chunk_tokens=chunk_tokens,
                      chunk_overlap=chunk_overlap) as ctx:
                report = IndexService(ctx).index(source, "bench", IndexOptions(embedder=embedder))
            e2e = {"kind": "end_to_end", "round": r, "wall_s": time.perf_counter() - t0,
                   "cpu_s": time.process_time() - c0, "load": load, "stage_s": report.timings,
                   "docs": report.docs_indexed}
            if report.chunks_written != len(texts):
                raise RuntimeError(f"the job wrote {report.chunks_written} chunks, the bare "
                                   f"run encoded {len(texts)}")
            runs += [bare, e2e]
            log(f"  round {r + 1}/{rounds}: bare {bare['wall_s']:.1f}s (cpu {bare['cpu_s']:.1f}s), "
                f"end-to-end {e2e['wall_s']:.1f}s (cpu {e2e['cpu_s']:.1f}s), load "
                f"{bare['load']}/{e2e['load']}, stages "
                + ", ".join(f"{k} {v:.1f}" for k, v in report.timings.items()))

    def med(kind: str, key: str) -> float:
        return float(statistics.median(x[key] for x in runs if x["kind"] == kind))

    stages = {k: float(statistics.median(x["stage_s"][k] for x in runs if x["kind"] == "end_to_end"))
              for k in runs[1]["stage_s"]}
    bare_s, e2e_s = med("bare", "wall_s"), med("end_to_end", "wall_s")
    return {
        "source": str(source), "embedder": model.name, "documents": runs[1]["docs"],
        "chunks": len(texts), "rounds": rounds,
        "bare_encode_s": bare_s, "bare_chunks_per_s": len(texts) / bare_s,
        "end_to_end_s": e2e_s, "end_to_end_chunks_per_s": len(texts) / e2e_s,
        "ratio": bare_s / e2e_s,
        "bare_cpu_s": med("bare", "cpu_s"), "end_to_end_cpu_s": med("end_to_end", "cpu_s"),
        "cpu_ratio": med("bare", "cpu_s") / med("end_to_end", "cpu_s"),
        "stage_s_median": stages,
        "non_encode_share": (stages["parse_chunk"] + stages["store"] + stages["metadata"])
        / max(1e-9, sum(stages.values())),
        "load_average": [x["load"] for x in runs], "runs": runs,
    }


def _unit(vecs: np.ndarray) -> np.ndarray:
    return np.asarray(vecs / np.linalg.norm(vecs, axis=1, keepdims=True), dtype=np.float32)


def _synthetic(n: int, dim: int, seed: int = 0, clusters: int = 1000) -> np.ndarray:
    """Unit vectors with neighbourhood structure, like real embeddings: ``clusters`` random
    centres plus noise (cosine to the own centre ~0.8). ``clusters=0`` gives i.i.d. Gaussian
    directions, on which no nearest neighbour is much nearer than any other point (the worst
    case for an approximate index: recall collapses; see docs/indexing.md)."""
    rng = np.random.default_rng(seed)
    if clusters <= 0:
        return _unit(rng.normal(size=(n, dim)))
    centres = _unit(rng.normal(size=(clusters, dim)))
    noise = rng.normal(size=(n, dim)) * (0.5 / np.sqrt(dim))
    return _unit(centres[rng.integers(0, clusters, size=n)] + noise)


def _queries_near(vecs: np.ndarray, n: int, seed: int = 1) -> np.ndarray:
    """Queries next to stored points (as a real query is next to the documents it wants)."""
    rng = np.random.default_rng(seed)
    base = vecs[rng.integers(0, len(vecs), size=n)]
    return _unit(base + rng.normal(size=base.shape) * (0.3 / np.sqrt(vecs.shape[1])))


_WORDS = (
    "card", "payment", "refund", "transfer", "account", "balance", "fee", "exchange", "rate",
    "top", "up", "cash", "pin", "statement", "loan", "mortgage", "travel", "limit", "app",
    "verify", "identity", "declined", "pending",
)


def _synthetic_text(i: int) -> str:
    rng = np.random.default_rng(i)
    return " ".join(rng.choice(_WORDS, size=24))


def bench_store(store: VectorStore, n: int, dim: int, queries: int = 200,
                vector_name: str = "v", clusters: int = 1000, recall_queries: int = 50
                ) -> dict[str, Any]:
    """Upsert ``n`` synthetic unit vectors (with text payloads), optimize, and time searches.

    Recall@10 is measured against a brute-force numpy ranking of the same normalised vectors
    (cosine = dot product) mapped to the same point ids, for the default search (HNSW once
    optimized) and for ``exact=True`` (a check of the ground truth itself, expected 1.0).
    """
    v = vector_name
    clusters = min(clusters, n)  # no more centres than points
    vecs = _synthetic(n, dim, clusters=clusters)
    ids = [point_id(f"d{i}", 0) for i in range(n)]
    store.ensure_collection("bench", {v: dim})
    t0 = time.perf_counter()
    for start in range(0, n, 1000):
        store.upsert("bench", [PointRecord(ids[i], {v: vecs[i]},
                                           {"doc_id": f"d{i}", "chunk_no": 0,
                                            "text": _synthetic_text(i), "meta": {"g": i % 10}})
                               for i in range(start, min(n, start + 1000))])
    store.flush()
    upsert_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    store.optimize("bench")
    optimize_s = time.perf_counter() - t0
    qvecs = _queries_near(vecs, queries)
    lat: list[float] = []
    filtered: list[float] = []
    for i, q in enumerate(qvecs):
        t0 = time.perf_counter()
        store.search("bench", v, q, limit=10)
        lat.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        store.search("bench", v, q, limit=10, filters={"meta.g": i % 10})
        filtered.append((time.perf_counter() - t0) * 1000)
    k = min(recall_queries, queries)
    top = min(10, n)  # a collection of fewer than 10 points has only n to find
    truth = np.argsort(-(qvecs[:k] @ vecs.T), axis=1, kind="stable")[:, :top]
    hnsw_hits = exact_hits = 0
    for i in range(k):
        want = {ids[j] for j in truth[i]}
        hnsw_hits += len(want & {h.id for h in store.search("bench", v, qvecs[i], limit=10)})
        exact_hits += len(want & {h.id for h in store.search("bench", v, qvecs[i], limit=10,
                                                                exact=True)})
    return {"backend": store.backend, "points": store.count("bench"), "dim": dim,
            "vectors": f"{clusters} clusters" if clusters > 0 else "iid gaussian",
            "upsert_s": upsert_s, "upsert_points_per_s": n / upsert_s, "optimize_s": optimize_s,
            "search_p50_ms": _pct(lat, 50), "search_p95_ms": _pct(lat, 95),
            "filtered_p50_ms": _pct(filtered, 50), "filtered_p95_ms": _pct(filtered, 95),
            "recall_at_10": hnsw_hits / (top * k), "exact_recall_at_10": exact_hits / (top * k),
            "recall_queries": k, "queries": len(lat), "load_average": load_average()}


def bench_search_latency(data_dir: Path, embedders: EmbedderCache, embedder: str,
                         rerank: str, queries: list[str], *, rerank_depth: int = 30,
                         repeats: int = 3) -> dict[str, Any]:
    """End-to-end ``SearchService.search`` latency (query encoding + store search + snippets,
    and with ``rerank``: the reranker's encoding of the query and the top ``rerank_depth``
    chunk texts) on the ``bench`` collection in ``data_dir``. Each query runs without and
    with rerank back to back, ``repeats`` times, so both see the same machine load, its
    vector encoded each time (``MEASURED``); then ``repeated_query`` and
    ``repeated_query_rerank``: each searched again ``repeats`` times, without and with rerank,
    what it encoded kept from a first search, untimed."""
    lat: dict[str, list[float]] = {"no_rerank": [], "rerank": []}
    parts: dict[str, list[dict[str, float]]] = {"no_rerank": [], "rerank": []}
    with _ctx(data_dir, embedders) as ctx:
        service = SearchService(ctx)
        for rr in (None, rerank):  # warm-up (model load, first-call costs)
            service.search(SearchRequest(queries[0], "bench", top_k=10, rerank=rr,
                                         rerank_depth=rerank_depth, embedder=embedder,
                                         mode="dense"))
        for _ in range(repeats):
            for q in queries:
                for label, rr in (("no_rerank", None), ("rerank", rerank)):
                    t0 = time.perf_counter()
                    response = service.search(SearchRequest(
                        q, "bench", instruction="Find the customer's intent", top_k=10,
                        rerank=rr, rerank_depth=rerank_depth, embedder=embedder,
                        mode="dense"))  # the README's latency rows are dense search
                    lat[label].append((time.perf_counter() - t0) * 1000)
                    parts[label].append(response.timings_ms)
        # The same search again, its query's vectors and the reranker's chunks kept
        # (FACET_QUERY_CACHE_MB's default): what a user's next page, filter or top_k costs
        # (each searched once first, untimed).
        kept = SearchService(ctx)
        kept.query_vectors = RecentVectors(int(FacetSettings.model_fields["query_cache_mb"].default * 2**20))
        for label, rr in (("repeated_query", None), ("repeated_query_rerank", rerank)):
            lat[label], parts[label] = [], []
            for q in queries:
                request = SearchRequest(q, "bench", instruction="Find the customer's intent",
                                        top_k=10, rerank=rr, rerank_depth=rerank_depth,
                                        embedder=embedder, mode="dense")
                kept.search(request)
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    response = kept.search(request)
                    lat[label].append((time.perf_counter() - t0) * 1000)
                    parts[label].append(response.timings_ms)
    out: dict[str, Any] = {}
    for label, values in lat.items():
        stages = {k: float(statistics.median(t.get(k, 0.0) for t in parts[label]))
                  for k in parts[label][0] if k != "total"}
        out[label] = {"p50_ms": _pct(values, 50), "p95_ms": _pct(values, 95),
                      "searches": len(values), "stage_p50_ms": stages}
    out["rerank_depth"] = rerank_depth
    out["reranker"] = rerank
    out["load_average"] = load_average()
    return out


def build_search_bench_collection(data_dir: Path, embedders: EmbedderCache, embedder: str,
                                  n: int) -> dict[str, Any]:
    """An edge collection of ``n`` chunks with synthetic vectors, registered in the metadata
    like an indexed one (one document per chunk), so the search service can query it.
    Returns the store figures of building it (``bench_store``)."""
    from indexer import metadata as md

    model = embedders.get(embedder)
    with _ctx(data_dir, embedders) as ctx:
        result = bench_store(ctx.store, n, int(model.dim), vector_name=model.name)
        with ctx.sessions() as s:
            coll = md.create_collection(s, "bench", backend=ctx.store.backend, chunk_size=200,
                                        chunk_overlap=32, tokenizer=model.name)
            md.ensure_collection_embedder(s, coll, model.name, int(model.dim), model.identity)
            s.commit()
    # Written last: what ``search_bench_built`` takes for a finished build of this embedder.
    (data_dir / SEARCH_BENCH_BUILT).write_text(json.dumps({"embedder": embedder, "points": n}))
    return result


SEARCH_BENCH_BUILT = "bench-built.json"


def search_bench_built(data_dir: Path, embedder: str) -> bool:
    """Whether ``data_dir`` holds a finished ``build_search_bench_collection`` of ``embedder``
    (its record written after the store and the metadata)."""
    try:
        record = json.loads((data_dir / SEARCH_BENCH_BUILT).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and record.get("embedder") == embedder


def beir_corpus_subset(corpus: Path, out: Path, keep: Collection[str]) -> Path:
    """``out``: the records of a BEIR ``corpus.jsonl`` whose ``_id`` is in ``keep``, lines unchanged."""
    with corpus.open() as src, out.open("w") as dst:
        dst.writelines(line for line in src if json.loads(line)["_id"] in keep)
    return out


def facet_eval_scifact_task(settings: FacetSettings, n_docs: int | None = None) -> Any:
    """facet eval's full-suite scifact task; ``n_docs`` keeps every judged document plus the
    task's own seeded sample of the others (``None``: the whole corpus, as facet eval)."""
    from app.evaluation.suites import build_tasks
    from app.evaluation.tasks import RetrievalTask

    task = build_tasks(Path(settings.shared_data_dir), "full", ["scifact"])[0]
    assert isinstance(task, RetrievalTask)
    if n_docs is not None:
        task.n_docs = n_docs
    return task


def facet_eval_scifact(embedder: str, embedders: EmbedderCache, settings: FacetSettings,
                       n_docs: int | None = None) -> dict[str, Any]:
    """``facet eval EMBEDDER --suite full --tasks scifact``'s figures, computed by the
    evaluation package itself (same task definition, same embedding cache)."""
    from app.evaluation.cache import EmbeddingCache
    from app.evaluation.runner import EvalRunner

    tasks = [facet_eval_scifact_task(settings, n_docs)]
    runner = EvalRunner(embedders.get, EmbeddingCache(Path(settings.cache_dir) / "embeddings"),
                        show_progress=False)
    t0 = time.perf_counter()
    run = runner.run_one(embedder, tasks)
    result = run.results[0]
    return {"scores": result.scores, "info": result.info, "seconds": time.perf_counter() - t0,
            "cache_hits": runner.cache.hits, "cache_misses": runner.cache.misses}


def scifact_consistency(folder: Path, embedder: str, embedders: EmbedderCache,
                        settings: FacetSettings, log: Callable[[str], None] = logger.info,
                        max_docs: int | None = None) -> dict[str, Any]:
    """SciFact through the product path vs ``facet eval``.

    ``corpus.jsonl`` is indexed by the index service exactly as ``facet index corpus.jsonl
    --chunk-tokens 100000 --chunk-overlap 0`` does: the jsonl parser makes each record one
    document (title + newline + text, as facet eval embeds title + space + text: the same
    tokens), and a chunk size above any document's length makes each document one chunk,
    which the encoder truncates at its ``max_length`` exactly as facet eval's whole documents
    are truncated. Every vector is encoded by the index job (no embedding cache). The 300
    test queries then go through ``SearchService.search`` with facet eval's query
    instruction, and nDCG@10 is computed with the evaluation package's metric function.

    ``max_docs`` (for a box too busy for the whole corpus): both sides use facet eval's own
    corpus subset (every judged document plus its seeded sample of the others); the index
    side indexes a jsonl of exactly those records.
    """
    from sqlalchemy import select

    from app.evaluation import metrics
    from app.evaluation.loaders import load_beir
    from app.evaluation.suites import SCIFACT_INSTRUCTION as instruction
    from indexer import metadata as md

    beir = load_beir(folder, "test")
    qids = sorted(beir.qrels)
    with tempfile.TemporaryDirectory(prefix="facet-scifact-") as tmp, \
            _ctx(Path(tmp), embedders, chunk_tokens=100_000, chunk_overlap=0) as ctx:
        corpus_file = folder / "corpus.jsonl"
        if max_docs is not None:
            keep = set(facet_eval_scifact_task(settings, max_docs).data().doc_ids)
            beir.corpus = {d: v for d, v in beir.corpus.items() if d in keep}
            corpus_file = beir_corpus_subset(folder / "corpus.jsonl", Path(tmp) / "corpus_subset.jsonl", keep)
        t0 = time.perf_counter()
        report = IndexService(ctx).index(corpus_file, "scifact", IndexOptions(embedder=embedder))
        index_s = time.perf_counter() - t0
        log(f"  indexed {report.docs_indexed} docs / {report.chunks_written} chunks in "
            f"{index_s:.0f}s (stages {', '.join(f'{k} {v:.0f}s' for k, v in report.timings.items())})")
        # The indexed text of each document vs facet eval's text, whitespace-normalised.
        with ctx.sessions() as session:
            coll = md.get_collection(session, "scifact")
            assert coll is not None
            rows = session.execute(select(md.Document.key, md.Chunk.text).join(md.Chunk)
                                   .where(md.Document.collection_id == coll.id)).all()
        indexed = {str(k): " ".join(str(t).split()) for k, t in rows}
        same_text = sum(1 for d, (title, text) in beir.corpus.items()
                        if indexed.get(d) == " ".join(f"{title} {text}".split()))
        service = SearchService(ctx)
        rankings: dict[str, list[str]] = {}
        lat: list[float] = []
        t0 = time.perf_counter()
        for q in qids:
            response = service.search(SearchRequest(beir.queries[q], "scifact",
                                                    instruction=instruction, top_k=10,
                                                    embedder=embedder, mode="dense"))
            lat.append(response.timings_ms["total"])
            ranked: list[str] = []
            for r in response.results:  # documents by their best chunk (one chunk each here)
                if r.doc_id not in ranked:
                    ranked.append(r.doc_id)
            rankings[q] = ranked
        search_s = time.perf_counter() - t0
    service_ndcg = metrics.mean_over_queries(rankings, beir.qrels, "ndcg", 10)
    log(f"  {len(qids)} queries through the search service: nDCG@10 {service_ndcg:.4f} "
        f"({search_s:.0f}s); running facet eval's scifact task")
    ev = facet_eval_scifact(embedder, embedders, settings, max_docs)
    eval_ndcg = float(ev["scores"]["ndcg@10"])
    return {"embedder": embedders.get(embedder).name, "queries": len(qids),
            "documents": len(beir.corpus), "docs_indexed": report.docs_indexed,
            "chunks": report.chunks_written, "docs_with_same_text_as_eval": same_text,
            "instruction": instruction, "service_ndcg10": service_ndcg,
            "facet_eval_ndcg10": eval_ndcg, "abs_diff": abs(service_ndcg - eval_ndcg),
            "facet_eval": ev, "index_s": index_s, "index_stage_s": report.timings,
            "search_s": search_s, "search_p50_ms": _pct(lat, 50),
            "load_average": load_average()}


def stsb_sentences(data_dir: Path, n: int) -> list[str]:
    """The first ``n`` distinct sentences of the STS-B training split (a fixed, real text set)."""
    path = data_dir / "stsb_en" / "stsb-en-train.csv"
    texts: list[str] = []
    with path.open(newline="", encoding="utf-8") as fh:
        for row in csv.reader(fh):  # no header: sentence1, sentence2, score
            for sentence in row[:2]:
                if sentence not in texts:
                    texts.append(sentence)
            if len(texts) >= n:
                break
    return texts[:n]


def bench_gircse_cache(gircse: str, baseline: str, texts: list[str], *, device: str | None = None,
                       rounds: int = 3, batch_size: int = 32, soft_tokens: int = 5,
                       log: Callable[[str], None] = print) -> dict[str, Any]:
    """Encode ``texts`` with GIRCSE (K soft tokens) with and without the KV cache, and with ``baseline``.

    Runs alternate (cache, no cache, baseline) ``rounds`` times after one warm-up each;
    medians are reported with the ratios to the baseline, plus the largest difference
    between the cached and recomputed embeddings.
    """
    from embedders import load_embedder

    model = load_embedder(gircse, device=device)
    if getattr(model, "method", None) != "gircse":
        raise ValueError(f"{gircse} is not a GIRCSE checkpoint")
    base = load_embedder(baseline, device=device)
    model.soft_tokens = soft_tokens  # type: ignore[attr-defined]
    config = model.config  # type: ignore[attr-defined]

    def run(kind: str) -> tuple[float, np.ndarray]:
        if kind == "baseline":
            start = time.perf_counter()
            vecs = base.encode(texts, batch_size=batch_size)
        else:
            config.use_cache = kind == "cache"
            start = time.perf_counter()
            vecs = model.encode(texts, batch_size=batch_size)
        return time.perf_counter() - start, vecs

    kinds = ("cache", "no_cache", "baseline")
    outputs = {k: run(k)[1] for k in kinds}  # warm-up
    times: dict[str, list[float]] = {k: [] for k in kinds}
    for r in range(rounds):
        for k in kinds:
            seconds, _ = run(k)
            times[k].append(seconds)
        log(f"round {r + 1}/{rounds}: " + ", ".join(f"{k} {times[k][-1]:.2f}s" for k in kinds))
    config.use_cache = True
    med = {k: float(statistics.median(v)) for k, v in times.items()}
    return {
        "gircse": gircse, "baseline": baseline, "texts": len(texts), "soft_tokens": soft_tokens,
        "batch_size": batch_size, "rounds": rounds, "device": str(model.device),
        "seconds_median": med, "seconds": times,
        "ratio_cache_to_baseline": med["cache"] / med["baseline"],
        "ratio_no_cache_to_baseline": med["no_cache"] / med["baseline"],
        "speedup_cache": med["no_cache"] / med["cache"],
        "max_abs_diff_cache_vs_no_cache": float(np.abs(outputs["cache"] - outputs["no_cache"]).max()),
        "load_average": load_average(),
    }
