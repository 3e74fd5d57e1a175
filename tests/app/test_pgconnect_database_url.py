"""FACET_DATABASE_URL as an operator gives it (pgconnect): a PostgreSQL host that takes the TCP
connection and never answers is exit 7 in one line within seconds (every command hung with no
output: libpq had no connect timeout); ``postgres://`` (the form hosting providers give) and
``postgresql://`` open with psycopg ("Can't load plugin: sqlalchemy.dialects:postgres", exit 1);
another scheme is exit 2 in one line naming the scheme, never the URL; vectors that no
collection of a PostgreSQL database owns are not blamed on a lost "facet.db". Real sockets, a
real PostgreSQL cluster (skipped where its binaries are missing) and the real edge store."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.app.cli_runner import invoke_cli
from tests.app.services.test_postgres import Cluster, _free_port, postgres  # noqa: F401 (a fixture)


@contextmanager
def silent_server(give_up_s: float = 20.0) -> Iterator[int]:
    """A port whose listener takes TCP connections (the kernel's backlog) and never answers;
    closed after ``give_up_s`` in any case (the pending connections reset), so a client with
    no connect timeout fails then instead of hanging the test run."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    timer = threading.Timer(give_up_s, listener.close)
    timer.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        timer.cancel()
        listener.close()


def _collections(data: Path, url: str, *args: str):
    return invoke_cli("collections", *args,
                      env={"FACET_DATA_DIR": str(data), "FACET_DATABASE_URL": url})


def test_a_host_that_never_answers_is_exit_7_in_one_line_within_seconds(tmp_path) -> None:
    pytest.importorskip("psycopg", reason="install psycopg[binary] (the dev extra)")
    with silent_server() as port:
        url = f"postgresql+psycopg://facet:s3cret-pw@127.0.0.1:{port}/postgres"
        started = time.monotonic()
        done = _collections(tmp_path / "data", url)
        took = time.monotonic() - started
    assert took < 10, f"took {took:.1f} s: {done.stderr!r}"
    assert done.returncode == 7, (done.stdout, done.stderr)
    said = done.stderr.strip()
    assert "\n" not in said, said
    assert said.startswith("error: cannot open the metadata database "
                           f"'postgresql+psycopg://facet:***@127.0.0.1:{port}/postgres': "), said
    assert said.endswith("; check FACET_DATABASE_URL"), said
    assert "timeout" in said, said
    assert "s3cret-pw" not in done.stdout + done.stderr


@pytest.mark.parametrize("scheme", ["postgres", "postgresql", "POSTGRES"])
def test_postgres_urls_without_a_driver_use_psycopg(tmp_path, scheme) -> None:
    """Nobody listens: the driver is tried (connection failed, exit 7), not a missing plugin
    (``postgres``) or psycopg2 (``postgresql``), exit 1."""
    pytest.importorskip("psycopg", reason="install psycopg[binary] (the dev extra)")
    port = _free_port()
    done = _collections(tmp_path / "data", f"{scheme}://facet:s3cret-pw@127.0.0.1:{port}/facet")
    assert done.returncode == 7, done.stderr
    said = done.stderr.strip()
    assert said.startswith(f"error: cannot open the metadata database '{scheme}://facet:***@"
                           f"127.0.0.1:{port}/facet': connection failed: "), said
    assert "\n" not in said and "s3cret-pw" not in done.stdout + done.stderr


@pytest.mark.parametrize(("url", "named"), [
    ("mysql://facet:s3cret-pw@127.0.0.1:3306/facet", "a 'mysql' URL"),
    ("postgresx://facet:s3cret-pw@127.0.0.1:5432/facet", "a 'postgresx' URL"),
    ("facet:s3cret-pw@127.0.0.1/facet", "not a URL (no scheme://)"),
])
def test_another_scheme_is_exit_2_in_one_line_without_the_url(tmp_path, url, named) -> None:
    done = _collections(tmp_path / "data", url)
    assert done.returncode == 2, (done.returncode, done.stderr)
    said = done.stderr.strip()
    assert said.startswith(f"error: FACET_DATABASE_URL: {named}: Facet keeps its metadata in "
                           "PostgreSQL or SQLite; use postgresql://"), said
    assert "\n" not in said and "s3cret-pw" not in done.stdout + done.stderr
    assert not (tmp_path / "data").exists()  # refused before anything was opened


@pytest.mark.parametrize(("url", "named"), [
    ("postgresql+foo://facet:s3cret-pw@127.0.0.1:5432/facet",
     "'postgresql+foo': SQLAlchemy has no such driver"),
    ("postgresql+asyncpg://facet:s3cret-pw@127.0.0.1:5432/facet",
     "'postgresql+asyncpg' is an asyncio driver, which Facet cannot use"),
    ("sqlite+aiosqlite:////tmp/facet.db", "'sqlite+aiosqlite' is an asyncio driver"),
])
def test_a_driver_facet_cannot_load_is_exit_2_in_one_line(tmp_path, url, named) -> None:
    """The metadata exploration of the sixth session of 2026-12-05: `+foo` was "Can't load
    plugin" exit 1 (a traceback from `facet move-metadata --to`), `+asyncpg` "No module named
    'asyncpg'" exit 1, as though the database were at fault."""
    done = _collections(tmp_path / "data", url)
    assert done.returncode == 2, (done.returncode, done.stderr)
    said = done.stderr.strip()
    assert said.startswith(f"error: FACET_DATABASE_URL: {named}"), said
    assert "\n" not in said and "s3cret-pw" not in said
    data, note = tmp_path / "moving", tmp_path / "note.txt"
    note.write_text("a short note about ferries")
    assert invoke_cli("index", str(note), "-c", "x", env={"FACET_DATA_DIR": str(data)}).returncode == 0
    moved = invoke_cli("move-metadata", "--to", url, "-y", env={"FACET_DATA_DIR": str(data)})
    assert moved.returncode == 2 and f"error: --to: {named}" in moved.stderr, moved.stderr
    assert (data / "facet.db").exists()


def test_a_postgres_url_from_a_hosting_provider_works(postgres: Cluster, tmp_path) -> None:  # noqa: F811
    url = postgres.url.replace("postgresql+psycopg://", "postgres://", 1)
    assert url.startswith("postgres://facet@")
    done = _collections(tmp_path / "data", url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("no collections yet"), done.stdout
    # (psycopg2 is not installed: postgresql:// is read as psycopg too)
    bare = _collections(tmp_path / "data", postgres.url.replace("+psycopg", "", 1), "--json")
    assert (bare.returncode, json.loads(bare.stdout)) == (0, []), bare.stderr


def _stray_store(data: Path) -> None:
    """An edge store in ``data`` holding vectors of a collection ``lost`` that no database
    owns (its database lost, or another one over the same store)."""
    from indexer.store import PointRecord, open_store

    store = open_store("edge", data_dir=data)
    try:
        store.ensure_collection("lost", {"minilm": 4})
        store.upsert("lost", [PointRecord(id="00000000-0000-0000-0000-000000000001",
                                          vectors={"minilm": [0.5, 0.5, 0.5, 0.5]},
                                          payload={"doc_id": "d", "text": "t"})])
    finally:
        store.close()


def test_stray_vectors_under_postgres_do_not_blame_facet_db(postgres: Cluster, tmp_path) -> None:  # noqa: F811
    data = tmp_path / "data"
    _stray_store(data)
    done = _collections(data, postgres.url)
    assert done.returncode == 0, done.stderr
    listed = done.stdout
    assert listed.startswith("lost: vectors only (1 point, "), listed
    assert "facet.db" not in listed, listed
    assert ("which no collection of this database owns (the database FACET_DATABASE_URL names "
            "emptied, or restored from another copy than qdrant-edge/, or another database's): "
            "`facet delete lost` removes them") in listed, listed
    # The JSON is as it was: the same fields, "stray": true.
    as_json = _collections(data, postgres.url, "--json")
    [entry] = json.loads(as_json.stdout)
    assert (entry["name"], entry["stray"], entry["points"]) == ("lost", True, 1), entry


def test_stray_vectors_under_sqlite_still_name_facet_db(tmp_path) -> None:
    data = tmp_path / "data"
    _stray_store(data)
    done = invoke_cli("collections", env={"FACET_DATA_DIR": str(data)})
    assert done.returncode == 0, done.stderr
    assert ("which no collection of this database owns (facet.db lost, or restored from another "
            "copy than qdrant-edge/, or another database's): `facet delete lost` removes them"
            ) in done.stdout, done.stdout


def test_the_api_s_stray_description_fits_either_database() -> None:
    from typing import get_type_hints

    from app.api.schemas import ListedCollection

    [info] = get_type_hints(ListedCollection, include_extras=True)["stray"].__metadata__
    said = info.description
    assert "FACET_DATABASE_URL" in said and "facet.db" in said, said
    assert "its facet.db lost" not in said, said


@pytest.mark.parametrize(("url", "said"), [
    # An unencoded "@" and ":" in the password: make_url's ValueError quoted its end
    # ("invalid literal for int() with base 10: 'TopSecret99@127.0.0.1:5432'"), exit 1.
    ("postgresql://facet:Hunter2@corp:TopSecret99@127.0.0.1:5432/postgres",
     "not a URL that can be read: a password (or user name) holding '@'"),
    # In memory: every command's metadata was gone when it exited.
    ("sqlite://", "an in-memory SQLite database keeps nothing after each command"),
    ("sqlite:///:memory:", "an in-memory SQLite database keeps nothing after each command"),
])
def test_an_unreadable_or_in_memory_url_is_refused_at_start(tmp_path, url, said) -> None:
    done = invoke_cli("collections", env={"FACET_DATA_DIR": str(tmp_path / "data"),
                                          "FACET_DATABASE_URL": url})
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert said in out and "TopSecret" not in out and "Hunter" not in out, out
