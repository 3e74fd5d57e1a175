"""``facet serve``: run the HTTP API (OpenAI-compatible embeddings, search, cluster, jobs)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Annotated, Any

import typer

from app.commands.common import check_port, handle_errors, mask_access_log, serving_lock
from app.errors import InvalidRequestError, UnavailableError
from app.files import raise_open_files_limit
from app.settings import masked_url

if TYPE_CHECKING:
    from app.settings import FacetSettings

logger = logging.getLogger(__name__)


def register(cli: typer.Typer) -> None:
    """Add ``facet serve`` to the CLI."""

    @cli.command("serve")
    @handle_errors
    def serve_cmd(
        host: Annotated[str, typer.Option("--host", help="interface to listen on")] = "127.0.0.1",
        port: Annotated[int, typer.Option("--port", "-p", min=1, max=65535, help="port to listen on")] = 8000,
        preload: Annotated[list[str] | None, typer.Option(
            "--preload", help="embedder to load at start-up (repeat; default FACET_DEFAULT_EMBEDDER)")
        ] = None,
        log_level: Annotated[str, typer.Option(
            "--log-level", help="critical, error, warning, info, debug or trace: uvicorn's and "
                                "Facet's own log lines (-v keeps Facet's at debug)")] = "info",
        root_path: Annotated[str | None, typer.Option(
            "--root-path", help="the path a reverse proxy serves Facet under (/facet), which it "
                                "removes before passing requests on; default FACET_ROOT_PATH "
                                "(docs/deploy.md, 'Behind a reverse proxy')")] = None,
    ) -> None:
        """Serve the API from this process (it owns the data folder: one process per folder).

        Set FACET_API_KEY to require 'Authorization: Bearer <key>'. Routes: docs/api.md.
        """
        try:
            import uvicorn

            from app.api import create_app
        except ImportError as e:
            raise UnavailableError(f"facet serve needs the api extra ({e.name} is missing): "
                                   "pip install 'facet-search[api]'") from e
        from uvicorn.config import LOG_LEVELS

        from app.settings import get_settings

        level = LOG_LEVELS.get(log_level.lower())
        if level is None:
            raise InvalidRequestError(f"--log-level {log_level!r} is not a level; use "
                                      f"{', '.join(LOG_LEVELS)}")
        check_port(host, port)
        settings = get_settings()
        if root_path is not None:  # (checked as the setting is)
            from app.settings import FacetSettings

            try:
                checked = FacetSettings.root_path_of(root_path)
            except ValueError as e:
                raise InvalidRequestError(f"--root-path {e}") from e
            settings = settings.model_copy(update={"root_path": checked})
        names = preload_names(preload, settings)  # one line, not uvicorn's start-up traceback
        from app.services.context import check_database

        check_database(settings)  # one line, before uvicorn (its start-up failure is a traceback)
        raise_open_files_limit()  # connections and shard files: 1024 was often the soft limit
        root = logging.getLogger()
        before = root.level
        # The app's lines too (`--log-level warning` quieted uvicorn alone); -v's debug stays.
        if before != logging.DEBUG:
            root.setLevel(level)
        try:
            # One process: the embedded store folder belongs to exactly one (before any model).
            with serving_lock(settings, "facet serve", f"http://{host}:{port}"):
                app = create_app(settings=settings, preload=names)
                _log_start(host, settings, ui=any(getattr(r, "path", None) == "/ui" for r in app.routes))
                _warn_unowned(settings)
                mask_access_log()  # the access line's query string: never a key in clear
                # root_path: the UI's and /docs' own URLs carry the proxy's prefix (without it the
                # UI under https://host/facet/ui/ sent its queue and login to /ui/..., a 404).
                uvicorn.run(app, host=host, port=port, log_level=log_level.lower(), workers=1,
                            log_config=_uvicorn_log_config(), root_path=settings.root_path,
                            timeout_graceful_shutdown=CONNECTIONS_GRACE_S, http=HTTP_PARSER,
                            h11_max_incomplete_event_size=MAX_HEADER_BYTES)
        finally:
            root.setLevel(before)  # called in-process (tests): leave the caller's level


# Seconds SIGTERM waits for open connections before the shutdown goes on (a job's own 30 s and
# 5 s come after: the compose file's 45 s grace period holds all three). uvicorn waited for
# them without end, and a UI page left open keeps one (Gradio's heartbeat stream): `facet
# serve` did not stop while anyone had the UI open (the verification round of the seventh
# session of 2026-12-06).
CONNECTIONS_GRACE_S = 5


# The HTTP parser, and the most bytes of a request line and headers it reads: uvicorn's
# default (httptools) has no bound, and one request of a 300 MB header, before any key is
# checked, held the server's event loop for 94 s and 0.9 GB (the security review of the seventh
# session of 2026-12-06). h11 answers 400 once an unfinished header block is past this (one
# that arrives whole in a single read, up to ~256 KiB, is not measured).
HTTP_PARSER = "h11"
MAX_HEADER_BYTES = 64 * 1024


def preload_names(preload: list[str] | None, settings: FacetSettings) -> list[str]:
    """The embedders a server (`facet serve`, `facet ui`) loads at start-up: ``--preload``'s
    names, else ``FACET_DEFAULT_EMBEDDER``; each checked without loading weights
    (``embedders.registry.check_embedder``: the name, a checkpoint's config, ``[options]``), and
    the default embedder too (what a request naming none gets). An unknown name was
    `facet serve`'s 44-line uvicorn traceback ("Application startup failed").

    Raises:
        InvalidRequestError: a name that cannot be loaded, with the option or variable that gave it.
    """
    from app.errors import check_named_embedder

    names = [n for n in (preload if preload is not None else [settings.default_embedder]) if n]
    given = "--preload" if preload is not None else "FACET_DEFAULT_EMBEDDER"
    checks = [(name, given) for name in names]
    if settings.default_embedder and settings.default_embedder not in names:
        checks.append((settings.default_embedder, "FACET_DEFAULT_EMBEDDER"))
    for name, source in checks:
        check_named_embedder(name, source)
    return names


def _log_start(host: str, settings: FacetSettings, *, ui: bool) -> None:
    """What is served, in one line (as `facet worker` says its own), and a warning when anyone
    who can reach the host may use it: docs/deploy.md's "lets anyone read collections and index
    server paths" was said nowhere at start."""
    from app import __version__

    broker = f", broker {masked_url(settings.broker_url)}" if settings.broker_url else ""
    logger.info("facet %s serving: data folder %s, store %s, database %s%s, auth %s, UI %s",
                __version__, settings.data_dir, settings.store_description(),
                settings.database_description(), broker,
                "on (FACET_API_KEY)" if settings.api_key else "off",
                "at /ui" if ui else "not mounted")
    if not settings.api_key and not is_loopback(host):
        logger.warning("listening on %s without an API key: anyone who can reach this port "
                       "can read every collection and have this server index its folders "
                       "(POST /jobs); set FACET_API_KEY=<a long random secret> (clients send "
                       "'Authorization: Bearer <key>'), or listen on 127.0.0.1 (docs/deploy.md)",
                       host)


def _warn_unowned(settings: FacetSettings) -> None:
    """Under FACET_DATABASE_URL, one warning line where the embedded store holds collections
    that database does not record, how many, and whether the data folder's facet.db records
    them (``unowned_store_collections``): a mistyped or switched URL served "no collections"
    over a folder full of them, without a word. Never fatal."""
    from app.services.collections import unowned_store_collections

    said = unowned_store_collections(settings)
    if said is not None:
        logger.warning("%s", said)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reached from this machine only (``localhost``, 127.x, ::1): what
    `facet serve` and `facet ui` ask before warning that they serve without a login."""
    import ipaddress

    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to any interface
        return False


_loopback = is_loopback  # its earlier name (tests/app/test_ops_startup.py imports it)


def _uvicorn_log_config() -> dict[str, Any]:
    """uvicorn's own logging set-up with the time in front, as the app's lines (app.cli): each
    formatter is uvicorn's own class with ``app.cli.LogFormatter`` first (``_uvicorn_formatter``),
    so its time reads ``+05:30`` (RFC 3339) as theirs, not ``+0530``."""
    import copy

    from uvicorn.config import LOGGING_CONFIG

    from app.cli import LOG_DATEFMT

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["shutdown"] = {"()": f"{__name__}._ShutdownCancels"}
    config["loggers"].setdefault("uvicorn.error", {})["filters"] = ["shutdown"]
    for formatter in config["formatters"].values():
        formatter["fmt"] = "%(asctime)s " + formatter["fmt"]
        formatter["datefmt"] = LOG_DATEFMT
        base = formatter.pop("()", "logging.Formatter")
        formatter["()"] = f"{__name__}._uvicorn_formatter"
        formatter["base"] = base if isinstance(base, str) else f"{base.__module__}.{base.__qualname__}"
    return config


class _ShutdownCancels(logging.Filter):
    """A shutdown that closes connections still open after ``CONNECTIONS_GRACE_S`` (a UI page's
    heartbeat stream) as the planned thing it is: uvicorn said it as an ERROR, then logged the
    stream's CancelledError as "Exception in ASGI application" with a 100-line traceback, and a
    normal `docker compose stop` read as a crash (the verification round of the seventh session
    of 2026-12-06). The first becomes an INFO line; the second is dropped."""

    # What uvicorn's line and its cancelled tasks' message both say.
    TIMED_OUT = "timeout graceful shutdown exceeded"

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.msg if isinstance(record.msg, str) else ""
        if self.TIMED_OUT in message:
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.msg = message + " (connections still open: a UI page's stream, a slow client)"
            return True
        error = record.exc_info[1] if record.exc_info else None
        # Only the tasks uvicorn cancelled at that timeout (its message says so): a
        # CancelledError leaking from the app at another time is a bug, and stays logged.
        return not (message.startswith("Exception in ASGI application")
                    and isinstance(error, asyncio.CancelledError)
                    and self.TIMED_OUT in str(error))


def _uvicorn_formatter(base: str, **options: Any) -> logging.Formatter:
    """An instance of the formatter class ``base`` (dotted path, e.g. uvicorn's
    ``uvicorn.logging.DefaultFormatter``) with ``app.cli.LogFormatter``'s time; the factory
    ``_uvicorn_log_config`` names (logging.config's ``"()"``), ``options`` the class's arguments."""
    import importlib

    module, _, name = base.rpartition(".")
    return _with_log_time(getattr(importlib.import_module(module), name))(**options)


_TIMED: dict[type, type] = {}


def _with_log_time(cls: type) -> type:
    """``cls`` (a logging.Formatter) with ``app.cli.LogFormatter.formatTime`` (one class per ``cls``)."""
    from app.cli import LogFormatter

    if issubclass(cls, LogFormatter):
        return cls
    if cls not in _TIMED:
        _TIMED[cls] = type(f"{cls.__name__}WithLogTime", (LogFormatter, cls), {})
    return _TIMED[cls]
