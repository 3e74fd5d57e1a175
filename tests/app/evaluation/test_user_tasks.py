"""`--task KIND:PATH`: unique names, the split and the suite options recorded, layouts checked
up front, and malformed data refused before any model loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli
from app.commands.eval import _override_instruction
from app.errors import InvalidRequestError
from app.evaluation.suites import SuiteOptions, build_tasks, build_user_tasks
from app.evaluation.tasks import ClusteringTask, RetrievalTask

DOCS = {"d1": "one two three four five six", "d2": "seven eight nine ten eleven twelve"}


def _beir(root: Path, splits: tuple[str, ...] = ("dev", "train"), queries: bool = True) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in DOCS.items()))
    if queries:
        (root / "queries.jsonl").write_text('{"_id": "q1", "text": "first"}\n{"_id": "q2", "text": "second"}\n')
    for i, split in enumerate(splits):
        (root / "qrels" / f"{split}.tsv").write_text(f"query-id\tcorpus-id\tscore\nq1\td{i + 1}\t1\n")
    return root


def _sts(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("a,b,1\nc,d,2\n")
    return path


def test_two_splits_of_one_folder_get_their_own_names_and_record_the_split(tmp_path: Path) -> None:
    folder = _beir(tmp_path / "F")
    dev, train = build_user_tasks([f"beir:{folder}@dev,beir:{folder}@train"])
    assert (dev.name, train.name) == ("beir:F@dev", "beir:F@train")
    assert isinstance(dev, RetrievalTask) and isinstance(train, RetrievalTask)
    assert dev.info()["split"] == "dev" and train.info()["split"] == "train"
    assert dev.data().qrels == {"q1": {"d1": 1.0}} and train.data().qrels == {"q1": {"d2": 1.0}}
    # Without @SPLIT the name stays short and the info says which split was read.
    (plain,) = build_user_tasks([f"beir:{folder}"])
    assert plain.name == "beir:F" and plain.info()["split"] == "dev"  # no test.tsv: the first by name
    # ...so beir:F beside beir:F@dev is the same data twice (two rows of equal scores before).
    with pytest.raises(InvalidRequestError, match="@dev twice"):
        build_user_tasks([f"beir:{folder},beir:{folder}@dev"])


def test_equal_basenames_are_told_apart_by_their_folders(tmp_path: Path) -> None:
    a, b = _sts(tmp_path / "x" / "a" / "pairs.csv"), _sts(tmp_path / "y" / "b" / "pairs.csv")
    c = _sts(tmp_path / "z" / "a" / "pairs.csv")
    other = _sts(tmp_path / "other.csv")
    names = [t.name for t in build_user_tasks([f"sts:{a},sts:{b},sts:{c},sts:{other}"])]
    assert names == ["sts:x/a/pairs.csv", "sts:b/pairs.csv", "sts:z/a/pairs.csv", "sts:other.csv"]
    with pytest.raises(InvalidRequestError, match="twice; give each data set once"):
        build_user_tasks([f"sts:{a}", f"sts:{tmp_path / 'x' / 'a' / '..' / 'a' / 'pairs.csv'}"])
    # Through a link: the same data, run twice before.
    (tmp_path / "link").symlink_to(tmp_path / "x")
    linked = tmp_path / "link" / "a" / "pairs.csv"
    with pytest.raises(InvalidRequestError, match=r"twice \(.*x/a/pairs.csv and .*link/a/pairs.csv "
                                                  r"are the same data\); give each data set once"):
        build_user_tasks([f"sts:{a}", f"sts:{linked}"])


def test_instruction_override_names_a_user_task(tmp_path: Path) -> None:
    folder = _beir(tmp_path / "F")
    tasks = build_user_tasks([f"beir:{folder}@dev,beir:{folder}@train"], "Find it")
    _override_instruction(tasks, "beir:F@dev=Find the evidence")  # names are matched case-blind
    assert [t.instruction for t in tasks] == ["Find the evidence", "Find it"]  # type: ignore[attr-defined]


def _goalex(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "data.json").write_text(json.dumps({"goal": "by topic", "texts": ["a", "b", "c"]}))
    (folder / "labels.json").write_text(json.dumps({"labels": [0, 1, 0]}))
    return folder


def test_an_empty_instruction_override_drops_the_goalex_goal(tmp_path: Path) -> None:
    """`--instruction TASK=` drops a task's instruction; a GoalEx task took the None it got for
    "no override" and clustered under data.json's goal all the same."""
    _goalex(tmp_path / "data" / "goalex_clustering" / "agnews")
    mine = _goalex(tmp_path / "mine")
    folder = _beir(tmp_path / "F")
    tasks = [*build_tasks(tmp_path / "data", "quick", ["goalex-agnews", "scifact-rerank", "emotion"]),
             *build_user_tasks([f"goalex:{mine},beir:{folder}@dev"], "Find it")]
    for name in ("goalex-agnews", "goalex:mine", "scifact-rerank", "emotion", "beir:F@dev"):
        _override_instruction(tasks, f"{name}= ")
    agnews, rerank, emotion, user, beir = tasks
    assert isinstance(agnews, ClusteringTask) and isinstance(user, ClusteringTask)
    assert agnews.view().instruction is None and user.view().instruction is None
    assert rerank.retrieval.instruction is None  # type: ignore[attr-defined]
    assert emotion.instruction is None and beir.instruction is None  # type: ignore[attr-defined]
    # Without an override, or with a TEXT, the goal is kept or replaced as before.
    kept, replaced = build_tasks(tmp_path / "data", "quick", ["goalex-agnews", "goalex-agnews"])
    _override_instruction([replaced], "goalex-agnews=by sentiment")
    assert isinstance(kept, ClusteringTask) and isinstance(replaced, ClusteringTask)
    assert (kept.view().instruction, replaced.view().instruction) == ("by topic", "by sentiment")


@pytest.mark.parametrize(("given", "expected"), [(None, "by topic"), ("by colour", "by colour"), ("", None)])
def test_task_instruction_replaces_or_drops_the_goalex_goal(tmp_path: Path, given: str | None,
                                                            expected: str | None) -> None:
    mine, folder = _goalex(tmp_path / "mine"), _beir(tmp_path / "F")
    user, beir = build_user_tasks([f"goalex:{mine},beir:{folder}@dev"], given)
    assert isinstance(user, ClusteringTask) and user.view().instruction == expected
    assert beir.instruction == (expected if given is not None else None)  # type: ignore[attr-defined]


def test_doc_max_words_applies_to_user_retrieval_tasks(tmp_path: Path) -> None:
    folder = _beir(tmp_path / "F")
    (cut,) = build_user_tasks([f"beir:{folder}@dev"], options=SuiteOptions(doc_max_words=2))
    assert isinstance(cut, RetrievalTask)
    assert cut.data().doc_texts == ["one two", "seven eight"] and cut.info()["doc_max_words"] == 2
    for options in (None, SuiteOptions(doc_max_words=0)):  # default and 0: documents whole
        (whole,) = build_user_tasks([f"beir:{folder}@dev"], options=options)
        assert isinstance(whole, RetrievalTask) and whole.data().doc_texts == list(DOCS.values())


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("beir:{root}/noq", "noq has no queries.jsonl; give a BEIR folder"),
        ("beir:{root}/F@test", "qrels/test.tsv does not exist; splits found: dev, train"),
        ("beir:{root}/pairs.csv", "pairs.csv is a file; give a BEIR folder"),
        ("sts:{root}/F", "F is a folder; give a csv file"),
        ("goalex:{root}/F", "F has no data.json or labels.json; give a GoalEx folder"),
    ],
)
def test_a_wrong_layout_names_the_path_given(tmp_path: Path, spec: str, message: str) -> None:
    _beir(tmp_path / "F")
    _beir(tmp_path / "noq", queries=False)
    _sts(tmp_path / "pairs.csv")
    with pytest.raises(InvalidRequestError, match=message) as info:
        build_user_tasks([spec.format(root=tmp_path)])
    assert "--data-dir" not in str(info.value) and str(tmp_path) in str(info.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("a,b,1\n", "only 1 sentence pair"),
        ("a,b,2\nc,d,2\n", "every gold score is 2"),
        (b"a,b,1\n" + "caf\u00e9,cafe,2\n".encode("latin-1"), "line 2: not UTF-8 text"),
    ],
)
def test_malformed_user_data_exit_4_before_any_model_loads(tmp_path: Path, content: str | bytes,
                                                           message: str) -> None:
    path = tmp_path / "x.csv"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    # An embedder that does not exist: the data are checked before it would be loaded (exit 2).
    result = CliRunner().invoke(cli, ["eval", "no-such-embedder", "--task", f"sts:{path}", "--baselines", "",
                                      "--no-cache", "--no-progress", "--out", str(tmp_path / "out")])
    assert result.exit_code == 4, result.output
    assert f"{path}" in result.output and message in result.output
    assert "Traceback" not in result.output and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("qrels", "message"),
    [
        ("q1\td1\t1\nq2\td2\tinf\n", "test.tsv, line 2: score 'inf' is not a finite number"),
        ("q1\td1\t1\nq1\td1\t2\n", "test.tsv, line 2: duplicate judgement of query 'q1' and document 'd1'"),
    ],
)
def test_malformed_user_qrels_exit_4(tmp_path: Path, qrels: str, message: str) -> None:
    folder = _beir(tmp_path / "F", splits=("test",))
    (folder / "qrels" / "test.tsv").write_text(qrels)
    result = CliRunner().invoke(cli, ["eval", "no-such-embedder", "--task", f"beir:{folder}", "--baselines", "",
                                      "--no-cache", "--no-progress", "--out", str(tmp_path / "out")])
    assert result.exit_code == 4, result.output
    assert message in result.output and not (tmp_path / "out").exists()


def test_folders_whose_names_hold_a_comma_or_an_at_sign_can_be_given(tmp_path: Path) -> None:
    """`--task beir:ds/my,set` and `beir:ds/v@2` said "ds/my does not exist" / "ds/v does not
    exist": the value was cut at the comma and the @ whatever the path."""
    comma = _beir(tmp_path / "my,set")
    (task,) = build_user_tasks([f"beir:{comma}"])
    assert task.name == "beir:my,set" and task.data().qrels == {"q1": {"d1": 1.0}}
    (task,) = build_user_tasks([f"beir:{comma}@train"])
    assert task.name == "beir:my,set@train" and task.info()["split"] == "train"
    at = _beir(tmp_path / "v@2")
    (task,) = build_user_tasks([f"beir:{at}"])
    assert task.name == "beir:v@2" and task.info()["split"] == "dev"
    (task,) = build_user_tasks([f"beir:{at}@train"])
    assert task.info()["split"] == "train"


@pytest.mark.parametrize(("cached", "calls", "said"), [
    (False, 0, "nothing was kept (--no-cache)"),
    (True, 0, "no embedding was saved yet (the cache saves every 512 texts)"),
    (True, 1, "the 2 embeddings saved so far are cached: running it again goes on from them"),
])
def test_a_stopped_eval_says_so_and_what_is_kept(tmp_path: Path, minilm, cached: bool,
                                                 calls: int, said: str) -> None:
    """Ctrl-C during `facet eval` exited 130 without a word: no report, and nothing said of the
    embeddings cached for the next run (the verification round: nor claimed where none was
    saved yet). The Ctrl-C is a KeyboardInterrupt raised in the main thread by the model's
    encode after ``calls`` calls, as a SIGINT raises it."""
    from embedders.registry import register_embedder, unregister_embedder

    class Stopped:
        dim = minilm.dim
        name = "stopped-here"
        identity = '{"method": "stopped-here"}'
        done = 0

        def encode(self, texts, *, role="document", instruction=None, batch_size=32):
            if Stopped.done >= calls:
                raise KeyboardInterrupt
            Stopped.done += 1
            return minilm.encode(texts, role=role)

    path = tmp_path / "x.csv"
    path.write_text("a cat,a dog,1\na car,a bus,2\n")
    register_embedder("stopped-here", lambda device=None, **kw: Stopped(), "stops")
    try:
        result = CliRunner().invoke(cli, [
            "eval", "stopped-here", "--task", f"sts:{path}", "--baselines", "", "--no-progress",
            "--out", str(tmp_path / "out"),
            *(["--cache-dir", str(tmp_path / "cache")] if cached else ["--no-cache"])])
    finally:
        unregister_embedder("stopped-here")
    assert result.exit_code == 130, result.output
    assert "stopped (Ctrl-C): no report was written; " in result.output
    assert said in result.output
    assert not (tmp_path / "out").exists()
