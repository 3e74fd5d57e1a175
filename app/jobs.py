"""Where background index jobs run: the ``JobRunner`` seam.

The facade prepares a job in the caller's thread (validation, collection, a ``queued`` job
row, so a request gets its error or its job id at once) and hands the ``PreparedJob`` to a
runner:

* ``InlineJobRunner`` runs it at once in the calling thread (tests, scripts);
* ``ThreadJobRunner`` runs jobs one after another on one background thread (embedded mode:
  one process owns the store, so one writer is enough);
* a Celery runner (the worker issue) sends the job, which is JSON-safe, to the ``index``
  queue.

The job's progress, result and errors are in its row (``Facet.job``), whatever runs it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from app.services.indexing import PreparedJob
from app.text import plural, printable

logger = logging.getLogger(__name__)

RunJob = Callable[[PreparedJob], object]


@runtime_checkable
class JobRunner(Protocol):
    """Runs prepared index jobs somewhere."""

    def submit(self, job: PreparedJob) -> None:
        """Start ``job`` (now or later); returns without waiting for it to finish."""
        ...

    def close(self) -> None:
        """Stop taking jobs; queued ones stay ``queued`` and are marked interrupted later."""
        ...


def _cause(error: Exception) -> str | None:
    """What an expected failure of the machine (not of the code) says, in one line: the
    metadata database refusing a write (a read-only mount: "attempt to write a readonly
    database"), a disk full, a folder gone; None for anything else."""
    from sqlalchemy.exc import OperationalError

    if isinstance(error, OperationalError):  # its text ends in the SQL and its values
        orig = error.orig
        return (f"the metadata database failed ({type(orig).__module__}."
                f"{type(orig).__name__}: {orig})")
    if isinstance(error, OSError):
        return f"{type(error).__name__}: {error}"
    return None


def failure_text(error: Exception) -> str:
    """A failed job's cause as its row would say it (``IndexService.failure_message``), with
    the metadata database's errors without their SQL."""
    from app.errors import as_domain_error
    from app.services.indexing import IndexService

    cause = _cause(error) if as_domain_error(error) is None else None
    return cause or IndexService.failure_message(error)


# The failures this process's runners saw: job id -> (collection, source, embedder, cause).
# A job whose failure could not be written to its row (the metadata database read-only: a
# data folder mounted `:ro` under a running server) stayed `queued` for ever at every edge;
# ``CollectionService`` shows such a row as failed, with this cause (``unrecorded_failure``).
# The newest ``_FAILURES_KEPT`` are kept, for the life of the process.
_FAILURES: OrderedDict[int, tuple[str, str, str, str]] = OrderedDict()
_FAILURES_LOCK = threading.Lock()
_FAILURES_KEPT = 1000


def _remember_failure(job: PreparedJob, error: Exception) -> None:
    collection, source, embedder = (getattr(job, k, None)
                                    for k in ("collection", "source", "embedder"))
    if not (isinstance(collection, str) and isinstance(source, str)
            and isinstance(embedder, str)):  # not a PreparedJob (a test's stand-in)
        return
    with _FAILURES_LOCK:
        _FAILURES[job.job_id] = (collection, source, embedder, failure_text(error))
        _FAILURES.move_to_end(job.job_id)
        while len(_FAILURES) > _FAILURES_KEPT:
            _FAILURES.popitem(last=False)


def unrecorded_failure(job_id: int, collection: str, source: str, embedder: str) -> str | None:
    """The cause of job ``job_id``'s failure as a runner of this process saw it, or None. Only
    for the same collection, source and embedder: ids are per metadata database, and a process
    may use several (tests). The caller asks only for a row that has not ended."""
    with _FAILURES_LOCK:
        seen = _FAILURES.get(job_id)
    if seen is None or seen[:3] != (collection, source, embedder):
        return None
    return seen[3]


def _log_failure(job: PreparedJob, error: Exception) -> None:
    """One line for a failure the domain names (a locked database, a missing source...: the
    job's row holds the same message) or an expected one of the machine (``_cause``: a
    read-only metadata database, its traceback at DEBUG), a traceback for anything else. A
    lock held past the busy timeout logged ~95 lines of SQLAlchemy traceback ending in the SQL
    and its values. The failure is remembered too (``unrecorded_failure``): its row may not
    have taken it."""
    from app.errors import as_domain_error

    domain = as_domain_error(error)
    cause = _cause(error) if domain is None else None
    # Which collection: a server's log of several collections' jobs named only the job's id.
    collection = getattr(job, "collection", None)
    of = f" (collection {collection})" if isinstance(collection, str) else ""
    if domain is not None:
        logger.error("index job %d%s failed: %s: %s", job.job_id, of, type(domain).__name__,
                     domain)
    elif cause is not None:
        logger.error("index job %d%s failed: %s", job.job_id, of, cause)
        logger.debug("index job %d's failure", job.job_id, exc_info=error)
    else:
        logger.exception("index job %d%s failed", job.job_id, of)
    _remember_failure(job, error)


def run_logged(run: RunJob, job: PreparedJob) -> object:
    """``run(job)`` between a "started" and an outcome line: a server running jobs in its own
    thread (or a detached ``facet run-job``) logged nothing of them, unlike a worker. A failure
    raises and is logged by the caller (``_log_failure``)."""
    from app.services.indexing import IndexReport, job_end_line

    # The source as printable text: a folder named with a line break and an ANSI escape wrote a
    # forged line into the log (the verification round of the seventh session of 2026-12-06).
    logger.info("job %d started (%s, %s, embedder %s)", job.job_id, job.collection,
                printable(job.source), job.embedder)
    report = run(job)
    if isinstance(report, IndexReport):
        # Documents failed (all of them, or some): a WARNING with the job's message and the
        # first of them, not an INFO completion like any other ("3 seen, 0 indexed, ... 3
        # failed" said nothing more).
        level, line = job_end_line(
            report.job_id, report.state, report.collection,
            (report.docs_seen, report.docs_indexed, report.docs_skipped, report.docs_failed,
             report.docs_deleted), [key for key, _ in report.errors],
            f", {plural(report.chunks_written, 'chunk')} in {report.elapsed_s:.1f}s")
        logger.log(level, "%s", line)
    return report


class InlineJobRunner:
    """Runs each job in the calling thread before ``submit`` returns (errors are in its row)."""

    runner_name = "inline"

    def __init__(self, run: RunJob) -> None:
        self._run = run

    def submit(self, job: PreparedJob) -> None:
        try:
            self._run(job)
        except Exception as e:
            _log_failure(job, e)

    def close(self) -> None:
        """Nothing runs in the background."""


class ThreadJobRunner:
    """One background thread running jobs in submission order.

    Args:
        run: does one job (the facade's ``IndexService.run`` plus its cache upkeep); a
            ``weakref.WeakMethod`` of its owner's method keeps the runner from holding the owner
            (a Facet) alive when no job is queued or running: a dropped ``Facet`` that
            nothing else references is then closed by CPython at once (its store, threads).
        on_abandon: called for each job still queued when the runner closes.
        on_overdue: called when the running job has not stopped within ``stop_wait_s`` of the
            close (the facade drops the encoding queued for it, ``abandon_bulk_work``); the
            job then gets ``overdue_wait_s`` more to record itself interrupted, said in the log.
    """

    runner_name = "thread"
    stop_wait_s = 30.0
    overdue_wait_s = 5.0

    def __init__(self, run: RunJob | weakref.WeakMethod[RunJob],
                 on_abandon: Callable[[PreparedJob], None] | None = None,
                 on_overdue: Callable[[], None] | None = None) -> None:
        self._run = run
        self._on_abandon = on_abandon
        self._on_overdue = on_overdue
        # Each queued job with the callable that runs it: a ``WeakMethod`` resolved when the job
        # is submitted, so its owner (a Facet) stays alive while its jobs are queued or running,
        # and no longer (dropped, it is closed once the last job ends, in this thread).
        self._queue: queue.Queue[tuple[PreparedJob, RunJob] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._running: PreparedJob | None = None  # the job the thread is doing now

    def submit(self, job: PreparedJob) -> None:
        run = self._run() if isinstance(self._run, weakref.WeakMethod) else self._run
        if run is None:  # its owner is gone (it cannot submit then: a stand-in's)
            raise RuntimeError("the job runner's owner is gone")
        with self._lock:
            if self._closed:
                raise RuntimeError("the job runner is closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="facet-jobs", daemon=True)
                self._thread.start()
            # Under the lock: a ``close`` between the check and the put drained the queue
            # without it, and the job went in behind the stop mark, neither run nor abandoned.
            self._queue.put((job, run))

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            job: PreparedJob | None = None
            run: RunJob | None = None
            try:
                if item is None:
                    return
                job, run = item
                self._running = job
                run_logged(run, job)
            except Exception as e:  # the job row holds the error; the thread goes on
                assert job is not None
                _log_failure(job, e)
            finally:
                self._running = None
                # Its owner let go before ``task_done`` (``join`` returns after it): where this
                # held its last reference, it is closed here, now (``close`` from this thread).
                item = job = run = None
                self._queue.task_done()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        abandoned: list[PreparedJob] = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            self._queue.task_done()
            if item is not None:
                abandoned.append(item[0])
        if self._on_abandon is not None:
            for job in abandoned:
                self._on_abandon(job)
        if self._thread is not None:
            self._queue.put(None)
            if self._thread is threading.current_thread():
                return  # its owner closed from the job thread (dropped after its last job)
            # A running job stops at its next batch once the facade is closing (its context's
            # ``stopping``): give it that long to record itself interrupted. One that takes
            # longer is left; the process ending, it shows interrupted all the same, and the
            # write protocol loses and duplicates nothing when it is resumed.
            running = self._running
            if running is not None:  # the wait a SIGTERM'd server spends here, said
                logger.info("waiting up to %gs for job %d to stop at its next batch boundary",
                            self.stop_wait_s, running.job_id)
            self._thread.join(timeout=self.stop_wait_s)
            waited = self.stop_wait_s
            if self._thread.is_alive() and running is not None and self._on_overdue is not None:
                # Its batch still encoding: that work is dropped (the encoder's close finished
                # it first, up to 60 s more, unsaid, and the job never recorded its end).
                logger.warning("job %d did not stop within %gs; dropping the encoding queued for "
                               "it and waiting up to %gs more for it to record itself "
                               "interrupted", running.job_id, self.stop_wait_s,
                               self.overdue_wait_s)
                try:
                    self._on_overdue()
                except Exception as e:  # (the wait and the close go on)
                    logger.warning("could not drop the encoding of job %d: %s", running.job_id, e)
                self._thread.join(timeout=self.overdue_wait_s)
                waited += self.overdue_wait_s
            if self._thread.is_alive() and running is not None:
                logger.warning("job %d did not stop within %gs; it shows interrupted once this "
                               "process ends", running.job_id, waited)

    @property
    def busy(self) -> bool:
        """Whether a submitted job is queued or running."""
        return bool(self._queue.unfinished_tasks)

    def join(self, timeout: float = 600.0) -> bool:
        """Wait until every submitted job is done (tests, scripts); False on timeout."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True
