"""``facet worker`` checks its result backend before Celery starts: a ``FACET_RESULT_BACKEND``
set apart from the broker and out of reach is refused in one line (exit 7), as the broker is;
one in reach (or none: the broker holds the results) starts. Real parts: redis-server,
``facet worker`` subprocesses, minilm."""

from __future__ import annotations

import sys

from .conftest import _DBS, RedisServer, Stack, free_port
from .test_wstart_worker import _one_error_line, _run


def test_facet_worker_refuses_a_result_backend_out_of_reach(stack: Stack,
                                                            redis_server: RedisServer) -> None:
    """It said "ready" with its result backend out of reach: every task's result was lost, and
    a query's client waited FACET_WORKER_TIMEOUT_S for it."""
    port = free_port()
    code, out = _run([sys.executable, "-m", "app", "worker", "--queues", "query"],
                     dict(stack.env, FACET_RESULT_BACKEND=f"redis://:secret@127.0.0.1:{port}/0"))
    line = _one_error_line(out)
    assert code == 7, out
    assert f"cannot reach the result backend at redis://:***@127.0.0.1:{port}/0" in line, line
    assert "the broker is fine" in line and "secret" not in line, line

    # A result backend in reach, set apart from the broker: the worker starts, and a query's
    # result comes back through it.
    from app.remote import CeleryQueryEncoder

    stack.env["FACET_RESULT_BACKEND"] = redis_server.url(next(_DBS))
    stack.start_worker(queues="query")
    encoder = CeleryQueryEncoder(stack.settings(encode_on_workers=True, worker_timeout_s=60))
    try:
        assert encoder.encode(["hello"], embedder="minilm").shape == (1, 384)
    finally:
        encoder.close()


def test_an_unknown_log_level_is_one_line_before_anything_is_reached() -> None:
    """Celery's own check of -l came after every start-up check (database, broker), as a
    93-line click traceback, exit 1."""
    from tests.app.cli_runner import invoke_cli

    done = invoke_cli("worker", "--queues", "index", "-l", "verbose",
                      env={"FACET_BROKER_URL": "redis://127.0.0.1:1/0"})  # (never reached)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == ("error: unknown log level 'verbose'; use debug, info, warning, error, "
                                   "critical, fatal"), done.stderr
