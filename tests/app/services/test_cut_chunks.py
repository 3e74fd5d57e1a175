"""Chunks longer than an embedder reads whole: a warning of the job, not only a log line.

The shipped causal checkpoints serve 96 tokens (85 of text after their prompt) and a default
chunk is 200: most of every chunk never reached its vector, which only a log line at the
collection's creation said, and nothing at all where the short-budget embedder was added to a
collection later. Real models: minilm and a tiny InBedder (max_length 64); real SQLite and
the edge store; the chunked (worker) protocol driven in process.
"""

from __future__ import annotations

from pathlib import Path

from app.encoding import CHUNK_MARGIN, CUT_MARK, cut_message
from app.services.collections import CollectionService
from app.services.distributed import ChunkedIndexService
from app.services.indexing import IndexOptions, IndexService

LONG = " ".join(f"word{i} of the ferry timetable" for i in range(15))  # 90-130 tokens either way
SHORT = "a short note about ferries"


def _cut(warnings: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(key, message) for key, message in warnings if CUT_MARK in message]


def _sources(root: Path) -> Path:
    root.mkdir()
    (root / "long.txt").write_text(LONG)
    (root / "short.txt").write_text(SHORT)
    return root


def test_chunks_an_embedder_cuts_are_counted_on_the_job(make_ctx, tmp_path, tiny_inbedder_dir) -> None:
    src = _sources(tmp_path / "src")
    spec = str(tiny_inbedder_dir)
    ctx = make_ctx(chunk_tokens=200, chunk_overlap=0)
    report = IndexService(ctx).index(src, "docs", IndexOptions(embedder=spec))
    model = ctx.embedders.get(spec)
    budget = model.document_budget()
    assert budget is not None and budget < 64 < 200
    expected = cut_message(model.name, 1, report.chunks_written, budget, f"{spec}[max_length=N]")
    assert f"or less, or with --embedder '{spec}[max_length=N]' (not always better" in expected
    assert _cut(report.warnings) == [(model.name, expected)]
    assert f"1 of 2 chunks written are longer than {model.name} reads whole ({budget} tokens" in expected
    assert f"--chunk-tokens {budget - CHUNK_MARGIN} or less" in expected
    job = CollectionService(ctx).job(report.job_id)
    assert [e["message"] for e in job.errors if CUT_MARK in e["message"]] == [expected]
    # Chunks of the size the warning advises: read whole, nothing said.
    whole = make_ctx(data_dir=tmp_path / "whole", chunk_tokens=budget - CHUNK_MARGIN, chunk_overlap=0)
    again = IndexService(whole).index(src, "docs", IndexOptions(embedder=spec))
    assert again.chunks_written > 2 and _cut(again.warnings) == []
    # minilm reads 254 tokens of a 200-token chunk: nothing said either.
    assert _cut(IndexService(make_ctx(data_dir=tmp_path / "m", chunk_tokens=200, chunk_overlap=0))
                .index(src, "docs").warnings) == []


def test_a_companion_that_cuts_the_chunks_is_named(make_ctx, tmp_path, tiny_inbedder_dir) -> None:
    """InBedder added to a minilm collection of 200-token chunks read the first ~80 of each, and
    so did every later write of its companion vectors: said only in the log."""
    src = _sources(tmp_path / "src")
    spec = str(tiny_inbedder_dir)
    ctx = make_ctx(chunk_tokens=200, chunk_overlap=0)
    service = IndexService(ctx)
    assert _cut(service.index(src, "docs").warnings) == []
    model = ctx.embedders.get(spec)
    added = service.index(src, "docs", IndexOptions(embedder=spec))
    assert [k for k, _ in _cut(added.warnings)] == [model.name]
    # An edit written by minilm: the companion's vectors of it are cut, and said so.
    (src / "long.txt").write_text(LONG + " and the winter timetable")
    report = service.index(src, "docs")
    assert _cut(report.warnings) == [(model.name, cut_message(model.name, 1, report.chunks_written,
                                                              model.document_budget(), f"{spec}[max_length=N]"))]


def test_a_companion_counts_against_the_chunks_it_encoded_and_keeps_its_options(
        make_ctx, tmp_path, tiny_inbedder_dir) -> None:
    """A new embedder added to a collection encoded all 17 chunks while the companion
    encoded only the new document's, and the warning said "1 of 17"; its advice dropped the
    options the companion was loaded with ([instruction_weight=1]: another embedding)."""
    src = _sources(tmp_path / "src")
    spec = f"{tiny_inbedder_dir}[instruction_weight=1]"
    ctx = make_ctx(chunk_tokens=200, chunk_overlap=0)
    service = IndexService(ctx)
    service.index(src, "docs", IndexOptions(embedder=spec))
    model = ctx.embedders.get(spec)
    (src / "new.txt").write_text(LONG + " and the night ferry")
    report = service.index(src, "docs", IndexOptions(embedder="minilm"))
    assert report.chunks_written == 3
    assert _cut(report.warnings) == [(model.name, cut_message(
        model.name, 1, 1, model.document_budget(), f"{tiny_inbedder_dir}[instruction_weight=1,max_length=N]"))]


def test_a_worker_job_sums_its_chunk_tasks_cut_warnings(make_ctx, tmp_path, tiny_inbedder_dir) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for i in range(3):
        (src / f"long{i}.txt").write_text(f"{i} {LONG}")
    (src / "short.txt").write_text(SHORT)
    spec = str(tiny_inbedder_dir)
    ctx = make_ctx(chunk_tokens=200, chunk_overlap=0)
    service = ChunkedIndexService(ctx)
    prepared = IndexService(ctx).prepare(src, "docs", IndexOptions(embedder=spec), runner="celery")
    numbers = service.plan(prepared, 2)
    assert len(numbers) == 2
    for n in numbers:
        service.run_chunk(prepared.job_id, n)
    job = CollectionService(ctx).job(prepared.job_id)
    model = ctx.embedders.get(spec)
    assert job.state == "completed" and job.chunks_written == 4, job
    assert [(e["document"], e["message"]) for e in job.errors if CUT_MARK in e["message"]] == [
        (model.name, cut_message(model.name, 3, 4, model.document_budget(), f"{spec}[max_length=N]"))]
    # minilm takes no [max_length=N]: its warning does not offer it (an error to copy).
    from app.encoding import max_length_spec

    assert max_length_spec(ctx.embedders.get("minilm"), "minilm") is None
    assert max_length_spec(model, "x[pooling=avg-gen,max_length=64]") == "x[pooling=avg-gen,max_length=N]"
