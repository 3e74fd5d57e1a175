"""``demo.queue`` limits (issue 14: one GPU is never oversubscribed): the events that run an
embedder share one concurrency group of ``FACET_UI_CONCURRENCY``; the rest never wait behind
them; the queue is capped at ``FACET_UI_MAX_QUEUE``."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.settings import FacetSettings


def test_model_events_share_one_limited_group(tmp_path: Path) -> None:
    # Imported here, not at collection: every xdist process collects every file, and gradio
    # takes ~4 s to import.
    pytest.importorskip("gradio")
    from ui.app import LIGHT, LIGHT_LIMIT, MODEL, build_ui

    settings = FacetSettings(data_dir=tmp_path / "data", ui_concurrency=2, ui_max_queue=7)
    demo = build_ui(lambda: None, settings)  # type: ignore[arg-type, return-value]
    queued = {f.api_name: f for f in demo.fns.values() if f.queue}
    model = {name for name, f in queued.items() if f.concurrency_id == MODEL}
    assert model == {"search", "compare", "cluster"}
    assert all(queued[name].concurrency_limit == 2 for name in model)
    light = {name: f for name, f in queued.items() if name not in model}
    assert {"index_upload", "index_folder", "resume_index", "job_status", "collections",
            "delete_collection", "pickers", "stopped_jobs"} <= set(light)
    assert all(f.concurrency_id == LIGHT and f.concurrency_limit == LIGHT_LIMIT
               for f in light.values())
    # Unqueued events only toggle widgets in the page (no facade call).
    assert all(f.api_name.startswith("lambda") for f in demo.fns.values() if not f.queue)
    assert demo._queue.max_size == 7
