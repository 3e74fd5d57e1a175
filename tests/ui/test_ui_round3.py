"""What a person saw in a browser (third round), checked at the handlers and the page's wiring:
a job bar whose collection was deleted, a clustering that could not be stopped (Stop, or the
page going away), Enter in the one-line boxes of every tab, a cut Cluster instruction said, and
the CSV export folder left in /tmp by every start. Over a real facade (SQLite, the local
vector store, minilm); the browser side is in ``test_browser_round3.py``."""

from __future__ import annotations

import gc
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from app.core import Facet
from tests.ui.conftest import NOTES, notes_facet

TEXTS = NOTES


@pytest.fixture(scope="module")
def facet(minilm, tmp_path_factory) -> Iterator[Facet]:
    pytest.importorskip("gradio")
    facet = notes_facet(tmp_path_factory.mktemp("round3"), minilm)
    yield facet
    facet.close()


@pytest.fixture
def handlers(facet, tmp_path):  # type: ignore[no-untyped-def]
    from ui.handlers import UiHandlers

    return UiHandlers(facet, facet.settings, export_dir=tmp_path)


def test_a_job_whose_collection_was_deleted_says_so_and_stops_polling(facet, handlers,
                                                                      tmp_path) -> None:
    """The bar's job went with its deleted collection: every tick was a "no index job N"
    toast (11 in 9 s) under a bar still saying "queued", the Cancel button shown."""
    source = tmp_path / "gone"
    source.mkdir()
    (source / "a.txt").write_text("The keeper wound the clock at dusk.")
    job_id = facet.index(source, "short-lived").job_id
    handlers.job_status(job_id, 1)  # the bar saw it (and its collection) before
    facet.delete_collection("short-lived")
    html, errors, timer = handlers.job_status(job_id, 1)
    assert f"Job {job_id} into <b>short-lived</b> is <b>gone</b>" in html
    assert "short-lived was deleted" in html
    assert errors == []
    assert timer.active is False  # polling stops
    assert handlers.cancel_button(job_id).visible is False


def _cluster_args(instruction: str) -> list[Any]:
    from ui.handlers import SOURCE_TEXTS

    return [SOURCE_TEXTS, None, "", 0, "", "", "\n".join(TEXTS), None, None, instruction, 2,
            "minilm", None]


def test_a_clustering_stops_on_stop_or_when_its_page_goes(handlers) -> None:
    """Nothing stopped a clustering (InBedder's takes minutes): not a button, not closing the
    page, and every search of every page waited behind it. Stop, or the page's unload, has it
    end at its next step, said as stopped."""
    import gradio as gr
    from gradio.context import LocalContext

    for how in ("stop", "unload"):
        session = f"page-{how}"
        reached, go = threading.Event(), threading.Event()
        outcome: dict[str, Any] = {}

        def progress(fraction: float, desc: str = "", reached: threading.Event = reached,
                     go: threading.Event = go) -> None:
            if desc != "starting" and not reached.is_set():
                reached.set()
                go.wait(30)

        def run(session: str = session, progress: Any = progress,
                outcome: dict[str, Any] = outcome) -> None:
            LocalContext.request.set(SimpleNamespace(session_hash=session))  # type: ignore[arg-type]
            try:
                outcome["result"] = handlers.cluster(*_cluster_args("What is this about?"),
                                                     progress=progress)
            except gr.Error as e:  # pragma: no cover (the old code's, failing below)
                outcome["error"] = str(e.message)

        thread = threading.Thread(target=run)
        thread.start()
        assert reached.wait(30)
        request = SimpleNamespace(session_hash=session)
        assert handlers.stop_clusters("another-page") == 0  # another page's is not stopped
        if how == "stop":
            assert "Clustering stopped" in handlers.stop_cluster(request)
        else:
            handlers.page_closed(request)
        go.set()
        thread.join(30)
        summary, figure, rows, csv = outcome["result"]  # a stopped run is no failure
        assert "Clustering stopped: nothing was kept" in summary
        assert (figure, rows, csv) == (None, [], None)
        assert handlers.stop_clusters(session) == 0  # nothing left running for the page


def test_a_cut_cluster_instruction_is_said(handlers) -> None:
    """Cut to 2,000 characters silently, then refused as taking "1000 of the 256 tokens",
    counted on the cut text, with no word of the cut (the Search tab says "Shortened")."""
    import gradio as gr

    with pytest.warns(UserWarning, match="only the first 2,000 were used"), \
            pytest.raises(gr.Error) as info:
        handlers.cluster(*_cluster_args("x " * 3000))
    assert "only the first 2,000 were used" in str(info.value.message)


def test_enter_runs_each_tab_from_its_one_line_boxes(facet) -> None:
    """Enter ran only the Search tab's Query box; the Instruction, Filters and k boxes, and
    every box of Compare and Cluster, did nothing. A multi-line box keeps Enter as a new line.
    The Cluster tab has a Stop that cancels its run, and a page's unload stops its work."""
    from ui.app import build_ui

    demo = build_ui(facet, facet.settings)
    try:
        by_id = {b.elem_id: b for b in demo.blocks.values() if getattr(b, "elem_id", None)}
        fns = list(demo.fns.values())

        def runs(elem_id: str) -> set[str]:
            block = by_id[elem_id]
            return {getattr(fn.fn, "__name__", "") for start in fns
                    if (block._id, "submit") in [(t[0], t[1]) for t in start.targets]
                    for fn in fns if fn.trigger_after == start._id}

        names = {"search": ["search-query", "search-instruction", "search-filters", "search-k"],
                 "compare": ["compare-query", "compare-a", "compare-b", "compare-k"],
                 "cluster": ["cluster-instruction", "cluster-k", "cluster-limit"]}
        for handler, boxes in names.items():
            for box in boxes:
                assert handler in runs(box), f"Enter in {box} does not run {handler}"
        assert runs("cluster-texts") == set()  # Enter is a new line there
        cluster = next(fn for fn in fns if fn.name == "cluster")
        stop_button = by_id["cluster-stop-button"]._id
        assert any(cluster._id in (fn.cancels or []) for fn in fns
                   if (stop_button, "click") in [(t[0], t[1]) for t in fn.targets])
        assert any(t[1] == "unload" for fn in fns for t in fn.targets)
    finally:
        demo.close()


def test_the_export_folder_is_made_when_used_and_removed_with_the_handlers(facet, tmp_path,
                                                                           monkeypatch) -> None:
    """Each start made a /tmp/facet-ui-* folder for CSV exports and left it (1,593 there)."""
    from ui.handlers import UiHandlers

    # A temporary folder of its own: tests beside it (another worker) make theirs in /tmp.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    temp = Path(tempfile.gettempdir())
    before = set(temp.glob("facet-ui-*"))
    handlers = UiHandlers(facet, facet.settings)
    assert set(temp.glob("facet-ui-*")) == before  # none until a clustering exports
    _, _, _, csv = handlers.cluster(*_cluster_args("What is this about?"))
    folder = Path(csv).parent
    assert folder.is_dir() and folder.name.startswith("facet-ui-")
    handlers.close()
    assert not folder.exists()
    assert set(temp.glob("facet-ui-*")) == before
    # Not closed: it goes with the handlers (a server's, at its exit), and only its own.
    other = UiHandlers(facet, facet.settings)
    mine = other.export_dir
    del other
    gc.collect()
    assert not mine.exists()
    assert set(temp.glob("facet-ui-*")) == before


def test_a_stop_pressed_as_a_run_ended_does_not_turn_the_next_refusal_into_stopped(handlers) -> None:
    """Stop pressed as a clustering ended left the page's flag set, cleared only once the next
    run's checks passed: a next run with k = 1 was refused, and the summary said "Clustering
    stopped: nothing was kept" instead of why (a review of the fifth session of 2026-12-04)."""
    import gradio as gr
    from gradio.context import LocalContext

    request = SimpleNamespace(session_hash="page-late-stop")
    LocalContext.request.set(request)  # type: ignore[arg-type]
    handlers.cluster(*_cluster_args("What is this about?"))
    handlers.stop_cluster(request)  # as it ended
    bad = _cluster_args("What is this about?")
    bad[10] = 1  # k
    with pytest.raises(gr.Error):
        handlers.cluster(*bad)
    summary = handlers.cluster_failed(request)[3]
    assert "Clustering stopped" not in summary and "k must be" in summary, summary


def test_compare_with_no_result_on_either_side_says_so() -> None:
    """Both lists empty (a filter no document holds) read "0 of the top 1 results are shared"."""
    from app.services.search import SearchResponse
    from ui.render import compare_html

    def empty(instruction: str) -> SearchResponse:
        return SearchResponse(query="card", instruction=instruction, collection="notes",
                              embedder="minilm", reranker=None, results=[], timings_ms={})

    html = compare_html(empty("A"), empty("B"))
    assert "Neither instruction found a result." in html and "top 1" not in html


def test_an_uploads_tooltip_never_shows_a_relative_data_folders_path(minilm, tmp_path, monkeypatch) -> None:
    """With FACET_DATA_DIR relative (or through a link), the search results' check that hides
    the upload folder compared the keys (resolved) with the folder as given: every uploaded
    document's tooltip showed the server's full path, which the Documents view hides."""
    import re
    import time

    from app.encoding import EmbedderCache
    from app.settings import FacetSettings
    from ui.handlers import UiHandlers

    monkeypatch.chdir(tmp_path)
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    settings = FacetSettings(data_dir=Path("data"), default_embedder="minilm")  # as FACET_DATA_DIR=data
    facet = Facet.for_serving(settings, embedders=cache)
    try:
        (tmp_path / "in").mkdir()
        (tmp_path / "in" / "letter.txt").write_text("The parcel locker swallowed my replacement card.")
        handlers = UiHandlers(facet, facet.settings, export_dir=tmp_path / "exports")
        job_id = handlers.index_upload([str(tmp_path / "in" / "letter.txt")], None, "minilm", "up")[0]
        deadline = time.monotonic() + 60
        while facet.job(job_id).state in ("queued", "running") and time.monotonic() < deadline:
            time.sleep(0.1)
        html, _ = handlers.search("parcel locker", "", "up", None, 3, "", False, None, True)
        assert "letter.txt" in html
        assert not [t for t in re.findall(r'title="([^"]*)"', html) if str(tmp_path) in t], html
    finally:
        facet.close()
