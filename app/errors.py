"""Domain errors of the application core.

They say what was wrong and how to fix it, and nothing about how an edge reports them:
the CLI maps each class to an exit code (``app.cli``), the HTTP API to a 4xx status
(``app.api.errors``), the UI to ``gr.Error`` and a worker to retry-or-fail. Errors from
the lower packages (``embedders.errors``, ``indexer.errors``) are translated into these by
the core (``as_domain_error``), so an edge only ever handles ``FacetError``.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar


class FacetError(Exception):
    """Base class of every error the application core raises on purpose.

    ``param`` names the one request field the error is about, as the HTTP API names it
    (``k``, ``query``, ``collection``, ``search.k``), where there is exactly one; None where it
    is about several fields or none. The HTTP edge sends it as the error body's ``param`` (it
    was always null for these, so generated clients could not attach the error to a field).
    It is an attribute, not an argument of ``args``: ``str(error)`` is the message alone, and
    a pickled error keeps it (``Exception`` pickles ``__dict__`` with ``args``).
    """

    def __init__(self, *args: object, param: str | None = None) -> None:
        super().__init__(*args)
        self.param = param


_E = TypeVar("_E", bound="FacetError")


def reworded(error: _E, message: str) -> _E:
    """``error`` with ``message`` for its text, its class and attributes kept (``param``, a
    ``BusyError``'s or ``UnavailableError``'s ``retry_after_s``): ``type(e)(message)`` lost them,
    so a 503 of a broker out of reach, said again as "index job N could not be started: ...",
    had no ``Retry-After``."""
    copied = copy.copy(error)
    copied.args = (message,)
    return copied


class InvalidRequestError(FacetError, ValueError):
    """The request itself is malformed (empty query, bad filter, unknown option value).

    A ``ValueError`` too, as Python's refusals of a bad argument value are: a caller's
    ``except ValueError`` (a LangChain chain's, a script's) catches ``k=0`` or an empty query
    as it catches any other bad value. (Raised inside a pydantic validator it is therefore
    wrapped in a ``ValidationError``, as any ``ValueError`` is: unwrap it there.)
    """


class AuthenticationError(FacetError):
    """A Facet server refused the API key sent, or asked for one none was sent (HTTP 401): raised
    by the HTTP clients (``FacetRetriever(url=...)``), never by the core itself. Not a
    ``ValueError``: a chain's ``except ValueError`` fallback for a bad request must not swallow
    a wrong key (it was an ``InvalidRequestError`` until 2026-12-01)."""


class NotFoundError(FacetError):
    """A named thing (collection, job, document, path) does not exist."""


class UnknownModelError(NotFoundError):
    """An embedder name that is neither registered nor a checkpoint (or not allowed here)."""


class DataError(FacetError):
    """An input file cannot be read or parsed; the message names the file and line."""


class ConflictError(FacetError):
    """The request is valid but clashes with the current state (a collection being written)."""


class TooLargeError(InvalidRequestError):
    """The request is over a configured limit (texts per call, bytes); the message names it."""


class BusyError(FacetError):
    """Too much work is already waiting; retry later. ``retry_after_s`` is a hint."""

    def __init__(self, message: str, retry_after_s: float = 1.0, *,
                 param: str | None = None) -> None:
        super().__init__(message, param=param)
        self.retry_after_s = retry_after_s


# How long a client is asked to wait (``Retry-After``) where a part the request needs is out
# of reach and may come back by itself: a server down or restarting, no worker answering.
OUTAGE_RETRY_AFTER_S = 5.0


class UnavailableError(FacetError):
    """A part the request needs is not installed or not running (an optional extra, a worker).

    ``retry_after_s``: set where the cause may pass by itself (a broker, database or Qdrant
    server out of reach, no worker answering: ``OUTAGE_RETRY_AFTER_S``), so the HTTP edge
    answers 503 with ``Retry-After``; None where it will not without someone acting (an extra
    not installed, a setting missing, a disk full), and the 503 carries none: a client that
    honours the header should not poll those."""

    def __init__(self, *args: object, retry_after_s: float | None = None,
                 param: str | None = None) -> None:
        super().__init__(*args, param=param)
        self.retry_after_s = retry_after_s


class ModelError(FacetError):
    """An embedder failed on its own, not for the request's input: a plugin's ``EmbedderError``
    other than ``InvalidInputError`` (its backend crashed), or a plugin that breaks the
    contract (``embedders.errors.PluginError``). The server's fault (HTTP 500, code
    ``model_error``), its message shown: it was a 400 blaming the request."""


class ModelOutputError(ModelError):
    """The embedder gave vectors that cannot be used for some of the texts (NaN, infinite, all
    zero; ``embedders.registry.UnusableVectorsError``). Still the model's fault (as
    ``ModelError``); an index run encodes the batch's documents apart on it and records those
    the model fails as failed documents, writing the rest."""


def _moved_under(error: Any) -> str:
    """What to say of a write refused because facet.db was moved after the process opened it
    (``MetadataFileMovedError``): the move's own words where it left its record."""
    from app.services.context import moved_message, moved_record

    data_dir = Path(error.path).parent
    record = moved_record(data_dir) if Path(error.path).name == "facet.db" else None
    then = moved_message(data_dir, record) if record is not None else "run the command again"
    return f"{error}, so its last write was not kept: {then}"


def as_domain_error(error: Exception) -> FacetError | None:
    """The domain error for an error of the lower packages, or None if it is not one of theirs.

    ``embedders`` errors: unknown name -> ``UnknownModelError``, bad input
    (``InvalidInputError``) -> ``InvalidRequestError``, unreadable checkpoint -> ``DataError``,
    any other (an embedder's own failure, a plugin breaking the contract) -> ``ModelError``;
    ``indexer`` errors: missing collection -> ``NotFoundError``, a collection another process
    has open -> ``ConflictError``, a store server out of reach -> ``UnavailableError``, a
    collection whose store files cannot be read (damaged) -> ``DataError``, other store
    refusals -> ``InvalidRequestError``; SQLite's "database is locked" after its busy timeout,
    PostgreSQL's lock timeout -> ``BusyError``.
    """
    from embedders.errors import (
        CheckpointError,
        DeviceUnavailableError,
        EmbedderError,
        InvalidInputError,
        UnknownEmbedderError,
        UnusableVectorsError,
    )
    from indexer.errors import (
        CollectionNotFoundError,
        IndexerError,
        MetadataFileMovedError,
        SourceNotFoundError,
        SourceUnavailableError,
        StoreBusyError,
        StoreDamagedError,
        StoreUnavailableError,
        StoreUnreachableError,
    )

    if isinstance(error, FacetError):
        return error
    if isinstance(error, UnknownEmbedderError):
        return UnknownModelError(str(error))
    if isinstance(error, DeviceUnavailableError):
        # The machine lacks the device (exit 7, as FACET_DEVICE=cuda without a GPU always was;
        # mps and a cuda:N past the GPUs were data errors, exit 4).
        return UnavailableError(str(error))
    if isinstance(error, CheckpointError):
        return DataError(str(error))
    if isinstance(error, InvalidInputError):
        return InvalidRequestError(str(error))
    if isinstance(error, UnusableVectorsError):
        return ModelOutputError(str(error))
    if isinstance(error, EmbedderError):
        return ModelError(str(error))
    if isinstance(error, MetadataFileMovedError):
        return NotFoundError(_moved_under(error))
    if isinstance(error, CollectionNotFoundError | SourceNotFoundError):
        return NotFoundError(str(error))
    if isinstance(error, StoreBusyError):
        return ConflictError(str(error))
    if isinstance(error, StoreUnreachableError):
        return UnavailableError(str(error), retry_after_s=OUTAGE_RETRY_AFTER_S)
    if isinstance(error, StoreUnavailableError | SourceUnavailableError):
        return UnavailableError(str(error))
    if isinstance(error, StoreDamagedError):
        # The data on disk, not the request (it was a 400 invalid_request_error).
        return DataError(str(error))
    if isinstance(error, IndexerError):
        return InvalidRequestError(str(error), param=getattr(error, "param", None))
    from sqlalchemy.exc import OperationalError

    from indexer.metadata import SQLITE_BUSY_TIMEOUT_S

    if isinstance(error, OperationalError):
        # Another process held SQLite's write lock, or a PostgreSQL session a table's lock
        # (lock_timeout, SQLSTATE 55P03), for the whole wait: it was a 60-line traceback.
        sqlite = "database is locked" in str(error.orig)
        if sqlite or getattr(error.orig, "sqlstate", None) == "55P03":
            return BusyError(f"the metadata database ({'SQLite' if sqlite else 'PostgreSQL'}) "
                             f"stayed locked by another process's write for the whole wait "
                             f"({SQLITE_BUSY_TIMEOUT_S} s); try again when it is done",
                             retry_after_s=5.0)
        said = str(error.orig).lower()
        if "database or disk is full" in said or "disk i/o error" in said:
            full = database_disk_full()
            if full is not None or "full" in said:
                return UnavailableError(full or "the metadata database's disk is full (SQLite: "
                                        "database or disk is full): free some space on it and "
                                        "try again")
            place = _sqlite_place()
            folder = place[0] if place is not None else None
            try:
                reachable = folder is not None and os.path.isdir(folder) and bool(os.listdir(folder))
            except OSError:
                reachable = False
            if reachable:
                # Its folder reads fine: a file system SQLite cannot use (its WAL maps a shared
                # memory file: an SSHFS mount with direct_io, some SMB and FUSE mounts refuse).
                return UnavailableError(
                    f"the metadata database could not be read or written (SQLite: disk I/O error) "
                    f"though its folder {folder} can be read: its file system may not give SQLite "
                    "the shared memory and locks it needs (a network or FUSE mount); keep the data "
                    "folder on a local disk, or the metadata in PostgreSQL (FACET_DATABASE_URL)")
            # The disk under the file went away (a drive pulled, a share unmounted): the work
            # stopped there, mid-write, as a 100-line traceback.
            return UnavailableError("the metadata database could not be read or written (SQLite: "
                                    "disk I/O error): is the disk of the data folder still there "
                                    "(a drive removed, a network share gone)? Once it is back, "
                                    "run the command again: an index job resumes where it stopped")
        limit = connection_limit(error)
        if limit is not None:  # (other sessions end: it passes)
            return UnavailableError(connection_limit_text(limit),
                                    retry_after_s=OUTAGE_RETRY_AFTER_S)
        if database_server_gone(error):
            # A PostgreSQL stopped or restarted under a running server: each request was a 500
            # "internal error (OperationalError)" with a traceback, as if Facet had a bug.
            from app.settings import mask_passwords

            said = str(error.orig or error)
            first = next((line.strip() for line in said.splitlines() if line.strip()), "")
            if not database_may_come_back(error):
                # The server answered with a refusal of its own (its database dropped, a
                # password changed): "out of reach ... retry when it is back" with Retry-After,
                # for what waiting never mends (the verification round of the third session of
                # 2026-12-07).
                return UnavailableError(f"the metadata database (PostgreSQL) refused the "
                                        f"connection: {mask_passwords(first)}; nothing was "
                                        "changed: check its database, user and password "
                                        "(FACET_DATABASE_URL)")
            return UnavailableError(f"the metadata database (PostgreSQL) is out of reach: "
                                    f"{mask_passwords(first)}; nothing was changed: retry when "
                                    "it is back (FACET_DATABASE_URL)",
                                    retry_after_s=OUTAGE_RETRY_AFTER_S)
    return None


def database_disk_full(settings: Any = None) -> str | None:
    """``indexer.errors.disk_full_text`` for the disk the SQLite metadata database is on
    (``settings``', by default this process's): the data folder's, or where
    ``FACET_DATABASE_URL`` puts its file (its full disk was said as the data folder's, which
    had room, and at open as "disk I/O error; check FACET_DATABASE_URL"); None for a
    PostgreSQL database, or a disk with room."""
    from indexer.errors import disk_full_text

    place = _sqlite_place(settings)
    if place is None:
        return None
    folder, file = place
    if file is None:
        return disk_full_text(folder)
    return disk_full_text(folder, f"the metadata database {file}", "FACET_DATABASE_URL")


def _sqlite_place(settings: Any = None) -> tuple[Any, Any] | None:
    """Where the SQLite metadata database of ``settings`` (by default this process's) lies:
    ``(folder, None)`` for the data folder's facet.db, ``(folder, file)`` for the file a
    ``FACET_DATABASE_URL`` names; None for another database or settings that cannot be read."""
    from indexer.migrate import sqlite_file

    if settings is None:
        from app.settings import get_settings

        try:
            settings = get_settings()
        except Exception:
            return None
    if settings.database_url is None:
        return settings.data_dir, None
    file = sqlite_file(settings.database_url)
    return (file.parent, file) if file is not None else None


def connection_limit(error: Exception) -> str | None:
    """PostgreSQL's reason where a SQLAlchemy error is its refusal of one more connection
    (SQLSTATE 53300: "sorry, too many clients already" at its max_connections, "too many
    connections for role/database ..." at a CONNECTION LIMIT; psycopg's connect gives it as
    text only), else None."""
    orig = getattr(error, "orig", None) or error
    # (Also the slots a server keeps for superusers, "remaining connection slots are reserved
    # for ...": the usual words of a full server to an application's role.)
    found = re.search(r"(sorry, too many clients already|too many connections for [^\n;]*|"
                      r"remaining connection slots are reserved for [^\n;]*)", str(orig))
    if found is not None:
        return found.group(1).strip()
    return "too many connections" if getattr(orig, "sqlstate", None) == "53300" else None


def connection_limit_text(reason: str) -> str:
    """What to say of ``connection_limit``: the server is up but full (it was "out of reach",
    and at a command's start "check FACET_DATABASE_URL", though the URL was right)."""
    return (f"the metadata database (PostgreSQL) takes no more connections ({reason}); nothing "
            "was changed: retry, or raise the limit it names (max_connections for too many "
            "clients; a role's or a database's CONNECTION LIMIT): each `facet serve` or `facet "
            "ui` keeps up to 5 connections open and opens up to 15 at once, each worker process "
            "1 or 2 (docs/deploy.md)")


def database_server_gone(error: Exception) -> bool:
    """Whether a SQLAlchemy error is a database server out of reach: its connection refused,
    closed or invalidated (SQLSTATE class 08, an administrator's shutdown 57P01-57P03, or no
    SQLSTATE from a driver that never connected)."""
    if getattr(error, "connection_invalidated", False):
        return True
    orig = getattr(error, "orig", None)
    if orig is None or not type(orig).__module__.startswith("psycopg"):
        return False
    state = getattr(orig, "sqlstate", None)
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


# A server's refusals of a connection that waiting does not mend: the database, the role or its
# right to log in is not there, the password is wrong, the client's address is not allowed.
# Any other (a server starting or shutting down; PgBouncer's "pgbouncer cannot connect to
# server" while the database behind it is down) may pass.
_LASTING_REFUSALS = ("does not exist", "password authentication failed", "authentication failed",
                     "no pg_hba.conf entry", "permission denied", "is not permitted to log in",
                     "password is required", "certificate")


def database_may_come_back(error: Exception) -> bool:
    """Whether a database error that stopped a connection may pass by itself (a 503's
    ``Retry-After``): ``database_server_gone``, except where the server answered the connection
    with a lasting refusal of its own (``FATAL: database "x" does not exist``, a password
    refused: a connect's error carries no SQLSTATE, so its words tell it), which waiting does
    not mend."""
    if not database_server_gone(error):
        return False
    said = str(getattr(error, "orig", None) or error)
    return "FATAL:" not in said or not any(words in said for words in _LASTING_REFUSALS)


@contextlib.contextmanager
def domain_errors() -> Iterator[None]:
    """Let the block's errors of the lower packages out as their domain errors (``as_domain_error``);
    domain errors and anything else pass unchanged."""
    try:
        yield
    except FacetError:
        raise
    except Exception as e:
        domain = as_domain_error(e)
        if domain is None:
            raise
        raise domain from e


def check_named_embedder(name: str, source: str, verb: str = "loaded") -> None:
    """``embedders.registry.check_embedder(name)`` (no weights loaded, options checked) for a name
    a setting or an option gave: its refusal as one ``InvalidRequestError`` naming ``source``
    ("FACET_API_MODELS names 'minlm', which cannot be served: unknown embedder ...").

    Raises:
        InvalidRequestError: ``name`` cannot be loaded (unknown, an unreadable checkpoint, an
            option it does not offer).
    """
    reason = embedder_refusal(name)
    if reason is not None:
        raise InvalidRequestError(f"{source} names {name!r}, which cannot be {verb}: {reason}")


def embedder_refusal(name: str) -> str | None:
    """Why ``embedders.registry.check_embedder(name)`` (no weights loaded, options checked)
    refuses ``name`` (unknown, an unreadable checkpoint, an option it does not offer), in its
    own words; None where it would load."""
    from embedders.errors import CheckpointError, InvalidInputError, UnknownEmbedderError
    from embedders.registry import check_embedder

    try:
        check_embedder(name)
    except (UnknownEmbedderError, CheckpointError, InvalidInputError) as e:
        return e.args[0] if isinstance(e, KeyError) and e.args else str(e)
    return None


def check_collection(name: object, *, optional: bool = False,
                     param: str | None = "collection") -> None:
    """Refuse a ``collection`` (a str; other types are their callers' type checks) that is no
    name, before any lookup, in the same words on every edge (the facade's methods, the HTTP
    routes): the store's "invalid collection name ..." (``indexer.store.validate_name``); where
    the name is ``optional`` (a filter, as in ``jobs``), an empty or blank one is "collection is
    empty". ``jobs("")``, ``documents("café")`` said "unknown collection" (exit 3 on the CLI,
    where ``facet search -c café`` said exit 2).

    Raises:
        InvalidRequestError: with ``param`` (None where an HTTP path names the collection).
    """
    if not isinstance(name, str):
        return
    if optional and not name.strip():
        raise InvalidRequestError("collection is empty: give a collection's name, or leave the "
                                  "parameter out", param=param)
    from indexer.errors import StoreError
    from indexer.store import validate_name

    try:
        validate_name(name)
    except StoreError as e:
        raise InvalidRequestError(str(e), param=param) from e


def quoted_field(message: str, fields: Mapping[str, str | None], *,
                 only_given: bool = False) -> str | None:
    """The field of ``fields`` (each request field mapped to the name given there) whose name
    ``message`` quotes (``repr``), to name as an error's ``param``; None where several or none
    do, unless ``only_given`` and a single field was given, which is then the one."""
    given = {field: name for field, name in fields.items() if isinstance(name, str) and name}
    quoted = [field for field, name in given.items() if repr(name) in message]
    if len(quoted) == 1:
        return quoted[0]
    if only_given and len(given) == 1:
        return next(iter(given))
    return None
