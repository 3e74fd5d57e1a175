"""The registry's first use from several threads at once: the first searches of a new process
run together (a LangChain ``batch``, threads, ``asyncio.gather`` of ``ainvoke``) met a registry
already marked loaded but still empty, and all but one failed with "unknown embedder 'minilm'
... valid names: " and an empty list (the RAG exploration of the sixth session of 2026-12-02).
A new process each time: the registry loads once per process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import threading
from embedders.registry import embedder_names, reads_instructions
barrier = threading.Barrier(8)
seen, errors = [], []
def first_use():
    barrier.wait()
    try:
        seen.append(len(embedder_names()))
        reads_instructions("minilm")
    except Exception as e:
        errors.append(repr(e))
threads = [threading.Thread(target=first_use) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(sorted(seen), errors)
"""


def test_threads_using_the_registry_first_all_see_every_embedder() -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    counts, errors = done.stdout.strip().rsplit("] ", 1)
    sizes = [int(n) for n in counts.strip("[").split(", ")]
    assert len(sizes) == 8 and len(set(sizes)) == 1 and sizes[0] >= 3, done.stdout  # minilm, the backbones...
    assert errors == "[]", done.stdout
