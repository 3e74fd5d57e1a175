"""Task definitions and the two suites.

Every task reads its files under a data root (default ``../shared/data``) with the
layout of the shared datasets. ``quick`` uses fixed, seeded subsamples sized so the
packaged SmolLM2 backbone runs the suite in minutes on a 2-core CPU; ``full`` uses
every item and full-length documents. The subsample sizes here are the ones
documented in docs/evaluation.md; change both together.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from app.errors import InvalidRequestError
from app.evaluation import loaders
from app.evaluation.tasks import (
    ClassificationTask,
    ClusteringTask,
    MultiViewClusteringTask,
    RerankTask,
    RetrievalTask,
    StsTask,
    Task,
)

SUITES = ("quick", "full")
SEED = 0

SCIFACT_INSTRUCTION = "Given a scientific claim, retrieve documents that support or refute the claim"
BANKING77_INSTRUCTION = "Given an online banking query, find the corresponding intent"
EMOTION_INSTRUCTION = (
    "Classify the emotion expressed in the given Twitter message into one of six emotions: "
    "anger, fear, joy, love, sadness and surprise"
)


@dataclass(frozen=True)
class SuiteOptions:
    """Options that change how tasks are built.

    Attributes:
        rerank_first_stage: embedder name (or path) producing the candidates of rerank tasks.
        rerank_top_n: candidates per query re-scored; None = the suite's default.
        doc_max_words: retrieval document truncation (words); None = the suite's default;
            0 = keep documents whole.
    """

    rerank_first_stage: str = "minilm"
    rerank_top_n: int | None = None
    doc_max_words: int | None = None


@dataclass(frozen=True)
class TaskDef:
    """A named task: its kind, a one-line description, and per-suite parameters."""

    name: str
    kind: str
    description: str
    quick: dict[str, Any]
    full: dict[str, Any]
    build: Callable[[Path, dict[str, Any], SuiteOptions], Task]
    in_suites: tuple[str, ...] = field(default=SUITES)

    def params(self, suite: str) -> dict[str, Any]:
        return self.quick if suite == "quick" else self.full


def _stsb(root: Path, p: dict[str, Any], o: SuiteOptions) -> Task:
    path = root / "stsb_en" / "stsb-en-test.csv"
    return StsTask("stsb", lambda: loaders.load_sts_csv(path), sample=p["pairs"], seed=SEED)


def _sick(root: Path, p: dict[str, Any], o: SuiteOptions) -> Task:
    path = root / "sick" / "SICK.txt"
    return StsTask("sick", lambda: loaders.load_sick(path, "TEST"), sample=p["pairs"], seed=SEED)


def _scifact_retrieval(root: Path, p: dict[str, Any], o: SuiteOptions, name: str = "scifact") -> RetrievalTask:
    folder = root / "beir_scifact"
    words = p["doc_max_words"] if o.doc_max_words is None else (o.doc_max_words or None)
    return RetrievalTask(
        name,
        lambda: loaders.load_beir(folder, "test"),
        instruction=SCIFACT_INSTRUCTION,
        doc_max_words=words,
        n_queries=p["queries"],
        n_docs=p["docs"],
        seed=SEED,
    )


def _scifact(root: Path, p: dict[str, Any], o: SuiteOptions) -> Task:
    return _scifact_retrieval(root, p, o)


def _scifact_rerank(root: Path, p: dict[str, Any], o: SuiteOptions) -> Task:
    retrieval = _scifact_retrieval(root, p, o, name="scifact-rerank")
    return RerankTask(
        "scifact-rerank",
        retrieval,
        first_stage=o.rerank_first_stage,
        top_n=o.rerank_top_n or p["top_n"],
    )


def _goalex(dataset: str) -> Callable[[Path, dict[str, Any], SuiteOptions], Task]:
    def build(root: Path, p: dict[str, Any], o: SuiteOptions) -> Task:
        folder = root / "goalex_clustering" / dataset
        return ClusteringTask(f"goalex-{dataset}", lambda: loaders.load_goalex(folder), sample=p["texts"], seed=SEED)

    return build


def _clinc_multiview(root: Path, p: dict[str, Any], o: SuiteOptions) -> Task:
    data, domains = root / "clinc150" / "data_full.json", root / "clinc150" / "domains.json"
    # Built at full-suite size and subsampled further for quick: quick texts are a subset of full.
    return MultiViewClusteringTask(
        "clinc-multiview",
        lambda: loaders.build_clinc_multiview(data, domains, split="test", n=CLINC_TEXTS, seed=SEED),
        sample=p["texts"],
        seed=SEED,
    )


def _banking77(root: Path, p: dict[str, Any], o: SuiteOptions) -> Task:
    folder = root / "banking77"
    return ClassificationTask(
        "banking77",
        lambda: loaders.load_labelled_texts(folder / "train.csv", text_column="text", label_column="category"),
        lambda: loaders.load_labelled_texts(folder / "test.csv", text_column="text", label_column="category"),
        instruction=BANKING77_INSTRUCTION,
        n_train=p["train"],
        n_test=p["test"],
        seed=SEED,
    )


def _emotion(root: Path, p: dict[str, Any], o: SuiteOptions) -> Task:
    folder = root / "emotion"

    def read(name: str) -> loaders.LabelledTexts:
        return loaders.load_labelled_texts(folder / name, delimiter=";", text_column="text", label_column="label_name")

    return ClassificationTask(
        "emotion",
        lambda: read("train.txt"),
        lambda: read("test.txt"),
        instruction=EMOTION_INSTRUCTION,
        n_train=p["train"],
        n_test=p["test"],
        seed=SEED,
    )


CLINC_TEXTS = 3000

TASKS: dict[str, TaskDef] = {
    t.name: t
    for t in [
        TaskDef(
            "stsb",
            "sts",
            "STS-B test (stsb_en/stsb-en-test.csv): Spearman of cosine",
            {"pairs": 200},
            {"pairs": None},
            _stsb,
        ),
        TaskDef(
            "sick",
            "sts",
            "SICK-R test (sick/SICK.txt, SemEval_set=TEST): Spearman of cosine",
            {"pairs": 200},
            {"pairs": None},
            _sick,
        ),
        TaskDef(
            "scifact",
            "retrieval",
            "BEIR SciFact test (beir_scifact): nDCG@10, Recall@100; query instruction",
            {"queries": 100, "docs": 150, "doc_max_words": 64},
            {"queries": None, "docs": None, "doc_max_words": None},
            _scifact,
        ),
        TaskDef(
            "scifact-rerank",
            "rerank",
            "SciFact: first-stage embedder's top-N re-scored by the evaluated embedder: nDCG@10",
            {"queries": 100, "docs": 150, "doc_max_words": 64, "top_n": 20},
            {"queries": None, "docs": None, "doc_max_words": None, "top_n": 100},
            _scifact_rerank,
        ),
        TaskDef(
            "clinc-multiview",
            "multiview",
            "CLINC150 test texts under an intent and a domain instruction: V-measure per view, "
            "harmonic mean, cross check",
            {"texts": 500},
            {"texts": CLINC_TEXTS},
            _clinc_multiview,
        ),
        TaskDef(
            "goalex-agnews",
            "clustering",
            "GoalEx AG News (goal as instruction): k-means V-measure",
            {"texts": 100},
            {"texts": None},
            _goalex("agnews"),
        ),
        TaskDef(
            "goalex-dbpedia",
            "clustering",
            "GoalEx DBpedia (goal as instruction): k-means V-measure",
            {"texts": 100},
            {"texts": None},
            _goalex("dbpedia"),
        ),
        TaskDef(
            "banking77",
            "classification",
            "Banking77: logistic regression on embeddings, test accuracy",
            {"train": 300, "test": 150},
            {"train": None, "test": None},
            _banking77,
        ),
        TaskDef(
            "emotion",
            "classification",
            "Emotion: logistic regression on embeddings, test accuracy",
            {"train": 300, "test": 150},
            {"train": None, "test": None},
            _emotion,
        ),
    ]
}


def resolve_task_names(names: str | None) -> list[str]:
    """Task names from a comma-separated list (None or empty = every task), validated.

    Raises:
        InvalidRequestError: an unknown name (the valid names are listed).
    """
    if not names or not names.strip():
        return list(TASKS)
    chosen = [n.strip().lower() for n in names.split(",") if n.strip()]
    unknown = [n for n in chosen if n not in TASKS]
    if unknown:
        raise InvalidRequestError(
            f"unknown task(s) {', '.join(unknown)}; valid tasks: {', '.join(TASKS)} (see facet eval --list-tasks)"
        )
    return list(dict.fromkeys(chosen))


def build_tasks(data_root: Path, suite: str, names: list[str], options: SuiteOptions | None = None) -> list[Task]:
    """Build the named tasks for ``suite`` reading under ``data_root`` (nothing is read yet)."""
    if suite not in SUITES:
        raise InvalidRequestError(f"unknown suite {suite!r}; use one of: {', '.join(SUITES)}")
    opts = options or SuiteOptions()
    return [TASKS[n].build(data_root, TASKS[n].params(suite), opts) for n in names]


def describe_tasks(suite: str | None = None) -> list[dict[str, Any]]:
    """Names, kinds, descriptions and per-suite parameters (for --list-tasks and the docs)."""
    out = []
    for t in TASKS.values():
        entry: dict[str, Any] = {"name": t.name, "kind": t.kind, "description": t.description}
        for s in SUITES if suite is None else (suite,):
            entry[s] = t.params(s)
        out.append(entry)
    return out


USER_TASK_KINDS = ("beir", "sts", "goalex")


def _beir_split(folder: Path) -> str:
    qrels = folder / "qrels"
    if (qrels / "test.tsv").is_file():
        return "test"
    found = sorted(p.stem for p in qrels.glob("*.tsv")) if qrels.is_dir() else []
    if not found:
        raise InvalidRequestError(f"beir:{folder}: no qrels/*.tsv judgements found (expected qrels/test.tsv)")
    return found[0]


def build_user_tasks(specs: list[str], instruction: str | None = None) -> list[Task]:
    """Tasks over a user's own data, the same metrics as the built-in ones.

    Args:
        specs: ``KIND:PATH`` items (a value may hold several, comma-separated): ``beir:FOLDER``
            (BEIR layout: corpus.jsonl, queries.jsonl, qrels/test.tsv or another qrels/*.tsv;
            ``beir:FOLDER@SPLIT`` picks the qrels file), ``sts:FILE.csv`` (sentence1,sentence2,score,
            no header) and ``goalex:FOLDER`` (data.json + labels.json).
        instruction: the query instruction for beir tasks and the clustering instruction for
            goalex tasks (GoalEx's own ``goal`` when None); STS reads bare texts, like STS-B.

    Raises:
        InvalidRequestError: an unknown kind, a malformed item or a path that does not exist.
    """
    items = [part.strip() for spec in specs for part in spec.split(",") if part.strip()]
    tasks: list[Task] = []
    for item in items:
        kind, sep, raw = item.partition(":")
        kind = kind.strip().lower()
        if not sep or kind not in USER_TASK_KINDS or not raw.strip():
            raise InvalidRequestError(f"--task {item!r}: use KIND:PATH with KIND one of {', '.join(USER_TASK_KINDS)}")
        path_text, _, split = raw.strip().partition("@") if kind == "beir" else (raw.strip(), "", "")
        path = Path(path_text).expanduser()
        if not path.exists():
            raise InvalidRequestError(f"--task {item!r}: {path} does not exist")
        name = f"{kind}:{path.name or path}"
        if kind == "beir":
            tasks.append(RetrievalTask(name, partial(loaders.load_beir, path, split or _beir_split(path)),
                                       instruction=instruction, seed=SEED))
        elif kind == "sts":
            tasks.append(StsTask(name, partial(loaders.load_sts_csv, path), seed=SEED))
        else:
            tasks.append(ClusteringTask(name, partial(loaders.load_goalex, path, instruction), seed=SEED))
    if not tasks:
        raise InvalidRequestError("--task needs at least one KIND:PATH item")
    return tasks
