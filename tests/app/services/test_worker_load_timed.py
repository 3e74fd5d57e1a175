"""A chunk task that loads a model records the load on the job row (``load_model`` in the
job's timings), as an inline run does: a worker's first chunk of a model it had not loaded
(not in ``FACET_WORKER_PRELOAD``), or of the collection's other embedder, took the load and
the job's timings named no load at all (closing note of the third session of 2026-12-07).

No broker: ``ChunkedIndexService`` is driven directly, one call per task (tests/worker/ runs
the same code through real workers). Real models: the session's minilm, and a second embedder
saved as a checkpoint and loaded from disk by the chunk; its weights are minilm's, already in
memory, so its load is made to take a second, as a model read from a slow disk does (the one
stand-in here)."""

from __future__ import annotations

import time
from pathlib import Path

from app.encoding import EmbedderCache
from app.services.collections import CollectionService
from app.services.context import ServiceContext
from app.services.distributed import ChunkedIndexService
from app.services.indexing import IndexOptions, IndexService

from .conftest import write_corpus


def _notes(tmp_path: Path, minilm) -> str:
    from embedders.baselines import EncoderMeanEmbedder
    from embedders.contract import PromptConfig

    return str(EncoderMeanEmbedder(name="minilm-notes", backbone=minilm.backbone,
                                   prompts=PromptConfig(document="note: {text}"))
               .save(tmp_path / "notes"))


def _worker(ctx: ServiceContext, minilm, slow: str) -> ServiceContext:
    """A fresh worker's context: minilm loaded (preloaded), ``slow`` not, its load a second."""

    class SlowDisk(EmbedderCache):
        def _load(self, name: str):
            if name == slow:
                time.sleep(1.0)
            return super()._load(name)

    cache = SlowDisk("cpu")
    cache.put("minilm", minilm)
    return ServiceContext(ctx.settings, embedders=cache)


def _run(worker: ServiceContext, ctx: ServiceContext, src: Path, options: IndexOptions | None):
    service = ChunkedIndexService(worker)
    prepared = IndexService(ctx).prepare(src, "c", options, runner="celery")
    numbers = service.plan(prepared, 1)
    assert [service.run_chunk(prepared.job_id, n).outcome for n in numbers] == ["done"] * len(numbers)
    return CollectionService(ctx).job(prepared.job_id)


def test_a_chunk_that_loads_its_embedder_records_the_load(make_ctx, tmp_path, minilm) -> None:
    notes = _notes(tmp_path, minilm)
    write_corpus(tmp_path / "src", 3)
    ctx = make_ctx()
    worker = _worker(ctx, minilm, notes)
    try:
        job = _run(worker, ctx, tmp_path / "src", IndexOptions(embedder=notes))
    finally:
        worker.close()
    assert job.docs_indexed == 3, job
    # Loaded once, by the first of the three chunks: one second, not three.
    assert 1.0 <= job.timings["load_model"] < 2.0, job.timings
    assert job.timings["encode"] < 1.0, job.timings


def test_a_chunk_that_loads_the_collections_other_embedder_records_it(make_ctx, tmp_path,
                                                                     minilm) -> None:
    notes = _notes(tmp_path, minilm)
    files = write_corpus(tmp_path / "src", 2)
    ctx = make_ctx()
    IndexService(ctx).index(tmp_path / "src", "c")
    IndexService(ctx).index(tmp_path / "src", "c", IndexOptions(embedder=notes))
    for i, path in enumerate(sorted(files)):
        Path(path).write_text(f"a rewritten note number {i} about lighthouses")
    worker = _worker(ctx, minilm, notes)  # minilm's job; the notes vectors are written too
    try:
        job = _run(worker, ctx, tmp_path / "src", None)
    finally:
        worker.close()
    assert job.docs_indexed == 2, job
    assert 1.0 <= job.timings["load_model"] < 2.0, job.timings
    assert job.timings["encode"] < 1.0, job.timings
