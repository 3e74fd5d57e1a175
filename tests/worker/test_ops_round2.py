"""A worker across a broker restart says it lost and regained its connection, not Celery's
ten-line deprecation notice about a setting Facet chose (``worker/app.py``)."""

from __future__ import annotations

import time

from worker.app import make_celery

from .conftest import RedisServer, Stack


def test_the_connection_loss_settings_are_chosen(stack: Stack) -> None:
    conf = make_celery(stack.settings()).conf
    # Today's behaviour: a running task goes on when the connection drops; a worker started
    # before its broker waits for it.
    assert conf.worker_cancel_long_running_tasks_on_connection_loss is False
    assert conf.broker_connection_retry_on_startup is True


def test_a_redis_restart_logs_no_deprecation_warning(stack: Stack,
                                                     redis_server: RedisServer) -> None:
    worker = stack.start_worker(queues="query")
    connected = worker.text().count("Connected to redis://")
    assert connected >= 1, worker.text()
    redis_server.stop()
    time.sleep(1.0)
    redis_server.start()
    deadline = time.monotonic() + 60
    while worker.text().count("Connected to redis://") <= connected:
        assert time.monotonic() < deadline, f"the worker did not reconnect:\n{worker.text()}"
        time.sleep(0.2)
    log = worker.text()
    assert "Connection to broker lost" in log  # the restart was seen
    assert "CPendingDeprecationWarning" not in log, log
    assert "optional breaking change" not in log, log
