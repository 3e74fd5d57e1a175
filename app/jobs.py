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
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from app.services.indexing import PreparedJob

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


def _log_failure(job_id: int, error: Exception) -> None:
    """One line for a failure the domain names (a locked database, a missing source...: the
    job's row holds the same message), a traceback for anything else. A lock held past the
    busy timeout logged ~95 lines of SQLAlchemy traceback ending in the SQL and its values."""
    from app.errors import as_domain_error

    domain = as_domain_error(error)
    if domain is None:
        logger.exception("index job %d failed", job_id)
    else:
        logger.error("index job %d failed: %s: %s", job_id, type(domain).__name__, domain)


def run_logged(run: RunJob, job: PreparedJob) -> object:
    """``run(job)`` between a "started" and an outcome line: a server running jobs in its own
    thread (or a detached ``facet run-job``) logged nothing of them, unlike a worker. A failure
    raises and is logged by the caller (``_log_failure``)."""
    from app.services.indexing import IndexReport

    logger.info("job %d started (%s, %s)", job.job_id, job.collection, job.source)
    report = run(job)
    if isinstance(report, IndexReport):
        logger.info("job %d %s: %d seen, %d indexed, %d unchanged, %d failed, %d deleted, "
                    "%d chunks in %.1fs", report.job_id, report.state, report.docs_seen,
                    report.docs_indexed, report.docs_skipped, report.docs_failed,
                    report.docs_deleted, report.chunks_written, report.elapsed_s)
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
            _log_failure(job.job_id, e)

    def close(self) -> None:
        """Nothing runs in the background."""


class ThreadJobRunner:
    """One background thread running jobs in submission order.

    Args:
        run: does one job (the facade's ``IndexService.run`` plus its cache upkeep).
        on_abandon: called for each job still queued when the runner closes.
    """

    runner_name = "thread"
    stop_wait_s = 30.0

    def __init__(self, run: RunJob,
                 on_abandon: Callable[[PreparedJob], None] | None = None) -> None:
        self._run = run
        self._on_abandon = on_abandon
        self._queue: queue.Queue[PreparedJob | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._running: PreparedJob | None = None  # the job the thread is doing now

    def submit(self, job: PreparedJob) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("the job runner is closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="facet-jobs", daemon=True)
                self._thread.start()
        self._queue.put(job)

    def _loop(self) -> None:
        while True:
            job = self._queue.get()
            try:
                if job is None:
                    return
                self._running = job
                run_logged(self._run, job)
            except Exception as e:  # the job row holds the error; the thread goes on
                assert job is not None
                _log_failure(job.job_id, e)
            finally:
                self._running = None
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
                abandoned.append(item)
        if self._on_abandon is not None:
            for job in abandoned:
                self._on_abandon(job)
        if self._thread is not None:
            self._queue.put(None)
            # A running job stops at its next batch once the facade is closing (its context's
            # ``stopping``): give it that long to record itself interrupted. One that takes
            # longer is left; the process ending, it shows interrupted all the same, and the
            # write protocol loses and duplicates nothing when it is resumed.
            running = self._running
            if running is not None:  # the wait a SIGTERM'd server spends here, said
                logger.info("waiting up to %gs for job %d to stop at its next batch boundary",
                            self.stop_wait_s, running.job_id)
            self._thread.join(timeout=self.stop_wait_s)
            if self._thread.is_alive() and running is not None:
                logger.warning("job %d did not stop within %gs; it shows interrupted once this "
                               "process ends", running.job_id, self.stop_wait_s)

    def join(self, timeout: float = 600.0) -> bool:
        """Wait until every submitted job is done (tests, scripts); False on timeout."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True
