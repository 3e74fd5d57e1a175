"""The HTTP API in process (FastAPI TestClient) over a real store, SQLite and minilm."""

from __future__ import annotations

import base64
import json
import socket
import time
import urllib.parse

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.api import create_app

from ..served import uvicorn_in_a_thread
from .conftest import COLLECTION, serving_facet


def _vectors(payload: dict) -> np.ndarray:
    rows = []
    for item in payload["data"]:
        e = item["embedding"]
        rows.append(np.frombuffer(base64.b64decode(e), dtype="<f4") if isinstance(e, str)
                    else np.asarray(e, dtype=np.float32))
    return np.stack(rows)


def test_embeddings_float_and_base64_match_the_model(client, minilm) -> None:
    texts = ["my card was declined", "how do I top up?"]
    body = {"input": texts, "model": "minilm", "instruction": "Find the intent", "role": "query"}
    floats = client.post("/v1/embeddings", json=body)
    packed = client.post("/v1/embeddings", json=body | {"encoding_format": "base64"})
    assert floats.status_code == packed.status_code == 200, floats.text
    want = minilm.encode(texts, role="query", instruction="Find the intent")
    for response in (floats, packed):
        payload = response.json()
        assert payload["object"] == "list" and payload["model"] == "minilm"
        assert [d["index"] for d in payload["data"]] == [0, 1]
        np.testing.assert_allclose(_vectors(payload), want, atol=1e-6)
        usage = payload["usage"]
        assert usage["prompt_tokens"] == usage["total_tokens"] > len(" ".join(texts).split())
    # A single string is one input; the default role is document.
    one = client.post("/v1/embeddings", json={"input": "my card was declined", "model": "minilm"})
    np.testing.assert_allclose(_vectors(one.json())[0], minilm.encode(["my card was declined"])[0],
                               atol=1e-6)


def test_inputs_cut_at_the_models_budget_are_counted_in_a_header(client, minilm) -> None:
    """A text longer than the model reads is embedded from its start (OpenAI refuses one); only
    the server's log said so (closing note of the third session of 2026-12-07). The header
    counts them as the encoder's own reading cuts them, under the instruction too."""
    from embedders.contract import Role

    budget = minilm._tokenize.text_budget(Role.DOCUMENT, None)
    fits, long = "word " * (budget - 10), "word " * (budget + 40)
    instruction = "Represent the topic of this text for retrieving similar news articles"
    for texts, extra, want in (([fits, long, "short"], {}, 1),
                               ([fits], {"instruction": instruction}, 1),  # the instruction's room
                               (["short", fits], {}, 0)):
        r = client.post("/v1/embeddings", json={"input": texts, "model": "minilm", **extra})
        assert r.status_code == 200, r.text
        # As many as the encoder's own reading cuts.
        assert minilm._tokenize(texts, Role.DOCUMENT, extra.get("instruction")).truncated == want
        assert r.headers.get("x-facet-inputs-cut") == (str(want) if want else None), (texts, r.headers)
    # In the OpenAPI document, and exposed to a browser's script (CORS).
    spec = client.get("/openapi.json").json()["paths"]["/v1/embeddings"]["post"]["responses"]["200"]
    assert "X-Facet-Inputs-Cut" in spec["headers"], spec
    from app.api.server import cors_options

    assert "X-Facet-Inputs-Cut" in cors_options(["https://app.example"])["expose_headers"]


@pytest.mark.parametrize(("body", "status", "fragment"), [
    ({"input": [], "model": "minilm"}, 400, "input is empty"),
    ({"input": "", "model": "minilm"}, 400, "input is empty; every input must contain text"),
    ({"input": ["ok", 3], "model": "minilm"}, 400, "input[1] is int"),
    ({"input": ["ok", None], "model": "minilm"}, 400, "input[1] is NoneType"),
    ({"input": [[101, 2023]], "model": "minilm"}, 400, "token ids"),
    ({"input": {"text": "x"}, "model": "minilm"}, 400, "must be a string or a list"),
    ({"input": "x", "model": "nope"}, 404, "model 'nope' is not served here"),
    ({"input": "x", "model": "../../etc"}, 404, "is not served here"),
    ({"input": "x", "model": "minilm[instruction_weight=1]"}, 404,
     "a name with [options] is served only when FACET_API_MODELS lists it exactly"),
    ({"input": "x", "model": "minilm", "encoding_format": "binary"}, 400, "encoding_format"),
    ({"input": "x", "model": "minilm", "role": "passage"}, 400, "role"),
    ({"input": "x", "model": "minilm", "dimensions": 128}, 400, "does not shorten"),
    ({"input": "x"}, 400, "model is required"),
    ({"input": "x", "model": "minilm", "instructions": "typo"}, 400, "unknown field 'instructions'"),
    ({"input": ["x"] * 10_000, "model": "minilm"}, 413, "more than the limit of 2048"),
    ({"input": ["ok", "a \ud800"], "model": "minilm"}, 400, "input[1] holds an unpaired surrogate"),
    # Invisible characters alone: named as this route's field (it said "texts[0]", the
    # facade's, where whitespace alone said "input[0]"; the i18n review of 2026-12-06).
    ({"input": ["\u200b"], "model": "minilm"}, 400,
     "input[0] is empty (invisible characters alone); every input must contain text"),
    ({"input": [" \u3000 "], "model": "minilm"}, 400, "input[0] is empty; every input"),
    # Default-ignorable characters that are not Cf (a variation selector, the combining
    # grapheme joiner, a Hangul filler) were embedded (their verification, 2026-12-06).
    ({"input": "\ufe0f", "model": "minilm"}, 400, "input is empty (invisible characters alone)"),
    ({"input": ["ok", "\u034f\u3164"], "model": "minilm"}, 400,
     "input[1] is empty (invisible characters alone)"),
    # Control, private-use and combining characters alone: embedded as the prompt alone, 0
    # tokens, NUL's vector BEL's (the API exploration of the fourth session of 2026-12-07).
    ({"input": "\u0000", "model": "minilm"}, 400,
     "input is empty (control, private-use or combining characters alone)"),
    ({"input": ["ok", "\u0007\u0001", "x"], "model": "minilm"}, 400, "input[1] is empty (control"),
    ({"input": ["\ue000"], "model": "minilm"}, 400, "input[0] is empty (control"),
    ({"input": ["\u0301\u0302 "], "model": "minilm"}, 400, "input[0] is empty (control"),
])
def test_bad_embedding_requests_are_4xx_json(client, body, status, fragment) -> None:
    # As bytes of json.dumps: its \\u escapes carry what httpx's json= cannot encode.
    response = client.post("/v1/embeddings", content=json.dumps(body).encode(),
                           headers={"content-type": "application/json"})
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert fragment in error["message"], error
    assert error["type"]
    # The server is still serving.
    assert client.post("/v1/embeddings", json={"input": "x", "model": "minilm"}).status_code == 200


def test_malformed_and_oversized_bodies(client, facet) -> None:
    bad_json = client.post("/v1/embeddings", content=b'{"input": "x",',
                           headers={"content-type": "application/json"})
    assert bad_json.status_code == 400 and "not valid JSON" in bad_json.json()["error"]["message"]
    # Each body the JSON reader gives up on is answered with its own cause: every one was
    # "not valid JSON (too deeply nested or a number too long to read)", a Latin-1 "café" too.
    for unreadable, cause in [
            (b'{"input": ' + b"[" * 10_000 + b"]" * 10_000 + b"}", "is JSON nested too deeply"),
            (b'{"input": "x", "dimensions": ' + b"9" * 5_000 + b"}",
             "holds a number of more than 4300 digits"),
            ('{"input": "caf\xe9", "model": "minilm"}'.encode("latin-1"),
             "is not UTF-8 (byte 0xe9 at offset 14")]:
        r = client.post("/v1/embeddings", content=unreadable,
                        headers={"content-type": "application/json"})
        message = r.json()["error"]["message"]
        assert r.status_code == 400 and message.startswith(f"the request body {cause}"), message
        assert ("nested" in message) == ("nested" in cause), message
    limit = int(facet.settings.api_max_body_mb * 2**20)
    big = client.post("/v1/embeddings", content=b" " * (limit + 1),
                      headers={"content-type": "application/json"})
    assert big.status_code == 413 and "FACET_API_MAX_BODY_MB" in big.json()["error"]["message"]

    def chunks():  # no Content-Length: read up to the limit, then refused
        for _ in range(limit // 2**20 + 2):
            yield b" " * 2**20

    streamed = client.post("/v1/embeddings", content=chunks(),
                           headers={"content-type": "application/json"})
    assert streamed.status_code == 413
    missing = client.get("/no/such/route")
    assert missing.status_code == 404 and "no such endpoint" in missing.json()["error"]["message"]


def test_search_matches_the_facade_and_validates(client, facet) -> None:
    from app.services.search import SearchRequest

    body = {"query": "my card payment was declined", "collection": COLLECTION,
            "instruction": "Find messages with the same customer intent", "k": 5,
            "filters": {"intent": ["declined_card_payment", "card_not_working"]}}
    response = client.post("/search", json=body)
    assert response.status_code == 200, response.text
    payload = response.json()
    assert payload["mode"] == "dense"  # auto with an instruction: only the embedder reads it
    direct = facet.search(SearchRequest(body["query"], COLLECTION, body["instruction"], top_k=5,
                                        filters=body["filters"], group_by_document=True))
    assert [r["doc_id"] for r in payload["results"]] == [r.doc_id for r in direct.results]
    assert all(r["more_chunks"] == [] for r in payload["results"])  # grouped by default
    assert {r["metadata"]["intent"] for r in payload["results"]} <= set(body["filters"]["intent"])
    assert payload["results"][0]["score"] == pytest.approx(direct.results[0].score, abs=1e-5)
    assert set(payload["timings_ms"]) >= {"encode_query", "vector_search", "total"}

    high = client.post("/search", json=body | {"score_threshold": payload["results"][2]["score"]})
    assert len(high.json()["results"]) == 3
    # Without an instruction auto is hybrid here (the collection keeps its words), unless a
    # threshold (on the cosine scale) is set.
    plain = {k: v for k, v in body.items() if k != "instruction"}
    assert client.post("/search", json=plain).json()["mode"] == "hybrid"
    dense = client.post("/search", json=plain | {"mode": "dense"}).json()
    high = client.post("/search", json=plain | {"score_threshold": dense["results"][2]["score"]})
    assert high.json()["mode"] == "dense"
    assert [x["doc_id"] for x in high.json()["results"]] == [x["doc_id"] for x in dense["results"][:3]]

    for mode in ("dense", "lexical", "hybrid"):
        r = client.post("/search", json=body | {"mode": mode})
        assert r.status_code == 200, r.text
        direct = facet.search(SearchRequest(body["query"], COLLECTION, body["instruction"], top_k=5,
                                            filters=body["filters"], group_by_document=True, mode=mode))
        assert r.json()["mode"] == mode
        # The instruction is echoed either way; BM25 alone never read it, and says so.
        assert (r.json()["instruction"], r.json()["instruction_read"]) == (body["instruction"], mode != "lexical")
        assert [x["doc_id"] for x in r.json()["results"]] == [x.doc_id for x in direct.results]
        assert [x["score"] for x in r.json()["results"]] == pytest.approx([x.score for x in direct.results])
    reranked = client.post("/search", json=body | {"mode": "lexical", "rerank": "minilm"}).json()
    assert reranked["instruction_read"] is True  # the reranker reads it

    for bad, status, fragment in [
        (body | {"collection": "nope"}, 404, "unknown collection 'nope'"),
        (body | {"query": "  "}, 400, "query is empty"),
        (body | {"k": 0}, 400, "k:"),
        (body | {"filters": {"intent": {"$ne": 1}}}, 400, "filters"),
        (body | {"rerank": "nope"}, 404, "rerank 'nope'"),
        (body | {"mode": "fuzzy"}, 400, "mode"),
        # An unpaired surrogate was a 500 TypeError from the tokenizer; NaN returned nothing.
        (body | {"query": "card \ud800"}, 400, "the query holds an unpaired surrogate"),
        (body | {"instruction": "\udfff"}, 400, "the instruction holds an unpaired surrogate"),
        (body | {"score_threshold": float("nan")}, 400, "score_threshold must be a finite number"),
        (body | {"embedder": "backbone-mean"}, 400, "with the embedder 'backbone-mean' first"),
    ]:
        r = client.post("/search", content=json.dumps(bad).encode(),
                        headers={"content-type": "application/json"})
        assert r.status_code == status and fragment in r.json()["error"]["message"], r.text
        # The core's messages reach every edge: no CLI command or flag in them (an empty query
        # answered "e.g. facet search \"card not working\" --collection NAME").
        assert "facet " not in r.json()["error"]["message"], r.text
        assert " --" not in r.json()["error"]["message"], r.text


def test_cluster_a_collection_and_given_texts(client) -> None:
    response = client.post("/cluster", json={
        "instruction": "What does the customer want?", "collection": COLLECTION, "limit": 80,
        "filters": {"intent": ["card_arrival", "exchange_rate"]}, "k": 2})
    assert response.status_code == 200, response.text
    payload = response.json()
    n = len(payload["texts"])
    assert 2 <= n <= 80 and len(payload["labels"]) == len(payload["coordinates"]) == n
    assert sum(c["size"] for c in payload["clusters"]) == n and payload["k"] == 2
    assert all(c["name"] and c["keywords"] and c["representatives"] for c in payload["clusters"])
    chosen = client.post("/cluster", json={
        "instruction": "topic", "texts": ["card lost", "card stolen", "card missing",
                                          "rate of exchange", "exchange rates", "currency rate"]})
    assert chosen.status_code == 200 and chosen.json()["k_chosen"] is True
    for bad, fragment in [({"instruction": "x"}, "exactly one source"),
                          ({"instruction": "x", "texts": ["a"]}, "at least 2 texts"),
                          ({"instruction": "", "texts": ["a", "b"]}, "instruction must not be empty"),
                          ({"instruction": "x", "texts": ["a", "b"], "k": 3}, "more than the 2"),
                          ({"instruction": "x", "texts": ["a", "b"], "explainer": "minilm"},
                           "not an InBedder checkpoint")]:
        r = client.post("/cluster", json=bad)
        assert r.status_code == 400 and fragment in r.json()["error"]["message"], r.text


def test_jobs_run_in_the_background_and_report(client, tmp_path) -> None:
    source = tmp_path / "notes"
    source.mkdir()
    for i, text in enumerate(["The invoice is overdue.", "Book a table for two.",
                              "The train is delayed."]):
        (source / f"n{i}.txt").write_text(text)
    submitted = client.post("/jobs", json={"source": str(source), "collection": "notes"})
    assert submitted.status_code == 202, submitted.text
    job = submitted.json()
    assert job["state"] in ("queued", "running", "completed")
    assert submitted.headers["location"] == f"/jobs/{job['id']}"
    deadline = time.monotonic() + 60
    while job["state"] in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.05)
        job = client.get(f"/jobs/{job['id']}").json()
    assert job["state"] == "completed" and job["docs_indexed"] == 3
    names = [c["name"] for c in client.get("/collections").json()]
    assert {"notes", COLLECTION} <= set(names)
    assert client.get("/collections/notes").json()["documents_indexed"] == 3
    assert client.post("/search", json={"query": "late train", "collection": "notes",
                                        "k": 1}).json()["results"][0]["text"] == "The train is delayed."
    assert client.get("/jobs", params={"collection": "notes"}).json()[0]["id"] == job["id"]
    for bad, status in [({"source": str(tmp_path / "missing"), "collection": "x"}, 404),
                        ({"source": str(source), "collection": "bad/name"}, 400),
                        ({"source": str(source)}, 400)]:
        r = client.post("/jobs", json=bad)
        assert r.status_code == status and r.json()["error"]["message"], r.text
    assert client.get("/jobs/999999").status_code == 404
    assert client.get("/collections/nope").status_code == 404


def test_out_of_range_numbers_are_400_not_500(client) -> None:
    """Each of these was an HTTP 500 (an OverflowError from the database or the store, or
    k-means' own range check), and the same inputs tracebacks in the CLI."""
    huge = 99999999999999999999
    r = client.get(f"/jobs/{huge}")
    assert r.status_code == 404 and "no index job" in r.json()["error"]["message"], r.text
    r = client.post("/search", json={"query": "card", "collection": COLLECTION, "filters": {"intent": huge}})
    assert r.status_code == 400 and "outside the 64-bit integers" in r.json()["error"]["message"], r.text
    r = client.post("/cluster", json={"instruction": "x", "collection": COLLECTION, "limit": 10,
                                      "filters": {"n": [1, huge]}})
    assert r.status_code == 400 and "outside the 64-bit integers" in r.json()["error"]["message"], r.text
    for seed in (-1, 2**32):
        r = client.post("/cluster", json={"instruction": "x", "texts": ["a b", "c d", "e f"], "k": 2,
                                          "seed": seed})
        assert r.status_code == 400 and r.json()["error"]["param"] == "seed", r.text
    r = client.post("/jobs", json={"source": "/tmp", "collection": "c9", "chunk_tokens": huge})
    assert r.status_code == 400 and r.json()["error"]["param"] == "chunk_tokens", r.text
    for limit in (0, -5, 1001):
        r = client.get("/jobs", params={"limit": limit})
        assert r.status_code == 400 and "limit must be from 1 to 1000" in r.json()["error"]["message"]


def test_a_body_that_is_not_a_json_object_says_so(client) -> None:
    """A form post (curl -d without a content-type), an empty body or a JSON array answered
    ": Input should be a valid dictionary..." or " is required"."""
    form = {"content-type": "application/x-www-form-urlencoded"}
    as_json = {"content-type": "application/json"}
    for content, headers in [(b'{"model": "minilm", "input": "x"}', form), (b"", as_json),
                             (b"[1, 2]", as_json)]:
        r = client.post("/v1/embeddings", content=content, headers=headers)
        message = r.json()["error"]["message"]
        assert r.status_code == 400 and message.startswith("the request body must be a JSON object"), message


def test_health_info_and_models(client) -> None:
    assert client.get("/health").json() == {"status": "ok"}
    info = client.get("/info").json()
    assert info["encoder"] == "BatchingQueryEncoder" and "minilm" in info["loaded"]
    assert info["encoder_stats"]["texts"] > 0
    assert set(info["kept_vectors"]) == {"entries", "mb", "limit_mb", "hits", "misses"}
    assert "minilm" in [m["id"] for m in client.get("/v1/models").json()["data"]]


def test_a_model_is_retrieved_as_openai_does(client) -> None:
    """GET /v1/models/{id} (the openai client's ``models.retrieve``) answered "no such endpoint"."""
    listed = client.get("/v1/models").json()["data"]
    one = client.get("/v1/models/minilm")
    assert one.status_code == 200, one.text
    model = one.json()
    assert model == next(m for m in listed if m["id"] == "minilm")  # the list's object
    assert set(model) == {"id", "object", "created", "owned_by"} and model["object"] == "model"
    assert isinstance(model["created"], int) and model["owned_by"] == "facet"
    for name in ("text-embedding-3-small", "checkpoints/causal-eos"):  # an id may hold slashes
        r = client.get(f"/v1/models/{name}")
        error = r.json()["error"]
        assert r.status_code == 404 and error["code"] == "model_not_found", r.text
        assert error["type"] == "invalid_request_error"
        assert error["message"].startswith(f"model {name!r} is not served here; available: ")


@pytest.mark.parametrize("value", [{"gte": 3}, None, [[3]], [], {}])
def test_a_filter_value_that_cannot_match_gets_the_facades_message(client, value) -> None:
    """{"stars": {"gte": 3}} was answered "filters.stars.str: Input should be a valid string (and
    4 more problems)" where the CLI and LangChain say what a filter value may be."""
    from app.errors import InvalidRequestError
    from app.services.search import check_filters

    with pytest.raises(InvalidRequestError) as facade:
        check_filters({"stars": value})
    filters = {"stars": value}
    for path, body, param in [
            ("/search", {"query": "card", "collection": COLLECTION, "filters": filters}, "filters"),
            ("/cluster", {"instruction": "x", "collection": COLLECTION, "filters": filters},
             "filters"),
            ("/cluster", {"instruction": "x", "search": {"query": "card", "collection": COLLECTION,
                                                         "filters": filters}}, "search.filters")]:
        r = client.post(path, json=body)
        error = r.json()["error"]
        assert r.status_code == 400 and error["param"] == param, r.text
        assert error["message"] == f"{param}: {facade.value}", error


def test_the_body_limit_is_said_as_configured(minilm, tmp_path) -> None:
    """FACET_API_MAX_BODY_MB=0.01 was said as "over the limit of 0.00999928 MB"."""
    facet = serving_facet(tmp_path / "data", minilm, api_max_body_mb=0.01)
    try:
        with TestClient(create_app(facet)) as c:
            r = c.post("/v1/embeddings", content=b" " * 20_000,
                       headers={"content-type": "application/json"})
            assert r.status_code == 413, r.text
            assert r.json()["error"]["message"].startswith(
                "the request body is 20000 bytes, over the limit of 0.01 MB (10485 bytes; "
                "FACET_API_MAX_BODY_MB)"), r.text
    finally:
        facet.close()


def _schema(spec: dict, path: str, method: str, status: int) -> dict:
    """The declared schema of one response, as one JSON Schema (its references resolved in
    ``spec``'s components), strict: an object a route returns with a field its component
    does not declare fails (the components are dataclasses and models with fixed fields)."""
    import copy

    responses = spec["paths"][path][method]["responses"]
    assert str(status) in responses, f"{method.upper()} {path} answered {status}, not declared"
    components = copy.deepcopy(spec["components"])
    for component in components["schemas"].values():
        if "properties" in component:
            component.setdefault("additionalProperties", False)
    return {**responses[str(status)]["content"]["application/json"]["schema"],
            "components": components}


def _conforms(spec: dict, path: str, method: str, response) -> None:
    import jsonschema

    jsonschema.validate(response.json(), _schema(spec, path, method, response.status_code),
                        cls=jsonschema.Draft202012Validator)


def test_openapi_declares_what_the_routes_answer(client, facet, tmp_path) -> None:
    """/openapi.json declared only FastAPI's 422 {"detail": [...]} (which no request gets: a
    bad request is a 400 in the error shape, 422 is unreadable data), no other error, empty
    200 bodies and no bounds for GET /jobs' limit. Every answer below is checked against what
    the spec declares for its route and status."""
    spec = client.get("/openapi.json").json()
    assert "HTTPValidationError" not in json.dumps(spec)
    declared = {(method.upper(), path): sorted(int(s) for s in op["responses"])
                for path, ops in spec["paths"].items() for method, op in ops.items()}
    with_body = [400, 413, 500]
    encoding = [404, 422, 429, 503]
    keyless = [403]  # a page of another site, on every route but GET (no key is set here)
    assert declared == {
        ("GET", "/health"): [200, 400],  # 400: a query parameter the route does not take
        ("GET", "/ready"): [200, 400, 503],  # 503: not ready, in its own body (Readiness)
        ("GET", "/info"): [200, 400, 500],
        ("GET", "/v1/models"): [200, 400],
        ("GET", "/v1/models/{model}"): [200, 400, 404],
        ("POST", "/v1/embeddings"): sorted([200, *with_body, *encoding, *keyless]),
        ("POST", "/search"): sorted([200, *with_body, *encoding, 409, *keyless]),
        ("POST", "/cluster"): sorted([200, *with_body, *encoding, 409, *keyless]),
        ("POST", "/jobs"): sorted([202, *with_body, 404, 409, 422, 429, 503, *keyless]),
        ("POST", "/collections/{name}/uploads"): sorted([202, *with_body, 403, 404, 409, 422, 429, 503]),
        ("GET", "/jobs"): [200, 400, 404, 500],
        ("GET", "/jobs/{job_id}"): [200, 400, 404, 500],
        ("POST", "/jobs/{job_id}/cancel"): [200, 400, 403, 404, 429, 500],
        ("GET", "/collections"): [200, 400, 500, 503],
        ("GET", "/collections/{name}"): [200, 400, 404, 500, 503],
        ("GET", "/collections/{name}/documents"): [200, 400, 404, 500],
        ("DELETE", "/collections/{name}"): [200, 400, 403, 404, 409, 429, 500, 503],
        ("DELETE", "/collections/{name}/documents"): [200, 400, 403, 404, 409, 413, 429, 500, 503],
    }
    for path, ops in spec["paths"].items():
        for op in ops.values():
            for status, response in op["responses"].items():
                schema = response["content"]["application/json"]["schema"]
                if path == "/ready" and status in ("200", "503"):  # both: the checks' body
                    assert schema == {"$ref": "#/components/schemas/Readiness"}, (path, status)
                elif int(status) >= 400:
                    assert schema == {"$ref": "#/components/schemas/ErrorResponse"}, (path, status)
                elif path != "/info":  # /info: an object of the facade's figures
                    assert "$ref" in schema or "$ref" in schema.get("items", {}), (path, schema)
    # No key is set here: the scheme is declared, each keyed route's requirement optional.
    assert list(spec["components"]["securitySchemes"]) == ["FACET_API_KEY"]
    assert all(op.get("security", [{}])[0] == {} for ops in spec["paths"].values()
               for op in ops.values())
    limit = next(p for p in spec["paths"]["/jobs"]["get"]["parameters"] if p["name"] == "limit")
    assert (limit["schema"]["minimum"], limit["schema"]["maximum"]) == (1, 1000)

    search = {"query": "card declined", "collection": COLLECTION, "k": 3}
    source = tmp_path / "one.txt"
    source.write_text("The parcel arrived late.")
    unreadable = tmp_path / "data.bin"
    unreadable.write_bytes(b"\x00\x01")
    calls = [
        ("/health", "get", {}), ("/info", "get", {}), ("/v1/models", "get", {}),
        ("/v1/models/{model}", "get", {"url": "/v1/models/minilm"}),
        ("/v1/models/{model}", "get", {"url": "/v1/models/nope"}),
        ("/v1/embeddings", "post", {"json": {"input": ["a", "b"], "model": "minilm"}}),
        ("/v1/embeddings", "post", {"json": {"input": "a", "model": "minilm",
                                             "encoding_format": "base64"}}),
        ("/v1/embeddings", "post", {"json": {"input": ["a"] * 3000, "model": "minilm"}}),
        ("/search", "post", {"json": search}),
        ("/search", "post", {"json": search | {"mode": "hybrid", "group_by_document": False}}),
        ("/search", "post", {"json": search | {"k": 0}}),
        ("/search", "post", {"json": search | {"collection": "nope"}}),
        ("/cluster", "post", {"json": {"instruction": "topic", "k": 2, "texts": [
            "card lost", "card stolen", "exchange rates", "currency rate"]}}),
        ("/jobs", "post", {"json": {"source": str(source), "collection": "openapi"}}),
        ("/jobs", "post", {"json": {"source": str(unreadable), "collection": "openapi"}}),
        ("/jobs", "get", {}), ("/jobs", "get", {"params": {"limit": 0}}),
        ("/jobs/{job_id}", "get", {"url": "/jobs/1"}),
        ("/jobs/{job_id}", "get", {"url": "/jobs/x"}),
        ("/collections", "get", {}), ("/collections/{name}", "get", {"url": f"/collections/{COLLECTION}"}),
        ("/collections/{name}", "get", {"url": "/collections/nope"}),
    ]
    statuses = []
    for path, method, kwargs in calls:
        url = kwargs.pop("url", path)
        r = client.request(method, url, **kwargs)
        statuses.append(r.status_code)
        _conforms(spec, path, method, r)
    assert statuses == [200, 200, 200, 200, 404, 200, 200, 413, 200, 200, 400, 404, 200, 202, 422,
                        200, 400, 200, 400, 200, 200, 404]
    # A body over FACET_API_MAX_BODY_MB (refused before the app) has the shape too.
    big = client.post("/search", content=b" " * (int(facet.settings.api_max_body_mb * 2**20) + 1),
                      headers={"content-type": "application/json"})
    _conforms(spec, "/search", "post", big)


def test_a_locked_metadata_database_is_a_declared_429(minilm, tmp_path, monkeypatch) -> None:
    """POST /jobs answered 429 (BusyError) while another process held SQLite's write lock, but
    /openapi.json did not declare 429 for it. Reads get past the lock (WAL): they answer."""
    import sqlite3

    import indexer.metadata

    monkeypatch.setattr(indexer.metadata, "SQLITE_BUSY_TIMEOUT_S", 0.2)  # not 30 s per try
    source = tmp_path / "one.txt"
    source.write_text("The parcel arrived late.")
    facet = serving_facet(tmp_path / "data", minilm)
    try:
        with TestClient(create_app(facet)) as c:
            spec = c.get("/openapi.json").json()
            declared = spec["paths"]["/jobs"]["post"]["responses"]["429"]
            assert "metadata database" in declared["description"]
            assert "Retry-After" in declared["headers"]
            lock = sqlite3.connect(tmp_path / "data" / "facet.db", isolation_level=None)
            try:
                lock.execute("BEGIN IMMEDIATE")  # another process's write in progress
                r = c.post("/jobs", json={"source": str(source), "collection": "locked"})
                assert r.status_code == 429, r.text
                assert r.json()["error"]["code"] == "busy" and r.headers["retry-after"] == "5"
                assert "stayed locked" in r.json()["error"]["message"]
                _conforms(spec, "/jobs", "post", r)
                assert c.get("/jobs").status_code == 200
            finally:
                lock.execute("ROLLBACK")
                lock.close()
            r = c.post("/jobs", json={"source": str(source), "collection": "locked"})
            assert r.status_code == 202, r.text
            deadline = time.monotonic() + 60
            while c.get(f"/jobs/{r.json()['id']}").json()["state"] in ("queued", "running"):
                assert time.monotonic() < deadline
                time.sleep(0.05)
    finally:
        facet.close()


def test_job_routes_refuse_another_collection_and_unknown_parameters(client, tmp_path) -> None:
    """GET /jobs/ID?collection=b1 answered job ID of b2, and GET /jobs?colection=b1 (misspelt)
    every collection's jobs: both were ignored. Now a 400 naming the parameter, as `facet jobs
    ID -c b1` refuses the first and a body's unknown field is refused."""
    spec = client.get("/openapi.json").json()
    source = tmp_path / "one.txt"
    source.write_text("The parcel arrived late.")
    job = client.post("/jobs", json={"source": str(source), "collection": "jobs_b2"}).json()
    deadline = time.monotonic() + 60
    while job["state"] in ("queued", "running"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
        job = client.get(f"/jobs/{job['id']}").json()

    r = client.get(f"/jobs/{job['id']}", params={"collection": "jobs_b1"})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["message"] == (f"job {job['id']} is not of collection 'jobs_b1' "
                                            "but of 'jobs_b2'")
    assert r.json()["error"]["param"] == "collection"
    _conforms(spec, "/jobs/{job_id}", "get", r)
    r = client.get(f"/jobs/{job['id']}", params={"collection": "jobs_b2"})
    assert r.status_code == 200 and r.json()["id"] == job["id"], r.text
    assert client.get("/jobs/999999", params={"collection": "jobs_b2"}).status_code == 404
    get_job = spec["paths"]["/jobs/{job_id}"]["get"]
    assert [p["name"] for p in get_job["parameters"] if p["in"] == "query"] == ["collection", "errors", "errors_offset"]

    for method, url, path, kwargs in [
        ("get", "/jobs", "/jobs", {"params": {"colection": "jobs_b2"}}),
        ("get", f"/jobs/{job['id']}", "/jobs/{job_id}", {"params": {"colection": "jobs_b2"}}),
        ("post", "/jobs", "/jobs", {"params": {"sync": "false"},
                                    "json": {"source": str(source), "collection": "jobs_b2"}}),
    ]:
        r = client.request(method, url, **kwargs)
        assert r.status_code == 400, (url, r.text)
        error = r.json()["error"]
        name = next(iter(kwargs["params"]))
        assert error["param"] == name, error
        assert error["message"] == (f"unknown query parameter {name!r}; check its spelling "
                                    "against docs/api.md")
        _conforms(spec, path, method, r)
    assert [j["id"] for j in client.get("/jobs", params={"collection": "jobs_b2"}).json()] == [
        job["id"]]  # the refused POST queued nothing


def test_openapi_declares_the_key_when_one_is_set(tmp_path) -> None:
    """With FACET_API_KEY set, /docs had no Authorize button (no security scheme) and "Try it
    out" always got 401; nor was 401 declared."""
    from app.settings import FacetSettings

    app = create_app(settings=FacetSettings(data_dir=tmp_path / "data", api_key="s3cret",
                                            ui_mount=False))
    spec = TestClient(app).get("/openapi.json").json()  # the spec needs no key, nor the facade
    schemes = spec["components"]["securitySchemes"]
    assert len(schemes) == 1 and {**next(iter(schemes.values())), "description": ""} == {
        "type": "http", "scheme": "bearer", "description": ""}
    name = next(iter(schemes))
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            keyed = path not in ("/health", "/ready")
            assert (op.get("security") == [{name: []}]) is keyed, (method, path)
            assert ("401" in op["responses"]) is keyed, (method, path)
    assert _schema(spec, "/search", "post", 401)["$ref"].endswith("/ErrorResponse")


def test_a_key_no_client_can_send_is_refused_at_start(tmp_path) -> None:
    """A non-ASCII FACET_API_KEY started the server, which then refused everyone: httpx and the
    openai client cannot send it (UnicodeEncodeError) and curl's UTF-8 bytes were 401."""
    from app.errors import InvalidRequestError
    from app.settings import FacetSettings

    with pytest.raises(InvalidRequestError, match=r"^FACET_API_KEY ") as refused:
        create_app(settings=FacetSettings(data_dir=tmp_path / "data", api_key="kéy",
                                          ui_mount=False))
    assert "kéy" not in str(refused.value)  # the secret is not printed


@pytest.mark.parametrize("key", ["s3cret\t", " s3cret", "s3cret "])
def test_spaces_around_the_key_are_not_part_of_it(key, tmp_path) -> None:
    """Spaces around the key are dropped from the 'Authorization' header, so a key kept with
    them never matched (it was refused at start): as every setting, it is read without them."""
    from app.settings import FacetSettings

    settings = FacetSettings(data_dir=tmp_path / "data", api_key=key, ui_mount=False)
    assert settings.api_key == "s3cret"
    create_app(settings=settings)  # starts


def test_facet_serve_says_why_it_refuses_the_key(tmp_path, monkeypatch) -> None:
    """As any setting that cannot work: one line and exit 2, before anything listens."""
    import uvicorn

    from tests.app.cli_runner import invoke_cli

    monkeypatch.setattr(uvicorn, "run", lambda *_args, **_kwargs: None)  # never serve here
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = invoke_cli("serve", "--port", str(port), env={
        "FACET_API_KEY": "clé", "FACET_DATA_DIR": str(tmp_path / "data"), "FACET_UI_MOUNT": "false"})
    assert result.returncode == 2, result
    assert result.stderr.startswith("error: FACET_API_KEY holds a character that is not printable "
                                    "ASCII (character 3)"), result.stderr


def test_api_key_is_required_when_set(minilm, tmp_path) -> None:
    facet = serving_facet(tmp_path / "data", minilm, api_key="s3cret")
    try:
        with TestClient(create_app(facet)) as c:
            body = {"input": "x", "model": "minilm"}
            missing = c.post("/v1/embeddings", json=body)
            assert missing.status_code == 401 and "FACET_API_KEY" in missing.json()["error"]["message"]
            assert missing.headers["www-authenticate"] == "Bearer"
            wrong = c.post("/v1/embeddings", json=body, headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401
            odd = c.post("/v1/embeddings", json=body, headers={"Authorization": "Bearer kéy".encode()})
            assert odd.status_code == 401
            ok = c.post("/v1/embeddings", json=body, headers={"Authorization": "Bearer s3cret"})
            assert ok.status_code == 200
            assert c.get("/health").status_code == 200  # liveness needs no key
            assert c.get("/collections").status_code == 401
    finally:
        facet.close()


def test_the_model_is_echoed_as_requested_with_its_options(minilm, tmp_path) -> None:
    """A listed ``name[options]`` answered "model": "minilm", hiding which variant encoded."""
    spec = "minilm[instruction_weight=1]"
    facet = serving_facet(tmp_path / "data", minilm, api_models=["minilm", spec])
    try:
        with TestClient(create_app(facet)) as c:
            body = {"input": ["card declined"], "instruction": "Find the intent"}
            variant = c.post("/v1/embeddings", json=body | {"model": spec})
            plain = c.post("/v1/embeddings", json=body | {"model": "minilm"})
            assert (variant.json()["model"], plain.json()["model"]) == (spec, "minilm")
            assert not np.allclose(_vectors(variant.json()), _vectors(plain.json()))
            assert spec in [m["id"] for m in c.get("/v1/models").json()["data"]]
            # As the openai client asks for it: brackets percent-encoded.
            retrieved = c.get("/v1/models/" + urllib.parse.quote(spec, safe=""))
            assert retrieved.status_code == 200 and retrieved.json()["id"] == spec, retrieved.text
    finally:
        facet.close()


def test_busy_encoder_answers_429(minilm, tmp_path) -> None:
    # At most 4 texts may wait; a long request keeps the model thread busy while six 3-text
    # requests arrive together, so at most one fits in the queue. Real model and queue.
    from concurrent.futures import ThreadPoolExecutor

    facet = serving_facet(tmp_path / "data", minilm, max_pending_texts=4)
    try:
        with TestClient(create_app(facet)) as c:
            def post(texts: list[str]):
                return c.post("/v1/embeddings", json={"input": texts, "model": "minilm"})

            with ThreadPoolExecutor(7) as pool:
                slow = pool.submit(post, [" ".join(["word"] * 200)] * 32)
                deadline = time.monotonic() + 30
                while facet.encoder.in_flight != 32:  # the model thread works on it
                    assert time.monotonic() < deadline
                    time.sleep(0.005)
                small = [pool.submit(post, ["a", "b", "c"]) for _ in range(6)]
                responses = [f.result() for f in small]
                assert slow.result().status_code == 200
            statuses = [r.status_code for r in responses]
            assert 429 in statuses and 200 in statuses, statuses
            busy = next(r for r in responses if r.status_code == 429)
            assert busy.headers["retry-after"] == "1"
            assert "FACET_MAX_PENDING_TEXTS" in busy.json()["error"]["message"]
            assert post(["x"]).status_code == 200
    finally:
        facet.close()


def test_an_unexpected_error_is_a_json_500_and_the_connection_stays_open(facet, monkeypatch) -> None:
    """After any 500, uvicorn closed the keep-alive connection (Starlette re-raised the error
    after its handler answered), so the client's next request failed with a reset. A real
    uvicorn in a thread, one httpx connection."""
    import socket

    import httpx

    def boom(*_args, **_kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(facet, "collections", boom)
    with uvicorn_in_a_thread(facet) as port:
        failed = httpx.get(f"http://127.0.0.1:{port}/collections")
        assert failed.status_code == 500
        assert failed.json()["error"]["message"].startswith("internal error (RuntimeError)")
        # One raw connection, two requests: the second is answered on it (httpx's pool hides a
        # closed connection by opening another, which a client mid-request cannot).
        with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
            replies = []
            for path in ("/collections", "/health"):
                conn.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
                data = b""
                while b"\r\n\r\n" not in data or len(data) < _framed_length(data):
                    piece = conn.recv(65536)
                    if not piece:
                        break
                    data += piece
                replies.append(data.split(b"\r\n", 1)[0])
            assert replies == [b"HTTP/1.1 500 Internal Server Error", b"HTTP/1.1 200 OK"]


def _framed_length(data: bytes) -> int:
    """Bytes of one HTTP response with a Content-Length, headers included (a lower bound while
    the headers are incomplete)."""
    head, _, _ = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(head) + 4 + int(value)
    return len(head) + 4


def test_a_client_that_disconnects_cancels_its_queued_encoding(minilm, tmp_path) -> None:
    """A client that gave up (a timeout) on 512 long texts left the model thread encoding all
    of them for nobody, searches waiting behind. A real uvicorn in a thread."""
    import httpx

    facet = serving_facet(tmp_path / "data", minilm)
    try:
        with uvicorn_in_a_thread(facet) as port:
            texts = [f"{i} " + "word " * 200 for i in range(512)]
            with pytest.raises(httpx.ReadTimeout):
                httpx.post(f"http://127.0.0.1:{port}/v1/embeddings",
                           json={"input": texts, "model": "minilm"}, timeout=1.5)
            stats = facet.encoder.stats  # type: ignore[attr-defined]
            deadline = time.monotonic() + 60
            while facet.encoder.pending_texts or facet.encoder.in_flight:  # type: ignore[attr-defined]
                assert time.monotonic() < deadline, "the abandoned pieces were still being encoded"
                time.sleep(0.05)
            assert stats.cancelled_texts > 256 and stats.texts < 256, vars(stats)
    finally:
        facet.close()


def test_a_float_filter_over_http_matches(client, facet, tmp_path) -> None:
    """{"price": 6.0} was validated into the integer 6 and matched nothing (200, no results);
    {"price": 4.5} was a 400 listing four type errors."""
    path = tmp_path / "p.jsonl"
    path.write_text('{"id":"a","text":"red apple","price":6.0}\n{"id":"b","text":"green pear","price":4.5}\n')
    facet.index(path, "prices")
    for value, expected in ((6.0, ["a"]), (4.5, ["b"]), ([4.5, 6], ["a", "b"])):
        response = client.post("/search", json={"query": "fruit", "collection": "prices",
                                                "filters": {"price": value}})
        assert response.status_code == 200, response.text
        assert sorted(r["doc_id"] for r in response.json()["results"]) == expected, value



# (Over HTTP it says which of the two this server does not serve: FACET_API_MODELS unset here.)
WEAK_MINILM = ("the instruction barely steers: minilm mixes it in at 0.25 (instemb, or the same "
               "vectors at instruction_weight=1, read it in full: docs/indexing.md; this server "
               "does not serve minilm[instruction_weight=1]: FACET_API_MODELS sets what it serves)")


def test_a_collection_cut_to_the_cap_or_the_limit_is_said_in_the_note(client, minilm,
                                                                       tmp_path) -> None:
    """POST /cluster {"collection": ...} cut the collection to FACET_MAX_CLUSTER_TEXTS (or the
    limit) and its `note` was null: it now says how many of how many chunks."""
    chunks = client.get(f"/collections/{COLLECTION}").json()["chunks"]
    r = client.post("/cluster", json={"instruction": "What does the customer want?",
                                      "collection": COLLECTION, "limit": 6, "k": 2})
    assert r.status_code == 200, r.text
    assert len(r.json()["texts"]) == 6 and chunks > 6
    # (then that minilm, the embedder, reads the instruction at its weak blend)
    assert r.json()["note"] == f"clustered 6 of {chunks:,} chunks, in storage order (limit 6); {WEAK_MINILM}"
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps({"id": f"r{i}", "text": f"my card number {i} was declined"})
                              + "\n" for i in range(9)))
    facet = serving_facet(tmp_path / "data", minilm, max_cluster_texts=4)
    try:
        facet.index(source, "capped")
        with TestClient(create_app(facet)) as c:
            r = c.post("/cluster", json={"instruction": "What does the customer want?",
                                         "collection": "capped", "k": 2})
            assert r.status_code == 200, r.text
            assert len(r.json()["texts"]) == 4
            assert r.json()["note"] == ("clustered 4 of 9 chunks, in storage order "
                                        f"(FACET_MAX_CLUSTER_TEXTS caps it); {WEAK_MINILM}")
    finally:
        facet.close()


def test_a_job_with_many_errors_returns_the_first_ones_and_their_total(client, tmp_path) -> None:
    """GET /jobs/ID returned every per-document error (20,000: 2.5 MB, a second): the first
    100 unless `errors` asks for more (at most 1000) or fewer, and `errors_total` counts all."""
    spec = client.get("/openapi.json").json()
    source = tmp_path / "e.jsonl"
    source.write_text(json.dumps({"id": "ok", "text": "valid"}) + "\n" + "".join(
        json.dumps({"id": f"r{i}", "text": "  "}) + "\n" for i in range(300)))
    job = client.post("/jobs", json={"source": str(source), "collection": "errs",
                                     "embedder": "minilm"}).json()
    deadline = time.monotonic() + 120
    while job["state"] in ("queued", "running"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
        job = client.get(f"/jobs/{job['id']}", params={"errors": 0}).json()
    assert job["errors"] == [] and job["errors_total"] == 300
    r = client.get(f"/jobs/{job['id']}")
    assert r.status_code == 200, r.text
    body = r.json()
    assert len(body["errors"]) == 100 and body["errors_total"] == 300
    assert [e["document"] for e in body["errors"][:3]] == ["r0", "r1", "r2"]  # the first ones
    _conforms(spec, "/jobs/{job_id}", "get", r)
    assert len(client.get(f"/jobs/{job['id']}", params={"errors": 1000}).json()["errors"]) == 300
    assert len(client.get(f"/jobs/{job['id']}", params={"errors": 7}).json()["errors"]) == 7
    for bad in (-1, 1001):
        r = client.get(f"/jobs/{job['id']}", params={"errors": bad})
        assert r.status_code == 400 and r.json()["error"]["param"] == "errors", r.text
        assert r.json()["error"]["message"] == f"errors must be from 0 to 1000, got {bad}"
        _conforms(spec, "/jobs/{job_id}", "get", r)
    listed = client.get("/jobs", params={"collection": "errs"}).json()
    assert listed[0]["errors"] == [] and listed[0]["errors_total"] == 300
    declared = {p["name"]: p for p in spec["paths"]["/jobs/{job_id}"]["get"]["parameters"]}
    assert declared["errors"]["schema"]["maximum"] == 1000


def test_a_name_a_failed_plugin_may_have_registered_says_why_as_the_cli_does(client,
                                                                             monkeypatch) -> None:
    """The CLI's "unknown embedder" repeats a failed plugin's error (docs/plugins.md); the API's
    404 did not, and its client, who cannot see the server's start-up warning, was sent to
    FACET_API_MODELS. A registered name merely not served gets no word of plugins."""
    from embedders import registry

    why = "ModuleNotFoundError: No module named 'nonexistent_module_xyz'"
    monkeypatch.setattr(registry, "_PLUGIN_ERRORS", {"bad_import (from FACET_PLUGINS)": why})
    r = client.post("/v1/embeddings", json={"model": "bimp", "input": ["a"]})
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found", r.text
    assert r.json()["error"]["message"].endswith(
        f"; plugin bad_import (from FACET_PLUGINS) failed to load: {why}")
    clustered = client.post("/cluster", json={"texts": ["a", "b", "c"], "instruction": "x",
                                              "embedder": "bimp", "k": 2})
    assert clustered.status_code == 404 and why in clustered.text, clustered.text
    served_not = client.post("/v1/embeddings", json={"model": "minilm[instruction_weight=1]",
                                                     "input": ["a"]})
    assert served_not.status_code == 404 and "plugin" not in served_not.text, served_not.text
