"""Build the dependencies the services share from ``FacetSettings``: store, sessions, encoder."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from app.encoding import EmbedderCache, InlineQueryEncoder, QueryEncoder
from app.errors import (
    ConflictError,
    DataError,
    FacetError,
    InvalidRequestError,
    NotFoundError,
    UnavailableError,
    database_disk_full,
)
from app.services.leases import warn_if_clock_off
from app.settings import FacetSettings, mask_passwords
from indexer.errors import DISK_GONE_ERRNOS, REMOUNT_AND_RERUN, StoreBusyError, StoreError
from indexer.metadata import make_engine
from indexer.server_lock import SERVER_LOCK, folder_server, server_holder, server_who  # noqa: F401
from indexer.store import VectorStore, open_store

logger = logging.getLogger(__name__)

__all__ = ["EmbedderCache", "ServiceContext"]


def _read_only_mount(path: Path) -> bool:
    """Whether ``path`` is on a file system mounted read-only (False where that cannot be
    told)."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # gone meanwhile; no statvfs (Windows)
        return False


# File systems whose locks (SQLite's, the embedded store's flock) do not hold across the hosts
# that mount them: a data folder there is safe from one host at a time only.
NETWORK_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "ceph", "glusterfs", "lustre", "afs", "davfs",
    "fuse.sshfs", "fuse.glusterfs", "fuse.ceph", "fuse.cephfs", "fuse.rclone", "fuse.s3fs",
    "fuse.gcsfuse", "fuse.davfs2", "fuse.smbnetfs", "fuse.juicefs"})
_WARNED_NETWORK: set[str] = set()


def filesystem_type(path: Path, mountinfo: str = "/proc/self/mountinfo") -> str | None:
    """The type of the file system ``path`` lies on (``mountinfo``: "ext4", "nfs4",
    "fuse.sshfs"...), None where that cannot be read."""
    try:
        target = os.path.realpath(path)
        with open(mountinfo) as fh:
            mounts = fh.read().splitlines()
    except OSError:
        return None
    best, kind = "", None
    for line in mounts:
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 5 or not right.split():
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, right.split()[0]
    return kind


def warn_if_network(data_dir: Path, settings: FacetSettings) -> str | None:
    """Log a warning (once per folder and process) where the data folder holds the SQLite
    database or the embedded store and lies on a network file system: their locks do not hold
    across the hosts that mount it, and two hosts writing at once both "won" the single-writer
    lease, lost documents and corrupted facet.db, every command saying it succeeded (the
    network-filesystem exploration of the fourth session of 2026-12-02). Returns its type."""
    if settings.database_url is not None and settings.vector_backend != "edge":
        return None  # (nothing of the data folder's is shared state then)
    kind = filesystem_type(data_dir)
    if kind not in NETWORK_FILESYSTEMS:
        return None
    if str(data_dir) in _WARNED_NETWORK:
        return kind
    _WARNED_NETWORK.add(str(data_dir))
    logger.warning("the data folder %s is on a network file system (%s), whose locks do not hold "
                   "across hosts: use it from one host at a time, or keep the metadata in "
                   "PostgreSQL (FACET_DATABASE_URL) and the vectors in a Qdrant server "
                   "(FACET_QDRANT_URL) to share them (docs/deploy.md)", data_dir, kind)
    return kind


def not_writable(data_dir: Path, why: str = "") -> str:
    """What to say of a data folder this process cannot write (``why``: the cause, in brackets)."""
    return (f"the data folder {data_dir} (FACET_DATA_DIR) is not writable{why}: Facet keeps its "
            "database, locks and vectors there, for reading too; point FACET_DATA_DIR at a "
            "writable folder (a copy of this one to read it)")


def gone_text(data_dir: Path, error: OSError) -> str:
    """What to say where the data folder's disk went away under its mount (``DISK_GONE_ERRNOS``)."""
    return (f"the data folder {data_dir} (FACET_DATA_DIR) cannot be reached ({error.strerror or error}): "
            f"is its network share or drive still mounted? {REMOUNT_AND_RERUN}")


def cannot_enter(data_dir: Path, error: OSError) -> str:
    """What to say of a data folder this process may not look into (another user's, made under
    umask 077: mode 700), in one line: whose it is and its mode, where that can be read."""
    try:
        st = data_dir.stat()
    except OSError:
        whose = ""
    else:
        try:
            import pwd

            owner = pwd.getpwuid(st.st_uid).pw_name
        except (ImportError, KeyError):
            owner = f"uid {st.st_uid}"
        whose = f"; it is {owner}'s, mode {st.st_mode & 0o7777:o}"
    return (f"the data folder {data_dir} (FACET_DATA_DIR) cannot be used: this user may not "
            f"look into it ({error.strerror or error}{whose}): Facet keeps its database, locks "
            "and vectors there; run as its owner, give it to this user (chown -R), or point "
            "FACET_DATA_DIR at a folder this user can write")


def _unwritable(path: Path) -> bool:
    """Whether ``path`` is there and this user may not write it. A file gone since it was seen
    is not unwritable: another facade closing on the folder removes the database's -wal file,
    and a facade opening meanwhile said "holds files this user cannot write" (os.access is False
    for a missing file)."""
    return not os.access(path, os.W_OK) and os.path.lexists(path)


def _is_file(path: Path) -> bool:
    """``path.is_file()``, False where it cannot be looked at (a parent this user may not enter)."""
    try:
        return path.is_file()
    except OSError:
        return False


_PASSWORD_PARAM = re.compile(r"((?:^|[?&])password=)[^&]*", re.IGNORECASE)


def _secrets(url: str) -> tuple[list[str], bool]:
    """The password of a database URL (in its user part or its query) and its pieces between
    URL characters, longest first: what a driver's message may quote of it; and whether part
    of it spilled into the host (an unencoded "@" in it: the host read as "ss9@127.0.0.1",
    whose part before its last "@" is then hidden too)."""
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except Exception:
        return [], False
    found = [str(parsed.password)] if parsed.password else []
    query = parsed.query.get("password")
    found += [query] if isinstance(query, str) else list(query or ())
    host = parsed.host or ""
    spilled = "@" in host
    if spilled:
        found.append(host.rsplit("@", 1)[0])
    pieces = {p for secret in found for p in [secret, *re.split(r"[@:/#?\[\]&=]", secret)]
              if len(p) >= 3}
    return sorted(pieces, key=len, reverse=True), spilled


def database_error(settings: FacetSettings, error: Exception) -> FacetError:
    """What to say when the metadata database cannot be opened: the URL with its password
    masked (it was printed whole, on every restart of a compose service), the driver's first
    line without SQLAlchemy's "Background on this error" link; ``UnavailableError`` for a
    database server out of reach (a PostgreSQL down: retry later), else ``FacetError``."""
    from sqlalchemy.exc import OperationalError

    full = database_disk_full(settings)  # SQLite says "disk I/O error"
    if full is not None:
        return UnavailableError(full)
    from indexer.migrate import FolderInUse, IncompleteMigration, NewerSchema

    if isinstance(error, FolderInUse):  # (its message names the holder's pid)
        return ConflictError(str(error))
    if isinstance(error, IncompleteMigration):
        return _half_migrated(settings, error)
    from app.errors import (
        OUTAGE_RETRY_AFTER_S,
        connection_limit,
        connection_limit_text,
        database_may_come_back,
    )

    limit = connection_limit(error)
    if limit is not None:
        return UnavailableError(connection_limit_text(limit), retry_after_s=OUTAGE_RETRY_AFTER_S)
    said = str(getattr(error, "orig", None) or error)
    first = next((line.strip() for line in said.splitlines() if line.strip()), type(error).__name__)
    damaged = _damaged_sqlite(settings, first)
    if damaged is not None:
        return damaged
    check = ("FACET_DATABASE_URL" if settings.database_url else
             f"the data folder {settings.data_dir} (FACET_DATA_DIR)")
    where = settings.resolved_database_url
    if settings.database_url:
        # As SQLAlchemy parses it (urlsplit read 'pa#ss9' as a fragment and left it), the
        # password in the query too; the driver's text with every piece of it hidden ("failed
        # to resolve host 'ss9@127.0.0.1'" of a password 'p@ss9').
        where = _PASSWORD_PARAM.sub(r"\1***", settings.database_description())
        secrets, spilled = _secrets(settings.database_url)
        for secret in secrets:
            first = first.replace(secret, "***")
            where = where.replace(secret, "***")
        if spilled:
            check += (" (its password holds a character a URL reserves, such as @ or #: write it "
                      "percent-encoded, %40 for @, %23 for #)")
    message = (f"cannot open the metadata database {where!r}: {mask_passwords(first)}; "
               f"check {check}")
    if settings.database_url and isinstance(error, OperationalError):
        # (A server down or restarting comes back; a wrong password or database name does not.)
        return UnavailableError(message, retry_after_s=OUTAGE_RETRY_AFTER_S
                                if database_may_come_back(error) else None)
    if isinstance(error, NewerSchema):
        # A conflict between versions (exit 5, as `facet move-metadata` says it of such a
        # target), not a failure of this one: it was exit 1, "any other failure".
        return ConflictError(message)
    return FacetError(message)


# How SQLite says that the file is there but its content is not a database it can read (cut
# short by a copy that ran out of room, overwritten, a header garbled).
SQLITE_DAMAGED_SIGNS = ("database disk image is malformed", "file is not a database")


def _damaged_sqlite(settings: FacetSettings, first: str) -> DataError | None:
    """A SQLite metadata database whose file is damaged, as a data error (exit 4, as for a
    collection's damaged store files) saying how back: it was "cannot open the metadata
    database ...: database disk image is malformed; check the data folder", exit 1, which
    named no damage, and no backup to restore."""
    if not any(sign in first for sign in SQLITE_DAMAGED_SIGNS):
        return None
    from indexer.migrate import sqlite_file

    file = sqlite_file(settings.resolved_database_url)
    if file is None:  # (another backend, or not a URL SQLAlchemy reads: said as any other)
        return None
    store = Path(settings.data_dir) / "qdrant-edge"
    return DataError(
        f"the metadata database {file} is damaged ({first}): nothing can be read from this data "
        f"folder until it is replaced; stop every Facet process on it, then restore {file.name} "
        f"together with {store} from the same backup (the database alone would not match the "
        f"vectors; delete any {file.name}-wal and {file.name}-shm left beside the damaged file): "
        "see docs/deploy.md, \"Backup, restore and moving the embedded data folder\"")


def _half_migrated(settings: FacetSettings, error: Exception) -> DataError:
    """A metadata database an older Facet left half-migrated (its SQLite migrations were not
    atomic: killed part-way, the first columns of a revision stayed, its version did not), as
    a data error (exit 4, as ``_damaged_sqlite``) saying how back: it was "cannot open ...:
    duplicate column name: source; check the data folder", exit 1, on every command."""
    if settings.database_url is None:
        store = Path(settings.data_dir) / "qdrant-edge"
        back = (f"stop every Facet process on it, then restore facet.db together with {store} "
                "from a backup taken before the upgrade (the database alone would not match the "
                "vectors; delete any facet.db-wal and facet.db-shm beside it)")
    else:
        back = "restore the database from a backup taken before the upgrade"
    return DataError(f"{mask_passwords(str(error))}; it cannot be used as it is: {back}, "
                     "then run this Facet again: see docs/deploy.md, \"Backup, restore and "
                     "moving the embedded data folder\"")


def check_database(settings: FacetSettings) -> None:
    """Open the metadata database once and let it go: a process about to serve (``facet serve``,
    ``facet worker``) says at once, in one line, that it cannot (a server start printed a
    140-line traceback; a worker started anyway and failed every task).

    Raises:
        UnavailableError: a database server out of reach. FacetError, DataError: as
            ``ServiceContext``.
    """
    data_dir = Path(settings.data_dir)
    try:
        exists = data_dir.exists()
    except OSError as e:  # a stale mount (Python 3.11's exists() raises ENOTCONN): a traceback
        if e.errno in DISK_GONE_ERRNOS:
            raise UnavailableError(gone_text(data_dir, e)) from e
        raise DataError(cannot_enter(data_dir, e)) from e
    if settings.database_url is None and not exists:
        return  # (made on first use, as every command makes it)
    open_database(settings).dispose()


def names_sqlite_file(url: str, path: Path) -> bool:
    """Whether the database URL ``url`` is the SQLite file ``path`` (``~`` and links
    followed): the data folder's own facet.db given as FACET_DATABASE_URL or as `facet
    move-metadata --to`. False for any other database and for a URL that cannot be read."""
    from indexer.migrate import sqlite_file

    file = sqlite_file(url)
    try:
        return file is not None and file.expanduser().resolve() == path.resolve()
    except Exception:  # (a folder that cannot be read)
        return False


# What `facet move-metadata` leaves in the data folder once the metadata is in another
# database: where it went (password masked), when, and the name facet.db was renamed to.
MOVED_RECORD = "metadata-moved.json"


def moved_record(data_dir: Path) -> dict[str, Any] | None:
    """The record ``facet move-metadata`` left in ``data_dir`` (``MOVED_RECORD``), where
    ``facet.db`` is not there (a facet.db put back, the move undone, wins over it); else None.
    A record that cannot be read still counts (its fields then unknown). Its ``state`` is
    "moving" from just before facet.db is renamed until the target's commit returned, then
    "moved" (a record without one, from before 2026-11-30, is "moved")."""
    path = data_dir / MOVED_RECORD
    try:
        if (data_dir / "facet.db").exists() or not path.is_file():
            return None
    except OSError:
        return None
    import json

    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = None
    return record if isinstance(record, dict) else {}


def moved_files(data_dir: Path) -> list[str]:
    """The ``facet.db.moved-<stamp>`` files of ``data_dir`` (not their -wal/-shm), oldest first."""
    try:
        return sorted(p.name for p in data_dir.glob("facet.db.moved-*")
                      if not p.name.endswith(("-wal", "-shm")))
    except OSError:
        return []


# Said with every way back: a move undone drops what the new database got since, and that
# database keeps its copy of the metadata: a FACET_DATABASE_URL still set (the move printed its
# export) read and wrote the vectors facet.db owns again, with no word (the PostgreSQL review of
# the fourth session of 2026-12-06).
_UNDO_WARNING = ("anything done since under the new database (collections indexed or deleted, "
                 "jobs) lives only there; then unset FACET_DATABASE_URL and empty that database, "
                 "or both own the same vectors")


# How a move's target is said where it was recorded relative (as a move of before the second
# session of 2026-12-05 wrote it): a file of that name in whichever folder a command runs in.
RECORDED_RELATIVE = "recorded relative, a file of that name in each working folder"


def relative_target(target: str) -> bool:
    """Whether a move's recorded target is a SQLite file named by a relative path."""
    from indexer.migrate import sqlite_file

    file = sqlite_file(target)
    return file is not None and not file.expanduser().is_absolute()


def moved_message(data_dir: Path, record: dict[str, Any]) -> str:
    """What to say of a data folder whose metadata `facet move-metadata` moved (``record``:
    ``moved_record``'s), in one line: where to, when, and how to use it or undo the move. A
    record still "moving" (its mover killed between the rename and the end of its commit):
    the move may or may not have been committed, and how to tell."""
    target = record.get("target") or "another database"
    when = f" on {record['moved_at']}" if record.get("moved_at") else ""
    renamed = record.get("renamed") or "facet.db.moved-<time>"
    if record.get("state") == "moving":
        return (f"a move of this data folder's metadata ({data_dir}) to {target}{when} (facet "
                "move-metadata) did not finish (the process was killed): it may or may not have "
                "been committed there; list the collections with FACET_DATABASE_URL set to it "
                f"(facet collections): if they are there, keep FACET_DATABASE_URL set (and "
                f"leave {MOVED_RECORD}); if it holds none, undo the move: rename {renamed} back "
                f"to facet.db and remove {MOVED_RECORD} (once no session of the move is left on "
                "that database: a commit still hanging there lands later; PostgreSQL lists them "
                "in pg_stat_activity)")
    if isinstance(record.get("target"), str) and relative_target(target):
        # "set FACET_DATABASE_URL to it" gave a database of that name in each working folder.
        use = (f" ({RECORDED_RELATIVE}): set FACET_DATABASE_URL to that file's URL with its "
               "absolute path (sqlite:////PATH, the file in the folder the move ran in), and "
               f"write the same as \"target\" in {MOVED_RECORD}")
    else:
        use = ": set FACET_DATABASE_URL to it"
    return (f"the metadata of this data folder ({data_dir}) was moved to {target}{when} (facet "
            f"move-metadata){use}; to undo the move, rename {renamed} "
            f"back to facet.db (and remove {MOVED_RECORD}): {_UNDO_WARNING}")


def refuse_moved(settings: FacetSettings) -> None:
    """Refuse the data folder's SQLite metadata where `facet move-metadata` moved it away
    (FACET_DATABASE_URL unset, no facet.db, its record there, or a ``facet.db.moved-*`` file
    there without a record): a command or server started without FACET_DATABASE_URL after a
    move made a new, empty facet.db, and every collection was then vectors no database owns,
    which `facet delete` (as advised) destroyed.

    Raises:
        NotFoundError: the metadata was moved (exit 3, as no facet.db to move).
    """
    if settings.database_url is not None:
        return
    data_dir = Path(settings.data_dir)
    record = moved_record(data_dir)
    if record is not None:
        mover = folder_server(data_dir) if record.get("state") == "moving" else None
        if mover is not None and mover.get("command") == "facet move-metadata":
            raise NotFoundError(  # (its rename done, its commit on its way)
                f"the metadata of this data folder ({data_dir}) is being moved to "
                f"{record.get('target') or 'another database'} by facet move-metadata (pid "
                f"{mover.get('pid')}): once it ends, set FACET_DATABASE_URL to it")
        raise NotFoundError(moved_message(data_dir, record))
    try:
        if (data_dir / "facet.db").exists():
            return
    except OSError:
        return
    moved = moved_files(data_dir)
    if moved:
        raise NotFoundError(
            f"a {moved[-1]} is here ({data_dir}): this folder's metadata was moved to another "
            "database, or a move was interrupted: set FACET_DATABASE_URL to where it went, or "
            f"rename the file back to facet.db ({_UNDO_WARNING})")


# The file a server of an embedded data folder holds locked while it runs
# (``app.commands.common.serving_lock``), its reader, probe and words: ``indexer.server_lock``
# (a schema migration probes it too), imported above.


# The command a move of the metadata writes in the ``SERVER_LOCK`` it holds for its duration
# (``app.services.metadata_move``): a server starting meanwhile says what holds the folder.
MOVER = "facet move-metadata"



def job_log_path(data_dir: Path | str, job_id: int) -> Path:
    """Where a job run in a detached process (``--background`` in embedded mode) writes its
    output; removed with its job's row when the collection is deleted."""
    return Path(data_dir) / "logs" / f"job-{job_id}.log"

class FolderHeld(Exception):
    """Another process holds the data folder's ``SERVER_LOCK``: ``holder`` is what it wrote
    there (``server_holder``)."""

    def __init__(self, holder: dict[str, Any]) -> None:
        super().__init__(holder)
        self.holder = holder


@contextlib.contextmanager
def holding_server_lock(data_dir: Path, command: str, **fields: str) -> Iterator[None]:
    """Hold ``data_dir``'s ``SERVER_LOCK`` (a non-blocking flock) for the block, with this
    process's pid, ``command``, ``fields`` (a server's address) and start written in it, as
    `facet serve` / `facet ui` (``app.commands.common.serving_lock``) and `facet
    move-metadata` hold it; the kernel drops it when the process ends, however it ends.
    Nothing where the system has no flock (not POSIX).

    Raises:
        FolderHeld: another process holds it. OSError: the file cannot be opened.
    """
    try:
        import fcntl
    except ImportError:
        yield
        return
    import json
    import time

    path = data_dir / SERVER_LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FolderHeld(server_holder(path)) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({
            "pid": os.getpid(), "command": command, **fields,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}).encode(), 0)
        yield
    finally:
        os.close(fd)  # (drops the lock)




def open_database(settings: FacetSettings) -> Engine:
    """The metadata database's engine (migrated), or the error to say: the data folder not
    writable (``DataError``), its metadata moved to another database (``refuse_moved``:
    ``NotFoundError``, before any facet.db is made), else ``database_error``'s."""
    refuse_moved(settings)
    try:
        engine = make_engine(settings.resolved_database_url)
    except Exception as e:  # driver missing, server down, bad URL, a read-only folder
        if (settings.database_url is None and os.path.isdir(settings.data_dir)
                and not os.access(settings.data_dir, os.X_OK)):
            refused = PermissionError(errno.EACCES, os.strerror(errno.EACCES))
            raise DataError(cannot_enter(Path(settings.data_dir), refused)) from e
        if settings.database_url is None and not os.access(settings.data_dir, os.W_OK):
            raise DataError(not_writable(Path(settings.data_dir))) from e
        raise database_error(settings, e) from e
    warn_if_clock_off(engine, settings.lease_ttl_s)
    return engine


class ServiceContext:
    """The store, a session factory, the embedder cache and the query encoder, built from settings.

    One process owns an embedded store folder; close the context to release it.

    Args:
        settings: where the data lives and how it is stored.
        store: an already open store (tests, benchmarks); default from the settings.
        embedders: a shared embedder cache; default a new one on ``settings.device``.
        encoder: how texts are encoded; default ``InlineQueryEncoder`` (the calling thread).
            A given encoder is not closed with the context.
    """

    def __init__(self, settings: FacetSettings, *, store: VectorStore | None = None,
                 embedders: EmbedderCache | None = None,
                 encoder: QueryEncoder | None = None) -> None:
        self.settings = settings
        # Set when the process shuts down: a running index job stops at its next batch, and its
        # message says why ("stopped (the server stopping) with ...").
        self.stopping = threading.Event()
        self.stop_reason = "its Facet closing"
        data_dir = Path(settings.data_dir)
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:  # a file in the way, a parent that is a file, no permission
            if e.errno in DISK_GONE_ERRNOS:  # (was "point FACET_DATA_DIR at a folder this user can write")
                raise UnavailableError(gone_text(data_dir, e)) from e
            why = "it is a file" if _is_file(data_dir) else (e.strerror or str(e))
            raise DataError(f"the data folder {data_dir} (FACET_DATA_DIR) cannot be used: "
                            f"{why}; point FACET_DATA_DIR at a folder this user can write") from e
        warn_if_network(data_dir, settings)
        database = data_dir / "facet.db"
        files = (database, data_dir / "facet.db-wal", data_dir / "qdrant-edge")
        try:
            present = [f for f in files if f.exists()] if settings.database_url is None else []
        except OSError as e:  # it exists, but this user may not enter it: each command's traceback
            raise DataError(cannot_enter(data_dir, e)) from e
        if settings.database_url is None and any(
                _read_only_mount(f) for f in (data_dir, *present)):
            # A read-only mount (a `:ro` bind, a snapshot) is not writable even for root: its
            # owner is not the cause, and chown cannot change it.
            raise DataError(not_writable(data_dir, " (it is on a read-only file system)"))
        if settings.database_url is None and any(_unwritable(f) for f in present):
            # The folder writable, its files another user's: writes ended in "attempt to write
            # a readonly database" with the SQL, searches in a PermissionError traceback.
            raise DataError(f"the data folder {data_dir} (FACET_DATA_DIR) holds files this user "
                            "cannot write (after a `sudo facet ...`?): give them back to this "
                            "user (chown -R), or run as their owner")
        self.engine = open_database(settings)
        self.sessions: sessionmaker[Session] = sessionmaker(self.engine, expire_on_commit=False)
        if store is None:
            try:
                store = open_store(settings.vector_backend, data_dir=Path(settings.data_dir),
                                   url=settings.qdrant_url, api_key=settings.qdrant_api_key,
                                   lock_wait_s=settings.store_wait_s,
                                   layout=settings.qdrant_layout())
            except StoreBusyError as e:
                raise ConflictError(str(e)) from e
            except StoreError as e:
                raise InvalidRequestError(str(e)) from e
        self.store = store
        self.embedders = embedders or EmbedderCache(settings.device)
        # An encoder passed in may serve other contexts too: its owner closes it.
        self._owns_encoder = encoder is None
        self.encoder: QueryEncoder = encoder or InlineQueryEncoder(self.embedders)

    def close(self) -> None:
        if self._owns_encoder:
            self.encoder.close()
        self.store.close()
        self.engine.dispose()

    def __enter__(self) -> ServiceContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
