"""`/health` and `/ready` while every request thread of `facet serve` waits on the workers: both
ran in the same 40 threads as the searches (and every route's facade dependency took a thread
too), so with a worker stalled and searches in flight `/health` answered after 2.5 s and
`/ready` after 6.3 s at a 3 s worker timeout (the Redis soak of the sixth session of
2026-12-02); at the default 60 s a container healthcheck's 10 s would mark the API unhealthy.
They answer at once now. A real redis-server and `facet serve`; no worker runs, so each search
waits its worker timeout."""

from __future__ import annotations

import threading
import time

import httpx

from app.core import Facet
from app.encoding import EmbedderCache
from app.settings import FacetSettings
from tests.app.served import facet_serve
from tests.worker.conftest import own_redis


def test_health_and_ready_answer_while_every_request_thread_waits(tmp_path, minilm) -> None:
    data = tmp_path / "data"
    (tmp_path / "notes.txt").write_text("my card was declined at the shop\n")
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facet = Facet(FacetSettings(data_dir=data), embedders=cache)  # (indexing is not what is tested)
    try:
        facet.index(tmp_path / "notes.txt", "notes")
    finally:
        facet.close()
    redis = own_redis(tmp_path)
    try:
        # Two waves of 9 s searches on its 40 threads: the old code answered /health and /ready
        # only when a thread came free, ~7 s after they were sent, over both limits below.
        with facet_serve({"FACET_DATA_DIR": str(data), "FACET_BROKER_URL": redis.url(0),
                          "FACET_ENCODE_ON_WORKERS": "true", "FACET_WORKER_TIMEOUT_S": "9",
                          "FACET_UI_MOUNT": "false", "OMP_NUM_THREADS": "1"}, start_s=180) as url:
            statuses: list[int] = []

            def search() -> None:
                answer = httpx.post(f"{url}/search", json={"query": "card declined", "collection": "notes",
                                                           "mode": "dense"}, timeout=60)
                statuses.append(answer.status_code)

            searches = [threading.Thread(target=search) for _ in range(48)]  # more than its 40 threads
            for t in searches:
                t.start()
            time.sleep(2.0)  # all sent, each waiting for a worker
            took = {}
            for route in ("/health", "/ready"):
                t0 = time.monotonic()
                answer = httpx.get(f"{url}{route}", timeout=30)
                took[route] = time.monotonic() - t0
                assert answer.status_code in (200, 503), answer.text  # (ready may say the workers are not)
            for t in searches:
                t.join(timeout=90)
    finally:
        redis.stop()
    assert statuses and set(statuses) == {503}, statuses  # no worker: each search said so
    assert took["/health"] < 1.0 and took["/ready"] < 5.0, took
