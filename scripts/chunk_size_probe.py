"""Which chunk size should a collection have for a given embedder? A dev-only probe through
the product path (index service -> store -> search service).

A collection's chunks are cut in the embedder's tokens (``--chunk-tokens``, default 200), and
the encoder then reads at most its ``max_length``: the shipped Causal-EOS and Causal2Vec
checkpoints serve 96 tokens, less their prompt template, so a 200-token chunk reaches their
vectors as its first ~80 tokens and the rest of it is not in any vector. This probe indexes the
SciFact *dev* retrieval set (the held-out SciFact train queries, ``scifact_dev``, never a test
split) at each chunk size, searches every dev query with its instruction, one result per
document (its best chunk), and reports nDCG@10 and Recall@10. The corpus is every judged
abstract plus random others (``--docs``; 0: the whole 5,183-abstract corpus).

    .venv/bin/python scripts/chunk_size_probe.py causal2vec --sizes 200,80 --docs 1000 \
        --out results/eval/chunk-size-probe/causal2vec.json
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from app.evaluation import metrics
from app.evaluation.dev import scifact_dev
from app.evaluation.suites import SCIFACT_INSTRUCTION
from app.services.benchmark import _ctx, beir_corpus_subset, load_average
from app.services.context import EmbedderCache
from app.services.indexing import IndexOptions, IndexService
from app.services.search import SearchRequest, SearchService
from app.settings import FacetSettings, get_settings

logger = logging.getLogger(__name__)


def corpus_ids(qrels: dict[str, dict[str, float]], all_ids: list[str], docs: int, seed: int = 0) -> set[str]:
    """Every judged document plus a seeded sample of the others, ``docs`` in all (0: all)."""
    if docs <= 0:
        return set(all_ids)
    judged = {d for rel in qrels.values() for d in rel}
    others = sorted(set(all_ids) - judged)
    random.Random(seed).shuffle(others)
    return judged | set(others[:max(0, docs - len(judged))])


def probe(embedder: str, sizes: list[int], *, docs: int = 1000, overlap: int | None = None,
          queries: int | None = None, root: Path | None = None,
          embedders: EmbedderCache | None = None) -> list[dict[str, Any]]:
    """nDCG@10 and Recall@10 of ``embedder`` on SciFact dev through the product path, one row
    per chunk size (overlap: the settings' default for that size unless given; ``queries``: the
    first N dev queries by id, None for all 162, their judged abstracts in the corpus)."""
    root = root or Path(get_settings().shared_data_dir)
    data = scifact_dev(root)
    qids = sorted(data.qrels)[:queries] if queries else sorted(data.qrels)
    qrels = {q: data.qrels[q] for q in qids}
    keep = corpus_ids(qrels, list(data.corpus), docs)
    cache = embedders or EmbedderCache()
    rows = []
    with tempfile.TemporaryDirectory(prefix="facet-chunk-probe-") as tmp:
        corpus = beir_corpus_subset(root / "beir_scifact" / "corpus.jsonl", Path(tmp) / "corpus.jsonl", keep)
        for size in sizes:
            size_overlap = overlap if overlap is not None else FacetSettings().chunk_overlap_for(size)
            with _ctx(Path(tmp) / f"data-{size}", cache, chunk_tokens=size,
                      chunk_overlap=size_overlap) as ctx:
                t0 = time.perf_counter()
                report = IndexService(ctx).index(corpus, "scifact", IndexOptions(embedder=embedder))
                index_s = time.perf_counter() - t0
                service = SearchService(ctx)
                rankings: dict[str, list[str]] = {}
                for q in qids:
                    response = service.search(SearchRequest(
                        data.queries[q], "scifact", instruction=SCIFACT_INSTRUCTION, top_k=10,
                        embedder=embedder, mode="dense", group_by_document=True))
                    rankings[q] = [r.doc_id for r in response.results]
            row = {"embedder": embedder, "chunk_tokens": size, "chunk_overlap": size_overlap,
                   "documents": len(keep), "queries": len(qids), "chunks": report.chunks_written,
                   "ndcg@10": metrics.mean_over_queries(rankings, qrels, "ndcg", 10),
                   "recall@10": metrics.mean_over_queries(rankings, qrels, "recall", 10),
                   "index_s": round(index_s, 1), "load_average": load_average()}
            logger.info("%s", row)
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("embedder")
    parser.add_argument("--sizes", default="200,80", help="chunk sizes in tokens, comma-separated")
    parser.add_argument("--overlap", type=int, default=None, help="chunk overlap (default: per size)")
    parser.add_argument("--docs", type=int, default=1000, help="corpus size (0: all 5,183)")
    parser.add_argument("--queries", type=int, default=None, help="the first N dev queries (default all)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    rows = probe(args.embedder, [int(s) for s in args.sizes.split(",")], docs=args.docs,
                 overlap=args.overlap, queries=args.queries)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
