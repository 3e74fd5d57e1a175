"""Benchmarks of the served API (``facet bench --parts api-search,api-embed``).

Both start ``facet serve`` as a subprocess (the server owns its data folder, as in
production) and compare what a client sees with the bare model work it stands for, measured
in this process with the same torch thread count as the server's model thread:

* ``api_search_latency``: warm ``POST /search`` on a collection against the bare query
  encode of the same query; the two alternate query by query so machine load hits both.
* ``api_embeddings_throughput``: ``POST /v1/embeddings`` from concurrent clients against
  the bare encode loop (one ``encode`` call per request, one after another), with the
  server's dynamic batching on and off.

Nothing is hard-coded: every figure is measured when the function runs.
"""

from __future__ import annotations

import logging
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from app.encoding import EmbedderCache

logger = logging.getLogger(__name__)


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def served(data_dir: Path, *, env: dict[str, str] | None = None, preload: str = "minilm",
           timeout_s: float = 300.0) -> Iterator[str]:
    """``facet serve`` on ``data_dir`` in a subprocess; yields its base URL, stops it after."""
    import httpx

    port = _free_port()
    environ = dict(os.environ, FACET_DATA_DIR=str(data_dir), **(env or {}))
    environ.pop("FACET_API_KEY", None)
    log = open(data_dir.parent / f"serve-{port}.log", "w")  # noqa: SIM115  (closed below)
    # -P: not the cwd first on sys.path (a folder there named ``app`` would shadow Facet's).
    proc = subprocess.Popen([sys.executable, "-P", "-m", "app", "serve", "--port", str(port),
                             "--preload", preload, "--log-level", "warning"],
                            env=environ, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"facet serve exited with {proc.returncode}; see {log.name}")
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"facet serve did not answer within {timeout_s:.0f}s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _bare_model(embedders: EmbedderCache, embedder: str, threads: int) -> Any:
    import torch

    torch.set_num_threads(threads)  # as the server's model thread (FACET_QUERY_THREADS)
    return embedders.get(embedder)


def api_search_latency(data_dir: Path, collection: str, embedders: EmbedderCache,
                       embedder: str, queries: list[str], *, instruction: str, top_k: int = 10,
                       rounds: int = 3, threads: int = 1,
                       log: Callable[[str], None] = logger.info) -> dict[str, Any]:
    """Warm API search latency vs bare query encoding, alternating query by query.

    Returns p50/p95 of the client-side ``POST /search`` time and of the bare
    ``encode([query], role=query, instruction)``, their difference and ratio at p50, and the
    server's own stage timings (so the HTTP share is client time minus server total).
    """
    import httpx

    model = _bare_model(embedders, embedder, threads)
    api: list[float] = []
    bare: list[float] = []
    stages: list[dict[str, float]] = []
    with served(data_dir, env={"FACET_QUERY_THREADS": str(threads)}, preload=embedder) as url, \
            httpx.Client(base_url=url, timeout=60) as client:
        body = {"collection": collection, "instruction": instruction, "k": top_k,
                "embedder": embedder, "mode": "dense"}  # against bare query encoding
        for q in queries[:3]:  # warm-up both sides
            client.post("/search", json=body | {"query": q}).raise_for_status()
            model.encode([q], role="query", instruction=instruction)
        for r in range(rounds):
            start = len(api)
            for q in queries:
                t0 = time.perf_counter()
                model.encode([q], role="query", instruction=instruction)
                bare.append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                response = client.post("/search", json=body | {"query": q})
                api.append((time.perf_counter() - t0) * 1000)
                response.raise_for_status()
                stages.append(response.json()["timings_ms"])
            # This round's own medians (the line showed the running median of rounds 1..r).
            log(f"  round {r + 1}/{rounds}: API p50 {statistics.median(api[start:]):.1f} ms, bare "
                f"encode p50 {statistics.median(bare[start:]):.1f} ms, load {os.getloadavg()[0]:.2f}")
    stage_p50 = {k: float(statistics.median(s[k] for s in stages)) for k in stages[0]}
    return {"searches": len(api), "embedder": embedder, "top_k": top_k, "threads": threads,
            "api_p50_ms": _pct(api, 50), "api_p95_ms": _pct(api, 95),
            "encode_p50_ms": _pct(bare, 50), "encode_p95_ms": _pct(bare, 95),
            "p50_minus_encode_ms": _pct(api, 50) - _pct(bare, 50),
            "p50_ratio_to_encode": _pct(api, 50) / _pct(bare, 50),
            "server_stage_p50_ms": stage_p50,
            "http_and_client_p50_ms": _pct(api, 50) - stage_p50["total"],
            "load_average": round(os.getloadavg()[0], 2)}


def inprocess_search_latency(data_dir: Path, collection: str, embedders: EmbedderCache,
                             embedder: str, queries: list[str], *, instruction: str,
                             threads: int | None, top_k: int = 10) -> dict[str, Any]:
    """``Facet.search`` in this process and thread (the CLI's path), with ``threads`` torch
    threads (None: torch's default), as a reference for the API figures."""
    import torch

    from app.core import Facet
    from app.services.search import SearchRequest
    from app.settings import FacetSettings

    default = torch.get_num_threads()
    torch.set_num_threads(threads or default)
    lat: list[float] = []
    stages: list[dict[str, float]] = []
    try:
        with Facet.open(FacetSettings(data_dir=data_dir), embedders=embedders) as facet:
            facet.search(SearchRequest(queries[0], collection, instruction, top_k=top_k,
                                       embedder=embedder, mode="dense"))
            for q in queries:
                t0 = time.perf_counter()
                response = facet.search(SearchRequest(q, collection, instruction, top_k=top_k,
                                                      embedder=embedder, mode="dense"))
                lat.append((time.perf_counter() - t0) * 1000)
                stages.append(response.timings_ms)
    finally:
        torch.set_num_threads(default)
    return {"threads": threads or default, "p50_ms": _pct(lat, 50), "p95_ms": _pct(lat, 95),
            "stage_p50_ms": {k: float(statistics.median(s[k] for s in stages)) for k in stages[0]}}


def _client_loop(url: str, requests: list[list[str]], embedder: str, next_index: Callable[[], int],
                 errors: list[str]) -> None:
    import base64

    import httpx

    with httpx.Client(base_url=url, timeout=300) as client:
        while True:
            i = next_index()
            if i >= len(requests):
                return
            response = client.post("/v1/embeddings", json={
                "input": requests[i], "model": embedder, "encoding_format": "base64"})
            if response.status_code != 200:
                errors.append(f"{response.status_code}: {response.text[:200]}")
                continue
            for item in response.json()["data"]:  # decode as a client would
                np.frombuffer(base64.b64decode(item["embedding"]), dtype="<f4")


def api_embeddings_throughput(data_dir: Path, embedders: EmbedderCache, embedder: str,
                              texts: list[str], *, texts_per_request: int = 1,
                              clients: int = 8, threads: int = 1, rounds: int = 3,
                              log: Callable[[str], None] = logger.info) -> dict[str, Any]:
    """Texts/s of ``/v1/embeddings`` under ``clients`` concurrent closed-loop clients vs the
    bare encode loop, with dynamic batching on (default) and off (``FACET_BATCH_MAX_TEXTS=1``).

    The bare loop encodes the same requests one ``encode`` call each, in order, in this
    process with ``threads`` torch threads (what a server without batching does at best);
    ``bare_batched`` encodes all the texts in batches of 32 (the most one thread can do).
    Each configuration runs ``rounds`` times alternating with a bare loop; medians reported.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    requests = [texts[i:i + texts_per_request] for i in range(0, len(texts), texts_per_request)]
    n = sum(len(r) for r in requests)
    model = _bare_model(embedders, embedder, threads)
    model.encode(texts[:64])  # warm-up

    def bare_loop() -> float:
        t0 = time.perf_counter()
        for request in requests:
            model.encode(request, role="document")
        return n / (time.perf_counter() - t0)

    def api_run(url: str) -> tuple[float, list[str]]:
        counter = iter(range(10**9))
        lock = threading.Lock()

        def next_index() -> int:
            with lock:
                return next(counter)

        errors: list[str] = []
        workers = [threading.Thread(target=_client_loop,
                                    args=(url, requests, embedder, next_index, errors))
                   for _ in range(clients)]
        t0 = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        return n / (time.perf_counter() - t0), errors

    t0 = time.perf_counter()
    model.encode(texts, role="document", batch_size=32)
    bare_batched = n / (time.perf_counter() - t0)
    out: dict[str, Any] = {"embedder": embedder, "texts": n, "requests": len(requests),
                           "texts_per_request": texts_per_request, "clients": clients,
                           "threads": threads, "rounds": rounds,
                           "bare_batched_texts_per_s": bare_batched}
    for label, env in (("batching", {}), ("no_batching", {"FACET_BATCH_MAX_TEXTS": "1"})):
        env = env | {"FACET_QUERY_THREADS": str(threads)}
        api_rates: list[float] = []
        bare_rates: list[float] = []
        with served(data_dir / label, env=env, preload=embedder) as url:
            import httpx

            # A warm-up of one request's size, left out of the server's figures below (it
            # counted 8 texts as one batch, a batching run without batching showed).
            httpx.post(f"{url}/v1/embeddings", json={"input": requests[0], "model": embedder},
                       timeout=120).raise_for_status()
            warm = httpx.get(f"{url}/info", timeout=30).json()["encoder_stats"]
            for r in range(rounds):
                bare_rates.append(bare_loop())
                rate, errors = api_run(url)
                if errors:
                    raise RuntimeError(f"{len(errors)} requests failed, e.g. {errors[0]}")
                api_rates.append(rate)
                log(f"  {label} round {r + 1}/{rounds}: API {rate:.1f} texts/s, bare loop "
                    f"{bare_rates[-1]:.1f} texts/s, load {os.getloadavg()[0]:.2f}")
            info = httpx.get(f"{url}/info", timeout=30).json()["encoder_stats"]
        api_med, bare_med = statistics.median(api_rates), statistics.median(bare_rates)
        batches = info["batches"] - warm["batches"]
        out[label] = {"api_texts_per_s": api_med, "bare_loop_texts_per_s": bare_med,
                      "ratio": api_med / bare_med, "api_runs": api_rates, "bare_runs": bare_rates,
                      "server_batches": batches,
                      "server_requests": info["requests"] - warm["requests"],
                      "mean_texts_per_batch": (info["texts"] - warm["texts"]) / max(1, batches),
                      "largest_batch": info["largest_batch"]}
    out["load_average"] = round(os.getloadavg()[0], 2)
    return out
