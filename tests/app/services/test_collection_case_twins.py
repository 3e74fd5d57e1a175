"""A collection whose name differs from an existing one only in case is refused: the store's
folder, its lock file and the upload folder are named after the collection, and on a disk that
ignores case (macOS's and Windows' defaults, exFAT and FAT drives: the exFAT exploration of the
fourth session of 2026-12-02) `Notes` went into `notes`' folder, whose vectors were then
called strays that "`facet delete Notes` removes". Real facade, minilm, embedded store on this
disk (which keeps case apart: the refusal does not depend on the disk)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.errors import ConflictError


def _corpus(root: Path, texts: list[str]) -> Path:
    root.mkdir()
    for i, text in enumerate(texts):
        (root / f"d{i}.txt").write_text(text)
    return root


def test_a_name_that_differs_only_in_case_is_refused_and_nothing_is_made(facet, tmp_path: Path) -> None:
    first = _corpus(tmp_path / "a", ["card payment declined twice", "open a savings account"])
    other = _corpus(tmp_path / "b", ["the weather is fine today"])
    facet.index(first, "notes")
    with pytest.raises(ConflictError) as refused:
        facet.index(other, "Notes")
    assert str(refused.value) == (
        "collection 'notes' exists, and 'Notes' differs from it only in case: their folders would "
        "be one on a disk that ignores case (macOS, Windows, exFAT or FAT drives); index into "
        "'notes', or pick another name")
    assert refused.value.param == "collection"
    assert [c.name for c in facet.collections()] == ["notes"]
    assert not (facet.settings.data_dir / "qdrant-edge" / "Notes").exists()
    # The existing collection is untouched and still takes more documents under its own name.
    facet.index(other, "notes")
    assert facet.collection("notes").documents == 3
    # Names apart in more than case are fine.
    facet.index(other, "notes2")
    assert sorted(c.name for c in facet.collections()) == ["notes", "notes2"]
