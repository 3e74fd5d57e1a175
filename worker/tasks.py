"""Celery tasks: each parses its JSON arguments, calls one service method and reports.

* ``facet.index_job`` (queue ``index``): plan a prepared job into chunk rows, then send one
  ``facet.index_chunk`` per chunk as a group. A job whose collection is written by another
  live job waits (retried until the lease is free).
* ``facet.index_chunk`` (queue ``index``): index one chunk; the last one completes the job.
  Transient store/database errors are retried with exponential backoff (and jitter).
* A retry (``self.retry``, through ``_retry``) publishes the task again: with the broker down
  (a Redis restart) the publish is tried again for half the visibility timeout (at most
  ``MAX_PUBLISH_RETRY_S``; the clients' policy gives up after ~1 s, to fail fast), and if it
  still fails the message being run is handed back to the broker (rejected with requeue: put
  back at the head of its queue once the worker has reconnected; where Redis cannot be told
  even that, it stays unacknowledged and the visibility timeout brings it back), with one
  WARNING line. Celery rejected it without requeue, and the task was lost until the sweeper
  found its job stalled.
* A planner or chunk task of a job that is not in this worker's database and whose id is above
  any this database ever handed out (a worker whose FACET_DATA_DIR / FACET_DATABASE_URL differ from the
  server's) is sent back to the broker, a few seconds later, for a worker on the right database
  (at most ``OTHER_DATABASE_RETRIES`` times), with a WARNING naming the database.
* Both check the data folder's disk first (``FACET_MIN_FREE_MB``, ``IndexService.check_room``,
  as an in-process run does before each batch): on a disk with too little room the job fails
  before anything more is written, resumable, with the in-process run's message.
* ``facet.encode`` (queue ``query``, or ``index`` for bulk) and ``facet.generate_answers``:
  the ``QueryEncoder`` seam run on the worker's models; results as base64 float32.

Progress and outcomes are in the SQL job table, not in task results (which expire).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict
from typing import Any

from celery.exceptions import Reject

from app.errors import FacetError, ModelError, UnavailableError, as_domain_error
from app.remote import (
    ANSWERS_TASK,
    ENCODE_TASK,
    INDEX_CHUNK_TASK,
    INDEX_JOB_TASK,
    encode_result,
    one_line,
)
from app.services import leases
from app.services.distributed import (
    ChunkBusy,
    ChunkOutcome,
    JobGone,
    WriterBusy,
    is_transient,
    raised_from,
)
from app.services.indexing import IndexService, PreparedJob
from worker.app import celery_app, chunk_service, worker_facet

logger = logging.getLogger(__name__)

MAX_TRANSIENT_RETRIES = 8
# Tries more, 30-60 s apart (~15-30 minutes), of a chunk whose failure cannot be recorded either
# (the database still out of reach after those 8).
UNRECORDED_RETRIES = 30

# A chunk task of another database's job (see the module docstring) is sent back this many
# times, this many seconds later each, before it is dropped (the sweeper of the server's
# workers re-sends it once its job is stalled).
OTHER_DATABASE_RETRIES = 20
OTHER_DATABASE_COUNTDOWN_S = 3.0

# How long a worker goes on trying to publish a retry to a broker that is down: half the
# visibility timeout (the message being run is not re-delivered meanwhile), at most this long
# (its pool process does nothing else meanwhile). Each try is itself bounded by kombu (about
# FACET_BROKER_TIMEOUT_S to connect, whatever the retry policy says).
MAX_PUBLISH_RETRY_S = 300.0
# kombu's policy for each try (the clients' ``task_publish_retry_policy`` gives up in ~1 s).
_PUBLISH_POLICY = {"max_retries": 3, "interval_start": 0, "interval_step": 0.5,
                   "interval_max": 1.0}


class _BackToBroker(Reject):
    """The task's retry could not be published: its message goes back to the broker
    (``requeue=True``). Logged by ``_retry`` in one line; Celery's own line (with the
    traceback of the failed publish) is filtered out (``_QuietBackToBroker``)."""

    def __init__(self, reason: Any = None, requeue: bool = True) -> None:
        super().__init__(reason, requeue)


class _QuietBackToBroker(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, _BackToBroker)


logging.getLogger("celery.app.trace").addFilter(_QuietBackToBroker())


def _publish_window(visibility_timeout_s: float) -> float:
    """Seconds a worker goes on trying to publish a retry (see ``MAX_PUBLISH_RETRY_S``)."""
    return max(2.0, min(visibility_timeout_s / 2, MAX_PUBLISH_RETRY_S))


def _sent_back(task: Any, what: str, tries: dict[str, int]) -> Reject:
    """Another database's task sent back to the broker for a worker on that database, in
    ``OTHER_DATABASE_COUNTDOWN_S``: this pool process waits it out holding the message, then
    publishes the copy due at once (``_retry``). Published with a countdown (an ETA), the copy
    went straight back to this worker, which takes ETA messages while idle (Celery does not
    count them against the prefetch), try after try: the right worker beside it never got the
    planner task, and the job stayed `queued` for ever."""
    time.sleep(OTHER_DATABASE_COUNTDOWN_S)
    return _retry(task, what, 0, tries)


def _retry(task: Any, what: str, countdown: float, tries: dict[str, int]) -> Reject:
    """``task.retry(countdown=...)``, its publish tried again for ``_publish_window`` seconds
    while the broker is down (Celery gave up after the clients' ~1 s policy and rejected the
    message without requeue: the task was lost). Still down after that: one WARNING, and the
    message handed back to the broker (raised: ``_BackToBroker``, a reject with requeue).
    ``tries``: the task's counts of retries by cause, sent on with it (Celery's own
    ``request.retries`` counts every retry: a planner that had waited 8 times behind another
    writer gave up on its first transient error, "gave up after 8 retries")."""
    visibility = float((celery_app.conf.broker_transport_options or {}).get(
        "visibility_timeout", 3600))
    deadline = time.monotonic() + _publish_window(visibility)
    while True:
        try:
            return task.retry(countdown=countdown, retry_policy=_PUBLISH_POLICY, kwargs=tries)
        except Reject as e:
            if isinstance(e, _BackToBroker) or e.requeue:
                raise
            failed = e
        if time.monotonic() >= deadline:
            break
        time.sleep(1.0)
    from app.settings import mask_passwords, masked_url

    reason = one_line(mask_passwords(str(failed.reason)))
    logger.warning("%s: could not send its retry to the broker at %s for %.0fs (%s); its "
                   "message goes back to the broker, to be delivered again once the worker "
                   "reconnects (or after FACET_VISIBILITY_TIMEOUT_S=%.0fs)", what,
                   masked_url(str(celery_app.conf.broker_url or "")), _publish_window(visibility),
                   reason, visibility)
    raise _BackToBroker(f"{what}: the broker is down ({reason})") from None


def _one_line(error: BaseException) -> str:
    """A database driver's own words for ``error`` (SQLAlchemy's text adds the statement, its
    parameters and a link, three lines a warning), else the error as it reads."""
    orig = getattr(error, "orig", None)
    return " ".join(str(orig if orig is not None else error).split())


def _backoff(retries: int) -> float:
    import random

    return min(60.0, 2.0 ** retries) * (0.5 + random.random() / 2)


def _stopped_for_room(service: Any, job_id: int, prepared: PreparedJob | None = None) -> str | None:
    """Fail job ``job_id`` where the data folder's disk has too little room to write on
    (``IndexService.check_room``: ``FACET_MIN_FREE_MB``), with the message an in-process run
    records (resumable: what was indexed is kept); its lease and store shard are let go. The
    message, or None where there is room, or where the task's own path says what becomes of
    the job (gone, cancelled, finished, or another database's job of that id).

    A chunk written past a full disk killed the worker's pool process (the embedded store's
    files are memory-mapped: a bus error) or failed part-way as SQLite's "disk I/O error"."""
    index = getattr(service, "index", None)
    if index is None:
        return None  # (a stand-in service of a test: nothing is written)
    try:
        # The planner's check comes before the job has written anything ("refused before
        # writing anything", as an in-process start says); a chunk's, after others may have.
        index.check_room(started=prepared is None)
        return None
    except UnavailableError as e:
        error = e
    from indexer import metadata as md

    with service.sessions() as session:
        job = md.get_job(session, job_id)
        if job is None or job.cancel_requested or job.state not in md.UNENDED_STATES:
            return None
        if prepared is not None and (job.collection.name, job.source) != (prepared.collection,
                                                                           prepared.source):
            return None
        message = index.job_failure_message(job, error)  # as an in-process run says it
        index.fail_held(session, job, message)
    logger.warning("job %d failed: %s", job_id, message)
    return message


@celery_app.task(name=INDEX_JOB_TASK, bind=True, max_retries=None)
def index_job(self: Any, payload: dict[str, Any], transient: int = 0, gone: int = 0) -> dict[str, Any]:
    """Plan a prepared job (``PreparedJob.to_dict()``) and fan its chunks out; ``transient``,
    ``gone``: the retries so far on a transient error and as another database's job (not those
    waiting for another writer)."""
    prepared = PreparedJob.from_dict(payload)
    service = chunk_service()
    # (Planning makes the store collection: an embedded store maps its first files at once.)
    stopped = _stopped_for_room(service, prepared.job_id, prepared)
    if stopped is not None:
        return {"job_id": prepared.job_id, "state": "failed", "message": stopped}
    try:
        numbers = service.plan(prepared)
    except JobGone as e:
        if e.elsewhere and gone < OTHER_DATABASE_RETRIES:  # as a chunk task of such a job
            logger.log(logging.WARNING if gone == 0 else logging.INFO,  # (as a chunk's, below)
                       "planning: %s (in %.0fs, try %d of %d)", e, OTHER_DATABASE_COUNTDOWN_S,
                       gone + 1, OTHER_DATABASE_RETRIES)
            raise _sent_back(self, f"job {prepared.job_id}",
                             {"transient": transient, "gone": gone + 1}) from e
        # A warning: a worker on another database than the server's drops every job this way.
        logger.warning("%s%s", e, f" (sent back {gone} times: no worker on that database took "
                                  "it; dropped: the sweeper of that database's workers sends it "
                                  "again)" if e.elsewhere else "")
        return {"job_id": prepared.job_id, "state": "gone"}
    except WriterBusy as e:
        logger.info("job %d: %s; retrying in %.0fs", prepared.job_id, e, e.retry_in_s)
        raise _retry(self, f"job {prepared.job_id}", e.retry_in_s,
                     {"transient": transient, "gone": gone}) from e
    except Exception as e:
        if is_transient(e):
            if transient < MAX_TRANSIENT_RETRIES:
                countdown = _backoff(transient)
                logger.warning("job %d: %s; planning again in %.1fs", prepared.job_id, e, countdown)
                raise _retry(self, f"job {prepared.job_id}", countdown,
                             {"transient": transient + 1, "gone": gone}) from e
            service.give_up(prepared.job_id, f"gave up after {MAX_TRANSIENT_RETRIES} retries: "
                                             f"{type(e).__name__}: {e}")
            return {"job_id": prepared.job_id, "state": "failed", "message": str(e)}
        if isinstance(e, FacetError):  # recorded on the job row by plan()
            logger.warning("job %d failed: %s", prepared.job_id, e)
            return {"job_id": prepared.job_id, "state": "failed", "message": str(e)}
        IndexService(service.ctx).fail(prepared.job_id, f"{type(e).__name__}: {e}")
        raise
    if not numbers:
        # Nothing to send: the job was cancelled (or had ended) before it was planned, or had
        # nothing new to index and is completed; its result said "planned" either way.
        return {"job_id": prepared.job_id, "state": service.job_state(prepared.job_id) or "gone",
                "chunks": 0}
    from celery import group

    group(index_chunk.si(prepared.job_id, n) for n in numbers).apply_async(queue="index")
    return {"job_id": prepared.job_id, "state": "planned", "chunks": len(numbers)}


@celery_app.task(name=INDEX_CHUNK_TASK, bind=True, max_retries=None)
def index_chunk(self: Any, job_id: int, number: int, transient: int = 0, gone: int = 0) -> dict[str, Any]:
    """Index chunk ``number`` of job ``job_id``; ``transient``, ``gone``: its retries so far on
    a transient error and as another database's job (not those waiting for a claim)."""
    service = chunk_service()
    # Before the chunk is claimed: it stays unwritten (`queued`), and the job's next run (the
    # message says the command) indexes its documents.
    stopped = _stopped_for_room(service, int(job_id))
    if stopped is not None:
        return asdict(ChunkOutcome(int(job_id), int(number), "skipped", message=stopped))
    started = time.monotonic()
    try:
        outcome = asdict(service.run_chunk(int(job_id), int(number)))
        took = time.monotonic() - started
        limit = service.settings.visibility_timeout_s
        if took > limit / 2:
            logger.warning("chunk %d of job %d took %.0fs, over half the visibility timeout "
                           "(%ds): a longer chunk would be re-delivered while it runs; raise "
                           "FACET_VISIBILITY_TIMEOUT_S or lower FACET_WORKER_CHUNK_DOCS",
                           number, job_id, took, limit)
        return outcome
    except ChunkBusy as e:
        raise _retry(self, f"chunk {number} of job {job_id}", e.retry_in_s,
                     {"transient": transient, "gone": gone}) from e
    except JobGone as e:  # another database's job, certainly (see the module docstring)
        if gone >= OTHER_DATABASE_RETRIES:
            logger.warning("chunk %d: %s: sent back %d times and no worker on that database "
                           "took it; dropping it (the sweeper of the server's workers sends it "
                           "again once the job is stalled)", number, str(e).rsplit("; ", 1)[0],
                           OTHER_DATABASE_RETRIES)
            return asdict(ChunkOutcome(int(job_id), int(number), "gone", message=str(e)))
        # Said at WARNING once a task (its first try), then at INFO: 20 warnings of ~480
        # characters a task, 3 s apart, filled a worker's log (the worker exploration of the
        # third session of 2026-12-07); its drop is a WARNING again.
        logger.log(logging.WARNING if gone == 0 else logging.INFO, "chunk %d: %s (in %.0fs, "
                   "try %d of %d)", number, e, OTHER_DATABASE_COUNTDOWN_S, gone + 1,
                   OTHER_DATABASE_RETRIES)
        raise _sent_back(self, f"chunk {number} of job {job_id}",
                         {"transient": transient, "gone": gone + 1}) from e
    except Exception as e:
        if not is_transient(e):
            raise
        try:
            service.release_claim(int(job_id), int(number))
        except Exception as unreleased:
            # The same outage (a database stopped): its error escaped before the retry, and
            # the task failed and was dropped (~60 chunks of one job, each a 250-line
            # traceback, re-sent minutes later by the sweeper). The claim lapses by itself.
            if not is_transient(unreleased):
                raise
        # The domain's one line ("the metadata database stayed locked..."), not SQLAlchemy's
        # error with its statement and every parameter (the driver's own words where there is
        # no domain line: "attempt to write a readonly database").
        said = as_domain_error(e) or _one_line(e)
        countdown = _backoff(transient)
        if transient >= MAX_TRANSIENT_RETRIES:
            try:
                service.fail_chunk(int(job_id), int(number),
                                   f"gave up after {MAX_TRANSIENT_RETRIES} retries: {said}")
            except Exception as unrecorded:
                if not is_transient(unrecorded):
                    raise
                # The database still out of reach (an outage longer than the retries, ~2
                # minutes): the failure cannot be written either, and its error escaped as a
                # 260-line traceback, the task dropped and re-sent minutes later by the
                # sweeper, which blamed a killed worker. Tried again at the longest delay, for
                # a bounded time: an error that lasts (a database this worker may not write,
                # a schema it does not know) reads as transient too, and looped for good.
                if transient >= MAX_TRANSIENT_RETRIES + UNRECORDED_RETRIES:
                    logger.error("chunk %d of job %d: %s; still failing after %d retries, and its "
                                 "failure cannot be recorded either: left to the sweeper, which "
                                 "sends it again once the job is stalled", number, job_id, said,
                                 transient)
                    return asdict(ChunkOutcome(int(job_id), int(number), "gone",
                                               message=f"its failure could not be recorded: {said}"))
                logger.warning("chunk %d of job %d: %s; still failing after %d retries, and its "
                               "failure cannot be recorded either: retry in %.1fs", number,
                               job_id, said, transient, countdown)
                raise _retry(self, f"chunk {number} of job {job_id}", countdown,
                             {"transient": transient + 1, "gone": gone}) from e
            raise
        # Another worker writing the collection (the embedded store's one writer) is the usual
        # wait of a second worker, not a problem: INFO (a WARNING a chunk, 22 in one job).
        level = logging.INFO if _another_worker_writes(e) else logging.WARNING
        logger.log(level, "chunk %d of job %d: %s; retry in %.1fs", number, job_id, said, countdown)
        raise _retry(self, f"chunk {number} of job {job_id}", countdown,
                     {"transient": transient + 1, "gone": gone}) from e


def _another_worker_writes(error: BaseException) -> bool:
    """Whether ``error`` (or one it was raised from) is the embedded store's collection held
    by another `facet worker` process."""
    from indexer.errors import StoreBusyError
    from indexer.store import held_by_worker

    busy = next((seen for seen in raised_from(error) if isinstance(seen, StoreBusyError)), None)
    return busy is not None and held_by_worker(busy.holder)


def _out_of_memory(e: MemoryError, what: str, spec: str) -> FacetError:
    """A model's MemoryError in a task, as the model's error: raised out of the task, Celery
    ends the whole worker ("Unrecoverable error"), the caller read "the worker failed:
    MemoryError: " and later queries found no worker (the verification round of the sixth
    session of 2026-12-02). What it held is freed as the error unwinds."""
    said = f": {e}" if str(e) else ""
    return ModelError(f"{what} with {spec!r} ran out of memory on worker {leases.HOST}:{os.getpid()} "
                      f"(MemoryError{said}); send fewer or shorter texts at a time")


def _error(e: FacetError) -> dict[str, Any]:
    # (which worker: the server says it where the error is the worker's, ``worker_error``; a
    # wait an outage asks for, so the server's 503 has its Retry-After)
    said: dict[str, Any] = {"type": type(e).__name__, "message": str(e),
                            "worker": f"{leases.HOST}:{os.getpid()}"}
    if isinstance(e, UnavailableError) and e.retry_after_s is not None:
        said["retry_after_s"] = e.retry_after_s
    return {"error": said}


@celery_app.task(name=ENCODE_TASK, ignore_result=False, acks_late=False)
def encode(texts: list[str], embedder: str, role: str, instruction: str | None) -> dict[str, Any]:
    """Encode texts with this worker's model (the ``QueryEncoder`` seam). The result names the
    model's identity too, so the caller can tell vectors of another version of the embedder
    from those its collection holds."""
    facet = worker_facet()
    try:
        vectors = facet.encoder.encode(texts, embedder=embedder, role=role, instruction=instruction)
    except FacetError as e:
        return _error(e)
    except MemoryError as e:
        return _error(_out_of_memory(e, "encoding", embedder))
    result = encode_result(vectors)
    model = facet.embedder_cache.peek(embedder)
    if model is not None:
        result["identity"] = facet.embedder_cache.identity(model)
    return result


@celery_app.task(name=ANSWERS_TASK, ignore_result=False)
def generate_answers(texts: list[str], explainer: str, instruction: str | None,
                     max_new_tokens: int | None) -> dict[str, Any]:
    """InBedder answers (cluster names) with this worker's model."""
    try:
        answers = worker_facet().encoder.generate_answers(
            texts, explainer=explainer, instruction=instruction, max_new_tokens=max_new_tokens)
    except FacetError as e:
        return _error(e)
    except MemoryError as e:
        return _error(_out_of_memory(e, "answering", explainer))
    return {"answers": answers}
