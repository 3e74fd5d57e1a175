"""The rest of the CLI's JSON goes through ``printable_json`` too: ``facet index --json`` (its
report names files and errors), ``facet index --background --json`` (the queued job's source),
``facet eval --list-tasks --json`` and ``facet soup`` (its ingredients). Written by
``json.dumps``'s default, a French or Japanese file name came out as ``caf\\u00e9`` and
``\\u65e5\\u672c\\u8a9e``; the run's real output is checked to decode to the same values, with
the characters a terminal acts on escaped (``tests/app/test_cli_json_escapes.py``)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.app.cli_runner import invoke_cli
from tests.app.test_cli_json_escapes import BIDI, C1, assert_no_raw

RLO = BIDI[0]


@pytest.fixture
def run(tmp_path: Path) -> Callable[..., object]:
    def invoke(*args: str):
        return invoke_cli(*args, env={"FACET_DATA_DIR": str(tmp_path / "data")})

    return invoke


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A folder named in French: a document with a bidi control (indexed), a file of a type not
    indexed whose name holds one (skipped) and a malformed Japanese-named JSON file (failed)."""
    src = tmp_path / f"notes café {C1}"
    src.mkdir()
    (src / "résumé é.txt").write_text(f"card payment {RLO}declined{BIDI[-1]} twice")
    (src / f"données {RLO}.xyz").write_text("x")
    (src / "日本語.json").write_text('{"text": ')
    return src


def test_index_json_report_is_readable_and_escaped(run, corpus) -> None:
    indexed = run("index", str(corpus), "-c", "notes", "--embedder", "minilm", "--json", "--allow-failures")
    assert indexed.returncode == 0, indexed.stderr
    assert_no_raw(indexed.stdout)
    report = json.loads(indexed.stdout)
    assert (report["docs_indexed"], report["docs_failed"]) == (1, 1)
    assert report["skipped_files"] == [str(corpus / f"données {RLO}.xyz")]
    [error] = [e for e in report["errors"] if e["kind"] == "error"]
    key, message = error["document"], error["message"]
    assert key == str(corpus / "日本語.json") and "malformed JSON" in message
    assert "notes café \\u009b2J" in indexed.stdout  # readable, not caf\u00e9
    assert "日本語.json" in indexed.stdout and "données \\u202e.xyz" in indexed.stdout


def test_index_background_json_prints_the_job_readable(run, corpus) -> None:
    queued = run("index", str(corpus), "-c", "bg", "--embedder", "minilm", "--background", "--json")
    assert queued.returncode == 0, queued.stderr
    try:
        assert_no_raw(queued.stdout)
        job = json.loads(queued.stdout)
        assert job["source"] == str(corpus) and job["collection"] == "bg"
        assert "notes café \\u009b2J" in queued.stdout
    finally:  # the detached process indexes into tmp_path: let it finish first
        run("jobs", str(json.loads(queued.stdout)["id"]), "--follow", "--interval", "0.2")


def test_eval_list_tasks_json_keeps_non_ascii_readable(monkeypatch) -> None:
    """The built-in descriptions are ASCII; a task described in French and Japanese (one more
    entry in the real registry, built as STS-B is) shows what any non-ASCII one would print."""
    from app.evaluation.suites import TASKS, describe_tasks

    description = f"STS français 日本語 {RLO}"
    monkeypatch.setitem(TASKS, "sts-fr", dataclasses.replace(TASKS["stsb"], name="sts-fr", description=description))
    listed = invoke_cli("eval", "--list-tasks", "--json")
    assert listed.returncode == 0, listed.stderr
    assert_no_raw(listed.stdout)
    assert json.loads(listed.stdout) == describe_tasks()
    assert '"description": "STS français 日本語 \\u202e"' in listed.stdout


def test_soup_report_is_readable_and_escaped(tmp_path, smollm2_cut) -> None:
    from tests.embedders.test_soup import _checkpoint

    root = tmp_path / f"runs café {C1}"
    a = _checkpoint(root, f"première {RLO}", 1, smollm2_cut)
    b = _checkpoint(root, "二番目", 2, smollm2_cut)
    made = invoke_cli("soup", str(a), str(b), "--out", str(tmp_path / "soupe"))
    assert made.returncode == 0, made.stderr
    assert_no_raw(made.stdout)
    report = json.loads(made.stdout)
    assert report["ingredients"] == [str(a), str(b)] and report["weights"] == [0.5, 0.5]
    assert "runs café \\u009b2J" in made.stdout and "二番目" in made.stdout
