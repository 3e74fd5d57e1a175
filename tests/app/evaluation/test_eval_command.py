"""`facet eval` end to end on a tiny dataset tree with the real minilm."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli
from app.evaluation.suites import TASKS


def _tiny_data_root(root: Path) -> Path:
    """The shared-data layout with a handful of items per dataset."""
    (root / "stsb_en").mkdir(parents=True)
    (root / "stsb_en" / "stsb-en-test.csv").write_text(
        "A man plays a guitar.,A man is playing the guitar.,4.8\n"
        "A dog runs in the park.,A cat sleeps on a sofa.,0.4\n"
        "Two kids ride bikes.,Children are riding bicycles.,4.2\n"
        '"Stocks fell sharply, traders said.",The market dropped.,3.1\n'
        "A woman slices onions.,Someone is cutting vegetables.,3.5\n"
    )
    (root / "sick").mkdir()
    (root / "sick" / "SICK.txt").write_text(
        "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tSemEval_set\n"
        "1\tA boy is jumping.\tA child jumps.\t4.6\tTEST\n"
        "2\tA boy is jumping.\tA chef cooks pasta.\t1.1\tTEST\n"
        "3\tA man drives a car.\tA person is driving.\t4.0\tTEST\n"
        "4\tA man drives a car.\tA bird flies.\t1.3\tTRAIN\n"
        "5\tThe sun is shining.\tIt is a sunny day.\t4.4\tTEST\n"
    )
    beir = root / "beir_scifact"
    (beir / "qrels").mkdir(parents=True)
    docs = {
        "d1": "Aspirin reduces the risk of heart attack in adults.",
        "d2": "Vitamin D deficiency is linked to bone fractures.",
        "d3": "Smoking increases lung cancer incidence.",
        "d4": "Exercise improves insulin sensitivity.",
    }
    (beir / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": k, "title": "", "text": v}) + "\n" for k, v in docs.items())
    )
    (beir / "queries.jsonl").write_text(
        '{"_id": "1", "text": "Aspirin prevents heart attacks."}\n{"_id": "2", "text": "Smoking causes lung cancer."}\n'
    )
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n1\td1\t1\n2\td3\t1\n")
    for name, goal, texts, labels in [
        (
            "agnews",
            "cluster by topic",
            ["The team won the cup.", "Shares rose today.", "The striker scored.", "Banks cut rates."],
            [0, 1, 0, 1],
        ),
        (
            "dbpedia",
            "cluster by ontology",
            [
                "Paris is a city in France.",
                "Einstein was a physicist.",
                "Berlin is a German city.",
                "Curie was a chemist.",
            ],
            [0, 1, 0, 1],
        ),
    ]:
        folder = root / "goalex_clustering" / name
        folder.mkdir(parents=True)
        (folder / "data.json").write_text(json.dumps({"goal": goal, "texts": texts}))
        (folder / "labels.json").write_text(json.dumps({"labels": labels}))
    (root / "clinc150").mkdir()
    items = [
        ["what is my balance", "balance"],
        ["how much money do i have", "balance"],
        ["send 20 dollars to bob", "transfer"],
        ["move money to savings", "transfer"],
        ["book a flight to rome", "book_flight"],
        ["i need a plane ticket", "book_flight"],
        ["is my flight delayed", "flight_status"],
        ["when does my flight land", "flight_status"],
    ]
    (root / "clinc150" / "data_full.json").write_text(json.dumps({"test": items}))
    (root / "clinc150" / "domains.json").write_text(
        json.dumps({"banking": ["balance", "transfer"], "travel": ["book_flight", "flight_status"]})
    )
    (root / "banking77").mkdir()
    rows = [
        "text,category",
        "my card has not arrived,card_arrival",
        "where is my new card,card_arrival",
        "what is the exchange rate,exchange_rate",
        "how much is a euro in dollars,exchange_rate",
    ]
    (root / "banking77" / "train.csv").write_text("\n".join(rows) + "\n")
    (root / "banking77" / "test.csv").write_text(
        "text,category\nstill waiting for my card,card_arrival\ndollar to pound rate,exchange_rate\n"
    )
    (root / "emotion").mkdir()
    (root / "emotion" / "train.txt").write_text(
        "text;label_name\ni feel so happy today;joy\nwhat a wonderful day;joy\n"
        "i feel miserable;sadness\nthis is so sad;sadness\n"
    )
    (root / "emotion" / "test.txt").write_text("text;label_name\ni am delighted;joy\ni am heartbroken;sadness\n")
    return root


@pytest.mark.usefixtures("minilm")
def test_eval_end_to_end_all_tasks(tmp_path: Path) -> None:
    root = _tiny_data_root(tmp_path / "data")
    out = tmp_path / "out"
    args = [
        "eval",
        "minilm",
        "--suite",
        "full",
        "--data-dir",
        str(root),
        "--out",
        str(out),
        "--cache-dir",
        str(tmp_path / "cache"),
        "--baselines",
        "",
        "--rerank-top-n",
        "2",
        "--no-progress",
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    data = json.loads((out / "results.json").read_text())
    run = data["runs"][0]
    assert run["embedder"] == "minilm"
    # What the figures depend on below the code, for a re-run to compare (torch is loaded by
    # the time the report is written: the packaged minilm runs on it).
    import platform

    import torch

    env = data["environment"]
    assert env["python"] == platform.python_version(), env
    assert env["torch"] in (torch.__version__, torch.__version__.split("+")[0]), env
    assert isinstance(env["torch_threads"], int) and env["torch_threads"] >= 1, env
    assert {"facet-search", "numpy", "scikit-learn"} <= set(env), env
    # The code that ran: this checkout's commit (tests run from one), or nothing where git or
    # the checkout is missing.
    from app.provenance import source_commit

    assert env.get("source") == source_commit(), env
    by_task = {r["task"]: r for r in run["results"]}
    assert set(by_task) == set(TASKS)
    for r in by_task.values():
        main = r["scores"][r["main_metric"]]
        assert -1.0 <= main <= 1.0
    # Easy cases a sentence encoder gets right.
    assert by_task["stsb"]["scores"]["spearman"] > 0.5
    assert by_task["scifact"]["scores"]["ndcg@10"] == pytest.approx(1.0)
    assert by_task["clinc-multiview"]["info"]["texts"] == 8
    assert "| stsb | **spearman** |" in (out / "results.md").read_text()
    # A second run reads every embedding from the cache.
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0, again.output
    assert "0 encoded" in again.output


def test_eval_list_tasks_and_errors(tmp_path: Path) -> None:
    listed = CliRunner().invoke(cli, ["eval", "--list-tasks", "--json"])
    assert listed.exit_code == 0
    assert [t["name"] for t in json.loads(listed.output)] == list(TASKS)
    bad = CliRunner().invoke(cli, ["eval", "minilm", "--tasks", "stsb,nope", "--data-dir", str(tmp_path)])
    assert bad.exit_code == 2 and "unknown task(s) nope" in bad.output
    assert "--task KIND:PATH" not in bad.output
    # A user's own data named with --tasks (`--task` takes it): pointed there, its path as typed.
    own = CliRunner().invoke(cli, ["eval", "minilm", "--tasks", "stsb,BEIR:/data/MyDocs", "--data-dir", str(tmp_path)])
    assert own.exit_code == 2 and ("your own data is given with --task KIND:PATH (--task BEIR:/data/MyDocs), "
                                   "not --tasks") in " ".join(own.output.split()), own.output
    missing = CliRunner().invoke(cli, ["eval", "minilm", "--data-dir", str(tmp_path / "absent")])
    assert missing.exit_code == 3 and "does not exist" in missing.output
    broken = _tiny_data_root(tmp_path / "data")
    (broken / "stsb_en" / "stsb-en-test.csv").write_text("a,b,1\nc,d\n")
    out = CliRunner().invoke(
        cli,
        [
            "eval",
            "minilm",
            "--tasks",
            "stsb",
            "--data-dir",
            str(broken),
            "--baselines",
            "",
            "--out",
            str(tmp_path / "o"),
            "--no-cache",
        ],
    )
    assert out.exit_code == 4 and "stsb-en-test.csv, line 2" in out.output


def test_every_embedder_is_checked_before_any_runs(tmp_path: Path) -> None:
    """A typo in the last baseline was found after the first embedder had run every task, and
    then no report was written; a checkpoint whose config holds a refused value was a
    traceback."""
    import shutil

    from embedders.registry import checkpoint_dir

    pairs = tmp_path / "pairs.csv"
    pairs.write_text("a man plays a guitar,a man plays guitar,5\na dog runs,a puppy runs,4\n"
                     "stocks fell,someone cooks pasta,0\n")
    args = ["eval", "minilm", "--task", f"sts:{pairs}", "--out", str(tmp_path / "o"), "--no-cache",
            "--no-progress"]
    typo = CliRunner().invoke(cli, [*args, "--baselines", "minilm,minlm"])
    assert typo.exit_code == 2 and "unknown embedder 'minlm'" in typo.output
    assert "spearman" not in typo.output  # nothing ran
    damaged = tmp_path / "ck"
    shutil.copytree(checkpoint_dir() / "causal-eos", damaged)
    meta = json.loads((damaged / "facet_config.json").read_text())
    meta["config"]["max_length"] = 8
    (damaged / "facet_config.json").write_text(json.dumps(meta))
    bad = CliRunner().invoke(cli, [*args, "--baselines", str(damaged)])
    assert bad.exit_code == 4, bad.output
    assert "facet_config.json: a saved CausalEOSConfig that is not valid: max_length must be at " \
        "least 16 tokens, got 8" in bad.output and "spearman" not in bad.output
    assert not (tmp_path / "o").exists()
    # A value of the wrong type names its field ("'<' not supported between instances of 'str'
    # and 'int'" named none).
    meta["config"]["max_length"], meta["config"]["temperature"] = 96, "0.05"
    (damaged / "facet_config.json").write_text(json.dumps(meta))
    typed = CliRunner().invoke(cli, [*args, "--baselines", str(damaged)])
    assert typed.exit_code == 4, typed.output
    assert "a saved CausalEOSConfig that is not valid: temperature is '0.05', not a number" \
        in typed.output, typed.output


@pytest.mark.usefixtures("minilm")
def test_no_instructions_records_none(tmp_path: Path) -> None:
    """--no-instructions ran without the task's instruction, but results.json recorded it."""
    beir = tmp_path / "myset"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text('{"_id": "d1", "text": "cats purr"}\n'
                                       '{"_id": "d2", "text": "stocks fell"}\n')
    (beir / "queries.jsonl").write_text('{"_id": "q1", "text": "a purring cat"}\n')
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    out = tmp_path / "o"
    run = CliRunner().invoke(cli, ["eval", "minilm", "--task", f"beir:{beir}", "--task-instruction",
                                   "Retrieve X", "--no-instructions", "--baselines", "",
                                   "--out", str(out), "--no-progress"])
    assert run.exit_code == 0, run.output
    report = json.loads((out / "results.json").read_text())
    (result,) = report["runs"][0]["results"]
    assert result["info"]["instruction"] is None and report["settings"]["use_instructions"] is False


def test_instruction_override(tmp_path: Path) -> None:
    from app.commands.eval import _override_instruction
    from app.errors import InvalidRequestError
    from app.evaluation.suites import build_tasks

    tasks = build_tasks(tmp_path, "quick", ["goalex-agnews", "scifact-rerank", "clinc-multiview"])
    _override_instruction(tasks, "goalex-agnews=Cluster by sentiment")
    _override_instruction(tasks, "scifact-rerank = Find evidence")
    assert tasks[0].instruction == "Cluster by sentiment"  # type: ignore[attr-defined]
    assert tasks[1].retrieval.instruction == "Find evidence"  # type: ignore[attr-defined]
    for bad, message in [
        ("clinc-multiview=x", "no single instruction"),
        ("stsb=x", "not being run"),
        ("no-equals-sign", "TASK=TEXT"),
    ]:
        with pytest.raises(InvalidRequestError, match=message):
            _override_instruction(tasks, bad)


@pytest.mark.usefixtures("minilm")
def test_eval_on_your_own_data(tmp_path: Path) -> None:
    """--task KIND:PATH runs the same metrics on a user's folder, outside ../shared/data."""
    root = _tiny_data_root(tmp_path / "data")
    mine = tmp_path / "mine"
    (mine / "beir").mkdir(parents=True)
    for name in ("corpus.jsonl", "queries.jsonl"):
        (mine / "beir" / name).write_text((root / "beir_scifact" / name).read_text())
    (mine / "beir" / "qrels").mkdir()
    (mine / "beir" / "qrels" / "dev.tsv").write_text((root / "beir_scifact" / "qrels" / "test.tsv").read_text())
    (mine / "pairs.csv").write_text((root / "stsb_en" / "stsb-en-test.csv").read_text())
    out = tmp_path / "out"
    args = ["eval", "minilm", "--task", f"beir:{mine / 'beir'},sts:{mine / 'pairs.csv'}",
            "--task", f"goalex:{root / 'goalex_clustering' / 'agnews'}", "--task-instruction", "Find the evidence",
            "--data-dir", str(tmp_path / "nowhere"), "--out", str(out), "--baselines", "", "--no-cache",
            "--no-progress"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    run = json.loads((out / "results.json").read_text())["runs"][0]
    by_task = {r["task"]: r for r in run["results"]}
    assert set(by_task) == {"beir:beir", "sts:pairs.csv", "goalex:agnews"}
    assert by_task["beir:beir"]["scores"]["ndcg@10"] == pytest.approx(1.0)  # qrels/dev.tsv found as the only split
    assert by_task["beir:beir"]["info"]["instruction"] == "Find the evidence"
    assert by_task["sts:pairs.csv"]["scores"]["spearman"] > 0.5
    for bad, message in [("nope:/x", "KIND:PATH"), (f"sts:{tmp_path / 'absent.csv'}", "does not exist")]:
        failed = CliRunner().invoke(cli, ["eval", "minilm", "--task", bad, "--baselines", ""])
        assert failed.exit_code == 2 and message in failed.output
    lone = CliRunner().invoke(cli, ["eval", "minilm", "--task-instruction", "x", "--baselines", ""])
    assert lone.exit_code == 2 and "applies to --task" in lone.output


def test_baselines_split_at_commas_outside_an_embedders_options(tmp_path: Path) -> None:
    """`--baselines 'checkpoints/causal2vec[max_length=96,context_placement=none]'` (as
    docs/results.md writes it) was split inside the brackets: "unknown embedder
    'checkpoints/causal2vec[max_length=96'"."""
    from app.commands.eval import _split

    assert _split("a[x=1,y=2], b ,c[],,d[k=v]") == ["a[x=1,y=2]", "b", "c[]", "d[k=v]"]
    assert _split("") == [] and _split(None) == []
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("a man plays a guitar,a man plays guitar,5\na dog runs,a puppy runs,4\n")
    result = CliRunner().invoke(cli, ["eval", "minilm", "--task", f"sts:{pairs}", "--no-cache", "--out",
                                      str(tmp_path / "o"), "--baselines",
                                      "minilm[instruction_weight=1],minlm"])
    # The bracketed spec is one embedder; the typo after it is named.
    assert result.exit_code == 2 and "unknown embedder 'minlm'" in result.output, result.output
    # Its options are checked before any task runs too (they were checked as it loaded).
    result = CliRunner().invoke(cli, ["eval", "minilm", "--task", f"sts:{pairs}", "--no-cache", "--out",
                                      str(tmp_path / "o"), "--baselines",
                                      "minilm[instruction_weight=1,max_length=96],minilm"])
    assert result.exit_code == 2, result.output
    assert "embedder 'minilm' has no option 'max_length'" in result.output, result.output


def test_the_rerank_first_stage_is_checked_before_any_task_runs(tmp_path: Path) -> None:
    """`--tasks stsb,sick,scifact-rerank --rerank-first-stage minilmm` ran stsb and sick, then
    failed "unknown embedder 'minilmm'" and wrote no report."""
    root = _tiny_data_root(tmp_path / "data")
    result = CliRunner().invoke(cli, ["eval", "minilm", "--tasks", "stsb,scifact-rerank", "--data-dir", str(root),
                                      "--rerank-first-stage", "minilmm", "--baselines", "", "--no-cache",
                                      "--no-progress", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "unknown embedder 'minilmm'" in result.output
    assert "spearman" not in result.output and not (tmp_path / "o").exists()  # nothing ran


def test_an_out_that_cannot_hold_the_report_is_refused_before_any_work(tmp_path: Path) -> None:
    """A file as --out was a FileExistsError traceback after the whole run, results.json being
    a folder an IsADirectoryError, an --out that cannot be created the same."""
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("a man plays a guitar,a man plays guitar,5\na dog runs,a puppy runs,4\n")
    afile = tmp_path / "afile"
    afile.write_text("x")
    clash = tmp_path / "clash"
    (clash / "results.json").mkdir(parents=True)
    args = ["eval", "minilm", "--task", f"sts:{pairs}", "--baselines", "", "--no-cache", "--no-progress"]
    for out, code, message in [
        (afile, 2, f"--out {afile} is a file; name a folder for results.json and results.md"),
        (clash, 2, f"--out {clash}: results.json in it is a folder"),
        (afile / "sub", 4, f"--out {afile / 'sub'}: cannot create the folder"),
    ]:
        result = CliRunner().invoke(cli, [*args, "--out", str(out)])
        assert isinstance(result.exception, SystemExit), result.exception  # a message, not a traceback
        assert result.exit_code == code and message in result.output, result.output
        assert "spearman" not in result.output  # before any model ran
    assert afile.read_text() == "x"


@pytest.mark.usefixtures("minilm")
def test_a_new_out_folder_is_created_up_front_and_the_report_written_there(tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("a man plays a guitar,a man plays guitar,5\na dog runs,a puppy runs,4\n")
    out = tmp_path / "new" / "deeper"
    result = CliRunner().invoke(cli, ["eval", "minilm", "--task", f"sts:{pairs}", "--baselines", "",
                                      "--no-cache", "--no-progress", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["results.json", "results.md"]


@pytest.mark.usefixtures("minilm")
def test_a_baseline_that_loads_the_evaluated_model_adds_no_column(tmp_path: Path) -> None:
    """`--baselines MiniLM` or `minilm[]` beside `minilm` added a second, identical column
    (`minilm,minilm` was already one); options that change the model still count."""
    from app.commands.eval import _loads_as

    assert _loads_as("minilm") == _loads_as("MiniLM") == _loads_as("minilm[]")
    assert _loads_as("minilm[instruction_weight=1]") != _loads_as("minilm")
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("a man plays a guitar,a man plays guitar,5\na dog runs,a puppy runs,4\n")
    out = tmp_path / "o"
    result = CliRunner().invoke(cli, ["eval", "minilm", "--task", f"sts:{pairs}", "--baselines",
                                      "MiniLM,minilm[],minilm", "--no-progress", "--out", str(out),
                                      "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 0, result.output
    assert [r["embedder"] for r in json.loads((out / "results.json").read_text())["runs"]] == ["minilm"]
    assert "baseline 'MiniLM' loads the same model as 'minilm'; evaluated once" in result.output


def test_a_task_with_no_score_is_reported_and_the_run_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An STS file of sentences paired with themselves gives every pair the same cosine:
    `spearman is undefined when one side is constant` ended the run with a traceback, exit 1
    and no results.json, losing every other task's figures."""
    import embedders
    from tests.app.evaluation.conftest import FakeEmbedder, hashed_vector

    monkeypatch.setattr(embedders, "load_embedder",
                        lambda name, **kw: FakeEmbedder(lambda t, r, i: hashed_vector(t), 16, name=name))
    same = tmp_path / "same.csv"
    same.write_text("a man plays a guitar,a man plays a guitar,5\na dog runs,a dog runs,4\n"
                    "stocks fell,stocks fell,0\n")
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("a man plays a guitar,a man plays guitar,5\na dog runs,a puppy runs,4\n"
                     "stocks fell,someone cooks pasta,0\n")
    out = tmp_path / "o"
    result = CliRunner().invoke(cli, ["eval", "minilm", "--task", f"sts:{same},sts:{pairs}", "--baselines", "",
                                      "--no-cache", "--no-progress", "--out", str(out)])
    # The figures are written; the exit code (4, unreadable data) says some are missing.
    assert result.exit_code == 4, result.output
    assert "minilm sts:same.csv (3 pairs): no spearman: spearman is undefined" in result.output
    assert "1 task(s) have no score (minilm sts:same.csv)" in result.output
    run = json.loads((out / "results.json").read_text())["runs"][0]
    assert json.loads(run["identity"]) == {"fake": "minilm", "version": 0}  # no model was loaded
    by_task = {r["task"]: r for r in run["results"]}
    assert by_task["sts:same.csv"]["scores"] == {"spearman": None}
    assert by_task["sts:same.csv"]["error"].startswith("spearman is undefined: every pair has the same cosine")
    assert isinstance(by_task["sts:pairs.csv"]["scores"]["spearman"], float)
    assert "error" not in by_task["sts:pairs.csv"]
