"""A schema migration is all or nothing, and says what to do where it cannot run.

pysqlite commits each DDL statement at once, so an upgrade killed part-way (kill -9 about
0.7 s into the first command after upgrading Facet) left its first columns, or a batch
rebuild's ``_alembic_tmp_index_jobs``, committed and the old revision recorded: every later
command then failed on "duplicate column name", exit 1, for ever. A database an older Facet
left so says the migration did not complete and how back (exit 4); and a migration under a
live server of the data folder (an older `facet serve` the new schema breaks) is refused.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import create_engine, event, text

from app.commands.common import exit_code
from app.errors import ConflictError, DataError
from app.services.context import holding_server_lock, open_database
from app.settings import FacetSettings
from indexer import migrate
from indexer.metadata import make_engine
from tests.app.services.test_postgres import postgres  # noqa: F401 (a fixture)

from .test_migrations import _diff, _issue6_database

ROOT = Path(__file__).resolve().parents[2]


def _at_0002(url: str) -> None:
    """A database an older Facet made at revision 0002, with a collection, jobs and an error."""
    engine = create_engine(url)
    with engine.connect() as conn:
        command.upgrade(migrate._config(conn), "0002")
        conn.commit()
        conn.execute(text("INSERT INTO collections (name, backend, chunk_size, chunk_overlap, "
                          "tokenizer, created_at) VALUES ('old', 'edge', 200, 32, 'minilm', "
                          "'2026-01-01')"))
        conn.execute(text("INSERT INTO collection_embedders (collection_id, name, dim, identity) "
                          "VALUES (1, 'minilm', 384, 'minilm')"))
        for state in ("completed", "failed"):
            conn.execute(text(
                "INSERT INTO index_jobs (collection_id, source, embedder, state, docs_seen, "
                "docs_indexed, docs_skipped, docs_failed, docs_deleted, chunks_written, parse_s, "
                "encode_s, store_s, metadata_s, started_at, runner, chunks_total, chunks_done, "
                f"docs_total) VALUES (1, '/src', 'minilm', '{state}', 0, 0, 0, 0, 0, 0, 0, 0, 0, "
                "0, '2026-01-01', 'inline', 0, 0, 0)"))
        conn.execute(text("INSERT INTO job_errors (job_id, document_key, kind, message) VALUES "
                          "(2, '/src/bad.pdf', 'error', 'not a PDF')"))
        conn.commit()
    engine.dispose()


OLD = {"0002": _at_0002, "before-migrations": _issue6_database}
# The statement after which a migration fails: the first column added; a batch rebuild's copy
# into its _alembic_tmp_ table (0002 rebuilds index_jobs; 0005 too).
STEPS = {"first ALTER": r"ALTER TABLE", "mid-rebuild": r"INSERT INTO _alembic_tmp_"}


def _snapshot(path: Path) -> tuple[list[Any], list[Any], list[Any]]:
    """Everything a failed migration must leave as it was: the schema, the recorded revision,
    the rows."""
    db = sqlite3.connect(path)
    try:
        schema = db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master "
                            "ORDER BY type, name").fetchall()
        tables = [r[1] for r in schema if r[0] == "table"]
        version = (db.execute("SELECT version_num FROM alembic_version").fetchall()
                   if "alembic_version" in tables else [])
        rows = [(t, db.execute(f'SELECT * FROM "{t}" ORDER BY 1').fetchall()) for t in tables]
        return schema, version, rows
    finally:
        db.close()


def _check_migrated(url: str) -> None:
    engine = make_engine(url)  # a normal open: migrates what is left
    try:
        assert _diff(engine) == []
        with engine.connect() as conn:
            assert migrate.current_revision(conn) == migrate.head_revision()
            assert conn.execute(text("SELECT count(*) FROM index_jobs")).scalar() >= 2
            assert [tuple(r) for r in conn.execute(text(
                "SELECT job_id, message FROM job_errors")).all()] == [(2, "not a PDF")]
            assert conn.execute(text("SELECT name FROM sqlite_master WHERE name LIKE "
                                     "'_alembic_tmp%'")).all() == []
            assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
            # The pooled connection is handed back with the driver's own transactions again.
            assert conn.connection.driver_connection.isolation_level == ""
    finally:
        engine.dispose()


@pytest.mark.parametrize("step", list(STEPS))
@pytest.mark.parametrize("old", list(OLD))
def test_a_migration_failing_part_way_leaves_the_old_revision_untouched(
        tmp_path: Path, old: str, step: str) -> None:
    path = tmp_path / "facet.db"
    url = f"sqlite:///{path}"
    OLD[old](url)
    before = _snapshot(path)
    engine = make_engine(url, migrate=False)
    pattern = re.compile(STEPS[step])

    def fail(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if pattern.match(statement.lstrip()):
            raise RuntimeError(f"injected failure after {statement.split('(')[0].strip()}")

    event.listen(engine, "after_cursor_execute", fail)
    with pytest.raises(RuntimeError, match="injected failure"):
        migrate.upgrade(engine)
    event.remove(engine, "after_cursor_execute", fail)
    engine.dispose()
    assert _snapshot(path) == before  # no column, no _alembic_tmp_ table, the old revision
    _check_migrated(url)


# Run in a child: migrate, and SIGKILL itself right after the step's first statement ran.
_KILLED_MIGRATION = """
import os, re, signal, sys
from sqlalchemy import event
from indexer import migrate
from indexer.metadata import make_engine

engine = make_engine(sys.argv[1], migrate=False)
pattern = re.compile(sys.argv[2])

@event.listens_for(engine, "after_cursor_execute")
def _kill(conn, cursor, statement, *args):
    if pattern.match(statement.lstrip()):
        os.kill(os.getpid(), signal.SIGKILL)

migrate.upgrade(engine)
print("migrated without being killed")
"""


@pytest.mark.parametrize("step", list(STEPS))
@pytest.mark.parametrize("old", list(OLD))
def test_a_migration_killed_part_way_is_redone_by_the_next_open(
        tmp_path: Path, old: str, step: str) -> None:
    path = tmp_path / "facet.db"
    url = f"sqlite:///{path}"
    OLD[old](url)
    before = _snapshot(path)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _KILLED_MIGRATION, url, STEPS[step]], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == -9, (done.returncode, done.stdout, done.stderr)
    assert _snapshot(path) == before  # (read past the killed transaction's WAL frames)
    _check_migrated(url)


def _half_migrated(folder: Path, old: str) -> None:
    """facet.db as an older Facet killed part-way through a migration left it: the revision's
    first DDL committed, its version not."""
    folder.mkdir()
    url = f"sqlite:///{folder / 'facet.db'}"
    OLD[old](url)
    db = sqlite3.connect(folder / "facet.db")
    if old == "0002":
        db.execute("ALTER TABLE collection_embedders ADD COLUMN source TEXT")
    else:
        db.execute("ALTER TABLE collections ADD COLUMN writer_job_id INTEGER")
        db.execute("CREATE TABLE _alembic_tmp_index_jobs (id INTEGER PRIMARY KEY)")
    db.commit()
    db.close()


@pytest.mark.parametrize(("old", "revision", "column"), [
    ("0002", "0003", "source"), ("before-migrations", "0002", "writer_job_id")])
def test_a_database_left_half_migrated_says_so_and_how_back(
        tmp_path: Path, old: str, revision: str, column: str) -> None:
    folder = tmp_path / "data"
    _half_migrated(folder, old)
    with pytest.raises(DataError) as refused:
        open_database(FacetSettings(data_dir=folder))
    said = str(refused.value)
    assert exit_code(refused.value) == 4
    assert (f"the schema migration of the metadata database {folder / 'facet.db'} to revision "
            f"{revision} did not complete") in said, said
    assert f"duplicate column name: {column}" in said
    assert "killed part-way" in said
    assert f"restore facet.db together with {folder / 'qdrant-edge'} from a backup taken " \
           "before the upgrade" in said
    assert 'docs/deploy.md, "Backup, restore and moving the embedded data folder"' in said
    assert "check the data folder" not in said


_HOLD_LOCK = """
import sys
from pathlib import Path
from app.services.context import holding_server_lock

with holding_server_lock(Path(sys.argv[1]), "facet serve", address="http://127.0.0.1:8000"):
    print("held", flush=True)
    sys.stdin.read()
"""


def _hold(folder: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(folder)], cwd=ROOT, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def _revision(path: Path) -> str:
    db = sqlite3.connect(path)
    try:
        return str(db.execute("SELECT version_num FROM alembic_version").fetchone()[0])
    finally:
        db.close()


def test_a_migration_under_a_live_server_of_the_folder_is_refused(tmp_path: Path) -> None:
    old, current, new = tmp_path / "old", tmp_path / "current", tmp_path / "new"
    old.mkdir()
    _at_0002(f"sqlite:///{old / 'facet.db'}")
    current.mkdir()
    make_engine(f"sqlite:///{current / 'facet.db'}").dispose()  # at head already
    new.mkdir()
    holders = [_hold(folder) for folder in (old, current, new)]
    try:
        with pytest.raises(ConflictError) as refused:
            open_database(FacetSettings(data_dir=old))
        said = str(refused.value)
        assert f"pid {holders[0].pid}" in said and "stop it first" in said, said
        assert "facet serve" in said and "older Facet" in said
        assert exit_code(refused.value) == 5
        assert _revision(old / "facet.db") == "0002"  # not migrated under it
        # Nothing to migrate, or a new database: no refusal.
        open_database(FacetSettings(data_dir=current)).dispose()
        open_database(FacetSettings(data_dir=new)).dispose()
        assert _revision(new / "facet.db") == migrate.head_revision()
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()
    open_database(FacetSettings(data_dir=old)).dispose()  # its server gone: migrated
    assert _revision(old / "facet.db") == migrate.head_revision()


def test_the_process_holding_the_folder_migrates_it_itself(tmp_path: Path) -> None:
    """`facet serve` / `facet move-metadata` hold server.lock themselves, then open facet.db."""
    folder = tmp_path / "data"
    folder.mkdir()
    _at_0002(f"sqlite:///{folder / 'facet.db'}")
    with holding_server_lock(folder, "facet serve", address="http://127.0.0.1:8000"):
        open_database(FacetSettings(data_dir=folder)).dispose()
    assert _revision(folder / "facet.db") == migrate.head_revision()


def test_a_migration_failing_part_way_on_postgres_leaves_it_untouched(request: Any) -> None:
    """PostgreSQL's DDL is transactional already: the one transaction keeps it so (skipped
    without PostgreSQL's server binaries, as tests/app/services/test_postgres.py)."""
    from sqlalchemy import inspect

    base = request.getfixturevalue("postgres").url
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text("DROP DATABASE IF EXISTS atomic"))
        conn.execute(text("CREATE DATABASE atomic"))
    admin.dispose()
    url = base.rsplit("/", 1)[0] + "/atomic"
    _issue6_database(url)
    engine = make_engine(url, migrate=False)

    def columns() -> list[str]:
        with engine.connect() as conn:
            return sorted(c["name"] for c in inspect(conn).get_columns("collections"))

    before = columns()

    def fail(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().startswith("ALTER TABLE"):
            raise RuntimeError("injected failure")

    event.listen(engine, "after_cursor_execute", fail)
    with pytest.raises(RuntimeError, match="injected failure"):
        migrate.upgrade(engine)
    event.remove(engine, "after_cursor_execute", fail)
    assert columns() == before
    with engine.connect() as conn:
        assert migrate.current_revision(conn) is None  # not even the baseline's stamp
    assert migrate.upgrade(engine) == "upgraded"
    assert _diff(engine) == []
    engine.dispose()
