"""How `facet index` reads csv, jsonl, HTML and Markdown files: defects an explorer found."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from indexer.parsing import DocumentError, ParsedDocument, parse_file


def _docs(path: Path, **kw) -> list[ParsedDocument | DocumentError]:
    return list(parse_file(path, **kw))  # type: ignore[arg-type]


def test_a_csv_quote_left_open_is_an_error_not_one_merged_record(tmp_path: Path) -> None:
    """The rest of the file became the text of row 2's record q1, with no warning and no
    error (so nothing said the file needed fixing)."""
    path = tmp_path / "badquote.csv"
    path.write_text('id,text\nq0,fine\nq1,"unterminated quote\nq2,next row lost?\nq3,third row\n')
    results = _docs(path)
    assert [type(r).__name__ for r in results] == ["ParsedDocument", "DocumentError"], results
    assert results[0].key == "q0"
    error = results[1]
    assert error.key == f"{path}#row3" and error.source == str(path)  # the file gave an error: kept by sync
    assert error.message.startswith(f"{path}:3: an unclosed quote in row 3 (line 3) runs to the "
                                    "end of the file"), error.message
    header = tmp_path / "header.csv"
    header.write_text('id,"text\nq1,a\n')
    [error] = _docs(header)
    assert isinstance(error, DocumentError) and "unclosed quote in the header" in error.message
    # A quoted field over several lines, closed, is still one field.
    closed = tmp_path / "closed.csv"
    closed.write_text('id,text\na,"two\nlines"\nb,"last, ""quoted"""\n')
    assert [(r.key, r.text) for r in _docs(closed)] == [  # type: ignore[union-attr]
        ("a", "two\nlines"), ("b", 'last, "quoted"')]


def test_csv_headers_and_jsonl_keys_match_in_any_case(tmp_path: Path) -> None:
    """`ID,Title,Text,Stars` embedded the ID column ("embedded the first column"), ids were
    path#rowN and the title was unread."""
    path = tmp_path / "upper.csv"
    path.write_text("ID,Title,Text,Stars\nk1,Kettle,boils fast,5\n")
    [doc] = _docs(path)
    assert isinstance(doc, ParsedDocument), doc
    assert (doc.key, doc.title, doc.text, doc.metadata) == ("k1", "Kettle", "Kettle\nboils fast",
                                                           {"Stars": "5"})
    assert doc.warnings == []
    lines = tmp_path / "upper.jsonl"
    lines.write_text(json.dumps({"Doc_ID": "d1", "Body": "gas stove", "TITLE": "Stove"}) + "\n"
                     + json.dumps({"ID": "d2", "Text": "other case", "text": "exact case"}) + "\n")
    first, second = _docs(lines)
    assert isinstance(first, ParsedDocument) and isinstance(second, ParsedDocument)
    assert (first.key, first.text, first.metadata) == ("d1", "Stove\ngas stove", {})
    assert (second.key, second.text, second.metadata) == ("d2", "exact case", {"Text": "other case"})
    # --text-column stays an exact name.
    assert isinstance(_docs(path, text_column="text")[0], DocumentError)


def test_csv_cells_and_columns_that_were_silently_dropped_are_warned_once(tmp_path: Path) -> None:
    path = tmp_path / "extra.csv"
    path.write_text("id,text,label\n1,ok,x\n2,extra columns condor,a,b,c\n3,more,y,z\n4,fine,w,\n")
    docs = _docs(path)
    assert [d.key for d in docs] == ["1", "2", "3", "4"]
    notes = [w for d in docs for w in d.warnings]  # type: ignore[union-attr]
    assert notes == [f"{path}: row 3 (line 3) has 5 cells, more than the header's 3 columns; the "
                     "cells after the last column were not read (the first such row; quote a "
                     "cell that holds a comma)"], notes
    assert docs[1].warnings == notes  # type: ignore[union-attr]
    dup = tmp_path / "dup.csv"
    dup.write_text("id,text,text,,note\n1,first,second,nameless,n\n")
    [doc] = _docs(dup)
    assert isinstance(doc, ParsedDocument)
    assert doc.text == "first" and doc.metadata == {"note": "n"}  # was "second" and a key ""
    assert doc.warnings == [
        f"{dup}: the header names 'text' more than once; only the first column of each name is read",
        f"{dup}: column 4 of the header has no name; not read (name it in the header)"]


@pytest.mark.parametrize(("value", "kind"), [({"a": 1}, "object"), (True, "boolean"),
                                             (["x"], "array")])
def test_a_jsonl_id_that_is_not_a_string_or_number_is_that_records_error(tmp_path: Path,
                                                                          value: object,
                                                                          kind: str) -> None:
    """It was stored as Python's repr: "{'a': 1}", "True", "['x']"."""
    path = tmp_path / "ids.jsonl"
    path.write_text(json.dumps({"_id": "ok", "text": "a"}) + "\n"
                    + json.dumps({"_id": value, "text": "b"}) + "\n")
    first, second = _docs(path)
    assert isinstance(first, ParsedDocument) and first.key == "ok"
    assert isinstance(second, DocumentError), second
    assert second.key == f"{path}#L2"
    assert second.message == (f"{path}:2: the record's id ('_id') is a JSON {kind}, not a string "
                              "or a number; fix that record")


def test_jsonl_number_ids(tmp_path: Path) -> None:
    path = tmp_path / "n.jsonl"
    path.write_text("".join(json.dumps({"_id": i, "text": "t"}) + "\n"
                            for i in (7, 1000.0, 2.5)))
    assert [d.key for d in _docs(path)] == ["7", "1000", "2.5"]  # 1000.0 was "1000.0"


def test_a_jsonl_id_of_blanks_is_no_id(tmp_path: Path) -> None:
    """A record whose id was "   " was keyed "   ": indexed, listed as a blank key, and no removal
    took it ("a document key is empty"). Blanks, or only invisible characters, are no id, as
    an empty one: the record is keyed by its line."""
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps({"id": i, "text": "t"}) + "\n"
                            for i in ("   ", "\u200b", "", " ok ")))
    assert [d.key for d in _docs(path)] == [f"{path}#L1", f"{path}#L2", f"{path}#L3", " ok "]
    # Nor is such an id a metadata field: it was stored as `id=''` (`id='   '`) beside the
    # line's key, where a filled id is the key and no field (the indexing exploration of the
    # fourth session of 2026-12-07); a csv's empty id cell likewise.
    assert [d.metadata for d in _docs(path)] == [{}, {}, {}, {}]
    table = tmp_path / "r.csv"
    table.write_text("id,text,k\n,empty id cell,2\nb,with id,3\n")
    assert [(d.key, d.metadata) for d in _docs(table)] == [(f"{table}#row2", {"k": "2"}), ("b", {"k": "3"})]


def test_an_html_title_is_part_of_the_text_as_a_jsonl_title_is(tmp_path: Path) -> None:
    """The <title> was stored as the title but was in no chunk: no search found its words."""
    path = tmp_path / "a.html"
    path.write_text("<html><head><title>Kettle  guide</title></head><body><p>Boils fast.</p>"
                    "</body></html>")
    [doc] = _docs(path)
    assert isinstance(doc, ParsedDocument)
    assert (doc.title, doc.text) == ("Kettle  guide", "Kettle guide\nBoils fast.")
    same = tmp_path / "b.html"  # a first heading repeating the title: not twice
    same.write_text("<html><head><title>Kettle guide</title></head><body><h1>Kettle guide</h1>"
                    "<p>Boils fast.</p></body></html>")
    [doc] = _docs(same)
    assert isinstance(doc, ParsedDocument) and doc.text == "Kettle guide\nBoils fast."
    empty = tmp_path / "c.html"  # a title alone is still no text
    empty.write_text("<html><head><title>Kettle guide</title></head><body> </body></html>")
    [error] = _docs(empty)
    assert isinstance(error, DocumentError) and "empty" in error.message


@pytest.mark.parametrize(("front", "title"), [
    ("title: >\n  Folded title\n  over two lines\n", "Folded title over two lines"),
    ("title: |-\n  Literal title\n\n  second paragraph\n", "Literal title"),
    ('title: ""\n', "Heading"),
    ("title: >\n", "Heading"),
])
def test_markdown_front_matter_block_and_empty_titles(tmp_path: Path, front: str, title: str) -> None:
    """`title: >` gave the title ">"; `title: ""` gave none though the file has a heading."""
    path = tmp_path / "m.md"
    path.write_text(f"---\n{front}author: x\n---\n# Heading\nbody\n")
    [doc] = _docs(path)
    assert isinstance(doc, ParsedDocument) and doc.title == title
