"""PostgreSQL stopped in the middle of an index job (`pg_ctl -m fast stop`, started again a moment
later): the run ends with the database's UnavailableError in one line with the command that
resumes it, not ~460 lines of chained SQLAlchemy tracebacks ending in PendingRollbackError, and
once the database is back the job's row says how it ended and its lease is free."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from app.errors import UnavailableError
from app.services.collections import CollectionService
from app.services.indexing import IndexOptions, IndexService, Progress
from indexer import metadata as md

from .conftest import write_corpus
from .test_postgres import Cluster, postgres  # noqa: F401 (the fixture: a throwaway cluster)

OUT_OF_REACH = "the metadata database (PostgreSQL) is out of reach: "


def _resume(src: Path, collection: str) -> str:
    return f"facet index {src} --collection {collection} --embedder minilm"


def _check_recorded(ctx, collection: str, src: Path) -> None:
    """The job's row once the database is back: ended with a one-line message naming the outage
    and the resume command, its collection's lease free."""
    [job] = CollectionService(ctx).jobs(collection)
    assert job.state in ("interrupted", "failed"), (job.state, job.message)
    assert job.message is not None and "\n" not in job.message, job.message
    assert OUT_OF_REACH in job.message and f"run `{_resume(src, collection)}` again" in job.message, \
        job.message
    assert "PendingRollbackError" not in job.message and "could not be updated" not in job.message
    assert job.finished_at is not None and 0 < job.docs_indexed < 6, job
    with ctx.sessions() as session:
        coll = md.get_collection(session, collection)
        assert coll is not None and coll.writer_job_id is None, coll.writer_job_id


def test_an_outage_mid_job_is_unavailable_with_the_resume_command(make_ctx, tmp_path, caplog,
                                                                  postgres: Cluster) -> None:  # noqa: F811
    caplog.set_level(logging.WARNING, logger="app.services.indexing")
    src = tmp_path / "src"
    write_corpus(src, 6)
    ctx = make_ctx(database_url=postgres.url)
    service = IndexService(ctx)
    stopped: list[int] = []

    def progress(p: Progress) -> None:
        if p.stage is None and p.current is None and not stopped:  # after the first batch
            postgres.stop()
            stopped.append(p.docs_done)

    try:
        with pytest.raises(UnavailableError) as caught:
            service.index(src, "big", IndexOptions(batch_chunks=2), progress)
    finally:
        if stopped:
            postgres.start()
    assert stopped == [2]
    said = str(caught.value)
    assert said.startswith(OUT_OF_REACH) and "\n" not in said, said
    assert f"run `{_resume(src, 'big')}` again once it is back to resume" in said, said
    assert "nothing was changed" not in said, said  # (of one statement, not of the job)
    assert "could not remove refused job" not in caplog.text, caplog.text  # (it had started)
    _check_recorded(ctx, "big", src)
    again = service.index(src, "big")
    assert (again.state, again.docs_indexed + again.docs_skipped) == ("completed", 6), again
    assert again.docs_skipped >= 2
    CollectionService(ctx).delete("big")


def test_an_outage_under_a_server_job_frees_the_collection_once_back(make_ctx, tmp_path,
                                                                      postgres: Cluster) -> None:  # noqa: F811
    """The server's job thread: GET /jobs/ID said failed with the raw PendingRollbackError and
    "its row could not be updated (it still says running)", `facet jobs ID` running, and a new
    job into the collection was refused (409) until the lease lapsed (~60 s)."""
    from app.jobs import run_logged

    src = tmp_path / "src"
    write_corpus(src, 6)
    ctx = make_ctx(database_url=postgres.url)
    service = IndexService(ctx)
    prepared = service.prepare(src, "served", IndexOptions(batch_chunks=2), runner="thread")
    original = service.check_cancelled
    calls: list[int] = []

    def check_cancelled(job_id: int) -> None:  # the second batch's check: the database is gone
        calls.append(job_id)
        if len(calls) == 2:
            postgres.stop()
        original(job_id)

    service.check_cancelled = check_cancelled  # type: ignore[method-assign]
    try:
        with pytest.raises(UnavailableError, match="out of reach"):
            run_logged(service.run, prepared)
    finally:
        if calls:
            postgres.start()
    service.check_cancelled = original  # type: ignore[method-assign]
    # Written by this process once the database is back, unasked: `facet jobs ID` in another
    # process (a plain read of the row) said running until the lease lapsed.
    deadline = time.monotonic() + 10
    while True:
        with ctx.sessions() as session:
            row = md.get_job(session, prepared.job_id)
            assert row is not None
            if row.state != "running" or time.monotonic() > deadline:
                break
        time.sleep(0.2)
    assert row.state == "failed" and row.message is not None and OUT_OF_REACH in row.message
    info = CollectionService(ctx).job(prepared.job_id)
    assert info.state in ("interrupted", "failed") and "\n" not in (info.message or ""), info.message
    _check_recorded(ctx, "served", src)
    # A resubmission is not refused as "job N is still indexing".
    second = IndexService(ctx).prepare(src, "served", runner="thread")
    report = IndexService(ctx).run(second)
    assert (report.state, report.docs_indexed + report.docs_skipped) == ("completed", 6)
    CollectionService(ctx).delete("served")


def test_facet_index_during_an_outage_exits_7_in_one_line(tmp_path, postgres: Cluster,  # noqa: F811
                                                          monkeypatch, caplog) -> None:
    from tests.app.cli_runner import invoke_cli

    src = tmp_path / "src"
    write_corpus(src, 4)
    original = IndexService.check_cancelled
    calls: list[int] = []

    def check_cancelled(self: IndexService, job_id: int) -> None:
        calls.append(job_id)
        if len(calls) == 2:
            postgres.stop()
        original(self, job_id)

    monkeypatch.setattr(IndexService, "check_cancelled", check_cancelled)
    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "FACET_DATABASE_URL": postgres.url,
           "FACET_INDEX_BATCH_CHUNKS": "1", "FACET_CHUNK_TOKENS": "64", "FACET_CHUNK_OVERLAP": "8",
           "OMP_NUM_THREADS": "1"}
    try:
        with caplog.at_level("WARNING"):
            done = invoke_cli("index", str(src), "--collection", "cli", "--embedder", "minilm", env=env)
    finally:
        if calls:
            postgres.start()
    out = done.stdout + done.stderr
    assert done.returncode == 7, out
    assert "Traceback" not in out and "PendingRollbackError" not in out, out
    assert "could not remove refused job" not in out, out
    # Nor a clean-up's SQLAlchemy warning before it ("could not take embedder 'minilm' off
    # collection ...", three lines: the multi-process exploration of the fourth session of
    # 2026-12-07).
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert not any("could not take embedder" in w or "sqlalche.me" in w for w in warned), warned
    error = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(error) == 1 and error[0].startswith(f"error: {OUT_OF_REACH}"), done.stderr
    assert f"run `{_resume(src, 'cli')}` again once it is back" in error[0], error[0]


def test_a_failure_no_row_took_is_shown_in_one_line(make_ctx, tmp_path) -> None:
    """A runner's failure its row could not take is shown from this process's memory: it was the
    raw multi-line SQLAlchemy text, "(Background on this error at: ...)" links and all."""
    from sqlalchemy.exc import PendingRollbackError

    from app.jobs import _remember_failure

    write_corpus(tmp_path / "src", 1)
    ctx = make_ctx()
    prepared = IndexService(ctx).prepare(tmp_path / "src", "mem", runner="thread")
    _remember_failure(prepared, PendingRollbackError(
        "This Session's transaction has been rolled back due to a previous exception during "
        "flush. Original exception was: (psycopg.OperationalError) connection failed\n\tIs the "
        "server running on that host?\n(Background on this error at: https://sqlalche.me/e/21/e3q8)"))
    info = CollectionService(ctx).job(prepared.job_id)
    assert info.state == "failed" and info.message is not None
    assert "\n" not in info.message and "Background on this error" not in info.message, info.message
    assert info.message.startswith("PendingRollbackError: This Session's transaction has been "
                                   "rolled back"), info.message
    assert info.message.endswith("its row could not be updated (it still says queued): only this "
                                 "process knows of this failure, until it stops"), info.message


def test_an_outage_right_after_the_end_is_recorded_leaves_the_job_as_recorded(
        make_ctx, tmp_path, monkeypatch, postgres: Cluster) -> None:  # noqa: F811
    """Stopped after the row took "completed" (during the read of a late cancel that follows
    the final commit): the run said "run again to resume" (exit 7) of a completed job. It now
    returns completed; only the lease waits for the database, and is let go once it is back."""
    src = tmp_path / "src"
    write_corpus(src, 3)
    ctx = make_ctx(database_url=postgres.url)
    service = IndexService(ctx)
    real = service._cancel_asked
    stopped: list[bool] = []

    def stop_first(job_id: int) -> bool:
        if not stopped and md_state(ctx, job_id) == "completed":
            postgres.stop()
            stopped.append(True)
        return real(job_id)

    def md_state(ctx, job_id: int) -> str:
        with ctx.sessions() as session:
            return md.get_job(session, job_id).state

    monkeypatch.setattr(service, "_cancel_asked", stop_first)
    try:
        report = service.index(src, "done")
    finally:
        if stopped:
            postgres.start()
    assert stopped and report.state == "completed" and report.docs_indexed == 3
    for _ in range(100):  # the end's writer retries every second
        with ctx.sessions() as session:
            coll = md.get_collection(session, "done")
            if coll.writer_job_id is None:
                break
        time.sleep(0.1)
    assert coll.writer_job_id is None
    [job] = CollectionService(ctx).jobs("done")
    assert (job.state, job.message) == ("completed", None)


def test_an_end_the_database_did_not_take_keeps_what_the_run_decided(make_ctx, tmp_path) -> None:
    """Ctrl-C during an outage: the run set the job interrupted, the row could not take it, and
    the end kept to write later was read after the session's rollback, which expires it: every
    such end was kept as "failed". (SQLite stands in for the session; only the order matters.)"""
    from sqlalchemy.exc import OperationalError

    from app.services import collections as jobs_state
    from app.services.indexing import IndexReport

    write_corpus(tmp_path / "src", 1)
    ctx = make_ctx()
    service = IndexService(ctx)
    prepared = service.prepare(tmp_path / "src", "kept", runner="thread")
    with ctx.sessions() as session:
        job = md.get_job(session, prepared.job_id)
        job.state, job.message = "interrupted", "stopped (Ctrl-C) with 0 documents indexed"
        report = IndexReport(job_id=job.id, collection="kept", embedder="minilm", state="running")
        service._end_unrecorded(session, job, report, KeyboardInterrupt(),
                                OperationalError("SELECT 1", {}, Exception("gone")), "facet index src",
                                job.id, job.collection_id, "kept")
    try:
        kept = [e for e in jobs_state._UNRECORDED.values() if e.job_id == prepared.job_id]
        assert [(e.state, e.message) for e in kept] == [
            ("interrupted", "stopped (Ctrl-C) with 0 documents indexed")]
        assert report.state == "interrupted"
    finally:
        jobs_state.record_unrecorded_ends(ctx.sessions)
