"""`facet delete C --documents-from FILE` of more keys than one removal takes, stopped part-way
(verify21): a Ctrl-C after a part committed said "part 1 is the one to run again" of a part
whose keys were gone; the hint of a stop in part 3, "run the same removal again", was refused
(exit 3: the earlier parts' keys are gone) and no command resumed from the same file. Now
`--missing-ok` skips (and counts) the keys the collection no longer holds, and every stop's
hint is the user's own command with it. Also: `facet jobs ID` of a completed removal said
"to remove"; an empty FILE with --document keys refused them; `--documents-from -` without
-y said "no answer on standard input". Real minilm, real SQLite, Qdrant edge, tiny corpora;
MAX_REMOVED_KEYS set to 2 (1,000 in truth)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from app.text import shell_word
from indexer import metadata as md
from tests.app.cli_runner import invoke_cli


@pytest.fixture()
def five(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, str], list[str], Path]:
    """Collection ``c`` of 5 small files (job 1), parts of 2 keys; the env, the keys, and a
    file listing them all (3 parts)."""
    import app.services.indexing as indexing

    src = tmp_path / "src"
    src.mkdir()
    for i in range(5):
        (src / f"d{i}.txt").write_text(f"note {i} about trains and the weather")
    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "OMP_NUM_THREADS": "1"}
    done = invoke_cli("index", str(src), "-c", "c", "-e", "minilm", env=env)
    assert done.returncode == 0, done.stderr
    monkeypatch.setattr(indexing, "MAX_REMOVED_KEYS", 2)
    keys = sorted(str(p) for p in src.iterdir())
    listed = tmp_path / "k.txt"
    listed.write_text("\n".join(keys) + "\n")
    return env, keys, listed


def _documents(env: dict[str, str]) -> int:
    shown = invoke_cli("collections", "c", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    return int(json.loads(shown.stdout)["documents"])


def _rerun(listed: Path) -> str:
    return f"run `facet delete c --documents-from {shell_word(str(listed))} --missing-ok -y`"


def test_missing_ok_skips_and_counts_the_keys_removed_already(five) -> None:
    env, keys, listed = five
    first = invoke_cli("delete", "c", "-d", keys[0], "-d", keys[1], "-y", env=env)
    assert first.returncode == 0, first.stderr
    refused = invoke_cli("delete", "c", "--documents-from", str(listed), "-y", env=env)
    assert refused.returncode == 3, refused.stderr  # all or nothing stays the default
    assert _documents(env) == 3

    done = invoke_cli("delete", "c", "--documents-from", str(listed), "--missing-ok", "-y",
                      env=env)
    assert done.returncode == 0, done.stderr
    assert "2 keys already gone, skipped" in done.stdout, done.stdout
    assert "removed 3 documents (3 chunks) from c in 2 parts" in done.stdout, done.stdout
    assert _documents(env) == 0

    again = invoke_cli("delete", "c", "--documents-from", str(listed), "--missing-ok", "-y",
                       env=env)
    assert again.returncode == 0, again.stderr
    assert "5 keys already gone, skipped" in again.stdout, again.stdout
    assert "nothing to remove" in again.stdout, again.stdout


def test_ctrl_c_after_a_part_committed_says_it_completed_and_the_rerun_finishes(
        five, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.core import Facet

    env, _, listed = five
    real = Facet.remove_documents

    def committed_then_ctrl_c(self: Facet, *args: Any, **kwargs: Any) -> Any:
        real(self, *args, **kwargs)  # part 1 committed: job 2 completed
        raise KeyboardInterrupt

    monkeypatch.setattr(Facet, "remove_documents", committed_then_ctrl_c)
    stopped = invoke_cli("delete", "c", "--documents-from", str(listed), "-y", env=env)
    monkeypatch.setattr(Facet, "remove_documents", real)
    assert stopped.returncode == 130, (stopped.stdout, stopped.stderr)
    err = " ".join(stopped.stderr.split())
    assert "interrupted after part 1 of 3 completed: removal job 2 removed its 2 documents" \
        in err, err
    assert "part 1 of 3 was removed (job 2); parts 2-3 are the ones to run (3 keys): " \
           + _rerun(listed) in err, err
    assert "part 1 is the one to run again" not in err, err

    resumed = invoke_cli("delete", "c", "--documents-from", str(listed), "--missing-ok", "-y",
                         env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert "2 keys already gone, skipped" in resumed.stdout, resumed.stdout
    assert _documents(env) == 0
    shown = invoke_cli("jobs", "2", env=env)
    assert "2 document keys removed:" in shown.stdout, shown.stdout  # (it said "to remove")


def test_ctrl_c_in_part_3_hints_the_same_command_with_missing_ok(
        five, monkeypatch: pytest.MonkeyPatch, ctrl_c) -> None:
    env, _, listed = five
    reached = threading.Event()
    real = md.delete_documents
    calls: list[int] = []

    def third_waits(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) < 3:
            return real(*args, **kwargs)
        reached.set()
        time.sleep(30)  # the real SIGINT's KeyboardInterrupt is raised here
        raise AssertionError("not interrupted")

    monkeypatch.setattr(md, "delete_documents", third_waits)
    ctrl_c(reached.is_set)
    stopped = invoke_cli("delete", "c", "--documents-from", str(listed), "-y", env=env)
    monkeypatch.setattr(md, "delete_documents", real)
    assert stopped.returncode == 130, (stopped.stdout, stopped.stderr)
    err = " ".join(stopped.stderr.split())
    assert "interrupted: removal job 4 (part 3 of 3) stopped; the removal may be partly done" \
        in err, err
    assert "parts 1-2 of 3 were removed (jobs 2-3); part 3 is the next to run (1 key): " \
           + _rerun(listed) in err, err
    assert "--document " not in err and "run the same removal again" not in err, err

    resumed = invoke_cli("delete", "c", "--documents-from", str(listed), "--missing-ok", "-y",
                         env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert "4 keys already gone, skipped" in resumed.stdout, resumed.stdout
    assert _documents(env) == 0


def test_an_empty_file_with_document_keys_removes_those_and_warns(five) -> None:
    env, keys, _ = five
    empty = Path(env["FACET_DATA_DIR"]).parent / "empty.txt"
    empty.write_text("\n")
    done = invoke_cli("delete", "c", "--documents-from", str(empty), "-d", keys[0], "-y",
                      env=env)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "run without --documents-from" not in done.stderr, done.stderr
    assert f"warning: no document key in {empty}" in done.stderr, done.stderr
    assert _documents(env) == 4


def test_keys_on_standard_input_without_yes_say_give_yes(five) -> None:
    env, keys, _ = five
    done = invoke_cli("delete", "c", "--documents-from", "-", env=env, input=f"{keys[0]}\n")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "standard input holds the keys: give -y (or read keys from a file)" in done.stderr, \
        done.stderr
    assert "no answer on standard input" not in done.stderr, done.stderr
    assert _documents(env) == 5
