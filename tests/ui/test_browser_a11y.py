"""What a keyboard and screen-reader pass over the page found, in a real browser (Debian's
chromium, Playwright, as ``test_browser.py`` drives it), over a ``facet ui`` page of its own:
an index job's end was never said (the bar is not live, its progressbar's value is not read);
after "Cancel job" the focus fell to the page's body and the stopped job it said to resume was
not offered until a reload; Compare's results were silent; the Search tab's live summary said
"0 documents" without why, or that k was cut; the focus ring of text boxes and pickers was
faint (~1.9:1 against white). One page load per test."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.errors import NotFoundError

from .conftest import served_notes_ui
from .test_browser import CHROMIUM, browser_page, open_tab

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium binary: install Debian's with `apt-get install -y "
                             "chromium` (Playwright's browser download is not used)")

WAIT_MS = 5000  # for what follows at once (a failure here need not wait a minute)
READY = "(document.querySelector('#search-collection input') || {}).value === 'notes'"


@pytest.fixture(scope="module")
def served(minilm, tmp_path_factory) -> Iterator[tuple[Any, Any, Path]]:
    pytest.importorskip("gradio")
    root = tmp_path_factory.mktemp("a11y-root")
    (root / "held").mkdir()
    (root / "held" / "a.txt").write_text("A note that waits in the queue.")
    with served_notes_ui(root, minilm, tmp_path_factory.mktemp("exports")) as (demo, facet):
        yield demo, facet, root


class _Held:
    """A job runner that never takes a job: it stays queued until cancelled."""

    runner_name = "thread"

    def submit(self, prepared: Any) -> None:
        pass


def _said(page, ident: str) -> str:
    return str(page.locator(f"#{ident} [role=status]").inner_text()).strip()


def test_a_cancelled_job_is_said_focused_and_offered_to_resume(served, monkeypatch) -> None:
    demo, facet, root = served
    monkeypatch.setattr(facet, "job_runner", _Held())
    try:
        with browser_page(demo.local_url, READY) as page:
            _queue_held_job(page, root)
            page.wait_for_function("document.querySelector('#index-announce [role=status]')"
                                   ".innerText.includes('queued')", timeout=WAIT_MS)
            job = re.search(r"Job (\d+) into held: queued\.", _said(page, "index-announce"))
            assert job, _said(page, "index-announce")
            # Said, not shown: the bar shows it.
            assert page.locator("#index-announce").bounding_box()["height"] <= 1  # type: ignore[index]
            assert page.locator("#index-stopped").is_hidden()

            page.focus("#index-cancel-button")
            page.keyboard.press("Enter")
            page.locator('#index-status [data-state="cancelled"]').wait_for()
            page.wait_for_function("document.querySelector('#index-announce [role=status]')"
                                   ".innerText.includes('cancelled')", timeout=WAIT_MS)
            assert _said(page, "index-announce") == (f"Job {job.group(1)} into held: cancelled, "
                                                     "0 indexed, 0 unchanged, 0 failed.")
            # The focus went to the bar (it fell to the body), and the stopped job is offered.
            page.locator("#index-cancel-button").wait_for(state="hidden")
            page.wait_for_function("document.activeElement && document.activeElement.id === "
                                   "'index-status'", timeout=WAIT_MS)
            page.locator("#index-resume-button").wait_for(timeout=WAIT_MS)
            assert f"job {job.group(1)} into held" in page.locator("#index-stopped input").input_value()
            page.keyboard.press("Tab")  # on to the stopped-job picker, then Resume
            assert page.evaluate("document.activeElement.closest('#index-stopped') !== null")
    finally:
        with contextlib.suppress(NotFoundError):
            facet.delete_collection("held")  # the other test's pickers start at "notes"


def test_compare_and_search_say_their_results_and_boxes_show_the_focus(served) -> None:
    demo, _, _ = served
    with browser_page(demo.local_url, READY) as page:
        # Focus rings of a text box and a picker: a solid outline of >= 3:1 against white.
        for selector in ("#search-query textarea", "#search-collection input", "#search-k input"):
            page.focus(selector)
            ring = page.evaluate(
                "(s) => { const c = getComputedStyle(document.querySelector(s));"
                " return [c.outlineStyle, parseFloat(c.outlineWidth), c.outlineColor]; }",
                selector)
            assert ring[0] == "solid" and ring[1] >= 2, (selector, ring)
            assert _contrast(ring[2]) >= 3, (selector, ring)

        # Search: the live summary says why nothing was found, and that k was cut.
        page.fill("#search-query textarea", "my card")
        page.fill("#search-filters textarea", "lang=en")
        page.fill("#search-k input", "100")
        page.click("#search-button")
        page.locator("#search-results", has_text="No results").wait_for()
        said = _said(page, "search-summary")
        assert "No results: check the filters; no document has a field 'lang'" in said, said
        assert "searched with 50, not 100" in said, said

        # Compare: its summary line is said (its results are not a live area).
        open_tab(page, "Compare")
        page.fill("#compare-query textarea", "my card")
        page.fill("#compare-a textarea", "Find messages about a card that never arrived")
        page.fill("#compare-b textarea", "Find refund requests")
        page.fill("#compare-k input", "100")
        page.click("#compare-button")
        page.locator("#compare-results table.facet-compare").wait_for()
        page.wait_for_function("document.querySelector('#compare-summary [role=status]')"
                               ".innerText.includes('results are shared')",
                               timeout=WAIT_MS)
        said = _said(page, "compare-summary")
        assert "of them moved" in said and "searched with 50, not 100." in said, said
        assert page.locator("#compare-summary").bounding_box()["height"] <= 1  # type: ignore[index]


def _contrast(color: str) -> float:
    """Contrast ratio of ``color`` (``rgb(r, g, b)``) against white."""
    r, g, b = (int(v) / 255 for v in re.findall(r"\d+", color)[:3])

    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    luminance = 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b)
    return 1.05 / (luminance + 0.05)


def _queue_held_job(page, root: Path) -> int:
    """The Index tab's folder job into "held", queued (the held runner never takes it): its id."""
    open_tab(page, "Index")
    page.fill("#index-new-collection textarea", "held")
    box = page.locator("#index-folder input")
    box.fill(str(root / "held"))
    box.press("Enter")
    page.click("#index-folder-button")
    page.locator('#index-status [data-state="queued"]').wait_for()
    job = re.search(r"Job (\d+) into held", page.inner_text("#index-status"))
    assert job, page.inner_text("#index-status")
    return int(job.group(1))


def test_a_job_that_ends_while_the_focus_waits_on_cancel_moves_it_to_the_bar(served, monkeypatch) -> None:
    """A keyboard user Tabbed to "Cancel job" to wait there; the job ended (here: stopped from
    elsewhere, as a completion would), the button hid itself and the focus fell to the page's
    body. Only a pressed Cancel moved it to the bar."""
    demo, facet, root = served
    monkeypatch.setattr(facet, "job_runner", _Held())
    try:
        with browser_page(demo.local_url, READY) as page:
            job = _queue_held_job(page, root)
            page.focus("#index-cancel-button")
            facet.cancel_job(job)  # not pressed: the job ends under the focus
            page.locator('#index-status [data-state="cancelled"]').wait_for()
            page.locator("#index-cancel-button").wait_for(state="hidden")
            page.wait_for_function("document.activeElement && document.activeElement.id === "
                                   "'index-status'", timeout=WAIT_MS)
    finally:
        with contextlib.suppress(NotFoundError):
            facet.delete_collection("held")


def test_a_jobs_end_is_said_while_another_tab_is_open(served, monkeypatch) -> None:
    """The job's announcement lay in the Index tab's panel, hidden while the user searched on
    another tab meanwhile: a job's end was never said to them."""
    demo, facet, root = served
    monkeypatch.setattr(facet, "job_runner", _Held())
    try:
        with browser_page(demo.local_url, READY) as page:
            job = _queue_held_job(page, root)
            open_tab(page, "Search")
            facet.cancel_job(job)
            page.wait_for_function("document.querySelector('#index-announce [role=status]')"
                                   ".textContent.includes('cancelled')", timeout=WAIT_MS)
            # In the page as read, not in a hidden panel (display: none is never said).
            assert page.evaluate("document.querySelector('#index-announce [role=status]')"
                                 ".checkVisibility()")
    finally:
        with contextlib.suppress(NotFoundError):
            facet.delete_collection("held")
