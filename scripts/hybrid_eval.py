"""SciFact through the search service in each mode: dense, lexical (BM25) and hybrid (RRF).

The corpus is indexed once by the index service (one chunk per abstract, as `facet bench
--scifact` does), then every query goes through `SearchService.search` with facet eval's
query instruction, and nDCG@10 / Recall@100 are computed with the evaluation package.

`--split dev` uses SciFact *train* queries held out from training (the dev split checkpoints
are chosen on) and scores each fusion setting of `--grid`: choose the served setting there.
`--split test` scores the modes with the served setting (`HYBRID_FUSION`), for reporting.
`--beir FOLDER` runs the same on another BEIR-layout folder (corpus.jsonl, queries.jsonl,
qrels/SPLIT.tsv), such as a user's own, with `--instruction` for its queries (default none).
`--rerank NAME` (repeatable) also reranks each `--rerank-first` mode's top `--rerank-depth`
through the service, reading the candidates under the instruction (as served) and bare
(`--rerank-docs`), with paired bootstraps between the readings and against the first stage.

    .venv/bin/python scripts/hybrid_eval.py minilm --split dev --grid \
        --out results/eval/hybrid/scifact-dev-minilm.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from app.encoding import EmbedderCache
from app.evaluation import metrics
from app.evaluation.dev import scifact_dev
from app.evaluation.loaders import BeirData, load_beir
from app.evaluation.suites import SCIFACT_INSTRUCTION
from app.evaluation.tasks import RetrievalTask
from app.services.benchmark import beir_corpus_subset
from app.services.context import ServiceContext
from app.services.indexing import IndexOptions, IndexService
from app.services.search import HYBRID_FUSION, RERANK_DOCUMENTS_INSTRUCTED, SearchRequest, SearchService
from app.settings import FacetSettings, get_settings
from indexer.store import Fusion

GRID = [Fusion(k=k, dense_weight=1.0, lexical_weight=w, candidates=100)
        for k in (2, 10, 30, 60) for w in (0.5, 1.0, 1.5)]


def run_queries(service: SearchService, data: BeirData, embedder: str, mode: str,
                exact: bool = False, instruction: str | None = SCIFACT_INSTRUCTION,
                rerank: str | None = None, rerank_depth: int | None = None,
                progress: str | None = None) -> dict[str, Any]:
    """nDCG@10 and Recall@100 of ``mode``'s ranking; with ``rerank``, its ranking of the first
    stage's top ``rerank_depth`` (Recall at that depth, which reranking does not change)."""
    qids = sorted(data.qrels)
    rankings: dict[str, list[str]] = {}
    depth = (rerank_depth or 100) if rerank else 100
    start = time.perf_counter()
    for i, q in enumerate(qids):
        response = service.search(SearchRequest(data.queries[q], "scifact", instruction=instruction,
                                                top_k=depth, embedder=embedder, mode=mode,
                                                exact=exact, rerank=rerank, rerank_depth=depth))
        rankings[q] = [r.doc_id for r in response.results]
        if progress and (i + 1) % 20 == 0:
            print(f"{progress}: {i + 1}/{len(qids)} queries, "
                  f"{time.perf_counter() - start:.0f} s", file=sys.stderr)
    return {"ndcg@10": round(100 * metrics.mean_over_queries(rankings, data.qrels, "ndcg", 10), 2),
            f"recall@{depth}": round(100 * metrics.mean_over_queries(rankings, data.qrels, "recall", depth), 2),
            "ms_per_query": round(1000 * (time.perf_counter() - start) / len(qids), 1),
            "per_query_ndcg@10": [metrics.ndcg_at_k(rankings[q], data.qrels[q], 10) for q in qids]}


def subset(data: BeirData, n_queries: int | None, n_docs: int | None) -> BeirData:
    """Seeded queries and their judged documents plus a seeded sample of the others, as the
    evaluation's retrieval tasks subsample (``RetrievalTask``, seed 0); None keeps all."""
    if n_queries is None and n_docs is None:
        return data
    picked = RetrievalTask("subset", lambda: data, instruction=None, n_queries=n_queries, n_docs=n_docs,
                           seed=0).data()
    return BeirData({d: data.corpus[d] for d in picked.doc_ids},
                    {q: data.queries[q] for q in picked.query_ids}, picked.qrels)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("embedder")
    parser.add_argument("--split", default="dev",
                        help="SciFact: dev (held-out train queries) or test; with --beir: its qrels file's name")
    parser.add_argument("--beir", type=Path, default=None, help="another BEIR-layout folder instead of SciFact")
    parser.add_argument("--instruction", default=None,
                        help="the query instruction (default: SciFact's with SciFact, none with --beir)")
    parser.add_argument("--grid", action="store_true", help="score every fusion setting of GRID (dev)")
    parser.add_argument("--exact", action="store_true", help="exact dense search instead of HNSW")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="keep the index here and reuse it (default: a temporary folder)")
    parser.add_argument("--queries", type=int, default=None, help="a seeded subset of the queries")
    parser.add_argument("--docs", type=int, default=None,
                        help="a corpus subset: the judged documents plus a seeded sample of the others")
    parser.add_argument("--data-root", type=Path, default=None, help="datasets root (default: the settings')")
    parser.add_argument("--rerank", action="append", default=[], metavar="EMBEDDER",
                        help="also rerank each first stage's top --rerank-depth with this embedder "
                             "(repeatable), reading the documents each --rerank-docs way")
    parser.add_argument("--rerank-depth", type=int, default=20)
    parser.add_argument("--rerank-first", default="hybrid",
                        help="comma-separated first-stage modes for --rerank (default hybrid)")
    parser.add_argument("--rerank-docs", default="instruction,bare",
                        help="comma-separated: instruction (the chunk under the query's instruction, "
                             "as served) and/or bare (the chunk alone)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    root = args.data_root or Path(get_settings().shared_data_dir)
    folder = args.beir or root / "beir_scifact"
    if args.beir is None and args.split not in ("dev", "test"):
        parser.error("--split must be dev or test for SciFact")
    readings = [r.strip() for r in args.rerank_docs.split(",") if r.strip()]
    firsts = [m.strip() for m in args.rerank_first.split(",") if m.strip()]
    if any(r not in ("instruction", "bare") for r in readings) or not readings:
        parser.error("--rerank-docs takes instruction and/or bare")
    if any(m not in ("dense", "lexical", "hybrid") for m in firsts) or not firsts:
        parser.error("--rerank-first takes dense, lexical and/or hybrid")
    if args.rerank_depth < 10:
        parser.error("--rerank-depth must be at least 10 (nDCG@10 reads ten)")
    full = scifact_dev(root) if args.beir is None and args.split == "dev" else load_beir(folder, args.split)
    data = subset(full, args.queries, args.docs)
    instruction = args.instruction if args.instruction is not None or args.beir else SCIFACT_INSTRUCTION
    out: dict[str, Any] = {"embedder": args.embedder, "data": str(folder), "split": args.split,
                           "instruction": instruction, "exact": args.exact,
                           "queries": len(data.qrels), "documents": len(data.corpus),
                           "served_fusion": asdict(HYBRID_FUSION)}
    with tempfile.TemporaryDirectory(prefix="facet-hybrid-") as tmp:
        index_dir = args.data_dir or Path(tmp)  # a second run indexes nothing: the documents are unchanged
        # query_cache_mb=0: each row's ms_per_query encodes its queries (kept from the first
        # row, the others timed the kept vectors).
        ctx = ServiceContext(FacetSettings(data_dir=index_dir, chunk_tokens=100_000, chunk_overlap=0,
                                           query_cache_mb=0),
                             embedders=EmbedderCache())
        corpus = folder / "corpus.jsonl"
        if args.docs is not None:  # index exactly the subset's records
            corpus = beir_corpus_subset(corpus, Path(tmp) / "corpus.jsonl", data.corpus.keys())
        t0 = time.perf_counter()
        report = IndexService(ctx).index(corpus, "scifact", IndexOptions(embedder=args.embedder))
        out["index_s"] = round(time.perf_counter() - t0, 1)
        out["chunks"] = report.chunks_written
        print(f"indexed {report.chunks_written} chunks ({report.docs_skipped} documents unchanged) in "
              f"{out['index_s']} s", file=sys.stderr)
        service = SearchService(ctx)
        per_query: dict[str, list[float]] = {}
        for mode in ("dense", "lexical", "hybrid"):
            out[mode] = run_queries(service, data, args.embedder, mode, args.exact, instruction)
            per_query[mode] = out[mode].pop("per_query_ndcg@10")
            print(mode, out[mode], file=sys.stderr)
        out["paired_bootstrap_ndcg@10"] = {
            f"{a} - {b}": metrics.paired_bootstrap(per_query[a], per_query[b])
            for a, b in (("hybrid", "dense"), ("lexical", "dense"), ("hybrid", "lexical"))}
        print(out["paired_bootstrap_ndcg@10"], file=sys.stderr)
        out["per_query_ndcg@10"] = {"query_ids": sorted(data.qrels), **per_query}
        if args.grid:
            out["grid"] = []
            for fusion in GRID:
                service.fusion = fusion
                row = {**asdict(fusion),
                       **run_queries(service, data, args.embedder, "hybrid", args.exact, instruction)}
                row.pop("per_query_ndcg@10")
                out["grid"].append(row)
                print(row, file=sys.stderr)
            service.fusion = HYBRID_FUSION
            out["hybrid_again"] = run_queries(service, data, args.embedder, "hybrid", args.exact,
                                              instruction)
            out["hybrid_again"].pop("per_query_ndcg@10")
            print("hybrid again", out["hybrid_again"], file=sys.stderr)
        if args.rerank:
            out["rerank"] = []
            for reranker in args.rerank:
                for first in firsts:
                    for reading in readings:
                        service.rerank_documents_instructed = reading == "instruction"
                        label = f"{first} top-{args.rerank_depth} reranked by {reranker}, documents {reading}"
                        row = {"first_stage": first, "reranker": reranker, "documents": reading,
                               "depth": args.rerank_depth,
                               **run_queries(service, data, args.embedder, first, args.exact, instruction,
                                             rerank=reranker, rerank_depth=args.rerank_depth,
                                             progress=label)}
                        per_query[f"{first}+{reranker}+{reading}"] = row.pop("per_query_ndcg@10")
                        out["rerank"].append(row)
                        print(label, row, file=sys.stderr)
                    if len(readings) == 2:
                        a, b = (f"{first}+{reranker}+{r}" for r in ("instruction", "bare"))
                        out["paired_bootstrap_ndcg@10"][f"{a} - {b}"] = metrics.paired_bootstrap(
                            per_query[a], per_query[b])
                    out["paired_bootstrap_ndcg@10"].update({
                        f"{first}+{reranker}+{r} - {first}": metrics.paired_bootstrap(
                            per_query[f"{first}+{reranker}+{r}"], per_query[first]) for r in readings})
            service.rerank_documents_instructed = RERANK_DOCUMENTS_INSTRUCTED
            out["per_query_ndcg@10"] = {"query_ids": sorted(data.qrels), **per_query}
        ctx.close()
    text = json.dumps(out, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
