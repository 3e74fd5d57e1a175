"""Uploads into a folder on a disk that takes names differing only in case as one (macOS's and
Windows' defaults, exFAT and FAT drives; the exFAT exploration of the fourth session of
2026-12-02): `Report.txt` uploaded after `report.txt` replaced it, and the next job removed
the first document as gone; `x.txt` and `X.txt` in one request were both said to be staged,
one of them lost. Now such a name is numbered (`Report (2).txt`) and said in `renamed`; the
same name again still updates its file, and a disk that keeps case apart keeps both names.

The case-blind disk is a real exFAT image mounted through FUSE (the ``exfat_folder`` fixture,
tests/conftest.py), skipped where it cannot be mounted, as CI's machine may not; the same
uploads on this test's own disk run everywhere."""

from __future__ import annotations

from pathlib import Path

from app import uploads


def _files(root: Path, **texts: str) -> dict[str, Path]:
    """One file per keyword (a name like ``Report_txt`` is ``Report.txt``), each in a folder of its
    own so that names differing only in case can sit side by side here."""
    out = {}
    for i, (key, text) in enumerate(texts.items()):
        name = key.replace("_txt", ".txt")
        (root / str(i)).mkdir(parents=True)
        (root / str(i) / name).write_text(text)
        out[name] = root / str(i) / name
    return out


def _contents(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.iterdir())}


def test_a_name_differing_only_in_case_is_numbered_on_a_case_blind_disk(
        exfat_folder: Path, tmp_path: Path) -> None:
    src = _files(tmp_path / "src", report_txt="exchange rate wrong", Report_txt="top up failed",
                 x_txt="card lost", X_txt="card found")
    folder = exfat_folder / "uploads" / "upl"
    first = uploads.stage_uploads([src["report.txt"]], folder)
    first.keep()
    assert first.renamed == []
    later = uploads.stage_uploads([src["Report.txt"]], folder)
    later.keep()
    assert [c.name for c in later.copies] == ["Report (2).txt"]
    assert later.renamed == ["Report.txt was saved as Report (2).txt: a different file in the collection's "
                             "uploads has that name but for case, and this disk takes names that differ "
                             "only in case as one"]
    both = uploads.stage_uploads([src["x.txt"], src["X.txt"]], folder)
    both.keep()
    assert [c.name for c in both.copies] == ["x.txt", "X (2).txt"]
    assert both.renamed == ["X.txt was saved as X (2).txt: another file of this upload has that name but "
                            "for case, and this disk takes names that differ only in case as one"]
    assert _contents(folder) == {"Report (2).txt": "top up failed", "X (2).txt": "card found",
                                 "report.txt": "exchange rate wrong", "x.txt": "card lost"}
    # The same name again updates its file (through the hard-link-less put-aside here), and
    # the case twin again updates its numbered one: the same uploads get the same names.
    src["report.txt"].write_text("exchange rate still wrong")
    src["Report.txt"].write_text("top up failed again")
    again = uploads.stage_uploads([src["report.txt"], src["Report.txt"]], folder)
    again.keep()
    assert [c.name for c in again.copies] == ["report.txt", "Report (2).txt"]
    assert _contents(folder)["report.txt"] == "exchange rate still wrong"
    assert _contents(folder)["Report (2).txt"] == "top up failed again"
    assert sorted(p.name for p in folder.parent.iterdir()) == ["upl"]  # nothing left aside


def test_a_disk_that_keeps_case_apart_keeps_both_names(tmp_path: Path) -> None:
    src = _files(tmp_path / "src", report_txt="exchange rate wrong", Report_txt="top up failed")
    folder = tmp_path / "uploads" / "upl"
    uploads.stage_uploads([src["report.txt"]], folder).keep()
    later = uploads.stage_uploads([src["Report.txt"]], folder)
    later.keep()
    assert later.renamed == [] and [c.name for c in later.copies] == ["Report.txt"]
    assert _contents(folder) == {"Report.txt": "top up failed", "report.txt": "exchange rate wrong"}


def test_a_replaced_upload_stays_in_the_folder_until_its_new_copy_is_renamed_over_it(
        exfat_folder: Path, tmp_path: Path) -> None:
    """exFAT has no hard links: the version put aside was moved out of the folder, and a kill
    before the new copy's rename left the folder without it (the next upload job removed its
    document). It is copied aside there, so the folder holds it until the rename."""
    folder = exfat_folder / "uploads" / "upl"
    src = _files(tmp_path / "src", report_txt="first version")
    uploads.stage_uploads([src["report.txt"]], folder).keep()
    staged = uploads.Staged([], {})
    staged.put_aside(folder / "report.txt")  # (what stage_uploads does before the rename)
    assert _contents(folder) == {"report.txt": "first version"}
    assert staged.previous[folder / "report.txt"].read_text() == "first version"
    staged.undo()  # (no new copy came in: the version kept aside is dropped)
    assert _contents(folder) == {"report.txt": "first version"}
    assert sorted(p.name for p in folder.parent.iterdir()) == ["upl"]
