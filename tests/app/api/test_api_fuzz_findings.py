"""What an HTTP fuzzing round of the fourth session of 2026-12-05 found (the app in process over
the conftest's served Facet: real store, SQLite, minilm): a NUL in a job's source was a 500, a
too-long one a 422 echoing 300 KB, an unpaired surrogate blamed the server's locale; a query
parameter or field named "" was "the request body must be a JSON object", one named "7" was
"[7]"; a plain body under Content-Encoding: deflate went through; a part that is no file said
"Expected UploadFile"; a blank collection in a path was told to leave the parameter out."""

from __future__ import annotations

import json

import pytest

from .conftest import COLLECTION


@pytest.fixture
def own_facet(minilm, tmp_path):  # type: ignore[no-untyped-def]
    """A facade of its own over a data folder under ``tmp_path`` (minilm served)."""
    from app.core import Facet
    from app.encoding import EmbedderCache
    from app.settings import FacetSettings

    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facet = Facet(FacetSettings(data_dir=tmp_path / "data"), embedders=cache)
    yield facet
    facet.close()


def _error(response, status: int = 400) -> dict:
    assert response.status_code == status, (response.status_code, response.text)
    return response.json()["error"]


def test_a_jobs_source_that_no_file_can_have_is_a_400_in_its_own_words(client, tmp_path) -> None:
    said = _error(client.post("/jobs", json={"source": "a\u0000b", "collection": "fz"}))
    assert said["param"] == "source" and "holds a NUL character" in said["message"], said
    raw = '{"source": "/tmp/x\\ud800", "collection": "fz"}'
    said = _error(client.post("/jobs", content=raw, headers={"content-type": "application/json"}))
    assert said["param"] == "source" and "unpaired surrogate" in said["message"], said
    assert "locale" not in said["message"]
    # One of the surrogates a file name's bad bytes become: from a client, no file's name (it
    # was "its name is not valid UTF-8; rename it").
    raw = '{"source": "/tmp/x/\\udcff", "collection": "fz"}'
    said = _error(client.post("/jobs", content=raw, headers={"content-type": "application/json"}))
    assert said["param"] == "source" and "unpaired surrogate" in said["message"], said
    assert "rename it" not in said["message"]
    for source in ("a" * 300_000, str(tmp_path / ("b" * 300))):
        response = client.post("/jobs", json={"source": source, "collection": "fz"})
        said = _error(response)
        assert said["param"] == "source" and "the source path is too long" in said["message"], said
        assert len(response.content) < 1_000, len(response.content)
    assert client.get("/collections/fz").status_code == 404  # nothing was made


@pytest.mark.parametrize(("request_args", "message", "param"), [
    (("get", "/health?="), "unknown query parameter ''", ""),  # (its param was null)
    (("get", "/jobs?7=1"), "unknown query parameter '7'", "7"),
])
def test_a_query_parameters_odd_name_is_said_as_a_query_parameter(client, request_args, message, param) -> None:
    method, url = request_args
    said = _error(getattr(client, method)(url))
    assert said["message"].startswith(message) and said["param"] == param, said
    assert "request body" not in said["message"]


def test_a_body_fields_odd_name_is_said_as_a_field(client) -> None:
    for name, shown in (("", "''"), ("7", "'7'")):
        said = _error(client.post("/search", json={"query": "card", "collection": COLLECTION, name: 1}))
        assert said["message"].startswith(f"unknown field {shown}") and said["param"] == name, said
    # A list's index is still one.
    said = _error(client.post("/v1/embeddings", json={"input": ["a", 5], "model": "minilm"}))
    assert said["param"] == "input[1]", said


@pytest.mark.parametrize("encoding", ["deflate", "br", "x-unknown", "gzip"])
def test_any_content_encoding_of_a_body_is_refused(client, encoding) -> None:
    """A plain body sent under deflate, br or an unknown encoding was searched as if plain."""
    body = json.dumps({"query": "card", "collection": COLLECTION}).encode()
    said = _error(client.post("/search", content=body, headers={
        "content-type": "application/json", "content-encoding": encoding}))
    assert said["message"] == (f"the request body is sent with Content-Encoding: {encoding}, which "
                               "this server does not decode; send it uncompressed"), said
    # A request without a body is not refused for the header.
    assert client.get("/health", headers={"content-encoding": encoding}).status_code == 200


def test_an_upload_part_that_is_no_file_is_said_so(client) -> None:
    said = _error(client.post(f"/collections/{COLLECTION}-up/uploads",
                              files={"files": (None, "notafile")}))
    assert said["message"].startswith("files[0] is not a file: each part named files must be one"), said
    assert "UploadFile" not in said["message"]


def test_a_blank_collection_in_a_path_is_an_invalid_name(client) -> None:
    for method in ("get", "delete"):
        url = "/collections/%20/documents" + ("?key=x" if method == "delete" else "")
        said = _error(getattr(client, method)(url))
        assert said["message"].startswith("invalid collection name"), said
        assert "leave the parameter out" not in said["message"]


def test_a_collection_the_store_lost_mid_search_is_said_deleted_where_its_row_is_gone(own_facet, tmp_path) -> None:
    """A search that found the collection's row, then the store's collection gone (a delete
    between the two: 4 in 48 racing searches over HTTP), answered with the store's "no
    collection 'c' in the edge store (collections: ...); create it with `facet index SOURCE
    --collection NAME`". The store's error, met after a real delete, is said as the deletion;
    with the row still there, the store's words stay (its vectors are what is missing)."""
    from indexer.errors import CollectionNotFoundError

    source = tmp_path / "src"
    source.mkdir()
    (source / "a.txt").write_text("my card was declined at the shop\n")
    own_facet.index(source, "racy")
    store_said = CollectionNotFoundError("no collection 'racy' in the edge store")
    kept = own_facet.searching._store_lost("racy", store_said)
    assert str(kept) == "no collection 'racy' in the edge store" and kept.param == "collection"
    own_facet.delete_collection("racy")
    gone = own_facet.searching._store_lost("racy", store_said)
    assert str(gone) == "unknown collection 'racy': it was deleted while it was searched", gone
    assert gone.param == "collection"


def test_a_collection_whose_vectors_vanished_mid_search_is_said_deleted(own_facet) -> None:
    """A search racing a delete read the collection's vector names as none: ``names[0]`` was an
    IndexError, a 500 (1 of 120 racing deletes). Now the search's "deleted meanwhile", which
    searches once more."""
    from app.errors import NotFoundError
    from app.services.search import SearchRequest

    with pytest.raises(NotFoundError, match="it was deleted while it was searched"):
        own_facet.searching._vector_choice(SearchRequest("q", "gone"), [], None)
