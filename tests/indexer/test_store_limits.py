"""A collection the process cannot open for a limit of its own (open files, address space) is
neither damaged nor gone (the resource-limits exploration of the third session of 2026-12-02).
The engine says EMFILE and ENOMEM in Rust's Debug form ("Custom { kind: TooManyOpenFiles ...",
"Os { code: 12, kind: OutOfMemory ..."), which matched none of the I/O signs: a `facet serve`
under `ulimit -n 256` with many idle connections, or `ulimit -v 4000000` with a few collections
open, called healthy collections damaged ("Restore the folder from a backup, or delete the
collection", a 422), and kept doing so after the load had gone, since open collections were
closed only after another open succeeded. A real edge store, in a subprocess whose soft limit
of open files is set to the descriptors it has open, so the limit never reaches the suite."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SETUP = """
import os, resource
from pathlib import Path
from indexer.errors import StoreDamagedError, StoreUnavailableError
from indexer.store import EdgeStore, PointRecord

root = Path({root!r})
store = EdgeStore(root)
for name in {names!r}:
    store.ensure_collection(name, {{"v": 2}})
    store.upsert(name, [PointRecord(id="00000000-0000-0000-0000-000000000001",
                                    vectors={{"v": [1.0, 0.5]}}, payload={{"doc_id": "d"}})])
store.close()
store = EdgeStore(root)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
"""


def _run(tmp_path: Path, names: list[str], body: str) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(SETUP.format(root=str(tmp_path / "edge"), names=names)) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_a_collection_that_cannot_open_for_the_open_files_limit_is_not_called_damaged(tmp_path: Path) -> None:
    """The limit set at the descriptors open, then one more at a time, until the collection
    opens: it fails first in Facet's own reads, then in the engine's, then opens."""
    done = _run(tmp_path, ["c"], """
        base = len(os.listdir("/proc/self/fd"))
        for slack in range(40):
            resource.setrlimit(resource.RLIMIT_NOFILE, (base + slack, hard))
            try:
                store.count("c")
            except StoreDamagedError as e:
                print("DAMAGED", " ".join(str(e).split()))
            except StoreUnavailableError as e:
                print("LIMIT", " ".join(str(e).split()))
            else:
                print("OPENED")
                break
            finally:
                resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    """)
    assert done.returncode == 0, done.stderr
    said = done.stdout.strip().splitlines()
    assert said[-1] == "OPENED" and not any(s.startswith("DAMAGED") for s in said), said  # (the old code: DAMAGED)
    refused = said[:-1]
    assert any(s.startswith("LIMIT collection 'c': opening it failed (") for s in refused), said  # the engine's
    for line in refused:
        assert line.startswith("LIMIT collection 'c': "), line
        assert "this process has reached a limit of its open files or memory, and nothing on disk is " \
            "wrong (ulimit -n is" in line and "raise it (ulimit -n, systemd's LimitNOFILE=" in line, line
        assert "backup" not in line and "delete the collection" not in line, line


def test_a_limit_met_with_other_collections_open_closes_them_and_opens(tmp_path: Path) -> None:
    done = _run(tmp_path, ["a", "b", "c"], """
        store.count("a"), store.count("b")
        resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")), hard))
        print(store.count("c"), sorted(store._shards))
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1 ['c']", done.stdout  # (the old code: StoreDamagedError)
    assert "could not be opened for a limit of this process" in done.stderr and \
        "closed 2 other open collection(s) and tried again" in done.stderr, done.stderr
