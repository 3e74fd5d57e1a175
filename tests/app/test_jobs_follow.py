"""`facet jobs ID --follow` on a big job: the encoding step ("encoding chunk N/M of this batch")
changed the job's message each second, and each change printed a line: thousands in all."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy.orm import sessionmaker

from indexer import metadata as md
from tests.app.cli_runner import invoke_cli
from tests.app.services.conftest import running_job


class _Terminal(io.StringIO):
    """What a terminal receives (a stream that says it is one)."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def job(tmp_path: Path):
    """A running job of this process (it holds the lease): (update(**columns), read())."""
    engine = md.make_engine(f"sqlite:///{tmp_path / 'facet.db'}")
    sessions = sessionmaker(engine, expire_on_commit=False)
    with sessions() as s:
        coll = md.create_collection(s, "c", backend="edge", chunk_size=64, chunk_overlap=8,
                                    tokenizer="minilm")
        job_id = running_job(s, coll, ttl_s=600, docs_total=1000)

    def update(**columns: object) -> None:
        if not columns:
            return
        with sessions() as s:
            s.query(md.IndexJob).filter_by(id=job_id).update(columns)
            s.commit()

    from app.core import Facet
    from app.settings import FacetSettings

    facet = Facet(FacetSettings(data_dir=tmp_path))
    yield job_id, update, lambda: facet.job(job_id, errors=0)
    facet.close()
    engine.dispose()


HINT = "no worker has made progress on it for over {}s"


def _drive(follower, update, read, now: list[float]) -> list[int | None]:
    """A big job as the follower sees it: the encoding step at every look, a hint whose
    seconds grow, the documents moving, then the end."""
    codes = []
    steps: list[tuple[float, dict]] = [
        (0, {}),
        (1, {"message": "encoding chunk 32/480 of this batch"}),
        (1, {"message": "encoding chunk 64/480 of this batch", "docs_seen": 50}),
        (1, {"message": HINT.format(60)}),
        (1, {"message": HINT.format(61)}),  # the same hint: not again
        (1, {"message": "encoding chunk 96/480 of this batch", "docs_seen": 120}),  # +12%
        (1, {"message": "encoding chunk 128/480 of this batch"}),
        (31, {"message": "encoding chunk 160/480 of this batch", "docs_seen": 130}),  # 30 s on
        (1, {"message": None, "state": "completed", "docs_seen": 1000}),
    ]
    for dt, columns in steps:
        now[0] += dt
        update(**columns)
        codes.append(follower.show(read()))
    return codes


def test_into_a_log_progress_is_sparse_and_each_hint_said_once(job) -> None:
    from app.commands.collections import JobFollower

    job_id, update, read = job
    out, now = io.StringIO(), [0.0]
    codes = _drive(JobFollower(out, tty=False, clock=lambda: now[0]), update, read, now)
    assert codes == [None] * 8 + [0]
    counts = "({} indexed, 0 unchanged, 0 failed), 0 chunks written"
    assert out.getvalue().splitlines() == [
        f"job {job_id} running: 0/1000 documents {counts.format(0)}",
        f"  {HINT.format(60)}",
        f"job {job_id} running: 120/1000 documents {counts.format(0)} · encoding chunk 96/480 "
        "of this batch",
        f"job {job_id} running: 130/1000 documents {counts.format(0)} · encoding chunk 160/480 "
        "of this batch",
        f"job {job_id} completed: 1000/1000 documents {counts.format(0)}",
    ]


def test_on_a_terminal_progress_is_rewritten_in_place(job) -> None:
    from app.commands.collections import JobFollower

    job_id, update, read = job
    out, now = _Terminal(), [0.0]
    codes = _drive(JobFollower(out, tty=True, clock=lambda: now[0]), update, read, now)
    assert codes[-1] == 0
    lines = out.getvalue().split("\n")
    # One line of progress until the hint, the hint, one line after it, the final state's.
    assert len(lines) == 5 and lines[-1] == "", lines
    first, hint, second, done = lines[:4]
    steps = first.split("\r")[1:]
    assert len(steps) == 4 and steps[2].endswith("· encoding chunk 64/480 of this batch")
    assert steps[3].rstrip() == f"job {job_id} running: 50/1000 documents (0 indexed, 0 " \
                                "unchanged, 0 failed), 0 chunks written"  # padded over the last
    assert hint == f"  {HINT.format(60)}"
    assert second.count("\r") == 4 and "encoding chunk 160/480" in second.split("\r")[-1]
    assert done == f"\rjob {job_id} completed: 1000/1000 documents (0 indexed, 0 unchanged, " \
                   "0 failed), 0 chunks written"


def test_follow_of_a_job_that_encodes_prints_no_line_per_step(job, tmp_path) -> None:
    """Through the CLI (not a terminal), a job encoding while it is followed."""
    job_id, update, _ = job

    def encode() -> None:
        for n in range(30):
            update(message=f"encoding chunk {32 * n}/960 of this batch", docs_seen=n)
            time.sleep(0.05)
        update(state="completed", message=None, docs_seen=1000)

    writer = threading.Thread(target=encode)
    writer.start()
    try:
        done = invoke_cli("jobs", str(job_id), "--follow", "--interval", "0.1",
                          env={"FACET_DATA_DIR": str(tmp_path)})
    finally:
        writer.join()
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2, lines  # a line per encoding step: 10 or more
    assert lines[0].startswith(f"job {job_id} running: ")
    assert lines[1].startswith(f"job {job_id} completed: 1000/1000 documents")



def test_on_a_narrow_terminal_the_line_is_cut_to_its_width(job) -> None:
    """A progress line wider than the terminal wrapped, and each carriage return rewrote only its
    last row: an 80-column terminal kept one stale row per update."""
    from app.commands.collections import JobFollower

    job_id, update, read = job
    out, now = _Terminal(), [0.0]
    codes = _drive(JobFollower(out, tty=True, clock=lambda: now[0], columns=lambda: 40),
                   update, read, now)
    assert codes[-1] == 0
    rows = [row for line in out.getvalue().split("\n") for row in line.split("\r") if row]
    progress = [row for row in rows if row.startswith(f"job {job_id} running")]
    assert progress and all(len(row) <= 39 for row in progress), progress
    assert any(row.endswith("…") for row in progress), progress
    # The final line is whole: it stays on the screen (its chunks figure was cut off).
    assert rows[-1] == f"job {job_id} completed: 1000/1000 documents (0 indexed, 0 unchanged, " \
                       "0 failed), 0 chunks written", rows


def test_a_job_that_completed_with_failed_documents_exits_as_facet_index_does(job, tmp_path) -> None:
    """`facet index --background` then `facet jobs N --follow && next-step` went on, exit 0,
    where the same run in the foreground exits 4 for its failed documents (the CLI
    exploration of the third session of 2026-12-07). ``--allow-failures`` says 0, as there."""
    job_id, update, _ = job
    update(state="completed", message=None, docs_seen=2, docs_indexed=1, docs_failed=1)
    env = {"FACET_DATA_DIR": str(tmp_path)}
    done = invoke_cli("jobs", str(job_id), "--follow", env=env)
    assert done.returncode == 4, done.stdout + done.stderr
    assert done.stdout.startswith(f"job {job_id} completed: "), done.stdout
    assert done.stderr == (f"error: 1 of 2 documents failed; see `facet jobs {job_id}` "
                           "(--allow-failures to exit 0 anyway)\n"), done.stderr
    as_json = invoke_cli("jobs", str(job_id), "--follow", "--json", env=env)
    assert as_json.returncode == 4 and '"docs_failed": 1' in as_json.stdout, as_json.stdout
    allowed = invoke_cli("jobs", str(job_id), "--follow", "--allow-failures", env=env)
    assert allowed.returncode == 0 and "error" not in allowed.stderr, allowed.stderr
    alone = invoke_cli("jobs", str(job_id), "--allow-failures", env=env)
    assert alone.returncode == 2 and "--allow-failures goes with --follow" in alone.stderr
    update(docs_failed=0, docs_indexed=2)
    assert invoke_cli("jobs", str(job_id), "--follow", env=env).returncode == 0
