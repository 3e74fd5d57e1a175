"""Contrastive training data built from the shared datasets' training splits.

Every source becomes a list of ``Pair`` (query, positive, optional hard negative,
optional gold score, instruction). Only training material is read: SNLI triplets,
STS-B and SICK train pairs, SciFact *train* qrels minus a held-out dev part (hard
negatives mined with TF-IDF from the corpus), question -> passage pairs from SQuAD,
DREAM (train split) and C3 (train file), and same-label pairs from the Banking77 and
Emotion train files. Never the evaluation test splits, and never CLINC150 or GoalEx
(they measure how well the models follow instructions they were not trained on).

The instruction rule (the same as evaluation's): symmetric tasks (NLI, STS) carry no
instruction on either side; retrieval tasks carry their instruction on the query side
only, and documents are read bare.

The default mix (``DEFAULT_MIX``) teaches similarity first: SNLI triplets with hard
negatives are half the batches; every scored STS-B and SICK train pair feeds a CoSENT
ranking loss; SICK entailment pairs (with a contradiction of the same premise as hard
negative where one exists) add NLI batches; SciFact and SQuAD retrieval batches are
about a fifth. docs/training.md gives the measurements behind the choice.
"""

from __future__ import annotations

import csv
import json
import logging
import math
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
        instruction: the task instruction for the query side, or None (symmetric tasks).
        task: source name (batches are drawn from one task at a time).
        label: for label-pair tasks; a batch never holds two pairs with one label
            (they would be false in-batch negatives).
        symmetric: both sides are of the same kind (STS, NLI, same-intent), so the
            positive is encoded like the query, instruction included.
        score: gold similarity of (query, positive) for scored tasks, which train with a
            ranking (CoSENT) loss instead of InfoNCE.
    """

    query: str
    positive: str
    negative: str | None
    instruction: str | None
    task: str
    label: str | None = None
    symmetric: bool = False
    score: float | None = None

    def texts(self) -> tuple[str, ...]:
        return (self.query, self.positive) if self.negative is None else (self.query, self.positive, self.negative)


@dataclass
class PairBatch:
    """A batch from one task; what ``training_loss`` receives.

    ``negatives`` are extra candidates shared by the whole batch (any number, possibly
    none). ``scores``, when present, holds one gold score per (query, positive) pair and
    selects the ranking loss.
    """

    queries: list[str]
    positives: list[str]
    negatives: list[str]
    instruction: str | None
    symmetric: bool
    task: str
    scores: list[float] | None = None


SIMILAR = "Retrieve semantically similar text."
INSTRUCTIONS: dict[str, str | None] = {
    # Symmetric tasks: no instruction on either side (evaluation's STS reads bare texts too).
    "snli": None,
    "sick-nli": None,
    "stsb": None,
    "sick": None,
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
    """SNLI (premise, entailed hypothesis, contradicted hypothesis) triplets."""
    return [Pair(r["anchor"], r["positive"], r["negative"], INSTRUCTIONS["snli"], "snli", symmetric=True)
            for r in _jsonl(root / "snli" / "nli_triplets_devtest.jsonl")]


def load_stsb(root: Path) -> list[Pair]:
    """Every STS-B train pair with its gold score (0-5), for the ranking loss."""
    with (root / "stsb_en" / "stsb-en-train.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    return [Pair(a, b, None, INSTRUCTIONS["stsb"], "stsb", symmetric=True, score=float(score))
            for a, b, score in rows]


def _sick_train(root: Path) -> list[dict[str, str]]:
    with (root / "sick" / "SICK.txt").open(encoding="utf-8", newline="") as f:
        return [r for r in csv.DictReader(f, delimiter="\t") if r["SemEval_set"] == "TRAIN"]


def load_sick(root: Path) -> list[Pair]:
    """Every SICK TRAIN pair with its relatedness score (1-5), for the ranking loss."""
    return [Pair(r["sentence_A"], r["sentence_B"], None, INSTRUCTIONS["sick"], "sick", symmetric=True,
                 score=float(r["relatedness_score"])) for r in _sick_train(root)]


def load_sick_nli(root: Path) -> list[Pair]:
    """SICK TRAIN entailment pairs; a contradiction of the same premise is the hard negative
    when the set has one (SICK pairs each premise with several hypotheses)."""
    rows = _sick_train(root)
    contradictions: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        if r["entailment_label"] == "CONTRADICTION":
            contradictions[r["sentence_A"]].append(r["sentence_B"])
    pairs = []
    for r in rows:
        if r["entailment_label"] == "ENTAILMENT" and r["sentence_A"] != r["sentence_B"]:
            negative = next(iter(contradictions.get(r["sentence_A"], [])), None)
            pairs.append(Pair(r["sentence_A"], r["sentence_B"], negative, INSTRUCTIONS["sick-nli"], "sick-nli",
                              symmetric=True))
    return pairs


SCIFACT_DEV_FRACTION = 0.2


def scifact_train_qrels(root: Path) -> dict[str, set[str]]:
    """SciFact train qrels: query id -> relevant document ids."""
    relevant: dict[str, set[str]] = defaultdict(set)
    with (root / "beir_scifact" / "qrels" / "train.tsv").open(encoding="utf-8") as f:
        next(f)
        for line in f:
            qid, did, score = line.strip().split("\t")
            if int(score) > 0:
                relevant[qid].add(did)
    return relevant


def scifact_dev_query_ids(root: Path, seed: int = 0) -> set[str]:
    """The fixed part of SciFact's *train* queries held out from training for model
    selection (``SCIFACT_DEV_FRACTION`` of them, seeded): never trained on, never a test query."""
    qids = sorted(scifact_train_qrels(root))
    count = round(len(qids) * SCIFACT_DEV_FRACTION)
    return set(random.Random(seed).sample(qids, count))


def load_scifact(root: Path, doc_words: int = 200, seed: int = 0) -> list[Pair]:
    """Train-qrel (claim, relevant abstract) pairs, minus the dev queries; the hard negative
    is the best TF-IDF match among abstracts not relevant to the claim."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    base = root / "beir_scifact"
    corpus = {r["_id"]: f"{r.get('title', '')} {r['text']}".strip() for r in _jsonl(base / "corpus.jsonl")}
    queries = {r["_id"]: r["text"] for r in _jsonl(base / "queries.jsonl")}
    held_out = scifact_dev_query_ids(root)
    relevant = {q: {d for d in docs if d in corpus} for q, docs in scifact_train_qrels(root).items()
                if q not in held_out}
    doc_ids = sorted(corpus)
    vectorizer = TfidfVectorizer(stop_words="english", sublinear_tf=True)
    doc_matrix = vectorizer.fit_transform([corpus[d] for d in doc_ids])
    qids = sorted(q for q in relevant if q in queries and relevant[q])
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
    "snli": load_snli, "sick-nli": load_sick_nli, "stsb": load_stsb, "sick": load_sick,
    "scifact": load_scifact, "squad": load_squad, "dream": load_dream, "c3": load_c3,
    "banking77": load_banking77, "emotion": load_emotion,
}
# Share of batches per source (docs/training.md: why these sources and not DREAM, C3,
# Banking77 or Emotion).
DEFAULT_MIX: dict[str, float] = {
    "snli": 0.5, "sick-nli": 0.1, "stsb": 0.12, "sick": 0.08, "scifact": 0.1, "squad": 0.1,
}
DEFAULT_TASKS = tuple(DEFAULT_MIX)


def parse_mix(spec: str, valid: Mapping[str, object] | None = None) -> dict[str, float] | None:
    """``"snli:0.5,stsb:0.2,scifact"`` -> weights per source; a name without a weight is 0.0
    here, and shares what the weights leave by sqrt(size) once loaded (``mix_weights``). None
    for an empty spec: use the default mix.

    Args:
        valid: the known source names (default: the contrastive pair sources).

    Raises:
        ValueError: an unknown source, one named twice, an empty item (``"snli,"``), a weight
            that is not a positive number, or weights that leave nothing to the sources given
            without one (summing to 1 or more: ``"snli:0.5,stsb:0.5,scifact"``).
    """
    valid = LOADERS if valid is None else valid
    if not spec.strip():
        return None
    items = [part.strip() for part in spec.split(",")]
    if "" in items:  # (a trailing comma, or an unset variable between two: "snli,,stsb")
        raise ValueError(f"an empty source in {spec!r}: give each source once, between commas")
    mix: dict[str, float] = {}
    for item in items:
        name, sep, weight = item.partition(":")
        name = name.strip()
        if name not in valid:
            raise ValueError(f"unknown training source {name!r}; valid: {', '.join(valid)}")
        if name in mix:  # the last weight won without a word ("snli:0.9,stsb:0.1,snli:0.01")
            raise ValueError(f"source {name!r} is given twice; give each source once")
        if not sep:
            mix[name] = 0.0  # a share of what the weights leave, by sqrt(size) (``mix_weights``)
            continue
        try:
            value = float(weight)
        except ValueError as e:
            raise ValueError(f"weight of {name!r} must be a number, got {weight!r}") from e
        if not (math.isfinite(value) and value > 0):  # nan passed `<= 0`, then failed the first batch
            raise ValueError(f"weight of {name!r} must be a positive finite number, got {weight.strip()!r}")
        mix[name] = value
    try:  # (exact: 0.6 + 0.3 + 0.1 summed in order is 0.9999999999999999)
        given = math.fsum(mix.values())
    except OverflowError:  # (fsum's own word for a sum past the largest float)
        given = math.inf
    if not math.isfinite(given):
        raise ValueError("the --tasks weights add up past the largest number; give smaller ones")
    unweighted = [name for name, weight in mix.items() if not weight]
    if unweighted and given and given >= 1 - 1e-9:
        raise ValueError(
            f"the weights add up to {given:g}, leaving no share of the batches to "
            f"{', '.join(map(repr, unweighted))}: with sources given without a weight, the weights "
            "are shares of the batches (under 1 in all; those without one share the rest by "
            "sqrt(size)); or give every source a weight")
    return mix


def mix_weights(mix: Mapping[str, float], sizes: Mapping[str, int]) -> dict[str, float]:
    """Each source's share of the batches: where every source has a weight (or none has), the
    weights (else sqrt(size)) relative to their sum; where some have one, those are shares
    (``parse_mix`` keeps them under 1 in all) and the others share the rest by sqrt(size).
    Until the fourth session of 2026-12-07 a source without a weight weighed sqrt(size) beside
    fractions: ``snli:0.5,stsb:0.2,scifact`` (the help's example) gave scifact 97% of the
    batches and snli 1.8%."""
    roots = {t: n ** 0.5 for t, n in sizes.items()}
    given = {t: w for t, w in mix.items() if w and t in sizes}
    rest = [t for t in sizes if t not in given]
    if not given or not rest:
        weights = {t: given.get(t) or roots[t] for t in sizes}
    else:
        left = max(0.0, 1.0 - math.fsum(mix[t] for t in mix if mix[t]))
        spread = sum(roots[t] for t in rest)
        weights = {**given, **{t: left * roots[t] / spread for t in rest}}
    total = sum(weights.values())
    return {t: w / total for t, w in weights.items()}


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
    """Draws single-task batches, deterministically for a seed.

    A task is drawn with probability its share of ``mix`` (``mix_weights``), then pairs
    without replacement, reshuffled each pass over that task. A batch never holds the same
    text twice (as query, positive or negative: a repeated text is a false negative for
    itself) nor two pairs with one label.
    """

    def __init__(self, pairs: dict[str, list[Pair]], batch_size: int, seed: int = 0,
                 mix: Mapping[str, float] | None = None) -> None:
        if batch_size < 2:
            raise ValueError("batch_size must be >= 2 for in-batch negatives")
        # A pair that repeats a text within itself could never join a batch.
        pairs = {t: [p for p in items if len(set(p.texts())) == len(p.texts())] for t, items in pairs.items()}
        self.pairs = {t: p for t, p in pairs.items() if len(p) >= 2}
        if not self.pairs:
            raise ValueError("no training pairs")
        self.batch_size = batch_size
        self.rng = random.Random(seed)
        self.tasks = sorted(self.pairs)
        shares = mix_weights(mix or {}, {t: len(self.pairs[t]) for t in self.tasks})
        self.weights = [shares[t] for t in self.tasks]
        self._queues: dict[str, list[Pair]] = {t: [] for t in self.tasks}

    def shares(self) -> dict[str, float]:
        """Expected share of batches per task."""
        total = sum(self.weights)
        return {t: w / total for t, w in zip(self.tasks, self.weights, strict=True)}

    def _refill(self, task: str) -> None:
        items = list(self.pairs[task])
        self.rng.shuffle(items)
        self._queues[task].extend(items)

    def next_batch(self) -> PairBatch:
        task = self.rng.choices(self.tasks, weights=self.weights)[0]
        chosen: list[Pair] = []
        labels: set[str] = set()
        texts: set[str] = set()
        queue = self._queues[task]
        skipped: list[Pair] = []
        attempts = 0
        while len(chosen) < self.batch_size and attempts < 4 * self.batch_size + len(self.pairs[task]):
            attempts += 1
            if not queue:
                self._refill(task)
            pair = queue.pop()
            own = pair.texts()
            if (pair.label is not None and pair.label in labels) or texts.intersection(own):
                skipped.append(pair)
                continue
            chosen.append(pair)
            texts.update(own)
            if pair.label is not None:
                labels.add(pair.label)
        queue.extend(skipped)
        scored = all(p.score is not None for p in chosen)
        return PairBatch(
            queries=[p.query for p in chosen], positives=[p.positive for p in chosen],
            negatives=[p.negative for p in chosen if p.negative is not None],
            instruction=chosen[0].instruction, symmetric=chosen[0].symmetric, task=task,
            scores=[p.score for p in chosen if p.score is not None] if scored else None,
        )
