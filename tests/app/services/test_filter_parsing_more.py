"""Filters as a power user writes them: a relative ``source=``, a ``chunk_no`` held as numbers
and text, a key wrong only in case, a comparison (``year>=2019``, ``$gt``) and a value holding
``=`` or ``:=``.

``source=corpus/md/note1.md`` (sources are stored absolute) found nothing, and the note sent the
user to ``meta.source=corpus/md/note1.md`` wherever some record held a ``source`` field of its
own (matching nothing either), and said nothing elsewhere. ``chunk_no:=1`` named one of the two
forms a field of numbers (jsonl) and text (csv) holds. ``COLOR=red`` said only "no document has
a field 'COLOR'". ``year>=2019`` ran as the field 'year>'. ``formula=x:=1`` became the key
``formula=x``. Real minilm, SQLite and the edge store, through the facade.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.core import Facet
from app.errors import InvalidRequestError
from app.services.context import EmbedderCache
from app.services.search import SearchRequest, parse_filters
from app.settings import FacetSettings


@pytest.fixture
def facet(tmp_path: Path, minilm):
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    with Facet(FacetSettings(data_dir=tmp_path / "data"), embedders=cache) as f:
        yield f


def _corpus(tmp_path: Path) -> tuple[Path, Path, Path]:
    md_dir = tmp_path / "corpus" / "md"
    md_dir.mkdir(parents=True)
    (md_dir / "note1.md").write_text("# Bank note\n\nA short note about bank transfers.\n")
    jsonl = tmp_path / "records.jsonl"
    jsonl.write_text(json.dumps({"id": "j1", "text": "a bank loan record", "chunk_no": 1,
                                 "Color": "red"}) + "\n")
    csv = tmp_path / "records.csv"
    csv.write_text("id,text,chunk_no,color,source\nc1,bank fees for customers,1,blue,crm\n")
    return md_dir / "note1.md", jsonl, csv


def test_a_relative_source_names_the_absolute_one_and_no_unheld_meta_twin(facet, tmp_path) -> None:
    note1, jsonl, csv = _corpus(tmp_path)
    facet.index(note1.parent, "files")  # no record holds a source field of its own
    for path in (note1.parent, jsonl, csv):
        facet.index(path, "mix")

    def note(coll: str, *filters: str) -> str:
        response = facet.search(SearchRequest("bank", coll, filters=parse_filters(list(filters))))
        assert response.results == [], response.results
        return response.note or ""

    for coll in ("mix", "files"):
        said = note(coll, "source=corpus/md/note1.md")
        assert "meta.source" not in said, said  # no record's own source holds it
        assert "'corpus/md/note1.md' is a relative path" in said, said
        assert f"source={note1}" in said and json.dumps({"source": str(note1)}) in said, said
    said = note("mix", "doc_id=corpus/md/note1.md")
    assert f"doc_id={note1}" in said, said
    # A relative path under no indexed file: what sources are, and how to list them.
    said = note("files", "source=elsewhere/x.md")
    assert "stored as absolute paths" in said and "facet documents files --prefix" in said, said
    # The records' own source field, where it holds the value, is still named.
    said = note("mix", "source=crm")
    assert "meta.source=crm" in said and "relative path" not in said, said
    # A record id is no relative path.
    assert "relative path" not in note("mix", "doc_id=j1", "color=green")


def test_a_field_held_as_numbers_and_text_names_both_forms(facet, tmp_path) -> None:
    _, jsonl, csv = _corpus(tmp_path)
    facet.index(jsonl, "mix")
    facet.index(csv, "mix")
    response = facet.search(SearchRequest("bank", "mix", filters=parse_filters(["chunk_no:=1"])))
    assert response.results == []
    said = response.note or ""
    assert "meta.chunk_no:=1" in said and "meta.chunk_no=1" in said, said
    assert '{"meta.chunk_no": [1, "1"]}' in said, said
    assert [r.doc_id for r in facet.search(SearchRequest(
        "bank", "mix", filters={"meta.chunk_no": [1, "1"]})).results] in (["j1", "c1"], ["c1", "j1"])


def test_a_key_wrong_only_in_case_names_the_keys_held(facet, tmp_path) -> None:
    _, jsonl, csv = _corpus(tmp_path)
    facet.index(jsonl, "mix")
    facet.index(csv, "mix")
    response = facet.search(SearchRequest("bank", "mix", filters={"COLOR": "red"}))
    assert response.results == []
    assert response.note == "no document has a field 'COLOR' (did you mean 'Color' or 'color'?)"
    response = facet.search(SearchRequest("bank", "mix", filters={"SOURCE": "crm"}))
    assert "(did you mean 'source'?)" in (response.note or ""), response.note
    response = facet.search(SearchRequest("bank", "mix", filters={"colour": "red"}))
    assert response.note == "no document has a field 'colour' (did you mean 'Color' or 'color'?)"


@pytest.mark.parametrize("filters", [{"year>": 2019}, {"year<": 2019}, {"year!": "2019"},
                                     {"year": {"$gt": 2019}}, {"year": {"$ne": 2019}}])
def test_a_comparison_over_the_api_is_refused_naming_the_any_of_form(facet, tmp_path,
                                                                     filters) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        facet.search(SearchRequest("bank", "none", filters=filters))
    assert raised.value.param == "filters"
    message = str(raised.value)
    assert "comparison filters (>=, <=, !=, $gt...) are not supported" in message, message
    assert message.endswith(
        "list them, a repeated key matching any of its values: year:=2020 and year:=2021 in the "
        'CLI and the UI\'s filter box, {"year": [2020, 2021]} in JSON (docs/indexing.md)'), message
    assert " --" not in message and "facet " not in message, message  # every edge's words


@pytest.mark.parametrize("item", ["year>=2019", "year<=2019", "year!=2019", "year>2019",
                                  "year < 2019", 'year:={"$gt": 2019}', "year>:=2019"])
def test_a_typed_comparison_is_refused(item) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        parse_filters([item])
    assert raised.value.param == "filters"
    assert "comparison filters" in str(raised.value) and repr(item) in str(raised.value)


def test_the_separator_is_the_first_equals_sign() -> None:
    assert parse_filters(["formula=x:=1"]) == {"formula": "x:=1"}
    assert parse_filters(["a=b=c"]) == {"a": "b=c"}
    assert parse_filters(["n:=1"]) == {"n": 1}
    assert parse_filters(['k:="x=1:=2"']) == {"k": "x=1:=2"}
    assert parse_filters(["time:x=1"]) == {"time:x": "1"}
    assert parse_filters(["url=http://x/?a=1"]) == {"url": "http://x/?a=1"}
    with pytest.raises(InvalidRequestError, match="empty key"):
        parse_filters([":=1"])
