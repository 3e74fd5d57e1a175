"""``discover_files`` over what it cannot read or store (an archive's odd corners): a folder
without ``r`` permission was walked as empty, unsaid (a sync then removed its documents); one
without ``x`` ended the walk in a PermissionError traceback (``is_file`` raising EACCES); a fifo
given as the source was "0 documents" without a word; a file in a folder whose name is not
UTF-8 was told to rename itself. Run as root, the permission bits are made to count by dropping
this thread's DAC capabilities for the walk (as `capsh --drop` does for a command)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from indexer.errors import UnsupportedSourceError
from indexer.parsing import discover_files, display_path, skip_reason
from tests.permissions import permissions_count


def _tree(root: Path) -> Path:
    src = root / "src"
    (src / "sub" / "deeper").mkdir(parents=True)
    (src / "top.txt").write_text("Top note about harbours.")
    (src / "sub" / "light.txt").write_text("Sub note about lighthouses.")
    (src / "sub" / "deeper" / "x.txt").write_text("deeper")
    return src


@pytest.mark.parametrize("mode", [0o000, 0o644], ids=["no-r", "no-x"])
def test_a_folder_it_cannot_read_is_named_once_not_walked_as_empty(tmp_path: Path,
                                                                    mode: int) -> None:
    src = _tree(tmp_path)
    sub = src / "sub"
    sub.chmod(mode)
    try:
        with permissions_count():
            files, skipped = discover_files(src)
            reasons = {display_path(p): skip_reason(p) for p in skipped}
    finally:
        sub.chmod(0o755)
    assert files == [src / "top.txt"]
    assert reasons == {str(sub): "cannot read this folder (Permission denied)"}, reasons


def test_the_source_itself_unreadable_or_in_a_folder_without_x(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    src.chmod(0o000)
    try:
        with permissions_count():
            files, skipped = discover_files(src)
            reason = skip_reason(skipped[0]) if skipped else None
    finally:
        src.chmod(0o755)
    assert (files, skipped, reason) == ([], [src], "cannot read this folder (Permission denied)")
    (src / "sub").chmod(0o644)
    try:
        with permissions_count(), pytest.raises(UnsupportedSourceError) as caught:
            discover_files(src / "sub" / "light.txt")  # a PermissionError traceback before
    finally:
        (src / "sub").chmod(0o755)
    assert str(caught.value).startswith(f"cannot read {src / 'sub' / 'light.txt'} (Permission "
                                        "denied)"), caught.value


def test_a_fifo_given_as_the_source_is_named_as_a_folder_walk_names_it(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.txt"
    os.mkfifo(fifo)
    files, skipped = discover_files(fifo)
    assert (files, skipped) == ([], [fifo])
    assert skip_reason(fifo) == "not a regular file"


def test_a_folder_whose_name_is_not_utf8_is_the_one_named(tmp_path: Path) -> None:
    src = tmp_path / "src"
    bad = src / os.fsdecode(b"latdir\xe9")
    bad.mkdir(parents=True)
    (bad / "h.txt").write_text("Latin folder about hedgehogs.")
    (bad / "i.txt").write_text("another")
    (src / "ok.txt").write_text("fine")
    (src / "self.txt").symlink_to(src / "self.txt")  # a loop: still "a broken link"
    files, skipped = discover_files(src)
    assert files == [src / "ok.txt"]
    assert {display_path(p): skip_reason(p) for p in skipped} == {
        str(src / "latdir\\xe9"): "its name is not valid UTF-8; rename it",
        str(src / "self.txt"): "a broken link"}
    # A file under it (its folder given as the source, say) names the folder to rename.
    assert skip_reason(bad / "h.txt") == (f"the name of its folder {src / 'latdir'}\\xe9 is not "
                                          "valid UTF-8; rename that folder")
