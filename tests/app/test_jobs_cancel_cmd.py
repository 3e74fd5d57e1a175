"""`facet jobs JOB_ID --cancel`: no command could cancel an index job. A queued job is cancelled
at once, a running one is asked to stop (it ends at its next batch); an ended job is refused
(exit 2, as the CLI's other refusals), an unknown one is exit 3. Real SQLite, in process."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy.orm import sessionmaker

from app.services import leases
from indexer import metadata as md
from tests.app.cli_runner import invoke_cli


def _jobs(tmp_path: Path) -> dict[str, int]:
    """A collection with a queued worker job, a running job of this process (it holds the
    lease) and a completed one."""
    engine = md.make_engine(f"sqlite:///{tmp_path / 'facet.db'}")
    sessions = sessionmaker(engine, expire_on_commit=False)
    with sessions() as s:
        coll = md.create_collection(s, "c", backend="edge", chunk_size=64, chunk_overlap=8, tokenizer="minilm")
        rows = {
            state: md.IndexJob(collection_id=coll.id, source="src", embedder="minilm", state=state, runner=runner)
            for state, runner in (("queued", "celery"), ("running", "inline"), ("completed", "inline"))
        }
        s.add_all(rows.values())
        s.commit()
        assert leases.acquire(s, coll.id, rows["running"].id, ttl_s=600) is None
        ids = {state: row.id for state, row in rows.items()}
    engine.dispose()
    return ids


def test_facet_jobs_cancel(tmp_path: Path) -> None:
    ids = _jobs(tmp_path)
    env = {"FACET_DATA_DIR": str(tmp_path)}
    done = invoke_cli("jobs", str(ids["queued"]), "--cancel", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [f"job {ids['queued']} cancelled", "  cancelled before it started"]
    done = invoke_cli("jobs", str(ids["running"]), "--cancel", "--json", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    job = json.loads(done.stdout)
    assert (job["state"], job["cancel_requested"]) == ("running", True)
    done = invoke_cli("jobs", str(ids["completed"]), "--cancel", env=env)
    assert done.returncode == 2
    assert f"job {ids['completed']} is completed" in done.stdout + done.stderr
    assert invoke_cli("jobs", "9999", "--cancel", env=env).returncode == 3
    assert invoke_cli("jobs", str(ids["running"]), "--cancel", "-c", "other", env=env).returncode in (2, 3)
    assert invoke_cli("jobs", "--cancel", env=env).returncode == 2  # no JOB_ID
    listed = invoke_cli("jobs", env=env).stdout
    assert f"job {ids['queued']} cancelled" in listed
