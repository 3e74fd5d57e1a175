"""The HTTP API against docs/api.md: a cancel's JSON body, ``FACET_API_MODELS`` checked at
start, ``model_not_found`` naming its field, integer parameters in digits only, long names not
echoed whole, and a collection of nothing searchable said so. Real minilm, SQLite, the app in
process."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.api import create_app
from app.core import Facet
from app.errors import InvalidRequestError
from app.services.indexing import IndexOptions
from app.settings import FacetSettings
from tests.app.api.conftest import serving_facet
from tests.app.services.conftest import write_corpus


@pytest.fixture(scope="module")
def facet(minilm, tmp_path_factory) -> Iterator[Facet]:
    facet = serving_facet(tmp_path_factory.mktemp("apidocs") / "data", minilm)
    yield facet
    facet.close()


# ``client`` is conftest's, over this module's ``facet`` (one without the sample collection).


def _error(r) -> dict:
    return r.json()["error"]


def test_cancel_reads_collection_from_a_json_body(facet, client, tmp_path) -> None:
    write_corpus(tmp_path / "src", 1)
    queued = facet.indexing.prepare(tmp_path / "src", "c", runner="thread").job_id
    other = client.post(f"/jobs/{queued}/cancel", json={"collection": "other"})
    assert other.status_code == 400 and _error(other)["param"] == "collection", other.text
    typo = client.post(f"/jobs/{queued}/cancel", json={"colection": 1})
    assert typo.status_code == 400 and _error(typo)["param"] == "colection", typo.text
    assert "unknown field 'colection'" in _error(typo)["message"]
    both = client.post(f"/jobs/{queued}/cancel", params={"collection": "other"},
                       json={"collection": "c"})
    assert both.status_code == 400 and _error(both)["param"] == "collection", both.text
    r = client.post(f"/jobs/{queued}/cancel", json={"collection": "c"})
    assert r.status_code == 200 and r.json()["state"] == "cancelled", r.text


def test_api_models_naming_no_embedder_are_refused_at_start(tmp_path) -> None:
    settings = FacetSettings(data_dir=tmp_path / "data",
                             api_models=["nope", "minilm[instruction_weight=1]"])
    with pytest.raises(InvalidRequestError, match="FACET_API_MODELS names 'nope'"):
        create_app(settings=settings)
    # Real names (options too) pass, no weights loaded.
    create_app(settings=settings.model_copy(update={"api_models": ["minilm[instruction_weight=1]"]}))


def test_model_not_found_from_the_facade_names_its_field(minilm, tmp_path) -> None:
    # "nope" is served (the default embedder is in the list) but does not exist: the facade's
    # UnknownModelError, whose param was null.
    facet = serving_facet(tmp_path / "data", minilm, default_embedder="nope")
    write_corpus(tmp_path / "src", 1)
    facet.index(tmp_path / "src", "c", IndexOptions(embedder="minilm"))
    try:
        with TestClient(create_app(facet)) as client:
            cases = [("/v1/embeddings", {"model": "nope", "input": "x"}, "model"),
                     ("/search", {"query": "x", "collection": "c", "embedder": "nope"}, "embedder"),
                     ("/search", {"query": "x", "collection": "c", "embedder": "minilm",
                                  "rerank": "nope"}, "rerank")]
            for route, body, param in cases:
                r = client.post(route, json=body)
                assert r.status_code == 404 and _error(r)["code"] == "model_not_found", r.text
                assert _error(r)["param"] == param, (route, body, r.text)
    finally:
        facet.close()


@pytest.mark.parametrize(("method", "url", "param"), [
    ("GET", "/jobs?limit=5.0", "limit"), ("GET", "/jobs?limit=%2B2", "limit"),
    ("GET", "/jobs?limit=%202", "limit"), ("GET", "/jobs?limit=2_0", "limit"),
    ("GET", "/jobs?limit=1e2", "limit"), ("GET", "/jobs/3.0", "job_id"),
    ("GET", "/jobs/+3", "job_id"), ("POST", "/jobs/3.0/cancel", "job_id"),
    ("GET", "/jobs/1?errors=1.0", "errors")])
def test_integer_parameters_take_digits_only(client, method, url, param) -> None:
    r = client.request(method, url)
    assert r.status_code == 400 and _error(r)["param"] == param, r.text
    assert "whole number written in digits" in _error(r)["message"], r.text


def test_negative_and_plain_integers_still_parse(client) -> None:
    r = client.get("/jobs?limit=-1")
    assert r.status_code == 400 and "limit must be from 1" in _error(r)["message"], r.text
    assert client.get("/jobs?limit=5").status_code == 200


@pytest.mark.parametrize(("method", "url", "body", "param"), [
    ("POST", "/search", {"query": "x", "collection": "n" * 200_001}, "collection"),
    ("GET", "/jobs?collection=" + "n" * 60_000, None, "collection"),
    # The path names the resource: param null, as for any name that is none (it was "name").
    ("GET", "/collections/" + "n" * 60_000, None, None),
    ("POST", "/jobs/1/cancel?collection=" + "n" * 60_000, None, "collection")])
def test_a_long_collection_name_is_refused_without_echoing_it(client, method, url, body,
                                                              param) -> None:
    r = client.request(method, url, json=body)
    assert r.status_code == 400 and _error(r)["param"] == param, r.text[:300]
    assert len(r.content) < 1000, len(r.content)


def test_a_long_name_in_a_message_is_cut(client) -> None:
    r = client.get("/v1/models/" + "m" * 5000)
    assert r.status_code == 404 and _error(r)["code"] == "model_not_found"
    assert len(r.content) < 2000, len(r.content)
    assert f"'{'m' * 200}…' (5,000 characters)" in _error(r)["message"]


def test_a_collection_of_nothing_searchable_is_said(client, tmp_path) -> None:
    (tmp_path / "empty").mkdir()
    job = client.post("/jobs", json={"source": str(tmp_path / "empty"), "collection": "hollow"})
    assert job.status_code == 202, job.text
    for _ in range(200):
        state = client.get(f"/jobs/{job.json()['id']}").json()["state"]
        if state not in ("queued", "running"):
            break
        time.sleep(0.05)
    r = client.post("/search", json={"query": "card", "collection": "hollow"})
    assert r.status_code == 200 and r.json()["results"] == [], r.text
    note = r.json()["note"] or ""
    assert note.startswith("the collection holds nothing searchable: 0 documents, none indexed "
                           f"(job {job.json()['id']}: nothing to index"), note
    r = client.post("/cluster", json={"instruction": "topic", "collection": "hollow"})
    assert r.status_code == 400 and _error(r)["param"] == "collection", r.text
    assert "collection 'hollow' holds nothing searchable" in _error(r)["message"], r.text


def test_serve_exits_2_for_an_unknown_api_model(tmp_path) -> None:
    import socket
    from unittest import mock

    from tests.app.cli_runner import invoke_cli

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Never listening: the refusal comes before uvicorn (it served "nope" before).
    with mock.patch("uvicorn.run", side_effect=AssertionError("the server started")):
        result = invoke_cli("serve", "--port", str(port), env={
            "FACET_DATA_DIR": str(tmp_path / "data"),
            "FACET_API_MODELS": '["nope", "minilm[instruction_weight=1]"]'})
    assert result.returncode == 2, result
    assert "FACET_API_MODELS names 'nope'" in result.stderr, result.stderr


def test_an_apostrophe_after_a_quoted_name_is_not_cut_as_a_name() -> None:
    """``cut_names`` read the text from the closing quote of 'two' to the apostrophe of "app's"
    as one quoted name over 200 characters: every 409 about a collection open in another
    process read "... from a web a…' (202 characters)s several workers"."""
    from app.api.errors import cut_names
    from indexer.store import _busy_message

    # (A `facet index`'s hold: a worker's is now worded for workers, without the apostrophe.)
    message = _busy_message("two", {"pid": 26078, "host": "vm", "command": "facet index"})
    assert "app's several workers" in message
    assert cut_names(message) == message
    long = "x" * 5000
    assert cut_names(f"no collection '{long}': it's gone") == \
        f"no collection '{'x' * 200}…' (5,000 characters): it's gone"
    assert cut_names(f'name "{long}" and the user\'s note') == \
        f'name "{"x" * 200}…" (5,000 characters) and the user\'s note'
