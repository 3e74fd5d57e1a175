"""A record file's line errors are what its latest reading gave: an error row this run did not
give again is stale and goes, whether the run syncs (a folder) or not (a single file). A
``bad.jsonl`` whose broken line was removed kept its old rows ("#L5: duplicate id '5'" of a file
of four lines, "#L3: no text field" of a valid line), counted as failed beside the job's count;
synced, they were called "indexed records ... kept" in a warning. An indexed record of a file
with errors is still kept by a sync (it may only be unreadable). Real minilm, edge store, SQLite
(helper-461's indexing exploration, the fifth session of 2026-12-05)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.services.collections import CollectionService
from app.services.indexing import IndexService
from indexer import metadata as md

FIRST = ('{"id":"ok1","text":"fine line about a lynx"}\n{broken json\n{"id":"noText","title":"t"}\n'
         '{"id":5,"text":"numeric id about a panda"}\n{"id":"5","text":"string five about a puma"}\n')
# Line 2 removed: the record without text is on line 2 now, the duplicate id on line 4.
SECOND = ('{"id":"ok1","text":"fine line about a lynx"}\n{"id":"noText","title":"t"}\n'
          '{"id":5,"text":"numeric id about a panda"}\n{"id":"5","text":"string five about a puma"}\n')
VALID = '{"id":"ok1","text":"fine line about a lynx"}\n{"id":5,"text":"numeric id about a panda"}\n'


def _rows(ctx, name: str) -> dict[str, str]:
    with ctx.sessions() as s:
        coll = md.get_collection(s, name)
        assert coll is not None
        return {d.key.rsplit("/", 1)[-1]: d.status
                for d in s.query(md.Document).filter_by(collection_id=coll.id)}


@pytest.mark.parametrize("whole", ["folder (synced)", "single file"])
def test_line_errors_a_run_does_not_give_again_go(make_ctx, tmp_path: Path, whole: str) -> None:
    folder = tmp_path / "c8"
    folder.mkdir()
    bad = folder / "bad.jsonl"
    source = folder if whole == "folder (synced)" else bad
    ctx = make_ctx()
    service = IndexService(ctx)
    bad.write_text(FIRST)
    first = service.index(source, "t8")
    assert (first.docs_indexed, first.docs_failed) == (2, 3)
    bad.write_text(SECOND)
    second = service.index(source, "t8")
    assert second.docs_failed == 2
    assert _rows(ctx, "t8") == {"ok1": "indexed", "5": "indexed", "bad.jsonl#L2": "error",
                                "bad.jsonl#L4": "error"}
    assert not any("not seen this run kept" in m for _, m in second.warnings), second.warnings
    assert CollectionService(ctx).get("t8").documents_failed == 2  # (it said 4)
    bad.write_text(VALID)
    third = service.index(source, "t8")
    assert (third.docs_failed, third.docs_deleted) == (0, 0)
    assert _rows(ctx, "t8") == {"ok1": "indexed", "5": "indexed"}


def test_a_sync_still_keeps_an_indexed_record_of_a_file_with_errors(make_ctx, tmp_path: Path) -> None:
    """A record whose line is broken now may still be there: its indexed copy stays (only the
    stale error rows go), and the warning counts it alone."""
    folder = tmp_path / "c9"
    folder.mkdir()
    bad = folder / "bad.jsonl"
    ctx = make_ctx()
    service = IndexService(ctx)
    bad.write_text(SECOND)  # errors at #L2 and #L4
    service.index(folder, "t9")
    bad.write_text('{"id":"ok1","text":"fine line about a lynx"}\n{"id":5, broken\n')
    report = service.index(folder, "t9")
    assert _rows(ctx, "t9") == {"ok1": "indexed", "5": "indexed", "bad.jsonl#L2": "error"}
    kept = [m for _, m in report.warnings if "not seen this run kept" in m]
    assert len(kept) == 1 and kept[0].startswith("1 indexed record of "), report.warnings
