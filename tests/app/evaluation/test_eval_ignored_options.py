"""`facet eval` options that were dropped without a word: --json outside --list-tasks and
--collection, --task-instruction on sts tasks, and a GoalEx data.json without its "goal"."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tests.app.cli_runner import invoke_cli

PAIRS = "a cat sat,a cat was sitting,4.5\na dog ran,stocks fell,0.5\nit rains,it is raining,5\n"


def _sts(path: Path) -> Path:
    path.write_text(PAIRS)
    return path


def _goalex(folder: Path, data: dict[str, object]) -> Path:
    folder.mkdir(parents=True)
    (folder / "data.json").write_text(json.dumps({**data, "texts": ["a", "b", "c", "d"]}))
    (folder / "labels.json").write_text(json.dumps({"labels": [0, 1, 0, 1]}))
    return folder


def test_json_without_list_tasks_or_collection_is_refused(tmp_path: Path) -> None:
    """A markdown table on stdout, exit 0, for a caller that asked for JSON."""
    pairs = _sts(tmp_path / "sts1.csv")
    run = invoke_cli("eval", "minilm", "--task", f"sts:{pairs}", "--baselines", "", "--json",
                     "--out", str(tmp_path / "out"), "--no-progress")
    assert run.returncode == 2, run.stdout + run.stderr
    assert "--json applies to --list-tasks or --collection" in run.stderr
    assert not (tmp_path / "out").exists()


def test_task_instruction_on_sts_tasks_only_is_refused(tmp_path: Path) -> None:
    """Dropped, with info.instruction None and no note; without --task it was refused already."""
    pairs = _sts(tmp_path / "sts1.csv")
    run = invoke_cli("eval", "minilm", "--task", f"sts:{pairs}", "--baselines", "",
                     "--task-instruction", "Represent the sentence", "--out", str(tmp_path / "out"))
    assert run.returncode == 2, run.stdout + run.stderr
    assert "sts tasks read bare sentences" in run.stderr
    assert "--instruction sts:sts1.csv=TEXT" in run.stderr
    assert not (tmp_path / "out").exists()


def test_task_instruction_beside_sts_tasks_names_them_on_stderr(tmp_path: Path) -> None:
    """Applied to the goalex task, not to the sts one: a note says so. The embedder is unknown,
    so the run stops (exit 2) after the note and the data are read, before any model loads."""
    pairs = _sts(tmp_path / "sts1.csv")
    folder = _goalex(tmp_path / "topics", {"goal": "by topic"})
    run = invoke_cli("eval", "no-such-embedder", "--task", f"sts:{pairs},goalex:{folder}", "--baselines", "",
                     "--task-instruction", "by colour", "--out", str(tmp_path / "out"))
    assert run.returncode == 2 and "no-such-embedder" in run.stderr, run.stderr
    assert "note: --task-instruction is not applied to sts:sts1.csv" in run.stderr
    assert "--instruction sts:sts1.csv=TEXT" in run.stderr


@pytest.mark.parametrize(("data", "said"), [
    ({}, 'no "goal"'),
    ({"Goal": "by topic"}, "it has 'Goal'"),
    ({"goal": ""}, 'its "goal" is empty'),
])
def test_a_goalex_folder_without_its_goal_is_warned_about(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                          data: dict[str, object], said: str) -> None:
    """Clustered under no instruction, without a word. Data are read before any model loads,
    so an unknown embedder stops the run (exit 2) after the warning."""
    folder = _goalex(tmp_path / "topics", data)
    with caplog.at_level(logging.WARNING, logger="app.evaluation.loaders"):
        run = invoke_cli("eval", "no-such-embedder", "--task", f"goalex:{folder}", "--baselines", "",
                         "--out", str(tmp_path / "out"))
    assert run.returncode == 2 and "no-such-embedder" in run.stderr, run.stderr
    warned = [r.getMessage() for r in caplog.records if "clustering runs with no instruction" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith(str(folder / "data.json")) and said in warned[0]


def test_a_goalex_goal_gives_no_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = _goalex(tmp_path / "topics", {"goal": "by topic"})
    with caplog.at_level(logging.WARNING, logger="app.evaluation.loaders"):
        run = invoke_cli("eval", "no-such-embedder", "--task", f"goalex:{folder}", "--baselines", "")
    assert run.returncode == 2
    assert "clustering runs with no instruction" not in caplog.text


@pytest.mark.usefixtures("minilm")
def test_a_goalex_run_without_goal_still_runs_with_no_instruction(tmp_path: Path) -> None:
    """The warning changes nothing else: the run scores the task with no instruction."""
    folder = _goalex(tmp_path / "topics", {"Goal": "by topic"})
    out = tmp_path / "out"
    run = invoke_cli("eval", "minilm", "--task", f"goalex:{folder}", "--baselines", "", "--no-cache",
                     "--no-progress", "--out", str(out), env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert run.returncode == 0, run.stderr
    (result,) = json.loads((out / "results.json").read_text())["runs"][0]["results"]
    assert result["info"]["instruction"] is None


@pytest.mark.parametrize(("extra", "said"), [
    (["--no-cache", "--cache-dir", "CACHE"],
     "--no-cache reads and writes no cache, so --cache-dir is not used: give one or the other"),
    (["--rerank-top-n", "5"], "--rerank-top-n applies to the suites' rerank tasks, and none of the "
                              "tasks run is one"),
    (["--rerank-first-stage", "minilm", "--rerank-top-n", "5"],
     "--rerank-top-n and --rerank-first-stage apply to the suites' rerank tasks"),
    (["--doc-max-words", "10"], "--doc-max-words cuts the documents of retrieval and rerank tasks, and none "
                                "of the tasks run is one"),
])
def test_options_one_of_which_undoes_the_other_or_no_task_reads_are_refused(
        tmp_path: Path, extra: list[str], said: str) -> None:
    """Each was taken and dropped without a word, exit 0 (the eval exploration): the
    --task-instruction under --no-instructions, the --cache-dir under --no-cache, the rerank
    options of a run with no rerank task. The embedder is unknown: refused before it loads.
    (--task-instruction under --no-instructions, an ablation of the same command, is noted:
    ``test_an_instruction_override_of_a_task_instruction_is_noted``.)"""
    folder = _goalex(tmp_path / "topics", {"goal": "by topic"})
    run = invoke_cli("eval", "no-such-embedder", "--task", f"goalex:{folder}", "--baselines", "",
                     *[str(tmp_path / "cache") if a == "CACHE" else a for a in extra],
                     "--out", str(tmp_path / "out"))
    assert run.returncode == 2, run.stdout + run.stderr
    assert said in run.stderr and "no-such-embedder" not in run.stderr, run.stderr
    assert not (tmp_path / "out").exists()


def test_an_instruction_override_of_a_task_instruction_is_noted(tmp_path: Path) -> None:
    """--instruction TASK=TEXT on a --task item given --task-instruction too replaced it
    without a word."""
    folder = _goalex(tmp_path / "topics", {"goal": "by topic"})
    run = invoke_cli("eval", "no-such-embedder", "--task", f"goalex:{folder}", "--baselines", "",
                     "--task-instruction", "by colour", "--instruction", "goalex:topics=by size",
                     "--out", str(tmp_path / "out"))
    assert run.returncode == 2 and "no-such-embedder" in run.stderr, run.stderr
    assert "note: --instruction goalex:topics=... replaces --task-instruction for that task" in run.stderr
    ablation = invoke_cli("eval", "no-such-embedder", "--task", f"goalex:{folder}", "--baselines", "",
                          "--task-instruction", "by colour", "--no-instructions",
                          "--out", str(tmp_path / "out"))
    assert ablation.returncode == 2 and "no-such-embedder" in ablation.stderr, ablation.stderr
    assert "note: --no-instructions drops every instruction, --task-instruction's too" in ablation.stderr
    # --instruction TASK=TEXT under --no-instructions was dropped without a word.
    dropped = invoke_cli("eval", "no-such-embedder", "--task", f"goalex:{folder}", "--baselines", "",
                         "--instruction", "goalex:topics=by size", "--no-instructions",
                         "--out", str(tmp_path / "out"))
    assert dropped.returncode == 2 and "no-such-embedder" in dropped.stderr, dropped.stderr
    assert ("note: --no-instructions drops every instruction, --instruction's too (goalex:topics=by size)"
            in dropped.stderr)
    # --data-dir with only --task items was taken without a word (a typo in it went unseen).
    unread = invoke_cli("eval", "no-such-embedder", "--task", f"goalex:{folder}", "--baselines", "",
                        "--data-dir", str(tmp_path / "nonexistent"), "--out", str(tmp_path / "out"))
    assert unread.returncode == 2 and ("note: --data-dir holds the built-in tasks' data, and only --task items "
                                       "run: it is not read") in unread.stderr, unread.stderr


def test_an_instruction_that_is_not_unicode_text_is_refused_before_anything_loads(tmp_path: Path) -> None:
    """A Latin-1 terminal's "é" reaches the command as an unpaired surrogate: the run loaded the
    model, then failed on a UnicodeEncodeError traceback (the embedding cache's key)."""
    folder = _goalex(tmp_path / "gx", {"goal": "by letter"})
    for option, value in (("--task-instruction", "find \udce9"), ("--instruction", f"goalex:{folder}=find \udce9")):
        run = invoke_cli("eval", "minilm", "--task", f"goalex:{folder}", "--baselines", "", option, value,
                         "--out", str(tmp_path / "out"), "--no-progress")
        assert run.returncode == 2, run.stdout + run.stderr
        assert f"{option} holds an unpaired surrogate" in run.stderr, run.stderr
    assert not (tmp_path / "out").exists()


def test_an_instruction_for_a_task_whose_path_holds_an_equals_sign(tmp_path: Path) -> None:
    """`--instruction 'goalex:a=b=Group by animal'` (the task's name is its folder's) was split
    at its first '=': "names task 'goalex:a', which is not being run" (exit 2)."""
    folder = _goalex(tmp_path / "a=b", {"goal": "by letter"})
    run = invoke_cli("eval", "minilm", "--task", f"goalex:{folder}", "--baselines", "",
                     "--instruction", "goalex:a=b=Group by animal", "--out", str(tmp_path / "out"),
                     "--no-progress")
    assert run.returncode == 0, run.stdout + run.stderr
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert "Group by animal" in json.dumps(results), results
