"""The application core (``Facet``): one object over index/search/cluster/collections/jobs/
embed, raising only domain errors; real minilm, edge store and SQLite in a temp folder."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from app.core import Facet
from app.encoding import BatchingQueryEncoder, InlineQueryEncoder
from app.errors import (
    ConflictError,
    FacetError,
    InvalidRequestError,
    NotFoundError,
    TooLargeError,
    UnknownModelError,
)
from app.jobs import InlineJobRunner, ThreadJobRunner
from app.services.clustering import ClusterRequest
from app.services.indexing import IndexOptions
from app.services.search import SearchRequest
from app.settings import FacetSettings
from indexer import metadata as md


@pytest.fixture
def facet(cache, tmp_path):
    facet = Facet(FacetSettings(data_dir=tmp_path / "data", chunk_tokens=64, chunk_overlap=8),
                  embedders=cache)
    yield facet
    facet.close()


def _corpus(root: Path, texts: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (root / f"{name}.txt").write_text(text)
    return root


def test_embed_gives_the_models_vectors_and_token_counts(facet, minilm) -> None:
    out = facet.embed(["a cat", "a dog on a mat"], role="query", instruction="Topic")
    np.testing.assert_allclose(out.vectors, minilm.encode(["a cat", "a dog on a mat"],
                                                          role="query", instruction="Topic"),
                               atol=1e-6)
    assert (out.embedder, out.dim, out.role, out.instruction) == ("minilm", 384, "query", "Topic")
    assert out.tokens == len(minilm.tokenizer("a cat a dog on a mat")["input_ids"]) - 2


def test_embed_names_the_instruction_the_texts_were_read_under(cache, tmp_path, smollm2_cut,
                                                                tiny_inbedder_dir) -> None:
    """InstEmb and InBedder read every text under an instruction, their default where none is
    given: `facet embed -e instemb` printed "instruction": null for vectors made under "What is
    this text about?". The result names the one read; minilm's a blank one is none."""
    from embedders.methods.instemb import InstEmbConfig, InstEmbEmbedder

    cache.put("tiny-instemb", InstEmbEmbedder(InstEmbConfig(max_length=64, look_ahead=2,
                                                            backbone=smollm2_cut), device="cpu"))
    facet = Facet(FacetSettings(data_dir=tmp_path / "data"), embedders=cache)
    try:
        for name in ("tiny-instemb", str(tiny_inbedder_dir)):
            assert facet.embed(["a cat"], embedder=name).instruction == "What is this text about?"
            assert facet.embed(["a cat"], embedder=name, instruction=" Mood ").instruction == "Mood"
        assert facet.embed(["a cat"], instruction=" \t").instruction is None
        assert facet.embed(["a cat"]).instruction is None
    finally:
        facet.close()


def test_only_domain_errors_come_out(facet) -> None:
    # A wrong ``search`` was refused by the service, then replaced by an AttributeError in the
    # facade's own clean-up (``request.search.collection`` of a str).
    with pytest.raises(InvalidRequestError, match="search must be a SearchRequest"):
        facet.cluster(ClusterRequest("intent?", search="card"))  # type: ignore[arg-type]
    # TypeErrors (and SQLite's parameter binding) before; 5 was an "unknown embedder".
    for call, words in ((lambda: facet.jobs(limit="5"), "limit must be an int"),
                        (lambda: facet.jobs(5), "collection must be a str or None"),
                        (lambda: facet.collection(None), "name must be a str"),
                        (lambda: facet.collection(b"docs"), "name must be a str"),
                        (lambda: facet.delete_collection(["a"]), "name must be a str"),
                        (lambda: facet.embed(["x"], embedder=5), "embedder must be a str or None")):
        with pytest.raises(InvalidRequestError, match=words):
            call()
    with pytest.raises(UnknownModelError, match="unknown embedder 'nope'"):
        facet.embed(["x"], embedder="nope")
    with pytest.raises(InvalidRequestError, match="unknown role 'passage'"):
        facet.embed(["x"], role="passage")
    with pytest.raises(InvalidRequestError, match="not one string"):
        facet.embed("x")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match=r"texts\[1\] is int"):
        facet.embed(["x", 1])  # type: ignore[list-item]
    with pytest.raises(InvalidRequestError, match=r"texts\[2\] is empty"):
        facet.embed(["x", "y", "  \t"])  # as indexing, search and the API's input refuse one
    with pytest.raises(TooLargeError, match="FACET_MAX_TEXTS_PER_CALL"):
        facet.embed(["x"] * (facet.settings.max_texts_per_call + 1))
    # TypeErrors before, out of the facade's FacetError contract; "" indexed the process's folder.
    with pytest.raises(InvalidRequestError, match="texts must be a list of strings, got NoneType"):
        facet.embed(None)  # type: ignore[arg-type]
    # Bytes were read as a list of numbers ("texts[0] is int (97)"), as in FacetEmbeddings.
    with pytest.raises(InvalidRequestError, match=r"got bytes: decode them first"):
        facet.embed(b"abc")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match=r"texts\[1\] is bytes .*decode it first"):
        facet.embed(["x", b"y"])  # type: ignore[list-item]
    with pytest.raises(InvalidRequestError, match="a job id is a whole number, got 'abc'"):
        facet.job("abc")  # type: ignore[arg-type]
    for submit in (facet.index, facet.submit_index):
        with pytest.raises(InvalidRequestError, match="the source is empty"):
            submit("  ", "c")
    with pytest.raises(NotFoundError):
        facet.search(SearchRequest("x", "nope"))
    with pytest.raises(NotFoundError):
        facet.job(12345)
    with pytest.raises(NotFoundError):
        facet.collection("nope")


async def test_aembed_equals_embed(cache, tmp_path) -> None:
    facet = Facet.for_serving(FacetSettings(data_dir=tmp_path / "data"), embedders=cache)
    try:
        assert isinstance(facet.encoder, BatchingQueryEncoder)
        sync = facet.embed(["a cat"], instruction="Topic")
        out = await facet.aembed(["a cat"], instruction="Topic")
        np.testing.assert_allclose(out.vectors, sync.vectors, atol=1e-6)
        assert out.tokens == sync.tokens
        # Both name the field, as POST /v1/embeddings maps it to ``model`` (aembed's was None).
        for call in (facet.embed, facet.aembed):
            with pytest.raises(UnknownModelError) as raised:
                result = call(["x"], embedder="nope")
                if not isinstance(result, type(sync)):
                    await result
            assert raised.value.param == "embedder", call
    finally:
        facet.close()


async def test_aembed_of_an_inline_facade_lets_the_event_loop_run(cache, tmp_path) -> None:
    """``Facet.open()`` encodes in the calling thread: its ``aembed`` held the event loop for the
    whole encode (a 10 ms heartbeat stalled 16.6 s for 1,000 texts)."""
    import asyncio

    with Facet.open(FacetSettings(data_dir=tmp_path / "data"), embedders=cache) as facet:
        assert isinstance(facet.encoder, InlineQueryEncoder)
        texts = [f"note {i} about the lighthouse keeper and the " + "sea " * 30 for i in range(400)]
        beats = 0

        async def heartbeat() -> None:
            nonlocal beats
            while True:
                await asyncio.sleep(0.01)
                beats += 1

        ticker = asyncio.create_task(heartbeat())
        out = await facet.aembed(texts)
        ticker.cancel()
        assert out.vectors.shape == (400, 384)
        np.testing.assert_allclose(out.vectors[:3], facet.embed(texts[:3]).vectors, atol=1e-5)
        assert beats >= 5, beats  # the loop ran while the texts were encoded


def test_a_closed_facade_refuses_work_and_holds_nothing(cache, tmp_path) -> None:
    """After close(), search/index/embed still worked and reopened the store (holding the
    folder past close, which a second close() no longer released), and submit_index left an
    empty collection behind."""
    src = _corpus(tmp_path / "notes", {"a": "a note about lighthouses"})
    settings = FacetSettings(data_dir=tmp_path / "data", chunk_tokens=64, chunk_overlap=8)
    first = Facet(settings, embedders=cache)
    first.index(src, "c1")
    first.close()
    for call in (lambda: first.search(SearchRequest("x", "c1")), lambda: first.embed(["x"]),
                 lambda: first.index(src, "c2"), lambda: first.submit_index(src, "late"),
                 lambda: first.collections()):
        with pytest.raises(InvalidRequestError, match="this Facet is closed"):
            call()
    with Facet(settings, embedders=cache) as second:  # the folder is free, nothing was added
        assert [c.name for c in second.collections()] == ["c1"]
        assert second.search(SearchRequest("lighthouse", "c1")).results


def test_closing_a_server_interrupts_its_running_job_resumably(cache, tmp_path) -> None:
    """SIGTERM on `facet serve` marked the running job failed ('the query encoder is closed'),
    not interrupted with the way to resume."""
    from app.services.indexing import IndexOptions

    src = _corpus(tmp_path / "many", {f"d{i:03d}": f"note {i} about " + "trains " * 40
                                      for i in range(300)})
    settings = FacetSettings(data_dir=tmp_path / "data", chunk_tokens=64, chunk_overlap=8)
    server = Facet.for_serving(settings, embedders=cache)
    job = server.submit_index(src, "big", IndexOptions(batch_chunks=4))
    deadline = time.monotonic() + 120
    while server.job(job.id).docs_indexed < 8:
        assert time.monotonic() < deadline, server.job(job.id)
        time.sleep(0.05)
    server.close(reason="the server stopping")  # as `facet serve` and `facet ui` close it
    with Facet(settings, embedders=cache) as after:
        stopped = after.job(job.id)
        assert stopped.state == "interrupted", stopped
        assert (stopped.message or "").startswith("stopped (the server stopping) with ")
        assert 0 < stopped.docs_indexed < 300
        again = after.index(src, "big")
        assert after.job(again.job_id).resumed_from == job.id
        assert after.collection("big").documents_indexed == 300


def test_a_script_ending_while_its_background_job_runs_exits_cleanly_and_the_job_resumes(
        tmp_path) -> None:
    """A script that submitted a job and ended without ``close()`` aborted in the interpreter's
    shutdown (exit 134, "terminate called without an active exception"), its job thread inside
    torch; the facade is closed at exit: the job stops at its next batch, interrupted."""
    import sys

    src = _corpus(tmp_path / "many", {f"d{i:03d}": f"note {i} about " + "trains " * 40
                                      for i in range(300)})
    data = tmp_path / "data"
    script = tmp_path / "script.py"
    script.write_text(
        "import time\n"
        "from app.core import Facet\n"
        "from app.services.indexing import IndexOptions\n"
        "facet = Facet.open()\n"
        f"job = facet.submit_index({str(src)!r}, 'big', IndexOptions(batch_chunks=4))\n"
        "while facet.job(job.id).docs_indexed < 8:\n"
        "    time.sleep(0.05)\n"
        "print(job.id, flush=True)\n")  # and ends, the job running
    env = {"PATH": "/usr/bin:/bin", "FACET_DATA_DIR": str(data), "OMP_NUM_THREADS": "1",
           "FACET_CHUNK_TOKENS": "64", "FACET_CHUNK_OVERLAP": "8",
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    job_id = int(done.stdout.split()[0])
    settings = FacetSettings(data_dir=data, chunk_tokens=64, chunk_overlap=8)
    with Facet(settings) as after:
        stopped = after.job(job_id)
        assert stopped.state == "interrupted", stopped
        assert (stopped.message or "").startswith(
            "stopped (the process exiting before the job ended) with "), stopped.message
        assert 0 < stopped.docs_indexed < 300


def test_two_facades_on_one_folder_in_one_process_is_a_conflict(cache, tmp_path) -> None:
    """The second one's search was an InvalidRequestError saying 'another process may hold
    it' (the WAL lock of the first one's open shard), in the same process."""
    src = _corpus(tmp_path / "notes", {"a": "a lighthouse keeper"})
    settings = FacetSettings(data_dir=tmp_path / "data", chunk_tokens=64, chunk_overlap=8)
    with Facet(settings, embedders=cache) as first, Facet(settings, embedders=cache) as second:
        first.index(src, "c")
        first.search(SearchRequest("lighthouse", "c"))  # holds the collection open
        with pytest.raises(ConflictError, match="open in another store of this process"):
            second.search(SearchRequest("lighthouse", "c"))


def test_index_search_delete_keep_the_search_cache_right(facet, tmp_path) -> None:
    src = _corpus(tmp_path / "a", {"card": "My card was declined at the shop.",
                                   "rate": "The exchange rate was wrong."})
    report = facet.index(src, "notes")
    assert report.state == "completed" and report.docs_indexed == 2
    hit = facet.search(SearchRequest("card declined", "notes", top_k=1)).results[0]
    assert hit.text == "My card was declined at the shop."
    facet.delete_collection("notes")
    with pytest.raises(NotFoundError, match="unknown collection 'notes'"):
        facet.search(SearchRequest("card declined", "notes"))
    facet.index(_corpus(tmp_path / "b", {"pin": "I forgot my PIN."}), "notes")
    assert facet.search(SearchRequest("PIN", "notes")).results[0].text == "I forgot my PIN."
    assert [c.name for c in facet.collections()] == ["notes"]


def test_background_jobs_run_in_order_and_report(facet, tmp_path) -> None:
    assert isinstance(facet.job_runner, ThreadJobRunner)
    first = _corpus(tmp_path / "one", {f"d{i}": f"note number {i} about trains" for i in range(6)})
    second = _corpus(tmp_path / "two", {"x": "a note about boats"})
    a = facet.submit_index(first, "bg")
    b = facet.submit_index(second, "bg")  # same collection: runs after a, is not "interrupted"
    assert {a.state, b.state} <= {"queued", "running", "completed"}
    assert facet.job_runner.join(timeout=120)
    done = {j.id: j for j in facet.jobs("bg")}
    assert done[a.id].state == done[b.id].state == "completed"
    assert done[a.id].docs_indexed == 6 and done[b.id].docs_indexed == 1
    assert facet.collection("bg").documents_indexed == 7
    assert facet.search(SearchRequest("boats", "bg", top_k=1)).results[0].text == "a note about boats"
    with pytest.raises(NotFoundError, match="does not exist"):
        facet.submit_index(tmp_path / "missing", "bg")
    with pytest.raises(InvalidRequestError, match="invalid collection name"):
        facet.submit_index(first, "bad/name")


def test_a_failing_job_is_recorded_failed(cache, tmp_path) -> None:
    facet = Facet(FacetSettings(data_dir=tmp_path / "data"), embedders=cache)
    facet.job_runner = InlineJobRunner(facet._run_job)  # runs in this thread: no waiting
    try:
        src = _corpus(tmp_path / "src", {"a": "text"})
        prepared = facet.indexing.prepare(src, "c")
        (src / "a.txt").unlink()
        src.rmdir()  # gone between queueing and running
        facet.job_runner.submit(prepared)
        job = facet.job(prepared.job_id)
        assert job.state == "failed" and "was there when the job was queued" in (job.message or "")
    finally:
        facet.close()


def _hold_lease(facet, name: str, *, pid: int, host: str, expires_in_s: float, source: str) -> int:
    """Record another writer's lease on collection ``name`` (as its process would); its job id."""
    import datetime as dt

    with facet.context.sessions() as s:
        coll = md.get_collection(s, name)
        assert coll is not None
        job = md.IndexJob(collection_id=coll.id, source=source, embedder="minilm", pid=pid,
                          host=host, state="running")
        s.add(job)
        s.flush()
        now = md.utcnow()
        coll.writer_job_id, coll.writer_host, coll.writer_pid = job.id, host, pid
        coll.heartbeat_at, coll.lease_expires_at = now, now + dt.timedelta(seconds=expires_in_s)
        s.commit()
        return job.id


def test_a_live_writer_in_another_process_is_a_conflict(facet, tmp_path) -> None:
    from app.services.leases import HOST

    src = _corpus(tmp_path / "src", {"a": "text"})
    facet.index(src, "c")
    other = subprocess.Popen(["sleep", "60"])
    try:
        _hold_lease(facet, "c", pid=other.pid, host=HOST, expires_in_s=600, source=str(src))
        with pytest.raises(ConflictError, match=f"pid {other.pid} on host {HOST}.*one writer"):
            facet.index(src, "c")
    finally:
        other.kill()
        other.wait()
    # Its process is gone (same host): the lease is dead at once, not after the 600 s expiry.
    report = facet.index(src, "c")
    assert report.state == "completed"
    # The refused run recorded no job (refused before queueing); the dead one is interrupted.
    assert [j.state for j in facet.jobs("c")] == ["completed", "interrupted", "completed"]


def test_a_writer_on_another_host_is_judged_by_its_lease_not_its_pid(facet, tmp_path) -> None:
    src = _corpus(tmp_path / "src", {"a": "text"})
    facet.index(src, "c")
    # pid 999999 does not exist here, but it is another host's pid: only the expiry counts.
    _hold_lease(facet, "c", pid=999999, host="gpu-host-2", expires_in_s=600, source=str(src))
    with pytest.raises(ConflictError, match="pid 999999 on host gpu-host-2"):
        facet.index(src, "c")
    stale = _hold_lease(facet, "c", pid=999999, host="gpu-host-2", expires_in_s=-1,
                        source=str(src))
    report = facet.index(src, "c")  # its lease expired: taken over, its job interrupted
    assert report.state == "completed"
    assert facet.job(stale).state == "interrupted"
    assert facet.job(report.job_id).resumed_from == stale


def test_cluster_through_the_facade(facet) -> None:
    texts = ["card not arrived", "where is my card", "exchange rate wrong", "bad currency rate"]
    result = facet.cluster(ClusterRequest("What does the customer want?", texts=texts, k=2))
    assert sorted(c.size for c in result.clusters) == [2, 2]
    assert json.dumps(result.to_dict())


def test_shared_facade_and_info(facet, cache, tmp_path) -> None:
    Facet.set_shared(facet)
    try:
        assert Facet.shared() is facet
    finally:
        Facet.set_shared(None)
    info = facet.info()
    assert info["vector_backend"] == "edge" and info["default_embedder"] == "minilm"
    assert "minilm" in {e["name"] for e in info["embedders"]}
    assert isinstance(facet.encoder, InlineQueryEncoder) and info["encoder_stats"] is None
    with Facet.open(FacetSettings(data_dir=tmp_path / "other"), embedders=cache) as other:
        assert other.collections() == []
    assert other._closed


def test_errors_are_facet_errors_without_exit_codes() -> None:
    from app.cli import exit_code

    assert not hasattr(FacetError("x"), "exit_code")
    assert exit_code(UnknownModelError("x")) == 2 and exit_code(NotFoundError("x")) == 3
    assert exit_code(ConflictError("x")) == 5 and exit_code(FacetError("x")) == 1


def test_index_options_pass_through(facet, tmp_path) -> None:
    src = _corpus(tmp_path / "src", {"a": " ".join(["word"] * 200)})
    report = facet.index(src, "chunked", IndexOptions(chunk_size=32, chunk_overlap=0))
    assert report.chunks_written == facet.collection("chunked").chunks > 1
    assert facet.collection("chunked").chunk_size == 32


def test_prepared_jobs_travel_as_json(facet, tmp_path) -> None:
    from app.services.indexing import PreparedJob

    src = _corpus(tmp_path / "src", {"a": "text"})
    prepared = facet.indexing.prepare(src, "c", IndexOptions(sync=True, batch_chunks=8))
    again = PreparedJob.from_dict(json.loads(json.dumps(prepared.to_dict())))
    assert again == prepared
    assert facet.indexing.run(again).state == "completed"


def test_searches_keep_answering_while_a_job_writes_the_collection(cache, tmp_path) -> None:
    # The served set-up: request threads search while the job thread upserts, flushes and
    # optimizes the same edge shard, and both encode through the one model thread.
    import threading

    rows = "".join(json.dumps({"id": f"d{i}", "text": f"note {i} about trains, boats and cards"})
                   + "\n" for i in range(240))
    (tmp_path / "rows.jsonl").write_text(rows)
    (tmp_path / "one.jsonl").write_text(json.dumps({"id": "x", "text": "hello"}) + "\n")
    facet = Facet.for_serving(FacetSettings(data_dir=tmp_path / "data", index_batch_chunks=16),
                              embedders=cache)  # 15 batches, each a write the searches meet
    try:
        facet.index(tmp_path / "one.jsonl", "c")
        job = facet.submit_index(tmp_path / "rows.jsonl", "c")
        errors: list[str] = []
        done: list[int] = []

        def search() -> None:
            while facet.job(job.id).state in ("queued", "running"):
                try:
                    facet.search(SearchRequest("cards", "c", top_k=3))
                    done.append(1)
                except Exception as e:  # any error is a failure of the test
                    errors.append(repr(e))
                time.sleep(0.01)  # three busy loops took the job's CPU and made it 3x longer

        threads = [threading.Thread(target=search) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert not errors, errors[:3]
        assert done and facet.job(job.id).state == "completed"
        assert facet.collection("c").documents_indexed == 241
    finally:
        facet.close()


def test_a_metadata_database_locked_too_long_is_busy_not_a_traceback(cache, tmp_path,
                                                                     monkeypatch) -> None:
    """Another process holding SQLite's write lock past the busy timeout gave every edge a
    60-line SQLAlchemy traceback (`facet index` into another collection during a long write)."""
    import sqlite3

    from app.errors import BusyError

    monkeypatch.setattr(md, "SQLITE_BUSY_TIMEOUT_S", 0.3)
    facet = Facet(FacetSettings(data_dir=tmp_path / "data"), embedders=cache)
    holder = None
    try:
        assert facet.collections() == []  # the database exists
        holder = sqlite3.connect(tmp_path / "data" / "facet.db")
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(BusyError, match=r"stayed locked by another process's write for the "
                                            r"whole wait \(0.3 s\); try again"):
            facet.index(_corpus(tmp_path / "src", {"a": "the ferry leaves at noon"}), "other")
    finally:
        if holder is not None:
            holder.rollback()
            holder.close()
        facet.close()


def test_a_delete_that_finds_the_database_locked_changes_nothing(cache, tmp_path, monkeypatch) -> None:
    """The vectors were dropped before the metadata's write failed busy: the collection stayed
    listed with its store folder gone, searches said it held nothing searchable."""
    import sqlite3

    from app.errors import BusyError

    monkeypatch.setattr(md, "SQLITE_BUSY_TIMEOUT_S", 0.3)
    facet = Facet(FacetSettings(data_dir=tmp_path / "data"), embedders=cache)
    holder = None
    try:
        facet.index(_corpus(tmp_path / "src", {"a": "the ferry leaves at noon"}), "kept")
        holder = sqlite3.connect(tmp_path / "data" / "facet.db")
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(BusyError, match="stayed locked"):
            facet.delete_collection("kept")
        holder.rollback()
        assert [c.name for c in facet.collections()] == ["kept"]
        assert [Path(r.doc_id).name for r in facet.search(SearchRequest("ferry", "kept")).results] == ["a.txt"]
        facet.delete_collection("kept")
        assert facet.collections() == []
    finally:
        if holder is not None:
            holder.close()
        facet.close()


def test_a_job_failing_on_a_locked_database_logs_one_line(caplog) -> None:
    """The job thread logged ~95 lines of SQLAlchemy traceback, ending in the statement and its
    values, for a lock the job's row already described in one line; an unexpected error keeps
    its traceback."""
    import sqlite3

    from sqlalchemy.exc import OperationalError

    from app.jobs import InlineJobRunner

    def locked(job) -> None:
        raise OperationalError("UPDATE documents SET n_chunks=?", (3,),
                               sqlite3.OperationalError("database is locked"))

    def broken(job) -> None:
        raise RuntimeError("a bug")

    job = type("Job", (), {"job_id": 7})()
    with caplog.at_level("ERROR", logger="app.jobs"):
        InlineJobRunner(locked).submit(job)
        InlineJobRunner(broken).submit(job)
    first, second = caplog.records
    assert first.getMessage().startswith("index job 7 failed: BusyError: the metadata database "
                                         "(SQLite) stayed locked")
    assert first.exc_info is None and "UPDATE documents" not in caplog.text
    assert second.getMessage() == "index job 7 failed" and second.exc_info is not None


def test_counting_tokens_reads_no_more_of_a_text_than_the_embedder_can(minilm) -> None:
    """`/v1/embeddings`' usage count tokenised each text whole: one 15 MB input held the
    server's event loop ~50 s (health checks waited as long). The count reads as much as the
    embedder does, up to its max_length tokens."""
    from dataclasses import dataclass, field

    from embedders.contract import CHARS_PER_TOKEN_BOUND

    @dataclass
    class Spy:  # the embedder's tokenizer, recording the lengths it is given
        inner: object
        lengths: list[int] = field(default_factory=list)

        def __call__(self, texts, **kwargs):
            self.lengths += [len(t) for t in texts]
            return self.inner(texts, **kwargs)

    @dataclass
    class Model:
        tokenizer: Spy
        max_length: int

    spy = Spy(minilm.tokenizer)
    model = Model(spy, minilm.max_length)
    huge = "word " * 300_000
    assert Facet.count_tokens(model, [huge, "two words"]) == minilm.max_length + 2
    assert spy.lengths == [minilm.max_length * CHARS_PER_TOKEN_BOUND, 9]


def test_usage_counts_what_the_model_reads_past_a_long_word(minilm) -> None:
    """A 9,000-character hash (one WordPiece [UNK]) then a sentence: /v1/embeddings' usage said
    1 token, reading the text only to 32 characters a token, while minilm reads the sentence."""
    sentence = "the octopus swims in the sea"
    text = "0123456789abcdef" * 563 + " " + sentence
    read = minilm._tokenize([text], "document", None)
    assert Facet.count_tokens(minilm, [text]) == len(read.sequences[0]) - 2  # [CLS] and [SEP]
    assert Facet.count_tokens(minilm, [text]) == 1 + Facet.count_tokens(minilm, [sentence])


def test_an_argument_of_the_wrong_type_is_the_facades_error(cache, tmp_path) -> None:
    """`facet.search("q")` raised AttributeError from deep inside; a numpy array of texts (a
    DataFrame column's values) got no hint."""
    with Facet.open(FacetSettings(data_dir=tmp_path / "data"), embedders=cache) as facet:
        with pytest.raises(InvalidRequestError, match=r"request must be of type SearchRequest .*got str"):
            facet.search("q")  # type: ignore[arg-type]
        with pytest.raises(InvalidRequestError, match=r"request must be of type SearchRequest .*got dict"):
            facet.search({"query": "q", "collection": "c"})  # type: ignore[arg-type]
        with pytest.raises(InvalidRequestError, match=r"request must be of type ClusterRequest"):
            facet.cluster("x")  # type: ignore[arg-type]
        for call in (facet.index, facet.submit_index):
            with pytest.raises(InvalidRequestError, match=r"options must be of type IndexOptions"):
                call(tmp_path, "c", {"embedder": "minilm"})  # type: ignore[operator]
        with pytest.raises(InvalidRequestError, match=r"got ndarray \(an array: pass \.tolist\(\)\)"):
            facet.embed(np.array(["a", "b"]))  # type: ignore[arg-type]
