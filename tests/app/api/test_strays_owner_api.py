"""``GET /collections`` says whose a stray's vectors are where the data folder's facet.db records
them (FACET_DATABASE_URL naming another database: ``"owner"``), and ``DELETE
/collections/{name}`` refuses them, 409, with no force over HTTP: it deleted a laptop's vectors
seen under a new database. Real facade over SQLite and the edge store, minilm, two documents."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from app.api import create_app
from app.services.collections import FOLDER_DATABASE
from tests.app.api.conftest import serving_facet
from tests.app.services.conftest import write_corpus


def test_a_stray_facet_db_owns_is_listed_with_its_owner_and_not_deleted(minilm,
                                                                       tmp_path: Path) -> None:
    data = tmp_path / "data"
    laptop = serving_facet(data, minilm, ui_mount=False)
    write_corpus(tmp_path / "cars", 2)
    laptop.index(tmp_path / "cars", "cars")
    laptop.close()
    facet = serving_facet(data, minilm, ui_mount=False,
                          database_url=f"sqlite:///{tmp_path / 'elsewhere.db'}")
    try:
        with TestClient(create_app(facet)) as client:
            r = client.delete("/collections/cars")  # it deleted the laptop's vectors: 200
            assert r.status_code == 409, r.text
            assert r.json()["error"]["message"].startswith(
                "the vectors of 'cars' belong to collection 'cars' of facet.db in this data "
                "folder: unset FACET_DATABASE_URL"), r.text
            listed = client.get("/collections").json()
            assert [(c["name"], c["stray"], c["owner"]) for c in listed] == [
                ("cars", True, FOLDER_DATABASE)], listed
            assert client.get("/collections/cars").json()["owner"] == FOLDER_DATABASE
            assert client.delete("/collections/cars", params={"force": "true"}).status_code in (
                400, 409)  # no force over HTTP
            assert [c["name"] for c in client.get("/collections").json()] == ["cars"]
            # Declared in /openapi.json.
            spec = client.get("/openapi.json").json()
            props = spec["components"]["schemas"]["ListedCollection"]["properties"]
            assert "owner" in props and "store_in_use" in props
    finally:
        facet.close()
    assert (data / "qdrant-edge" / "cars").is_dir()
