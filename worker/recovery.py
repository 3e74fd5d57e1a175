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

Only Redis brokers are swept (the transport with this window); others are left alone.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from app.remote import INDEX_CHUNK_TASK

logger = logging.getLogger(__name__)

LOCK_KEY = "facet:orphan-sweep"
SUSPECTS_KEY = "facet:orphan-suspects"
UNACKED_KEY = "unacked"  # kombu's default unacked_key
PRIORITY_SEP = "\x06\x16"  # kombu's separator of a queue's priority lists

Chunk = tuple[int, int]


def chunk_of(raw: bytes | str) -> Chunk | None:
    """``(job id, number)`` of a stored ``facet.index_chunk`` message, else None.

    ``raw`` is a queue list entry (the message) or an unacked hash value (``[message,
    exchange, routing key]``).
    """
    try:
        message = json.loads(raw)
        if isinstance(message, list):
            message = message[0]
        if (message.get("headers") or {}).get("task") != INDEX_CHUNK_TASK:
            return None
        body = message["body"]
        if (message.get("properties") or {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]  # task protocol 2: [args, kwargs, embed]
        return int(args[0]), int(args[1])
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None


def broker_chunks(client: Any, queues: Iterable[str] = ("index",), page: int = 1000) -> set[Chunk]:
    """Every chunk task the Redis broker holds: waiting in a queue or unacknowledged."""
    found: set[Chunk] = set()
    keys: list[Any] = []
    for queue in queues:
        keys.append(queue)
        keys.extend(client.scan_iter(match=f"{queue}{PRIORITY_SEP}*"))
    for key in keys:
        start = 0
        while True:
            items = client.lrange(key, start, start + page - 1)
            found.update(c for c in map(chunk_of, items) if c is not None)
            if len(items) < page:
                break
            start += page
    for raw in client.hvals(UNACKED_KEY):
        chunk = chunk_of(raw)
        if chunk is not None:
            found.add(chunk)
    return found


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


# Both ways a chunk task is lost: nothing tells the sweeper which one it was.
_LOST_CAUSES = ("lost with a worker killed as it took {it} off the queue, or with the broker's "
                "data (a Redis flushed, or restarted without AOF persistence)")


def lost_message(job_id: int, numbers: list[int]) -> str:
    """The sweeper's one log line for the chunks of job ``job_id`` it sends again."""
    if len(numbers) == 1:
        return (f"chunk {numbers[0]} of job {job_id}: its task is in no queue and no worker "
                f"holds it: {_LOST_CAUSES.format(it='it')}; sent again")
    return (f"{len(numbers)} chunks of job {job_id} ({number_ranges(numbers)}): their tasks are "
            f"in no queue and no worker holds them: {_LOST_CAUSES.format(it='them')}; sent "
            "again")


class OrphanSweeper:
    """Finds chunks whose task is gone and re-sends them (see the module docstring).

    Args:
        client: a redis-py client of the broker's database.
        sessions: a session factory of the metadata database.
        send: sends the task of ``(job id, number)``.
        interval: seconds between sweeps; also the least time a chunk must stay missing.
        name: this worker's name (held in the lock, for whoever inspects Redis).
    """

    def __init__(self, client: Any, sessions: Any, send: Callable[[int, int], None],
                 interval: float, name: str = "worker") -> None:
        self.client = client
        self.sessions = sessions
        self.send = send
        self.interval = interval
        self.name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sweep(self, now: float | None = None) -> list[Chunk]:
        """One sweep; the chunks re-sent."""
        from app.services.distributed import stalled_chunks

        now = time.time() if now is None else now
        waiting = stalled_chunks(self.sessions)
        if not waiting:
            self.client.delete(SUSPECTS_KEY)
            return []
        present = broker_chunks(self.client)
        missing = [c for c in waiting if c not in present]
        seen = {k.decode() if isinstance(k, bytes) else k: float(v)
                for k, v in self.client.hgetall(SUSPECTS_KEY).items()}
        resend, keep = [], {}
        for job_id, number in missing:
            key = f"{job_id}:{number}"
            first = seen.get(key, now)
            if now - first >= self.interval:
                resend.append((job_id, number))
            else:
                keep[key] = first
        pipe = self.client.pipeline()
        pipe.delete(SUSPECTS_KEY)
        if keep:
            pipe.hset(SUSPECTS_KEY, mapping=keep)
        pipe.execute()
        by_job: dict[int, list[int]] = {}
        for job_id, number in resend:
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
            try:
                if self.client.set(LOCK_KEY, self.name, nx=True,
                                   px=max(1, int(self.interval * 1000 * 0.9))):
                    self.sweep()
            except Exception as e:  # the broker or database is down: the next sweep retries
                logger.debug("orphan sweep skipped: %s: %s", type(e).__name__, e)

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

    sweeper = OrphanSweeper(client, sessionmaker(engine, expire_on_commit=False), send,
                            interval=max(1.0, min(60.0, settings.lease_ttl_s)), name=name)
    sweeper.start()
    return sweeper
