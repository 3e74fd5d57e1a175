"""A source folder that holds Facet's own data folder (`facet index ~/work` with the data in
``~/work/data``): indexed without it. Its vector store's json files, its database and the
collections' staged uploads were read as documents, and a second run indexed the first run's
store files (found by an explorer through the UI's allowed root; the CLI did the same)."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexer.parsing import discover, discover_files


def test_a_source_holding_the_data_folder_is_indexed_without_it(facet, tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("The lighthouse keeper waters the garden.")
    (tmp_path / "b.md").write_text("# Tides\nThe tide comes in twice a day.")
    facet.index(tmp_path / "notes", "first")  # the data folder now holds store files
    data = facet.settings.data_dir
    assert [p for p in discover(tmp_path) if p.is_relative_to(data.resolve())], \
        "the store should hold files the walk would read"
    upload = facet.upload_folder("first")
    upload.mkdir(parents=True, exist_ok=True)
    (upload / "staged.txt").write_text("a staged upload")
    assert facet.estimate_documents(tmp_path) == 2
    # A file of a type no parser reads: a DataError, as submit_index (POST /jobs: 422) says it;
    # it was an InvalidRequestError here (the API exploration of the fourth session of 2026-12-07).
    (tmp_path / "photo.xyz").write_text("x")
    from app.errors import DataError

    with pytest.raises(DataError, match=r"unsupported file type '\.xyz'") as refused:
        facet.estimate_documents(tmp_path / "photo.xyz")
    assert refused.value.param == "source"
    (tmp_path / "photo.xyz").unlink()
    report = facet.index(tmp_path, "whole")
    assert (report.docs_indexed, report.docs_failed) == (2, 0), report
    assert facet.collection("whole").documents == 2
    again = facet.index(tmp_path, "whole")  # the first run's store files are not new documents
    assert (again.docs_indexed, again.docs_skipped) == (0, 2), again


def test_the_walk_leaves_out_an_excluded_folder_given_through_a_link(tmp_path: Path) -> None:
    (tmp_path / "real" / "inner").mkdir(parents=True)
    (tmp_path / "real" / "inner" / "x.txt").write_text("x")
    (tmp_path / "real" / "y.txt").write_text("y")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    files, skipped = discover_files(tmp_path / "real", [tmp_path / "link" / "inner"])
    assert files == [(tmp_path / "real" / "y.txt").resolve()] and skipped == []
