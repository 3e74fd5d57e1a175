"""Facet's own layout and colours in chromium: the Collections tab's jobs table, each header on one
line at common window widths (at 1360 px "indexed" and "failed" broke mid-word, "indexe|d",
"faile|d", in 72 and 64 px columns; ``render.JOB_COLUMN_WIDTHS``; uses ``test_browser``'s page,
1360 x 1000), and the search results on a phone and in dark mode (a page of their own)."""

from __future__ import annotations

import pytest

from .conftest import COLLECTION, PLANTED_QUERY
from .test_browser import CHROMIUM, TIMEOUT_MS, fill_picker, open_tab, page  # noqa: F401  (the fixture)

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (apt-get install -y chromium)")

# Per header: its text's line boxes (a Range over its text: one per line it takes) and whether
# it is cut (wider than its box).
HEADER_LINES = """() => [...document.querySelectorAll('#jobs-table thead th')].map(th => {
  const span = th.querySelector('.header') || th; const range = document.createRange();
  range.selectNodeContents(span);
  const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
  return [span.innerText.trim(), tops.size, span.scrollWidth > span.clientWidth + 1]; })"""


def test_the_jobs_tables_headers_each_take_one_line(page) -> None:  # noqa: F811
    from ui import render

    open_tab(page, "Collections")
    page.wait_for_function("document.querySelectorAll('#jobs-table tbody tr').length > 0")
    try:
        for width in (1360, 1024, 1920, 768, 360):  # (768, 360: "collecti|on", "embedd|er" broke)
            page.set_viewport_size({"width": width, "height": 1000})
            page.wait_for_timeout(300)
            headers = page.evaluate(HEADER_LINES)
            assert [h[0] for h in headers] == render.JOB_COLUMNS
            broken = [(name, lines, cut) for name, lines, cut in headers if lines != 1 or cut]
            assert not broken, (width, broken)
    finally:
        page.set_viewport_size({"width": 1360, "height": 1000})


# The WCAG contrast ratio of an element's text against the first opaque background at or above it.
CONTRAST = """(el) => {
  const rgb = s => (s.match(/[\\d.]+/g) || []).map(Number);
  const lum = c => { const [r, g, b] = c.slice(0, 3).map(v => { v /= 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; }); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  let bg = null;
  for (let e = el; e && !bg; e = e.parentElement) {
    const c = rgb(getComputedStyle(e).backgroundColor); if (c.length >= 3 && (c.length < 4 || c[3] > 0.5)) bg = c; }
  bg = bg || rgb(getComputedStyle(document.body).backgroundColor);
  const [a, b] = [lum(rgb(getComputedStyle(el).color)), lum(bg)].sort((x, y) => y - x);
  return (a + 0.05) / (b + 0.05); }"""

# Whether the results table can be read whole: inside a sideways-scrolling box that fits the
# window (Gradio's container clips anything wider: `overflow-x: hidden`).
REACHABLE = """() => { const t = document.querySelector('#search-results table');
  const box = t.closest('.facet-scroll');
  const w = document.documentElement.clientWidth;
  return {boxed: !!box, boxRight: box ? box.getBoundingClientRect().right : null, width: w,
          tableRight: t.getBoundingClientRect().right, scrolls: box ? box.scrollWidth > box.clientWidth : false,
          overflow: box ? getComputedStyle(box).overflowX : null}; }"""


# Each results header's text and the lines it takes.
HEADER_WORDS = """() => [...document.querySelectorAll('#search-results thead th')].map(th => {
  const range = document.createRange(); range.selectNodeContents(th);
  const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
  return [th.innerText.trim(), tops.size]; })"""


def test_results_on_a_phone_in_dark_mode_can_be_reached_and_read(page, ui_server) -> None:  # noqa: F811
    """Found by the accessibility exploration: at 360 px the results table (487 px) was clipped
    with no way to scroll to its metadata column; a 300-character token made it 3,470 px wide
    at any width; and in dark mode Facet's notices were white on cream (1.04:1) and its grey
    summary 1.97:1 on Gradio's dark page."""
    # A page of its own (the module's page stays at 1360 px, light): a phone's, the OS dark.
    phone = page.context.browser.new_page(viewport={"width": 360, "height": 640}, color_scheme="dark")
    try:
        _search_on(phone, ui_server.ui)
    finally:
        phone.close()


def _search_on(page, url: str) -> None:  # noqa: F811  (a page, not the fixture)
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url)
    page.wait_for_function("(document.querySelector('#search-collection input') || {}).value")
    assert page.evaluate("document.body.classList.contains('dark')")  # Gradio follows the OS
    fill_picker(page, "#search-collection", COLLECTION)
    page.fill("#search-query textarea", PLANTED_QUERY)
    page.fill("#search-k input[type=number]", "500")  # cut to 50, with a notice
    page.click("#search-button")
    page.locator("#search-results table.facet-results").wait_for()
    shown = page.evaluate(REACHABLE)
    assert shown["boxed"] and shown["overflow"] == "auto", shown
    assert shown["boxRight"] <= shown["width"] + 1, shown  # the box fits; the table scrolls in it
    assert shown["tableRight"] <= shown["width"] + 1 or shown["scrolls"], shown
    region = page.get_by_role("region", name="Search results")
    assert region.get_attribute("tabindex") == "0"  # a keyboard user can scroll it
    # The headers stay whole words ("sco|re", "metadat|a" once long words could break anywhere).
    headers = page.evaluate(HEADER_WORDS)
    assert headers and all(lines == 1 for _, lines in headers), headers
    # A 300-character token in a snippet breaks inside its cell, at any width.
    page.set_viewport_size({"width": 1360, "height": 900})
    page.evaluate("document.querySelector('#search-results tbody td:nth-child(4)').append(' ' + 'x'.repeat(300))")
    shown = page.evaluate(REACHABLE)
    assert shown["tableRight"] <= shown["width"] + 1 and not shown["scrolls"], shown
    # Dark mode: the notice (k cut), a highlight and the summary line stay readable.
    note = page.locator("#search-results .facet-note").first
    assert "50" in note.inner_text()
    ratios = {name: page.evaluate(CONTRAST, page.locator(sel).first.element_handle())
              for name, sel in (("notice", "#search-results .facet-note"),
                                ("highlight", "#search-results mark"),
                                ("summary", "#search-summary .facet-info"),
                                ("chunk label", "#search-results td small"),
                                ("metadata", "#search-results .facet-meta"),
                                ("filters' syntax", "#search-filters .info-text"))}
    assert all(r >= 4.5 for r in ratios.values()), ratios


def test_the_filter_syntax_line_is_readable_in_light_mode(page) -> None:  # noqa: F811
    """The syntax put under the filters box "because a placeholder is faint" was Gradio's info
    line, as faint: #bbbbc2 on white, 1.9:1 at 12 px."""
    open_tab(page, "Search")
    info = page.locator("#search-filters .info-text").first
    assert "key=value" in info.inner_text()
    assert page.evaluate(CONTRAST, info.element_handle()) >= 4.5


def test_a_cut_metadata_lists_trailer_is_shown_but_not_copied(page) -> None:  # noqa: F811
    """A result's list cut at 300 characters ended its line with "; … (N more values not shown)":
    the line pasted into the filters box was refused. The trailer is shown, and a selection or a
    copy of the cell (chromium's own clipboard) leaves it out. On a page of its own, in the
    browser of ``test_browser``'s page (a second sync_playwright in the thread is refused)."""
    from app.services.search import SearchResponse
    from ui import render

    from .test_render_fixes import _result

    tags = [f"t{i:03}" for i in range(60)]
    results = render.results_html(SearchResponse("q", None, "c", "minilm", None,
                                                 [_result({"tags": tags, "year": 2020})], {}))
    page_html = f'<html><head><meta charset="utf-8"><style>{render.CSS}</style></head><body>{results}</body></html>'
    context = page.context.browser.new_context()
    try:
        context.grant_permissions(["clipboard-read", "clipboard-write"])
        own = context.new_page()
        own.set_default_timeout(TIMEOUT_MS)
        # A secure origin of its own (the clipboard API is there only).
        own.route("https://facet.test/", lambda route: route.fulfill(body=page_html, content_type="text/html"))
        own.goto("https://facet.test/")
        more = own.locator(".facet-meta .facet-more")
        assert more.is_visible() and more.inner_text() == "; … (33 more values not shown)"
        selected = own.evaluate("""() => { const r = document.createRange();
            r.selectNodeContents(document.querySelector('.facet-meta'));
            const s = getSelection(); s.removeAllRanges(); s.addRange(r); return s.toString(); }""")
        own.evaluate("() => document.execCommand('copy')")
        copied = own.evaluate("() => navigator.clipboard.readText()")
    finally:
        context.close()
    expected = "; ".join(f"tags={t}" for t in tags[:27]) + "\nyear:=2020"
    assert selected == expected and copied == expected, (selected, copied)
    from ui.inputs import parse_filter_text

    assert parse_filter_text(copied.splitlines()[0]) == {"tags": tags[:27]}


# The left edges of each character of the text of ``sel``'s element, in order.
CHAR_LEFTS = """(sel) => { const el = document.querySelector(sel); const out = [];
  const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) for (let i = 0; i < n.length; i++) {
    const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1);
    const box = r.getBoundingClientRect(); out.push([n.data[i], Math.round(box.left)]); }
  return out; }"""


def test_a_snippets_bidi_override_acts_on_its_own_line_only(page) -> None:  # noqa: F811
    """A document's U+202E (right-to-left override) reversed the rest of its snippet, its later
    line and highlights included ("gnidaeh live denilced drac"; the UI review of the fifth
    session of 2026-12-06). Drawn in chromium: the words after the line's end read left to
    right again, the highlight on them too; the override's own line is shown as written."""
    from dataclasses import replace

    from app.services.search import SearchResponse
    from ui import render

    from .test_render_fixes import _result

    snippet = "# Evil \u202e title\ncard declined evil heading"
    mark = snippet.index("declined")
    result = replace(_result({}), snippet=snippet, text=snippet,
                     highlights=[[mark, mark + len("declined")]])
    results = render.results_html(SearchResponse("q", None, "c", "minilm", None, [result], {}))
    own = page.context.browser.new_page()
    try:
        own.set_content(f'<html><head><meta charset="utf-8"><style>{render.CSS}</style></head>'
                        f'<body style="width:1200px">{results}</body></html>')
        chars = own.evaluate(CHAR_LEFTS, "#search-results td mark, .facet-table td mark")
        assert "".join(c for c, _ in chars) == "declined"
        lefts = [x for _, x in chars]
        assert lefts == sorted(lefts) and lefts[0] < lefts[-1], chars  # left to right
        # The words after it too: "heading" reads left to right.
        cell = own.evaluate("""() => { const m = document.querySelector('.facet-table td mark');
            return '#' + (m.closest('td').id = 'snippet-cell'); }""")
        text = own.evaluate(CHAR_LEFTS, cell)
        heading = [x for c, x in text[-len("heading"):]]
        assert "".join(c for c, _ in text[-len("heading"):]) == "heading"
        assert heading == sorted(heading), text
    finally:
        own.close()


# Per character of the legend's entries (SVG text): its x on the page.
LEGEND_CHARS = """() => [...document.querySelectorAll('.legendtext')].map(t => {
  const out = []; for (let i = 0; i < t.getNumberOfChars(); i++)
    out.push([t.textContent[i], t.getStartPositionOfChar(i).x]);
  return out; })"""


def test_a_right_to_left_cluster_name_keeps_its_legend_entrys_order(page) -> None:  # noqa: F811
    """A Hebrew cluster name in the map's legend: "0: <name> (2)" was drawn "0: (2) <name>", the
    size read as part of the name (the UI review of the sixth session of 2026-12-06). Drawn by
    plotly.js (the package's own copy, no network) in chromium: the id left of the name, the
    name's letters right to left, the size right of them."""
    from pathlib import Path

    import plotly

    from ui import render

    from .test_inputs_render import HEBREW, _rtl_response

    figure = render.cluster_figure(_rtl_response(), title="t")
    script = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    own = page.context.browser.new_page()
    try:
        own.set_content('<html><head><meta charset="utf-8"></head><body><div id="map"></div></body></html>')
        own.add_script_tag(path=str(script))
        own.evaluate("(fig) => Plotly.newPlot('map', fig.data, fig.layout)", figure.to_plotly_json())
        own.wait_for_selector(".legendtext")
        first = own.evaluate(LEGEND_CHARS)[0]
        text = "".join(c for c, _ in first)
        assert text.replace("\u2068", "").replace("\u2069", "") == f"0: {HEBREW} (2)", text
        x = {c: pos for c, pos in first}
        name = [pos for c, pos in first if "\u05d0" <= c <= "\u05ea"]
        assert x["0"] < min(name) and max(name) < x["("] < x["2"] < x[")"], first
        word = [pos for c, pos in first[first.index(next(p for p in first if p[0] == "\u05e9")):][:4]]
        assert word == sorted(word, reverse=True), first  # a Hebrew word reads right to left
    finally:
        own.close()
