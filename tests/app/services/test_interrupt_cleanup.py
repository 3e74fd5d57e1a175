"""A Ctrl-C (KeyboardInterrupt) before an index job starts leaves nothing behind, as a refused
job does: a notebook's Interrupt while ``index`` waited behind another job of the process, or
while a large folder was read, left the job ``queued`` for the life of the process (and its
id in the registry, the store's shard held); during ``prepare`` it left an empty collection.

The interrupt is raised at the exact point by patching what runs there (the collection's lock,
``discover_files``, ``_refuse_other_writer``): a timer's SIGINT lands wherever the run happens
to be, and these points last milliseconds on a tiny corpus."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.errors import InvalidRequestError
from app.services import indexing
from app.services.collections import CollectionService
from app.services.indexing import IndexService
from tests.app.services.conftest import write_corpus


class _HeldElsewhere:
    """A collection lock another job of this process holds: the wait for it is where the user
    presses Interrupt."""

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not blocking:
            return False
        raise KeyboardInterrupt

    def release(self) -> None:
        raise AssertionError("never taken")

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        raise AssertionError("never taken")


def _left(ctx: Any, name: str) -> tuple[list[str], list[tuple[int, str]]]:
    catalog = CollectionService(ctx)
    names = [c.name for c in catalog.list_all()]
    jobs = [(j.id, j.state) for j in catalog.jobs(name)] if name in names else []
    return names, jobs


def test_interrupted_while_waiting_behind_another_job(make_ctx, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "src"
    write_corpus(src, 3)
    ctx = make_ctx()
    service = IndexService(ctx)
    service.index(src, "qa")  # the collection exists: this call does not create it
    before = set(indexing._ACTIVE_JOBS)
    monkeypatch.setattr(indexing, "_collection_lock", lambda name: _HeldElsewhere())
    with pytest.raises(KeyboardInterrupt):
        service.index(src, "qa")
    names, jobs = _left(ctx, "qa")
    assert names == ["qa"]
    assert [state for _, state in jobs] == ["completed"], jobs  # no `queued` row left
    # None of this run's left; another test's background job may have ended meanwhile (run
    # after test_job_cancel.py, its job 2 was in ``before`` and gone by now).
    assert set(indexing._ACTIVE_JOBS) <= before
    monkeypatch.undo()
    again = service.index(src, "qa")  # the cell run again
    assert again.state == "completed" and again.docs_skipped == 3


def test_interrupted_while_reading_the_source(make_ctx, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "src"
    write_corpus(src, 3)
    ctx = make_ctx()
    service = IndexService(ctx)

    def slow_folder(source: Path, *exclude: Any) -> Any:
        raise KeyboardInterrupt  # Ctrl-C while a large folder is listed

    monkeypatch.setattr(indexing, "discover_files", slow_folder)
    before = set(indexing._ACTIVE_JOBS)  # (only this run's job must be gone)
    with pytest.raises(KeyboardInterrupt):
        service.index(src, "fresh")
    assert _left(ctx, "fresh") == ([], [])  # no job row, no empty collection it created
    assert set(indexing._ACTIVE_JOBS) <= before
    assert not ctx.store.is_open("fresh")
    monkeypatch.undo()
    report = service.index(src, "fresh")
    assert report.state == "completed" and report.docs_indexed == 3


def test_a_submitted_job_interrupted_before_it_starts_is_recorded(
        make_ctx, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A job whose id was handed out (``prepare`` + ``run``) keeps its row: interrupted, with
    how to run it again, not ``queued`` for ever."""
    src = tmp_path / "src"
    write_corpus(src, 2)
    ctx = make_ctx()
    service = IndexService(ctx)
    prepared = service.prepare(src, "sub", runner="thread")
    monkeypatch.setattr(indexing, "discover_files", lambda source, *exclude: (_ for _ in ()).throw(
        KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        service.run(prepared)
    job = CollectionService(ctx).job(prepared.job_id)
    assert job.state == "interrupted", job.state
    assert job.message.startswith("stopped (Ctrl-C) before it started; run `facet index")
    assert prepared.job_id not in indexing._ACTIVE_JOBS
    monkeypatch.undo()
    assert service.index(src, "sub").docs_indexed == 2


def test_interrupted_while_preparing_leaves_no_empty_collection(
        make_ctx, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "src"
    write_corpus(src, 2)
    ctx = make_ctx()

    def interrupted(self: IndexService, session: Any, coll: Any, runner: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(IndexService, "_refuse_other_writer", interrupted)
    with pytest.raises(KeyboardInterrupt):
        IndexService(ctx).index(src, "prep")
    assert _left(ctx, "prep") == ([], [])


def test_a_progress_that_is_not_callable_is_refused_first(make_ctx, tmp_path: Path) -> None:
    src = tmp_path / "src"
    write_corpus(src, 2)
    ctx = make_ctx()
    with pytest.raises(InvalidRequestError, match="progress must be a callable") as e:
        IndexService(ctx).index(src, "p5", progress=5)  # type: ignore[arg-type]
    assert e.value.param == "progress"
    assert _left(ctx, "p5") == ([], [])  # nothing recorded, no collection
