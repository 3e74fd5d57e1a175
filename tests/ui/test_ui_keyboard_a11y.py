"""The page with the keyboard and a screen reader in mind, in a real browser as
``test_browser.py`` drives it: the focus passing through a picker (Gradio 6.31 fires its
``input`` on every blur) no longer wipes a typed new-collection name or an edited instruction;
the focus comes back to the Search button after a run started on it; the summary is a live
region; a refused delete says why in the page once its toast has gone."""

from __future__ import annotations

import pytest

from tests.app.gated import hold_clusterings

from .conftest import COLLECTION
from .test_browser import CHROMIUM, fill_picker, open_tab, page, paste_cluster_texts, toast_text  # noqa: F401

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium binary: install Debian's with `apt-get install -y "
                             "chromium` (Playwright's browser download is not used)")

ACTIVE_ID = "(document.activeElement && document.activeElement.id) || document.activeElement.tagName"


def test_a_new_collection_name_survives_the_focus_passing_the_picker(page) -> None:  # noqa: F811
    """Shift+Tab to the collection picker and Tab back wiped the typed name (the upload went
    into the picked collection), and typing right after it lost the first letters."""
    open_tab(page, "Index")
    new = page.locator("#index-new-collection textarea")
    picker = page.locator("#index-collection input")
    assert picker.input_value()  # the page filled it with a collection
    new.click()
    page.keyboard.type("fresh-notes")
    page.keyboard.press("Shift+Tab")
    assert page.evaluate("document.activeElement === document.querySelector("
                         "'#index-collection input')")
    page.keyboard.press("Escape")
    page.keyboard.press("Tab")
    page.keyboard.type("-2")  # typing at once, while the blur's event is on its way
    page.wait_for_timeout(800)
    assert new.input_value() == "fresh-notes-2"
    new.click()  # and a blur with the mouse (the picker clicked open, then the page's title)
    picker.click()
    page.locator("h1").first.click()
    page.wait_for_timeout(800)
    assert new.input_value() == "fresh-notes-2"
    # A real pick (typed and Enter, as test_browser does it) still clears the name.
    fill_picker(page, "#index-collection", COLLECTION)
    page.wait_for_function("document.querySelector('#index-new-collection textarea').value === ''")
    # And a click on a choice too.
    new.fill("again")
    picker.click()
    page.locator("[role=option]").first.click()
    page.wait_for_function("document.querySelector('#index-new-collection textarea').value === ''")


def test_an_edited_instruction_survives_the_focus_passing_the_example_picker(page) -> None:  # noqa: F811
    """The edited instruction was put back to the picked example when the focus went on
    through the example picker."""
    open_tab(page, "Search")
    box = page.locator("#search-instruction textarea")
    examples = page.locator("#search-examples input")
    examples.focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    page.wait_for_function("document.querySelector('#search-instruction textarea').value !== ''")
    example = box.input_value()
    box.click()
    page.keyboard.press("End")
    page.keyboard.type(" about card payments")
    page.keyboard.press("Tab")  # to the example picker
    assert page.evaluate("document.activeElement === document.querySelector("
                         "'#search-examples input')")
    page.keyboard.press("Tab")  # and on
    page.wait_for_timeout(800)
    assert box.input_value() == example + " about card payments"


@pytest.mark.parametrize(("tab", "picker", "box"), [("Search", "search-examples", "search-instruction"),
                                                   ("Compare", "compare-examples", "compare-b")])
def test_an_example_picked_with_the_keyboard_leaves_the_focus_in_its_box(
        page, tab, picker, box) -> None:  # noqa: F811
    """Enter in the picker blurred it and the focus fell to the page's body: a screen reader said
    nothing of where the user was, and the filled instruction was not where the focus was."""
    open_tab(page, tab)
    page.fill(f"#{box} textarea", "")
    page.locator(f"#{picker} input").focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    page.wait_for_function(f"document.querySelector('#{box} textarea').value !== ''")
    page.wait_for_function(f"document.activeElement === document.querySelector('#{box} textarea')")
    # Passing through the picker again moves nothing (no pick).
    page.keyboard.press("Tab")
    assert page.evaluate(f"document.activeElement === document.querySelector('#{picker} input')")
    page.keyboard.press("Tab")
    page.wait_for_timeout(500)
    assert not page.evaluate(f"document.activeElement === document.querySelector('#{box} textarea')")


def test_the_focus_comes_back_to_the_search_button(page) -> None:  # noqa: F811
    """Enter on Search disabled the focused button for the run: the focus fell to the page's
    body, and a keyboard user started again from the top."""
    open_tab(page, "Search")
    fill_picker(page, "#search-collection", COLLECTION)
    page.fill("#search-query textarea", "my card never arrived")
    page.fill("#search-instruction textarea", "")
    page.fill("#search-k input[type=number]", "3")
    page.locator("#search-button").focus()
    page.keyboard.press("Enter")
    page.locator("#search-summary").get_by_text("3 documents (").wait_for()
    page.wait_for_function("!document.querySelector('#search-button').disabled")
    page.wait_for_timeout(500)
    assert page.evaluate(ACTIVE_ID) == "search-button"


def test_the_summary_is_a_live_region_and_the_job_bar_is_not(page) -> None:  # noqa: F811
    """A screen reader said nothing of a run's summary or failure. The job's bar is no live
    region: it changes every poll, and as one a screen reader read ~20 words every 1.6 s for
    a whole job (its progressbar role, ui/render.job_html, carries the progress)."""
    open_tab(page, "Search")
    page.locator("#search-query textarea").fill("a parcel that never came")
    page.locator("#search-query textarea").press("Enter")
    page.locator("#search-summary").get_by_text("matching chunk").wait_for()
    live = page.locator("#search-summary [role=status]")
    assert live.count() == 1 and live.get_attribute("aria-live") == "polite"
    assert "matching chunk" in live.inner_text()  # the summary is inside it
    open_tab(page, "Index")
    assert page.locator("#index-status [aria-live]").count() == 0


def test_a_refused_delete_says_why_in_the_page(page) -> None:  # noqa: F811
    """A wrong confirmation was said only in a toast, gone after 10 s."""
    open_tab(page, "Collections")
    fill_picker(page, "#delete-collection", COLLECTION)
    page.fill("#delete-confirm textarea", "not-its-name")
    page.click("#delete-button")
    assert "does not match" in toast_text(page)  # and the toast closed
    page.locator("#delete-status .facet-failed").wait_for(timeout=10_000)
    said = page.inner_text("#delete-status")
    assert "'not-its-name' does not match" in said and "Nothing was deleted" in said
    # Gradio's status overlay, hidden after the error, was only transparent: a screen reader
    # read "Clear, Error" in the confirmation box, and Tab stopped on the unseen "Clear".
    assert "Clear" not in page.locator("#delete-confirm").aria_snapshot()
    page.locator("#delete-button").focus()
    for _ in range(4):  # every stop from the button on can be seen
        page.keyboard.press("Shift+Tab")
        assert page.evaluate("getComputedStyle(document.activeElement.closest("
                             "'[data-testid=status-tracker]') || document.body).opacity") != "0"


def test_the_buttons_name_what_they_act_on(page) -> None:  # noqa: F811
    """A screen reader's list of the page's buttons read "Refresh", "Previous" and "Next", with
    nothing to say of what they refresh or page through."""
    open_tab(page, "Collections")
    for name in ("Refresh collections", "Previous page", "Next page"):
        assert page.get_by_role("button", name=name, exact=True).count() == 1, name
    for bare in ("Refresh", "Previous", "Next"):
        assert page.get_by_role("button", name=bare, exact=True).count() == 0, bare


def test_a_collection_made_elsewhere_reaches_every_picker_on_refresh(page, ui_server) -> None:  # noqa: F811
    """The Collections table listed a collection another page indexed, but the Delete picker
    beside it (and Search's, Cluster's...) did not, even after Refresh, until a reload."""
    made = ui_server.root / "made-elsewhere"
    made.mkdir(exist_ok=True)
    (made / "n.txt").write_text("A note indexed from another page.")
    try:
        open_tab(page, "Collections")
        ui_server.facet.index(made, "made-elsewhere")
        page.get_by_role("button", name="Refresh").click()
        page.locator("#collections-table").get_by_text("made-elsewhere").wait_for()
        for tab, picker in (("Collections", "#delete-collection"), ("Search", "#search-collection")):
            open_tab(page, tab)
            page.locator(f"{picker} input").click()
            options = page.locator(f"{picker} [role=option]")
            options.first.wait_for()
            names = options.all_inner_texts()
            page.keyboard.press("Escape")
            assert any("made-elsewhere" in n for n in names), (picker, names)
    finally:
        ui_server.facet.delete_collection("made-elsewhere")


def test_the_focus_comes_back_to_cluster_when_the_run_ends_while_on_stop(page, ui_server, monkeypatch) -> None:  # noqa: F811
    """A keyboard user pressed Enter on Cluster and Tabbed to Stop (the run's one control) to
    wait there; when the run ended, Stop hid itself and the focus fell to the page's body.
    The run is held until the Tab has landed (600 texts made it last long enough, ~11 s)."""
    import threading
    import uuid

    entered = threading.Event()
    release = hold_clusterings(ui_server.facet, monkeypatch, entered, 60)
    open_tab(page, "Cluster")
    run = uuid.uuid4().hex[:8]  # new texts: a recent clustering's embeddings are reused
    paste_cluster_texts(page, "\n".join(f"Note {i} of {run}: the parcel {i * 7919} is late at depot {i % 11}"
                                        for i in range(30)))
    page.fill("#cluster-k input[type=number]", "3")
    page.fill("#cluster-instruction textarea", "What is late?")
    page.locator("#cluster-button").focus()
    page.keyboard.press("Enter")
    stop = page.locator("#cluster-stop-button")
    stop.wait_for()
    page.keyboard.press("Tab")
    assert page.evaluate(ACTIVE_ID) == "cluster-stop-button"
    assert entered.wait(timeout=30) and stop.is_visible()  # still running: the case is the one meant
    release.set()
    page.locator("#cluster-summary", has_text="k = 3").wait_for()
    page.wait_for_function("!document.querySelector('#cluster-button').disabled")
    stop.wait_for(state="hidden")
    page.wait_for_timeout(500)
    assert page.evaluate(ACTIVE_ID) == "cluster-button"


def test_text_typed_to_filter_a_picker_and_left_is_not_a_pick(page) -> None:  # noqa: F811
    """Typing in "Example instructions" filters its list (how a keyboard user looks through
    it); left with Tab, the typed fragment replaced the user's own instruction. A choice picked
    with the arrow keys and Enter still fills the box."""
    open_tab(page, "Search")
    fill_picker(page, "#search-collection", COLLECTION)  # its examples
    box = page.locator("#search-instruction textarea")
    box.fill("My own carefully written instruction")
    page.locator("#search-examples input").focus()
    page.keyboard.type("Find")
    page.keyboard.press("Tab")
    page.wait_for_timeout(800)
    assert box.input_value() == "My own carefully written instruction"
    page.locator("#search-examples input").focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    page.wait_for_function("document.querySelector('#search-instruction textarea').value"
                           " !== 'My own carefully written instruction'")


def test_a_clusterings_end_is_said_while_another_tab_is_open(page, ui_server, monkeypatch) -> None:  # noqa: F811
    """The Cluster tab's summary was its live area, inside the tab's panel: display: none while
    the user went to another tab during a clustering (minutes on a CPU), so its end was never
    said. It is said from a live area outside the tabs (once: the summary is no live area).
    The run is held until the other tab is open (300 texts made it last long enough)."""
    import threading
    import uuid

    entered = threading.Event()
    release = hold_clusterings(ui_server.facet, monkeypatch, entered, 60)
    open_tab(page, "Cluster")
    run = uuid.uuid4().hex[:8]  # new texts: a recent clustering's embeddings are reused
    paste_cluster_texts(page, "\n".join(f"Memo {i} of {run}: invoice {i * 104729} waits at desk {i % 7}"
                                        for i in range(32)))
    page.fill("#cluster-k input[type=number]", "3")
    page.fill("#cluster-instruction textarea", "What waits?")
    page.locator("#cluster-button").click()
    page.locator("#cluster-stop-button").wait_for()
    open_tab(page, "Search")
    assert entered.wait(timeout=30)  # still running once the other tab is open
    release.set()
    said = "document.querySelector('#cluster-announce [role=status]')"
    page.wait_for_function(f"{said} && {said}.textContent.includes('32 texts, k = 3')"
                           f" && {said}.textContent.includes('What waits?')", timeout=120_000)
    assert page.evaluate(f"{said}.checkVisibility()")  # in the page as read, not a hidden panel
    assert "instruction: \u201cWhat waits?\u201d" in page.evaluate(f"{said}.textContent")
    assert page.locator("#cluster-summary [aria-live]").count() == 0  # said once, not twice
    open_tab(page, "Cluster")
    assert "32 texts, k = 3" in page.inner_text("#cluster-summary")


def test_the_cluster_announcement_reads_apart_and_leaves_a_failure_to_the_toast(page) -> None:  # noqa: F811
    """``CLUSTER_SAID_JS``, run in the browser on what the Cluster tab shows: a failure was said
    twice (the error toast, then the announcement: ``failed_html`` is aria-live="off" for this),
    and a note, the summary and its lines ran together ("...instructions)60 texts")."""
    from ui.app import CLUSTER_SAID_JS
    from ui.render import failed_html, notices_html

    assert page.evaluate(CLUSTER_SAID_JS, failed_html("k must be at most 5", what="clustering")) == ""
    shown = (notices_html(["fewer clusters than asked for (too few distinct texts)"])
             + '<div class="facet-info facet-cluster-summary"><b>60</b> texts, <b>k = 3</b> · '
             "embedder minilm<br><small>instruction: \u201cWhat waits?\u201d</small></div>")
    said = page.evaluate(CLUSTER_SAID_JS, shown)
    assert "distinct texts) 60 texts, k = 3" in said
    assert said.endswith("embedder minilm instruction: \u201cWhat waits?\u201d")
    assert page.evaluate(CLUSTER_SAID_JS, "Clustering stopped") == "Clustering stopped"


def test_a_radio_group_is_one_named_tab_stop_moved_with_the_arrows(page) -> None:  # noqa: F811
    """Gradio gave each option of a radio group a name of its own: each was a Tab stop, the
    arrow keys did not move between them, and a screen reader said "auto, radio button" with
    no "Match by" (the UI exploration of the third session of 2026-12-07)."""
    open_tab(page, "Search")
    group = page.locator("#search-mode")
    page.wait_for_function("document.getElementById('search-mode').getAttribute('role') === 'radiogroup'")
    assert page.locator("#search-mode").get_attribute("aria-labelledby") == "search-mode-label"
    assert page.locator("#search-mode-label").inner_text().startswith("Match by")
    assert set(page.evaluate("[...document.querySelectorAll('#search-mode input')].map(r => r.name)")) == {
        "search-mode"}
    checked = group.locator("input:checked").get_attribute("value")
    group.locator("input:checked").focus()
    page.keyboard.press("ArrowRight")
    moved = page.evaluate("document.activeElement.value")
    assert moved != checked and group.locator("input:checked").get_attribute("value") == moved
    page.wait_for_function("v => document.querySelector(`#search-mode input[value=${v}]`)"
                           ".getAttribute('aria-checked') === 'true'", arg=moved)  # (Gradio's own state)
    # (Gradio names the options anew as the value changes; mended within a frame.)
    page.wait_for_function("[...document.querySelectorAll('#search-mode input')]"
                           ".every(r => r.name === 'search-mode')")
    page.keyboard.press("Tab")  # out of the group at once, not to its next option
    assert page.evaluate("!document.getElementById('search-mode').contains(document.activeElement)")
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("ArrowLeft")  # back to where it was, for the tests after this one
    assert group.locator("input:checked").get_attribute("value") == checked
    # The other tabs' groups too, rendered when their tab opens.
    open_tab(page, "Cluster")
    page.wait_for_function("document.getElementById('cluster-source').getAttribute('role') === 'radiogroup'")
