"""Indexing a folder again when nothing in it changed does not load the embedder.

`facet index DIR -c NAME` run again on an unchanged folder loaded the model (seconds for
MiniLM, much longer for a 0.5B LLM embedder) only to find nothing to do. The model is loaded
when a run has chunks to encode, and checked against the collection's record then: each test
runs a fresh process's embedder cache (``EmbedderCache.loaded`` says what it loaded).
"""

from __future__ import annotations

import time

import pytest

from app.errors import ConflictError
from app.services.collections import CollectionService
from app.services.context import EmbedderCache, ServiceContext
from app.services.indexing import IndexOptions, IndexService
from app.settings import FacetSettings
from embedders.baselines import EncoderMeanEmbedder
from indexer import metadata as md

from .conftest import write_corpus


def context(tmp_path, model=None, **fields) -> ServiceContext:
    """A context on the test's data folder; its cache holds ``model`` as ``minilm``, or nothing
    (a new process: the first ``get`` loads MiniLM from disk)."""
    cache = EmbedderCache("cpu")
    if model is not None:
        cache.put("minilm", model)
    return ServiceContext(FacetSettings(data_dir=tmp_path / "data", chunk_tokens=64, chunk_overlap=8,
                                        **fields), embedders=cache)


def test_an_unchanged_folder_is_indexed_again_without_loading_the_model(tmp_path, minilm) -> None:
    files = write_corpus(tmp_path / "src", 5)
    first = context(tmp_path, minilm)
    try:
        before = IndexService(first).index(tmp_path / "src", "docs")
        assert before.docs_indexed == 5
    finally:
        first.close()

    ctx = context(tmp_path)
    try:
        report = IndexService(ctx).index(tmp_path / "src", "docs", IndexOptions(sync=True))
        assert ctx.embedders.loaded() == []  # the model was never loaded
        assert "load_model" not in report.timings
        assert (
            report.state,
            report.docs_seen,
            report.docs_skipped,
            report.docs_indexed,
            report.chunks_written,
            report.warnings,
        ) == ("completed", 5, 5, 0, 0, [])
        job = CollectionService(ctx).job(report.job_id)
        assert (
            job.state,
            job.embedder,
            job.docs_seen,
            job.docs_skipped,
            job.docs_indexed,
            job.chunks_written,
            job.errors,
        ) == ("completed", "minilm", 5, 5, 0, 0, [])
        # A file removed under --sync is removed without the model too.
        gone = sorted(files)[0]
        (tmp_path / "src" / gone.rsplit("/", 1)[1]).unlink()
        report = IndexService(ctx).index(tmp_path / "src", "docs", IndexOptions(sync=True))
        assert (report.docs_deleted, report.docs_skipped) == (1, 4)
        assert ctx.embedders.loaded() == []
        assert ctx.store.count("docs") == report.docs_skipped  # one chunk per file

        # A changed file loads the model and is written. The load is a stage of its own, not
        # encoding, and not in the run's time: a one-document change read as 0.1 chunks/s.
        (tmp_path / "src" / "doc004.txt").write_text("The lighthouse keeper wrote the log.")
        t0 = time.perf_counter()
        report = IndexService(ctx).index(tmp_path / "src", "docs")
        wall = time.perf_counter() - t0
        assert (report.state, report.docs_indexed, report.docs_skipped) == ("completed", 1, 3)
        assert ctx.embedders.loaded() == ["minilm"]
        # (In this process the load is quick, the weights shared with the first context's
        # model: the stage is checked for being there and left out of the run's time; in a
        # fresh `facet index` it is seconds, which the encoding stage and the rate showed.)
        load = report.timings["load_model"]
        assert load > 0 and report.elapsed_s <= wall - load, (report.elapsed_s, wall, report.timings)
        hits = ctx.store.scroll("docs", limit=100)
        assert "The lighthouse keeper wrote the log." in {h.payload["text"] for h in hits}
    finally:
        ctx.close()


def test_a_different_version_is_still_refused_when_there_is_something_to_write(tmp_path, minilm) -> None:
    """The collection was written by MiniLM served at max_length 32; this process loads the
    packaged MiniLM (512): an unchanged run has nothing to write and passes, a changed file
    loads the model, which is refused before anything is written."""
    write_corpus(tmp_path / "src", 3)
    budget = EncoderMeanEmbedder(name="minilm", max_length=32, backbone=minilm.backbone)
    first = context(tmp_path, budget)
    try:
        IndexService(first).index(tmp_path / "src", "docs")
    finally:
        first.close()

    ctx = context(tmp_path)
    try:
        assert IndexService(ctx).index(tmp_path / "src", "docs").docs_skipped == 3
        assert ctx.embedders.loaded() == []
        (tmp_path / "src" / "doc001.txt").write_text("The lighthouse keeper wrote the log.")
        with pytest.raises(ConflictError, match=r"different version of that embedder \(max_length changed"):
            IndexService(ctx).index(tmp_path / "src", "docs")
        assert ctx.embedders.loaded() == ["minilm"]
        with ctx.sessions() as session:
            coll = md.get_collection(session, "docs")
            assert coll is not None
            job = md.list_jobs(session, coll.id, limit=1)[0]
            assert job.state == "failed" and "max_length" in (job.message or "")
            docs = md.documents_by_key(session, coll.id, [str(tmp_path / "src" / "doc001.txt")])
            assert [d.status for d in docs.values()] == ["indexed"]  # the old version kept
        assert "The lighthouse keeper wrote the log." not in {
            h.payload["text"] for h in ctx.store.scroll("docs", limit=100)
        }
    finally:
        ctx.close()


def test_a_moved_folder_is_indexed_at_its_new_place_without_loading_the_model(tmp_path, minilm) -> None:
    """`mv src moved`: every file's content is in the collection, so each copies its chunks and
    vectors and nothing is encoded; the model was loaded anyway (the chunker asked for its
    tokenizer), 2 s for MiniLM and about 9 s for a 0.5B LLM embedder, for nothing. A large file
    read in a stream copies its donor's chunks too, without cutting the file again. A document
    whose points the store lost is encoded: the model loads then."""
    small = dict(stream_document_mb=0.004, index_batch_chunks=4)
    write_corpus(tmp_path / "src", 3)
    (tmp_path / "src" / "log.txt").write_text(
        " ".join(f"line {i} of the service log, request handled." for i in range(200)))
    first = context(tmp_path, minilm, **small)
    try:
        before = IndexService(first).index(tmp_path / "src", "docs")
        assert before.docs_indexed == 4 and before.chunks_written > 8
    finally:
        first.close()
    (tmp_path / "src").rename(tmp_path / "moved")

    ctx = context(tmp_path, **small)
    try:
        report = IndexService(ctx).index(tmp_path / "moved", "docs")
        assert ctx.embedders.loaded() == []
        assert (report.state, report.docs_indexed, report.docs_moved, report.chunks_reused) == (
            "completed", 4, 4, before.chunks_written)
        stored = ctx.store.scroll("docs", limit=100)
        assert len(stored) == before.chunks_written
        assert {h.payload["source"] for h in stored} == {
            str(tmp_path / "moved" / n) for n in ("doc000.txt", "doc001.txt", "doc002.txt", "log.txt")}
        # The same chunks as a fresh cut of the moved files gives (text and offsets).
        text = (tmp_path / "moved" / "log.txt").read_text()
        assert all(text[h.payload["start"]:h.payload["end"]] == h.payload["text"]
                   for h in stored if h.payload["doc_id"].endswith("log.txt"))

        # The store lost one document's points: moved again, that one is written anew (the
        # run's store check finds the loss), so the model loads; the others are still copies.
        ctx.store.delete_documents("docs", [str(tmp_path / "moved" / "doc001.txt")])
        (tmp_path / "moved").rename(tmp_path / "again")
        report = IndexService(ctx).index(tmp_path / "again", "docs")
        assert ctx.embedders.loaded() == ["minilm"]
        assert (report.docs_indexed, report.docs_moved) == (4, 3)
        assert report.chunks_reused == before.chunks_written - 1  # one chunk per small file
        assert ctx.store.count("docs") == before.chunks_written
    finally:
        ctx.close()
