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
