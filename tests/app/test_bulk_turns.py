"""Bulk requests take turns on the model thread (``BatchingQueryEncoder``, the real minilm).

Bulk pieces went in queue order, so a request of more than one batch waited for every piece
of the bulk requests queued before it: on ``facet serve`` a 40-text ``POST /embed`` waited
9.9 s behind one 2048-text call, and an index job's next piece waited behind a client's whole
request. Now the request whose pieces have waited longest since one of them went goes next;
the vectors are those of the model either way."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from app.encoding import BatchingQueryEncoder

WORDS = ["card", "declined", "top", "up", "fee", "exchange", "rate", "transfer", "pending"]
BIG = [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(i % 9 + 3)) + f" {i}"
       for i in range(400)]
SMALL = ["my card was declined", "what is the fee", "transfer still pending",
         "exchange rate today", "top up failed", "card fee", "pending top up", "rate fee"]


def _encoder(cache) -> BatchingQueryEncoder:
    # Small batches and turns (4 texts a piece, 8 a batch), whole pieces: 400 texts are
    # 100 pieces, several seconds of one thread; 8 texts are two pieces.
    return BatchingQueryEncoder(cache, threads=1, batch_size=4, max_batch_texts=8,
                                bulk_piece_ms=None)


def test_a_small_bulk_request_is_not_kept_behind_a_large_one(cache, minilm) -> None:
    encoder = _encoder(cache)
    try:
        big = encoder.submit(BIG, embedder="minilm", role="document")
        small = encoder.submit(SMALL, embedder="minilm", role="document")
        got_small = small.result(timeout=60)
        big_done_first = big.done()
        got_big = big.result(timeout=120)
    finally:
        encoder.close()
    assert not big_done_first, "the 8-text request waited for all 100 pieces of the 400-text one"
    np.testing.assert_allclose(got_small, minilm.encode(SMALL, role="document", batch_size=4),
                               atol=1e-5)
    np.testing.assert_allclose(got_big, minilm.encode(BIG, role="document", batch_size=4),
                               atol=1e-5)


def test_the_servers_own_bulk_work_takes_turns_with_a_clients_request(cache, minilm) -> None:
    """An index job's pieces (``encode(..., bulk=True)``, queued one at a time) are not each
    queued behind all the pieces of a client's large request."""
    encoder = _encoder(cache)
    job_docs = SMALL * 4  # 8 pieces, each queued when the one before is done
    finished: list[str] = []
    lock = threading.Lock()
    try:
        big = encoder.submit(BIG, embedder="minilm", role="document")
        big.add_done_callback(lambda _f: finished.append("client"))
        with ThreadPoolExecutor(1) as pool:
            job = pool.submit(encoder.encode, job_docs, embedder="minilm", role="document",
                              bulk=True)
            got_job = job.result(timeout=120)
            with lock:
                finished.append("job")
        big.result(timeout=120)
    finally:
        encoder.close()
    assert finished[0] == "job", "the job's pieces each waited behind the client's whole request"
    np.testing.assert_allclose(got_job, minilm.encode(job_docs, role="document", batch_size=4),
                               atol=1e-5)


def test_a_turn_is_one_piece_while_others_wait(cache, minilm) -> None:
    """Turns are equal: while a client's large request waits, the job's piece is not joined by
    the client's pieces, nor are the client's turns two gathered pieces. Before, beside four
    clients calling /v1/embeddings, an index job got about 7% of the model thread."""
    encoder = _encoder(cache)
    job_docs = SMALL * 4  # 32 texts: 8 pieces of 4, queued one at a time
    batches: list[tuple[int, int]] = []  # (the job's texts, the client's texts) of each batch
    run = encoder._run

    def counted(batch) -> None:
        batches.append((sum(len(r.texts) for r in batch if r.own),
                        sum(len(r.texts) for r in batch if not r.own)))
        run(batch)

    encoder._run = counted  # type: ignore[method-assign]
    try:
        big = encoder.submit(BIG, embedder="minilm", role="document")
        encoder.encode(job_docs, embedder="minilm", role="document", bulk=True)
        big.result(timeout=120)
    finally:
        encoder.close()
    with_job = [i for i, (job, _) in enumerate(batches) if job]
    during = batches[with_job[0]:with_job[-1] + 1]
    assert sum(job for job, _ in during) == len(job_docs)
    client = sum(other for _, other in during)
    # One piece (4 texts) of the client's between two of the job's: 7 pieces, 28 texts. Turns of
    # gathered pieces, filling the job's turns too: 3 of the client's pieces a piece of the job.
    assert client <= 12 * 4, (client, during)  # (slack for a busy machine: 7 pieces expected)
