"""SIGKILL an indexing run half way, run it again: exactly the right points and documents."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from app.services.indexing import IndexService
from indexer import metadata as md
from indexer.chunking import ChunkingConfig, chunk_text, tokenizer_spans
from indexer.store import point_id
from tests.app.cli_runner import invoke_cli

from .conftest import write_corpus

N_DOCS = 80  # 160 chunks in batches of 4: the kill lands between many batches


def _indexed(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            return int(conn.execute("SELECT count(*) FROM documents WHERE status='indexed'")
                       .fetchone()[0])
    except sqlite3.Error:
        return 0


def test_sigkill_half_way_then_rerun(make_ctx, tmp_path, minilm) -> None:
    files = write_corpus(tmp_path / "src", N_DOCS, words=80)
    data = tmp_path / "data"
    env = dict(os.environ, FACET_DATA_DIR=str(data), FACET_CHUNK_TOKENS="64",
               FACET_CHUNK_OVERLAP="8")
    proc = subprocess.Popen(
        [sys.executable, "-c", "from app.cli import main; main()", "index",
         str(tmp_path / "src"), "--collection", "crash", "--batch-chunks", "4"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # Kill deterministically once at least a quarter of the documents are recorded.
    deadline = time.monotonic() + 180
    killed_at = 0
    while time.monotonic() < deadline and proc.poll() is None:
        killed_at = _indexed(data / "facet.db")
        if killed_at >= N_DOCS // 4:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.01)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode() if proc.stderr else ""
    assert N_DOCS // 4 <= killed_at < N_DOCS, f"killed with {killed_at} documents indexed"

    ctx = make_ctx(data_dir=data)
    # At once, without another run: the dead writer's job is shown interrupted (its pid is
    # gone on this host), with how to resume.
    from app.services.collections import CollectionService

    shown = CollectionService(ctx).jobs("crash")[0]
    assert shown.state == "interrupted" and "again to resume" in (shown.message or "")
    listed = invoke_cli("jobs", "--collection", "crash", env=env)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith(f"job {shown.id} interrupted: crash <- "), listed.stdout
    assert "again to resume" in listed.stdout  # the hint is in the list, not only `jobs ID`
    report = IndexService(ctx).index(tmp_path / "src", "crash")
    assert report.docs_skipped >= killed_at  # the recorded work was kept
    assert report.docs_indexed + report.docs_skipped == N_DOCS

    spans = tokenizer_spans(minilm.backbone.tokenizer)
    expected = {point_id(k, c.number) for k, t in files.items()
                for c in chunk_text(t, spans, ChunkingConfig(64, 8))}
    ids = [h.id for h in ctx.store.scroll("crash", limit=100_000)]
    assert len(ids) == len(set(ids)) == ctx.store.count("crash") == len(expected)
    assert set(ids) == expected
    with ctx.sessions() as s:
        coll = md.get_collection(s, "crash")
        assert coll is not None
        assert md.count_documents(s, coll.id) == md.count_documents(s, coll.id, "indexed") == N_DOCS
        assert md.count_chunks(s, coll.id) == len(expected)
        jobs = md.list_jobs(s, coll.id)
        assert [j.state for j in jobs] == ["completed", "interrupted"]
        assert jobs[0].resumed_from == jobs[1].id
    print(f"killed after {killed_at}/{N_DOCS} documents; rerun indexed {report.docs_indexed}, "
          f"skipped {report.docs_skipped}; {len(ids)} points == {len(expected)} expected")
