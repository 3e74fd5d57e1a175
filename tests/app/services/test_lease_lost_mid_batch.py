"""A writer that loses its lease while it works writes nothing more (the paused-writer
exploration of the third session of 2026-12-02). A process stalled past the lease's time
(SIGSTOP, a frozen VM, a laptop's lid) most often stops mid-encode; another host's job then takes
the collection over. On SIGCONT the job checked its lease only before the *next* batch: the batch
it had been encoding was written over the new writer's (70 documents, 160 points in the
exploration), and a stall in the last batch was never noticed at all: the job ran its sync, which
removed what the new writer had just indexed, and ended ``completed``.

The stall is made exact: inside the real encode (``_encode_chunks``) or at the real progress
call after the last batch, another host's job takes the lease as it does once the lease has
expired (``leases.acquire``). A real takeover needs two hosts on one database; with the
embedded store a second process is refused by the store folder's lock first, so the other job
is a row of the same database, as a worker on another host would write it. The rest is real:
minilm, SQLite, the edge store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from app.core import Facet
from app.errors import ConflictError
from app.services import leases
from app.services.context import EmbedderCache
from app.services.indexing import IndexOptions, IndexService, Progress
from app.settings import FacetSettings
from indexer import metadata as md

from .conftest import write_corpus

LOST = r"^job \d+ lost the lease of 'c' \(no heartbeat for 60s: was this process stalled\?\) " \
       r"and another writer took over; it stopped before writing more$"


@pytest.fixture
def facet(minilm, tmp_path: Path) -> Iterator[Facet]:
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    with Facet(FacetSettings(data_dir=tmp_path / "data", chunk_tokens=64, chunk_overlap=8),
               embedders=cache) as f:
        yield f


def _taken_over(sessions: Any) -> int:
    """Another host's job takes collection ``c`` over, as once this one's lease has expired
    (``sessions``: the metadata's session factory); its id."""
    with sessions() as s:
        coll = md.get_collection(s, "c")
        assert coll is not None
        other = md.IndexJob(collection_id=coll.id, source="/elsewhere", embedder="minilm",
                            state="running", runner="inline", host="other-host", pid=4242)
        s.add(other)
        s.execute(update(md.Collection).where(md.Collection.id == coll.id)
                  .values(lease_expires_at=md.utcnow()))
        s.commit()
        assert leases.acquire(s, coll.id, other.id, 600.0) is None
        return int(other.id)


def _counts(facet: Facet, source: Path) -> tuple[int, int, int, str, str | None]:
    """Documents indexed, chunks recorded, the job's documents indexed, its state and message."""
    with facet.indexing.sessions() as s:
        coll = md.get_collection(s, "c")
        assert coll is not None
        job = s.query(md.IndexJob).filter_by(source=str(source)).one()
        return (md.count_documents(s, coll.id, "indexed"), md.count_chunks(s, coll.id),
                job.docs_indexed, job.state, job.message)


def test_a_batch_encoded_across_a_lost_lease_is_not_written(
        facet: Facet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    write_corpus(tmp_path / "src", 6)
    real = IndexService._encode_chunks
    calls: list[int] = []
    before: list[int] = []  # documents indexed when the stall began

    def encode(self: IndexService, texts: list[str], *args: Any, **kwargs: Any) -> Any:
        calls.append(len(texts))
        if len(calls) == 2:  # stalled past the ttl while encoding the second batch
            _taken_over(facet.indexing.sessions)
            with facet.indexing.sessions() as s:
                coll = md.get_collection(s, "c")
                assert coll is not None
                before.append(md.count_documents(s, coll.id, "indexed"))
        return real(self, texts, *args, **kwargs)

    monkeypatch.setattr(IndexService, "_encode_chunks", encode)
    with pytest.raises(ConflictError, match=LOST):
        facet.index(tmp_path / "src", "c", IndexOptions(embedder="minilm", batch_chunks=3))
    assert len(calls) == 2
    indexed, chunks, job_indexed, state, message = _counts(facet, tmp_path / "src")
    # Only the first batch, written while the lease was held, is in: nothing of the second
    # (the old code wrote it: (4, 4, [2])). Its documents stay as the batch marked them,
    # `pending`, for the writer that took over: putting them back deleted rows that writer may
    # have read already, and its write then failed (StaleDataError) with its points in the
    # store and no rows for them (the clock exploration of the fourth session of 2026-12-02).
    assert indexed == job_indexed == before[0] == calls[0], (indexed, job_indexed, before, calls)
    assert facet.context.store.count("c") == chunks == calls[0]
    with facet.indexing.sessions() as s:
        coll = md.get_collection(s, "c")
        assert coll is not None and md.count_documents(s, coll.id, "pending") == calls[1]
    assert state == "failed" and message is not None and "lost the lease" in message, (state, message)
    assert "lost the lease of collection 'c'" in caplog.text  # by name (its id meant nothing)


def test_a_lease_lost_after_the_last_batch_stops_before_the_sync(
        facet: Facet, tmp_path: Path) -> None:
    """The sync of a folder removes what is no longer in it: run by a job that had lost the
    collection, it removed the new writer's documents, and the job said ``completed``."""
    write_corpus(tmp_path / "src", 3)
    facet.index(tmp_path / "src", "c", IndexOptions(embedder="minilm"))
    (tmp_path / "src" / "doc002.txt").unlink()  # the sync would remove it...
    write_corpus(tmp_path / "src", 2, words=30)  # ...once this changed content is in
    taken: list[int] = []

    def progress(p: Progress) -> None:
        if p.stage is None and p.docs_done >= 2 and not taken:  # after the last batch went in
            taken.append(_taken_over(facet.indexing.sessions))

    with pytest.raises(ConflictError, match=LOST):
        facet.index(tmp_path / "src", "c", IndexOptions(embedder="minilm"), progress=progress)
    assert taken
    with facet.indexing.sessions() as s:
        coll = md.get_collection(s, "c")
        assert coll is not None
        kept = {d.key for d in s.query(md.Document).filter_by(collection_id=coll.id)}
        job = s.query(md.IndexJob).filter_by(source=str(tmp_path / "src")).order_by(
            md.IndexJob.id.desc()).first()
        assert job is not None
        state = job.state
    assert str(tmp_path / "src" / "doc002.txt") in kept  # not synced away by the stalled job
    assert state == "failed", state  # (the old code: "completed")


def test_a_chunk_task_encoded_across_a_lost_lease_writes_nothing(
        make_ctx, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same for a worker's chunk task (its lease is the job's, renewed by every chunk
    task of it): a chunk whose worker stalled mid-encode while another job took the collection
    over is failed unwritten, as one that finds the lease taken when it starts is."""
    from app.services.collections import CollectionService
    from app.services.distributed import ChunkedIndexService

    write_corpus(tmp_path / "src", 4)
    ctx = make_ctx()
    service = ChunkedIndexService(ctx)
    prepared = IndexService(ctx).prepare(tmp_path / "src", "c", runner="celery")
    first, second = service.plan(prepared, 2)
    assert service.run_chunk(prepared.job_id, first).outcome == "done"
    written = ctx.store.count("c")
    real = IndexService._encode_chunks

    def encode(self: IndexService, texts: list[str], *args: Any, **kwargs: Any) -> Any:
        _taken_over(ctx.sessions)  # another host's job takes the collection over meanwhile
        return real(self, texts, *args, **kwargs)

    monkeypatch.setattr(IndexService, "_encode_chunks", encode)
    outcome = service.run_chunk(prepared.job_id, second)
    assert outcome.outcome == "failed", outcome
    assert "lost the lease of 'c'" in (outcome.message or ""), outcome.message
    assert ctx.store.count("c") == written  # nothing of the second chunk (the old code: done)
    info = CollectionService(ctx).get("c")
    assert info.chunks == written and info.documents_indexed == 2, info


def test_a_chunk_whose_documents_the_new_writer_indexed_leaves_them_indexed(
        make_ctx, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's chunk stalls mid-encode past its lease; the user runs `facet index` again, as
    the "stalled" hint says, and that job indexes the chunk's documents. The stalled chunk then
    found the lease gone and failed as any chunk error does: every document of it was marked an
    error (``facet documents``: indexed, with the stale job's error) and the collection counted
    them failed (documents_failed 2, documents_indexed 0). They are the new job's: untouched."""
    import datetime as dt

    from sqlalchemy import select

    from app.services.collections import CollectionService
    from app.services.distributed import ChunkedIndexService

    write_corpus(tmp_path / "src", 2)
    ctx = make_ctx()
    service = ChunkedIndexService(ctx)
    prepared = IndexService(ctx).prepare(tmp_path / "src", "c", runner="celery")
    [number] = service.plan(prepared, 2)
    real = IndexService._encode_chunks
    rerun: list[Any] = []

    def encode(self: IndexService, texts: list[str], *args: Any, **kwargs: Any) -> Any:
        if not rerun:  # the stall: the lease lapses and the source is indexed again meanwhile
            rerun.append(None)
            with ctx.sessions() as s:
                s.execute(update(md.Collection).values(
                    lease_expires_at=md.utcnow() - dt.timedelta(seconds=5), writer_host="other-host",
                    heartbeat_at=md.utcnow() - dt.timedelta(seconds=100)))
                s.commit()
            rerun[0] = IndexService(ctx).index(tmp_path / "src", "c")
        return real(self, texts, *args, **kwargs)

    monkeypatch.setattr(IndexService, "_encode_chunks", encode)
    outcome = service.run_chunk(prepared.job_id, number)
    assert rerun[0].state == "completed" and rerun[0].docs_indexed == 2, rerun[0]
    with ctx.sessions() as s:
        rows = s.scalars(select(md.Document)).all()
        assert [(r.status, r.error) for r in rows] == [("indexed", None)] * 2
    info = CollectionService(ctx).get("c")
    assert (info.documents_indexed, info.documents_failed, info.chunks) == (2, 0, 2), info
    assert outcome.outcome == "failed" and "left to the job that holds the collection now" in (
        outcome.message or ""), outcome
