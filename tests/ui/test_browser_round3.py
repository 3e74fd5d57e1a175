"""The page in a real browser (third round), as ``test_browser.py`` drives it: a clustering
started with Enter is stopped by its Stop button and by reloading the page (the work ends on the
server, not only in the page), and Enter in the Search tab's Instruction and k boxes and the
Compare tab's boxes runs that tab."""

from __future__ import annotations

import logging
import time
import uuid

import pytest

from .conftest import COLLECTION
from .test_browser import CHROMIUM, fill_picker, open_tab, page, paste_cluster_texts  # noqa: F401  (the fixture)

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium binary: install Debian's with `apt-get install -y "
                             "chromium` (Playwright's browser download is not used)")


def _wait_for_log(caplog, text: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not any(text in r.getMessage() for r in caplog.records):
        assert time.monotonic() < deadline, f"no {text!r} in the server's log"
        time.sleep(0.1)


def test_a_clustering_is_stopped_by_stop_and_by_leaving_the_page(page, caplog) -> None:  # noqa: F811
    """A clustering could not be stopped, and reloading the page did not stop it either: every
    other search waited behind it (InBedder's takes ~12 minutes)."""
    from playwright.sync_api import expect

    caplog.set_level(logging.INFO, logger="ui.handlers")
    open_tab(page, "Cluster")
    run = uuid.uuid4().hex[:8]  # new texts: embeddings of a recent clustering are reused
    paste_cluster_texts(page, "\n".join(f"Message {i} of run {run}: my card number {i * 7919} was declined "
                                        f"at shop {i % 13} and I want my money back" for i in range(3000)))
    page.fill("#cluster-limit input[type=number]", "0")
    page.fill("#cluster-k input[type=number]", "3")
    box = page.locator("#cluster-instruction textarea")
    box.fill("What does the customer want?")
    box.press("Enter")  # Enter in a one-line box runs the tab
    stop = page.locator("#cluster-stop-button")
    stop.wait_for()
    page.locator("#cluster-summary", has_text="encoding").wait_for()
    stop.click()
    page.locator("#cluster-summary", has_text="Clustering stopped").wait_for()
    expect(page.locator("#cluster-button")).to_be_enabled()
    expect(stop).to_be_hidden()
    _wait_for_log(caplog, "clustering stopped by its page")
    page.wait_for_timeout(500)
    assert "Clustering stopped" in page.inner_text("#cluster-summary")  # not overwritten

    # Again, and the page reloaded (or closed) while it runs: it stops on the server as well.
    caplog.clear()
    page.locator("#cluster-button").click()
    page.locator("#cluster-summary", has_text="encoding").wait_for()
    page.reload()
    _wait_for_log(caplog, "page closed: 1 clustering(s) stopped")
    _wait_for_log(caplog, "clustering stopped by its page")
    page.wait_for_function("(document.querySelector('#search-collection input') || {}).value")


def test_enter_in_the_one_line_boxes_runs_search_and_compare(page) -> None:  # noqa: F811
    """Enter ran only the Search tab's Query box: in Instruction, Filters or k it did nothing,
    and Compare had no Enter at all."""
    open_tab(page, "Search")
    fill_picker(page, "#search-collection", COLLECTION)
    page.fill("#search-query textarea", "my card was declined")
    page.fill("#search-k input[type=number]", "4")
    page.locator("#search-instruction textarea").fill("Find messages about a declined card")
    page.locator("#search-instruction textarea").press("Enter")
    page.locator("#search-summary").get_by_text("4 documents (").wait_for()
    page.fill("#search-k input[type=number]", "3")
    page.locator("#search-k input[type=number]").press("Enter")
    page.locator("#search-summary").get_by_text("3 documents (").wait_for()

    open_tab(page, "Compare")
    fill_picker(page, "#compare-collection", COLLECTION)
    page.fill("#compare-query textarea", "my card")
    page.fill("#compare-a textarea", "Find messages about a card that never arrived")
    page.locator("#compare-b textarea").fill("Find messages about fees or exchange rates")
    page.locator("#compare-b textarea").press("Enter")
    page.locator("#compare-results table.facet-compare").wait_for()


def test_tab_into_the_cluster_instruction_replaces_its_example(page) -> None:  # noqa: F811
    """The box holds its example as text: a keyboard user's Tab put the caret after it, and
    what they typed was glued on ("What is the topic of this text?Group by intent" was
    clustered). Focused while it holds the example, the example is selected; the user's own
    text is not."""
    open_tab(page, "Cluster")
    box = page.locator("#cluster-instruction textarea")
    page.locator("#cluster-limit input[type=number]").focus()
    page.keyboard.press("Tab")
    page.wait_for_function("document.activeElement === document.querySelector('#cluster-instruction textarea')")
    page.wait_for_function("(() => { const b = document.querySelector('#cluster-instruction textarea');"
                           " return b.selectionStart === 0 && b.selectionEnd === b.value.length; })()")
    page.keyboard.type("Group by intent")
    assert box.input_value() == "Group by intent"
    # Left and entered again: the user's text stays as typed, the caret where the browser puts it.
    page.locator("#cluster-limit input[type=number]").focus()
    page.keyboard.press("Tab")
    page.keyboard.type("!")
    assert box.input_value().startswith("Group by intent") and box.input_value().count("!") == 1
