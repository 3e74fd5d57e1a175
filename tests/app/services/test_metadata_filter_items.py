"""Each metadata field a search result shows (the UI's results table) pasted back into the filter
box finds its document, on the real store, or is shown as ``key: value`` where no filter can
match it. Strings holding ``;``, a line end, a run of spaces or spaces around them, a key ending
in ``:`` or named as a result's own field, lists: each was shown as an item that found nothing
or was refused (the review of the second session of 2026-12-05)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from app.services.indexing import IndexService
from app.services.search import SearchRequest, SearchService
from ui import render
from ui.inputs import parse_filter_text

FIELDS = {
    "plain": "card arrival", "semi": "a;b", "padded": " padded ", "lines": "two\nlines", "runs": "a  b",
    "empty": "", "k:": "colon key", "source": "my own source field", "meta.x": "dotted",
    "tags": ["x y", "z;w", 3], "year": 2020, "price": 6.5, "big": 2**70, "none": None,
    "obj": {"a": 1}, "a=b": "equals in the key", "semi;key": "v", " spaced": "v",
}


def _lines(cell: str) -> list[str]:
    """The metadata cell as a user copies it: one line a field, the HTML read as text."""
    return [html.unescape(re.sub(r"<[^>]+>", "", line)) for line in cell.split("<br>")]


@pytest.fixture
def indexed(make_ctx, tmp_path: Path):
    path = tmp_path / "rows.jsonl"
    rows = [{"_id": "target", "text": "The parcel arrived damaged at the depot.", **FIELDS},
            {"_id": "other", "text": "The parcel arrived damaged at the depot too.", "plain": "other"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ctx = make_ctx()
    IndexService(ctx).index(path, "meta")
    return ctx


def test_each_shown_field_pasted_back_finds_its_document(indexed) -> None:
    service = SearchService(indexed)
    response = service.search(SearchRequest("parcel damaged", "meta", top_k=5, filters={}))
    [target] = [r for r in response.results if r.doc_id.endswith("target")]
    cell = render.results_html(response).split('<div class="facet-meta">')[1 + response.results.index(target)]
    cell = cell.split("</div>", 1)[0]
    lines = dict(zip(target.metadata, _lines(cell), strict=True))
    unmatchable = {"a=b", "semi;key", " spaced"}  # (the indexer keeps no null or object)
    for key, line in lines.items():
        if key in unmatchable:
            assert line.startswith(f"{key}: "), line
            continue
        found = service.search(SearchRequest("parcel damaged", "meta", top_k=5, filters=parse_filter_text(line)))
        assert [r.doc_id.rsplit("#", 1)[-1] for r in found.results] == ["target"], (key, line)
    assert lines["source"] == "meta.source=my own source field"
    assert lines["tags"] == 'tags=x y; tags:="z;w"; tags:=3' and lines["k:"] == 'k::="colon key"'
    assert lines["runs"] == 'runs:="a  b"'  # the cell keeps its spaces (white-space: pre-wrap)
    assert "white-space: pre-wrap" in render.CSS.split(".facet-meta {", 1)[1].split("}", 1)[0]
