"""The Cluster tab's "Largest k to try" box in a real browser (as ``test_browser.py`` drives the
page): k = 0 chose by silhouette from 2 to 10 with no way to try more, and the page never said
that the k it chose was that cap (on CLINC's 147 intents it printed k = 10, V-measure 57.79;
k = 147 gives 91.22). The box is passed as max_k; the summary says when the chosen k is the
largest tried and, with gold labels, how many classes they have."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import NOTES
from .test_browser import (  # noqa: F401  (page: the fixture)
    CHROMIUM,
    fill_picker,
    open_tab,
    page,
    toast_text,
    wait_for_uploads,
)

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium binary: install Debian's with `apt-get install -y "
                             "chromium` (Playwright's browser download is not used)")


def test_largest_k_to_try_bounds_k_0_and_the_summary_says_it_is_the_cap(page, tmp_path: Path  # noqa: F811
                                                                        ) -> None:
    open_tab(page, "Cluster")
    assert page.locator("#cluster-max-k input[type=number]").count() == 1, "no Largest k box"
    page.locator("#cluster-source").get_by_label("pasted or uploaded texts").check()
    page.fill("#cluster-texts textarea", "\n".join(NOTES))
    # One class per text: 6 classes, far from the k of 2 the box allows.
    labels = tmp_path / "gold-classes.txt"
    labels.write_text("\n".join(f"class{i}" for i in range(len(NOTES))))
    page.set_input_files("#cluster-labels input[type=file]", str(labels))
    wait_for_uploads(page, "#cluster-labels", ["gold-classes"])
    fill_picker(page, "#cluster-embedder", "minilm")
    page.fill("#cluster-instruction textarea", "What does the customer want?")
    page.fill("#cluster-k input[type=number]", "0")

    page.fill("#cluster-max-k input[type=number]", "51")  # over MAX_K: refused, named
    page.click("#cluster-button")
    assert "Largest k to try must be from 2 to 50, got 51" in toast_text(page)

    page.fill("#cluster-max-k input[type=number]", "2")
    page.click("#cluster-button")
    summary = page.locator("#cluster-summary", has_text="largest k tried")
    summary.wait_for()
    text = " ".join(summary.inner_text().split())
    assert "6 texts, k = 2 (chosen by silhouette)" in text, text
    assert "k = 2 the only one tried" in text and "2 is the largest k tried" in text, text
    assert "the best of k = 2 to 2" not in text, text
    assert "the labels have 6 classes: set k to 6" in text, text


def _notes_pasted(page) -> None:  # noqa: F811
    """The Cluster tab, its texts the pasted ``NOTES``, clustered with minilm."""
    open_tab(page, "Cluster")
    page.locator("#cluster-source").get_by_label("pasted or uploaded texts").check()
    page.fill("#cluster-texts textarea", "\n".join(NOTES))
    fill_picker(page, "#cluster-embedder", "minilm")


def test_a_fraction_in_a_cluster_box_is_refused_naming_the_box(page) -> None:  # noqa: F811
    """With ``precision=0`` Gradio rounded what was typed before the handler saw it: "Largest k
    to try" 2.5 ran with 2 (and k 3.7 with 4) while the box kept the fraction, nothing said."""
    _notes_pasted(page)
    page.fill("#cluster-k input[type=number]", "0")
    page.fill("#cluster-max-k input[type=number]", "2.5")
    page.click("#cluster-button")
    assert "Largest k to try must be a whole number, got 2.5" in toast_text(page)


def test_a_new_clustering_starts_on_an_empty_summary_not_over_the_last_failure(page) -> None:  # noqa: F811
    """The progress bar of a new run was drawn over the last run's failure, the two texts
    overlapping, unreadable, for the whole run (the UI exploration of the third session of
    2026-12-07). The summary is emptied as a run starts: the run's states are free of it."""
    _notes_pasted(page)
    page.fill("#cluster-instruction textarea", "What does the customer want?")
    page.fill("#cluster-max-k input[type=number]", "10")
    page.fill("#cluster-k input[type=number]", str(len(NOTES) + 5))  # more than the texts
    page.click("#cluster-button")
    page.locator("#cluster-summary", has_text="The last run failed").wait_for()
    page.locator("#cluster-button:not([disabled])").wait_for()
    page.wait_for_timeout(1500)  # (the failure's own events settled: their timers gone)
    page.evaluate("""() => {
      const area = document.getElementById('cluster-summary');
      window.facetSummaries = [];
      new MutationObserver(() => window.facetSummaries.push(area.textContent.replace(/\\s+/g, ' ').trim()))
        .observe(area, {childList: true, subtree: true, characterData: true});
    }""")
    page.fill("#cluster-k input[type=number]", "2")
    page.click("#cluster-button")
    page.locator("#cluster-summary", has_text="k = 2").wait_for()
    seen = page.evaluate("() => window.facetSummaries")
    # Emptied once the click's first round trip is back (the old text stays for that moment,
    # under its timer), and the old failure never seen again: the run's progress is drawn alone.
    assert "" in seen, seen
    after = seen[seen.index(""):]
    assert not [t for t in after if "The last run failed" in t], seen
