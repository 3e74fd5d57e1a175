"""Re-send chunk tasks that the broker lost.

kombu's Redis transport takes a message off the queue (``BRPOP``) and only then records it as
unacknowledged (``HSET unacked``). A worker killed between the two (``kill -9``, the OOM
killer, a lost host) takes the message with it: it is in neither place, so no visibility
timeout brings it back, and its job would wait for ever (``facet jobs``: "stalled"). The
window is short but not rare: it opens each time a worker has just finished a chunk and
fetches the next one, which is when a killed worker has most often just made progress.

The sweeper is a daemon thread in each worker's main process. Every ``interval`` seconds
one worker (a Redis lock) compares the chunks SQL says are waiting for a task (unfinished
chunks of stalled jobs: ``stalled_chunks``) with the chunk tasks the broker holds (queue
lists and the unacked hash). A chunk missing from the broker in two sweeps at least
``interval`` apart is re-sent; a chunk that was merely in flight between the two Redis
steps is back in the unacked hash long before then. A duplicate is harmless anyway: a
chunk that is already done is skipped (``run_chunk`` returns ``duplicate``).

A Redis that loses its data (``FLUSHALL``, a restart without AOF) loses every queued chunk
task the same way; the sweeper sends those again too, and logs one line per job, with the count,
naming both causes (it cannot tell them apart).

A planner task (``facet.index_job``) is lost the same ways, and its job waited `queued` for
ever; a worker on another database also drops one it sent back ``OTHER_DATABASE_RETRIES``
times. Each worker job keeps its planner task's payload (``IndexJob.plan``): a queued job that
no worker planned, whose task is in no queue and no worker holds in two sweeps, has it sent
again (a duplicate is harmless: a planner finds a plan made and goes on with it).

Only Redis brokers are swept (the transport with this window); others are left alone.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from app.remote import INDEX_CHUNK_TASK, INDEX_JOB_TASK

logger = logging.getLogger(__name__)

# Each metadata database's workers sweep under keys of their own (``database_tag``): one lock
# and one suspects hash for every database on a broker let a worker on another database (a
# wrong FACET_DATA_DIR, a second deployment on the same Redis) win the lock at every sweep,
# sweep only its own database and clear the suspects, so the right database's lost tasks were
# never sent again while it ran (a planner task it had dropped after its send-backs included).
LOCK_KEY = "facet:orphan-sweep"
SUSPECTS_KEY = "facet:orphan-suspects"


def database_tag(url: str) -> str:
    """A short, stable tag of the metadata database at ``url``, the same for every worker on
    it: a SQLite file by its resolved path, any other by backend, user, host, port and name
    (never the password). Workers reaching one database under two host names get two tags:
    both sweep it, and a task sent twice is harmless (a chunk done is skipped)."""
    import hashlib
    import os

    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except Exception:  # (the settings check refuses such a URL before a worker starts)
        return hashlib.sha256(url.encode()).hexdigest()[:12]
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        where = os.path.realpath(parsed.database) if parsed.database else ":memory:"
    else:
        def given(name: str) -> str:
            value = parsed.query.get(name)
            return ",".join(value) if isinstance(value, tuple) else str(value or "")

        # A server named in the query (libpq's host=/socket/folder&port=5433, a service file's
        # entry) is as much the database as one in the netloc: two clusters reached by socket
        # had one tag, so their workers shared the sweep again. The default port and the
        # host's case do not make another database.
        host = (parsed.host or given("host")).lower()
        port = str(parsed.port or given("port") or _DEFAULT_PORTS.get(backend, ""))
        # So is a database or user named there (libpq's dbname=, user=): two databases of
        # one socket had one tag.
        where = (f"{parsed.username or given('user')}@{host}:{port}/"
                 f"{parsed.database or given('dbname')}?service={given('service')}")
    return hashlib.sha256(f"{backend}|{where}".encode()).hexdigest()[:12]


_DEFAULT_PORTS = {"postgresql": "5432", "mysql": "3306", "mariadb": "3306"}
UNACKED_KEY = "unacked"  # kombu's default unacked_key
PRIORITY_SEP = "\x06\x16"  # kombu's separator of a queue's priority lists

Chunk = tuple[int, int]


def _task_of(raw: bytes | str) -> tuple[str, list[Any]] | None:
    """``(task name, args)`` of a stored message, else None.

    ``raw`` is a queue list entry (the message) or an unacked hash value (``[message,
    exchange, routing key]``).
    """
    try:
        message = json.loads(raw)
        if isinstance(message, list):
            message = message[0]
        task = (message.get("headers") or {}).get("task")
        body = message["body"]
        if (message.get("properties") or {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]  # task protocol 2: [args, kwargs, embed]
        return (task, args) if isinstance(task, str) and isinstance(args, list) else None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None


def chunk_of(raw: bytes | str) -> Chunk | None:
    """``(job id, number)`` of a stored ``facet.index_chunk`` message, else None."""
    found = _task_of(raw)
    try:
        return (int(found[1][0]), int(found[1][1])) if found and found[0] == INDEX_CHUNK_TASK \
            else None
    except (ValueError, TypeError, IndexError):
        return None


def planned_job_of(raw: bytes | str) -> int | None:
    """The job id of a stored ``facet.index_job`` (planner) message, else None."""
    found = _task_of(raw)
    try:
        return int(found[1][0]["job_id"]) if found and found[0] == INDEX_JOB_TASK else None
    except (ValueError, TypeError, IndexError, KeyError):
        return None


def _stored(client: Any, queues: Iterable[str], page: int) -> Iterator[bytes | str]:
    """Every message the Redis broker holds for ``queues``: waiting, or unacknowledged."""
    keys: list[Any] = []
    for queue in queues:
        keys.append(queue)
        keys.extend(client.scan_iter(match=f"{queue}{PRIORITY_SEP}*"))
    for key in keys:
        start = 0
        while True:
            items = client.lrange(key, start, start + page - 1)
            yield from items
            if len(items) < page:
                break
            start += page
    yield from client.hvals(UNACKED_KEY)


def broker_tasks(client: Any, queues: Iterable[str] = ("index",),
                 page: int = 1000) -> tuple[set[Chunk], set[int]]:
    """The chunk tasks and the jobs of the planner tasks the Redis broker holds: waiting in a
    queue or unacknowledged."""
    chunks: set[Chunk] = set()
    planners: set[int] = set()
    for raw in _stored(client, queues, page):
        chunk = chunk_of(raw)
        if chunk is not None:
            chunks.add(chunk)
            continue
        job = planned_job_of(raw)
        if job is not None:
            planners.add(job)
    return chunks, planners


def broker_chunks(client: Any, queues: Iterable[str] = ("index",), page: int = 1000) -> set[Chunk]:
    """Every chunk task the Redis broker holds: waiting in a queue or unacknowledged."""
    return broker_tasks(client, queues, page)[0]


def number_ranges(numbers: Iterable[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``"0-2, 5, 7-8"``."""
    out: list[str] = []
    ordered = sorted(set(numbers))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ", ".join(out)


# The ways a chunk task is lost: nothing tells the sweeper which one it was.
_LOST_CAUSES = ("lost with a worker killed as it took {it} off the queue, or with the broker's "
                "data (a Redis flushed, or restarted without AOF persistence), or dropped by a "
                "worker on another database")


def lost_plan_message(job_id: int) -> str:
    """The sweeper's log line for the planner task of job ``job_id`` it sends again."""
    return (f"job {job_id}: its planner task is in no queue and no worker holds it: "
            f"{_LOST_CAUSES.format(it='it')}; sent again")


def lost_message(job_id: int, numbers: list[int]) -> str:
    """The sweeper's one log line for the chunks of job ``job_id`` it sends again."""
    if len(numbers) == 1:
        return (f"chunk {numbers[0]} of job {job_id}: its task is in no queue and no worker "
                f"holds it: {_LOST_CAUSES.format(it='it')}; sent again")
    return (f"{len(numbers)} chunks of job {job_id} ({number_ranges(numbers)}): their tasks are "
            f"in no queue and no worker holds them: {_LOST_CAUSES.format(it='them')}; sent "
            "again")


# Sweeps failed in a row before a WARNING says so (one or two: a broker or database
# restarting, which the next turn outlasts), then one every this many more.
FAILURES_WARNED = 3
FAILURES_REWARNED = 60


class OrphanSweeper:
    """Finds chunks whose task is gone and re-sends them (see the module docstring).

    Args:
        client: a redis-py client of the broker's database.
        sessions: a session factory of the metadata database.
        send: sends the task of ``(job id, number)``.
        interval: seconds between sweeps; also the least time a chunk must stay missing.
        name: this worker's name (held in the lock, for whoever inspects Redis).
        database: the metadata database's ``database_tag``: the lock and the suspects are
            its own, so workers on other databases sharing the broker neither hold this
            database's sweep nor clear its suspects ("": the untagged keys).
    """

    def __init__(self, client: Any, sessions: Any, send: Callable[[int, int], None],
                 interval: float, name: str = "worker",
                 send_plan: Callable[[int, dict[str, Any]], None] | None = None,
                 database: str = "") -> None:
        self.lock_key = f"{LOCK_KEY}:{database}" if database else LOCK_KEY
        self.suspects_key = f"{SUSPECTS_KEY}:{database}" if database else SUSPECTS_KEY
        self.client = client
        self.sessions = sessions
        self.send = send
        self.send_plan = send_plan
        self.interval = interval
        self.name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failures = 0  # turns failed in a row (``turn``)

    def sweep(self, now: float | None = None) -> list[Chunk]:
        """One sweep; the chunks re-sent (and the planner tasks, with ``send_plan``)."""
        from app.services.distributed import stalled_chunks, unplanned_jobs

        now = time.time() if now is None else now
        waiting = stalled_chunks(self.sessions)
        plans = unplanned_jobs(self.sessions) if self.send_plan is not None else {}
        if not waiting and not plans:
            self.client.delete(self.suspects_key)
            return []
        present, planners = broker_tasks(self.client)
        missing = [f"{job_id}:{number}" for job_id, number in waiting
                   if (job_id, number) not in present]
        missing += [f"plan:{job_id}" for job_id in plans if job_id not in planners]
        seen = {k.decode() if isinstance(k, bytes) else k: float(v)
                for k, v in self.client.hgetall(self.suspects_key).items()}
        due, keep = [], {}
        for key in missing:
            first = seen.get(key, now)
            if now - first >= self.interval:
                due.append(key)
            else:
                keep[key] = first
        pipe = self.client.pipeline()
        pipe.delete(self.suspects_key)
        if keep:
            pipe.hset(self.suspects_key, mapping=keep)
        pipe.execute()
        resend: list[Chunk] = []
        by_job: dict[int, list[int]] = {}
        for key in due:
            if key.startswith("plan:"):
                job_id = int(key[len("plan:"):])
                logger.warning("%s", lost_plan_message(job_id))
                assert self.send_plan is not None
                self.send_plan(job_id, plans[job_id])
                continue
            job_id, number = map(int, key.split(":"))
            resend.append((job_id, number))
            by_job.setdefault(job_id, []).append(number)
        for job_id, numbers in by_job.items():
            # One line a job: a Redis that lost its data (FLUSHALL, a restart without AOF)
            # loses every queued chunk of it at once, which was one line each, 56 for one job,
            # each blaming a killed worker where none was.
            logger.warning("%s", lost_message(job_id, numbers))
            for number in numbers:
                self.send(job_id, number)
        return resend

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.turn()

    def turn(self) -> None:
        """One turn of the thread: a sweep where this worker wins the lock. A failure (the
        broker or database down: the next turn retries) is a DEBUG line, and a WARNING once
        ``FAILURES_WARNED`` turns in a row failed (then every ``FAILURES_REWARNED``): all were
        DEBUG, so sweeps failing for good (a database error, a bug) left chunks lost with a
        killed worker unsent with nothing said (the logs review of the seventh session of
        2026-12-06). The first success after that warning is said too."""
        try:
            if self.client.set(self.lock_key, self.name, nx=True,
                               px=max(1, int(self.interval * 1000 * 0.9))):
                self.sweep()
        except Exception as e:
            from indexer.errors import mask_secrets

            self._failures += 1
            said = mask_secrets(" ".join(f"{type(e).__name__}: {e}".split()))
            if self._failures == FAILURES_WARNED or (self._failures > FAILURES_WARNED and (
                    self._failures - FAILURES_WARNED) % FAILURES_REWARNED == 0):
                logger.warning("orphan sweeps have failed %d times in a row (last: %s): a chunk "
                               "or planner task lost with a killed worker or a flushed broker "
                               "is not sent again until one succeeds", self._failures, said)
            else:
                logger.debug("orphan sweep skipped: %s", said)
            return
        if self._failures >= FAILURES_WARNED:
            logger.info("orphan sweeps work again after %d failed in a row", self._failures)
        self._failures = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="facet-orphan-sweep", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def start_sweeper(settings: Any, name: str) -> OrphanSweeper | None:
    """The sweeper of a worker's main process, started; None for a non-Redis broker."""
    url = settings.broker_url or ""
    if not url.startswith(("redis://", "rediss://", "unix://")):
        logger.info("no lost-task sweeper: the broker is not Redis")
        return None
    import redis
    from sqlalchemy.orm import sessionmaker

    from indexer.metadata import make_engine

    # No pooled connections: the pool's children are forked from this process.
    engine = make_engine(settings.resolved_database_url, migrate=False, pooled=False)
    client = redis.Redis.from_url(url, socket_timeout=max(settings.broker_timeout_s, 10.0))

    def send(job_id: int, number: int) -> None:
        from worker.tasks import index_chunk

        index_chunk.si(job_id, number).apply_async(queue="index")

    def send_plan(job_id: int, payload: dict[str, Any]) -> None:
        from worker.tasks import index_job

        index_job.apply_async(args=[payload], queue="index")

    sweeper = OrphanSweeper(client, sessionmaker(engine, expire_on_commit=False), send,
                            interval=max(1.0, min(60.0, settings.lease_ttl_s)), name=name,
                            send_plan=send_plan,
                            database=database_tag(settings.resolved_database_url))
    sweeper.start()
    return sweeper
