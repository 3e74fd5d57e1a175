"""``facet worker``: check the request, then run a Celery worker in this process."""

from __future__ import annotations

import logging
import os
import socket

from app.errors import InvalidRequestError
from app.remote import QUEUES, check_broker
from app.settings import get_settings

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


def run(queues: str = "index,query", concurrency: int = 1, loglevel: str = "info",
        pool: str = "prefork", name: str | None = None) -> None:
    """Start a worker consuming ``queues`` until it is stopped (SIGTERM: warm shutdown).

    Raises:
        InvalidRequestError: an unknown queue or pool.
        UnavailableError: the broker cannot be reached (said within seconds).
    """
    names = parse_queues(queues)
    if pool not in ("prefork", "solo", "threads"):
        raise InvalidRequestError(f"unknown pool {pool!r}; use prefork (default), solo or threads")
    if concurrency < 1:
        raise InvalidRequestError("--concurrency must be at least 1")
    settings = get_settings()
    if not settings.broker_url:
        raise InvalidRequestError("facet worker needs FACET_BROKER_URL (e.g. "
                                  "redis://localhost:6379/0): the queue it takes tasks from")
    check_broker(settings)
    from celery.utils.nodenames import default_nodename, host_format

    from worker.app import celery_app

    # Unique per process by default; a container passes `--name facet@%h` (its hostname is
    # unique) so that its healthcheck can ping exactly this worker.
    name = name or f"facet-{os.getpid()}@{socket.gethostname()}"
    # The node name as Celery makes it of `-n` (%h, %n, %d expanded; "@<host>" added to a bare
    # name), so that this line and Celery's own name the same worker.
    node = host_format(default_nodename(name))
    logger.info("worker %s: queues %s, %d process(es), data folder %s, store %s, database %s",
                node, ",".join(names), concurrency, settings.data_dir,
                settings.store_description(),
                # passwords masked, as facet serve's line; the SQLite file by its path
                settings.database_description(path=True))
    celery_app.worker_main(["worker", "-Q", ",".join(names), "-c", str(concurrency),
                            "-P", pool, "-l", loglevel, "-n", name, "--without-gossip",
                            "--without-mingle"])
