"""Should documents be embedded under the search's instruction too? (An "instruction view".)

Scores one embedder on a BEIR-layout folder two ways, exact cosine, nDCG@10 (x 100) with a
paired bootstrap over the queries: ``dense``, the query under the instruction against documents
embedded without one (what a collection holds today), and ``view``, query and documents both
under the instruction (what indexing the collection once more under that instruction, as its
own named vector, would hold). ``--query-blends 0,0.25,...`` adds the cheaper alternative: the
query read as ``normalize((1 - w) e(query) + w e(instruction, query))`` against the plain documents,
compared with the view. Dev data only when a decision rests on it: the CLINC-val set of
``scripts/make_intent_beir.py --clinc`` (qrels ``intent`` and ``domain``; docs/indexing.md,
"Instruction views").

    .venv/bin/python scripts/make_intent_beir.py --clinc runs/clinc-val-beir
    .venv/bin/python scripts/instruction_view_eval.py checkpoints/inbedder --beir runs/clinc-val-beir \\
        --split domain --instruction "$(.venv/bin/python scripts/make_intent_beir.py --print-instruction domain)" \\
        --out results/eval/instruction-views/clinc-val-domain-inbedder.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from app.evaluation import metrics
from app.evaluation.cache import EmbeddingCache
from app.evaluation.loaders import load_beir
from app.settings import get_settings
from embedders.registry import load_embedder


def ndcg_per_query(doc_vecs: np.ndarray, doc_ids: list[str], query_vecs: np.ndarray, query_ids: list[str],
                   qrels: dict[str, dict[str, float]], k: int = 10) -> list[float]:
    scores = query_vecs @ doc_vecs.T
    out = []
    for row, qid in zip(scores, query_ids, strict=True):
        top = np.argsort(-row, kind="stable")[:k]
        out.append(metrics.ndcg_at_k([doc_ids[i] for i in top], qrels.get(qid, {}), k))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("embedder")
    parser.add_argument("--beir", type=Path, required=True, help="a BEIR-layout folder")
    parser.add_argument("--split", required=True, help="its qrels file's name (qrels/SPLIT.tsv)")
    parser.add_argument("--instruction", required=True)
    parser.add_argument("--query-blends", default="",
                        help="comma-separated weights w: also score queries read as normalize((1-w) e(query) + "
                             "w e(instruction, query)) against the plain documents (no second index), beside the view")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the embedding cache")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    data = load_beir(args.beir, args.split)
    model = load_embedder(args.embedder, device=get_settings().device)
    cache = EmbeddingCache(None if args.no_cache else Path(get_settings().cache_dir) / "embeddings")
    doc_ids = sorted(data.corpus)
    query_ids = sorted(q for q in data.queries if data.qrels.get(q))
    docs = [f"{data.corpus[d][0]} {data.corpus[d][1]}".strip() for d in doc_ids]  # title + text, as the tasks
    queries = [data.queries[q] for q in query_ids]

    def enc(texts: list[str], role: str, instruction: str | None) -> np.ndarray:
        return cache.encode(model, texts, role=role, instruction=instruction, batch_size=args.batch_size,
                            show_progress=True)

    q = enc(queries, "query", args.instruction)
    plain_docs = enc(docs, "document", None)
    plain = ndcg_per_query(plain_docs, doc_ids, q, query_ids, data.qrels)
    view = ndcg_per_query(enc(docs, "document", args.instruction), doc_ids, q, query_ids, data.qrels)
    row: dict[str, object] = {
        "embedder": args.embedder, "beir": str(args.beir), "split": args.split,
        "instruction": args.instruction, "queries": len(query_ids), "docs": len(doc_ids),
        "dense": round(100 * float(np.mean(plain)), 2), "view": round(100 * float(np.mean(view)), 2),
        "view_minus_dense": metrics.paired_bootstrap(view, plain)}
    weights = [float(w) for w in args.query_blends.split(",") if w.strip()]
    if weights:
        q0 = enc(queries, "query", None)
        blends: dict[str, object] = {}
        for w in weights:
            mixed = (1.0 - w) * q0 + w * q
            mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
            scores = ndcg_per_query(plain_docs, doc_ids, mixed, query_ids, data.qrels)
            blends[f"{w:g}"] = {"ndcg": round(100 * float(np.mean(scores)), 2),
                                "view_minus_blend": metrics.paired_bootstrap(view, scores)}
        row["query_blends"] = blends
    print(json.dumps(row, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(row, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
