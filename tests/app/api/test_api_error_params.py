"""The error body's ``param`` for errors the application core raises (``FacetError.param``).

It was null for every domain error, even one about a single request field (an empty query, an
unknown collection, a job's source that does not exist): clients generated from /openapi.json
attach an error to a form field by ``param``, and had nothing to attach these to. The cancel
route named ``collection`` by finding the word in the message. Real minilm, SQLite, the edge
store, the app in process (TestClient).
"""

from __future__ import annotations

import json
import logging
import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core import Facet
from app.errors import BusyError, InvalidRequestError, NotFoundError
from app.jobs import run_logged
from app.services.clustering import ClusterRequest
from app.services.search import SearchRequest
from tests.app.api.conftest import serving_facet
from tests.app.services.conftest import write_corpus

COLLECTION = "c"
TEXTS = ["card lost", "card stolen", "exchange rates"]


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("params")
    write_corpus(root / "src", 4)
    (root / "notes.xyz").write_text("a file of no supported type")
    return root


@pytest.fixture(scope="module")
def facet(minilm, tree) -> Iterator[Facet]:
    facet = serving_facet(tree / "data", minilm, chunk_tokens=64, chunk_overlap=8)
    facet.index(tree / "src", COLLECTION)
    yield facet
    facet.close()


def _search(**fields) -> dict:
    return {"query": "card", "collection": COLLECTION, **fields}


def _cluster(**fields) -> dict:
    return {"instruction": "topic", "texts": TEXTS, **fields}


# (route, body, status, param): each error is about one field, which the body names.
SINGLE_FIELD = [
    ("/search", _search(query="   "), 400, "query"),
    ("/search", _search(collection="nope"), 404, "collection"),
    ("/search", _search(embedder="nope"), 404, "embedder"),
    ("/search", _search(rerank="nope"), 404, "rerank"),
    # a model served here, but not one the collection has vectors of
    ("/search", _search(embedder="backbone-mean"), 400, "embedder"),
    ("/search", _search(instruction="a" * 200_001), 413, "instruction"),
    # the edge store cannot match true/false (its StoreError carries the field)
    ("/search", _search(filters={"stars": True}), 400, "filters"),
    ("/cluster", _cluster(instruction="  "), 400, "instruction"),
    ("/cluster", _cluster(texts=["only one"]), 400, "texts"),
    ("/cluster", _cluster(k=5), 400, "k"),
    ("/cluster", _cluster(explainer="minilm"), 400, "explainer"),
    ("/cluster", _cluster(texts=None, collection="a/b"), 400, "collection"),
    ("/cluster", _cluster(texts=None, collection="nope"), 404, "collection"),
    # the edge store's refusal of true/false, through a clustering of the collection's chunks
    ("/cluster", _cluster(texts=None, collection=COLLECTION, filters={"stars": True}), 400, "filters"),
    # a search inside the cluster request: its fields as the body nests them
    ("/cluster", _cluster(texts=None, search={"query": " ", "collection": COLLECTION}), 400, "search.query"),
    ("/cluster", _cluster(texts=None, search={"query": "x", "collection": "nope"}), 404, "search.collection"),
    ("/v1/embeddings", {"model": "nope", "input": ["x"]}, 404, "model"),
    # the route's own checks of OpenAI's input, named as that API names it (an item by index)
    ("/v1/embeddings", {"model": "minilm", "input": []}, 400, "input"),
    ("/v1/embeddings", {"model": "minilm", "input": [1, 2]}, 400, "input"),  # token ids
    ("/v1/embeddings", {"model": "minilm", "input": ["x", ""]}, 400, "input[1]"),
    ("/v1/embeddings", {"model": "minilm", "input": ["x", 5]}, 400, "input[1]"),
    ("/v1/embeddings", {"model": "minilm", "input": " "}, 400, "input"),
    ("/v1/embeddings", {"model": "minilm", "input": ["x"], "dimensions": 7}, 400, "dimensions"),
    # an item of texts, as pydantic names one it refuses (["a", 5] -> texts[1])
    ("/cluster", _cluster(texts=["a", ""]), 400, "texts[1]"),
    # an instruction over the embedder's limit (200 of minilm's 256 tokens, over its 127): it
    # was null, though an unpaired surrogate in the same field named it
    ("/search", _search(instruction="word " * 200), 400, "instruction"),
    ("/cluster", _cluster(instruction="word " * 200), 400, "instruction"),
    ("/cluster", _cluster(texts=None, search={"query": "x", "collection": COLLECTION,
                                              "instruction": "word " * 200}), 400, "search.instruction"),
]


@pytest.mark.parametrize(
    ("route", "body", "status", "param"),
    SINGLE_FIELD,
    ids=[f"{r}-{p}-{i}" for i, (r, _, _, p) in enumerate(SINGLE_FIELD)],
)
def test_a_core_error_about_one_field_names_it(client, route, body, status, param) -> None:
    r = client.post(route, json=body)
    assert r.status_code == status, r.text
    assert r.json()["error"]["param"] == param, r.json()


@pytest.mark.parametrize(
    ("source", "fields", "status", "param"),
    [
        ("missing", {}, 404, "source"),
        ("notes.xyz", {}, 422, "source"),  # a file of no supported type
        ("src", {"collection": "a/b"}, 400, "collection"),
        ("src", {"chunk_tokens": 100}, 400, "chunk_tokens"),  # the collection was created with 64
        ("src", {"chunk_overlap": 3}, 400, "chunk_overlap"),
        # a new collection whose overlap is not below its chunk size (param was null)
        ("src", {"collection": "fresh", "chunk_tokens": 16, "chunk_overlap": 16}, 400, "chunk_overlap"),
    ],
)
def test_a_refused_index_job_names_its_field(client, tree, source, fields, status, param) -> None:
    body = {"source": str(tree / source), "collection": COLLECTION} | fields
    r = client.post("/jobs", json=body)
    assert r.status_code == status, r.text
    assert r.json()["error"]["param"] == param, r.json()


def test_an_unknown_collection_of_a_job_listing_names_it(client) -> None:
    r = client.get("/jobs", params={"collection": "nope"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "collection_not_found", r.text
    assert r.json()["error"]["param"] == "collection"


@pytest.mark.parametrize(
    ("method", "url", "body", "status"),
    [
        # several fields: which one to change is the client's choice
        ("post", "/cluster", _cluster(collection=COLLECTION), 400),
        ("post", "/cluster", _cluster(filters={"intent": "refund"}), 400),
        # the route's path names the collection: the resource, not a field (code says what)
        ("get", "/collections/nope", None, 404),
    ],
)
def test_an_error_about_several_fields_or_none_names_none(client, method, url, body, status) -> None:
    r = client.request(method, url, json=body)
    assert r.status_code == status, r.text
    assert r.json()["error"]["param"] is None, r.json()


def test_the_cancel_route_takes_param_from_the_error(facet, client) -> None:
    """Of another collection: ``collection``, set where the facade refuses it; ended (with or
    without the right collection): none, whatever words the message holds."""
    job = facet.jobs(COLLECTION, 1)[0].id
    other = client.post(f"/jobs/{job}/cancel", params={"collection": "other"})
    assert other.status_code == 400 and other.json()["error"]["param"] == "collection", other.text
    for params in ({}, {"collection": COLLECTION}):
        ended = client.post(f"/jobs/{job}/cancel", params=params)
        assert ended.status_code == 400 and f"job {job} is completed" in ended.text, ended.text
        assert ended.json()["error"]["param"] is None, ended.text


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"top_k": 0}, "k"),
        ({"top_k": 5000}, "k"),
        ({"mode": "fuzzy"}, "mode"),
        ({"rerank_depth": 0}, "rerank_depth"),
        ({"score_threshold": float("nan")}, "score_threshold"),
        ({"filters": {"stars": {"gte": 3}}}, "filters"),
    ],
)
def test_the_facade_names_fields_the_api_checks_first(facet, fields, param) -> None:
    """Pydantic refuses these over HTTP before the facade sees them (naming the field too);
    other edges (the Python API, the UI) get the facade's param, under the API's names."""
    with pytest.raises(InvalidRequestError) as caught:
        facet.search(SearchRequest(query="card", collection=COLLECTION, **fields))
    assert caught.value.param == param


def test_the_facade_names_a_cluster_field(facet) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        facet.cluster(ClusterRequest(instruction="topic", texts=TEXTS, max_k=1))
    assert caught.value.param == "max_k"


def test_param_is_kept_apart_from_the_message_and_pickles() -> None:
    error = InvalidRequestError("k must be from 1 to 1000, got 0", param="k")
    assert str(error) == "k must be from 1 to 1000, got 0" and error.args == (str(error),)
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.param) == (InvalidRequestError, str(error), "k")
    assert NotFoundError("gone").param is None
    busy = pickle.loads(pickle.dumps(BusyError("wait", 5.0, param="input")))
    assert (str(busy), busy.retry_after_s, busy.param) == ("wait", 5.0, "input")


@pytest.mark.parametrize(
    ("route", "body", "param", "where"),
    [
        ("/v1/embeddings", {"model": "minilm", "input": ["x", "a\ud800"]}, "input[1]", "input[1]"),
        ("/v1/embeddings", {"model": "minilm", "input": "a\ud800"}, "input", "input"),
        ("/cluster", _cluster(texts=["x", "a\ud800"]), "texts[1]", "texts[1]"),
        ("/search", _search(query="a\ud800"), "query", "the query"),
        ("/search", _search(instruction="\udfff"), "instruction", "the instruction"),
    ],
)
def test_an_unpaired_surrogate_names_its_item(client, route, body, param, where) -> None:
    """Not Unicode text (JSON can carry ``\\ud800``, UTF-8 cannot): refused naming the item in
    the message and in param, as the route's API names the field (``input``, not ``texts``)."""
    r = client.post(route, content=json.dumps(body), headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param and error["message"].startswith(where), error


def test_check_texts_names_the_field_it_is_given() -> None:
    from app.text import check_text_encodable, check_texts

    with pytest.raises(InvalidRequestError) as caught:
        check_texts(["a", " "], "input")
    assert (str(caught.value).split(" ")[0], caught.value.param) == ("input[1]", "input[1]")
    with pytest.raises(InvalidRequestError) as caught:
        check_texts(["a\ud800"])
    assert caught.value.param == "texts[0]" and "texts[0]" in str(caught.value)
    with pytest.raises(InvalidRequestError) as caught:
        check_text_encodable("a\ud800", "the query", param="query")
    assert caught.value.param == "query" and str(caught.value).startswith("the query")


def test_the_job_log_line_says_one_chunk(caplog) -> None:
    """A job's summary line counts its chunks as words do: "1 chunk", not "1 chunks"."""
    from app.services.indexing import IndexOptions, IndexReport, PreparedJob

    job = PreparedJob(job_id=7, collection=COLLECTION, source="notes.md", embedder="minilm", options=IndexOptions())
    for n, words in ((1, "1 chunk in"), (2, "2 chunks in")):
        report = IndexReport(
            job_id=7, collection=COLLECTION, embedder="minilm", state="completed", chunks_written=n, elapsed_s=0.3
        )
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="app.jobs"):
            assert run_logged(lambda _job, r=report: r, job) is report
        assert f"{words} 0.3s" in caplog.text, caplog.text


@pytest.mark.parametrize(("route", "body"), [
    ("/cluster", '{"instruction": "bad \\ud800", "texts": ["a", "b", "c"], "k": 2}'),
    ("/v1/embeddings", '{"model": "minilm", "input": ["a"], "instruction": "bad \\ud800"}'),
    ("/search", '{"query": "card", "collection": "c", "instruction": "bad \\ud800"}'),
])
def test_an_unpaired_surrogate_in_the_instruction_names_the_field(client, route, body) -> None:
    """JSON's "\\ud800" escape: /search named the field, /cluster and /v1/embeddings gave a
    null param (the encoder refused it, after the texts were read)."""
    r = client.post(route, content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == "instruction", r.json()
    assert "unpaired surrogate" in r.json()["error"]["message"]


@pytest.mark.parametrize("dimensions", [7, 0, -1])
def test_a_wrong_dimensions_is_refused_before_anything_is_encoded(
        client, facet, monkeypatch, dimensions) -> None:
    """`dimensions` was checked after every text was encoded (1,024 texts held the one model
    thread for seconds before the 400), and 0 or -1 were taken as widths."""
    calls: list[int] = []
    submit = facet.encoder.submit

    def counted(texts, **kw):
        calls.append(len(texts))
        return submit(texts, **kw)

    monkeypatch.setattr(facet.encoder, "submit", counted)
    r = client.post("/v1/embeddings", json={"model": "minilm", "input": ["card"] * 50,
                                            "dimensions": dimensions})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == "dimensions", r.json()
    assert calls == []
    ok = client.post("/v1/embeddings", json={"model": "minilm", "input": ["card"],
                                             "dimensions": 384})
    assert ok.status_code == 200 and len(ok.json()["data"][0]["embedding"]) == 384
    assert calls == [1]


def test_the_facade_checks_dimensions_before_encoding(facet, monkeypatch) -> None:
    monkeypatch.setattr(facet.encoder, "encode", lambda *a, **k: pytest.fail("encoded"))
    with pytest.raises(InvalidRequestError, match="minilm gives 384-d vectors") as e:
        facet.embed(["card"], embedder="minilm", dimensions=128)
    assert e.value.param == "dimensions"
