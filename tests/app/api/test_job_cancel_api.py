"""``POST /jobs/{job_id}/cancel``: an index job could not be cancelled over HTTP (DELETE was a
405, this route a 404). 200 with the job; 400 for a job that has ended or is of another
collection; 404 (``job_not_found``) for an unknown id. Real minilm, SQLite, the app in process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.api import create_app
from app.core import Facet
from tests.app.api.conftest import serving_facet
from tests.app.services.conftest import write_corpus


@pytest.fixture
def facet(minilm, tmp_path) -> Iterator[Facet]:
    facet = serving_facet(tmp_path / "data", minilm, chunk_tokens=64, chunk_overlap=8)
    yield facet
    facet.close()


@pytest.fixture
def client(facet) -> Iterator[TestClient]:
    with TestClient(create_app(facet)) as c:
        yield c


def test_cancel_a_queued_job_then_an_ended_one_an_unknown_one(facet, client, tmp_path) -> None:
    write_corpus(tmp_path / "src", 2)
    # Queued, not handed to the job thread: it waits as one behind another job would.
    queued = facet.indexing.prepare(tmp_path / "src", "c", runner="thread").job_id
    wrong = client.post(f"/jobs/{queued}/cancel", params={"collection": "other"})
    assert wrong.status_code == 400 and wrong.json()["error"]["param"] == "collection", wrong.text
    r = client.post(f"/jobs/{queued}/cancel", params={"collection": "c"})
    assert r.status_code == 200, r.text
    job = r.json()
    assert (job["id"], job["state"], job["started_at"], job["message"], job["cancel_requested"]) == (
        queued,
        "cancelled",
        None,
        "cancelled before it started; collection 'c' was made for this job and holds no indexed "
        "document: `facet delete c` (DELETE /collections/c) removes it",
        True,
    )
    assert client.get(f"/jobs/{queued}").json()["state"] == "cancelled"
    again = client.post(f"/jobs/{queued}/cancel")
    assert again.status_code == 400, again.text
    assert again.json()["error"]["message"] == (
        f"job {queued} is cancelled; only a queued or running job can be cancelled"
    )
    done = facet.index(tmp_path / "src", "c").job_id
    r = client.post(f"/jobs/{done}/cancel")
    assert r.status_code == 400 and f"job {done} is completed" in r.json()["error"]["message"]
    missing = client.post("/jobs/999999/cancel")
    assert missing.status_code == 404, missing.text
    assert missing.json()["error"]["code"] == "job_not_found"
    assert client.post(f"/jobs/{done}/cancel", params={"errors": 3}).status_code == 400


def test_the_route_is_declared(client) -> None:
    spec = client.get("/openapi.json").json()
    op = spec["paths"]["/jobs/{job_id}/cancel"]["post"]
    assert sorted(int(s) for s in op["responses"]) == [200, 400, 403, 404, 429, 500]  # 403: keyless
    assert [p["name"] for p in op["parameters"]] == ["job_id", "collection"]
