"""The UI's event handlers: each parses the widgets' values, calls one ``Facet`` method and
formats the answer (``ui.render``). No retrieval logic lives here.

Errors: every handler is wrapped by ``ui_errors``: a domain error (``app.errors``) becomes a
``gr.Error`` whose message is the core's own (escaped: Gradio renders it as HTML), with a
title per kind; anything else is logged with its traceback on the server and shown as a
short "server error" message, never as a traceback in the page.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import logging
import os
import shutil
import stat
import tempfile
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import gradio as gr

from app.core import Facet, allowed_model_names, ui_rerankers
from app.encoding import UNREAD_MARK, unread_count
from app.errors import (
    BusyError,
    ConflictError,
    DataError,
    FacetError,
    InvalidRequestError,
    ModelError,
    NotFoundError,
    TooLargeError,
    UnavailableError,
    UnknownModelError,
    reworded,
)
from app.services.clustering import (
    K_BY_SILHOUETTE,
    MAX_K,
    SEARCH_RESULTS_CLUSTERED,
    ClusterRequest,
    ClusterResponse,
    k_option,
    labels_v_measure,
    limit_option,
)
from app.services.collections import (
    JOB_GONE,
    LIVE_STATES,
    CollectionInfo,
    JobInfo,
    default_match,
    kept_said,
)
from app.services.indexing import IndexOptions
from app.services.search import MAX_TOP_K, SearchRequest, SearchResponse, served_note
from app.settings import FacetSettings
from app.text import plural, printable
from app.uploads import TAKEN_BACK
from embedders.contract import UNREAD_WHY
from ui import documents as docs_view
from ui import inputs, render

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

# Most specific first.
_TITLES: list[tuple[type[FacetError], str]] = [
    (UnknownModelError, "Unknown embedder"),
    (TooLargeError, "Too large"),
    (InvalidRequestError, "Check the input"),
    (NotFoundError, "Not found"),
    (DataError, "Unreadable input"),
    # Not only a collection being written: one of another embedder version, a port taken...
    (ConflictError, "Conflict"),
    (BusyError, "Server busy"),
    (UnavailableError, "Not available"),
    (ModelError, "Embedder failed"),
    (FacetError, "Error"),
]

# The most results the Search and Compare tabs show (their "Results (k)" boxes).
MAX_RESULTS = 50

SOURCE_COLLECTION = "collection"
SOURCE_SEARCH = "search results"
SOURCE_TEXTS = "pasted or uploaded texts"
CLUSTER_SOURCES = [SOURCE_COLLECTION, SOURCE_SEARCH, SOURCE_TEXTS]
NO_EXPLAINER = "keywords (no explainer)"
# What the Cluster tab's "At most this many texts" starts at for a collection or pasted texts
# (``ui/app.py``); choosing "search results" sets it to SEARCH_RESULTS_CLUSTERED, the results a
# search takes for `facet cluster --query` and POST /cluster (it stayed at 500: a search of a
# 308-message collection clustered every message).
CLUSTER_LIMIT_DEFAULT = 500
# The Cluster tab's instruction box starts with it (as a placeholder it looked filled in).
DEFAULT_CLUSTER_INSTRUCTION = "What is the topic of this text?"

GENERIC_EXAMPLES = [
    "Find documents on the same topic",
    "Find passages that answer the question",
    "Find messages with the same intent",
]

# The Cluster tab's summary after Stop (or the stopped run's own result).
CLUSTER_STOPPED = ("Clustering stopped: nothing was kept. The server ends the work at its next "
                   "step (a batch of texts); press Cluster to run it again.")

# What a stopped job's message says to do, in the page's words (the core's names a command line),
# with ``kept_said`` where the job wrote something.
RESUME_HINT = "to go on, pick it as the stopped job on the Index tab and press Resume"
# An upload job cancelled before it started whose files were taken back (``Facet.upload``, its
# message says ``TAKEN_BACK``): Resume indexed the folder without them ("0 documents seen ...
# nothing to index"). One a restart stopped while queued keeps its files, and is resumed.
UPLOAD_AGAIN_HINT = "to index them, upload them again"
NOT_HERE_HINT = ("this page cannot resume it (its files are not the collection's uploads or a "
                 "folder this page may index, or its embedder is not offered here); ask the "
                 "operator to run it again")


def ui_error(error: FacetError) -> gr.Error:
    """The ``gr.Error`` a domain error is shown as (message escaped: Gradio renders HTML)."""
    title = next(t for cls, t in _TITLES if isinstance(error, cls))
    message = str(error)
    if isinstance(error, NotFoundError) and message.startswith("unknown collection"):
        # Deleted since the page was loaded: the failed event refreshes the pickers.
        message += ". The collection lists on this page have been refreshed."
    # Resume or Cancel of a job whose collection was deleted named a command line.
    message = message.replace(JOB_GONE, "a job is deleted with its collection: the Collections "
                                        "tab lists those left")
    message = render.page_words(message)  # (waiting for a job, cancelling it: the page's ways)
    # A message quotes keys and file names: their control characters and bidi controls shown
    # escaped, line by line (``printable``), as the CLI shows them.
    message = "\n".join(printable(line) for line in message.split("\n"))
    return gr.Error(html.escape(message, quote=False), title=title, print_exception=False)


# The message of each page's (session's) last failed event, by handler, until its result area
# shows it (``last_failure``): the toast closes itself after 10 s, and the area said "its message
# is shown above" of a toast gone. The oldest are dropped past this many.
_FAILURES: OrderedDict[tuple[str, str], str] = OrderedDict()
_FAILURES_KEPT = 1000
_failures_lock = threading.Lock()


def _remember(handler: str, error: gr.Error) -> None:
    session = _session()
    if session is None:
        return
    with _failures_lock:
        # Unescaped: the result area escapes it again (a gr.Error's message is HTML).
        _FAILURES[(session, handler)] = html.unescape(str(error.message))
        _FAILURES.move_to_end((session, handler))
        while len(_FAILURES) > _FAILURES_KEPT:
            _FAILURES.popitem(last=False)


def _session() -> str | None:
    """The session (page) of the running event, as Gradio keeps its request (None outside
    one: a handler called directly, as tests do)."""
    from gradio.context import LocalContext

    return getattr(LocalContext.request.get(None), "session_hash", None)


class ClusterStopped(Exception):
    """A clustering stopped at its next step: its page pressed Stop or went away."""


def last_failure(request: gr.Request | None, handler: str) -> str | None:
    """The message (plain text) of the last failure of ``handler`` for the page of ``request``,
    forgotten once read; None when there is none."""
    session = getattr(request, "session_hash", None)
    with _failures_lock:
        return _FAILURES.pop((session, handler), None) if session is not None else None


def _who(request: gr.Request | None) -> str:
    """Who sent a page's event, for the log: the login's user name (where the UI has a login)
    and the client's address; "an unknown client" outside a request (a direct call)."""
    client = getattr(getattr(request, "client", None), "host", None) or "an unknown client"
    user = getattr(request, "username", None)
    return f"user {user!r} at {client}" if user else client


def _log_refusal(handler: str, shown: gr.Error, error: Exception) -> None:
    """One log line for an error a page was shown, as the API logs each error answer (an
    operator saw nothing of the page's failures, a Qdrant server out of reach included: the
    logs review of the seventh session of 2026-12-06): the handler, who sent it and the message
    as shown, secrets masked; at WARNING where the server's side failed (data it cannot read,
    a busy queue, a part out of reach), ERROR for a model's failure, else (a person's mistake:
    an unknown collection, a box left empty) INFO."""
    # Once: a handler calling another (a removal refreshing the collections table) logged the
    # inner one's failure again as its own, at INFO and "refused by the page" (the
    # verification round of the seventh session of 2026-12-06).
    shown.facet_logged = True
    if isinstance(error, DataError | BusyError | UnavailableError):
        level = logging.WARNING
    elif isinstance(error, ModelError) or type(error) is FacetError:
        level = logging.ERROR
    else:
        level = logging.INFO
    if not logger.isEnabledFor(level):
        return
    from gradio.context import LocalContext

    from indexer.errors import mask_secrets

    said = mask_secrets(" ".join(html.unescape(str(shown.message)).split()))
    kind = type(error).__name__ if isinstance(error, FacetError) else "refused by the page"
    logger.log(level, "UI %s for %s failed (%s): %s", handler,
               _who(LocalContext.request.get(None)), kind, said)


# The UI's own export folders: ``facet-ui-PID-...`` in the temp directory. An export older than
# EXPORT_KEPT_S is removed as the next is written (``UiHandlers._export_folder``).
EXPORT_PREFIX = "facet-ui-"
EXPORT_KEPT_S = 600.0


def _remove_dead_exports(tmp: Path) -> None:
    """Remove the export folders of UI processes no longer running (stopped by a signal: their
    exit hooks never ran, and each left its folder and every CSV in it), untouched for
    ``EXPORT_KEPT_S``, this user's, and holding exports alone. A running server's folder, taken
    for a dead one (another PID namespace sharing the temp directory), loses only exports Gradio
    copied long ago: the next export makes the folder again. Read through the folder's own
    descriptor, opened without following a link, so that a folder swapped for a link meanwhile
    is not read; not on Windows (no signal-0 probe of a process)."""
    if os.name != "posix":
        return
    for folder in tmp.glob(f"{EXPORT_PREFIX}*-*"):
        pid = folder.name[len(EXPORT_PREFIX):].split("-", 1)[0]
        # ASCII digits: "²".isdigit() is true, and int() refused it (a folder any user can
        # make stopped every UI's exports: the final review of the seventh session of 2026-12-06).
        if not (pid.isascii() and pid.isdigit()) or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # running
        except ProcessLookupError:
            pass
        except (PermissionError, OverflowError, OSError):
            continue  # another user's (running), or no such number
        try:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue  # a link, not a folder, gone
        try:
            st = os.fstat(fd)
            if st.st_uid != os.getuid() or time.time() - st.st_mtime <= EXPORT_KEPT_S:
                continue
            names = os.listdir(fd)
            # Exports alone: a folder of someone else's so named (a data folder) is left be.
            if all(n.startswith("clusters-") and n.endswith(".csv") and stat.S_ISREG(
                    os.stat(n, dir_fd=fd, follow_symlinks=False).st_mode) for n in names):
                for name in names:
                    os.unlink(name, dir_fd=fd)
                os.rmdir(folder)
        except OSError:
            continue
        finally:
            os.close(fd)


def ui_errors(handler: Callable[P, T]) -> Callable[P, T]:
    """Show domain errors as ``gr.Error`` and hide everything else behind a generic message.
    The message is also kept for the page's result area (``last_failure``)."""

    @functools.wraps(handler)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return handler(*args, **kwargs)
        except gr.Error as e:
            if not getattr(e, "facet_logged", False):  # (a handler it called logged it)
                _log_refusal(handler.__name__, e, e)
            _remember(handler.__name__, e)
            raise
        except FacetError as e:
            error = ui_error(e)
            _log_refusal(handler.__name__, error, e)
            _remember(handler.__name__, error)
            raise error from e
        except Exception as e:
            logger.exception("UI handler %s failed", handler.__name__)
            error = gr.Error("Something went wrong on the server; the details are in its log. "
                             "Try again, and tell the operator if it keeps happening.",
                             title="Server error", print_exception=False)
            _remember(handler.__name__, error)
            raise error from e

    return wrapper


# Upload names a notice lists before saying how many more.
NAMES_LISTED = 10


@dataclass
class Pickers:
    """Choices for every picker of the page (refreshed on load and after changes)."""

    collections: list[str]
    folders: list[str]
    # The names of vectors no collection of this database owns (strays, as `facet collections`
    # lists them): only the Delete picker offers them (the page listed none of them, so they
    # could not be deleted here, and indexing into such a name was refused).
    strays: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Stopped:
    """An index job that stopped before it finished (``interrupted``: a server restart), as the
    page shows it: its message in the page's words, and the folder and embedder that resume it
    (indexing the folder again into its collection), None where the page cannot."""

    job: JobInfo
    message: str
    source: Path | None = None
    embedder: str | None = None


def _cancellable(job: JobInfo | None) -> bool:
    """Whether the Index tab offers "Cancel job" for ``job``: queued, running or stalled (a
    running job whose writer stopped renewing its lease) and not yet asked to stop."""
    return job is not None and job.state in LIVE_STATES and not job.cancel_requested


def _confirmed(confirm: str | None, name: str, action: str, again: str, done: str, *,
               box: str = "the collection's name") -> None:
    """Refuse a destructive action on collection ``name`` unless ``confirm`` is its name, typed
    again: none typed, "To <action>, type <box> in the confirmation box first; nothing was
    <done>."; another, "'x' does not match 'name'; type the collection's name exactly to
    <again>. Nothing was <done>." (The delete form's and the documents view's removal.)"""
    typed = (confirm or "").strip()
    if not typed:
        raise InvalidRequestError(f"To {action}, type {box} in the confirmation box first; "
                                  f"nothing was {done}.")
    if typed != name:
        raise InvalidRequestError(f"{typed!r} does not match {name!r}; type the collection's "
                                  f"name exactly to {again}. Nothing was {done}.")


class UiHandlers:
    """The handlers of every tab, over one facade.

    Args:
        facet: the facade, or a function returning it (the API server builds its facade at
            start-up, after the UI is mounted).
        settings: the ``FACET_UI_*`` limits and choices.
        export_dir: where CSV exports are written (default a temp folder of this process's,
            made at the first export and removed with the handlers or at the process's exit:
            each start left a ``facet-ui-*`` folder behind; Gradio serves files from the temp
            directory). Gradio serves its own copy of each, in its cache folder, which the
            page's ``delete_cache`` removes (``ui.app.DELETE_CACHE``).
        upload_root: Gradio's upload (cache) folder: a file a client names must lie in it,
            and an upload indexed or refused is removed from it
            (``inputs.remove_cached_uploads``). None: neither (handlers called in process).
    """

    def __init__(self, facet: Facet | Callable[[], Facet], settings: FacetSettings,
                 export_dir: Path | None = None, upload_root: Path | None = None) -> None:
        self._facet = facet
        self.settings = settings
        # Where the page's uploads land (Gradio's upload folder); a file path from a client
        # must lie in it. None: not checked (handlers called in process, as tests do).
        self.upload_root = Path(os.path.realpath(upload_root)) if upload_root else None
        self._export_dir = export_dir
        self._own_export: weakref.finalize[Any, Any] | None = None
        # The clusterings running, by page (session): Stop, or the page going away, sets them
        # and the work stops at its next step (``cluster``).
        self._cluster_stops: dict[str, set[threading.Event]] = {}
        self._stops_lock = threading.Lock()
        # The picker's choice, by collection, of a vector the default embedder names only by
        # the name it loads as (``default_match``): picked, the search names no embedder, so
        # that it reads the default as the CLI and the API do (its options and all).
        self._by_default: dict[str, str] = {}
        self._stopped_pages: set[str] = set()  # pressed Stop since their last clustering began
        # Each job's collection, as last seen: a job whose collection was deleted is gone from
        # the catalog, and its bar still names where it went (``job_status``).
        self._job_collections: dict[int, str] = {}
        # Finished upload jobs whose files that cannot be indexed were taken out already: the
        # bar is polled every second while another job runs, and a file fixed and uploaded
        # again since would be parsed on every tick.
        self._cleaned: set[int] = set()

    @property
    def export_dir(self) -> Path:
        """Where CSV exports go: the given folder, else a temp folder made on first use and
        removed when these handlers go (``close``, garbage collection, the process's exit);
        named with the process's id, so that one left by a server stopped by a signal (whose
        exit hooks never ran) is removed by the next (``_remove_dead_exports``)."""
        if self._export_dir is None:
            _remove_dead_exports(Path(tempfile.gettempdir()))
            folder = Path(tempfile.mkdtemp(prefix=f"{EXPORT_PREFIX}{os.getpid()}-"))
            self._own_export = weakref.finalize(self, shutil.rmtree, folder, ignore_errors=True)
            self._export_dir = folder
        return self._export_dir

    def _export_folder(self) -> Path:
        """``export_dir``, its own exports older than ``EXPORT_KEPT_S`` removed first (a folder
        given to the handlers is the caller's: left as it is). Gradio serves its own copy of
        each, made as the event's answer is; a long-running server kept every one (60
        clusterings, 60 files: the leak review of the seventh session of 2026-12-06)."""
        folder = self.export_dir
        if self._own_export is not None:
            now = time.time()
            for old in folder.glob("clusters-*.csv"):
                try:
                    if now - old.stat().st_mtime > EXPORT_KEPT_S:
                        old.unlink()
                except OSError:  # gone meanwhile (another thread's pruning)
                    pass
        return folder

    def close(self) -> None:
        """Remove the temp export folder these handlers made (none given, none made: nothing);
        a folder given to them is the caller's and stays."""
        if self._own_export is not None:
            self._own_export()
            self._own_export = None
            self._export_dir = None

    def _uploaded(self, item: str | Path) -> Path:
        """``item`` as the path of a file uploaded through the page. Under `facet serve` Gradio
        checked none of the paths a client sent (its check waits for a ``launch()`` that a mounted
        app never makes), so a request naming /etc/... or a file of the server's read it, for
        clustering or into a collection that search then showed.

        Raises:
            InvalidRequestError: the path is not in the upload folder.
        """
        path = Path(item)
        if self.upload_root is not None and not Path(os.path.realpath(path)).is_relative_to(
                self.upload_root):
            raise InvalidRequestError(f"{path.name} was not uploaded through this page; upload "
                                      "the file again")
        return path

    @property
    def facet(self) -> Facet:
        """The facade (resolved on each call, so a server's late-built one is found)."""
        return self._facet if isinstance(self._facet, Facet) else self._facet()

    # ------------------------------------------------------------- choices

    def _collections(self) -> list[str]:
        return [c.name for c in self.facet.collections()]

    def _allowed(self) -> list[str]:
        # From the settings, not the facade: the page is built before a server's facade is.
        return allowed_model_names(self.settings)

    def rerankers(self) -> list[str]:
        """Rerankers the Search tab offers (``FACET_UI_RERANKERS``; unset, those of its default
        that load here)."""
        return ui_rerankers(self.settings)

    def embedders(self) -> list[str]:
        """Embedders the Index and Cluster tabs offer."""
        return self._allowed()

    def explainers(self) -> list[str]:
        """The cluster namers: keywords, or an allowed model that generates answers (an InBedder
        checkpoint under any name, a plugin registered as an explainer), told without loading
        any (``answers_questions``): only names with "inbedder" in them were offered, so such
        a checkpoint or plugin could be typed but was never listed. Where only loading would
        tell (a plugin that did not say), the name still decides, as before: offering one that
        cannot answer costs a refusal before any text is encoded; hiding one hid a namer."""
        from embedders.errors import EmbedderError
        from embedders.registry import answers_questions

        def answers(name: str) -> bool:
            try:
                known = answers_questions(name)
            except EmbedderError:  # a malformed spec: a cluster request says what is wrong
                known = None
            return "inbedder" in name.lower() if known is None else known

        return [NO_EXPLAINER] + [m for m in self._allowed() if answers(m)]

    def examples_for(self, collection: str | None) -> list[str]:
        """Example instructions for a collection: configured ones, the demo's, generic ones."""
        from app.commands.demo import DEMO_COLLECTION, DEMO_SEARCHES

        own = list(self.settings.ui_examples.get(collection or "", []))
        if collection == DEMO_COLLECTION:
            own += [instruction for _, instruction, _ in DEMO_SEARCHES]
        seen: list[str] = []
        for example in own + GENERIC_EXAMPLES:
            if example not in seen:
                seen.append(example)
        return seen

    def pickers(self) -> Pickers:
        """Current collections and allowed folders."""
        return Pickers(self._collections(),
                       inputs.list_folders(self.settings.ui_allowed_roots,
                                           exclude=[self.settings.data_dir]),
                       [c.name for c in self.facet.stray_collections()])

    @ui_errors
    def refresh_pickers(self, search_value: str | None, compare_value: str | None,
                        cluster_value: str | None, index_value: str | None,
                        delete_value: str | None) -> tuple[Any, Any, Any, Any, Any, Any]:
        """Updates for the collection pickers (keeping each selection while it exists; one
        whose collection is gone emptied, as ``KEEP_PICKS_JS`` empties it; none picked: the
        first choice) and the folder picker."""
        p = self.pickers()

        def keep(value: str | None, custom: bool = False, names: list[str] | None = None) -> Any:
            names = p.collections if names is None else names
            if value in names or (custom and value):
                return gr.update(choices=names, value=value)
            return gr.update(choices=names, value=None if value else names[0] if names else None)

        return (keep(search_value), keep(compare_value), keep(cluster_value),
                keep(index_value, custom=True),
                keep(delete_value, names=p.collections + p.strays), gr.update(choices=p.folders))

    @ui_errors
    def picker_choices(self) -> tuple[Any, ...]:
        """The choices of the collection pickers (the documents view's last) and of the folder
        picker, each value left as the page has it, then the lists for ``KEEP_PICKS_JS``, which
        moves a value off a collection gone in the browser. ``refresh_pickers`` sent the values
        the page had when the refresh was asked for: a collection picked while it ran (the
        Collections tab opened, then its documents picker used at once on a loaded server) was
        put back to the one picked before, and the documents view listed that one's documents."""
        p = self.pickers()
        deletable = p.collections + p.strays
        return (*(gr.update(choices=p.collections) for _ in range(4)),
                gr.update(choices=deletable), gr.update(choices=p.folders),
                gr.update(choices=p.collections),
                {"collections": p.collections, "deletable": deletable})

    def _info(self, collection: str | None) -> CollectionInfo | None:
        """The picked collection's listing; None for none picked, or one gone or misnamed (a
        search says so itself)."""
        name = (collection or "").strip()
        if not name:
            return None
        try:
            return self.facet.collection(name)
        except FacetError:
            return None

    @staticmethod
    def _choice(vector: str, spec: str | None) -> str:
        """How a picker offers a collection's vector: the spec it was indexed with where that
        has options (``minilm[instruction_weight=1]``: the plain name hid that the query is
        read at that weight), else the vector's name (a checkpoint's path loads behind it)."""
        from embedders.registry import without_options

        return spec if spec is not None and without_options(spec) != spec else vector

    @ui_errors
    def collection_changed(self, collection: str | None) -> tuple[Any, Any]:
        """The picked collection's embedders (each as its ``_choice``) and example
        instructions."""
        if not collection:
            return gr.update(choices=[], value=None), gr.update(choices=GENERIC_EXAMPLES, value=None)
        try:
            info = self.facet.collection(collection)
            names, sources, default = list(info.embedders), info.sources, info.default_embedder
        except NotFoundError:
            names, sources, default = [], {}, None
        choices = [self._choice(name, sources.get(name)) for name in names]
        # The one a search naming none uses (``CollectionInfo.default_embedder``: the default
        # setting read as indexing reads it, a checkpoint's path or a spec with options too).
        value = (choices[names.index(default)] if default in names else
                 (choices[0] if choices else None))
        matched = default_match(self.settings.default_embedder, [(n, sources.get(n, n)) for n in names])
        if matched is not None and matched[1] and matched[0] == default and value is not None:
            self._by_default[collection] = value
        else:
            self._by_default.pop(collection, None)
        return (gr.update(choices=choices, value=value),
                gr.update(choices=self.examples_for(collection), value=None))

    def _offered(self, recorded: Mapping[str, str]) -> list[str]:
        """The allowed embedders and the specs with options a collection ``recorded``
        (``CollectionInfo.sources``: what loads each of its vectors' embedders where that is not
        the vector's name, ``minilm[instruction_weight=1]``, a checkpoint's path)."""
        specs = [self._choice(vector, spec) for vector, spec in recorded.items()
                 if vector in self._allowed()]
        return list(dict.fromkeys(self.embedders() + specs))

    @ui_errors
    def embedder_choices(self, collection: str | None) -> Any:
        """The Index tab's embedders for the picked collection: the allowed ones and the specs
        with options the collection recorded (the picker's value is kept)."""
        info = self._info(collection)
        return gr.update(choices=self._offered(info.sources if info is not None else {}))

    @ui_errors
    def cluster_embedder_choices(self, collection: str | None) -> Any:
        """The Cluster tab's embedders for the picked collection (as ``embedder_choices``) and,
        where it has one offered here, the one it searches with by default
        (``CollectionInfo.default_embedder``), as `facet cluster --collection` and POST /cluster
        cluster it when no embedder is named. The picker kept the server's default (minilm):
        a collection indexed with InstEmb was clustered with minilm's vectors, unlike the CLI
        and the API given the same options."""
        info = self._info(collection)  # (read once: the choices and the pick both need it)
        if info is None:
            return gr.update(choices=self._offered({}))
        offered = self._offered(info.sources)
        default = info.default_embedder
        if default is None or default not in info.embedders:
            return gr.update(choices=offered)
        choice = self._choice(default, info.sources.get(default))
        return gr.update(choices=offered, value=choice) if choice in offered else \
            gr.update(choices=offered)

    # --------------------------------------------------------------- search

    def _collection(self, name: str | None) -> str:
        name = (name or "").strip()
        if not name:
            raise InvalidRequestError("Pick a collection first (or index one in the Index tab).")
        return name

    def _model(self, name: str | None, what: str, extra: list[str] | None = None, *,
               collection: str | None = None) -> str | None:
        """``name`` if the page may load it: an allowed name (``FACET_API_MODELS``, listed
        exactly, options included, and ``extra``), or a spec ``collection`` recorded for a vector
        whose name is allowed (naming that vector loads it already). Any other spec with options
        is refused as the API refuses it: each loads another copy of the model, so a page could
        otherwise fill the server's memory with variants.

        Raises:
            InvalidRequestError: options not written as ``name[key=value,...]``.
            UnknownModelError: anything else not offered here, saying what is.
        """
        from embedders.errors import InvalidInputError
        from embedders.registry import split_options

        name = (name or "").strip()
        if not name:
            return None
        allowed = list(dict.fromkeys(self._allowed() + (extra or [])))
        if name in allowed:
            return name
        recorded = self.facet.recorded_specs(collection, allowed)
        if name in recorded:
            return name
        offered = ", ".join(dict.fromkeys(allowed + recorded))
        try:
            base, options = split_options(name)
        except InvalidInputError as e:
            reason = str(e).removeprefix(f"{name!r}: ")
            raise InvalidRequestError(f"The {what} {name!r} cannot be read: {reason}; pick one "
                                      f"of: {offered}") from None
        if options and base in allowed:
            listing = "FACET_UI_RERANKERS or FACET_API_MODELS" if what == "reranker" else \
                "FACET_API_MODELS"
            own = (f" as {collection} recorded it ({', '.join(recorded)}) or" if recorded and
                   collection else "")
            raise UnknownModelError(
                f"The {what} {name!r} is not available here: {base} is, but with options only"
                f"{own} where {listing} lists the spec exactly (each loads another copy of the "
                f"model); pick one of: {offered}")
        raise UnknownModelError(f"The {what} {name!r} is not available here; pick one of: "
                                f"{offered}")

    def _query(self, query: str | None, instruction: str | None,
               what: str = "instruction", *, warn: bool = True) -> tuple[str, str | None, list[str]]:
        limit = self.settings.ui_max_query_chars
        text = inputs.require_text(query, "query", "my card payment was declined")
        text, cut_query = inputs.clip(text, limit, "query")
        clean, cut_instruction = inputs.clip((instruction or "").strip(), limit, what)
        notices = [n for n in (cut_query, cut_instruction) if n]
        if warn:
            self._warn(notices)
        return text, clean or None, notices

    @staticmethod
    def _warn(notices: Sequence[str]) -> None:
        for notice in notices:
            gr.Warning(render.esc(notice), title="Shortened")

    def _request(self, query: str, instruction: str | None, collection: str | None,
                 embedder: str | None, top_k: int, filters: str | None,
                 reranker: str | None = None, mode: str = "dense",
                 group_by_document: bool = False) -> SearchRequest:
        picked = self._model(embedder, "embedder", collection=collection)
        if picked is not None and collection and self._by_default.get(collection) == picked:
            picked = None  # (the default's own reading: ``_by_default``)
        return SearchRequest(
            query=query, collection=self._collection(collection), instruction=instruction,
            top_k=top_k, filters=inputs.parse_filter_text(filters),
            rerank=self._model(reranker, "reranker", self.rerankers()),
            embedder=picked, mode=mode, group_by_document=group_by_document)

    @ui_errors
    def search(self, query: str | None, instruction: str | None, collection: str | None,
               embedder: str | None, k: float | None, filters: str | None, rerank: bool,
               reranker: str | None, group: bool, mode: str | None = "auto") -> tuple[str, str]:
        """Search tab: ranked results (HTML) and a one-line summary with the time taken."""
        started = time.perf_counter()
        text, clean, notices = self._query(query, instruction)
        if rerank and not (reranker or "").strip():
            raise InvalidRequestError("Rerank is on but no reranker is picked; pick one of: "
                                      f"{', '.join(self.rerankers())}")
        top_k, k_notice = inputs.results_k(k, MAX_RESULTS)
        notices += [k_notice] if k_notice else []
        # Grouped by the core, as on every other edge: k documents (grouping k chunks here
        # showed fewer, with gaps in the ranks).
        request = self._request(text, clean, collection, embedder, top_k, filters,
                                reranker if rerank else None, mode or "auto", bool(group))
        response = self.facet.search(request)
        # Its "barely steers" note names what this page may load (it offered names it refuses).
        response = dataclasses.replace(response, note=served_note(
            response.note, response.embedder, self.facet.serves(request.collection)))
        notices += self._unread_notice(response, request.embedder)
        notices += self._stopped_notice(request.collection)
        if response.note and response.results:  # with no results it ends their "why" line
            notices.append(response.note)
        embedder_used, reranker_used = self._specs_used(response)
        wall_ms = (time.perf_counter() - started) * 1000
        return (render.results_html(response, group_by_document=bool(group), notices=notices,
                                    filters=request.filters,
                                    # Resolved as the documents' keys are (a relative or
                                    # linked data folder showed its path in each tooltip).
                                    uploads=os.path.realpath(Path(self.settings.data_dir) / "uploads"),
                                    # The edge store refuses a filter on true/false.
                                    booleans=(self.settings.vector_backend != "edge"
                                              or self.settings.uses_qdrant_server)),
                render.search_summary(response, wall_ms, group_by_document=bool(group),
                                      embedder=embedder_used, reranker=reranker_used,
                                      notices=notices, filters=request.filters))

    def _specs_used(self, response: SearchResponse) -> tuple[str, str | None]:
        """The embedder and reranker a search ran with, as the summary names them (each by its
        ``_choice``): the response's specs, options included (its ``embedder`` names the vector
        and ``reranker`` the model, so ``minilm[instruction_weight=1]`` read as plain minilm).
        A lexical search names no embedder spec: the words alone (BM25) ran."""
        embedder = self._choice(response.embedder, response.embedder_spec)
        reranker = (self._choice(response.reranker, response.reranker_spec)
                    if response.reranker else None)
        return embedder, reranker

    @ui_errors
    def compare(self, query: str | None, instruction_a: str | None, instruction_b: str | None,
                collection: str | None, embedder: str | None, k: float | None,
                filters: str | None) -> str:
        """Compare tab: the same query under two instructions, side by side."""
        text, a, notices = self._query(query, instruction_a, "instruction A", warn=False)
        _, b, notices_b = self._query(text, instruction_b, "instruction B", warn=False)
        if (a or "") == (b or ""):
            # What is compared is what is used: two instructions that differ only past the
            # length limit were refused as "the same", after two notices that each was cut.
            limit = self.settings.ui_max_query_chars
            if (instruction_a or "").strip() != (instruction_b or "").strip():
                raise InvalidRequestError(
                    f"Instructions A and B are the same in their first {limit:,} characters, which "
                    f"is all that is used; make them differ within those {limit:,} to see how the "
                    "instruction changes the ranking.")
            raise InvalidRequestError("Instructions A and B are the same; change one to see how "
                                      "the instruction changes the ranking.")
        # (The query was clipped already, so B's notices are its instruction's: `[1:]` dropped it.)
        notices += [n for n in notices_b if n not in notices]
        self._warn(notices)
        top_k, k_notice = inputs.results_k(k, MAX_RESULTS)
        notices += [k_notice] if k_notice else []
        first = self._search_side("A", self._request(text, a, collection, embedder, top_k, filters))
        second = self._search_side("B", self._request(text, b, collection, embedder, top_k, filters))
        notices += self._stopped_notice(first.collection)
        return render.compare_html(first, second, notices)

    def _search_side(self, side: str, request: SearchRequest) -> SearchResponse:
        """One side of Compare. The two differ only in their instruction, so an instruction the
        embedder refuses ("the instruction is too long for this embedder ...") is named: the
        toast said "the instruction" with two on the page."""
        try:
            response = self.facet.search(request)
        except InvalidRequestError as e:
            if "the instruction" not in str(e).lower():
                raise
            raise reworded(e, f"Instruction {side}: {e}") from e
        # Its "barely steers" note names what this page may load, as the Search tab's does
        # (Compare offered minilm[instruction_weight=1], which the page refuses).
        return dataclasses.replace(response, note=served_note(
            response.note, response.embedder, self.facet.serves(request.collection)))

    # -------------------------------------------------------------- cluster

    @ui_errors
    def cluster(self, source: str | None, collection: str | None, filters: str | None,
                limit: float | None, query: str | None, query_instruction: str | None,
                pasted: str | None, upload: str | None, labels_file: str | None,
                instruction: str | None, k: float | None, embedder: str | None,
                explainer: str | None, max_k: float | None = None,
                progress: gr.Progress = gr.Progress(),
                ) -> tuple[str, Any, list[list[Any]], str | None]:
        """Cluster tab: summary (with the V-measure when labels are given), map, clusters, CSV.
        ``max_k`` ("Largest k to try", empty: 10) bounds k chosen by silhouette (k = 0) as
        POST /cluster's max_k and the CLI's --max-k do; a given k leaves it unused."""
        started = time.perf_counter()
        # A Stop pressed as the page's last clustering ended is that run's: cleared before this
        # run's checks, so a refusal of its input is said as such (``cluster_failed`` read the
        # old flag and said "Clustering stopped" of a k = 1).
        session = _session()
        with self._stops_lock:
            self._stopped_pages.discard(session or "")
        limit_ = self.settings.ui_max_query_chars
        clean = inputs.require_text(instruction, "instruction", DEFAULT_CLUSTER_INSTRUCTION)
        clean, cut = inputs.clip(clean, limit_, "instruction")
        notices = [cut] if cut else []
        # Said at once, as the Search tab does: cut silently, the instruction was then refused
        # as too long for the embedder, counted on the cut text, with no word of the cut.
        self._warn(notices)
        boxed = inputs.whole_number(limit, "At most this many texts", 0)
        if boxed < 0 or boxed == 1:
            # (a negative one said "the limit must be ...", naming no box; 1 took one text and
            # then said "clustering needs at least 2 texts, got 1" of 30 pasted)
            raise InvalidRequestError(f"At most this many texts must be 0 (all) or at least 2 "
                                      f"(clustering needs 2), got {boxed}")
        n = limit_option(boxed)
        chosen_k = k_option(inputs.whole_number(k, "k", 0))
        top = inputs.whole_number(max_k, "Largest k to try", ClusterRequest.max_k)
        if chosen_k is None and not 2 <= top <= MAX_K:
            raise InvalidRequestError(f"Largest k to try must be from 2 to {MAX_K}, got {top} "
                                      "(it bounds k chosen by silhouette, k = 0)")
        texts: list[str] | None = None
        search: SearchRequest | None = None
        taken = ""  # how a search source's number of results was chosen
        name: str | None = None
        labels: list[str] | None = None
        if source == SOURCE_TEXTS:
            texts = inputs.pasted_texts(pasted)
            uploaded = self._uploaded(upload) if upload else None
            if uploaded is not None:
                texts += inputs.read_text_list(uploaded, notes=notices)
            if not texts and uploaded is not None:
                # (it said "paste one text per line or upload a file" of a file uploaded)
                raise InvalidRequestError(inputs.no_texts_in(uploaded))
            if not texts:
                raise InvalidRequestError("No texts: paste one text per line or upload a file "
                                          f"({', '.join(inputs.CLUSTER_FILE_SUFFIXES)})")
            if labels_file:
                labels = inputs.read_labels(self._uploaded(labels_file))
                # Counted before the limit: the labels file labels the whole upload.
                if len(labels) != len(texts):
                    raise InvalidRequestError(f"{plural(len(labels), 'label', grouped=True)} for "
                                              f"{plural(len(texts), 'text', grouped=True)}; give "
                                              "one label per text, in the same order")
            if n and len(texts) > n:  # (cut without a word: 200,000 uploaded lines, 500 clustered)
                notices.append(f"Clustering the first {n:,} of the {len(texts):,} texts, as "
                               "\u201cAt most this many texts\u201d asks (0 = all).")
            texts = texts[:n] if n else texts
            # "0 = all, up to FACET_MAX_CLUSTER_TEXTS", as for the other sources (more was
            # refused: "120 texts to cluster, more than the limit of 50").
            most = self.settings.max_cluster_texts
            if len(texts) > most:
                notices.append(f"Clustering the first {most:,} texts, not {len(texts):,}: "
                               "FACET_MAX_CLUSTER_TEXTS caps it.")
                texts = texts[:most]
            labels = labels[:len(texts)] if labels is not None else None
        elif source == SOURCE_SEARCH:
            text, q_instruction, more = self._query(query, query_instruction, what="search instruction")
            notices += more
            # "0 = all" took 100 results and a box value over a search's limit was refused as
            # "top_k must be ... 1000": the box is the number of results, at most MAX_TOP_K.
            # ...and at most FACET_MAX_CLUSTER_TEXTS: set below 1,000, "0 = all, up to 50" was
            # refused as "120 texts to cluster, more than the limit of 50".
            most = min(MAX_TOP_K, self.settings.max_cluster_texts)
            capped = "FACET_MAX_CLUSTER_TEXTS caps it"
            if limit is None:  # the box emptied: a search's own default
                top_k = min(SEARCH_RESULTS_CLUSTERED, most)
                taken = (capped if top_k < SEARCH_RESULTS_CLUSTERED else
                         "a search's default, as for `facet cluster --query` and POST /cluster")
            elif not n:  # 0 = all: as many as a search returns, or the cap
                top_k = most
                taken = "0 = all: " + (f"a search returns at most {MAX_TOP_K:,}"
                                       if most == MAX_TOP_K else
                                       f"up to FACET_MAX_CLUSTER_TEXTS, {most:,}")
            else:
                top_k = min(n, most)
                taken = "as \u201cAt most this many texts\u201d asks" if n <= most else capped
            if n and n > most:
                notices.append(f"Clustering the top {most:,} results, not {n:,}: "
                               + (f"a search returns at most {MAX_TOP_K:,}." if most == MAX_TOP_K
                                  else "FACET_MAX_CLUSTER_TEXTS caps it."))
            search = SearchRequest(query=text, collection=self._collection(collection),
                                   instruction=q_instruction, top_k=top_k,
                                   filters=inputs.parse_filter_text(filters))
        elif source == SOURCE_COLLECTION:
            name = self._collection(collection)
        else:
            raise InvalidRequestError(f"Pick a source: {', '.join(CLUSTER_SOURCES)}")
        if labels_file and labels is None:
            notices.append("Labels are used with pasted or uploaded texts only; ignored here.")
        request = ClusterRequest(
            instruction=clean, texts=texts, collection=name, search=search,
            filters=inputs.parse_filter_text(filters) if name else {},
            limit=n if name else None, k=chosen_k,
            max_k=top if chosen_k is None else ClusterRequest.max_k,
            embedder=self._model(embedder, "embedder",
                                 collection=name or (search.collection if search else None)),
            explainer=None if explainer in (None, "", NO_EXPLAINER) else
            self._model(explainer, "explainer"))
        progress(0.0, desc="starting")
        stop = threading.Event()

        def step(fraction: float, stage: str) -> None:
            if stop.is_set():
                raise ClusterStopped(stage)
            progress(fraction, desc=stage)

        self._track_cluster(session, stop, add=True)
        try:
            response = self.facet.cluster(request, progress=step)
        except ClusterStopped as e:
            # Its page has gone or shows the stop already (Gradio cancelled the event): a
            # result, not an error, so no failure is kept for that page's next run to show.
            logger.info("clustering stopped by its page while %s", e)
            return render.notices_html([CLUSTER_STOPPED]), None, [], None
        except InvalidRequestError as e:
            if str(e).endswith(K_BY_SILHOUETTE):
                raise InvalidRequestError(f"{e} (set k to 0)") from e
            if cut and "instruction" in str(e).lower():
                raise InvalidRequestError(f"{e} ({cut})") from e
            raise
        finally:
            self._track_cluster(session, stop, add=False)
        response = dataclasses.replace(response, note=served_note(
            response.note, response.embedder, self.facet.serves(request.collection)))
        searched = name or (search.collection if search else None)
        if searched:
            notices += self._stopped_notice(searched)
        score = self._v_measure(labels, response) if labels is not None else None
        wall = time.perf_counter() - started
        used = self._choice(response.embedder, response.embedder_spec)
        # What a search source clustered: its query, instruction and how many results it took
        # (the summary said "308 texts" and nothing of the search).
        source_html = (render.search_source_html(search, len(response.texts), taken)
                       if search is not None else None)
        summary = render.cluster_summary(response, wall_s=wall, v_measure=score,
                                         label_count=len(set(labels)) if labels else None,
                                         notices=notices, embedder=used, max_k=top,
                                         source=source_html)
        figure = render.cluster_figure(response, title=f"{len(response.texts):,} texts, "
                                       f"k={response.k}: {render.isolated(clean[:80])}")
        csv_path = render.write_cluster_csv(response, self._export_folder(), labels)
        logger.info("clustered %d texts into %d in %.1fs", len(response.texts), response.k, wall)
        return summary, figure, render.cluster_rows(response), str(csv_path)

    def _track_cluster(self, session: str | None, stop: threading.Event, *, add: bool) -> None:
        if session is None:
            return
        with self._stops_lock:
            running = self._cluster_stops.setdefault(session, set())
            if add:
                running.add(stop)
            else:
                running.discard(stop)
                if not running:
                    del self._cluster_stops[session]

    def stop_clusters(self, session: str | None) -> int:
        """Stop the clusterings running for the page ``session`` at their next step (a batch
        of texts encoded or answered): Gradio's cancel frees the page at once but not the
        thread doing the work, which went on for minutes and held the model's turn. Returns
        how many were running."""
        if session is None:
            return 0
        with self._stops_lock:
            running = list(self._cluster_stops.get(session, ()))
        for stop in running:
            stop.set()
        return len(running)

    def stop_cluster(self, request: gr.Request) -> str:
        """Cluster tab, "Stop": the page's clustering stopped (Gradio cancels its event, so
        the page is free at once; the work ends at its next step). Returns the summary."""
        session = getattr(request, "session_hash", None)
        with self._stops_lock:
            self._stopped_pages.add(session or "")
        count = self.stop_clusters(session)
        logger.info("Stop pressed on the Cluster tab (%d clustering(s) running)", count)
        return render.notices_html([CLUSTER_STOPPED])

    def cluster_failed(self, request: gr.Request) -> tuple[None, list[Any], None, str]:
        """The Cluster tab's areas after its event ended without a result: emptied, and the
        summary says why. A run Gradio cancelled (Stop) ends so too, with its work still
        running here: that is stopped (now, should Stop's own event come later) and said as
        stopped, not as "The last run failed"."""
        session = getattr(request, "session_hash", None)
        with self._stops_lock:
            stopped = session is not None and (session in self._cluster_stops or
                                               session in self._stopped_pages)
            self._stopped_pages.discard(session or "")
        if stopped:
            self.stop_clusters(session)
            return None, [], None, render.notices_html([CLUSTER_STOPPED])
        return None, [], None, render.failed_html(last_failure(request, "cluster"))

    def page_closed(self, request: gr.Request) -> None:
        """A page reloaded or closed (Gradio's unload): its clusterings stop at their next
        step, as nobody is left to see them (they ran on for minutes, and every search of
        every page waited behind them)."""
        count = self.stop_clusters(getattr(request, "session_hash", None))
        if count:
            logger.info("page closed: %d clustering(s) stopped", count)

    @staticmethod
    def _v_measure(labels: list[str], response: ClusterResponse) -> float:
        return labels_v_measure(labels, response.labels)

    # ---------------------------------------------------------------- index

    def _start(self, source: Path, name: str, embedder: str | None, sync: bool | None = None,
               anew: str | None = None) -> tuple[int, int, str, list[list[str]], Any]:
        """Start the job of a server folder (``anew``: as ``_started``)."""
        # A server folder is read under the allowed roots as the job runs (a link made after
        # this check is not followed); the collection's own uploads (a resumed upload job) are
        # under the data folder, which is never among them.
        roots = self.settings.ui_allowed_roots
        uploads = Path(source).resolve() == self.facet.upload_folder(name).resolve()
        job = self.facet.submit_index(source, name, IndexOptions(
            embedder=self._model(embedder, "embedder", collection=name), sync=sync,
            confine=None if roots is None or uploads else tuple(str(root) for root in roots)))
        return self._started(job, [], [], anew)

    def _started(self, job: JobInfo, notices: list[str], renamed: list[str],
                 anew: str | None = None) -> tuple[int, int, str, list[list[str]], Any]:
        """What the page shows of a job it started: its id, the document total, the bar (under
        ``notices``, uploads not indexed, and ``renamed``, those indexed under another name, and
        ``anew``: a picked collection gone, which the job makes again), its errors so far, and
        the running poll timer."""
        total = self.facet.estimate_documents(job.source)
        self._job_collections[job.id] = job.collection
        if anew:
            gr.Warning(render.name_html(anew), title="New collection")
        for notice in notices:
            gr.Warning(render.name_html(notice), title="Not indexed")
        for notice in renamed:
            gr.Info(render.name_html(notice), title="Renamed")
        html = (render.notices_html([*([anew] if anew else []), *notices, *renamed])
                + render.job_html(job, total))
        return job.id, total, html, render.job_error_rows(job), gr.Timer(active=True)

    def _gone(self, name: str, new_name: str | None) -> str | None:
        """Said where ``name`` comes from the picker (no new name typed in its box) and is no
        collection now: one picked, then deleted meanwhile by another page or the command line,
        was made anew without a word, holding the new files alone (the UI review of the fourth
        session of 2026-12-06); a name typed into the picker is new too."""
        if (new_name or "").strip() or self._info(name) is not None:
            return None
        # (Not "deleted meanwhile" alone: a name typed into the picker is taken as a new one too.)
        return (f"There is no collection '{name}': this job makes a new one of that name (if you "
                "picked it from the list, another page or the command line deleted it meanwhile).")

    @staticmethod
    def _target(collection: str | None, new_name: str | None) -> str:
        """The collection to index into: the new name when one is typed, else the pick.

        A new name has its own box: typed into the picker, Gradio's filter turned it into the
        first collection holding it on Enter ("note" became "notes", "TEST" "CaseTest"), and
        the upload went there.
        """
        name = (new_name or "").strip() or (collection or "").strip()
        if not name:
            raise InvalidRequestError("Name the collection to index into (pick one, or type a "
                                      "new name in the box beside it).")
        return name

    @ui_errors
    def index_upload(self, files: list[str] | None, collection: str | None,
                     embedder: str | None, new_name: str | None = None,
                     ) -> tuple[int, int, str, list[list[str]], Any, None]:
        """Index tab, uploads: staged in the collection's upload folder and indexed by a
        background job (``Facet.upload``, which the API's uploads take too); returns the job
        id, the document total, the progress HTML, the errors so far, the running poll timer,
        and an emptied upload box. ``new_name`` (the "new collection" box), when given, is the
        collection instead of ``collection``."""
        if not files:
            raise InvalidRequestError("Upload at least one file first "
                                      f"({', '.join(Facet.supported_suffixes())}).")
        uploads = [self._uploaded(f) for f in files]
        # The name is checked first: one reduced to a safe file name ('oops/mix' -> 'mix') put
        # the files in another collection's folder.
        name = self._target(collection, new_name)
        anew = self._gone(name, new_name)
        try:
            result = self.facet.upload(name, uploads,
                                       embedder=self._model(embedder, "embedder", collection=name),
                                       max_mb=self.settings.ui_max_upload_mb)
        except DataError:  # none can be indexed: a retry refuses them again
            inputs.remove_cached_uploads(uploads, self.upload_root)
            raise
        # Gradio's copies go once staged (the staged copy is what the job reads): left, each
        # stayed in Gradio's cache, served by URL, after its collection was deleted. A job
        # refused (the collection busy) leaves them, so that pressing the button again works.
        inputs.remove_cached_uploads(uploads, self.upload_root)
        removed = ([f"Not kept in the uploads of {name}, as the last upload job could not index "
                    f"them: {', '.join(result.removed)}"] if result.removed else [])
        return *self._started(result.job, [*result.refused, *removed], result.renamed, anew), None

    @ui_errors
    def index_folder(self, folder: str | None, collection: str | None,
                     embedder: str | None, new_name: str | None = None,
                     ) -> tuple[int, int, str, list[list[str]], Any]:
        """Index tab, a server folder under the allowed roots (not the server's data folder,
        which it was offered: a root holding it is indexed without it): start a background
        job."""
        source = inputs.resolve_under_roots(folder, self.settings.ui_allowed_roots,
                                            exclude=[self.settings.data_dir])
        name = self._target(collection, new_name)
        return self._start(source, name, embedder, anew=self._gone(name, new_name))

    def _not_kept(self, job: JobInfo) -> list[str]:
        """For a finished upload job: its uploads that cannot be indexed at all, removed from
        the collection's upload folder (``Facet.unindexable_uploads``: once per job, later polls
        only name them), and a notice naming them. Left there, every later upload job listed
        their errors again and the collection counted them as failed for good. A server folder
        is never changed."""
        names = self.facet.unindexable_uploads(job, remove=job.id not in self._cleaned)
        self._cleaned.add(job.id)
        if not names:
            return []
        # The first names only: 150 empty files made a 12-line wall of names.
        listed = ", ".join(names[:NAMES_LISTED]) + (
            f" and {len(names) - NAMES_LISTED:,} more" if len(names) > NAMES_LISTED else "")
        return [f"Not kept in the uploads of {job.collection}, as they cannot be indexed (the errors "
                f"below say why): {listed}. Fix them and upload them again; the "
                "collection stops counting them as failed with its next upload."]

    # --------------------------------------------------------- stopped jobs

    def _resume_target(self, job: JobInfo) -> tuple[Path | None, str | None]:
        """The folder and embedder that go on with ``job`` (indexing the folder again into its
        collection: what was indexed is skipped as unchanged), or ``(None, None)`` where the
        page may not: a source that is neither the collection's uploads nor a folder under the
        allowed roots (a job started from the command line), or an embedder not offered here."""
        try:
            source = Path(job.source)
            if source != self.facet.upload_folder(job.collection).resolve():
                source = inputs.resolve_under_roots(job.source, self.settings.ui_allowed_roots,
                                                    exclude=[self.settings.data_dir])
            spec = self.facet.collection(job.collection).sources.get(job.embedder, job.embedder)
        except FacetError:
            return None, None
        if not source.is_dir():
            return None, None
        try:  # the collection's recorded spec (options included) is offered as its vector is
            self._model(spec, "embedder", collection=job.collection)
        except FacetError:
            return None, None
        return source, spec

    def _of_uploads(self, job: JobInfo) -> bool:
        """Whether ``job`` indexes its collection's upload folder (an upload job)."""
        try:
            return Path(job.source) == self.facet.upload_folder(job.collection).resolve()
        except FacetError:
            return False

    def _stopped_jobs(self, jobs: Sequence[JobInfo]) -> dict[int, Stopped]:
        """The stopped jobs among ``jobs`` (newest first: ``interrupted`` by a restart, or
        ``cancelled``), newest first. One that a later job of the same folder and embedder went
        on with is not offered again, nor an upload job cancelled before it started (its files
        were taken back: ``UPLOAD_AGAIN_HINT``)."""
        found: dict[int, Stopped] = {}
        for i, job in enumerate(jobs):
            if job.state not in render.STOPPED_STATES:
                continue
            # (Not one that never started: an upload job cancelled while queued, every upload
            # job sharing the folder, hid an earlier stopped one from Resume.)
            later = next((j for j in jobs[:i] if j.state != "failed" and
                          not (j.state in render.STOPPED_STATES and j.started_at is None) and
                          (j.collection, j.source, j.embedder) ==
                          (job.collection, job.source, job.embedder)), None)
            if later is not None:
                found[job.id] = Stopped(job, render.job_message(
                    job, f"job {later.id} went on with the same files since"))
                continue
            if job.state == "cancelled" and job.started_at is None and \
                    TAKEN_BACK in (job.message or "") and self._of_uploads(job):
                found[job.id] = Stopped(job, render.job_message(job, UPLOAD_AGAIN_HINT))
                continue
            source, embedder = self._resume_target(job)
            hint = (RESUME_HINT if source is not None else NOT_HERE_HINT) + kept_said(job)
            found[job.id] = Stopped(job, render.job_message(job, hint), source, embedder)
        return found

    def _resumable(self) -> list[Stopped]:
        return [s for s in self._stopped_jobs(self.facet.jobs(limit=20)).values()
                if s.source is not None]

    def _job_message(self, job: JobInfo) -> str | None:
        """A stopped job's message in the page's words (None: the job's own is right)."""
        if job.state not in render.STOPPED_STATES:
            return None
        jobs = self.facet.jobs(job.collection, limit=20)
        if job.id not in {j.id for j in jobs}:
            jobs.append(job)
        return self._stopped_jobs(jobs)[job.id].message

    def _unread_notice(self, response: SearchResponse, spec: str | None) -> list[str]:
        """A warning for a query its embedder's tokenizer reads as mostly ``[UNK]`` (all-MiniLM
        reads Thai and emoji so): it ranks arbitrarily, which only the server's log said. Shown
        as a toast and above the results; said only where the model is loaded here (not one
        that encodes on the workers)."""
        cache = self.facet.embedder_cache
        model = cache.peek(spec or self.settings.default_embedder) or cache.peek(response.embedder)
        if response.mode == "lexical" or model is None or not unread_count(model, [response.query]):
            return []
        notice = (f"The query is mostly unknown tokens to the tokenizer of {response.embedder} "
                  f"{UNREAD_WHY}, so the ranking is arbitrary; search with an embedder whose "
                  "tokenizer reads it (e.g. causal2vec), or set the mode to lexical (the words "
                  "alone).")
        gr.Warning(render.esc(notice), title="Unreadable query")
        return [notice]

    @staticmethod
    def _unread_job_notices(job: JobInfo) -> list[str]:
        """A finished job's warning that chunks were mostly ``[UNK]`` to its embedder's
        tokenizer, under its bar as well as in its table of errors and warnings."""
        return [e["message"] for e in job.errors
                if e["kind"] == "warning" and UNREAD_MARK in e["message"]]

    def _stopped_notice(self, collection: str) -> list[str]:
        """A notice for results from a collection whose newest index job stopped before it
        finished (a server restart): they may miss what it had not indexed yet, and were
        shown as if complete."""
        try:
            jobs = self.facet.jobs(collection, limit=1)
        except FacetError:
            return []
        if not jobs or jobs[0].state != "interrupted":
            return []
        job = jobs[0]
        return [f"These results may miss documents: index job {job.id} into {collection} did not "
                f"finish: {self._stopped_jobs(jobs)[job.id].message}."]

    @ui_errors
    def stopped_jobs(self) -> tuple[Any, Any]:
        """Index tab: the row of the stopped jobs this page can resume (shown only when there
        is one) and its picker, newest first."""
        choices = [(f"job {s.job.id} into {s.job.collection} "
                    f"({plural(s.job.docs_indexed, 'document', grouped=True)} indexed before it stopped)", s.job.id)
                   for s in self._resumable()]
        return (gr.update(visible=bool(choices)),
                gr.update(choices=choices, value=choices[0][1] if choices else None))

    @ui_errors
    def resume_index(self, job_id: float | str | None) -> tuple[int, int, str, list[list[str]], Any]:
        """Index tab, Resume: go on with a stopped job by indexing its folder (the collection's
        uploads, or a folder under the allowed roots) again into its collection with its
        embedder. What it indexed is skipped as unchanged; the new job is recorded as resuming
        it. Returns the new job's bar, as starting a job does."""
        try:
            wanted = int(float(str(job_id).strip()))
        except (ValueError, OverflowError):
            raise InvalidRequestError("Pick the stopped job to resume first (the Index tab lists "
                                      "them when there are any).") from None
        job = self.facet.job(wanted)
        if job.state not in render.STOPPED_STATES:
            raise InvalidRequestError(f"Job {job.id} is {job.state}, not stopped: there is nothing "
                                      "to resume.")
        jobs = self.facet.jobs(job.collection, limit=100)
        if job.id not in {j.id for j in jobs}:
            jobs.append(job)
        stopped = self._stopped_jobs(jobs)[job.id]
        if stopped.source is None:
            raise InvalidRequestError(f"Job {job.id} cannot be resumed here: {stopped.message}.")
        # With the job's --sync/--no-sync: resumed without it, a --no-sync job of a folder
        # synced and removed the documents kept on purpose.
        started = self._start(stopped.source, job.collection, stopped.embedder, job.sync)
        gr.Info(render.esc(f"Job {started[0]} goes on with job {job.id}'s work in "
                           f"{job.collection}."), title="Resumed")
        return started

    @ui_errors
    def resume_job(self) -> tuple[int, int, str, list[list[str]], Any]:
        """Index tab, on page load: the bar of the newest job still queued, running or stalled,
        so a reload mid-job does not lose it (it showed job 0 and nothing); else that of the newest
        job stopped before it finished (a server restart) that the page can resume, with what
        to do; else an empty bar."""
        jobs = self.facet.jobs(limit=20)
        # (A stalled job too: its worker stopped, it goes on when one takes its next chunk. It
        # was shown nowhere on the tab, its bar stopped polling as if it had ended.)
        active = [j for j in jobs if j.state in LIVE_STATES]
        if not active:
            resumable = [s for s in self._stopped_jobs(jobs).values() if s.source is not None]
            if not resumable:
                return 0, 0, "", [], gr.Timer(active=False)
            stopped = self.facet.job(resumable[0].job.id)  # with its errors
            total = self._documents_total(stopped)
            return (stopped.id, total, render.job_html(stopped, total, message=resumable[0].message),
                    render.job_error_rows(stopped), gr.Timer(active=False))
        job = active[0]
        self._job_collections[job.id] = job.collection
        total = self._documents_total(job)
        html = render.job_html(job, total) + render.other_jobs_html(active[1:])
        return job.id, total, html, render.job_error_rows(job), gr.Timer(active=True)

    def _documents_total(self, job: JobInfo) -> int:
        """What a job's bar counts to: its recorded total, else what its source holds (the
        documents seen made a job stopped part-way read "126/126", as if complete), else, the
        source gone meanwhile, what the job saw."""
        try:
            return job.docs_total or self.facet.estimate_documents(job.source)
        except FacetError:
            return job.docs_seen

    def _other_active_jobs(self, shown: int) -> list[JobInfo]:
        return [j for j in self.facet.jobs(limit=20)
                if j.state in LIVE_STATES and j.id != shown]

    @ui_errors
    def job_status(self, job_id: float | None, total: float | None,
                   ) -> tuple[str, list[list[str]], Any]:
        """Index tab, polled every second: the job's bar (with a line for any other job still
        in progress), its per-document errors, and the timer (stopped once the job and any
        other has finished). Once an upload job has finished, its uploads that cannot be
        indexed are taken out of the collection's upload folder, and the bar says which."""
        if not job_id:
            return "", [], gr.Timer(active=False)
        try:
            job = self.facet.job(int(job_id))
        except NotFoundError:
            # Its collection deleted meanwhile (with its jobs): a "no index job N" toast came on
            # every tick, under a bar still saying "queued", until the page was reloaded.
            others = self._other_active_jobs(int(job_id))
            html = render.job_gone_html(int(job_id), self._job_collections.get(int(job_id)))
            return (html + render.other_jobs_html(others), [],
                    gr.Timer(active=bool(others)))
        self._job_collections[job.id] = job.collection
        finished = job.state not in LIVE_STATES
        others = self._other_active_jobs(job.id)
        notices = [*self._not_kept(job), *self._unread_job_notices(job)] if finished else ()
        html = render.job_html(job, int(total) if total else None, message=self._job_message(job),
                               notices=notices)
        html += render.other_jobs_html(others)
        # Polled on while another job goes on, so its line stays current and then goes away.
        return html, render.job_error_rows(job), gr.Timer(active=not finished or bool(others))

    @ui_errors
    def cancel_job(self, job_id: float | None, total: float | None,
                   request: gr.Request | None = None) -> tuple[str, list[list[str]], Any, Any]:
        """Index tab, "Cancel job": the bar's job cancelled (a queued one at once, a running
        one within seconds, what it indexed kept, the batch it was encoding left out); the bar
        as ``job_status`` shows it then, and the button, hidden once the job has ended. Logged
        with who asked (the login's user name and the client's address), as the API logs its
        cancels."""
        if not job_id:
            raise InvalidRequestError("No job to cancel: start one first.")
        self.facet.cancel_job(int(job_id))
        logger.info("job %d: cancellation asked on the UI's Index tab by %s", int(job_id),
                    _who(request))
        html, errors, timer = self.job_status(job_id, total)
        return html, errors, timer, self.cancel_button(job_id)

    def cancel_button(self, job_id: float | None) -> Any:
        """The "Cancel job" button: shown while the bar's job is queued or running and not yet
        asked to stop (``cancel_requested``: the bar says "cancelling" until its batch ends;
        the button stayed, and was pressed again as if the first press had failed)."""
        try:
            job = self.facet.job(int(job_id), errors=0) if job_id is not None and job_id > 0 else None
        except FacetError:  # its collection deleted meanwhile
            job = None
        return gr.Button(visible=_cancellable(job))

    def job_controls(self, job_id: float | None, said: str | None) -> tuple[Any, str, Any, Any]:
        """Index tab, whenever the bar changes: the "Cancel job" button (``cancel_button``), the
        announcement of the bar's job (``render.job_said``; ``said`` is the one shown), and,
        once the job has ended since (a cancelled job "can be resumed", but the stopped-jobs
        list was refreshed only on a page load or a new job), that list (``stopped_jobs``);
        else the list is left as it is (``gr.skip``)."""
        job: JobInfo | None = None
        number = int(job_id) if job_id is not None and job_id > 0 else 0
        try:
            job = self.facet.job(number, errors=0) if number else None
        except FacetError:  # its collection deleted meanwhile
            job = None
        now = render.job_said(job, number, self._job_collections.get(number))
        ended = job is None or job.state not in LIVE_STATES
        if number and ended and now != (said or ""):
            try:
                row, stopped = self.stopped_jobs()
            except gr.Error:  # said by its own toast; the list stays as it is
                row, stopped = gr.skip(), gr.skip()
        else:
            row, stopped = gr.skip(), gr.skip()
        return gr.Button(visible=_cancellable(job)), now, row, stopped

    # ---------------------------------------------------------- collections

    @ui_errors
    def collections(self) -> tuple[list[list[Any]], list[list[Any]]]:
        """Collections tab: every collection, after the strays (vectors no collection of this
        database owns, as `facet collections` and GET /collections list them), and the recent
        jobs (a stopped one with what to do, in the page's words)."""
        facet = self.facet
        jobs = facet.jobs(limit=20)
        messages = {job_id: s.message for job_id, s in self._stopped_jobs(jobs).items()}
        uploads = {name: str(folder) for name in {j.collection for j in jobs}
                   if (folder := self._uploads(name)) is not None}
        return (render.collection_rows(facet.collections(), facet.stray_collections()),
                render.job_rows(jobs, messages, uploads))

    @ui_errors
    def delete_collection(self, name: str | None, confirm: str | None,
                          ) -> tuple[list[list[Any]], list[list[Any]], str]:
        """Delete a collection once its name is typed again; returns the refreshed tables."""
        name = self._collection(name)
        _confirmed(confirm, name, f"delete {name!r}", "delete it", "deleted", box="its name")
        try:
            self.facet.collection(name)
            stray = False
        except NotFoundError:  # the store's vectors of no collection, or a 404 from the delete
            stray = True
        info = self.facet.delete_collection(name)
        gr.Info(render.esc(render.deleted_text(info, stray)), title="Deleted")
        collections, jobs = self.collections()
        return collections, jobs, ""

    # ------------------------------------------------------------ documents

    def _uploads(self, name: str) -> Path | None:
        """The collection's upload folder, resolved as its documents' keys are (None for a
        name that cannot have one)."""
        try:
            return self.facet.upload_folder(name).resolve()
        except FacetError:
            return None

    def _key_prefix(self, name: str, status: str | None, prefix: str | None) -> str | None:
        """The key prefix the "starts with" box means: as typed where some key starts so (a
        folder's path, a record id's start), else, where the collection's uploads do, an
        uploaded file's name (their keys are paths in the server's data folder, which the page
        never shows)."""
        typed = prefix or ""
        if not typed.strip():
            return None
        uploads = self._uploads(name)
        if uploads is None or typed.startswith("/") or \
                self.facet.documents(name, 1, 0, status, typed):
            return typed
        # "./tickets.csv", as a shell names a file here (and `facet documents --prefix` reads
        # it), found nothing.
        name_typed = typed
        while name_typed.startswith("./"):
            name_typed = name_typed[2:].lstrip("/")
        staged = f"{uploads}/{name_typed}"
        return staged if self.facet.documents(name, 1, 0, status, staged) else typed

    def _documents_page(self, collection: str | None, status: str | None, prefix: str | None,
                        after: str | None = None, *,
                        before: str | None = None) -> tuple[Any, ...]:
        """A page of the picked collection's documents: those whose key sorts after ``after``
        (None: the first page), or with ``before`` (the key a page started after) the page that
        ends at it (``_start_before``). Returns the table's rows, the line over it, the page's
        cursor (``PageCursor.value``), the "remove" checkboxes (none ticked), Previous and Next
        (each enabled where there is such a page)."""
        name = (collection or "").strip()
        if not name:
            return ([], render.notices_html(["Pick a collection to list its documents."]),
                    docs_view.PageCursor().value(), gr.update(choices=[], value=[]),
                    gr.update(interactive=False), gr.update(interactive=False))
        wanted = _status_wanted(status)
        key_prefix = self._key_prefix(name, wanted, prefix)
        if before is not None:
            after = self._start_before(name, wanted, key_prefix, before)
        docs = self.facet.documents(name, docs_view.DOCUMENTS_PAGE, 0, wanted, key_prefix,
                                    after=after)
        start, total = 0, None
        if after is not None:
            # Which of how many (the line says "documents 21–40 of 57"): those before the
            # page are the ones matching less those from it on.
            total = self._matching(name, wanted, key_prefix)
            start = max(0, total - len(docs) - docs.not_shown)
            total = max(total, start + len(docs) + docs.not_shown)  # a write between the two
            if not start:  # none sorts before it (removed meanwhile): the first page
                after = None
        uploads = self._uploads(name)
        text = docs_view.page_text(name, len(docs), start, docs.not_shown, wanted,
                                   (prefix or "") if key_prefix else None, total)
        cursor = docs_view.PageCursor(after, docs[-1].key if docs else None)
        return (docs_view.document_rows(docs, uploads),
                f'<div class="facet-info" dir="auto">{render.esc(text)}</div>', cursor.value(),
                gr.update(choices=docs_view.removal_choices(docs, uploads), value=[]),
                gr.update(interactive=start > 0), gr.update(interactive=docs.not_shown > 0))

    def _matching(self, name: str, status: str | None, key_prefix: str | None,
                  after: str | None = None) -> int:
        """How many of the collection's documents match (whose key sorts after ``after``)."""
        one = self.facet.documents(name, 1, 0, status, key_prefix, after=after)
        return len(one) + one.not_shown

    def _start_before(self, name: str, status: str | None, key_prefix: str | None,
                      before: str) -> str | None:
        """The key the page ending at ``before`` starts after: the last ``DOCUMENTS_PAGE`` of
        those sorting up to it, read by a count made now (so a document indexed or removed
        since the page was shown skips or repeats none); None (the first page) where no more
        than a page sorts up to it."""
        upto = self._matching(name, status, key_prefix) - self._matching(name, status, key_prefix,
                                                                         before)
        offset = upto - docs_view.DOCUMENTS_PAGE
        if offset <= 0:
            return None
        row = self.facet.documents(name, 1, offset - 1, status, key_prefix)
        return row[0].key if row else None

    @ui_errors
    def documents(self, collection: str | None, status: str | None, prefix: str | None,
                  cursor: object = None) -> tuple[Any, ...]:
        """Collections tab, the documents table: ``DOCUMENTS_PAGE`` of the picked collection's
        documents (key order) whose key sorts after ``cursor``'s start (``PageCursor``, or its
        value; None: from the first), of ``status`` ("all": any) whose key, or uploaded file's
        name, starts with ``prefix`` (``_key_prefix``). Returns the rows, the line over them,
        the page's cursor, the "remove" checkboxes, Previous and Next."""
        return self._documents_page(collection, status, prefix,
                                    docs_view.page_cursor(cursor).after)

    @ui_errors
    def documents_first(self, collection: str | None, status: str | None,
                        prefix: str | None) -> tuple[Any, ...]:
        """The documents table's first page (a collection, status or prefix changed)."""
        return self._documents_page(collection, status, prefix)

    @ui_errors
    def documents_previous(self, collection: str | None, status: str | None, prefix: str | None,
                           cursor: object) -> tuple[Any, ...]:
        """The documents table's page before the one shown: the last page's worth of those
        sorting up to where it starts (the first page where no more are)."""
        at = docs_view.page_cursor(cursor)
        return self._documents_page(collection, status, prefix, before=at.after)

    @ui_errors
    def documents_next(self, collection: str | None, status: str | None, prefix: str | None,
                       cursor: object) -> tuple[Any, ...]:
        """The documents table's page after the one shown: those whose key sorts after its
        last one's, so a document indexed or removed meanwhile skips or repeats none."""
        at = docs_view.page_cursor(cursor)
        return self._documents_page(collection, status, prefix,
                                    at.last if at.last is not None else at.after)

    @ui_errors
    def remove_documents(self, collection: str | None, keys: list[str] | None,
                         confirm: str | None, status: str | None, prefix: str | None,
                         cursor: object = None, request: gr.Request | None = None,
                         ) -> tuple[Any, ...]:
        """Collections tab, "Remove selected": the ticked documents removed from the picked
        collection once its name is typed again (``Facet.remove_documents``: their vectors,
        chunks and metadata; an upload's file too, so a later upload job does not add it
        back). Checked first (``removal_parts``): a job writing the collection is refused before
        the confirmation is asked for; a ticked document gone meanwhile is skipped and said, and
        where all are gone the list is refreshed with nothing asked. Returns the refreshed
        collections and jobs tables, the documents page, and an emptied confirmation box."""
        name = self._collection(collection)
        after = docs_view.page_cursor(cursor).after
        chosen = [k for k in (keys or []) if isinstance(k, str) and k]
        if not chosen:
            raise InvalidRequestError("Tick the documents to remove first (the boxes under the "
                                      "documents table); nothing was removed.")
        # A ticked document another page or job removed meanwhile is skipped and said, the list
        # refreshed: the whole removal was refused ("no document ...; keys are as `facet search`
        # shows them"), the page kept listing it, and the documents still there stayed.
        gone: list[str] = []
        resolved = [k for part in self.facet.removal_parts(name, chosen, skipped=gone) for k in part]
        uploads = self._uploads(name)
        # The ticked keys named as the page named them: a twin (a key written in NFC, another in
        # NFD) with how it writes its accents; the confirmation and the toasts said
        # "résumé.txt" for either (the UI review of the sixth session of 2026-12-06).
        twins = self._page_twins(name, status, prefix, after)

        def refreshed() -> tuple[Any, ...]:
            collections, jobs = self.collections()
            page = self._documents_page(name, status, prefix, after)
            if not page[0] and after is not None:  # its last page emptied: the one before
                page = self._documents_page(name, status, prefix, before=after)
            return collections, jobs, *page, ""

        if not resolved:
            gr.Warning(render.esc(docs_view.gone_text(gone, name, uploads, others=False,
                                                      twins=twins)),
                       title="Already removed")
            return refreshed()
        listed = docs_view.listed([docs_view.shown_twin(k, uploads, twins) for k in resolved])
        what = f"{plural(len(resolved), 'document', grouped=True)} ({listed})"
        _confirmed(confirm, name, f"remove {what} from {name!r}", f"remove {what}", "removed")
        report = self.facet.remove_documents(name, resolved, missing_ok=True)
        logger.info("job %d: %d document(s) removed from %s on the UI's Collections tab by %s",
                    report.job_id, report.docs_deleted, name, _who(request))
        gone += report.skipped_keys
        if report.removed:
            gr.Info(render.esc(docs_view.removed_text(report, uploads, twins)), title="Removed")
        if gone:
            gr.Warning(render.esc(docs_view.gone_text(gone, name, uploads,
                                                      others=bool(report.removed), twins=twins)),
                       title="Already removed")
        return refreshed()

    def _page_twins(self, name: str, status: str | None, prefix: str | None,
                    after: str | None) -> frozenset[str]:
        """The twins (``DocumentList.twins``) of the documents page the removal's boxes were
        ticked on, read again."""
        wanted = _status_wanted(status)
        page = self.facet.documents(name, docs_view.DOCUMENTS_PAGE, 0, wanted,
                                    self._key_prefix(name, wanted, prefix), after=after)
        return page.twins


def _status_wanted(status: str | None) -> str | None:
    """The documents view's status picked, as ``Facet.documents`` takes it (None: any)."""
    return None if status in (None, "", docs_view.ALL_STATUSES) else status
