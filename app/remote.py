"""The client side of the workers: send jobs and encodes to Celery, or run a job detached.

``app`` never imports ``worker``: tasks are sent *by name* through a Celery app built from
the settings (``celery_client``), with the same JSON-only configuration the workers use
(``celery_config``). What runs where:

* ``CeleryJobRunner`` (the facade's ``JobRunner`` when ``FACET_BROKER_URL`` is set): sends a
  prepared job (``PreparedJob.to_dict()``) to the ``index`` queue as ``facet.index_job``.
* ``CeleryQueryEncoder`` (the ``QueryEncoder`` when ``FACET_ENCODE_ON_WORKERS=true``): query
  encodes go to the ``query`` queue (``facet.encode``), bulk encodes and answer generation to
  ``index``; vectors come back as base64 float32, bit-exact.
* ``ProcessJobRunner`` (embedded mode, ``facet index --background`` without a broker): the
  job runs in a detached ``facet`` process that outlives the command.

A broker that is down is an ``UnavailableError`` after ``FACET_BROKER_TIMEOUT_S``, never a hang.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from app import errors as E
from app.encoding import _validated
from app.errors import OUTAGE_RETRY_AFTER_S, FacetError, UnavailableError, domain_errors
from app.services.context import job_log_path
from app.services.indexing import PreparedJob
from app.settings import FacetSettings, mask_passwords, masked_url
from embedders.contract import Role, validate_texts

logger = logging.getLogger(__name__)

QUEUES = ("index", "query")
INDEX_JOB_TASK = "facet.index_job"
INDEX_CHUNK_TASK = "facet.index_chunk"
ENCODE_TASK = "facet.encode"
ANSWERS_TASK = "facet.generate_answers"


def celery_config(settings: FacetSettings) -> dict[str, Any]:
    """The Celery configuration shared by clients and workers (JSON only, late acks...)."""
    timeout = settings.broker_timeout_s
    return {
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        # A task is acknowledged after it ran; a worker that dies mid-task gets it re-delivered
        # (killed child: at once; whole worker gone: after the visibility timeout).
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "task_default_queue": "index",
        "task_routes": {INDEX_JOB_TASK: {"queue": "index"}, INDEX_CHUNK_TASK: {"queue": "index"},
                        ANSWERS_TASK: {"queue": "index"}, ENCODE_TASK: {"queue": "query"}},
        "broker_transport_options": {
            "visibility_timeout": settings.visibility_timeout_s,
            # Scan for tasks whose worker vanished every few seconds (kombu's default scans
            # every ~100 s): they are re-delivered once older than the visibility timeout.
            "unacked_restore_interval": min(10.0, max(1.0, settings.visibility_timeout_s / 4)),
            "unacked_restore_throttle": 1,
            "socket_connect_timeout": timeout,
            "socket_timeout": max(timeout, 30.0)},
        "result_backend_transport_options": {"visibility_timeout": settings.visibility_timeout_s},
        "redis_socket_connect_timeout": timeout,
        "redis_socket_timeout": max(timeout, 30.0),
        "broker_connection_timeout": timeout,
        "broker_connection_retry_on_startup": True,
        # Publishing to a broker that is down fails after ~1 s, not minutes.
        "task_publish_retry_policy": {"max_retries": 2, "interval_start": 0,
                                      "interval_step": 0.2, "interval_max": 0.5},
        # Only encode and answers tasks keep a result (task_ignore_result below), read by a
        # caller that waits FACET_WORKER_TIMEOUT_S at most. One whose caller gave up (a query
        # timed out behind a busy or stalled worker) kept its key, with the vectors, for an
        # hour: Redis grew with the timeouts exactly when the workers were behind.
        "result_expires": max(120, int(2 * settings.worker_timeout_s)),
        # One result backend for every thread of a process (Celery's default is one per thread):
        # a server's queries wait in its request threads, and a thread that ended left its pool
        # and pub/sub connections open until the cyclic garbage collection ran, rarely with torch
        # loaded (82 -> 504 Redis connections over 8 bursts of 30 searches). Celery 5.7's result
        # consumer serialises its pub/sub use across threads (the `worker` extra's floor).
        "result_backend_thread_safe": True,
        "task_ignore_result": True,  # progress is in the SQL job table; encode tasks opt in
        "worker_hijack_root_logger": False,
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        "broker_connection_max_retries": None,
        "worker_send_task_events": False,
    }


def worker_extra_missing(module: str) -> UnavailableError:
    """The error for a broker URL set without the ``worker`` extra (``module`` not importable)."""
    return UnavailableError(f"{module} is not installed: pip install 'facet-search[worker]'")


class _RestartAdvice(logging.Filter):
    """Celery's result consumer logs "... The Celery application must be restarted." at CRITICAL
    when its few reconnection tries (a client's, ``celery_client``) fail: a server or CLI read
    it at every request while Redis stalled, yet the next call reconnects by itself, and the
    caller's error already says the broker is out of reach. A WARNING that says so."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.CRITICAL and "must be restarted" in record.getMessage():
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg, record.args = ("lost the connection to the result backend (Redis); the "
                                       "next call reconnects"), None
        return True


logging.getLogger("celery.backends.asynchronous").addFilter(_RestartAdvice())

_CLIENTS: dict[tuple[str, str], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def celery_client(settings: FacetSettings) -> Any:
    """A Celery app for sending tasks (one per broker/backend URL in a process).

    Raises:
        UnavailableError: no broker URL, or the ``worker`` extra is not installed.
    """
    if not settings.broker_url:
        # (FACET_ENCODE_ON_WORKERS=true without a broker was told only to set the broker.)
        asked = (" (FACET_ENCODE_ON_WORKERS=true sends queries to them), or set "
                 "FACET_ENCODE_ON_WORKERS=false to encode in this process" if settings.encode_on_workers
                 else "")
        raise UnavailableError("no broker configured: set FACET_BROKER_URL (e.g. "
                               f"redis://localhost:6379/0) to use workers{asked}")
    try:
        from celery import Celery
    except ImportError as e:
        raise worker_extra_missing("Celery") from e
    backend = settings.result_backend or settings.broker_url
    key = (settings.broker_url, backend)
    with _CLIENTS_LOCK:
        app = _CLIENTS.get(key)
        if app is None:
            app = Celery("facet", broker=settings.broker_url, backend=backend,
                         set_as_current=False)
            app.conf.update(celery_config(settings))
            # A client gives up on a result backend it cannot reach after one quick retry
            # (Celery's default retries 20 times a second apart: a send hung ~20 s with an
            # ERROR line each time). The workers keep the default, to store a result across
            # a Redis restart.
            options = dict(app.conf.result_backend_transport_options or {})
            options["retry_policy"] = {"max_retries": 1, "interval_start": 0,
                                       "interval_step": 0.5, "interval_max": 0.5}
            app.conf.result_backend_transport_options = options
            # A client's reads from Redis wait FACET_BROKER_TIMEOUT_S at most: a broker that
            # accepts connections but does not answer (stopped with SIGSTOP, swapping, stuck in a
            # long command) held a search ~93 s with the workers' 30 s reads (three tries of a
            # publish), past FACET_WORKER_TIMEOUT_S. The result's wait is not such a read (it
            # polls for FACET_WORKER_TIMEOUT_S); the workers keep 30 s for their blocking pops.
            transport = dict(app.conf.broker_transport_options or {})
            transport["socket_timeout"] = settings.broker_timeout_s
            app.conf.broker_transport_options = transport
            app.conf.redis_socket_timeout = settings.broker_timeout_s
            _CLIENTS[key] = app
        return app


# The last words of ``check_broker``'s line: what the process may do instead of a broker.
BROKER_WAY_OUT = "unset it to run jobs in this process"  # facet serve, facet index --background
ENCODING_WAY_OUT = "set FACET_ENCODE_ON_WORKERS=false to encode in this process"


def check_broker(settings: FacetSettings, *, encoding: bool = False,
                 way_out: str | None = None) -> None:
    """Fail fast, in one line, when the broker cannot be reached. ``encoding``: for the
    queries and clusterings sent to the workers (``FACET_ENCODE_ON_WORKERS``), whose way out
    is that setting, not unsetting the broker (which runs jobs in this process). ``way_out``:
    another ending (a worker cannot do without the broker).

    Raises:
        UnavailableError: within about ``FACET_BROKER_TIMEOUT_S`` seconds.
    """
    url = settings.broker_url or ""
    timeout = settings.broker_timeout_s
    try:
        if url.startswith(("redis://", "rediss://", "unix://")):
            try:
                import redis
            except ImportError as e:  # not "cannot reach the broker": nothing was tried
                raise worker_extra_missing("redis (the client for FACET_BROKER_URL)") from e

            client = redis.Redis.from_url(url, socket_connect_timeout=timeout,
                                          socket_timeout=timeout)
            try:
                client.ping()
            finally:
                client.close()
        else:
            with celery_client(settings).connection_for_write() as conn:
                conn.ensure_connection(max_retries=1, interval_start=0, timeout=timeout)
    except FacetError:
        raise
    except Exception as e:
        raise UnavailableError(
            f"cannot reach the broker at {masked_url(url)} "
            f"({type(e).__name__}: {one_line(mask_passwords(str(e)))}); start Redis "
            "(docker compose up -d redis) or check FACET_BROKER_URL; "
            + (way_out or (ENCODING_WAY_OUT if encoding else BROKER_WAY_OUT)),
            retry_after_s=OUTAGE_RETRY_AFTER_S) from e


def one_line(text: str) -> str:
    """``text`` with its line breaks and runs of blanks as one space (Celery's errors span
    lines; a job row's message is shown on one)."""
    return " ".join(text.split())


def check_result_backend(settings: FacetSettings) -> None:
    """Fail fast, in one line, when FACET_RESULT_BACKEND is set apart from the broker and
    cannot be reached (a Redis URL; other backends are not checked here).

    Raises:
        UnavailableError: within about ``FACET_BROKER_TIMEOUT_S`` seconds.
    """
    url = settings.result_backend or ""
    if not url or url == settings.broker_url or not url.startswith(
            ("redis://", "rediss://", "unix://")):
        return
    timeout = settings.broker_timeout_s
    try:
        import redis
    except ImportError as e:
        raise worker_extra_missing("redis (the client for FACET_RESULT_BACKEND)") from e
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as e:
        raise UnavailableError(
            f"cannot reach the result backend at {masked_url(url)} "
            f"({type(e).__name__}: {one_line(mask_passwords(str(e)))}); the broker is fine: "
            "start that Redis or check FACET_RESULT_BACKEND (unset, the broker holds the "
            "results)", retry_after_s=OUTAGE_RETRY_AFTER_S) from e


class CeleryJobRunner:
    """Sends prepared index jobs to the workers' ``index`` queue."""

    runner_name = "celery"
    # The job runs in a worker process, not this one (``IndexingService.handed_off``).
    runs_elsewhere = True

    def __init__(self, settings: FacetSettings) -> None:
        self.settings = settings

    def check(self) -> None:
        """Raise ``UnavailableError`` now if the broker or the result backend cannot be
        reached."""
        check_broker(self.settings)
        check_result_backend(self.settings)

    def submit(self, job: PreparedJob) -> None:
        """Send ``job``; raises ``UnavailableError`` when the broker or the result backend is
        down."""
        check_broker(self.settings)
        check_result_backend(self.settings)
        try:
            # No result is kept (progress is in the SQL job table): the sender does not
            # subscribe to one on the result backend either.
            celery_client(self.settings).send_task(INDEX_JOB_TASK, args=[job.to_dict()],
                                                   queue="index", ignore_result=True)
        except FacetError:
            raise
        except Exception as e:
            raise UnavailableError(
                f"could not send job {job.job_id} to the broker at "
                f"{masked_url(self.settings.broker_url or '')}: "
                f"{one_line(mask_passwords(str(e)))}", retry_after_s=OUTAGE_RETRY_AFTER_S) from e
        logger.info("job %d sent to the index queue", job.job_id)

    def close(self) -> None:
        """Nothing to stop: the workers own the jobs."""


class ProcessJobRunner:
    """Runs each job in a detached ``facet`` process (embedded mode's ``--background``).

    Args:
        settings: passed to the child through its environment (it reads ``FACET_*``).
        on_started: told the job id and the child's pid, so the job row names the process
            that runs it (its liveness is what ``facet jobs`` shows).
        log_dir: where the child's output goes (``<data_dir>/logs/job-<id>.log``).
    """

    runner_name = "process"
    runs_elsewhere = True  # (a detached ``facet run-job``)

    def __init__(self, settings: FacetSettings,
                 on_started: Callable[[int, int], None] | None = None) -> None:
        self.settings = settings
        self.on_started = on_started

    def submit(self, job: PreparedJob) -> None:
        log = job_log_path(self.settings.data_dir, job.job_id)
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            # -P: ``-m`` would put the cwd first on sys.path, and a folder there named
            # ``app``, ``indexer``... (common names) would shadow Facet's own packages.
            child = subprocess.Popen(
                [sys.executable, "-P", "-m", "app", "run-job", json.dumps(job.to_dict())],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, env=dict(os.environ))
        logger.info("job %d runs in process %d (log: %s)", job.job_id, child.pid, log)
        if self.on_started is not None:
            self.on_started(job.job_id, child.pid)

    def close(self) -> None:
        """The children go on by themselves."""


def _error_from(payload: dict[str, Any], spec: str | None = None) -> FacetError:
    """Rebuild a domain error a worker returned as ``{"type", "message", "worker"}``.

    ``spec``: the embedder the task asked the worker for. Where the worker cannot load it by
    name and this process can (a server checks a request's name first), it is the worker that
    lacks it (a plugin not installed there): unavailable (503), naming the worker. It was the
    worker's "unknown embedder ... valid names: (its own)", a 404 ``model_not_found`` for a
    model ``/v1/models`` lists (the plugin exploration of the sixth session of 2026-12-02)."""
    cls = getattr(E, str(payload.get("type", "")), None)
    message = str(payload.get("message", "the worker failed"))
    if cls is E.UnknownModelError and spec is not None and _loads_here(spec):
        from app.services.search import PLUGIN_LOADS_WHERE_REGISTERED

        worker = str(payload.get("worker") or "?")
        return UnavailableError(
            f"worker {worker} cannot load {spec!r}, which this server can: {message} "
            f"({PLUGIN_LOADS_WHERE_REGISTERED}; start the workers with the plugins the server has)")
    if isinstance(cls, type) and issubclass(cls, UnavailableError):
        wait = payload.get("retry_after_s")
        return cls(message, retry_after_s=float(wait) if isinstance(wait, int | float) else None)
    if isinstance(cls, type) and issubclass(cls, FacetError) and cls is not E.BusyError:
        return cls(message)
    return FacetError(message)


def encode_result(vectors: np.ndarray) -> dict[str, Any]:
    """Vectors as JSON: shape + base64 of little-endian float32 (bit-exact, compact)."""
    arr = np.ascontiguousarray(vectors, dtype="<f4")
    return {"shape": list(arr.shape), "b64": base64.b64encode(arr.tobytes()).decode("ascii")}


def _loads_here(spec: str) -> bool:
    """Whether ``spec`` names an embedder this process could load (checked without loading)."""
    from embedders.errors import EmbedderError
    from embedders.registry import check_embedder

    try:
        check_embedder(spec)
    except EmbedderError:
        return False
    return True


def decode_result(data: dict[str, Any], spec: str | None = None) -> np.ndarray:
    """The inverse of ``encode_result`` (raises the worker's error if it sent one; ``spec``:
    as ``_error_from``)."""
    if "error" in data:
        raise _error_from(data["error"], spec)
    shape = tuple(int(x) for x in data["shape"])
    return np.frombuffer(base64.b64decode(data["b64"]), dtype="<f4").reshape(shape).astype(
        np.float32)


class CeleryQueryEncoder:
    """A ``QueryEncoder`` whose model runs on the workers (``query`` and ``index`` queues).

    After a call no worker answered in time, the next calls to that queue first ask the
    workers which queues they consume (a second, the answer shared for ``ASKED_S``; where the
    broker cannot be reached for it, the broker's own check says so): where none consumes it,
    the call is refused at once, not after another ``FACET_WORKER_TIMEOUT_S``. With every
    worker down each search waited the whole timeout (60 s) to be told so, and a page or client
    waiting on it with it.

    Args:
        settings: broker, result backend, ``FACET_WORKER_TIMEOUT_S``.
    """

    ASKED_S = 2.0  # how long one answer of the workers' queues serves the calls that follow

    def __init__(self, settings: FacetSettings) -> None:
        self.settings = settings
        self.app = celery_client(settings)
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="facet-remote")
        self._identities: dict[str, str] = {}  # embedder -> identity the last answering worker reported
        self._answered = threading.local()  # .identities: this thread's last answers
        self._silent: dict[str, float] = {}  # queue -> when a call to it last went unanswered
        self._asked: dict[str, tuple[float, bool]] = {}  # queue -> (when, whether consumed)
        self._asking = threading.Lock()

    def _consumed(self, queue: str) -> bool | None:
        """Whether a worker says it consumes ``queue`` now, asked in a second (the answer
        shared for ``ASKED_S``); None where the workers could not be asked (the broker not
        reached at once). A ``--pool solo`` worker busy with a task cannot answer: it counts as
        none (where before the call waited, answered only if that task ended in time)."""
        with self._asking:
            asked = self._asked.get(queue)
            if asked is not None and time.monotonic() - asked[0] < self.ASKED_S:
                return asked[1]
            try:
                consumed = self._ask(queue, 1.0, self.settings.broker_timeout_s)
            except Exception as e:  # the broker gone, say: the caller asks it
                logger.debug("could not ask the workers for their queues: %s", e)
                return None
            self._asked[queue] = (time.monotonic(), consumed)
            return consumed

    def _ask(self, queue: str, wait_s: float, connect_s: float) -> bool:
        """Ask the workers whether one consumes ``queue``: their answers waited for ``wait_s``
        (the ask waits that long whatever they answer), the broker's connection for
        ``connect_s``. Raises what the broker raises."""
        # One try to connect: kombu's own retries took 6 s a call with the broker down
        # (helper-542's review), every call after an unanswered one.
        with self.app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=0, timeout=connect_s)
            replies = self.app.control.inspect(
                timeout=wait_s, connection=connection).active_queues() or {}
        return any(isinstance(q, dict) and q.get("name") == queue
                   for queues in replies.values() for q in (queues or []))

    def consumes(self, queue: str, wait_s: float = 0.5, connect_s: float = 1.0) -> bool:
        """For a readiness probe: whether a worker consumes ``queue`` now (``_ask``; a probe is
        often given a second in all). Neither the calls' lock nor their shared answer: a probe
        against a stalled broker held the lock past its own answer, and searches waited behind
        it (the final read of the third session of 2026-12-07).

        Raises:
            what the broker raises where it cannot be asked."""
        return self._ask(queue, wait_s, connect_s)

    def _heard(self, queue: str) -> None:
        """A worker answered a call to ``queue`` (a result or its error): calls wait again.
        (Every answer comes here: the lock, which an ask holds for a second or more, only where
        there is something to forget.)"""
        if self._silent.pop(queue, None) is None and queue not in self._asked:
            return
        with self._asking:
            self._asked.pop(queue, None)

    def _call(self, task: str, queue: str, kwargs: dict[str, Any],
              deadline: float | None = None) -> Any:
        """Send ``task`` and wait for its result, FACET_WORKER_TIMEOUT_S at most, counted from
        ``deadline`` less that timeout where given (``submit``'s time: a request that waited
        for one of the pool's threads waited that long again, and was told "within 60s")."""
        timeout = self.settings.worker_timeout_s
        if deadline is not None:
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                raise UnavailableError(
                    f"no worker answered on the {queue!r} queue within "
                    f"{self.settings.worker_timeout_s:.0f}s (FACET_WORKER_TIMEOUT_S): this process "
                    "had more requests for the workers waiting than it sends at once; start more "
                    f"workers (facet worker --queues {queue}) or send fewer requests at a time",
                    retry_after_s=OUTAGE_RETRY_AFTER_S)
        silent = self._silent.get(queue)
        if silent is not None:
            consumed = self._consumed(queue)
            if consumed is None:
                # The workers could not be asked: a broker down is said now, where the send's
                # own retries took 15 s more to say it (helper-543, a SIGSTOPped Redis).
                check_broker(self.settings, encoding=True)
            elif not consumed:
                raise UnavailableError(
                    f"no worker answered on the {queue!r} queue: none consumes it (asked of the "
                    f"workers just now; a call to it went unanswered "
                    f"{time.monotonic() - silent:.0f}s ago): none is running, or each is a "
                    f"`--pool solo` worker busy with a task; start one: facet worker --queues {queue}",
                    retry_after_s=OUTAGE_RETRY_AFTER_S)
        try:
            # The caller waits FACET_WORKER_TIMEOUT_S at most; a task no worker took by then is
            # dropped (revoked as expired) instead of being run later for nobody, ahead of the
            # queries sent after it.
            result = self.app.send_task(task, kwargs=kwargs, queue=queue, ignore_result=False,
                                        expires=timeout)
        except Exception as e:
            check_broker(self.settings, encoding=True)  # the clearer message when it is down
            check_result_backend(self.settings)  # ... or the result backend
            raise UnavailableError(f"could not send {task} to the {queue!r} queue: "
                                   f"{one_line(mask_passwords(str(e)))}",
                                   retry_after_s=OUTAGE_RETRY_AFTER_S) from e
        try:
            answer = result.get(timeout=timeout, propagate=True)
            self._heard(queue)
            return answer
        except Exception as e:
            if type(e).__name__ == "TimeoutError":
                # A broker that stopped answering while the call waited is said as such, not
                # blamed on the workers.
                check_broker(self.settings, encoding=True)
                check_result_backend(self.settings)
                self._silent[queue] = time.monotonic()
                raise UnavailableError(
                    f"no worker answered on the {queue!r} queue within "
                    f"{self.settings.worker_timeout_s:.0f}s (FACET_WORKER_TIMEOUT_S): none is "
                    f"running, or each is busy or stalled; start one: facet worker --queues "
                    f"{queue}", retry_after_s=OUTAGE_RETRY_AFTER_S) from e
            with contextlib.suppress(Exception):  # (the backend gone: said below)
                if result.ready():
                    self._heard(queue)  # a worker's error is its answer
            # The broker (or result backend) gone while waiting is said as such: it read as
            # "the worker failed: RuntimeError: Retry limit exceeded" (or, raised again by the
            # ``forget`` below, a traceback and a 500).
            check_broker(self.settings, encoding=True)
            check_result_backend(self.settings)
            raise FacetError(f"the worker failed: {type(e).__name__}: "
                             f"{one_line(mask_passwords(str(e)))}") from e
        finally:
            try:
                result.forget()
            except Exception as e:  # the broker gone: nothing to forget there
                logger.debug("could not forget the result of %s: %s", task, e)

    def encode(self, texts: Sequence[str], *, embedder: str, role: Role | str = Role.QUERY,
               instruction: str | None = None, bulk: bool = False,
               deadline: float | None = None) -> np.ndarray:
        # Checked as the in-process encoders check it: a bare string was sent as its characters
        # (encode("hello"): 5 vectors), None was a raw TypeError.
        items, role_, instruction_ = _validated(texts, role, instruction)
        data = self._call(ENCODE_TASK, "index" if bulk else "query",
                          {"texts": items, "embedder": embedder, "role": role_.value,
                           "instruction": instruction_}, deadline)
        vectors = decode_result(data, embedder)
        identity = data.get("identity") if isinstance(data.get("identity"), str) else None
        # This thread's answer first (a search checks its query on the thread that encoded it):
        # the process-wide value was the last answer of any thread, another worker's under
        # concurrent queries; and a worker that reports none is unknown, not the last one's.
        answers = getattr(self._answered, "identities", None)
        if answers is None:
            answers = self._answered.identities = {}
        answers[embedder] = identity
        if identity is None:
            self._identities.pop(embedder, None)
        else:
            self._identities[embedder] = identity
        return vectors

    def reported_identity(self, embedder: str) -> str | None:
        """The identity of ``embedder`` as the worker that answered this thread's last encode
        with it reported it, else the last any thread had (None before any encode, or from a
        worker that does not report it)."""
        answers = getattr(self._answered, "identities", None)
        if answers is not None and embedder in answers:
            return answers[embedder]
        return self._identities.get(embedder)

    def submit(self, texts: Sequence[str], *, embedder: str, role: Role | str = Role.QUERY,
               instruction: str | None = None) -> Future[np.ndarray]:
        # The wait counts from now: queued behind the pool's 8 threads, a request waited its
        # timeout twice over. (Checked here, not on the pool's thread: a bad input is the caller's.)
        with domain_errors():
            validate_texts(texts)
        return self._pool.submit(self.encode, texts, embedder=embedder, role=role,
                                 instruction=instruction,
                                 deadline=time.monotonic() + self.settings.worker_timeout_s)

    def generate_answers(self, texts: Sequence[str], *, explainer: str, instruction: str | None,
                         max_new_tokens: int | None = None) -> list[str]:
        data = self._call(ANSWERS_TASK, "index",
                          {"texts": list(texts), "explainer": explainer,
                           "instruction": instruction, "max_new_tokens": max_new_tokens})
        if "error" in data:
            raise _error_from(data["error"], explainer)
        return [str(a) for a in data["answers"]]

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
