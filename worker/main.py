"""``facet worker``: check the request, then run a Celery worker in this process."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from typing import Any

from app.errors import FacetError, InvalidRequestError, domain_errors, reworded
from app.files import raise_open_files_limit
from app.remote import QUEUES, check_broker, check_result_backend
from app.settings import FacetSettings, get_settings

logger = logging.getLogger(__name__)


def parse_queues(spec: str) -> list[str]:
    """``"index,query"`` -> ``["index", "query"]``.

    Raises:
        InvalidRequestError: an unknown or empty queue name.
    """
    queues = [q.strip() for q in spec.split(",") if q.strip()]
    unknown = [q for q in queues if q not in QUEUES]
    if unknown or not queues:
        raise InvalidRequestError(
            f"unknown queue {', '.join(map(repr, unknown)) or '(none given)'}; the queues are "
            f"{', '.join(QUEUES)} (e.g. --queues index,query)")
    return list(dict.fromkeys(queues))


def check_preload(settings: FacetSettings) -> None:
    """Every embedder ``FACET_WORKER_PRELOAD`` names (default: the default embedder) can be
    loaded, checked without loading any weights (a typo was a 40-line traceback in each pool
    process, which then served with nothing loaded).

    Raises:
        UnknownModelError: a name that is neither registered nor a checkpoint directory.
        DataError: a checkpoint whose config or weight files cannot be read.
    """
    from embedders.registry import check_embedder

    variable = "FACET_WORKER_PRELOAD" if settings.worker_preload is not None else "FACET_DEFAULT_EMBEDDER"
    for name in settings.preloaded():
        try:
            with domain_errors():
                check_embedder(name)
        except FacetError as e:  # named as facet serve names FACET_API_MODELS' refusals
            raise reworded(e, f"{variable} names {name!r}, which cannot be loaded: {e}") from e


def check_device(settings: FacetSettings) -> None:
    """``FACET_DEVICE`` names a device this machine has (``cuda`` with a GPU, ``cuda:N`` within its
    GPUs, ``mps``/``xpu`` where torch has one: ``embedders.backbone.pick_device``'s rule, asked
    in a child process, ``_device_missing``).

    Raises:
        UnavailableError: the device is missing (the message ``EmbedderCache`` gives; every task
            failed with it while the worker answered its healthcheck; ``cuda:3`` on a one-GPU
            machine and ``mps`` got past the CUDA-only check this was).
    """
    device = settings.device or ""
    if not device or device.lower() == "cpu":
        return
    missing = _device_missing(device)
    if missing:
        from app.errors import UnavailableError

        raise UnavailableError(f"{missing} (FACET_DEVICE=cpu)")


def _device_missing(device: str) -> str | None:
    """``pick_device(device)``'s refusal of a device this machine lacks, asked in a child process:
    torch's CUDA check here would leave a CUDA context in the pool's parent, which does not
    survive ``fork`` (every pool process would refuse CUDA); None where the machine has it or
    the child could not say (the pool processes will)."""
    code = ("import sys\n"
            "from embedders.backbone import pick_device\n"
            "from embedders.errors import DeviceUnavailableError\n"
            "try:\n"
            "    pick_device(sys.argv[1])\n"
            "except DeviceUnavailableError as e:\n"
            "    print(e)\n")
    try:
        done = subprocess.run([sys.executable, "-c", code, device], capture_output=True, text=True,
                              timeout=300)
    except (OSError, subprocess.SubprocessError):
        return None  # not known here: the pool processes will say
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def _in_hand(request: Any) -> str:
    """One task a stopping worker finishes, in the words of its own lines ("chunk 3 of job 12")."""
    from app.remote import ANSWERS_TASK, ENCODE_TASK, INDEX_CHUNK_TASK, INDEX_JOB_TASK

    name = str(getattr(request, "task_name", None) or getattr(request, "name", "?"))
    args: Any = getattr(request, "args", None) or ()
    try:
        if name == INDEX_CHUNK_TASK:
            return f"chunk {int(args[1])} of job {int(args[0])}"
        if name == INDEX_JOB_TASK:
            return f"planning job {int(args[0]['job_id'])}"
    except (IndexError, KeyError, TypeError, ValueError):
        pass
    return {ENCODE_TASK: "a query encoding", ANSWERS_TASK: "an answers task"}.get(name, name)


def _say_stopping(sender: Any = None, sig: Any = None, how: Any = None, **_: Any) -> None:
    """Celery's ``worker_shutting_down`` (the main process, in the signal handler): what the
    stopping worker finishes. Celery said only "worker: Warm shutdown (MainProcess)"."""
    try:
        from celery.worker import state

        tasks = sorted(_in_hand(r) for r in list(state.active_requests))
    except Exception:  # a line, never a reason for the shutdown to fail
        tasks = []
    doing = (f"finishing {', '.join(tasks)}" if tasks else "no task in hand")
    if str(how) == "Cold":
        doing = f"cold shutdown, cutting short {', '.join(tasks)}" if tasks else "cold shutdown"
    logger.info("worker %s stopping (%s): %s; queued tasks stay in the broker for the other "
                "workers", sender or "", sig or "signal", doing)


def _say_stopped(sender: Any = None, **_: Any) -> None:
    """Celery's ``worker_shutdown`` (the main process, once its pool has stopped)."""
    logger.info("worker %s stopped", getattr(sender, "hostname", None) or "")


# The end of ``check_broker``'s line for a worker: facet serve's "unset it to run jobs in this
# process" made a worker refuse to start ("facet worker needs FACET_BROKER_URL").
WORKER_WAY_OUT = ("facet worker takes its tasks from that broker: the same FACET_BROKER_URL as "
                  "facet serve and facet index --background")


# The levels Celery's --loglevel takes (any case).
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", "FATAL")


def run(queues: str = "index,query", concurrency: int = 1, loglevel: str = "info",
        pool: str = "prefork", name: str | None = None) -> None:
    """Start a worker consuming ``queues`` until it is stopped (SIGTERM: warm shutdown).

    Raises:
        InvalidRequestError: an unknown queue or pool.
        UnknownModelError, DataError: a ``FACET_WORKER_PRELOAD`` name that cannot be loaded.
        UnavailableError: the broker, the result backend (``FACET_RESULT_BACKEND`` set apart
            from the broker) or the metadata database cannot be reached (said within seconds),
            or ``FACET_DEVICE=cuda`` without a GPU.
    """
    names = parse_queues(queues)
    if pool not in ("prefork", "solo", "threads"):
        raise InvalidRequestError(f"unknown pool {pool!r}; use prefork (default), solo or threads")
    if concurrency < 1:
        raise InvalidRequestError("--concurrency must be at least 1")
    # Celery's own check came after every start-up check, as a 93-line click traceback.
    if loglevel.strip().upper() not in LOG_LEVELS:
        raise InvalidRequestError(f"unknown log level {loglevel!r}; use "
                                  f"{', '.join(level.lower() for level in LOG_LEVELS)}")
    settings = get_settings()
    if not settings.broker_url:
        raise InvalidRequestError("facet worker needs FACET_BROKER_URL (e.g. "
                                  "redis://localhost:6379/0): the queue it takes tasks from")
    # What each pool process would otherwise find only after Celery said "ready" (a traceback
    # per process, and a healthcheck that stayed green): one line and the usual exit code.
    check_preload(settings)
    check_device(settings)
    from app.services.context import check_database

    check_database(settings)
    check_broker(settings, way_out=WORKER_WAY_OUT)
    # Unchecked, a worker with its result backend out of reach said "ready" and every result
    # it sent was lost (a query's client waited for FACET_WORKER_TIMEOUT_S). Unset, or the
    # broker's own URL: the broker just checked holds the results.
    check_result_backend(settings)
    raise_open_files_limit()  # before the pool forks: its processes inherit it
    from celery.signals import worker_shutdown, worker_shutting_down
    from celery.utils.nodenames import default_nodename, host_format

    from worker.app import celery_app

    # Facet's own lines when a worker stops (SIGTERM: Celery's warm shutdown), in its log.
    worker_shutting_down.connect(_say_stopping, dispatch_uid="facet-worker-stopping")
    worker_shutdown.connect(_say_stopped, dispatch_uid="facet-worker-stopped")

    # Unique per process by default; a container passes `--name facet@%h` (its hostname is
    # unique) so that its healthcheck can ping exactly this worker.
    name = name or f"facet-{os.getpid()}@{socket.gethostname()}"
    # The node name as Celery makes it of `-n` (%h, %n, %d expanded; "@<host>" added to a bare
    # name), so that this line and Celery's own name the same worker.
    node = host_format(default_nodename(name))
    from app import __version__

    # The version, as facet serve's line says it: during an upgrade (docs/deploy.md) the one
    # place that tells which workers still run the old one.
    logger.info("worker %s (facet %s): queues %s, %d process(es), data folder %s, store %s, "
                "database %s", node, __version__, ",".join(names), concurrency, settings.data_dir,
                settings.store_description(),
                # passwords masked, as facet serve's line; the SQLite file by its path
                settings.database_description(path=True))
    celery_app.worker_main(["worker", "-Q", ",".join(names), "-c", str(concurrency),
                            "-P", pool, "-l", loglevel.strip(), "-n", name, "--without-gossip",
                            "--without-mingle"])
