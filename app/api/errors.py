"""The HTTP edge's error mapping: every error is a 4xx/5xx JSON body in OpenAI's shape,

``{"error": {"message": ..., "type": ..., "param": ..., "code": ...}}``,

so the official ``openai`` client raises its own typed errors with our message. Domain
errors map by class (most specific first); request validation errors become 400 naming the
field; bodies over ``FACET_API_MAX_BODY_MB`` are refused before they are parsed (413).
``responses`` declares a route's error statuses in /openapi.json.

Every error answer is logged (``app.api.errors``) with the request's method and path, its
status and message, never a secret (a URL's password or key-like query parameters masked, no
API key, no query string): 5xx at ERROR, except 503 (unavailable) at WARNING; 429 (busy), 422
(data on the server that cannot be read: a damaged collection, a checkpoint) and 401 (with the
client's address) at WARNING; the other 4xx (a client's mistake: 400, 404, 405, 409, 413) at
INFO. docs/api.md says the same.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import ClientDisconnect
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.schemas import ErrorResponse
from app.errors import (
    AuthenticationError,
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
)
from app.text import shorten
from indexer.errors import (
    CollectionNotFoundError,
    SourceNotFoundError,
    StoreDamagedError,
    mask_secrets,
)

logger = logging.getLogger(__name__)

CLIENT_CLOSED_REQUEST = 499  # nginx's status for a request its client gave up

# (class, HTTP status, OpenAI-style type, code); most specific first.
STATUS: list[tuple[type[FacetError], int, str, str | None]] = [
    (UnknownModelError, 404, "invalid_request_error", "model_not_found"),
    (TooLargeError, 413, "invalid_request_error", "request_too_large"),
    (InvalidRequestError, 400, "invalid_request_error", None),
    (AuthenticationError, 401, "authentication_error", "invalid_api_key"),
    (NotFoundError, 404, "not_found_error", None),
    (DataError, 422, "invalid_request_error", "unreadable_data"),
    (ConflictError, 409, "conflict_error", None),
    (BusyError, 429, "rate_limit_error", "busy"),
    (UnavailableError, 503, "server_error", "unavailable"),
    (ModelError, 500, "server_error", "model_error"),
    (FacetError, 500, "server_error", None),
]

# A NotFoundError's code: it says what was not found only in words, so by the lower error it
# was translated from, else by the route that raised it (every 404 read "not_found_error" with
# code null: an unknown collection, job, path and endpoint told apart by their message only).
_NOT_FOUND_CAUSES: list[tuple[type[Exception], str]] = [
    (CollectionNotFoundError, "collection_not_found"),
    (SourceNotFoundError, "source_not_found"),
]
_NOT_FOUND_ROUTES: dict[tuple[str, str], str] = {
    ("GET", "/jobs/{job_id}"): "job_not_found",
    ("POST", "/jobs/{job_id}/cancel"): "job_not_found",
    ("POST", "/jobs"): "source_not_found",  # the path to index; the collection is created
    ("GET", "/jobs"): "collection_not_found",
    ("GET", "/collections/{name}"): "collection_not_found",
    ("DELETE", "/collections/{name}"): "collection_not_found",
    ("POST", "/search"): "collection_not_found",  # unknown, or nothing searchable yet
    ("POST", "/cluster"): "collection_not_found",
}


# What each status means, as /openapi.json says it; each route declares the ones it answers.
MEANING: dict[int, str] = {
    400: "invalid request: a field that does not validate (named in param), a body that is not "
         "a JSON object, a value the service refuses",
    401: "missing or wrong API key: send 'Authorization: Bearer <FACET_API_KEY>'",
    404: "not found: an unknown collection (code collection_not_found), job (job_not_found), "
         "path to index (source_not_found), document to remove (document_not_found) or "
         "endpoint (route_not_found), or a model not served here (model_not_found)",
    409: "conflict: another process writes the collection, or it holds vectors of another "
         "version of the embedder",
    413: "too large: a body over FACET_API_MAX_BODY_MB, or more texts than a limit allows (code "
         "request_too_large)",
    422: "unreadable data: a source or checkpoint that cannot be read (code unreadable_data)",
    429: "busy: the encoder's queue is full (FACET_MAX_PENDING_TEXTS); retry after Retry-After "
         "seconds (code busy)",
    500: "server-side failure (a database out of reach, an embedder that failed on its own: "
         "code model_error...); the server log has the details",
    503: "unavailable: a part the request needs is not installed or not running (a worker, the "
         "broker, the store server; code unavailable); with Retry-After where it may come back "
         "by itself (a server out of reach, no worker answering), without where someone must act "
         "(an extra not installed, a setting missing, a disk full)",
}
_HEADERS: dict[int, dict[str, Any]] = {
    401: {"WWW-Authenticate": {"description": "Bearer", "schema": {"type": "string"}}},
    429: {"Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}},
    503: {"Retry-After": {"description": "seconds to wait; only where the outage may pass by "
                                         "itself", "schema": {"type": "integer"}}},
}


# 429 where the metadata database is written (``app.errors.as_domain_error``'s BusyError for
# SQLite's "database is locked" or PostgreSQL's lock timeout): the route's ``meaning``.
BUSY_DATABASE = ("busy: the metadata database stayed locked by another process's write (an index "
                 "job, a CLI) for the whole wait; retry after Retry-After seconds (code busy)")


def responses(*statuses: int,
              meaning: dict[int, str] | None = None) -> dict[int | str, dict[str, Any]]:
    """A route's ``responses=``: ``statuses`` with the error body, what each means (``MEANING``,
    or the route's own ``meaning``) and its headers."""
    meaning = MEANING | (meaning or {})
    return {status: {"model": ErrorResponse, "description": meaning[status],
                     **({"headers": _HEADERS[status]} if status in _HEADERS else {})}
            for status in sorted(statuses)}


def error_body(message: str, type_: str, param: str | None = None,
               code: str | None = None) -> dict[str, Any]:
    """The JSON body of an error response."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


# The most of a quoted name an error message shows (``cut_names``). A quote opens a name only
# where no letter or digit comes before it and closes one only where none follows: the text
# from the closing quote of 'two' to the apostrophe of "app's" was cut as one long name
# ("... from a web a…' (202 characters)s several workers").
MAX_SHOWN_NAME = 200
_QUOTED = re.compile(rf"""(?<!\w)(['"])([^'"]{{{MAX_SHOWN_NAME}}})([^'"]+)\1(?!\w)""")


def cut_names(message: str) -> str:
    """``message`` with each quoted name over ``MAX_SHOWN_NAME`` characters cut there, saying
    its length: a 200,001-character collection came back whole in a 200 KB "invalid collection
    name" body, a 60,000-character one in a 60 KB 404."""
    return _QUOTED.sub(lambda m: f"{m[1]}{m[2]}…{m[1]} ({len(m[2]) + len(m[3]):,} characters)",
                       message)


def error_response(status: int, message: str, type_: str, param: str | None = None,
                   code: str | None = None, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(cut_names(message), type_, param, code), status_code=status,
                        headers=headers)


def domain_status(error: FacetError) -> tuple[int, str, str | None]:
    """(status, type, code) for a domain error."""
    return next((status, type_, code) for cls, status, type_, code in STATUS
                if isinstance(error, cls))


def _not_found_code(request: Request, error: NotFoundError) -> str | None:
    """What a ``NotFoundError`` did not find, as its code (``_NOT_FOUND_CAUSES``, then
    ``_NOT_FOUND_ROUTES``); None where neither says."""
    cause = error.__cause__
    while cause is not None:
        code = next((c for cls, c in _NOT_FOUND_CAUSES if isinstance(cause, cls)), None)
        if code is not None:
            return code
        cause = cause.__cause__
    route = request.scope.get("route")
    return _NOT_FOUND_ROUTES.get((request.method, getattr(route, "path", "")))


def _causes(error: BaseException) -> list[BaseException]:
    """The errors ``error`` was raised from (``raise ... from``), nearest first."""
    chain: list[BaseException] = []
    cause = error.__cause__
    while cause is not None and cause not in chain:
        chain.append(cause)
        cause = cause.__cause__
    return chain


def log_answer(request: Request, status: int, message: str, code: str | None = None, *,
               collection: str | None = None) -> None:
    """One log line for an error answer, at the level its status calls for (the module's
    docstring): method, path (never the query string, which may carry a key), status, code, the
    collection where known and not in the message already, and the message, secrets masked."""
    if status == 401:
        client = request.client.host if request.client is not None else "unknown"
        # Never the key sent, right or wrong: only that one was refused, and from where. INFO:
        # the WARNINGs are the server's ``_RefusedKeys`` lines, the first from a client and one
        # a minute counting the rest (this one, a WARNING too, made one a request again).
        logger.info("%s %s answered 401 (missing or wrong API key) to client %s",
                    request.method, request.url.path, client)
        return
    if status >= 500 and status != 503:
        level = logging.ERROR
    elif status in (422, 429, 503):
        level = logging.WARNING
    else:
        level = logging.INFO
    if not logger.isEnabledFor(level):
        return
    text = cut_names(mask_secrets(" ".join(message.split())))
    what = f"{status} ({code})" if code else str(status)
    # A path's name over any collection's length cut, and said once: a 5,000-character name in
    # the path was a 10,250-character line, the path and the label each holding it whole (the
    # verification round of the third session of 2026-12-07).
    if collection and len(collection) <= MAX_SHOWN_NAME and repr(collection) not in text:
        what += f", collection {collection!r}"
    path = request.url.path
    if len(path) > 2 * MAX_SHOWN_NAME:
        path = shorten(path, MAX_SHOWN_NAME)
    logger.log(level, "%s %s answered %s: %s", request.method, path, what, text)


def _collection_of(request: Request, exc: BaseException) -> str | None:
    """The collection an error is about, where it says (a store error's ``collection``) or the
    route names it in its path (``/collections/{name}``)."""
    for error in (exc, *_causes(exc)):
        name = getattr(error, "collection", None)
        if isinstance(name, str) and name != "*":
            return name
    route = getattr(request.scope.get("route"), "path", "")
    name = request.path_params.get("name") if route.startswith("/collections/") else None
    return name if isinstance(name, str) else None


async def _facet_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, FacetError)
    status, type_, code = domain_status(exc)
    if status == 400 and any(isinstance(c, StoreDamagedError) for c in _causes(exc)):
        # A service's "the store refused it" (InvalidRequestError) over a collection whose
        # files cannot be read: the data on the server's disk, not the request, is at fault
        # (``as_domain_error``'s DataError); it was a 400 blaming the client.
        status, type_, code = domain_status(DataError(""))
    if code is None and isinstance(exc, NotFoundError):
        code = _not_found_code(request, exc)
    headers = None
    wait = exc.retry_after_s if isinstance(exc, BusyError | UnavailableError) else None
    if wait is not None:  # (503: only an outage that may pass by itself has one)
        headers = {"Retry-After": str(max(1, round(wait)))}
    # Never a URL's password or key in the body either (the lower packages mask theirs).
    message = mask_secrets(str(exc))
    log_answer(request, status, message, code, collection=_collection_of(request, exc))
    # The field the core named (``FacetError.param``): it was null for every domain error.
    return error_response(status, message, type_, exc.param, code=code, headers=headers)


# Where FastAPI says a request value was; not part of the field's name.
_PLACES = ("body", "query", "path", "header", "cookie")


def _location(loc: tuple[Any, ...]) -> str:
    """The field a validation error names: ``k``, ``search.k``, ``input[1]``; a query or path
    parameter by its name alone (``limit``, ``job_id``: they read "query.limit" and
    "path.job_id" where a body's field read "k")."""
    out = ""
    for p in _named(loc):
        # A list's index is a number; a field or parameter named "7" is a name (it read "[7]").
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _named(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """``loc`` without its place (``body``, ``query``, ``path``): empty for the body as a whole."""
    return loc[1:] if loc[:1] and loc[0] in _PLACES else loc


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    first = errors[0] if errors else {"loc": (), "msg": "invalid request", "type": ""}
    # The field named, "" included (a query parameter or body field named "": it was null);
    # None for the body as a whole.
    loc = tuple(first.get("loc", ()))
    param: str | None = _location(loc) if _named(loc) else None
    if first.get("type") == "json_invalid":
        message = (f"the request body is not valid JSON ({first.get('msg')}); send a JSON object "
                   "with Content-Type: application/json")
        param = None
    elif param is None:  # the body as a whole: missing, a form, a JSON array or string
        message = ("the request body must be a JSON object sent with Content-Type: "
                   f"application/json ({first.get('msg')})")
    elif first.get("type") == "extra_forbidden" and loc[:1] == ("query",):
        # A query parameter the route does not take (``server._known_query``): ``?colection=b1``
        # listed every collection's jobs.
        message = f"unknown query parameter {param!r}; check its spelling against docs/api.md"
    elif first.get("type") == "extra_forbidden":
        message = f"unknown field {param!r}; check its spelling against docs/api.md"
    elif first.get("type") == "missing":
        message = f"{param} is required"
    elif "Expected UploadFile" in str(first.get("msg", "")):
        # (it read "files[0]: Value error, Expected UploadFile, received: <class 'str'>": a part
        # sent as a field, or a file part with no plain filename)
        message = (f"{param} is not a file: each part named files must be one, with a filename in "
                   "its Content-Disposition (curl -F files=@PATH)")
    else:
        message = f"{param}: {first.get('msg')}"
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    log_answer(request, 400, message)
    return error_response(400, message, "invalid_request_error", param)


# The codes of the key check's 401 (``server._require_key``) and the router's 405; its 404
# is ``route_not_found``.
_HTTP_CODES = {401: "invalid_api_key", 405: "method_not_allowed"}


async def http_error(request: Request, exc: Exception) -> JSONResponse:
    """The answer to an ``HTTPException`` (the app's handler of them; a middleware's too)."""
    assert isinstance(exc, StarletteHTTPException)
    type_ = {401: "authentication_error", 404: "not_found_error",
             405: "invalid_request_error"}.get(exc.status_code, "invalid_request_error")
    message = str(exc.detail)
    code = _HTTP_CODES.get(exc.status_code)
    where = f"{request.method} {request.url.path}"
    if exc.status_code == 404 and message == "Not Found":
        code, message = "route_not_found", f"no such endpoint {where}"
        meant = _without_slash(request)
        if meant and request.url.query:  # "/collections/?x=1" suggested "/collections"
            meant += f"?{request.url.query}"
        # GET /info lists no routes; /openapi.json does.
        message += (f"; did you mean {meant}?" if meant else
                    "; see GET /openapi.json or docs/api.md for the routes")
    elif exc.status_code == 405 and message == "Method Not Allowed":
        allow = _allowed(request) or (exc.headers or {}).get("Allow", "")
        exc.headers = {**(exc.headers or {}), "Allow": allow}
        message = f"method {request.method} is not allowed on {request.url.path}; use {allow}"
    elif exc.status_code == 400 and (files := _too_many_files(exc)) is not None:
        # A multipart body of more files than the form parser takes (its ``max_files``): a
        # 400 "Too many files. Maximum number of files is 1000." with no advice, where a body
        # over FACET_API_MAX_BODY_MB is a 413 saying what to do.
        log_answer(request, 413, files, "request_too_large")
        return error_response(413, files, "invalid_request_error", code="request_too_large")
    elif exc.status_code == 400 and message == "There was an error parsing the body" and \
            isinstance(exc.__cause__, ClientDisconnect):
        # No mistake of the client's: it went away mid-body; nobody reads an answer.
        logger.info("%s %s: the client disconnected before its request body was read; nothing "
                    "was done", request.method, request.url.path)
        return JSONResponse(None, status_code=CLIENT_CLOSED_REQUEST)
    elif exc.status_code == 400 and message == "There was an error parsing the body" and \
            (full := temp_full_message(exc.__cause__)) is not None:
        # The form parser spools a part over 1 MB to the temporary folder: full, the upload
        # was "the request body could not be read as JSON (OSError)", a 400.
        log_answer(request, 503, full, "unavailable")
        return error_response(503, full, "server_error", code="unavailable")
    elif exc.status_code == 400 and message == "There was an error parsing the body":
        encoding = request.headers.get("content-encoding", "identity").strip().lower()
        # A gzip body was blamed on "not UTF-8 (byte 0x8b at offset 1)".
        message = (f"the request body is sent with Content-Encoding: {encoding}, which this server "
                   "does not decode; send it uncompressed"
                   if encoding not in ("", "identity") else _unparsed_body(exc.__cause__))
    log_answer(request, exc.status_code, message, code)
    return error_response(exc.status_code, message, type_, code=code,
                          headers=dict(exc.headers) if exc.headers else None)


# Starlette's refusal of a multipart body of too many files (``MultiPartParser.max_files``).
# The exception's type (``MultiPartException``, the HTTPException's ``__context__``: Starlette
# raises the 400 inside its ``except``) is shared with "Too many fields." and a malformed
# body's errors, so only its message tells this one apart: matched whole.
_TOO_MANY_FILES = re.compile(r"Too many files\. Maximum number of files is (\d+)\.")


def _too_many_files(exc: StarletteHTTPException) -> str | None:
    """The 413 message for a form of more files than the parser takes, else None."""
    context = exc.__context__
    if not isinstance(context, MultiPartException):
        return None
    match = _TOO_MANY_FILES.fullmatch(context.message)
    if match is None:
        return None
    limit = int(match[1])
    return (f"the request holds more than {limit:,} files, the most one request may send; "
            f"upload at most {limit:,} files per request (split the upload into several)")


_METHOD_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _allowed(request: Request) -> str:
    """The methods the routes of the request's path take, HEAD wherever GET is (``server``'s
    ``_HeadAsGet``): Starlette's 405 named the first route of the path only ("Allow: POST" on
    /jobs, which GET lists too)."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        if getattr(route, "methods", None) and route.matches(request.scope)[0] is not Match.NONE:
            methods |= set(route.methods)
    if "GET" in methods:
        methods.add("HEAD")
    return ", ".join(sorted(methods, key=lambda m: (*_METHOD_ORDER, m).index(m)))


def _without_slash(request: Request) -> str | None:
    """The request's path without its trailing slashes where a route takes that (any method),
    else None. The router no longer redirects there (``redirect_slashes=False``): its 307 sent
    an empty body and an absolute http:// URL, which behind a TLS proxy led clients off it."""
    path = request.scope["path"]
    stripped = path.rstrip("/")
    if not stripped or stripped == path:
        return None
    scope = {**request.scope, "path": stripped}
    if any(route.matches(scope)[0] is not Match.NONE for route in request.app.router.routes):
        return request.url.path.rstrip("/")
    return None


def temp_full_message(error: BaseException | None) -> str | None:
    """What to say where ``error`` is the server's temporary folder full (ENOSPC, EDQUOT: where
    uploads are received, ``TMPDIR``), else None."""
    import errno
    import tempfile

    if not isinstance(error, OSError) or error.errno not in (errno.ENOSPC, errno.EDQUOT):
        return None
    return (f"the server's temporary folder ({tempfile.gettempdir()}), where uploads are "
            f"received, is full ({error.strerror or error}): free some space there, or point "
            "TMPDIR at a disk with room, and send it again; nothing was staged")


def _unparsed_body(cause: BaseException | None) -> str:
    """Why the JSON reader gave up on a body, from the error FastAPI chained to its own "There
    was an error parsing the body" (every cause was once blamed on nesting or a long number:
    a Latin-1 "café" too)."""
    if isinstance(cause, UnicodeDecodeError):  # before ValueError: it is one
        byte = cause.object[cause.start:cause.start + 1].hex()
        why = (f"is not UTF-8 (byte 0x{byte} at offset {cause.start} is not valid there); "
               "send the JSON encoded as UTF-8")
    elif isinstance(cause, RecursionError):
        why = "is JSON nested too deeply to read; send a JSON object with fewer levels"
    elif isinstance(cause, ValueError) and "digits" in str(cause):
        why = (f"holds a number of more than {sys.get_int_max_str_digits()} digits, too long to "
               "read; send a shorter number")
    else:
        why = (f"could not be read as JSON ({type(cause).__name__ if cause else 'no reason given'}); "
               "send a JSON object with Content-Type: application/json")
    return f"the request body {why}"


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("%s %s answered 500: unexpected error (%s)", request.method,
                     request.url.path, type(exc).__name__)
    return error_response(500, f"internal error ({type(exc).__name__}); the server log has the "
                               "details", "server_error")


def install(app: FastAPI) -> None:
    """Register the error handlers on ``app``."""
    app.add_exception_handler(FacetError, _facet_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, _unexpected)  # what escapes the middleware below
    app.add_middleware(UnexpectedErrorMiddleware)


class UnexpectedErrorMiddleware:
    """Answers an unexpected exception with the JSON 500 and ends the request there.

    Starlette runs a handler registered for ``Exception`` in its outermost middleware, which
    sends the response and then raises the exception again for the server to log: uvicorn
    then closed the keep-alive connection, so the client's next request on it failed
    (``Connection reset by peer``). Caught here, inside that middleware, the exception is
    logged once and the connection stays open.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as exc:
            if started:  # part of a response is out: nothing well-formed can follow
                raise
            response = await _unexpected(Request(scope), exc)
            await response(scope, receive, send)


def declares_body(headers: dict[bytes, bytes]) -> bool:
    """Whether a request's headers (an ASGI scope's, as a dict) say a body follows: a
    Content-Length other than 0, or Transfer-Encoding (chunked)."""
    return b"transfer-encoding" in headers or \
        headers.get(b"content-length", b"").strip() not in (b"", b"0")


class BodyLimitMiddleware:
    """Refuses request bodies over ``max_bytes`` with 413, before the app parses them.

    A declared ``Content-Length`` is checked first; a body without one (chunked) is read up
    to the limit and then replayed to the app.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, max_mb: float | None = None) -> None:
        """``max_mb``: the limit as configured, for the message (default ``max_bytes`` in MB)."""
        self.app = app
        self.max_bytes = max_bytes
        self.max_mb = max_mb

    async def _refuse(self, scope: Scope, send: Send, size: str) -> None:
        # The MB as configured, and the bytes the body is compared with: 0.01 MB was printed
        # from the whole bytes as "0.00999928 MB".
        mb = self.max_mb if self.max_mb is not None else self.max_bytes / 2**20
        # An upload's advice is about files, every other route's about texts.
        advice = ("upload fewer or smaller files per request" if
                  str(scope.get("path", "")).endswith("/uploads") else
                  "send fewer or shorter texts per request")
        message = (f"the request body is {size}, over the limit of {mb:g} MB ({self.max_bytes} "
                   f"bytes; FACET_API_MAX_BODY_MB); {advice}")
        await self._answer(scope, send, 413, message, "request_too_large")

    @staticmethod
    async def _answer(scope: Scope, send: Send, status: int, message: str, code: str | None) -> None:
        # Logged as every error answer is (it answered before any route: no line at all).
        log_answer(Request(scope), status, message, code)
        body = json.dumps(error_body(message, "invalid_request_error", code=code)).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        encoding = headers.get(b"content-encoding", b"").decode("latin-1").strip().lower()
        if encoding not in ("", "identity") and declares_body(headers):
            # A body is never decoded: a plain one sent under gzip, deflate or br went through
            # as if uncompressed, and a real deflate or br one was "not valid JSON".
            shown = encoding if encoding.isprintable() and len(encoding) <= 40 else f"{encoding[:40]!r}"
            await self._answer(scope, send, 400, f"the request body is sent with Content-Encoding: "
                               f"{shown}, which this server does not decode; send it uncompressed",
                               None)
            return
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                length = -1
            if length > self.max_bytes:
                await self._refuse(scope, send, f"{length} bytes")
                return
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(scope, send, f"over {size} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
