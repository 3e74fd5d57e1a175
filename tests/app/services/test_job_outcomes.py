"""What a background job's record says at its end: the totals of a completed one, and a job
that failed before it started (its model not loadable, its source gone) recorded failed with
its reason, not left queued nor passed off as a started run. Real minilm, edge store, SQLite."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from app.jobs import InlineJobRunner
from indexer import metadata as md


def _corpus(root: Path, n: int) -> Path:
    root.mkdir(parents=True)
    for i in range(n):
        (root / f"d{i}.txt").write_text(f"note {i} about trains and boats. " * 4)
    return root


def test_a_completed_background_job_records_its_totals(facet, tmp_path) -> None:
    """``submit_index`` (what POST /jobs calls): the final record said ``docs_total: 0`` beside
    the documents it had seen."""
    job = facet.submit_index(_corpus(tmp_path / "src", 3), "c")
    assert facet.job_runner.join(timeout=120)
    done = facet.job(job.id)
    assert done.state == "completed" and done.chunks_written >= 3
    # chunk tasks are a worker job's: one run in a process had none (a count of another unit
    # there would read as "chunk tasks 3/3" in `facet jobs`)
    assert done.chunks_total == done.chunks_done == 0
    assert done.docs_total == done.docs_seen == 3


def test_a_background_job_of_nothing_to_index_says_so(facet, tmp_path) -> None:
    """A background job of a folder with nothing Facet reads kept its empty collection, and
    neither the job nor `facet jobs` said that nothing was indexed."""
    src = tmp_path / "pictures"
    src.mkdir()
    (src / "photo.png").write_bytes(b"\x89PNG")
    job = facet.submit_index(src, "pics")
    assert facet.job_runner.join(timeout=120)
    done = facet.job(job.id)
    assert (done.state, done.docs_seen) == ("completed", 0)
    # The collection made for it is kept (the job goes with it) and named: `facet collections`
    # listed an empty one nothing said (a foreground run removes it).
    assert done.message == ("nothing to index: the source holds no document of a supported "
                            "type; collection 'pics' was made for this job and holds no indexed "
                            "document: `facet delete pics` (DELETE /collections/pics) removes it")
    assert facet.collection("pics").documents == 0
    again = facet.submit_index(src, "pics")  # not made for this one: nothing more said
    assert facet.job_runner.join(timeout=120)
    assert facet.job(again.id).message == ("nothing to index: the source holds no document of a "
                                           "supported type")
    # A folder emptied and synced keeps what it held, and says so (an unmounted share reads as
    # its empty mount point: tests/app/services/test_sync_empty_folder.py); a folder that still
    # holds something, though nothing of a supported type, removes what is gone.
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.txt").write_text("card fees rise in May")
    facet.submit_index(notes, "notes")
    assert facet.job_runner.join(timeout=120)
    (notes / "a.txt").unlink()
    emptied = facet.submit_index(notes, "notes")
    assert facet.job_runner.join(timeout=120)
    assert facet.job(emptied.id).message.startswith(
        f"1 indexed document under {notes} kept: the folder is empty now"), facet.job(emptied.id).message
    (notes / "photo.png").write_bytes(b"\x89PNG")
    cleared = facet.submit_index(notes, "notes")
    assert facet.job_runner.join(timeout=120)
    assert facet.job(cleared.id).message == ("the source holds no document of a supported type now: "
                                             "1 document removed from the collection")


def test_a_job_whose_embedder_cannot_load_fails_with_its_reason(facet, tmp_path) -> None:
    """A model the running process cannot load (a checkpoint removed after the job was queued)
    left the job ``queued``, for ever in a server whose process lives on."""
    facet.job_runner = InlineJobRunner(facet._run_job)
    prepared = facet.indexing.prepare(_corpus(tmp_path / "src", 1), "c")
    facet.job_runner.submit(dataclasses.replace(prepared, embedder=str(tmp_path / "gone-ckpt")))
    job = facet.job(prepared.job_id)
    assert job.state == "failed", job
    assert job.message is not None and "UnknownModelError" in job.message
    assert job.finished_at is not None and job.docs_seen == 0


def test_a_job_whose_source_vanished_fails_unstarted_and_resumes_nothing(facet, tmp_path) -> None:
    """The source gone before the first batch: the job failed after it had been recorded
    ``running`` with this process, and after taking the lease, which marked the interrupted
    job of the same source "resumed by" this one: that job's hint to run it again was lost."""
    facet.job_runner = InlineJobRunner(facet._run_job)
    src = _corpus(tmp_path / "src", 1)
    facet.index(src, "c")
    with facet.context.sessions() as s:
        coll = md.get_collection(s, "c")
        assert coll is not None
        stopped = md.IndexJob(
            collection_id=coll.id,
            source=str(src.resolve()),
            embedder="minilm",
            state="interrupted",
            runner="inline",
            finished_at=md.utcnow(),
            message="stopped (Ctrl-C) with 0 documents indexed; run it again",
        )
        s.add(stopped)
        s.commit()
        stopped_id = stopped.id
    prepared = facet.indexing.prepare(src, "c")
    shutil.rmtree(src)
    facet.job_runner.submit(prepared)
    job = facet.job(prepared.job_id)
    assert job.state == "failed" and "was there when the job was queued" in (job.message or "")
    assert job.resumed_from is None
    assert facet.job(stopped_id).message == "stopped (Ctrl-C) with 0 documents indexed; run it again"
