"""Evaluation metrics as pure functions of plain arrays and dicts.

All return fractions in [0, 1] (Spearman in [-1, 1]); reports multiply by 100.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np


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
        ValueError: lengths differ, fewer than two items, or one side is constant.
    """
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"spearman needs two 1-d sequences of equal length, got {a.shape} and {b.shape}")
    if len(a) < 2:
        raise ValueError("spearman needs at least two items")
    ra, rb = _average_ranks(a), _average_ranks(b)
    ra -= ra.mean()
    rb -= rb.mean()
    denom = math.sqrt(float((ra * ra).sum()) * float((rb * rb).sum()))
    if denom == 0.0:
        raise ValueError("spearman is undefined when one side is constant")
    return float((ra * rb).sum() / denom)


def dcg(gains: Sequence[float]) -> float:
    """Discounted cumulative gain: sum of gain_i / log2(i + 1), i 1-based (linear gain)."""
    return float(sum(g / math.log2(i + 2) for i, g in enumerate(gains)))


def ndcg_at_k(ranked: Sequence[str], relevance: Mapping[str, float], k: int = 10) -> float:
    """nDCG@k of one ranked list.

    Args:
        ranked: document ids, best first (only the first ``k`` count).
        relevance: graded relevance per document id; ids absent or <= 0 are not relevant.
        k: cut-off.

    Returns:
        DCG@k / ideal DCG@k; 0.0 when nothing is relevant.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    gains = [max(float(relevance.get(doc, 0.0)), 0.0) for doc in ranked[:k]]
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

    Ties are broken by the lower index so results do not depend on the sort algorithm.
    """
    n_docs = scores.shape[1]
    k = min(k, n_docs)
    if k == 0:
        return np.zeros((scores.shape[0], 0), dtype=np.int64)
    # argpartition first: full sorts of (queries x corpus) are the slow part for big corpora.
    part = (
        np.argpartition(-scores, k - 1, axis=1)[:, :k]
        if k < n_docs
        else np.tile(np.arange(n_docs), (scores.shape[0], 1))
    )
    out = np.empty_like(part)
    for i in range(scores.shape[0]):
        cand = part[i]
        order = np.lexsort((cand, -scores[i, cand]))
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
