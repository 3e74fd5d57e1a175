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


def test_a_claim_that_cannot_be_released_while_the_database_is_out_does_not_drop_the_task(
        monkeypatch, caplog) -> None:
    """The PostgreSQL exploration of the sixth session of 2026-12-05: with the database stopped,
    ``release_claim`` met the same outage and its error escaped before the retry, so ~60 chunk
    tasks failed with 250-line tracebacks and were acknowledged (dropped); the job stalled until
    the sweeper re-sent them, blaming a killed worker or a flushed Redis. The claim lapses on
    its own (``claimed_until``): the retry is sent all the same."""
    import worker.tasks as tasks

    down = OperationalError("SELECT 1", (), sqlite3.OperationalError("database is locked"))

    class Service:

        def run_chunk(self, job_id: int, number: int):
            raise down

        def release_claim(self, job_id: int, number: int) -> None:
            raise down

    monkeypatch.setattr(tasks, "chunk_service", Service)
    with caplog.at_level(logging.WARNING, logger="worker.tasks"), pytest.raises(Retry):
        tasks.index_chunk.run(4, 2)
    [record] = caplog.records
    assert record.getMessage().startswith("chunk 2 of job 4: the metadata database (SQLite) "
                                          "stayed locked"), record.getMessage()


def test_waits_for_a_claim_or_a_writer_do_not_use_up_the_transient_retries(monkeypatch) -> None:
    """Celery's ``request.retries`` counts every retry: a planner that had waited 8 times behind
    another job's lease failed the job on its first transient error ("gave up after 8 retries",
    a real worker and redis-server in the review's run). The task carries its own counts: a wait
    keeps them, a transient error adds one, and only the transient ones are the limit."""
    import worker.tasks as tasks
    from app.services.distributed import ChunkBusy, WriterBusy

    sent: list[tuple[float, dict[str, int]]] = []

    def retry(_task, _what: str, countdown: float, tries: dict[str, int]) -> Retry:
        sent.append((countdown, tries))
        return Retry("retry", None)

    monkeypatch.setattr(tasks, "_retry", retry)
    failed: list[str] = []
    raised: list[Exception] = []

    class Service:
        settings = None

        def run_chunk(self, job_id: int, number: int):
            raise raised[-1]

        def release_claim(self, job_id: int, number: int) -> None:
            pass

        def fail_chunk(self, job_id: int, number: int, message: str) -> None:
            failed.append(message)

    monkeypatch.setattr(tasks, "chunk_service", Service)
    locked = OperationalError("SELECT 1", (), sqlite3.OperationalError("database is locked"))
    raised.append(ChunkBusy("claimed by another worker", retry_in_s=5.0))
    with pytest.raises(Retry):
        tasks.index_chunk.run(4, 2, transient=3, gone=1)  # (the 20th wait: counts unchanged)
    raised.append(locked)
    with pytest.raises(Retry):
        tasks.index_chunk.run(4, 2, transient=3, gone=1)
    assert sent[0] == (5.0, {"transient": 3, "gone": 1})  # (the transient one's delay is jittered)
    assert [tries for _, tries in sent] == [{"transient": 3, "gone": 1}, {"transient": 4, "gone": 1}]
    with pytest.raises(OperationalError):
        tasks.index_chunk.run(4, 2, transient=tasks.MAX_TRANSIENT_RETRIES)
    assert failed and failed[0].startswith("gave up after 8 retries")
    sent.clear()

    class Planner:
        def plan(self, _prepared):
            raise raised[-1]

    monkeypatch.setattr(tasks, "chunk_service", Planner)
    monkeypatch.setattr(tasks, "_stopped_for_room", lambda *_args: None)
    monkeypatch.setattr(tasks.PreparedJob, "from_dict", staticmethod(lambda _payload: type("P", (), {"job_id": 7})()))
    raised.append(WriterBusy("waiting for job 6", retry_in_s=30.0))
    with pytest.raises(Retry):
        tasks.index_job.run({}, transient=0)
    raised.append(locked)
    with pytest.raises(Retry):
        tasks.index_job.run({}, transient=0)
    assert sent[0] == (30.0, {"transient": 0, "gone": 0})
    assert [tries for _, tries in sent] == [{"transient": 0, "gone": 0}, {"transient": 1, "gone": 0}]


def test_requests_queued_behind_the_senders_threads_wait_one_timeout_in_all(redis_server, tmp_path) -> None:
    """``CeleryQueryEncoder.submit`` (``/v1/embeddings``) runs on 8 threads: with no worker, the
    9th to 16th of 16 requests failed after twice FACET_WORKER_TIMEOUT_S, saying "within 3s".
    A real redis-server, no worker: every request fails about one timeout after it was made."""
    import time
    from concurrent.futures import wait

    from app.errors import UnavailableError
    from app.remote import CeleryQueryEncoder
    from app.settings import FacetSettings

    from .conftest import _DBS

    encoder = CeleryQueryEncoder(FacetSettings(data_dir=tmp_path / "data", broker_url=redis_server.url(next(_DBS)),
                                               worker_timeout_s=3, encode_on_workers=True))
    try:
        start = time.monotonic()
        futures = [encoder.submit([f"q{i}"], embedder="minilm") for i in range(16)]
        ended: list[float] = []
        for future in futures:
            future.add_done_callback(lambda _f: ended.append(time.monotonic() - start))
        wait(futures, timeout=30)
        assert all(isinstance(f.exception(), UnavailableError) for f in futures)
        assert max(ended) < 5, sorted(ended)  # (twice the timeout before: over 6 s)
    finally:
        encoder.close()


def test_a_chunk_whose_failure_cannot_be_recorded_is_tried_again_not_dropped(monkeypatch, caplog) -> None:
    """PostgreSQL stopped for longer than the retries (~2 minutes): giving up needs the database
    too, and ``fail_chunk``'s error escaped, a 260-line traceback a chunk; the task was dropped
    and re-sent by the sweeper, which blamed a killed worker (the worker-and-PostgreSQL
    exploration). It is tried again at the longest delay, with one line."""
    import worker.tasks as tasks

    down = OperationalError("SELECT 1", (), sqlite3.OperationalError("database is locked"))
    sent: list[tuple[float, dict[str, int]]] = []

    def retry(_task, _what: str, countdown: float, tries: dict[str, int]) -> Retry:
        sent.append((countdown, tries))
        return Retry("retry", None)

    class Service:
        def run_chunk(self, job_id: int, number: int):
            raise down

        def release_claim(self, job_id: int, number: int) -> None:
            raise down

        def fail_chunk(self, job_id: int, number: int, message: str) -> None:
            raise down

    monkeypatch.setattr(tasks, "_retry", retry)
    monkeypatch.setattr(tasks, "chunk_service", Service)
    with caplog.at_level(logging.WARNING, logger="worker.tasks"), pytest.raises(Retry):
        tasks.index_chunk.run(4, 2, transient=tasks.MAX_TRANSIENT_RETRIES, gone=1)
    assert [tries for _, tries in sent] == [{"transient": tasks.MAX_TRANSIENT_RETRIES + 1, "gone": 1}]
    assert sent[0][0] >= 30  # the longest delay (jittered)
    [record] = caplog.records
    assert "failure cannot be recorded either: retry in" in record.getMessage(), record.getMessage()
    # For a bounded time: an error that lasts reads as transient too (SQLite's "attempt to write
    # a readonly database"), and it looped for good, three lines a try (the SQL statement).
    lasting = OperationalError("UPDATE job_chunks SET state=?", ("x",) * 20,
                               sqlite3.OperationalError("attempt to write a readonly database"))
    Service.run_chunk = Service.release_claim = Service.fail_chunk = (  # type: ignore[method-assign]
        lambda *_args: (_ for _ in ()).throw(lasting))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="worker.tasks"):
        last = tasks.MAX_TRANSIENT_RETRIES + tasks.UNRECORDED_RETRIES
        with pytest.raises(Retry):
            tasks.index_chunk.run(4, 2, transient=last - 1)
        outcome = tasks.index_chunk.run(4, 2, transient=last)
    assert outcome["outcome"] == "gone" and "readonly database" in outcome["message"], outcome
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and all("\n" not in m and "UPDATE" not in m for m in said), said
    assert said[0].startswith("chunk 2 of job 4: attempt to write a readonly database; still failing")
    assert said[1].endswith("left to the sweeper, which sends it again once the job is stalled"), said



def test_an_outage_a_worker_meets_keeps_its_wait_on_the_way_back() -> None:
    """A worker's error travels as ``{"type", "message"}`` and is rebuilt by its class: an
    outage's ``retry_after_s`` (the server's 503 ``Retry-After``) was lost on the way; a
    missing part's stays None."""
    from app.errors import BusyError, UnavailableError
    from app.remote import _error_from
    from worker.tasks import _error

    outage = _error_from(_error(UnavailableError("cannot reach Qdrant", retry_after_s=5.0))["error"])
    assert type(outage) is UnavailableError and outage.retry_after_s == 5.0, outage
    missing = _error_from(_error(UnavailableError("no GPU here"))["error"])
    assert type(missing) is UnavailableError and missing.retry_after_s is None
    assert str(missing) == "no GPU here"
    assert type(_error_from(_error(BusyError("full"))["error"])) is not BusyError  # (as before)


def test_another_workers_hold_is_a_quiet_wait_and_another_database_warns_once(monkeypatch,
                                                                              caplog) -> None:
    """Two workers on the embedded store: the second logged a WARNING per chunk it retried
    (22 in one job), advising a web app's several workers; a worker on another database logged
    20 long WARNINGs a task, 3 s apart (the worker exploration of the third session of
    2026-12-07). The first is INFO, worded for a worker; the second warns on the first try
    only. (Stand-in services, as above: the task's handling alone is under test.)"""
    import worker.tasks as tasks
    from app.errors import ConflictError
    from app.services.distributed import JobGone
    from indexer.errors import StoreBusyError
    from indexer.store import _busy_message

    holder = {"pid": 17372, "host": "vm", "command": "facet worker"}
    held = StoreBusyError(_busy_message("c2w", holder), "c2w", holder)
    assert str(held).endswith("; a worker writes it, and the others wait their turn (with the "
                              "vectors in a Qdrant server, FACET_QDRANT_URL, workers write side "
                              "by side)"), str(held)
    raised: list[BaseException] = []

    class Service:

        def run_chunk(self, job_id: int, number: int):
            raise raised[0]

        def release_claim(self, job_id: int, number: int) -> None:
            pass

    monkeypatch.setattr(tasks, "chunk_service", Service)
    monkeypatch.setattr(tasks, "OTHER_DATABASE_COUNTDOWN_S", 0)
    levels = {}
    for name, error, gone in (
            ("worker", ConflictError(str(held)), 0), ("server", ConflictError("held"), 0),
            ("elsewhere, first", JobGone("job 9 is not in this worker's database", elsewhere=True), 0),
            ("elsewhere, later", JobGone("job 9 is not in this worker's database", elsewhere=True), 5)):
        if name.startswith("worker"):
            error.__cause__ = held
        elif name == "server":
            error.__cause__ = StoreBusyError("held", "c2w", {"command": "facet serve"})
        raised[:] = [error]
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="worker.tasks"), pytest.raises(Retry):
            tasks.index_chunk.run(12, 0, 0, gone)
        levels[name] = [r.levelname for r in caplog.records]
    assert levels == {"worker": ["INFO"], "server": ["WARNING"], "elsewhere, first": ["WARNING"],
                      "elsewhere, later": ["INFO"]}, levels
