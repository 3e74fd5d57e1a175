"""``GET /collections/{name}`` answers a stray (vectors the embedded store holds that no
collection of this database owns) as ``GET /collections`` lists it, ``"stray": true`` (it was
404 for a name the listing showed), a known collection ``"stray": false``, and /openapi.json
says so; a name neither stays 404. Real facade over SQLite and the edge store, minilm."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.core import Facet
from tests.app.api.conftest import make_stray, serving_facet
from tests.app.services.conftest import write_corpus

COLLECTION = "kept"


@pytest.fixture(scope="module")
def facet(minilm, tmp_path_factory) -> Iterator[Facet]:
    root = tmp_path_factory.mktemp("stray-get")
    facet = serving_facet(root / "data", minilm, ui_mount=False)
    write_corpus(root / "kept", 1)
    facet.index(root / "kept", COLLECTION)
    write_corpus(root / "lost", 1)
    facet.index(root / "lost", "lost")
    make_stray(facet, "lost")  # its record gone, its vectors kept
    yield facet
    facet.close()


def test_get_one_collection_answers_a_stray_as_the_listing_does(facet, client) -> None:
    listed = {c["name"]: c for c in client.get("/collections").json()}
    assert listed["lost"]["stray"] is True and listed[COLLECTION]["stray"] is False

    r = client.get("/collections/lost")
    assert r.status_code == 200, r.text
    assert r.json() == listed["lost"]
    assert (r.json()["points"], r.json()["documents"]) == (1, 0)
    assert not facet.catalog.store.is_open("lost")  # counted, then let go

    r = client.get(f"/collections/{COLLECTION}")
    assert r.status_code == 200, r.text
    assert r.json() == listed[COLLECTION]

    r = client.get("/collections/nope")
    assert r.status_code == 404 and "unknown collection 'nope'" in r.text, r.text

    spec = client.get("/openapi.json").json()
    one = spec["paths"]["/collections/{name}"]["get"]
    ref = one["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    schema = spec["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    assert schema["properties"]["stray"]["type"] == "boolean"
    assert '"stray": true' in one["description"]
