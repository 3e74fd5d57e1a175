"""What ``facet serve`` logs of a job a client submitted or cancelled.

"job N queued by CLIENT" was logged once ``submit_index`` returned, after the job was handed to
its runner thread, whose "job N started" (for a small job, its end too) could come first; it
now reads before the job's own lines. A cancel over HTTP was logged twice, "job N:
cancellation asked by CLIENT" by the route and "job N: cancellation asked" by the job service;
it is one line, naming the client. Real parts: a served Facet over a temp data folder (the
session's minilm) and its thread job runner."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core import Facet
from app.jobs import ThreadJobRunner
from tests.app.api.conftest import serving_facet
from tests.app.services.conftest import write_corpus


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("apiparity_log")


@pytest.fixture(scope="module")
def facet(minilm, root) -> Iterator[Facet]:
    write_corpus(root / "notes", 2)
    facet = serving_facet(root / "data", minilm, ui_mount=False)
    yield facet
    facet.close()


def _lines(caplog: pytest.LogCaptureFixture, job: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"job {job}")]


def test_queued_by_is_logged_before_the_jobs_own_lines(client, facet, root, caplog,
                                                       monkeypatch) -> None:
    caplog.set_level(logging.INFO)
    runner = facet.job_runner
    assert isinstance(runner, ThreadJobRunner)
    submit = runner.submit

    def submit_and_wait(job) -> None:  # the runner as fast as can be: done before it returns
        submit(job)
        assert runner.join(120)

    monkeypatch.setattr(runner, "submit", submit_and_wait)

    r = client.post("/jobs", json={"source": str(root / "notes"), "collection": "notes"})

    assert r.status_code == 202, r.text
    job = r.json()["id"]
    lines = _lines(caplog, job)
    queued = f"job {job} queued by testclient (collection 'notes')"
    assert queued in lines, lines
    started = next(i for i, line in enumerate(lines) if line.startswith(f"job {job} started"))
    assert lines.index(queued) < started, lines
    assert client.get(f"/jobs/{job}").json()["state"] == "completed"


def test_a_cancel_over_http_is_logged_once_naming_the_client(client, facet, root, caplog,
                                                             monkeypatch) -> None:
    # Held queued (the runner never takes it): the cancel finds it queued, every time.
    monkeypatch.setattr(facet.job_runner, "submit", lambda job: None)
    r = client.post("/jobs", json={"source": str(root / "notes"), "collection": "held"})
    assert r.status_code == 202, r.text
    job = r.json()["id"]
    caplog.set_level(logging.INFO)

    cancelled = client.post(f"/jobs/{job}/cancel")

    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO
            and "cancellation asked" in r.getMessage()]
    assert said == [f"job {job}: cancellation asked by testclient"], said


def test_a_cancel_on_the_ui_is_logged_once_naming_who_asked(facet, root, caplog, tmp_path,
                                                           monkeypatch) -> None:
    # The job service's own line went to DEBUG (each HTTP cancel was logged twice), so the UI's
    # "Cancel job" says who asked itself, as the API does: a real UiHandlers over the served
    # Facet, the request as Gradio builds it for a logged-in page (user name, client address).
    import gradio as gr

    from ui.handlers import UiHandlers

    monkeypatch.setattr(facet.job_runner, "submit", lambda job: None)
    job = facet.submit_index(root / "notes", "held_ui").id
    caplog.set_level(logging.INFO)

    handlers = UiHandlers(facet, facet.settings, tmp_path / "exports")
    handlers.cancel_job(job, None, gr.Request(username="ann", client={"host": "10.0.0.7"}))

    assert facet.job(job).state == "cancelled"
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO
            and "cancellation asked" in r.getMessage()]
    assert said == [f"job {job}: cancellation asked on the UI's Index tab by user 'ann' at "
                    "10.0.0.7"], said
