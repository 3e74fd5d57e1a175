"""The single-writer lease of a collection: one job writes a collection at a time, on any host.

The lease lives on the collection row (``writer_job_id``, ``writer_host``, ``writer_pid``,
``heartbeat_at``, ``lease_expires_at``). Taking it is one conditional ``UPDATE`` (free, ours
already, or expired), atomic on SQLite and PostgreSQL alike, so two processes, or two hosts,
racing for it cannot both win. The holder renews it every ``ttl / 4`` (``Heartbeat``); a
holder that stops renewing (killed, host gone, network cut) loses it ``ttl`` seconds after its
last heartbeat. On the holder's own host a dead pid frees it at once, but a pid on another
host is never probed (it would look dead): there only the expiry counts.

With workers, the holder is the *job*: every chunk task of the job renews it, from whichever
worker runs it, and the job is dead when no chunk has made progress for ``ttl`` seconds.

Its times are the database's (``db_now``): on PostgreSQL, shared by several hosts, the server's
clock, so that hosts whose clocks disagree by more than a lease's time do not take each other's
live leases over.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from indexer import metadata as md

logger = logging.getLogger(__name__)

HOST = socket.gethostname()


def pid_alive(pid: int | None) -> bool:
    """Whether process ``pid`` of *this* host is alive (a zombie counts as dead)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def _stat_fields(pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the command's name (field 3, the state, first).

    Raises:
        OSError: no such process, or no /proc.
    """
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()


def process_started_at(pid: int) -> dt.datetime | None:
    """When process ``pid`` of this host started (naive UTC), from /proc; None where that
    cannot be read (no such process, another system)."""
    try:
        ticks = int(_stat_fields(pid)[19])  # field 22, starttime
        with open("/proc/stat") as fh:
            boot = next(int(line.split()[1]) for line in fh if line.startswith("btime "))
        seconds = boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return dt.datetime.fromtimestamp(seconds, dt.UTC).replace(tzinfo=None)


def process_identity(pid: int) -> str | None:
    """Process ``pid`` of this host as no clock step moves it and no later process given the
    same pid shares it: this boot's id and the process's start in clock ticks since the boot
    (``/proc``); None where that cannot be read (no such process, another system)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            boot = fh.read().strip()
        ticks = int(_stat_fields(pid)[19])  # field 22, starttime
    except (OSError, ValueError, IndexError):
        return None
    return f"{boot}/{ticks}"


def process_stopped(pid: int) -> bool:
    """Whether process ``pid`` of this host is stopped (SIGSTOP, ^Z, a debugger): state T or t."""
    try:
        return _stat_fields(pid)[0] in ("T", "t")
    except (OSError, IndexError):
        return False


# How far the wall clock's and the boot clock's ages of a beat may differ before the wall clock
# is taken for stepped (``Holder.alive``): far above a database round trip and a busy host's
# scheduling, far below the shortest lease worth having.
STEP_MARGIN_S = 5.0


def boot_clock_ms() -> int | None:
    """This host's clock since boot in milliseconds (CLOCK_BOOTTIME: suspend included, no NTP
    step moves it), or None where there is none (not Linux)."""
    clock = getattr(time, "CLOCK_BOOTTIME", None)
    if clock is None:
        return None
    try:
        return int(time.clock_gettime(clock) * 1000)
    except OSError:
        return None


def beat_mark() -> str | None:
    """What a lease records of its holder at each beat (``writer_process``): this process's
    ``process_identity`` and the boot clock now, ``BOOT/TICKS/MS``; None where either cannot
    be read."""
    identity, clock = process_identity(os.getpid()), boot_clock_ms()
    return f"{identity}/{clock}" if identity is not None and clock is not None else None


@dataclass(frozen=True)
class Holder:
    """Who holds a collection's lease."""

    job_id: int
    host: str | None
    pid: int | None
    heartbeat_at: dt.datetime | None
    expires_at: dt.datetime | None
    process: str | None = None  # ``beat_mark()`` of its last beat: identity and boot clock

    @property
    def identity(self) -> str | None:
        """The ``process_identity`` its last beat recorded (``process`` without the boot clock),
        or None (a lease an older Facet wrote)."""
        if self.process is None:
            return None
        return self.process.rpartition("/")[0] or None

    def alive(self, now: dt.datetime | None = None) -> bool:
        """Still holding: not expired, and (on this host) its process still runs.

        Expiry is read on the wall clock, except where this host's clock was stepped since the
        holder's last beat (NTP after a laptop's sleep, a VM resumed from a snapshot): a holder
        of this host and boot records each beat on the boot clock too (``process``), and where
        the two ages of that beat disagree by more than a step's margin the boot clock, which
        no step moves, says. A step forward past the lease's length made every live lease look
        expired until its next beat: a second writer on the host took a running job over."""
        now = now or md.utcnow()
        if self.expires_at is None:
            return False
        if self.host == HOST and self.pid and not pid_alive(self.pid):
            return False
        stepped = self._boot_age_if_stepped(now)
        if stepped is not None:
            age, ttl = stepped
            return age < ttl
        return self.expires_at > now

    def _boot_age_if_stepped(self, now: dt.datetime) -> tuple[float, float] | None:
        """(seconds since the last beat on this host's boot clock, the lease's length) where
        the holder is this host's process of this boot (its identity checked: not a recycled
        pid) and the wall clock's age of that beat is more than ``STEP_MARGIN_S`` off; else
        None (the wall clock is to be read)."""
        if self.host != HOST or not self.pid or self.heartbeat_at is None or self.process is None:
            return None
        beat = self.process.rpartition("/")[2]
        boot_now = boot_clock_ms()
        if self.identity is None or boot_now is None or not beat.isdigit():
            return None
        if process_identity(self.pid) != self.identity:
            return None  # (another process has the pid, or another boot: the wall clock says)
        age = (boot_now - int(beat)) / 1000
        wall_age = (now - self.heartbeat_at).total_seconds()
        if abs(wall_age - age) <= STEP_MARGIN_S:
            return None
        return age, (self.expires_at - self.heartbeat_at).total_seconds() if self.expires_at else 0.0

    def is_this_process(self) -> bool:
        return self.host == HOST and self.pid == os.getpid()

    def describe(self, now: dt.datetime | None = None) -> str:
        """``job 12 (pid 345 on host h, heartbeat 3s ago)``."""
        now = now or md.utcnow()
        stepped = self._boot_age_if_stepped(now)  # (a stepped wall clock: its age was hours)
        age = stepped[0] if stepped is not None else (
            (now - self.heartbeat_at).total_seconds() if self.heartbeat_at else None)
        beat = f", heartbeat {max(0.0, age):.0f}s ago" if age is not None else ""
        return f"job {self.job_id} (pid {self.pid} on host {self.host}{beat})"


def holder(coll: md.Collection) -> Holder | None:
    """The collection's lease holder as recorded (alive or not), or None."""
    if coll.writer_job_id is None:
        return None
    return Holder(coll.writer_job_id, coll.writer_host, coll.writer_pid, coll.heartbeat_at,
                  coll.lease_expires_at, coll.writer_process)


def live_holder(session: Session, collection_id: int) -> Holder | None:
    """The holder if its lease is alive now, else None (fresh read, not the session's cache)."""
    coll = session.get(md.Collection, collection_id, populate_existing=True)
    found = holder(coll) if coll is not None else None
    return found if found is not None and found.alive() else None


# How long a holder whose job row already says how it ended is given to let its lease go: the
# run commits the job's end, then closes its shard, then releases the lease (milliseconds). A
# removal waits as long for such a job of its own process to let go of the collection's lock
# (``IndexService._take_collection_lock``), which it does right after the lease.
ENDING_WAIT_S = 2.0


def settled_holder(sessions: Any, collection_id: int, wait_s: float = ENDING_WAIT_S) -> Holder | None:
    """``live_holder``, except that a holder whose job row has ended (completed, failed,
    cancelled, interrupted) is given up to ``wait_s`` to release its lease, read in fresh
    sessions of ``sessions`` (a callable giving a Session's context manager: a session already
    in a transaction may keep reading from before the release). A client that polled a
    background job to `completed` and deleted the collection at once was refused as "being
    indexed by job N", the job's run not yet past its release.
    """
    deadline = time.monotonic() + wait_s
    while True:
        with sessions() as session:
            found = live_holder(session, collection_id)
            if found is None:
                return None
            job = session.get(md.IndexJob, found.job_id, populate_existing=True)
            ending = job is not None and job.state not in md.UNENDED_STATES
        if not ending or time.monotonic() >= deadline:
            return found
        time.sleep(0.05)


def db_now(session: Session) -> dt.datetime:
    """Now, as leases are written and judged (naive UTC): the database server's clock on
    PostgreSQL, where several hosts share the leases (a host whose clock ran a minute ahead
    found every other host's live lease expired, and took it over), this host's on SQLite (one
    host: its file is not shared across hosts)."""
    if session.get_bind().dialect.name != "postgresql":
        return md.utcnow()
    return _server_now(session)


def _server_now(db: Any) -> dt.datetime:
    """The PostgreSQL server's clock (naive UTC), through ``db``, a Session or a Connection."""
    # clock_timestamp(), not now(): now() is the time the session's transaction began.
    server = db.scalar(select(func.clock_timestamp()))
    assert isinstance(server, dt.datetime)
    return server.astimezone(dt.UTC).replace(tzinfo=None)


def warn_if_clock_off(engine: Any, ttl_s: float) -> float | None:
    """Log a warning where this host's clock is more than a quarter of a lease off the
    PostgreSQL server's: leases are timed by the server (``db_now``), but the job states this
    host shows (running, stalled, interrupted) read its own clock. Returns the offset in
    seconds (this host minus the server), None on another database or where it cannot be read."""
    if engine.dialect.name != "postgresql":
        return None
    try:
        with engine.connect() as connection:
            before = md.utcnow()
            server = _server_now(connection)
            after = md.utcnow()
    except Exception:  # (said where the database is used)
        return None
    offset = (before + (after - before) / 2 - server).total_seconds()
    if abs(offset) > ttl_s / 4:
        logger.warning("this host's clock is %.0fs %s the metadata database server's: leases are "
                       "timed by the server, but the job states this host shows are read by its "
                       "own clock, so they may be wrong (FACET_LEASE_TTL_S=%g); set this host's "
                       "clock right (NTP)", abs(offset), "ahead of" if offset > 0 else "behind",
                       ttl_s)
    return offset


def acquire(session: Session, collection_id: int, job_id: int, ttl_s: float) -> Holder | None:
    """Take (or renew) the lease for ``job_id``; commits.

    Returns:
        None when taken, else the live holder that keeps it.
    """
    now = db_now(session)
    values = {"writer_job_id": job_id, "writer_host": HOST, "writer_pid": os.getpid(),
              "writer_process": beat_mark(),
              "heartbeat_at": now, "lease_expires_at": now + dt.timedelta(seconds=ttl_s)}
    C = md.Collection
    current = session.get(md.Collection, collection_id, populate_existing=True)
    other = holder(current) if current is not None else None
    session.commit()  # (the read's transaction ends: the write below starts its own)
    if other is not None and other.job_id != job_id and other.expires_at is not None \
            and other.expires_at <= now and other.alive(now):
        return other  # past its time by a stepped wall clock only: its holder beats on
    taken = session.execute(update(C).where(
        C.id == collection_id,
        or_(C.writer_job_id.is_(None), C.writer_job_id == job_id,
            C.lease_expires_at.is_(None), C.lease_expires_at <= now)).values(**values))
    session.commit()
    if taken.rowcount == 1:  # type: ignore[attr-defined]
        return None
    current = session.get(md.Collection, collection_id, populate_existing=True)
    if current is None:
        # Deleted (no row for the UPDATE to take): trying again recursed until RecursionError.
        from app.errors import NotFoundError

        raise NotFoundError(f"the collection of job {job_id} was deleted before the job could "
                            "take its lease; index into the name again to create it anew")
    other = holder(current)
    if other is None:
        return acquire(session, collection_id, job_id, ttl_s)  # released meanwhile
    if other.alive(now):
        return other
    # Expired by the clock check above, or its process died on this host: take it over,
    # but only from exactly that holder (another racer may be doing the same).
    stolen = session.execute(update(C).where(
        C.id == collection_id, C.writer_job_id == other.job_id,
        C.writer_pid.is_(other.pid) if other.pid is None else C.writer_pid == other.pid,
    ).values(**values))
    session.commit()
    if stolen.rowcount == 1:  # type: ignore[attr-defined]
        # By name (its id meant nothing to whoever reads the log), read after the UPDATE.
        name = current.name if current is not None else f"#{collection_id}"
        logger.info("took over the lease of collection %r from dead %s", name,
                    other.describe(now))
        return None
    return acquire(session, collection_id, job_id, ttl_s)


def renew(session: Session, collection_id: int, job_id: int, ttl_s: float) -> bool:
    """Extend the lease if ``job_id`` still holds it; commits. False: it was lost."""
    now = db_now(session)
    C = md.Collection
    result = session.execute(update(C).where(C.id == collection_id, C.writer_job_id == job_id)
                             .values(writer_host=HOST, writer_pid=os.getpid(),
                                     writer_process=beat_mark(), heartbeat_at=now,
                                     lease_expires_at=now + dt.timedelta(seconds=ttl_s)))
    session.commit()
    return bool(result.rowcount == 1)  # type: ignore[attr-defined]


def release(session: Session, collection_id: int, job_id: int) -> None:
    """Give the lease up if ``job_id`` holds it; commits."""
    C = md.Collection
    session.execute(update(C).where(C.id == collection_id, C.writer_job_id == job_id).values(
        writer_job_id=None, writer_host=None, writer_pid=None, writer_process=None,
        heartbeat_at=None, lease_expires_at=None))
    session.commit()


class Heartbeat:
    """Renews a lease from a daemon thread every ``ttl / 4`` while a job works.

    ``lost`` turns true when a renewal finds the lease gone (another job took it over after
    this process stalled longer than the ttl); the job checks it between batches and, with
    ``holds``, again just before it writes one, and stops.

    Args:
        sessions: a session factory (the thread uses its own session).
        collection_id: the collection.
        job_id: the holder.
        ttl_s: the lease's length.
        extra: called after every renewal with a session (chunk tasks renew their claim too).
        name: the collection's name, for the log (its id meant nothing to whoever read it).
    """

    def __init__(self, sessions: sessionmaker[Session], collection_id: int, job_id: int,
                 ttl_s: float, extra: object | None = None, name: str | None = None) -> None:
        self.sessions = sessions
        self.collection_id = collection_id
        self.name = repr(name) if name is not None else f"#{collection_id}"
        self.job_id = job_id
        self.ttl_s = ttl_s
        self.extra = extra
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"facet-lease-{job_id}",
                                        daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def holds(self) -> bool:
        """Whether the job still holds the lease, read from the database now, not at the last
        beat: called just before a batch is written. A process stalled past the ttl (SIGSTOP, a
        frozen VM, a laptop's lid) resumes where it stopped, most often mid-encode, and wrote
        that batch, over the writer that had taken the collection over, before its beat ran
        again. A lease past its time that nobody took is still held (the next beat renews it);
        a database that cannot be read now leaves it to the beats. ``lost`` turns true where
        it is not held."""
        if self.lost:
            return False
        C = md.Collection
        try:
            with self.sessions() as session:
                writer = session.scalar(select(C.writer_job_id).where(C.id == self.collection_id))
        except Exception:
            logger.debug("reading the lease of job %d failed", self.job_id, exc_info=True)
            return True
        if writer != self.job_id:
            self._lose()
        return not self.lost

    def _lose(self) -> None:
        self.lost = True
        logger.warning("job %d lost the lease of collection %s", self.job_id, self.name)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(max(0.2, self.ttl_s / 4)):
            try:
                with self.sessions() as session:
                    if not renew(session, self.collection_id, self.job_id, self.ttl_s):
                        self._lose()
                        return
                    if callable(self.extra):
                        self.extra(session)
            except Exception as e:  # a database hiccup: try again at the next beat
                # One line (a 50-line traceback in the user's terminal mid-run); the traceback
                # at debug level.
                logger.warning("lease heartbeat of job %d failed (%s); trying again at the next "
                               "beat", self.job_id, str(e).splitlines()[0][:200] if str(e) else
                               type(e).__name__)
                logger.debug("lease heartbeat of job %d failed", self.job_id, exc_info=True)
