"""Four CLI messages found wrong on the full stack (workers on Redis, `facet serve`, `facet jobs`):

- `facet jobs N --follow` ended on "79/79 documents (2 indexed, 77 unchanged, 0 failed)" with
  no word of the documents a sync removed, which `facet jobs N` counted ("removed 2");
- paging past the end said "no index jobs past the newest 20" with 9 jobs, and "no errors past
  the first 100 (of 27)", as if 20 jobs and 100 errors existed;
- `facet collections` and the `facet delete` prompt said "? points" for a collection whose only
  job was still queued (nothing written yet);
- a stalled worker job's message said to start a worker even with one running idle, whose next
  chunk waits for the broker's visibility timeout.

Real SQLite rows (``md.IndexJob``), the CLI in process; no model is loaded.
"""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy.orm import sessionmaker

from indexer import metadata as md
from tests.app.cli_runner import invoke_cli
from tests.app.services.conftest import running_job, stall_lease


def _sessions(data: Path) -> tuple[object, sessionmaker]:
    engine = md.make_engine(f"sqlite:///{data / 'facet.db'}")
    return engine, sessionmaker(engine, expire_on_commit=False)


def _collection(s, name: str = "c") -> md.Collection:
    return md.create_collection(s, name, backend="edge", chunk_size=64, chunk_overlap=8,
                                tokenizer="minilm")


def test_follow_final_line_counts_removed_documents(tmp_path: Path) -> None:
    engine, sessions = _sessions(tmp_path)
    with sessions() as s:
        coll = _collection(s)
        synced = md.IndexJob(collection_id=coll.id, source="src", embedder="minilm",
                             state="completed", runner="celery", docs_seen=79, docs_total=79,
                             docs_indexed=2, docs_skipped=77, docs_deleted=2, chunks_written=4)
        plain = md.IndexJob(collection_id=coll.id, source="src", embedder="minilm",
                            state="completed", runner="celery", docs_seen=3, docs_total=3,
                            docs_indexed=3, chunks_written=3)
        s.add_all([synced, plain])
        s.commit()
        synced_id, plain_id = synced.id, plain.id
    engine.dispose()
    env = {"FACET_DATA_DIR": str(tmp_path)}
    done = invoke_cli("jobs", str(synced_id), "--follow", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == (
        f"job {synced_id} completed: 79/79 documents (2 indexed, 77 unchanged, 0 failed, "
        "2 removed), 4 chunks written")
    shown = invoke_cli("jobs", str(synced_id), env=env).stdout
    assert "removed 2" in shown  # the same count `facet jobs N` gives
    # Nothing removed: the line says nothing of it.
    done = invoke_cli("jobs", str(plain_id), "--follow", env=env)
    assert done.stdout.splitlines()[-1] == (
        f"job {plain_id} completed: 3/3 documents (3 indexed, 0 unchanged, 0 failed), "
        "3 chunks written")


def _nine_jobs(tmp_path: Path) -> int:
    """Nine jobs of collection c, the last with 27 errors; returns its id."""
    engine, sessions = _sessions(tmp_path)
    with sessions() as s:
        coll = _collection(s)
        jobs = [md.IndexJob(collection_id=coll.id, source="src", embedder="minilm",
                            state="completed", runner="inline") for _ in range(9)]
        s.add_all(jobs)
        s.commit()
        s.add_all(md.JobError(job_id=jobs[-1].id, document_key=f"d{i}", kind="error",
                              message=f"bad {i}") for i in range(27))
        s.commit()
        last = jobs[-1].id
    engine.dispose()
    return last


def test_jobs_offset_past_the_end_says_how_many_there_are(tmp_path: Path) -> None:
    _nine_jobs(tmp_path)
    env = {"FACET_DATA_DIR": str(tmp_path)}
    past = invoke_cli("jobs", "--offset", "20", env=env)
    assert past.returncode == 0, past.stderr
    assert past.stdout == "no index jobs past the newest 20: there are 9\n"
    of_c = invoke_cli("jobs", "-c", "c", "--offset", "9", env=env)
    assert of_c.stdout == "no index jobs past the newest 9: there are 9 of collection c\n"
    assert invoke_cli("jobs", "--offset", "20", "--json", env=env).stdout.strip() == "[]"


def test_errors_offset_past_the_end_says_how_many_the_job_has(tmp_path: Path) -> None:
    last = _nine_jobs(tmp_path)
    env = {"FACET_DATA_DIR": str(tmp_path)}
    errs = invoke_cli("jobs", str(last), "--errors-offset", "100", env=env)
    assert errs.returncode == 0, errs.stderr
    assert errs.stdout.splitlines()[-1] == "  no errors past the first 100: the job has 27"
    page = invoke_cli("jobs", str(last), "--errors", "5", "--errors-offset", "20", env=env)
    assert page.stdout.splitlines()[-7] == "  errors 21 to 25 of 27:"  # a page within: as before


def test_a_collection_with_only_a_queued_job_has_no_points_yet(tmp_path: Path) -> None:
    engine, sessions = _sessions(tmp_path)
    with sessions() as s:
        waiting = _collection(s, "waiting")  # POST /jobs with no worker running
        queued = md.IndexJob(collection_id=waiting.id, source="src", embedder="minilm",
                             state="queued", runner="celery")
        done = _collection(s, "done")  # a job completed, nothing in its store: not known why
        s.add_all([queued, md.IndexJob(collection_id=done.id, source="src", embedder="minilm",
                                       state="completed", runner="inline")])
        s.commit()
        queued_id = queued.id
    engine.dispose()
    env = {"FACET_DATA_DIR": str(tmp_path)}
    listed = invoke_cli("collections", env=env)
    assert listed.returncode == 0, listed.stderr
    lines = {line.split(":", 1)[0]: line for line in listed.stdout.splitlines()}
    assert f", no points yet (job {queued_id} queued) · " in lines["waiting"], listed.stdout
    assert ", ? points · " in lines["done"], listed.stdout
    one = invoke_cli("collections", "waiting", env=env).stdout
    assert f"no points yet (job {queued_id} queued)" in one
    as_json = json.loads(invoke_cli("collections", "waiting", "--json", env=env).stdout)
    assert as_json["points"] is None and "no points yet" not in json.dumps(as_json)
    # The delete prompt (no answer on stdin: refused, nothing deleted).
    asked = invoke_cli("delete", "waiting", env=env)
    assert asked.returncode == 2
    assert f"delete 'waiting' (0 documents, no points yet (job {queued_id} queued))?" \
        in asked.stderr, asked.stderr
    assert "waiting" in invoke_cli("collections", env=env).stdout


def test_a_collection_whose_jobs_ended_before_any_wrote_has_no_points(tmp_path: Path) -> None:
    """Its first job killed as it started (`--background`'s process, or `facet serve` with it
    queued): no store was made, and `facet collections` said "? points", which names a store
    held, missing or damaged."""
    engine, sessions = _sessions(tmp_path)
    with sessions() as s:
        coll = _collection(s, "bg2")
        s.add(md.IndexJob(collection_id=coll.id, source="src", embedder="minilm",
                          state="interrupted", runner="inline"))
        s.commit()
    engine.dispose()
    env = {"FACET_DATA_DIR": str(tmp_path)}
    listed = invoke_cli("collections", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "bg2: 0 documents indexed, 0 failed, 0 chunks, no points · " in listed.stdout, listed.stdout
    assert "no points · " in invoke_cli("collections", "bg2", env=env).stdout
    deleted = invoke_cli("delete", "bg2", "-y", env=env)
    assert deleted.stdout == "deleted bg2: 0 documents, no points\n", deleted.stdout + deleted.stderr


def test_a_background_job_whose_process_died_before_it_ran_says_so(tmp_path: Path) -> None:
    """`facet index --background`'s process killed before it ran: "the process that queued it
    ended before it ran" (the CLI, which exited normally) "...: what was indexed is kept" (nothing
    was)."""
    import subprocess
    import sys

    from app.services import leases

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    engine, sessions = _sessions(tmp_path)
    with sessions() as s:
        coll = _collection(s, "bg")
        for runner in ("process", "thread"):
            s.add(md.IndexJob(collection_id=coll.id, source="src", embedder="minilm",
                              state="queued", runner=runner, pid=gone.pid, host=leases.HOST))
        s.commit()
    engine.dispose()
    jobs = json.loads(invoke_cli("jobs", "--json", env={"FACET_DATA_DIR": str(tmp_path)}).stdout)
    said = {job["id"]: job["message"] for job in jobs}
    background, served = sorted(said)
    assert said[background] == (f"its process (pid {gone.pid}, `facet index --background`'s) ended "
                                "before it ran; run `facet index src --collection bg --embedder "
                                "minilm` again to index it"), said
    assert said[served].startswith("the process that queued it ended before it ran; run `facet "), said
    assert all("what was indexed is kept" not in m for m in said.values()), said


def test_a_stalled_worker_job_says_both_ways_on(tmp_path: Path) -> None:
    engine, sessions = _sessions(tmp_path)
    with sessions() as s:
        coll = _collection(s)
        job_id = running_job(s, coll, runner="celery")
        stall_lease(coll)  # the worker stopped renewing the lease 40 s ago
        s.commit()
    engine.dispose()
    env = {"FACET_DATA_DIR": str(tmp_path), "FACET_VISIBILITY_TIMEOUT_S": "120"}
    shown = invoke_cli("jobs", str(job_id), "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    info = json.loads(shown.stdout)
    message = info["message"]
    assert info["state"] == "stalled" and "\n" not in message
    assert message.startswith("no worker has made progress on it for over 4")
    assert ("it goes on when a worker takes its next chunk: start one if none runs (`facet "
            "worker --queues index`)") in message, message
    assert ("a chunk whose worker was killed is taken again only after "
            "FACET_VISIBILITY_TIMEOUT_S (120s), so to go on now, run `facet index src "
            "--collection c --embedder minilm --background` again to resume") in message, message
    text = invoke_cli("jobs", str(job_id), env=env).stdout
    assert "FACET_VISIBILITY_TIMEOUT_S (120s)" in text
    # Nothing written yet: "no points yet", as for a queued job (it said "? points").
    assert f"no points yet (job {job_id} stalled)" in invoke_cli("collections", env=env).stdout
    # Past the end of a job with no errors at all: said too (nothing was printed).
    assert invoke_cli("jobs", str(job_id), "--errors-offset", "5", env=env).stdout.splitlines()[-1] \
        == "  no errors past the first 5: the job has none"
    default = json.loads(invoke_cli("jobs", str(job_id), "--json",
                                    env={"FACET_DATA_DIR": str(tmp_path)}).stdout)["message"]
    assert "FACET_VISIBILITY_TIMEOUT_S (3600s)" in default
    # Cancelled while no worker runs: it said "it stops at its next batch", then that the job
    # "goes on" and how to go on now (the worker-and-PostgreSQL exploration).
    cancelled = invoke_cli("jobs", str(job_id), "--cancel", env=env)
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout.startswith(
        f"job {job_id} stalled (cancel requested, and no worker has made progress on it for over "
    ), cancelled.stdout
    assert ": it ends cancelled when a worker takes its next chunk: start one if none runs " \
        "(`facet worker --queues index`); a chunk whose worker was killed is taken again only " \
        "after FACET_VISIBILITY_TIMEOUT_S (120s))" in cancelled.stdout, cancelled.stdout
    shown = json.loads(invoke_cli("jobs", str(job_id), "--json", env=env).stdout)["message"]
    assert "goes on" not in shown and "to resume" not in shown, shown


def test_delete_refused_beside_a_server_names_the_route_that_deletes_there(tmp_path: Path) -> None:
    """`facet delete` beside a `facet serve` that holds the collection said to send the work to
    "its HTTP API", which had no delete route; it now names DELETE /collections/NAME."""
    from tests.app.services.conftest import locked_by_another_process, write_corpus

    data = tmp_path / "data"
    env = {"FACET_DATA_DIR": str(data)}
    write_corpus(tmp_path / "src", 1)
    assert invoke_cli("index", str(tmp_path / "src"), "-c", "c", "-e", "minilm",
                      env=env).returncode == 0
    with locked_by_another_process(data, "c", shown_as="facet serve"):
        done = invoke_cli("delete", "c", "-y", env=env)
    assert done.returncode == 5, done.stdout + done.stderr
    assert ("(its HTTP API or UI; from Python, FacetRetriever(base_url=...)) or stop it first: "
            "`DELETE /collections/c` on its API (docs/api.md)") in done.stderr
    assert invoke_cli("collections", "c", env=env).returncode == 0  # still there
