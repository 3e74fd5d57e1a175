"""Index jobs through real workers: a real redis-server, worker subprocesses, the Qdrant stand-in.

Exact counts after every disruption: the points in the store are exactly the chunks the
chunker makes of the corpus (same ids, no duplicate), the chunk rows agree, and the job's
counters say what happened.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core import Facet
from app.encoding import UNREAD_MARK, unread_documents
from app.services.indexing import IndexOptions
from app.services.search import SearchRequest
from indexer.chunking import ChunkingConfig, chunk_text, tokenizer_spans
from indexer.store import point_id
from tests.app.cli_runner import invoke_cli
from tests.app.services.conftest import write_corpus
from tests.app.services.test_progress import THAI

from .conftest import Stack

pytestmark = pytest.mark.slow

N_DOCS = 24  # 6 chunk tasks of 4 documents: 2 done before a disruption, 4 after


@pytest.fixture
def corpus(tmp_path: Path) -> dict[str, str]:
    return write_corpus(tmp_path / "src", N_DOCS, words=80)


@pytest.fixture
def client(stack: Stack, minilm) -> Iterator[Facet]:
    facet = Facet(stack.settings())
    facet.embedder_cache.put("minilm", minilm)
    yield facet
    facet.close()


def expected_ids(files: dict[str, str], minilm) -> set[str]:
    spans = tokenizer_spans(minilm.backbone.tokenizer)
    return {point_id(k, c.number) for k, t in files.items()
            for c in chunk_text(t, spans, ChunkingConfig(64, 8))}


def submit(stack: Stack, source: Path, collection: str) -> int:
    # In this process: the CLI's own code, without a second start-up (and model load).
    done = invoke_cli("index", str(source), "--collection", collection, "--background",
                      env=stack.env)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip().splitlines()[-1])


def wait_for(client: Facet, job_id: int, timeout: float = 240.0, until: str = "completed"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.job(job_id)
        if job.state == until or job.state in ("completed", "failed", "interrupted"):
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} still {client.job(job_id)} after {timeout}s")


def wait_chunks_done(client: Facet, job_id: int, at_least: int, timeout: float = 240.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.job(job_id)
        if job.chunks_done >= at_least:
            return job.chunks_done
        # "stalled": no heartbeat for the lease's ttl (4 s here), which a starved machine
        # reaches with a live worker; the job goes on, so keep waiting.
        assert job.state in ("queued", "running", "stalled"), job
        time.sleep(0.02)
    raise AssertionError(f"job {job_id} did not reach {at_least} chunk tasks")


def assert_exact(client: Facet, collection: str, files: dict[str, str], minilm,
                 job_id: int) -> None:
    expected = expected_ids(files, minilm)
    ids = [h.id for h in client.context.store.scroll(collection, limit=100_000)]
    assert len(ids) == len(set(ids)), "duplicate point ids"
    assert set(ids) == expected
    assert client.context.store.count(collection) == len(expected)
    info = client.collection(collection)
    assert info.points == info.chunks == len(expected)
    assert info.documents_indexed == len(files)
    job = client.job(job_id)
    assert job.state == "completed", job
    assert (job.docs_seen, job.docs_indexed, job.docs_failed) == (len(files), len(files), 0)
    assert job.chunks_written == len(expected)
    assert job.chunks_done == job.chunks_total == -(-len(files) // 4)  # 4 documents per task


def test_a_worker_jobs_stale_line_errors_go_as_an_embedded_runs_do(stack: Stack, client,
                                                                     tmp_path) -> None:
    """A single record file indexed through a worker, its broken lines fixed between runs: the
    planner, which ends a worker job's reading as an embedded run ends it, kept the line errors
    the file no longer gave (``test_stale_record_errors.py``), and said nothing of records gone
    from the file without --sync (an embedded run says they are kept)."""
    from tests.app.services.test_stale_record_errors import FIRST, SECOND, VALID

    stack.start_worker()
    bad = tmp_path / "bad.jsonl"
    for text, failed in ((FIRST, 3), (SECOND, 2), (VALID, 0)):
        bad.write_text(text)
        job = wait_for(client, client.submit_index(bad, "stale").id)
        assert (job.state, job.docs_failed) == ("completed", failed), job
    assert {d.key.rsplit("/", 1)[-1]: d.status for d in client.documents("stale")} == {
        "ok1": "indexed", "5": "indexed"}
    bad.write_text(VALID.splitlines()[0] + "\n")  # record 5 gone from the file: kept, and said
    job = wait_for(client, client.submit_index(bad, "stale").id)
    assert any("1 indexed record of" in e["message"] and "kept" in e["message"]
               for e in job.errors), job.errors
    assert {d.key for d in client.documents("stale")} == {"ok1", "5"}


def test_background_job_through_a_worker_and_follow(stack: Stack, client, corpus, minilm,
                                                    tmp_path) -> None:
    stack.start_worker()
    job_id = submit(stack, tmp_path / "src", "bg")
    follow = invoke_cli("jobs", str(job_id), "--follow", "--interval", "0.2", env=stack.env)
    assert follow.returncode == 0, follow.stdout + follow.stderr
    lines = follow.stdout.splitlines()
    assert lines[-1].startswith(f"job {job_id} completed: {N_DOCS}/{N_DOCS} documents")
    assert_exact(client, "bg", corpus, minilm, job_id)
    # Run again: nothing changed, so nothing is sent to the chunk tasks. (The jobs below go
    # through the facade, whose minilm is loaded: a CLI run into a new collection loads one.)
    again = client.submit_index(tmp_path / "src", "bg").id
    job = wait_for(client, again)
    assert (job.state, job.docs_skipped, job.chunks_total) == ("completed", N_DOCS, 0)
    # Records whose text is in another field: the workers read the job's --text-column (it
    # used to be refused for them).
    reviews = tmp_path / "reviews.jsonl"
    reviews.write_text("".join(f'{{"_id": "r{i}", "review": "review {i} of the card"}}\n'
                               for i in range(6)))
    job = wait_for(client, client.submit_index(reviews, "reviews",
                                               IndexOptions(text_column="review")).id)
    assert (job.state, job.docs_indexed, job.docs_failed) == ("completed", 6, 0), job
    texts = {h.payload["text"] for h in client.context.store.scroll("reviews", limit=100)}
    assert texts == {f"review {i} of the card" for i in range(6)}
    # Text the tokenizer reads as unknown tokens ([UNK]): a worker job says how many chunks,
    # in one warning summed over its chunk tasks, as an inline job does (workers never said it).
    thai = tmp_path / "thai"
    thai.mkdir()
    (thai / "en.txt").write_text("The lighthouse keeper wrote the log every evening.")
    for i, text in enumerate(THAI):  # 4 documents a chunk task: Thai in both of the two
        (thai / f"th{i}.txt").write_text(text)
    job = wait_for(client, client.submit_index(thai, "thai").id)
    assert (job.state, job.docs_indexed, job.chunks_written, job.chunks_total) == ("completed", 5, 5, 2), job
    expected = ("4 of 5 chunks written are mostly unknown tokens to the tokenizer of minilm (a "
                "script or symbols it does not read, such as Thai or emoji, or unbroken strings "
                "too long for it to split, such as hashes or base64)")
    assert [(e["kind"], e["document"], e["message"][:len(expected)]) for e in job.errors
            if UNREAD_MARK in e["message"]] == [("warning", "minilm", expected)], job.errors
    # ... naming documents from both chunk tasks' warnings, and counting all four.
    named, in_documents = unread_documents(next(e["message"] for e in job.errors
                                                if UNREAD_MARK in e["message"]))
    thai_files = {str(thai / f"th{i}.txt") for i in range(len(THAI))}
    assert in_documents == 4 and len(named) == 3 and set(named) <= thai_files, named


def test_kill9_worker_mid_job_then_restart(stack: Stack, client, corpus, minilm,
                                           tmp_path) -> None:
    worker = stack.start_worker(queues="index")
    files = write_corpus(tmp_path / "big", N_DOCS, words=80)  # 6 chunk tasks, 2 done first
    job_id = client.submit_index(tmp_path / "big", "kill").id  # no CLI start-up: kill early
    done_at_kill = wait_chunks_done(client, job_id, 2)
    worker.kill9()
    total = client.job(job_id).chunks_total
    assert 2 <= done_at_kill < total, (done_at_kill, total)
    time.sleep(5)  # past the 4 s lease: the job is seen as stalled, not running
    stalled = client.job(job_id)
    assert stalled.state == "stalled"
    # Its hint goes on on the workers: in the foreground, beside a worker holding the embedded
    # store's collection, it was refused as open elsewhere.
    assert "--collection kill --embedder minilm --background` again to resume" in stalled.message, stalled
    stack.start_worker(queues="index")
    job = wait_for(client, job_id)
    assert job.state == "completed", job
    assert_exact(client, "kill", files, minilm, job_id)
    print(f"kill -9 after {done_at_kill}/{total} chunk tasks; completed after restart with "
          f"{job.chunks_written} points == chunks")


def test_a_chunk_task_lost_with_its_worker_is_sent_again(stack: Stack, client, minilm,
                                                        tmp_path) -> None:
    """A worker killed between Redis' BRPOP and its HSET of the message into ``unacked``
    loses the task: no visibility timeout brings it back. Made exact here: the test plans the
    job itself and sends every chunk task but chunk 0, as if a killed worker had taken it."""
    import redis

    from app.remote import INDEX_CHUNK_TASK, celery_client
    from app.services.distributed import stalled_chunks
    from worker.recovery import broker_chunks

    # Two chunk tasks: one sent (in the broker), one lost. (A bigger job only made the worker
    # run more chunks before the sweeper's part.)
    corpus = write_corpus(tmp_path / "src", 8, words=80)
    job_id, numbers = stack.plan_here(client, tmp_path / "src", "lost")  # no worker yet
    assert numbers == [0, 1]
    broker = redis.Redis.from_url(stack.env["FACET_BROKER_URL"])
    sender = celery_client(stack.settings())
    for n in numbers[1:]:
        sender.send_task(INDEX_CHUNK_TASK, args=[job_id, n], queue="index")
    # The sweeper's view of the broker, read from the real messages.
    assert broker_chunks(broker) == {(job_id, n) for n in numbers[1:]}
    # Past the lease (4 s, taken by the planning here): nobody advances the job.
    deadline = time.monotonic() + 60
    while not stalled_chunks(client.context.sessions) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert stalled_chunks(client.context.sessions) == [(job_id, n) for n in numbers]
    worker = stack.start_worker(queues="index")
    job = wait_for(client, job_id, timeout=120)
    assert job.state == "completed", (job, worker.text()[-3000:])
    assert_exact(client, "lost", corpus, minilm, job_id)
    resent = [line for line in worker.text().splitlines() if "sent again" in line]
    assert len(resent) == 1 and f"chunk 0 of job {job_id}:" in resent[0], resent


def test_a_planner_task_the_broker_lost_is_sent_again(stack: Stack, client, minilm,
                                                      tmp_path) -> None:
    """A Redis that lost its data (flushed, or restarted without persistence) while a job
    waited for a worker took its planner task with it: the job stayed `queued` for ever (the
    sweeper re-sent chunk tasks only). The job keeps its planner's payload now, and the sweeper
    sends it again. (Also what ends a planner task dropped by a worker on another database.)"""
    import redis

    from app.services.distributed import unplanned_jobs
    from worker.recovery import broker_tasks

    corpus = write_corpus(tmp_path / "src", 8, words=80)
    job_id = client.submit_index(tmp_path / "src", "lostplan").id  # no worker yet: it waits
    broker = redis.Redis.from_url(stack.env["FACET_BROKER_URL"])
    assert broker_tasks(broker) == (set(), {job_id})
    assert unplanned_jobs(client.context.sessions)[job_id]["collection"] == "lostplan"
    broker.flushdb()  # the broker lost it
    worker = stack.start_worker(queues="index")
    job = wait_for(client, job_id, timeout=120)  # (the old code: `queued` until the timeout)
    assert job.state == "completed", (job, worker.text()[-3000:])
    assert_exact(client, "lostplan", corpus, minilm, job_id)
    resent = [line for line in worker.text().splitlines() if "sent again" in line]
    assert len(resent) == 1 and f"job {job_id}: its planner task is in no queue" in resent[0], resent
    assert unplanned_jobs(client.context.sessions) == {}


def test_redis_restart_mid_job(stack: Stack, redis_server, client, corpus, minilm,
                               tmp_path) -> None:
    stack.start_worker(queues="index")
    files = write_corpus(tmp_path / "big", N_DOCS, words=80)  # 6 chunk tasks, 2 done first
    job_id = client.submit_index(tmp_path / "big", "redis").id
    done_at_restart = wait_chunks_done(client, job_id, 2)
    redis_server.stop()
    time.sleep(1.0)
    redis_server.start()
    job = wait_for(client, job_id)
    assert job.chunks_done > done_at_restart
    assert_exact(client, "redis", files, minilm, job_id)
    print(f"redis restarted after {done_at_restart}/{job.chunks_total} chunk tasks; completed")


def test_twenty_concurrent_searches_while_a_worker_indexes(stack: Stack, client, minilm,
                                                           tmp_path) -> None:
    stack.start_worker(queues="index")
    # A first small job makes the collection exist before the searches start.
    first = write_corpus(tmp_path / "seed", 2, words=20)
    wait_for(client, client.submit_index(tmp_path / "seed", "live").id)
    files = write_corpus(tmp_path / "big", 96, words=80)  # 24 chunk tasks: searches meanwhile
    job_id = client.submit_index(tmp_path / "big", "live").id
    wait_chunks_done(client, job_id, 1)
    failures: list[BaseException] = []
    finished: list[tuple[float, int]] = []  # (when, hits)
    stop = threading.Event()

    def search(i: int) -> None:
        while not stop.is_set():
            try:
                hits = client.search(SearchRequest(f"note {i} sentence", "live", top_k=5)).results
                finished.append((time.monotonic(), len(hits)))
            except BaseException as e:
                failures.append(e)
                return

    threads = [threading.Thread(target=search, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    job = wait_for(client, job_id)
    job_done = time.monotonic()
    stop.set()
    for t in threads:
        t.join(timeout=60)
    assert not failures, failures[:3]
    during = [n for when, n in finished if when < job_done]
    assert len(during) >= 20, f"only {len(during)} searches ended while the job ran"
    assert all(0 < n <= 5 for _, n in finished)
    expected = expected_ids(files, minilm) | expected_ids(first, minilm)
    ids = [h.id for h in client.context.store.scroll("live", limit=100_000)]
    assert len(ids) == len(set(ids)) and set(ids) == expected
    info = client.collection("live")
    assert info.points == info.chunks == len(expected)
    assert job.state == "completed" and job.docs_indexed == 96
    print(f"{len(during)} searches from 20 threads ended while the worker indexed, none failed; "
          f"{info.points} points == {info.chunks} chunks, no duplicate id")


def test_query_queue_encodes_on_the_worker(stack: Stack, minilm, tmp_path) -> None:
    from app.errors import UnknownModelError
    from app.remote import CeleryQueryEncoder

    stack.start_worker(queues="query")
    encoder = CeleryQueryEncoder(stack.settings())
    try:
        texts = ["card not working", "where is my refund"]
        remote = encoder.encode(texts, embedder="minilm", instruction="Find the intent")
        local = minilm.encode(texts, role="query", instruction="Find the intent")
        assert remote.dtype == local.dtype and remote.shape == local.shape
        assert abs(remote - local).max() < 1e-5
        assert encoder.reported_identity("minilm") == minilm.identity
        with pytest.raises(UnknownModelError, match="no-such-model"):
            encoder.encode(["x"], embedder="no-such-model")
    finally:
        encoder.close()


def test_with_no_worker_on_the_queue_only_the_first_query_waits(stack: Stack) -> None:
    """With every worker down, each search waited FACET_WORKER_TIMEOUT_S (60 s) to be told so.
    After one call went unanswered, the next asks the workers which queues they consume and is
    refused at once where none takes its queue; once one does, calls go through again."""
    import time

    from app.errors import UnavailableError
    from app.remote import CeleryQueryEncoder

    encoder = CeleryQueryEncoder(stack.settings(worker_timeout_s=4.0))
    try:
        started = time.monotonic()
        with pytest.raises(UnavailableError, match="no worker answered on the 'query' queue "
                                                   "within 4s"):
            encoder.encode(["first"], embedder="minilm")
        assert time.monotonic() - started >= 4
        started = time.monotonic()
        with pytest.raises(UnavailableError, match=r"none consumes it .*start one: facet worker "
                                                   r"--queues query"):
            encoder.encode(["second"], embedder="minilm")
        assert time.monotonic() - started < 3  # (the workers asked, a second)
        stack.start_worker("query")
        time.sleep(CeleryQueryEncoder.ASKED_S)  # (the last answer, "none", no longer serves)
        assert encoder.encode(["third"], embedder="minilm").shape[0] == 1
    finally:
        encoder.close()


def test_with_the_broker_gone_after_an_unanswered_query_calls_still_fail_fast(tmp_path) -> None:
    """Asking the workers for their queues let kombu retry the broker: 6 s a call with nothing
    listening, every call after an unanswered one, for as long as the broker was down
    (helper-542's review). The unanswered call is set by hand: a client that has not reached the
    broker since (a restart of it, or of the server) cannot have had one of its own."""
    import time

    from app.errors import UnavailableError
    from app.remote import CeleryQueryEncoder
    from app.settings import FacetSettings
    from tests.app.served import free_port

    encoder = CeleryQueryEncoder(FacetSettings(
        data_dir=tmp_path / "data", broker_url=f"redis://localhost:{free_port()}/0",
        encode_on_workers=True))
    try:
        encoder._silent["query"] = time.monotonic()  # (as after a timeout)
        for _ in range(2):
            started = time.monotonic()
            with pytest.raises(UnavailableError, match="cannot reach the broker"):
                encoder.encode(["again"], embedder="minilm")
            assert time.monotonic() - started < 3, time.monotonic() - started
    finally:
        encoder.close()


def test_a_query_nobody_answered_in_time_is_not_run_later(stack: Stack, tmp_path) -> None:
    """A search whose encode timed out (no worker on the query queue) left its task queued:
    the next worker ran it for nobody, ahead of the queries sent after it. It now expires
    with the caller's wait."""
    from app.errors import UnavailableError
    from app.remote import CeleryQueryEncoder

    encoder = CeleryQueryEncoder(stack.settings(worker_timeout_s=1.0))
    try:
        with pytest.raises(UnavailableError, match="no worker answered on the 'query' queue"):
            encoder.encode(["stale query"], embedder="minilm")
        # The task's expiry passes while it waits in the queue (read from its message).
        import datetime as dt
        import json

        import redis

        [raw] = redis.Redis.from_url(stack.env["FACET_BROKER_URL"]).lrange("query", 0, -1)
        expires = json.loads(raw)["headers"].get("expires")  # (none: it runs, failed below)
        while expires and dt.datetime.now(dt.UTC) <= (dt.datetime.fromisoformat(expires)
                                                      + dt.timedelta(seconds=0.2)):
            time.sleep(0.05)
        worker = stack.start_worker(queues="query")
        encoder.settings = stack.settings(worker_timeout_s=60.0)
        assert encoder.encode(["fresh query"], embedder="minilm").shape == (1, 384)
        # Celery logs "succeeded in" after it sends the result: the caller can be faster
        # (a fresh-clone run read the log between the two).
        deadline = time.monotonic() + 10
        while "succeeded in" not in worker.text() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # a stale task run first would have logged its line before this one's
        log = worker.text()
        assert log.count("facet.encode[") >= 2, log  # both reached the worker...
        assert log.count("succeeded in") == 1, log  # ...which ran only the fresh one
        # The stale query's result (the worker records it revoked) does not stay in Redis for
        # an hour after its caller gave up: a few minutes at most.
        backend = redis.Redis.from_url(stack.env["FACET_BROKER_URL"])
        kept = {k: backend.ttl(k) for k in backend.keys("celery-task-meta-*")}
        assert kept and all(0 < ttl <= 300 for ttl in kept.values()), kept
    finally:
        encoder.close()


def test_a_search_encoded_on_a_worker_is_checked_against_the_collections_version(
        stack: Stack, client, minilm, tmp_path) -> None:
    """The worker reports its model's identity with the vectors; a search encoded there is
    refused when the collection was written by another version of that embedder."""
    import json

    from app.errors import ConflictError
    from app.remote import CeleryQueryEncoder
    from indexer import metadata as md

    stack.start_worker(queues="query")
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps({"_id": f"r{i}", "text": t}) + "\n" for i, t in enumerate(
        ["My card was declined", "How do I top up?", "The exchange rate was wrong"])))
    client.index(records, "versions")  # in this process, with the session's MiniLM
    settings = stack.settings()
    remote = Facet(settings, encoder=CeleryQueryEncoder(settings))  # holds no model: queries go out
    try:
        assert remote.search(SearchRequest("card", "versions")).results
        assert remote.embedder_cache.peek("minilm") is None
        assert remote.encoder.reported_identity("minilm") == minilm.identity
        with remote.context.sessions() as session:  # as if an older MiniLM had written it
            row = md.get_collection(session, "versions").embedders[0]
            old = json.loads(row.identity)
            row.identity = json.dumps({**old, "prompts": {**old["prompts"], "instruction_format": "{instruction}: "}})
            session.commit()
        remote.searching.forget("versions")
        # A worker's copy may be what differs: said so (it told to rebuild the collection).
        with pytest.raises(ConflictError, match=r"the worker that encoded this query loads a different "
                                                r"version of 'minilm' than the one that indexed collection "
                                                r"'versions' \(prompts differ\): give every worker"):
            remote.search(SearchRequest("card", "versions"))
    finally:
        remote.close()


def test_a_server_on_an_embedded_store_lets_the_workers_write_what_it_searched(
        stack: Stack, minilm, tmp_path) -> None:
    """An embedded (edge) store with a broker: the facade that searched a collection, as
    `facet serve` does, held its folder, so every chunk a worker ran for a job submitted through
    that same facade failed with "open in pid ..." and the job never completed. It now lets
    the collection go when it sends the job to the workers, and after each read while a worker
    job waits for it or writes it."""
    del stack.env["FACET_QDRANT_URL"]  # the embedded default: the store's folder in the data dir
    first = write_corpus(tmp_path / "first", 4, words=40)
    facet = Facet(stack.settings())
    facet.embedder_cache.put("minilm", minilm)
    try:
        facet.index(tmp_path / "first", "shared")  # in this process
        assert facet.search(SearchRequest("bank card", "shared", top_k=3)).results  # holds it
        more = write_corpus(tmp_path / "more", 8, words=40)
        job_id = facet.submit_index(tmp_path / "more", "shared").id
        # Searched again while the job waits for a worker: the folder reopened here, and the
        # worker's plan was refused until it gave up. Reads let it go while a worker job waits.
        assert facet.search(SearchRequest("bank card", "shared", top_k=3)).results
        assert facet.collection("shared").documents_indexed == len(first)
        stack.start_worker(queues="index")
        job = wait_for(facet, job_id, timeout=120)
        assert job.state == "completed" and job.message is None, job
        assert (job.docs_seen, job.docs_indexed, job.docs_failed) == (8, 8, 0)
        hits = facet.search(SearchRequest("bank card", "shared", top_k=50)).results
        assert {h.source for h in hits} == set(first) | set(more)
    finally:
        facet.close()


def test_a_job_on_a_deleted_collection_is_dropped(stack: Stack, client, minilm, tmp_path) -> None:
    # Queued with no worker running, then its collection is deleted. (Jobs through the
    # facade and 12 documents: a CLI run into a new collection loads a model each time.)
    files = write_corpus(tmp_path / "few", 12, words=80)
    gone = client.submit_index(tmp_path / "few", "doomed").id
    # Refused while the job waits (its submitter would get 404 for it), until it is cancelled.
    # (`facet delete` and `facet jobs` in this process: the CLI's code without a start-up each.)
    refused = invoke_cli("delete", "doomed", "--yes", env=stack.env)
    assert refused.returncode == 5 and f"job {gone} queued to index it" in refused.stderr, refused.stderr
    assert invoke_cli("jobs", str(gone), "--cancel", env=stack.env).returncode == 0
    deleted = invoke_cli("delete", "doomed", "--yes", env=stack.env)
    assert deleted.returncode == 0, deleted.stderr
    worker = stack.start_worker(queues="index")
    fresh = client.submit_index(tmp_path / "few", "doomed").id  # same name, a new collection
    assert fresh > gone  # job ids are never reused
    wait_for(client, fresh)
    assert_exact(client, "doomed", files, minilm, fresh)
    assert f"index job {gone} no longer exists" in worker.text()


def test_bad_input_unknown_queue_and_broker_down(stack: Stack, tmp_path, corpus) -> None:
    t0 = time.monotonic()
    bad = stack.facet("worker", "--queues", "index,gpu")
    assert bad.returncode == 2
    assert "unknown queue 'gpu'; the queues are index, query" in bad.stderr
    stack.env["FACET_BROKER_URL"] = f"redis://127.0.0.1:{_closed_port()}/0"
    t0 = time.monotonic()
    down = stack.facet("index", str(tmp_path / "src"), "-c", "x", "--background")
    took = time.monotonic() - t0
    assert down.returncode == 7, down.stderr
    assert down.stderr.strip().splitlines()[-1].startswith("error: cannot reach the broker at")
    assert "Traceback" not in down.stderr
    worker = stack.facet("worker")
    assert worker.returncode == 7 and "cannot reach the broker" in worker.stderr
    print(f"broker down: exit 7 in {took:.1f}s (process start included)")
    assert took < 30
    # A broker that accepts connections and never answers: a timeout, not a hang.
    import socket

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        stack.env["FACET_BROKER_URL"] = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
        t0 = time.monotonic()
        hung = stack.facet("index", str(tmp_path / "src"), "-c", "x", "--background")
        took = time.monotonic() - t0
    finally:
        silent.close()
    assert hung.returncode == 7 and "Timeout" in hung.stderr, hung.stderr
    print(f"silent broker: exit 7 in {took:.1f}s")
    assert took < 30


def _closed_port() -> int:
    from .conftest import free_port

    return free_port()  # bound and released: nothing listens there
