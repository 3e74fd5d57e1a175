"""/cluster shares the server fairly: a bounded number of clusterings at once, the others
queued without a thread of the pool or refused (429), and a clustering whose client went away
stopped.

Before: ``search`` and ``cluster`` were plain sync routes on Starlette's 40 threads, so 50
concurrent clusterings kept every user's search waiting about 20 s, with no 429; a client that
gave up on 5,000 texts kept the model thread busy for the whole clustering; a full encoder queue
said ``Retry-After: 1`` with a minute of work queued. Real parts: a served Facet over a temp data
folder (the session's minilm), the app in process; the disconnect is an ASGI ``http.disconnect``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api import create_app, server
from app.core import Facet
from app.encoding import BatchingQueryEncoder, EmbedderCache
from app.errors import BusyError
from tests.app.api.conftest import asgi_call, serving_facet
from tests.app.gated import hold_clusterings


@pytest.fixture(scope="module")
def facet(minilm, tmp_path_factory) -> Iterator[Facet]:
    facet = serving_facet(tmp_path_factory.mktemp("fair") / "data", minilm, ui_mount=False)
    yield facet
    facet.close()


def _texts(n: int, tag: str) -> list[str]:
    return [f"message {i} of {tag}: the customer asks about card {i % 7} and fee {i % 5}"
            for i in range(n)]


def test_clusterings_past_the_turns_are_refused_at_once_with_retry_after(facet, monkeypatch) -> None:
    """One clustering running and none allowed to wait: another is a 429 at once (it waited
    for a pool thread, then ran); a search meanwhile is answered."""
    entered = threading.Event()
    release = hold_clusterings(facet, monkeypatch, entered, 10)
    body = {"instruction": "What is asked?", "texts": _texts(6, "held"), "k": 2}
    app = create_app(facet)
    with TestClient(app) as client:
        turns = getattr(server, "_ClusterTurns", None)  # (none before: a thread of the pool each)
        if turns is not None:
            app.state.cluster_turns = turns(running=1, waiting=0)
        first: list[Any] = []
        runner = threading.Thread(target=lambda: first.append(client.post("/cluster", json=body)))
        runner.start()
        try:
            assert entered.wait(timeout=30)
            refused = client.post("/cluster", json=body | {"k": 3})
            health = client.get("/health")
        finally:
            release.set()
            runner.join(timeout=60)
    assert refused.status_code == 429, refused.text
    assert refused.json()["error"]["code"] == "busy"
    assert int(refused.headers["Retry-After"]) >= 1
    assert "1 clustering running and 0 more waiting" in refused.json()["error"]["message"]
    assert health.status_code == 200
    assert first and first[0].status_code == 200, first


def test_waiting_clusterings_hold_no_thread_of_the_pool(facet, monkeypatch) -> None:
    """More clusterings than the pool has threads (40): a sync route still gets a thread."""
    entered = threading.Semaphore(0)
    release = hold_clusterings(facet, monkeypatch, entered, 20)
    body = {"instruction": "What is asked?", "texts": _texts(4, "pool"), "k": 2}
    answers: list[int] = []
    app = create_app(facet)
    with TestClient(app) as client:
        turns = getattr(server, "_ClusterTurns", None)  # (none before: a thread of the pool each)
        if turns is not None:
            app.state.cluster_turns = turns(running=2, waiting=60)
        posts = [threading.Thread(target=lambda: answers.append(
            client.post("/cluster", json=body).status_code)) for _ in range(45)]
        for t in posts:
            t.start()
        searched: list[int] = []
        try:
            assert entered.acquire(timeout=30)
            search = threading.Thread(target=lambda: searched.append(
                client.get("/collections").status_code))
            search.start()
            search.join(timeout=15)  # (forever before: every thread held by a clustering)
            done_while_held = list(searched)
        finally:
            release.set()
            for t in posts:
                t.join(timeout=120)
    assert done_while_held == [200]
    assert sorted(set(answers)) == [200] and len(answers) == 45


def _post_then_leave(client: TestClient, body: dict[str, Any], leave: threading.Event
                     ) -> list[dict[str, Any]]:
    """POST /cluster through the app's ASGI interface; once ``leave`` is set the client is
    gone (``http.disconnect``). The messages sent back."""
    raw = json.dumps(body).encode()
    given = False

    async def receive() -> Any:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": raw, "more_body": False}
        if leave.is_set():
            return {"type": "http.disconnect"}
        import anyio

        await anyio.sleep(3600)  # (cancelled: a poll of is_disconnected)
        return {"type": "http.disconnect"}

    return asgi_call(client, "POST", "/cluster", [(b"content-type", b"application/json"),
                                                  (b"content-length", str(len(raw)).encode())],
                     receive)


def test_a_clustering_whose_client_went_away_is_stopped(facet, monkeypatch, caplog) -> None:
    """The client leaves once its clustering has encoded a piece: it stops at its next step (it
    encoded all 1,500 texts, answered 200 to nobody), the rest never encoded."""
    leave = threading.Event()
    ended: list[BaseException | None] = []
    real = facet.cluster

    def watched(request: Any, progress: Any = None) -> Any:
        def told(fraction: float, stage: str) -> None:
            if stage.startswith("encoding") and not stage.startswith("encoding 0/"):
                leave.set()
            assert progress is not None
            progress(fraction, stage)

        try:
            result = real(request, told if progress is not None else None)
        except BaseException as e:
            ended.append(e)
            raise
        ended.append(None)
        return result

    monkeypatch.setattr(facet, "cluster", watched)
    texts = _texts(1500, "gone")
    encoder = facet.encoder
    assert isinstance(encoder, BatchingQueryEncoder)
    before = encoder.stats.texts
    caplog.set_level(logging.INFO, logger="app.api.server")
    with TestClient(create_app(facet)) as client:
        sent = _post_then_leave(client, {"instruction": "What is asked?", "texts": texts, "k": 3},
                                leave)
    statuses = [m["status"] for m in sent if m["type"] == "http.response.start"]
    assert statuses == [server.CLIENT_CLOSED_REQUEST], statuses
    assert len(ended) == 1 and type(ended[0]).__name__ == "_Stopped", ended
    assert encoder.stats.texts - before < len(texts)
    assert "a client disconnected: its clustering was stopped" in caplog.text


def test_a_full_queue_says_retry_after_from_the_queued_work(minilm) -> None:
    """Retry-After from the texts waiting and the model's measured rate (it was 1 whatever
    was queued)."""
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    encoder = BatchingQueryEncoder(cache, max_pending_texts=120)
    encoder._start = lambda: None  # type: ignore[method-assign]  # (no model thread: all waits)
    key_texts = ["x" * 100] * 100
    encoder.submit(key_texts, embedder="minilm", role="query")
    for key in {r.key for queue in (encoder._urgent, encoder._bulk) for r in queue}:
        encoder._rates[key] = 0.001  # seconds per padded character
    with pytest.raises(BusyError) as refused:
        encoder.submit(["y" * 100] * 50, embedder="minilm", role="query")
    # 100 texts of 116 padded characters: 11.6 s queued; 30 of them must leave first.
    assert refused.value.retry_after_s == pytest.approx(11.6 * 30 / 100)


def test_cheap_mistakes_are_refused_before_the_wait_for_a_turn(facet, monkeypatch) -> None:
    """``POST /cluster`` says a cheap mistake (a model name not served, an explainer not
    served, an unknown collection) at once, not after waiting for a clustering turn: a typo
    waited 11.7 s behind four running clusterings before its 404 (35 s with 34 queued), or was
    refused 429 as if the server were busy."""
    entered = threading.Event()
    release = hold_clusterings(facet, monkeypatch, entered, 10)
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


def test_retry_after_counts_a_running_clustering_longer_than_the_recent_mean(monkeypatch) -> None:
    """Before any clustering had finished, Retry-After counted each turn as 1 s: a burst was told
    17 s where each clustering took 16 s (and the wait was about 270 s). A turn now counts at
    least as long as the longest running clustering has run."""
    import asyncio

    clock = [100.0]
    monkeypatch.setattr(server.time, "perf_counter", lambda: clock[0])

    async def scenario() -> float:
        turns = server._ClusterTurns(running=1, waiting=0)
        async with turns.turn():
            clock[0] += 20.0  # the running one has run 20 s, none has finished
            with pytest.raises(BusyError) as refused:
                turns.refuse_if_full()
        return refused.value.retry_after_s

    assert asyncio.run(scenario()) == pytest.approx(20.0)
