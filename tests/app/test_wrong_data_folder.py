"""A database shared through FACET_DATABASE_URL, read beside a data folder that is not the one its
collections were indexed into (the metadata exploration of the sixth session of 2026-12-05):
every collection read "store files missing ... `facet delete NAME` removes it", and that delete
(exit 0) dropped the metadata of vectors that were whole in the other folder. A SQLite file
outside both folders stands for the shared PostgreSQL (the same code path: a URL is set)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.app.cli_runner import invoke_cli


def _setup(tmp_path: Path) -> tuple[dict[str, str], dict[str, str]]:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("a note about harbour ferries")
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    right = {"FACET_DATA_DIR": str(tmp_path / "right"), "FACET_DATABASE_URL": url}
    wrong = {"FACET_DATA_DIR": str(tmp_path / "wrong"), "FACET_DATABASE_URL": url}
    for name in ("notes", "more"):
        done = invoke_cli("index", str(src), "-c", name, "-e", "minilm", env=right)
        assert done.returncode == 0, done.stderr
    return right, wrong


def test_a_collection_missing_from_a_folder_holding_none_of_them_is_not_deleted(tmp_path) -> None:
    right, wrong = _setup(tmp_path)
    listed = invoke_cli("collections", "--json", env=wrong)
    assert listed.returncode == 0, listed.stderr
    [notes] = [c for c in json.loads(listed.stdout) if c["name"] == "notes"]
    said = (f"its vectors were written in the data folder {tmp_path / 'right'}, and "
            f"FACET_DATA_DIR is {tmp_path / 'wrong'}: FACET_DATA_DIR may not be the data folder "
            "it was indexed into")
    assert notes["store_missing"] and notes["store_elsewhere"] == said, notes
    shown = invoke_cli("collections", env=wrong).stdout
    assert "`facet delete notes` removes it" not in shown and "`facet delete notes --force`" in shown
    # A search says so too: it said to index the collection again, which is refused here (the
    # PostgreSQL review of the fourth session of 2026-12-06).
    searched = invoke_cli("search", "ferries", "-c", "notes", env=wrong)
    assert searched.returncode == 3, (searched.returncode, searched.stderr)
    assert said in searched.stderr and "index its sources again" not in searched.stderr, \
        searched.stderr
    refused = invoke_cli("delete", "notes", "-y", env=wrong)
    assert refused.returncode == 5, (refused.returncode, refused.stderr)
    assert f"collection 'notes' has no store folder here, and {said}" in refused.stderr
    # The old code: "deleted notes: 1 document, ? points", exit 0, and the right folder's
    # listing then called its vectors "vectors only ... which no collection of this database owns".
    kept = json.loads(invoke_cli("collections", "--json", env=right).stdout)
    assert {c["name"]: (c["points"], c["store_elsewhere"]) for c in kept} == {
        "more": (1, None), "notes": (1, None)}
    # Nor indexed there again (the verification round: a second copy of it went into the wrong
    # folder, exit 0, and the other collection's delete was then offered and done).
    again = invoke_cli("index", str(tmp_path / "src"), "-c", "notes", env=wrong)
    assert again.returncode == 5, (again.returncode, again.stderr)
    assert f"collection 'notes' has no store folder here, and {said}" in again.stderr
    assert not (tmp_path / "wrong" / "qdrant-edge" / "notes").exists()
    assert invoke_cli("delete", "more", "-y", env=wrong).returncode == 5
    # A new collection indexed there does not lift it (the guess it replaced, "none of the
    # database's collections is here", did: the second verification round).
    assert invoke_cli("index", str(tmp_path / "src"), "-c", "fresh", env=wrong).returncode == 0
    assert invoke_cli("delete", "more", "-y", env=wrong).returncode == 5
    forced = invoke_cli("delete", "notes", "-y", "--force", env=wrong)
    assert forced.returncode == 0 and "deleted notes" in forced.stdout, forced.stderr


def test_a_collection_of_an_older_facet_is_guessed_from_the_folder(tmp_path) -> None:
    """No folder recorded (a collection indexed before it was): a folder holding none of the
    database's collections is the one said to be perhaps not theirs."""
    import sqlite3

    right, wrong = _setup(tmp_path)
    with sqlite3.connect(tmp_path / "shared.db") as conn:
        conn.execute("UPDATE collections SET store_folder = NULL")
    [notes] = [c for c in json.loads(invoke_cli("collections", "--json", env=wrong).stdout)
               if c["name"] == "notes"]
    assert notes["store_elsewhere"] == (
        "no collection of this database (FACET_DATABASE_URL) has its store folder in this data "
        f"folder ({tmp_path / 'wrong'}): FACET_DATA_DIR may not be the data folder they were "
        "indexed into"), notes
    assert invoke_cli("delete", "notes", "-y", env=wrong).returncode == 5
    # Indexed in its own folder again, it records it.
    assert invoke_cli("index", str(tmp_path / "src"), "-c", "notes", env=right).returncode == 0
    with sqlite3.connect(tmp_path / "shared.db") as conn:
        assert conn.execute("SELECT store_folder FROM collections WHERE name = 'notes'"
                            ).fetchone() == (str(tmp_path / "right"),)


def test_a_folder_holding_some_of_them_still_offers_the_delete(tmp_path) -> None:
    """A store folder removed by hand in its own folder: the old advice, index and delete
    stand (the guess refused them where the database had no other collection)."""
    right, _ = _setup(tmp_path)
    shutil.rmtree(tmp_path / "right" / "qdrant-edge" / "notes")
    [notes] = [c for c in json.loads(invoke_cli("collections", "--json", env=right).stdout)
               if c["name"] == "notes"]
    assert notes["store_missing"] and notes["store_elsewhere"] is None
    again = invoke_cli("index", str(tmp_path / "src"), "-c", "notes", env=right)
    assert again.returncode == 0 and "1 indexed" in again.stdout, again.stderr  # written again
    shutil.rmtree(tmp_path / "right" / "qdrant-edge" / "notes")
    done = invoke_cli("delete", "notes", "-y", env=right)
    assert done.returncode == 0, done.stderr
