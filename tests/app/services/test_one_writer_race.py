"""One writer per collection, judged without a race: a job of this process that lets its lease
go between the refusal's read of the lease and its look at the jobs of this process is no
other writer. 100 quick `POST /jobs` into one unchanged folder got 4 to 7 answers 409 "job 511
(pid 27158 ...) is still indexing into 'tiny'", job 511 a completed job of that same server.

The holder's end is made to fall exactly in that window (a wrapper around the real
``leases.live_holder``), so each test fails on the old code every time, not by timing luck."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import update

from app.core import Facet
from app.errors import ConflictError
from app.services import indexing, leases
from app.services.context import EmbedderCache
from app.settings import FacetSettings
from indexer import metadata as md

from .conftest import locked_by_another_process, write_corpus


@pytest.fixture
def facet(minilm, tmp_path: Path) -> Iterator[Facet]:
    """A Facet whose collection ``tiny`` holds a tiny folder (``tmp_path / "tinysrc"``)."""
    write_corpus(tmp_path / "tinysrc", 2)
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    with Facet(FacetSettings(data_dir=tmp_path / "data", chunk_tokens=64, chunk_overlap=8),
               embedders=cache) as f:
        f.index(tmp_path / "tinysrc", "tiny")
        yield f


def _coll_id(facet: Facet, name: str = "tiny") -> int:
    with facet.indexing.sessions() as s:
        coll = md.get_collection(s, name)
        assert coll is not None
        return coll.id


def _hold(facet: Facet, job_id: int, pid: int | None = None) -> None:
    """The lease of ``tiny`` taken for ``job_id`` (as another pid's, given ``pid``)."""
    coll_id = _coll_id(facet)
    with facet.indexing.sessions() as s:
        assert leases.acquire(s, coll_id, job_id, facet.settings.lease_ttl_s) is None
        if pid is not None:
            s.execute(update(md.Collection).where(md.Collection.id == coll_id)
                      .values(writer_pid=pid))
            s.commit()


def _finish_on_first_read(monkeypatch: pytest.MonkeyPatch, facet: Facet, job_id: int) -> list[int]:
    """Wrap ``leases.live_holder``: the first read that finds ``job_id`` holding returns it, and
    the job then ends as a job of this process does (lease let go, then out of
    ``_ACTIVE_JOBS``) before the caller looks further. Returns the list of such ends."""
    real = leases.live_holder
    ended: list[int] = []

    def live_holder(session, collection_id):  # type: ignore[no-untyped-def]
        found = real(session, collection_id)
        if found is not None and found.job_id == job_id and not ended:
            with facet.indexing.sessions() as s:
                leases.release(s, collection_id, job_id)
            with indexing._REGISTRY_LOCK:
                indexing._ACTIVE_JOBS.discard(job_id)
            ended.append(job_id)
        return found

    monkeypatch.setattr(leases, "live_holder", live_holder)
    return ended


def test_a_job_of_this_process_ending_between_the_reads_is_no_other_writer(
        facet: Facet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A job submitted as its predecessor (of this server) lets the collection go is queued,
    not refused with a 409 naming that completed job."""
    first = facet.indexing.prepare(tmp_path / "tinysrc", "tiny", runner="thread")
    _hold(facet, first.job_id)  # it runs: registered in _ACTIVE_JOBS (prepare), lease taken
    ended = _finish_on_first_read(monkeypatch, facet, first.job_id)
    second = facet.indexing.prepare(tmp_path / "tinysrc", "tiny", runner="thread")
    assert ended == [first.job_id]  # the holder ended exactly between the two looks
    facet.indexing.fail(first.job_id, "stood in for a job that ended")
    report = facet.indexing.run(second)
    assert report.state == "completed", report
    assert facet.job(second.job_id).state == "completed"


def test_a_live_holder_of_another_process_is_still_refused(facet: Facet, tmp_path: Path) -> None:
    """The read again refuses only what still holds the lease: a writer of another process
    (its pid alive on this host, its job none of this process's) is refused as before."""
    with subprocess.Popen(["sleep", "60"]) as other:
        try:
            _hold(facet, 9999, pid=other.pid)
            with pytest.raises(ConflictError, match=rf"job 9999 \(pid {other.pid} on host "
                               rf".*\) is still indexing into 'tiny'"):
                facet.indexing.prepare(tmp_path / "tinysrc", "tiny", runner="thread")
        finally:
            other.kill()
    assert [j.state for j in facet.jobs("tiny")] == ["completed"]  # the refused job left nothing


def test_a_lease_this_process_kept_for_a_job_no_longer_running_is_refused(
        facet: Facet, tmp_path: Path) -> None:
    """A lease of this very pid whose job is not running here (kept while the database was out
    of reach, until its end is written) is a live writer still: a same-pid holder is not
    taken for one of ours."""
    _hold(facet, 9998)  # this pid, not in _ACTIVE_JOBS
    with pytest.raises(ConflictError, match=r"job 9998 .* is still indexing into 'tiny'"):
        facet.indexing.prepare(tmp_path / "tinysrc", "tiny", runner="thread")


@pytest.mark.parametrize("when", ["right after it took the lease", "right before it let it go"])
def test_a_removal_of_this_process_holds_its_place_while_it_holds_the_lease(
        facet: Facet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str) -> None:
    """A removal is one of this process's jobs for as long as it holds the lease (registered
    before taking it, left after letting it go): an index job submitted while it holds it is
    queued behind it, not refused (it registered only after taking the lease, and left before
    letting it go)."""
    key = str(sorted((tmp_path / "tinysrc").iterdir())[0])
    accepted: list[int] = []
    removal: list[int] = []
    real_take, real_release = indexing.IndexService.take_lease, leases.release

    def submit() -> None:
        accepted.append(facet.indexing.prepare(tmp_path / "tinysrc", "tiny",
                                               runner="thread").job_id)

    def take_lease(self, session, coll, job):  # type: ignore[no-untyped-def]
        real_take(self, session, coll, job)
        removal.append(job.id)
        if when.startswith("right after"):
            submit()

    def release(session, collection_id, job_id):  # type: ignore[no-untyped-def]
        if when.startswith("right before") and removal == [job_id] and not accepted:
            submit()
        real_release(session, collection_id, job_id)

    monkeypatch.setattr(indexing.IndexService, "take_lease", take_lease)
    monkeypatch.setattr(leases, "release", release)
    report = facet.remove_documents("tiny", [key])
    assert len(report.removed) == 1
    assert len(accepted) == 1, accepted
    facet.indexing.fail(accepted[0], "not run")
    with indexing._REGISTRY_LOCK:
        assert removal[0] not in indexing._ACTIVE_JOBS  # it left once it ended


def test_a_lease_of_a_deleted_collection_is_not_found_not_a_recursion(facet: Facet) -> None:
    """``leases.acquire`` tried again whenever its UPDATE took no row and no holder was found: of
    a collection whose row is gone (deleted under a job) it recursed until RecursionError."""
    from app.errors import NotFoundError

    coll_id = _coll_id(facet)
    facet.delete_collection("tiny")
    with facet.indexing.sessions() as s, pytest.raises(NotFoundError, match=r"^the collection of job 99 was "
                                                                             r"deleted before the job"):
        leases.acquire(s, coll_id, 99, facet.settings.lease_ttl_s)


def _worker_job(facet: Facet, runner: str = "celery") -> int:
    """A running job of ``tiny`` as a worker records it (runner ``celery``), holding the lease,
    and not one of this process's jobs."""
    with facet.indexing.sessions() as s:
        job = md.IndexJob(collection_id=_coll_id(facet), source="/srv/other", embedder="minilm",
                          runner=runner, state="running", host="gpu-2", pid=4242)
        s.add(job)
        s.commit()
        job_id = job.id
    _hold(facet, job_id)
    assert job_id not in indexing._ACTIVE_JOBS
    return job_id


def test_a_job_for_the_workers_queues_behind_a_worker_job_in_any_server(
        facet: Facet, tmp_path: Path) -> None:
    """A worker plans a job only once its collection's lease is free (it waits), so a job sent
    to the workers while a worker job writes the collection is queued behind it. That held only
    in the server that had sent the worker job (its id stayed in ``_ACTIVE_JOBS`` for good); a
    server started since refused the same request, 409 "job N ... is still indexing"."""
    holder = _worker_job(facet)
    prepared = facet.indexing.prepare(tmp_path / "tinysrc", "tiny", runner="celery")
    assert prepared.job_id != holder
    facet.indexing.handed_off(prepared.job_id)
    # A job this process runs itself, or one of the foreground, is still refused.
    for runner in ("inline", "thread"):
        with pytest.raises(ConflictError, match=rf"job {holder} .* is still indexing into 'tiny'"):
            facet.indexing.prepare(tmp_path / "tinysrc", "tiny", runner=runner)


def test_a_foreground_writer_still_refuses_a_job_for_the_workers(
        facet: Facet, tmp_path: Path) -> None:
    """Only a worker job is queued behind: a `facet index` of another process writing the
    collection (runner ``inline``) is refused as before."""
    holder = _worker_job(facet, runner="inline")
    with pytest.raises(ConflictError, match=rf"job {holder} .* is still indexing into 'tiny'"):
        facet.indexing.prepare(tmp_path / "tinysrc", "tiny", runner="celery")


class _SentElsewhere:
    """Stands in for CeleryJobRunner / ProcessJobRunner (a real broker and worker are in
    tests/worker): the job is taken to run in another process, and nothing more."""

    runner_name = "celery"
    runs_elsewhere = True

    def __init__(self) -> None:
        self.sent: list[int] = []

    def submit(self, job: indexing.PreparedJob) -> None:
        self.sent.append(job.job_id)

    def close(self) -> None:
        """Nothing runs here."""


def test_a_job_sent_to_another_process_is_no_longer_this_process_s(
        facet: Facet, tmp_path: Path) -> None:
    """A job handed to the workers (or to a detached `facet run-job`) stayed in this process's
    ``_ACTIVE_JOBS`` for good: a job of the same id in another data folder of the process (two
    Facets in one script; the test suite) was taken for one of ours, and a stale ``queued`` row
    of that id for one waiting its turn."""
    runner = _SentElsewhere()
    facet.job_runner = runner
    info = facet.submit_index(tmp_path / "tinysrc", "tiny")
    assert runner.sent == [info.id] and info.state == "queued"
    assert info.id not in indexing._ACTIVE_JOBS


def test_a_worker_holding_the_embedded_store_is_named_by_its_job(facet: Facet, tmp_path: Path) -> None:
    """On the embedded store a worker writing the collection holds its folder, so a job for the
    workers cannot be queued behind it: refused, as before, but the 409 said only "open in pid
    N (facet worker) ... serve every reader and writer from one `facet serve`", advice that does
    not fit a worker. It names the job, when to send again, and the store that queues."""
    holder = _worker_job(facet)
    facet.indexing.store.release("tiny")
    with locked_by_another_process(facet.settings.data_dir, "tiny", shown_as="facet worker"), \
            pytest.raises(ConflictError) as refused:
        facet.indexing.prepare(tmp_path / "tinysrc", "tiny", runner="celery")
    said = str(refused.value)
    assert said.startswith(f"collection 'tiny' is being indexed by job {holder} (pid "), said
    assert f"wait for job {holder} to finish" in said and "then send this one again" in said
    assert "queued behind a worker job where the vectors are in a Qdrant server" in said
    assert "serve every reader and writer" not in said
    assert sorted(j.state for j in facet.jobs("tiny")) == ["completed", "running"]  # nothing added
