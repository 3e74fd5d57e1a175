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


@pytest.mark.parametrize("backend", ["edge", "local"])
def test_a_true_false_field_is_shown_as_the_store_in_use_can_find_it(backend, minilm, tmp_path: Path) -> None:
    """The Search tab showed `flag:=true` on the edge store, which refuses a filter on true/false
    (qdrant-edge 0.9 reads them as 1/0): pasted back, the search failed. There it is shown as
    `flag: true`; on a store that matches them (local mode, a server) as the item that finds it."""
    pytest.importorskip("gradio")
    from gradio import Error as UiError

    from app.core import Facet
    from app.encoding import EmbedderCache
    from app.settings import FacetSettings
    from ui.handlers import UiHandlers

    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"_id": "target", "text": "The parcel arrived damaged.", "flag": True,
                                "tags": [f"t{i:03}" for i in range(60)]}) + "\n")
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facet = Facet(FacetSettings(data_dir=tmp_path / "data", vector_backend=backend,
                                ui_allowed_roots=[tmp_path]), embedders=cache)
    try:
        facet.index(path, "flags")
        h = UiHandlers(facet, facet.settings)
        page, _line = h.search("parcel damaged", "", "flags", "minilm", 3, "", False, None, False, "dense")
        cell = str(page).split('<div class="facet-meta">', 1)[1].split("</div>", 1)[0]
        # As a user copies the cell: the cut list's "; … (N more values not shown)" is in a span
        # not copied (.facet-more, user-select: none; its copy is checked in chromium).
        copied = _lines(re.sub(r'<span class="facet-more">.*?</span>', "", cell))
        shown = dict(zip(["flag", "tags"], copied, strict=True))
        assert "more values not shown" in cell and "more values not shown" not in shown["tags"]
        if backend == "edge":
            assert shown["flag"] == "flag: true", shown
            with pytest.raises(UiError, match="the edge store cannot match true/false"):
                h.search("parcel damaged", "", "flags", "minilm", 3, "flag:=true", False, None, False, "dense")
        else:
            assert shown["flag"] == "flag:=true", shown
        for line in shown.values():
            if ": " in line and not line.startswith("tags"):
                continue
            found, _ = h.search("parcel damaged", "", "flags", "minilm", 3, line, False, None, False, "dense")
            assert "target" in str(found) and "No results" not in str(found), line
    finally:
        facet.close()
