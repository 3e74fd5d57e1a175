"""``make_engine``'s PostgreSQL URLs (pgconnect): ``postgres://`` and ``postgresql://`` are read
as ``postgresql+psycopg://`` (the installed driver), and a connect is bounded (libpq's
``connect_timeout``: a host that never answered hung every command), a URL's own
``?connect_timeout=`` winning. A real listening socket that never answers."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from sqlalchemy.exc import OperationalError

from indexer import metadata as md


@pytest.mark.parametrize(("given", "read"), [
    ("postgres://u:p@h:5432/d", "postgresql+psycopg://u:p@h:5432/d"),
    ("postgresql://u:p@h/d?sslmode=require", "postgresql+psycopg://u:p@h/d?sslmode=require"),
    ("POSTGRES://u@h/d", "postgresql+psycopg://u@h/d"),
    ("postgres+psycopg://u@h/d", "postgresql+psycopg://u@h/d"),
    ("postgresql+psycopg://u:p%40ss@h/d", "postgresql+psycopg://u:p%40ss@h/d"),
    ("postgresql+psycopg2://u@h/d", "postgresql+psycopg://u@h/d"),  # not installed: psycopg 3
    ("postgresql+asyncpg://u@h/d", "postgresql+asyncpg://u@h/d"),  # another driver named: kept
    ("sqlite:////tmp/x/facet.db", "sqlite:////tmp/x/facet.db"),
    ("SQLite:////tmp/x/facet.db", "sqlite:////tmp/x/facet.db"),
    ("mysql://u@h/d", "mysql://u@h/d"),  # refused where the settings are read
])
def test_engine_url(given: str, read: str) -> None:
    assert md.engine_url(given) == read


def test_make_engine_opens_postgres_urls_with_psycopg() -> None:
    pytest.importorskip("psycopg", reason="install psycopg[binary] (the dev extra)")
    for scheme in ("postgres", "postgresql"):
        engine = md.make_engine(f"{scheme}://u:p@127.0.0.1:1/d", migrate=False)
        assert (engine.dialect.name, engine.dialect.driver) == ("postgresql", "psycopg")
        engine.dispose()


def test_a_connect_to_a_host_that_never_answers_is_bounded() -> None:
    """A URL's own connect_timeout (1 s here) is kept; none given, POSTGRES_CONNECT_TIMEOUT_S."""
    pytest.importorskip("psycopg", reason="install psycopg[binary] (the dev extra)")
    assert 1 <= md.POSTGRES_CONNECT_TIMEOUT_S <= 10
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    # The hang's end whatever the code does: the pending connections reset after 15 s.
    timer = threading.Timer(15, listener.close)
    timer.start()
    try:
        port = listener.getsockname()[1]
        engine = md.make_engine(f"postgres://facet:pw@127.0.0.1:{port}/d?connect_timeout=1",
                                migrate=False)
        started = time.monotonic()
        with pytest.raises(OperationalError, match="timeout"):
            engine.connect()
        took = time.monotonic() - started
        engine.dispose()
    finally:
        timer.cancel()
        listener.close()
    assert took < 4, f"took {took:.1f} s"  # (libpq reads a timeout under 2 s as 2 s)


def test_a_psycopg2_url_is_read_with_the_installed_driver() -> None:
    """"No module named 'psycopg2'" (exit 1) for a URL copied from another application."""
    assert md.engine_url("postgresql+psycopg2://u:p@h:5432/d") == "postgresql+psycopg://u:p@h:5432/d"
