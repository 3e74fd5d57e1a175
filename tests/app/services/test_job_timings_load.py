"""The job row's stage timings are its run's report's, the deferred model load included.

A run over a collection that records its embedder loads the model only once something needs
encoding, and its report times that load as a stage of its own (``load_model``). The job row
(``facet jobs ID``, ``GET /jobs/{id}``, the UI's job box) had no such stage: it left out the
seconds (minutes for an LLM embedder on a CPU) that the CLI's own summary of the run counted.
"""

from __future__ import annotations

from app.services.collections import CollectionService
from app.services.context import EmbedderCache, ServiceContext
from app.services.indexing import IndexService
from app.settings import FacetSettings

from .conftest import write_corpus


def rounded(timings: dict[str, float]) -> dict[str, float]:
    """The report's timings as a job row shows them (to the millisecond)."""
    return {stage: round(s, 3) for stage, s in timings.items()}


def test_the_job_row_has_the_deferred_model_load_the_report_has(make_ctx, tmp_path) -> None:
    write_corpus(tmp_path / "src", 3)
    first = make_ctx()
    report = IndexService(first).index(tmp_path / "src", "docs")
    # The model was loaded before the run (the cache held it): no load stage, here or there.
    assert "load_model" not in report.timings
    assert CollectionService(first).job(report.job_id).timings == rounded(report.timings)
    first.close()  # (the store's shard: one context at a time)

    # A fresh process's cache: the run loads the model when the changed file needs encoding.
    (tmp_path / "src" / "doc002.txt").write_text("The lighthouse keeper wrote the log.")
    settings = FacetSettings(data_dir=tmp_path / "data", chunk_tokens=64, chunk_overlap=8)
    with ServiceContext(settings, embedders=EmbedderCache("cpu")) as ctx:
        report = IndexService(ctx).index(tmp_path / "src", "docs")
        assert (report.state, report.docs_indexed, report.docs_skipped) == ("completed", 1, 2)
        assert ctx.embedders.loaded() == ["minilm"]
        assert report.timings["load_model"] > 0
        jobs = CollectionService(ctx)
        job = jobs.job(report.job_id)
        assert job.timings == rounded(report.timings), (job.timings, report.timings)
        assert jobs.jobs("docs")[0].timings == job.timings  # the listing too


def test_a_first_run_counts_the_load_its_preparation_made(tmp_path) -> None:
    """A new collection's first run loads its model while the job is prepared (its size and
    identity are recorded then): the report and the row count that load too (the summary said
    "3 chunks in 0.2s" after a 10-second load)."""
    write_corpus(tmp_path / "src", 3)
    settings = FacetSettings(data_dir=tmp_path / "data", chunk_tokens=64, chunk_overlap=8)
    with ServiceContext(settings, embedders=EmbedderCache("cpu")) as ctx:
        report = IndexService(ctx).index(tmp_path / "src", "docs")
        assert report.state == "completed" and report.timings["load_model"] > 0, report.timings
        assert CollectionService(ctx).job(report.job_id).timings == rounded(report.timings)
