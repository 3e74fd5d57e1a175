"""``POST /cluster`` says a cheap mistake (a model name not served, an explainer not served, an
unknown collection) at once, not after waiting for a clustering turn: a typo waited 11.7 s
behind four running clusterings before its 404 (35 s with 34 queued), or was refused 429 as if
the server were busy. Its 429 is said in /openapi.json to be the turns being full too. Real
parts: a served Facet over a temp data folder (the session's minilm), the app in process."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api import create_app, server
from app.core import Facet
from tests.app.api.conftest import serving_facet


@pytest.fixture(scope="module")
def facet(minilm, tmp_path_factory) -> Iterator[Facet]:
    facet = serving_facet(tmp_path_factory.mktemp("first") / "data", minilm, ui_mount=False)
    yield facet
    facet.close()


def test_cheap_mistakes_are_refused_before_the_wait_for_a_turn(facet, monkeypatch) -> None:
    entered, release = threading.Event(), threading.Event()
    real = facet.cluster

    def held(request: Any, progress: Any = None) -> Any:
        entered.set()
        release.wait(timeout=10)
        return real(request, progress)

    monkeypatch.setattr(facet, "cluster", held)
    texts = [f"message {i}: the customer asks about card {i % 3}" for i in range(6)]
    body = {"instruction": "What is asked?", "texts": texts, "k": 2}
    app = create_app(facet)
    with TestClient(app) as client:
        app.state.cluster_turns = server._ClusterTurns(running=1, waiting=0)
        first: list[Any] = []
        runner = threading.Thread(target=lambda: first.append(client.post("/cluster", json=body)))
        runner.start()
        try:
            assert entered.wait(timeout=30)
            t0 = time.perf_counter()
            answers = {
                "embedder": client.post("/cluster", json=body | {"embedder": "nosuch"}),
                "explainer": client.post("/cluster", json=body | {"explainer": "nosuch"}),
                "collection": client.post("/cluster", json={"instruction": "What is asked?",
                                                            "collection": "nosuch"}),
            }
            took = time.perf_counter() - t0
        finally:
            release.set()
            runner.join(timeout=60)
    for param, answer in answers.items():
        assert answer.status_code == 404, (param, answer.status_code, answer.text)
        assert answer.json()["error"]["param"] == param, answer.text
    assert took < 5, took
    assert first and first[0].status_code == 200, first


def test_the_openapi_429_of_cluster_names_the_turns(facet) -> None:
    with TestClient(create_app(facet)) as client:
        spec = client.get("/openapi.json").json()
    said = spec["paths"]["/cluster"]["post"]["responses"]["429"]["description"]
    assert "clustering turns are full" in said and "FACET_MAX_PENDING_TEXTS" in said, said
