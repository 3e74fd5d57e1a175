"""Search notes found building RAG on Facet: typo hints for close spellings of a filter key, no
relative-path note for a URL, an empty word search's reason in the response's note, a rerank
unknown in process named as the rerank, and a date as a filter value."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest

from app.errors import UnknownModelError
from app.services.search import (
    NO_INDEXED_WORD,
    SearchRequest,
    why_no_results,
)


@pytest.fixture
def blog(facet, tmp_path: Path):
    """Two markdown posts with front matter (a URL source, tags, an intent, a date) and records."""
    root = tmp_path / "posts"
    root.mkdir()
    (root / "p7.md").write_text(
        "---\ntitle: Refunds\nsource: https://blog.example.com/p7\ntags: refunds\n"
        "intent: refund\npublished: 2024-05-01\n---\n\nHow to ask for a refund at the café.\n")
    (root / "p8.md").write_text(
        "---\ntitle: Cards\nsource: https://blog.example.com/p8\ntags: cards\n"
        "intent: card\npublished: 2024-06-02\n---\n\nMy card was declined at the supermarket.\n")
    facet.index(root, "blog")
    return facet


def _note(facet, **filters) -> str:
    response = facet.search(SearchRequest("refund", "blog", mode="dense", filters=filters))
    assert response.results == []
    return response.note or ""


def test_a_close_spelling_of_a_filter_key_is_suggested(blog) -> None:
    """`tag` for `tags`, `intnet` for `intent`: only "no document has a field" was said; a
    difference of case alone kept its hint."""
    assert "no document has a field 'tag' (did you mean 'tags'?)" in _note(blog, tag="refunds")
    assert "no document has a field 'intnet' (did you mean 'intent'?)" in _note(blog, intnet="refund")
    assert "no document has a field 'Tags' (did you mean 'tags'?)" in _note(blog, Tags="refunds")
    assert "no document has a field 'INTNET' (did you mean 'intent'?)" in _note(blog, INTNET="refund")
    far = _note(blog, colour="red")
    assert "no document has a field 'colour'" in far and "did you mean" not in far
    both = _note(blog, tag="refunds", intnet="refund")
    assert both.count("did you mean") == 2


def test_a_url_source_gets_no_relative_path_note(blog) -> None:
    """`source=https://blog.example.com/p7` (front matter's source) was told it is a relative
    path, shown as 'https:/blog.example.com/p7'."""
    note = _note(blog, source="https://blog.example.com/p7")
    assert "meta.source" in note
    assert "relative path" not in note and "https:/blog" not in note
    assert "relative path" not in _note(blog, source="C:/posts/p9.md")
    # A relative path still gets its note, its value as given (not normalised).
    relative = _note(blog, source="posts//p9.md")
    assert "'posts//p9.md' is a relative path" in relative
    assert "none ending in 'posts//p9.md'" in relative and "'posts/p9.md'" not in relative


def test_an_empty_word_search_says_why_in_its_note(blog) -> None:
    """`mode="lexical"` "cafe" over "café": [] with a null note; only the CLI and UI said why."""
    response = blog.search(SearchRequest("cafe", "blog", mode="lexical"))
    assert response.results == []
    assert response.note is not None and response.note.startswith(NO_INDEXED_WORD)
    assert response.to_dict()["note"] == response.note  # the API's and LangChain's note
    assert why_no_results(response, None) == response.note  # the CLI and the UI: said once
    assert why_no_results(response, {}) == response.note
    found = blog.search(SearchRequest("refund", "blog", mode="lexical"))
    assert found.results and found.note is None


def test_an_unknown_rerank_in_process_names_the_rerank(blog) -> None:
    """In process `rerank="nope"` said "unknown embedder 'nope'", as if the embedder were wrong."""
    with pytest.raises(UnknownModelError) as caught:
        blog.search(SearchRequest("refund", "blog", rerank="nope"))
    message = str(caught.value)
    assert message.startswith("rerank 'nope': unknown embedder 'nope': not a registered name"), message
    assert "minilm" in message and caught.value.param == "rerank"


def test_a_date_filter_value_matches_its_iso_text(blog) -> None:
    """A `datetime.date` was refused with "use a string, a number..."; dates are stored as text."""
    response = blog.search(SearchRequest("refund", "blog", filters={"published": datetime.date(2024, 5, 1)}))
    assert [r.title for r in response.results] == ["Refunds"]
    assert SearchRequest("x", "blog", filters={"published": datetime.date(2024, 5, 1)}).filters == {
        "published": "2024-05-01"}
    at = datetime.datetime(2024, 5, 1, 9, 30)
    assert SearchRequest("x", "blog", filters={"at": [at, "y"]}).filters == {"at": ["2024-05-01T09:30:00", "y"]}
    assert json.dumps(SearchRequest("x", "b", filters={"d": (datetime.date(2024, 1, 2),)}).filters)
