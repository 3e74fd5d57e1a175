"""A number filter that no document's field holds came back empty with no note: `n:=1.5` on a
field of whole numbers 0-6, and `vip:=1` on a field of true/false, which the edge store's
refusal of booleans ("reads them as the integers 1/0") invites as a retry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.services.search import SearchRequest


@pytest.fixture
def records(facet, tmp_path: Path):
    path = tmp_path / "bank.jsonl"
    path.write_text("".join(json.dumps({"id": f"b{i}", "text": f"my card payment {i} was declined",
                                        "n": i % 4, "price": i + 0.5, "vip": i % 2 == 0,
                                        "code": str(i)}) + "\n" for i in range(8)))
    facet.index(path, "bank")
    return facet


def _note(facet, **filters) -> str:
    response = facet.search(SearchRequest("card", "bank", mode="dense", filters=filters))
    assert response.results == []
    return response.note or ""


def test_a_number_no_document_holds_is_named(records) -> None:
    assert _note(records, n=1.5) == "no document has the number 1.5 in field 'n'"
    assert _note(records, n=[7, 9]) == "no document has the number 7 or 9 in field 'n'"
    assert _note(records, price=2.25) == "no document has the number 2.25 in field 'price'"
    # One of the list held: the search finds it, no note.
    hit = records.search(SearchRequest("card", "bank", mode="dense", filters={"n": [3, 9]}))
    assert hit.results and hit.note is None
    # Whole-valued forms are the same number: 2.0 finds n 2.
    assert records.search(SearchRequest("card", "bank", mode="dense", filters={"n": 2.0})).results


def test_a_number_on_a_field_of_true_false_says_what_the_field_holds(records) -> None:
    assert _note(records, vip=1) == "field 'vip' holds true/false, which no number matches (1 matched none)"
    # The text "1" was told to send the number 1 (SQLite reads true as 1), which the note above
    # then says matches none.
    assert "vip:=1" not in _note(records, vip="1") and '{"vip": 1}' not in _note(records, vip="1")
    # Nor was it left with no hint at all, where `vip=true` is told `vip:=true`.
    for text, value in (("1", "true"), ("0", "false"), (" 1.0", "true")):
        note = _note(records, vip=text)
        assert "'vip' holds true/false" in note or "a field of true/false" in note, (text, note)
        assert f"vip:={value}" in note, (text, note)


def test_a_field_of_text_keeps_its_own_note(records) -> None:
    # (b8d6d1a's note, unchanged: a number on a field of text.)
    assert "no document has the number 99 in field 'code': it holds text" in _note(records, code=99)


def test_a_title_filter_says_when_no_document_has_that_title(records, tmp_path) -> None:
    """`title=x` on a collection none of whose documents has a title came back empty with no
    note: a title is a document's own field, which the missing-field note never read."""
    assert _note(records, title="x") == (
        "no document has a title (a Markdown file's front-matter title or first heading, an HTML "
        "page's <title>, a PDF's or Word file's title property, a jsonl/csv record's title field)")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# Card refunds\n\nhow a card payment is refunded\n")
    (notes / "b.md").write_text("# Loans\n\nhow a loan is paid back\n")
    records.index(notes, "titled")
    found = records.search(SearchRequest("card", "titled", mode="dense",
                                         filters={"title": "card refunds"}))
    assert found.results == [] and found.note == (
        "no document is titled 'card refunds' (did you mean 'Card refunds'?)")
    assert records.search(SearchRequest("card", "titled", mode="dense",
                                        filters={"title": "Card refunds"})).results


def test_a_files_name_is_its_title_in_the_note_as_in_the_search(records, tmp_path) -> None:
    """A file of no title of its own is titled by its name where it is searched (`title=notes.txt`
    found it), but a near miss was told "no document has a title", and a clustering of
    `title=notes.txt` that matched a chunk said so in the same breath (the filters review of the
    seventh session of 2026-12-06)."""
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("notes about card rates")
    (plain / "other.txt").write_text("a card payment was declined")
    records.index(plain, "plain")
    found = records.search(SearchRequest("card", "plain", mode="dense",
                                         filters={"title": "notes.txt"}))
    assert [r.title for r in found.results] == ["notes.txt"] and found.note is None
    missed = records.search(SearchRequest("card", "plain", mode="dense",
                                          filters={"title": "Notes.txt"}))
    assert missed.results == [] and missed.note == (
        "no document is titled 'Notes.txt' (did you mean 'notes.txt'?)")
    # A record of no title has none (its file's name is not its title): still said so.
    assert _note(records, title="bank.jsonl").startswith("no document has a title")
