"""A collection whose embedded store files cannot be read (a garbled edge_config.json, as a
restore cut short leaves it): ``POST /jobs`` and an upload answered 202 and the job failed a
second later (closing note of the third session of 2026-12-07). The server runs its jobs in
process and keeps the shard open as the job will, so it opens it at submit: a 422 naming the
damage and the way back, no job row, nothing staged. Real edge store, real minilm."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from app.api import create_app

from .conftest import serving_facet


def test_a_job_into_a_damaged_store_is_refused_at_submit(minilm, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("The lighthouse keeper logs every ship at high tide.")
    facet = serving_facet(tmp_path / "data", minilm)
    try:
        facet.index(src, "notes")
        facet.catalog.store.release("notes")  # (as after a restart: the shard not open)
        config = next((tmp_path / "data").rglob("notes/edge_config.json"))
        config.write_text("garbage{")
        (src / "b.txt").write_text("The harbour master counts the boats.")
        with TestClient(create_app(facet)) as client:
            jobs = client.get("/jobs", params={"collection": "notes"}).json()
            r = client.post("/jobs", json={"source": str(src), "collection": "notes"})
            assert r.status_code == 422, r.text
            error = r.json()["error"]
            assert error["code"] == "unreadable_data", error
            assert error["message"].startswith(
                f"collection 'notes': the vector store's files cannot be read: {config} is "
                "damaged"), error
            assert "Restore the folder" in error["message"], error
            up = client.post("/collections/notes/uploads",
                             files=[("files", ("c.txt", b"A note about tides.", "text/plain"))])
            assert up.status_code == 422 and "cannot be read" in up.text, up.text
            assert client.get("/jobs", params={"collection": "notes"}).json() == jobs
        assert not (facet.upload_folder("notes") / "c.txt").exists()
    finally:
        facet.close()
