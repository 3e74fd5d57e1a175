"""BM25 alone on SciFact dev under each term definition of ``indexer.lexical`` (no store).

Terms and weights are the definitions' own (``document_terms`` / ``query_terms``), the IDF is
Qdrant's (``ln(1 + (N - n + 0.5) / (n + 0.5))``), so the figures reproduce what lexical search
through the store scores (74.56 nDCG@10 for ``qdrant-bm25-en-v1``, as `scripts/hybrid_eval.py`
measured through the search service). One thread, about a minute per definition.

    .venv/bin/python scripts/lexical_definitions.py
    .venv/bin/python scripts/lexical_definitions.py --avg-len 256,128,64,32

``--avg-len``: the current definition alone, under each of these BM25 expected lengths (the
store writes ``indexer.lexical.BM25_AVG_LEN``, 256; kept, as none of them did better on dev:
the fifth session of 2026-12-06).
"""

from __future__ import annotations

import argparse
import collections
import math
from pathlib import Path

from app.evaluation import metrics
from app.evaluation.dev import scifact_dev
from app.settings import get_settings
from indexer import lexical as lex


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--avg-len", help="comma-separated BM25 expected lengths (terms)")
    args = parser.parse_args()
    data = scifact_dev(Path(get_settings().shared_data_dir))
    runs: list[tuple[str, float | None]] = (
        [(lex.LEXICAL_VERSION, float(a)) for a in args.avg_len.split(",")] if args.avg_len
        else [(version, None) for version in lex.DEFINITIONS])
    for version, avg_len in runs:
        if avg_len is not None:  # the model reads it when made: made again for each
            lex.BM25_AVG_LEN = avg_len
            lex._model.cache_clear()
        docs = {d: dict(zip(*lex.document_terms(str(t), version), strict=True))
                for d, t in data.corpus.items()}
        df = collections.Counter(t for v in docs.values() for t in v)
        n_docs = len(docs)
        idf = {t: math.log(1 + (n_docs - n + 0.5) / (n + 0.5)) for t, n in df.items()}
        postings: dict[int, list[tuple[str, float]]] = collections.defaultdict(list)
        for d, v in docs.items():
            for t, w in v.items():
                postings[t].append((d, w))
        rankings = {}
        for qid in data.qrels:
            scores: dict[str, float] = collections.defaultdict(float)
            for t in lex.query_terms(data.queries[qid], version)[0]:
                for d, w in postings.get(t, ()):
                    scores[d] += idf[t] * w
            rankings[qid] = sorted(scores, key=lambda d: -scores[d])[:100]
        label = version if avg_len is None else f"{version}, avg_len {avg_len:g}"
        print(f"{label}: nDCG@10 {100 * metrics.mean_over_queries(rankings, data.qrels, 'ndcg', 10):.2f}, "
              f"Recall@100 {100 * metrics.mean_over_queries(rankings, data.qrels, 'recall', 100):.2f}",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
