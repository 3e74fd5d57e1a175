"""A folder re-indexed while it is empty removes nothing (the network-filesystem exploration of
the fourth session of 2026-12-02): a share or drive that is not mounted reads as its empty
mount point, and a scheduled `facet index SHARE -c NAME` removed every document (250 removed,
exit 0). It now keeps them with a warning naming how to remove them on purpose, as an emptied
file keeps its records. A folder that still holds anything syncs as before. Real facade,
minilm, SQLite, the edge store."""

from __future__ import annotations

import shutil
from pathlib import Path

from .conftest import write_corpus


def test_an_empty_folder_removes_nothing_and_says_so(facet, tmp_path: Path) -> None:
    src = tmp_path / "share"
    write_corpus(src, 4)
    assert facet.index(src, "team").docs_indexed == 4
    shutil.rmtree(src)
    src.mkdir()  # the mount point of a share that is not mounted
    report = facet.index(src, "team")
    assert report.state == "completed" and report.docs_deleted == 0
    assert facet.collection("team").documents == 4
    [(where, message)] = report.warnings
    assert where == str(src.resolve()) or where == str(src), where
    assert message.startswith(f"4 indexed documents under {where} kept: the folder is empty now, "
                              "and a sync removes nothing of an empty folder"), message
    # One file back: the others are gone from it, and go.
    (src / "new.txt").write_text("a note written after the share came back, about ferries")
    again = facet.index(src, "team")
    assert again.docs_deleted == 4 and facet.collection("team").documents == 1
