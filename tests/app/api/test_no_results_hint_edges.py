"""A filtered search that finds nothing for the type of a value says so on every edge.

A number sent as a string (``{"year": "2020"}``), a record's ``id`` (matched as ``doc_id``) and a
number on a csv column (its values are strings): the CLI and the UI named the fix, but the HTTP
API and LangChain returned an empty list with a null ``note``. The hint is now in the core's
note, with the JSON form and the CLI's / the UI's, and the CLI and the UI show it once.
Real minilm, store and SQLite; the API in process (TestClient).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.commands.search import print_results
from app.core import Facet
from app.encoding import EmbedderCache
from app.services.search import SearchRequest
from app.settings import FacetSettings
from tests.app.api.conftest import serving_facet
from tests.app.services.test_postgres import postgres  # noqa: F401 (a fixture: a throwaway cluster)
from ui import render

# (collection, query, filters that find nothing, the filters the note says to send, their CLI form)
CASES = [
    ("yr", "hello", {"year": "2020"}, {"year": 2020}, "year:=2020"),
    ("yr", "hello", {"id": "y1"}, {"doc_id": "y1"}, "doc_id=y1"),
    ("rv", "food", {"stars": 5}, {"stars": "5"}, "stars=5"),
]
IDS = ["number-as-string", "id", "number-on-csv"]


@pytest.fixture(scope="module")
def facet(minilm, tmp_path_factory) -> Iterator[Facet]:
    root = tmp_path_factory.mktemp("nohint")
    (root / "y.jsonl").write_text('{"id": "y1", "text": "hello there", "year": 2020}\n')
    (root / "r.csv").write_text("id,text,stars\nr1,good food,5\n")
    facet = serving_facet(root / "data", minilm)
    facet.index(root / "y.jsonl", "yr")
    facet.index(root / "r.csv", "rv")
    # One field, numbers in the jsonl and text in the csv (the hint read one stored value).
    (root / "mx").mkdir()
    (root / "mx" / "reviews.jsonl").write_text(
        "".join(
            json.dumps({"id": f"j{n}", "text": f"review {n}: the food was fine", "stars": n}) + "\n" for n in (1, 5, 2)
        )
    )
    (root / "mx" / "shops.csv").write_text(
        "id,text,stars\ns4,a shop with food,4\ns5,another food shop,5\ns3,a third food shop,3\n"
    )
    facet.index(root / "mx", "mx")
    yield facet
    facet.close()


def _post(client: TestClient, collection: str, query: str, filters: dict) -> dict:
    response = client.post("/search", json={"query": query, "collection": collection, "filters": filters})
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.parametrize(("collection", "query", "given", "fixed", "cli"), CASES, ids=IDS)
def test_the_api_note_names_the_filter_to_send(client, collection, query, given, fixed, cli) -> None:
    body = _post(client, collection, query, given)
    assert body["results"] == []
    note = body["note"] or ""
    assert f"is matched with {cli} in the CLI and the UI's filter box, in JSON with" in note, note
    assert json.dumps(fixed) in note, note
    # What it names finds the record, with no note.
    found = _post(client, collection, query, fixed)
    assert len(found["results"]) == 1 and found["note"] is None, found


def test_a_key_no_document_holds_gets_that_hint_alone(client) -> None:
    """Its value's type is beside the point: "use the number" would send the user astray."""
    assert _post(client, "yr", "hello", {"yeer": "2020"})["note"] == "no document has a field 'yeer'"
    both = _post(client, "yr", "hello", {"meta.yeer": "2020", "year": "2020"})["note"]
    assert both == (
        "no document has a field 'yeer'; a field of numbers (not a csv column) is "
        "matched with year:=2020 in the CLI and the UI's filter box, in JSON with the "
        'number: {"year": 2020}, not the string "2020"'
    )
    # The number 2021 is held by no document either: year:=2021 would find nothing too.
    assert _post(client, "yr", "hello", {"year": "2021"})["note"] is None


def test_a_value_of_the_fields_type_gets_no_type_hint(facet, client, capsys) -> None:
    """The hint is made knowing what the field holds: "7" on a csv column and 1999 on a field of
    numbers are of the right type (the value is what found nothing). The CLI guessed from the
    filter alone and told the user to send stars:=7, which the column never matches."""
    # (What is said since the sixth session of 2026-12-02 is the value, not a type.)
    assert _post(client, "rv", "food", {"stars": "7"})["note"] == "no document has '7' in field 'stars'"
    # A number no document holds: the value named, as a string's is (null until 2026-12-06).
    assert _post(client, "yr", "hello", {"year": 1999})["note"] == \
        "no document has the number 1999 in field 'year'"
    request = SearchRequest("food", "rv", filters={"stars": "7"})
    print_results(facet.search(request), filtered=request.filters)
    assert "  no results (check the filters; no document has '7' in field 'stars')\n" in capsys.readouterr().out


@pytest.mark.parametrize(("collection", "query", "given", "fixed", "cli"), CASES, ids=IDS)
def test_the_cli_and_the_ui_say_the_hint_once(facet, capsys, collection, query, given, fixed, cli) -> None:
    """``why_no_results`` added its own hint before the note; with the hint in the note it
    would have said it twice."""
    request = SearchRequest(query, collection, filters=given)
    response = facet.search(request)
    assert response.results == []
    hints = [f"with {cli} in the CLI and the UI's filter box", json.dumps(fixed)]
    print_results(response, filtered=request.filters)
    out = capsys.readouterr().out
    assert "  no results (check the filters; a " in out, out
    assert [out.count(hint) for hint in hints] == [1, 1], out
    html = render.results_html(response, filters=request.filters)
    assert "No results: check the filters; a " in html, html
    assert [html.count(render.esc(hint)) for hint in hints] == [1, 1], html


def test_langchain_logs_the_hint(facet, caplog) -> None:
    """The retriever logs the search's note as a warning: the hint reaches a chain's log."""
    pytest.importorskip("langchain_core")
    from app.integrations.langchain import FacetRetriever

    retriever = FacetRetriever(collection="yr", facet=facet, filter={"year": "2020"})
    with caplog.at_level(logging.WARNING, logger="app.integrations.langchain"):
        assert retriever.invoke("hello") == []
    assert "year:=2020 in the CLI" in caplog.text and '{"year": 2020}' in caplog.text, caplog.text


def test_a_field_of_both_types_is_hinted_per_value(client) -> None:
    """The hint was decided by one stored value per field: with stars numbers in a jsonl and
    text in a csv, ``{"stars": 4}`` got a null note though the csv's "4" is there. Now each value
    is asked after: the type the documents hold it as is named, and "(not a csv column)" is
    not claimed of a field that some documents hold as text."""
    note = _post(client, "mx", "food", {"stars": 4})["note"] or ""
    assert ("a field of text (as every csv column is) is matched with stars=4 in the CLI and the "
            "UI's filter box") in note, note
    assert '{"stars": "4"}' in note, note
    assert len(_post(client, "mx", "food", {"stars": "4"})["results"]) == 1
    note = _post(client, "mx", "food", {"stars": "2"})["note"] or ""
    assert note.startswith("a field of numbers is matched with stars:=2 in the CLI"), note
    assert "(not a csv column)" not in note and "some documents hold it as text" in note, note
    assert len(_post(client, "mx", "food", {"stars": 2})["results"]) == 1
    # Held as neither type: no type hint, the value named; a list's hint names only the value
    # whose twin is held.
    assert _post(client, "mx", "food", {"stars": 7})["note"] == \
        "no document has the number 7 in field 'stars'"
    note = _post(client, "mx", "food", {"stars": [7, 3]})["note"] or ""
    assert "matched with stars=3 in the CLI" in note and "stars=7" not in note, note


def test_a_threshold_that_drops_every_result_says_so(facet, client, capsys) -> None:
    """``--score-threshold 0.99`` dropped every result and the CLI said "the collection holds
    nothing searchable" (the API: a null note); the note now names the threshold."""
    body = client.post("/search", json={"query": "food", "collection": "mx", "score_threshold": 0.99}).json()
    assert body["results"] == [], body
    assert body["note"].startswith("no result scored 0.99 or more (score_threshold); the best scored 0."), body
    request = SearchRequest("food", "mx", score_threshold=0.99, filters={"stars": 5})
    print_results(facet.search(request), filtered=request.filters)
    out = capsys.readouterr().out
    assert "  no results (no result scored 0.99 or more (score_threshold)" in out, out
    assert "nothing searchable" not in out and "check the filters" not in out, out
    # Nothing found at all: the threshold is not what to blame, the value is.
    empty = facet.search(SearchRequest("food", "mx", score_threshold=0.1, filters={"stars": 9}))
    assert empty.results == [] and empty.note == "no document has the number 9 in field 'stars'"


def test_an_invalid_collection_name_is_refused_as_such(client) -> None:
    """The "unknown collection 'bad name!' ...; indexing into a new name creates it" sent the user
    to index into a name that indexing refuses: /cluster and /jobs said "invalid collection name"."""
    response = client.post("/search", json={"query": "food", "collection": "bad name!"})
    assert response.status_code == 400, response.text
    body = response.json()
    assert "invalid collection name 'bad name!'" in json.dumps(body), body
    assert "indexing into a new name" not in json.dumps(body), body


def test_a_field_of_both_types_is_hinted_per_value_on_postgres(minilm, tmp_path, postgres) -> None:  # noqa: F811
    """The twin is asked after as JSON text (``json -> key`` cast to text on PostgreSQL, whose
    ``->>`` gives 4 and "4" alike): the same hints as on SQLite."""
    (tmp_path / "mx").mkdir()
    (tmp_path / "mx" / "a.jsonl").write_text('{"id": "j2", "text": "fine food", "stars": 2, "vip": true}\n')
    (tmp_path / "mx" / "b.csv").write_text("id,text,stars\ns4,a food shop,4\n")
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facet = Facet.for_serving(FacetSettings(data_dir=tmp_path / "data", database_url=postgres.url), embedders=cache)
    try:
        facet.index(tmp_path / "mx", "pgmx")

        def note(filters: dict) -> str:
            response = facet.search(SearchRequest("food", "pgmx", mode="dense", filters=filters))
            assert response.results == [], filters
            return response.note or ""

        assert "a field of text (as every csv column is) is matched with stars=4 in the CLI" in note({"stars": 4})
        assert note({"stars": "2"}).startswith("a field of numbers is matched with stars:=2 ")
        assert note({"stars": 7}) == "no document has the number 7 in field 'stars'"
        assert note({"stars": "4.5"}) == ""
        # A true/false field (PostgreSQL reads it as such, SQLite as 1/0): the same note.
        assert note({"vip": 1}) == "field 'vip' holds true/false, which no number matches (1 matched none)"
        # The texts "true" and "1" are told the boolean, as on SQLite (PostgreSQL reads a true
        # as "true", where SQLite reads 1: "1" had no hint).
        for text in ("true", "1"):
            assert "vip:=true" in note({"vip": text}), text
    finally:
        facet.close()
