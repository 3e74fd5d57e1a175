"""The sweeper's log when a Redis lost its data (FLUSHALL, a restart without AOF).

Every queued chunk task of a job is lost at once then: the sweeper logged one WARNING per chunk
(56 lines for one job), each saying the task was "lost with a killed worker", where no worker
had been killed. One line per job now, with the count, naming both causes. A real redis-server
(the session's); the chunks SQL says are waiting are given (``stalled_chunks``)."""

from __future__ import annotations

import itertools
import logging

import pytest

from worker.recovery import OrphanSweeper

from .conftest import RedisServer

_DBS = itertools.count(40)  # clear of the stack fixture's numbers


def test_a_flushed_broker_is_one_line_per_job_naming_both_causes(
        redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    import redis

    import app.services.distributed as distributed

    client = redis.Redis.from_url(redis_server.url(next(_DBS)))
    client.flushdb()  # the broker lost every queued task: none is in a queue or unacked
    waiting = [(7, n) for n in range(56)] + [(9, 3)]
    monkeypatch.setattr(distributed, "stalled_chunks", lambda sessions: list(waiting))
    sent: list[tuple[int, int]] = []
    sweeper = OrphanSweeper(client, None, lambda j, n: sent.append((j, n)), interval=4.0)
    assert sweeper.sweep(now=100.0) == []  # missing once: a suspect, not sent yet
    with caplog.at_level(logging.WARNING, logger="worker.recovery"):
        resent = sweeper.sweep(now=104.0)
    assert resent == waiting and sent == waiting
    lines = [r.getMessage() for r in caplog.records if r.name == "worker.recovery"]
    assert len(lines) == 2, lines
    assert lines[0].startswith("56 chunks of job 7 (0-55): their tasks are in no queue and no "
                               "worker holds them"), lines[0]
    assert lines[1].startswith("chunk 3 of job 9: its task is in no queue"), lines[1]
    for line in lines:
        assert "killed" in line and "Redis flushed, or restarted without AOF persistence" in line
        assert line.endswith("sent again")
    client.flushdb()


def test_the_chunk_numbers_are_said_as_ranges() -> None:
    from worker.recovery import lost_message, number_ranges

    assert number_ranges([5, 0, 1, 2, 7, 8, 2]) == "0-2, 5, 7-8"
    assert lost_message(4, [1, 2, 3]).startswith("3 chunks of job 4 (1-3): ")


def test_workers_on_another_database_neither_hold_this_ones_sweep_nor_clear_its_suspects(
        redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """One lock and one suspects hash served every database on a broker: a worker on the wrong
    FACET_DATA_DIR won the lock at each sweep (it retries first once it holds it), swept only
    its own, empty database and cleared the suspects, so the right database's dropped planner
    task waited `queued` until that worker stopped (the worker review's full-stack run: 6
    minutes, then re-sent 2 minutes after its SIGTERM). Each database sweeps under its own
    keys now."""
    import redis

    import app.services.distributed as distributed
    from worker.recovery import database_tag

    client = redis.Redis.from_url(redis_server.url(next(_DBS)))
    client.flushdb()
    waiting = {"right": [(5, 0)], "wrong": []}  # by the sweeper's sessions
    monkeypatch.setattr(distributed, "stalled_chunks", lambda sessions: list(waiting[sessions]))
    sent: list[tuple[int, int]] = []
    right_url = f"sqlite:///{tmp_path / 'd1' / 'facet.db'}"
    right = OrphanSweeper(client, "right", lambda j, n: sent.append((j, n)), interval=4.0,
                          database=database_tag(right_url))
    wrong = OrphanSweeper(client, "wrong", lambda j, n: sent.append((j, n)), interval=4.0,
                          database=database_tag(f"sqlite:///{tmp_path / 'd2' / 'facet.db'}"))
    assert right.sweep(now=100.0) == []  # a suspect
    assert wrong.sweep(now=102.0) == []  # nothing of its own: clears its own suspects only
    assert right.sweep(now=104.0) == [(5, 0)] and sent == [(5, 0)]
    # Each takes its own lock: the wrong one holding its own leaves the right one's free.
    assert right.lock_key != wrong.lock_key
    assert client.set(wrong.lock_key, "wrong", nx=True, px=3600)
    assert client.set(right.lock_key, "right", nx=True, px=3600)
    # One database, one tag, however its path is spelt; a password is no part of it.
    monkeypatch.chdir(tmp_path)
    assert database_tag("sqlite:///d1/../d1/facet.db") == database_tag(right_url)
    assert database_tag("postgresql+psycopg://facet:one@db:5432/facet") == database_tag(
        "postgresql+psycopg://facet:two@db:5432/facet") != database_tag(
        "postgresql+psycopg://facet:one@db:5432/other")
    # The default port and the host's case are no other database; a server named in the query
    # (a socket folder, another port) is one (two clusters reached by socket had one tag).
    assert database_tag("postgresql://facet@localhost/facet") == database_tag(
        "postgresql://facet@LOCALHOST:5432/facet")
    assert database_tag("postgresql://facet@/facet?host=/var/run/postgresql") != database_tag(
        "postgresql://facet@/facet?host=/tmp&port=5433") != database_tag(
        "postgresql://facet@/facet?host=/tmp")
    # So is a database named in the query (libpq's dbname=): two of one socket had one tag.
    assert database_tag("postgresql:///?dbname=a&host=/tmp") != database_tag(
        "postgresql:///?dbname=b&host=/tmp")
    assert database_tag("postgresql:///?dbname=a&host=/tmp") == database_tag(
        "postgresql:///a?host=/tmp")
    client.flushdb()


def test_sweeps_failing_in_a_row_are_a_warning_then_their_end_is_said(
        redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    """Every failed sweep was a DEBUG line: sweeps failing for good (a database error, a bug)
    left chunks lost with a killed worker unsent, and nothing at INFO or above said so (the logs
    review of the seventh session of 2026-12-06). A broker nothing listens on, then the
    session's redis-server."""
    import socket

    import redis

    import app.services.distributed as distributed
    from worker.recovery import FAILURES_REWARNED, FAILURES_WARNED

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = redis.Redis.from_url(f"redis://127.0.0.1:{port}/0", socket_connect_timeout=0.5)
    sweeper = OrphanSweeper(down, None, lambda j, n: None, interval=0.01)
    with caplog.at_level(logging.DEBUG, logger="worker.recovery"):
        for _ in range(FAILURES_WARNED + FAILURES_REWARNED):
            sweeper.turn()
        monkeypatch.setattr(distributed, "stalled_chunks", lambda sessions: [])
        sweeper.client = redis.Redis.from_url(redis_server.url(next(_DBS)))
        sweeper.turn()
        sweeper.turn()
    records = [r for r in caplog.records if r.name == "worker.recovery"]
    warned = [r.getMessage() for r in records if r.levelno == logging.WARNING]
    assert len(warned) == 2, warned  # at the 3rd failure in a row, then 60 later
    assert warned[0].startswith(f"orphan sweeps have failed {FAILURES_WARNED} times in a row "
                                "(last: ConnectionError: ")
    assert warned[1].startswith(f"orphan sweeps have failed {FAILURES_WARNED + FAILURES_REWARNED} "
                                "times in a row")
    assert "is not sent again until one succeeds" in warned[0]
    said = [r.getMessage() for r in records if r.levelno == logging.INFO]
    assert said == [f"orphan sweeps work again after {FAILURES_WARNED + FAILURES_REWARNED} "
                    "failed in a row"], said
