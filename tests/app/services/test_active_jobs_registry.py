"""The registry of this process's queued and running jobs (``indexing._ACTIVE_JOBS``) holds only
jobs that run in this process: a job prepared for Celery workers (or a child process) stayed
in the sender's registry for good, so the sender took that job's live lease, held by a worker,
for one of its own jobs waiting its turn ("queued behind it in this process: fine"), and the
registry grew with every job a server sent (a left-alone item of the third session of
2026-12-02; it also made `test_interrupt_cleanup`'s empty-registry check fail whenever a test
preparing a Celery job ran before it in the same process). Real services, minilm, SQLite."""

from __future__ import annotations

from pathlib import Path

from app.services import indexing
from app.services.indexing import IndexService

from .conftest import write_corpus


def test_only_jobs_that_run_here_are_registered(make_ctx, tmp_path: Path) -> None:
    write_corpus(tmp_path / "src", 2)
    service = IndexService(make_ctx())
    for runner in ("celery", "process"):
        sent = service.prepare(tmp_path / "src", f"to-{runner}", runner=runner)
        assert sent.job_id not in indexing._ACTIVE_JOBS, runner
    here = service.prepare(tmp_path / "src", "here", runner="thread")
    assert here.job_id in indexing._ACTIVE_JOBS
    assert service.run(here).state == "completed"
    assert here.job_id not in indexing._ACTIVE_JOBS
