"""/openapi.json as a team generating a client reads it: short operationIds and tags, the
package's version, every field the server always sends required, the request limits the server
enforces declared (and agreeing with it), null allowed where a body takes it, the bearer scheme
declared with and without a key; and an empty ``collection`` query parameter refused alike by
GET /jobs and GET /jobs/{id}. The app in process over the conftest's served facade."""

from __future__ import annotations

import re
import time

import jsonschema
import pytest
from fastapi.testclient import TestClient

import app as package
from app.api import create_app
from app.api.schemas import COLLECTION_NAME_PATTERN, MAX_COLLECTION_NAME
from app.services.search import MAX_FILTER_VALUES, MAX_QUERY_CHARS
from app.settings import FacetSettings
from indexer.store import StoreError, validate_name

from .conftest import COLLECTION

OPERATIONS = {
    ("get", "/health"): ("health", "operations"),
    ("get", "/ready"): ("ready", "operations"),
    ("get", "/info"): ("info", "operations"),
    ("get", "/v1/models"): ("listModels", "openai-compatible"),
    ("get", "/v1/models/{model}"): ("getModel", "openai-compatible"),
    ("post", "/v1/embeddings"): ("createEmbeddings", "openai-compatible"),
    ("post", "/search"): ("search", "search"),
    ("post", "/cluster"): ("cluster", "search"),
    ("post", "/jobs"): ("submitJob", "jobs"),
    ("post", "/collections/{name}/uploads"): ("uploadFiles", "jobs"),
    ("get", "/jobs"): ("listJobs", "jobs"),
    ("get", "/jobs/{job_id}"): ("getJob", "jobs"),
    ("post", "/jobs/{job_id}/cancel"): ("cancelJob", "jobs"),
    ("get", "/collections"): ("listCollections", "collections"),
    ("get", "/collections/{name}"): ("getCollection", "collections"),
    ("get", "/collections/{name}/documents"): ("listDocuments", "collections"),
    ("delete", "/collections/{name}"): ("deleteCollection", "collections"),
    ("delete", "/collections/{name}/documents"): ("removeDocuments", "collections"),
}


@pytest.fixture(scope="module")
def spec(client) -> dict:
    return client.get("/openapi.json").json()


def _component(spec: dict, name: str) -> dict:
    return spec["components"]["schemas"][name]


def _validator(spec: dict, schema: dict) -> jsonschema.Draft202012Validator:
    """``schema`` with ``spec``'s components beside it, for its references."""
    return jsonschema.Draft202012Validator({**schema, "components": spec["components"]})


def _valid(spec: dict, schema: dict, value) -> bool:
    return _validator(spec, schema).is_valid(value)


def _body(spec: dict, name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def test_operations_have_generator_friendly_ids_and_tags(spec) -> None:
    """operationIds were FastAPI's (``get_job_jobs__job_id__get``) and no route had a tag."""
    found = {(method, path): (op["operationId"], op.get("tags"))
             for path, ops in spec["paths"].items() for method, op in ops.items()}
    assert {key: (oid, tags[0] if tags else None) for key, (oid, tags) in found.items()} == OPERATIONS
    ids = [oid for oid, _ in found.values()]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[a-z][A-Za-z0-9]{1,30}", oid) for oid in ids), ids
    assert all(len(tags) == 1 for _, tags in found.values())
    assert [t["name"] for t in spec["tags"]] == ["search", "collections", "jobs",
                                                  "openai-compatible", "operations"]


def test_the_version_is_the_package_s(tmp_path, monkeypatch) -> None:
    """info.version was a hard-coded "0.1.0"."""
    settings = FacetSettings(data_dir=tmp_path / "data", ui_mount=False)
    assert TestClient(create_app(settings=settings)).get("/openapi.json").json()[
        "info"]["version"] == package.__version__
    monkeypatch.setattr(package, "__version__", "9.8.7", raising=False)
    assert TestClient(create_app(settings=settings)).get("/openapi.json").json()[
        "info"]["version"] == "9.8.7"


RESPONSE_ONLY = {
    "SearchAnswer": {"mode", "note", "instruction_read", "embedder_spec", "reranker_spec"},
    "SearchHit": {"more_chunks", "rerank_score"},
    "ClusterResponse": {"note", "max_k_tried", "embedder_spec", "encode_reused",
                        "stored_vectors_used"},
    "Cluster": {"name_count"},
    "JobInfo": {"errors", "errors_total", "cancel_requested", "sync", "runner", "host", "chunks_total",
                "chunks_done", "docs_total", "docs_total_estimated", "queued_at"},
    "ListedCollection": {"stray", "writer", "open_in", "disk_bytes", "lexical", "lexical_note",
                         "sources", "vectors_missing", "store_missing", "store_damaged"},
}


def _every_key(spec: dict, schema: dict, value, where: str) -> None:
    """Every property ``schema`` declares is in ``value``, recursively through references."""
    while "$ref" in schema:
        schema = _component(spec, schema["$ref"].rpartition("/")[2])
    if isinstance(value, list) and "items" in schema:
        for item in value:
            _every_key(spec, schema["items"], item, where)
    elif isinstance(value, dict) and "properties" in schema:
        assert set(schema["properties"]) == set(value), (where, set(schema["properties"]) ^ set(value))
        assert set(schema["required"]) == set(schema["properties"]), where
        for name, prop in schema["properties"].items():
            branches = prop.get("anyOf", [prop])
            refs = [b for b in branches if "$ref" in b or "items" in b]
            if refs and value[name] is not None:
                _every_key(spec, refs[0], value[name], f"{where}.{name}")


def test_every_field_sent_is_required(client, spec, tmp_path) -> None:
    """Fields the server always sends (SearchAnswer.note, JobInfo.errors_total...) were optional,
    so generated clients typed them ``T | undefined``. Every property of a schema only responses
    use is required, and each real answer below carries each of them."""
    for name, fields in RESPONSE_ONLY.items():
        assert fields <= set(_component(spec, name)["required"]), name
    source = tmp_path / "one.txt"
    source.write_text("The parcel arrived late.")
    job = client.post("/jobs", json={"source": str(source), "collection": "oapi_req"})
    assert job.status_code == 202, job.text
    deadline = time.monotonic() + 60
    while client.get(f"/jobs/{job.json()['id']}").json()["state"] in ("queued", "running"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    calls = [
        ("post", "/search", {"json": {"query": "card declined", "collection": COLLECTION, "k": 2,
                                      "rerank": "minilm"}}),
        ("post", "/cluster", {"json": {"instruction": "topic", "k": 2, "texts": [
            "card lost", "card stolen", "exchange rates", "currency rate"]}}),
        ("get", "/jobs", {}),
        ("get", "/jobs/{job_id}", {"url": f"/jobs/{job.json()['id']}"}),
        ("get", "/collections", {}),
        ("get", "/collections/{name}", {"url": f"/collections/{COLLECTION}"}),
        ("post", "/v1/embeddings", {"json": {"input": "a", "model": "minilm"}}),
        ("get", "/v1/models", {}), ("get", "/ready", {}), ("get", "/health", {}),
    ]
    for method, path, kwargs in calls:
        r = client.request(method, kwargs.pop("url", path), **kwargs)
        assert r.status_code == 200, r.text
        declared = spec["paths"][path][method]["responses"]["200"]["content"][
            "application/json"]["schema"]
        _validator(spec, declared).validate(r.json())
        _every_key(spec, declared, r.json(), f"{method} {path}")


def test_request_limits_are_declared_as_the_code_has_them(spec) -> None:
    search = _component(spec, "SearchBody")["properties"]
    assert search["query"]["maxLength"] == MAX_QUERY_CHARS
    assert search["query"]["minLength"] == 1 and search["query"]["pattern"] == r"\S"
    assert search["instruction"]["anyOf"][0]["maxLength"] == MAX_QUERY_CHARS
    assert search["collection"]["pattern"] == COLLECTION_NAME_PATTERN
    assert search["collection"]["maxLength"] == MAX_COLLECTION_NAME
    filters = search["filters"]["anyOf"][0]["additionalProperties"]["anyOf"]
    assert next(b for b in filters if b.get("type") == "array")["maxItems"] == MAX_FILTER_VALUES
    cluster = _component(spec, "ClusterBody")["properties"]
    texts = cluster["texts"]["anyOf"][0]
    assert (texts["minItems"], texts["maxItems"]) == (2, FacetSettings().max_cluster_texts)
    assert texts["items"]["pattern"] == r"\S"
    assert cluster["instruction"]["pattern"] == r"\S"
    assert _component(spec, "JobBody")["properties"]["source"]["pattern"] == r"\S"
    embed = _component(spec, "EmbeddingsBody")["properties"]["input"]["anyOf"]
    assert embed[1]["maxItems"] == FacetSettings().max_texts_per_call
    assert embed[0]["pattern"] == embed[1]["items"]["pattern"] == r"\S"
    k = {"$ref": "#/components/schemas/ClusterBody"}
    # 0 (chosen by silhouette), 2 and above; never 1 or below 0.
    assert [_valid(spec, k, {"instruction": "x", "k": v}) for v in (-1, 0, 1, 2, 9)] == [
        False, True, False, True, True]
    name = next(p for p in spec["paths"]["/collections/{name}"]["get"]["parameters"])
    assert name["schema"]["pattern"] == COLLECTION_NAME_PATTERN
    for path, method in (("/jobs", "get"), ("/jobs/{job_id}", "get"),
                         ("/jobs/{job_id}/cancel", "post")):
        param = next(p for p in spec["paths"][path][method]["parameters"]
                     if p["name"] == "collection")
        assert not _valid(spec, param["schema"], ""), path
        assert _valid(spec, param["schema"], COLLECTION), path


@pytest.mark.parametrize("name", ["a", "A.b-c_9", "9" * 128, "", "-a", ".a", "a b", "a/b",
                                  "é", "a" * 129])
def test_the_name_pattern_is_the_store_s(spec, name) -> None:
    """The declared pattern takes exactly the names ``indexer.store.validate_name`` takes. (Not
    asserted for "a\\n": the pattern is ECMA-262's, whose ``$`` is the end of the input, where
    the ``re.search`` jsonschema uses also matches before a final newline.)"""
    try:
        validate_name(name)
        ok = True
    except StoreError:
        ok = False
    schema = _component(spec, "SearchBody")["properties"]["collection"]
    assert _valid(spec, schema, name) is ok


def _inside_and_outside(client, spec, schema: dict, path: str, base: dict,
                        cases: list[tuple[dict, int]]) -> None:
    """Each body: the document and the server agree (a body the schema refuses is a 4xx)."""
    for change, status in cases:
        body = base | change
        r = client.post(path, json=body)
        assert r.status_code == status, (change.keys(), r.text[:300])
        assert _valid(spec, schema, body) is (status < 400), (path, list(change))


def test_the_server_agrees_with_the_declared_limits(client, spec) -> None:
    search = {"query": "card", "collection": COLLECTION, "k": 1, "mode": "lexical"}
    _inside_and_outside(client, spec, _body(spec, "SearchBody"), "/search", search, [
        ({"query": "a " * (MAX_QUERY_CHARS // 2)}, 200),
        ({"query": "a " * (MAX_QUERY_CHARS // 2) + "b"}, 413),
        ({"query": " "}, 400),
        ({"filters": {"x": list(range(MAX_FILTER_VALUES))}}, 200),
        ({"filters": {"x": list(range(MAX_FILTER_VALUES + 1))}}, 400),
        ({"collection": "-x"}, 400),
        ({"collection": "a" * (MAX_COLLECTION_NAME + 1)}, 400),
    ])
    cluster = {"instruction": "topic", "texts": ["card lost", "card stolen", "rates"]}
    _inside_and_outside(client, spec, _body(spec, "ClusterBody"), "/cluster", cluster, [
        ({"texts": ["a"]}, 400),
        ({"texts": ["a", " "]}, 400),
        ({"instruction": " "}, 400),
        ({"k": 0}, 200), ({"k": 1}, 400), ({"k": 2}, 200),
        ({"texts": ["a"] * (FacetSettings().max_cluster_texts + 1), "k": 2}, 413),
    ])
    embed = {"input": "a", "model": "minilm"}
    most = FacetSettings().max_texts_per_call
    _inside_and_outside(client, spec, _body(spec, "EmbeddingsBody"), "/v1/embeddings", embed, [
        ({"input": [" "]}, 400), ({"input": ""}, 400), ({"input": []}, 400),
        ({"input": ["a"] * (most + 1)}, 413),
    ])
    _inside_and_outside(client, spec, _body(spec, "JobBody"), "/jobs", {"collection": "x"}, [
        ({"source": " "}, 400),
    ])


@pytest.mark.parametrize(("schema", "path", "body"), [
    ("SearchBody", "/search", {"query": "card", "collection": COLLECTION, "k": None,
                               "filters": None, "exact": None, "mode": None, "instruction": None,
                               "group_by_document": None, "rerank": None}),
    ("ClusterBody", "/cluster", {"instruction": "topic", "texts": ["card lost", "rates", "fx"],
                                 "k": None, "max_k": None, "keywords": None, "members": None,
                                 "seed": None, "filters": None, "explainer": None}),
    ("EmbeddingsBody", "/v1/embeddings", {"input": "a", "model": "minilm",
                                          "encoding_format": None, "role": None,
                                          "instruction": None, "dimensions": None}),
])
def test_null_is_declared_where_a_body_takes_it(client, spec, schema, path, body) -> None:
    """docs/api.md says null for an optional field is its default (generated clients send it),
    but ``"k": null``, ``"mode": null`` were declared an integer, an enum only: a validating
    client could not send what the server takes."""
    assert client.post(path, json=body).status_code == 200
    _validator(spec, _body(spec, schema)).validate(body)
    component = _component(spec, schema)
    for name, prop in component["properties"].items():
        if name not in component["required"]:
            assert _valid(spec, prop, None), (schema, name)


def test_the_key_is_declared_with_and_without_one(tmp_path) -> None:
    """Without FACET_API_KEY the bearer scheme was not declared, so a client generated from a
    keyless dev server had no way to send a key to a keyed one."""
    for key in (None, "s3cret"):
        settings = FacetSettings(data_dir=tmp_path / "data", api_key=key, ui_mount=False)
        spec = TestClient(create_app(settings=settings)).get("/openapi.json").json()
        scheme = spec["components"]["securitySchemes"]["FACET_API_KEY"]
        assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
        assert ("started without FACET_API_KEY" in scheme["description"]) is (key is None)
        for path, ops in spec["paths"].items():
            for method, op in ops.items():
                if path in ("/health", "/ready"):
                    assert "security" not in op
                else:
                    want = [{"FACET_API_KEY": []}] if key else [{}, {"FACET_API_KEY": []}]
                    assert op["security"] == want, (method, path)


def test_the_cross_site_403_is_declared_on_every_write_route_of_a_keyless_server(client, spec, tmp_path) -> None:
    """``KeylessGuard`` answers a page of another site 403 on every route but GET/HEAD/OPTIONS;
    only the upload route declared it, and the error schema named neither its type nor its code."""
    for method, path in OPERATIONS:
        assert ("403" in spec["paths"][path][method]["responses"]) is (method != "get"), (method, path)
    r = client.post("/search", json={"query": "card", "collection": COLLECTION},
                    headers={"Origin": "https://evil.example"})
    assert r.status_code == 403, r.text
    declared = spec["paths"]["/search"]["post"]["responses"]["403"]["content"]["application/json"]["schema"]
    assert _valid(spec, declared, r.json())
    detail = _component(spec, "ErrorDetail")["properties"]
    assert r.json()["error"]["type"] == "permission_error" and "permission_error" in detail["type"]["description"]
    assert "cross_site_request (403)" in detail["code"]["description"]
    keyed = FacetSettings(data_dir=tmp_path / "data", api_key="s3cret", ui_mount=False)
    keyed_spec = TestClient(create_app(settings=keyed)).get(
        "/openapi.json", headers={"Authorization": "Bearer s3cret"}).json()
    for path, ops in keyed_spec["paths"].items():  # no guard with a key: no 403 anywhere
        assert all("403" not in op["responses"] for op in ops.values()), path


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_collection_parameter_is_the_same_400(client, tmp_path, value) -> None:
    """``GET /jobs?collection=`` answered 404 "unknown collection ''" and ``GET
    /jobs/2?collection=`` 400 "job 2 is not of collection ''"; ``POST /jobs/2/cancel?collection=``
    ignored it. A blank name is no name: the same 400 on each."""
    source = tmp_path / "one.txt"
    source.write_text("The parcel arrived late.")
    job_id = client.post("/jobs", json={"source": str(source), "collection": "oapi_blank"}).json()["id"]
    answers = [client.get("/jobs", params={"collection": value}),
               client.get(f"/jobs/{job_id}", params={"collection": value}),
               client.post(f"/jobs/{job_id}/cancel", params={"collection": value}),
               client.post(f"/jobs/{job_id}/cancel", json={"collection": value})]
    for r in answers:
        assert r.status_code == 400, r.text
        assert r.json() == {"error": {
            "message": "collection is empty: give a collection's name, or leave the parameter out",
            "type": "invalid_request_error", "param": "collection", "code": None}}
