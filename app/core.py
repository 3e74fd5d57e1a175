"""The application core: one ``Facet`` object every edge calls.

The CLI, the HTTP API, the LangChain adapter, and later the Gradio UI and the Celery worker
are thin layers over this class: they parse their input, call one method, and render the
result or map the error. ``Facet`` holds the logic's dependencies (store, metadata sessions,
models, the ``QueryEncoder`` and the ``JobRunner``) and the services that use them::

    from app.core import Facet
    from app.services.search import SearchRequest

    with Facet.open() as facet:                       # FACET_* settings
        facet.index("notes/", "notes")                # sync; facet.submit_index(...) runs it in the background
        hits = facet.search(SearchRequest("card declined", "notes",
                                          instruction="Find the customer's intent"))

Every public method raises only ``app.errors.FacetError`` subclasses (errors of the
``embedders`` and ``indexer`` packages are translated here), never with an exit code or a
status: each edge decides how to show them.

Embedded mode: one process owns the store folder, so open one ``Facet`` per process and
share it (``Facet.shared()`` for code that cannot pass it around, e.g. a LangChain retriever
built from a config).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import errno
import functools
import logging
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import numpy as np

from app.encoding import (
    BatchingQueryEncoder,
    EmbedderCache,
    InlineQueryEncoder,
    QueryEncoder,
    cut_count,
)
from app.errors import (
    ConflictError,
    DataError,
    FacetError,
    InvalidRequestError,
    NotFoundError,
    TooLargeError,
    UnavailableError,
    UnknownModelError,
    as_domain_error,
    check_collection,
    domain_errors,
    embedder_refusal,
    quoted_field,
    reworded,
)
from app.jobs import JobRunner, ThreadJobRunner
from app.roots import root_holding
from app.services.clustering import ClusterProgress, ClusterRequest, ClusterResponse, ClusterService
from app.services.collections import (
    DEFAULT_JOB_ERRORS,
    LIVE_STATES,
    CollectionInfo,
    CollectionService,
    DocumentList,
    JobInfo,
)
from app.services.context import ServiceContext, not_writable
from app.services.indexing import (
    IndexOptions,
    IndexReport,
    IndexService,
    PreparedJob,
    Progress,
    RemoveReport,
    estimate_documents,
    refuse_case_twin,
    writing_job,
)
from app.services.search import (
    SearchRequest,
    SearchResponse,
    SearchService,
    check_int,
    check_spec,
    check_str,
    kept_embed,
    plain_number,
    read_as_none,
    reads_instruction,
    weak_instruction_note,
)
from app.settings import FacetSettings, apply_settings, get_settings, mask_passwords
from app.text import check_text_encodable, check_texts
from app.uploads import (
    TAKEN_BACK,
    UploadResult,
    check_uploads,
    drop_unindexable,
    forget_staged,
    note_staged,
    remove_collection_uploads,
    stage_uploads,
    take_back,
    upload_folder_path,
)
from embedders.contract import CHARS_PER_TOKEN_BOUND, Embedder, HasTokenizer, Role, validate_instruction
from indexer import metadata as md
from indexer.errors import StoreBusyError

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")


def _domain_errors(method: Callable[P, T]) -> Callable[P, T]:
    """Let only ``FacetError`` out: lower packages' errors become their domain equivalents.

    A collection another process has open (an embedded store) becomes a ``ConflictError``
    naming the job that writes it, with what to do.
    """

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        if args and isinstance(args[0], Facet):
            args[0]._check_open()
        facade = args[0] if args and isinstance(args[0], Facet) else None
        try:
            return method(*args, **kwargs)
        except FacetError as e:
            busy = e.__cause__
            if facade is not None and isinstance(e, ConflictError) and \
                    isinstance(busy, StoreBusyError):  # (a service turned it into a conflict)
                said = _held_here(facade, busy)
                if said is not None:
                    raise ConflictError(said, param=e.param) from busy
            raise
        except StoreBusyError as e:
            said = _held_here(facade, e) if facade is not None else None
            if said is None:
                said = (facade.catalog.busy_message(e.collection, str(e)) if facade is not None
                        else str(e))
            raise ConflictError(said) from e
        except Exception as e:
            domain = as_domain_error(e)
            if domain is None:
                raise
            raise domain from e

    return wrapper


@contextlib.contextmanager
def _naming_model(**fields: str | None) -> Iterator[None]:
    """Name the field of an unknown model raised with no ``param`` (the registry's "unknown
    embedder 'x'" named none, where ``cluster`` and a blank embedder named it): ``fields`` maps
    each field to the name given there; the one whose name the message quotes (none where
    several or none do: ``quoted_field``)."""
    try:
        yield
    except Exception as e:
        from embedders.errors import UnknownEmbedderError

        if not isinstance(e, UnknownModelError | UnknownEmbedderError):
            raise
        domain = as_domain_error(e)
        assert domain is not None
        if domain.param is None:
            domain.param = quoted_field(str(domain), fields)
        if domain is e:
            raise
        raise domain from e


def _role(role: object) -> Role:
    """``role`` as a ``Role``: a ``Role``, or exactly "query" or "document", as ``POST
    /v1/embeddings`` takes it (``Role.parse`` read "Query" as a query, which the API refused)."""
    if isinstance(role, Role):
        return role
    if isinstance(role, str) and role in {r.value for r in Role}:
        return Role(role)
    valid = ", ".join(r.value for r in Role)
    raise InvalidRequestError(f"unknown role {role!r}; use one of: {valid} (in lower case)",
                              param="role")


def _held_here(facade: Facet, busy: StoreBusyError) -> str | None:
    """The refusal of a collection another ``Facet`` of this process holds open (an embedded
    store's folder opens in one store per process) where one of the two is the process's
    shared one: which, and how to use one Facet for both (``Facet.set_shared``, ``facet=``).
    Your own ``Facet.open()`` and the LangChain classes' default, ``Facet.shared()``, locked
    each other out saying only "share it". Where neither is the shared one and a job of this
    process writes it (an earlier Facet not closed: a notebook's setup cell run again), that
    job (the job's lease was said with advice for another process). None otherwise (the
    store's own message)."""
    if busy.holder.get("pid") != os.getpid():
        return None
    shared = Facet._shared
    which = ("Facet.shared(), which FacetRetriever and FacetEmbeddings use when given no "
             "facet=")
    start = (f"collection {busy.collection!r} is open in another store of this process "
             f"(pid {os.getpid()})")
    if shared is facade:
        return (f"{start}, another Facet on the same data folder, and this one is the process's "
                f"shared Facet ({which}): open one Facet per data folder per process and share "
                "it: pass yours to them as facet=, or make it the shared one with "
                "Facet.set_shared(facet) before they first run, or close() the other one first")
    if shared is None or shared._closed or not _same_folder(shared, facade) or \
            not shared.context.store.is_open(busy.collection):
        # Not the shared one: where a job of this process writes it (an earlier Facet not
        # closed, a notebook's setup cell run again), the job's lease was said with advice for
        # another process ("serve readers and writers from one facet serve"); else the
        # store's own message, which says this process and how to share one Facet.
        job = writing_job(busy.collection)
        if job is None:
            return None
        return (f"{start}: another Facet of this process (an earlier one, not closed: a setup "
                f"cell run again?) is still indexing into it (job {job}): wait for that job to "
                f"end (facet.job({job}) says when) or cancel it, then close that Facet "
                "(facet.close(); `with Facet.open() as facet:` closes it at the block's end), "
                "or keep using that one Facet for both")
    return (f"{start}: the process's shared Facet ({which}) has it open: open one Facet per "
            "data folder per process and share it: make this one the shared one with "
            "Facet.set_shared(facet) before they first run (or pass facet= to them), or close "
            "the shared one first (Facet.shared().close())")


def _same_folder(one: Facet, other: Facet) -> bool:
    """Whether two facades use the same embedded store folder."""
    try:
        return Path(one.settings.data_dir).resolve() == Path(other.settings.data_dir).resolve()
    except OSError:
        return False


def allowed_model_names(settings: FacetSettings) -> list[str]:
    """Embedder names a request from outside (HTTP, UI) may name: ``FACET_API_MODELS``, else
    the registered names and the default embedder (a checkpoint path only when listed, so a
    request cannot make the server load an arbitrary folder)."""
    from embedders import list_embedders

    if settings.api_models is not None:
        return list(settings.api_models)
    names = [i.name for i in list_embedders()]
    if settings.default_embedder not in names:
        names.append(settings.default_embedder)
    return names


def ui_rerankers(settings: FacetSettings) -> list[str]:
    """The rerankers the Search tab offers: ``FACET_UI_RERANKERS`` as set, else those of its
    default that load here (each left out logged once a process, at INFO)."""
    if "ui_rerankers" in settings.model_fields_set:
        return list(settings.ui_rerankers)
    offered = []
    for name in settings.ui_rerankers:
        reason = embedder_refusal(name)
        if reason is None:
            offered.append(name)
        elif name not in _RERANKERS_LEFT_OUT:
            _RERANKERS_LEFT_OUT.add(name)
            logger.info("the Search tab offers no %s reranker: %s (FACET_UI_RERANKERS sets the "
                        "list)", name, reason)
    return offered


_RERANKERS_LEFT_OUT: set[str] = set()


# How long each readiness check may take (they run side by side: ``Facet.readiness``).
READY_TIMEOUT_S = 1.0


@dataclass
class Readiness:
    """What ``Facet.readiness`` found.

    Attributes:
        ready: every check passed.
        checks: ``database``, ``store``, ``broker`` and ``query_workers``, each ``"ok"`` (the
            broker's ``"not configured"`` where no ``FACET_BROKER_URL`` is set; the query
            workers' where queries are not encoded on workers) or why it failed, in one line
            without passwords.
    """

    ready: bool
    checks: dict[str, str]


@dataclass
class Embeddings:
    """Vectors of one ``Facet.embed`` call.

    Attributes:
        embedder: the embedder's canonical name.
        dim: vector width.
        role: ``query`` or ``document``.
        instruction: the instruction the texts were read under (None when none): the one given,
            stripped, or the default an embedder that always reads one renders in its place.
        vectors: float32 ``(n, dim)``, L2-normalised.
        tokens: tokens the embedder read (texts cut at its ``max_length``), prompts excluded.
        instruction_read: whether the embedder read the instruction: None without one (or with
            one it reads as none, InBedder's own default: ``reads_bare``), False
            for an embedder registered as reading none (its vectors are the same under any),
            as a search's ``instruction_read`` says; ``note`` then says so.
        note: what the vectors cannot show (the instruction not read, or read at a weak blend:
            "the instruction barely steers: ..."), else None.
        cut: how many texts were longer than the embedder reads (its ``max_length`` less the
            prompt and instruction): only their start is in their vectors (``count_cut``).
    """

    embedder: str
    dim: int
    role: str
    instruction: str | None
    vectors: np.ndarray
    tokens: int
    instruction_read: bool | None = None
    note: str | None = None
    cut: int = 0


def _check_dimensions(model: Embedder, dimensions: int | None) -> None:
    """Refuse a ``dimensions`` other than ``model``'s width before anything is encoded: the
    check came after the encode, so a request of 1,024 texts with a wrong one held the model
    thread for seconds (and 0 or -1 was taken as a width)."""
    if dimensions is None:
        return
    if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1:
        raise InvalidRequestError(f"dimensions must be a whole number of at least 1, not "
                                  f"{dimensions!r}", param="dimensions")
    if dimensions != int(model.dim):
        raise InvalidRequestError(f"dimensions={dimensions}: {model.name} gives {int(model.dim)}-d "
                                  "vectors and Facet does not shorten them; omit dimensions",
                                  param="dimensions")


def _embeddings(model: Embedder, spec: str, role: Role, instruction: str | None,
                vectors: np.ndarray, tokens: int, cut: int = 0) -> Embeddings:
    """``Embeddings`` of ``model`` (loaded from ``spec``), saying whether it read ``instruction``
    (search's ``instruction_read`` and note: an embedder registered as reading none)."""
    rendered = _rendered(model, instruction)
    # An instruction read as none is (InBedder's own default: the same vectors as without one)
    # is none here too: it was said to "barely steer" (the verification round of the fourth
    # session of 2026-12-07).
    given = None if read_as_none(model, instruction) else validate_instruction(instruction)
    read = None if given is None else reads_instruction(spec)
    # Read only at a weak blend (minilm's 0.25): said as a search or a clustering says it (an
    # embed said nothing, the vectors within 0.999 of the uninstructed ones: the quality
    # exploration of the fourth session of 2026-12-07).
    note = (weak_instruction_note([spec]) if read else
            None if read is None else (f"the instruction was not read: {spec} reads no "
                                       "instruction (its vectors are the same under any)"))
    return Embeddings(model.name, int(model.dim), role.value, rendered, vectors, tokens, read,
                      note, cut)


def _rendered(model: Embedder, instruction: str | None) -> str | None:
    """The instruction ``model`` read the texts under: the one given, stripped (None for none),
    or the default it renders in its place (InstEmb and InBedder always read one)."""
    rendered = getattr(model, "rendered_instruction", None)  # (a plugin need not have it)
    return rendered(instruction) if callable(rendered) else validate_instruction(instruction)


def _expect(value: Any, kind: type, what: str, example: str) -> None:
    """Refuse an argument of the wrong type with the facade's error, not an AttributeError from
    deep inside (``facet.search("q")``: "'str' object has no attribute 'collection'")."""
    if not isinstance(value, kind):
        raise InvalidRequestError(f"{what} must be of type {kind.__name__} ({example}), got "
                                  f"{type(value).__name__} {value!r:.60}")


# Facades not yet closed. A script that ends while a background job runs (``submit_index``, no
# ``close()``) aborted in the interpreter's shutdown ("terminate called without an active
# exception", exit 134) with the job's thread inside torch; closed at exit, the job stops at
# its next batch and is recorded interrupted, to be resumed.
_OPEN: weakref.WeakSet[Facet] = weakref.WeakSet()


@atexit.register
def _close_open_facades() -> None:
    for facet in list(_OPEN):
        facet.close(reason="the process exiting before the job ended")


def _forked_message(pid: int) -> str:
    return (f"this Facet was opened in process {pid} before a fork: open one in each worker "
            "process after the fork (gunicorn: no --preload warm-up, or open it in post_fork; "
            "multiprocessing: the spawn start method)")


def _after_fork_in_child() -> None:
    """In a forked child, the parent's facades are the parent's: their threads (the model
    thread, the job runner) are gone here and their store handles, folder locks and database
    connections are the parent's, so a call on one hung forever (a search in the store's
    native code, an embed waiting on a model thread that is not there). Each refuses every
    call (``_check_open``: opened in another process); none is closed here (closing would let
    go of what the parent still uses), nor at the child's exit; ``Facet.shared()`` opens a
    fresh one in the child; the database pools inherited are dropped without closing."""
    Facet._shared_lock = threading.Lock()  # another thread may have held it at the fork
    Facet._shared, Facet._shared_opened = None, False
    for facet in list(_OPEN):
        _OPEN.discard(facet)
        facet._finalizer.detach()
        engine = getattr(facet.context, "engine", None)
        if engine is not None:
            with contextlib.suppress(Exception):
                engine.dispose(close=False)  # (SQLAlchemy's advice for a forked child)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# The least a closing facade waits for its model thread, its stop budget spent.
ENCODER_CLOSE_MIN_S = 1.0


class _Held:
    """What a ``Facet`` holds and lets go of: its context (store handles and folder locks, the
    metadata database's engine), its job runner (a thread) and the encoder it made (threads).

    Nothing here refers to the facade, so a ``weakref.finalize`` on the facade can close it: a
    facade dropped without ``close()`` kept the data folder (a cycle through its job runner's
    callbacks, freed by ``gc.collect()`` only), and the next ``Facet.open()`` on it in the same
    process (a notebook cell run again) was refused, "open in another store of this process".
    """

    def __init__(self, context: ServiceContext, job_runner: JobRunner,
                 encoder: QueryEncoder | None) -> None:
        self.context = context
        self.job_runner = job_runner
        self.encoder = encoder  # None: not the facade's to close

    def close(self, reason: str | None = None) -> None:
        if reason:
            self.context.stop_reason = reason
        self.context.stopping.set()  # a running job stops at its next batch, interrupted
        runner = self.job_runner
        # The whole close holds to what the runner says it waits for (up to 30s, then 5s more
        # once the job's encoding is dropped): the encoder's close waited up to 60 s more, unsaid.
        budget = (runner.stop_wait_s + runner.overdue_wait_s
                  if isinstance(runner, ThreadJobRunner) else 60.0)
        deadline = time.monotonic() + budget
        runner.close()
        if isinstance(self.encoder, BatchingQueryEncoder):
            left = max(ENCODER_CLOSE_MIN_S, deadline - time.monotonic())
            self.encoder.close(timeout=left)
            if self.encoder.working:
                logger.warning("the model thread did not finish its work within %gs; it ends "
                               "with this process", round(left, 1))
        elif self.encoder is not None:
            self.encoder.close()
        self.context.close()
        # What its embedders cut and have not said yet (held off the main thread, at most one
        # line a minute): the process's exit hook never ran where a signal ended it (`facet
        # serve` stopped by SIGTERM said "1 of 1 texts" of a 70-text request, and the rest never).
        base = sys.modules.get("embedders.base")  # (only where a model was loaded: no torch import)
        if base is not None:
            base.flush_truncation_notes()


def _close_when_idle(facade: Facet) -> None:
    """Close ``facade`` once its job runner has no job queued or running."""
    runner = facade.job_runner
    while getattr(runner, "busy", False) and not facade._closed:
        time.sleep(0.2)
    facade.close()


def _abandon_job(indexing: IndexService, job: PreparedJob) -> None:
    indexing.abandon_queued(job.job_id)


def _drop_bulk_work(encoder: QueryEncoder) -> None:
    """A job overran its stop wait: the encoding queued for it goes (``abandon_bulk_work``)."""
    if isinstance(encoder, BatchingQueryEncoder):
        encoder.abandon_bulk_work()


class Facet:
    """Index, search, cluster, collections, jobs and embeddings over one data folder.

    Args:
        settings: the ``FACET_*`` settings (default: read from the environment once).
        context: already built dependencies (tests); default built from ``settings``.
        encoder: where texts are encoded; default ``InlineQueryEncoder`` (the calling thread).
            ``Facet.for_serving`` uses a ``BatchingQueryEncoder`` (the workers' queues with
            ``FACET_ENCODE_ON_WORKERS``).
        jobs: where background index jobs run; default one background thread.
        embedders: a shared model cache (tests share their session models this way).

    Dropped without ``close()`` (its last reference gone, ``del facet`` or a name bound to
    another one), a facade is closed at once, as ``close()`` would: nothing of it refers back
    to it (no ``gc.collect()`` needed), so the data folder is free for the next one. A facade
    with index jobs queued or running in its thread (``submit_index``) stays alive until they
    end, and is closed then, in that thread.
    """

    def __init__(self, settings: FacetSettings | None = None, *,
                 context: ServiceContext | None = None, encoder: QueryEncoder | None = None,
                 jobs: JobRunner | None = None, embedders: EmbedderCache | None = None) -> None:
        self.settings = settings or (context.settings if context else get_settings())
        apply_settings(self.settings)
        if context is None:
            embedders = embedders or EmbedderCache(self.settings.device)
            if encoder is None and self.settings.encode_on_workers:
                from app.remote import CeleryQueryEncoder  # the full stack (docs/deploy.md)

                encoder = CeleryQueryEncoder(self.settings)
            encoder = encoder or InlineQueryEncoder(embedders,
                                                    query_threads=self.settings.query_threads)
            context = ServiceContext(self.settings, embedders=embedders, encoder=encoder)
            self._owns_encoder = True
        else:
            self._owns_encoder = False
        self.context = context
        self.embedder_cache = context.embedders
        self.encoder: QueryEncoder = context.encoder
        self.indexing = IndexService(context)
        self.searching = SearchService(context)
        self.clustering = ClusterService(context, self.searching)
        self.catalog = CollectionService(context)
        if jobs is None and self.settings.broker_url:
            from app.remote import CeleryJobRunner  # jobs go to `facet worker`s

            jobs = CeleryJobRunner(self.settings)
        # Its callbacks without a reference to the facade (a cycle, freed only by the garbage
        # collector): the runner holds it only while a job of it is queued or running.
        runner = jobs or ThreadJobRunner(
            weakref.WeakMethod(self._run_job),
            on_abandon=functools.partial(_abandon_job, self.indexing),
            on_overdue=(functools.partial(_drop_bulk_work, self.encoder)
                        if self._owns_encoder else None))
        self._held = _Held(context, runner, self.encoder if self._owns_encoder else None)
        self._closed = False
        self._closed_by: str | None = None  # why, where not its own close() (set_shared)
        self._pid = os.getpid()  # a forked child refuses it (``_after_fork_in_child``)
        # One upload at a time per collection (``upload``): staging, and the job it starts.
        self._uploading: dict[str, threading.Lock] = {}
        self._uploading_lock = threading.Lock()
        # Closes what it holds when the facade is dropped unclosed; at exit, ``_OPEN``'s hook
        # closes it instead (with the reason a running job's message gives).
        self._finalizer = weakref.finalize(self, self._held.close)
        self._finalizer.atexit = False
        _OPEN.add(self)

    @property
    def job_runner(self) -> JobRunner:
        """Where background index jobs run (``submit_index``)."""
        return self._held.job_runner

    @job_runner.setter
    def job_runner(self, runner: JobRunner) -> None:
        self._held.job_runner = runner

    # ------------------------------------------------------------ construction

    @classmethod
    def open(cls, settings: FacetSettings | None = None, **kwargs: Any) -> Facet:
        """A facade for one-shot use (the CLI): encodes in the calling thread, queries with
        ``FACET_QUERY_THREADS`` torch threads."""
        return cls(settings, **kwargs)

    @classmethod
    def for_serving(cls, settings: FacetSettings | None = None, *,
                    embedders: EmbedderCache | None = None) -> Facet:
        """A facade for a long-running server: one model thread with dynamic batching
        (``FACET_BATCH_*``, ``FACET_QUERY_THREADS``, ``FACET_MAX_PENDING_TEXTS``), or, with
        ``FACET_ENCODE_ON_WORKERS``, the workers' queues (the full stack's ``facet serve``)."""
        settings = settings or get_settings()
        cache = embedders or EmbedderCache(settings.device)
        if settings.encode_on_workers:
            return cls(settings, embedders=cache)  # builds the CeleryQueryEncoder
        encoder = BatchingQueryEncoder(cache, threads=settings.query_threads,
                                       max_batch_texts=settings.batch_max_texts,
                                       max_wait_ms=settings.batch_wait_ms,
                                       max_pending_texts=settings.max_pending_texts,
                                       bulk_piece_ms=settings.bulk_piece_ms)
        return cls(settings, encoder=encoder, embedders=cache)

    _shared: Facet | None = None
    _shared_opened = False  # whether ``shared()`` opened ``_shared`` (not ``set_shared``)
    _shared_lock = threading.Lock()

    @classmethod
    def shared(cls) -> Facet:
        """The process-wide facade over the environment's settings, opened on first use."""
        with cls._shared_lock:
            if cls._shared is None or cls._shared._closed:
                cls._shared = cls.for_serving()
                cls._shared_opened = True
            return cls._shared

    @classmethod
    def set_shared(cls, facet: Facet | None) -> None:
        """Make ``facet`` the one ``shared()`` returns (a server or a test that built its own).

        A shared facade that ``shared()`` opened itself (the LangChain classes' default) is
        closed here, as nothing else owns it: left open it kept its collections, and ``facet``
        was refused them, with advice to call this very method. One given to ``set_shared``
        before stays open: its caller owns it."""
        if facet is not None and not isinstance(facet, Facet):  # failed later, in shared()
            raise InvalidRequestError(f"set_shared takes a Facet or None, got "
                                      f"{type(facet).__name__}", param="facet")
        with cls._shared_lock:
            previous, opened = cls._shared, cls._shared_opened
            cls._shared, cls._shared_opened = facet, False
        if previous is None or previous is facet or not opened or previous._closed:
            return
        previous._closed_by = ("Facet.set_shared replaced it as the process's shared Facet and "
                               "closed it: Facet.shared() returns the new one")
        runner = previous.job_runner
        if getattr(runner, "busy", False):
            # Its index jobs finish first (closing stopped a running one, "interrupted"); it
            # is closed when they end, in a thread of its own.
            threading.Thread(target=_close_when_idle, args=(previous,), daemon=True,
                             name="facet-close-when-idle").start()
        else:
            previous.close()

    def close(self, *, reason: str | None = None) -> None:
        """Stop background work and release the store (one process may hold it).

        Args:
            reason: what a running job's message says stopped it ("stopped (the server
                stopping) with ..."); default "its Facet closing".
        """
        if self._closed:
            return
        self._closed = True
        _OPEN.discard(self)
        self._finalizer.detach()  # closed here (a finalizer does nothing once the process exits)
        if self._pid != os.getpid():
            return  # a forked child's copy: what it holds is the parent's, still in use there
        with Facet._shared_lock:
            if Facet._shared is self:
                Facet._shared = None
        self._held.close(reason)

    def _check_open(self) -> None:
        """A closed facade refuses work: it reopened the store (holding the folder again, past
        its own close) and a queued job left an empty collection. So does a forked child's copy
        of its parent's facade (it hung: the parent's threads are not in the child)."""
        if self._pid != os.getpid():
            raise InvalidRequestError(_forked_message(self._pid))
        if self._closed:
            why = f" ({self._closed_by})" if self._closed_by else ""
            raise InvalidRequestError(f"this Facet is closed{why}; open another one (Facet.open(), "
                                      "Facet.for_serving())")

    def __enter__(self) -> Facet:
        # A closed facade refuses the ``with`` itself, not its first call inside it.
        self._check_open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ embed

    @_domain_errors
    def embedder(self, name: str | None = None) -> Embedder:
        """The loaded embedder ``name`` (default: the settings' default embedder).

        Raises:
            UnknownModelError: not a registered name nor a checkpoint directory.
        """
        with _naming_model(embedder=name):
            return self.embedder_cache.get(name or self.settings.default_embedder)

    def _check_embed(self, texts: Sequence[str], role: Role | str,
                     instruction: str | None = None) -> Role:
        # Named as its field (it was refused with a null param); of another type, refused before
        # a kept query vector is looked up by it (5 was an AttributeError there).
        check_str(instruction, "instruction", optional=True)
        if isinstance(instruction, str):
            check_text_encodable(instruction, "the instruction", param="instruction")
        if isinstance(texts, str):
            # param: the field as /v1/embeddings names the texts.
            raise InvalidRequestError("texts must be a list of strings, not one string; wrap it: "
                                      "[text]", param="input")
        if isinstance(texts, (bytes, bytearray, memoryview)):  # "texts[0] is int (97)"
            raise InvalidRequestError(f"texts must be a list of strings, got {type(texts).__name__}: "
                                      "decode them first (data.decode('utf-8')) and wrap the text: "
                                      "[text]", param="input")
        if not isinstance(texts, Sequence):  # None, a number, a generator: a TypeError before
            hint = " (an array: pass .tolist())" if hasattr(texts, "tolist") else ""
            raise InvalidRequestError(f"texts must be a list of strings, got "
                                      f"{type(texts).__name__}{hint}", param="input")
        limit = self.settings.max_texts_per_call
        if len(texts) > limit:
            raise TooLargeError(f"{len(texts)} texts in one call, more than the limit of {limit} "
                                "(FACET_MAX_TEXTS_PER_CALL); split them into several calls",
                                param="input")
        check_texts(texts)
        return _role(role)

    @_domain_errors
    def embed(self, texts: Sequence[str], *, embedder: str | None = None,
              role: Role | str = Role.DOCUMENT, instruction: str | None = None,
              dimensions: int | None = None) -> Embeddings:
        """Embed texts (``role`` picks the prompt; an instruction conditions the embedding).
        ``dimensions``: the width the caller expects (OpenAI's field), checked against the
        embedder's before anything is encoded; None takes the embedder's.

        Raises:
            InvalidRequestError: texts not a list of strings, an empty (or blank) text, a
                role that is not exactly "query" or "document" (``param`` ``role``), an
                instruction that is not a str or None (``param`` ``instruction``), a
                ``dimensions`` other than the embedder's (``param`` ``dimensions``).
            TooLargeError: more than ``FACET_MAX_TEXTS_PER_CALL`` texts.
            UnknownModelError: unknown embedder.
            BusyError: the encoder's queue is full (a server under load).
        """
        role_ = self._check_embed(texts, role, instruction)
        check_str(embedder, "embedder", optional=True)  # 5 was "unknown embedder", listing all
        check_spec(embedder, "embedder", default="the default embedder")  # "" was the default
        name = embedder or self.settings.default_embedder
        with _naming_model(embedder=embedder):
            model = self.embedder_cache.get(name)
            _check_dimensions(model, dimensions)
            # A few queries as a search reads them: kept, and reused when asked again.
            vectors = (self.searching.query_vectors_of(name, texts, instruction) if kept_embed(role_, texts)
                       else self.encoder.encode(texts, embedder=name, role=role_, instruction=instruction))
        return _embeddings(model, name, role_, instruction, vectors, self.count_tokens(model, texts),
                           self.count_cut(model, texts, role_, instruction))

    async def aembed(self, texts: Sequence[str], *, embedder: str | None = None,
                     role: Role | str = Role.DOCUMENT, instruction: str | None = None,
                     dimensions: int | None = None) -> Embeddings:
        """``embed`` for async callers: waits on the encoder's future without holding a thread
        (a model that is not loaded yet is loaded in a worker thread); an encoder that works in
        the calling thread (``Facet.open()``'s) encodes in a worker thread, so the event loop
        goes on meanwhile (it stalled for the whole encode: 16.6 s for 1,000 texts). Same errors
        as ``embed``."""
        self._check_open()
        with domain_errors():
            role_ = self._check_embed(texts, role, instruction)
            check_str(embedder, "embedder", optional=True)
            check_spec(embedder, "embedder", default="the default embedder")
            name = embedder or self.settings.default_embedder
            loaded = self.embedder_cache.peek(name)
            with _naming_model(embedder=embedder):  # as ``embed`` names it
                model = loaded if loaded is not None else await asyncio.to_thread(
                    self.embedder_cache.get, name)
            _check_dimensions(model, dimensions)
            # Reused only where every one is kept: the others are encoded without holding a thread.
            keeps = kept_embed(role_, texts)
            kept = self.searching.kept_query_vectors(name, texts, instruction) if keeps else None
            if kept is not None:  # every one kept from a search or embed before: as ``embed``
                vectors = kept
            elif isinstance(self.encoder, InlineQueryEncoder):
                vectors = await asyncio.to_thread(self.encoder.encode, texts, embedder=name,
                                                  role=role_, instruction=instruction)
            else:
                vectors = await asyncio.wrap_future(self.encoder.submit(
                    texts, embedder=name, role=role_, instruction=instruction))
            if kept is None and keeps:
                self.searching.keep_query_vectors(name, texts, instruction, vectors)
            # Counting is a tokenizer pass: cheap for a few texts, a thread's work for many.
            if len(texts) <= 64:
                tokens, cut = (self.count_tokens(model, texts),
                               self.count_cut(model, texts, role_, instruction))
            else:
                tokens, cut = await asyncio.to_thread(
                    lambda: (self.count_tokens(model, texts),
                             self.count_cut(model, texts, role_, instruction)))
        return _embeddings(model, name, role_, instruction, vectors, tokens, cut)

    @staticmethod
    def count_cut(model: Embedder, texts: Sequence[str], role: Role | str = Role.DOCUMENT,
                  instruction: str | None = None) -> int:
        """How many of ``texts`` are longer than ``model`` reads under ``role`` and
        ``instruction`` (its ``max_length`` less the prompt's and the instruction's tokens):
        only their start is in their vectors. ``/v1/embeddings`` says it in a header (only the
        server's log said it), as its encoder reads them (``texts_cut``). 0 for a model that
        does not tell (a plugin's)."""
        return cut_count(model, texts, role, instruction)

    @staticmethod
    def count_tokens(model: Embedder, texts: Sequence[str]) -> int:
        """Tokens of ``texts`` (each counted up to the model's ``max_length``; an upper bound
        where a prompt template's own tokens take part of that budget); words when it has no
        tokenizer. The usage figure of ``/v1/embeddings``. Tokenises without truncation or
        padding, so it never changes the shared tokenizer's settings while the model thread
        uses it. Each text is read up to as many characters a token of the cap as the embedders
        read (``PromptTokenizer.chars_per_token``): a 15 MB text was tokenised whole, ~50 s on the server's
        event loop, every other request waiting."""
        tokenizer = model.tokenizer if isinstance(model, HasTokenizer) else None
        if tokenizer is None or not texts:
            return sum(len(t.split()) for t in texts)
        cap = model.max_length if isinstance(model, HasTokenizer) else 10**9
        # The model's own reader where it has one: its bound (SmolLM2's tokens of up to 81
        # characters: a text of them was under-counted at 32), and how it reads a text longer
        # than that (a 9,000-character hash then a sentence counted 1 token, minilm read 22).
        from embedders.base import PromptTokenizer  # (torch: loaded with the model already)

        reader = getattr(model, "_tokenize", None)
        if not isinstance(reader, PromptTokenizer):
            reader = None
        chars = cap * (reader.chars_per_token if reader is not None else CHARS_PER_TOKEN_BOUND)
        short = [t for t in texts if reader is None or len(t) <= chars]
        ids = tokenizer([t[:chars] for t in short], add_special_tokens=False,
                        return_attention_mask=False, return_token_type_ids=False,
                        verbose=False)["input_ids"] if short else []
        long = sum(reader.text_tokens(t, cap) for t in texts if len(t) > chars) if reader is not None else 0
        return int(sum(min(len(row), cap) for row in ids)) + long

    # ------------------------------------------------------------------ index

    @_domain_errors
    def index(self, source: Path | str, collection: str, options: IndexOptions | None = None,
              progress: Callable[[Progress], None] | None = None) -> IndexReport:
        """Index ``source`` into ``collection`` now, in this thread; returns the job's report.

        A new collection left with nothing indexed (an empty folder, every document failed) is
        removed again with its job: the report says so (``collection_removed``, ``message``).

        Raises:
            NotFoundError: the source does not exist.
            InvalidRequestError: bad collection name, chunk settings, embedder mismatch.
            ConflictError: another process is writing the collection.
            DataError: a single file of an unsupported type.
        """
        if options is not None:
            _expect(options, IndexOptions, "options", "IndexOptions(embedder='minilm')")
        self._check_not_data_dir(source, collection)
        try:
            with _naming_model(embedder=getattr(options, "embedder", None)):
                return self.indexing.index(source, collection, options, progress)
        finally:
            self.searching.forget(collection)

    @_domain_errors
    def submit_index(self, source: Path | str, collection: str,
                     options: IndexOptions | None = None, *,
                     on_queued: Callable[[int], None] | None = None) -> JobInfo:
        """Check the request, record a ``queued`` job and run it in the background.

        Args:
            on_queued: called with the job's id once its ``queued`` row is recorded, before the
                runner takes it (`facet serve` logs "job N queued by CLIENT" there: logged
                after this returned, it came after a fast job's own "job N started" line). An
                exception it raises is logged and the job goes on.

        Returns:
            The job as recorded now (poll ``job(id)`` for progress).

        Raises:
            As ``index``, for everything that can be checked before the work starts.
        """
        if options is not None:
            _expect(options, IndexOptions, "options", "IndexOptions(embedder='minilm')")
        if on_queued is not None and not callable(on_queued):
            raise InvalidRequestError(f"on_queued must be a callable or None, got "
                                      f"{type(on_queued).__name__}")
        self._check_not_data_dir(source, collection)
        check = getattr(self.job_runner, "check", None)
        if callable(check):  # e.g. the broker is up: say so before recording a job
            check()
        runner = getattr(self.job_runner, "runner_name", "thread")
        with _naming_model(embedder=getattr(options, "embedder", None)):
            prepared = self.indexing.prepare(source, collection, options, runner=runner)
        # The job is queued for the workers now: a server that has read the collection lets it
        # go (an embedded store's folder opens in one process at a time).
        self._let_workers_write([collection])
        if on_queued is not None:
            try:
                on_queued(prepared.job_id)
            except Exception:  # (a caller's note: the job is recorded, and runs all the same)
                logger.warning("job %d: its on_queued callback failed", prepared.job_id,
                               exc_info=True)
        try:
            self.job_runner.submit(prepared)
        except Exception as e:
            self.indexing.fail(prepared.job_id, f"could not start: {e}")
            if isinstance(e, FacetError):
                raise reworded(e, f"index job {prepared.job_id} could not be started: {e}") from e
            raise FacetError(f"index job {prepared.job_id} could not be started: {e}") from e
        if getattr(self.job_runner, "runs_elsewhere", False):
            self.indexing.handed_off(prepared.job_id)
        return self.catalog.job(prepared.job_id)

    def _check_not_data_dir(self, source: object, collection: object) -> None:
        """Refuse a ``source`` that is this Facet's own data folder (``FACET_DATA_DIR``) or lies
        inside it, as the real path leads (``app.roots``): ``POST /jobs`` walked it and failed
        on the store's files and facet.db (the UI refused it). The collection's own upload
        folder (``upload_folder``, where the UI stages its uploads) is the one place inside it
        that is indexed. A folder that holds the data folder is indexed without it
        (``discover_files``). A source that is no path, or empty, is left to ``prepare``.

        Raises:
            InvalidRequestError: naming the data folder (``param="source"``).
        """
        path = os.fspath(source) if isinstance(source, str | os.PathLike) else None
        if not isinstance(path, str) or not path.strip():
            return
        data_dir = self.settings.data_dir
        try:
            uploads = [self.upload_folder(collection)] if isinstance(collection, str) else []
        except InvalidRequestError:  # (a bad name: refused by ``prepare`` in its own words)
            uploads = []
        if root_holding(path, uploads) is None and root_holding(path, [data_dir]) is not None:
            raise InvalidRequestError(
                f"{source} is Facet's own data folder ({data_dir}, FACET_DATA_DIR) or lies "
                "inside it; it cannot be indexed: pick another folder", param="source")

    def _run_job(self, job: PreparedJob) -> IndexReport:
        try:
            return self.indexing.run(job)
        finally:
            self.searching.forget(job.collection)

    def _abandon_job(self, job: PreparedJob) -> None:
        _abandon_job(self.indexing, job)

    # ----------------------------------------------------------- search/cluster

    @_domain_errors
    def search(self, request: SearchRequest) -> SearchResponse:
        """Search a collection (query + instruction -> vector search -> optional rerank).

        Raises:
            InvalidRequestError, NotFoundError: see ``SearchService.search``.
        """
        _expect(request, SearchRequest, "request", "SearchRequest(query, collection)")
        try:
            with _naming_model(embedder=request.embedder, rerank=request.rerank):
                return self.searching.search(request)
        finally:
            self._let_workers_write([request.collection])

    @_domain_errors
    def cluster(self, request: ClusterRequest,
                progress: ClusterProgress | None = None) -> ClusterResponse:
        """Cluster texts, a collection or search results under an instruction.

        Args:
            request: what to cluster and how.
            progress: called with (fraction done, stage) as the work goes (a UI's bar).

        Raises:
            InvalidRequestError, TooLargeError, NotFoundError: see ``ClusterService.cluster``.
        """
        _expect(request, ClusterRequest, "request", "ClusterRequest(instruction, texts=[...])")
        nested = request.search if isinstance(request.search, SearchRequest) else None
        try:
            with _naming_model(**{"embedder": request.embedder, "explainer": request.explainer,
                                  "search.embedder": nested.embedder if nested else None,
                                  "search.rerank": nested.rerank if nested else None}):
                return self.clustering.cluster(request, progress)
        finally:
            # Only names: a request refused for a wrong ``search`` (not a SearchRequest) had its
            # InvalidRequestError replaced here by an AttributeError.
            search = request.search if isinstance(request.search, SearchRequest) else None
            self._let_workers_write([n for n in (request.collection, search and search.collection)
                                     if isinstance(n, str) and n])

    @_domain_errors
    def cluster_embedder(self, request: ClusterRequest) -> str:
        """The embedder ``cluster(request)`` encodes with: the one it names, else a clustered
        collection's (or searched collection's) own, as a search naming none picks it, else
        ``FACET_DEFAULT_EMBEDDER`` (an edge's heads-up names the model before it loads)."""
        _expect(request, ClusterRequest, "request", "ClusterRequest(instruction, texts=[...])")
        return self.clustering.embedder_spec(request)

    @_domain_errors
    def check_cluster_collection(self, collection: str) -> None:
        """What ``cluster`` checks first of a collection it clusters, read without a model: that
        it exists and has vectors in the store in use (an edge refuses a wrong name before
        waiting for a turn).

        Raises:
            InvalidRequestError: a name that is none (``param`` ``collection``).
            NotFoundError: an unknown collection, or one with nothing written yet.
            ConflictError: one indexed into another vector store, or held by another process.
            UnavailableError: the Qdrant server out of reach.
        """
        check_str(collection, "collection")
        self.clustering._check_collection(collection)

    def _let_workers_write(self, collections: Sequence[str]) -> None:
        """With jobs on the workers and an embedded store, let go of each collection a worker
        job waits for or writes: a read reopened its folder (held until the next job
        submission), and the worker's plan or chunks were refused until they gave up."""
        if getattr(self.job_runner, "runner_name", None) != "celery" or \
                self.context.store.backend == "server" or not collections:
            return
        with self.context.sessions() as session:
            busy = set(md.collections_with_worker_jobs(session, collections))
        for name in busy:
            self.context.store.release(name)

    # -------------------------------------------------------- collections/jobs

    @_domain_errors
    def collections(self) -> list[CollectionInfo]:
        """Every collection with its counts, embedders and chunking."""
        infos = self.catalog.list_all()
        self._let_workers_write([i.name for i in infos])
        return infos

    @_domain_errors
    def collection(self, name: str) -> CollectionInfo:
        """One collection. Raises ``NotFoundError`` for an unknown name, ``InvalidRequestError``
        for a name that is not a str."""
        check_str(name, "name", param="collection")  # 5, None, b"x": TypeErrors before
        # param None, as its NotFoundError: GET /collections/{name}'s path names it.
        check_collection(name, param=None)
        try:
            return self.catalog.get(name)
        finally:
            self._let_workers_write([name])

    @_domain_errors
    def orphan_collection(self, name: str) -> CollectionInfo | None:
        """Vectors the store holds under ``name`` that no collection of this metadata database
        owns (``delete_collection`` removes them); None when there are none."""
        check_collection(name)
        return self.catalog.orphan(name)

    @_domain_errors
    def stray_collections(self) -> list[CollectionInfo]:
        """Every ``orphan_collection`` of the embedded store (none for a Qdrant server, which
        may hold other applications' collections)."""
        return self.catalog.strays()

    @_domain_errors
    def delete_collection(self, name: str) -> CollectionInfo:
        """Delete a collection's points, metadata and uploaded files; returns what it held."""
        check_str(name, "name", param="collection")  # ["a"] reached SQLite's parameter binding
        check_collection(name)
        try:
            info = self.catalog.delete(name)
        finally:
            self.searching.forget(name)
        # An upload job indexes its whole folder: files left there came back into a new
        # collection of the same name. Its staging leftovers go too (an older Facet's
        # uploads/.previous/NAME, a crash's .previous-NAME-*: they stayed for good).
        remove_collection_uploads(self.upload_folder(name))
        return info

    @_domain_errors
    def documents(self, collection: str, limit: int = 20, offset: int = 0,
                  status: str | None = None, prefix: str | None = None,
                  after: str | None = None) -> DocumentList:
        """A page of ``collection``'s documents in key order, each a ``DocumentInfo`` (its
        ``key``, as searches return it in ``doc_id`` and as ``remove_documents`` takes it;
        ``source``, ``title``, ``status``, ``chunks``, ``updated_at``, ``metadata``,
        ``error``): the ``limit`` after the first ``offset``; ``not_shown`` counts those
        matching past the page, so pages of one ``limit`` read every document once (while none
        is added or removed). ``status`` (indexed, error, pending) and ``prefix`` (how the key
        or the ``source`` starts: a folder's path, a csv/jsonl file's path, whose records are
        keyed by their ids, a record id's start; case kept, no wildcards) narrow them.
        ``after`` (a key): only the documents whose key sorts after it, ``offset`` and
        ``not_shown`` counted among those; the next page is ``after`` the last key of this
        one, which a document indexed or removed while paging does not shift (an offset page
        then repeats or skips one). Read by SQL alone (a LIMIT, an OFFSET and one COUNT): the
        vector store is not opened.

        Raises:
            NotFoundError: an unknown collection (``param`` ``collection``); a name that is
                none (empty, ``café``) is an ``InvalidRequestError`` (``check_collection``).
            InvalidRequestError: ``limit`` out of 1..1000, ``offset`` below 0, ``status`` not
                one of indexed, error, pending (``param`` names which); a ``collection``,
                ``prefix`` or ``after`` that is not a str, a ``limit`` or ``offset`` that is not
                an int.
        """
        check_str(collection, "collection")
        check_collection(collection)
        check_str(prefix, "prefix", optional=True, param="prefix")
        check_str(status, "status", optional=True, param="status")
        check_str(after, "after", optional=True, param="after")
        limit = check_int(limit, "limit", param="limit")
        offset = check_int(offset, "offset", param="offset")
        return self.catalog.documents(collection, limit, offset, status, prefix, after)

    @_domain_errors
    def remove_documents(self, collection: str, keys: Sequence[str | os.PathLike[str]], *,
                         base: Path | str | None = None,
                         missing_ok: bool = False) -> RemoveReport:
        """Remove documents from a collection by their keys (as ``search`` and ``job`` show
        them: a file's path, a record's id): their vectors, chunks and metadata, recorded as a
        job (``jobs``: its keys are the job's ``removed_keys``, not errors). Every key must name
        a document of the collection, or nothing is removed (a record file whose records are
        still indexed is refused as such). The files are not touched, except an upload staged
        in the collection's upload folder (``upload_folder``, which every upload job indexes
        whole): it is deleted with its document (``RemovedDocument.source_deleted``). A
        document whose file is still there comes back with the next index of it
        (``RemovedDocument.source_exists``). A key may be given as a path (``os.PathLike``, a
        ``pathlib.Path``): its ``os.fspath``.

        Args:
            base: the folder a relative path given as a key is read from (a command line's
                working folder); None: keys are matched as given.
            missing_ok: keys the collection does not hold (removed already, or never there:
                the rerun of a removal that stopped part-way) are skipped instead of refused,
                as `facet delete C --document KEY --missing-ok` skips them, and listed in the
                report's ``skipped_keys`` (as given); the others are removed. Where none is
                held, nothing is removed and no job is made (``job_id`` 0, ``removed`` empty).
                A jsonl/csv file's path whose records are still indexed is refused all the same.

        Raises:
            NotFoundError: an unknown collection (``param`` ``collection``; a name that is
                none is an ``InvalidRequestError``), or keys that name
                no document of it (``param`` ``key``; not with ``missing_ok``).
            InvalidRequestError, TooLargeError: no keys, keys not a list of str (or paths),
                too many; ``missing_ok`` not a bool.
            ConflictError: a job is writing the collection, or its vectors are in another store.
        """
        if base is not None and not isinstance(base, str | os.PathLike):
            raise InvalidRequestError(f"base must be a str or a path, got {type(base).__name__}")
        check_collection(collection)
        try:
            return self.indexing.remove_documents(collection, keys,
                                                  base=None if base is None else Path(base),
                                                  missing_ok=missing_ok)
        finally:
            if isinstance(collection, str):
                self.searching.forget(collection)

    @_domain_errors
    def check_removal(self, collection: str, keys: Sequence[str | os.PathLike[str]], *,
                      base: Path | str | None = None) -> list[str]:
        """What ``remove_documents`` would remove, checked and nothing removed (to ask before
        removing): the document keys ``keys`` name, relative paths read from ``base``.

        Raises:
            as ``remove_documents`` does before it removes anything.
        """
        if base is not None and not isinstance(base, str | os.PathLike):
            raise InvalidRequestError(f"base must be a str or a path, got {type(base).__name__}")
        check_collection(collection)
        return self.indexing.check_removal(collection, keys,
                                           base=None if base is None else Path(base))

    @_domain_errors
    def removal_parts(self, collection: str, keys: Sequence[str | os.PathLike[str]], *,
                      base: Path | str | None = None,
                      skipped: list[str] | None = None) -> list[list[str]]:
        """``check_removal`` of any number of keys, every one checked at once (nothing
        removed), split into parts of at most ``MAX_REMOVED_KEYS`` (one ``remove_documents``
        each, run in order): `facet delete C --documents-from FILE` of 20,000 keys.
        ``skipped``: a list takes the keys the collection does not hold (removed already, or
        never there) instead of their refusal (``--missing-ok``); no parts if none is held.

        Raises:
            as ``check_removal`` does, but for too many keys.
        """
        if base is not None and not isinstance(base, str | os.PathLike):
            raise InvalidRequestError(f"base must be a str or a path, got {type(base).__name__}")
        if skipped is not None and not isinstance(skipped, list):
            raise InvalidRequestError(f"skipped must be a list or None, got "
                                      f"{type(skipped).__name__}")
        check_collection(collection)
        return self.indexing.removal_parts(collection, keys,
                                           base=None if base is None else Path(base),
                                           skipped=skipped)

    @_domain_errors
    def upload_folder(self, collection: str) -> Path:
        """Where files uploaded into ``collection`` are kept (``DATA_DIR/uploads/NAME``), each
        upload job indexing the folder; deleting the collection removes it, and removing a
        document staged there (``remove_documents``) deletes its file.

        Raises:
            InvalidRequestError: not a valid collection name (checked before any file is put
                there).
        """
        from indexer.store import validate_name

        check_collection(collection)  # (named as its field, as ``index`` names it)
        return upload_folder_path(self.settings.data_dir, validate_name(collection))

    @_domain_errors
    def upload(self, collection: str, files: Sequence[str | os.PathLike[str]], *,
               embedder: str | None = None, max_mb: float | None = None,
               limit: str | None = None,
               on_queued: Callable[[int], None] | None = None) -> UploadResult:
        """Index uploaded ``files`` into ``collection`` in the background: each is checked (a
        type the indexer reads, at most ``max_mb``, default ``FACET_UI_MAX_UPLOAD_MB``;
        ``limit`` names the setting in the refusal, default that setting's name, or "max_mb"
        where ``max_mb`` is given), copied into the collection's upload folder
        (``upload_folder``) under its own name (``app.uploads.stage_uploads``: the same name
        again updates its document, two of one name in one upload are numbered, the same file
        twice saved once), and a job indexes the folder, as ``submit_index`` of it would
        (``on_queued`` as there). Files the collection's last finished upload job could not
        index at all are removed from the folder first (``unindexable_uploads``). A job refused
        (the collection busy, an unknown embedder) puts the folder back as it was. The files
        given are left where they are.

        Returns:
            ``UploadResult``: the job, the uploads refused (with why), those saved under another
            name, the earlier failures removed (not those of a name uploaded again now), the
            paths the files were saved at.

        Raises:
            DataError: no file given can be indexed ("Nothing to index: " and why, each).
            InvalidRequestError: not a valid collection name; no file given.
            As ``submit_index``, for the job.
        """
        if isinstance(files, str | os.PathLike) or not isinstance(files, Sequence):
            raise InvalidRequestError(f"files must be a list of paths, got {type(files).__name__}")
        if not files:
            raise InvalidRequestError("Upload at least one file first "
                                      f"({', '.join(self.supported_suffixes())}).")
        mb = self.settings.ui_max_upload_mb if max_mb is None else max_mb
        limit = limit or ("FACET_UI_MAX_UPLOAD_MB" if max_mb is None else "max_mb")
        checked = check_uploads([Path(os.fspath(f)) for f in files], max_mb=mb,
                                suffixes=self.supported_suffixes(), limit=limit)
        if not checked.accepted:
            raise DataError("Nothing to index: " + "; ".join(checked.refused))
        folder = self.upload_folder(collection)
        # Room on the data folder's disk before anything is copied there (the job's own check
        # came after the copies, and a full disk failed them half-way).
        self.indexing.check_room(started=False)
        with self._uploading_lock:
            lock = self._uploading.setdefault(folder.name, threading.Lock())
        # One at a time per collection: two at once each put aside and put back the other's
        # versions of a shared name, and undid each other's refused jobs.
        with lock:
            with self.context.sessions() as session:
                # Before the folder is touched: on a disk that ignores case, 'Notes' opens the
                # folder of 'notes', which was then removed below as a leftover (its documents
                # gone with the next upload job: the verification round of the fourth session of
                # 2026-12-02).
                if md.get_collection(session, collection) is None:
                    refuse_case_twin(session, collection)
            if folder.exists() and not self._collection_exists(collection):
                # A collection's folder without its collection: left by a delete killed after
                # its commit (the folder goes after it), or by a first upload killed before its
                # job was accepted. An upload job indexes its whole folder: a deleted
                # collection's documents came back into the new one without a word.
                remove_collection_uploads(folder)
            new = not folder.exists()
            # The notes of upload jobs that started or ended: nothing to take back.
            forget_staged(folder.parent, lambda job_id: self._job_state(job_id) == "queued")
            removed = self._earlier_upload_failures(collection, folder)
            try:
                staged = stage_uploads(checked.accepted, folder)
                try:
                    job = self.submit_index(folder, collection, IndexOptions(embedder=embedder),
                                            on_queued=on_queued)
                except BaseException:
                    staged.undo()  # the job was refused: the folder as it was
                    raise
            except BaseException:
                if new:  # (no empty upload folder of a collection never made)
                    with contextlib.suppress(OSError):
                        folder.rmdir()
                raise
            # Before the versions it replaced go: a cancel before the job starts takes back
            # what it added (``cancel_job``). The job is queued: a note that cannot be written
            # (a disk full since) only leaves that cancel unable to take them back.
            try:
                note_staged(folder, job.id, staged)
            except OSError as e:
                logger.warning("job %d: could not note its uploaded files (%s): a cancel before "
                               "it starts leaves them in the uploads", job.id, e)
            staged.keep()
        # A name uploaded again now is not "removed": its new file is there, indexed.
        names = {copy.name for copy in staged.copies}
        return UploadResult(job, checked.refused, staged.renamed,
                            [n for n in removed if n not in names],
                            [str(copy.resolve()) for copy in staged.copies])

    def _collection_exists(self, name: str) -> bool:
        from indexer import metadata as md

        with self.context.sessions() as session:
            return md.get_collection(session, name) is not None

    @_domain_errors
    def unindexable_uploads(self, job: JobInfo | int, *, remove: bool = True) -> list[str]:
        """For a finished upload job (one that indexed its collection's ``upload_folder``): the
        names of its uploads that cannot be indexed at all (binary, empty, malformed JSON...),
        removed from the folder (``remove=False``: nothing is parsed or removed, only those no
        longer there are named: a page polling the job asks again). Left there, every later upload
        job listed their errors again and the collection counted them as failed for good. A
        job of any other source changes nothing (``[]``); so does a bad record of a ``.jsonl``
        (its file and other records stay) or a file replaced since by one that reads."""
        if isinstance(job, int):
            job = self.job(job)
        try:
            folder = self.upload_folder(job.collection).resolve()
        except FacetError:
            return []
        if Path(job.source) != folder:
            return []
        if job.errors_total > len(job.errors):  # the first ones only: this needs every one
            job = self.job(job.id, errors=None)
        errors = [(e["document"], e["message"]) for e in job.errors if e["kind"] == "error"]
        return drop_unindexable(folder, [d for d, _ in errors],
                                max_bytes=int(self.settings.max_document_mb * 2**20),
                                remove=remove, messages=errors)

    def _job_state(self, job_id: int) -> str | None:
        try:
            return self.catalog.job(job_id, 0).state
        except NotFoundError:
            return None

    def _take_back_uploads(self, job: JobInfo) -> None:
        """An upload job cancelled before it started: the files it added to its collection's
        upload folder removed (``app.uploads.take_back``), and its message says which. They
        stayed, and the next upload's job, which indexes the whole folder, indexed them."""
        try:
            folder = self.upload_folder(job.collection).resolve()
        except FacetError:
            return
        if Path(job.source) != folder:
            return
        gone = take_back(folder, job.id)
        if gone:
            self.indexing.note_message(job.id, f"{job.message}; {TAKEN_BACK}: {', '.join(gone)}")

    def _earlier_upload_failures(self, collection: str, folder: Path) -> list[str]:
        """Before an upload job: what the collection's last finished upload job could not
        index, removed (a page that showed that job may have been closed first; an API client
        never saw it); the names of those removed now (not of those a page removed already)."""
        try:
            jobs = self.jobs(collection, limit=20)
        except NotFoundError:
            return []  # a new collection
        source = str(folder.resolve())
        last = next((j for j in jobs if j.source == source), None)
        if last is None or last.state not in ("completed", "failed", "interrupted"):
            return []
        there = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
        # The listing's row counts its errors (``errors_total``): ``unindexable_uploads`` reads
        # them all where it has any.
        return [n for n in self.unindexable_uploads(last) if n in there]

    @_domain_errors
    def jobs(self, collection: str | None = None, limit: int = 20,
             offset: int = 0, before: int | None = None) -> list[JobInfo]:
        """Recent index jobs, newest first (of one collection when named): the ``limit`` after
        the newest ``offset`` (``CollectionService.jobs``: the first page, ``offset`` 0, also
        lists every older job that has not ended). ``before`` (a job id): only the jobs below
        it, ``offset`` counted among those: the next page is ``before`` this page's last id
        (of its newest ``limit``), which jobs sent or deleted meanwhile do not shift.

        Raises:
            InvalidRequestError: ``limit`` out of 1..1000, ``offset`` below 0, ``before`` below
                1 (``param`` names which); a ``collection`` that is not a str or None, or no
                name (empty or blank, or one the store refuses: ``check_collection``), a
                ``limit`` or ``before`` that is not an int.
        """
        check_str(collection, "collection", optional=True)
        check_collection(collection, optional=True)
        limit = check_int(limit, "limit")  # "5", None, 2.5: TypeErrors before
        if before is not None:
            before = check_int(before, "before", param="before")
        return self.catalog.jobs(collection, limit, plain_number(offset), before)

    @_domain_errors
    def job(self, job_id: int, collection: str | None = None,
            errors: int | None = DEFAULT_JOB_ERRORS, errors_offset: int = 0) -> JobInfo:
        """One job with ``errors`` of its per-document errors (None: all) after the first
        ``errors_offset`` (in the order written), and their total (``errors_total``); a
        removal's keys (``removed_keys``, no errors) are paged the same way.

        Raises:
            NotFoundError: an unknown id.
            InvalidRequestError: ``collection`` given and the job is of another one (the
                CLI's ``-c`` and the API's ``?collection=`` were ignored: another collection's
                job was shown), or is no name (``check_collection``: checked before the id);
                ``errors`` out of 0..``MAX_JOB_ERRORS``; ``errors_offset`` below 0.
        """
        check_collection(collection, optional=True)
        # (numpy integers as ints: a notebook's np.int64 id, from a DataFrame, was refused)
        return self.catalog.job(plain_number(job_id), plain_number(errors), collection,
                                errors_offset=plain_number(errors_offset))

    @_domain_errors
    def cancel_job(self, job_id: int, collection: str | None = None) -> JobInfo:
        """Cancel an index job; the job as it is then.

        A ``queued`` job is ``cancelled`` at once (it never starts). A ``running`` one is asked
        to stop (``cancel_requested``): its runner (a thread, a detached process, the workers'
        chunk tasks) ends it ``cancelled`` at its next batch boundary; what went in stays
        searchable, and the next job of the same source resumes it. An upload's job (``upload``)
        cancelled while queued takes back the files it added to the upload folder, its message
        naming them.

        Raises:
            NotFoundError: an unknown id.
            InvalidRequestError: the job has ended (completed, failed, interrupted, cancelled),
                or ``collection`` given and the job is of another one.
        """
        check_collection(collection, optional=True)
        job_id = plain_number(job_id)
        job = self.catalog.job(job_id, 0, collection)
        state = job.state
        if state in LIVE_STATES and self.indexing.cancel(job_id):
            after = self.catalog.job(job_id, collection=collection)
            if state == "queued" and after.state == "cancelled":
                self._take_back_uploads(after)
                after = self.catalog.job(job_id, collection=collection)
            return after
        if state in LIVE_STATES:  # it ended since its state was read
            state = self.catalog.job(job_id, 0, collection).state
        raise InvalidRequestError(f"job {job_id} is {state}; only a queued or running job "
                                  "can be cancelled")

    # ------------------------------------------------------------------- info

    @staticmethod
    def supported_suffixes() -> tuple[str, ...]:
        """File types an index source may hold (lower-case suffixes with the dot)."""
        from indexer.parsing import SUPPORTED_SUFFIXES

        return tuple(sorted(SUPPORTED_SUFFIXES))

    @_domain_errors
    def estimate_documents(self, source: Path | str) -> int:
        """Documents indexing ``source`` will see (records for jsonl/csv): a progress bar's total.

        Raises:
            NotFoundError: the source does not exist.
            DataError: a single file of an unsupported type, as ``submit_index`` refuses it
                (it was an ``InvalidRequestError`` here, a 400 beside the job's 422).
        """
        from indexer.errors import UnsupportedSourceError
        from indexer.parsing import discover

        try:
            return estimate_documents(discover(Path(source), (self.settings.data_dir,)))
        except UnsupportedSourceError as e:
            raise DataError(str(e), param="source") from e

    def allowed_models(self) -> list[str]:
        """Embedder names a request from outside may name (see ``allowed_model_names``)."""
        return allowed_model_names(self.settings)

    def serves(self, collection: str | None = None) -> Callable[[str], bool]:
        """Whether an edge (the HTTP API, the UI) may load a name for a request on ``collection``:
        an allowed one (``allowed_models``) or a spec the collection recorded for an allowed
        vector (``recorded_specs``). A note offering names (``served_note``) is told it. Read on
        the first question only: most searches' notes ask none, and the collection's read was a
        query on every served search."""
        known: list[tuple[list[str], list[str]]] = []

        def served(name: str) -> bool:
            if not known:
                allowed = self.allowed_models()
                known.append((allowed, self.recorded_specs(collection, allowed)))
            allowed, recorded = known[0]
            return name in allowed or name in recorded
        return served

    def recorded_specs(self, collection: str | None, allowed: Sequence[str]) -> list[str]:
        """The specs ``collection`` recorded for its vectors whose names are in ``allowed``
        (``minilm[instruction_weight=1]`` for the vector ``minilm``): naming the vector loads
        that spec already, so an edge may serve the spec by name too (the HTTP API and the UI
        both do). Empty for no collection, or one that cannot be read (a request naming it
        says so itself)."""
        name = (collection or "").strip()
        if not name:
            return []
        try:
            sources = self.collection(name).sources
        except FacetError:
            return []
        return [spec for vector, spec in sources.items() if vector in allowed]

    def readiness(self, *, timeout_s: float = READY_TIMEOUT_S) -> Readiness:
        """Whether this process can serve requests now (a readiness probe: ``GET /ready``),
        unlike liveness: the metadata database answers ``SELECT 1`` (and, SQLite, its data
        folder can be written), the vector store answers (an embedded store's folder can be
        written: reads take a lock file there; a server takes a connection), the broker answers
        a ping where ``FACET_BROKER_URL`` is set (``app.remote.check_broker``, as an index job's
        submission asks it), and, where ``FACET_ENCODE_ON_WORKERS`` sends queries to the workers,
        a worker consumes the ``query`` queue. The checks run side by side, each given
        ``timeout_s``; no model is loaded, nothing is written but a probe file, removed at once.
        Never raises: what failed is in ``checks``."""
        if self._closed or self._pid != os.getpid():
            why = "this Facet is closed" if self._pid == os.getpid() else _forked_message(self._pid)
            return Readiness(False, dict.fromkeys(("database", "store", "broker", "query_workers"), why))
        checks: dict[str, Callable[[], None]] = {
            "database": self._database_ready,
            "store": functools.partial(self.context.store.check_ready, timeout_s=timeout_s)}
        if self.settings.broker_url:
            from app.remote import ENCODING_WAY_OUT, check_broker

            # The broker's own wait, shortened to the probe's (the default is 3 s).
            quick = self.settings.model_copy(update={
                "broker_timeout_s": min(timeout_s, self.settings.broker_timeout_s)})
            # Where queries are encoded on the workers, unsetting the broker alone ("unset it to
            # run jobs in this process") left every search failing: both ways out are said.
            way_out = (f"{ENCODING_WAY_OUT}, and unset FACET_BROKER_URL to run index jobs here too"
                       if self.settings.encode_on_workers else None)
            checks["broker"] = functools.partial(check_broker, quick, way_out=way_out)
            if self.settings.encode_on_workers:
                checks["query_workers"] = functools.partial(self._query_workers_ready, timeout_s)
        results = {name: f"no answer within {timeout_s:g} s" for name in checks}

        def run(name: str, check: Callable[[], None]) -> None:
            try:
                check()
                results[name] = "ok"
            except Exception as e:  # said, not raised: every check is reported
                domain = as_domain_error(e)
                said = str(domain) if domain is not None else f"{type(e).__name__}: {e}"
                # One line (SQLAlchemy's errors add the statement and a link), no password.
                line = " ".join(said.split("\n", 1)[0].split())
                results[name] = mask_passwords(line)  # a check's message may quote a URL

        # Daemon threads: a check that hangs (a database server that takes no connection, a
        # pool whose connections are all busy) is left behind, not waited for.
        threads = [threading.Thread(target=run, args=item, daemon=True,
                                    name=f"facet-ready-{item[0]}") for item in checks.items()]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + timeout_s + 0.5  # a check's own timeout ends first
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        said = {name: results[name] for name in checks}
        said.setdefault("broker", "not configured")
        said.setdefault("query_workers", "not configured")
        return Readiness(all(v == "ok" for k, v in said.items() if k in checks), said)

    def _query_workers_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Where queries are encoded on the workers: a worker consumes the ``query`` queue (asked
        of the workers, a second at most). The probe said "ready" with none running, every
        search failing (the worker exploration of the third session of 2026-12-07).

        Raises:
            UnavailableError: no worker consumes it, or the workers could not be asked."""
        from app.remote import CeleryQueryEncoder

        if not isinstance(self.encoder, CeleryQueryEncoder):
            return
        try:
            consumed = self.encoder.consumes("query", wait_s=min(0.5, timeout_s),
                                             connect_s=min(timeout_s, self.settings.broker_timeout_s))
        except Exception as e:
            raise UnavailableError(f"the workers could not be asked which queues they consume: "
                                   f"{type(e).__name__}: {e}") from e
        if not consumed:
            raise UnavailableError("no worker consumes the 'query' queue: every search fails "
                                   "until one runs (facet worker --queues query), or set "
                                   "FACET_ENCODE_ON_WORKERS=false to encode queries here; a "
                                   "`--pool solo` worker busy with a task counts as none")

    def _database_ready(self) -> None:
        """``SELECT 1``; SQLite's folder writable (a read-only mount under a running server
        answered reads and failed every write)."""
        from sqlalchemy import text

        from indexer.store import probe_write

        with self.context.engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        if self.settings.database_url is None:
            folder = Path(self.settings.data_dir)
            try:
                probe_write(folder)  # the store's own probe of its folder
            except OSError as e:
                why = (" (it is on a read-only file system)" if e.errno == errno.EROFS else
                       f" ({e.strerror or e})")
                raise UnavailableError(not_writable(folder, why)) from e

    def info(self) -> dict[str, Any]:
        """What this process serves: store backend, default embedder, loaded models, limits."""
        from embedders.registry import instruction_use, list_embedders

        stats = self.encoder.stats if isinstance(self.encoder, BatchingQueryEncoder) else None
        return {
            "data_dir": str(self.settings.data_dir),
            "vector_backend": self.context.store.backend,
            "default_embedder": self.settings.default_embedder,
            "embedders": [{"name": i.name, "kind": i.kind, "instructions": instruction_use(i.name),
                           "description": i.description} for i in list_embedders()],
            "loaded": self.embedder_cache.loaded(),
            "encoder": type(self.encoder).__name__,
            "encoder_stats": vars(stats) if stats is not None else None,
            # The vectors searches and embeds keep (FACET_QUERY_CACHE_MB): its hits say whether
            # the bound suits the load.
            "kept_vectors": self.searching.query_vectors.stats(),
            "limits": {"max_texts_per_call": self.settings.max_texts_per_call,
                       "max_cluster_texts": self.settings.max_cluster_texts,
                       "max_pending_texts": self.settings.max_pending_texts},
        }
