"""`facet bench --parts api-load`: search latency of a real `facet serve` idle and during an
index job, and the job's speed with and without searches, measured by a project command (the
figures were an explorer's hand-run scripts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.app.cli_runner import invoke_cli


def test_api_load_measures_searches_idle_and_during_an_index_job(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    bench_dir = tmp_path / "bench"
    result = invoke_cli("bench", "--parts", "api-load", "--load-docs", "40", "--load-clients", "2",
                        "--load-idle-s", "1", "--threads", "1", "--bench-dir", str(bench_dir),
                        "--out", str(out),
                        env={"FACET_DATA_DIR": str(tmp_path / "data"), "OMP_NUM_THREADS": "1",
                             # The user's own database and store, which the bench must not
                             # touch (its server indexed the load-* collections into them).
                             "FACET_DATABASE_URL": f"sqlite:///{tmp_path / 'user.db'}",
                             "facet_vector_backend": "local"})
    assert result.returncode == 0, result.stderr + result.stdout
    r = json.loads(out.read_text())["api_load"]
    assert (r["docs"], r["clients"], r["threads"], r["embedder"]) == (40, 2, 1, "minilm")
    jobs = {"alone": r["job_alone"], "during": r["during_job"]["job"]}
    assert jobs["alone"]["id"] != jobs["during"]["id"]
    for label, job in jobs.items():
        assert job["state"] == "completed", (label, job)
        assert (job["docs_seen"], job["docs_indexed"], job["docs_failed"]) == (40, 40, 0), (label, job)
        assert job["chunks_written"] >= 40 and job["seconds"] > 0, (label, job)
        assert abs(job["docs_per_s"] - 40 / job["seconds"]) < 1e-6, (label, job)
    assert r["job_docs_per_s_ratio"] == jobs["during"]["docs_per_s"] / jobs["alone"]["docs_per_s"]
    for label in ("idle", "during_job"):
        phase = r[label]
        assert phase["clients"] == 2 and phase["searches"] > 0 and phase["refused_429"] == 0, (label, phase)
        assert 0 < phase["p50_ms"] <= phase["p95_ms"] <= phase["max_ms"], (label, phase)
        assert phase["searches_per_s"] == phase["searches"] / phase["seconds"], (label, phase)
    assert r["idle"]["seconds"] >= 1.0  # the --load-idle-s window, and the searches in flight at its end
    assert "API search under load (2 client(s), top 10): idle p50/p95/max " in result.stdout
    assert "index job of 40 docs: " in result.stdout and "docs/s alone (40 indexed, completed" in result.stdout
    assert list(bench_dir.iterdir()) == []  # the files and the server's data folder were temporary
    assert not (tmp_path / "user.db").exists() and not (tmp_path / "data").exists()


def test_bench_settings_keep_the_bench_out_of_the_configured_database_and_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`facet bench` indexed its `bench` collection into FACET_DATABASE_URL's database (a
    user's collection of that name got its documents, whose vectors went with the temporary
    folder); its settings and its server's environment keep it in its own folder."""
    from app.services.benchmark import bench_environ, bench_settings

    monkeypatch.setenv("FACET_DATABASE_URL", f"sqlite:///{tmp_path / 'user.db'}")
    monkeypatch.setenv("FACET_QDRANT_URL", "http://qdrant.example:6333")
    monkeypatch.setenv("FACET_VECTOR_BACKEND", "server")
    monkeypatch.setenv("facet_broker_url", "redis://broker.example:6379/0")
    monkeypatch.setenv("FACET_API_KEY", "secret")
    monkeypatch.setenv("FACET_QUERY_THREADS", "3")
    settings = bench_settings(tmp_path / "bench", chunk_tokens=50)
    assert settings.resolved_database_url.endswith(str(tmp_path / "bench" / "facet.db"))
    assert (settings.vector_backend, settings.qdrant_url, settings.broker_url) == ("edge", None, None)
    assert (settings.chunk_tokens, settings.query_threads) == (50, 3)  # the rest as configured
    environ = bench_environ(tmp_path / "bench", {"FACET_QUERY_THREADS": "1"})
    assert environ["FACET_DATA_DIR"] == str(tmp_path / "bench")
    assert environ["FACET_QUERY_THREADS"] == "1"
    assert not {k for k in environ if k.upper() in {
        "FACET_DATABASE_URL", "FACET_QDRANT_URL", "FACET_VECTOR_BACKEND", "FACET_BROKER_URL",
        "FACET_API_KEY"}}
