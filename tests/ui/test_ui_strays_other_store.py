"""The Collections tab over a data folder whose vectors are not all this database's or this
store's, as `facet collections` and GET /collections show it: strays (vectors no collection of
the database in use owns, an owner's among them) were never listed, nor offered by Delete; a
collection indexed into another vector store read "missing" beside its very folder, and its
Delete toast did not say that its vectors stay there. ``POST /jobs`` into a stray's name names
the field (``param``), as /search and /cluster do. Handler-level: a real Facet over SQLite, the
edge and local stores, minilm, two-document corpora."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.core import Facet
from app.encoding import EmbedderCache
from app.services.collections import FOLDER_DATABASE
from app.settings import FacetSettings
from tests.app.services.conftest import write_corpus
from tests.ui.conftest import notes_facet


def _facet(data: Path, minilm: Any, **fields: Any) -> Facet:
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    return Facet.for_serving(FacetSettings(data_dir=data, default_embedder="minilm",
                                           ui_mount=False, **fields), embedders=cache)


def _handlers(facet: Facet, tmp_path: Path) -> Any:
    from ui.handlers import UiHandlers

    return UiHandlers(facet, facet.settings, export_dir=tmp_path / "exports")


@pytest.fixture
def toasts(monkeypatch) -> list[str]:  # type: ignore[no-untyped-def]
    """The messages of the page's ``gr.Info`` toasts."""
    gr = pytest.importorskip("gradio")
    said: list[str] = []
    monkeypatch.setattr(gr, "Info", lambda message, *a, **k: said.append(str(message)))
    return said


def _refusal(call: Any, *args: Any) -> str:
    import gradio as gr

    with pytest.raises(gr.Error) as info:
        call(*args)
    return str(info.value.message)


def test_a_collection_of_another_store_says_where_and_its_delete_says_its_vectors_stay(
        minilm, tmp_path: Path, toasts: list[str]) -> None:
    from ui.render import COLLECTION_COLUMNS

    notes_facet(tmp_path, minilm).close()  # 'notes', indexed into the edge store
    facet = _facet(tmp_path / "data", minilm, vector_backend="local")
    try:
        handlers = _handlers(facet, tmp_path)
        rows, _jobs = handlers.collections()
        [row] = [r for r in rows if r[0] == "notes"]
        points = row[COLLECTION_COLUMNS.index("points")]
        assert points == "in another store: the embedded store (qdrant-edge/notes)", row
        _collections, _jobs, confirm = handlers.delete_collection("notes", "notes")
        assert confirm == ""
    finally:
        facet.close()
    [said] = toasts
    assert said.startswith("Deleted notes: 6 documents, 6 chunks. Its vectors stay in the "
                           "embedded store (qdrant-edge/notes), the store it was indexed into"), said
    assert "(docs/deploy.md)" in said, said
    assert (tmp_path / "data" / "qdrant-edge" / "notes").is_dir()  # not this store's to delete


def test_strays_are_listed_and_deletable_and_an_owned_one_is_refused(
        minilm, tmp_path: Path, toasts: list[str]) -> None:
    """'cars': a collection of the data folder's facet.db; 'bikes': vectors of a database
    neither facet.db nor the one in use is (a true stray)."""
    from fastapi.testclient import TestClient

    from app.api import create_app
    from ui.render import COLLECTION_COLUMNS

    data = tmp_path / "data"
    write_corpus(tmp_path / "cars", 2)
    write_corpus(tmp_path / "bikes", 2)
    laptop = _facet(data, minilm)
    laptop.index(tmp_path / "cars", "cars")
    laptop.close()
    third = _facet(data, minilm, database_url=f"sqlite:///{tmp_path / 'third.db'}")
    third.index(tmp_path / "bikes", "bikes")
    third.close()
    facet = _facet(data, minilm, database_url=f"sqlite:///{tmp_path / 'elsewhere.db'}")
    try:
        handlers = _handlers(facet, tmp_path)
        rows, _jobs = handlers.collections()
        assert [r[0] for r in rows] == ["bikes", "cars"], rows  # strays first, as the CLI
        bikes, cars = rows
        documents = COLLECTION_COLUMNS.index("documents")
        assert bikes[documents].startswith("vectors only"), bikes
        assert "Delete removes them" in bikes[documents], bikes
        assert cars[documents].startswith(
            f"vectors only, of collection 'cars' of {FOLDER_DATABASE}, not of the database "
            "FACET_DATABASE_URL names: unset FACET_DATABASE_URL to use them"), cars
        assert bikes[COLLECTION_COLUMNS.index("points")] == 2, bikes
        assert bikes[COLLECTION_COLUMNS.index("on disk")], bikes
        assert bikes[COLLECTION_COLUMNS.index("embedders")] == "minilm (384-d)", bikes
        # The Delete picker offers them (the fifth picker); the search pickers do not.
        search, _compare, _cluster, _index, delete, _folders = handlers.refresh_pickers(
            None, None, None, None, "cars")
        assert delete["choices"] == ["bikes", "cars"] and delete["value"] == "cars", delete
        assert search["choices"] == [], search
        refused = _refusal(handlers.delete_collection, "cars", "cars")
        assert refused.startswith("the vectors of 'cars' belong to collection 'cars' of "
                                  f"{FOLDER_DATABASE}"), refused
        # POST /jobs into a stray's name: 409 naming the field, as /search and /cluster do.
        with TestClient(create_app(facet)) as client:
            for name in ("cars", "bikes"):
                r = client.post("/jobs", json={"source": str(tmp_path / name),
                                               "collection": name})
                assert r.status_code == 409, r.text
                assert r.json()["error"]["param"] == "collection", r.text
        handlers.delete_collection("bikes", "bikes")
        assert [r[0] for r in handlers.collections()[0]] == ["cars"]
    finally:
        facet.close()
    assert toasts == ["Deleted the vectors of bikes (2 points), which no collection of this "
                      "database owned."], toasts
    assert (data / "qdrant-edge" / "cars").is_dir() and not (data / "qdrant-edge" / "bikes").exists()
