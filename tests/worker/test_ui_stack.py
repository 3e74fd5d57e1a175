"""The UI in the full stack: ``facet ui`` / ``facet serve`` build ``Facet.for_serving``, which
must send encoding to the workers when ``FACET_ENCODE_ON_WORKERS`` is set (docker-compose's
``api`` service sets it and has no GPU). Real parts: redis-server, a ``facet worker``
subprocess on both queues, the Qdrant stand-in, and the page driven with ``gradio_client``."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from .conftest import Stack, free_port

QUERY_INSTRUCTION = "Find notes about the same place"


def test_the_ui_indexes_searches_and_clusters_on_the_workers(stack: Stack, tmp_path, caplog) -> None:
    pytest.importorskip("gradio")  # here, not at collection: gradio takes ~4 s to import
    from gradio_client import Client, handle_file

    from app.core import Facet
    from app.remote import CeleryJobRunner, CeleryQueryEncoder
    from ui.app import launch_ui

    stack.start_worker(queues="index,query")
    facet = Facet.for_serving(stack.settings(encode_on_workers=True))
    encoder = facet.encoder
    assert isinstance(encoder, CeleryQueryEncoder)
    assert isinstance(facet.job_runner, CeleryJobRunner)
    sent: list[tuple[str, str]] = []  # (task, queue) of every encode the page asked for
    call = encoder._call

    def counted(task: str, queue: str, kwargs: dict[str, Any], *deadline: float) -> Any:
        sent.append((task, queue))
        return call(task, queue, kwargs, *deadline)

    encoder._call = counted
    demo = launch_ui(facet, port=free_port(), block=False)
    client = Client(demo.local_url, verbose=False)
    try:
        files = []
        for name, text in (("lighthouse", "The lighthouse keeper polishes the lens at dusk."),
                           ("harbour", "Fishing boats unload their catch in the harbour."),
                           ("bakery", "The bakery sells rye bread and cinnamon buns.")):
            path = tmp_path / f"{name}.txt"
            path.write_text(text)
            files.append(handle_file(str(path)))
        job, _, _, _, _ = client.predict(files, "stack-notes", "minilm",
                                         api_name="/index_upload")
        deadline = time.monotonic() + 180
        while True:
            html, _, _ = client.predict(job, api_name="/job_status")
            state = re.search(r'data-state="(\w+)"', html)
            assert state, html
            if state.group(1) not in ("queued", "running"):
                break
            assert time.monotonic() < deadline, f"job {job} still {state.group(1)}"
            time.sleep(0.3)
        assert state.group(1) == "completed" and "3 indexed" in html, html
        assert facet.job(job).runner == "celery"

        results, summary = client.predict("who looks after the lens", QUERY_INSTRUCTION,
                                          "stack-notes", "minilm", 3, "", False, "", False,
                                          api_name="/search")
        assert "lighthouse" in results.split("</tr>")[1]  # the first result row
        assert "3 results from <b>stack-notes</b> (minilm)" in summary
        assert sent and {queue for _, queue in sent} == {"query"}
        searched = len(sent)
        # The readiness probe asks the workers too, queries being theirs: one consumes 'query'.
        ready = facet.readiness()
        assert ready.ready and ready.checks["query_workers"] == "ok", ready

        summary, _, table, _ = client.predict(
            "collection", "stack-notes", "", 0, "", "", "", None, None,
            "What place is this about?", 2, "minilm", "keywords (no explainer)",
            api_name="/cluster")
        assert "<b>3</b> texts, <b>k = 2</b>" in summary
        assert sum(row[1] for row in table["data"]) == 3
        assert len(sent) > searched  # the cluster's texts were encoded on the worker too

        # A server preloading minilm warms it up on the workers, and says so: it said "loaded
        # minilm", as if it held the model itself.
        from fastapi.testclient import TestClient

        from app.api.server import create_app

        with caplog.at_level("INFO", logger="app.api.server"), TestClient(create_app(
                settings=stack.settings(encode_on_workers=True), preload=["minilm"])) as served:
            assert served.get("/health").status_code == 200
        assert "warmed up minilm on the workers (they encode its queries)" in caplog.text
        assert "loaded minilm" not in caplog.text
    finally:
        client.close()
        demo.close()
        facet.close()


def test_the_api_starts_before_any_worker_answers_its_warm_up(stack: Stack, caplog) -> None:
    """compose starts the API when the worker container starts, before its models are loaded:
    the warm-up of a preloaded embedder on the 'query' queue timed out and the API exited (a
    54-line traceback, then a restart loop)."""
    from fastapi.testclient import TestClient

    from app.api.server import create_app

    app = create_app(settings=stack.settings(encode_on_workers=True, worker_timeout_s=1),
                     preload=["minilm"])
    with caplog.at_level("WARNING"), TestClient(app) as client:
        assert client.get("/health").status_code == 200
    assert "minilm was not warmed up: no worker answered on the 'query' queue" in caplog.text
