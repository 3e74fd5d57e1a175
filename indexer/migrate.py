"""Bring a metadata database to the current schema with Alembic (``indexer/migrations``).

Every schema change is a migration from now on. ``upgrade(engine)`` is what ``make_engine``
runs on every open, so it must be cheap when nothing is to do (one SELECT of the version)
and safe when several processes open a new database at once:

* a new, empty database gets ``create_all`` and is stamped at the head revision (Alembic's
  own recipe for fresh databases: one step instead of replaying every migration);
* a database made before migrations existed (tables but no ``alembic_version``) is stamped
  at ``0001``, the schema of that time, then upgraded;
* anything else is upgraded from its recorded revision.

Concurrent first opens are serialised by a lock: ``pg_advisory_lock`` on PostgreSQL, a
lock file beside the database file on SQLite.

A database already at the head revision is told so without Alembic: importing it (with mako,
pygments and SQLAlchemy's other dialects) cost 0.25 s of every command's 0.56 s open, even
``facet embed``'s, which needs no database. The head is read from ``versions/``'s
``revision = ...`` lines, the version from the ``alembic_version`` table; Alembic is
imported only when there is something to do.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, Engine

logger = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
BASELINE = "0001"
# Any constant: the key of the advisory lock Facet's migrations hold on PostgreSQL.
_PG_LOCK_KEY = 0x46414345


@functools.lru_cache(maxsize=1)
def _script() -> Any:
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(MIGRATIONS))


# A revision file's ``revision = "0006"`` / ``down_revision = "0005"`` (script.py.mako's lines).
_REVISION_LINE = re.compile(r"^(revision|down_revision)\s*(?::[^=\n]*)?=\s*(.+?)\s*$", re.M)


@functools.lru_cache(maxsize=1)
def _revisions() -> tuple[str, frozenset[str]]:
    """The head revision and every known one, read from ``versions/`` without Alembic.

    A file this cannot read, or a history with other than one head (a branch), is left to
    Alembic's own reading; a test holds both readings equal.
    """
    known: set[str] = set()
    parents: set[str] = set()
    for path in sorted((MIGRATIONS / "versions").glob("*.py")):
        if path.name == "__init__.py":
            continue
        fields: dict[str, str] = {}
        for m in _REVISION_LINE.finditer(path.read_text(encoding="utf-8")):
            fields.setdefault(m[1], m[2])  # the first: the module's own, at its top
        try:
            revision = ast.literal_eval(fields["revision"])
            down = ast.literal_eval(fields.get("down_revision", "None"))
        except (KeyError, ValueError, SyntaxError):
            return _alembic_revisions()
        if not isinstance(revision, str):
            return _alembic_revisions()
        known.add(revision)
        parents.update([down] if isinstance(down, str) else down or ())
    heads = known - parents
    if len(heads) != 1:
        return _alembic_revisions()
    return heads.pop(), frozenset(known)


def _alembic_revisions() -> tuple[str, frozenset[str]]:
    head = _script().get_current_head()
    assert head is not None
    return str(head), frozenset(r.revision for r in _script().walk_revisions())


def head_revision() -> str:
    """The newest revision in ``indexer/migrations/versions``."""
    return _revisions()[0]


def current_revision(conn: Connection) -> str | None:
    """The revision recorded in the database (None: never migrated), read as Alembic's
    ``MigrationContext.get_current_revision`` does, without importing it.

    Raises:
        RuntimeError: the version table has more than one row (branches Facet never makes).
    """
    if not inspect(conn).has_table("alembic_version"):
        return None
    rows = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    if len(rows) > 1:
        raise RuntimeError(f"the metadata database records {len(rows)} schema revisions "
                           f"({', '.join(map(str, rows))}); Facet's migrations have one")
    return str(rows[0]) if rows else None


def _config(conn: Connection) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = conn
    return cfg


@contextlib.contextmanager
def _migration_lock(engine: Engine, conn: Connection) -> Iterator[None]:
    if engine.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SELECT pg_advisory_lock({_PG_LOCK_KEY})")
        conn.commit()
        try:
            yield
        finally:
            conn.exec_driver_sql(f"SELECT pg_advisory_unlock({_PG_LOCK_KEY})")
            conn.commit()
        return
    database = engine.url.database if engine.dialect.name == "sqlite" else None
    if not database or database == ":memory:":
        yield
        return
    from filelock import FileLock

    with FileLock(str(Path(database).with_name(Path(database).name + ".migrate.lock")),
                  timeout=120):
        yield


def upgrade(engine: Engine) -> str:
    """Migrate ``engine``'s database to the head revision; returns what was done.

    Returns:
        ``"current"`` (nothing to do), ``"created"`` (new database), ``"upgraded"``.
    """
    head = head_revision()
    with engine.connect() as conn:
        recorded = current_revision(conn)
        if recorded == head:
            return "current"
    if recorded is not None and recorded not in _revisions()[1]:
        # Alembic's own message ("Can't locate revision identified by ...") reads as a bad URL.
        raise RuntimeError(f"the metadata database is at schema revision {recorded}, which this "
                           f"Facet does not know (it knows up to {head}): a newer Facet migrated "
                           "it; run that version, or give this one another FACET_DATA_DIR / "
                           "FACET_DATABASE_URL")
    from alembic import command

    from indexer.metadata import Base

    with engine.connect() as conn, _migration_lock(engine, conn):
        current = current_revision(conn)  # again: another process may have migrated meanwhile
        if current == head:
            return "current"
        cfg = _config(conn)
        if current is None and not inspect(conn).has_table("collections"):
            Base.metadata.create_all(conn)
            conn.commit()
            command.stamp(cfg, head)
            conn.commit()
            logger.debug("created the metadata schema at revision %s", head)
            return "created"
        if current is None:
            logger.info("metadata database predates migrations: stamping %s", BASELINE)
            command.stamp(cfg, BASELINE)
            conn.commit()
        with _foreign_keys_off(conn):
            command.upgrade(cfg, "head")
            conn.commit()
        logger.info("migrated the metadata database from %s to %s", current or BASELINE, head)
        return "upgraded"


@contextlib.contextmanager
def _foreign_keys_off(conn: Connection) -> Iterator[None]:
    """SQLite without foreign-key enforcement for the block, then checked.

    A batch migration rebuilds a table (copy, drop the old one, rename); with enforcement on,
    the drop cascades to every row referencing the old table, so migration 0002 rebuilding
    ``index_jobs`` erased every job's ``job_errors``. SQLite's documented procedure for such
    changes: enforcement off, then ``PRAGMA foreign_key_check``.

    Raises:
        RuntimeError: the migrated database has rows whose parent is gone.
    """
    if conn.dialect.name != "sqlite":
        yield
        return
    conn.commit()  # the pragma is a no-op inside a transaction
    conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
    try:
        yield
        broken = conn.exec_driver_sql("PRAGMA foreign_key_check").all()
        if broken:
            raise RuntimeError(f"the migrated metadata database has {len(broken)} row(s) whose "
                               f"parent row is gone (first: {tuple(broken[0])})")
    finally:
        conn.commit()
        conn.exec_driver_sql("PRAGMA foreign_keys=ON")
