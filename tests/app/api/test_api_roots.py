"""Which paths ``POST /jobs`` (and the facade) may index.

A security review: ``POST /jobs`` indexed any path the server process could read. A source
``allowed/docs/../../outside`` was walked, and a search then returned its secret text; the UI
had ``FACET_UI_ALLOWED_ROOTS``, the API nothing. ``FACET_API_ALLOWED_ROOTS`` now limits it
(``..`` folded, links resolved, a link to a file outside refused too). And the server's own data
folder (``FACET_DATA_DIR``) was accepted as a source on every edge (its store files and facet.db
failed as 36 documents): the facade refuses it now. Real minilm, SQLite, the edge store, the app
in process (TestClient).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api import create_app
from app.core import Facet
from app.errors import InvalidRequestError
from app.settings import FacetSettings
from tests.app.api.conftest import serving_facet

KEY = "roots-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
SECRET = "The vault combination is walrus seventeen."


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """allowed/docs (one note), allowed/data (the data folder), other/linked (a note and a
    link to the secret), other/outlink (a link to the outside folder), outside/secret.txt."""
    base = tmp_path_factory.mktemp("roots")
    (base / "allowed" / "docs").mkdir(parents=True)
    (base / "allowed" / "docs" / "card.txt").write_text("I lost my card yesterday.")
    (base / "outside").mkdir()
    (base / "outside" / "secret.txt").write_text(SECRET)
    (base / "other" / "linked").mkdir(parents=True)
    (base / "other" / "linked" / "ok.txt").write_text("What is the exchange rate?")
    (base / "other" / "linked" / "evil.txt").symlink_to(base / "outside" / "secret.txt")
    (base / "other" / "outlink").symlink_to(base / "outside")
    return base


@pytest.fixture(scope="module")
def facet(minilm, base) -> Iterator[Facet]:
    facet = serving_facet(base / "allowed" / "data", minilm, api_key=KEY,
                          api_allowed_roots=[base / "allowed", base / "other"])
    yield facet
    facet.close()


def _submit(client: TestClient, source: Path | str, collection: str) -> Any:
    return client.post("/jobs", json={"source": str(source), "collection": collection},
                       headers=AUTH)


def _finished(client: TestClient, job: dict[str, Any]) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while job["state"] in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.05)
        job = client.get(f"/jobs/{job['id']}", headers=AUTH).json()
    return job


def _jobs(client: TestClient) -> int:
    return len(client.get("/jobs", headers=AUTH).json())


# ------------------------------------------------------------------ FACET_API_ALLOWED_ROOTS


def test_a_dotdot_source_leading_outside_the_roots_is_refused(client, base) -> None:
    before = _jobs(client)
    r = _submit(client, f"{base}/allowed/docs/../../outside", "leak")
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == "source" and error["type"] == "invalid_request_error"
    message = error["message"]
    assert "outside the folders this server may index" in message and "\n" not in message
    assert str((base / "allowed").resolve()) in message and "FACET_API_ALLOWED_ROOTS" in message
    assert _jobs(client) == before  # no job recorded, nothing walked
    found = client.post("/search", json={"query": "vault combination", "collection": "leak"},
                        headers=AUTH)
    assert found.status_code == 404  # no such collection: the secret was never indexed


@pytest.mark.parametrize("where", ["outside", "outside/secret.txt", "other/outlink",
                                   "other/outlink/secret.txt"])
def test_paths_and_links_to_outside_the_roots_are_refused(client, base, where) -> None:
    r = _submit(client, base / where, "leak2")
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == "source"
    assert "outside the folders this server may index" in r.json()["error"]["message"]


def test_a_folder_holding_a_link_to_a_file_outside_is_refused(client, base) -> None:
    r = _submit(client, base / "other" / "linked", "leak3")
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == "source"
    assert "1 link to files outside" in error["message"] and "evil.txt" in error["message"]


def test_a_source_under_a_root_holding_the_data_folder_is_indexed_without_it(
        client, base) -> None:
    r = _submit(client, base / "allowed", "allowed")
    assert r.status_code == 202, r.text
    job = _finished(client, r.json())
    assert job["state"] == "completed" and job["docs_indexed"] == 1, job
    assert job["docs_failed"] == 0, job  # the data folder's files were not walked


@pytest.mark.parametrize("inside", ["", "cache"])
def test_the_data_folder_itself_is_refused_over_the_api(client, base, inside) -> None:
    data = base / "allowed" / "data"
    r = _submit(client, data / inside if inside else data, "own")
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == "source"
    assert str(data) in error["message"] and "FACET_DATA_DIR" in error["message"]


def test_the_roots_setting_is_parsed_like_the_ui_roots(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("FACET_API_ALLOWED_ROOTS", '["~/docs", "/srv/a"]')
    assert FacetSettings(data_dir=tmp_path / "d").api_allowed_roots == [tmp_path / "docs",
                                                                       Path("/srv/a")]
    monkeypatch.delenv("FACET_API_ALLOWED_ROOTS")
    assert FacetSettings(data_dir=tmp_path / "d").api_allowed_roots is None  # any path


def test_a_key_without_roots_warns_once_at_start(facet, caplog) -> None:
    open_settings = facet.settings.model_copy(update={"api_allowed_roots": None})
    with caplog.at_level(logging.WARNING, logger="app.api.server"):
        create_app(settings=open_settings)
        create_app(settings=facet.settings)  # roots set: no warning
        create_app(settings=open_settings.model_copy(update={"api_key": None}))  # no key
    lines = [r.getMessage() for r in caplog.records if "FACET_API_ALLOWED_ROOTS" in r.getMessage()]
    assert len(lines) == 1 and "any path" in lines[0], lines


# ------------------------------------------------------ the data folder, on every edge


@pytest.fixture(scope="module")
def open_facet(minilm, tmp_path_factory) -> Iterator[Facet]:
    """No roots (as by default): any readable path, but never the data folder."""
    base = tmp_path_factory.mktemp("open")
    (base / "data").mkdir()
    (base / "notes.txt").write_text("The train is delayed.")
    facet = serving_facet(base / "data", minilm)
    yield facet
    facet.close()


def test_the_facade_refuses_its_own_data_folder(open_facet) -> None:
    data = open_facet.settings.data_dir
    for source in (data, data / "cache", f"{data}/../data", str(data)):
        with pytest.raises(InvalidRequestError, match="FACET_DATA_DIR") as e:
            open_facet.index(source, "own")
        assert str(data) in str(e.value) and e.value.param == "source"
        with pytest.raises(InvalidRequestError, match="own data folder"):
            open_facet.submit_index(source, "own")
    assert all(c.name != "own" for c in open_facet.collections())


def test_a_collections_own_upload_folder_is_indexed_and_another_ones_refused(open_facet) -> None:
    """The UI stages uploads in ``DATA_DIR/uploads/NAME`` and indexes that folder: the one
    place inside the data folder a job may read, and only into its own collection."""
    staged = open_facet.upload_folder("up")
    staged.mkdir(parents=True)
    (staged / "a.txt").write_text("A note uploaded through the page.")
    report = open_facet.index(staged, "up")
    assert report.docs_indexed == 1 and report.docs_failed == 0
    with pytest.raises(InvalidRequestError, match="own data folder"):
        open_facet.index(staged, "other")


def test_the_data_folder_is_refused_over_an_open_api(open_facet) -> None:
    data = open_facet.settings.data_dir
    with TestClient(create_app(open_facet)) as client:
        r = client.post("/jobs", json={"source": str(data), "collection": "own"})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == "source" and str(data) in r.json()["error"]["message"]


def test_a_folder_holding_the_data_folder_is_still_indexed(open_facet) -> None:
    report = open_facet.index(open_facet.settings.data_dir.parent, "holder")
    assert report.docs_indexed == 1 and report.docs_failed == 0
