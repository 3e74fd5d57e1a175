"""Removing documents at scale with `facet delete C --document KEY`: an empty key list built by
a script deleted the whole collection; more than 1,000 keys were refused with "remove them in
parts" and no more; a later removal hid a stopped one's note (and `facet collections` advised
`facet index`, which adds back the documents being removed); Ctrl-C printed nothing; a Ctrl-C'd
removal completed by a rerun still asked for the rerun; a jsonl's removed records warned one
line each, all naming the same file; `--errors-offset` on a removal said "the job has none".
Real minilm, real SQLite, Qdrant edge, tiny corpora."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from indexer import metadata as md
from tests.app.cli_runner import invoke_cli


def _folder(tmp_path: Path, n: int) -> tuple[dict[str, str], list[str]]:
    """Collection ``c`` of ``n`` small files (job 1); the env and the files' keys."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(n):
        (src / f"d{i}.txt").write_text(f"note {i} about trains and the weather")
    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "OMP_NUM_THREADS": "1"}
    done = invoke_cli("index", str(src), "-c", "c", "-e", "minilm", env=env)
    assert done.returncode == 0, done.stderr
    return env, sorted(str(p) for p in src.iterdir())


def _documents(env: dict[str, str]) -> int:
    listed = invoke_cli("collections", "c", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    return int(json.loads(listed.stdout)["documents"])


def test_an_empty_documents_from_removes_nothing_and_keeps_the_collection(tmp_path: Path) -> None:
    env, keys = _folder(tmp_path, 3)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n")
    for args, stdin in ((["--documents-from", str(empty)], None),
                        (["--documents-from", "-"], "")):
        done = invoke_cli("delete", "c", *args, "-y", env=env, input=stdin)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert "nothing removed; to delete the collection itself, run without " \
               "--documents-from" in done.stderr, done.stderr
        assert _documents(env) == 3
    # With -d keys too, those are removed, the empty FILE warned of (test_parts9_cli.py).

    listed = tmp_path / "keys.txt"  # CRLF, a blank line; combined with -d
    listed.write_bytes(f"{keys[1]}\r\n\r\n{keys[2]}\r\n".encode())
    done = invoke_cli("delete", "c", "-d", keys[0], "--documents-from", str(listed), "-y", env=env)
    assert done.returncode == 0, done.stderr
    assert "removed 3 documents" in done.stdout, done.stdout
    assert _documents(env) == 0


def test_more_keys_than_one_removal_takes_are_checked_then_removed_in_parts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import app.services.indexing as indexing

    env, keys = _folder(tmp_path, 5)
    monkeypatch.setattr(indexing, "MAX_REMOVED_KEYS", 2)  # (1,000 in truth)
    listed = tmp_path / "keys.txt"
    listed.write_text("\n".join([*keys, "nosuch"]) + "\n")
    refused = invoke_cli("delete", "c", "--documents-from", str(listed), "-y", env=env)
    assert refused.returncode == 3, refused.stderr
    assert "no document 'nosuch'" in refused.stderr and "nothing was removed" in refused.stderr
    assert _documents(env) == 5

    listed.write_text("\n".join(keys) + "\n")
    done = invoke_cli("delete", "c", "--documents-from", str(listed), "-y", env=env)
    assert done.returncode == 0, done.stderr
    assert "removed 5 documents (5 chunks) from c in 3 parts (jobs 2-4)" in done.stdout, done.stdout
    assert _documents(env) == 0


def test_the_cap_is_in_the_help() -> None:
    from app.services.indexing import MAX_REMOVED_KEYS

    shown = invoke_cli("delete", "--help", env={"COLUMNS": "200"})
    assert f"at most {MAX_REMOVED_KEYS:,} keys" in " ".join(shown.stdout.split()), shown.stdout
    assert "--documents-from" in shown.stdout


def _blocking_delete(reached: threading.Event) -> Any:
    """``md.delete_documents`` that waits (after the points were deleted) for the Ctrl-C."""
    def wait(*args: Any, **kwargs: Any) -> None:
        reached.set()
        time.sleep(30)  # the real SIGINT's KeyboardInterrupt is raised here
        raise AssertionError("not interrupted")
    return wait


def test_ctrl_c_says_how_to_finish_and_the_rerun_completes_the_stopped_job(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ctrl_c) -> None:
    env, keys = _folder(tmp_path, 4)
    reached = threading.Event()
    monkeypatch.setattr(md, "delete_documents", _blocking_delete(reached))
    ctrl_c(reached.is_set)
    stopped = invoke_cli("delete", "c", "-d", keys[0], "-d", keys[1], "-y", env=env)
    monkeypatch.undo()
    assert stopped.returncode == 130, (stopped.stdout, stopped.stderr)
    assert "interrupted: removal job 2 stopped; the removal may be partly done" in \
        stopped.stderr, stopped.stderr
    assert f"run `facet delete c --document {keys[0]} --document {keys[1]}`" in stopped.stderr

    # Another removal meanwhile: the stopped one is still what the listing says, not
    # `facet index`.
    other = invoke_cli("delete", "c", "-d", keys[3], "-y", env=env)
    assert other.returncode == 0, other.stderr
    listing = invoke_cli("collections", env=env).stdout
    assert "a removal (job 2) stopped part-way" in listing, listing
    assert "facet index" not in listing, listing

    # Its keys removed in two goes: the stopped job says which job completed it.
    first = invoke_cli("delete", "c", "-d", keys[0], "-y", env=env)
    assert first.returncode == 0, first.stderr
    assert "a removal (job 2) stopped part-way" in invoke_cli("collections", env=env).stdout
    second = invoke_cli("delete", "c", "-d", keys[1], "-y", env=env)
    assert second.returncode == 0, second.stderr
    shown = invoke_cli("jobs", "2", env=env).stdout
    assert "stopped (KeyboardInterrupt); completed by job 5, which removed the last of its " \
           "documents" in shown, shown
    assert "run `facet delete" not in shown, shown
    listing = invoke_cli("collections", env=env).stdout
    assert "stopped part-way" not in listing and "missing" not in listing, listing


def test_a_rerun_of_a_ctrl_c_removal_says_it_ran_the_same_removal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ctrl_c) -> None:
    env, keys = _folder(tmp_path, 3)
    reached = threading.Event()
    monkeypatch.setattr(md, "delete_documents", _blocking_delete(reached))
    ctrl_c(reached.is_set)
    stopped = invoke_cli("delete", "c", "-d", keys[0], "-d", keys[1], "-y", env=env)
    monkeypatch.undo()
    assert stopped.returncode == 130, stopped.stderr
    again = invoke_cli("delete", "c", "-d", keys[0], "-d", keys[1], "-y", env=env)
    assert again.returncode == 0, again.stderr
    shown = invoke_cli("jobs", "2", env=env).stdout
    assert "stopped (KeyboardInterrupt); job 3 ran the same removal again" in shown, shown


def test_a_jsonl_warns_once_with_its_records_counted_and_offset_on_keys(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps({"_id": f"r{i}", "text": f"record {i} about trains"}) + "\n"
                            for i in range(5)))
    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "OMP_NUM_THREADS": "1"}
    done = invoke_cli("index", str(path), "-c", "c", "-e", "minilm", env=env)
    assert done.returncode == 0, done.stderr
    done = invoke_cli("delete", "c", "-d", "r0", "-d", "r1", "-d", "r2", "-d", "r3", "-y", env=env)
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "warning:" in line]
    assert warned == [f"  warning: {path} is still there: 4 of its records removed (r0, r1, r2, "
                      "...): delete them from the file too, or indexing it again (or a folder "
                      "holding it) adds them back"], done.stderr

    # --errors-offset pages a removal's keys (it has no errors): until 2026-12-01 it paged
    # nothing, and the keys past the first 1,000 of a removal could not be listed
    shown = invoke_cli("jobs", "2", "--errors", "3", "--errors-offset", "2", env=env).stdout
    assert "the job has none" not in shown, shown
    assert "  document keys 3 to 4 of 4 removed:\n    r2\n    r3\n" in shown, shown
    assert "    r0\n" not in shown and "more (of 4)" not in shown, shown
    first = invoke_cli("jobs", "2", "--errors", "3", env=env).stdout
    assert "  4 document keys removed:\n    r0\n    r1\n    r2\n" in first, first
    assert ("    ... 1 more (of 4): facet jobs 2 --errors 3 --errors-offset 3 shows the next "
            "ones (--errors N: N a page, up to 1000)") in first, first
    none = invoke_cli("jobs", "2", "--errors", "0", env=env).stdout  # its hint named itself
    assert "    ... 4 more (of 4): facet jobs 2 --errors-offset 0 shows the next ones" in none, none
    past = invoke_cli("jobs", "2", "--errors-offset", "9", env=env).stdout
    assert "  no document keys past the first 9: the removal has 4" in past, past
    paged = json.loads(invoke_cli("jobs", "2", "--errors", "2", "--errors-offset", "1", "--json",
                                  env=env).stdout)
    assert (paged["removed_keys"], paged["removed_keys_total"]) == (["r1", "r2"], 4), paged
