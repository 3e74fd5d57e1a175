"""Cluster explanations from InBedder answers.

InBedder answers the clustering instruction about every member in a few content
words ("card arrival", "refund"). Those answers name what a cluster has in common
far better than the raw texts do, so a cluster is explained by:

* keywords: each cluster's answers concatenated into one document, TF-IDF across
  the clusters' documents (stopwords dropped), the top terms per cluster; words that
  every cluster's answers use score low, words one cluster uses a lot score high;
* representatives: the members closest to the cluster centroid (cosine) when
  embeddings are given, else the members whose answers contain the most keywords.

``explain_clusters`` works on answers from anywhere; ``explain_with_inbedder``
generates them first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from embedders.training.instruct_data import STOPWORDS


@dataclass
class ClusterExplanation:
    """What one cluster is about.

    Attributes:
        cluster: the cluster label.
        size: number of members.
        keywords: top TF-IDF terms of the members' answers, best first (fewer than
            ``top_k`` when the answers hold fewer distinct content words).
        representatives: member texts that show the cluster best, best first.
        representative_indices: positions of those members in the input lists.
    """

    cluster: int
    size: int
    keywords: list[str]
    representatives: list[str]
    representative_indices: list[int]


@runtime_checkable
class AnswerGenerator(Protocol):
    """What ``explain_with_inbedder`` needs from a model (``InBedderEmbedder`` has it)."""

    def generate_answers(self, texts: Sequence[str], instruction: str | None, max_new_tokens: int | None = None,
                         batch_size: int = 16) -> list[str]: ...


def _stop_words() -> list[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return sorted(STOPWORDS | ENGLISH_STOP_WORDS)


def _check_inputs(texts: Sequence[str], labels: Sequence[int], embeddings: Any, top_k: int,
                  members: int) -> tuple[list[int], np.ndarray | None]:
    """Validate the shared arguments; returns labels as ints and embeddings as a float array."""
    if len(texts) == 0:
        raise ValueError("explain_clusters needs at least one text; got an empty list")
    if len(labels) != len(texts):
        raise ValueError(f"texts and labels must have the same length, got {len(texts)} texts and "
                         f"{len(labels)} labels")
    for name, value in (("top_k", top_k), ("members", members)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    try:
        ids = [int(label) for label in labels]
    except (TypeError, ValueError) as e:
        raise ValueError(f"labels must be integer cluster ids: {e}") from e
    odd = [label for i, label in zip(ids, labels, strict=True) if i != label]
    if odd:
        raise ValueError(f"labels must be integer cluster ids, got {odd[0]!r}")
    matrix = None
    if embeddings is not None:
        matrix = np.asarray(embeddings, dtype=np.float64)
        if matrix.ndim != 2 or matrix.shape[0] != len(texts):
            raise ValueError(f"embeddings must have shape ({len(texts)}, dim), one row per text; "
                             f"got {matrix.shape}")
        if not np.isfinite(matrix).all():
            raise ValueError("embeddings contain NaN or infinite values")
    return ids, matrix


def explain_clusters(
    texts: Sequence[str],
    labels: Sequence[int],
    answers: Sequence[str],
    embeddings: np.ndarray | None = None,
    top_k: int = 5,
    members: int = 3,
) -> list[ClusterExplanation]:
    """Keywords and representative members for every cluster.

    Args:
        texts: the clustered texts (what representatives show).
        labels: one integer cluster id per text.
        answers: one InBedder answer per text (what keywords come from).
        embeddings: optional (n, dim) embeddings; representatives are then the members
            nearest the centroid by cosine.
        top_k: keywords per cluster.
        members: representatives per cluster.

    Returns:
        One explanation per distinct label, in increasing label order.

    Raises:
        ValueError: empty input, lengths that differ, non-integer labels, bad
            ``top_k`` / ``members``, or embeddings of the wrong shape.
    """
    ids, matrix = _check_inputs(texts, labels, embeddings, top_k, members)
    if len(answers) != len(texts):
        raise ValueError(f"texts and answers must have the same length, got {len(texts)} texts and "
                         f"{len(answers)} answers")
    bad = [i for i, a in enumerate(answers) if not isinstance(a, str)]
    if bad:
        kind = type(answers[bad[0]]).__name__
        raise ValueError(f"answers[{bad[0]}] is {kind}, not str; every answer must be a string")

    from sklearn.feature_extraction.text import TfidfVectorizer

    clusters = sorted(set(ids))
    member_lists = {c: [i for i, label in enumerate(ids) if label == c] for c in clusters}
    documents = [" ".join(answers[i] for i in member_lists[c]) for c in clusters]
    vectorizer = TfidfVectorizer(stop_words=_stop_words())
    try:
        scores = vectorizer.fit_transform(documents).toarray()  # (clusters, terms)
        terms = vectorizer.get_feature_names_out()
    except ValueError:  # every answer is empty or stopwords only: nothing to rank
        scores, terms = np.zeros((len(clusters), 0)), np.array([], dtype=object)
    analyze = vectorizer.build_analyzer()

    out = []
    for row, c in enumerate(clusters):
        idx = member_lists[c]
        # Highest score first, ties alphabetical, so the output does not depend on dict order.
        ranked = sorted((i for i in range(len(terms)) if scores[row, i] > 0), key=lambda i: (-scores[row, i], terms[i]))
        keywords = [str(terms[i]) for i in ranked[:top_k]]
        if matrix is not None:
            vectors = matrix[idx] / np.maximum(np.linalg.norm(matrix[idx], axis=1, keepdims=True), 1e-12)
            centroid = vectors.mean(axis=0)
            closeness = vectors @ (centroid / max(float(np.linalg.norm(centroid)), 1e-12))
        else:
            wanted = set(keywords)
            closeness = np.array([len(wanted & set(analyze(answers[i]))) for i in idx], dtype=np.float64)
        # Stable sort: equally close members keep their input order.
        best = [idx[j] for j in np.argsort(-closeness, kind="stable")[:members]]
        out.append(ClusterExplanation(c, len(idx), keywords, [texts[i] for i in best], best))
    return out


def explain_with_inbedder(
    model: AnswerGenerator,
    texts: Sequence[str],
    labels: Sequence[int],
    instruction: str | None,
    embeddings: np.ndarray | None = None,
    top_k: int = 5,
    members: int = 3,
    max_new_tokens: int | None = None,
    batch_size: int = 16,
) -> list[ClusterExplanation]:
    """Generate InBedder answers to ``instruction`` for every text, then explain the clusters.

    The instruction should be the one the texts were clustered under, so the answers
    (and the keywords) speak to the same aspect as the clusters.

    Raises:
        ValueError: as ``explain_clusters``; checked before any answer is generated.
    """
    _check_inputs(texts, labels, embeddings, top_k, members)
    answers = model.generate_answers(texts, instruction, max_new_tokens=max_new_tokens, batch_size=batch_size)
    return explain_clusters(texts, labels, answers, embeddings=embeddings, top_k=top_k, members=members)
