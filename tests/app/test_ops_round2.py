"""What an operator running Facet for a team sees: a job that failed on a read-only metadata
database, and each collection's size on disk. Real minilm, SQLite, edge and local stores."""

from __future__ import annotations

import json
import logging
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.api import create_app
from app.core import Facet
from app.settings import FacetSettings
from indexer import metadata as md
from indexer.store import QdrantClientStore
from tests.app.cli_runner import invoke_cli
from tests.app.services.conftest import locked_by_another_process


def _source(root: Path, n: int = 4) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / f"note{i}.txt").write_text(f"support note {i}: the card was declined twice. " * 6)
    return root


def _du(folder: Path) -> int:
    """What ``du`` says the folder takes (allocated bytes)."""
    out = subprocess.run(["du", "-s", "-B1", str(folder)], capture_output=True, text=True,
                         check=True).stdout
    return int(out.split()[0])


# ------------------------------------------------------------------ a read-only database


@pytest.fixture
def read_only_served(cache, tmp_path: Path) -> Iterator[tuple[Facet, Facet, TestClient]]:
    """A writable facade (which records a queued job, as `POST /jobs` did before the folder
    became read-only) and a served one whose metadata database is the same file opened
    read-only by SQLite itself (``mode=ro``): every write of its job runner fails as on a
    `:ro` mount, "attempt to write a readonly database"."""
    data = tmp_path / "data"
    writable = Facet(FacetSettings(data_dir=data, chunk_tokens=64, chunk_overlap=8),
                     embedders=cache)
    read_only = Facet(FacetSettings(data_dir=data, chunk_tokens=64, chunk_overlap=8,
                                    database_url=f"sqlite:///file:{data}/facet.db?mode=ro&uri=true"),
                      embedders=cache)
    with TestClient(create_app(read_only)) as client:
        yield writable, read_only, client
    read_only.close()
    writable.close()


def test_a_job_whose_failure_cannot_be_written_shows_failed(read_only_served, tmp_path: Path,
                                                            caplog) -> None:
    writable, read_only, client = read_only_served
    prepared = writable.indexing.prepare(_source(tmp_path / "src"), "notes", runner="thread")
    caplog.set_level(logging.DEBUG, logger="app.jobs")
    read_only.job_runner.submit(prepared)  # its background thread, as after a POST /jobs
    assert read_only.job_runner.join(timeout=60)  # type: ignore[attr-defined]

    with writable.context.sessions() as session:  # the row could take nothing
        job = md.get_job(session, prepared.job_id)
        assert job is not None and job.state == "queued"
    shown = client.get(f"/jobs/{prepared.job_id}").json()
    assert shown["state"] == "failed"  # was "queued", for ever
    assert "attempt to write a readonly database" in shown["message"]
    assert "still says queued" in shown["message"]
    assert "[SQL:" not in shown["message"]
    listed = client.get("/jobs").json()
    assert [(j["id"], j["state"]) for j in listed] == [(prepared.job_id, "failed")]
    assert read_only.job(prepared.job_id).state == "failed"

    errors = [r for r in caplog.records if r.name == "app.jobs" and r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is None  # was a ~60-line traceback
    assert errors[0].getMessage() == (
        f"index job {prepared.job_id} (collection notes) failed: the metadata database failed "
        "(sqlite3.OperationalError: attempt to write a readonly database)")
    debug = [r for r in caplog.records if r.name == "app.jobs" and r.levelno == logging.DEBUG]
    assert any(r.exc_info for r in debug)  # the traceback is still there, at DEBUG


def test_a_remembered_failure_does_not_reach_another_databases_job(read_only_served,
                                                                   cache, tmp_path: Path) -> None:
    """Job ids are per database: the same id of another database's job stays as its row says."""
    writable, read_only, _client = read_only_served
    prepared = writable.indexing.prepare(_source(tmp_path / "src"), "notes", runner="thread")
    read_only.job_runner.submit(prepared)
    assert read_only.job_runner.join(timeout=60)  # type: ignore[attr-defined]
    other = Facet(FacetSettings(data_dir=tmp_path / "other"), embedders=cache)
    try:
        queued = other.indexing.prepare(_source(tmp_path / "src2"), "notes", runner="thread")
        assert queued.job_id == prepared.job_id
        assert other.job(queued.job_id).state == "queued"
    finally:
        other.close()


# ------------------------------------------------------------------------- disk usage


def test_collections_say_their_size_on_disk(cache, tmp_path: Path) -> None:
    data = tmp_path / "data"
    facet = Facet(FacetSettings(data_dir=data, chunk_tokens=64, chunk_overlap=8), embedders=cache)
    try:
        facet.index(_source(tmp_path / "src"), "notes")
        with TestClient(create_app(facet)) as client:
            listed = client.get("/collections").json()
            one = client.get("/collections/notes").json()
    finally:
        facet.close()
    folder = data / "qdrant-edge" / "notes"
    size = _du(folder)
    assert size > 0
    assert [c.get("disk_bytes") for c in listed] == [size] and one["disk_bytes"] == size

    env = {"FACET_DATA_DIR": str(data)}
    out = invoke_cli("collections", "--json", env=env)
    assert out.returncode == 0, out.stdout
    assert json.loads(out.stdout)[0]["disk_bytes"] == size
    out = invoke_cli("collections", env=env)
    assert out.returncode == 0, out.stdout
    from app.text import size_text

    assert f" · edge · {size_text(size)} on disk · " in out.stdout
    assert [size_text(n) for n in (999, 1834567, 999_960, 5 * 10**9)] == [
        "999 B", "1.8 MB", "1.0 MB", "5.0 GB"]

    # Held by another process (a `facet serve` that searched it): the shard is not opened,
    # its size is still said.
    with locked_by_another_process(data, "notes", opened=True):
        out = invoke_cli("collections", "--json", env=env)
    assert out.returncode == 0, out.stdout
    held = json.loads(out.stdout)[0]
    assert held["open_in"] and held["points"] is None
    assert held["disk_bytes"] == _du(folder)


def test_size_on_disk_of_local_mode_and_a_server(cache, tmp_path: Path) -> None:
    data = tmp_path / "data"
    facet = Facet(FacetSettings(data_dir=data, vector_backend="local", chunk_tokens=64,
                                chunk_overlap=8), embedders=cache)
    try:
        facet.index(_source(tmp_path / "src"), "notes")
        info = facet.collection("notes")
    finally:
        facet.close()
    assert info.disk_bytes == _du(data / "qdrant-local" / "collection" / "notes") > 0
    # A Qdrant server's size is not known here (no request is made to find out).
    from app.services.collections import disk_bytes

    assert disk_bytes(QdrantClientStore(url="http://127.0.0.1:9"), "notes") is None
