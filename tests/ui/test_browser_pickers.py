"""The Index tab's folder picker and the refusals of the Index and Collections tabs in a real
browser, as ``test_browser.py`` drives the page (Debian's chromium, Playwright), over a
``facet ui`` page of its own whose data folder lies under the allowed root: an emptied folder
box and Enter became the root itself (and "Index the folder" queued all of it), "docs3" and
Enter became "docs30"; the data folder was offered; a wrong delete confirmation covered both
tables and the confirmation box with "Error" badges, and an upload with no file the upload
zone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import served_notes_ui
from .test_browser import CHROMIUM, browser_page, fill_picker, open_tab, toast_text

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium binary: install Debian's with `apt-get install -y "
                             "chromium` (Playwright's browser download is not used)")


SPECCED = "minilm[instruction_weight=1]"


@pytest.fixture(scope="module")
def served(minilm, tmp_path_factory) -> Iterator[tuple[Any, Any, Path]]:
    pytest.importorskip("gradio")
    root = tmp_path_factory.mktemp("pickers-root")
    for name in ("docs3", "docs30"):
        (root / name).mkdir()
        (root / name / "a.txt").write_text(f"Notes kept in {name}.")
    with served_notes_ui(root, minilm, tmp_path_factory.mktemp("exports")) as (demo, facet):
        from app.services.indexing import IndexOptions

        # A collection read with another embedder than the server's default (the Cluster tab's).
        facet.index(root / "docs3", "specced", IndexOptions(embedder=SPECCED))
        facet.index(root / "docs3", "plain")  # ("notes" is deleted by a test here)
        yield demo, facet, root


@pytest.fixture(scope="module")
def page(served) -> Iterator[Any]:
    demo, _, _ = served
    with browser_page(demo.local_url, "(document.querySelector('#search-collection input') "
                                      "|| {}).value === 'notes'") as page:
        yield page


def _folder_box(page) -> Any:
    return page.locator("#index-folder input")


def _options(page) -> list[str]:
    box = _folder_box(page)
    box.click()
    page.locator('[data-testid="dropdown-option"]').first.wait_for()
    options = page.locator('[data-testid="dropdown-option"]').all_inner_texts()
    return [o.replace("✓", "").strip() for o in options]


def _options_close(page) -> None:
    """After Enter the folder list closes by itself: in about one run in three it stayed open
    (an update queued by the typing opened it again after the box's blur) and took the next
    click, meant for "Index the folder", as a choice of the list."""
    page.locator('[data-testid="dropdown-option"]').first.wait_for(state="hidden", timeout=3000)


def _error_badges(page, area: str) -> int:
    """The "Error" badges shown over ``area`` (Gradio keeps a hidden one in the page)."""
    return int(page.locator(f"{area} [data-testid='status-tracker']:not(.hide) .error").count())


def test_enter_in_the_folder_picker_keeps_what_was_typed(page, served) -> None:
    _, facet, root = served
    open_tab(page, "Index")
    offered = _options(page)
    assert str(root / "docs3") in offered and str(root / "docs30") in offered
    # The root holding the data folder is offered (indexed without it), the data folder not.
    assert offered[0] == str(root), offered
    assert not [o for o in offered if o.startswith(str(root / "data"))], offered
    box = _folder_box(page)
    box.fill("")
    box.press("Enter")
    page.wait_for_timeout(300)
    assert box.input_value() == ""  # it was the first choice, the root itself
    _options_close(page)
    assert box.input_value() == ""
    jobs = len(facet.jobs(limit=100))
    page.click("#index-folder-button")
    page.locator("#index-status", has_text="Pick a folder first").wait_for()
    assert "Pick a folder first" in toast_text(page)
    assert len(facet.jobs(limit=100)) == jobs  # nothing queued

    box.click()
    box.fill("docs3")
    box.press("Enter")
    page.wait_for_timeout(300)
    assert box.input_value() == "docs3"  # not docs30, the first choice holding it
    # The focus goes on to the button that uses it (it fell to the page's body).
    assert page.evaluate("document.activeElement && document.activeElement.id") == "index-folder-button"
    # A choice highlighted with the arrow keys is still picked by Enter.
    box.click()
    box.fill(str(root / "docs30"))
    box.press("ArrowDown")
    box.press("Enter")
    page.wait_for_timeout(300)
    assert box.input_value() == str(root / "docs30")


def test_a_refusal_leaves_the_tables_the_box_and_the_upload_zone(page) -> None:
    from playwright.sync_api import expect

    open_tab(page, "Index")
    page.click("#index-upload-button")
    page.locator("#index-status", has_text="Upload at least one file first").wait_for()
    toast_text(page)
    assert _error_badges(page, "#index-files") == 0
    expect(page.locator("#index-upload-button")).to_be_enabled()

    open_tab(page, "Collections")
    page.locator("#collections-table", has_text="notes").wait_for()
    box = page.locator("#delete-collection input")
    box.click()
    box.fill("notes")
    box.press("Enter")
    page.locator("body").click(position={"x": 5, "y": 5})
    page.fill("#delete-confirm textarea", "note")
    page.click("#delete-button")
    page.locator("#delete-status", has_text="does not match").wait_for()
    toast_text(page)
    for area in ("#collections-table", "#jobs-table", "#delete-confirm"):
        assert _error_badges(page, area) == 0, area
    assert "notes" in page.inner_text("#collections-table")
    confirm = page.locator("#delete-confirm textarea")
    expect(confirm).to_be_visible()
    expect(confirm).to_have_value("note")  # as typed: fix it and delete again
    confirm.fill("notes")
    page.click("#delete-button")
    page.locator("#delete-status", has_text="does not match").wait_for(state="detached")
    expect(page.locator("#collections-table")).not_to_contain_text("notes")


def test_the_cluster_tabs_embedder_follows_the_collection_picked(page) -> None:
    """Picking a collection on the Cluster tab picks the embedder it was read with, as the CLI
    and POST /cluster cluster it when none is named; the picker kept the server's default
    (minilm), so a collection indexed with InstEmb was clustered with minilm's vectors."""
    open_tab(page, "Cluster")
    picked = "(document.querySelector('#cluster-embedder input') || {}).value === "
    for collection, embedder in (("plain", "minilm"), ("specced", SPECCED), ("plain", "minilm")):
        fill_picker(page, "#cluster-collection", collection)
        page.wait_for_function(picked + repr(embedder))
