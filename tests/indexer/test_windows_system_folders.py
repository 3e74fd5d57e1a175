"""A drive used on Windows holds `$RECYCLE.BIN` (files deleted there, under names like
`$RAB12CD.txt`) and `System Volume Information`, hidden by an attribute that Linux's and macOS's
exFAT and FAT drivers do not show; the walk went into them, and a deleted file became a
searchable document (the exFAT exploration of the fourth session of 2026-12-02). They are
skipped as hidden folders are, whatever their case; a folder that merely contains such a word
is walked, and so is one named as older Windows named their bins (`Recycled`, `RECYCLER`: a
user's own folder was skipped so in the first version of this). Real files, the real walk; and
`facet index` of such a folder with minilm."""

from __future__ import annotations

from pathlib import Path

from indexer.parsing import discover_files
from tests.app.cli_runner import invoke_cli


def _stick(root: Path) -> Path:
    for rel, text in {
        "notes/current.txt": "the budget meeting moved to Friday",
        "$RECYCLE.BIN/S-1-5-21-1000/$RAB12CD.txt": "DELETED secret: my old PIN is 1234",
        "$Recycle.Bin/S-1-5-21-1001/$RXY.txt": "another deleted file",
        "Recycled/paper.txt": "a folder of the user's own, named as Windows 9x named its bin",
        "System Volume Information/IndexerVolumeGuid.txt": "{guid}",
        "my recycler notes/keep.txt": "a folder of the user's own",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_windows_system_folders_are_not_walked(tmp_path: Path) -> None:
    stick = _stick(tmp_path / "stick")
    files, skipped = discover_files(stick)
    assert [p.relative_to(stick.resolve()).as_posix() for p in files] == [
        "Recycled/paper.txt", "my recycler notes/keep.txt", "notes/current.txt"]
    assert skipped == []  # (skipped without a word, as hidden folders)


def test_facet_index_of_a_stick_indexes_no_deleted_file(tmp_path: Path) -> None:
    stick = _stick(tmp_path / "stick")
    env = {"FACET_DATA_DIR": str(tmp_path / "data")}
    done = invoke_cli("index", str(stick), "-c", "stick", "-e", "minilm", env=env)
    assert done.returncode == 0, done.stderr
    listed = invoke_cli("documents", "stick", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "RAB12CD" not in listed.stdout and "IndexerVolumeGuid" not in listed.stdout
    assert "current.txt" in listed.stdout and "keep.txt" in listed.stdout
