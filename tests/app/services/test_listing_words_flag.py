"""A listing keeps "words (lexical/hybrid)" for a collection another process's job is writing.

The listing never touches an embedded collection its writer's process holds, and so read
nothing of it: the flag went missing for as long as the job ran, and came back after. Whether
it keeps term vectors is recorded beside the shard (``EdgeStore.lexical_version``'s side
file), read without opening it.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import update

from app.services import leases
from app.services.collections import CollectionService
from app.services.indexing import IndexService
from indexer import metadata as md

from ..cli_runner import invoke_cli
from .conftest import locked_by_another_process, write_corpus


def _lease_to(ctx, name: str, pid: int) -> int:
    """Record a running job of ``name`` whose lease process ``pid`` holds (as its job took it)."""
    with ctx.sessions() as s:
        coll = md.get_collection(s, name)
        job = md.IndexJob(
            collection_id=coll.id,
            source="src",
            embedder="minilm",
            state="running",
            runner="inline",
            pid=pid,
            host=leases.HOST,
        )
        s.add(job)
        s.flush()
        now = md.utcnow()
        s.execute(
            update(md.Collection)
            .where(md.Collection.id == coll.id)
            .values(
                writer_job_id=job.id,
                writer_host=leases.HOST,
                writer_pid=pid,
                heartbeat_at=now,
                lease_expires_at=now + dt.timedelta(seconds=60),
            )
        )
        s.commit()
        return job.id


def test_a_collection_being_written_elsewhere_keeps_its_words_flag(make_ctx, tmp_path) -> None:
    write_corpus(tmp_path / "src", 2)
    ctx = make_ctx(store_wait_s=0.2)
    IndexService(ctx).index(tmp_path / "src", "c")
    ctx.store.release("c")
    free = CollectionService(ctx).get("c")
    assert (free.writer, free.lexical, free.lexical_note) == (None, True, None)
    with locked_by_another_process(ctx.settings.data_dir, "c") as writer:
        job_id = _lease_to(ctx, "c", writer.pid)
        service = CollectionService(ctx)
        for info in (service.get("c"), service.list_all()[0]):
            assert info.writer is not None and f"job {job_id} (pid {writer.pid}" in info.writer
            assert info.points is None  # its shard is not touched
            assert (info.lexical, info.lexical_note) == (True, None), info
        # As `facet collections` prints it.
        result = invoke_cli("collections", env={"FACET_DATA_DIR": str(ctx.settings.data_dir)})
        assert result.returncode == 0, result
        line = result.stdout.strip()
        assert line.startswith("c: ") and f"being indexed by job {job_id}" in line, line
        assert " · words (lexical/hybrid) · " in line, line
