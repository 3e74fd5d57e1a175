"""The page on a phone-sized screen (360 x 740, touch), in a real browser as ``test_browser.py``
drives it: measured by a helper (logs/explore_phone422.md), three of the five tabs were behind
Gradio's "more tabs" menu, a search run by Enter changed nothing on the screen (its results ~1.9
screens down), a result's snippet was a 68 px column, and the cluster map's legend left the plot
64 px wide; Compare's rankings were two 85 px columns among five (rows ~117 px high)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import COLLECTION, PLANTED_QUERY
from .test_browser import CHROMIUM, browser_page, fill_picker, open_tab, paste_cluster_texts

COMPARE_ROW = "#compare-results tbody tr:first-child"

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium binary: install Debian's with `apt-get install -y "
                             "chromium` (Playwright's browser download is not used)")

TABS = ("Search", "Compare", "Cluster", "Index", "Collections")


@pytest.fixture(scope="module")
def phone(ui_server) -> Iterator[Any]:
    with browser_page(ui_server.ui, "(document.querySelector('#search-collection input') || {}).value") as page:
        page.set_viewport_size({"width": 360, "height": 740})
        page.wait_for_timeout(300)  # the tab bar measures itself again
        yield page


def _box(page: Any, selector: str) -> dict[str, float]:
    return page.evaluate("(sel) => { const r = document.querySelector(sel).getBoundingClientRect();"
                         " return {x: r.x, y: r.y, width: r.width, height: r.height}; }", selector)


def test_every_tab_is_in_the_bar_and_the_page_is_no_wider_than_the_screen(phone) -> None:
    for name in TABS:
        tab = phone.get_by_role("tab", name=name)
        assert tab.is_visible(), name
        box = tab.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 360, (name, box)
    assert phone.evaluate("document.documentElement.scrollWidth") <= 360


def test_a_search_by_enter_scrolls_to_its_results_which_read_at_full_width(phone) -> None:
    open_tab(phone, "Search")
    fill_picker(phone, "#search-collection", COLLECTION)
    phone.evaluate("window.scrollTo(0, 0)")
    phone.fill("#search-query textarea", PLANTED_QUERY)
    phone.locator("#search-query textarea").press("Enter")
    phone.locator("#search-results tbody tr").first.wait_for()
    phone.wait_for_function("window.scrollY > 0")
    summary = _box(phone, "#search-summary")
    assert -2 <= summary["y"] < 740, summary  # on the screen (its top at the screen's, to a pixel)
    assert summary["x"] <= 24, summary  # the page's 32 px margins took a fifth of the width
    snippet = _box(phone, "#search-results tbody tr:first-child td:nth-child(4)")
    assert snippet["width"] >= 250, snippet  # a 68 px column before
    assert phone.evaluate("document.documentElement.scrollWidth") <= 360


def test_the_cluster_map_keeps_its_width_for_the_points(phone) -> None:
    open_tab(phone, "Cluster")
    paste_cluster_texts(phone, "\n".join(f"{topic} note {i}: {topic} again" for i in range(10)
                                         for topic in ("card delivery", "exchange rate", "pin reset")))
    phone.fill("#cluster-k input[type=number]", "3")
    phone.fill("#cluster-instruction textarea", "What is it about?")
    phone.locator("#cluster-button").click()
    phone.locator("#cluster-summary", has_text="k = 3").wait_for()
    phone.locator("#cluster-map .nsewdrag").first.wait_for()
    plot = _box(phone, "#cluster-map .nsewdrag")
    svg = _box(phone, "#cluster-map svg.main-svg")
    assert plot["width"] >= 0.6 * svg["width"], (plot, svg)  # 64 of 294 px with the legend beside it


def test_compare_reads_each_ranking_in_half_the_width_with_its_score_above_its_document(phone) -> None:
    open_tab(phone, "Compare")
    fill_picker(phone, "#compare-collection", COLLECTION)
    phone.fill("#compare-query textarea", "my card")
    phone.fill("#compare-a textarea", "Find messages about a card that never arrived")
    phone.fill("#compare-b textarea", "Find messages about fees")
    phone.locator("#compare-button").click()
    phone.locator(f"{COMPARE_ROW} td:nth-child(5)").wait_for()
    score_a, doc_a, score_b, doc_b = (_box(phone, f"{COMPARE_ROW} td:nth-child({n})") for n in (2, 3, 4, 5))
    assert doc_a["width"] >= 130 and doc_b["width"] >= 130, (doc_a, doc_b)  # 85 px each before
    assert doc_a["x"] + doc_a["width"] <= doc_b["x"], (doc_a, doc_b)  # still side by side
    assert doc_a["y"] >= score_a["y"] + score_a["height"] - 1 and doc_a["x"] == score_a["x"]
    assert doc_b["y"] >= score_b["y"] + score_b["height"] - 1 and doc_b["x"] == score_b["x"]
    header = _box(phone, "#compare-results thead th:nth-child(3)")  # "A: <instruction>", shown
    assert header["width"] >= 130 and header["height"] > 0, header
    assert phone.evaluate("document.documentElement.scrollWidth") <= 360
