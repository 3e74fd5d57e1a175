"""Listings of many jobs and many collections.

`facet jobs` showed the newest 20 jobs only: a job queued or running before them (a 33-minute
job, with 30 small ones sent after it) was left out, and nothing said more jobs existed. Every
job that has not ended is listed now, whatever its age, and a last line counts the rest.

`facet collections` loaded and closed every edge shard to count its points (0.11 s each, and it
wrote into each one): its count cache lived in the process, and the CLI is a new process each
time. The count is kept beside the shard now, with the state of the shard's files it was taken
at; another process's listing reads it while those files are unchanged, and counts again once
anything wrote them.

Real SQLite, real edge store, real minilm.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.services.collections import COUNT_SIDE, CollectionService
from app.services.context import EmbedderCache, ServiceContext
from app.services.indexing import IndexService
from app.settings import FacetSettings
from indexer import metadata as md
from tests.app.cli_runner import invoke_cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def contexts(minilm, tmp_path: Path) -> Iterator[list[ServiceContext]]:
    """Two contexts on one data folder (two Facets), sharing the session's minilm."""
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    made = [
        ServiceContext(FacetSettings(data_dir=tmp_path / "data", chunk_tokens=64, chunk_overlap=8), embedders=cache)
        for _ in range(2)
    ]
    yield made
    for ctx in made:
        ctx.close()


def _corpus(folder: Path, n: int, first: int = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(first, first + n):
        (folder / f"note{i}.txt").write_text(f"note {i}: my card was declined at shop number {i}.")
    return folder


def test_a_job_still_queued_is_listed_behind_newer_ones(contexts, tmp_path: Path) -> None:
    ctx = contexts[0]
    service = IndexService(ctx)
    src = _corpus(tmp_path / "src", 1)
    service.index(src, "d")  # job 1
    # Job 2: a row that says running whose writer is gone (no lease): it has ended
    # (interrupted), and an older one is not listed for it.
    with ctx.sessions() as s:
        gone = md.create_collection(s, "gone", backend="edge", chunk_size=64, chunk_overlap=8, tokenizer="minilm")
        s.add(md.IndexJob(collection_id=gone.id, source="src", embedder="minilm", state="running", runner="inline"))
        s.commit()
    # Job 3: queued for this process's runner, which has not taken it yet.
    queued = service.prepare(_corpus(tmp_path / "big", 2), "big", runner="thread").job_id
    for _ in range(22):  # jobs 4..25, each ended (cancelled before it ran)
        service.cancel(service.prepare(src, "d").job_id)
    ctx.store.release("d")
    catalog = CollectionService(ctx)
    listed = catalog.jobs()
    assert [j.id for j in listed] == [*range(25, 5, -1), queued]  # newest first, then the live one
    assert listed[-1].state == "queued"
    assert listed.not_shown == 4  # jobs 1, 2, 4 and 5
    assert [j.id for j in catalog.jobs(limit=1)] == [25, queued]
    only = catalog.jobs("big")
    assert ([j.id for j in only], only.not_shown) == ([queued], 0)

    env = {"FACET_DATA_DIR": str(tmp_path / "data")}
    out = invoke_cli("jobs", env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    jobs = [line for line in out.stdout.splitlines() if line.startswith("job ")]
    assert len(jobs) == 21
    assert jobs[-1].startswith(f"job {queued} queued: big <- ")
    # The next page is before the page's last newest job (6), as GET /jobs' Link: the live job
    # listed after them is not where it goes on (it said "--offset 20").
    assert out.stdout.splitlines()[-1] == ("… 4 older jobs not shown (--before 6 shows the next ones; --limit N: N a "
                                            "page, up to 1000)")
    as_json = invoke_cli("jobs", "--json", "--limit", "3", env=env)  # what GET /jobs answers too
    assert [j["id"] for j in json.loads(as_json.stdout)] == [25, 24, 23, queued]
    everything = invoke_cli("jobs", "--limit", "25", env=env).stdout
    assert "not shown" not in everything


def _files(root: Path) -> dict[str, tuple[int, int, int, bytes]]:
    """Every file of the edge store (shards, their side files, the lock files): inode, size,
    mtime and, for a lock file, what it says (the last process that took it)."""
    out = {}
    for folder, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            st = os.stat(path)
            out[path] = (
                st.st_ino,
                st.st_size,
                st.st_mtime_ns,
                Path(path).read_bytes() if name.endswith(".lock") else b"",
            )
    return out


def _listed_points(data: Path) -> dict[str, int | None]:
    """`facet collections --json` in a new process: each collection's points."""
    done = subprocess.run(
        [sys.executable, "-m", "app", "collections", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, FACET_DATA_DIR=str(data), PYTHONPATH=str(ROOT)),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return {c["name"]: c["points"] for c in json.loads(done.stdout)}


def test_another_process_lists_kept_counts_without_opening_a_shard(contexts, tmp_path: Path) -> None:
    ctx, other = contexts
    data, edge = tmp_path / "data", tmp_path / "data" / "qdrant-edge"
    for i, name in enumerate(("a", "b", "c")):
        IndexService(ctx).index(_corpus(tmp_path / name, i + 1), name)
        ctx.store.release(name)
    assert {i.name: i.points for i in CollectionService(ctx).list_all()} == {"a": 1, "b": 2, "c": 3}
    assert all((edge / name / COUNT_SIDE).is_file() for name in "abc")
    before = _files(edge)
    # A new process: its listing reads the kept counts. No shard is loaded, no lock file taken
    # (each open rewrote it with the opener's pid), no file of any shard written.
    assert _listed_points(data) == {"a": 1, "b": 2, "c": 3}
    assert _files(edge) == before
    fresh = CollectionService(ctx)  # a new process's cache, in this one
    assert [i.points for i in fresh.list_all()] == [1, 2, 3]
    assert _files(edge) == before and not ctx.store.is_open("a")

    # Another Facet writes "a": its files changed, so every listing counts it again.
    IndexService(other).index(_corpus(tmp_path / "a", 4, first=10), "a")
    other.store.release("a")
    assert _listed_points(data) == {"a": 5, "b": 2, "c": 3}
    assert [i.points for i in CollectionService(ctx).list_all()] == [5, 2, 3]
    assert [i.points for i in fresh.list_all()] == [5, 2, 3]  # its own cache was of before
    after = _files(edge)
    assert {p for p in after if after[p] != before.get(p)} <= {
        p for p in after if p.startswith(str(edge / "a"))
    }  # "b" and "c" were not opened


def test_a_count_that_cannot_be_kept_is_counted_each_time(contexts, tmp_path: Path) -> None:
    """Where the side file cannot be written, nothing is kept: the listing still counts."""
    ctx = contexts[0]
    IndexService(ctx).index(_corpus(tmp_path / "src", 2), "a")
    ctx.store.release("a")
    side = tmp_path / "data" / "qdrant-edge" / "a" / COUNT_SIDE
    side.mkdir()  # neither readable nor replaceable as a file
    for _ in range(2):
        assert [i.points for i in CollectionService(ctx).list_all()] == [2]
    assert side.is_dir()
