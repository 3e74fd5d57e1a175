"""The catalog's jobs: a job with many per-document errors comes with its first ones (an SQL
LIMIT) and their total (an SQL COUNT), never all of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import event

from app.errors import InvalidRequestError
from app.services.collections import DEFAULT_JOB_ERRORS, MAX_JOB_ERRORS, CollectionService
from app.services.indexing import IndexService

from .conftest import write_corpus


def blank_rows(path: Path, n: int) -> Path:
    """A jsonl of one valid text and ``n`` blank ones: ``n`` per-document errors, cheaply."""
    path.write_text(json.dumps({"id": "ok", "text": "valid"}) + "\n" + "".join(
        json.dumps({"id": f"r{i}", "text": "  "}) + "\n" for i in range(n)))
    return path


def test_a_job_with_many_errors_comes_with_the_first_ones_and_their_total(make_ctx,
                                                                         tmp_path) -> None:
    """`job` returned every error (20,000: 2.5 MB at each poll of GET /jobs/ID and the UI)."""
    ctx = make_ctx()
    report = IndexService(ctx).index(blank_rows(tmp_path / "e.jsonl", 300), "errs")
    catalog = CollectionService(ctx)
    statements: list[str] = []

    def seen(conn, cursor, statement, parameters, context, executemany) -> None:
        statements.append(statement)

    event.listen(ctx.engine, "before_cursor_execute", seen)
    try:
        job = catalog.job(report.job_id)
    finally:
        event.remove(ctx.engine, "before_cursor_execute", seen)
    assert DEFAULT_JOB_ERRORS == 100 and MAX_JOB_ERRORS == 1000
    assert len(job.errors) == 100 and job.errors_total == 300 and job.docs_failed == 300
    assert [e["document"] for e in job.errors[:2]] == ["r0", "r1"]
    reads = [s for s in statements if "FROM job_errors" in s]
    assert reads and all("LIMIT" in s or "count(" in s for s in reads), reads
    assert [len(catalog.job(report.job_id, n).errors) for n in (0, 7, 1000, None)] == [0, 7, 300, 300]
    assert catalog.job(report.job_id, 7, collection="errs").errors_total == 300
    with pytest.raises(InvalidRequestError, match="job 1 is not of collection 'x' but of 'errs'"):
        catalog.job(report.job_id, collection="x")
    for bad in (-1, 1001, 2.5, True):
        with pytest.raises(InvalidRequestError, match="errors must be from 0 to 1000"):
            catalog.job(report.job_id, bad)  # type: ignore[arg-type]
    # A listing reads no errors, and counts each job's in one query.
    [listed] = catalog.jobs("errs")
    assert listed.errors == [] and listed.errors_total == 300


def test_a_listing_counts_a_shard_again_only_once_it_was_written(make_ctx, tmp_path,
                                                                 monkeypatch) -> None:
    """Each listing loaded, counted and closed the shard of every collection this process had
    not open (0.2 s each, at every UI page load). Its figures must still follow every write:
    another facade's (or process's) indexing, points lost (``points`` below ``chunks``, the sign
    of damage users read), a delete and a new collection under the same name."""
    write_corpus(tmp_path / "src", 2)
    write_corpus(tmp_path / "more", 5)
    ctx = make_ctx()
    IndexService(ctx).index(tmp_path / "src", "c")
    ctx.store.release("c")
    catalog = CollectionService(ctx)
    loads: list[str] = []
    real_shard = ctx.store._shard

    def shard(name: str):  # type: ignore[no-untyped-def]
        if not ctx.store.is_open(name):
            loads.append(name)  # an open (EdgeShard.load) of the shard
        return real_shard(name)

    monkeypatch.setattr(ctx.store, "_shard", shard)

    def figures() -> tuple[int, int | None, bool | None]:
        [info] = catalog.list_all()
        return info.chunks, info.points, info.lexical

    first = figures()
    assert first[0] == first[1] and first[0] > 0 and loads == ["c"]
    assert figures() == first and catalog.get("c").points == first[1]
    assert loads == ["c"]  # nothing written since: not opened again
    assert not ctx.store.is_open("c")

    other = make_ctx()  # another facade on the same data folder writes more
    IndexService(other).index(tmp_path / "more", "c")
    other.store.release("c")
    grown = figures()
    assert grown[0] == grown[1] and grown[1] > first[1] and loads == ["c", "c"]  # type: ignore[operator]

    doc = other.store.scroll("c", limit=1)[0].payload["doc_id"]
    other.store.delete_documents("c", [doc])  # points lost behind the metadata's back
    other.store.release("c")
    damaged = figures()
    assert damaged[0] == grown[0] and damaged[1] is not None and damaged[1] < grown[1]  # type: ignore[operator]
    assert figures() == damaged and loads == ["c"] * 3

    catalog.delete("c")
    assert catalog.list_all() == []
    IndexService(other).index(tmp_path / "src", "c")  # the same name again, fewer points
    other.store.release("c")
    assert figures() == first
