"""A collection whose shard another process holds through the engine alone, without Facet's
lock file (a Facet from before the lock files, 2026-11-23, or another program on the folder):
the engine's "WouldBlock" was said as "open in another store of this process (pid N) ... share
one Facet", naming this process and the Python API to a CLI user (found by an upgrade
exploration running an old `facet index` beside a new one). Real edge store, real second
process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from indexer.errors import StoreBusyError
from indexer.store import EdgeStore, PointRecord, point_id

ROOT = Path(__file__).resolve().parents[2]
DIM = 8

_HOLDER = textwrap.dedent("""
    import sys, time
    from indexer.store import EdgeStore
    store = EdgeStore(sys.argv[1])
    shard = store._load("held")  # the engine's own lock alone, not Facet's lock file
    print("holding", flush=True)
    time.sleep(60)
""")


def test_a_shard_held_by_another_process_without_facets_lock_names_that_case(tmp_path: Path) -> None:
    folder = tmp_path / "edge"
    store = EdgeStore(folder)
    store.ensure_collection("held", {"v": DIM})
    store.upsert("held", [PointRecord(point_id(f"d{i}", 0), {"v": np.eye(DIM, dtype=np.float32)[i]},
                                      {"doc_id": f"d{i}", "chunk_no": 0}) for i in range(2)])
    store.close()
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(folder)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding", \
            holder.stderr.read() if holder.stderr else ""
        again = EdgeStore(folder)
        try:
            with pytest.raises(StoreBusyError) as e:
                again.count("held")
        finally:
            again.close()
        said = str(e.value)
        assert "another process" in said and "an older Facet" in said, said
        assert "set_shared" in said  # the in-process case is still named, as the other cause
    finally:
        holder.kill()
        holder.wait(10)
