"""A job's queue time apart from its start: a job that failed before it ran said "started"
at the time it was queued, in `facet jobs`, its JSON, the API and the UI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.core import Facet
from app.encoding import EmbedderCache
from app.jobs import InlineJobRunner
from app.settings import FacetSettings
from indexer import metadata as md
from tests.app.cli_runner import invoke_cli


@pytest.fixture
def facet(minilm, tmp_path: Path):
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facet = Facet(FacetSettings(data_dir=tmp_path / "data"), embedders=cache)
    facet.job_runner = InlineJobRunner(facet._run_job)  # runs in this thread: no waiting
    yield facet
    facet.close()


def _source(root: Path) -> Path:
    root.mkdir()
    (root / "a.txt").write_text("a note about the lighthouse keeper's garden")
    return root


def test_a_job_that_never_ran_says_so_on_every_edge(facet, tmp_path) -> None:
    src = _source(tmp_path / "src")
    ran = facet.indexing.prepare(src, "c")
    facet.job_runner.submit(ran)
    prepared = facet.indexing.prepare(src, "c")
    shutil.rmtree(src)  # gone between queueing and running: the job fails before it starts
    facet.job_runner.submit(prepared)
    never, done = facet.job(prepared.job_id), facet.job(ran.job_id)
    assert never.state == "failed" and "was there when the job was queued" in (never.message or "")
    assert never.started_at is None and never.queued_at.endswith("Z")
    assert done.state == "completed" and done.started_at is not None
    assert done.queued_at <= done.started_at  # both ISO 8601 UTC: they sort as text
    assert never.when() == f"queued {never.queued_at}, never started"
    assert done.when() == f"started {done.started_at}"

    env = {"FACET_DATA_DIR": str(tmp_path / "data")}
    listed = invoke_cli("jobs", env=env).stdout
    line = next(x for x in listed.splitlines() if x.startswith(f"job {never.id} failed"))
    assert line.endswith(f"· queued {never.queued_at}, never started"), line
    assert f"· started {done.started_at}" in listed, listed
    one = invoke_cli("jobs", str(never.id), env=env).stdout
    assert f"  queued {never.queued_at}, not started, finished {never.finished_at}" in one, one
    as_json = json.loads(invoke_cli("jobs", str(never.id), "--json", env=env).stdout)
    assert as_json["started_at"] is None and as_json["queued_at"] == never.queued_at

    from fastapi.testclient import TestClient

    from app.api import create_app

    with TestClient(create_app(facet)) as client:
        body = client.get(f"/jobs/{never.id}").json()
        assert body["started_at"] is None and body["queued_at"] == never.queued_at
        assert client.get(f"/jobs/{done.id}").json()["started_at"] == done.started_at

    from ui import render

    rows = {row[0]: row for row in render.job_rows(facet.jobs("c"))}
    started = render.JOB_COLUMNS.index("started")
    assert rows[never.id][started] == f"queued {never.queued_at}, never started"
    assert rows[done.id][started] == done.started_at


def test_a_queued_job_has_no_start_and_waits_from_its_queue_time(facet, tmp_path) -> None:
    """A worker job's "waiting for a worker for N min" hint counts from when it was queued."""
    from datetime import timedelta

    from app.services.collections import effective_state

    with facet.context.sessions() as s:
        coll = md.create_collection(s, "c", backend="edge", chunk_size=64, chunk_overlap=8,
                                    tokenizer="minilm")
        job = md.IndexJob(collection_id=coll.id, source="src", embedder="minilm",
                          state="queued", runner="celery",
                          queued_at=md.utcnow() - timedelta(minutes=20))
        s.add(job)
        s.commit()
        assert job.started_at is None
        state, message = effective_state(job)
        assert state == "queued" and "waiting for a worker for 20 min" in (message or "")
        job_id = job.id
    info = facet.job(job_id)
    assert info.started_at is None and info.when() == f"queued {info.queued_at}"
