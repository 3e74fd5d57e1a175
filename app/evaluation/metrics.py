"""Evaluation metrics as pure functions of plain arrays and dicts.

All return fractions in [0, 1] (Spearman in [-1, 1]); reports multiply by 100.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np


class UndefinedMetricError(ValueError):
    """The metric has no value for these inputs (Spearman when one side is constant), as
    opposed to inputs that are wrong (lengths that differ, NaN)."""


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks; tied values share the mean of the ranks they span."""
    order = np.argsort(values, kind="mergesort")
    sorted_vals = values[order]
    ranks = np.empty(len(values), dtype=np.float64)
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and sorted_vals[j + 1] == sorted_vals[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Spearman rank correlation: Pearson correlation of average ranks (ties handled).

    Raises:
        ValueError: lengths differ, fewer than two items, or a NaN or infinite value (NaN has
            no rank: it used to take one from its position, so four NaN scored 1.0).
        UndefinedMetricError: one side is constant (exactly; a caller that knows its scale
            should test for "constant up to rounding" itself, as ``StsTask`` does).
    """
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"spearman needs two 1-d sequences of equal length, got {a.shape} and {b.shape}")
    if len(a) < 2:
        raise ValueError("spearman needs at least two items")
    for side, values in (("first", a), ("second", b)):
        bad = int((~np.isfinite(values)).sum())
        if bad:
            raise ValueError(f"spearman needs finite values; the {side} side has {bad} NaN or infinite")
    ra, rb = _average_ranks(a), _average_ranks(b)
    ra -= ra.mean()
    rb -= rb.mean()
    denom = math.sqrt(float((ra * ra).sum()) * float((rb * rb).sum()))
    if denom == 0.0:
        raise UndefinedMetricError("spearman is undefined when one side is constant")
    return float((ra * rb).sum() / denom)


def dcg(gains: Sequence[float]) -> float:
    """Discounted cumulative gain: sum of gain_i / log2(i + 1), i 1-based (linear gain)."""
    return float(sum(g / math.log2(i + 2) for i, g in enumerate(gains)))


def ndcg_at_k(ranked: Sequence[str], relevance: Mapping[str, float], k: int = 10) -> float:
    """nDCG@k of one ranked list.

    Args:
        ranked: document ids, best first (only the first ``k`` positions count). A document
            given more than once earns its gain at its first position only; a repeat keeps its
            position and earns nothing (as in ``recall_at_k``, where it is one document).
        relevance: graded relevance per document id; ids absent or <= 0 are not relevant.
        k: cut-off.

    Returns:
        DCG@k / ideal DCG@k, in [0, 1]; 0.0 when nothing is relevant.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    seen: set[str] = set()
    gains = []
    for doc in ranked[:k]:
        gains.append(0.0 if doc in seen else max(float(relevance.get(doc, 0.0)), 0.0))
        seen.add(doc)
    ideal = sorted((max(float(v), 0.0) for v in relevance.values()), reverse=True)[:k]
    idcg = dcg(ideal)
    return dcg(gains) / idcg if idcg > 0 else 0.0


def recall_at_k(ranked: Sequence[str], relevance: Mapping[str, float], k: int = 100) -> float:
    """Fraction of the relevant documents (relevance > 0) in the first ``k``; 0.0 if none."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    relevant = {doc for doc, rel in relevance.items() if rel > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def mean_over_queries(
    rankings: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, float]],
    metric: str,
    k: int,
) -> float:
    """Mean of ``ndcg`` or ``recall`` at ``k`` over the queries that have qrels.

    A query in ``qrels`` without a ranking counts as an empty ranking (score 0).
    """
    funcs = {"ndcg": ndcg_at_k, "recall": recall_at_k}
    if metric not in funcs:
        raise ValueError(f"metric must be one of {sorted(funcs)}, got {metric!r}")
    scores = [funcs[metric](rankings.get(q, []), rel, k) for q, rel in qrels.items()]
    if not scores:
        raise ValueError("no queries with relevance judgements to average over")
    return float(np.mean(scores))


def v_measure(labels_true: Sequence[int] | np.ndarray, labels_pred: Sequence[int] | np.ndarray) -> float:
    """V-measure (harmonic mean of homogeneity and completeness, beta = 1)."""
    from sklearn.metrics import v_measure_score

    if len(labels_true) != len(labels_pred):
        raise ValueError(f"label lists differ in length: {len(labels_true)} vs {len(labels_pred)}")
    return float(v_measure_score(labels_true, labels_pred))


def harmonic_mean(values: Sequence[float]) -> float:
    """Harmonic mean; 0.0 if any value is 0. Raises ValueError on empty input or negatives."""
    if len(values) == 0:
        raise ValueError("harmonic mean of nothing")
    if any(v < 0 for v in values):
        raise ValueError(f"harmonic mean needs non-negative values, got {list(values)}")
    if any(v == 0 for v in values):
        return 0.0
    return float(len(values) / sum(1.0 / v for v in values))


def accuracy(gold: Sequence[object], predicted: Sequence[object]) -> float:
    """Fraction of positions where prediction equals gold."""
    if len(gold) != len(predicted):
        raise ValueError(f"gold and predicted differ in length: {len(gold)} vs {len(predicted)}")
    if len(gold) == 0:
        raise ValueError("accuracy of nothing")
    return sum(1 for g, p in zip(gold, predicted, strict=True) if g == p) / len(gold)


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest scores per row, best first. ``scores`` is (n_queries, n_docs).

    Ties are broken by the lower index so results do not depend on the sort algorithm: among
    equal scores the lower index ranks first, and where equal scores straddle the cut-off the
    lower indices are the ones kept. (NaN scores rank after every number, in no set order.)
    """
    n_queries, n_docs = scores.shape
    k = min(k, n_docs)
    if k <= 0:
        return np.zeros((n_queries, 0), dtype=np.int64)
    # argpartition first: full sorts of (queries x corpus) are the slow part for big corpora.
    if k < n_docs:
        # Partitioned at position k, not k - 1: the first k are the k largest and position k
        # holds the (k+1)-th, at the cost of one partition.
        parted = np.argpartition(-scores, k, axis=1)
        part = parted[:, :k]
        kth = np.take_along_axis(scores, part, axis=1).min(axis=1)
        after = np.take_along_axis(scores, parted[:, k : k + 1], axis=1)[:, 0]
        # argpartition picks arbitrarily among scores equal to the k-th largest; where one of them
        # was left out, that row is redone from every document scoring at least as much.
        straddles = after == kth
    else:
        part = np.broadcast_to(np.arange(n_docs), (n_queries, n_docs))
        kth = np.full(n_queries, -np.inf)
        straddles = np.zeros(n_queries, dtype=bool)
    out = np.empty((n_queries, k), dtype=np.int64)
    for i in range(n_queries):
        cand = np.flatnonzero(scores[i] >= kth[i]) if straddles[i] else part[i]
        order = np.lexsort((cand, -scores[i, cand]))[:k]
        out[i] = cand[order]
    return out


def paired_bootstrap(a: Sequence[float], b: Sequence[float], resamples: int = 2000,
                     seed: int = 0) -> dict[str, float]:
    """Per-query scores of two systems on the same queries: the mean of a - b (x 100), a 95%
    percentile interval from resampling the queries (the same resample for both) and the share of
    resamples where a leads."""
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    rng = np.random.default_rng(seed)
    draws = diff[rng.integers(0, len(diff), size=(resamples, len(diff)))].mean(axis=1)
    return {"diff": round(100 * float(diff.mean()), 2), "ci95_low": round(100 * float(np.percentile(draws, 2.5)), 2),
            "ci95_high": round(100 * float(np.percentile(draws, 97.5)), 2),
            "share_a_ahead": round(float((draws > 0).mean()), 4)}
