"""JSON bodies are read strictly: a value of the wrong JSON type is a 400 naming its field, as
any other body that does not validate, never coerced (``"k": true`` searched with k=1, ``"k":
"5"`` with 5). Query parameters arrive as strings and still parse."""

from __future__ import annotations

import pytest

from tests.app.api.conftest import COLLECTION

SEARCH = {"query": "card declined", "collection": COLLECTION}
CLUSTER = {"instruction": "topic", "texts": ["a b", "c d", "e f"]}
JOB = {"source": "/nowhere", "collection": "jobs"}


@pytest.mark.parametrize(
    ("route", "body", "param"),
    [
        ("/search", SEARCH | {"k": True}, "k"),
        ("/search", SEARCH | {"k": "5"}, "k"),
        ("/search", SEARCH | {"rerank_depth": "3"}, "rerank_depth"),
        ("/search", SEARCH | {"score_threshold": "0.5"}, "score_threshold"),
        ("/search", SEARCH | {"exact": "no"}, "exact"),
        ("/search", SEARCH | {"group_by_document": 0}, "group_by_document"),
        ("/cluster", CLUSTER | {"max_k": "5"}, "max_k"),
        ("/cluster", CLUSTER | {"seed": True}, "seed"),
        ("/cluster", {"instruction": "topic", "search": SEARCH | {"k": "3"}}, "search.k"),
        ("/jobs", JOB | {"chunk_tokens": "100"}, "chunk_tokens"),
        ("/jobs", JOB | {"sync": "yes"}, "sync"),
        ("/v1/embeddings", {"input": "x", "model": "minilm", "dimensions": "384"}, "dimensions"),
    ],
)
def test_a_value_of_the_wrong_json_type_is_refused_naming_its_field(client, route, body, param) -> None:
    r = client.post(route, json=body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param and error["message"].startswith(f"{param}: "), error


def test_right_types_and_query_parameters_still_pass(client) -> None:
    # An integer where a float is asked for is a number all the same.
    r = client.post("/search", json=SEARCH | {"k": 2, "score_threshold": 0, "exact": True})
    assert r.status_code == 200, r.text
    assert len(r.json()["results"]) == 2
    # Query parameters are strings on the wire: "5" is the number 5 there.
    r = client.get("/jobs", params={"limit": "5"})
    assert r.status_code == 200, r.text
    r = client.get("/jobs/987654", params={"errors": "3"})
    assert r.status_code == 404, r.text
