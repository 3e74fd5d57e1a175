"""``DELETE /collections/{name}/documents?key=K``: remove named documents from a collection
(an erasure request), as `facet delete NAME --document KEY` does. There was no route (nor any
other way) to remove one document. 404 for an unknown collection or key (nothing removed),
409 while a job writes the collection. Real facade over SQLite and the edge store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.core import Facet
from indexer import metadata as md
from tests.app.api.conftest import serving_facet
from tests.app.services.conftest import running_job, write_corpus


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("remove")


@pytest.fixture(scope="module")
def facet(minilm, root) -> Iterator[Facet]:
    facet = serving_facet(root / "data", minilm, ui_mount=False)
    for name in ("docs", "busy"):
        write_corpus(root / name, 3)
        facet.index(root / name, name)
    yield facet
    facet.close()


def _doc_ids(client: TestClient, collection: str, query: str) -> list[str]:
    r = client.post("/search", json={"query": query, "collection": collection, "k": 10})
    assert r.status_code == 200, r.text
    return [hit["doc_id"] for hit in r.json()["results"]]


def test_named_documents_are_removed_and_a_job_records_it(client, root) -> None:
    first, second = str(root / "docs" / "doc000.txt"), str(root / "docs" / "doc001.txt")
    assert first in _doc_ids(client, "docs", "bank card note")

    r = client.delete("/collections/docs/documents", params=[("key", first), ("key", second)])

    assert r.status_code == 200, r.text
    body = r.json()
    assert [(d["key"], d["status"], d["source_exists"]) for d in body["removed"]] == [
        (first, "indexed", True), (second, "indexed", True)]
    assert body["docs_deleted"] == 2 and body["chunks_deleted"] >= 2
    assert first not in _doc_ids(client, "docs", "bank card note")
    assert client.get("/collections/docs").json()["documents"] == 1
    job = client.get(f"/jobs/{body['job_id']}").json()
    assert (job["state"], job["source"], job["docs_deleted"]) == (
        "completed", f"remove: {first} and 1 more", 2)


def test_an_unknown_key_is_a_404_and_removes_nothing(client, root) -> None:
    kept = str(root / "docs" / "doc002.txt")

    r = client.delete("/collections/docs/documents", params=[("key", kept), ("key", "nope")])

    assert r.status_code == 404, r.text
    error = r.json()["error"]
    assert (error["code"], error["param"]) == ("document_not_found", "key")
    assert "no document 'nope' in collection 'docs'; nothing was removed" in error["message"]
    assert kept in _doc_ids(client, "docs", "weather forecast note")


def test_an_unknown_collection_and_a_missing_key_are_refused(client) -> None:
    r = client.delete("/collections/nine/documents", params={"key": "x"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "collection_not_found"
    missing = client.delete("/collections/docs/documents")
    assert missing.status_code == 400
    assert missing.json()["error"]["param"] == "key"


def test_a_collection_being_written_is_a_409(facet, client, root) -> None:
    with facet.catalog.ctx.sessions() as session:
        job_id = running_job(session, md.get_collection(session, "busy"))

    r = client.delete("/collections/busy/documents", params={"key": str(root / "busy" / "doc000.txt")})

    assert r.status_code == 409, r.text
    assert f"job {job_id}" in r.json()["error"]["message"]
    assert client.get("/collections/busy").json()["documents"] == 3


def test_the_route_is_in_the_openapi_spec_with_its_schema(client) -> None:
    spec = client.get("/openapi.json").json()
    route = spec["paths"]["/collections/{name}/documents"]["delete"]
    assert route["operationId"] == "removeDocuments"
    assert {"200", "404", "409"} <= set(route["responses"])
    assert "RemovedDocuments" in spec["components"]["schemas"]
