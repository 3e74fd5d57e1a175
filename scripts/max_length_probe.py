"""Which ``max_length`` should a corpus checkpoint serve? A dev-only probe.

The corpus checkpoints were trained on sentences at ``max_length=96`` and saved with it, so
at inference they cut a SciFact abstract (~300 tokens) or a 200-token index chunk to its first
~80 tokens. The training dev suite cannot see this (it cuts abstracts to 64 words), so this
probe scores SciFact *dev* (the held-out SciFact train queries, never a test split) over
400 whole abstracts at each budget, plus STS-B dev as a check that short texts are unchanged.

    .venv/bin/python scripts/max_length_probe.py checkpoints/causal-eos --lengths 96,192,256,384,512 \
        --out results/eval/max-length-probe/causal-eos.json
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

import torch

from app.evaluation import loaders
from app.evaluation.cache import EmbeddingCache
from app.evaluation.dev import scifact_dev
from app.evaluation.suites import SCIFACT_INSTRUCTION
from app.evaluation.tasks import EvalContext, RetrievalTask, StsTask
from app.settings import get_settings
from embedders.registry import apply_option, load_embedder

logger = logging.getLogger(__name__)


def probe(model, root: Path, lengths: list[int], *, docs: int = 400, queries: int | None = None,
          sts_pairs: int = 400) -> list[dict[str, float | int]]:
    """Dev scores of ``model`` at each token budget in ``lengths`` (the option is left at the last)."""
    tasks = [RetrievalTask("scifact-dev-whole", lambda: scifact_dev(root), instruction=SCIFACT_INSTRUCTION,
                           doc_max_words=None, n_docs=docs, n_queries=queries, seed=0)]
    if sts_pairs:
        dev_csv = root / "stsb_en" / "stsb-en-dev.csv"
        tasks.append(StsTask("stsb-dev", lambda: loaders.load_sts_csv(dev_csv), sample=sts_pairs, seed=0))
    rows = []
    for length in lengths:
        apply_option(model, "max_length", str(length))
        start = time.perf_counter()
        # No cache: the cache key holds max_length, but a probe should measure every budget afresh.
        ctx = EvalContext(model, EmbeddingCache(None), batch_size=16, show_progress=False)
        row: dict[str, float | int] = {"max_length": length}
        for task in tasks:
            result = task.run(ctx)
            for key, value in result.scores.items():
                row[f"{task.name}/{key}"] = round(100 * value, 2)
        row["seconds"] = round(time.perf_counter() - start, 1)
        rows.append(row)
        logger.info("%s", json.dumps(row))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("embedder", help="a corpus checkpoint or name with a max_length option")
    parser.add_argument("--lengths", default="96,256,512", help="comma-separated token budgets")
    parser.add_argument("--docs", type=int, default=400, help="SciFact dev corpus subset size")
    parser.add_argument("--queries", type=int, default=None, help="SciFact dev queries (default: all 162)")
    parser.add_argument("--sts-pairs", type=int, default=400, help="STS-B dev pairs (0 skips)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.manual_seed(0)
    model = load_embedder(args.embedder)
    lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
    rows = probe(model, get_settings().shared_data_dir, lengths, docs=args.docs, queries=args.queries,
                 sts_pairs=args.sts_pairs)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"embedder": args.embedder, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
