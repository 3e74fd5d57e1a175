"""Which ``max_length`` should a corpus checkpoint serve? A dev-only probe.

The corpus checkpoints were trained on sentences at ``max_length=96`` and saved with it, so
at inference they cut a SciFact abstract (~300 tokens) or a 200-token index chunk to its first
~80 tokens. The training dev suite cannot see this (it cuts abstracts to 64 words), so this
probe scores SciFact *dev* (the held-out SciFact train queries, never a test split) over
whole abstracts at each budget, plus STS-B dev as a check that short texts are unchanged.

The corpus is 400 abstracts by default (every judged one plus random others), which is cheap
but much easier than the 5,183-abstract corpus users search: once it chose a budget that the
full corpus did not confirm. ``--docs 0`` ranks the dev queries over the whole corpus, the
SciFact corpus the test queries also search (its documents carry no test judgements); with
``--cache-dir`` the corpus vectors are shared with ``facet eval --cache-dir`` (same key), so a
budget already evaluated costs only its queries, and ``seconds`` then counts only what was encoded.

    .venv/bin/python scripts/max_length_probe.py checkpoints/causal-eos --lengths 96,192,256,384,512 \
        --out results/eval/max-length-probe/causal-eos.json
    .venv/bin/python scripts/max_length_probe.py checkpoints/causal2vec --lengths 96,256 --docs 0 \
        --cache-dir runs/eval-cache --out results/eval/max-length-probe/causal2vec-whole-corpus.json
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

import torch

from app.evaluation.cache import EmbeddingCache
from app.evaluation.dev import scifact_dev, stsb_dev
from app.evaluation.suites import SCIFACT_INSTRUCTION
from app.evaluation.tasks import EvalContext, RetrievalTask, StsTask, Task
from app.settings import get_settings
from embedders.registry import apply_option, load_embedder

logger = logging.getLogger(__name__)


def probe(model, root: Path, lengths: list[int], *, docs: int | None = 400, queries: int | None = None,
          sts_pairs: int = 400, cache_dir: Path | None = None) -> list[dict[str, float | int]]:
    """Dev scores of ``model`` at each token budget in ``lengths`` (the option is left at the last).

    Args:
        docs: SciFact corpus size (judged abstracts plus random others); None for all 5,183.
        cache_dir: an embedding cache shared with ``facet eval``; None encodes everything.
    """
    if docs is not None and docs < 1:
        raise ValueError(f"docs must be >= 1 or None (the whole corpus), got {docs}")
    name = "scifact-dev-whole" if docs is not None else "scifact-dev-corpus"
    tasks: list[Task] = [RetrievalTask(name, lambda: scifact_dev(root), instruction=SCIFACT_INSTRUCTION,
                                       doc_max_words=None, n_docs=docs, n_queries=queries, seed=0)]
    if sts_pairs:
        tasks.append(StsTask("stsb-dev", lambda: stsb_dev(root), sample=sts_pairs, seed=0))
    rows = []
    for length in lengths:
        apply_option(model, "max_length", str(length))
        start = time.perf_counter()
        # The cache key holds max_length (the embedder's identity), so budgets never share vectors.
        ctx = EvalContext(model, EmbeddingCache(cache_dir), batch_size=16, show_progress=cache_dir is not None)
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
    parser.add_argument("--docs", type=int, default=400,
                        help="SciFact dev corpus subset size; 0 ranks over the whole corpus (5,183 abstracts)")
    parser.add_argument("--queries", type=int, default=None, help="SciFact dev queries (default: all 162)")
    parser.add_argument("--sts-pairs", type=int, default=400, help="STS-B dev pairs (0 skips)")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="embedding cache shared with `facet eval --cache-dir` (default: none)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.manual_seed(0)
    model = load_embedder(args.embedder)
    lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
    rows = probe(model, get_settings().shared_data_dir, lengths, docs=args.docs or None, queries=args.queries,
                 sts_pairs=args.sts_pairs, cache_dir=args.cache_dir)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        corpus = args.docs or "all"
        args.out.write_text(json.dumps({"embedder": args.embedder, "scifact_docs": corpus, "rows": rows},
                                       indent=1) + "\n")


if __name__ == "__main__":
    main()
