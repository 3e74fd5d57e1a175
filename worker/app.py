"""The Celery application of the workers: configuration, queues and per-process start-up.

``celery -A worker.app worker -Q index,query`` works as well as ``facet worker``. Settings come
from ``FACET_*`` (``app.settings``); the Celery configuration is ``app.remote.celery_config``,
shared with the clients that send tasks: JSON only, late acknowledgement, re-delivery of a
task whose worker died, one task prefetched per process, Redis visibility timeout from
``FACET_VISIBILITY_TIMEOUT_S``.

Models are loaded once per worker *process*, in ``worker_process_init`` (after the fork):
the parent never touches CUDA (a CUDA context does not survive ``fork``), and each child
loads ``FACET_WORKER_PRELOAD`` (default: the default embedder) on ``FACET_DEVICE``.

The main process also runs the sweeper that re-sends chunk tasks lost with killed workers
(``worker/recovery.py``), once the worker consumes.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import warnings
from typing import Any

from celery import Celery
from celery.exceptions import CPendingDeprecationWarning
from celery.signals import (
    celeryd_after_setup,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
)

from app.errors import FacetError
from app.remote import ENCODE_TASK, celery_config
from app.settings import FacetSettings, get_settings

logger = logging.getLogger(__name__)


def make_celery(settings: FacetSettings | None = None) -> Celery:
    """The workers' Celery app for ``settings`` (default: the environment's)."""
    settings = settings or get_settings()
    broker = settings.broker_url or "redis://localhost:6379/0"
    app = Celery("facet", broker=broker, backend=settings.result_backend or broker,
                 include=["worker.tasks"])
    app.conf.update(celery_config(settings))
    # Loading a model in worker_process_init can take minutes (a GPU model from disk);
    # Celery's default of 4 s would count the child as dead.
    app.conf.worker_proc_alive_timeout = 600.0
    # Today's behaviour, chosen (``celery_config`` sets them too; here they are the workers'):
    # a task running when the broker's connection is lost goes on, and is not cancelled (an
    # index chunk would start over at each Redis restart; one whose ack is lost with the
    # connection is re-delivered after the visibility timeout, which the write protocol takes
    # without loss or duplicates); a worker started before its broker retries until it is up.
    app.conf.worker_cancel_long_running_tasks_on_connection_loss = False
    app.conf.broker_connection_retry_on_startup = True
    return app


# What Celery 5.x warns on every lost broker connection while the setting above is False,
# however explicitly: that its default becomes True in Celery 6. Ten lines at each Redis
# restart, for a choice made here.
_CANCEL_DEFAULT_WARNING = r"\s*In Celery 5\.1 we introduced an optional breaking change"


celery_app = make_celery()


class _EncodeResultFilter(logging.Filter):
    """Celery's success line of an encode task carried its whole result (the base64 vectors,
    ~1.5 kB a query at INFO): the line stays, with the result's shape alone."""

    _SHAPE = re.compile(r"'shape': \[[0-9, ]*\]")

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if (isinstance(args, dict) and args.get("name") == ENCODE_TASK
                and isinstance(args.get("return_value"), str)):
            value = args["return_value"]
            shape = self._SHAPE.search(value)
            if shape is not None:
                record.args = {**args, "return_value": "{" + shape.group(0) + ", ...}"}
        return True


logging.getLogger("celery.app.trace").addFilter(_EncodeResultFilter())


class _NoJobs:
    """A worker's facade never starts jobs of its own (it *is* where jobs run)."""

    runner_name = "worker"

    def submit(self, job: Any) -> None:
        raise RuntimeError("a worker does not submit jobs")

    def close(self) -> None:
        """Nothing to stop."""


_STATE: dict[str, Any] = {}

# Seconds after the last chunk (or plan) of a collection ended in a worker process before the
# process lets the collection's embedded store go (``ChunkedIndexService``'s idle release):
# held until its job's end, a job whose chunk was lost with a killed worker kept it open in the
# other workers for FACET_VISIBILITY_TIMEOUT_S, and the stalled job's advised rerun and every
# search were refused. Short enough for a command waiting on the folder's lock (3 s) to get it;
# long enough for a worker going from one chunk to the next to keep it (reopening costs ~0.1 s).
IDLE_RELEASE_S = 1.0


def worker_facet() -> Any:
    """This worker process's facade (built on first use if ``worker_process_init`` did not run,
    e.g. the solo pool or a test calling a task function directly)."""
    facet = _STATE.get("facet")
    if facet is None:
        facet = _open_facet(get_settings())
    return facet


def _open_facet(settings: FacetSettings) -> Any:
    from app.core import Facet
    from app.encoding import EmbedderCache, InlineQueryEncoder
    from app.services.distributed import ChunkedIndexService

    cache = EmbedderCache(settings.device)
    # The worker encodes in process: never through the queues it serves.
    encoder = InlineQueryEncoder(cache, query_threads=settings.query_threads)
    facet = Facet(settings, embedders=cache, encoder=encoder, jobs=_NoJobs())
    _STATE["facet"] = facet
    _STATE["chunks"] = ChunkedIndexService(facet.context, idle_release_s=IDLE_RELEASE_S)
    return facet


def chunk_service() -> Any:
    """This process's ``ChunkedIndexService`` (over the worker facade's context)."""
    worker_facet()
    return _STATE["chunks"]


@worker_init.connect
def _check_parent(**_: Any) -> None:
    """In the parent, before the pool forks: CUDA must not be initialised here."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        raise RuntimeError("CUDA was initialised in the worker's parent process before the "
                           "fork; models must be loaded in worker_process_init only")


@celeryd_after_setup.connect
def _quiet_chosen_defaults(**_: Any) -> None:
    """In the main process, after Celery's logging set-up, which shows every
    ``CPendingDeprecationWarning`` ("always"): not the one for a setting this app chose."""
    warnings.filterwarnings("ignore", message=_CANCEL_DEFAULT_WARNING,
                            category=CPendingDeprecationWarning)


@worker_process_init.connect
def _load_models(**_: Any) -> None:
    """In each pool process: threads, the facade and the preloaded models."""
    settings = get_settings()
    if settings.index_threads:
        import torch

        torch.set_num_threads(settings.index_threads)
    try:
        facet = _open_facet(settings)
    except Exception as e:
        # One line (Celery's signal logging was a traceback, and the worker said "ready"): its
        # tasks open the facade again, and fail with this cause until it is fixed.
        logger.error("worker process could not open Facet: %s", _cause(e))
        return
    for name in settings.preloaded():
        try:
            model = facet.embedder(name)
        except Exception as e:
            logger.error("worker process could not load %s: %s; its tasks for it will fail",
                         name, _cause(e))
            continue
        logger.info("worker process loaded %s (%s-d)", model.name, model.dim)


def _cause(error: Exception) -> str:
    """``error`` in one line, as its domain error says it where it has one."""
    from app.errors import as_domain_error
    from app.remote import one_line

    said = as_domain_error(error) or error
    text = one_line(str(said))
    return text if isinstance(said, FacetError) else f"{type(said).__name__}: {text}"


@worker_process_shutdown.connect
def _close(**_: Any) -> None:
    facet = _STATE.pop("facet", None)
    if facet is not None:
        facet.close(reason="the worker stopping")


@worker_ready.connect
def _start_sweeper(sender: Any = None, **_: Any) -> None:
    """In the main process, once consuming: re-send chunk tasks lost with killed workers
    (``worker/recovery.py``)."""
    from worker.recovery import start_sweeper

    name = getattr(sender, "hostname", None) or "worker"
    _STATE["sweeper"] = start_sweeper(get_settings(), name)
    _mark_celerys_sigint()


def _mark_celerys_sigint() -> None:
    """Tell the plugin guard (``embedders.registry``) that this main process's SIGINT handler,
    Celery's (a Ctrl-C starts its warm shutdown; it sets a flag and raises nothing), never
    raises KeyboardInterrupt: one raised in a task here (``--pool solo`` runs them in this
    thread) is a plugin's own, its error. It was passed on as a Ctrl-C and ended the worker
    ("Unrecoverable error")."""
    import signal

    try:
        handler = signal.getsignal(signal.SIGINT)
    except (AttributeError, ValueError):  # (no SIGINT here)
        return
    if callable(handler) and str(getattr(handler, "__module__", "")).startswith("celery."):
        with contextlib.suppress(AttributeError, TypeError):
            handler.raises_no_keyboard_interrupt = True  # type: ignore[attr-defined]


@worker_shutdown.connect
def _stop_sweeper(**_: Any) -> None:
    sweeper = _STATE.pop("sweeper", None)
    if sweeper is not None:
        sweeper.stop()
