"""``DELETE /collections/{name}``: a running server keeps its collections open, so ``facet
delete`` beside it is refused ("send this work to it (its HTTP API or UI)"), yet the API had no
way to delete one: only the mounted UI could (a soak's 70 CLI deletes were all refused). It
deletes as ``facet delete`` does: points, metadata, jobs, uploads; a stray's vectors too; 404
for an unknown name, 409 while a job indexes it. Real facade over SQLite and the edge store."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.core import Facet
from indexer import metadata as md
from tests.app.api.conftest import make_stray, serving_facet
from tests.app.services.conftest import running_job, write_corpus


@pytest.fixture(scope="module")
def facet(minilm, tmp_path_factory) -> Iterator[Facet]:
    root = tmp_path_factory.mktemp("delete")
    facet = serving_facet(root / "data", minilm, ui_mount=False)
    for name in ("kept", "gone", "busy", "lost"):
        write_corpus(root / name, 2)
        facet.index(root / name, name)
    make_stray(facet, "lost")  # its record gone, its vectors kept
    yield facet
    facet.close()


def test_delete_removes_a_collection_its_jobs_and_uploads(facet, client) -> None:
    uploads = facet.upload_folder("gone")
    uploads.mkdir(parents=True)
    (uploads / "a.txt").write_text("an uploaded file")
    assert client.post("/search", json={"query": "doc", "collection": "gone"}).status_code == 200

    r = client.delete("/collections/gone")
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["name"], body["documents"], body["stray"]) == ("gone", 2, False)
    assert client.get("/collections/gone").status_code == 404
    assert "gone" not in [c["name"] for c in client.get("/collections").json()]
    assert client.post("/search", json={"query": "doc", "collection": "gone"}).status_code == 404
    assert client.get("/jobs", params={"collection": "gone"}).status_code == 404
    assert not uploads.exists()
    again = client.delete("/collections/gone")
    assert again.status_code == 404 and again.json()["error"]["code"] == "collection_not_found"
    assert client.get("/collections/kept").json()["documents"] == 2  # the others untouched


def test_delete_removes_a_strays_vectors(client) -> None:
    assert client.get("/collections/lost").json()["stray"] is True
    r = client.delete("/collections/lost")
    assert r.status_code == 200, r.text
    assert (r.json()["name"], r.json()["stray"]) == ("lost", True)
    assert "lost" not in [c["name"] for c in client.get("/collections").json()]


def test_a_collection_being_indexed_is_not_deleted(facet, client) -> None:
    with facet.catalog.ctx.sessions() as session:
        job_id = running_job(session, md.get_collection(session, "busy"), ttl_s=600)
    r = client.delete("/collections/busy")
    assert r.status_code == 409, r.text
    message = r.json()["error"]["message"]
    assert f"collection 'busy' is being indexed by job {job_id}" in message
    assert f"or cancel it (`facet jobs {job_id} --cancel`, POST /jobs/{job_id}/cancel)" in message
    assert client.get("/collections/busy").json()["documents"] == 2
    # Just after a cancel, it said to cancel it (the PostgreSQL exploration of the sixth session
    # of 2026-12-05).
    with facet.catalog.ctx.sessions() as session:
        md.get_job(session, job_id).cancel_requested = True
        session.commit()
    message = client.delete("/collections/busy").json()["error"]["message"]
    assert f"is being indexed by job {job_id}" in message and "--cancel" not in message
    assert message.endswith("; its cancel is requested: it stops at its next batch; delete it "
                            "then (in a few seconds)"), message


def test_a_name_that_cannot_be_a_collection_is_400_and_openapi_declares_the_route(client) -> None:
    r = client.delete("/collections/-x")
    assert r.status_code == 400 and "invalid collection name '-x'" in r.text, r.text
    spec = client.get("/openapi.json").json()
    op = spec["paths"]["/collections/{name}"]["delete"]
    assert (op["operationId"], op["tags"]) == ("deleteCollection", ["collections"])
    assert {"200", "404", "409"} <= set(op["responses"])
