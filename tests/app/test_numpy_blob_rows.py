"""A collection row whose chunking a numpy integer wrote as a BLOB (before 2026-11-30, a
notebook's ``IndexOptions(chunk_size=np.int64(100))``) is read as the int it holds.

An upgraded data folder kept such rows: `facet collections --json` failed for every collection
(``TypeError: Object of type bytes is not JSON serializable``), the plain listing showed the raw
bytes as the chunking, and indexing into the collection failed ("chunk size must be an int, got
bytes"). Real CLI in process, real SQLite; the BLOB is written as SQLite stored it (a numpy
scalar bound as a parameter)."""

from __future__ import annotations

import json
import sqlite3

import numpy as np

from tests.app.cli_runner import invoke_cli, tiny_data_folder


def test_a_numpy_blob_chunking_row_is_listed_and_indexed_into(tmp_path, minilm) -> None:
    data = tiny_data_folder(tmp_path)
    env = {"FACET_DATA_DIR": str(data)}
    with sqlite3.connect(data / "facet.db") as db:
        db.execute("UPDATE collections SET chunk_size = ?, chunk_overlap = ? WHERE name = 'tiny'",
                   (np.int64(100), np.int64(25)))
        assert db.execute("SELECT typeof(chunk_size), typeof(chunk_overlap) FROM collections"
                          ).fetchone() == ("blob", "blob")
    listed = invoke_cli("collections", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    assert (row["chunk_size"], row["chunk_overlap"]) == (100, 25), row
    plain = invoke_cli("collections", env=env)
    assert plain.returncode == 0 and "b'" not in plain.stdout, plain.stdout
    more = tmp_path / "more.txt"
    more.write_text("transfer to a friend abroad")
    added = invoke_cli("index", str(more), "-c", "tiny", "-e", "minilm", env=env)
    assert added.returncode == 0, added.stderr
    found = invoke_cli("search", "-c", "tiny", "money to a friend in another country", "--json",
                       env=env)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"][0]["doc_id"].endswith("more.txt"), found.stdout
