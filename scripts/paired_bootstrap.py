"""Is embedder A really ahead of embedder B? A paired bootstrap over the test items.

Two checkpoints a few hundredths apart on a task mean can trade places with another sample of
the same test sets. This script embeds each task's items with both embedders (through the
evaluation cache, so anything ``facet eval --cache-dir`` already encoded is reused and the point
scores are exactly the reported ones), then resamples the items with replacement (STS pairs;
retrieval queries against the whole corpus), the same resample for A and B, and recomputes
each task's score and the mean over the tasks. It prints the observed difference, a 95%
percentile interval and the share of resamples in which A leads. Reporting, not selection:
it says how sure a comparison on test sets is, and must never choose a checkpoint.
A resample an STS score is undefined on (every drawn pair with one gold score, likely in a small
file of 0/1 scores) is drawn again; each task's ``redrawn`` in the output counts them.
``--task sts:FILE.csv`` / ``beir:FOLDER`` (as ``facet eval --task``) compares on other data instead,
e.g. the STS-B *dev* split, to see whether a gap on test is there on the data models are selected on.

    .venv/bin/python scripts/paired_bootstrap.py 'checkpoints/causal2vec[max_length=96]' \\
        'checkpoints/causal-eos[max_length=96]' --tasks stsb,sick,scifact --cache-dir runs/eval-cache \\
        --out results/eval/paired-bootstrap/causal2vec-vs-causal-eos.json
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from app.errors import InvalidRequestError
from app.evaluation import metrics
from app.evaluation.cache import EmbeddingCache
from app.evaluation.suites import build_tasks, build_user_tasks, resolve_task_names
from app.evaluation.tasks import EvalContext, RetrievalTask, StsTask, Task
from app.settings import get_settings
from embedders.registry import load_embedder

logger = logging.getLogger(__name__)

# One task's score on a resample: maps an index array (items drawn with replacement) to a score.
Scorer = Callable[[np.ndarray], float]

# Draws in a row that may be degenerate before a task is given up on: a resample of n pairs with
# at least two gold values is degenerate with probability at most 1/2 (two pairs), so only data
# whose cosines are all equal get here.
MAX_REDRAWS_IN_A_ROW = 1000


class DegenerateResample(ValueError):
    """A resample the score is undefined on: an STS resample whose gold scores, or cosines, are
    all equal (Spearman needs both sides to vary)."""


def sts_scorer(task: StsTask, ctx: EvalContext) -> tuple[int, Scorer]:
    """Spearman (x100) of cosine against gold over the drawn pairs.

    The scorer raises ``DegenerateResample`` on a draw whose gold scores or cosines are all
    equal: in a small file, or one with few distinct gold scores (0/1), a draw of one gold value
    is likely, and ``facet eval`` accepts such files.
    """
    pairs = task.pairs()
    a = ctx.encode([p.sentence1 for p in pairs], role=task.role, instruction=task.instruction)
    b = ctx.encode([p.sentence2 for p in pairs], role=task.role, instruction=task.instruction)
    cosine = (a * b).sum(axis=1)
    gold = np.array([p.score for p in pairs], dtype=np.float64)

    def score(idx: np.ndarray) -> float:
        if np.ptp(gold[idx]) == 0 or np.ptp(cosine[idx]) == 0:
            raise DegenerateResample(f"task {task.name!r}: the drawn pairs have one gold score or one cosine")
        return 100 * metrics.spearman(cosine[idx], gold[idx])

    return len(pairs), score


def retrieval_scorer(task: RetrievalTask, ctx: EvalContext) -> tuple[int, Scorer]:
    """Mean nDCG@k (x100) over the drawn queries; each query still searches the whole corpus."""
    rankings = task.rank(ctx, None, task.ndcg_k, task.instruction)  # what task.evaluate ranks
    qrels = task.data().qrels
    per_query = np.array([metrics.ndcg_at_k(ranked, qrels[qid], task.ndcg_k) for qid, ranked in rankings.items()])
    return len(per_query), lambda idx: 100 * float(per_query[idx].mean())


def scorer(task: Task, ctx: EvalContext) -> tuple[int, Scorer]:
    if isinstance(task, StsTask):
        return sts_scorer(task, ctx)
    if isinstance(task, RetrievalTask):
        return retrieval_scorer(task, ctx)
    raise ValueError(f"task {task.name!r} ({task.kind}) is not supported: only STS and retrieval tasks")


def paired_bootstrap(tasks: list[Task], ctx_a: EvalContext, ctx_b: EvalContext, *, resamples: int = 2000,
                     seed: int = 0) -> dict:
    """Observed scores and bootstrap distribution of A - B per task and for the task mean.

    A resample a score is undefined on (``DegenerateResample``: every drawn STS pair with the
    same gold score) is drawn again, for A and B alike, so the distribution is over the
    resamples both scores exist on; each task's ``redrawn`` says how many were. Data without
    such draws get exactly the resamples they always did.

    Raises:
        ValueError: ``resamples`` below 1; a task whose draws are degenerate time after time
            (an STS task whose cosines are all equal).
    """
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    rng = np.random.default_rng(seed)
    per_task: dict[str, dict] = {}
    diffs = np.zeros((len(tasks), resamples))
    for t, task in enumerate(tasks):
        n, score_a = scorer(task, ctx_a)
        n_b, score_b = scorer(task, ctx_b)
        assert n == n_b, "both embedders score the same items"
        everything = np.arange(n)
        observed_a, observed_b = score_a(everything), score_b(everything)
        redrawn = 0
        for r in range(resamples):
            for in_a_row in range(MAX_REDRAWS_IN_A_ROW + 1):
                idx = rng.integers(0, n, size=n)
                try:
                    diffs[t, r] = score_a(idx) - score_b(idx)
                    break
                except DegenerateResample as e:
                    if in_a_row == MAX_REDRAWS_IN_A_ROW:
                        raise ValueError(f"{e}, in {MAX_REDRAWS_IN_A_ROW + 1} draws in a row; it cannot "
                                         "be resampled") from e
                    redrawn += 1
        if redrawn:
            logger.info("%s: %d resample(s) with one gold score or one cosine drawn again", task.name, redrawn)
        per_task[task.name] = {"items": n, "a": round(observed_a, 2), "b": round(observed_b, 2),
                               **_summary(observed_a - observed_b, diffs[t]), "redrawn": redrawn}
    observed = float(np.mean([v["a"] - v["b"] for v in per_task.values()]))
    return {"tasks": per_task, "mean": _summary(observed, diffs.mean(axis=0)), "resamples": resamples, "seed": seed}


def _summary(observed: float, draws: np.ndarray) -> dict[str, Any]:
    low, high = np.percentile(draws, [2.5, 97.5])

    def r(x: float) -> float:
        return round(float(x), 2) + 0.0  # + 0.0: no "-0.0" in the report

    return {"a_minus_b": r(observed), "ci95": [r(low), r(high)], "p_a_ahead": round(float((draws > 0).mean()), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", help="embedder A (name or checkpoint, with [options])")
    parser.add_argument("b", help="embedder B")
    parser.add_argument("--tasks", default="stsb,sick,scifact", help="STS / retrieval tasks of the suite")
    parser.add_argument("--suite", default="full", help="evaluation suite (default: full test sets)")
    parser.add_argument("--task", action="append", default=None, metavar="KIND:PATH",
                        help="your own data instead of --tasks (sts:FILE.csv, beir:FOLDER; repeatable)")
    parser.add_argument("--task-instruction", default=None, help="query instruction of --task beir")
    parser.add_argument("--sts-sample", type=int, default=None, metavar="N",
                        help="resample a seeded subsample of N pairs of each --task sts file (seed 0: with "
                             "the STS-B dev file and 400, the pairs `facet train` selects on)")
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache-dir", type=Path, default=None, help="the cache `facet eval --cache-dir` wrote")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.task:
        try:
            tasks = build_user_tasks(args.task, args.task_instruction)
        except InvalidRequestError as e:
            parser.error(str(e))
        unsupported = [t.name for t in tasks if not isinstance(t, (StsTask, RetrievalTask))]
        if unsupported:
            parser.error(f"only STS and retrieval tasks can be resampled, not {', '.join(unsupported)}")
    else:
        tasks = build_tasks(get_settings().shared_data_dir, args.suite, resolve_task_names(args.tasks))
    if args.sts_sample is not None:
        # User STS tasks draw with the suites' seed (0), as the trainer's dev sample does (tested).
        user_sts = [t for t in tasks if isinstance(t, StsTask)] if args.task else []
        if not user_sts:
            parser.error("--sts-sample applies to --task sts:FILE only")
        if args.sts_sample < 2:
            parser.error(f"--sts-sample must be at least 2, got {args.sts_sample}")
        for task in user_sts:
            task.sample = args.sts_sample
    cache = EmbeddingCache(args.cache_dir)
    ctx_a, ctx_b = (EvalContext(load_embedder(name), cache, batch_size=16) for name in (args.a, args.b))
    result = {"a": args.a, "b": args.b, "suite": "user" if args.task else args.suite, "user_tasks": args.task,
              "sts_sample": args.sts_sample,
              **paired_bootstrap(tasks, ctx_a, ctx_b, resamples=args.resamples, seed=args.seed)}
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
