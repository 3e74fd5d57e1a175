"""A `facet serve` stopping (``Facet.close``): its wait holds to what it logs, an overdue job's
queued encoding is dropped and the job records itself interrupted, jobs still queued are each
said in a WARNING with the command that resends them, and an empty collection a never-run
first job made is removed. Real minilm, edge
store, SQLite in a temp folder; the running job's model is minilm slowed by a sleep per text
(a real slow model, backbone-mean on a CPU, is impractical in a test)."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest

from app.core import Facet
from app.encoding import BatchingQueryEncoder, EmbedderCache
from app.jobs import ThreadJobRunner
from app.services.indexing import IndexOptions, PreparedJob, cancelled_message
from app.settings import FacetSettings
from embedders.contract import Role
from tests.app.gated import wait_for


class Slow:
    """minilm, sleeping ``per_text`` seconds per document text it encodes."""

    def __init__(self, model: Any, per_text: float) -> None:
        self.model = model
        self.per_text = per_text

    def encode(self, texts: Any, **kwargs: Any) -> Any:
        if Role.parse(kwargs.get("role", Role.QUERY)) is Role.DOCUMENT:
            time.sleep(self.per_text * len(texts))
        return self.model.encode(texts, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)


def _corpus(root: Path, count: int, word: str = "trains") -> Path:
    root.mkdir(parents=True)
    for i in range(count):
        (root / f"d{i:03d}.txt").write_text(f"note {i} about {word}")
    return root


@pytest.fixture
def settings(tmp_path: Path) -> FacetSettings:
    return FacetSettings(data_dir=tmp_path / "data", chunk_tokens=64, chunk_overlap=8)


def _serving(settings: FacetSettings, minilm: Any, per_text: float) -> Facet:
    cache = EmbedderCache("cpu")
    cache.put("minilm", Slow(minilm, per_text))  # type: ignore[arg-type]
    return Facet.for_serving(settings, embedders=cache)


def test_an_overdue_jobs_encoding_is_dropped_and_it_records_itself_interrupted(
        minilm, settings, tmp_path, monkeypatch, caplog) -> None:
    """After its 30 s wait, the close finished the job's encoding first (the encoder's
    ``join(timeout=60)``): the server took 45 s to exit, unsaid, and the job's row never said
    interrupted. Here the wait is 0.5 s and a piece of 32 texts takes 4.8 s."""
    monkeypatch.setattr(ThreadJobRunner, "stop_wait_s", 0.5)
    monkeypatch.setattr(ThreadJobRunner, "overdue_wait_s", 3.0, raising=False)
    src = _corpus(tmp_path / "src", 64)
    server = _serving(settings, minilm, per_text=0.15)
    encoder = server.encoder
    assert isinstance(encoder, BatchingQueryEncoder)
    job = server.submit_index(src, "big", IndexOptions(batch_chunks=64))
    wait_for(lambda: encoder.stats.batches >= 1, timeout=60)  # its first piece timed
    time.sleep(0.3)  # in its second piece
    caplog.set_level(logging.INFO)
    t0 = time.monotonic()
    server.close(reason="the server stopping")
    took = time.monotonic() - t0
    assert took < 2.5, f"the close took {took:.1f}s (its wait: 0.5s, then 3s at most)"
    said = caplog.text
    assert f"job {job.id} did not stop within 0.5s; dropping the encoding queued for it and " \
           "waiting up to 3s more for it to record itself interrupted" in said, said
    assert "shows interrupted once this process ends" not in said, said
    with Facet(settings, embedders=EmbedderCache("cpu")) as after:
        stopped = after.job(job.id)
        assert stopped.state == "interrupted", stopped
        assert (stopped.message or "").startswith("stopped (the server stopping) with 0 "), stopped


def test_jobs_queued_at_shutdown_are_said_and_their_empty_new_collection_goes(
        minilm, settings, tmp_path, monkeypatch, caplog) -> None:
    """Queued jobs were failed silently ("submit it again", no log line, no command), and the
    new collection one had made stayed, empty, its searches 404 "job N (failed) has not
    written its first documents"."""
    monkeypatch.setattr(ThreadJobRunner, "stop_wait_s", 10.0)
    server = _serving(settings, minilm, per_text=0.05)
    with Facet(settings, embedders=EmbedderCache("cpu")) as first:  # an existing collection
        first.embedder_cache.put("minilm", minilm)
        first.index(_corpus(tmp_path / "old", 2, "ships"), "old")
    running = server.submit_index(_corpus(tmp_path / "src", 40), "big",
                                  IndexOptions(batch_chunks=4))
    fresh = server.submit_index(_corpus(tmp_path / "fresh", 2, "boats"), "fresh")
    more = server.submit_index(_corpus(tmp_path / "more", 2, "cars"), "old")
    wait_for(lambda: server.job(running.id).state == "running", timeout=60)
    caplog.set_level(logging.INFO)
    server.close(reason="the server stopping")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    said_fresh = [w for w in warnings if w.startswith(f"job {fresh.id} into fresh ")]
    assert said_fresh == [
        f"job {fresh.id} into fresh was still queued when the server stopped: not run (its "
        f"empty collection fresh removed); run `facet index {tmp_path / 'fresh'} --collection "
        "fresh --embedder minilm` (or submit the job) again"], warnings
    said_more = [w for w in warnings if w.startswith(f"job {more.id} into old ")]
    assert said_more == [
        f"job {more.id} into old was still queued when the server stopped: not run; run "
        f"`facet index {tmp_path / 'more'} --collection old --embedder minilm` (or submit the "
        "job) again"], warnings
    with Facet(settings, embedders=EmbedderCache("cpu")) as after:
        names = {c.name for c in after.collections()}
        assert "fresh" not in names and {"big", "old"} <= names, names
        failed = after.job(more.id)
        assert failed.state == "failed" and "--collection old" in (failed.message or ""), failed
        assert after.job(running.id).state in ("interrupted", "completed")


class _Held:
    """A runner that keeps every job queued (never runs one)."""

    def submit(self, job: PreparedJob) -> None:
        pass

    def close(self) -> None:
        pass


def test_removal_and_delete_log_lines_read_as_words(cache, settings, tmp_path, caplog) -> None:
    """"removed 1 documents (2 chunks)", "deleted collection c (0 documents, None points)"."""
    caplog.set_level(logging.INFO)
    with Facet(settings, embedders=cache) as facet:
        facet.index(_corpus(tmp_path / "one", 1), "one")
        facet.remove_documents("one", [str(tmp_path / "one" / "d000.txt")])
    with Facet(settings, embedders=cache, jobs=_Held()) as facet:
        queued = facet.submit_index(_corpus(tmp_path / "never", 1), "never")
        facet.cancel_job(queued.id)
        facet.delete_collection("never")
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("removed 1 document (1 chunk) from one: job ") for m in said), said
    assert "deleted collection never (0 documents, no points)" in said, said


def test_a_job_cancelled_before_indexing_anything_says_so_without_resume() -> None:
    assert cancelled_message(0) == "cancelled before any document was indexed: nothing was written"
    assert cancelled_message(2).startswith("cancelled after 2 documents indexed; index the same")
    # One document is one (the UI's bar read "cancelled after 1 documents indexed").
    assert cancelled_message(1).startswith("cancelled after 1 document indexed; index the same")


def test_a_job_submitted_as_the_runner_closes_is_run_or_abandoned_never_lost() -> None:
    """``submit`` checked ``closed`` under the lock and put the job after it: a ``close`` in
    between (a POST /jobs as SIGTERM arrives) drained the queue without it, and the job went in
    behind the stop mark, neither run nor abandoned (``busy`` for ever, its row ``queued``). The
    put is held back here until ``close`` has started."""
    import threading
    from types import SimpleNamespace

    ran: list[int] = []
    abandoned: list[int] = []

    def run(job: Any) -> None:
        time.sleep(0.2)
        ran.append(job.job_id)

    runner = ThreadJobRunner(run, on_abandon=lambda job: abandoned.append(job.job_id))
    def job(job_id: int) -> Any:
        return SimpleNamespace(job_id=job_id, collection="c", source="s", embedder="e")

    runner.submit(job(1))
    put, gate, reached = runner._queue.put, threading.Event(), threading.Event()

    def held_put(item: Any, *args: Any, **kwargs: Any) -> None:
        if item is not None and item[0].job_id == 2:
            reached.set()
            gate.wait(5)
        put(item, *args, **kwargs)

    runner._queue.put = held_put  # type: ignore[method-assign]
    submitter = threading.Thread(target=runner.submit, args=(job(2),))
    submitter.start()
    assert reached.wait(5)  # past its check of ``closed``, held at the put
    closer = threading.Thread(target=runner.close)
    closer.start()
    time.sleep(0.05)
    gate.set()
    submitter.join(5)
    closer.join(5)
    assert (ran, abandoned) == ([1], [2])
    assert runner._queue.unfinished_tasks == 0 and not runner.busy
