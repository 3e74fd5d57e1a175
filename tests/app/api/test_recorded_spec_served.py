"""The API serves a collection's recorded embedder spec, as the UI does.

A collection indexed with ``minilm[instruction_weight=1]`` records that spec for its vector
``minilm``; a search naming no embedder loads it. The UI took the spec by name too (docs/ui.md),
but ``POST /search`` naming it answered 404 ("a name with [options] is served only when
FACET_API_MODELS lists it exactly"), though it would load nothing more. A spec the collection
did not record is still refused. Real minilm, real store, the app in process."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.api import create_app
from app.services.indexing import IndexOptions

from .conftest import serving_facet

SPEC = "minilm[instruction_weight=1]"


def test_a_recorded_spec_is_served_and_another_is_refused(minilm, tmp_path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "lost.txt").write_text("I lost my card yesterday and need a new one")
    (src / "rate.txt").write_text("what is the exchange rate for dollars")
    facet = serving_facet(tmp_path / "data", minilm)
    try:
        facet.index(src, "weighted", IndexOptions(embedder=SPEC))
        with TestClient(create_app(facet)) as client:
            named = client.post("/search", json={"query": "lost card", "collection": "weighted",
                                                 "embedder": SPEC})
            plain = client.post("/search", json={"query": "lost card", "collection": "weighted"})
            other = client.post("/search", json={"query": "lost card", "collection": "weighted",
                                                 "embedder": "minilm[instruction_weight=0.5]"})
            elsewhere = client.post("/search", json={"query": "lost card", "collection": "nosuch",
                                                     "embedder": SPEC})
            clustered = client.post("/cluster", json={"collection": "weighted", "embedder": SPEC,
                                                      "instruction": "What is asked?", "k": 2})
    finally:
        facet.close()
    assert named.status_code == 200, named.text
    assert plain.status_code == 200 and plain.json()["embedder_spec"] == SPEC, plain.text
    assert [r["doc_id"] for r in named.json()["results"]] == \
        [r["doc_id"] for r in plain.json()["results"]]
    assert other.status_code == 404 and other.json()["error"]["param"] == "embedder", other.text
    assert elsewhere.status_code == 404, elsewhere.text  # no collection to have recorded it
    assert clustered.status_code == 200, clustered.text
