"""`facet` driven by scripts (2026-12-01): `facet jobs ID --follow --json` (with `--cancel`
too) printed text lines on stdout; `facet index --json` of failed documents exited 4 without
its `error:` line, printed its errors as [key, message] pairs and no `id` (the job record's
shape elsewhere), and a cancelled run's `message` null; `facet embed -` embedded the text "-"
and `facet embed --json` was "No such option"; `facet delete GONE -y --missing-ok` was exit 2."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.app.cli_runner import invoke_cli, tiny_data_folder
from tests.app.services.conftest import write_corpus
from tests.app.test_jobs_cancel_cmd import _jobs


def _env(data: Path) -> dict[str, str]:
    return {"FACET_DATA_DIR": str(data), "OMP_NUM_THREADS": "1"}


def test_jobs_follow_json_prints_the_final_record_alone(tmp_path) -> None:
    env = _env(tiny_data_folder(tmp_path))
    followed = invoke_cli("jobs", "1", "--follow", "--json", env=env)
    assert followed.returncode == 0, followed.stderr
    assert json.loads(followed.stdout) == json.loads(invoke_cli("jobs", "1", "--json",
                                                                env=env).stdout)
    assert "job 1 completed: 2/2 documents" in followed.stderr  # the progress, on stderr


def test_jobs_cancel_follow_json_prints_one_document_and_the_follow_exit_code(tmp_path) -> None:
    ids = _jobs(tmp_path)
    env = _env(tmp_path)
    done = invoke_cli("jobs", str(ids["queued"]), "--cancel", "--follow", "--json", env=env)
    job = json.loads(done.stdout)  # one JSON document: it was the record, then text lines
    assert (job["id"], job["state"]) == (ids["queued"], "cancelled")
    assert f"job {ids['queued']} cancelled" in done.stderr
    plain = invoke_cli("jobs", str(ids["queued"]), "--follow", env=env)
    assert done.returncode == plain.returncode != 0  # as --follow without --json


@pytest.fixture
def failing(tmp_path: Path) -> Path:
    """A folder of one text, one empty and one binary file (two documents fail)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("card payment declined twice")
    (src / "empty.txt").write_text("")
    (src / "bin.txt").write_bytes(b"\x00\x01\x02binary\x00" * 20)
    return src


def test_index_json_with_failed_documents_says_the_error_line(tmp_path, failing) -> None:
    env = _env(tmp_path / "data")
    done = invoke_cli("index", str(failing), "-c", "t4", "-e", "minilm", "--json", env=env)
    assert done.returncode == 4
    assert json.loads(done.stdout)["docs_failed"] == 2  # the JSON alone on stdout
    assert [line for line in done.stderr.splitlines() if line.startswith("error: ")] == [
        "error: 2 of 3 documents failed; see the record's \"errors\" or `facet jobs 1` "
        "(--allow-failures to exit 0 anyway)"], done.stderr


def test_index_json_carries_the_job_records_id_and_errors(tmp_path, failing) -> None:
    env = _env(tmp_path / "data")
    report = json.loads(invoke_cli("index", str(failing), "-c", "t4", "-e", "minilm", "--json",
                                   "--allow-failures", env=env).stdout)
    job = json.loads(invoke_cli("jobs", "1", "--json", env=env).stdout)
    assert report["id"] == report["job_id"] == job["id"] == 1
    assert report["errors"] == job["errors"] and len(report["errors"]) == 2
    assert {e["kind"] for e in report["errors"]} == {"error"}
    assert report["errors_total"] == 2 and report["message"] == job["message"]
    assert set(job) <= set(report)  # every key of the job record
    assert report["elapsed_s"] > 0 and "docs_per_s" in report  # the report's own kept


def test_a_cancelled_json_run_carries_its_message(tmp_path, monkeypatch) -> None:
    import app.commands.index as index_cmd

    write_corpus(tmp_path / "src", 6, words=10)
    opened: list[Any] = []
    real_open, real_bar = index_cmd.open_facet, index_cmd.progress_bar

    @contextmanager
    def open_facet(**kwargs: Any) -> Iterator[Any]:
        with real_open(**kwargs) as facet:
            opened.append(facet)
            yield facet

    def progress_bar(start: Any = None, **kwargs: Any) -> Any:
        bar, update = real_bar(start, **kwargs)

        def cancelling(p: Any) -> None:
            if len(opened) == 1:
                opened.append(opened[0].cancel_job(opened[0].jobs("x", limit=1)[0].id))
            update(p)

        return bar, cancelling

    monkeypatch.setattr(index_cmd, "open_facet", open_facet)
    monkeypatch.setattr(index_cmd, "progress_bar", progress_bar)
    done = invoke_cli("index", str(tmp_path / "src"), "-c", "x", "-e", "minilm", "--batch-chunks",
                      "1", "--json", env=_env(tmp_path / "data"))
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["state"] == "cancelled"
    assert report["message"] and report["message"].startswith("cancelled after ")
    assert report["message"] in done.stderr  # the error line's words


def test_embed_dash_reads_the_texts_from_stdin(tmp_path) -> None:
    env = _env(tmp_path / "data")
    piped = invoke_cli("embed", "-", "-e", "minilm", env=env, input="\ufeffhello\r\n\nworld\n")
    assert piped.returncode == 0, piped.stderr
    given = invoke_cli("embed", "hello", "world", "-e", "minilm", env=env)
    assert json.loads(piped.stdout)["vectors"] == json.loads(given.stdout)["vectors"]
    # The blank line 2 has no vector: said, in the JSON and on stderr (it was skipped unsaid,
    # and a script pairing lines with vectors had them out of step). None: no key, no note.
    assert json.loads(piped.stdout)["skipped_lines"] == [2]
    assert "note: 1 blank line of standard input skipped (line 2" in piped.stderr, piped.stderr
    whole = invoke_cli("embed", "-", "-e", "minilm", env=env, input="hello\nworld\n")
    assert "skipped_lines" not in json.loads(whole.stdout) and "blank" not in whole.stderr
    empty = invoke_cli("embed", "-", "-e", "minilm", env=env, input="")
    assert (empty.returncode, empty.stdout) == (2, "")
    assert empty.stderr.startswith("error: standard input holds no text"), empty.stderr
    bad = invoke_cli("embed", "-", "-e", "minilm", env=env, input=b"caf\xe9\n")
    assert bad.returncode == 4 and "error: standard input is not UTF-8 text" in bad.stderr


def test_embed_takes_json_as_a_no_op(tmp_path) -> None:
    env = _env(tmp_path / "data")
    flagged = invoke_cli("embed", "hello", "-e", "minilm", "--json", env=env)
    assert flagged.returncode == 0, flagged.stderr
    assert flagged.stdout == invoke_cli("embed", "hello", "-e", "minilm", env=env).stdout


def test_delete_missing_ok_of_a_collection_gone_is_exit_0(tmp_path) -> None:
    env = _env(tiny_data_folder(tmp_path))
    gone = invoke_cli("delete", "t5", "-y", "--missing-ok", env=env)
    assert (gone.returncode, gone.stdout) == (0, "")
    assert gone.stderr == "no collection t5: nothing to delete\n"
    assert invoke_cli("delete", "t5", "-y", env=env).returncode == 3
    kept = invoke_cli("delete", "tiny", "-y", "--missing-ok", env=env)  # one there: deleted
    assert kept.returncode == 0 and kept.stdout.startswith("deleted tiny"), kept.stderr
