"""``missing_ok`` of a removal, as `facet delete C --document KEY --missing-ok` has it: the
facade's ``Facet.remove_documents(..., missing_ok=True)`` and ``DELETE
/collections/{name}/documents?key=K&missing_ok=true`` skip the keys the collection does not
hold (listed in ``skipped_keys``) and remove the others; where none is held, nothing is
removed and no job is made. Before, neither had the option: a script retrying a removal over
HTTP after a partial success got a 404 for the keys already gone, and nothing removed. Real
facade over SQLite and the edge store (the session's minilm)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core import Facet
from app.errors import InvalidRequestError, NotFoundError
from tests.app.api.conftest import serving_facet
from tests.app.services.conftest import write_corpus


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("apiparity")


@pytest.fixture(scope="module")
def facet(minilm, root) -> Iterator[Facet]:
    facet = serving_facet(root / "data", minilm, ui_mount=False)
    for name in ("web", "lib"):
        write_corpus(root / name, 4)
        facet.index(root / name, name)
    yield facet
    facet.close()


def _doc(root: Path, collection: str, n: int) -> str:
    return str(root / collection / f"doc{n:03d}.txt")


def test_a_retry_over_http_skips_the_keys_already_gone(client, facet, root) -> None:
    first, second = _doc(root, "web", 0), _doc(root, "web", 1)
    done = client.delete("/collections/web/documents", params={"key": first})
    assert done.status_code == 200, done.text
    assert done.json()["skipped_keys"] == []  # (without missing_ok: always there, empty)

    # The retry of [first, second]: first is gone. Without missing_ok a 404, nothing removed.
    keys = [("key", first), ("key", second)]
    refused = client.delete("/collections/web/documents", params=keys)
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "document_not_found"
    assert client.get("/collections/web").json()["documents"] == 3

    r = client.delete("/collections/web/documents", params=[*keys, ("missing_ok", "true")])

    assert r.status_code == 200, r.text
    body = r.json()
    assert [d["key"] for d in body["removed"]] == [second]
    assert body["skipped_keys"] == [first] and body["docs_deleted"] == 1
    assert client.get(f"/jobs/{body['job_id']}").json()["docs_deleted"] == 1
    assert client.get("/collections/web").json()["documents"] == 2


def test_none_held_removes_nothing_and_makes_no_job(client, root) -> None:
    jobs = len(client.get("/jobs", params={"collection": "web"}).json())
    gone = [_doc(root, "web", 0), "never-there"]

    r = client.delete("/collections/web/documents",
                      params=[("key", k) for k in gone] + [("missing_ok", "1")])

    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["job_id"], body["removed"], body["docs_deleted"], body["skipped_keys"]) == (
        0, [], 0, gone)
    assert len(client.get("/jobs", params={"collection": "web"}).json()) == jobs
    # An unknown collection is still a 404, a bad value a 400 naming it.
    assert client.delete("/collections/nine/documents",
                         params={"key": "x", "missing_ok": "true"}).status_code == 404
    bad = client.delete("/collections/web/documents", params={"key": "x", "missing_ok": "maybe"})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "missing_ok"


def test_the_facade_skips_them_too(facet, root) -> None:
    kept, gone = _doc(root, "lib", 0), "nosuch.txt"
    with pytest.raises(NotFoundError):
        facet.remove_documents("lib", [kept, gone])

    report = facet.remove_documents("lib", [gone, kept], missing_ok=True)

    assert [d.key for d in report.removed] == [kept] and report.skipped_keys == [gone]
    assert report.job_id > 0 and facet.collection("lib").documents == 3
    again = facet.remove_documents("lib", [kept], missing_ok=True)
    assert (again.job_id, again.removed, again.skipped_keys) == (0, [], [kept])
    with pytest.raises(InvalidRequestError, match="missing_ok"):
        facet.remove_documents("lib", [kept], missing_ok="yes")  # type: ignore[arg-type]


def test_the_openapi_spec_declares_the_parameter_and_the_field(client) -> None:
    spec = client.get("/openapi.json").json()
    route = spec["paths"]["/collections/{name}/documents"]["delete"]
    param = next(p for p in route["parameters"] if p["name"] == "missing_ok")
    assert param["in"] == "query" and param["schema"]["type"] == "boolean"
    assert param["schema"].get("default") is False and not param.get("required")
    removed = spec["components"]["schemas"]["RemovedDocuments"]
    assert removed["properties"]["skipped_keys"]["type"] == "array"
