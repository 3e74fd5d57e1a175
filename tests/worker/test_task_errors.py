"""The index-chunk task's handling of a transient error, without Redis or a worker."""

from __future__ import annotations

import logging
import sqlite3

import pytest
from celery.exceptions import Retry
from sqlalchemy.exc import OperationalError


def test_a_chunk_retried_on_a_locked_database_logs_the_domain_line(monkeypatch, caplog) -> None:
    """The worker's retry warning carried SQLAlchemy's whole error: the autoflush note, the
    statement and a long parameters line. (A stand-in service: only the task's handling of the
    error is under test; the real chunk path is tested with Redis and workers in test_worker.py.)"""
    import worker.tasks as tasks

    released: list[tuple[int, int]] = []

    class Service:

        def run_chunk(self, job_id: int, number: int):
            raise OperationalError("UPDATE documents SET n_chunks=?", (3,) * 50,
                                   sqlite3.OperationalError("database is locked"))

        def release_claim(self, job_id: int, number: int) -> None:
            released.append((job_id, number))

    monkeypatch.setattr(tasks, "chunk_service", Service)
    with caplog.at_level(logging.WARNING, logger="worker.tasks"), pytest.raises(Retry):
        tasks.index_chunk.run(4, 2)
    assert released == [(4, 2)]
    [record] = caplog.records
    assert record.getMessage().startswith("chunk 2 of job 4: the metadata database (SQLite) "
                                          "stayed locked")
    assert "UPDATE documents" not in record.getMessage()
