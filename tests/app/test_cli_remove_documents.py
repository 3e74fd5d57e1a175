"""`facet delete C --document KEY` and `facet index FILE --sync` of a deleted file: an erasure
request ("remove this one document") had no command at all, and a file indexed on its own and
deleted since could not be named again (exit 3, "does not exist; pass a folder...")."""

from __future__ import annotations

import json
from pathlib import Path

from tests.app.cli_runner import invoke_cli


def _indexed(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """Collection ``ten`` holding inbox/letter.txt (indexed alone) and inbox/other.txt; the
    environment and the letter's path."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    letter = inbox / "letter.txt"
    letter.write_text("Dear bank, my private letter about the mortgage on my house.")
    (inbox / "other.txt").write_text("The football match was delayed by rain.")
    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "FACET_CHUNK_TOKENS": "64"}
    for path in (letter, inbox / "other.txt"):
        done = invoke_cli("index", str(path), "-c", "ten", "-e", "minilm", env=env)
        assert done.returncode == 0, done.stderr
    return env, letter


def _search(env: dict[str, str], query: str) -> list[str]:
    done = invoke_cli("search", query, "-c", "ten", "--json", env=env)
    assert done.returncode == 0, done.stderr
    return [r["doc_id"] for r in json.loads(done.stdout)["results"]]


def test_delete_document_removes_it_and_says_its_file_brings_it_back(tmp_path) -> None:
    env, letter = _indexed(tmp_path)
    assert str(letter) in _search(env, "private letter mortgage")

    done = invoke_cli("delete", "ten", "--document", str(letter), "-y", env=env)

    assert done.returncode == 0, done.stderr
    assert f"removed {letter} (1 chunk)" in done.stdout
    assert "removed 1 document (1 chunk) from ten: job 3" in done.stdout
    assert f"warning: {letter} is still there: delete it (or the record) from there too" in done.stderr
    assert str(letter) not in _search(env, "private letter mortgage")
    jobs = invoke_cli("jobs", "-c", "ten", env=env)
    assert f"job 3 completed: ten <- remove: {letter} [minilm]" in jobs.stdout
    assert "removed 1," in jobs.stdout
    listed = invoke_cli("collections", "ten", "--json", env=env)
    assert json.loads(listed.stdout)["documents"] == 1  # the collection stays, with the other


def test_delete_document_asks_first_and_a_no_removes_nothing(tmp_path) -> None:
    env, letter = _indexed(tmp_path)

    done = invoke_cli("delete", "ten", "--document", str(letter), env=env, input="n\n")

    assert done.returncode == 1
    assert f"remove 1 document from 'ten' ({letter})? [y/N]" in done.stderr
    assert done.stderr.endswith("nothing was deleted (the answer was no)\n"), done.stderr
    assert str(letter) in _search(env, "private letter mortgage")


def test_delete_document_with_an_unknown_key_removes_nothing(tmp_path) -> None:
    env, letter = _indexed(tmp_path)

    done = invoke_cli("delete", "ten", "-d", str(letter), "-d", "lettre.txt", "-y", env=env)

    assert done.returncode == 3, done.stdout
    assert "no document 'lettre.txt' in collection 'ten'; nothing was removed" in done.stderr
    assert str(letter) in _search(env, "private letter mortgage")


def test_a_relative_path_names_the_file_from_the_working_folder(tmp_path, monkeypatch) -> None:
    env, letter = _indexed(tmp_path)
    monkeypatch.chdir(tmp_path)

    done = invoke_cli("delete", "ten", "-d", "inbox/letter.txt", "-y", env=env)

    assert done.returncode == 0, done.stderr
    assert f"removed {letter} (1 chunk)" in done.stdout


def test_a_deleted_file_is_removed_by_index_sync_and_the_refusal_says_so(tmp_path) -> None:
    env, letter = _indexed(tmp_path)
    letter.unlink()

    refused = invoke_cli("index", str(letter), "-c", "ten", env=env)
    assert refused.returncode == 3
    assert "does not exist" in refused.stderr
    assert "collection 'ten' has 1 document from" in refused.stderr
    assert "index it with --sync" in refused.stderr

    done = invoke_cli("index", str(letter), "-c", "ten", "--sync", env=env)
    assert done.returncode == 0, done.stderr
    assert "0 documents seen, 0 indexed, 0 unchanged, 0 failed, 1 removed" in done.stdout
    assert str(letter) not in _search(env, "private letter mortgage")
    assert str(letter.parent / "other.txt") in _search(env, "football match")


def test_an_emptied_file_says_its_old_version_stays_searchable(tmp_path) -> None:
    env, letter = _indexed(tmp_path)
    letter.write_text("")

    done = invoke_cli("index", str(letter), "-c", "ten", env=env)

    assert done.returncode == 4
    assert "is empty" in done.stderr
    assert (f"its indexed version is kept and stays searchable (`facet delete ten --document "
            f"{letter}` removes it)") in done.stderr
