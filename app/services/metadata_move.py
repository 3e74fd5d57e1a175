"""Move the metadata of an embedded data folder (its SQLite ``facet.db``) into another database,
a PostgreSQL above all: ``facet move-metadata --to URL`` (docs/deploy.md, "Moving the metadata
to PostgreSQL").

A user who started on a laptop (SQLite + the Qdrant edge store in ``FACET_DATA_DIR``) and then
set ``FACET_DATABASE_URL`` saw every collection as vectors no database owns, and rows copied by
hand read well until the first write: PostgreSQL's id sequences still stood at 1, and the next
``facet index`` failed on ``index_jobs_pkey``. Here every table of the models
(``indexer.metadata.Base``, in foreign-key order) is copied in batches in one transaction on
the target, each sequence set past the ids copied, the row counts compared, and ``facet.db``
renamed aside, so two databases never own one store folder. On any failure the target's
transaction is rolled back and ``facet.db`` is left where it was.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Table, func, select, text
from sqlalchemy.engine import Connection, Engine, RootTransaction, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from app.errors import (
    ConflictError,
    DataError,
    FacetError,
    InvalidRequestError,
    NotFoundError,
    reworded,
)
from app.settings import FacetSettings, mask_passwords, masked_url
from app.text import shell_word
from indexer import metadata as md

logger = logging.getLogger(__name__)

# Rows read from facet.db and written to the target at a time: a jobs table of millions of
# rows is never held in memory at once.
BATCH_ROWS = 2000
# The files SQLite keeps beside its database while it is open (WAL mode).
SIDE_FILES = ("-wal", "-shm")
# Where the progress of a big move is worth showing (the caller decides how).
PROGRESS_ROWS = 5000
SERVER_JOB = "pg_dump's job"


@dataclass
class MovePlan:
    """What a move would copy: the source and target as they may be shown (no password),
    the rows per table, and what keeps it from going ahead (None: nothing)."""

    source: Path
    target: str
    rows: dict[str, int] = field(default_factory=dict)

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())

    @property
    def collections(self) -> int:
        return self.rows.get(md.Collection.__tablename__, 0)

    @property
    def jobs(self) -> int:
        return self.rows.get(md.IndexJob.__tablename__, 0)


@dataclass(frozen=True)
class MoveReport:
    """A move done: rows copied per table, where ``facet.db`` (and its side files) went, the
    ``export`` line to set next (password masked), and where the vectors stay."""

    source: Path
    target: str
    rows: dict[str, int]
    renamed: list[Path]
    export_line: str
    password_masked: bool
    vectors: str
    # A signal (SIGTERM, SIGINT) that came once facet.db was being renamed and the target's
    # commit made: noted only, the move finished (the CLI says so).
    signalled: int | None = None

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())


def tables() -> list[Table]:
    """The metadata tables in foreign-key order (parents first), as the models define them:
    a table added by a later migration is copied without a change here."""
    return list(md.Base.metadata.sorted_tables)


def check_target_url(url: str) -> str:
    """``url`` as FACET_DATABASE_URL would take it (``FacetSettings``' own check: PostgreSQL or
    a SQLite file, ``postgres://`` read as psycopg's; a relative SQLite path made absolute
    against the working folder), or one line saying why not (the URL's scheme only: it may hold
    a password).

    Raises:
        InvalidRequestError: not a URL Facet keeps its metadata in.
    """
    try:
        checked = FacetSettings._database_url(url.strip())
    except ValueError as e:
        said = str(e).replace(", or unset it for SQLite in the data folder", "")
        raise InvalidRequestError(f"--to: {said}", param="to") from None
    assert checked is not None
    from indexer.migrate import sqlite_file

    # A relative SQLite path, made absolute against this folder: kept as given, the `export`
    # line and the data folder's record named it relative, so a command run from another folder
    # made a new, empty database there, and listed the moved collections as vectors no database
    # owns, which `facet delete` removed.
    file = sqlite_file(checked)
    if file is not None and not file.expanduser().is_absolute():
        checked = make_url(checked).set(database=str(Path.cwd() / file)).render_as_string(
            hide_password=False)
    return checked


def shown(url: str) -> str:
    """``url`` with its password masked (``***``), as it may be printed."""
    return masked_url(url)


def _source_path(settings: FacetSettings) -> Path:
    """The SQLite database of the data folder, or why there is nothing to move from it.

    Raises:
        InvalidRequestError: FACET_DATABASE_URL is set (the metadata is in that database).
        NotFoundError: the data folder has no ``facet.db``.
    """
    if settings.database_url:
        raise InvalidRequestError(
            f"FACET_DATABASE_URL is set ({settings.database_description()}): move-metadata moves "
            "the SQLite facet.db of the data folder (FACET_DATA_DIR) into another database; "
            f"moving from a server database is {SERVER_JOB} (pg_dump, then pg_restore into the "
            "new one); unset FACET_DATABASE_URL to move the data folder's facet.db")
    from app.services.context import refuse_moved

    refuse_moved(settings)  # (moved already: where to, and how to undo it)
    database = Path(settings.data_dir) / "facet.db"
    if not database.is_file():  # (a renamed facet.db.moved-* beside it: refuse_moved said it)
        raise NotFoundError(f"the data folder {settings.data_dir} (FACET_DATA_DIR) holds no "
                            "metadata database (facet.db): nothing to move; point FACET_DATA_DIR "
                            "at the folder you indexed into")
    return database


def _open_target(settings: FacetSettings, url: str) -> Engine:
    """The target's engine, migrated to the current head by the project's own entry point
    (``make_engine`` -> ``indexer.migrate.upgrade``; an empty database gets the schema), or the
    error to say, with the password masked and ``--to`` named where FACET_DATABASE_URL was.

    Raises:
        UnavailableError: a server out of reach. FacetError: another reason (a newer schema).
    """
    from app.services.context import open_database

    try:
        return open_database(settings.model_copy(update={"database_url": url}))
    except FacetError as e:
        said = str(e).replace("check FACET_DATABASE_URL", "check the --to URL")
        raise reworded(e, said) from e.__cause__


def _open_elsewhere(settings: FacetSettings, names: list[str]) -> list[str]:
    """The collections of ``names`` whose embedded store shard another process holds open now
    (a `facet serve` that searched them, a `facet ui`), each named with its holder: such a
    process keeps its connection to facet.db and would go on writing the renamed file (a job
    submitted to it after the move landing there, unseen). Only an embedded edge store locks
    its collections per process; a process that opened none is not seen here (the docs say to
    stop servers first)."""
    if settings.qdrant_url or settings.vector_backend != "edge":
        return []
    from indexer.errors import StoreBusyError, StoreError
    from indexer.store import open_store

    found: list[str] = []
    store = open_store("edge", data_dir=Path(settings.data_dir), lock_wait_s=0.0)
    try:
        for name in names:
            try:
                store.check_free(name, wait_s=0.0)
            except StoreBusyError as e:
                holder = e.holder or {}
                who = (f"pid {holder.get('pid')} on host {holder.get('host')}" if holder
                       else "another process")
                command = f", {holder.get('command')}" if holder.get("command") else ""
                found.append(f"collection {name} (open in {who}{command})")
            except StoreError:  # (a folder that cannot be locked is the listing's to say)
                continue
    finally:
        store.close()
    return found


def _server_text(holder: dict[str, object]) -> str:
    from app.services.context import server_who

    return f"a Facet server ({server_who(holder, since=False)}) serves the data folder"


def _busy(session: Session, settings: FacetSettings | None = None) -> list[str]:
    """What writes the metadata now: jobs queued, running or stalled (as ``facet jobs`` reads
    them: a job whose writer died is interrupted, not running), collections whose writer
    lease is alive, and (``settings`` given) a `facet serve` or `facet ui` holding the data
    folder (its ``server.lock``: idle, it opened no collection, yet a job posted to it after
    the move landed in the renamed facet.db) and collections another process holds open;
    each named."""
    from app.services import leases
    from app.services.collections import LIVE_STATES, effective_state
    from app.services.context import folder_server

    found: list[str] = []
    if settings is not None:
        server = folder_server(Path(settings.data_dir))
        if server is not None and server.get("pid") != os.getpid():  # (not this move's lock)
            found.append(_server_text(server))
    writing: set[int] = set()
    named: set[str] = set()  # collections already named (their writer holds them open)
    jobs = session.scalars(select(md.IndexJob).where(md.IndexJob.state.in_(md.UNENDED_STATES))
                           .order_by(md.IndexJob.id)).all()
    for job in jobs:
        state, _ = effective_state(job)
        if state in LIVE_STATES:
            found.append(f"job {job.id} ({state}, collection {job.collection.name})")
            writing.add(job.id)
            named.add(job.collection.name)
    for coll in session.scalars(select(md.Collection).where(
            md.Collection.writer_job_id.is_not(None)).order_by(md.Collection.name)):
        holder = leases.holder(coll)
        if holder is not None and holder.alive() and holder.job_id not in writing:
            found.append(f"collection {coll.name} (written by {holder.describe()})")
            named.add(coll.name)
    if settings is not None:
        names = [n for n in session.scalars(select(md.Collection.name)
                                            .order_by(md.Collection.name)) if n not in named]
        found += _open_elsewhere(settings, names)
    return found


def _another_move(holder: dict[str, object]) -> ConflictError:
    """The refusal of a move beside another move (``holder``: its server lock's record): to
    wait for it, not to stop a server (the multi-process exploration of the fourth session of
    2026-12-07)."""
    return ConflictError(f"the metadata is being moved by another `facet move-metadata` (pid "
                         f"{holder.get('pid')}): wait for it to end, then see where it went "
                         "(`facet collections`); nothing was written")


def _refuse_busy(session: Session, settings: FacetSettings | None = None) -> None:
    if settings is not None:
        from app.services.context import MOVER, folder_server

        server = folder_server(Path(settings.data_dir))
        if server is not None and server.get("command") == MOVER and server.get("pid") != os.getpid():
            raise _another_move(server)  # (asked before the move's own lock: without -y)
    busy = _busy(session, settings)
    if busy:
        raise ConflictError(
            f"the metadata is being written: {'; '.join(busy)}; wait for the jobs to end (facet "
            "jobs ID --follow) or cancel them (facet jobs ID --cancel), stop `facet serve`, `facet "
            "ui` and the workers, then move; nothing was written")


def _counts(conn: Connection) -> dict[str, int]:
    return {t.name: int(conn.execute(select(func.count()).select_from(t)).scalar_one())
            for t in tables()}


def _refuse_filled(conn: Connection, target: str) -> None:
    """Refuse a target that holds a collection or a job (its rows would clash, or mix)."""
    from app.text import plural

    n_coll = int(conn.execute(select(func.count()).select_from(md.Collection)).scalar_one())
    n_jobs = int(conn.execute(select(func.count()).select_from(md.IndexJob)).scalar_one())
    if n_coll or n_jobs:
        raise ConflictError(
            f"the target database {target} already holds {plural(n_coll, 'collection')} and "
            f"{plural(n_jobs, 'index job')}: move-metadata writes only into an empty one (a new "
            "database: CREATE DATABASE facet_new); nothing was written")


# The tables a database of Facet's holds: its schema's, Alembic's version table, SQLite's
# AUTOINCREMENT counters.
SCHEMA_TABLES = frozenset(md.Base.metadata.tables) | {"alembic_version", "sqlite_sequence"}


def _refuse_foreign(conn: Connection, present: set[str], target: str) -> None:
    """Refuse a target holding another application's tables, or another Alembic history's
    version: the move wrote Facet's schema in beside them (a user table, then ``collections``,
    ``documents`` ...) and would have taken that application's ``alembic_version`` for Facet's.
    A table under one of Facet's names counts as Facet's only in a database recording a
    revision of Facet's: with none, Facet's migration takes the database for a new one (or
    one made before migrations) and writes its other tables in beside it, and the copy then
    failed on its columns.

    Raises:
        ConflictError: naming the tables (or the revision); nothing is written.
    """
    from indexer.migrate import current_revision, head_revision, known_revisions

    foreign = sorted(present - SCHEMA_TABLES)
    try:
        revision = current_revision(conn) if "alembic_version" in present else None
    except RuntimeError:
        rows = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
        revision, several = None, [str(r) for r in rows]
    else:
        several = []
    named_as_facets = sorted(present & frozenset(md.Base.metadata.tables))
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        said = f"holds tables or views Facet does not make ({shown})"
    elif several:
        said = (f"records {len(several)} schema revisions ({', '.join(several[:5])}), where a "
                "database of Facet's records one")
    elif revision is not None and revision not in known_revisions():
        head = head_revision()
        if revision.isdigit() and len(revision) == len(head) and revision > head:
            raise ConflictError(
                f"the target database {target} records schema revision {revision}, a newer "
                f"Facet's (this one knows up to {head}): move with that version, or into a new "
                "database (CREATE DATABASE facet_new, or a new SQLite file); nothing was written")
        said = f"records schema revision {revision!r}, which is none of Facet's (another application's)"
    elif revision is None and named_as_facets:
        said = (f"holds tables named as Facet's ({', '.join(named_as_facets)}) but records no "
                "schema revision of Facet's: another application's tables (or a Facet database "
                "from before its migrations)")
    elif revision is not None:
        unlike = _unlike_facets(conn, revision, set(named_as_facets))
        if not unlike:
            return
        said = (f"records Facet's schema revision {revision} but its tables are not Facet's "
                f"({unlike})")
    else:
        return
    raise ConflictError(
        f"the target database {target} {said}: move-metadata writes only into an empty database or "
        "one holding Facet's schema alone, never beside another application's tables (a new "
        "database: CREATE DATABASE facet_new, or a new SQLite file); nothing was written")


# The tables every revision of Facet's schema holds (0001's); later ones only add tables and
# columns (job_chunks at 0002), never drop one.
BASELINE_TABLES = frozenset({"collections", "collection_embedders", "documents", "document_vectors",
                             "chunks", "index_jobs", "job_errors"})


def _unlike_facets(conn: Connection, revision: str, present: set[str]) -> str:
    """What keeps a database recording Facet's ``revision`` from being Facet's: tables missing
    (all of the head's at the head revision, the baseline's before) or a table with columns
    Facet's never has; "" where none. A foreign ``documents`` beside an ``alembic_version`` of
    0011 was taken for Facet's, and the copy failed (exit 4, the target's journal changed)."""
    from sqlalchemy import inspect

    from indexer.migrate import head_revision

    needed = set(md.Base.metadata.tables) if revision == head_revision() else set(BASELINE_TABLES)
    missing = sorted(needed - present)
    if missing:
        return f"no {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''} table{'s' if len(missing) > 1 else ''}"
    inspector = inspect(conn)
    for name in sorted(present):
        columns = {c["name"] for c in inspector.get_columns(name)}
        extra = sorted(columns - set(md.Base.metadata.tables[name].columns.keys()))
        if extra:
            return f"{name} has columns Facet's does not: {', '.join(extra[:4])}"
    return ""


def _check_target(settings: FacetSettings, url: str, target: str) -> None:
    """Refuse a target that holds collections or jobs, reading it only: nothing is created
    there (a refusal, or a "no" to the question, left Facet's schema in it). A SQLite file not
    there yet is made by the move itself.

    Raises:
        ConflictError: it holds a collection or a job. UnavailableError: a server out of
            reach. FacetError: it cannot be opened for another reason.
    """
    from sqlalchemy import create_engine, inspect
    from sqlalchemy.pool import NullPool

    parsed = make_url(md.engine_url(url))
    if parsed.get_backend_name() == "sqlite":
        if not parsed.database or not Path(parsed.database).expanduser().is_file():
            return
        engine = create_engine(md.engine_url(url), poolclass=NullPool)
    else:
        engine = md.make_engine(url, migrate=False, pooled=False)
    try:
        with engine.connect() as conn:
            inspector = inspect(conn)
            present = set(inspector.get_table_names())
            # (a view of another application's was written beside too)
            _refuse_foreign(conn, present | set(inspector.get_view_names()), target)
            counts = [int(conn.execute(select(func.count()).select_from(model)).scalar_one())
                      if model.__tablename__ in present else 0
                      for model in (md.Collection, md.IndexJob)]
            if any(counts):
                _refuse_filled(conn, target)
    except FacetError:
        raise
    except Exception as e:
        from app.services.context import SQLITE_DAMAGED_SIGNS, database_error

        said = str(getattr(e, "orig", None) or e)
        if parsed.get_backend_name() == "sqlite" and any(s in said for s in SQLITE_DAMAGED_SIGNS):
            # A file that is no SQLite database (or a damaged one): said as the --to given, not
            # as "the metadata database ... is damaged: restore it with qdrant-edge from a
            # backup" (exit 4), which read as the data folder's own facet.db.
            raise InvalidRequestError(
                f"--to {target}: {parsed.database} is not a SQLite database ({said.strip()}); "
                "give a new file's path or an empty database; nothing was written",
                param="to") from None
        error = database_error(settings.model_copy(update={"database_url": url}), e)
        raise reworded(error, str(error).replace("check FACET_DATABASE_URL", "check the --to URL")) \
            from e
    finally:
        engine.dispose()


def _sqlite_sequences(conn: Connection) -> dict[str, int]:
    """SQLite's AUTOINCREMENT counters (``index_jobs``: ids never reused, past deleted jobs)."""
    if not conn.execute(text("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_sequence'")).first():
        return {}
    return {str(name): int(seq) for name, seq in conn.execute(
        text("SELECT name, seq FROM sqlite_sequence")) if seq is not None}


def _advance_sequences(dst: Connection, last_ids: dict[str, int]) -> None:
    """Every id sequence of the target past the ids copied (``setval``), so the next row gets
    a new id: PostgreSQL's stood at 1, and the first `facet index` after a copy failed on
    ``index_jobs_pkey``. A SQLite target's AUTOINCREMENT counters likewise."""
    for table in tables():
        column = table.autoincrement_column
        last = last_ids.get(table.name, 0)
        if column is None or last <= 0:
            continue
        if dst.dialect.name == "postgresql":
            sequence = dst.execute(text("SELECT pg_get_serial_sequence(:t, :c)"),
                                   {"t": table.name, "c": column.name}).scalar()
            if sequence is not None:
                dst.execute(text("SELECT setval(:s, :v, true)"), {"s": sequence, "v": last})
        elif dst.dialect.name == "sqlite" and table.dialect_options["sqlite"].get("autoincrement"):
            updated = dst.execute(text("UPDATE sqlite_sequence SET seq = max(seq, :v) WHERE name = :t"),
                                  {"t": table.name, "v": last})
            if not updated.rowcount:
                dst.execute(text("INSERT INTO sqlite_sequence (name, seq) VALUES (:t, :v)"),
                            {"t": table.name, "v": last})


def _copy_table(src: Connection, dst: Connection, table: Table,
                step: Callable[[int], None]) -> tuple[int, int]:
    """Copy ``table``'s rows in batches of ``BATCH_ROWS`` (by primary key); returns the rows
    copied and the largest id among them (0: none). ``step`` is called after each batch (where
    a signal noted meanwhile stops the move)."""
    order = list(table.primary_key.columns)
    result = src.execution_options(yield_per=BATCH_ROWS).execute(select(table).order_by(*order))
    copied = last = 0
    column = table.autoincrement_column
    for part in result.partitions():
        rows = [dict(row._mapping) for row in part]
        try:
            dst.execute(table.insert(), rows)
        except DBAPIError as e:
            said = str(e.orig or e).strip().splitlines()[0] if str(e.orig or e).strip() else type(e).__name__
            raise DataError(
                f"cannot copy table {table.name} (rows {copied + 1} to {copied + len(rows)}): "
                f"the target refused them: {mask_passwords(said)}; nothing was written to the "
                "target and facet.db is as it was") from e
        copied += len(rows)
        if column is not None:
            last = max(last, max(int(r[column.name]) for r in rows))
        step(len(rows))
    return copied, last


def _rename_aside(database: Path, stamp: str) -> list[tuple[Path, Path]]:
    """``facet.db`` and its side files renamed to ``facet.db.moved-<stamp>`` (the side files
    keep their suffix after it, as SQLite looks for them); undone if one rename fails."""
    done: list[tuple[Path, Path]] = []
    try:
        for suffix in ("", *SIDE_FILES):
            old = database.with_name(database.name + suffix)
            if suffix and not old.exists():
                continue
            new = database.with_name(f"{database.name}.moved-{stamp}{suffix}")
            os.replace(old, new)
            done.append((old, new))
    except OSError as e:
        _rename_back(done)
        raise DataError(f"cannot rename {database} aside: {e.strerror or e}; nothing was written "
                        "to the target and facet.db is as it was") from e
    return done


def _checkpoint(renamed: Path) -> None:
    """The renamed file's write-ahead log folded into it, where nothing else holds it now (a
    file renamed back by hand without its -wal then keeps every row)."""
    import sqlite3

    with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(renamed)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _rename_back(done: list[tuple[Path, Path]]) -> None:
    for old, new in reversed(done):
        with contextlib.suppress(OSError):
            os.replace(new, old)


@contextlib.contextmanager
def _source(settings: FacetSettings) -> Iterator[Engine]:
    """The data folder's SQLite engine (migrated to the head, as any command opens it)."""
    from app.services.context import open_database

    engine = open_database(settings)
    try:
        yield engine
    finally:
        engine.dispose()


def _source_and_target(settings: FacetSettings, to: str) -> tuple[str, Path]:
    """The target URL as FACET_DATABASE_URL would take it and the data folder's facet.db, or
    why not: FACET_DATABASE_URL set (said before the URL's own check), a URL Facet does not
    take, no facet.db, or ``to`` naming that very file."""
    if settings.database_url:
        _source_path(settings)  # (refused)
    url = check_target_url(to)
    database = _source_path(settings)
    from app.services.context import names_sqlite_file

    if names_sqlite_file(url, database):
        raise InvalidRequestError(f"--to names the data folder's own facet.db ({database}): give "
                                  "another database", param="to")
    return url, database


def plan_move(settings: FacetSettings, to: str) -> MovePlan:
    """Check a move without writing a row: the source is the data folder's facet.db
    (FACET_DATABASE_URL unset), nothing writes it, and ``to`` is a URL Facet takes, reachable,
    migrated to the head and empty. Returns the rows each table would copy.

    Raises:
        InvalidRequestError: FACET_DATABASE_URL is set, or ``to`` is no such URL (or facet.db).
        NotFoundError: no facet.db in the data folder.
        ConflictError: a job is queued or running, a collection's lease is held, or the
            target already holds collections or jobs.
        UnavailableError: the target's server is out of reach.
    """
    url, database = _source_and_target(settings, to)
    plan = MovePlan(source=database, target=shown(url))
    with _source(settings) as source, Session(source) as session:
        _refuse_busy(session, settings)
        with source.connect() as conn:
            plan.rows = _counts(conn)
    _check_target(settings, url, plan.target)
    return plan


class MoveInterrupted(BaseException):
    """SIGTERM during a move: raised (as Ctrl-C's KeyboardInterrupt) between two batches of the
    copy, or before the rename, so that the target's transaction is rolled back and facet.db
    left in place. ``signum``: the signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _Signals:
    """SIGTERM and Ctrl-C while a move runs: the handlers only note the signal (``pending``);
    the move acts on it where it is safe (``check``: between two batches, before the rename),
    and never once the rename began: the target's commit is not interrupted (a SIGTERM raised
    in it said "nothing was moved" and renamed facet.db back while the commit landed on the
    server; raised anywhere, it was swallowed in a GC callback, or broke psycopg's pipeline).
    The handlers before put back on ``restore``. Only in the main thread (signals are its own)."""

    def __init__(self) -> None:
        self.pending: int | None = None
        self.before: dict[int, object] = {}

    def _handle(self, signum: int, frame: object) -> None:
        if self.pending is None:
            self.pending = signum

    def check(self) -> None:
        """Stop the move (rolled back) if a signal came: KeyboardInterrupt for SIGINT,
        ``MoveInterrupted`` for SIGTERM."""
        import signal

        if self.pending is None:
            return
        if self.pending == signal.SIGINT:
            raise KeyboardInterrupt
        raise MoveInterrupted(self.pending)

    def install(self) -> None:
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGTERM, signal.SIGINT):
            before = signal.getsignal(signum)
            if signum == signal.SIGINT and before is not signal.default_int_handler:
                continue  # ignored (a background job) or another's: left alone
            try:
                self.before[signum] = signal.signal(signum, self._handle)
            except (ValueError, OSError):
                continue

    def restore(self) -> None:
        import signal

        for signum, before in self.before.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(signum, before)  # type: ignore[arg-type]
        self.before.clear()


def _landed(url: str, rows: dict[str, int]) -> bool:
    """Whether the target holds the collections and jobs copied (a commit that failed on its
    way back from the server, the connection lost, may have been made there); False where
    that cannot be told."""
    expected = (rows.get(md.Collection.__tablename__, 0), rows.get(md.IndexJob.__tablename__, 0))
    if not any(expected):
        return False  # (an empty facet.db: nothing to tell, nothing lost either way)
    try:
        engine = md.make_engine(url, migrate=False, pooled=False)
        try:
            with engine.connect() as conn:
                found = tuple(int(conn.execute(select(func.count()).select_from(t)).scalar_one())
                              for t in (md.Collection.__table__, md.IndexJob.__table__))
        finally:
            engine.dispose()
    except Exception:
        return False
    return found == expected


def _write_record(settings: FacetSettings, target: str, when: dt.datetime, renamed: str,
                  state: str) -> None:
    """The record of the move in the data folder (``context.MOVED_RECORD``), written whole
    (a ``.part`` renamed over it): "moving" before facet.db is renamed, "moved" once the
    target's commit returned. With facet.db gone a command started without
    FACET_DATABASE_URL refuses, naming the target, rather than make a new, empty facet.db
    beside the vectors the target owns (``context.refuse_moved``).

    Raises:
        OSError: it cannot be written.
    """
    import json

    from app.services.context import MOVED_RECORD

    path = Path(settings.data_dir) / MOVED_RECORD
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps({
        "state": state, "target": target, "moved_at": when.strftime("%Y-%m-%d %H:%M:%S UTC"),
        "renamed": renamed}, indent=1) + "\n", encoding="utf-8")
    os.replace(part, path)


def _remove_record(settings: FacetSettings) -> None:
    from app.services.context import MOVED_RECORD

    with contextlib.suppress(OSError):
        (Path(settings.data_dir) / MOVED_RECORD).unlink()


@contextlib.contextmanager
def _holding_folder(settings: FacetSettings) -> Iterator[None]:
    """Hold the data folder's ``SERVER_LOCK`` (``context.holding_server_lock``, as `facet
    serve` does, naming this command) for the whole move: a `facet serve` or `facet ui`
    started meanwhile is refused (one started during a move kept the renamed file, took jobs
    into it and made a new facet.db); one serving it already refuses the move.

    Raises:
        ConflictError: a server holds the folder (named). DataError: its lock file cannot be
            opened.
    """
    from app.services.context import MOVER, FolderHeld, holding_server_lock

    with contextlib.ExitStack() as held:
        try:
            held.enter_context(holding_server_lock(Path(settings.data_dir), MOVER))
        except FolderHeld as e:
            if (e.holder or {}).get("command") == MOVER:
                raise _another_move(e.holder) from None
            raise ConflictError(
                f"the metadata is being written: {_server_text(e.holder)}; stop "
                "`facet serve`, `facet ui` and the workers, then move; nothing was written"
            ) from None
        except OSError as e:
            from app.services.context import SERVER_LOCK

            raise DataError(f"cannot open {Path(settings.data_dir) / SERVER_LOCK}: "
                            f"{e.strerror or e}; nothing was moved") from e
        yield


def move_metadata(settings: FacetSettings, to: str, *,
                  progress: Callable[[int, int], None] | None = None,
                  now: Callable[[], dt.datetime] | None = None) -> MoveReport:
    """Copy the data folder's facet.db into ``to`` and rename it aside (``plan_move``'s checks
    again, under facet.db's write lock and the folder's server lock).

    Args:
        settings: the settings (FACET_DATA_DIR's facet.db is the source).
        to: the target database's URL, as FACET_DATABASE_URL takes it.
        progress: called after each batch with (rows copied, rows in all).
        now: the clock of the renamed file's UTC time stamp (tests).

    Raises:
        as ``plan_move``; DataError: a row the target refuses (PostgreSQL enforces column
        widths SQLite does not, and stores no NUL character), or counts that differ after the
        copy; FacetError: the target cannot be opened for another reason; MoveInterrupted,
        KeyboardInterrupt: SIGTERM, Ctrl-C before the rename. Nothing is committed on the
        target then, and facet.db stays in place. A signal once the rename began is only
        noted (``MoveReport.signalled``): the move is finished.
    """
    url, database = _source_and_target(settings, to)
    target_shown = shown(url)
    moved_at = (now or (lambda: dt.datetime.now(dt.UTC)))()
    stamp = moved_at.strftime("%Y%m%dT%H%M%SZ")
    signals = _Signals()
    signals.install()
    try:
        with _holding_folder(settings):
            # Every check that reads only, first: a refusal writes nothing to the target (its
            # schema was made before them).
            plan_move(settings, to)
            signals.check()
            report = _move(settings, url, database, target_shown, stamp, moved_at, progress,
                           signals)
    finally:
        signals.restore()
    return report


def _commit(settings: FacetSettings, trans: RootTransaction, url: str, rows: dict[str, int],
            database: Path, stamp: str, target_shown: str,
            moved_at: dt.datetime) -> list[tuple[Path, Path]]:
    """The record ("moving"), facet.db renamed, the target's commit, the record ("moved"); no
    signal acts in between (``_Signals``). A commit that fails and did not land undoes the
    rename and the record."""
    renamed_name = f"{database.name}.moved-{stamp}"
    try:
        _write_record(settings, target_shown, moved_at, renamed_name, "moving")
    except OSError as e:
        _remove_record(settings)
        raise DataError(f"cannot write the move's record in {settings.data_dir}: "
                        f"{e.strerror or e}; nothing was written to the target and facet.db "
                        "is as it was") from e
    try:
        renamed = _rename_aside(database, stamp)
    except BaseException:
        _remove_record(settings)
        raise
    try:
        trans.commit()
    except BaseException:
        if not _landed(url, rows):
            _rename_back(renamed)
            _remove_record(settings)
            raise
        logger.warning("the target's commit failed on its way back, yet the rows are there: "
                       "the move is done")
    try:
        _write_record(settings, target_shown, moved_at, renamed_name, "moved")
    except OSError as e:
        logger.warning("the move is done, but its record could not be updated (%s): it still "
                       "says the move may not have been committed", e.strerror or e)
    return renamed


def _move(settings: FacetSettings, url: str, database: Path, target_shown: str, stamp: str,
          moved_at: dt.datetime, progress: Callable[[int, int], None] | None,
          signals: _Signals) -> MoveReport:
    target = _open_target(settings, url)
    renamed: list[tuple[Path, Path]] = []
    rows: dict[str, int] = {}
    try:
        with _source(settings) as source:
            src = source.connect()
            try:
                # facet.db's write lock for the checks and the copy: no job starts, no row
                # changes under the copy (a writer waits, SQLite's busy timeout).
                src.exec_driver_sql("BEGIN IMMEDIATE")
                with Session(src) as session:
                    _refuse_busy(session, settings)
                rows = _counts(src)
                sequences = _sqlite_sequences(src)
                total = sum(rows.values())
                with target.connect() as dst:
                    trans = dst.begin()
                    try:
                        if dst.dialect.name == "postgresql":
                            # No other session adds a collection or a job meanwhile.
                            dst.execute(text("LOCK TABLE collections, index_jobs IN EXCLUSIVE MODE"))
                        _refuse_filled(dst, target_shown)
                        done = 0

                        def step(n: int) -> None:
                            nonlocal done
                            done += n
                            if progress is not None:
                                progress(done, total)
                            signals.check()  # (between two batches: rolled back)

                        signals.check()
                        last_ids: dict[str, int] = {}
                        for table in tables():
                            _, last = _copy_table(src, dst, table, step)
                            last_ids[table.name] = max(last, sequences.get(table.name, 0))
                        _advance_sequences(dst, last_ids)
                        copied = _counts(dst)
                        differ = {t: (n, copied.get(t)) for t, n in rows.items() if copied.get(t) != n}
                        if differ:
                            said = ", ".join(f"{t} {n} in facet.db, {m} in the target"
                                             for t, (n, m) in differ.items())
                            raise DataError(f"the copy's row counts differ ({said}); nothing was "
                                            "written to the target and facet.db is as it was")
                        signals.check()  # the last point a signal stops the move
                        # facet.db's write lock is held through the rename: a process that
                        # opened facet.db before the move and waits on the lock to write gets
                        # it only once the file is renamed, and its commit is refused
                        # (``make_engine``'s check). It was let go before the rename, and such
                        # a write landed in facet.db just before it was renamed aside.
                        renamed = _commit(settings, trans, url, rows, database, stamp,
                                          target_shown, moved_at)
                        src.rollback()  # (nothing was written to facet.db)
                        src.close()
                        source.dispose()
                        _checkpoint(renamed[0][1])
                    except BaseException:
                        if trans.is_active:
                            with contextlib.suppress(Exception):
                                trans.rollback()
                        raise
            finally:
                src.close()
    except FacetError:
        raise
    except DBAPIError as e:
        from app.errors import as_domain_error

        domain = as_domain_error(e)
        said = str(e.orig or e).strip().splitlines()[0] if str(e.orig or e).strip() else type(e).__name__
        raise (domain if domain is not None else DataError(
            f"the move failed: {mask_passwords(said)}; nothing was written to the target and "
            "facet.db is as it was")) from e
    finally:
        with contextlib.suppress(Exception):
            target.dispose()
    logger.debug("moved the metadata of %s (%d rows) to %s; facet.db renamed to %s", database,
                 sum(rows.values()), target_shown, renamed[0][1].name)
    password = make_url(md.engine_url(url)).password
    return MoveReport(source=database, target=target_shown, rows=rows,
                      renamed=[new for _, new in renamed],
                      export_line=f"export FACET_DATABASE_URL={_quoted(target_shown)}",
                      password_masked=bool(password), vectors=_vectors_text(settings),
                      signalled=signals.pending)


def _quoted(value: str) -> str:

    return shell_word(value)


def _vectors_text(settings: FacetSettings) -> str:
    """Where the collections' vectors are (they do not move): the data folder's store."""
    data = Path(settings.data_dir)
    if settings.qdrant_url and settings.vector_backend in ("edge", "server"):
        return f"the vectors stay in {settings.store_description()} (FACET_QDRANT_URL)"
    folder = data / ("qdrant-local" if settings.vector_backend == "local" else "qdrant-edge")
    return (f"the vectors stay in {folder}: keep FACET_DATA_DIR={data} (the same data folder) "
            "with FACET_DATABASE_URL")


__all__ = ["BATCH_ROWS", "PROGRESS_ROWS", "MoveInterrupted", "MovePlan", "MoveReport",
           "move_metadata", "plan_move", "tables"]
