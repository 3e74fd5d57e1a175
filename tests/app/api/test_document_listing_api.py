"""``GET /collections/{name}/documents``: a page of a collection's documents in key order, the
next page's URL in a ``Link`` header (rel="next") and how many are left out in
``X-Facet-Documents-Not-Shown``, as ``GET /jobs`` pages. There was no route to list documents:
keys to remove (``DELETE /collections/{name}/documents?key=``) had to be rebuilt from the
sources or from search results. Real facade over SQLite, the edge store and minilm."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from app.core import Facet
from tests.app.api.conftest import serving_facet
from tests.app.test_document_listing import ODD, write_sources

PATH = "/collections/docs/documents"


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("doclist_api")


@pytest.fixture(scope="module")
def facet(minilm, root) -> Iterator[Facet]:
    facet = serving_facet(root / "data", minilm, ui_mount=False, cors_origins=["https://app.example"])
    facet.index(write_sources(root), "docs")
    yield facet
    facet.close()


def _follow(client: TestClient, url: str) -> tuple[list[str], list[int]]:
    """Every key of the pages from ``url`` on, following each ``Link`` rel="next"; with each
    page's ``X-Facet-Documents-Not-Shown`` (0 for the last, which has no Link)."""
    keys: list[str] = []
    left: list[int] = []
    while True:
        r = client.get(url)
        assert r.status_code == 200, r.text
        keys += [d["key"] for d in r.json()]
        link = r.headers.get("link")
        if link is None:
            assert "x-facet-documents-not-shown" not in r.headers
            left.append(0)
            return keys, left
        assert link.endswith('>; rel="next"')
        left.append(int(r.headers["x-facet-documents-not-shown"]))
        url = link[1:link.index(">")]


def test_following_link_headers_reads_every_document_once(client, facet) -> None:
    every = sorted(d.key for d in facet.documents("docs", limit=1000))
    assert len(every) == 30
    keys, left = _follow(client, f"{PATH}?limit=7")
    assert keys == every  # each once, in key order
    assert left == [23, 16, 9, 2, 0]
    whole = client.get(PATH, params={"limit": 1000})
    assert [d["key"] for d in whole.json()] == every and "link" not in whole.headers
    assert client.get(PATH, params={"offset": 30}).json() == []


def test_a_document_as_listed(client, root) -> None:
    [r2] = client.get(PATH, params={"prefix": "r2"}).json()
    assert r2 | {"updated_at": None} == {
        "key": "r2", "source": str(root / "src" / "recs.jsonl"), "title": None,
        "status": "indexed", "chunks": 1, "updated_at": None,
        "metadata": r2["metadata"], "error": None}
    assert r2["metadata"].get("lang") == "en"


def test_status_and_prefix_filter_and_the_link_keeps_them(client, root) -> None:
    [broken] = client.get(PATH, params={"status": "error"}).json()
    assert broken["key"] == str(root / "src" / "a" / "broken.pdf") and broken["error"]
    under_a = str(root / "src" / "a") + "/"
    first = client.get(PATH, params={"status": "indexed", "prefix": under_a, "limit": 5})
    assert first.headers["x-facet-documents-not-shown"] == "7"
    keys, _ = _follow(client, first.headers["link"][1:first.headers["link"].index(">")])
    keys = [d["key"] for d in first.json()] + keys
    assert len(keys) == 12 and all(k.startswith(under_a) for k in keys)
    assert str(root / "src" / "a" / ODD) in keys  # "&", "#" and " " survive the Link's URL
    assert "status=indexed" in first.headers["link"]
    # The next page is after this one's last key (a keyset page), the filters kept.
    last = first.json()[-1]["key"]
    assert f"after={quote(last, safe='')}" in first.headers["link"], first.headers["link"]
    assert "offset" not in first.headers["link"]
    after = client.get(PATH, params={"status": "indexed", "prefix": under_a, "after": last})
    assert [d["key"] for d in after.json()] == keys[5:]


@pytest.mark.parametrize(("query", "param"), [
    ({"limit": 0}, "limit"), ({"limit": 1001}, "limit"), ({"limit": "x"}, "limit"),
    ({"offset": -1}, "offset"), ({"status": "done"}, "status"), ({"page": 2}, "page"),
])
def test_bad_parameters_are_400s_naming_them(client, query, param) -> None:
    r = client.get(PATH, params=query)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


def test_an_unknown_collection_is_a_404(client) -> None:
    r = client.get("/collections/nope/documents")
    assert r.status_code == 404
    assert r.json()["error"] | {"message": ""} == {
        "message": "", "type": "not_found_error", "param": None, "code": "collection_not_found"}
    assert client.get("/collections/caf%C3%A9/documents").status_code == 400


def test_openapi_declares_the_route_and_cors_exposes_its_header(client) -> None:
    spec = client.get("/openapi.json").json()
    get = spec["paths"]["/collections/{name}/documents"]["get"]
    assert get["operationId"] == "listDocuments" and get["tags"] == ["collections"]
    assert [p["name"] for p in get["parameters"]] == ["name", "limit", "offset", "after", "status",
                                                      "prefix"]
    assert set(get["responses"]["200"]["headers"]) == {"Link", "X-Facet-Documents-Not-Shown"}
    assert {"400", "404", "500"} <= set(get["responses"])
    item = get["responses"]["200"]["content"]["application/json"]["schema"]["items"]["$ref"]
    assert item.endswith("/DocumentInfo")
    r = client.get(PATH, params={"limit": 2}, headers={"Origin": "https://app.example"})
    exposed = r.headers["access-control-expose-headers"].lower()
    assert "x-facet-documents-not-shown" in exposed and "link" in exposed


def test_a_listed_key_removes_its_document(client, root) -> None:
    odd = str(root / "src" / "a" / ODD)
    [doc] = client.get(PATH, params={"prefix": odd}).json()
    r = client.delete(PATH, params={"key": doc["key"]})
    assert r.status_code == 200, r.text
    assert client.get(PATH, params={"prefix": odd}).json() == []
