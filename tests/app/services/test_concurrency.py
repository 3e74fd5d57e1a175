"""Embedded mode: readers never break a writer, one writer per collection, truthful job states.

The design (docs/indexing.md, "Concurrent access"): an embedded (edge) collection is opened
by one process at a time, under a per-process ``flock``; a reader in another process gets a
one-line "collection X is being indexed by job N" (exit 5) instead of touching the shard,
and ``facet collections`` shows "? points · being indexed by job N".
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from app.core import Facet
from app.errors import ConflictError
from app.services.collections import CollectionService
from app.services.indexing import IndexOptions, IndexService
from app.services.search import SearchRequest
from app.settings import FacetSettings
from app.text import plural
from indexer import metadata as md

from .conftest import locked_by_another_process, write_corpus

if TYPE_CHECKING:
    from embedders.contract import Embedder

ROOT = Path(__file__).resolve().parents[3]


def _state(db: Path) -> tuple[str | None, int]:
    """(state of the newest job, documents indexed) read without the app."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            row = conn.execute("SELECT state FROM index_jobs ORDER BY id DESC LIMIT 1").fetchone()
            n = conn.execute("SELECT count(*) FROM documents WHERE status='indexed'").fetchone()
            return (row[0] if row else None), int(n[0])
    except sqlite3.Error:
        return None, 0


def _env(data: Path) -> dict[str, str]:
    return dict(os.environ, FACET_DATA_DIR=str(data), FACET_CHUNK_TOKENS="64",
                FACET_CHUNK_OVERLAP="8", FACET_STORE_WAIT_S="0.2", OMP_NUM_THREADS="1",
                HF_HUB_OFFLINE="1")


def _facet(data: Path, minilm: Embedder) -> Facet:
    """This process's Facet on ``data``, with the session's MiniLM (the model the writer
    subprocess loaded) in its cache rather than a second load of it from disk."""
    from app.services.context import EmbedderCache

    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    return Facet(FacetSettings(data_dir=data), embedders=cache)


def _as_from_a_terminal() -> None:
    """In the child: Ctrl-C's default disposition, unblocked, as a shell gives a command. A
    disposition of SIG_IGN or a blocked mask is inherited through exec, and in a full suite
    run the writer ignored SIGINT (it passed alone, 5 of 5): some earlier in-process test
    leaves the pytest process so (not yet traced). SIGTERM likewise, for the tests that send it."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


def _writer(src: Path, data: Path, name: str, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "app", "index", str(src), "--collection", name,
                             "--batch-chunks", "8", *extra], env=_env(data), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_as_from_a_terminal)


def _wait_indexing(db: Path, proc: subprocess.Popen[bytes], at_least: int = 4) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        state, n = _state(db)
        if state == "running" and n >= at_least:
            return
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        time.sleep(0.02)
    raise AssertionError("the writer did not start indexing")


@pytest.mark.slow
def test_search_and_collections_during_an_index_never_break_it(tmp_path, minilm) -> None:
    files = write_corpus(tmp_path / "src", 120, words=80)  # 30 batches: readers overlap many
    data = tmp_path / "data"
    writer = _writer(tmp_path / "src", data, "busy")
    _wait_indexing(data / "facet.db", writer)
    # Readers in other processes, as a user would run them...
    clis = {name: subprocess.Popen([sys.executable, "-m", "app", *args], env=_env(data),
                                   cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
            for name, args in (("search", ["search", "bank card", "-c", "busy"]),
                               ("collections", ["collections"]))}
    ended_during_job: dict[str, bool] = {}
    # ...and in this process, in a loop, until the writer is done.
    settings = FacetSettings(data_dir=data, chunk_tokens=64, chunk_overlap=8, store_wait_s=0.2)
    reader = Facet(settings)
    reader.embedder_cache.put("minilm", minilm)
    refused = answered = 0
    try:
        while writer.poll() is None:
            for name, proc in clis.items():
                if name not in ended_during_job and proc.poll() is not None:
                    ended_during_job[name] = writer.poll() is None
            try:
                reader.search(SearchRequest("bank card", "busy", top_k=3))
                answered += 1
            except ConflictError as e:
                assert "is being indexed by job" in str(e) and "one `facet serve`" in str(e)
                refused += 1
            infos = reader.collections()
            assert [i.name for i in infos] == ["busy"]
            if infos[0].writer:
                assert infos[0].points is None  # never counted through the writer's shard
            time.sleep(0.05)
    finally:
        reader.close()
    _out, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err.decode()[-2000:]
    assert _state(data / "facet.db")[0] == "completed"
    results = {name: (proc.wait(timeout=120), *proc.communicate()) for name, proc in clis.items()}
    code, _o, search_err = results["search"]
    if ended_during_job.get("search"):
        # One line naming the job and what to do; exit 5 (conflict); no traceback.
        assert code == 5, search_err
        lines = [x for x in search_err.splitlines() if x.startswith("error:")]
        assert len(lines) == 1 and "is being indexed by job 1 (pid" in lines[0], search_err
    assert "Traceback" not in search_err
    code, listing, listing_err = results["collections"]
    assert code == 0 and "Traceback" not in listing_err, listing_err
    if ended_during_job.get("collections"):
        assert "? points" in listing and "being indexed by job 1" in listing, listing
    assert refused > 0, "no read overlapped the index job"
    with Facet(settings) as facet:
        info = facet.collection("busy")
        ids = [h.id for h in facet.context.store.scroll("busy", limit=100_000)]
    assert info.points == info.chunks == len(ids) == len(set(ids))
    assert info.documents_indexed == len(files)
    print(f"CLI readers ended during the job: {ended_during_job}; search stderr: "
          f"{search_err.strip().splitlines()[-1]!r}; collections: {listing.strip()!r}; "
          f"{refused} in-process reads refused, {answered} answered; writer completed with "
          f"{info.points} points == {info.chunks} chunks")


def test_two_indexers_creating_one_collection_at_once(make_ctx, tmp_path, monkeypatch) -> None:
    """Both find no collection, both create it: the loser gets the one-writer message, not
    an IntegrityError (the interleaving is forced with a barrier)."""
    write_corpus(tmp_path / "src", 6)
    first, second = make_ctx(), make_ctx()
    barrier = threading.Barrier(2, timeout=30)
    real_get = md.get_collection
    calls: dict[int, int] = {}

    def racing_get(session, name):  # type: ignore[no-untyped-def]
        ident = threading.get_ident()
        calls[ident] = calls.get(ident, 0) + 1
        found = real_get(session, name)
        if calls[ident] == 1:  # the very first look-up of each indexer: both see nothing
            barrier.wait()
        return found

    monkeypatch.setattr(md, "get_collection", racing_get)
    outcomes: dict[str, object] = {}

    def run(label: str, ctx) -> None:  # type: ignore[no-untyped-def]
        try:
            outcomes[label] = IndexService(ctx).index(tmp_path / "src", "race")
        except Exception as e:
            outcomes[label] = e

    threads = [threading.Thread(target=run, args=(k, c)) for k, c in (("a", first), ("b", second))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    monkeypatch.setattr(md, "get_collection", real_get)
    errors = [o for o in outcomes.values() if isinstance(o, Exception)]
    reports = [o for o in outcomes.values() if not isinstance(o, Exception)]
    assert all(isinstance(e, ConflictError) and "one writer per collection" in str(e)
               for e in errors), errors
    assert len(reports) >= 1 and all(r.state == "completed" for r in reports)  # type: ignore[union-attr]
    info = CollectionService(first).get("race")
    assert info.documents_indexed == 6 and info.points == info.chunks


def test_job_ids_are_never_reused_after_delete(make_ctx, tmp_path) -> None:
    write_corpus(tmp_path / "src", 2)
    ctx = make_ctx()
    before = IndexService(ctx).index(tmp_path / "src", "c").job_id
    CollectionService(ctx).delete("c")
    after = IndexService(ctx).index(tmp_path / "src", "c").job_id
    assert after > before


@pytest.mark.slow
def test_ctrl_c_leaves_an_interrupted_job_that_says_how_to_resume(tmp_path, minilm) -> None:
    # 48 documents of two chunks, 8 chunks a batch: 12 batches, the stop asked for after the
    # second; the writer is far from done when it arrives (160 cost ~15 s more of the suite).
    write_corpus(tmp_path / "src", 48, words=80)
    data = tmp_path / "data"
    writer = _writer(tmp_path / "src", data, "stop")
    _wait_indexing(data / "facet.db", writer)
    writer.send_signal(signal.SIGINT)
    _out, err = writer.communicate(timeout=60)
    assert writer.returncode != 0
    # It stops between batches, never inside a commit (where an interrupt once left SQLite
    # locked and the job could not be recorded as interrupted).
    said = err.decode()
    assert ("Ctrl-C: stopping at the next safe point, between the encoder's pieces or once the "
            "batch") in said, said[-3000:]
    with _facet(data, minilm) as facet:
        job = facet.jobs("stop")[0]
        assert job.state == "interrupted", job
        assert "Ctrl-C" in (job.message or "") and "again to resume" in (job.message or ""), err.decode()[-3000:]
        # The count it gives is what was kept (not the batch that was rolled back).
        assert f"with {plural(job.docs_indexed, 'document')} indexed;" in (job.message or ""), job
        # ...and the terminal said so too (it was only in `facet jobs`).
        assert f"job {job.id} interrupted: stopped (Ctrl-C) with" in err.decode(), err.decode()[-2000:]
        assert writer.returncode == 130
        # Nothing holds the collection any more: it can be read at once.
        assert facet.collection("stop").writer is None
        # Run again, it resumes the stopped job, which then says so (it kept saying "run ...
        # again to resume" after the run that resumed it had finished).
        again = facet.index(str(tmp_path / "src"), "stop")
        assert facet.job(again.job_id).resumed_from == job.id
        assert facet.job(job.id).message == (f"stopped (Ctrl-C) with {plural(job.docs_indexed, 'document')} "
                                             f"indexed; resumed by job {again.job_id}")


@pytest.mark.slow
def test_sigterm_stops_an_index_like_ctrl_c(tmp_path, minilm) -> None:
    """SIGTERM (`kill`, `docker stop`, systemd) killed `facet index` at once: exit 143 and no
    word, the job then read like a crash ("its writer stopped without finishing"). It now
    stops after the batch being written, as the first Ctrl-C does: the job `interrupted`,
    "stopped (SIGTERM)" with the resume hint, said in the terminal too; exit 143 (128 + 15)."""
    write_corpus(tmp_path / "src", 48, words=80)  # 24 batches of 4 chunks
    data = tmp_path / "data"
    writer = _writer(tmp_path / "src", data, "term", "--batch-chunks", "4")
    _wait_indexing(data / "facet.db", writer)
    writer.send_signal(signal.SIGTERM)
    _out, err = writer.communicate(timeout=60)
    said = err.decode()
    assert writer.returncode == 143, said[-3000:]
    assert "SIGTERM: stopping at the next safe point" in said, said[-3000:]
    with _facet(data, minilm) as facet:
        job = facet.jobs("term")[0]
        assert job.state == "interrupted", job
        assert job.message == (f"stopped (SIGTERM) with {plural(job.docs_indexed, 'document')} indexed; run "
                               f"`facet index {tmp_path / 'src'} --collection term --embedder "
                               "minilm` (or submit the job) again to resume: what was indexed is "
                               "kept"), job
        assert 0 < job.docs_indexed < 48, job
        assert f"job {job.id} interrupted: stopped (SIGTERM) with" in said, said[-2000:]
        assert facet.collection("term").writer is None
        again = facet.index(str(tmp_path / "src"), "term")
        assert facet.job(again.job_id).resumed_from == job.id
        assert again.docs_skipped == job.docs_indexed and again.docs_indexed == 48 - job.docs_indexed


@pytest.mark.slow
def test_sigterm_stops_a_background_job_like_ctrl_c(tmp_path, minilm) -> None:
    """The process behind `facet index --background` (`facet run-job`, detached) is what a
    `kill` or a container's stop reaches: it too stops after its batch, exit 143, the job
    `interrupted` "stopped (SIGTERM)" (it read like a crash)."""
    import json

    from app.services.context import EmbedderCache

    write_corpus(tmp_path / "src", 48, words=80)  # 24 batches of 4 chunks
    data = tmp_path / "data"
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    with Facet(FacetSettings(data_dir=data, chunk_tokens=64, chunk_overlap=8),
               embedders=cache) as facet:
        prepared = facet.indexing.prepare(tmp_path / "src", "bgterm",
                                          IndexOptions(batch_chunks=4), runner="process")
    runner = subprocess.Popen([sys.executable, "-m", "app", "run-job",
                               json.dumps(prepared.to_dict())], env=_env(data), cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              preexec_fn=_as_from_a_terminal)
    _wait_indexing(data / "facet.db", runner)
    runner.send_signal(signal.SIGTERM)
    _out, err = runner.communicate(timeout=60)
    assert runner.returncode == 143, err.decode()[-3000:]
    assert "SIGTERM: stopping at the next safe point" in err.decode()
    with Facet(FacetSettings(data_dir=data)) as facet:
        job = facet.job(prepared.job_id)
        assert job.state == "interrupted", job
        assert (job.message or "").startswith(f"stopped (SIGTERM) with {job.docs_indexed} "
                                              "documents indexed; run `facet index "), job
        assert 0 < job.docs_indexed < 48, job


def test_sigterm_is_deferred_only_over_the_default_handler_on_the_main_thread() -> None:
    """The job's SIGTERM handling must leave a server's own alone: uvicorn and Celery install
    their handlers (and a Celery pool process resets SIGTERM to the default but runs no
    in-process job), and a `facet serve` / `facet ui` runs its jobs on other threads."""
    from app.services.indexing import Terminated, _DeferredInterrupt

    def theirs(_signum, _frame) -> None:
        """A server's shutdown handler."""

    saved = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, theirs)
        with _DeferredInterrupt() as interrupt:  # a server's handler: left as it is
            assert signal.getsignal(signal.SIGTERM) is theirs
            assert signal.getsignal(signal.SIGINT) == interrupt._handle
        assert signal.getsignal(signal.SIGTERM) is theirs
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        seen: list[object] = []

        def on_a_thread() -> None:
            with _DeferredInterrupt():
                seen.append(signal.getsignal(signal.SIGTERM))

        thread = threading.Thread(target=on_a_thread)
        thread.start()
        thread.join()
        assert seen == [signal.SIG_DFL]

        with _DeferredInterrupt() as interrupt:
            assert signal.getsignal(signal.SIGTERM) == interrupt._handle
            interrupt.check()  # nothing asked yet
            interrupt._handle(signal.SIGTERM, None)  # deferred: the batch goes on
            with pytest.raises(Terminated) as stopped:
                interrupt.check()
            assert stopped.value.code == 143 and not isinstance(stopped.value, KeyboardInterrupt)
            with pytest.raises(KeyboardInterrupt):  # a second signal stops at once
                interrupt._handle(signal.SIGINT, None)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGTERM, saved[0])
        signal.signal(signal.SIGINT, saved[1])


@pytest.mark.slow
def test_background_in_embedded_mode_runs_a_detached_process(tmp_path) -> None:
    write_corpus(tmp_path / "src", 3)
    data = tmp_path / "data"
    env = {k: v for k, v in _env(data).items() if k != "FACET_BROKER_URL"}
    done = subprocess.run([sys.executable, "-m", "app", "index", str(tmp_path / "src"), "-c",
                           "bg", "--background"], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    job_id = int(done.stdout.strip().splitlines()[-1])
    assert "queued on a background process" in done.stderr
    follow = subprocess.run([sys.executable, "-m", "app", "jobs", str(job_id), "--follow",
                             "--interval", "0.2"], env=env, cwd=ROOT, capture_output=True,
                            text=True, timeout=240)
    assert follow.returncode == 0, follow.stdout + follow.stderr
    assert follow.stdout.splitlines()[-1].startswith(f"job {job_id} completed: 3/3 documents")
    assert (data / "logs" / f"job-{job_id}.log").is_file()
    # Deleting the collection deletes its jobs' rows, and now their logs: one file a job was
    # kept for good, named by nothing.
    (data / "logs" / "job-999.log").write_text("another collection's job")
    gone = subprocess.run([sys.executable, "-m", "app", "delete", "bg", "--yes"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert gone.returncode == 0, gone.stderr
    assert sorted(p.name for p in (data / "logs").iterdir()) == ["job-999.log"]


def test_a_collection_open_in_a_reading_process_is_not_called_being_indexed(make_ctx, tmp_path) -> None:
    """A `facet serve` that searched a collection holds its folder: `facet collections` said
    "? points · being indexed by another process", though nothing was indexing it."""
    write_corpus(tmp_path / "src", 2)
    ctx = make_ctx(store_wait_s=0.2)
    IndexService(ctx).index(tmp_path / "src", "c")
    ctx.store.release("c")
    with locked_by_another_process(ctx.settings.data_dir, "c", opened=True) as holder:
        info = CollectionService(ctx).get("c")
        assert (info.writer, info.points) == (None, None)
        assert info.open_in == f"pid {holder.pid} on host {os.uname().nodename}", info


def test_a_writer_refused_by_a_process_holding_the_collection_leaves_nothing(make_ctx, tmp_path) -> None:
    """`facet index` against a collection a `facet serve` had open: refused (exit 5), but the
    new documents stayed 'pending' (340 documents, 300 indexed) and the job had taken the lease
    first (with a stalled writer's expired lease, both jobs then failed)."""
    write_corpus(tmp_path / "src", 2)
    write_corpus(tmp_path / "more", 3)
    ctx = make_ctx(store_wait_s=0.2)
    service = IndexService(ctx)
    service.index(tmp_path / "src", "c")
    ctx.store.release("c")
    with locked_by_another_process(ctx.settings.data_dir, "c", opened=True) as holder:
        with pytest.raises(ConflictError, match=f"collection 'c' is open in pid {holder.pid}"):
            service.index(tmp_path / "more", "c", IndexOptions(sync=False))
        info = CollectionService(ctx).get("c")
        assert (info.documents, info.documents_indexed) == (2, 2)  # no phantom 'pending' rows
        # The refused job is not left queued (the next run called it "interrupted" and
        # resumed it), nor kept as a failed row: its caller was told, and holds no job id.
        assert [j.state for j in CollectionService(ctx).jobs("c")] == ["completed"]
        with ctx.sessions() as s:
            coll = md.get_collection(s, "c")
            assert coll is not None and coll.writer_job_id is None  # the lease was not taken
