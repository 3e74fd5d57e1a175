"""Task definitions and the two suites.

Every task reads its files under a data root (default ``../shared/data``) with the
layout of the shared datasets. ``quick`` uses fixed, seeded subsamples sized so the
packaged SmolLM2 backbone runs the suite in minutes on a 2-core CPU; ``full`` uses
every item and full-length documents. The subsample sizes here are the ones
documented in docs/evaluation.md; change both together.
"""

from __future__ import annotations

import os
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
    ViewInstruction,
)
from app.files import absent, expand_user

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
        split="test",
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
        # `--tasks beir:PATH` names a user's own data where `--task` takes it.
        own = [n.strip() for n in names.split(",")
               if n.partition(":")[0].strip().lower() in USER_TASK_KINDS and n.partition(":")[1]]
        hint = (f"; your own data is given with --task KIND:PATH (--task {own[0]}), not --tasks"
                if own else "")
        raise InvalidRequestError(
            f"unknown task(s) {', '.join(unknown)}; valid tasks: {', '.join(TASKS)} (see facet eval "
            f"--list-tasks){hint}")
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


def _beir_split(item: str, folder: Path, split: str) -> str:
    """The qrels split of a ``beir:`` item: the one given (which must exist), else ``test``,
    else the first ``qrels/*.tsv`` by name."""
    qrels = folder / "qrels"
    found = sorted(p.stem for p in qrels.glob("*.tsv")) if qrels.is_dir() else []
    if split:
        if split not in found:
            raise InvalidRequestError(
                f"--task {item!r}: {qrels / (split + '.tsv')} does not exist; "
                f"splits found: {', '.join(found) or 'none'}"
            )
        return split
    if not found:
        raise InvalidRequestError(
            f"--task {item!r}: {folder} has no qrels/*.tsv judgements (expected qrels/test.tsv)"
        )
    return "test" if "test" in found else found[0]


# What each kind of --task reads (checked before anything runs, so a wrong path names the
# path given rather than a file the loader later fails to find).
USER_TASK_LAYOUTS = {
    "beir": ("a BEIR folder with corpus.jsonl, queries.jsonl and qrels/SPLIT.tsv", ("corpus.jsonl", "queries.jsonl")),
    "sts": ("a csv file of sentence1,sentence2,score rows", ()),
    "goalex": ("a GoalEx folder with data.json and labels.json", ("data.json", "labels.json")),
}


def _check_layout(item: str, kind: str, path: Path) -> None:
    what, files = USER_TASK_LAYOUTS[kind]
    if not path.exists():
        raise InvalidRequestError(f"--task {item!r}: {path} {absent(path)}; give {what}")
    if kind == "sts":
        if not path.is_file():
            raise InvalidRequestError(f"--task {item!r}: {path} is a folder; give {what}")
        return
    if not path.is_dir():
        raise InvalidRequestError(f"--task {item!r}: {path} is a file; give {what}")
    missing = [name for name in files if not (path / name).is_file()]
    if missing:
        raise InvalidRequestError(f"--task {item!r}: {path} has no {' or '.join(missing)}; give {what}")


def _unique_names(entries: list[tuple[str, Path, str]]) -> list[str]:
    """``KIND:NAME[@SPLIT]`` for each ``(kind, absolute path, split)``: NAME is the path's last
    part, with as many parent folders before it as it takes to tell entries apart
    (``beir:a/data``, ``beir:b/data``), so no two tasks share a row of the report.

    Raises:
        InvalidRequestError: the same data given twice.
    """
    seen: set[tuple[str, Path, str]] = set()
    for entry in entries:
        if entry in seen:
            kind, path, split = entry
            raise InvalidRequestError(
                f"--task gives {kind}:{path}{'@' + split if split else ''} twice; give each data set once"
            )
        seen.add(entry)
    depth = [1] * len(entries)

    def name(i: int) -> str:
        kind, path, split = entries[i]
        tail = Path(*path.parts[-depth[i]:]).as_posix()
        return f"{kind}:{tail}" + (f"@{split}" if split else "")

    while True:
        names = [name(i) for i in range(len(entries))]
        clashes = {n for n in names if names.count(n) > 1}
        if not clashes:
            return names
        for i, n in enumerate(names):
            if n in clashes:
                depth[i] += 1  # distinct absolute paths differ at some depth


def _exists(path_text: str) -> bool:
    return bool(path_text.strip()) and expand_user(path_text.strip()).exists()


def _names_a_path(item: str) -> bool:
    """Whether ``KIND:PATH[@SPLIT]`` names a path that exists (a SPLIT holds no comma: in
    ``beir:my,set@test,sts:x.csv`` the folder ``my,set`` exists, ``test,sts:x.csv`` is no split)."""
    kind, _, raw = item.partition(":")
    if kind.strip().lower() not in USER_TASK_KINDS:
        return False
    head, at, split = raw.rpartition("@")
    return _exists(raw) or (bool(at) and "," not in split and _exists(head))


def _task_items(spec: str) -> list[str]:
    """A ``--task`` value's ``KIND:PATH`` items: comma-separated, except that commas inside a
    path that exists do not split it (``beir:ds/my,set,sts:x.csv``: such a folder could not be
    given; the longest run of parts naming a path is taken)."""
    parts = spec.split(",")
    items: list[str] = []
    start = 0
    while start < len(parts):
        end = next((j for j in range(len(parts), start + 1, -1) if _names_a_path(",".join(parts[start:j]))),
                   start + 1)
        items.append(",".join(parts[start:end]))
        start = end
    return items


def check_task_items(specs: list[str]) -> None:
    """Refuse, before any path is looked at, the ``--task`` slips that read as something else:
    an empty item (``beir:a,,sts:b`` ran two tasks without a word), a ``beir:FOLDER@`` with no
    split (read as the default split), and a part without ``KIND:`` after a comma (a comma in
    a path that does not exist split it: ``beir:my,set`` said "my does not exist").

    Raises:
        InvalidRequestError: naming the item by its position in the ``--task`` value.
    """
    kinds = ", ".join(USER_TASK_KINDS)
    for spec in specs:
        if not spec.strip():
            raise InvalidRequestError(f"--task is empty; give KIND:PATH, KIND one of {kinds}")
        items = _task_items(spec)
        for number, item in enumerate(items, start=1):
            where = f"--task {spec!r}: item {number} of {len(items)}"
            if not item.strip():
                raise InvalidRequestError(
                    f"{where} is empty (two commas in a row, or one at the start or end); separate "
                    "KIND:PATH items with single commas")
            kind, sep, raw = item.strip().partition(":")
            if number > 1 and (not sep or kind.strip().lower() not in USER_TASK_KINDS):
                joined = f"{items[number - 2]},{item}"
                raise InvalidRequestError(
                    f"{where}, {item!r}, is not KIND:PATH (KIND one of {kinds}); a comma separates "
                    f"--task items, and a path holding a comma is read whole only where it exists "
                    f"({joined!r} does not): check the path, or rename it without the comma")
            raw = raw.strip()
            if kind.strip().lower() == "beir" and raw.endswith("@") and not expand_user(raw).exists():
                qrels = expand_user(raw[:-1].strip() or ".") / "qrels"
                found = sorted(p.stem for p in qrels.glob("*.tsv")) if qrels.is_dir() else []
                raise InvalidRequestError(
                    f"--task {item.strip()!r}: no split after '@'; give beir:FOLDER@SPLIT, SPLIT naming a "
                    f"qrels/SPLIT.tsv of the folder (found: {', '.join(found) or 'none'}), or leave out the "
                    "'@' to read qrels/test.tsv (else the first qrels/*.tsv by name)")


def instruction_given(text: str) -> str | None:
    """An instruction given on the command line as the evaluation reads it: None where it holds
    nothing to read (empty, or whitespace and invisible characters alone: a zero-width space was
    recorded as the task's instruction in results.json while every embedder read none)."""
    from embedders.scripts import blank

    return None if blank(text) else text.strip()


def build_user_tasks(
    specs: list[str], instruction: str | None = None, options: SuiteOptions | None = None
) -> list[Task]:
    """Tasks over a user's own data, the same metrics as the built-in ones, on every item.

    Each task is named ``KIND:NAME`` (``beir:scifact``, ``sts:pairs.csv``), with ``@SPLIT``
    when a BEIR split was given and parent folders added where two names would be equal.

    Args:
        specs: ``KIND:PATH`` items (a value may hold several, comma-separated): ``beir:FOLDER``
            (BEIR layout: corpus.jsonl, queries.jsonl, qrels/test.tsv or another qrels/*.tsv;
            ``beir:FOLDER@SPLIT`` picks the qrels file), ``sts:FILE.csv`` (sentence1,sentence2,score,
            no header) and ``goalex:FOLDER`` (data.json + labels.json).
        instruction: the query instruction for beir tasks and the clustering instruction for
            goalex tasks (GoalEx's own ``goal`` when None; an empty one drops it, and the beir
            one); STS reads bare texts, like STS-B.
        options: of the suite options only ``doc_max_words`` applies (to beir tasks; None or 0
            keeps documents whole); the rerank options have no user task to apply to.

    Raises:
        InvalidRequestError: an unknown kind, a malformed item, a path that does not exist or
            lacks a file of its layout, an unknown split, or the same data given twice.
    """
    opts = options or SuiteOptions()
    # An empty TEXT drops the instruction, the GoalEx goal included (None there keeps the goal).
    chosen = None if instruction is None else instruction_given(instruction)
    goal: str | ViewInstruction | None = ViewInstruction.OWN if instruction is None else chosen
    items = [part.strip() for spec in specs for part in _task_items(spec) if part.strip()]
    parsed: list[tuple[str, Path, str, str]] = []  # (kind, path, split read, split given)
    for item in items:
        kind, sep, raw = item.partition(":")
        kind = kind.strip().lower()
        if not sep or kind not in USER_TASK_KINDS or not raw.strip():
            raise InvalidRequestError(f"--task {item!r}: use KIND:PATH with KIND one of {', '.join(USER_TASK_KINDS)}")
        # Without an @ the path is the text as given: rpartition made it "" (the current folder,
        # so `beir:nope` said ". has no corpus.jsonl" and `beir:test` read the current folder).
        path_text, _, given = (raw.strip(), "", "") if kind != "beir" or _exists(raw) or "@" not in raw else \
            raw.strip().rpartition("@")
        if not path_text.strip():
            raise InvalidRequestError(f"--task {item!r}: give the folder before @{given.strip()}")
        path = expand_user(path_text.strip())
        _check_layout(item, kind, path)
        split = _beir_split(item, path, given.strip()) if kind == "beir" else ""
        parsed.append((kind, path, split, given.strip()))
    if not parsed:
        raise InvalidRequestError("--task needs at least one KIND:PATH item")
    # The same data twice, however given: beir:X reads a split, beir:X@that-split the same one.
    read = [(kind, Path(os.path.abspath(path)), split) for kind, path, split, _ in parsed]
    # Compared with their links resolved: a link to a folder given beside it was run twice.
    same = [(kind, os.path.realpath(path), split) for kind, path, split in read]
    for i, (kind, path, split) in enumerate(read):
        if same[i] in same[:i]:
            first = read[same.index(same[i])][1]
            also = f" ({first} and {path} are the same data)" if first != path else ""
            raise InvalidRequestError(
                f"--task gives {kind}:{path}{'@' + split if split else ''} twice{also}; give each "
                "data set once" + (f" (without @SPLIT, beir:{path} reads {split})" if split else ""))
    # The name shows the split only where the user chose it; the task's info always records it.
    names = _unique_names([(kind, Path(os.path.abspath(path)), given) for kind, path, _, given in parsed])
    tasks: list[Task] = []
    for name, (kind, path, split, _), (_, where, _) in zip(names, parsed, read, strict=True):
        task: Task
        if kind == "beir":
            task = RetrievalTask(name, partial(loaders.load_beir, path, split), instruction=chosen,
                                 doc_max_words=opts.doc_max_words or None, split=split, seed=SEED)
        elif kind == "sts":
            task = StsTask(name, partial(loaders.load_sts_csv, path), seed=SEED)
        else:
            task = ClusteringTask(name, partial(loaders.load_goalex, path), instruction=goal, seed=SEED)
        task.description = f"{kind}:{where}" + (f"@{split}" if split else "")  # what it reads, in full
        task.show_sizes = True
        tasks.append(task)
    return tasks


def user_tasks_key(tasks: list[Task]) -> str:
    """Eight hex digits naming a list of ``--task`` tasks by what they read (absolute paths and
    splits, in any order): the default report folder ``results/<name>-user-<key>``, so that runs
    on different data do not overwrite each other, nor the built-in suites' reports."""
    import hashlib

    text = "\n".join(sorted(t.description for t in tasks))
    return hashlib.sha256(text.encode()).hexdigest()[:8]
