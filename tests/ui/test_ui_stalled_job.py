"""A stalled job on the Index tab: a running job whose worker stopped renewing its lease (it
goes on when a worker takes its next chunk). A page loaded then showed no bar for it (only a
queued or running job's), and a bar whose job stalled stopped polling, hid Cancel job and read
as ended, so the job's going on later was never shown."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.orm import sessionmaker

from indexer import metadata as md
from tests.app.services.conftest import running_job, stall_lease

gr = pytest.importorskip("gradio")


def _stall(data: Path, collection: str) -> int:
    """A worker's job into ``collection`` (made here) that has stalled: its last heartbeat 40 s
    ago, its lease expired (``stall_lease``)."""
    engine = md.make_engine(f"sqlite:///{data / 'facet.db'}")
    try:
        with sessionmaker(engine, expire_on_commit=False)() as s:
            coll = md.create_collection(s, collection, backend="edge", chunk_size=64,
                                        chunk_overlap=8, tokenizer="minilm")
            job_id = running_job(s, coll, runner="celery")
            stall_lease(coll)
            s.commit()
    finally:
        engine.dispose()
    return job_id


def test_a_stalled_job_keeps_its_bar_its_polling_and_its_cancel_button(tmp_path) -> None:
    from app.core import Facet
    from app.settings import FacetSettings
    from ui.handlers import UiHandlers

    data = tmp_path / "data"
    data.mkdir()
    job_id = _stall(data, "notes")
    facet = Facet(FacetSettings(data_dir=data))
    try:
        assert facet.job(job_id).state == "stalled"
        handlers = UiHandlers(facet, facet.settings, tmp_path / "exports")
        # A page loaded now: the stalled job's bar, polled.
        shown, _total, html, _errors, timer = handlers.resume_job()
        assert shown == job_id and timer.active, html
        assert 'data-state="stalled"' in html and "start one if none runs" in html, html
        # A bar polling it: still polled, Cancel job offered, the job not announced as ended.
        html, _errors, timer = handlers.job_status(job_id, 0)
        assert timer.active and "<b>stalled</b>" in html, html
        assert handlers.cancel_button(job_id).visible is True
        button, said, row, _stopped = handlers.job_controls(job_id, None)
        assert button.visible is True and f"Job {job_id} into notes: stalled." in said, said
        assert row == gr.skip()  # (the stopped-jobs list is not refreshed: it has not ended)
        # Another job's bar names it as still in progress.
        html, _errors, timer = handlers.job_status(job_id + 1000, 0)
        assert f"Also in progress: job {job_id} into <b>notes</b> stalled" in html and timer.active
        # Its cancel is heard: "cancelling", the button gone.
        html, _errors, timer, button = handlers.cancel_job(job_id, 0)
        assert "<b>cancelling</b>" in html and timer.active and button.visible is False, html
    finally:
        facet.close()
