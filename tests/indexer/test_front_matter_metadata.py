"""A Markdown file's YAML front matter (Obsidian, Hugo, Jekyll notes) is the document's
metadata, by a jsonl record's rules: until then only its ``title`` was read and every other
field was dropped unsaid, so ``--filter tags=alpha`` or ``draft:=true`` found "no document has
a field 'draft'"."""
from __future__ import annotations

from pathlib import Path

import pytest

from indexer.parsing import ParsedDocument, StreamedDocument, parse_file


def _doc(path: Path, text: str) -> ParsedDocument:
    path.write_text(text, encoding="utf-8")
    [doc] = parse_file(path)
    assert isinstance(doc, ParsedDocument)
    return doc


NOTE = """---
title: Alpha note
tags: [alpha, beta]
aliases:
  - first
  - second
date: 2024-05-01
updated: 2024-05-01T10:30:00Z
draft: true
year: 2021
rating: 4.5
author: Ann
summary:
---
# Heading

The body.
"""


def test_front_matter_fields_are_metadata(tmp_path: Path) -> None:
    doc = _doc(tmp_path / "n.md", NOTE)
    assert doc.metadata == {
        "tags": ["alpha", "beta"],  # a flow list and a block list alike
        "aliases": ["first", "second"],
        "date": "2024-05-01",  # a YAML date is its ISO text
        "updated": "2024-05-01T10:30:00+00:00",
        "draft": True, "year": 2021, "rating": 4.5,  # types kept, as a jsonl record's
        "author": "Ann",
    }  # "summary:" (null) is no value, left out unsaid, as a record's null
    assert doc.title == "Alpha note" and "title" not in doc.metadata  # the title, as a record's
    # The title starts the text (found by its words), the front matter is not in it.
    assert doc.text.startswith("Alpha note\n# Heading") and "tags" not in doc.text
    assert doc.warnings == []


def test_nested_and_odd_values_are_dropped_with_a_warning(tmp_path: Path) -> None:
    doc = _doc(tmp_path / "n.md", "---\ngeo:\n  lat: 1.5\nmixed: [1, null]\nlisted: [[1, 2]]\n"
                                  "blob: !!binary aGVsbG8=\nok: yes please\n---\nbody\n")
    assert doc.metadata == {"ok": "yes please"}
    said = "\n".join(doc.warnings)
    for name, why in (("geo", "it is an object"), ("mixed", "it is a list holding null"),
                      ("listed", "it is a list holding lists"), ("blob", "it is binary data")):
        # the wording search's "it was not kept when indexed" note reads back
        assert f"front matter: metadata field {name!r} not kept: {why}" in said
    assert doc.text == "body\n"


def test_non_string_keys_and_reserved_names(tmp_path: Path) -> None:
    doc = _doc(tmp_path / "n.md", "---\n2020: numbered\nsource: web\nchunk_no: 3\ntext: t\n---\nbody\n")
    # Kept under their names (the payload's meta.*), as a record's: ``meta.source=web``.
    assert doc.metadata == {"2020": "numbered", "source": "web", "chunk_no": 3, "text": "t"}
    assert doc.source == doc.key == str(tmp_path / "n.md") and doc.text == "body\n"


@pytest.mark.parametrize(("front", "said"), [
    ("title: Bad\ntags: [a, b\n", "while parsing a flow sequence at line 3"),
    ("title: Bad\n\tindent: x\n", "at line 3"),
    ("date: 2024-13-45\n", "month must be in 1..12"),  # YAML's date pattern, no calendar date
])
def test_invalid_yaml_keeps_the_document_with_a_warning(tmp_path: Path, front: str, said: str) -> None:
    doc = _doc(tmp_path / "bad.md", f"---\n{front}---\nThe body.\n")
    assert doc.metadata == {} and doc.text == "The body.\n"
    [warning] = doc.warnings
    assert "its front matter is not valid YAML" in warning and said in warning
    assert warning.startswith(str(tmp_path / "bad.md"))
    if "title" in front:  # (not read from a front matter that is not YAML: none here)
        assert doc.title is None


def test_front_matter_that_is_not_a_mapping(tmp_path: Path) -> None:
    doc = _doc(tmp_path / "l.md", "---\n# a comment first\n- a\n- b\n---\nThe body.\n")
    assert doc.metadata == {} and doc.text == "The body.\n"
    [warning] = doc.warnings
    assert "front matter (lines 2-4) is a list in YAML, not a mapping" in warning


@pytest.mark.parametrize("text", [
    "# Title\n\nNo front matter: key: value.\n",
    "---\nJust a rule above.\n---\nmore\n",  # a rule, not front matter
    "---\ntitle: x\nnever closed\n",
    "---\n# only a comment\n---\nbody\n",
])
def test_no_front_matter_is_unchanged(tmp_path: Path, text: str) -> None:
    doc = _doc(tmp_path / "p.md", text)
    assert doc.metadata == {} and doc.warnings == []


def test_a_streamed_markdown_file_keeps_its_front_matter_fields(tmp_path: Path) -> None:
    path = tmp_path / "big.md"
    path.write_text(NOTE + "more text\n" * 200, encoding="utf-8")
    [doc] = parse_file(path, stream_over_bytes=100)
    assert isinstance(doc, StreamedDocument)
    assert doc.title == "Alpha note" and doc.metadata["tags"] == ["alpha", "beta"]
    assert doc.metadata["draft"] is True and doc.metadata["date"] == "2024-05-01"


@pytest.mark.parametrize("backend", ["edge", "local"])
def test_front_matter_fields_filter_a_search(minilm, tmp_path: Path, backend: str) -> None:
    """End to end: indexed through the facade (minilm, the edge store; the local one for a
    boolean, which qdrant-edge cannot match), filtered as the CLI's ``--filter tags=alpha``,
    ``draft:=true``, ``year:=2021`` are."""
    from app.core import Facet
    from app.encoding import EmbedderCache
    from app.errors import InvalidRequestError
    from app.services.search import SearchRequest, parse_filters
    from app.settings import FacetSettings

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("---\ntitle: Kettle\ntags: [alpha, kitchen]\ndate: 2024-05-01\n"
                                "draft: true\nyear: 2021\n---\nThe kettle boils water fast.\n")
    (notes / "b.md").write_text("---\ntitle: Tent\ntags:\n  - beta\n  - camping\ndate: 2023-01-02\n"
                                "draft: false\nyear: 2021\n---\nThe tent keeps the rain out.\n")
    (notes / "c.md").write_text("---\ntitle: Stove\ntags: [alpha]\ndate: 2022-07-08\n"
                                "draft: false\nyear: 2019\n---\nThe stove burns gas.\n")
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facet = Facet(FacetSettings(data_dir=tmp_path / "data", vector_backend=backend), embedders=cache)
    try:
        report = facet.index(notes, "notes")
        assert report.state == "completed" and report.docs_indexed == 3

        def found(*items: str) -> list[str]:
            hits = facet.search(SearchRequest("water rain gas", "notes", top_k=10,
                                              filters=parse_filters(items))).results
            return sorted(Path(h.doc_id).name for h in hits)

        assert found("tags=alpha") == ["a.md", "c.md"]
        assert found("year:=2021") == ["a.md", "b.md"]
        assert found("date=2023-01-02") == ["b.md"]
        assert found("tags=alpha", "year:=2021") == ["a.md"]
        if backend == "local":
            assert found("draft:=true") == ["a.md"]
            assert found("draft:=false", "tags=alpha") == ["c.md"]
        else:  # the edge store's own limit, said (not "no document has a field 'draft'")
            with pytest.raises(InvalidRequestError, match="edge store cannot match true/false"):
                found("draft:=true")
    finally:
        facet.close()


@pytest.mark.parametrize(("front", "title"), [
    # A nested title above the real one was taken for it (the lines were read one by one).
    ("seo:\n  title: SEO Title\ntitle: Real Title", "Real Title"),
    ("title: Foo # a comment", "Foo"),  # a YAML comment is no part of it
    ("title: 'It''s here'", "It's here"),  # YAML's quoting read
    ('title: "caf\\u00e9\\tbar"', "café bar"),  # and its escapes
    ("title: >\n  A folded\n  title\n\n  second paragraph", "A folded title"),
    ("title: |\n  Literal line one\n  line two", "Literal line one"),
    ("title: 2024-05-01", "2024-05-01"),
    ("title: [unclosed", "The Heading"),  # not YAML: no title from it, the heading's
    ("title: ''", "The Heading"),  # empty: the heading's
    ("Title: Cased Key", "Cased Key"),
])
def test_the_title_is_the_yaml_top_level_title(tmp_path: Path, front: str, title: str) -> None:
    doc = _doc(tmp_path / "note.md", f"---\n{front}\n---\n# The Heading\n\nBody text of the note.\n")
    assert doc.title == title


@pytest.mark.parametrize("end", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_front_matter_whose_first_key_has_no_value_is_read_whatever_the_line_ends(tmp_path: Path, end: str) -> None:
    """A CRLF file whose front matter began with ``tags:`` (its list below) was read as text: its
    YAML indexed and shown, no title, and ``--filter tags=alpha`` found nothing."""
    text = end.join(["---", "tags:", "  - alpha", "title: Zebra handbook", "---", "Body text about stripes.", ""])
    doc = _doc(tmp_path / "note.md", text)
    assert doc.title == "Zebra handbook" and doc.metadata["tags"] == ["alpha"]
    assert "---" not in doc.text and "Body text about stripes." in doc.text
