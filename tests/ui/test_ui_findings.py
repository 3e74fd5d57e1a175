"""What a person saw in the page (an explorer driving it in chromium), each checked where it is
made: a failed run's reason in its result area, the Cluster tab's instruction filled in, a
too-large k told in each edge's own words, the run buttons disabled while they run, the
Results (k) box's changed values said, a reranked search's first-stage score named by its
mode, a wrong delete confirmation named, and no "Job 0" box. Over a real facade (SQLite, the
local vector store, minilm); the browser side is in ``test_browser.py``."""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from typing import Any

import pytest

from app.core import Facet
from app.services.search import SearchResponse, SearchResult
from app.settings import FacetSettings
from tests.app.cli_runner import invoke_cli
from tests.ui.conftest import NOTES, notes_facet

TEXTS = NOTES


@pytest.fixture(scope="module")
def facet(minilm, tmp_path_factory) -> Iterator[Facet]:
    pytest.importorskip("gradio")
    facet = notes_facet(tmp_path_factory.mktemp("findings"), minilm)
    yield facet
    facet.close()


@pytest.fixture
def handlers(facet, tmp_path):  # type: ignore[no-untyped-def]
    from ui.handlers import UiHandlers

    return UiHandlers(facet, facet.settings, export_dir=tmp_path)


def _refusal(call: Any, *args: Any) -> str:
    import gradio as gr

    with pytest.raises(gr.Error) as info:
        call(*args)
    return str(info.value.message)


def test_a_failed_run_says_why_in_its_result_area(handlers) -> None:
    """The toast closes itself after 10 s; the area said "its message is shown above" with
    nothing above. The message is kept per page and handler, shown once, escaped once."""
    import gradio as gr
    from gradio.context import LocalContext

    from ui import render
    from ui.handlers import last_failure

    token = LocalContext.request.set(gr.Request(session_hash="page-1"))
    try:
        _refusal(handlers.search, "", "", "notes", None, 10, "", False, None, False, "auto")
        _refusal(handlers.search, "card", "", "<b>gone</b>", None, 10, "", False, None, False, "auto")
    finally:
        LocalContext.request.reset(token)
    assert last_failure(gr.Request(session_hash="page-2"), "search") is None  # another page's
    assert last_failure(gr.Request(session_hash="page-1"), "compare") is None
    message = last_failure(gr.Request(session_hash="page-1"), "search")
    assert message is not None and message.startswith("invalid collection name '<b>gone</b>'")
    assert last_failure(gr.Request(session_hash="page-1"), "search") is None  # shown once
    area = render.failed_html(message)
    assert "invalid collection name &#x27;&lt;b&gt;gone&lt;/b&gt;&#x27;" in area  # escaped once
    assert "<b>gone" not in area and "&amp;" not in area
    assert "shown above" not in area and "Nothing from an earlier run is shown here" in area
    # Not read again inside a live summary area: the error toast says it (Gradio's status).
    assert 'aria-live="off"' in area


def test_the_page_starts_ready_and_disables_its_run_buttons_while_they_run(tmp_path) -> None:
    pytest.importorskip("gradio")
    from ui.app import build_ui

    demo = build_ui(lambda: None, FacetSettings(data_dir=tmp_path))  # type: ignore[arg-type, return-value]
    by_id = {b.elem_id: b for b in demo.blocks.values() if getattr(b, "elem_id", None)}
    # A value, not a grey placeholder: the first Cluster click was refused as "empty".
    assert by_id["cluster-instruction"].value == "What is the topic of this text?"
    assert not by_id["cluster-instruction"].placeholder
    assert by_id["index-job"].visible is False  # "Job 0" stood on the Index tab
    for box in ("search-k", "compare-k"):  # no bounds of Gradio's: the handler says what it changed
        assert by_id[box].minimum is None and by_id[box].maximum is None
        assert by_id[box].precision is None and "1 to 50" in by_id[box].label
    fns = list(demo.fns.values())
    for name, button in (("search", "search-button"), ("compare", "compare-button"),
                         ("cluster", "cluster-button")):
        run = next(i for i, f in enumerate(fns) if f.api_name == name)
        before = fns[fns[run].trigger_after]
        after = {f.trigger_only_on_failure: f.fn() for f in fns if f.trigger_after == run
                 and [b.elem_id for b in f.outputs] == [button]}
        disabled = {"__type__": "update", "interactive": False}
        if name == "cluster":  # its summary emptied too (``run_button``'s ``clears``)
            assert [b.elem_id for b in before.outputs] == [button, "cluster-summary"]
            assert before.fn() == (disabled, "") and not before.queue
        else:
            assert [b.elem_id for b in before.outputs] == [button] and not before.queue
            assert before.fn() == disabled
        # Enabled again after the run, whether it succeeded or failed: `then`, and `failure`,
        # as the page runs only that one after a gr.Error (seen in test_browser.py).
        assert after == {flag: {"__type__": "update", "interactive": True} for flag in (False, True)}


def test_a_too_large_k_says_how_to_let_silhouette_choose_on_each_edge(facet, handlers,
                                                                       tmp_path) -> None:
    """The core's message named the command line's `--k 0` on the page and in the API."""
    from fastapi.testclient import TestClient

    from app.api import create_app
    from app.errors import InvalidRequestError
    from app.services.clustering import ClusterRequest
    from ui.handlers import NO_EXPLAINER, SOURCE_TEXTS

    with pytest.raises(InvalidRequestError) as core:
        facet.cluster(ClusterRequest("topic", texts=TEXTS[:3], k=5))
    assert str(core.value) == ("k=5 is more than the 3 texts to cluster; ask for at most 3, "
                               "or let k be chosen by silhouette")
    ui = _refusal(handlers.cluster, SOURCE_TEXTS, None, "", 0, None, None, "\n".join(TEXTS[:3]),
                  None, None, "topic", 5, "minilm", NO_EXPLAINER)
    assert ui.endswith("or let k be chosen by silhouette (set k to 0)") and "--k" not in ui
    with TestClient(create_app(facet)) as client:
        r = client.post("/cluster", json={"instruction": "topic", "texts": TEXTS[:2], "k": 3})
    api = r.json()["error"]["message"]
    assert r.status_code == 400 and api.endswith("chosen by silhouette (omit k)") and "--k" not in api
    # The CLI, over a collection (a file's texts are checked by the command itself).
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps({"id": f"r{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    env = {"FACET_DATA_DIR": str(tmp_path / "cli")}
    assert invoke_cli("index", str(source), "-c", "six", "--embedder", "minilm", env=env).returncode == 0
    result = invoke_cli("cluster", "--collection", "six", "--embedder", "minilm", "--explain", "",
                        "-i", "What does the customer want?", env=env)  # --k 8, the default
    assert result.returncode == 2, result.stderr
    assert "k=8 is more than the 6 texts to cluster; ask for at most 6, or let k be chosen by " \
           "silhouette (--k 0)" in result.stderr


def test_a_changed_results_k_is_said(handlers) -> None:
    """The slider's box put 100000 back to 50 and 0 to 1 in the browser, and Gradio rounded 2.5
    to 2, all silently: out of range or a fraction is cut with a notice, below 1 refused."""
    def search(k: float) -> str:
        return str(handlers.search("card refund", "", "notes", None, k, "", False, None, False,
                                   "lexical")[0])

    big = search(100000)
    assert "k is a whole number of results from 1 to 50; searched with 50, not 100000." in big
    half = search(2.5)
    assert "searched with 2, not 2.5." in half and half.count("<tr><td") == 2
    assert "facet-note" not in search(3)
    assert "at least 1, got 0" in _refusal(handlers.search, "card", "", "notes", None, 0, "", False,
                                           None, False, "lexical")
    compared = handlers.compare("my card", "Find lost cards", "Find refunds", "notes", "minilm", 2.5, "")
    assert "searched with 2, not 2.5." in compared


def _reranked(mode: str) -> SearchResponse:
    result = SearchResult(rank=1, score=0.963, doc_id="d", title=None, source="s", chunk_no=0,
                          text="card", snippet="card", highlights=[], start=0, end=4,
                          metadata={}, vector_score=9.538, rerank_score=0.963)
    return SearchResponse("card", "x", "c", "minilm", "instemb", [result], {}, mode=mode)


@pytest.mark.parametrize(("mode", "label"), [("lexical", "bm25"), ("hybrid", "fused"),
                                              ("dense", "vector")])
def test_a_reranked_first_stage_score_is_named_by_its_mode(mode: str, label: str) -> None:
    from ui import render

    for grouped in (False, True):
        page = render.results_html(_reranked(mode), group_by_document=grouped)
        assert f"0.963<br><small>{label} 9.538</small>" in page  # a BM25 score read "vector 9.538"


def test_a_wrong_delete_confirmation_is_named(handlers, facet) -> None:
    wrong = _refusal(handlers.delete_collection, "notes", "note")
    assert wrong.startswith("'note' does not match 'notes'") and "Nothing was deleted" in wrong
    empty = _refusal(handlers.delete_collection, "notes", " ")
    assert "type its name in the confirmation box first; nothing was deleted" in empty
    assert "notes" in [c.name for c in facet.collections()]


def test_a_fraction_in_a_cluster_box_is_shown_as_typed() -> None:
    """``{value:g}`` showed 50.0000001 as "50" in "must be a whole number, got 50"."""
    from app.errors import InvalidRequestError
    from ui.inputs import whole_number

    assert whole_number(None, "k", 0) == 0 and whole_number(6.0, "k", 0) == 6
    with pytest.raises(InvalidRequestError, match=r"Largest k to try must be a whole number, got 50\.0000001$"):
        whole_number(50.0000001, "Largest k to try", 10)
    with pytest.raises(InvalidRequestError, match="got nan"):
        whole_number(float("nan"), "k", 0)


def test_the_pages_headings_skip_no_level(tmp_path) -> None:
    """The page went from its h1 (Facet) to an h3 (Documents): a screen reader's list of headings
    read a level missing (the accessibility exploration). Every Markdown heading of the page, in
    order, is at most one level below the one before it."""
    pytest.importorskip("gradio")
    import itertools

    import gradio as gr

    from ui.app import build_ui

    demo = build_ui(lambda: None, FacetSettings(data_dir=tmp_path))  # type: ignore[arg-type, return-value]
    levels = [len(line) - len(line.lstrip("#"))
              for block in demo.blocks.values() if isinstance(block, gr.Markdown)
              for line in str(block.value or "").splitlines() if line.startswith("#")]
    assert levels[0] == 1 and len(levels) >= 2, levels
    assert all(b <= a + 1 for a, b in itertools.pairwise(levels)), levels


def test_an_uploads_skipped_blank_records_are_said_on_the_page(handlers, tmp_path) -> None:
    """A .csv row (or .jsonl line) skipped for a blank text was said in the server's log alone:
    the page's results were numbered without it, and nothing on it said so."""
    from ui.handlers import NO_EXPLAINER, SOURCE_TEXTS

    upload = tmp_path / "notes.csv"
    rows = [f'{i},"{t}"' for i, t in enumerate(TEXTS[:3])] + ["3,"]
    rows += [f'{i + 4},"{t}"' for i, t in enumerate(TEXTS[3:])]
    upload.write_text("id,text\n" + "\n".join(rows) + "\n", encoding="utf-8")
    handlers.upload_root = None  # (a file of the test's, not of Gradio's upload folder)
    summary, *_ = handlers.cluster(SOURCE_TEXTS, None, "", 0, None, None, "", str(upload), None,
                                   "topic", 2, "minilm", NO_EXPLAINER)
    assert "notes.csv: 1 record with a blank text skipped (row 5); the texts are numbered without it" \
        in html.unescape(str(summary)), summary


def test_an_upload_cut_by_the_limit_or_empty_is_said(handlers, tmp_path) -> None:
    """Helper-459's round in chromium (fifth session of 2026-12-05): 200,000 uploaded lines were
    clustered 500 at the box's default without a word; an empty or header-only upload was told to
    "paste one text per line or upload a file"; a limit of 1 said "clustering needs at least 2
    texts, got 1" of 30 pasted."""
    from ui.handlers import NO_EXPLAINER, SOURCE_TEXTS

    handlers.upload_root = None  # (files of the test's, not of Gradio's upload folder)
    lines = tmp_path / "many.txt"
    lines.write_text("\n".join(TEXTS * 3) + "\n", encoding="utf-8")
    summary, *_ = handlers.cluster(SOURCE_TEXTS, None, "", 4, None, None, "", str(lines), None,
                                   "topic", 2, "minilm", NO_EXPLAINER)
    said = html.unescape(str(summary))
    assert f"Clustering the first 4 of the {3 * len(TEXTS)} texts, as \u201cAt most this many " \
           "texts\u201d asks (0 = all)." in said, said
    for name, content, why in (("empty.txt", "", "it is empty"),
                               ("header.csv", "text,label\n", "a header without rows")):
        upload = tmp_path / name
        upload.write_text(content, encoding="utf-8")
        refused = _refusal(handlers.cluster, SOURCE_TEXTS, None, "", 0, None, None, "", str(upload),
                           None, "topic", 2, "minilm", NO_EXPLAINER)
        assert f"No texts in {name}: " in refused and why in refused, refused
    one = _refusal(handlers.cluster, SOURCE_TEXTS, None, "", 1, None, None, "\n".join(TEXTS), None,
                   None, "topic", 0, "minilm", NO_EXPLAINER)
    assert "At most this many texts must be 0 (all) or at least 2 (clustering needs 2), got 1" in one
