"""What a filtered search says of a record field named like a point's own field, of a field left
out at indexing, and of a number sent for ``doc_id``; and a repeated jsonl id in a job's errors.

A csv column ``chunk_no`` filtered ``chunk_no=3`` found nothing and was told to send
``chunk_no:=3`` (the chunks numbered 3: the wrong records); ``meta.chunk_no=3`` is the filter.
A nested field (``labels: ["a", null]``) was dropped unsaid and the filter said only "no document
has a field 'labels'". ``{"doc_id": 5}`` on a jsonl collection was told "as every csv column is".
Real minilm, SQLite and the edge store.
"""

from __future__ import annotations

import json

from app.services.indexing import IndexService
from app.services.search import SearchRequest, SearchService, filter_type_hint, parse_filters


def test_builtin_names_dropped_fields_and_doc_id_notes(make_ctx, tmp_path) -> None:
    csv = tmp_path / "chunkcol.csv"
    csv.write_text("id,body,chunk_no,source\na1,Wire transfer to a foreign bank account,3,crm\n"
                   "a2,Bank fees and overdraft charges for customers,4,web\n")
    jsonl = tmp_path / "shapes.jsonl"
    jsonl.write_text(json.dumps({"id": "s1", "text": "a bank loan record", "labels": ["a", None],
                                 "geo": {"lat": 1.5}}) + "\n")
    ctx = make_ctx()
    IndexService(ctx).index(csv, "cc")
    IndexService(ctx).index(jsonl, "sh")
    service = SearchService(ctx)

    def search(coll: str, *filters: str):
        return service.search(SearchRequest("bank", coll, filters=parse_filters(list(filters))))

    empty = search("cc", "chunk_no=3")
    assert empty.results == []
    note = empty.note or ""
    assert "not the records' own field 'chunk_no'" in note and "meta.chunk_no=3" in note, note
    assert '{"meta.chunk_no": "3"}' in note and "chunk_no:=3" not in note, note
    assert [r.doc_id for r in search("cc", "meta.chunk_no=3").results] == ["a1"]
    note = search("cc", "source=crm").note or ""
    assert "meta.source=crm" in note, note
    found = search("cc", "chunk_no:=0")  # every first chunk: found, but not by the records' field
    assert found.results and "meta.chunk_no=0" in (found.note or ""), found.note
    # A field left out at indexing says so; a typo says only that no document has it.
    assert search("sh", "labels=a").note == (
        "no document has a field 'labels' (it was not kept when indexed: it is a list holding "
        "null; the indexing job's warnings say so)")
    assert search("sh", "geo=x").note.startswith("no document has a field 'geo' (it was not kept "
                                                 "when indexed: it is an object;")
    assert search("sh", "labelz=a").note == "no document has a field 'labelz'"
    note = service.search(SearchRequest("bank", "sh", filters={"doc_id": 5})).note or ""
    assert note == ("doc_id (the document's id) is text, matched with doc_id=5 in the CLI and the "
                    "UI's filter box, in JSON with the string: {\"doc_id\": \"5\"}"), note
    assert "csv" not in (filter_type_hint({"doc_id": 5}) or "x csv")


def test_a_repeated_jsonl_id_is_a_job_error_naming_both_lines(make_ctx, tmp_path) -> None:
    path = tmp_path / "dup.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "d1", "text": "first about mortgages"}, {"id": "d2", "text": "credit cards"},
        {"id": "d1", "text": "second about pensions"}]))
    report = IndexService(make_ctx()).index(path, "dup")
    assert (report.docs_indexed, report.docs_failed) == (2, 1)
    assert report.errors == [(f"{path}#L3", f"{path}:3: duplicate id 'd1': line 1 has it too; the "
                              "record of line 1 is the one indexed (the first wins), not this one "
                              "(line 3); give each record an id of its own")]
