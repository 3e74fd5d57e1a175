"""A wall clock stepped forward past the lease's length (NTP after a laptop's sleep, a VM
resumed from a snapshot) made every live lease look expired until its next beat (the clock
exploration of the fourth session of 2026-12-02): a second `facet index` on the same host took
a running job's collection over (both jobs then failed; the old writer's rows under the new one),
and `facet jobs` showed the running job `interrupted`, `--follow` giving up on a job that went
on to complete. A lease now records, at each beat, its holder's ``process_identity`` (boot id
and start in ticks since boot: no recycled pid shares it) and the boot clock (which no step
moves, ``leases.beat_mark``); on the holder's host, where the wall clock's age of the last beat
and the boot clock's disagree by more than ``STEP_MARGIN_S``, the boot clock decides.

The steps are made by moving the lease's wall-clock times, as a step makes them read; the
holder is this test process, with a real ``Heartbeat`` thread or without one (a holder that
stopped beating). Real SQLite."""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import sessionmaker

from app.services import leases
from app.services.collections import effective_state
from indexer import metadata as md

from .conftest import running_job

TTL_S = 4.0  # (beats every second: the takeover's wait is TTL/4 + 2 s)


def _collection(tmp_path: Path) -> tuple[Any, int]:
    """A SQLite database in ``tmp_path`` holding collection ``c``: its sessions and the id."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    engine = md.make_engine(f"sqlite:///{tmp_path / 'facet.db'}")
    sessions = sessionmaker(engine, expire_on_commit=False)
    with sessions() as s:
        coll = md.create_collection(s, "c", backend="edge", chunk_size=64, chunk_overlap=8, tokenizer="t")
        s.commit()
        return sessions, int(coll.id)


def _setup(tmp_path: Path):
    sessions, coll_id = _collection(tmp_path)
    with sessions() as s:
        coll = s.get(md.Collection, coll_id)
        job_a = running_job(s, coll, ttl_s=TTL_S)
        job_b = md.IndexJob(collection_id=coll.id, source="src", embedder="minilm", state="queued",
                            runner="inline")
        s.add(job_b)
        s.commit()
        return sessions, coll.id, job_a, int(job_b.id)


def _step_forward(sessions, coll_id: int, hours: float = 2) -> None:
    """The lease's times as they read after the clock jumped ``hours`` ahead."""
    back = dt.timedelta(hours=hours)
    with sessions() as s:
        coll = s.get(md.Collection, coll_id)
        assert coll is not None and coll.heartbeat_at is not None and coll.lease_expires_at is not None
        s.execute(update(md.Collection).where(md.Collection.id == coll_id).values(
            heartbeat_at=coll.heartbeat_at - back, lease_expires_at=coll.lease_expires_at - back))
        s.commit()


def test_the_lease_records_its_holders_identity_and_beat(tmp_path: Path) -> None:
    sessions, coll_id, job_a, _ = _setup(tmp_path)
    with sessions() as s:
        coll = s.get(md.Collection, coll_id)
        assert coll is not None and coll.writer_process is not None
        identity, _, beat = coll.writer_process.rpartition("/")
        clock = leases.boot_clock_ms()
        assert identity == leases.process_identity(os.getpid())
        assert clock is not None and 0 <= clock - int(beat) < 60_000
        leases.release(s, coll_id, job_a)
        s.refresh(coll)
        assert coll.writer_process is None


def test_a_live_writer_is_not_taken_over_after_a_forward_step(tmp_path: Path) -> None:
    sessions, coll_id, job_a, job_b = _setup(tmp_path)
    with leases.Heartbeat(sessions, coll_id, job_a, TTL_S, name="c") as beat:
        _step_forward(sessions, coll_id)
        with sessions() as s:
            job = md.get_job(s, job_a)
            assert job is not None and effective_state(job) == ("running", None)
        with sessions() as s:
            kept = leases.acquire(s, coll_id, job_b, TTL_S)
        assert kept is not None and kept.job_id == job_a  # (the old code: None, taken over)
        assert beat.holds()
        # The refusal's words give the beat's true age, not the two hours the wall clock reads.
        said = kept.describe()
        assert said.startswith(f"job {job_a} (pid {os.getpid()} on host {leases.HOST}, heartbeat ")
        assert int(said.rsplit("heartbeat ", 1)[1].split("s ago")[0]) < 60, said


def test_a_holder_that_stopped_beating_is_taken_over_after_its_length_whatever_the_step(
        tmp_path: Path) -> None:
    """Forward: refused while its last beat is recent on the boot clock, taken once the lease's
    length has passed there. Backward (the lease reads two hours ahead): taken then too, where
    the wall clock alone kept it for two hours."""
    for hours in (2, -2):
        sessions, coll_id, _job_a, job_b = _setup(tmp_path / f"step{hours}")
        _step_forward(sessions, coll_id, hours)
        with sessions() as s:
            if hours > 0:
                assert leases.acquire(s, coll_id, job_b, TTL_S) is not None
            time.sleep(TTL_S + 0.5)
            assert leases.acquire(s, coll_id, job_b, TTL_S) is None, hours
            coll = s.get(md.Collection, coll_id, populate_existing=True)
            assert coll is not None and coll.writer_job_id == job_b


def test_a_job_that_started_after_its_collection_was_read_is_running(tmp_path: Path) -> None:
    """A session that had read the collection (no lease yet), then the job's row (running,
    its lease taken in the same commit): its stale lease said "interrupted", and a search racing
    a new collection's first job said "job N (interrupted) ended before it wrote any document"
    (the verification round of the fifth session of 2026-12-05: 3 to 8 in a 90 s run)."""
    sessions, coll_id = _collection(tmp_path)
    with sessions() as reader:
        seen = reader.get(md.Collection, coll_id)  # read before the job starts
        assert seen is not None and leases.holder(seen) is None
        with sessions() as writer:
            written = writer.get(md.Collection, coll_id)
            job_id = running_job(writer, written, ttl_s=TTL_S)
        job = md.get_job(reader, job_id)
        assert job is not None and job.collection is seen  # the stale row, as a search holds it
        assert effective_state(job) == ("running", None)
