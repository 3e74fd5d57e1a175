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
