"""``GET /collections`` lists the embedded store's vectors that no collection of the metadata
database owns, ``"stray": true``, as ``facet collections --json`` does (they were left out: an
HTTP client saw nothing under a name that indexing then refused). Real facade over SQLite and
the edge store (conftest's ``client``, over this module's ``facet``: one small collection in
place of the BANKING77 sample, ~25 s to index), minilm."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict

import pytest

from app.core import Facet
from tests.app.api.conftest import make_stray, serving_facet
from tests.app.services.conftest import write_corpus

COLLECTION = "kept"


@pytest.fixture(scope="module")
def facet(minilm, tmp_path_factory) -> Iterator[Facet]:
    root = tmp_path_factory.mktemp("strays")
    facet = serving_facet(root / "data", minilm, ui_mount=False)  # no Gradio: ~7 s less
    write_corpus(root / "kept", 2)
    facet.index(root / "kept", COLLECTION)
    yield facet
    facet.close()


def test_get_collections_lists_stray_vectors_as_the_cli_does(facet, client, tmp_path) -> None:
    listed = client.get("/collections").json()
    assert [(c["name"], c["stray"]) for c in listed] == [(COLLECTION, False)]

    write_corpus(tmp_path / "src", 1)
    facet.index(tmp_path / "src", "lost")
    make_stray(facet, "lost")  # its record gone, its vectors kept, not held (as after a restart)
    store = facet.catalog.store
    try:
        r = client.get("/collections")
        assert r.status_code == 200, r.text
        # Counted, then let go: a server that listed it held it, and `facet delete` in another
        # process was refused while the server ran.
        assert not store.is_open("lost")
        listed = r.json()
        assert [(c["name"], c["stray"]) for c in listed] == [("lost", True), (COLLECTION, False)]
        stray = listed[0]
        assert (stray["backend"], stray["points"], stray["documents"]) == ("edge", 1, 0), stray
        # The CLI's entry (app/commands/collections.py: the facade's strays, "stray": true).
        [cli] = [asdict(i) | {"stray": True} for i in facet.stray_collections()]
        assert stray == cli
        assert listed[1] == asdict(facet.collection(COLLECTION)) | {"stray": False}
        # Declared in /openapi.json.
        spec = client.get("/openapi.json").json()
        items = spec["paths"]["/collections"]["get"]["responses"]["200"]["content"][
            "application/json"]["schema"]["items"]["$ref"].rsplit("/", 1)[-1]
        assert spec["components"]["schemas"][items]["properties"]["stray"]["type"] == "boolean"
    finally:
        facet.delete_collection("lost")  # the stray's vectors: removed as `facet delete` does
    assert [c["name"] for c in client.get("/collections").json()] == [COLLECTION]
