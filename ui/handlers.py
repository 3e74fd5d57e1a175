"""The UI's event handlers: each parses the widgets' values, calls one ``Facet`` method and
formats the answer (``ui.render``). No retrieval logic lives here.

Errors: every handler is wrapped by ``ui_errors``: a domain error (``app.errors``) becomes a
``gr.Error`` whose message is the core's own (escaped: Gradio renders it as HTML), with a
title per kind; anything else is logged with its traceback on the server and shown as a
short "server error" message, never as a traceback in the page.
"""

from __future__ import annotations

import functools
import html
import logging
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import gradio as gr

from app.core import Facet, allowed_model_names
from app.errors import (
    BusyError,
    ConflictError,
    DataError,
    FacetError,
    InvalidRequestError,
    NotFoundError,
    TooLargeError,
    UnavailableError,
    UnknownModelError,
)
from app.services.clustering import ClusterRequest, ClusterResponse, k_option, limit_option
from app.services.collections import JobInfo
from app.services.indexing import IndexOptions
from app.services.search import MAX_TOP_K, SearchRequest, SearchResponse
from app.settings import FacetSettings
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
    (ConflictError, "Busy collection"),
    (BusyError, "Server busy"),
    (UnavailableError, "Not available"),
    (FacetError, "Error"),
]

SOURCE_COLLECTION = "collection"
SOURCE_SEARCH = "search results"
SOURCE_TEXTS = "pasted or uploaded texts"
CLUSTER_SOURCES = [SOURCE_COLLECTION, SOURCE_SEARCH, SOURCE_TEXTS]
NO_EXPLAINER = "keywords (no explainer)"

GENERIC_EXAMPLES = [
    "Find documents on the same topic",
    "Find passages that answer the question",
    "Find messages with the same intent",
]


def ui_error(error: FacetError) -> gr.Error:
    """The ``gr.Error`` a domain error is shown as (message escaped: Gradio renders HTML)."""
    title = next(t for cls, t in _TITLES if isinstance(error, cls))
    message = str(error)
    if isinstance(error, NotFoundError) and message.startswith("unknown collection"):
        # Deleted since the page was loaded: the failed event refreshes the pickers.
        message += ". The collection lists on this page have been refreshed."
    return gr.Error(html.escape(message, quote=False), title=title, print_exception=False)


def ui_errors(handler: Callable[P, T]) -> Callable[P, T]:
    """Show domain errors as ``gr.Error`` and hide everything else behind a generic message."""

    @functools.wraps(handler)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return handler(*args, **kwargs)
        except gr.Error:
            raise
        except FacetError as e:
            raise ui_error(e) from e
        except Exception as e:
            logger.exception("UI handler %s failed", handler.__name__)
            raise gr.Error("Something went wrong on the server; the details are in its log. "
                           "Try again, and tell the operator if it keeps happening.",
                           title="Server error", print_exception=False) from e

    return wrapper


@dataclass
class Pickers:
    """Choices for every picker of the page (refreshed on load and after changes)."""

    collections: list[str]
    folders: list[str]


class UiHandlers:
    """The handlers of every tab, over one facade.

    Args:
        facet: the facade, or a function returning it (the API server builds its facade at
            start-up, after the UI is mounted).
        settings: the ``FACET_UI_*`` limits and choices.
        export_dir: where CSV exports are written (default a new temp folder: Gradio serves
            files from the temp directory).
    """

    def __init__(self, facet: Facet | Callable[[], Facet], settings: FacetSettings,
                 export_dir: Path | None = None) -> None:
        self._facet = facet
        self.settings = settings
        self.export_dir = export_dir or Path(tempfile.mkdtemp(prefix="facet-ui-"))

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
        """Rerankers the Search tab offers (``FACET_UI_RERANKERS``)."""
        return list(self.settings.ui_rerankers)

    def embedders(self) -> list[str]:
        """Embedders the Index and Cluster tabs offer."""
        return self._allowed()

    def explainers(self) -> list[str]:
        """The cluster namers: keywords, or an allowed InBedder checkpoint."""
        return [NO_EXPLAINER] + [m for m in self._allowed() if "inbedder" in m.lower()]

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
                       inputs.list_folders(self.settings.ui_allowed_roots))

    @ui_errors
    def refresh_pickers(self, search_value: str | None, compare_value: str | None,
                        cluster_value: str | None, index_value: str | None,
                        delete_value: str | None) -> tuple[Any, Any, Any, Any, Any, Any]:
        """Updates for the collection pickers (keeping each selection while it exists) and the
        folder picker."""
        p = self.pickers()

        def keep(value: str | None, custom: bool = False) -> Any:
            if value in p.collections or (custom and value):
                return gr.update(choices=p.collections, value=value)
            return gr.update(choices=p.collections, value=p.collections[0] if p.collections
                             else None)

        return (keep(search_value), keep(compare_value), keep(cluster_value),
                keep(index_value, custom=True), keep(delete_value), gr.update(choices=p.folders))

    @ui_errors
    def collection_changed(self, collection: str | None) -> tuple[Any, Any]:
        """The picked collection's embedders and example instructions."""
        if not collection:
            return gr.update(choices=[], value=None), gr.update(choices=GENERIC_EXAMPLES, value=None)
        try:
            names = list(self.facet.collection(collection).embedders)
        except NotFoundError:
            names = []
        default = self.settings.default_embedder
        return (gr.update(choices=names, value=default if default in names else
                          (names[0] if names else None)),
                gr.update(choices=self.examples_for(collection), value=None))

    # --------------------------------------------------------------- search

    def _collection(self, name: str | None) -> str:
        name = (name or "").strip()
        if not name:
            raise InvalidRequestError("Pick a collection first (or index one in the Index tab).")
        return name

    def _model(self, name: str | None, what: str, extra: list[str] | None = None) -> str | None:
        name = (name or "").strip()
        if not name:
            return None
        allowed = list(dict.fromkeys(self._allowed() + (extra or [])))
        if name not in allowed:
            raise UnknownModelError(f"The {what} {name!r} is not available here; pick one of: "
                                    f"{', '.join(allowed)}")
        return name

    def _query(self, query: str | None, instruction: str | None,
               what: str = "instruction") -> tuple[str, str | None, list[str]]:
        limit = self.settings.ui_max_query_chars
        text = inputs.require_text(query, "query", "my card payment was declined")
        text, cut_query = inputs.clip(text, limit, "query")
        clean, cut_instruction = inputs.clip((instruction or "").strip(), limit, what)
        notices = [n for n in (cut_query, cut_instruction) if n]
        for notice in notices:
            gr.Warning(render.esc(notice), title="Shortened")
        return text, clean or None, notices

    def _request(self, query: str, instruction: str | None, collection: str | None,
                 embedder: str | None, k: float | None, filters: str | None,
                 reranker: str | None = None, mode: str = "dense",
                 group_by_document: bool = False) -> SearchRequest:
        top_k = 10 if k is None else int(k)
        if top_k < 1:
            raise InvalidRequestError(f"k (the number of results) must be at least 1, got {top_k}")
        return SearchRequest(
            query=query, collection=self._collection(collection), instruction=instruction,
            top_k=top_k, filters=inputs.parse_filter_text(filters),
            rerank=self._model(reranker, "reranker", self.rerankers()),
            embedder=self._model(embedder, "embedder"), mode=mode,
            group_by_document=group_by_document)

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
        # Grouped by the core, as on every other edge: k documents (grouping k chunks here
        # showed fewer, with gaps in the ranks).
        request = self._request(text, clean, collection, embedder, k, filters,
                                reranker if rerank else None, mode or "auto", bool(group))
        response = self.facet.search(request)
        wall_ms = (time.perf_counter() - started) * 1000
        return (render.results_html(response, group_by_document=bool(group), notices=notices,
                                    filters=request.filters),
                render.search_summary(response, wall_ms, group_by_document=bool(group)))

    @ui_errors
    def compare(self, query: str | None, instruction_a: str | None, instruction_b: str | None,
                collection: str | None, embedder: str | None, k: float | None,
                filters: str | None) -> str:
        """Compare tab: the same query under two instructions, side by side."""
        text, a, notices = self._query(query, instruction_a, "instruction A")
        _, b, notices_b = self._query(text, instruction_b, "instruction B")
        if (a or "") == (b or ""):
            raise InvalidRequestError("Instructions A and B are the same; change one to see how "
                                      "the instruction changes the ranking.")
        first = self.facet.search(self._request(text, a, collection, embedder, k, filters))
        second: SearchResponse = self.facet.search(
            self._request(text, b, collection, embedder, k, filters))
        # (The query was clipped already, so B's notices are its instruction's: `[1:]` dropped it.)
        return render.compare_html(first, second, notices + [n for n in notices_b if n not in notices])

    # -------------------------------------------------------------- cluster

    @ui_errors
    def cluster(self, source: str | None, collection: str | None, filters: str | None,
                limit: float | None, query: str | None, query_instruction: str | None,
                pasted: str | None, upload: str | None, labels_file: str | None,
                instruction: str | None, k: float | None, embedder: str | None,
                explainer: str | None, progress: gr.Progress = gr.Progress(),
                ) -> tuple[str, Any, list[list[Any]], str]:
        """Cluster tab: summary (with the V-measure when labels are given), map, clusters, CSV."""
        started = time.perf_counter()
        limit_ = self.settings.ui_max_query_chars
        clean = inputs.require_text(instruction, "instruction", "What is the topic of this text?")
        clean, cut = inputs.clip(clean, limit_, "instruction")
        notices = [cut] if cut else []
        n = limit_option(int(limit or 0))
        chosen_k = k_option(int(k or 0))
        texts: list[str] | None = None
        search: SearchRequest | None = None
        name: str | None = None
        labels: list[str] | None = None
        if source == SOURCE_TEXTS:
            texts = inputs.pasted_texts(pasted)
            if upload:
                texts += inputs.read_text_list(Path(upload))
            if not texts:
                raise InvalidRequestError("No texts: paste one text per line or upload a file "
                                          f"({', '.join(inputs.CLUSTER_FILE_SUFFIXES)})")
            if labels_file:
                labels = inputs.read_labels(Path(labels_file))
                # Counted before the limit: the labels file labels the whole upload.
                if len(labels) != len(texts):
                    raise InvalidRequestError(f"{len(labels)} labels for {len(texts)} texts; give "
                                              "one label per text, in the same order")
            texts = texts[:n] if n else texts
            labels = labels[:len(texts)] if labels is not None else None
        elif source == SOURCE_SEARCH:
            text, q_instruction, more = self._query(query, query_instruction, what="search instruction")
            notices += more
            # "0 = all" took 100 results and a box value over a search's limit was refused as
            # "top_k must be ... 1000": the box is the number of results, at most MAX_TOP_K.
            top_k = min(n or MAX_TOP_K, MAX_TOP_K)
            if n and n > MAX_TOP_K:
                notices.append(f"A search returns at most {MAX_TOP_K:,} results: clustering its top "
                               f"{MAX_TOP_K:,}, not {n:,}.")
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
            embedder=self._model(embedder, "embedder"),
            explainer=None if explainer in (None, "", NO_EXPLAINER) else
            self._model(explainer, "explainer"))
        progress(0.0, desc="starting")
        response = self.facet.cluster(request, progress=lambda f, s: progress(f, desc=s))
        score = self._v_measure(labels, response) if labels is not None else None
        wall = time.perf_counter() - started
        summary = render.cluster_summary(response, wall_s=wall, v_measure=score,
                                         label_count=len(set(labels)) if labels else None,
                                         notices=notices)
        figure = render.cluster_figure(response, title=f"{len(response.texts):,} texts, "
                                       f"k={response.k}: {clean[:80]}")
        csv_path = render.write_cluster_csv(response, self.export_dir, labels)
        logger.info("clustered %d texts into %d in %.1fs", len(response.texts), response.k, wall)
        return summary, figure, render.cluster_rows(response), str(csv_path)

    @staticmethod
    def _v_measure(labels: list[str], response: ClusterResponse) -> float:
        from app.evaluation.metrics import v_measure

        ids = {label: i for i, label in enumerate(dict.fromkeys(labels))}
        return v_measure([ids[label] for label in labels], response.labels)

    # ---------------------------------------------------------------- index

    def _start(self, source: Path, collection: str | None, embedder: str | None,
               notices: list[str]) -> tuple[int, int, str, list[list[str]], Any]:
        name = (collection or "").strip()
        if not name:
            raise InvalidRequestError("Name the collection to index into (pick one or type a "
                                      "new name).")
        facet = self.facet
        total = facet.estimate_documents(source)
        job = facet.submit_index(source, name, IndexOptions(
            embedder=self._model(embedder, "embedder")))
        for notice in notices:
            gr.Warning(render.esc(notice), title="Not indexed")
        html = render.notices_html(notices) + render.job_html(job, total)
        return job.id, total, html, render.job_error_rows(job), gr.Timer(active=True)

    @ui_errors
    def index_upload(self, files: list[str] | None, collection: str | None,
                     embedder: str | None) -> tuple[int, int, str, list[list[str]], Any, None]:
        """Index tab, uploads: check them, stage them in the collection's upload folder and
        start a background job; returns the job id, the document total, the progress HTML,
        the errors so far, the running poll timer, and an emptied upload box."""
        if not files:
            raise InvalidRequestError("Upload at least one file first "
                                      f"({', '.join(Facet.supported_suffixes())}).")
        checked = inputs.check_uploads(files, max_mb=self.settings.ui_max_upload_mb,
                                       suffixes=Facet.supported_suffixes())
        if not checked.accepted:
            raise DataError("Nothing to index: " + "; ".join(checked.refused))
        name = (collection or "").strip()
        if not name:
            raise InvalidRequestError("Name the collection to index into (pick one or type a "
                                      "new name).")
        # One upload folder per collection: uploading a file again updates its document. The
        # name is checked first: one reduced to a safe file name ('oops/mix' -> 'mix') put the
        # files in another collection's folder, and the refusal's clean-up deleted its copies.
        folder = self.facet.upload_folder(name)
        staged = inputs.stage_uploads(checked.accepted, folder)
        try:
            started = self._start(folder, name, embedder, checked.refused)
        except FacetError:
            staged.undo()  # the job was refused (the collection busy...): the folder as it was
            raise
        staged.keep()
        return *started, None

    @ui_errors
    def index_folder(self, folder: str | None, collection: str | None,
                     embedder: str | None) -> tuple[int, int, str, list[list[str]], Any]:
        """Index tab, a server folder under the allowed roots: start a background job."""
        source = inputs.resolve_under_roots(folder, self.settings.ui_allowed_roots)
        return self._start(source, collection, embedder, [])

    @ui_errors
    def resume_job(self) -> tuple[int, int, str, list[list[str]], Any]:
        """Index tab, on page load: the bar of the newest job still queued or running, so a
        reload mid-job does not lose it (it showed job 0 and nothing); else an empty bar."""
        active = [j for j in self.facet.jobs(limit=20) if j.state in ("queued", "running")]
        if not active:
            return 0, 0, "", [], gr.Timer(active=False)
        job = active[0]
        try:
            total = job.docs_total or self.facet.estimate_documents(job.source)
        except FacetError:  # the source is gone meanwhile: the bar counts what the job saw
            total = job.docs_seen
        html = render.job_html(job, total) + render.other_jobs_html(active[1:])
        return job.id, total, html, render.job_error_rows(job), gr.Timer(active=True)

    def _other_active_jobs(self, shown: int) -> list[JobInfo]:
        return [j for j in self.facet.jobs(limit=20)
                if j.state in ("queued", "running") and j.id != shown]

    @ui_errors
    def job_status(self, job_id: float | None, total: float | None,
                   ) -> tuple[str, list[list[str]], Any]:
        """Index tab, polled every second: the job's bar (with a line for any other job still
        in progress), its per-document errors, and the timer (stopped once the job and any
        other has finished)."""
        if not job_id:
            return "", [], gr.Timer(active=False)
        job = self.facet.job(int(job_id))
        finished = job.state not in ("queued", "running")
        others = self._other_active_jobs(job.id)
        html = render.job_html(job, int(total) if total else None) + render.other_jobs_html(others)
        # Polled on while another job goes on, so its line stays current and then goes away.
        return html, render.job_error_rows(job), gr.Timer(active=not finished or bool(others))

    # ---------------------------------------------------------- collections

    @ui_errors
    def collections(self) -> tuple[list[list[Any]], list[list[Any]]]:
        """Collections tab: every collection and the recent jobs."""
        facet = self.facet
        return render.collection_rows(facet.collections()), render.job_rows(facet.jobs(limit=20))

    @ui_errors
    def delete_collection(self, name: str | None, confirm: str | None,
                          ) -> tuple[list[list[Any]], list[list[Any]], str]:
        """Delete a collection once its name is typed again; returns the refreshed tables."""
        name = self._collection(name)
        if (confirm or "").strip() != name:
            raise InvalidRequestError(f"To delete {name!r}, type its name in the confirmation box "
                                      "first; nothing was deleted.")
        info = self.facet.delete_collection(name)
        gr.Info(render.esc(f"Deleted {name}: {info.documents} documents, {info.chunks} chunks."),
                title="Deleted")
        collections, jobs = self.collections()
        return collections, jobs, ""
