"""The JSON edges refuse the filters the CLI refuses (``parse_filters``): an empty key and a key
ending in a comparison. Before, ``facet search x -c C -f =t1`` exited 2 "has an empty key" and
``-f "year>=2019"`` was refused as a comparison, but ``{"filters": {"": "t1"}}`` and
``{"year>=": 2019}`` through POST /search or ``Facet.search`` were a 200 with 0 results and the
note "no document has a field ''" ("... 'year>='"): ``check_filters`` had no empty-key check and
tested the key's end against "<", ">" and "!" only. A plain key and a dotted one still match."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api import create_app
from app.core import Facet
from app.errors import InvalidRequestError
from app.services.search import COMPARISON_REFUSAL, SearchRequest, check_filters, parse_filters
from tests.app.api.conftest import serving_facet

COLLECTION = "tops"
RECORDS = [
    {"id": "t1", "text": "My money top-up failed again", "intent": "top_up_failed", "geo.lat": 51},
    {"id": "t2", "text": "How do I top up my card with money", "intent": "top_up_by_card",
     "geo.lat": 48},
    {"id": "t3", "text": "The exchange rate was wrong", "intent": "exchange_rate", "geo.lat": 40},
]
# (a JSON filter, the CLI item parse_filters refuses with the same meaning, the words)
REFUSED = [
    ({"": "t1"}, "=t1", "has an empty key"),
    ({"  ": "t1"}, " =t1", "has an empty key"),
    ({"year>=": 2019}, "year>=2019", COMPARISON_REFUSAL),
    ({"x<=": 1}, "x<=1", COMPARISON_REFUSAL),
    ({"x!=": "a"}, "x!=a", COMPARISON_REFUSAL),
    ({"year >= ": 2019}, "year >= 2019", COMPARISON_REFUSAL),
]
IDS = ["empty", "blank", "ge", "le", "ne", "ge-spaced"]


@pytest.fixture(scope="module")
def facet(minilm, tmp_path_factory) -> Iterator[Facet]:
    base = tmp_path_factory.mktemp("filterparity")
    source = base / "x.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    facet = serving_facet(base / "data", minilm)
    facet.index(source, COLLECTION)
    yield facet
    facet.close()


@pytest.fixture(scope="module")
def client(facet) -> Iterator[TestClient]:
    with TestClient(create_app(facet)) as c:
        yield c


@pytest.mark.parametrize(("filters", "item", "words"), REFUSED, ids=IDS)
def test_check_filters_refuses_what_parse_filters_refuses(filters: dict[str, Any], item: str,
                                                          words: str) -> None:
    with pytest.raises(InvalidRequestError) as cli:
        parse_filters([item])
    with pytest.raises(InvalidRequestError) as api:
        check_filters(filters)
    assert words in str(cli.value) and words in str(api.value)
    assert api.value.param == cli.value.param == "filters"


@pytest.mark.parametrize(("filters", "item", "words"), REFUSED, ids=IDS)
def test_facet_search_refuses_them(facet, filters: dict[str, Any], item: str, words: str) -> None:
    with pytest.raises(InvalidRequestError) as e:
        facet.search(SearchRequest(query="top up", collection=COLLECTION, filters=filters))
    assert words in str(e.value)
    assert e.value.param == "filters"


@pytest.mark.parametrize(("filters", "item", "words"), REFUSED, ids=IDS)
def test_post_search_refuses_them(client, filters: dict[str, Any], item: str, words: str) -> None:
    r = client.post("/search", json={"query": "top up", "collection": COLLECTION,
                                     "filters": filters})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert words in error["message"]
    assert error["param"] == "filters"


def test_a_plain_key_and_a_dotted_key_still_match(facet, client) -> None:
    for filters, want in (({"intent": "top_up_by_card"}, {"t2"}), ({"geo.lat": 51}, {"t1"}),
                          ({"geo.lat": [48, 40]}, {"t2", "t3"})):
        got = facet.search(SearchRequest(query="top up", collection=COLLECTION, filters=filters))
        assert {r.doc_id for r in got.results} == want, filters
        r = client.post("/search", json={"query": "top up", "collection": COLLECTION,
                                         "filters": filters})
        assert r.status_code == 200, r.text
        assert {x["doc_id"] for x in r.json()["results"]} == want, filters
    # The CLI's forms of the same keys read as such.
    assert parse_filters(["geo.lat:=51", "intent=x"]) == {"geo.lat": 51, "intent": "x"}


@pytest.mark.parametrize("filters", [
    {"intent": "top_up_failed", "meta.intent": "top_up_by_card"},
    parse_filters(["intent=top_up_failed", "meta.intent=top_up_by_card"]),
    {"cate\u0301gorie": "a", "cat\u00e9gorie": "b"},  # one name, decomposed and composed
], ids=["plain-and-meta", "cli-items", "unicode-forms"])
def test_two_keys_of_one_field_are_refused_not_one_dropped(facet, client, filters: dict[str, Any]) -> None:
    """The payload filters map a field to its values, so the second of two keys naming one
    field replaced the first: ``intent=top_up_failed`` with ``meta.intent=top_up_by_card``
    found t2, as if the first filter had not been given."""
    first, second = filters
    with pytest.raises(InvalidRequestError, match="both name the field") as e:
        facet.search(SearchRequest(query="top up", collection=COLLECTION, filters=filters))
    assert repr(first) in str(e.value) and repr(second) in str(e.value) and e.value.param == "filters"
    r = client.post("/search", json={"query": "top up", "collection": COLLECTION, "filters": filters})
    assert r.status_code == 400 and "both name the field" in r.json()["error"]["message"], r.text
    # A top-level field and a metadata column of the same name are two fields.
    check_filters({"doc_id": "t1", "meta.doc_id": "t1"})
