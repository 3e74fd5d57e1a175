"""Every metric against small cases worked out by hand (the arithmetic is in the comments)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.evaluation import metrics


def test_spearman_with_ties_matches_hand_computation() -> None:
    # y ranks with the tie at 7 sharing ranks 3 and 4: [1, 2, 3.5, 5, 3.5]; x ranks 1..5.
    # Centred: dx = [-2,-1,0,1,2], dy = [-2,-1,0.5,2,0.5]; sum dx*dy = 4+1+0+2+1 = 8,
    # sum dx^2 = 10, sum dy^2 = 4+1+0.25+4+0.25 = 9.5  ->  rho = 8 / sqrt(95).
    rho = metrics.spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7])
    assert rho == pytest.approx(8 / math.sqrt(95), abs=1e-12)


def test_spearman_monotone_and_reversed() -> None:
    assert metrics.spearman([0.1, 0.5, 0.2], [1, 30, 2]) == pytest.approx(1.0)
    assert metrics.spearman([1, 2, 3, 4], [9, 7, 5, 0]) == pytest.approx(-1.0)


def test_spearman_rejects_bad_input() -> None:
    with pytest.raises(metrics.UndefinedMetricError, match="constant"):
        metrics.spearman([1, 2, 3], [4, 4, 4])
    with pytest.raises(ValueError, match="equal length"):
        metrics.spearman([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="two items"):
        metrics.spearman([1], [2])


def test_spearman_refuses_nan_and_infinity() -> None:
    """NaN has no rank: four NaN took ranks 1-4 from their positions and scored 1.0."""
    nan = float("nan")
    with pytest.raises(ValueError, match="first side has 4 NaN or infinite"):
        metrics.spearman([nan] * 4, [1, 2, 3, 4])
    with pytest.raises(ValueError, match="second side has 1 NaN or infinite"):
        metrics.spearman([1, 2, 3], [1, float("inf"), 3])
    with pytest.raises(ValueError, match="finite") as caught:
        metrics.spearman([1, nan, 3], [1, 2, 3])
    assert not isinstance(caught.value, metrics.UndefinedMetricError)  # wrong input, not undefined


def test_ndcg_graded_hand_case() -> None:
    # ranked d1 (0), d2 (1), d3 (2): DCG = 0 + 1/log2(3) + 2/log2(4) = 0.630930 + 1
    # ideal: 2, 1 -> IDCG = 2/log2(2) + 1/log2(3) = 2 + 0.630930
    rel = {"d2": 1.0, "d3": 2.0}
    expected = (1 / math.log2(3) + 1.0) / (2.0 + 1 / math.log2(3))
    assert metrics.ndcg_at_k(["d1", "d2", "d3"], rel, k=3) == pytest.approx(expected)
    assert expected == pytest.approx(0.619906, abs=1e-6)


def test_ndcg_cutoff_and_missing_relevant() -> None:
    rel = {"d2": 1.0, "d3": 2.0}
    assert metrics.ndcg_at_k(["d1", "d2", "d3"], rel, k=1) == 0.0
    # d9 is relevant but never retrieved: DCG = 1, IDCG = 1 + 1/log2(3).
    got = metrics.ndcg_at_k(["d1"], {"d1": 1, "d9": 1}, k=10)
    assert got == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert metrics.ndcg_at_k(["a", "b"], {"a": 1}, k=10) == 1.0
    assert metrics.ndcg_at_k(["a"], {}, k=10) == 0.0
    with pytest.raises(ValueError):
        metrics.ndcg_at_k(["a"], {"a": 1}, k=0)


def test_ndcg_counts_a_repeated_document_once() -> None:
    """`ndcg_at_k(['a', 'a', 'a'], {'a': 1})` was 2.13: each repeat earned the gain again."""
    assert metrics.ndcg_at_k(["a", "a", "a"], {"a": 1}) == pytest.approx(1.0)
    # The repeat keeps its position and earns nothing: DCG = 1 + 0 + 1/log2(4) = 1.5,
    # IDCG = 1 + 1/log2(3); as Recall, which counts a once.
    rel = {"a": 1.0, "b": 1.0}
    assert metrics.ndcg_at_k(["a", "a", "b"], rel, k=3) == pytest.approx(1.5 / (1 + 1 / math.log2(3)))
    assert metrics.ndcg_at_k(["x", "b", "b", "a"], rel, k=10) == pytest.approx(
        (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3)))
    assert metrics.recall_at_k(["a", "a", "b"], rel, k=2) == 0.5
    for ranked in (["a"] * 20, ["b", "a"] * 10, ["x", "a", "x", "a", "b", "b"]):
        assert 0.0 <= metrics.ndcg_at_k(ranked, rel, k=10) <= 1.0


def test_recall_counts_only_positive_judgements() -> None:
    rel = {"b": 1, "x": 2, "c": 0}  # c is judged not relevant
    assert metrics.recall_at_k(["a", "b", "c", "d"], rel, k=1) == 0.0
    assert metrics.recall_at_k(["a", "b", "c", "d"], rel, k=2) == 0.5
    assert metrics.recall_at_k(["x", "b"], rel, k=100) == 1.0
    assert metrics.recall_at_k(["x"], {"x": 0}, k=5) == 0.0


def test_mean_over_queries_counts_unranked_queries_as_zero() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}}
    rankings = {"q1": ["a"], "q2": ["z", "b"]}  # q3 missing -> 0
    # q1 ndcg 1; q2: DCG = 1/log2(3), IDCG = 1; q3: 0
    expected = (1 + 1 / math.log2(3) + 0) / 3
    assert metrics.mean_over_queries(rankings, qrels, "ndcg", 10) == pytest.approx(expected)
    assert metrics.mean_over_queries(rankings, qrels, "recall", 1) == pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        metrics.mean_over_queries(rankings, qrels, "map", 10)


def test_v_measure_hand_case() -> None:
    # true [0,0,1,1], pred [0,0,0,1] (entropies in bits; the ratio does not depend on the base):
    # H(C)=1; H(C|K) = 3/4 * H(2/3,1/3) = 0.75 * 0.918296 = 0.688722 -> h = 0.311278
    # H(K) = H(3/4,1/4) = 0.811278; H(K|C) = 1/2 * H(1/2,1/2) = 0.5 -> c = 1 - 0.5/0.811278 = 0.383689
    # V = 2hc / (h + c)
    h = 1 - 0.75 * (-(2 / 3) * math.log2(2 / 3) - (1 / 3) * math.log2(1 / 3))
    hk = -(0.75 * math.log2(0.75) + 0.25 * math.log2(0.25))
    c = 1 - 0.5 / hk
    expected = 2 * h * c / (h + c)
    assert metrics.v_measure([0, 0, 1, 1], [0, 0, 0, 1]) == pytest.approx(expected, abs=1e-9)
    assert expected == pytest.approx(0.343711, abs=1e-5)


def test_v_measure_extremes() -> None:
    assert metrics.v_measure([0, 0, 1, 1], [5, 5, 3, 3]) == pytest.approx(1.0)
    assert metrics.v_measure([0, 0, 1, 1], [0, 0, 0, 0]) == pytest.approx(0.0)
    with pytest.raises(ValueError):
        metrics.v_measure([0, 1], [0])


def test_harmonic_mean() -> None:
    assert metrics.harmonic_mean([0.5, 1.0]) == pytest.approx(2 / (2 + 1))
    assert metrics.harmonic_mean([0.2, 0.4, 0.4]) == pytest.approx(3 / (5 + 2.5 + 2.5))
    assert metrics.harmonic_mean([0.3, 0.0]) == 0.0
    with pytest.raises(ValueError):
        metrics.harmonic_mean([])
    with pytest.raises(ValueError):
        metrics.harmonic_mean([0.5, -0.1])


def test_accuracy() -> None:
    assert metrics.accuracy(["a", "b", "c", "d"], ["a", "b", "x", "d"]) == 0.75
    with pytest.raises(ValueError):
        metrics.accuracy(["a"], ["a", "b"])
    with pytest.raises(ValueError):
        metrics.accuracy([], [])


def test_top_k_orders_best_first_and_breaks_ties_by_index() -> None:
    scores = np.array([[0.1, 0.9, 0.5, 0.9], [3.0, 2.0, 1.0, 0.0]])
    assert metrics.top_k(scores, 3).tolist() == [[1, 3, 2], [0, 1, 2]]
    assert metrics.top_k(scores, 10).tolist() == [[1, 3, 2, 0], [0, 1, 2, 3]]


def test_top_k_keeps_the_lower_indices_among_ties_at_the_cut_off() -> None:
    """argpartition chose arbitrarily among scores tied at the k-th place: [4, 0, 2], not [4, 0, 1]."""
    assert metrics.top_k(np.array([[0, 0, 0, 0, 1.0]]), 3).tolist() == [[4, 0, 1]]
    assert metrics.top_k(np.zeros((2, 7), dtype=np.float32), 3).tolist() == [[0, 1, 2]] * 2
    # Many ties (scores on a 0.1 grid), many cut-offs, against a full sort by (-score, index).
    rng = np.random.default_rng(0)
    scores = np.round(rng.random((40, 60)), 1).astype(np.float32)
    for k in (1, 2, 5, 13, 59, 60, 100):
        expected = [sorted(range(60), key=lambda j, row=row: (-row[j], j))[:k] for row in scores]
        assert metrics.top_k(scores, k).tolist() == expected, k
    assert metrics.top_k(scores, 0).shape == (40, 0)


def test_paired_bootstrap_over_queries() -> None:
    # a leads by 0.1 on every query: no resample can say otherwise.
    sure = metrics.paired_bootstrap([0.5, 0.7, 0.9], [0.4, 0.6, 0.8], resamples=200)
    assert sure == {"diff": 10.0, "ci95_low": 10.0, "ci95_high": 10.0, "share_a_ahead": 1.0}
    # one query each way: the interval straddles zero, and the same seed gives the same draws.
    mixed = metrics.paired_bootstrap([1.0, 0.0], [0.0, 1.0], resamples=500, seed=3)
    assert mixed["diff"] == 0.0 and mixed["ci95_low"] < 0 < mixed["ci95_high"]
    assert 0.1 < mixed["share_a_ahead"] < 0.4  # a leads only when both draws are the first query
    assert metrics.paired_bootstrap([1.0, 0.0], [0.0, 1.0], resamples=500, seed=3) == mixed
