"""A collection deleted by another process between a request's read of its row and the insert
of its new job (a CLI `facet delete` racing `POST /jobs` of the same name): a 500 "unexpected
error (IntegrityError)" with SQLite's FOREIGN KEY failure (found by this session's
verification round). Real SQLite, the row deleted through a second session, as another
process's delete commits it."""

from __future__ import annotations

import pytest

from app.errors import ConflictError
from app.services.indexing import IndexService
from indexer import metadata as md

from .conftest import write_corpus


def test_a_job_queued_for_a_collection_deleted_meanwhile_is_a_conflict(make_ctx, tmp_path) -> None:
    write_corpus(tmp_path / "src", 2)
    ctx = make_ctx()
    service = IndexService(ctx)
    service.index(tmp_path / "src", "raced")
    with ctx.sessions() as session:
        coll = md.get_collection(session, "raced")
        assert coll is not None
        with ctx.sessions() as other:  # the other process's delete, committed
            md.delete_collection(other, md.get_collection(other, "raced"))
            other.commit()
        with pytest.raises(ConflictError, match="'raced' was deleted while this job was being queued"):
            service._start_job(session, coll, str(tmp_path / "src"), "minilm", "thread")
        assert md.get_collection(session, "raced") is None
