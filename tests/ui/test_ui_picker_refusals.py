"""What an explorer found on the Index and Collections tabs, checked on the page's own
handlers (``ui.app.build_ui``'s events, over a real facade: SQLite, the local vector store,
minilm): the server's data folder (under an allowed root) offered and indexed as a source (its
vector store's json files, the staged uploads), a second click on "Index the folder" queuing
the same job again, and refusals that put "Error" badges over the tables, the confirmation box
and the upload zone. The browser side (Enter in
the folder picker, the badges) is in ``test_browser_pickers.py``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.core import Facet
from tests.ui.conftest import notes_facet


@pytest.fixture(scope="module")
def page(minilm, tmp_path_factory) -> Iterator[tuple[Any, Facet, Path]]:
    """The page's Blocks over a facade whose data folder lies under the one allowed root."""
    pytest.importorskip("gradio")
    from ui.app import build_ui

    root = tmp_path_factory.mktemp("picker-root")
    facet = notes_facet(root, minilm)  # data folder: root / "data"
    (root / "docs").mkdir()
    (root / "docs" / "a.txt").write_text("Notes about the lighthouse keeper's garden.")
    (root / "data" / "uploads" / "notes").mkdir(parents=True, exist_ok=True)
    settings = facet.settings.model_copy(update={"ui_allowed_roots": [root]})
    demo = build_ui(facet, settings, export_dir=tmp_path_factory.mktemp("exports"))
    yield demo, facet, root
    facet.close()


def _fn(demo: Any, api_name: str) -> Any:
    return next(f for f in demo.fns.values() if f.api_name == api_name)


def _dependency(demo: Any, api_name: str) -> dict[str, Any]:
    return next(d for d in demo.config["dependencies"] if d.get("api_name") == api_name)


def _refusal(call: Any, *args: Any) -> str:
    import gradio as gr

    with pytest.raises(gr.Error) as info:
        call(*args)
    return str(info.value.message)


def test_the_data_folder_is_not_offered_as_a_folder_to_index(page) -> None:
    demo, facet, root = page
    data = facet.settings.data_dir.resolve()
    *_, folders = _fn(demo, "pickers").fn(None, None, None, None, None)
    offered = [Path(f) for f in folders["choices"]]
    assert root.resolve() / "docs" in offered
    assert not [f for f in offered if f == data or f.is_relative_to(data)], offered
    assert root.resolve() in offered  # it holds the data folder: indexed without it (below)


def test_the_data_folder_and_a_folder_in_it_are_refused_a_root_holding_it_is_walked_without_it(
        page) -> None:
    demo, facet, root = page
    index_folder = _fn(demo, "index_folder").fn
    before = len(facet.jobs(limit=100))
    data = facet.settings.data_dir
    for folder in (str(data), str(data / "uploads" / "notes"), "data/uploads"):
        message = _refusal(index_folder, folder, None, "minilm", "scratch")
        assert "the server's own data folder" in message and "cannot be indexed" in message
    assert len(facet.jobs(limit=100)) == before  # no job was queued
    # The root holding it: its own documents, none of the data folder's files (the edge
    # store's config and segment json files, a staged upload), counted and indexed alike.
    (root / "data" / "uploads" / "notes" / "staged.txt").write_text("a staged upload")
    assert list((root / "data").rglob("*.json")), "the store should hold json files here"
    mine = {root / "notes.jsonl", root / "docs" / "a.txt"}
    assert facet.estimate_documents(root) == facet.estimate_documents(root / "notes.jsonl") + 1
    report = facet.index(root, "whole-root")
    assert report.docs_failed == 0 and facet.collection("whole-root").documents == \
        facet.estimate_documents(root / "notes.jsonl") + 1, report
    from indexer.parsing import discover_files

    files, _ = discover_files(root, [facet.settings.data_dir])
    assert set(files) == {p.resolve() for p in mine}
    assert any(p.is_relative_to(data.resolve()) for p in discover_files(root)[0])  # unexcluded
    assert "outside the folders" in _refusal(index_folder, "/etc", None, "minilm", "scratch")


def test_refusals_leave_the_other_outputs_as_they_were(page) -> None:
    """Gradio marks every output of a failed event with an "Error" badge unless its progress is
    hidden: a wrong confirmation covered both tables and the confirmation box, an upload with
    no file the upload zone. The reason goes to the status areas (``failed``)."""
    demo, _, _ = page
    for api_name in ("delete_collection", "index_upload", "index_folder"):
        assert _dependency(demo, api_name)["show_progress"] == "hidden", api_name


def test_the_index_buttons_are_disabled_while_their_request_runs(page) -> None:
    demo, _, _ = page
    ids = {block._id: getattr(block, "elem_id", None) for block in demo.blocks.values()}
    for button in ("index-folder-button", "index-upload-button"):
        # The click first disables the button (in the page, no server round trip)...
        disabling = [d for d in demo.config["dependencies"]
                     if [ids.get(t[0]) for t in d["targets"]] == [button]
                     and [ids.get(o) for o in d["outputs"]] == [button]]
        assert disabling, button


def test_enter_in_the_folder_picker_keeps_what_was_typed(page) -> None:
    """The picker's focus installs the page's own Enter (the browser test presses it)."""
    demo, _, _ = page
    folder_js = [d["js"] for d in demo.config["dependencies"]
                 if d.get("js") and "#index-folder input" in d["js"]]
    assert folder_js and "stopImmediatePropagation" in folder_js[0]
