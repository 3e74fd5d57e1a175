"""Contrastive training data built from the shared datasets' training splits.

Every source becomes a list of ``Pair`` (query, positive, optional hard negative,
task instruction). Only training material is read: SNLI triplets, STS-B and SICK
train pairs, SciFact *train* qrels (hard negatives mined with TF-IDF from the
corpus), question -> passage pairs from SQuAD, DREAM (train split) and C3 (train
file), and same-label pairs from the Banking77 and Emotion train files. Never the
evaluation test splits, and never CLINC150 or GoalEx (they measure how well the
models follow instructions they were not trained on).
"""

from __future__ import annotations

import csv
import json
import logging
import random
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

logger = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class Pair:
    """One training example.

    Attributes:
        query: encoded with role=query and the instruction.
        positive: the text that should be closest to the query.
        negative: a hard negative, or None.
        instruction: the task instruction for the query side.
        task: source name (batches are drawn from one task at a time).
        label: for label-pair tasks; a batch never holds two pairs with one label
            (they would be false in-batch negatives).
        symmetric: both sides are of the same kind (STS, NLI, same-intent), so the
            positive is encoded like the query, instruction included.
    """

    query: str
    positive: str
    negative: str | None
    instruction: str
    task: str
    label: str | None = None
    symmetric: bool = False


@dataclass
class PairBatch:
    """A batch from one task; what ``training_loss`` receives."""

    queries: list[str]
    positives: list[str]
    negatives: list[str]
    instruction: str
    symmetric: bool
    task: str


SIMILAR = "Retrieve semantically similar text."
INSTRUCTIONS = {
    "snli": "Given a premise, retrieve a hypothesis that is entailed by the premise.",
    "stsb": SIMILAR,
    "sick": SIMILAR,
    "scifact": "Given a scientific claim, retrieve documents that support or refute the claim.",
    "squad": "Given a question, retrieve Wikipedia passages that answer the question.",
    "dream": "Given a question, retrieve the dialogue that answers the question.",
    "c3": "Given a question, retrieve the passage that answers the question.",
    "banking77": "Given an online banking query, retrieve a query with the same intent.",
    "emotion": "Given a message, retrieve a message that expresses the same emotion.",
}


def _jsonl(path: Path) -> Iterator[dict]:
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{line_no}: invalid JSON: {e}") from e


def _truncate_words(text: str, max_words: int) -> str:
    words = text.split()
    return " ".join(words[:max_words])


def load_snli(root: Path) -> list[Pair]:
    return [Pair(r["anchor"], r["positive"], r["negative"], INSTRUCTIONS["snli"], "snli")
            for r in _jsonl(root / "snli" / "nli_triplets_devtest.jsonl")]


def load_stsb(root: Path, min_score: float = 4.0) -> list[Pair]:
    with (root / "stsb_en" / "stsb-en-train.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    return [Pair(a, b, None, INSTRUCTIONS["stsb"], "stsb", symmetric=True)
            for a, b, score in rows if float(score) >= min_score]


def load_sick(root: Path, min_score: float = 4.0) -> list[Pair]:
    with (root / "sick" / "SICK.txt").open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return [Pair(r["sentence_A"], r["sentence_B"], None, INSTRUCTIONS["sick"], "sick", symmetric=True)
            for r in rows if r["SemEval_set"] == "TRAIN" and float(r["relatedness_score"]) >= min_score]


def load_scifact(root: Path, doc_words: int = 200, seed: int = 0) -> list[Pair]:
    """Train-qrel (claim, relevant abstract) pairs; the hard negative is the best TF-IDF
    match among abstracts not relevant to the claim."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    base = root / "beir_scifact"
    corpus = {r["_id"]: f"{r.get('title', '')} {r['text']}".strip() for r in _jsonl(base / "corpus.jsonl")}
    queries = {r["_id"]: r["text"] for r in _jsonl(base / "queries.jsonl")}
    relevant: dict[str, set[str]] = defaultdict(set)
    with (base / "qrels" / "train.tsv").open(encoding="utf-8") as f:
        next(f)
        for line in f:
            qid, did, score = line.split("\t")
            if int(score) > 0 and did in corpus:
                relevant[qid].add(did)
    doc_ids = sorted(corpus)
    vectorizer = TfidfVectorizer(stop_words="english", sublinear_tf=True)
    doc_matrix = vectorizer.fit_transform([corpus[d] for d in doc_ids])
    qids = sorted(q for q in relevant if q in queries)
    scores = (vectorizer.transform([queries[q] for q in qids]) @ doc_matrix.T).toarray()
    pairs = []
    for row, qid in enumerate(qids):
        ranked = scores[row].argsort()[::-1]
        negative = next(doc_ids[i] for i in ranked if doc_ids[i] not in relevant[qid])
        for did in sorted(relevant[qid]):
            pairs.append(Pair(queries[qid], _truncate_words(corpus[did], doc_words),
                              _truncate_words(corpus[negative], doc_words), INSTRUCTIONS["scifact"], "scifact"))
    return pairs


def load_squad(root: Path, doc_words: int = 150) -> list[Pair]:
    return [Pair(r["question"], _truncate_words(r["passage"], doc_words), None, INSTRUCTIONS["squad"], "squad")
            for r in _jsonl(root / "squad2_cs224n" / "qa_triplets.jsonl")]


def load_dream(root: Path, doc_words: int = 150) -> list[Pair]:
    return [Pair(r["question"], _truncate_words(r["passage"], doc_words), None, INSTRUCTIONS["dream"], "dream")
            for r in _jsonl(root / "dream" / "qa_triplets.jsonl") if r.get("split") == "train"]


def load_c3(root: Path, doc_words: int = 150) -> list[Pair]:
    return [Pair(r["value"], _truncate_words(r["key"], doc_words), None, INSTRUCTIONS["c3"], "c3")
            for r in _jsonl(root / "inbedder_c3_qa" / "c3.train.en.jsonl")]


def _same_label_pairs(items: list[tuple[str, str]], task: str, seed: int, per_label: int) -> list[Pair]:
    rng = random.Random(seed)
    by_label: dict[str, list[str]] = defaultdict(list)
    for text, label in items:
        by_label[label].append(text)
    pairs = []
    for label in sorted(by_label):
        texts = by_label[label]
        if len(texts) < 2:
            continue
        for _ in range(per_label):
            a, b = rng.sample(texts, 2)
            pairs.append(Pair(a, b, None, INSTRUCTIONS[task], task, label=label, symmetric=True))
    return pairs


def banking77_train(root: Path) -> list[tuple[str, str]]:
    """(text, intent) rows of the Banking77 training split."""
    with (root / "banking77" / "train.csv").open(encoding="utf-8", newline="") as f:
        return [(r["text"], r["category"]) for r in csv.DictReader(f)]


def emotion_train(root: Path) -> list[tuple[str, str]]:
    """(text, emotion) rows of the Emotion training split (``text;label`` lines after a header)."""
    items = []
    with (root / "emotion" / "train.txt").open(encoding="utf-8") as f:
        next(f)
        for line in f:
            text, _, label = line.rstrip("\n").rpartition(";")
            if text:
                items.append((text, label))
    return items


def load_banking77(root: Path, seed: int = 0, per_label: int = 30) -> list[Pair]:
    return _same_label_pairs(banking77_train(root), "banking77", seed, per_label)


def load_emotion(root: Path, seed: int = 0, per_label: int = 300) -> list[Pair]:
    return _same_label_pairs(emotion_train(root), "emotion", seed, per_label)


LOADERS: dict[str, Callable[[Path], list[Pair]]] = {
    "snli": load_snli, "stsb": load_stsb, "sick": load_sick, "scifact": load_scifact,
    "squad": load_squad, "dream": load_dream, "c3": load_c3,
    "banking77": load_banking77, "emotion": load_emotion,
}
DEFAULT_TASKS = tuple(LOADERS)


def build_pairs(data_dir: str | Path, tasks: tuple[str, ...] = DEFAULT_TASKS) -> dict[str, list[Pair]]:
    """Load every requested source.

    Raises:
        ValueError: an unknown task name (the valid ones are listed).
        FileNotFoundError: a dataset file is missing (its path is named).
    """
    return load_sources(LOADERS, data_dir, tasks, "pairs")


def load_sources(loaders: Mapping[str, Callable[[Path], list[T]]], data_dir: str | Path,
                 tasks: tuple[str, ...], unit: str) -> dict[str, list[T]]:
    """Run the named loaders on ``data_dir``; every name is checked before any file is read.

    Raises:
        ValueError: an unknown task name (the valid ones are listed).
        FileNotFoundError: a dataset file is missing (its path is named).
    """
    root = Path(data_dir)
    unknown = [t for t in tasks if t not in loaders]
    if unknown:
        raise ValueError(f"unknown training tasks {unknown}; valid: {', '.join(loaders)}")
    out = {}
    for task in tasks:
        items = loaders[task](root)
        logger.info("training data %s: %d %s", task, len(items), unit)
        out[task] = items
    return out


class BatchSampler:
    """Draws single-task batches: a task with probability proportional to sqrt(size),
    then pairs without replacement (reshuffled each epoch of that task), never two
    pairs with the same label in one batch. Deterministic for a seed."""

    def __init__(self, pairs: dict[str, list[Pair]], batch_size: int, seed: int = 0) -> None:
        if batch_size < 2:
            raise ValueError("batch_size must be >= 2 for in-batch negatives")
        self.pairs = {t: p for t, p in pairs.items() if len(p) >= 2}
        if not self.pairs:
            raise ValueError("no training pairs")
        self.batch_size = batch_size
        self.rng = random.Random(seed)
        self.tasks = sorted(self.pairs)
        self.weights = [len(self.pairs[t]) ** 0.5 for t in self.tasks]
        self._queues: dict[str, list[Pair]] = {t: [] for t in self.tasks}

    def _refill(self, task: str) -> None:
        items = list(self.pairs[task])
        self.rng.shuffle(items)
        self._queues[task].extend(items)

    def next_batch(self) -> PairBatch:
        task = self.rng.choices(self.tasks, weights=self.weights)[0]
        chosen: list[Pair] = []
        labels: set[str] = set()
        queue = self._queues[task]
        skipped: list[Pair] = []
        attempts = 0
        while len(chosen) < self.batch_size and attempts < 4 * self.batch_size + len(self.pairs[task]):
            attempts += 1
            if not queue:
                self._refill(task)
            pair = queue.pop()
            if pair.label is not None and pair.label in labels:
                skipped.append(pair)
                continue
            chosen.append(pair)
            if pair.label is not None:
                labels.add(pair.label)
        queue.extend(skipped)
        negatives = [p.negative for p in chosen if p.negative is not None]
        # Hard negatives are used only when every pair of the batch has one.
        return PairBatch(
            queries=[p.query for p in chosen], positives=[p.positive for p in chosen],
            negatives=negatives if len(negatives) == len(chosen) else [],
            instruction=chosen[0].instruction, symmetric=chosen[0].symmetric, task=task,
        )
