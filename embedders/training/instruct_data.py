"""Instruction-following training data: (input, instruction) -> short answer.

Built from training splits only:

* QA: C3 (``c3.train.en.jsonl``), DREAM (``split == "train"``) and SQuAD 2.0
  answerable triplets; the passage is the input, the question the instruction.
* Derived from labelled sets: Banking77 and Emotion training texts, each with an
  instruction drawn from a few paraphrases ("What does the customer want?") and the
  label as the answer ("card arrival", "sadness").
* Coarse views of the same texts, so one text meets two instructions that want two
  different answers (what makes an embedding follow its instruction): the banking area
  of a Banking77 intent ("card arrival" -> "card"; keyword rules over the intent names),
  the valence of an Emotion label ("sadness" -> "negative"), and the article title of a
  SQuAD passage ("what is this passage about?" -> "steam engine").

Answers are shortened the InBedder way: lower-cased, punctuation and English
stopwords removed, at most ``max_words`` words. GoalEx and every test split are never
read, and CLINC150 only by the opt-in ``clinc-views`` source (its *train* split): they
measure instruction following on unseen instructions.
"""

from __future__ import annotations

import json
import logging
import random
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from embedders.training.data import (
    _jsonl,
    _truncate_words,
    banking77_train,
    emotion_train,
    load_sources,
    mix_weights,
)

logger = logging.getLogger(__name__)

# A compact English stopword list (function words only), so answers keep their content words.
STOPWORDS = frozenset((
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "as", "at",
    "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did",
    "do", "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have",
    "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into",
    "is", "it", "its", "itself", "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of",
    "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she",
    "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then",
    "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was",
    "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would",
    "you", "your", "yours", "yourself", "yourselves",
))

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def short_answer(text: str, max_words: int = 8) -> str:
    """Lower-case, drop punctuation and stopwords, keep at most ``max_words`` words.

    Falls back to the first words of the text when every word is a stopword, so an
    answer is never empty unless the text has no words at all.
    """
    words = _WORD.findall(text.lower())
    kept = [w for w in words if w not in STOPWORDS]
    return " ".join((kept or words)[:max_words])


@dataclass(frozen=True)
class Triple:
    """One instruction-following example: ``input`` read under ``instruction`` -> ``answer``."""

    input: str
    instruction: str
    answer: str
    task: str


@dataclass
class TripleBatch:
    """A single-task batch; what the instruction methods' ``training_loss`` receives."""

    inputs: list[str]
    instructions: list[str]
    answers: list[str]
    task: str


BANKING77_INSTRUCTIONS = (
    "What does the customer want?",
    "What is the intent of this banking query?",
    "What is the customer asking the bank to do?",
    "Which banking problem is this message about?",
)
EMOTION_INSTRUCTIONS = (
    "What emotion does the writer feel?",
    "Which feeling is expressed in this message?",
    "How does the author feel?",
    "What is the emotional state of the writer?",
)


def _qa(rows: list[tuple[str, str, str]], task: str, passage_words: int) -> list[Triple]:
    out = []
    for passage, question, answer in rows:
        short = short_answer(answer)
        if passage.strip() and question.strip() and short:
            out.append(Triple(_truncate_words(passage, passage_words), question.strip(), short, task))
    return out


def load_c3(root: Path, passage_words: int = 120) -> list[Triple]:
    rows = [(r["key"], r["value"], r["value_prefix"])
            for r in _jsonl(root / "inbedder_c3_qa" / "c3.train.en.jsonl")]
    return _qa(rows, "c3", passage_words)


def load_dream(root: Path, passage_words: int = 120) -> list[Triple]:
    rows = [(r["passage"], r["question"], r["answer"])
            for r in _jsonl(root / "dream" / "qa_triplets.jsonl") if r.get("split") == "train"]
    return _qa(rows, "dream", passage_words)


def load_squad(root: Path, passage_words: int = 120) -> list[Triple]:
    rows = [(r["passage"], r["question"], r["answer"])
            for r in _jsonl(root / "squad2_cs224n" / "qa_triplets.jsonl") if r.get("answer")]
    return _qa(rows, "squad", passage_words)


def _labelled(items: list[tuple[str, str]], instructions: tuple[str, ...], task: str, per_label: int,
              seed: int) -> list[Triple]:
    rng = random.Random(seed)
    by_label: dict[str, list[str]] = defaultdict(list)
    for text, label in items:
        by_label[label].append(text)
    out = []
    for label in sorted(by_label):
        texts = sorted(by_label[label])
        rng.shuffle(texts)
        answer = label.replace("_", " ").strip().lower()
        out += [Triple(t, rng.choice(instructions), answer, task) for t in texts[:per_label]]
    return out


def load_banking77(root: Path, per_label: int = 40, seed: int = 0) -> list[Triple]:
    return _labelled(banking77_train(root), BANKING77_INSTRUCTIONS, "banking77", per_label, seed)


def load_emotion(root: Path, per_label: int = 300, seed: int = 0) -> list[Triple]:
    return _labelled(emotion_train(root), EMOTION_INSTRUCTIONS, "emotion", per_label, seed)


BANKING77_AREA_INSTRUCTIONS = (
    "Which broad area of banking is this message about?",
    "What general kind of banking service does this concern?",
    "Name the part of the bank's services involved here.",
    "Which banking category does this belong to?",
)
EMOTION_VALENCE_INSTRUCTIONS = (
    "Is the feeling in this message positive or negative?",
    "What is the overall sentiment of the writer?",
    "Does the writer feel good or bad?",
    "Classify the mood of this message as positive or negative.",
)
SQUAD_TOPIC_INSTRUCTIONS = (
    "What is this passage about?",
    "What is the main subject of this text?",
    "Which topic does this passage cover?",
    "Name the subject of this article.",
)
# Banking77 intent -> banking area, by the first matching keyword (order matters:
# "top_up_by_card_charge" is a top-up question before it is a card one).
BANKING77_AREAS = (
    (("top_up", "topping_up"), "top up"),
    (("transfer", "beneficiary", "receiving_money"), "transfer"),
    (("cash", "atm"), "cash withdrawal"),
    (("exchange", "currency", "currencies", "fiat"), "currency exchange"),
    (("pin", "passcode", "compromised", "lost_or_stolen"), "security"),
    (("verify", "identity", "personal_details", "age_limit", "terminate", "country", "balance"), "account"),
    (("refund", "charge", "payment", "debit", "transaction", "fee", "statement"), "payment"),
    (("card", "contactless", "apple_pay", "visa"), "card"),
)
EMOTION_VALENCE = {"joy": "positive", "love": "positive", "surprise": "positive",
                   "sadness": "negative", "anger": "negative", "fear": "negative"}


def banking77_area(intent: str) -> str:
    """The broad banking area of a Banking77 intent name ("card_arrival" -> "card")."""
    name = intent.lower()
    for keywords, area in BANKING77_AREAS:
        if any(k in name for k in keywords):
            return area
    return "account"


def load_banking77_area(root: Path, per_label: int = 40, seed: int = 1) -> list[Triple]:
    """The same kind of Banking77 texts as ``load_banking77``, asked for their banking area."""
    items = [(text, banking77_area(intent)) for text, intent in banking77_train(root)]
    return _labelled(items, BANKING77_AREA_INSTRUCTIONS, "banking77-area", per_label * 8, seed)


def load_emotion_valence(root: Path, per_label: int = 600, seed: int = 1) -> list[Triple]:
    items = [(text, EMOTION_VALENCE.get(label, label)) for text, label in emotion_train(root)]
    return _labelled(items, EMOTION_VALENCE_INSTRUCTIONS, "emotion-valence", per_label, seed)


def load_squad_topic(root: Path, passage_words: int = 120, seed: int = 0) -> list[Triple]:
    """Each SQuAD passage once, asked what it is about; the answer is its article's title."""
    data = json.loads((root / "squad2_cs224n" / "dev-v2.0.json").read_text(encoding="utf-8"))
    rng = random.Random(seed)
    out = []
    for article in data["data"]:
        title = article["title"].replace("_", " ").strip().lower()
        for paragraph in article["paragraphs"]:
            context = paragraph["context"].strip()
            if context:
                out.append(Triple(_truncate_words(context, passage_words), rng.choice(SQUAD_TOPIC_INSTRUCTIONS),
                                  title, "squad-topic"))
    return out


def _both_views(fine: list[Triple], coarse_answer: Callable[[str], str], coarse_instructions: tuple[str, ...],
                task: str, seed: int) -> list[Triple]:
    """Each text twice, side by side: its fine triple, then the same text under a coarse
    instruction with the coarse answer. The sampler keeps the two in one batch, where the
    contrastive term must tell them apart: the text alone cannot, only its instruction."""
    rng = random.Random(seed)
    out = []
    for t in fine:
        out += _view_pair(t, coarse_answer, coarse_instructions, task, rng)
    return out


def _view_pair(t: Triple, coarse_answer: Callable[[str], str], coarse_instructions: tuple[str, ...], task: str,
               rng: random.Random) -> list[Triple]:
    """A fine triple and the same text under a coarse instruction (one drawn) with its coarse answer."""
    return [Triple(t.input, t.instruction, t.answer, task),
            Triple(t.input, rng.choice(coarse_instructions), coarse_answer(t.answer), task)]


def _banking77_area_answer(answer: str) -> str:
    """The area of a Banking77 intent given as an answer ("card arrival" -> "card")."""
    return banking77_area(answer.replace(" ", "_"))


def _valence_answer(answer: str) -> str:
    return EMOTION_VALENCE.get(answer, answer)


def load_banking77_views(root: Path, per_label: int = 20, seed: int = 2) -> list[Triple]:
    """Banking77 texts under both an intent and an area instruction, in one batch."""
    fine = _labelled(banking77_train(root), BANKING77_INSTRUCTIONS, "banking77-views", per_label, seed)
    return _both_views(fine, _banking77_area_answer, BANKING77_AREA_INSTRUCTIONS, "banking77-views", seed)


def load_emotion_views(root: Path, per_label: int = 200, seed: int = 2) -> list[Triple]:
    """Emotion texts under both an emotion and a valence instruction, in one batch."""
    fine = _labelled(emotion_train(root), EMOTION_INSTRUCTIONS, "emotion-views", per_label, seed)
    return _both_views(fine, _valence_answer, EMOTION_VALENCE_INSTRUCTIONS, "emotion-views", seed)


# CLINC150's *train* split, opt-in only (never in DEFAULT_TASKS): CLINC *val* selects the
# instruction methods and CLINC *test* reports them, as a measure of following instructions
# never trained on. This source teaches CLINC's own domain taxonomy, to test whether that
# taxonomy is what the steer gap lacks; a model trained with it is in-domain on CLINC and is
# not compared with zero-shot baselines there. Its instructions are not the evaluation's.
CLINC_INTENT_INSTRUCTIONS = (
    "What does the user ask the assistant to do?",
    "What exactly is this request for?",
    "Name the specific action the user wants.",
)
CLINC_DOMAIN_INSTRUCTIONS = (
    "Which area of the assistant's services does this request fall under?",
    "What general area is this request about?",
    "Name the broad category of this request.",
)


def load_clinc_views(root: Path, per_label: int = 10, seed: int = 2) -> list[Triple]:
    """CLINC150 *train* texts under both an intent and a domain instruction, in one batch
    (opt-in; see ``CLINC_INTENT_INSTRUCTIONS``)."""
    data = json.loads((root / "clinc150" / "data_full.json").read_text(encoding="utf-8"))
    domains = json.loads((root / "clinc150" / "domains.json").read_text(encoding="utf-8"))
    domain_of = {intent.replace("_", " "): domain.replace("_", " ") for domain, intents in domains.items()
                 for intent in intents}
    items = [(text, intent) for text, intent in data["train"] if intent.replace("_", " ") in domain_of]
    fine = _labelled(items, CLINC_INTENT_INSTRUCTIONS, "clinc-views", per_label, seed)
    return _both_views(fine, lambda a: domain_of[a], CLINC_DOMAIN_INSTRUCTIONS, "clinc-views", seed)


def _steer_quads(fine: list[Triple], coarse_answer: Callable[[str], str], coarse_instructions: tuple[str, ...],
                 task: str, seed: int) -> list[Triple]:
    """Two texts with the same coarse answer but different fine answers, each under its fine
    and a coarse instruction: four consecutive triples the sampler keeps together. In one
    batch the same two texts must then be positives under the coarse instruction and
    negatives under the fine one, which only the instruction can tell apart (what the steer
    gap measures; random paired views rarely put such a pair in one batch)."""
    rng = random.Random(seed)
    by_coarse: dict[str, dict[str, list[Triple]]] = defaultdict(lambda: defaultdict(list))
    for t in fine:
        by_coarse[coarse_answer(t.answer)][t.answer].append(t)
    out: list[Triple] = []
    for coarse in sorted(by_coarse):
        groups = [list(v) for _, v in sorted(by_coarse[coarse].items())]
        if len(groups) < 2:
            continue  # one fine answer under this coarse one: no pair to tell apart
        for g in groups:
            rng.shuffle(g)
        # Round-robin over the fine answers, so consecutive texts differ in their fine answer.
        order = [g[i] for i in range(max(map(len, groups))) for g in groups if i < len(g)]
        for a, b in zip(order[::2], order[1::2], strict=False):
            if a.answer == b.answer:
                continue
            for t in (a, b):
                out += _view_pair(t, coarse_answer, coarse_instructions, task, rng)
    return out


def load_banking77_steer(root: Path, per_label: int = 20, seed: int = 3) -> list[Triple]:
    """Banking77 pairs of one area and two intents, each text under both instructions (opt-in)."""
    fine = _labelled(banking77_train(root), BANKING77_INSTRUCTIONS, "banking77-steer", per_label, seed)
    return _steer_quads(fine, _banking77_area_answer, BANKING77_AREA_INSTRUCTIONS, "banking77-steer", seed)


def load_emotion_steer(root: Path, per_label: int = 200, seed: int = 3) -> list[Triple]:
    """Emotion pairs of one valence and two emotions, each text under both instructions (opt-in)."""
    fine = _labelled(emotion_train(root), EMOTION_INSTRUCTIONS, "emotion-steer", per_label, seed)
    return _steer_quads(fine, _valence_answer, EMOTION_VALENCE_INSTRUCTIONS, "emotion-steer", seed)


LOADERS: dict[str, Callable[[Path], list[Triple]]] = {
    "c3": load_c3, "dream": load_dream, "squad": load_squad, "banking77": load_banking77, "emotion": load_emotion,
    "banking77-area": load_banking77_area, "emotion-valence": load_emotion_valence, "squad-topic": load_squad_topic,
    "banking77-views": load_banking77_views, "emotion-views": load_emotion_views, "clinc-views": load_clinc_views,
    "banking77-steer": load_banking77_steer, "emotion-steer": load_emotion_steer,
}
# Sources whose consecutive triples form units (of this many triples) that are never split
# across batches: a text's two views, or a steer quad (two texts, two views each).
UNIT_SIZES = {"banking77-views": 2, "emotion-views": 2, "clinc-views": 2, "banking77-steer": 4, "emotion-steer": 4}
PAIRED_TASKS = frozenset(UNIT_SIZES)
DEFAULT_TASKS = ("c3", "dream", "squad", "banking77", "emotion", "banking77-area", "emotion-valence",
                 "squad-topic")


def build_triples(data_dir: str | Path, tasks: tuple[str, ...] = DEFAULT_TASKS) -> dict[str, list[Triple]]:
    """Load every requested source.

    Raises:
        ValueError: an unknown task name (the valid ones are listed).
        FileNotFoundError: a dataset file is missing (its path is named).
    """
    return load_sources(LOADERS, data_dir, tasks, "triples")


def _units(triples: list[Triple], size: int = 1) -> list[list[Triple]]:
    """The sampling units: runs of ``size`` consecutive triples (one each for a plain source)."""
    if len(triples) % size:
        raise ValueError(f"{len(triples)} triples do not split into units of {size}")
    return [triples[i:i + size] for i in range(0, len(triples), size)]


def keep_units(triples: list[Triple], task: str, keep: Callable[[Triple], bool]) -> list[Triple]:
    """``triples`` of source ``task`` without the sampling units (``UNIT_SIZES``) holding one
    that ``keep`` refuses: a text's views or a steer quad stay whole or go together."""
    return [t for unit in _units(triples, UNIT_SIZES.get(task, 1)) if all(keep(t) for t in unit) for t in unit]


class TripleSampler:
    """Single-task batches: a task with probability its share of ``mix`` (``mix_weights``),
    then triples without replacement, reshuffled per pass; the units of a paired source
    (``UNIT_SIZES``: a text's views, or a steer quad) always share a batch. Deterministic for
    a seed."""

    def __init__(self, triples: dict[str, list[Triple]], batch_size: int, seed: int = 0,
                 mix: dict[str, float] | None = None) -> None:
        if batch_size < 2:
            raise ValueError("batch_size must be >= 2 (the contrastive term needs in-batch negatives)")
        self.triples = {t: v for t, v in triples.items() if len(v) >= 2}
        if not self.triples:
            raise ValueError("no training triples")
        self.batch_size = batch_size
        self.rng = random.Random(seed)
        self.tasks = sorted(self.triples)
        shares = mix_weights(mix or {}, {t: len(self.triples[t]) for t in self.tasks})
        self.weights = [shares[t] for t in self.tasks]
        self._units = {t: _units(v, UNIT_SIZES.get(t, 1)) for t, v in self.triples.items()}
        self._queues: dict[str, list[list[Triple]]] = {t: [] for t in self.tasks}

    def shares(self) -> dict[str, float]:
        """Expected share of batches per task."""
        total = sum(self.weights)
        return {t: w / total for t, w in zip(self.tasks, self.weights, strict=True)}

    def next_batch(self) -> TripleBatch:
        task = self.rng.choices(self.tasks, weights=self.weights)[0]
        queue = self._queues[task]
        chosen: list[Triple] = []
        while len(chosen) < min(self.batch_size, len(self.triples[task])):
            if not queue:
                units = list(self._units[task])
                self.rng.shuffle(units)
                queue.extend(units)
            if chosen and len(chosen) + len(queue[-1]) > self.batch_size:
                break  # a whole unit or none
            chosen.extend(queue.pop())
        return TripleBatch([t.input for t in chosen], [t.instruction for t in chosen],
                           [t.answer for t in chosen], task)
