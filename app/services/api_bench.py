"""Benchmarks of the served API (``facet bench --parts api-search,api-embed,api-load``).

Each starts ``facet serve`` as a subprocess (the server owns its data folder, as in
production) and compare what a client sees with the bare model work it stands for, measured
in this process with the same torch thread count as the server's model thread:

* ``api_search_latency``: warm ``POST /search`` on a collection against the bare query
  encode of the same query; the two alternate query by query so machine load hits both.
* ``api_embeddings_throughput``: ``POST /v1/embeddings`` from concurrent clients against
  the bare encode loop (one ``encode`` call per request, one after another), with the
  server's dynamic batching on and off.
* ``api_search_under_load``: ``POST /search`` latency from concurrent clients with the server
  idle and while it runs an index job (``POST /jobs``) over small files, and the job's docs/s
  with those clients and alone.

Nothing is hard-coded: every figure is measured when the function runs.
"""

from __future__ import annotations

import json
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
from app.services.benchmark import bench_environ, bench_settings

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
    """``facet serve`` on ``data_dir`` in a subprocess; yields its base URL, stops it after.
    The server may load ``preload`` whatever it is (``FACET_API_MODELS``): a spec with options,
    ``minilm[instruction_weight=1]``, was refused with a 404 at the first search, a traceback."""
    import httpx

    port = _free_port()
    environ = bench_environ(data_dir, env) | {"FACET_API_MODELS": json.dumps([preload])}
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

    default = torch.get_num_threads()
    torch.set_num_threads(threads or default)
    lat: list[float] = []
    stages: list[dict[str, float]] = []
    try:
        with Facet.open(bench_settings(data_dir), embedders=embedders) as facet:
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


# ------------------------------------------------------------------ api-load

_LOAD_SUBJECTS = ["The river", "A small bakery", "The old library", "Our new train line",
                  "The mountain village", "A local football club", "The city council",
                  "A quiet laboratory", "The harbour market", "An online shop"]
_LOAD_VERBS = ["opened", "closed", "expanded", "reported", "celebrated", "struggled with",
               "announced", "postponed", "reviewed", "welcomed"]
_LOAD_OBJECTS = ["a winter festival", "higher prices", "a record harvest", "new safety rules",
                 "a delayed shipment", "volunteer training", "solar panels", "a charity run",
                 "late-night hours", "a heritage exhibit"]
_LOAD_TAILS = ["Residents were surprised.", "Officials expect more changes next year.",
               "Visitors praised the effort.", "Costs rose sharply in the spring.",
               "Many questions remain open.", "The decision was unanimous.",
               "Critics called it rushed.", "It took three months to plan."]
_JOB_ENDS = frozenset({"completed", "failed", "interrupted", "cancelled"})


def write_load_corpus(folder: Path, docs: int, *, seed: int = 7) -> Path:
    """``docs`` small text files (2-4 short news-like sentences each, seeded) in ``folder``."""
    import random

    rnd = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(docs):
        text = " ".join(f"{rnd.choice(_LOAD_SUBJECTS)} {rnd.choice(_LOAD_VERBS)} "
                        f"{rnd.choice(_LOAD_OBJECTS)}. {rnd.choice(_LOAD_TAILS)}"
                        for _ in range(rnd.randint(2, 4)))
        (folder / f"doc{i:05d}.txt").write_text(text + "\n")
    return folder


def _submit_job(client: Any, source: Path, collection: str, embedder: str) -> tuple[int, float]:
    """``POST /jobs``; returns the job's id and when it was sent (``perf_counter``)."""
    t0 = time.perf_counter()
    response = client.post("/jobs", json={"source": str(source), "collection": collection,
                                          "embedder": embedder})
    if response.status_code != 202:
        raise RuntimeError(f"POST /jobs answered {response.status_code}: {response.text[:300]}")
    return int(response.json()["id"]), t0


def _wait_job(client: Any, job_id: int, t0: float, *, timeout_s: float,
              poll_s: float = 0.1) -> dict[str, Any]:
    """Poll ``GET /jobs/{job_id}`` until the job ends; its counters, and its docs/s from the
    time between submitting it (``t0``) and seeing it end."""
    while True:
        response = client.get(f"/jobs/{job_id}", params={"errors": 0})
        response.raise_for_status()
        job = response.json()
        seconds = time.perf_counter() - t0
        if job["state"] in _JOB_ENDS:
            break
        if seconds > timeout_s:
            raise RuntimeError(f"job {job_id} still {job['state']} after {timeout_s:.0f}s "
                               f"({job['docs_seen']} documents seen)")
        time.sleep(poll_s)
    return {"id": job_id, "state": job["state"], "message": job.get("message"),
            "docs_seen": job["docs_seen"], "docs_indexed": job["docs_indexed"],
            "docs_failed": job["docs_failed"], "chunks_written": job["chunks_written"],
            "seconds": seconds, "docs_per_s": job["docs_indexed"] / seconds,
            "timings": job.get("timings")}


@contextmanager
def _searching(url: str, body: dict[str, Any], queries: list[str],
               clients: int) -> Iterator[dict[str, Any]]:
    """``clients`` closed-loop ``POST /search`` clients (threads) while the block runs; the
    dict yielded gets, once they stopped, each answered search's ``latencies_ms``, the 429s
    (``refused``: the client waits the ``Retry-After``, 1 s at most, and goes on), the other
    failures' texts (``errors``) and the ``seconds`` they ran. Searches still in flight when
    the block ends are waited for and counted (they started inside it)."""
    import httpx

    found: dict[str, Any] = {"latencies_ms": [], "refused": 0, "errors": []}
    lock = threading.Lock()
    stop = threading.Event()

    def loop(first: int) -> None:
        with httpx.Client(base_url=url, timeout=120) as client:
            n = first
            while not stop.is_set():
                query = queries[n % len(queries)]
                n += 1
                t0 = time.perf_counter()
                try:
                    response = client.post("/search", json=body | {"query": query})
                except httpx.HTTPError as e:
                    with lock:
                        found["errors"].append(repr(e))
                    time.sleep(0.2)
                    continue
                ms = (time.perf_counter() - t0) * 1000
                with lock:
                    if response.status_code == 200:
                        found["latencies_ms"].append(ms)
                    elif response.status_code == 429:
                        found["refused"] += 1
                    else:
                        found["errors"].append(f"{response.status_code}: {response.text[:200]}")
                if response.status_code == 429:
                    try:
                        wait = float(response.headers.get("Retry-After", "1"))
                    except ValueError:
                        wait = 1.0
                    time.sleep(min(1.0, max(0.0, wait)))

    workers = [threading.Thread(target=loop, args=(i * 7,), daemon=True) for i in range(clients)]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    try:
        yield found
    finally:
        stop.set()
        for w in workers:
            w.join()
        found["seconds"] = time.perf_counter() - t0


def _load_summary(found: dict[str, Any], clients: int) -> dict[str, Any]:
    """Percentiles (ms) and rates of what ``_searching`` found."""
    lat: list[float] = found["latencies_ms"]
    return {"clients": clients, "seconds": found["seconds"], "searches": len(lat),
            "searches_per_s": len(lat) / found["seconds"],
            "p50_ms": _pct(lat, 50) if lat else None, "p95_ms": _pct(lat, 95) if lat else None,
            "max_ms": max(lat) if lat else None, "refused_429": found["refused"]}


def api_search_under_load(data_dir: Path, source: Path, embedder: str, queries: list[str], *,
                          clients: int = 4, idle_s: float = 5.0, threads: int = 1,
                          top_k: int = 10, warm_docs: int = 16, job_timeout_s: float = 1800.0,
                          log: Callable[[str], None] = logger.info) -> dict[str, Any]:
    """Search latency of ``facet serve`` idle and while it runs an index job, and the job's
    speed with and without searches (``facet bench --parts api-load``).

    On a fresh server over ``data_dir`` (``threads`` torch threads in its model thread), in
    this order: a warm-up job of ``warm_docs`` files like ``source``'s (collection
    ``load-warm``; the server's first job was slower: its first pieces not sized yet);
    (c) ``POST /jobs`` over ``source`` into collection ``load-alone``, no client
    searching: the job alone (its docs/s, the reference); then 3 warm-up searches; (a)
    ``clients`` closed-loop clients searching ``load-alone`` for ``idle_s`` seconds: idle
    latency; (b) a second job over ``source`` into ``load-busy`` while the same clients search
    ``load-alone`` until it ends: latency during the job, the 429s, and the job's docs/s.
    Searches failing otherwise than 429 raise ``RuntimeError``.
    """
    import httpx

    body = {"collection": "load-alone", "k": top_k, "embedder": embedder}
    data_dir.mkdir(parents=True, exist_ok=True)
    docs = sum(1 for p in source.iterdir() if p.is_file())
    with served(data_dir, env={"FACET_QUERY_THREADS": str(threads)}, preload=embedder) as url, \
            httpx.Client(base_url=url, timeout=120) as client:
        warm = write_load_corpus(data_dir.parent / "warm-up", min(docs, warm_docs), seed=8)
        job_id, t0 = _submit_job(client, warm, "load-warm", embedder)
        warm_job = _wait_job(client, job_id, t0, timeout_s=job_timeout_s)
        if warm_job["state"] != "completed":
            raise RuntimeError(f"the warm-up job ended {warm_job['state']}: {warm_job['message']}")
        job_id, t0 = _submit_job(client, source, "load-alone", embedder)
        alone = _wait_job(client, job_id, t0, timeout_s=job_timeout_s)
        log(f"  job alone: {alone['docs_indexed']} of {docs} docs in {alone['seconds']:.1f}s "
            f"({alone['docs_per_s']:.1f} docs/s), {alone['state']}, load "
            f"{os.getloadavg()[0]:.2f}")
        for q in queries[:3]:  # warm-up (the search path; the model is warm from the job)
            client.post("/search", json=body | {"query": q}).raise_for_status()
        with _searching(url, body, queries, clients) as found_idle:
            time.sleep(idle_s)
        idle = _load_summary(found_idle, clients)
        log(f"  idle: {idle['searches']} searches by {clients} client(s) in "
            f"{idle['seconds']:.1f}s, p50/p95 {idle['p50_ms'] or 0:.1f}/"
            f"{idle['p95_ms'] or 0:.1f} ms, load {os.getloadavg()[0]:.2f}")
        job_id, t0 = _submit_job(client, source, "load-busy", embedder)
        with _searching(url, body, queries, clients) as found_busy:
            busy_job = _wait_job(client, job_id, t0, timeout_s=job_timeout_s)
        busy = _load_summary(found_busy, clients)
        log(f"  during the job: {busy['searches']} searches, p50/p95 {busy['p50_ms'] or 0:.1f}/"
            f"{busy['p95_ms'] or 0:.1f} ms; job {busy_job['docs_per_s']:.1f} docs/s, "
            f"{busy_job['state']}, load {os.getloadavg()[0]:.2f}")
    failed = found_idle["errors"] + found_busy["errors"]
    if failed:
        raise RuntimeError(f"{len(failed)} searches failed, e.g. {failed[0]}")
    return {"embedder": embedder, "docs": docs, "clients": clients, "threads": threads,
            "top_k": top_k, "idle_s": idle_s, "job_alone": alone, "idle": idle,
            "during_job": busy | {"job": busy_job},
            "job_docs_per_s_ratio": (busy_job["docs_per_s"] / alone["docs_per_s"]
                                     if alone["docs_per_s"] else None),
            "load_average": round(os.getloadavg()[0], 2)}
