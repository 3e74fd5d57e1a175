"""A record id read twice in one run: the error names the file that had it first.

It named only the second file ("duplicate document id '1' in b.csv"), which read as b.csv
repeating its own id when the first was a.csv's. Inline and chunked (worker) runs; real minilm,
SQLite and the edge store.
"""

from __future__ import annotations

from pathlib import Path

from app.services.collections import CollectionService
from app.services.distributed import ChunkedIndexService
from app.services.indexing import IndexService


def _two_files(root: Path) -> Path:
    root.mkdir()
    (root / "a.csv").write_text("id,text\n1,first file one\n2,first file two\n")
    (root / "b.csv").write_text("id,text\n1,second file one\n3,second three\n3,again three\n")
    return root


def _expected(root: Path) -> list[tuple[str, str]]:
    a, b = root / "a.csv", root / "b.csv"
    tail = "only the first occurrence is indexed (give each record an id of its own)"
    return [("1", f"duplicate document id '1' in {b}: {a} already has a record with it; {tail}"),
            ("3", f"duplicate document id '3' in {b}: the file repeats it; {tail}")]


def test_inline_run_names_the_first_file(make_ctx, tmp_path) -> None:
    src = _two_files(tmp_path / "src")
    report = IndexService(make_ctx()).index(src, "d")
    assert (report.docs_indexed, report.docs_failed) == (3, 2)
    assert report.errors == _expected(src)


def test_chunked_run_names_the_first_file(make_ctx, tmp_path) -> None:
    src = _two_files(tmp_path / "src")
    ctx = make_ctx()
    prepared = IndexService(ctx).prepare(src, "d", runner="celery")
    service = ChunkedIndexService(ctx)
    for n in service.plan(prepared, 2):
        service.run_chunk(prepared.job_id, n)
    job = CollectionService(ctx).job(prepared.job_id)
    assert [(e["document"], e["message"]) for e in job.errors if e["kind"] == "error"] == _expected(src)
