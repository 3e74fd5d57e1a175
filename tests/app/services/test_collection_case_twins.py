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


def test_two_twins_made_at_the_same_moment_leave_one(facet, tmp_path: Path, monkeypatch) -> None:
    """Check, then create: two processes making `race` and `Race` at once both passed the
    check (4 in 8 concurrent pairs of `POST /jobs` on ext4, 5 in 6 on exFAT, where they then
    shared one store folder: the verification round). After its commit the later row backs out.
    The other process is stood in for by a row made between this one's check and its insert."""
    from indexer import metadata as md

    other = _corpus(tmp_path / "b", ["the weather is fine today"])
    real = md.create_collection

    def meanwhile(session, name, **kwargs):  # another process commits its twin first
        with facet.context.sessions() as s:
            real(s, "race", **kwargs)
            s.commit()
        return real(session, name, **kwargs)

    monkeypatch.setattr(md, "create_collection", meanwhile)
    with pytest.raises(ConflictError, match=r"^collection 'race' exists, and 'Race' differs from it only in case"):
        facet.index(other, "Race")
    monkeypatch.undo()
    assert [c.name for c in facet.collections()] == ["race"]


def test_an_upload_into_a_twin_is_refused_before_the_folder_is_touched(facet, tmp_path: Path) -> None:
    """On a disk that ignores case the folder of `Notes` is `notes`', and an upload into `Notes`
    took it for a leftover of a deleted collection and removed it, before its job was refused
    (the next upload into `notes` then removed its documents: the verification round). The
    refusal now comes first; on this disk the folders are apart, so what is checked is that."""
    src = _corpus(tmp_path / "a", ["card payment declined twice", "open a savings account"])
    first = facet.upload("notes", sorted(src.iterdir()))
    _wait(facet, first.job.id)
    with pytest.raises(ConflictError, match=r"^collection 'notes' exists, and 'Notes' differs"):
        facet.upload("Notes", [src / "d0.txt"])
    assert not facet.upload_folder("Notes").exists()
    assert sorted(p.name for p in facet.upload_folder("notes").iterdir()) == ["d0.txt", "d1.txt"]


def _wait(facet, job_id: int) -> None:
    import time

    deadline = time.monotonic() + 120
    while facet.job(job_id).state in ("queued", "running"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert facet.job(job_id).state == "completed"


def test_an_upload_into_a_twin_on_a_case_blind_disk_keeps_the_twins_files(
        minilm, exfat_folder: Path, tmp_path: Path) -> None:
    """The same on a real exFAT data folder (the ``exfat_folder`` fixture: skipped where it
    cannot be mounted), where `uploads/Notes` is `uploads/notes`."""
    from app.core import Facet
    from app.encoding import EmbedderCache
    from app.settings import FacetSettings

    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    with Facet(FacetSettings(data_dir=exfat_folder / "data", chunk_tokens=64, chunk_overlap=8),
               embedders=cache) as facet:
        src = _corpus(tmp_path / "a", ["card payment declined twice", "open a savings account"])
        _wait(facet, facet.upload("notes", sorted(src.iterdir())).job.id)
        with pytest.raises(ConflictError, match=r"^collection 'notes' exists, and 'Notes' differs"):
            facet.upload("Notes", [src / "d0.txt"])
        assert sorted(p.name for p in facet.upload_folder("notes").iterdir()) == ["d0.txt", "d1.txt"]
        assert facet.collection("notes").documents == 2
