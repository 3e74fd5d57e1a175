"""A cancel while one large document is encoded takes effect between the encoder's pieces, not
once all of it went in: one document is one batch (a 15 MB csv field: 18,725 chunks), and its
job went on encoding for minutes after `POST /jobs/N/cancel` answered 200, the jobs queued behind
it waiting. The job ends ``cancelled`` "before any document was indexed", the document's row
left as a cancel between batches leaves it (none), and the next run indexes it. The same for a
file read in a stream (``stream_document_mb``). Real minilm, edge store, SQLite."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import select

from app.services.indexing import IndexOptions, IndexService, Progress, left_empty_note
from indexer import metadata as md

NOTHING_WRITTEN = "cancelled before any document was indexed: nothing was written"
# Words of the large document: ~245 chunks of 64 tokens (8 overlap), encoded in pieces of 4
# chunks (at least 50 ms each while it is cancelled), so encoding it whole takes several times
# the 1 s between two reads of the job's cancel flag; small enough for the runs that index it
# whole (~5 s with one CPU thread).
WORDS = 3600
# The cancel is made once this many pieces went by (after the first read of the flag, made at
# the first piece, and the encoder warm at this length): made at the first piece, a first piece
# slower than the 1 s between reads (a loaded machine, the encoder's first call at 64 tokens)
# had the flag read right after it, one piece seen, which says nothing about the reads' pace.
CANCEL_AFTER_PIECES = 5


def _big_text() -> str:
    words = ["ledger", "invoice", "refund", "transfer", "account", "balance", "fee", "card"]
    return " ".join(f"{words[i % 8]}{i}" for i in range(WORDS))


def _index_and_cancel(facet, source: Path, options: IndexOptions,
                      stop: Callable[[], object] | None = None) -> tuple:
    """Index ``source``, cancelling its job (or calling ``stop``) from another thread once
    ``CANCEL_AFTER_PIECES`` "encoding chunk N/M of this batch" went by. Returns (the report, the stages seen, the
    reads of the cancel flag made while encoding, seconds from the cancel to the job's end)."""
    facet.indexing.ctx.encoder.batch_size = 4
    stages: list[str] = []
    encoding = threading.Event()  # the first piece arrived: reads of the flag count from here
    due = threading.Event()  # CANCEL_AFTER_PIECES pieces went by: the cancel is made
    cancelled_at: list[float] = []

    def cancel() -> None:
        due.wait(60)
        if stop is None:
            facet.cancel_job(facet.jobs("c")[0].id)
        else:
            stop()
        cancelled_at.append(time.perf_counter())

    def progress(p: Progress) -> None:
        if p.stage and p.stage.startswith("encoding chunk"):
            stages.append(p.stage)
            encoding.set()
            if len(stages) > CANCEL_AFTER_PIECES:
                due.set()

    reads = [0]
    asked = IndexService._cancel_asked

    def counted(self: IndexService, job_id: int) -> bool:
        if encoding.is_set():
            reads[0] += 1
        return asked(self, job_id)

    canceller = threading.Thread(target=cancel)
    canceller.start()
    encoder = facet.indexing.ctx.encoder
    encode = encoder.encode

    def paced(*args, **kwargs):  # at least 50 ms a piece, however fast the machine
        time.sleep(0.05)
        return encode(*args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(IndexService, "_cancel_asked", counted)
        mp.setattr(encoder, "encode", paced)
        report = facet.index(source, "c", options, progress=progress)
    ended = time.perf_counter()
    due.set()
    canceller.join(60)
    return report, stages, reads[0], ended - cancelled_at[0]


def _chunks_encoded(stages: list[str]) -> tuple[int, int]:
    done, total = re.match(r"encoding chunk ([\d,]+)/([\d,]+)", stages[-1]).groups()  # type: ignore[union-attr]
    return int(done.replace(",", "")), int(total.replace(",", ""))


def _assert_cancelled_mid_encoding(facet, report, stages: list[str], reads: int, after: float,
                                   indexed: int = 0) -> None:
    assert report.state == "cancelled", (report.state, stages[-1:])
    assert report.docs_indexed == 0
    # The report (the run's log line) counts what the job's row kept: it said "1 seen" of the
    # rolled-back batch where the row, `facet jobs` and the UI said 0.
    job = facet.job(report.job_id)
    assert (report.docs_seen, report.chunks_written) == (job.docs_seen, job.chunks_written) == (0, 0)
    # A first run (the collection made for it, left empty) names the collection it leaves, as
    # a completed run's note does; it said "nothing was written" alone.
    first = len(facet.jobs("c")) == 1
    assert facet.job(report.job_id).message == (
        f"{NOTHING_WRITTEN}; {left_empty_note('c')}" if first else NOTHING_WRITTEN)
    done, total = _chunks_encoded(stages)
    assert total >= 200
    # Within seconds of the cancel, well before the document's encoding would have finished.
    assert done < total / 2, stages[-1]
    assert after < 10, after
    # The flag is read about once a second, not once per piece of 4 chunks.
    assert reads <= after + 3 < len(stages), (reads, after, len(stages))
    assert facet.collection("c").documents_indexed == indexed


def _document_row(facet, key: str) -> tuple[str, str | None] | None:
    """(status, content hash) of the document row keyed ``key``, or None where there is none."""
    with facet.indexing.sessions() as session:
        row = session.scalars(select(md.Document).where(md.Document.key == key)).one_or_none()
        return None if row is None else (row.status, row.content_hash)


def test_a_cancel_stops_a_large_documents_encoding_within_seconds(facet, tmp_path) -> None:
    src = tmp_path / "big.txt"
    src.write_text(_big_text())
    report, stages, reads, after = _index_and_cancel(facet, src, IndexOptions())
    _assert_cancelled_mid_encoding(facet, report, stages, reads, after)
    # Left as a cancel between batches leaves it: no row (it was `pending`, with no chunks).
    assert _document_row(facet, str(src)) is None
    again = facet.index(src, "c")
    assert (again.state, again.docs_indexed) == ("completed", 1)
    assert facet.collection("c").documents_indexed == 1


def test_a_changed_document_cancelled_mid_encoding_keeps_its_indexed_version(facet, tmp_path) -> None:
    src = tmp_path / "big.txt"
    src.write_text("a short first version about a card refund.")
    facet.index(src, "c")
    old = _document_row(facet, str(src))
    assert old is not None and old[0] == "indexed"
    src.write_text(_big_text())
    report, stages, reads, after = _index_and_cancel(facet, src, IndexOptions())
    _assert_cancelled_mid_encoding(facet, report, stages, reads, after, indexed=1)
    assert _document_row(facet, str(src)) == old  # still its first version, searchable
    again = facet.index(src, "c")
    assert (again.state, again.docs_indexed) == ("completed", 1)
    new = _document_row(facet, str(src))
    assert new is not None and new[0] == "indexed" and new[1] != old[1]


def test_a_streamed_files_encoding_is_cancelled_within_seconds_too(facet, tmp_path) -> None:
    """A file over ``stream_document_mb`` is encoded ``batch_chunks`` at a time (``write``,
    which checked only before each chunk batch): one large chunk batch is stopped inside."""
    facet.indexing.settings.stream_document_mb = 0.02
    src = tmp_path / "big.txt"
    src.write_text(_big_text())
    assert src.stat().st_size > 0.02 * 2**20
    report, stages, reads, after = _index_and_cancel(facet, src, IndexOptions(batch_chunks=5000))
    _assert_cancelled_mid_encoding(facet, report, stages, reads, after)
    assert _document_row(facet, str(src)) is None  # nothing of it went in
    again = facet.index(src, "c")
    assert (again.state, again.docs_indexed) == ("completed", 1)
    assert facet.collection("c").documents_indexed == 1


def test_the_server_stopping_interrupts_a_large_documents_encoding_within_seconds(facet, tmp_path) -> None:
    """`facet serve` stopping (``Facet.close``: its context's ``stopping``) waited 30 s for the
    document's encoding, then dropped it: the job is now ``interrupted`` between two pieces."""
    src = tmp_path / "big.txt"
    src.write_text(_big_text())
    stopping = facet.indexing.ctx.stopping
    report, stages, _reads, after = _index_and_cancel(facet, src, IndexOptions(), stop=stopping.set)
    assert report.state == "interrupted", (report.state, stages[-1:])
    assert facet.job(report.job_id).message.startswith("stopped (")
    done, total = _chunks_encoded(stages)
    assert done < total / 2 and after < 10, (stages[-1], after)
    assert _document_row(facet, str(src)) is None
    stopping.clear()  # (the same facade runs the next job)
    again = facet.index(src, "c")
    assert (again.state, again.docs_indexed) == ("completed", 1)


def test_a_streamed_file_stopped_part_way_says_it_is_read_again(facet, tmp_path) -> None:
    """A stopped run said "what was indexed is kept" of a large file read in pieces whose first
    batches were written: its rerun read it from its start (the huge-inputs review of the
    seventh session of 2026-12-06: 2,048 chunks encoded again). It says so."""
    facet.indexing.settings.stream_document_mb = 0.02
    src = tmp_path / "big.txt"
    src.write_text(_big_text())
    stopping = facet.indexing.ctx.stopping
    report, stages, _reads, _after = _index_and_cancel(facet, src, IndexOptions(batch_chunks=8),
                                                       stop=stopping.set)
    stopping.clear()  # (the same facade runs the next job)
    assert report.state == "interrupted" and report.stopped_within == str(src), stages[-1:]
    message = facet.job(report.job_id).message
    assert message.endswith(f"; {src} was stopped part-way and is read again from its start "
                            "(a large file is committed whole)"), message
    assert report.chunks_written > 0  # (its first batches went in)
    again = facet.index(src, "c")
    assert (again.state, again.docs_indexed) == ("completed", 1)


def test_a_streamed_file_cancelled_part_way_does_not_say_nothing_was_written(facet, tmp_path) -> None:
    """A cancel within a large file read in pieces, after its first batches went in, said
    "cancelled before any document was indexed: nothing was written" while those chunks were
    in the store and found by searches (the API exploration of the third session of
    2026-12-07). It says what was written, and that the next run reads the file again."""
    facet.indexing.settings.stream_document_mb = 0.02
    src = tmp_path / "big.txt"
    src.write_text(_big_text())
    report, stages, _reads, _after = _index_and_cancel(facet, src, IndexOptions(batch_chunks=8))
    assert report.state == "cancelled" and report.stopped_within == str(src), stages[-1:]
    written = facet.job(report.job_id).chunks_written
    assert written > 0 and facet.collection("c").points == written
    message = facet.job(report.job_id).message
    assert message.startswith(
        f"cancelled part-way through {src}, before any document was indexed whole: its first "
        f"{written} chunks were written and are searchable; index the same source again to "
        "finish: it is read again from its start (a large file is committed whole)"), message
    assert NOTHING_WRITTEN not in message
    again = facet.index(src, "c")
    assert (again.state, again.docs_indexed) == ("completed", 1)
    info = facet.collection("c")
    assert info.points == info.chunks == again.chunks_written  # read again whole, none twice


def test_removing_a_file_a_cancel_left_part_way_counts_the_points_it_deletes(facet, tmp_path) -> None:
    """Its chunks are in the store with no rows yet (the file is ``pending``): the removal
    deleted them by the file's key and said "0 chunks" (the API exploration of the third
    session of 2026-12-07)."""
    facet.indexing.settings.stream_document_mb = 0.02
    src = tmp_path / "big.txt"
    src.write_text(_big_text())
    report, stages, _reads, _after = _index_and_cancel(facet, src, IndexOptions(batch_chunks=8))
    assert report.state == "cancelled" and report.stopped_within == str(src), stages[-1:]
    written = facet.collection("c").points
    assert written > 0
    removed = facet.remove_documents("c", [str(src)])
    assert [(d.key, d.status, d.chunks) for d in removed.removed] == [(str(src), "pending", written)]
    assert removed.chunks_deleted == written and facet.collection("c").points == 0
    assert f"({written} chunks)" in facet.job(removed.job_id).message, facet.job(removed.job_id).message


def test_removing_a_changed_file_a_cancel_left_part_way_counts_its_new_points(facet, tmp_path) -> None:
    """Its rows held its last version's chunks (21), the store the 24 points the stopped job
    wrote: the removal deleted those and said 21 (the verification round of the third session
    of 2026-12-07)."""
    facet.indexing.settings.stream_document_mb = 0.02
    src = tmp_path / "big.txt"
    src.write_text(" ".join(f"word{i}" for i in range(400)))
    assert facet.index(src, "c").docs_indexed == 1
    src.write_text(_big_text())
    report, stages, _reads, _after = _index_and_cancel(facet, src, IndexOptions(batch_chunks=8))
    assert report.state == "cancelled" and report.stopped_within == str(src), stages[-1:]
    points = facet.collection("c").points
    removed = facet.remove_documents("c", [str(src)])
    assert [(d.status, d.chunks) for d in removed.removed] == [("pending", points)], removed
    assert facet.collection("c").points == 0
