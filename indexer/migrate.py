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
import os
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


def known_revisions() -> frozenset[str]:
    """Every revision in ``indexer/migrations/versions``: what an ``alembic_version`` row of
    Facet's can hold (another application's Alembic writes its own)."""
    return _revisions()[1]


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
def _migration_lock(engine: Engine) -> Iterator[Connection]:
    """A connection to ``engine``'s database, held under the lock that serialises migrations.

    On SQLite the lock (a file beside the database) is taken before connecting: a process
    waiting for it holds no connection to the file, so the process migrating meanwhile does not
    take it for another live user of the database (``_refuse_if_held``). On PostgreSQL the
    advisory lock is taken on the connection itself."""
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            conn.exec_driver_sql(f"SELECT pg_advisory_lock({_PG_LOCK_KEY})")
            conn.commit()
            try:
                yield conn
            finally:
                conn.exec_driver_sql(f"SELECT pg_advisory_unlock({_PG_LOCK_KEY})")
                conn.commit()
        return
    database = engine.url.database if engine.dialect.name == "sqlite" else None
    if not database or database == ":memory:":
        with engine.connect() as conn:
            yield conn
        return
    from filelock import FileLock

    with FileLock(str(Path(database).with_name(Path(database).name + ".migrate.lock")),
                  timeout=120), engine.connect() as conn:
        yield conn


class IncompleteMigration(RuntimeError):
    """An upgrade failed on a schema a migration had already changed in part ("duplicate column
    name", "table ... already exists"): an older Facet, whose SQLite migrations were not
    atomic, was killed part-way through one and left it half-done. ``recorded``: the revision
    the database records; ``revision``: the one whose migration did not complete."""

    def __init__(self, message: str, *, recorded: str, revision: str) -> None:
        super().__init__(message)
        self.recorded, self.revision = recorded, revision


class NewerSchema(RuntimeError):
    """The database is at a schema revision this Facet does not know: a newer Facet migrated
    it (a conflict between versions, not a failure of this one: exit 5, as `facet
    move-metadata` says of such a target)."""


class FolderInUse(RuntimeError):
    """Another live process (``pid``; ``holder``: what it wrote in the data folder's
    ``server.lock``, or its pid and command line where it has the database open) holds the
    folder of a SQLite database this process would migrate."""

    def __init__(self, message: str, *, pid: int | None, holder: dict[str, Any]) -> None:
        super().__init__(message)
        self.pid, self.holder = pid, holder


# What a database says of a change already made: the sign of a migration left half-done.
_ALREADY_DONE = re.compile(r"duplicate column|already exists", re.I)


def upgrade(engine: Engine) -> str:
    """Migrate ``engine``'s database to the head revision; returns what was done.

    All or nothing: the whole upgrade (or the creation of a new schema) is one transaction, so
    an exception or a kill -9 part-way leaves the database at its old revision, unchanged, and
    the next open migrates it again. (pysqlite commits each DDL statement at once; on SQLite
    the transaction is therefore begun by hand, ``_atomic``.)

    Returns:
        ``"current"`` (nothing to do), ``"created"`` (new database), ``"upgraded"``.

    Raises:
        FolderInUse: another live process holds the SQLite database's folder (its
            ``server.lock``) or has the database open: an older Facet server the new schema
            would break (looked for only when there is a migration to run).
        IncompleteMigration: an earlier, non-atomic upgrade left the schema half-migrated.
    """
    head = head_revision()
    with engine.connect() as conn:
        recorded = current_revision(conn)
        if recorded == head:
            return "current"
    if sqlite_file(engine.url) is not None:
        # Close the pooled connection: while this process waits for the migration lock, another
        # process migrating the file must not see it open here (``_refuse_if_held``).
        engine.dispose()
    if recorded is not None and recorded not in _revisions()[1]:
        # Alembic's own message ("Can't locate revision identified by ...") reads as a bad URL.
        raise NewerSchema(f"the metadata database is at schema revision {recorded}, which this "
                           f"Facet does not know (it knows up to {head}): a newer Facet migrated "
                           "it; run that version, or give this one another FACET_DATA_DIR / "
                           "FACET_DATABASE_URL. Where this host should have that version, its "
                           "install was not replaced (`facet --version` names the schema it "
                           "knows; a wheel rebuilt at the same version needs `pip install "
                           "--force-reinstall --no-deps`)")
    from alembic import command

    from indexer.metadata import Base

    with _migration_lock(engine) as conn:
        current = current_revision(conn)  # again: another process may have migrated meanwhile
        if current == head:
            return "current"
        cfg = _config(conn)
        if current is None and not inspect(conn).has_table("collections"):
            with _atomic(conn):
                Base.metadata.create_all(conn)
                command.stamp(cfg, head)
            logger.debug("created the metadata schema at revision %s", head)
            return "created"
        _refuse_if_held(engine)
        applied: list[str] = []
        cfg.attributes["applied"] = applied
        try:
            with _atomic(conn):
                if current is None:
                    logger.info("metadata database predates migrations: stamping %s", BASELINE)
                    command.stamp(cfg, BASELINE)
                command.upgrade(cfg, "head")
        except Exception as e:
            said = str(getattr(e, "orig", None) or e).strip().splitlines()
            if not said or not _ALREADY_DONE.search(said[0]):
                raise
            start = applied[-1] if applied else current or BASELINE
            failed = _next_revision(start) or head
            file = sqlite_file(engine.url)
            raise IncompleteMigration(
                f"the schema migration of the metadata database{f' {file}' if file else ''} to "
                f"revision {failed} did not complete ({said[0]}; it records revision "
                f"{current or 'none, from before migrations'}): an earlier run was probably "
                "killed part-way through it", recorded=current or BASELINE,
                revision=failed) from e
        logger.info("migrated the metadata database from %s to %s", current or BASELINE, head)
        return "upgraded"


def _next_revision(revision: str) -> str | None:
    """The revision whose migration follows ``revision`` (None: ``revision`` is the head)."""
    return next((str(r.revision) for r in _script().walk_revisions()
                 if r.down_revision == revision), None)


def sqlite_file(url: Any) -> Path | None:
    """The file of a SQLite database URL (a ``URL`` or its text), else None: another backend,
    in memory, a ``file:`` URI, or a URL SQLAlchemy does not read."""
    from sqlalchemy.engine import make_url

    try:
        url = make_url(url)
    except Exception:
        return None
    database = url.database if url.get_backend_name() == "sqlite" else None
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


def _refuse_if_held(engine: Engine) -> None:
    """Refuse to migrate a SQLite database another live process uses: one holding its folder's
    ``server.lock`` (a non-blocking flock probe, let go at once; nothing created), or one with
    the database file (or its ``-wal`` / ``-shm``) open (``_open_by_others``). An older `facet
    serve` kept answering on the old schema after a newer `facet index` migrated it under it (a
    500 on every POST /jobs); and servers write ``server.lock`` only since 2026-11-30, so one old
    enough to need a migration never wrote it. This process is no other. Nothing to see on
    PostgreSQL; the open files only where ``/proc`` lists them (Linux), and only of processes
    this user may look into (not other users', nor other machines' or containers')."""
    file = sqlite_file(engine.url)
    if file is None:
        return
    from indexer.server_lock import folder_server, server_who

    holder = folder_server(file.parent)
    pid = holder.get("pid") if holder is not None and isinstance(holder.get("pid"), int) else None
    if holder is not None and pid != os.getpid():
        who = server_who(holder, since=False)
        raise FolderInUse(
            f"the metadata database {file} needs a schema migration, but another Facet process "
            f"({who}) holds its data folder {file.parent}: stop it first (it may be an older "
            "Facet, which the new schema would break), then run this command again", pid=pid,
            holder=holder)
    holders = _held_for_a_while(file)
    if not holders:
        return
    who = "; ".join(f"pid {p} ({command})" for p, command in holders)
    raise FolderInUse(
        f"the metadata database {file} needs a schema migration, but another process has it "
        f"open ({who}): stop it first (it may be an older Facet, which the new schema would "
        "break), then run this command again", pid=holders[0][0],
        holder={"pid": holders[0][0], "command": holders[0][1]})


# How long a process seen with the database open is given to close it (a new Facet starting
# beside this one reads the revision, then waits for the migration lock with no connection).
_HOLD_GRACE_S = 2.0
_HOLD_RESCAN_S = 0.25


def _held_for_a_while(file: Path) -> list[tuple[int, str]]:
    """The other processes with ``file`` open at every look over ``_HOLD_GRACE_S`` (empty as
    soon as one look finds none): a momentary read by a process starting is no holder."""
    import time

    deadline = time.monotonic() + _HOLD_GRACE_S
    while True:
        holders = _open_by_others(file)
        if not holders or time.monotonic() >= deadline:
            return holders
        time.sleep(_HOLD_RESCAN_S)


def _open_by_others(file: Path) -> list[tuple[int, str]]:
    """The processes other than this one with the SQLite database ``file``, its ``-wal`` or its
    ``-shm`` open, as (pid, command line shortened), read from ``/proc/<pid>/fd`` (none where
    there is no ``/proc``). Processes this user may not look into (another user's) and ones
    that exit meanwhile are passed over."""
    proc = Path("/proc")
    if not (proc / "self" / "fd").is_dir():
        return []
    names = [file.name + suffix for suffix in ("", "-wal", "-shm")]
    paths = {os.path.realpath(file.with_name(name)) for name in names}
    identities: set[tuple[int, int]] = set()
    for path in paths:
        with contextlib.suppress(OSError):
            st = os.stat(path)
            identities.add((st.st_dev, st.st_ino))
    found: list[tuple[int, str]] = []
    me = os.getpid()
    try:
        entries = list(os.scandir(proc))
    except OSError:
        return []
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        fds = proc / entry.name / "fd"
        try:
            links = os.listdir(fds)
        except OSError:  # another user's process (EACCES), or gone (ENOENT)
            continue
        for fd in links:
            try:
                target = os.readlink(fds / fd)
                if target not in paths:
                    # The path as that process's mounts show it: where the name is the
                    # database's (a bind mount, another mount namespace), the file decides.
                    if os.path.basename(target) not in names:
                        continue
                    st = os.stat(fds / fd)
                    if (st.st_dev, st.st_ino) not in identities:
                        continue
            except OSError:  # (a descriptor closed, a process gone meanwhile)
                continue
            found.append((int(entry.name), _command_line(int(entry.name))))
            break
    return sorted(found)


def _command_line(pid: int, limit: int = 120) -> str:
    """``pid``'s command line from ``/proc/<pid>/cmdline``, its program without its folder,
    shortened to ``limit`` characters ("unknown" where it cannot be read)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "unknown"
    args = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
    if not args:
        return "unknown"
    said = " ".join(" ".join([os.path.basename(args[0]), *args[1:]]).split())  # one line
    return said if len(said) <= limit else said[:limit - 3] + "..."


@contextlib.contextmanager
def _atomic(conn: Connection) -> Iterator[None]:
    """The block as one transaction, committed at its end, rolled back on an exception.

    On SQLite, with foreign-key enforcement off (``_foreign_keys_off``) and the driver's own
    transaction handling off: pysqlite commits every DDL statement at once (ALTER TABLE,
    CREATE TABLE), so a migration killed part-way left its first columns or a batch rebuild's
    ``_alembic_tmp_*`` table committed, the version unchanged, and every later open failed on
    "duplicate column name". SQLAlchemy's recipe for pysqlite: ``isolation_level = None`` on
    the DBAPI connection and BEGIN emitted by hand (IMMEDIATE: the write lock at once, waited
    for as any write). PostgreSQL's DDL is transactional: SQLAlchemy's transaction is enough.
    """
    if conn.dialect.name != "sqlite":
        conn.commit()
        with conn.begin():  # (Alembic then begins and commits none of its own)
            yield
        return
    with _foreign_keys_off(conn):
        dbapi: Any = conn.connection.driver_connection
        saved = dbapi.isolation_level
        dbapi.isolation_level = None  # no implicit BEGIN / COMMIT around statements
        try:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            try:
                yield
                _check_foreign_keys(conn)
            except BaseException:
                if dbapi.in_transaction:
                    dbapi.rollback()
                conn.rollback()
                raise
            conn.exec_driver_sql("COMMIT")
            conn.commit()
        finally:
            if dbapi.in_transaction:  # (a COMMIT that failed)
                dbapi.rollback()
            dbapi.isolation_level = saved


@contextlib.contextmanager
def _foreign_keys_off(conn: Connection, *, check: bool = True) -> Iterator[None]:
    """SQLite without foreign-key enforcement for the block, then checked (``check``; else
    the caller checks, ``_check_foreign_keys``, as ``_atomic`` does before its COMMIT).

    A batch migration rebuilds a table (copy, drop the old one, rename); with enforcement on,
    the drop cascades to every row referencing the old table, so migration 0002 rebuilding
    ``index_jobs`` erased every job's ``job_errors``. SQLite's documented procedure for such
    changes: enforcement off (outside any transaction: the pragma is a no-op inside one), then
    ``PRAGMA foreign_key_check``.

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
        if check:
            _check_foreign_keys(conn)
    finally:
        conn.commit()
        conn.exec_driver_sql("PRAGMA foreign_keys=ON")


def _check_foreign_keys(conn: Connection) -> None:
    if conn.dialect.name != "sqlite":
        return
    broken = conn.exec_driver_sql("PRAGMA foreign_key_check").all()
    if broken:
        raise RuntimeError(f"the migrated metadata database has {len(broken)} row(s) whose "
                           f"parent row is gone (first: {tuple(broken[0])})")
