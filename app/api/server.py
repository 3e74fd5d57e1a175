"""The FastAPI app behind ``facet serve``: a thin HTTP edge over ``app.core.Facet``.

Each route parses its body (``app.api.schemas``), calls one facade method and renders the
result as JSON; errors are mapped in ``app.api.errors``. The facade is built once at start-up
(``Facet.for_serving``: models stay loaded, one model thread batches concurrent encodes) and
closed at shutdown. Routes are listed in docs/api.md; /openapi.json declares each route's
statuses and bodies as they are (``_openapi``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import pathlib
import re
import secrets
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from collections.abc import Set as AbstractSet
from contextlib import asynccontextmanager
from dataclasses import asdict
from enum import Enum
from types import UnionType
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin
from urllib.parse import quote, urlencode

import anyio
import anyio.to_thread
import numpy as np
from fastapi import (
    Body,
    Depends,
    FastAPI,
    File,
    HTTPException,
    Path,
    Query,
    Request,
    Response,
    Security,
    UploadFile,
)
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer
from pydantic import BaseModel
from starlette.middleware.cors import CORSMiddleware

from app.api import docs_page, errors
from app.api.guard import KeylessGuard
from app.api.schemas import (
    COLLECTION_NAME_PATTERN,
    MAX_COLLECTION_NAME,
    CancelBody,
    ClusterBody,
    CollectionName,
    DocumentListQuery,
    EmbeddingsBody,
    EmbeddingsResponse,
    Health,
    JobBody,
    JobListQuery,
    JobQuery,
    ListedCollection,
    ModelInfo,
    ModelList,
    QueryInt,
    Readiness,
    RemovedDocuments,
    SearchAnswer,
    SearchBody,
    UploadAnswer,
)
from app.core import Facet, ui_rerankers
from app.encoding import warm_up_clustering
from app.errors import (
    BusyError,
    InvalidRequestError,
    NotFoundError,
    UnavailableError,
    UnknownModelError,
    check_collection,
    check_named_embedder,
    quoted_field,
)
from app.remote import CeleryQueryEncoder
from app.roots import links_outside, real_path, real_paths, root_holding
from app.services.clustering import K_BY_SILHOUETTE, ClusterRequest, ClusterResponse
from app.services.collections import (
    MAX_DOCUMENTS_LISTED,
    MAX_JOB_ERRORS,
    MAX_JOBS_LISTED,
    DocumentInfo,
    DocumentList,
    JobInfo,
    JobList,
)
from app.services.indexing import MAX_REMOVED_KEYS, IndexOptions
from app.services.search import SearchRequest, served_note
from app.settings import FacetSettings, get_settings
from app.text import blank, check_text_encodable, empty_said, header_unsafe_at, plural
from app.uploads import original_name
from indexer.errors import IndexerError, mask_secrets
from indexer.lexical import LEXICAL_LABEL
from indexer.store import point_id

logger = logging.getLogger(__name__)
T = TypeVar("T")


async def _facet(request: Request) -> Facet:
    # (async: a plain function dependency runs in a request thread, and with all of them busy,
    # searches waiting on stalled workers, even /ready and the async routes waited for one)
    facet: Facet = request.app.state.facet
    return facet


FacetDep = Annotated[Facet, Depends(_facet)]


AUTH_LOG_WINDOW_S = 60.0  # one WARNING per client and window for refused keys


class _RefusedKeys:
    """WARNING lines for requests refused for a missing or wrong API key: the first from a
    client, then one a window counting the others (a client trying keys was only in uvicorn's
    INFO access lines, among every other request). Bounded: at most ``MAX_CLIENTS`` clients
    remembered, the oldest forgotten first."""

    MAX_CLIENTS = 1024

    def __init__(self, window_s: float = AUTH_LOG_WINDOW_S) -> None:
        self.window_s = window_s
        self._lock = threading.Lock()
        # client -> (when its window began, refusals in it not logged yet)
        self._clients: dict[str, tuple[float, int]] = {}

    def note(self, client: str, method: str, path: str) -> None:
        now = time.monotonic()
        with self._lock:
            began, unlogged = self._clients.pop(client, (None, 0))
            if began is not None and now - began < self.window_s:
                self._clients[client] = (began, unlogged + 1)
                return
            if len(self._clients) >= self.MAX_CLIENTS:
                del self._clients[next(iter(self._clients))]
            self._clients[client] = (now, 0)
        if unlogged:
            logger.warning("%s without the right API key from %s in the last %.0f s; latest: "
                           "%s %s", plural(unlogged, "more request"), client, self.window_s,
                           method, path)
        else:
            logger.warning("a request without the right API key from %s: %s %s (401; others "
                           "from it are counted for %.0f s)", client, method, path, self.window_s)


def _key_sent(request: Request) -> bool:
    """Whether ``request`` carries ``Authorization: Bearer <FACET_API_KEY>`` (True where no key
    is configured)."""
    key: str | None = request.app.state.facet.settings.api_key
    if not key:
        return True
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and secrets.compare_digest(token.strip().encode(),
                                                                 key.encode())


async def _require_key(request: Request) -> None:
    """``Authorization: Bearer <FACET_API_KEY>`` when a key is configured (in the event loop,
    as ``_facet``: no request thread is taken to check it)."""
    if not _key_sent(request):
        refused: _RefusedKeys = request.app.state.refused_keys
        refused.note(_client(request), request.method, mask_secrets(request.url.path))
        raise HTTPException(401, "missing or wrong API key: send the header 'Authorization: Bearer "
                                 "<key>' with the server's FACET_API_KEY",
                            headers={"WWW-Authenticate": "Bearer"})


# The key as /openapi.json declares it (the Authorize button of /docs); only documents it, the
# check is ``_require_key``'s. Declared whether or not a key is set, so that a client generated
# from a keyless server can still send one (``_openapi`` makes it optional there).
_BEARER = HTTPBearer(
    auto_error=False, scheme_name="FACET_API_KEY",
    description="the server's FACET_API_KEY, sent as 'Authorization: Bearer <key>' (every route "
                "but /health and /ready)")
_KEYLESS = (" This server was started without FACET_API_KEY: no key is needed (each route's "
            "security lists the empty requirement {} first), and one sent is ignored.")

# The tags of /openapi.json, in order: a generated client's classes or modules.
_TAGS = [
    {"name": "search", "description": "instruction-aware search and clustering"},
    {"name": "collections", "description": "the collections and their counts"},
    {"name": "jobs", "description": "background index jobs"},
    {"name": "openai-compatible", "description": "OpenAI's embeddings and models routes"},
    {"name": "operations", "description": "liveness, readiness and the server's figures"},
]


def _refused_collection(collection: str | None,
                        param: str | None = "collection") -> Response | None:
    """The 400 for a ``collection`` that is no name (``check_collection``: empty or blank, or
    one the store refuses), before a route reads its body or looks anything up: ``GET
    /jobs?collection=`` answered 404 "unknown collection ''", ``GET /jobs?collection=café``
    and ``DELETE /collections/café/documents`` 404 collection_not_found. ``param``: None where
    the path names it (the resource itself)."""
    try:
        # (a path's name cannot be left out: "/collections/%20/documents" was told to)
        check_collection(collection, optional=param is not None, param=param)
    except InvalidRequestError as e:
        return errors.error_response(400, str(e), "invalid_request_error", param=e.param)
    return None


def _query_names(dependant: Dependant) -> dict[str, bool]:
    """The query parameters a route declares: its own and its dependencies', a query model's
    (``app.api.schemas._Query``) by its fields' names; each with whether it takes a list."""
    names: dict[str, bool] = {}
    for param in dependant.query_params:
        model = param.field_info.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):
            names.update({f.alias or name: _takes_list(f.annotation)
                          for name, f in model.model_fields.items()})
        else:
            names[param.alias] = _takes_list(model)
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


def _takes_list(annotation: Any) -> bool:
    """A list-typed parameter (``list[str] | None``), which may be given more than once."""
    if get_origin(annotation) in (Union, UnionType):
        return any(_takes_list(a) for a in get_args(annotation))
    origin = get_origin(annotation) or annotation
    return (isinstance(origin, type) and issubclass(origin, (Sequence, AbstractSet))
            and not issubclass(origin, (str, bytes)))


class _RepeatedQuery(InvalidRequestError):
    """A query parameter given more than once: the 400 names it (``param``)."""

    def __init__(self, name: str, times: int) -> None:
        super().__init__(f"query parameter {name!r} given {times} times; give it once")
        self.param = name


async def _repeated_query(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, _RepeatedQuery)
    return errors.error_response(400, str(exc), "invalid_request_error", exc.param)


async def _known_query(request: Request) -> None:
    """Refuse a query parameter the route does not declare, for every route of the API (the
    app's dependency; the UI mounted at /ui is another app, untouched): ``/search?k=1``
    searched with the body's k, ``/collections?limit=1`` listed them all. A 400 naming it, as an
    unknown body field is (``errors._validation_error``)."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    allowed = _query_names(route.dependant)  # a few fields: microseconds, nothing to cache
    given = request.query_params.multi_items()
    unknown = [(name, value) for name, value in given if name not in allowed]
    if unknown:
        raise RequestValidationError([
            {"type": "extra_forbidden", "loc": ("query", name), "msg": "Extra inputs are not "
             "permitted", "input": value} for name, value in unknown])
    # One value given twice: ``/jobs?collection=a&collection=b`` quietly used the last.
    times = Counter(name for name, _ in given)
    repeated = next((name for name, n in times.items() if n > 1 and not allowed[name]), None)
    if repeated is not None:
        raise _RepeatedQuery(repeated, times[repeated])


async def _only_file_parts(request: Request) -> None:
    """Refuse an upload's multipart part other than ``files`` (the route's dependency; the form
    is the one FastAPI parsed, cached on the request): ``-F embedder=e5`` indexed with the
    default embedder and ``-F file=@c.txt`` beside ``-F files=@b.txt`` dropped c.txt, each a 202
    without a word, where an unknown field is refused on every other route."""
    form = await request.form()
    unknown = list(dict.fromkeys(name for name in form if name != "files"))
    if unknown:
        names = ", ".join(map(repr, unknown))
        raise InvalidRequestError(
            f"unknown form field{'s' if len(unknown) > 1 else ''} {names}: an upload's files are "
            "the parts named 'files' (`curl -F files=@a.md -F files=@b.pdf`), and the embedder "
            "is a query parameter (`?embedder=NAME`); nothing was staged", param=unknown[0])


def check_api_source(source: str, settings: FacetSettings) -> None:
    """Refuse a ``POST /jobs`` source outside ``FACET_API_ALLOWED_ROOTS`` (unset: any path):
    one that does not lie under a root once ``..`` is folded and its links resolved, or a
    folder whose walk would read a link to a file outside them (``app.roots``, the check the
    UI's Index tab makes). The API indexed any path the process could read:
    ``allowed/docs/../../outside`` was walked, and search returned its text.

    Raises:
        InvalidRequestError: naming the roots (``param="source"``); a source holding a lone
            surrogate (no client's file name: a JSON "\\udcff" was said to be a file's name
            that "is not valid UTF-8; rename it").
    """
    check_text_encodable(source, "source", param="source")
    roots = settings.api_allowed_roots
    if roots is None:
        return
    if not roots:
        raise InvalidRequestError("no server path may be indexed over the API here "
                                  "(FACET_API_ALLOWED_ROOTS is empty)", param="source")
    shown = ", ".join(str(r) for r in real_paths(roots))
    if root_holding(source, roots) is None:
        raise InvalidRequestError(
            f"{source} is outside the folders this server may index ({shown}, "
            "FACET_API_ALLOWED_ROOTS); give a path under one of them", param="source")
    resolved = real_path(source)
    if not os.path.isdir(resolved):
        return
    try:
        outside = links_outside(resolved, roots, (settings.data_dir,))
    except (IndexerError, OSError):  # the facade says what cannot be walked
        return
    if outside:
        raise InvalidRequestError(
            f"{source} holds {plural(len(outside), 'link')} to files outside the folders this "
            f"server may index ({shown}, FACET_API_ALLOWED_ROOTS) or in its own data folder, "
            f"e.g. {outside[0].name}; nothing was indexed: remove them or give another path",
            param="source")


def warn_open_roots(settings: FacetSettings) -> None:
    """One WARNING where a key is set (a shared server) and ``FACET_API_ALLOWED_ROOTS`` is not:
    every key holder may then index, and search, any path the server process can read."""
    if settings.api_key and settings.api_allowed_roots is None:
        logger.warning("FACET_API_KEY is set but FACET_API_ALLOWED_ROOTS is not: any path this "
                       "server process can read can be indexed (POST /jobs) and then searched "
                       "by the key's holders; set FACET_API_ALLOWED_ROOTS='[\"/srv/docs\"]' "
                       "(a JSON list of folders) to limit it (docs/deploy.md)")


def check_api_key(key: str | None) -> None:
    """Refuse a ``FACET_API_KEY`` that no request could carry.

    Clients send headers in ASCII: httpx and the openai client cannot send "kéy" at all
    (UnicodeEncodeError), and the UTF-8 bytes curl sends were read as Latin-1, so they never
    matched either. Such a key started a server nobody could use. (Spaces around it, which the
    header drops, are not part of it: the settings strip every value.)

    Raises:
        InvalidRequestError: a character outside printable ASCII.
    """
    if not key:
        return
    at = header_unsafe_at(key)
    if at is not None:
        raise InvalidRequestError(
            f"FACET_API_KEY holds a character that is not printable ASCII (character {at + 1}), "
            "which an HTTP header cannot carry: no client could send 'Authorization: Bearer "
            "<key>' with it. Choose a key of ASCII letters, digits and punctuation, e.g. "
            "python -c 'import secrets; print(secrets.token_urlsafe(32))'")


# An origin as a browser sends it (``Origin``): scheme, host, an optional port; no path, not
# even "/" (``https://app.example/`` matched no request, silently).
_ORIGIN = re.compile(r"https?://[^/\s?#]+")


def check_cors_origins(origins: Sequence[str]) -> None:
    """Refuse a ``FACET_CORS_ORIGINS`` entry no browser's ``Origin`` header can equal, at
    start, as ``check_api_key`` refuses a key no client can send.

    Raises:
        InvalidRequestError: an entry that is neither ``*`` nor ``http(s)://host[:port]``,
            named.
    """
    for origin in origins:
        if origin != "*" and not _ORIGIN.fullmatch(origin):
            raise InvalidRequestError(
                f"FACET_CORS_ORIGINS holds {origin!r}, which no browser sends as its Origin: "
                "give scheme://host[:port] with no path or trailing '/' "
                "(\"https://app.example.com\"), or \"*\" for any origin")


def cors(app: FastAPI, origins: Sequence[str]) -> None:
    """Answer browsers on ``origins`` (``FACET_CORS_ORIGINS``; none: no CORS headers at all):
    a preflight (``OPTIONS`` with ``Access-Control-Request-Method``) is answered here, before
    any route, so before the key check (a browser sends no key with it); a real request goes on
    through the body limit and the key check, and its answer, an error too, carries the
    headers. ``*`` allows any origin, without credentials (the CORS rule)."""
    if not origins:
        return
    app.add_middleware(CORSMiddleware, **cors_options(origins))


# The headers the UI's own page (Gradio's front end) sends with its requests: a listed site
# embedding the page was refused every event ("Disallowed CORS headers": x-gradio-user on
# queue/join) once Facet's rule stood where Gradio's, which allowed any (2026-12-06).
UI_HEADERS = ("X-Gradio-User", "X-Gradio-History-Bucket")


# ``POST /v1/embeddings``: how many inputs were longer than the model reads (``Facet.count_cut``).
CUT_HEADER = "X-Facet-Inputs-Cut"


def cors_options(origins: Sequence[str]) -> dict[str, Any]:
    """Starlette ``CORSMiddleware``'s options for ``origins`` (``FACET_CORS_ORIGINS``): the
    API's, and the UI's (``ui.app.page_cors``) with the same rule."""
    return {"allow_origins": list(origins), "allow_credentials": "*" not in origins,
            "allow_methods": ["GET", "POST", "DELETE"],
            "allow_headers": ["Authorization", "Content-Type", *UI_HEADERS],
            "expose_headers": ["Retry-After", "Location", "Link", "X-Facet-Jobs-Not-Shown",
                               "X-Facet-Documents-Not-Shown", CUT_HEADER], "max_age": 600}


def check_api_models(models: Sequence[str] | None) -> None:
    """Refuse a ``FACET_API_MODELS`` naming an embedder that does not exist, without loading
    any weights (``embedders.registry.check_embedder``): ``["nope"]`` started a server that
    listed "nope" in GET /v1/models and answered GET /v1/models/nope with 200.

    Raises:
        InvalidRequestError: an empty list; a name neither registered nor a checkpoint directory (or a
            checkpoint whose config cannot be read), or ``[key=value]`` options its embedder
            does not offer or whose values it refuses (``minilm[bogus=1]`` started a server
            whose first request with it failed), named.
    """
    if models is None:
        return
    if not models:  # it started a server that served nothing ("available: " an empty list)
        raise InvalidRequestError("FACET_API_MODELS is an empty list, so no embedder could be "
                                  "served; list the names to serve, or unset it to serve the "
                                  "registered ones")
    for name in models:
        check_named_embedder(name, "FACET_API_MODELS", "served")


def check_ui_rerankers(settings: FacetSettings) -> None:
    """Refuse a ``FACET_UI_RERANKERS`` naming a reranker that cannot be served, at start, as
    ``check_api_models`` refuses FACET_API_MODELS (``check_named_embedder``: no weights
    loaded): the Search tab offered "nope", and only a user who picked it learned it, from
    a search that failed. `facet ui` and, where it mounts the UI (``FACET_UI_MOUNT``), `facet
    serve` check it (until 2026-12-01 `facet serve` did not). An empty list offers no reranker.

    Raises:
        InvalidRequestError: the first name that is neither registered nor a readable
            checkpoint, or whose ``[key=value]`` options its embedder does not offer, naming
            it and what is accepted ("FACET_UI_RERANKERS names 'nope', which cannot be served:
            unknown embedder 'nope': ... Valid names: ...").

    Unset, its default (instemb, inbedder) is offered as far as it loads here
    (``ui_rerankers``): a ``FACET_CHECKPOINT_DIR`` of the user's own checkpoints without both
    stopped `facet serve` and `facet ui` with "FACET_UI_RERANKERS names 'instemb'", a setting
    the user never set.
    """
    if "ui_rerankers" not in settings.model_fields_set:
        ui_rerankers(settings)  # (says which it leaves out)
        return
    for name in settings.ui_rerankers:
        check_named_embedder(name, "FACET_UI_RERANKERS", "served")


@contextlib.contextmanager
def _model_param(renamed: dict[str, str] | None = None, /, **fields: str | None) -> Iterator[None]:
    """Name the request field of a ``model_not_found`` the facade raised: ``renamed`` maps a
    facade field it named to the request's word for it (``/v1/embeddings`` says ``model`` for
    the facade's ``embedder``); where it named none, ``fields`` maps each field as the request
    called it to the name it gave: the field whose name the message quotes, else the only one
    given (``quoted_field``)."""
    try:
        yield
    except UnknownModelError as e:
        if e.param is not None and renamed:
            e.param = renamed.get(e.param, e.param)
        if e.param is None:
            e.param = quoted_field(str(e), fields, only_given=True)
        raise


def allowed_models(facet: Facet) -> list[str]:
    """Embedder names the API may load: ``FACET_API_MODELS``, else the registered names and
    the default embedder (checkpoint paths only when listed, so a request cannot make the
    server load an arbitrary folder)."""
    return facet.allowed_models()


def _check_model(facet: Facet, name: str | None, field: str,
                 collection: str | None = None, lexical: bool = False) -> None:
    """Refuse a model name the server does not serve: not in ``allowed_models``, nor a spec
    ``collection`` recorded for one of its allowed vectors (``Facet.recorded_specs``).

    ``lexical``: a search's embedder, where ``bm25`` (the name a lexical search's response
    gives its ranking) means a lexical search, loads no model and is the search's to check, as
    in process: a remote retriever or a client sending the name back got a 404."""
    if name is None or (lexical and name.strip().lower() == LEXICAL_LABEL):
        return
    allowed = allowed_models(facet)
    if name not in allowed and name not in facet.recorded_specs(collection, allowed):
        # Options load another model object, so a name with options is served only where the
        # list names it so (a client could otherwise fill the server's memory with variants).
        options = ("; a name with [options] is served only when FACET_API_MODELS lists it exactly "
                   "as requested" if "[" in name else "")
        # A client cannot see the server's start-up warning: a name no embedder registered may
        # be a plugin's that failed to load, said as the CLI says it.
        from embedders.registry import embedder_names, plugin_failures, without_options

        failed = plugin_failures() if without_options(name) not in embedder_names() else ""
        listed = allowed
        if field == "explainer":
            # Only the served models that generate answers: every embedder was listed, and
            # one picked from the list (minilm) was then refused as answering nothing (the
            # cluster parity review of the sixth session of 2026-12-06; the CLI names these).
            from embedders.registry import answers_questions

            listed = [model for model in allowed if _answers(answers_questions, model)]
        available = (f"available: {', '.join(listed)}" if listed else
                     "none of the models it serves generates answers")
        raise UnknownModelError(f"{field} {name!r} is not served here; {available} (the "
                                f"server's FACET_API_MODELS sets the list){options}{failed}",
                                param=field)


def _answers(answers_questions: Callable[[str], bool | None], model: str) -> bool:
    """Whether ``model`` (a served name, options or a checkpoint's path included) generates
    answers, as the registry knows it without loading it; False where it cannot tell."""
    try:
        return bool(answers_questions(model))
    except Exception:  # (a path it cannot read, a plugin that fails: not listed)
        return False


DISCONNECT_POLL_S = 0.5
CLIENT_CLOSED_REQUEST = errors.CLIENT_CLOSED_REQUEST  # a request its client gave up

# Clusterings run at once. Each runs in a thread of its own (its encoding on the one model
# thread, its k-means and naming on the CPU); more at once only slow each other. Those waiting
# for a turn wait in the event loop, holding no thread: 50 concurrent /cluster requests held
# all 40 threads of Starlette's pool, and every other user's /search waited about 20 s to start.
MAX_CLUSTERINGS = 2
# Clusterings waiting for a turn at most; one more is refused at once, 429 with Retry-After.
MAX_WAITING_CLUSTERINGS = 32
# /cluster's 429: its turns full, as well as the encoder's queue (the description named only
# FACET_MAX_PENDING_TEXTS).
CLUSTER_BUSY = (f"busy: the clustering turns are full ({MAX_CLUSTERINGS} clusterings running and "
                f"{MAX_WAITING_CLUSTERINGS} more waiting for a turn, the most a server queues), "
                "or the encoder's queue is full (FACET_MAX_PENDING_TEXTS); retry after "
                "Retry-After seconds (code busy)")
# A request that takes longer is logged with its duration (``_RequestLog``).
SLOW_REQUEST_S = 1.0


# The scope key of what a route tells ``_RequestLog`` of its request (its texts).
_LOG_NOTE = "facet.request_log"


def _note_texts(request: Request, count: int | None) -> None:
    """The number of texts ``request`` brings, for its log line (``_RequestLog``)."""
    note = request.scope.get(_LOG_NOTE)
    if isinstance(note, dict) and count is not None:
        note["texts"] = count


def _client(request: Request) -> str:
    """The client's address, as the server saw it (never its key)."""
    return request.client.host if request.client is not None else "unknown"


def route_path(scope: Any) -> str:
    """The request's path as the routes see it: without the root path a proxy serves Facet
    under (uvicorn puts ``--root-path`` in front of ``scope["path"]``)."""
    path, root = str(scope.get("path", "")), str(scope.get("root_path", ""))
    return path[len(root):] if root and path.startswith(root) else path


class _HeadAsGet:
    """HEAD on a route that answers GET is that GET without its body (HTTP asks it of every
    GET resource; it was a 405 everywhere but /health, "Allow: POST" on /jobs). Innermost of
    the middlewares: the guards, the key and the log see the HEAD; the route runs as a GET and
    its headers (Content-Length too) are sent without the body. Not listed in /openapi.json."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD" or not _answers_get(scope):
            await self.app(scope, receive, send)
            return

        async def headers_only(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                message = {**message, "body": b""}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, headers_only)


def _answers_get(scope: dict[str, Any]) -> bool:
    """Whether no route of the app takes ``scope``'s HEAD itself and one takes it as a GET."""
    from starlette.routing import Match

    routes = scope["app"].router.routes
    if any(route.matches(scope)[0] is Match.FULL for route in routes):
        return False  # (the UI's mount: Gradio answers its own)
    as_get = {**scope, "method": "GET"}
    return any(route.matches(as_get)[0] is Match.FULL for route in routes)


class _KeyBeforeBody:
    """With ``FACET_API_KEY`` set, a request that carries a body without the key is refused
    (401, as ``_require_key`` answers) before any of its body is read, unless a route that takes
    no key answers it (the UI's mount, under its own login). FastAPI reads a route's body before
    its dependencies, and the body limit buffers a chunked one to see its size: a client without
    the key held up to ``FACET_API_MAX_BODY_MB`` of the server's memory a connection, stalled
    for as long as it liked (the huge-inputs review of the seventh session of 2026-12-06). A
    request to no route at all is refused so too: 401, where it was 404 after its body."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not errors.declares_body(dict(scope.get("headers") or [])):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if _key_sent(request) or not _keyed(scope):
            await self.app(scope, receive, send)
            return
        try:
            await _require_key(request)
        except HTTPException as exc:
            await (await errors.http_error(request, exc))(scope, receive, send)


def _keyed(scope: dict[str, Any]) -> bool:
    """Whether ``scope``'s route takes the key: the route that answers it (the first matching
    path and method, as the router picks it; else the first matching its path alone, whose
    405 it is) depends on ``_require_key``; True where none matches."""
    from starlette.routing import Match

    routes = scope["app"].router.routes
    matches = [(route, route.matches(scope)[0]) for route in routes]
    route = next((r for r, m in matches if m is Match.FULL), None) or \
        next((r for r, m in matches if m is Match.PARTIAL), None)
    if route is None:
        return True
    return isinstance(route, APIRoute) and any(
        d.call is _require_key for d in route.dependant.dependencies)


class _RootPathLinks:
    """Behind a proxy's prefix (``FACET_ROOT_PATH``, ``--root-path``), the ``Location`` of a new
    job and the ``Link`` to a listing's next page carry it: they said ``/jobs/4``, which the
    client resolved to the proxy's root, a 404 (the reverse-proxy exploration of 2026-12-03)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        root = str(scope.get("root_path", "")).encode("latin-1")
        if scope["type"] != "http" or not root:
            await self.app(scope, receive, send)
            return

        async def sent(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = []
                for name, value in message.get("headers", []):
                    if name.lower() == b"location" and value.startswith(b"/") \
                            and not value.startswith(b"//"):
                        value = root + value
                    elif name.lower() == b"link" and value.startswith(b"</"):
                        value = b"<" + root + value[1:]
                    headers.append((name, value))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, sent)


class _RequestLog:
    """One INFO line for each request that took ``SLOW_REQUEST_S`` or more: method, path (never
    the query string, which may carry a key; masked), status (499: the client went away),
    duration, the texts it brought where the route knows them cheaply (/cluster, /search,
    /v1/embeddings) and the client's address. uvicorn's access line said only ``"POST /cluster
    HTTP/1.1" 200 OK`` of an 89 s clustering: not who held the model, nor for how long. The UI
    mounted at /ui (its event streams stay open for minutes) is left out."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or route_path(scope).startswith("/ui/"):
            await self.app(scope, receive, send)
            return
        note: dict[str, Any] = {}
        scope[_LOG_NOTE] = note
        status: int | None = None
        t0 = time.perf_counter()

        async def sent(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sent)
        finally:
            took = time.perf_counter() - t0
            if took >= SLOW_REQUEST_S and logger.isEnabledFor(logging.INFO):
                texts = note.get("texts")
                client = scope.get("client")
                logger.info(
                    "%s %s answered %s in %.1f s%s, client %s", scope.get("method", "?"),
                    mask_secrets(str(scope.get("path", ""))),
                    status if status is not None else "nothing",
                    took, f" ({texts:,} text{'s' if texts != 1 else ''})" if texts is not None
                    else "", client[0] if client else "unknown")


class _Stopped(Exception):
    """The client of a clustering went away: raised in its thread at its next step."""


class _ClusterTurns:
    """At most ``running`` clusterings at once, ``waiting`` more queued in the event loop (no
    thread held); one beyond them is refused (``BusyError``, 429). One per app, made in its
    lifespan (an asyncio semaphore belongs to one event loop)."""

    def __init__(self, running: int = MAX_CLUSTERINGS,
                 waiting: int = MAX_WAITING_CLUSTERINGS) -> None:
        self.running, self.max_waiting = running, waiting
        self._free = asyncio.Semaphore(running)
        self.waiting = 0
        self._mean_s = 1.0  # recent clusterings' seconds (for Retry-After)
        self._running_since: dict[int, float] = {}  # the running ones' starts

    def refuse_if_full(self) -> None:
        """Raises:
            BusyError: ``running`` clusterings run and ``waiting`` more wait. Its Retry-After
            counts each turn as long as recent clusterings took, or as the longest running one
            has run so far where that is longer (before any had finished, the first burst was
            told 17 s where each clustering took 16 s and the wait was 270 s)."""
        if self._free.locked() and self.waiting >= self.max_waiting:
            now = time.perf_counter()
            per = max([self._mean_s, *(now - t for t in self._running_since.values())])
            wait = per * (self.waiting + self.running) / self.running
            raise BusyError(f"{plural(self.running, 'clustering')} running and "
                            f"{self.waiting} more waiting for a turn, the most this server "
                            "queues; retry after Retry-After seconds",
                            retry_after_s=max(1.0, wait))

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Wait for a turn (cancellable: a client that goes away leaves the queue)."""
        self.waiting += 1
        try:
            await self._free.acquire()
        finally:
            self.waiting -= 1
        t0 = time.perf_counter()
        mine = object()
        self._running_since[id(mine)] = t0
        try:
            yield
        finally:
            del self._running_since[id(mine)]
            self._free.release()
            self._mean_s = (self._mean_s + time.perf_counter() - t0) / 2


async def _cluster_unless_disconnected(request: Request, turns: _ClusterTurns,
                                       run: Callable[[Callable[[float, str], None]], T]) -> T | None:
    """``run``'s result, run in a thread of its own once a turn is free (``_ClusterTurns``), or
    None once the client has disconnected: a clustering still waiting for its turn leaves the
    queue; a running one is stopped at its next step (the clustering's progress callback raises
    ``_Stopped`` between the pieces it encodes, before its k-means, between its explainer's
    batches), its pieces not queued yet never queued. A client that gave up after 3 s on 5,000
    texts kept the model thread busy for its whole clustering. ``run`` gets that callback."""
    stop = threading.Event()
    started = False

    def step(_fraction: float, _stage: str) -> None:
        if stop.is_set():
            raise _Stopped

    async def work() -> T:
        nonlocal started
        async with turns.turn():
            started = True
            return await asyncio.to_thread(run, step)

    task = asyncio.ensure_future(work())
    if not await _client_left(request, task):
        return task.result()
    stop.set()
    if not started:
        task.cancel()  # still waiting for its turn: no thread to stop
    # A running one ends at its next step; its turn is kept until it has.
    with contextlib.suppress(asyncio.CancelledError, _Stopped):
        await task
    logger.info("a client disconnected: its clustering was %s",
                "stopped" if started else "dropped before it started")
    return None


async def _client_left(request: Request, task: asyncio.Future[Any]) -> bool:
    """Wait for ``task`` to end, polling every ``DISCONNECT_POLL_S`` whether the client is still
    there: True where it disconnected first (``task`` still going), False once ``task`` ended."""
    while True:
        done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
        if done:
            return False
        if await request.is_disconnected():
            return True


async def _unless_disconnected(request: Request, work: Coroutine[Any, Any, T]) -> T | None:
    """``work``'s result, or None once the client has disconnected: the work is cancelled and
    its pieces still queued are dropped (a client that gave up on 512 texts kept the model
    thread busy with them for minutes)."""
    task = asyncio.ensure_future(work)
    if not await _client_left(request, task):
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    logger.info("a client disconnected: its encoding was cancelled")
    return None


def _texts(value: Any) -> list[str]:
    """OpenAI's ``input``: a string or a non-empty list of non-empty strings."""
    if isinstance(value, str):
        items: list[Any] = [value]
    elif isinstance(value, list):
        items = value
    else:
        raise InvalidRequestError(f"input must be a string or a list of strings, got "
                                  f"{type(value).__name__}", param="input")
    if not items:
        raise InvalidRequestError("input is empty; send at least one text", param="input")
    if isinstance(value, list) and all(_is_token_ids(x) or _is_int(x) for x in items):
        raise InvalidRequestError("input is token ids; Facet embeds text with its own tokenizer: "
                                  "send strings", param="input")
    for i, item in enumerate(items):
        where = "input" if isinstance(value, str) else f"input[{i}]"
        if not isinstance(item, str):
            raise InvalidRequestError(f"{where} is {type(item).__name__} ({json.dumps(item)[:40]}), "
                                      "not a string; every input must be a string", param=where)
        # (``blank``, as the facade's check: a zero-width space alone passed this one and was
        # refused there as "texts[0]", a field this route does not have)
        if blank(item):
            raise InvalidRequestError(f"{where} is {empty_said(item)}; every input must contain "
                                      "text", param=where)
        # here, not in the facade: its message and param would say texts[i], not this field
        check_text_encodable(item, where, param=where)
    return items


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_token_ids(x: Any) -> bool:
    return isinstance(x, list) and bool(x) and all(_is_int(t) for t in x)


def _next_page(path: str, limit: int, offset: int, left_out: int, counted: str, *,
               after: str | None = None, after_name: str = "after",
               **kept: str | None) -> dict[str, str]:
    """The headers of a listing's page with more past it (``GET /jobs``, ``GET
    /collections/{name}/documents``): a ``Link`` (RFC 8288) to the next page, ``limit`` and
    the ``kept`` parameters given kept, and the ``counted`` header saying how many it left out;
    the body stays a bare list. Until 2026-12-01 a full last page could not be told from one
    with more behind it but by asking again. ``after``: the next page is a keyset page, the
    rows past this one (this page's last key or id), as the parameter ``after_name`` (``after``
    for documents, ``before`` for jobs, newest first), not ``offset`` + ``limit``."""
    params: dict[str, str | int] = ({"limit": limit, after_name: after} if after is not None
                                    else {"limit": limit, "offset": offset + limit})
    params |= {k: v for k, v in kept.items() if v is not None}
    return {"Link": f'<{path}?{urlencode(params, quote_via=quote)}>; rel="next"',
            counted: str(left_out)}


def _json(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(payload, ensure_ascii=False), status_code=status,
                    media_type="application/json", headers=headers)


async def _warm_up_on_workers(served: Facet, encoder: CeleryQueryEncoder, name: str) -> None:
    """Load ``name`` here (its name, dimension and tokenizer) and have a worker encode once, waiting
    ``FACET_BROKER_TIMEOUT_S`` at most (``FACET_WORKER_TIMEOUT_S`` if shorter): with no worker
    running, the API did not listen for the whole worker timeout (60 s; /health unanswered, so a
    liveness probe would kill it). Each query still waits ``FACET_WORKER_TIMEOUT_S``.

    Raises:
        UnknownModelError, DataError, UnavailableError: ``name`` cannot be loaded here.
    """
    served.embedder_cache.get(name)
    settings = served.settings
    wait = min(settings.worker_timeout_s, settings.broker_timeout_s)
    # Its own encoder: the served one's tasks (and its per-query timeout) are left as they are,
    # and the warm-up task expires with this wait instead of running later for nobody.
    warm = CeleryQueryEncoder(settings.model_copy(update={"worker_timeout_s": wait}))
    try:
        await asyncio.to_thread(warm.encode, ["warm-up"], embedder=name)
    except UnavailableError as e:
        # A worker still loading its models at start-up is no reason to exit (compose restarted
        # the API in a loop).
        said = str(e).replace("(FACET_WORKER_TIMEOUT_S)", "at start-up")
        logger.warning("%s was not warmed up: %s; the API starts anyway, and each query waits "
                       "for a worker (FACET_WORKER_TIMEOUT_S=%g)", name, said,
                       settings.worker_timeout_s)
        return
    finally:
        warm.close()
    # The identity the worker reported, as the served encoder would have kept it.
    identity = warm.reported_identity(name)
    if identity is not None:
        encoder._identities.setdefault(name, identity)
    # (It said "loaded minilm", as if this process held the model: the workers do.)
    logger.info("warmed up %s on the workers (they encode its queries)", name)


def create_app(facet: Facet | None = None, *, settings: FacetSettings | None = None,
               preload: Sequence[str] = ()) -> FastAPI:
    """The API app.

    Args:
        facet: an open facade to serve (tests); the app then does not close it. Default:
            ``Facet.for_serving(settings)`` built at start-up and closed at shutdown.
        settings: settings for the facade it builds (default the environment's).
        preload: embedders to load and warm up at start-up, so the first request is not slow.

    Raises:
        InvalidRequestError: a ``FACET_API_KEY`` no client could send (``check_api_key``), a
            ``FACET_API_MODELS`` naming an embedder that does not exist (``check_api_models``).
    """
    settings = facet.settings if facet is not None else (settings or get_settings())
    check_api_key(settings.api_key)
    check_api_models(settings.api_models)
    check_cors_origins(settings.cors_origins)
    if facet is None:  # the server's own (`facet serve`), not a facade a caller serves
        warn_open_roots(settings)
    if settings.ui_mount:  # the Search tab offers them (`facet ui` checks them too)
        check_ui_rerankers(settings)
    started = int(time.time())  # the models' "created" (Facet records none for a model)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        own = facet is None
        served = facet if facet is not None else Facet.for_serving(settings)
        app.state.facet = served
        if own:
            Facet.set_shared(served)  # in-process LangChain objects use the same store
        for name in preload:
            if isinstance(served.encoder, CeleryQueryEncoder):
                await _warm_up_on_workers(served, served.encoder, name)
                continue
            served.embed(["warm-up"], embedder=name)
            logger.info("loaded %s", name)
        app.state.cluster_turns = _ClusterTurns()
        app.state.refused_keys = _RefusedKeys()
        # In the background: the first cluster request no longer imports scikit-learn itself,
        # and /health answers meanwhile.
        warm_up_clustering()
        try:
            yield
        finally:
            if own:
                served.close(reason="the server stopping")

    # redirect_slashes=False: "/collections/" was a 307 with an empty body to an absolute
    # http:// URL (off a TLS proxy); now a 404 naming the route meant (``errors.http_error``).
    from app import __version__

    app = FastAPI(title="Facet", version=__version__, lifespan=lifespan, openapi_tags=_TAGS,
                  dependencies=[Depends(_known_query)], redirect_slashes=False,
                  docs_url=None,  # (``docs_page``: FastAPI's page is blank offline)
                  description="Instruction-aware retrieval: OpenAI-compatible embeddings, search, "
                              "clustering and index jobs. See docs/api.md.")
    errors.install(app)
    docs_page.install(app)
    app.add_exception_handler(_RepeatedQuery, _repeated_query)
    app.add_middleware(_HeadAsGet)  # (the first added is the innermost)
    app.add_middleware(errors.BodyLimitMiddleware, max_mb=settings.api_max_body_mb,
                       max_bytes=int(settings.api_max_body_mb * 2**20))
    app.add_middleware(_KeyBeforeBody)  # (a client without the key: none of its body read)
    # Before the body is read: a page of another site, or a name not allowed (keyless only).
    app.add_middleware(KeylessGuard, settings=settings)
    # Around the body limit (a 413 carries the CORS headers too), inside the request log (a
    # preflight is logged as any request is).
    cors(app, settings.cors_origins)
    app.add_middleware(_RootPathLinks)
    app.add_middleware(_RequestLog)  # outermost of these: the whole request, body limit too
    _openapi(app, settings)
    auth = [Depends(_require_key), Security(_BEARER)]  # optional without a key (``_openapi``)

    def fails(*statuses: int,
              meaning: dict[int, str] | None = None) -> dict[int | str, dict[str, Any]]:
        """The error statuses a route declares: ``statuses``, 400 (every route refuses a query
        parameter it does not take: ``_known_query``), and 401 where a key is set; ``meaning``:
        the route's own descriptions of some (``errors.responses``)."""
        return errors.responses(*sorted({400, *statuses}), *((401,) if settings.api_key else ()),
                                meaning=meaning)

    # Any route over the facade may fail server-side (500: a database out of reach...); one
    # with a body answers 400 for a body that does not validate, 413 for one too large.
    facade = (500,)
    with_body = (400, 413, 500)
    # An embedder to load (unknown 404, unreadable checkpoint 422) and encode with (the queue
    # full 429, workers out of reach 503).
    encoding = (404, 422, 429, 503)

    ops: list[str | Enum] = ["operations"]
    openai: list[str | Enum] = ["openai-compatible"]
    searching: list[str | Enum] = ["search"]
    jobs: list[str | Enum] = ["jobs"]
    listing: list[str | Enum] = ["collections"]

    @app.get("/health", response_model=Health, responses=errors.responses(400),
             operation_id="health", tags=ops)
    async def health() -> dict[str, str]:
        """Liveness: no key needed, no work done (in the event loop: a plain route waited for
        one of the 40 request threads, all busy with searches waiting on stalled workers:
        10.9 s, past a container healthcheck's 10 s)."""
        return {"status": "ok"}

    # Uptime checkers ask with HEAD: answered as the GET without its body (``_HeadAsGet``,
    # as on every GET route; /openapi.json lists the GET only).

    # /ready's checks block (a second at most each): run in threads of their own, never
    # queued behind the request threads' searches.
    readiness_limiter: list[anyio.CapacityLimiter] = []

    async def readiness(facet: Facet) -> Any:
        if not readiness_limiter:
            readiness_limiter.append(anyio.CapacityLimiter(4))
        return await anyio.to_thread.run_sync(facet.readiness, limiter=readiness_limiter[0])

    # Readiness, beside liveness: 503 with the same body naming what failed (a broker or
    # store out of reach, a read-only data folder), which /health answered "ok" through.
    @app.get("/ready", response_model=Readiness, responses=errors.responses(400) | {
        503: {"model": Readiness, "description": "not ready: the checks that failed say why"}},
             operation_id="ready", tags=ops)
    async def ready(request: Request, facet: FacetDep) -> Response:
        """Readiness: no key needed; cheap checks of the database, the vector store, the
        broker and, where queries are encoded on the workers, a worker consuming the 'query'
        queue (each a second at most), no model loaded. With FACET_API_KEY, a failed check
        says why only to a request sending the key ("failed" otherwise)."""
        found = await readiness(facet)
        checks = found.checks
        # Said in the log when what fails changes (a probe asks every few seconds): a request
        # without the key is told "failed" alone, and nothing said why anywhere.
        failed = {name: said for name, said in checks.items() if said not in ("ok", "not configured")}
        if failed != getattr(request.app.state, "ready_failed", {}):
            if failed:
                logger.warning("not ready: %s", "; ".join(f"{k}: {v}" for k, v in failed.items()))
            else:
                logger.info("ready again: every check answers")
            request.app.state.ready_failed = failed
        if not _key_sent(request):
            # Its reasons name hosts, ports and a URL's user ("cannot reach Qdrant at
            # http://admin:***@10.0.0.5:6333"): not for anyone who can reach the port (the
            # security review of the seventh session of 2026-12-06). The log has them (above).
            checks = {name: said if said in ("ok", "not configured") else "failed"
                      for name, said in checks.items()}
        return _json({"status": "ready" if found.ready else "not ready", "checks": checks},
                     status=200 if found.ready else 503)

    @app.get("/info", dependencies=auth, responses=fails(*facade), operation_id="info", tags=ops)
    def info(facet: FacetDep) -> dict[str, Any]:
        """Backend, default embedder, loaded models, limits, encoder statistics."""
        return facet.info() | {"api_models": allowed_models(facet)}

    def model_info(name: str) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": started, "owned_by": "facet"}

    @app.get("/v1/models", dependencies=auth, response_model=ModelList, responses=fails(),
             operation_id="listModels", tags=openai)
    def models(facet: FacetDep) -> dict[str, Any]:
        """The embedders ``model`` may name (OpenAI's model list shape)."""
        return {"object": "list", "data": [model_info(name) for name in allowed_models(facet)]}

    @app.get("/v1/models/{model:path}", dependencies=auth, response_model=ModelInfo,
             responses=fails(404), operation_id="getModel", tags=openai)
    def model_detail(model: str, facet: FacetDep) -> dict[str, Any]:
        """One of them (OpenAI's ``models.retrieve``; it answered "no such endpoint"), 404
        ``model_not_found`` for any other name. A path: a checkpoint's id holds slashes."""
        # "/v1/models/" and "/v1/models/minilm/": no such endpoint, and the route meant (they were
        # "model '' is not served here", "model 'minilm/' ...").
        if not model or model.endswith("/"):
            raise HTTPException(404)
        _check_model(facet, model, "model")
        return model_info(model)

    @app.post("/v1/embeddings", dependencies=auth, response_model=EmbeddingsResponse,
              responses=fails(*with_body, *encoding) | {200: {"headers": {
                  CUT_HEADER: {"description": "only where some were: how many inputs were longer "
                                              "than the model reads, each embedded from its start",
                               "schema": {"type": "integer"}}}}},
              operation_id="createEmbeddings", tags=openai)
    async def embeddings(body: EmbeddingsBody, facet: FacetDep, request: Request) -> Response:
        """OpenAI-compatible embeddings, plus ``instruction`` and ``role`` (query/document).

        Async: a request waits on the encoder's future in the event loop, not in a thread of
        the pool, so many concurrent clients cost no threads (the model thread does the work).
        A client that disconnects cancels what of its request is still queued.
        """
        texts = _texts(body.input)
        _note_texts(request, len(texts))
        _check_model(facet, body.model, "model")
        with _model_param({"embedder": "model"}, model=body.model):
            result = await _unless_disconnected(request, facet.aembed(
                texts, embedder=body.model, role=body.role, instruction=body.instruction,
                dimensions=body.dimensions))
        if result is None:  # nobody is there to read an answer
            return Response(status_code=CLIENT_CLOSED_REQUEST)
        vectors = np.ascontiguousarray(result.vectors, dtype="<f4")  # little-endian float32
        data: list[dict[str, Any]] = []
        for i, row in enumerate(vectors):
            embedding: Any = (base64.b64encode(row.tobytes()).decode("ascii")
                              if body.encoding_format == "base64" else row.tolist())
            data.append({"object": "embedding", "index": i, "embedding": embedding})
        # The model as requested (an id of GET /v1/models, options included), as OpenAI echoes
        # it: the canonical name alone hid which variant answered.
        # How many inputs were cut at the model's budget, where any were: OpenAI refuses such a
        # text, Facet embeds its start, and only the server's log said so.
        cut = {CUT_HEADER: str(result.cut)} if result.cut else None
        return _json({"object": "list", "data": data, "model": body.model or result.embedder,
                      "usage": {"prompt_tokens": result.tokens, "total_tokens": result.tokens}},
                     headers=cut)

    # A collection: unknown (404), or written by another process or embedder version (409).
    @app.post("/search", dependencies=auth, response_model=SearchAnswer,
              responses=fails(*with_body, *encoding, 409), operation_id="search", tags=searching)
    def search(body: SearchBody, facet: FacetDep, request: Request) -> Response:
        """Instruction-aware search of a collection; each result with its point ``id``."""
        _note_texts(request, 1)
        _check_model(facet, body.embedder, "embedder", body.collection, lexical=True)
        # An empty rerank is none, as in process (`facet search --rerank ''`, the LangChain
        # retriever): a remote retriever's rerank="" was a 404 "rerank '' is not served here".
        rerank = body.rerank or None
        _check_model(facet, rerank, "rerank")
        with _model_param(embedder=body.embedder, rerank=rerank):
            response = facet.search(SearchRequest(
                query=body.query, collection=body.collection, instruction=body.instruction,
                top_k=body.k, filters=body.filters, rerank=rerank,
                rerank_depth=body.rerank_depth, embedder=body.embedder, exact=body.exact,
                score_threshold=body.score_threshold, group_by_document=body.group_by_document,
                mode=body.mode))
        payload = response.to_dict()
        payload["note"] = served_note(payload["note"], response.embedder,
                                      facet.serves(body.collection))
        # The point id, as the LangChain adapter's Document.id: an HTTP client could not name
        # the chunk it got.
        payload["results"] = [{"id": point_id(r["doc_id"], r["chunk_no"]), **r}
                              for r in payload["results"]]
        return _json(payload)

    @app.post("/cluster", dependencies=auth, response_model=ClusterResponse,
              responses=fails(*with_body, *encoding, 409, meaning={429: CLUSTER_BUSY}),
              operation_id="cluster", tags=searching)
    async def cluster(body: ClusterBody, facet: FacetDep, request: Request) -> Response:
        """Cluster texts, a collection or search results under an instruction.

        Async: ``MAX_CLUSTERINGS`` run at once, each in a thread of its own; the others wait
        for a turn in the event loop, holding no thread of the pool the other routes run in,
        and ``MAX_WAITING_CLUSTERINGS`` more are refused (429, Retry-After). A client that
        disconnects stops its clustering (``_cluster_unless_disconnected``). The cheap checks
        (``_cluster_checks``) run before the wait for a turn."""
        turns: _ClusterTurns = request.app.state.cluster_turns
        # A model name not served, an unknown collection: said at once (a typo waited for a
        # turn behind the running clusterings before its 404: 11.7 s behind four).
        await asyncio.to_thread(_cluster_checks, facet, body)
        turns.refuse_if_full()
        _note_texts(request, len(body.texts) if body.texts is not None else None)
        answer = await _cluster_unless_disconnected(
            request, turns, lambda step: clustered(body, facet, request, step))
        return Response(status_code=CLIENT_CLOSED_REQUEST) if answer is None else answer

    def _cluster_checks(facet: Facet, body: ClusterBody) -> None:
        """What ``clustered`` (and the clustering) check first, read without a model or a
        turn: the model names the server serves, and that the collection exists (and is not
        held elsewhere). Run again there: the answer may change while the request waits."""
        _check_model(facet, body.embedder, "embedder", body.collection)
        _check_model(facet, body.explainer, "explainer")
        if body.search is not None:
            _check_model(facet, body.search.embedder, "search.embedder", body.search.collection,
                         lexical=True)
        if body.collection is not None:
            # Through the facade, whose errors are the domain's: the service's own let a
            # Qdrant server out of reach out as a 500 and a traceback (the logs review of the
            # seventh session of 2026-12-06), where a search answered 503.
            facet.check_cluster_collection(body.collection)

    def clustered(body: ClusterBody, facet: Facet, request: Request,
                  step: Callable[[float, str], None]) -> Response:
        """The clustering of ``body``; ``step`` is told each of its steps (it raises
        ``_Stopped`` once the client has gone)."""
        _check_model(facet, body.embedder, "embedder", body.collection)
        _check_model(facet, body.explainer, "explainer")
        search = None
        if body.search is not None:
            _check_model(facet, body.search.embedder, "search.embedder", body.search.collection,
                         lexical=True)
            s = body.search
            search = SearchRequest(query=s.query, collection=s.collection,
                                   instruction=s.instruction, top_k=s.k, filters=s.filters,
                                   embedder=s.embedder, mode=s.mode)
        try:
            with _model_param(embedder=body.embedder, explainer=body.explainer,
                              **{"search.embedder": body.search.embedder if body.search else None}):
                result = facet.cluster(ClusterRequest(
                    instruction=body.instruction, texts=body.texts, collection=body.collection,
                    search=search, filters=body.filters, limit=body.limit, k=body.k,
                    max_k=body.max_k, embedder=body.embedder, explainer=body.explainer,
                    keywords=body.keywords, members=body.members,
                    answer_tokens=body.answer_tokens, seed=body.seed), step)
        except InvalidRequestError as e:  # a k over the texts: this edge's way of leaving it unset
            if not str(e).endswith(K_BY_SILHOUETTE):
                raise
            # Named in param, as a field that does not validate is (it was null).
            return errors.error_response(400, f"{e} (omit k)", "invalid_request_error", "k")
        _note_texts(request, len(result.texts))  # a collection's or a search's too
        payload = result.to_dict()
        payload["note"] = served_note(payload["note"], result.embedder, facet.serves(body.collection))
        return _json(payload)

    # Submitting loads the embedder (422), writes the queued job row (429 while another
    # process holds the metadata database's write lock for the whole wait) and may send the
    # job to the broker (503); nothing is encoded yet.
    @app.post("/jobs", status_code=202, dependencies=auth, response_model=JobInfo,
              responses=fails(*with_body, 404, 409, 422, 429, 503,
                              meaning={429: errors.BUSY_DATABASE}) | {202: {"headers": {
                  "Location": {"description": "the job's URL", "schema": {"type": "string"}}}}},
              operation_id="submitJob", tags=jobs)
    def submit_job(body: JobBody, facet: FacetDep, request: Request) -> Response:
        """Index a path on the server into a collection, in the background: 202 + the job."""
        check_api_source(body.source, facet.settings)
        _check_model(facet, body.embedder, "embedder", body.collection)
        client = _client(request)

        def queued(job_id: int) -> None:
            # Who: two users' jobs submitted in the same second could not be told apart. Said
            # before the runner takes the job: logged once submit_index returned, it came after
            # a fast job's own "job N started" (and even its end).
            logger.info("job %d queued by %s (collection %r)", job_id, client, body.collection)

        with _model_param(embedder=body.embedder):
            job = facet.submit_index(body.source, body.collection, IndexOptions(
                embedder=body.embedder, chunk_size=body.chunk_tokens,
                chunk_overlap=body.chunk_overlap, sync=body.sync, text_column=body.text_column,
                confine=(None if settings.api_allowed_roots is None else
                         tuple(str(root) for root in settings.api_allowed_roots))),
                on_queued=queued)
        return _json(asdict(job), status=202, headers={"Location": f"/jobs/{job.id}"})

    # Files sent with the request, into the collection's upload folder (the UI's uploads go
    # there too): until 2026-12-01 a client of the API could index only paths on the server.
    @app.post("/collections/{name}/uploads", status_code=202,
              dependencies=[*auth, Depends(_only_file_parts)],
              response_model=UploadAnswer,
              responses=fails(*with_body, 404, 409, 422, 429, 503, meaning={
                  413: "the request body is over FACET_API_MAX_BODY_MB, or holds more than "
                       "1,000 files, the most the form parser takes in one request (code "
                       "request_too_large): upload fewer or smaller files per request",
                  422: "no file of the upload can be indexed (code unreadable_data): each is "
                       "named with why (a type the indexer does not read, an empty name); "
                       "nothing was staged",
                  429: errors.BUSY_DATABASE}) | {202: {"headers": {
                  "Location": {"description": "the job's URL", "schema": {"type": "string"}}}}},
              operation_id="uploadFiles", tags=jobs)
    def upload_files(name: Annotated[str, Path(json_schema_extra={"maxLength": MAX_COLLECTION_NAME,
                         "minLength": 1, "pattern": COLLECTION_NAME_PATTERN})],
                     facet: FacetDep, request: Request,
                     files: Annotated[list[UploadFile], File(
                         description="the files to index (multipart/form-data, the field "
                         "repeated for several: `curl -F files=@a.md -F files=@b.pdf`), each "
                         "of a type `facet index` reads; a file of a name the collection's "
                         "uploads hold already replaces it, and its document is updated")],
                     embedder: Annotated[str | None, Query(
                         description="the embedder that indexes them (default: the "
                         "collection's, else the server's default)")] = None) -> Response:
        """Index uploaded files into a collection, in the background, as the UI's Index tab
        does: they are kept in the collection's upload folder on the server (the same name
        again updates its document; deleting the collection removes them) and a job indexes
        that folder: 202 + the job, what was refused, renamed and removed, and where each file
        was saved (its document key). A new collection is made."""
        # (A page of another site is refused before: ``KeylessGuard``.)
        if (refused := _refused_collection(name, param=None)) is not None:
            return refused
        _check_model(facet, embedder, "embedder", name)
        client = _client(request)

        def queued(job_id: int) -> None:
            logger.info("job %d queued by %s (collection %r, %s received)", job_id, client, name,
                        plural(len(files), "uploaded file"))

        with tempfile.TemporaryDirectory(prefix="facet-upload-") as received:
            paths = []
            for i, upload in enumerate(files):
                # Its name only (a client's "../x.txt" or "C:\notes\a.md" is "x.txt",
                # "a.md"), each in a folder of its own: two of one name both arrive.
                given = re.split(r"[\\/]", upload.filename or "")[-1]
                path = pathlib.Path(received, str(i), original_name(pathlib.Path(given or "upload")))
                try:
                    path.parent.mkdir()
                    with path.open("wb") as out:
                        shutil.copyfileobj(upload.file, out)
                except OSError as e:  # (a 500 with a traceback where the folder was full)
                    full = errors.temp_full_message(e)
                    if full is None:
                        raise
                    raise UnavailableError(full) from e
                paths.append(path)
            with _model_param(embedder=embedder):
                result = facet.upload(name, paths, embedder=embedder,
                                      max_mb=settings.api_max_body_mb,
                                      limit="FACET_API_MAX_BODY_MB", on_queued=queued)
        if result.refused:
            logger.info("job %d: %s of %s's upload refused: %s", result.job.id,
                        plural(len(result.refused), "file"), client, "; ".join(result.refused))
        return _json({"job": asdict(result.job), "refused": result.refused,
                      "renamed": result.renamed, "removed": result.removed,
                      "staged": result.staged},
                     status=202, headers={"Location": f"/jobs/{result.job.id}"})

    # Reading jobs writes nothing: no 429 (SQLite in WAL mode, and PostgreSQL, let reads past
    # a writer's lock). A query parameter they do not take is a 400 that names it.
    @app.get("/jobs", dependencies=auth, response_model=list[JobInfo],
             responses=fails(*facade, 400, 404) | {200: {"headers": {
                 "Link": {"description": "only where older jobs are left out of this page: "
                                         "`</jobs?limit=L&before=ID...>; rel=\"next\"`, the "
                                         "next page",
                          "schema": {"type": "string"}},
                 "X-Facet-Jobs-Not-Shown": {"description": "with `Link`: how many older jobs "
                                                           "this page left out",
                                            "schema": {"type": "integer"}}}}},
             operation_id="listJobs", tags=jobs)
    def list_jobs(facet: FacetDep, query: Annotated[JobListQuery, Query()]) -> Response:
        """Recent jobs, newest first (of one collection when named); the `Link` header's next
        page is `before` this page's last id (``offset`` skips the newest ones too)."""
        if (blank := _refused_collection(query.collection)) is not None:
            return blank
        if not 1 <= query.limit <= MAX_JOBS_LISTED:  # the facade's check, naming the parameter
            return errors.error_response(400, f"limit must be from 1 to {MAX_JOBS_LISTED}, got "
                                         f"{query.limit}", "invalid_request_error", param="limit")
        if query.offset < 0:
            return errors.error_response(400, f"offset must be a whole number, 0 or more, got "
                                         f"{query.offset}", "invalid_request_error",
                                         param="offset")
        if query.before is not None and query.before < 1:
            return errors.error_response(400, f"before must be a job id, a whole number from 1, "
                                         f"got {query.before}", "invalid_request_error",
                                         param="before")
        listed = facet.jobs(query.collection, query.limit, query.offset, query.before)
        # Older jobs past this page: the next page's URL as a Link header (``_next_page``),
        # before the last of its newest `limit` jobs (the older ones that have not ended, which
        # a first page adds after them, come again in their place). By offset, a collection
        # deleted while a client followed the Links took its jobs out and shifted the later
        # pages: as many jobs were never listed (the API review of the fifth session of
        # 2026-12-06).
        more = listed.not_shown if isinstance(listed, JobList) else 0
        last = listed.next_before if isinstance(listed, JobList) else None
        return _json([asdict(j) for j in listed], headers=_next_page(
            "/jobs", query.limit, query.offset, more, "X-Facet-Jobs-Not-Shown",
            after=None if last is None else str(last), after_name="before",
            collection=query.collection) if more else None)

    @app.get("/jobs/{job_id}", dependencies=auth, response_model=JobInfo,
             responses=fails(*facade, 400, 404), operation_id="getJob", tags=jobs)
    def get_job(job_id: QueryInt, facet: FacetDep, query: Annotated[JobQuery, Query()]) -> Response:
        """One job: state, counters, timings and the first ``errors`` (default 100, at most
        1000) of its per-document errors after the first ``errors_offset`` (default 0) with
        their total (``errors_total``); with ``collection``, only if it is of that collection
        (job 3 of b2 was answered to ``?collection=b1``)."""
        if (blank := _refused_collection(query.collection)) is not None:
            return blank
        if not 0 <= query.errors <= MAX_JOB_ERRORS:
            return errors.error_response(400, f"errors must be from 0 to {MAX_JOB_ERRORS}, got "
                                         f"{query.errors}", "invalid_request_error", param="errors")
        if query.errors_offset < 0:
            return errors.error_response(400, "errors_offset must be a whole number, 0 or more, "
                                         f"got {query.errors_offset}", "invalid_request_error",
                                         param="errors_offset")
        try:
            return _json(asdict(facet.job(job_id, query.collection, query.errors,
                                          query.errors_offset)))
        except InvalidRequestError as e:  # the job is of another collection
            return errors.error_response(400, str(e), "invalid_request_error", param="collection")

    # Cancelling writes the job row (429 while another process holds the metadata database's
    # write lock for the whole wait).
    @app.post("/jobs/{job_id}/cancel", dependencies=auth, response_model=JobInfo,
              responses=fails(*facade, 400, 404, 429, meaning={
                  400: "the job has ended (completed, failed, interrupted, cancelled: named in "
                       "the message), or is of another collection than ``collection``",
                  429: errors.BUSY_DATABASE}), operation_id="cancelJob", tags=jobs)
    def cancel_job(job_id: QueryInt, facet: FacetDep, request: Request,
                   collection: Annotated[CollectionName | None, Query(
                       description="the collection the job must be of: a job of another one is "
                                   "refused (400), as for GET /jobs/{job_id}; or in the body")] = None,
                   body: Annotated[CancelBody | None, Body()] = None) -> Response:
        """Cancel an index job: 200 + the job. A queued job is ``cancelled`` at once; a running
        one has ``cancel_requested`` set and stops at its next batch boundary, ``cancelled``,
        what it indexed kept (the next job of the same source resumes it): poll GET
        /jobs/{job_id} for its end."""
        # An unknown job: the facade's NotFoundError, 404 job_not_found (errors._NOT_FOUND_ROUTES).
        # An ended one, or one of another collection: its InvalidRequestError, 400, whose param
        # the facade sets ("collection" for the other collection; it was read from the message).
        # The collection in the body too (a body was ignored, unknown fields and all).
        given = body.collection if body is not None else None
        for named in (collection, given):  # empty: refused, not read as none (or as a name)
            if (blank := _refused_collection(named)) is not None:
                return blank
        if given is not None and collection is not None and given != collection:
            return errors.error_response(
                400, "collection is given twice, differently, in the query and in the body; give "
                     "it once", "invalid_request_error", param="collection")
        cancelled = facet.cancel_job(job_id, collection or given)
        logger.info("job %d: cancellation asked by %s", job_id, _client(request))
        return _json(asdict(cancelled))

    # A store server out of reach: 503.
    @app.get("/collections", dependencies=auth, response_model=list[ListedCollection],
             responses=fails(*facade, 503), operation_id="listCollections", tags=listing)
    def collections(facet: FacetDep) -> Response:
        """Every collection with its counts and embedders, ``"stray": false``; first, as
        ``facet collections --json`` lists them, the embedded store's vectors that no collection
        of this database owns, ``"stray": true`` (they were left out: a client saw nothing under
        a name that indexing then refused), with ``owner`` set where the data folder's facet.db
        records them (FACET_DATABASE_URL naming another database). Each part in name order."""
        infos = facet.collections()
        strays = facet.stray_collections()
        return _json([asdict(i) | {"stray": True} for i in strays]
                     + [asdict(i) | {"stray": False} for i in infos])

    @app.get("/collections/{name}", dependencies=auth, response_model=ListedCollection,
             responses=fails(*facade, 404, 503), operation_id="getCollection",
             tags=listing)
    def collection(name: Annotated[str, Path(json_schema_extra={"maxLength": MAX_COLLECTION_NAME,
                       "minLength": 1, "pattern": COLLECTION_NAME_PATTERN})],
                   facet: FacetDep) -> Response:
        """One collection, as ``GET /collections`` lists it: ``"stray": false``, or, for vectors
        the embedded store holds under ``name`` that no collection of this database owns,
        ``"stray": true`` (as ``facet collections NAME --json``; it was a 404 for a name the
        listing showed). 404 for a name neither."""
        try:
            return _json(asdict(facet.collection(name)) | {"stray": False})
        except NotFoundError:
            stray = facet.orphan_collection(name)
            if stray is None:
                raise
        return _json(asdict(stray) | {"stray": True})

    # Deleting writes the metadata (429 while another process holds its write lock); a job
    # indexing the collection is a 409.
    @app.delete("/collections/{name}", dependencies=auth, response_model=ListedCollection,
                responses=fails(*facade, 404, 409, 429, 503, meaning={
                    409: "a job is indexing the collection, or is queued to (each named in "
                         "the message): wait for it or cancel it (POST /jobs/{job_id}/cancel), "
                         "then delete; or a stray's "
                         "vectors that the data folder's facet.db owns (its \"owner\"): never "
                         "deleted over HTTP",
                    429: errors.BUSY_DATABASE}),
                operation_id="deleteCollection", tags=listing)
    def delete_collection(name: Annotated[str, Path(json_schema_extra={"maxLength": MAX_COLLECTION_NAME,
                              "minLength": 1, "pattern": COLLECTION_NAME_PATTERN})],
                          facet: FacetDep, request: Request) -> Response:
        """Delete a collection: its points, its metadata (documents, jobs) and its uploaded
        files, as ``facet delete NAME`` does; 200 + what it held, as ``GET /collections/{name}``
        lists it (a stray's vectors too: ``"stray": true``). There is no undo. A running server
        keeps its collections open, so ``facet delete`` beside it is refused and sends the
        work here (or to the UI); before, only the UI could. A stray whose ``owner`` is set (the
        data folder's facet.db records a collection of its name, FACET_DATABASE_URL naming
        another database) is refused, 409, with no force over HTTP: `facet delete NAME --force`,
        the server stopped, removes it."""
        try:
            facet.collection(name)
            stray = False
        except NotFoundError:
            stray = True  # the store's vectors of no collection, or a 404 from the delete
        try:
            deleted = facet.delete_collection(name)
        except NotFoundError as e:
            # The path names the resource: param null, as GET /collections/{name} (the service
            # names the field, "collection", for its other callers).
            if e.param is None:
                raise
            raise NotFoundError(str(e)) from e
        logger.info("deleted collection %s (by %s)", name, _client(request))
        return _json(asdict(deleted) | {"stray": stray})

    # Reading documents writes nothing (no 429) and opens no store (no 503).
    @app.get("/collections/{name}/documents", dependencies=auth,
             response_model=list[DocumentInfo],
             responses=fails(*facade, 400, 404) | {200: {"headers": {
                 "Link": {"description": "only where documents are left out past this page: "
                                         "`</collections/NAME/documents?limit=L&after=KEY...>; "
                                         "rel=\"next\"`, the next page",
                          "schema": {"type": "string"}},
                 "X-Facet-Documents-Not-Shown": {
                     "description": "with `Link`: how many documents past this page it left out",
                     "schema": {"type": "integer"}}}}},
             operation_id="listDocuments", tags=listing)
    def list_documents(name: Annotated[str, Path(json_schema_extra={"maxLength": MAX_COLLECTION_NAME,
                           "minLength": 1, "pattern": COLLECTION_NAME_PATTERN})],
                       facet: FacetDep, query: Annotated[DocumentListQuery, Query()]) -> Response:
        """A page of the collection's documents in key order, as `facet documents NAME --json`
        lists them: each one's `key` (what search results show as `doc_id`, and what
        `DELETE /collections/{name}/documents?key=` takes), `source`, `title`, `status`,
        `chunks`, `updated_at`, `metadata` and `error`. Where more are past the page, a `Link`
        header (rel="next") gives the next page's URL, `after` this page's last key, and
        `X-Facet-Documents-Not-Shown` how many; the body stays a bare list."""
        if (refused := _refused_collection(name, param=None)) is not None:
            return refused
        if not 1 <= query.limit <= MAX_DOCUMENTS_LISTED:  # the facade's check, naming it
            return errors.error_response(400, f"limit must be from 1 to {MAX_DOCUMENTS_LISTED}, "
                                         f"got {query.limit}", "invalid_request_error",
                                         param="limit")
        if query.offset < 0:
            return errors.error_response(400, f"offset must be a whole number, 0 or more, got "
                                         f"{query.offset}", "invalid_request_error",
                                         param="offset")
        try:
            listed = facet.documents(name, query.limit, query.offset, query.status, query.prefix,
                                     query.after)
        except NotFoundError as e:
            # The collection is the path (param null, as GET /collections/{name}); this route
            # is in no table of the error handler's, so its code is given here.
            if e.param != "collection":
                raise
            return errors.error_response(404, str(e), "not_found_error",
                                         code="collection_not_found")
        more = listed.not_shown if isinstance(listed, DocumentList) else 0
        # The next page after this one's last key (a keyset page): by offset, a document indexed
        # or removed while a client followed the Links shifted every later page, so a row came
        # twice or was skipped (the API review of the fifth session of 2026-12-06).
        return _json([asdict(d) for d in listed], headers=_next_page(
            f"/collections/{quote(name, safe='')}/documents", query.limit, query.offset, more,
            "X-Facet-Documents-Not-Shown", after=listed[-1].key, status=query.status,
            prefix=query.prefix) if more and listed else None)

    # Removing writes the metadata (429 while another process holds its write lock); a job
    # writing the collection, or its vectors in another store, is a 409.
    @app.delete("/collections/{name}/documents", dependencies=auth,
                response_model=RemovedDocuments,
                responses=fails(*facade, 404, 409, 413, 429, 503, meaning={
                    404: "an unknown collection (code collection_not_found), or keys that name "
                         "no document of it (code document_not_found, param key, each named in "
                         "the message; not with missing_ok, which skips them): nothing was "
                         "removed",
                    409: "a job is writing the collection (named in the message): wait for it or "
                         "cancel it (POST /jobs/{job_id}/cancel); or its vectors are in another "
                         "store than the one in use",
                    413: f"more than {MAX_REMOVED_KEYS} keys (code request_too_large)",
                    429: errors.BUSY_DATABASE}),
                operation_id="removeDocuments", tags=listing)
    def remove_documents(name: Annotated[str, Path(json_schema_extra={"maxLength": MAX_COLLECTION_NAME,
                             "minLength": 1, "pattern": COLLECTION_NAME_PATTERN})],
                         facet: FacetDep,
                         key: Annotated[list[str], Query(
                             min_length=1, description="a document's key, as search results "
                             "(doc_id) and job errors show it: a file's absolute path on the "
                             "server, a record's id; repeat it for several (?key=a&key=b)")],
                         missing_ok: Annotated[bool, Query(
                             description="skip the keys that name no document of the "
                             "collection (removed already, or never there: the retry of a "
                             "removal that partly succeeded) instead of refusing them all (404): "
                             "listed in skipped_keys, the others removed; where none names a "
                             "document, nothing is removed and no job is made (job_id 0), as "
                             "`facet delete NAME --document KEY --missing-ok`")] = False
                         ) -> Response:
        """Remove documents from a collection by their keys: their vectors, chunks and
        metadata, as `facet delete NAME --document KEY` does; 200 + what was removed, recorded
        as a job (GET /jobs/{job_id}). Every key must name a document of the collection, or
        nothing is removed (404); with ``missing_ok``, keys that name none are skipped
        (``skipped_keys``) and the others removed. A file in a server folder is not touched: a
        document whose file is still there (``source_exists``) comes back with the next index
        job of it; an uploaded file (in the collection's upload folder) is deleted with its
        document (``source_deleted``). The collection stays, even when it is left empty."""
        if (refused := _refused_collection(name, param=None)) is not None:
            return refused  # as GET /collections/{name} (it was a 404 collection_not_found)
        try:
            report = facet.remove_documents(name, key, missing_ok=missing_ok)
        except NotFoundError as e:
            # Which it did not find, as the code (this route is in no table of the error
            # handler's); the collection is the path, not a parameter.
            code = {"key": "document_not_found", "collection": "collection_not_found"}.get(
                e.param or "")
            if code is None:
                raise
            return errors.error_response(404, str(e), "not_found_error",
                                         param="key" if e.param == "key" else None, code=code)
        return _json(asdict(report))

    if settings.ui_mount:
        _mount_ui(app, settings)
    return app


def _openapi(app: FastAPI, settings: FacetSettings) -> None:
    """/openapi.json as a client generator needs it. Without FastAPI's 422
    ``HTTPValidationError``, which it declares for every route with parameters: this API answers
    validation errors with 400 in its own error shape (``errors``), and 422 only for unreadable
    data, where a route declares it so. Every property of a schema only responses use is
    required (``_required_responses``); the texts' limits that are settings are this server's
    (``_setting_limits``); without a key the bearer scheme stays declared and each route's
    security is optional (``_optional_key``). Only documents: the checks are the routes'."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:  # FastAPI's, kept: edited once
            return app.openapi_schema
        spec = generate()
        for operations in spec.get("paths", {}).values():
            for operation in operations.values():
                schema = operation.get("responses", {}).get("422", {}).get("content", {}).get(
                    "application/json", {}).get("schema", {})
                if schema.get("$ref", "").endswith("/HTTPValidationError"):
                    del operation["responses"]["422"]
        schemas = spec.get("components", {}).get("schemas", {})
        for name in ("HTTPValidationError", "ValidationError"):
            schemas.pop(name, None)
        _required_responses(spec)
        _setting_limits(schemas, settings)
        _timestamps(schemas)
        if not settings.api_key:
            _optional_key(spec)
            _cross_site_refusals(spec)
        return spec

    app.openapi = openapi  # type: ignore[method-assign]


CROSS_SITE_403 = ("a browser page of another site, on a server without FACET_API_KEY (code "
                  "cross_site_request): list the site in FACET_CORS_ORIGINS, or set a key")


def _cross_site_refusals(spec: dict[str, Any]) -> None:
    """The 403 that ``KeylessGuard`` answers a page of another site on every route but GET,
    HEAD and OPTIONS of a server without a key, declared on each (only the upload route had it:
    a generated client met an undeclared status on /search, /cluster, a cancel, a delete)."""
    operations = [(method, op) for ops in spec.get("paths", {}).values() for method, op in ops.items()]
    for method, op in operations:
        responses = op.setdefault("responses", {})
        if method.lower() not in ("get", "head", "options") and "400" in responses:
            # The error body every error status has (``ErrorResponse``), as the 400's.
            responses.setdefault("403", {**responses["400"], "description": CROSS_SITE_403})


def _refs(node: Any) -> set[str]:
    """The component names ``node`` refers to (``#/components/schemas/X``), directly."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        found = {ref.rpartition("/")[2]} if isinstance(ref, str) else set()
        return found.union(*(_refs(v) for k, v in node.items() if k != "$ref"))
    if isinstance(node, list):
        return set().union(*(_refs(v) for v in node))
    return set()


def _reached(start: set[str], schemas: dict[str, Any]) -> set[str]:
    seen: set[str] = set()
    todo = list(start)
    while todo:
        name = todo.pop()
        if name not in seen and name in schemas:
            seen.add(name)
            todo.extend(_refs(schemas[name]))
    return seen


def _required_responses(spec: dict[str, Any]) -> None:
    """Every property of a schema that only responses reach is ``required``: the routes render
    each field of their dataclasses and models, null where it is nullable, and a field left
    optional was typed ``T | undefined`` (TypeScript) or ``Optional`` by generated clients
    (``SearchAnswer.note``, ``JobInfo.errors_total``...)."""
    schemas = spec.get("components", {}).get("schemas", {})
    operations = [op for ops in spec.get("paths", {}).values() for op in ops.values()]
    asked = _reached(set().union(*(_refs([op.get("requestBody"), op.get("parameters")])
                                   for op in operations)), schemas)
    answered = _reached(set().union(*(_refs(op.get("responses")) for op in operations)), schemas)
    for name in sorted(answered - asked):
        properties = schemas[name].get("properties")
        if properties:
            schemas[name]["required"] = list(properties)


def _setting_limits(schemas: dict[str, Any], settings: FacetSettings) -> None:
    """The most texts of one call, as this server's settings have them: ``input``'s list
    (``FACET_MAX_TEXTS_PER_CALL``) and ``/cluster``'s ``texts`` (``FACET_MAX_CLUSTER_TEXTS``);
    more is a 413."""
    for schema, field, most in (("EmbeddingsBody", "input", settings.max_texts_per_call),
                                ("ClusterBody", "texts", settings.max_cluster_texts)):
        prop = schemas.get(schema, {}).get("properties", {}).get(field, {})
        for branch in prop.get("anyOf", []):
            if branch.get("type") == "array":
                branch["maxItems"] = most


# The services' timestamps (``utc_text``: ISO 8601 UTC, ``2026-11-28T10:19:45Z``), declared
# plain strings: "date-time" where the value is always one (or null), else said in words.
_DATE_TIMES = {"JobInfo": ("queued_at", "started_at", "finished_at"), "DocumentInfo": ("updated_at",)}
_TIMESTAMP_WORDS = {
    ("DocumentInfo", "updated_at"): "when its row was last written: its content indexed, or its "
                                    "status or metadata changed",
    ("JobInfo", "queued_at"): "when it was asked for",
    ("JobInfo", "started_at"): "when it began running; null for a job that never ran",
    ("JobInfo", "finished_at"): "when it ended; null until then",
    ("ListedCollection", "created_at"): "when it was created, an ISO 8601 UTC timestamp "
                                        "(2026-11-28T10:19:45Z); \"\" for a stray, or a store "
                                        "folder no collection records (no metadata of it)",
}


def _timestamps(schemas: dict[str, Any]) -> None:
    """``format: date-time`` on the timestamps that are always one (or null), so a generated
    client reads them as dates; ``ListedCollection.created_at`` is "" for a stray, so only its
    description says it. ``JobInfo.queued_at``'s "" default is the dataclass's, never answered
    (every job row records when it was queued): dropped."""
    for (schema, field), words in _TIMESTAMP_WORDS.items():
        prop = schemas.get(schema, {}).get("properties", {}).get(field)
        if prop is None:
            continue
        if field in _DATE_TIMES.get(schema, ()):
            for branch in prop.get("anyOf", [prop]):
                if branch.get("type") == "string":
                    branch["format"] = "date-time"
            if prop.get("default") == "":
                del prop["default"]
            words += " (ISO 8601 UTC, 2026-11-28T10:19:45Z)"
        prop["description"] = words


def _optional_key(spec: dict[str, Any]) -> None:
    """Without ``FACET_API_KEY``: the bearer scheme still declared, each route's requirement
    made optional (``[{}, {scheme: []}]``), and the scheme's description saying why, so that a
    client generated from a keyless server can still send a key to one that asks for it."""
    for operations in spec.get("paths", {}).values():
        for operation in operations.values():
            if "security" in operation:
                operation["security"] = [{}, *operation["security"]]
    for scheme in spec.get("components", {}).get("securitySchemes", {}).values():
        scheme["description"] = scheme.get("description", "") + _KEYLESS


def _mount_ui(app: FastAPI, settings: FacetSettings) -> None:
    """The Gradio UI at /ui, over the same facade (built at start-up, hence the provider),
    when the ui extra is installed."""
    import importlib.util

    missing = [m for m in ("gradio", "plotly") if importlib.util.find_spec(m) is None]
    if missing:
        logger.info("no UI at /ui: the ui extra is not installed (%s missing)", ", ".join(missing))
        return
    from ui.app import mount_ui

    def served() -> Facet:
        facet: Facet = app.state.facet
        return facet

    mount_ui(app, served, settings, path="/ui")

    async def to_ui(request: Request) -> Response:
        # "/ui" without its slash: the router no longer redirects (``create_app``). Relative,
        # so that it stays on the scheme and host (and prefix) the browser used.
        query = request.url.query
        return RedirectResponse("ui/" + (f"?{query}" if query else ""))

    app.add_route("/ui", to_ui, methods=["GET", "HEAD"], include_in_schema=False)

