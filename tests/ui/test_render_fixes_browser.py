"""The Collections tab's jobs table in chromium: each header on one line at common window widths
(at 1360 px "indexed" and "failed" broke mid-word, "indexe|d", "faile|d", in 72 and 64 px
columns; ``render.JOB_COLUMN_WIDTHS``). Uses ``test_browser``'s page (1360 x 1000)."""

from __future__ import annotations

from .test_browser import CHROMIUM, open_tab, page  # noqa: F401  (the fixture)

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
        for width in (1360, 1024, 1920):
            page.set_viewport_size({"width": width, "height": 1000})
            page.wait_for_timeout(300)
            headers = page.evaluate(HEADER_LINES)
            assert [h[0] for h in headers] == render.JOB_COLUMNS
            broken = [(name, lines, cut) for name, lines, cut in headers if lines != 1 or cut]
            assert not broken, (width, broken)
    finally:
        page.set_viewport_size({"width": 1360, "height": 1000})
