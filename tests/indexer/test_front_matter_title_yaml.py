"""A Markdown file's front matter, found by a user of notes with YAML front matter (2026-12-01):

1. its ``title`` was never part of the indexed text (front matter is not), so a note titled
   "Zebra handbook" whose body speaks of stripes was not found by a word search for "zebra",
   where an HTML page's ``<title>`` and a jsonl record's title are part of the text;
2. its values were read by YAML 1.1 (``yaml.safe_load``): ``zip: 012345`` was 5349 (octal),
   ``duration: 1:30`` 90, ``version: 1.10`` 1.1, ``title: 1.10`` the title "1.1",
   ``country: NO`` false, so a filter ``zip=012345`` found nothing.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from indexer.parsing import DocumentError, ParsedDocument, StreamedDocument, parse_file


def _parse(path: Path, text: str) -> ParsedDocument | DocumentError:
    path.write_text(text, encoding="utf-8")
    [doc] = parse_file(path)
    assert not isinstance(doc, StreamedDocument)
    return doc


@pytest.mark.parametrize(("content", "title", "text"), [
    # the title starts the text, as an HTML page's <title> and a jsonl record's title do
    ("---\ntitle: Zebra handbook\ntags: [a]\n---\nStripes hide them.\n",
     "Zebra handbook", "Zebra handbook\nStripes hide them.\n"),
    ("---\ntitle: Zebra handbook\n---\n\n# Field notes\n\nbody\n",
     "Zebra handbook", "Zebra handbook\n\n# Field notes\n\nbody\n"),
    # not twice: the text's first line (a heading's words) is the title already
    ("---\ntitle: Zebra handbook\n---\n\n# Zebra handbook\n\nbody\n",
     "Zebra handbook", "\n# Zebra handbook\n\nbody\n"),
    ("---\ntitle: Zebra\n---\nZebra: a field guide\n", "Zebra", "Zebra: a field guide\n"),
    ("---\ntitle: Zebra\n---\nZebras run.\n", "Zebra", "Zebra\nZebras run.\n"),  # a longer word
    ("---\ntitle: >\n  Zebra\n  handbook\n---\nbody\n", "Zebra handbook", "Zebra handbook\nbody\n"),
    # a title from the first heading is in the text already; no front matter title, no line
    ("# Zebra handbook\nbody\n", "Zebra handbook", "# Zebra handbook\nbody\n"),
    ("---\nauthor: Ann\n---\n# Zebra handbook\nbody\n", "Zebra handbook", "# Zebra handbook\nbody\n"),
    ("---\ntitle: [unclosed\n---\nbody\n", None, "body\n"),  # not YAML: no title
    # the title as written (YAML 1.1 read 1.10 as the number 1.1)
    ("---\ntitle: 1.10\n---\nRelease body\n", "1.10", "1.10\nRelease body\n"),
])
def test_a_front_matter_title_starts_the_markdown_text(tmp_path: Path, content: str,
                                                        title: str | None, text: str) -> None:
    doc = _parse(tmp_path / "a.md", content)
    assert isinstance(doc, ParsedDocument)
    assert (doc.title, doc.text) == (title, text)


def test_a_front_matter_title_alone_is_still_no_text(tmp_path: Path) -> None:
    doc = _parse(tmp_path / "a.md", "---\ntitle: Zebra handbook\n---\n\n")
    assert isinstance(doc, DocumentError) and "empty" in doc.message


def test_the_html_title_rule_is_unchanged(tmp_path: Path) -> None:
    """The HTML parser shares the rule (``_titled``)."""
    page = "<html><head><title>Kettle  guide</title></head><body>{}<p>Boils fast.</p></body></html>"
    doc = _parse(tmp_path / "a.html", page.format(""))
    assert isinstance(doc, ParsedDocument) and doc.text == "Kettle guide\nBoils fast."
    doc = _parse(tmp_path / "b.html", page.format("<h1>Kettle guide</h1>"))
    assert isinstance(doc, ParsedDocument) and doc.text == "Kettle guide\nBoils fast."


FRONT = """---
title: 1.10
zip: 012345
duration: 1:30
version: 1.10
country: NO
answer: yes
light: off
short: y
hex: 0x1F
big: 1_000
exp: 1e3
plus: +3
negzero: -0
count: 12
delta: -3
ratio: 1.5
whole: 1.0
year: 2024
draft: TRUE
public: false
empty: ~
date: 2024-05-01
quoted: '012'
tagged: !!int 0x1F
list: [012, 1.10, no, 7]
---
body
"""


def test_front_matter_scalars_are_read_as_written(tmp_path: Path) -> None:
    doc = _parse(tmp_path / "a.md", FRONT)
    assert isinstance(doc, ParsedDocument)
    assert doc.title == "1.10"
    assert doc.metadata == {
        # not a number as written: text (YAML 1.1 read octal, sexagesimal, 1.1, false...)
        "zip": "012345", "duration": "1:30", "version": "1.10", "country": "NO",
        "answer": "yes", "light": "off", "short": "y", "hex": "0x1F", "big": "1_000",
        "exp": "1e3", "plus": "+3", "negzero": "-0",
        # numbers written as they print back, booleans true/false in any case
        "count": 12, "delta": -3, "ratio": 1.5, "whole": 1.0, "year": 2024,
        "draft": True, "public": False,
        # null left out; a date its ISO text; quoting and explicit tags are YAML's own
        "date": "2024-05-01", "quoted": "012", "tagged": 31,
        "list": ["012", "1.10", "no", 7],
    }
    assert doc.warnings == []
    assert type(doc.metadata["count"]) is int and type(doc.metadata["whole"]) is float


@pytest.mark.parametrize("backend", ["edge"])
def test_a_note_is_found_by_its_front_matter_title_and_fields(minilm, tmp_path: Path,
                                                              backend: str) -> None:
    """End to end through the facade (minilm, the edge store): a word search for "zebra" finds
    the note whose front matter title is "Zebra handbook" (its body never says zebra), a dense
    search for the title finds it close (its text embedded holds the title), and ``--filter zip=012345`` finds it."""
    from app.core import Facet
    from app.encoding import EmbedderCache
    from app.services.search import SearchRequest, parse_filters
    from app.settings import FacetSettings

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("---\ntitle: Zebra handbook\nzip: 012345\n---\n"
                                "Stripes help the animals hide in the tall grass of the plains.\n")
    (notes / "b.md").write_text("---\ntitle: Stable chores\nzip: 5349\n---\n"
                                "A handbook for grooming horses and cleaning the stable.\n")
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facet = Facet(FacetSettings(data_dir=tmp_path / "data", vector_backend=backend), embedders=cache)
    try:
        report = facet.index(notes, "notes")
        assert report.state == "completed" and report.docs_indexed == 2

        def found(query: str, mode: str, *filters: str) -> list[str]:
            hits = facet.search(SearchRequest(query, "notes", top_k=10, mode=mode,
                                              filters=parse_filters(filters))).results
            return [Path(h.doc_id).name for h in hits]

        assert found("zebra", "lexical") == ["a.md"]
        [best, *_] = facet.search(SearchRequest("zebra handbook", "notes", mode="dense")).results
        # the text embedded holds the title: cosine 0.65 (0.32 for the body alone, first only
        # because the other note is further off)
        assert Path(best.doc_id).name == "a.md" and best.score > 0.5
        assert found("animals", "dense", "zip=012345") == ["a.md"]
        assert found("animals", "dense", "zip:=5349") == ["b.md"]  # a number, as written
    finally:
        facet.close()
