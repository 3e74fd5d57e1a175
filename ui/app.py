"""The Gradio page: five tabs wired to ``ui.handlers``, standalone (``facet ui``) or mounted
under ``facet serve`` at ``/ui``.

Layout only: every event calls one handler. Model-bound events (search, compare, cluster)
share one concurrency group limited to ``FACET_UI_CONCURRENCY`` (default 1), so one GPU (or
CPU) is never asked for more at once; the rest wait in Gradio's queue, itself capped at
``FACET_UI_MAX_QUEUE``. Light events (pickers, the catalog, job polling, starting an index
job, whose encoding runs on the facade's job runner, not in the event) have their own group
and never wait behind a long clustering.
"""

from __future__ import annotations

import contextvars
import json
import logging
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr
from gradio import utils as gr_utils

from app.core import Facet
from app.encoding import warm_up_clustering
from app.errors import InvalidRequestError
from app.services.clustering import MAX_K, SEARCH_RESULTS_CLUSTERED, ClusterRequest
from app.services.search import SEARCH_MODES
from app.settings import FacetSettings, get_settings
from ui import documents as docs_view
from ui import render
from ui.handlers import (
    CLUSTER_LIMIT_DEFAULT,
    CLUSTER_SOURCES,
    DEFAULT_CLUSTER_INSTRUCTION,
    GENERIC_EXAMPLES,
    MAX_RESULTS,
    NO_EXPLAINER,
    SOURCE_COLLECTION,
    SOURCE_SEARCH,
    SOURCE_TEXTS,
    UiHandlers,
    last_failure,
)

if TYPE_CHECKING:
    from fastapi import FastAPI

logger = logging.getLogger(__name__)

MODEL = "model"  # concurrency group of the events that run an embedder
LIGHT = "light"  # catalog reads, pickers, job polls
LIGHT_LIMIT = 4
# Page loads (and API clients' sessions) whose server-side state Gradio keeps: its own copy of
# every component's config, with the last results and pickers shown (~0.3 MB each, more after
# a large cluster map). Gradio keeps 10,000 by default (~3 GB), and a closed tab's stay until
# evicted. Past this many the least recently used one goes; if that page sends another event,
# Gradio starts it afresh from the values the page sends; only a running job's bar on the
# Index tab loses its document total (its fill) until a job is started or the page reloaded.
SESSION_CAPACITY = 300
# Gradio's delete_cache (every, older than; seconds): the files it keeps in its cache folder
# (GRADIO_TEMP_DIR, default /tmp/gradio) for this page, uploads and its copies of CSV exports,
# are looked at every 10 minutes and removed once an hour has passed since Gradio wrote them,
# and all of them when the server stops (a graceful stop: SIGKILL leaves them). Without it
# they stayed for good, served by URL (/gradio_api/file=...) after a restart and after their
# collection was deleted. An upload indexed into a collection goes at once
# (``UiHandlers.index_upload``); a Cluster tab upload (read again by each clustering) and an
# export shown on the page last an hour from their upload or export: later, the page says to
# upload the file again, and a fresh clustering makes a fresh CSV.
DELETE_CACHE = (600, 3600)
# How a filter box takes more than one filter. Enter runs the search (a one-line box), so a
# new line is Shift+Enter: "one per line" alone left a keyboard user starting searches.
FILTER_LINES = "(one per line, Shift+Enter for a new one, or separated by ;)"

INTRO = """# Facet
Instruction-aware search and clustering. Type what you look for **and** what it should mean:
the instruction (e.g. *Find messages with the same customer intent*) conditions the query's
embedding, and the Compare tab shows how it changes the ranking."""


def ui_auth(settings: FacetSettings) -> Callable[[str, str], bool] | None:
    """The login check: ``FACET_UI_AUTH`` pairs, else the API key as the password (any user
    name), else none.

    Raises:
        InvalidRequestError: ``FACET_UI_AUTH`` is not ``user:password[,user:password...]``.
    """
    if settings.ui_auth:
        pairs = []
        for n, item in enumerate(settings.ui_auth.split(","), 1):
            user, sep, password = item.strip().partition(":")
            if not sep or not user or not password:
                # Which pair, never its text (it may be a password's part): 'admin:pa,ss' was
                # refused with no word that a comma cannot be in a password (the settings
                # review of the sixth session of 2026-12-06).
                comma = (f" (its part {n}, after a comma, has no ':': a password cannot hold a "
                         "comma, which separates the pairs)" if n > 1 and not sep else "")
                raise InvalidRequestError("FACET_UI_AUTH must be 'user:password' pairs separated by "
                                          "commas, with a non-empty user and password each"
                                          + comma)
            pairs.append((user, password))

        def check_pairs(username: str, password: str) -> bool:
            # Compare every pair, so the time taken does not tell which user exists.
            ok = False
            for user, expected in pairs:
                ok |= secrets.compare_digest(username.encode(), user.encode()) & \
                    secrets.compare_digest(password.encode(), expected.encode())
            return _logged_login(ok, username)

        return check_pairs
    key = settings.api_key
    if key:
        def check_key(username: str, password: str) -> bool:
            return _logged_login(secrets.compare_digest(password.encode(), key.encode()),
                                 username)

        return check_key
    return None


def _logged_login(ok: bool, username: str) -> bool:
    """``ok``; a failed login is a WARNING naming the user name tried (at most 64 characters,
    never the password) and the client's address (``_CLIENT``, for a ban on those lines): it was
    not logged at all, so an operator could not see a name being guessed."""
    if not ok:
        shown = username if len(username) <= 64 else username[:64] + "…"
        logger.warning("a UI login failed for user name %r from %s", shown,
                       _CLIENT.get() or "an unknown client")
    return ok


# The address of the client whose request is being served (``_RequestClient``), for the login
# check's log line: Gradio calls the check with the user name and password only.
_CLIENT: contextvars.ContextVar[str | None] = contextvars.ContextVar("facet_ui_client",
                                                                    default=None)


class _RequestClient:
    """ASGI middleware of the page's app: sets ``_CLIENT`` for each HTTP request (the login route
    calls the check in the request's own task, so it reads it)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        token = _CLIENT.set(str(client[0]) if client else None)
        try:
            await self.app(scope, receive, send)
        finally:
            _CLIENT.reset(token)


def page_cors(settings: FacetSettings) -> type:
    """What stands where Gradio's own CORS middleware (``CustomCORSMiddleware``) would: Facet's
    CORS rule, the API's (``FACET_CORS_ORIGINS``; unset: no CORS headers at all, a preflight
    refused). Gradio's answered any ``localhost`` page's preflight (and, on a server reached by
    another name, any page's) with its origin and credentials allowed, and every header it
    asked for: a page on another port of the same machine read the page's config (the allowed
    roots' paths) with the user's login cookie, and, sending ``X-Forwarded-Host`` (trusted from
    a proxy, ``app.api.guard.cross_site``), uploaded and indexed files into a logged-in UI
    (the security review of 2026-12-06). Built with Gradio's arguments (``strict_cors``,
    ``parent_app``), which it ignores."""
    from starlette.middleware.cors import CORSMiddleware
    from starlette.responses import PlainTextResponse
    from starlette.types import ASGIApp, Receive, Scope, Send

    from app.api.server import cors_options

    origins = list(settings.cors_origins)

    class PageCors:
        def __init__(self, app: ASGIApp, **_gradio: Any) -> None:
            # With FACET_CORS_ORIGINS, the API's own rule (`facet serve` also answers it
            # before the mount: the page then never sees a preflight).
            self.app: ASGIApp = CORSMiddleware(app, **cors_options(origins)) if origins else app

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            if not origins and scope["type"] == "http" and scope["method"] == "OPTIONS":
                headers = dict(scope.get("headers") or [])
                if b"origin" in headers and b"access-control-request-method" in headers:
                    # No site is let in: a browser then sends no request that needs one.
                    await PlainTextResponse(
                        "cross-origin requests are refused: FACET_CORS_ORIGINS lists no site",
                        status_code=403)(scope, receive, send)
                    return
            await self.app(scope, receive, send)

    return PageCors


@contextmanager
def facet_cors(settings: FacetSettings) -> Iterator[None]:
    """Gradio's app built (``launch``, ``mount_gradio_app``) with ``page_cors`` in place of
    its own CORS middleware, which it adds by this module-level name."""
    import gradio.routes as gr_routes

    if not hasattr(gr_routes, "CustomCORSMiddleware"):  # a Gradio that builds it otherwise
        raise RuntimeError("gradio.routes.CustomCORSMiddleware is gone: Facet's UI cannot "
                           "keep Gradio's CORS rule off (pin gradio as pyproject.toml does)")
    original = gr_routes.CustomCORSMiddleware
    gr_routes.CustomCORSMiddleware = page_cors(settings)
    try:
        yield
    finally:
        gr_routes.CustomCORSMiddleware = original


def launch_options(settings: FacetSettings) -> dict[str, Any]:
    """Options shared by ``launch`` and ``mount_gradio_app``: login, upload limit, CSS, no
    error details for unexpected errors (handlers show their own messages), no run history,
    the client's address for the login check's log line."""
    from starlette.middleware import Middleware

    return {
        "app_kwargs": {"middleware": [Middleware(_RequestClient)]},
        "auth": ui_auth(settings),
        "auth_message": "Facet: log in with a FACET_UI_AUTH user, or any name and the API key.",
        "max_file_size": int(settings.ui_max_upload_mb * 2**20),
        "show_error": False,
        "run_history": False,
        "footer_links": ["api", "gradio"],
        "css": render.CSS,
        "head": render.HEAD,
        "ssr_mode": False,
    }


def picker(**kwargs: Any) -> gr.Dropdown:
    """A dropdown whose value the handler checks itself (``allow_custom_value``).

    Gradio checks a dropdown's value against the choices it was built with, which would
    refuse the collections and folders filled in per page load (and any value sent by an API
    client); the handlers check names against the live catalog and the allowed models, and
    say what is wrong in their own words.
    """
    return gr.Dropdown(allow_custom_value=True, **kwargs)


def results_box(**kwargs: Any) -> gr.Number:
    """A Search or Compare tab's "Results (k)": a number box with no bounds of Gradio's, the
    handler cuts it to 1 .. ``MAX_RESULTS`` and says so (a slider's box put 0 back to 1 and
    100000 to 50 in the browser, and Gradio rounded 2.5 to 2, with nothing said).
    ``precision=None``: the handler sees the value as typed."""
    return gr.Number(value=10, precision=None, label=f"Results (k, 1 to {MAX_RESULTS})", **kwargs)


def upload_box(**kwargs: Any) -> gr.File:
    """The Index tab's upload box: its file chooser offers only the file types the indexer
    reads (``file_types``, each a suffix with its dot, ``Facet.supported_suffixes()``: Gradio
    6 matches a suffix against the end of the name, case ignored; a word without a dot, such
    as "text", would be a MIME type's kind instead), and Gradio's page leaves out a file of
    another type dropped on it, naming it. The server's check stays the core's
    (``Facet.upload``: each file refused by name, the others indexed, Gradio's cached copy of
    a refused one removed by the handler): ``gr.File``'s own, on the server, refused the whole
    request with "Invalid file type" when one file of several was of another type (an API
    client, a file chooser that ignores ``accept``), and left every copy in Gradio's cache. So
    this box's ``preprocess`` hands every uploaded path on as it is. (Set on the instance: a
    subclass of a Gradio component has Gradio write a ``.pyi`` stub beside the module that
    defines it, at import, which fails on a read-only install.)"""
    from gradio.data_classes import ListFiles
    from gradio.utils import NamedString

    box = gr.File(file_types=list(Facet.supported_suffixes()), **kwargs)

    def every_path(payload: Any) -> list[NamedString] | None:
        if payload is None:
            return None
        return [NamedString(f.path) for f in (payload if isinstance(payload, ListFiles) else [payload])]

    box.preprocess = every_path
    return box


# The page's events that need the browser alone (no server round trip), as JavaScript.
# A picker's (gr.Dropdown) focus: the value it had then, and a watch on Enter in it (Enter picks
# the highlighted or typed choice, and blurs the picker: its keyup never reaches it).
PICKER_FOCUS_JS = """(value) => {
  const box = document.querySelector('#%(id)s input');
  if (!box) return;
  if (!box.dataset.facetWatch) {
    box.dataset.facetWatch = '1';
    box.addEventListener('keydown', (e) => { if (e.key === 'Enter') box.dataset.facetPicked = '1'; });
    box.addEventListener('input', () => { box.dataset.facetTyped = JSON.stringify(box.value); });
  }
  box.dataset.facetAtFocus = JSON.stringify(value ?? null);
  box.dataset.facetPicked = '';
  box.dataset.facetTyped = '';
}"""
# A picker's `input` (Gradio 6.31 fires it on every blur, a pick or not): was it a pick? One
# when Enter was pressed in it, or its value differs from the one it had at its focus and is not
# just what was typed into it (a click on a choice). Typing filters the list, as a keyboard or
# screen-reader user looks through it: left with Tab, the typed text replaced the user's own
# instruction, and in the Index tab wiped the new collection's name and indexed into one named
# by the fragment.
PICKED_JS = """(() => {
  const box = document.querySelector('#%(id)s input');
  if (!box || box.dataset.facetAtFocus === undefined) return false;
  const now = JSON.stringify(value ?? null);
  const typed = !!box.dataset.facetTyped && box.dataset.facetTyped === now;
  const picked = box.dataset.facetPicked === '1' || (box.dataset.facetAtFocus !== now && !typed);
  box.dataset.facetPicked = '';
  box.dataset.facetTyped = '';
  box.dataset.facetAtFocus = now;
  return picked;
})()"""


# The folder picker's Enter. Gradio 6.31's dropdown takes the first choice its filter keeps on
# Enter, whatever was typed: an emptied box became the first folder, the allowed root itself
# (and the next "Index the folder" queued the whole root), "docs3" became "docs30". Unless an
# arrow key highlighted a choice, Enter here only leaves the box, which keeps what was typed
# (``allow_custom_value``; an exact choice stays that choice), so an empty box stays empty.
TYPED_ENTER_JS = """() => {
  const box = document.querySelector('#%(id)s input');
  if (!box) return;
  box.dataset.facetChose = '';
  if (box.dataset.facetTypedEnter) return;
  box.dataset.facetTypedEnter = '1';
  box.addEventListener('keydown', (e) => {
    if (e.key === 'ArrowDown' || e.key === 'ArrowUp') { box.dataset.facetChose = '1'; return; }
    if (e.key !== 'Enter') { box.dataset.facetChose = ''; return; }
    if (box.dataset.facetChose === '1' || e.isComposing) return;
    e.preventDefault();
    e.stopImmediatePropagation();
    box.blur();
    // On to the button that uses it: the blur alone left the focus on the page's body (a
    // screen reader said nothing; a keyboard user started again from the top).
    const next = document.getElementById('%(next)s');
    if (next) next.focus();
    // The list can open again after the blur (an update the typing queued before it): it
    // stayed open in about one run in three and took the next click, meant for the button.
    for (const ms of [50, 200]) {
      setTimeout(() => {
        if (document.activeElement !== box) box.dispatchEvent(new FocusEvent('blur'));
      }, ms);
    }
  });
}"""


def typed_enter(dropdown: gr.Dropdown, then: gr.Button) -> None:
    """Enter in ``dropdown`` (an ``elem_id``'d picker) keeps the text typed (``TYPED_ENTER_JS``)
    instead of Gradio's first filtered choice, and moves the focus to ``then``."""
    ident = dropdown.elem_id
    dropdown.focus(None, None, None, js=TYPED_ENTER_JS % {"id": ident, "next": then.elem_id},
                   api_name=f"lambda_{str(ident).replace('-', '_')}_typed_enter",
                   api_visibility="private", queue=False)


# A box holding its example value: focused, the example is selected, so typing replaces it (a
# keyboard user's Tab put the caret after it, and "What is the topic of this text?Group by
# intent" was clustered). Not when it holds the user's own text.
SELECT_DEFAULT_JS = """() => {
  const box = document.querySelector('#%(id)s textarea');
  if (box && box.value === %(value)s) box.select();
}"""


def select_if_default(box: gr.Textbox, value: str) -> None:
    """``box`` (an ``elem_id``'d one-line box) selects its text when focused while it is
    ``value``, its example (``SELECT_DEFAULT_JS``)."""
    ident = box.elem_id
    box.focus(None, None, None, js=SELECT_DEFAULT_JS % {"id": ident, "value": json.dumps(value)},
              api_name=f"lambda_{str(ident).replace('-', '_')}_select_default",
              api_visibility="private", queue=False)


def on_pick(dropdown: gr.Dropdown, target: Any, js_result: str,
            then_focus: str | None = None) -> None:
    """``target`` set to ``js_result`` (a JavaScript expression of the picked ``value``) when a
    person picks a choice of ``dropdown`` (an ``elem_id``'d picker): a click on a choice, Enter,
    or a value typed and left, never a mere pass of the focus through it. Gradio 6.31 fires the
    picker's ``input`` on every blur: a name typed in the Index tab's new-collection box was
    wiped when the focus only passed the collection picker (the upload went into the picked
    collection), and an edited instruction was put back to the example picked before.

    ``then_focus``: the element (a CSS selector) the focus goes to after a pick. Enter in a
    Gradio picker blurs it, and the focus fell to the page's body: a screen reader said nothing
    of where the user was (the keyboard review of the first session of 2026-12-07)."""
    ident = dropdown.elem_id
    # Named as the page's other toggles (no facade call, in the browser alone).
    name = f"lambda_{str(ident).replace('-', '_')}"
    dropdown.focus(None, dropdown, None, js=PICKER_FOCUS_JS % {"id": ident},
                   api_name=f"{name}_focus", api_visibility="private", queue=False)
    picked = PICKED_JS % {"id": ident}
    moved = ("" if then_focus is None else
             f"setTimeout(() => document.querySelector({json.dumps(then_focus)})?.focus(), 0); ")
    dropdown.input(None, dropdown, target,
                   js=f"(value) => {{ if ({picked}) {{ {moved}return {js_result}; }} }}",
                   api_name=f"{name}_input", api_visibility="private", queue=False)
    # A click on the choice already shown: no new value, and no Enter.
    dropdown.select(None, dropdown, target, js=f"(value) => {{ {moved}return {js_result}; }}",
                    api_name=f"{name}_select", api_visibility="private", queue=False)

# After a refresh of the pickers' choices (``UiHandlers.picker_choices``): each value as the
# page has it now, a pick made while the refresh ran included, kept while it is among the
# choices (any typed name in the Index tab's, a new collection's); a picker with none picked
# takes the first choice, and one whose collection is gone (deleted from another page) is
# emptied: it took the first choice, and the next search ran on another collection unsaid
# (the UI exploration of the fourth session of 2026-12-07).
KEEP_PICKS_JS = """(search, compare, cluster, index, remove, documents, lists) => {
  if (!lists || !Array.isArray(lists.collections) || !Array.isArray(lists.deletable))
    return [search, compare, cluster, index, remove, documents];  // (no lists read: as they are)
  const names = lists.collections, deletable = lists.deletable;
  const keep = (value, among) => among.includes(value) ? value : (value ? null : (among[0] ?? null));
  return [keep(search, names), keep(compare, names), keep(cluster, names),
          index || (names[0] ?? null), keep(remove, deletable), keep(documents, names)];
}"""


# After a run, focus on the run's button again when it had it (a keyboard user's Enter on it):
# the button is disabled while it runs, which dropped the focus to the page's body. Not when
# the focus went elsewhere since (the next query being typed). The run's Stop button counts as
# lost too: a keyboard user waits on it, and it hides itself when the run ends (the focus fell
# to the body, and the next Tab started from the top of the page).
RUN_STARTED_JS = """() => {
  const button = document.getElementById('%(id)s');
  (window.facetRefocus ??= {})['%(id)s'] = !!button && button.contains(document.activeElement);
}"""
RUN_ENDED_JS = """async () => {
  const had = (window.facetRefocus ?? {})['%(id)s'];
  if (!had) return;
  window.facetRefocus['%(id)s'] = false;
  for (let i = 0; i < 100; i++) {  // until the button is enabled again (<= 5 s)
    const button = document.getElementById('%(id)s');
    const stop = '%(stop)s' ? document.getElementById('%(stop)s') : null;
    const active = document.activeElement;
    const lost = !active || active === document.body || (!!stop && stop.contains(active));
    if (!button || !lost) return;
    if (!button.disabled) { button.focus(); return; }
    await new Promise((done) => setTimeout(done, 50));
  }
}"""


# On a phone the Search button and the results are below the options column: Enter in the
# query box ran the search and nothing on the screen changed (the results ~1.9 screens down).
# A narrow page scrolls to the summary when the search ends; a wide one is left where it is.
SCROLL_TO_SUMMARY_JS = """() => {
  if (window.innerWidth > 640) return;
  const summary = document.getElementById('%(id)s');
  if (summary) summary.scrollIntoView({block: 'start'});
}"""


# Stop hides itself: the focus (a keyboard user's Enter on it) goes to the Cluster button.
STOPPED_JS = """() => {
  const button = document.getElementById('cluster-button');
  if (button && (!document.activeElement || document.activeElement === document.body)) {
    button.focus();
  }
}"""

# "Cancel job" hides itself once pressed: the focus (a keyboard user's Enter on it) fell to the
# page's body. It goes to the job's bar, which says "cancelling" and then how the job ended, and
# is followed by the stopped-jobs list (Resume). Not when the focus went elsewhere meanwhile.
CANCELLED_JS = """async () => {
  for (let i = 0; i < 60; i++) {  // until the button has gone (<= 3 s)
    const button = document.getElementById('index-cancel-button');
    const active = document.activeElement;
    const onButton = !!button && !!active && button.contains(active);
    if (!active || active === document.body || (onButton && !button.offsetParent)) {
      const bar = document.getElementById('index-status');
      if (bar) { bar.tabIndex = -1; bar.focus(); }
      return;
    }
    if (!onButton) return;
    await new Promise((done) => setTimeout(done, 50));
  }
}"""

# The Index tab's controls that hide themselves when a job ends ("Cancel job") or when the
# last stopped job is resumed (the Resume row): the focus of a keyboard user waiting on them fell
# to the page's body. ``FOCUS_TRACK_JS`` (on load) remembers the last element focused, which a
# hidden one leaves without a new focus; after the controls change, a focus lost from one of
# them goes to the job's bar, as after a pressed Cancel.
# Gradio's radio groups: each option had a name of its own ("radio-1".."radio-4"), so each
# was a Tab stop and the arrow keys did not move between them, and the group's label was loose
# text a screen reader did not say with them ("auto, radio button, 1 of 4", no "Match by": the
# UI exploration of the third session of 2026-12-07). Each group gets one name and is a
# radiogroup named by its label, again whenever Gradio renders one (a tab opened first).
RADIO_GROUPS_JS = """() => {
  if (window.facetRadioGroups) return;
  window.facetRadioGroups = true;
  let due = false, made = 0;
  const mend = () => {
    due = false;
    document.querySelectorAll('fieldset').forEach((group) => {
      const radios = group.querySelectorAll('input[type=radio]');
      if (!radios.length) return;
      // (A group without an id keeps the name it was first given, not one by its place: a
      // group rendered before it would take its name, unchecking its option.)
      const key = group.id || (group.dataset.facetRadios ??= 'facet-radios-' + (++made));
      radios.forEach((radio) => { if (radio.name !== key) radio.name = key; });
      const label = group.querySelector('[data-testid="block-info"]');
      if (label) {
        if (!label.id) label.id = key + '-label';
        group.setAttribute('role', 'radiogroup');
        group.setAttribute('aria-labelledby', label.id);
      }
    });
  };
  mend();
  // (Gradio gives the options new names of their own as the value changes: mended again.)
  new MutationObserver(() => { if (!due) { due = true; requestAnimationFrame(mend); } })
    .observe(document.body, {childList: true, subtree: true, attributes: true,
                             attributeFilter: ['name']});
}"""
FOCUS_TRACK_JS = """() => {
  if (window.facetFocusTracked) return;
  window.facetFocusTracked = true;
  document.addEventListener('focusin', (e) => { window.facetLastFocus = e.target; });
}"""
JOB_CONTROLS_FOCUS_JS = """async () => {
  // (A hidden control may be taken out of the page: matched by its own and its ancestors' ids.)
  const within = (el) => !!el && !!el.closest && !!el.closest('#index-cancel-button, #index-stopped-row');
  const gone = (el) => !el.isConnected || !el.offsetParent;
  for (let i = 0; i < 20; i++) {  // until the update has hidden them (<= 1 s)
    const active = document.activeElement;
    const last = window.facetLastFocus;
    const lost = !active || active === document.body || (within(active) && gone(active));
    if (!lost) return;
    if (within(last) && gone(last)) {
      const bar = document.getElementById('index-status');
      if (bar) { bar.tabIndex = -1; bar.focus(); }
      return;
    }
    await new Promise((done) => setTimeout(done, 50));
  }
}"""

# Previous and Next disable themselves on the first and the last page: the focus of a keyboard
# user paging with Enter fell to the page's body. It goes to the other paging button.
PAGED_JS = """async () => {
  for (let i = 0; i < 20; i++) {  // until the page's update has landed (<= 1 s)
    const pressed = document.getElementById('%(pressed)s');
    const other = document.getElementById('%(other)s');
    const active = document.activeElement;
    const lost = !active || active === document.body || (active === pressed && pressed.disabled);
    if (!lost && active !== pressed) return;
    if (lost && pressed && pressed.disabled && other && !other.disabled) { other.focus(); return; }
    await new Promise((done) => setTimeout(done, 50));
  }
}"""

# Compare's results are not live (a screen reader would read the whole table): their summary
# line (``render.compare_html``'s ``facet-summary``) and the notes above it (each cut to 160
# characters, as ``render.said_html`` cuts Search's) are copied, as text, into the tab's live
# area, as the Search and Cluster tabs have theirs. Parsed apart from the page (DOMParser runs
# nothing).
COMPARE_SUMMARY_JS = """(html) => {
  const doc = new DOMParser().parseFromString(html || '', 'text/html');
  const summary = doc.querySelector('.facet-summary');
  if (!summary) return '';
  const cut = (text) => (text.length <= 160 ? text : text.slice(0, 160) + '\u2026');
  const notes = [...doc.querySelectorAll('.facet-note')].map((n) => cut(n.textContent.trim()));
  const text = [summary.textContent.trim(), ...notes].filter(Boolean).join(' ');
  return text.replace(/[&<>"']/g, (c) => '&#' + c.charCodeAt(0) + ';');
}"""

# The Cluster tab's summary (or "Clustering stopped") as text, said from a live
# area outside the tabs: in the tab's panel it was never said to a user who went to another
# tab while a clustering ran (minutes on a CPU). The summary itself is no live area, so on the
# Cluster tab it is said once. Parsed apart from the page (DOMParser runs nothing). A failure
# (``failed_html``: aria-live="off") is left to the error toast, which says it (it was said
# twice); lines and blocks are read apart (a note and the summary ran together: "...)60 texts").
CLUSTER_SAID_JS = """(html) => {
  const doc = new DOMParser().parseFromString(html || '', 'text/html');
  if (!doc.body) return '';
  doc.body.querySelectorAll('[aria-live="off"]').forEach((e) => e.remove());
  doc.body.querySelectorAll('br, div, p, li, small').forEach((e) => e.after(' '));
  const text = doc.body.textContent.replace(/\\s+/g, ' ').trim();
  return text.replace(/[&<>"']/g, (c) => '&#' + c.charCodeAt(0) + ';');
}"""

# The Cluster tab's table: fractions of a narrow (375 px) screen broke its headers a letter a
# line; minimum widths in pixels let it scroll sideways instead.
CLUSTER_WIDTHS = ["80px", "60px", "160px", "200px", "320px"]


def live_html(**kwargs: Any) -> gr.HTML:
    """An HTML area whose changes a screen reader says (``role="status"``, polite): a run's
    summary or failure, a job's bar. The wrapper stays while its content changes."""
    return gr.HTML(html_template='<div role="status" aria-live="polite">${value}</div>',
                   **kwargs)


def refocus(events: list[Any], button: gr.Button, stop: gr.Button | None = None) -> None:
    """After each of ``events``, ``button`` focused again if it had the focus at its run's start
    (``RUN_STARTED_JS``) and nothing else has it now but the run's ``stop`` button."""
    for after in events:
        after(None, None, None, js=RUN_ENDED_JS % {"id": button.elem_id,
                                                   "stop": stop.elem_id if stop is not None else ""},
              api_name=f"lambda_refocus_{str(button.elem_id).replace('-', '_')}",
              api_visibility="private", queue=False)


def run_button(button: gr.Button, triggers: list[Any], fn: Callable[..., Any], inputs: Any,
               outputs: Any, *, stop: gr.Button | None = None, clears: gr.HTML | None = None,
               **kwargs: Any) -> Any:
    """``fn``'s event on ``triggers`` with ``button`` disabled while it runs and enabled again
    after it, whether it succeeded or failed; returns ``fn``'s event. A click during a run was
    ignored (Gradio's ``trigger_mode="once"``) while the button looked ready. ``stop`` (a
    Stop button, hidden until then) is shown while it runs. ``clears``: an area emptied as the
    run starts, where its progress is drawn: the Cluster tab's bar was drawn over the last
    run's failure, the two texts overlapping for the whole run (the UI exploration of the
    third session of 2026-12-07).

    ``triggers`` include the Enter (``submit``) of the tab's one-line boxes: only the Search
    tab's Query box ran its search on Enter."""
    if clears is None:
        started = gr.on(triggers, lambda: gr.update(interactive=False), None, button,
                        js=RUN_STARTED_JS % {"id": button.elem_id}, api_visibility="private",
                        queue=False)
    else:
        started = gr.on(triggers, lambda: (gr.update(interactive=False), ""), None,
                        [button, clears], js=RUN_STARTED_JS % {"id": button.elem_id},
                        api_visibility="private", queue=False)
    event = started.then(fn, inputs, outputs, **kwargs)
    # Both: Gradio 6.31's page runs only the `failure` events after a handler's gr.Error, not
    # the `then` ones (the button stayed disabled after a refused search).
    for after in (event.then, event.failure):
        after(lambda: gr.update(interactive=True), None, button, api_visibility="private",
              queue=False)
    refocus([event.then, event.failure], button, stop)
    if stop is not None:
        started.then(lambda: gr.update(visible=True), None, stop, api_visibility="private",
                     queue=False)
        for after in (event.then, event.failure):
            after(lambda: gr.update(visible=False), None, stop, api_visibility="private",
                  queue=False)
    return event


def submits(*boxes: Any) -> list[Any]:
    """The Enter (``submit``) triggers of one-line boxes (a multi-line box's Enter is a new
    line, and it has none here)."""
    return [box.submit for box in boxes]


def failed(handler: str, blank: tuple[Any, ...] = (), **how: Any) -> Callable[[gr.Request], Any]:
    """What a result area shows after ``handler``'s run failed, with the failure's message
    (``last_failure``), after ``blank`` (the tab's other outputs, emptied); ``how``: the
    options of ``render.failed_html``."""

    def show_failure(request: gr.Request) -> Any:
        message = render.failed_html(last_failure(request, handler), **how)
        return (*blank, message) if blank else message

    return show_failure


def build_ui(facet: Facet | Callable[[], Facet], settings: FacetSettings | None = None, *,
             export_dir: Path | None = None) -> gr.Blocks:
    """The page over ``facet`` (or a function returning it, for a server that builds its facade
    at start-up).

    Args:
        facet: the facade or its provider.
        settings: the settings (default the facade's, else the environment's).
        export_dir: where CSV exports go (default a temp folder).
    """
    if settings is None:
        settings = facet.settings if isinstance(facet, Facet) else get_settings()
    # Files from a client must be Gradio's own uploads: a mounted app (`facet serve`) skips
    # Gradio's check of them.
    h = UiHandlers(facet, settings, export_dir, upload_root=Path(gr_utils.get_upload_folder()))
    embedders = h.embedders()
    model: dict[str, Any] = {"concurrency_id": MODEL, "concurrency_limit": settings.ui_concurrency}
    light: dict[str, Any] = {"concurrency_id": LIGHT, "concurrency_limit": LIGHT_LIMIT}

    with gr.Blocks(title="Facet", analytics_enabled=False, delete_cache=DELETE_CACHE) as demo:
        gr.Markdown(INTRO)
        with gr.Tabs():
            # ------------------------------------------------------------ search
            with gr.Tab("Search", id="search"):
                with gr.Row():
                    with gr.Column(scale=3):
                        s_query = gr.Textbox(label="Query", elem_id="search-query",
                                             placeholder="my card payment was declined")
                        s_instruction = gr.Textbox(
                            label="Instruction", elem_id="search-instruction",
                            placeholder="Find messages with the same customer intent")
                        s_examples = picker(label="Example instructions (fill the box)",
                                            choices=GENERIC_EXAMPLES, value=None,
                                            elem_id="search-examples")
                        # The syntax as `info`, shown above the box: a placeholder is faint and
                        # goes at the first letter typed.
                        s_filters = gr.Textbox(label="Metadata filters",
                                               info=f"key=value, e.g. intent=card_arrival {FILTER_LINES}",
                                               elem_id="search-filters")
                    with gr.Column(scale=2):
                        s_collection = picker(label="Collection", choices=[],
                                              elem_id="search-collection")
                        s_embedder = picker(label="Embedder (the collection's vectors)",
                                            choices=[], elem_id="search-embedder")
                        s_k = results_box(elem_id="search-k")
                        with gr.Row():
                            s_rerank = gr.Checkbox(label="Rerank", value=False,
                                                   elem_id="search-rerank")
                            s_reranker = picker(label="Reranker", choices=h.rerankers(),
                                                value=next(iter(h.rerankers()), None))
                        # On, as `facet search` and POST /search group by default (the page alone
                        # listed chunks: the same query gave other lists than the CLI).
                        s_group = gr.Checkbox(label="Group by document", value=True)
                        s_mode = gr.Radio(list(SEARCH_MODES), value="auto",
                                          label="Match by (auto: hybrid without an instruction, "
                                                "else dense; dense: the embedder; lexical: the "
                                                "words, BM25; hybrid: both)",
                                          elem_id="search-mode")
                s_button = gr.Button("Search", variant="primary", elem_id="search-button")
                s_summary = live_html(elem_id="search-summary")
                s_results = gr.HTML(elem_id="search-results")

            # ----------------------------------------------------------- compare
            with gr.Tab("Compare", id="compare"):
                gr.Markdown("The same query under two instructions, side by side: arrows show "
                            "how each result of B moved against A.")
                with gr.Row():
                    c_query = gr.Textbox(label="Query", elem_id="compare-query", scale=3)
                    c_collection = picker(label="Collection", choices=[], scale=1,
                                          elem_id="compare-collection")
                    c_embedder = picker(label="Embedder", choices=[], scale=1)
                with gr.Row():
                    c_a = gr.Textbox(label="Instruction A", elem_id="compare-a")
                    c_b = gr.Textbox(label="Instruction B", elem_id="compare-b")
                with gr.Row():
                    c_examples = picker(label="Example instructions (fill B)",
                                        choices=GENERIC_EXAMPLES, value=None,
                                        elem_id="compare-examples")
                    c_k = results_box(elem_id="compare-k")
                    c_filters = gr.Textbox(label="Metadata filters",
                                           info=f"key=value {FILTER_LINES}")
                c_button = gr.Button("Compare", variant="primary", elem_id="compare-button")
                # Said, not shown (the results show it): the results' summary line.
                c_summary = live_html(elem_id="compare-summary", elem_classes=["facet-sr-only"])
                c_results = gr.HTML(elem_id="compare-results")

            # ----------------------------------------------------------- cluster
            with gr.Tab("Cluster", id="cluster"):
                with gr.Row():
                    with gr.Column(scale=2):
                        k_source = gr.Radio(CLUSTER_SOURCES, value=SOURCE_COLLECTION,
                                            label="Texts to cluster", elem_id="cluster-source")
                        with gr.Group() as k_from_collection:
                            k_collection = picker(label="Collection", choices=[],
                                                  elem_id="cluster-collection")
                            k_filters = gr.Textbox(label="Metadata filters (collection or "
                                                         "search)", info=f"key=value {FILTER_LINES}")
                        with gr.Group(visible=False) as k_from_search:
                            k_query = gr.Textbox(label="Search query")
                            k_query_instruction = gr.Textbox(label="Search instruction")
                        with gr.Group(visible=False) as k_from_texts:
                            k_pasted = gr.Textbox(label="Texts, one per line", lines=6,
                                                  elem_id="cluster-texts")
                            k_upload = gr.File(label="or a file: .txt (lines), .json (list or "
                                                     "GoalEx data.json), .jsonl, .csv",
                                               type="filepath", file_count="single",
                                               elem_id="cluster-upload")
                            k_labels = gr.File(label="Gold labels (optional, for the V-measure): "
                                                     ".json list or labels.json, or lines",
                                               type="filepath", file_count="single",
                                               elem_id="cluster-labels")
                        k_limit = gr.Number(label="At most this many texts (0 = all, up to "
                                                  f"{settings.max_cluster_texts:,})",
                                            value=CLUSTER_LIMIT_DEFAULT, precision=None,
                                            elem_id="cluster-limit")
                    with gr.Column(scale=2):
                        # A value, not a placeholder: the grey example looked filled in, and
                        # the first click was refused as "The instruction is empty".
                        k_instruction = gr.Textbox(label="Instruction (what to group by)",
                                                   elem_id="cluster-instruction",
                                                   value=DEFAULT_CLUSTER_INSTRUCTION)
                        select_if_default(k_instruction, DEFAULT_CLUSTER_INSTRUCTION)
                        # No `minimum`: Gradio's own "Value -1 is less than minimum value 0" named
                        # no box; the handler's message says which and why (docs/ui.md).
                        k_k = gr.Number(label="k (0 = choose by silhouette)", value=0,
                                        precision=None, elem_id="cluster-k")
                        # The silhouette's bound (POST /cluster's max_k, the CLI's --max-k):
                        # without it k = 0 never chose more than 10, on data of 147 classes.
                        # precision=None in the three boxes: Gradio rounded 2.5 to 2 unsaid;
                        # the handler refuses a fraction (ui.inputs.whole_number).
                        k_max_k = gr.Number(label=f"Largest k to try (with k = 0; 2 to {MAX_K})",
                                            value=ClusterRequest.max_k, precision=None,
                                            elem_id="cluster-max-k")
                        k_embedder = picker(label="Instruction embedder", choices=embedders,
                                            elem_id="cluster-embedder",
                                            value=settings.default_embedder
                                            if settings.default_embedder in embedders
                                            else None)
                        k_explainer = picker(label="Cluster names",
                                             choices=h.explainers(), value=NO_EXPLAINER)
                        with gr.Row():
                            k_button = gr.Button("Cluster", variant="primary",
                                                 elem_id="cluster-button", scale=3)
                            # Shown while a clustering runs (``run_button``).
                            k_stop = gr.Button("Stop", variant="stop", visible=False,
                                               elem_id="cluster-stop-button", scale=1)
                # (Said from ``k_said``, after the tabs.)
                k_summary = gr.HTML(elem_id="cluster-summary")
                k_plot = gr.Plot(label="Map (PCA of the embeddings)", elem_id="cluster-map")
                k_table = gr.Dataframe(headers=render.CLUSTER_COLUMNS, label="Clusters",
                                       interactive=False, wrap=True, elem_id="cluster-table",
                                       column_widths=CLUSTER_WIDTHS)
                k_csv = gr.File(label="CSV export", interactive=False, elem_id="cluster-csv")

            # ------------------------------------------------------------- index
            with gr.Tab("Index", id="index"):
                with gr.Row():
                    # A new name has its own box: typed into the picker, Enter took the first
                    # collection holding it ("note" became "notes"), and the upload went there.
                    i_collection = picker(label="Collection (pick one)", choices=[],
                                          elem_id="index-collection")
                    i_new = gr.Textbox(label="or a new collection (used instead of the pick when "
                                             "filled)", placeholder="its name, e.g. my-notes",
                                       elem_id="index-new-collection")
                    i_embedder = picker(label="Corpus embedder", choices=embedders,
                                        value=settings.default_embedder
                                        if settings.default_embedder in embedders else None)
                with gr.Row():
                    with gr.Column():
                        i_files = upload_box(
                            label=f"Upload files ({' '.join(Facet.supported_suffixes())}; "
                                  f"at most {settings.ui_max_upload_mb:g} MB each)",
                            file_count="multiple", type="filepath", elem_id="index-files")
                        i_upload_button = gr.Button("Index the uploads", variant="primary",
                                                    elem_id="index-upload-button")
                    with gr.Column():
                        roots = ", ".join(str(r) for r in settings.ui_allowed_roots)
                        i_folder = picker(
                            label=f"or a folder on the server (under {roots})" if roots else
                            "Server folders: none allowed (FACET_UI_ALLOWED_ROOTS is empty)",
                            choices=[], elem_id="index-folder")
                        i_folder_button = gr.Button("Index the folder",
                                                    elem_id="index-folder-button")
                # The bar's job, for the timer's polls (and an API client's result): not shown,
                # the bar names it ("Job 0" stood there before any job).
                i_job = gr.Number(label="Job", interactive=False, precision=0,
                                  elem_id="index-job", visible=False)
                i_total = gr.State(0)
                # Not a live region: the job's bar changes every poll (a screen reader read
                # ~20 words every 1.6 s for a whole job); its progressbar role carries it.
                i_status = gr.HTML(elem_id="index-status")
                # (What is said instead of the bar: ``i_said``, after the tabs.)
                # Shown while the bar's job is queued or running (``cancel_button``).
                i_cancel = gr.Button("Cancel job", elem_id="index-cancel-button", size="sm",
                                     variant="stop", visible=False)
                # Jobs stopped before they finished (a server restart): shown only when there is
                # one this page can resume.
                with gr.Row(visible=False, elem_id="index-stopped-row") as i_stopped_row:
                    i_stopped = picker(label="Stopped job (it did not finish: what it indexed is "
                                             "kept)", choices=[], elem_id="index-stopped", scale=3)
                    i_resume = gr.Button("Resume", elem_id="index-resume-button", scale=1)
                i_errors = gr.Dataframe(headers=render.JOB_ERROR_COLUMNS,
                                        label="Per-document errors and warnings",
                                        interactive=False, wrap=True, elem_id="index-errors")
                i_timer = gr.Timer(1.0, active=False)

            # ------------------------------------------------------- collections
            with gr.Tab("Collections", id="collections") as l_tab:
                # Named for what they act on: a screen reader's list of buttons read "Refresh",
                # "Previous", "Next" with nothing to say of what (the keyboard review of the
                # first session of 2026-12-07).
                l_refresh = gr.Button("Refresh collections", elem_id="collections-refresh")
                l_table = gr.Dataframe(headers=render.COLLECTION_COLUMNS, label="Collections",
                                       interactive=False, elem_id="collections-table")
                # Widths: left to the content, long messages squeezed the other columns until
                # their headers broke mid-word ("jo|b", "fa|il|ed").
                l_jobs = gr.Dataframe(headers=render.JOB_COLUMNS, label="Recent index jobs",
                                      interactive=False, wrap=True, elem_id="jobs-table",
                                      column_widths=render.JOB_COLUMN_WIDTHS)
                with gr.Row():
                    l_delete = picker(label="Delete collection", choices=[],
                                      elem_id="delete-collection")
                    l_confirm = gr.Textbox(label="Type its name to confirm",
                                           elem_id="delete-confirm")
                    l_button = gr.Button("Delete", variant="stop", elem_id="delete-button")
                # Why the last Delete did nothing (a wrong confirmation), until the next one: the
                # toast alone closed itself after 10 s.
                l_status = live_html(elem_id="delete-status")

                # The documents of one collection, a page at a time, and removing some of them
                # (an upload's file goes with it, so a later upload job does not add it back).
                gr.Markdown("## Documents", elem_id="documents-heading")  # (h1 Facet, then h2: no level skipped)
                with gr.Row():
                    d_collection = picker(label="Documents of collection", choices=[],
                                          elem_id="documents-collection", scale=2)
                    d_status = gr.Radio(docs_view.STATUS_CHOICES, value=docs_view.ALL_STATUSES,
                                        label="Status", elem_id="documents-status", scale=2)
                    d_prefix = gr.Textbox(label="Key or file name starts with",
                                          info="an uploaded file's name, a folder's path, a "
                                               "record id's start; Enter applies it",
                                          elem_id="documents-prefix", scale=2)
                d_page = live_html(elem_id="documents-page")
                d_table = gr.Dataframe(headers=docs_view.DOCUMENT_COLUMNS, label="Documents",
                                       interactive=False, wrap=True, elem_id="documents-table",
                                       column_widths=docs_view.DOCUMENT_COLUMN_WIDTHS)
                # Where the page on show stands (``PageCursor``: the key it starts after, the
                # last key it shows), for Previous, Next and Remove; kept by the page, so a
                # server restart loses no place.
                d_cursor = gr.JSON(value=docs_view.PageCursor().value(), visible=False,
                                   elem_id="documents-cursor")
                # The prefix the shown page was listed with (Enter applies a typed one): Next,
                # Previous and Remove page with it, not with text typed since and not applied
                # (they listed another filter's page from the old place).
                d_applied = gr.State("")
                with gr.Row():
                    d_previous = gr.Button("Previous page", size="sm", interactive=False,
                                           elem_id="documents-previous")
                    d_next = gr.Button("Next page", size="sm", interactive=False,
                                       elem_id="documents-next")
                d_remove = gr.CheckboxGroup(choices=[], label="Remove documents (of the page "
                                                              "shown)",
                                            elem_id="documents-remove")
                with gr.Row():
                    d_confirm = gr.Textbox(label="Type the collection's name to confirm",
                                           elem_id="documents-confirm")
                    d_remove_button = gr.Button("Remove selected", variant="stop",
                                                elem_id="documents-remove-button")
                # Why the last Remove did nothing, until the next one (as the Delete form's).
                d_removal = live_html(elem_id="documents-remove-status")

        # What is said of the Index tab's job instead of its bar: the job and its state, once per
        # change of state (``UiHandlers.job_controls``). Not shown: the bar shows it. Outside
        # the tabs: in the Index tab's panel it was hidden whenever another tab was open, and a
        # job's end (or failure) was never said to a user who went on searching meanwhile.
        i_said = live_html(elem_id="index-announce", elem_classes=["facet-sr-only"])
        # The Cluster tab's summary, said wherever the user is when a clustering ends
        # (``CLUSTER_SAID_JS``). Not shown: the tab shows the summary.
        k_said = live_html(elem_id="cluster-announce", elem_classes=["facet-sr-only"])

        # ---------------------------------------------------------------- events
        pickers_in = [s_collection, c_collection, k_collection, i_collection, l_delete]
        pickers_out = [*pickers_in, i_folder]
        # The lists the last refresh read (``KEEP_PICKS_JS``); in the browser only.
        picker_lists = gr.JSON(visible=False, elem_id="picker-lists")

        def refresh(event: Any) -> Any:
            """The pickers' choices read again, then their values checked in the browser: the
            last event (a listing of the documents view goes after it)."""
            picks = [*pickers_in, d_collection]
            # `success`: after a failed read the lists are the last one's, or none yet.
            return event(h.picker_choices, None, [*pickers_out, d_collection, picker_lists],
                         api_name="refresh_pickers", api_visibility="private", **light).success(
                None, [*picks, picker_lists], picks, js=KEEP_PICKS_JS,
                api_name="lambda_keep_picks", api_visibility="private", queue=False)

        demo.load(h.refresh_pickers, pickers_in, pickers_out, api_name="pickers", **light)
        demo.load(h.collections, None, [l_table, l_jobs], api_name="collections_on_load",
                  api_visibility="private", **light)

        for collection, embedder, examples, box in (
                (s_collection, s_embedder, s_examples, s_instruction),
                (c_collection, c_embedder, c_examples, c_b)):
            collection.change(h.collection_changed, collection, [embedder, examples],
                              api_visibility="private", **light)
            # The focus to the instruction filled, to read or edit it.
            on_pick(examples, box, "value || undefined", then_focus=f"#{box.elem_id} textarea")
        # The Cluster and Index tabs offer the allowed embedders and, once a collection is
        # picked, the specs with options it was indexed with (minilm[instruction_weight=1]).
        for collection, embedder, choices in ((k_collection, k_embedder, h.cluster_embedder_choices),
                                              (i_collection, i_embedder, h.embedder_choices)):
            collection.change(choices, collection, embedder, api_visibility="private", **light)

        search_event = run_button(s_button, [s_button.click, *submits(s_query, s_instruction,
                                                                      s_filters, s_k)], h.search,
                                  [s_query, s_instruction, s_collection, s_embedder, s_k,
                                   s_filters, s_rerank, s_reranker, s_group, s_mode],
                                  [s_results, s_summary], api_name="search", **model)
        search_event.then(None, None, None, js=SCROLL_TO_SUMMARY_JS % {"id": "search-summary"},
                          api_name="lambda_search_scrolled", api_visibility="private", queue=False)
        refresh(search_event.failure)  # a collection deleted elsewhere leaves the lists
        # A failed run leaves no earlier results on the page under its error, as if current;
        # the result area says why (the toast closes itself).
        search_event.failure(failed("search", ("",)), None, [s_results, s_summary],
                             api_visibility="private", **light)
        compare_event = run_button(c_button, [c_button.click, *submits(c_query, c_a, c_b, c_k,
                                                                       c_filters)], h.compare,
                                   [c_query, c_a, c_b, c_collection, c_embedder, c_k, c_filters],
                                   c_results, api_name="compare", **model)
        refresh(compare_event.failure)
        compare_event.then(None, c_results, c_summary, js=COMPARE_SUMMARY_JS,
                           api_name="lambda_compare_summary", api_visibility="private",
                           queue=False)
        compare_event.failure(failed("compare", ("",)), None, [c_summary, c_results],
                              api_visibility="private", **light)

        # A search's results start at the number `facet cluster --query` takes (they stayed at
        # a collection's 500: the whole of a 308-message collection, whatever the query).
        k_source.change(lambda source: (gr.update(visible=source != SOURCE_TEXTS),
                                        gr.update(visible=source == SOURCE_SEARCH),
                                        gr.update(visible=source == SOURCE_TEXTS),
                                        gr.update(value=SEARCH_RESULTS_CLUSTERED
                                                  if source == SOURCE_SEARCH
                                                  else CLUSTER_LIMIT_DEFAULT)),
                        k_source, [k_from_collection, k_from_search, k_from_texts, k_limit],
                        api_visibility="private", queue=False)
        # Not the pasted texts' box: its Enter is a new line.
        cluster_event = run_button(
            k_button, [k_button.click, *submits(k_filters, k_query, k_query_instruction, k_limit,
                                                k_instruction, k_k, k_max_k)], h.cluster,
            [k_source, k_collection, k_filters, k_limit, k_query, k_query_instruction, k_pasted,
             k_upload, k_labels, k_instruction, k_k, k_embedder, k_explainer, k_max_k],
            [k_summary, k_plot, k_table, k_csv],
            api_name="cluster", show_progress_on=k_summary, stop=k_stop, clears=k_summary, **model)
        # Stop: Gradio cancels the event (the page is free at once) and the handler has the
        # work stop at its next step; the buttons come back as after any run.
        k_stop.click(h.stop_cluster, None, k_summary, cancels=[cluster_event],
                     api_name="stop_cluster", **light).then(
            lambda: (gr.update(interactive=True), gr.update(visible=False)), None,
            [k_button, k_stop], api_visibility="private", queue=False).then(
            None, None, None, js=STOPPED_JS, api_name="lambda_refocus_after_stop",
            api_visibility="private", queue=False)
        # A page reloaded or closed: its clustering stops too (it ran on for minutes, and every
        # page's searches waited behind it).
        demo.unload(h.page_closed)
        for fn in demo.fns.values():
            if fn.fn is not None and getattr(fn.fn, "__name__", "") == "page_closed":
                # demo.unload takes no group: with the light events, never behind a clustering.
                fn.concurrency_id, fn.concurrency_limit = LIGHT, LIGHT_LIMIT
            elif fn.is_cancel_function and fn.api_name == "unnamed":
                # Gradio's own cancel (no facade call), named as the page's other toggles.
                fn.api_name = "lambda_cancel_cluster"
        k_summary.change(None, k_summary, k_said, js=CLUSTER_SAID_JS, api_name="lambda_cluster_said",
                         api_visibility="private", queue=False)
        refresh(cluster_event.failure)
        # (A run stopped with Stop says so, not "The last run failed".)
        cluster_event.failure(h.cluster_failed, None, [k_plot, k_table, k_csv, k_summary],
                              api_visibility="private", **light)

        job_outputs = [i_job, i_total, i_status, i_errors, i_timer]
        # The new name last: an API client that sends files, collection and embedder still can.
        # Each button disabled while its request is sent (two clicks on "Index the folder"
        # queued two jobs); `show_progress="hidden"`: a refusal is said in the bar's place
        # (``failed`` below) and the toast, and leaves the other outputs as they were (Gradio
        # put an "Error" badge over each, the upload zone included).
        upload_event = run_button(i_upload_button, [i_upload_button.click], h.index_upload,
                                  [i_files, i_collection, i_embedder, i_new],
                                  [*job_outputs, i_files], api_name="index_upload",
                                  show_progress="hidden", **light)
        typed_enter(i_folder, i_folder_button)
        folder_event = run_button(i_folder_button, [i_folder_button.click], h.index_folder,
                                  [i_folder, i_collection, i_embedder, i_new], job_outputs,
                                  api_name="index_folder", show_progress="hidden", **light)
        resume_event = i_resume.click(h.resume_index, i_stopped, job_outputs,
                                      api_name="resume_index", **light)
        # Picking a collection clears a new name typed before: the last choice is the one used.
        # (`on_pick`: the person's pick, Enter included. Not `change`, which the page's own
        # filling of the empty picker with the first collection fired too: a new name typed
        # while the page loaded was wiped, seen in a browser test; nor every `input`, which
        # Gradio fires when the focus merely leaves the picker.)
        on_pick(i_collection, i_new, "''")
        refresh(upload_event.then)
        refresh(folder_event.then)
        # A refused request left the previous job's bar under the error badges, as if that job
        # had failed; the bar comes back on the timer's next tick if a job is still running.
        for event, name in ((upload_event, "index_upload"), (folder_event, "index_folder"),
                            (resume_event, "resume_index")):
            event.failure(failed(name, ([],)), None, [i_errors, i_status],
                          api_visibility="private", **light)
        load_event = demo.load(h.resume_job, None, job_outputs, api_visibility="private", **light)
        # A job started (or resumed) here goes on with a stopped one's folder: it leaves the list.
        for event in (load_event, upload_event, folder_event, resume_event):
            event.then(h.stopped_jobs, None, [i_stopped_row, i_stopped], api_visibility="private",
                       **light)
        i_timer.tick(h.job_status, [i_job, i_total], [i_status, i_errors, i_timer],
                     api_name="job_status", show_progress="hidden", **light)
        i_cancel.click(h.cancel_job, [i_job, i_total], [i_status, i_errors, i_timer, i_cancel],
                       api_name="cancel_job", **light).then(
            None, None, None, js=CANCELLED_JS, api_name="lambda_focus_after_cancel",
            api_visibility="private", queue=False)
        # The bar changes with its job's state: the button goes once the job has ended, the
        # announcement changes with the state, and a job that ended stopped (cancelled) joins
        # the stopped-jobs list at once (it was offered there only after a reload).
        i_status.change(h.job_controls, [i_job, i_said],
                        [i_cancel, i_said, i_stopped_row, i_stopped], api_visibility="private",
                        show_progress="hidden", **light).then(
            None, None, None, js=JOB_CONTROLS_FOCUS_JS, api_name="lambda_focus_after_job_controls",
            api_visibility="private", queue=False)
        demo.load(None, None, None, js=FOCUS_TRACK_JS, api_name="lambda_track_focus",
                  api_visibility="private", queue=False)
        demo.load(None, None, None, js=RADIO_GROUPS_JS, api_name="lambda_radio_groups",
                  api_visibility="private", queue=False)

        l_refresh.click(h.collections, None, [l_table, l_jobs], api_name="collections", **light)
        l_tab.select(h.collections, None, [l_table, l_jobs], api_name="collections_on_tab",
                     api_visibility="private", **light)
        # And every collection picker: a collection another page (or the CLI) made was listed in
        # the table but in no picker, not even this tab's Delete, whatever Refresh was pressed.
        # `show_progress="hidden"`: a refused delete (a wrong confirmation, a collection being
        # indexed) is said in `l_status` and the toast; it put "Error" badges over both tables
        # and the confirmation box, which Refresh did not bring back.
        delete_event = l_button.click(h.delete_collection, [l_delete, l_confirm],
                                      [l_table, l_jobs, l_confirm], api_name="delete_collection",
                                      show_progress="hidden", **light)
        delete_event.then(lambda: "", None, l_status, api_visibility="private", queue=False)
        delete_event.failure(failed("delete_collection", what="delete", results=False), None,
                             l_status,
                             api_visibility="private", **light)

        # The documents view: its picker filled when the tab opens or its collections change,
        # then the page of the collection picked, status and prefix.
        d_query = [d_collection, d_status, d_prefix]
        d_shown = [d_collection, d_status, d_applied]  # what the page on show was listed with
        d_outputs = [d_table, d_page, d_cursor, d_remove, d_previous, d_next]

        def documents_first(collection: str | None, status: str | None,
                            prefix: str | None) -> tuple[Any, ...]:
            return (*h.documents_first(collection, status, prefix), prefix or "")

        def documents_failed(event: Any, name: str) -> None:
            event.failure(failed(name, ([],), what="listing"), None, [d_table, d_page],
                          api_visibility="private", **light)

        for after in (l_tab.select, l_refresh.click, delete_event.then):
            refresh(after).then(documents_first, d_query, [*d_outputs, d_applied],
                                api_visibility="private", **light)
        first_event = gr.on([d_collection.change, d_status.change, d_prefix.submit],
                            documents_first, d_query, [*d_outputs, d_applied],
                            api_visibility="private",
                            show_progress="hidden", **light)
        documents_failed(first_event, "documents_first")
        documents_event = d_next.click(h.documents_next, [*d_shown, d_cursor], d_outputs,
                                       api_visibility="private", **light)
        paged_events = [documents_event]
        documents_failed(documents_event, "documents_next")
        documents_event.then(None, None, None, js=PAGED_JS % {"pressed": "documents-next",
                                                             "other": "documents-previous"},
                             api_name="lambda_focus_after_next", api_visibility="private", queue=False)
        documents_event = d_previous.click(h.documents_previous, [*d_shown, d_cursor], d_outputs,
                                           api_visibility="private", **light)
        paged_events.append(documents_event)
        documents_failed(documents_event, "documents_previous")
        documents_event.then(None, None, None, js=PAGED_JS % {"pressed": "documents-previous",
                                                             "other": "documents-next"},
                             api_name="lambda_focus_after_previous", api_visibility="private",
                             queue=False)
        # "Remove selected": refused (no document ticked, a wrong confirmation, a job writing
        # the collection) said in `d_removal` and the toast, the tables left as they were.
        remove_event = d_remove_button.click(
            h.remove_documents, [d_collection, d_remove, d_confirm, d_status, d_applied, d_cursor],
            [l_table, l_jobs, *d_outputs, d_confirm], api_name="remove_documents",
            show_progress="hidden", **light)
        remove_event.then(lambda: "", None, d_removal, api_visibility="private", queue=False)
        remove_event.failure(failed("remove_documents", what="removal", results=False), None,
                             d_removal, api_visibility="private", **light)

        # A refused delete, removal or listing, of a collection deleted meanwhile by another
        # page: its message says "the collection lists on this page have been refreshed", and
        # they were not (the table, the pickers and the documents view kept showing it). Each
        # failure reads them again; the documents view's picker moves off a collection gone
        # (its change lists the new pick), and stays, listing nothing again, on one still there.
        for failure in (delete_event.failure, remove_event.failure, first_event.failure,
                        *(e.failure for e in paged_events)):
            refresh(failure)
            failure(h.collections, None, [l_table, l_jobs], api_visibility="private", **light)

    demo.queue(max_size=settings.ui_max_queue,
               default_concurrency_limit=settings.ui_concurrency)
    # Read by mount_gradio_app's app; launch() takes it as its own argument (launch_ui).
    demo.state_session_capacity = SESSION_CAPACITY
    return demo


def mount_ui(app: FastAPI, facet: Facet | Callable[[], Facet], settings: FacetSettings,
             path: str = "/ui") -> FastAPI:
    """Serve the page from an existing FastAPI app (``facet serve``) at ``path``."""
    demo = build_ui(facet, settings)
    with facet_cors(settings):
        mounted: FastAPI = gr.mount_gradio_app(app, demo, path=path, **launch_options(settings))
    # Gradio checks that a file a client names was uploaded (not /etc/... or any file of the
    # server's) only once the Blocks "has launched", which mount_gradio_app never marks (Gradio
    # 6.31): mounted, the page copied any server file a request named into its cache and
    # clustered or indexed it. The flag gates nothing else there.
    demo.has_launched = True
    logger.info("UI mounted at %s", path)
    return mounted


def launch_ui(facet: Facet, *, host: str = "127.0.0.1", port: int = 7860,
              block: bool = True) -> gr.Blocks:
    """Run the page on its own server (``facet ui``); returns the running Blocks when
    ``block`` is False (tests, scripts: ``demo.close()`` stops it)."""
    from starlette.middleware import Middleware

    from app.api.guard import KeylessGuard, Unguarded

    settings = facet.settings
    demo = build_ui(facet, settings)
    warm_up_clustering()  # in the background: the first Cluster click does not import sklearn
    options = launch_options(settings)
    # Without a login, `facet serve`'s guard (a Host it does not answer to, a write from a page
    # of another site) stands before the page as before the API: unguarded, a page of another
    # site read the whole page config through a name of its own and uploaded files into it.
    # Gradio checks its start through the --host name, which is answered too.
    guard = Unguarded("this UI has no login", "set FACET_UI_AUTH (or FACET_API_KEY)",
                      login=ui_auth(settings) is not None, cookie_paths="")
    options["app_kwargs"]["middleware"].insert(0, Middleware(KeylessGuard, settings=settings,
                                                             unguarded=guard, also=(host,)))
    with _patient_start_check(), facet_cors(settings):
        demo.launch(server_name=host, server_port=port, share=False, inbrowser=False,
                    prevent_thread_lock=not block, quiet=not block,
                    state_session_capacity=demo.state_session_capacity,
                    root_path=settings.root_path or None, **options)  # (behind a proxy's prefix)
    return demo


# How long ``launch_ui`` waits for its own page to answer Gradio's start-up check.
START_CHECK_S = 30.0


@contextmanager
def _patient_start_check() -> Iterator[None]:
    """Gradio's ``launch`` checks that the page answers with one request (``url_ok``: a HEAD of
    3 s; a refused connection ends it at once), then stops with "When localhost is not
    accessible, a shareable link must be created": on a loaded machine the page was not
    answering yet (a fresh clone's test run, the fifth session of 2026-12-05), and `facet ui`
    would have stopped so. The check is asked again, up to ``START_CHECK_S``, while launching."""
    from gradio import networking

    quick = networking.url_ok

    def patient(url: str) -> bool:
        deadline = time.monotonic() + START_CHECK_S
        while not quick(url):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.5)
        return True

    networking.url_ok = patient
    try:
        yield
    finally:
        networking.url_ok = quick
