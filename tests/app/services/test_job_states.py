"""A job's shown state at the moment its writer finishes: SQLite reads the job row and the
collection's lease in separate snapshots, so a reader can hold a 'running' row while the
lease is already released. That job just completed; it must not be shown interrupted."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from sqlalchemy.orm import sessionmaker

from app.services import leases
from app.services.collections import effective_state
from indexer import metadata as md

from .conftest import running_job


def _collection(tmp_path: Path):
    """A fresh database with collection 'c': (sessions, the session that made it, the collection)."""
    engine = md.make_engine(f"sqlite:///{tmp_path / 'facet.db'}")
    sessions = sessionmaker(engine, expire_on_commit=False)
    s = sessions()
    return sessions, s, md.create_collection(s, "c", backend="edge", chunk_size=64, chunk_overlap=8,
                                             tokenizer="t")


def _running_job(tmp_path: Path):
    sessions, s, coll = _collection(tmp_path)
    with s:
        return sessions, coll.id, running_job(s, coll)


def _finish(sessions, coll_id: int, job_id: int) -> None:
    """What a writer does at the end: the final state first, then the lease."""
    with sessions() as w:
        done = md.get_job(w, job_id)
        assert done is not None
        done.state = "completed"
        w.commit()
        leases.release(w, coll_id, job_id)


def test_a_job_that_ends_between_the_two_reads_is_completed_not_interrupted(tmp_path):
    sessions, coll_id, job_id = _running_job(tmp_path)
    with sessions() as reader:
        job = md.get_job(reader, job_id)  # read while running; its collection is not loaded yet
        assert job is not None and job.state == "running"
        _finish(sessions, coll_id, job_id)
        assert effective_state(job) == ("completed", None)


def test_a_running_job_whose_writer_is_gone_is_interrupted(tmp_path):
    sessions, coll_id, job_id = _running_job(tmp_path)
    with sessions() as w:
        leases.release(w, coll_id, job_id)  # the lease is gone, the row still says running
    with sessions() as reader:
        job = md.get_job(reader, job_id)
        assert job is not None
        state, message = effective_state(job)
        assert state == "interrupted" and "again to resume" in (message or "")


def test_a_job_row_deleted_between_the_two_reads_is_not_an_error(tmp_path):
    sessions, coll_id, job_id = _running_job(tmp_path)
    with sessions() as reader:
        job = md.get_job(reader, job_id)
        assert job is not None
        with sessions() as w:
            leases.release(w, coll_id, job_id)
            w.delete(w.get(md.IndexJob, job_id))
            w.commit()
        state, message = effective_state(job)
        assert state == "interrupted" and "deleted" in (message or "")


def test_a_worker_job_queued_long_with_no_writer_says_what_to_do(tmp_path):
    """A worker job whose task was lost with the broker's data stayed `queued` for ever, with
    nothing to say why or what to do."""
    from datetime import timedelta

    sessions, s, coll = _collection(tmp_path)
    with s:
        fresh = md.IndexJob(collection_id=coll.id, source="src", embedder="minilm", state="queued",
                            runner="celery")
        old = md.IndexJob(collection_id=coll.id, source="src", embedder="minilm", state="queued",
                          runner="celery", queued_at=md.utcnow() - timedelta(minutes=20))
        s.add_all([fresh, old])
        s.commit()
        assert effective_state(fresh) == ("queued", None)
        state, message = effective_state(old)
        assert state == "queued" and "waiting for a worker for 20 min" in (message or "")
        assert "its task was lost" in (message or "") and "facet index src --collection c" in (message or "")
        # The other cause (a rolling upgrade: a worker of an older Facet fails every task): the
        # message named only a lost task, and its rerun went to the same worker.
        assert "or a worker failed it (its log says why" in (message or ""), message
        # And a worker of another data folder or database, which drops the task (the worker
        # exploration of the third session of 2026-12-07: only its own log said so).
        assert ("dropped by a worker on another database (its FACET_DATA_DIR or "
                "FACET_DATABASE_URL other than this server's" in (message or "")), message
        writer_id = running_job(s, coll, runner="celery")
        old_id = old.id
    with sessions() as reader:
        waiting = md.get_job(reader, old_id)
        assert waiting is not None
        assert effective_state(waiting) == ("queued", None)  # behind a job that is writing
    with sessions() as s:  # the hint followed: a later run of the same source completed
        writer = s.get(md.IndexJob, writer_id)
        writer.state = "completed"
        s.commit()
        leases.release(s, coll.id, writer_id)
    with sessions() as reader:
        waiting = md.get_job(reader, old_id)
        state, message = effective_state(waiting)
        assert state == "queued" and (message or "").startswith(f"superseded by job {writer_id}")
        assert "again to resume" not in (message or "")


def test_follow_says_a_queued_job_was_superseded_and_stops(tmp_path):
    """`facet jobs N --follow` (what `--background` says to run) printed only "job 1 queued:
    0/? documents" and waited for ever on a superseded job, whose message only `facet jobs N`
    showed."""
    from datetime import timedelta

    engine = md.make_engine(f"sqlite:///{tmp_path / 'facet.db'}")
    with sessionmaker(engine)() as s:
        coll = md.create_collection(s, "c", backend="edge", chunk_size=64, chunk_overlap=8,
                                    tokenizer="minilm")
        queued = md.IndexJob(collection_id=coll.id, source="src", embedder="minilm",
                             state="queued", runner="celery",
                             queued_at=md.utcnow() - timedelta(minutes=6))
        s.add(queued)
        s.commit()
        s.add(md.IndexJob(collection_id=coll.id, source="src", embedder="minilm",
                          state="completed", runner="inline"))
        s.commit()
        job_id = queued.id
    engine.dispose()
    import os
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", "from app.cli import main; main()", "jobs",
                           str(job_id), "--follow", "--interval", "0.2"],
                          env=dict(os.environ, FACET_DATA_DIR=str(tmp_path)), capture_output=True,
                          text=True, timeout=60)  # it waited for ever
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0].startswith(f"job {job_id} queued")
    assert done.stdout.splitlines()[1].startswith(f"  superseded by job {job_id + 1}")


def test_progress_shows_no_total_it_does_not_know() -> None:
    """`facet jobs N --follow` showed "126/126 documents" for a job with 274 still to go: only a
    worker job records its total (``docs_total``), and the line fell back to the documents
    seen, so an unfinished job looked complete."""
    from app.commands.collections import progress_line
    from app.services.collections import JobInfo

    def job(state: str, seen: int, total: int = 0) -> JobInfo:
        return JobInfo(id=3, collection="c", source="src", embedder="minilm", state=state,
                       docs_seen=seen, docs_indexed=seen, docs_skipped=0, docs_failed=0,
                       docs_deleted=0, chunks_written=seen, timings={}, started_at="",
                       finished_at=None, resumed_from=None, message=None, docs_total=total)

    assert progress_line(job("running", 126)) == (
        "job 3 running: 126 documents seen (126 indexed, 0 unchanged, 0 failed), 126 chunks written")
    assert progress_line(job("interrupted", 1)).startswith("job 3 interrupted: 1 document seen (")
    assert progress_line(job("queued", 0)).startswith("job 3 queued: 0 documents seen (")
    # Known totals: a worker job's, and a completed job's (all it saw was all there was).
    assert progress_line(job("running", 126, 400)).startswith("job 3 running: 126/400 documents (")
    assert progress_line(job("completed", 400)).startswith("job 3 completed: 400/400 documents (")


def test_follow_of_a_stopped_in_process_job_does_not_call_it_complete(tmp_path) -> None:
    """The same through `facet jobs N --follow`, on a job stopped half way (no total recorded)."""
    from tests.app.cli_runner import invoke_cli

    sessions, s, coll = _collection(tmp_path)
    with s:
        stopped = md.IndexJob(collection_id=coll.id, source="src", embedder="minilm",
                              state="interrupted", runner="inline", docs_seen=126,
                              docs_indexed=126, chunks_written=130, message="stopped (Ctrl-C)")
        s.add(stopped)
        s.commit()
        job_id = stopped.id
    sessions.kw["bind"].dispose()
    done = invoke_cli("jobs", str(job_id), "--follow", "--interval", "0.1",
                      env={"FACET_DATA_DIR": str(tmp_path)})
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == (f"job {job_id} interrupted: 126 documents seen (126 "
                                           "indexed, 0 unchanged, 0 failed), 130 chunks written")


def test_a_failed_heartbeat_is_one_line_not_a_traceback(caplog) -> None:
    """A renewal that met "database is locked" printed a 50-line SQLAlchemy traceback into the
    terminal of the job's user (at warning level); now one line, the traceback at debug."""
    import logging
    import sqlite3
    import time

    from sqlalchemy.exc import OperationalError

    def sessions():
        raise OperationalError("UPDATE collections SET heartbeat_at=?", {},
                               sqlite3.OperationalError("database is locked"))

    with caplog.at_level(logging.WARNING, logger="app.services.leases"), \
            leases.Heartbeat(sessions, 1, 7, ttl_s=0.8):  # type: ignore[arg-type]
        time.sleep(0.5)
    failed = [r for r in caplog.records if "heartbeat of job 7 failed" in r.getMessage()]
    assert failed and all(r.exc_info is None for r in failed)
    assert "database is locked" in failed[0].getMessage()
    assert "\n" not in failed[0].getMessage()


def test_a_lease_taken_from_a_dead_job_is_logged_by_collection_name(tmp_path, caplog) -> None:
    """The log said "took over the lease of collection 2": the id, not the name one searches by."""
    import logging

    _, s, coll = _collection(tmp_path)
    with s:
        dead = running_job(s, coll)
        s.execute(md.Collection.__table__.update().where(md.Collection.id == coll.id)
                  .values(writer_pid=2**22 + 12345))  # no such process on this host
        s.commit()
        job = md.IndexJob(collection_id=coll.id, source="src", embedder="minilm", state="running")
        s.add(job)
        s.commit()
        caplog.set_level(logging.INFO, logger="app.services.leases")
        assert leases.acquire(s, coll.id, job.id, ttl_s=60) is None
    said = [r.getMessage() for r in caplog.records if "took over" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith(
        f"took over the lease of collection 'c' from dead job {dead} "), said


def test_a_job_whose_lease_lapsed_while_its_process_lives_is_stalled_not_interrupted(tmp_path):
    """The paused-writer exploration of the third session of 2026-12-02: a `facet index`
    stopped past the lease's time (SIGSTOP, ^Z) was shown "interrupted ... run it again to
    resume", a rerun the collection then refused (open in that pid), and its cancel was refused
    too; on SIGCONT the same job went on and completed. A real process, really stopped, holds
    the expired lease here, recorded with its ``process_identity`` and its last beat on the boot
    clock (``leases.beat_mark``, as a writer records itself since the fourth session of
    2026-12-02), or, as an older Facet recorded it, with no mark and its last heartbeat after
    it started. A pid whose identity is not the one recorded, or (no mark) that started after
    that heartbeat, is another process the pid went to since: not the writer, so interrupted
    (never "kill PID" of a stranger); so is a writer that has ended. A lease that looks ten
    minutes old on the wall clock but beat just now on the boot clock is a clock step: running
    (tests/app/services/test_clock_step.py)."""
    import signal
    import subprocess
    import time

    from sqlalchemy import update

    from app.services import leases

    sessions, coll_id, job_id = _running_job(tmp_path)
    writer = subprocess.Popen(["sleep", "60"])

    def state(heartbeat: dt.datetime, process: str | None) -> tuple[str, str | None]:
        with sessions() as w:
            w.execute(update(md.Collection).where(md.Collection.id == coll_id).values(
                writer_pid=writer.pid, writer_process=process, heartbeat_at=heartbeat,
                lease_expires_at=md.utcnow() - dt.timedelta(seconds=1)))
            w.commit()
        with sessions() as reader:
            job = md.get_job(reader, job_id)
            assert job is not None
            return effective_state(job)

    def mark(identity: str, beat_s_ago: float) -> str:
        clock = leases.boot_clock_ms()
        assert clock is not None
        return f"{identity}/{clock - int(beat_s_ago * 1000)}"

    try:
        identity = leases.process_identity(writer.pid)
        assert identity is not None
        found, message = state(md.utcnow() - dt.timedelta(minutes=10), mark(identity, 0))
        assert found == "running", (found, message)  # (a clock step: the boot clock says so)
        # Silent past the lease on both clocks, not stopped (a laptop just woken, before its
        # next beat): not told to `kill` it first (the clock exploration, F1b).
        found, message = state(md.utcnow() - dt.timedelta(seconds=70), mark(identity, 70))
        assert found == "stalled" and message is not None and message.startswith(
            f"no heartbeat for 70s, yet its process (pid {writer.pid}) is alive and not stopped on "
            "this host: it renews the lease at its next beat (after a sleep, within a quarter of "
            f"the lease), or is starved or hung; if it stays so, end it (`kill {writer.pid}`)"), message
        writer.send_signal(signal.SIGSTOP)
        time.sleep(3.5)  # (its start and the heartbeat apart by more than /proc's rounding)
        for process in (mark(identity, 1), None):
            found, message = state(md.utcnow() - dt.timedelta(seconds=1), process)
            assert found == "stalled", (process, found, message)
            assert message is not None and message.startswith(
                f"no heartbeat for 1s, yet its process (pid {writer.pid}) is alive on this host: stopped, "
                f"not ended; it goes on when it runs again (`kill -CONT {writer.pid}`), or end it "
                f"(`kill {writer.pid}`) and run `facet index"), message
        for heartbeat, process in ((md.utcnow() - dt.timedelta(seconds=1), identity.split("/")[0] + "/1/1"),
                                   (md.utcnow() - dt.timedelta(minutes=10), None)):  # before it started
            recycled, message = state(heartbeat, process)
            assert recycled == "interrupted" and "kill" not in (message or ""), (process, recycled, message)
    finally:
        writer.kill()
        writer.wait()
    ended, message = state(md.utcnow() - dt.timedelta(seconds=1), mark(identity, 1))
    assert ended == "interrupted" and "its writer stopped without finishing" in (message or ""), message


def test_a_job_interrupted_on_a_full_disk_says_the_disk_is_full(tmp_path, monkeypatch):
    """The disk-full exploration of the third session of 2026-12-02: a writer that died on a
    full disk (a bus error: FACET_MIN_FREE_MB at 0, or the disk filled by another program) was
    shown "interrupted: its writer stopped without finishing", the cause unsaid, and its rerun
    died the same way. The data folder's disk reads full here (``shutil.disk_usage``)."""
    import shutil

    from app.settings import get_settings

    sessions, coll_id, job_id = _running_job(tmp_path)
    with sessions() as w:
        leases.release(w, coll_id, job_id)  # its writer gone
    monkeypatch.setenv("FACET_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    real = shutil.disk_usage
    try:
        with sessions() as reader:
            job = md.get_job(reader, job_id)
            assert job is not None
            roomy = effective_state(job)[1] or ""
            monkeypatch.setattr(shutil, "disk_usage", lambda path: real(path)._replace(free=0))
            state, message = effective_state(job)
    finally:
        get_settings.cache_clear()
    assert "is full" not in roomy, roomy
    # (Nothing was indexed: "what was indexed is kept" is said only of a job that wrote something.)
    assert state == "interrupted" and (message or "").endswith(
        f"again to resume; the disk of the data folder {tmp_path} is full (0 "
        "bytes free): free some space there (or point FACET_DATA_DIR at a disk with room) and try "
        "again"), message


def test_the_resume_hint_of_a_job_with_a_text_column_names_it(tmp_path):
    """`facet index r.jsonl -c t --text-column body` stopped mid-way said to run `facet index
    r.jsonl --collection t --embedder minilm` again: that run read every record's default field,
    re-embedding the documents done with the wrong text (exit 0, 5,000 records)."""
    sessions, coll_id, job_id = _running_job(tmp_path)
    with sessions() as w:
        job = md.get_job(w, job_id)
        assert job is not None
        job.text_column = "body text"
        w.commit()
        leases.release(w, coll_id, job_id)
    with sessions() as reader:
        job = md.get_job(reader, job_id)
        assert job is not None
        state, message = effective_state(job)
        assert state == "interrupted" and "--text-column 'body text'" in (message or ""), message


def test_a_resume_hint_says_what_was_kept_from_the_runs_count_where_the_row_cannot() -> None:
    """After a rollback in an outage the row's counts are not loaded (and must not be read):
    the run's own count says whether anything was kept; without one it is said (the
    verification round of the fourth session of 2026-12-07: a job of 0 indexed read "... with
    0 documents indexed; ... resume: what was indexed is kept")."""
    from app.services.collections import kept_said

    class Expired:  # a row whose counts were expired by the rollback: none loaded
        pass

    assert kept_said(Expired(), 0) == ""
    assert kept_said(Expired(), 3) == kept_said(Expired()) == ": what was indexed is kept"
