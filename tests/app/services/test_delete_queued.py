"""Deleting a collection that a job is queued to index (a server runs its jobs one at a time:
a second job waits behind the first). `DELETE /collections/shared` answered 200 without a word
of it; the job's submitter then got 404 "no index job 6" for it, and when its turn came the
server logged it failed ("index job 6 no longer exists"). Refused now as for a running job (a
409, the CLI's exit 5), naming the queued jobs and how to cancel them; a cancelled job, or one
whose submitting process is gone, no longer holds it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.errors import ConflictError
from app.services import leases
from app.services.collections import CollectionService
from app.services.indexing import IndexService
from indexer import metadata as md

from .conftest import running_job

ROOT = Path(__file__).resolve().parents[3]


def _source(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a.txt").write_text("My card was declined at the shop")
    return folder


def _queued(ctx, name: str, *, pid: int | None = None, runner: str = "thread") -> int:
    """A job of ``name`` waiting its turn, as a server's POST /jobs records it."""
    with ctx.sessions() as session:
        coll = md.get_collection(session, name)
        assert coll is not None
        job = md.IndexJob(collection_id=coll.id, source="/srv/texts", embedder="minilm",
                          state="queued", runner=runner, host=leases.HOST,
                          pid=os.getpid() if pid is None else pid)
        session.add(job)
        session.commit()
        return int(job.id)


@pytest.fixture
def shared(make_ctx, tmp_path):
    ctx = make_ctx()
    IndexService(ctx).index(_source(tmp_path / "src"), "shared")
    return ctx


def test_a_queued_job_refuses_the_delete_until_it_is_cancelled(shared) -> None:
    ctx = shared
    job_id = _queued(ctx, "shared")
    catalog = CollectionService(ctx)
    with pytest.raises(ConflictError) as refused:
        catalog.delete("shared")
    said = str(refused.value)
    assert said.startswith(f"collection 'shared' has job {job_id} queued to index it"), said
    assert f"`facet jobs {job_id} --cancel`" in said and f"POST /jobs/{job_id}/cancel" in said
    # Nothing removed: the collection, its points and the job are all there.
    assert catalog.get("shared").points == 1
    assert catalog.job(job_id).state == "queued"

    assert IndexService(ctx).cancel(job_id)
    assert catalog.job(job_id).state == "cancelled"
    assert catalog.delete("shared").documents == 1  # a cancelled job holds it no longer
    assert [c.name for c in catalog.list_all()] == []


def test_every_queued_job_is_named_and_a_running_one_says_them_too(shared) -> None:
    ctx = shared
    first, second = _queued(ctx, "shared"), _queued(ctx, "shared")
    catalog = CollectionService(ctx)
    with pytest.raises(ConflictError, match=rf"has jobs {first}, {second} queued to index it: "
                                            r"cancel them \(each: `facet jobs N --cancel`"):
        catalog.delete("shared")
    with ctx.sessions() as session:
        writer = running_job(session, md.get_collection(session, "shared"))
    with pytest.raises(ConflictError) as refused:
        catalog.delete("shared")
    said = str(refused.value)
    assert said.startswith(f"collection 'shared' is being indexed by job {writer}"), said
    assert said.endswith(f"; jobs {first}, {second} queued to index it (cancel each: `facet jobs "
                         f"N --cancel`, POST /jobs/N/cancel, N one of {first}, {second}) too"), said


def test_a_queued_job_whose_process_is_gone_does_not_hold_it(shared) -> None:
    """Its server stopped before it ran: shown ``interrupted`` (``effective_state``), it never
    runs; it must not keep the collection from being deleted."""
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    _queued(shared, "shared", pid=int(gone.stdout))
    assert CollectionService(shared).delete("shared").name == "shared"


def test_facet_delete_in_another_process_is_refused_with_exit_5(shared, tmp_path) -> None:
    """`facet delete` beside a server holding a queued job (the server is this test process:
    the job's submitter is alive on this host)."""
    job_id = _queued(shared, "shared")
    shared.close()
    env = dict(os.environ, FACET_DATA_DIR=str(tmp_path / "data"), OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", "from app.cli import main; main()", "delete",
                           "shared", "-y"], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env=env)
    assert (done.returncode, "Traceback" in done.stderr) == (5, False), done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"job {job_id} queued to index it" in lines[0], done.stderr
    assert f"`facet jobs {job_id} --cancel`" in lines[0], lines


def test_a_job_cancelled_then_deleted_with_its_collection_is_not_run(make_ctx, tmp_path,
                                                                      caplog) -> None:
    """Following the refusal's advice (cancel the queued job, then delete the collection) left
    the job's thread to find its row gone when its turn came: "ERROR index job N failed:
    NotFoundError: index job N no longer exists". It is now not run, said at INFO."""
    ctx = make_ctx()
    service = IndexService(ctx)
    service.index(_source(tmp_path / "src"), "shared")
    prepared = service.prepare(_source(tmp_path / "more"), "shared")
    assert service.cancel(prepared.job_id)
    CollectionService(ctx).delete("shared")
    with caplog.at_level("INFO", logger="app.services.indexing"):
        report = service.run(prepared)
    assert report.state == "cancelled"
    assert f"job {prepared.job_id} was cancelled and its collection 'shared' deleted" in caplog.text
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
