"""List, inspect and delete collections; list and inspect index jobs."""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import logging
import os
import re
import sqlite3
import threading
import time
import unicodedata
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from sqlalchemy import func, select, update
from sqlalchemy.exc import InvalidRequestError as RowGoneError
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, object_session

from app.errors import ConflictError, InvalidRequestError, NotFoundError
from app.services import leases
from app.services.context import (
    MOVED_RECORD,
    RECORDED_RELATIVE,
    ServiceContext,
    job_log_path,
    relative_target,
)
from app.text import check_text_encodable, plural, shell_word
from indexer import metadata as md
from indexer.errors import (
    CollectionNotFoundError,
    StoreBusyError,
    StoreDamagedError,
    StoreError,
    StoreUnavailableError,
    masked_url,
)
from indexer.store import (
    REACH_TIMEOUT_S,  # a listing's wait for the Qdrant server (tests lower it here)
    VectorStore,
    validate_name,
)

if TYPE_CHECKING:
    from app.settings import FacetSettings

logger = logging.getLogger(__name__)

# What a stray's ``owner`` says of the data folder's own SQLite database where the metadata
# database in use is another (FACET_DATABASE_URL set): a laptop's collections under a new
# PostgreSQL URL were listed as strays, and `facet delete`, as advised, destroyed their vectors.
FOLDER_DATABASE = "facet.db in this data folder"


# Collections a delete of this process is removing now (name -> deletes in flight), from the
# flush of their rows to the commit: a search in another thread meanwhile reads the rows, not yet
# deleted for it, and finds the vectors gone. It said "the vector store holds none of it although
# job 1 completed (its store folder removed, or the metadata restored apart from it?)" of a
# collection being deleted (the soak test's delete/re-create race); ``being_deleted`` lets it
# say so instead.
_DELETING: dict[str, int] = {}
_DELETING_LOCK = threading.Lock()


def being_deleted(name: str) -> bool:
    """Whether a delete of this process is removing collection ``name`` now."""
    with _DELETING_LOCK:
        return name in _DELETING


@contextlib.contextmanager
def _deleting(name: str) -> Iterator[None]:
    with _DELETING_LOCK:
        _DELETING[name] = _DELETING.get(name, 0) + 1
    try:
        yield
    finally:
        with _DELETING_LOCK:
            _DELETING[name] -= 1
            if not _DELETING[name]:
                del _DELETING[name]


def is_text(value: str) -> bool:
    """Whether ``value`` is Unicode text the database can store and a store can match: no lone
    surrogate (a command line's bytes that are not UTF-8 arrive as ``\\udce9``; a JSON
    ``"\\ud800"``)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_collection_text(name: Any, param: str | None = "collection") -> None:
    """Refuse a collection name that is not Unicode text (``is_text``) before any query, as
    ``validate_name`` refuses a bad name ("invalid collection name ..."; `facet search -c`
    said so): `facet jobs -c`, `facet delete`, `facet index -c` with a name holding a byte
    that is not UTF-8 ended in a UnicodeEncodeError traceback from the database driver."""
    if isinstance(name, str) and not is_text(name):
        try:
            validate_name(name)
        except StoreError as e:
            raise InvalidRequestError(str(e), param=param) from None


def folder_database(settings: FacetSettings) -> Path | None:
    """The data folder's ``facet.db`` where the metadata database in use is another one
    (``FACET_DATABASE_URL`` set, naming anything but that very file) and the file exists; else
    None (it is the database in use, or there is none)."""
    if not settings.database_url:
        return None
    from app.services.context import names_sqlite_file

    path: Path | None = Path(settings.data_dir) / "facet.db"
    try:
        if path is not None and not path.is_file():
            path = (unfinished_move(Path(settings.data_dir))
                    or moved_elsewhere(Path(settings.data_dir), settings.database_url))
        if path is None:
            return None
    except OSError:  # an unreadable folder: said where it is used
        return None
    if names_sqlite_file(settings.database_url, path):
        return None  # FACET_DATABASE_URL names the data folder's facet.db itself
    return path


def unfinished_move(data_dir: Path) -> Path | None:
    """The renamed facet.db of a `facet move-metadata` that did not finish (killed after the
    rename, before the target's commit returned: its record still says "moving"), where it
    is there; else None. Its collections' vectors are its own: with FACET_DATABASE_URL set to a
    target the commit never reached, they were listed as vectors no database owns, "`facet
    delete NAME` removes them", which deleted the only vectors that database had."""
    from app.services.context import moved_record

    record = moved_record(data_dir)
    renamed = record.get("renamed") if record is not None and record.get("state") == "moving" else None
    if not isinstance(renamed, str) or "/" in renamed or not renamed.startswith("facet.db.moved-"):
        return None
    path = data_dir / renamed
    return path if path.is_file() else None


def _move_target(data_dir: Path) -> tuple[str, Path] | None:
    """A finished `facet move-metadata`'s target (as recorded: password masked) and the renamed
    facet.db it left here (a copy of what the target received), where both are known."""
    from app.services.context import moved_record

    record = moved_record(data_dir)
    if record is None or record.get("state", "moved") != "moved":
        return None
    target, renamed = record.get("target"), record.get("renamed")
    if (not isinstance(target, str) or not isinstance(renamed, str) or "/" in renamed
            or not renamed.startswith("facet.db.moved-")):
        return None
    path = data_dir / renamed
    return (target, path) if path.is_file() else None


def moved_elsewhere(data_dir: Path, database_url: str) -> Path | None:
    """The renamed facet.db of a finished `facet move-metadata` whose target is not
    ``database_url`` (the database in use: mistyped, or a relative SQLite path read from
    another folder), where it is there; else None. Its collections' vectors belong to the
    target: with FACET_DATABASE_URL naming another database they were listed as vectors no
    database owns, "`facet delete NAME` removes them", and the delete removed them."""
    from app.services.context import names_sqlite_file

    moved = _move_target(data_dir)
    if moved is None:
        return None
    target, path = moved
    from indexer.migrate import sqlite_file

    file = sqlite_file(target)
    if relative_target(target):
        # Recorded relative (a move of before the second session of 2026-12-05): a file of
        # that name in each working folder, so never known to be the one in use. Its vectors
        # stay the move's (refused, not deleted); under the database in use they are no strays.
        return path
    if target == masked_url(database_url):
        return None
    if file is not None and names_sqlite_file(database_url, file.expanduser()):
        return None
    return path


def folder_database_collections(path: Path) -> frozenset[str]:
    """The names of the collections ``path`` (a Facet SQLite database) records: opened
    read-only (nothing written, no migration), one query.

    Raises:
        OSError: it cannot be read (the message says why).
    """
    try:
        uri = f"file:{urllib.parse.quote(str(path))}?mode=ro"
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=1.0)) as db:
            return frozenset(str(row[0]) for row in db.execute("SELECT name FROM collections"))
    except sqlite3.Error as e:
        raise OSError(str(e) or type(e).__name__) from e


def folder_owners(settings: FacetSettings) -> tuple[frozenset[str], str | None] | None:
    """``folder_database``'s collection names and, where it cannot be read, why (its names are
    then unknown: empty); None where there is no such database."""
    path = folder_database(settings)
    if path is None:
        return None
    try:
        return folder_database_collections(path), None
    except OSError as e:
        return frozenset(), f"{path} cannot be read: {e.strerror or e}"


# How the data folder's facet.db is moved into the database FACET_DATABASE_URL names:
# `facet move-metadata` moves that facet.db only with FACET_DATABASE_URL unset (it refuses
# while it is set), so the advice says to unset it first.
MOVE_IT = "or unset it and run `facet move-metadata --to URL` to move that database"


# How ``folder_owner`` names the renamed facet.db of a move that did not finish, and the
# target of one that did (``moved_elsewhere``).
MOVING = "a facet move-metadata that did not finish"
MOVED_TO = "where facet move-metadata moved this data folder's metadata"


def folder_database_owner(settings: FacetSettings) -> str:
    """How a stray's ``owner`` names ``folder_database``: ``FOLDER_DATABASE``, the renamed
    facet.db of a move that did not finish (``unfinished_move``), or the target of one that
    did (``moved_elsewhere``)."""
    data_dir = Path(settings.data_dir)
    moving = unfinished_move(data_dir)
    if moving is not None:
        return f"{moving.name} in this data folder ({MOVING})"
    moved = _move_target(data_dir) if settings.database_url else None
    if moved is not None and moved_elsewhere(data_dir, settings.database_url or "") is not None:
        relative = f", {RECORDED_RELATIVE}" if relative_target(moved[0]) else ""
        return f"{moved[0]} ({MOVED_TO}{relative}; its copy {moved[1].name} is in this data folder)"
    return FOLDER_DATABASE


# What to do where a move's target was recorded relative: "set FACET_DATABASE_URL to that
# one" was said to a user whose FACET_DATABASE_URL already was it.
RELATIVE_WAY_OUT = (f"no FACET_DATABASE_URL is known to be a target recorded relative: to use or delete "
                    f"its collections, write that file's URL with its absolute path (sqlite:////PATH) as "
                    f"\"target\" in the data folder's {MOVED_RECORD}")


def owned_elsewhere(name: str, owner: str) -> str:
    """Why the vectors of stray ``name`` are not deleted: the collection of the data folder's
    facet.db they belong to (``owner``, a stray's ``owner``), and what to do."""
    if MOVING in owner:
        # ("never received" was said while the move's commit was still hanging: it landed.)
        return (f"the vectors of {name!r} belong to collection {name!r} of {owner}, which this "
                "database does not hold (yet: the move's commit may still be under way): unset "
                "FACET_DATABASE_URL and run any command to be told how to finish or undo that "
                "move (docs/deploy.md)")
    if owner == FOLDER_DATABASE:
        return (f"the vectors of {name!r} belong to collection {name!r} of {owner}: unset "
                f"FACET_DATABASE_URL to use or delete it, {MOVE_IT} (docs/deploy.md)")
    if RECORDED_RELATIVE in owner:
        return f"the vectors of {name!r} belong to collection {name!r} of {owner}: {RELATIVE_WAY_OUT} (docs/deploy.md)"
    if MOVED_TO in owner:
        return (f"the vectors of {name!r} belong to collection {name!r} of {owner}: "
                "FACET_DATABASE_URL names another database; set it to that one to use or "
                "delete it (docs/deploy.md)")
    return (f"the vectors of {name!r} may belong to a collection of {owner}: unset "
            "FACET_DATABASE_URL to look, or make it readable")


def folder_owner(settings: FacetSettings, name: str) -> str | None:
    """The owner of store vectors ``name`` that the database in use does not record (a
    stray's ``CollectionInfo.owner``): ``FOLDER_DATABASE`` where the data folder's facet.db
    records a collection of that name (FACET_DATABASE_URL naming another database), with why
    where that file cannot be read (it may); else None."""
    owners = folder_owners(settings)
    if owners is None:
        return None
    names, error = owners
    owner = folder_database_owner(settings)
    if error is not None:
        return f"{owner} ({error})"
    return owner if name in names else None


def owned_advice(settings: FacetSettings, name: str) -> str | None:
    """What to say, instead of "delete it", of store vectors ``name`` the database in use does
    not record but the data folder's facet.db does (``folder_owner``): whose collection it is
    and how to use or move it; None where no such facet.db records it. `facet index`, `facet
    search` and `facet cluster` advised deleting it, which `facet delete` refuses."""
    owner = folder_owner(settings, name)
    if owner is None:
        return None
    if MOVING in owner or MOVED_TO in owner:
        return owned_elsewhere(name, owner)
    if owner == FOLDER_DATABASE:
        return (f"{name!r} is a collection of {owner}: unset FACET_DATABASE_URL to use it, "
                f"{MOVE_IT}")
    return (f"{name!r} may be a collection of {owner}: unset FACET_DATABASE_URL to look, or "
            "make it readable")


def unowned_store_collections(settings: FacetSettings) -> str | None:
    """What `facet serve` warns of at start (None: nothing): under ``FACET_DATABASE_URL``,
    the embedded store's collections that this database does not record (a mistyped or switched
    URL over a data folder indexed with another database), how many, and how many of them the
    data folder's facet.db records. Cheap: the store folder's names and one query each; never
    raises (None where anything cannot be read)."""
    if not settings.database_url or settings.qdrant_url or settings.vector_backend != "edge":
        return None  # (a Qdrant server's collections may be other applications')
    try:
        root = Path(settings.data_dir) / "qdrant-edge"
        stored = {p.name for p in root.iterdir() if (p / "facet_vectors.json").is_file()} \
            if root.is_dir() else set()
        if not stored:
            return None
        engine = md.make_engine(settings.resolved_database_url, migrate=False, pooled=False)
        try:
            with Session(engine) as session:
                known = {c.name for c in md.list_collections(session)}
        finally:
            engine.dispose()
    except Exception as e:  # never fatal: the listing says it too
        logger.debug("the store's collections not compared with the database's: %s", e)
        return None
    unowned = sorted(stored - known)
    if not unowned:
        return None
    shown = ", ".join(unowned[:5]) + (", ..." if len(unowned) > 5 else "")
    said = (f"the embedded store holds {len(unowned)} collection"
            f"{'' if len(unowned) == 1 else 's'} ({shown}) that the database FACET_DATABASE_URL "
            "names does not record")
    owners = folder_owners(settings)
    if owners is not None:
        names, error = owners
        owned = [n for n in unowned if n in names]
        # The data folder's facet.db, or the renamed one of a move (unfinished, or finished to
        # another database than this one): "unset it" was wrong advice after a move, where
        # every command then refuses ("was moved to ...: set FACET_DATABASE_URL to it").
        owner = folder_database_owner(settings)
        advice = (f"unset it to use that one, {MOVE_IT}" if owner == FOLDER_DATABASE else
                  RELATIVE_WAY_OUT if RECORDED_RELATIVE in owner else
                  "set it to that one" if MOVED_TO in owner else
                  "unset it and run any command to be told how to finish or undo that move")
        if error is not None:
            said += f"; {owner} may ({error})"
        elif owned:
            said += (f"; {owner} records {len(owned)} of them: is FACET_DATABASE_URL the "
                     f"database meant? ({advice}: docs/deploy.md)")
    return said + "; `facet collections` lists them"


def store_place(backend: str, name: str) -> str:
    """Where a collection indexed into ``backend`` keeps its vectors, for a message: "the
    embedded store (qdrant-edge/NAME)", "the local store (qdrant-local/collection/NAME)", "a Qdrant
    server"."""
    return {"edge": f"the embedded store (qdrant-edge/{name})",
            "local": f"the local store (qdrant-local/collection/{name})"}.get(backend,
                                                                              "a Qdrant server")


def _store_label(backend: str) -> str:
    return {"edge": "the edge store", "local": "the local store"}.get(backend, "the server")


def _store_in_use_text(backend: str) -> str:
    return {"edge": "the edge store (qdrant-edge/) is in use",
            "local": "FACET_VECTOR_BACKEND=local is in use (qdrant-local/)"}.get(
        backend, "FACET_QDRANT_URL points at a Qdrant server")


def _back_to(recorded: str, in_use: str) -> str:
    """The settings that make ``recorded`` the store in use again, from ``in_use``."""
    if recorded == "edge":
        return ("unset FACET_VECTOR_BACKEND (edge is the default)" if in_use == "local" else
                "unset FACET_QDRANT_URL (and FACET_VECTOR_BACKEND=server, if set)")
    if recorded == "local":
        return "set FACET_VECTOR_BACKEND=local"
    return ("set FACET_QDRANT_URL to that server's URL" + (
        " and unset FACET_VECTOR_BACKEND=local" if in_use == "local" else ""))


def named_default(default: str, embedders: Sequence[tuple[str, str]]) -> str | None:
    """The vector of a collection that the default embedder (``FACET_DEFAULT_EMBEDDER``) names,
    read as indexing reads it: the vector's name, or what the collection recorded as loading it
    (a checkpoint's path, a spec with options: ``/ckpt/causal2vec``, ``minilm[instruction_weight=0.5]``),
    a path also as written relative to this working directory or with ``~``. Indexing honoured
    such a default and searches, the UI and listings did not (they compared vector names only).

    Args:
        default: the setting.
        embedders: the collection's (vector name, recorded spec), in the order added.

    Read last by the name the default loads as (as ``embedders.registry.saved_name`` reads it,
    without loading the registry): a checkpoint's path or a spec whose options the collection
    did not record (``/repo/checkpoints/causal-eos`` for ``causal-eos``;
    ``minilm[instruction_weight=1]`` for ``minilm``). `-e` with the same value searched that
    vector, and the default the first one.

    Returns:
        The vector's name, or None where the default names none of them.
    """
    matched = default_match(default, embedders)
    return matched[0] if matched is not None else None


def default_match(default: str, embedders: Sequence[tuple[str, str]]) -> tuple[str, bool] | None:
    """``named_default``'s vector, and whether the default names it only by the name it loads
    as (not as the vector's name or its recorded spec): a search then encodes its query with
    the default itself, options included, as `-e DEFAULT` does."""
    for name, spec in embedders:
        if default in (name, spec):
            return name, False
    base = default.split("[", 1)[0]
    a_path = "/" in base or "\\" in base or base.startswith("~")  # (a checkpoint's folder)
    if a_path:
        try:
            absolute = str(Path(base).expanduser().resolve()) + default[len(base):]
        except (OSError, RuntimeError):
            return None
        for name, spec in embedders:
            if spec == absolute:
                return name, False
    # Read without the registry (it imports torch: a listing took 1.7 s more): a spec with
    # options of a vector's name, or a checkpoint folder's config naming it.
    for name, _spec in embedders:
        if base.strip() == name:
            return name, True
    if a_path:
        try:
            meta = json.loads((Path(base).expanduser() / "facet_config.json").read_text())
        except (OSError, ValueError, RuntimeError):  # (none, damaged: whatever loads it says so)
            return None
        loads_as = meta.get("name") if isinstance(meta, dict) else None
        for name, _spec in embedders:
            if loads_as == name:
                return name, True
    return None


def default_vector(default: str, embedders: Sequence[tuple[str, str]],
                   missing: Mapping[str, int] | None = None) -> tuple[str | None, str | None]:
    """The vector a search that names no embedder uses: the one the default embedder names
    (``named_default``), else the first added; where that one lacks vectors of some indexed
    documents (``missing``: ``CollectionInfo.vectors_missing``; an embedder being added, from
    its job's first batch on) and another of the collection has them all, that one instead.

    Returns:
        (the vector's name, None for a collection of no embedder; why the complete one was
        picked over the default, else None).
    """
    if not embedders:
        return None, None
    first = named_default(default, embedders) or embedders[0][0]
    lacking = (missing or {}).get(first, 0)
    if lacking <= 0:
        return first, None
    complete = next((name for name, _ in embedders if not (missing or {}).get(name)), None)
    if complete is None:
        return first, None
    why = (f"searched with {complete!r}, which has vectors of every document: {first!r} "
           f"(the default) has none yet for {lacking:,} of them; name --embedder {first} "
           "(the API's \"embedder\") to search with it")
    return complete, why


def backend_mismatch(name: str, recorded: str, in_use: str, *, held: bool | None = None) -> str:
    """Why collection ``name``, indexed into the ``recorded`` store (``Collection.backend``:
    edge, local or server), is not served from the ``in_use`` one, and how to get back to its
    vectors, in one line; ``held``: whether the store in use holds a collection of its name
    (an older copy, possibly stale; None: not asked).

    Switching FACET_VECTOR_BACKEND or FACET_QDRANT_URL over a data folder said "its folder
    qdrant-edge/NAME is missing" beside that very folder; an index run under the other store
    wrote a second copy there while the row kept the first store, and switching back served
    the first, stale copy without a word.
    """
    hold = ("" if held is None else " that does not hold it" if not held
            else " whose copy of it may be stale")
    return (f"it was indexed into {store_place(recorded, name)}, but "
            f"{_store_in_use_text(in_use)}{hold}: {_back_to(recorded, in_use)} to use it, or "
            f"index its sources again (`facet index`) to write them into "
            f"{_store_label(in_use)}")


def points_missing_text(points: int, chunks: int, stopped_removal: str | None = None) -> str:
    """What is said of a collection whose store holds fewer points than it has chunks
    (``CollectionInfo.points_missing``): how many are missing, the likely whys, what to do.
    ``stopped_removal``: where its newest job is a removal that stopped part-way
    (``stopped_removal_text``), that is the why, and running it again is what to do: `facet
    index` of its sources wrote back the documents being removed. The text names no collection:
    a listing's line starts with its name, a search's note with "collection NAME: " (the same
    text in both).

    A `facet delete` killed part-way (its store collection dropped first, the metadata's commit
    after it: ``CollectionService.delete``) leaves the rows and a store short of points; the note
    said only "restored from another time than the database?", and to index it again."""
    missing = chunks - points
    if stopped_removal is not None:
        return (f"{points:,} point{'' if points == 1 else 's'} for {chunks:,} chunks: "
                f"{stopped_removal}")
    return (f"{points:,} point{'' if points == 1 else 's'} for {chunks:,} chunks: the vectors of "
            f"{missing:,} chunk{'' if missing == 1 else 's'} are missing from the store, and "
            "searches cannot find them: restored from another time than the database? index its "
            "sources again (`facet index`) to write them; or a `facet delete` of it interrupted "
            "part-way? run it again to finish it")


@dataclass
class CollectionInfo:
    """A collection as its metadata and its store describe it now.

    Attributes:
        name: the collection's name.
        backend: the vector store it was indexed into: ``edge`` (embedded, the default),
            ``local`` (qdrant-client's local mode) or ``server``.
        embedders: vector name (an embedder's name) -> its dimension.
        chunk_size: tokens per chunk, fixed at its creation.
        chunk_overlap: tokens shared by consecutive chunks, fixed at its creation.
        documents: documents recorded, whatever their state.
        documents_indexed: documents indexed (searchable).
        documents_failed: documents whose last indexing failed.
        chunks: chunks recorded in the metadata.
        points: points in the store; None where they cannot be counted now (another process
            holds or writes it, the store is missing or damaged, none created yet).
        created_at: when it was created, ISO 8601 UTC (``2026-11-28T10:19:45Z``).
        writer: the job writing it now, else None.
        lexical: whether it keeps term vectors (lexical and hybrid search); None where not
            readable now.
        lexical_note: set where its term vectors are of an older definition: which, and what
            rewrites them; else None.
        sources: vector name -> what loads its embedder, where not the name itself (a
            checkpoint's path, a spec with options).
        open_in: the process holding its embedded store open without writing it, else None.
        disk_bytes: the disk space its vectors take here (as ``du`` counts); None for a Qdrant
            server's, or with no folder yet.
        vectors_missing: vector name -> indexed documents without vectors of it (for their
            current content); only the names that lack some.
        store_missing: its store holds no collection of its name (``points`` is then None).
        store_elsewhere: where it is missing and its vectors were written in another data
            folder (``wrong_data_folder``; ``FACET_DATABASE_URL`` set): why FACET_DATA_DIR may
            not be the folder it was indexed into, else None. `facet delete` and `facet index`
            refuse it then (``--force`` deletes its metadata).
        store_damaged: why its embedded store's files cannot be read, else None.
        store_unreadable: why its embedded store's files cannot be opened by this process (another
            user's, on a read-only mount, not readable), else None: ``points`` is then None.
        points_missing: how many of its chunks have no point in the store: ``chunks`` less
            ``points`` where the store holds fewer (a store restored from an older copy than
            the database), counted while no job writes it; else 0.
        owner: a stray's (vectors no collection of this database owns) other database, where
            FACET_DATABASE_URL names the database in use and the data folder's facet.db records
            a collection of its name: ``FOLDER_DATABASE``, or, where that file cannot be read,
            ``FOLDER_DATABASE`` and why (it may own them); else None. `facet delete` and
            ``DELETE /collections/{name}`` refuse such vectors.
        store_in_use: the vector store this process uses (``edge``, ``local`` or ``server``)
            where it is not ``backend``, the one the collection was indexed into
            (FACET_VECTOR_BACKEND or FACET_QDRANT_URL set or unset since); else None. Searches
            and clusterings of it are refused; `facet index` writes it anew into this store.
        default_embedder: the embedder (vector name) a search naming none uses: the one
            FACET_DEFAULT_EMBEDDER names, else the first added; one with vectors of every
            document where that one lacks some. None for a collection of no embedder.
        stopped_removal: where points are missing and its newest job is a removal that
            stopped part-way (interrupted or failed), that removal and the command that
            finishes it (not `facet index`, which adds its documents back); else None.
    """

    name: str
    backend: str
    embedders: dict[str, int]
    chunk_size: int
    chunk_overlap: int
    documents: int
    documents_indexed: int
    documents_failed: int
    chunks: int
    points: int | None
    created_at: str
    # Set while a job writes the collection ("job 12 (pid 345 on host h, heartbeat 2s ago)");
    # an embedded store's points cannot be counted then (``points`` is None).
    writer: str | None = None
    # Whether it keeps the term vectors of lexical and hybrid search (None: not readable now).
    lexical: bool | None = None
    # Set when they are of an older definition of a term (its word search misses words inside
    # Chinese text): which, and what rewrites them (``VectorStore.older_lexical``).
    lexical_note: str | None = None
    # Vector name -> what loads its embedder, where that is not the name itself (a checkpoint's
    # path, a name with options): searches load it.
    sources: dict[str, str] = field(default_factory=dict)
    # An embedded store's collection open in another process that is not writing it (a
    # `facet serve` that searched it): "pid 345 on host h". Its points cannot be counted here.
    open_in: str | None = None
    # The disk space its vectors take here, as ``du`` counts it (``disk_bytes``: files
    # stat'ed, the shard not opened); None for a Qdrant server's, not known locally.
    disk_bytes: int | None = None
    # Vector name -> how many indexed documents have no vectors of it (for their current
    # content): searches with that embedder cannot find them until `facet index` with it runs.
    vectors_missing: dict[str, int] = field(default_factory=dict)
    # Its store holds no collection of its name (an embedded store's folder
    # qdrant-edge/NAME removed, a server's collection deleted): ``points`` is None, and a search
    # fails. ``store_note`` says so in a line, for listings.
    store_missing: bool = False
    # A wrong FACET_DATA_DIR beside a shared FACET_DATABASE_URL: every collection read "store
    # files missing ... `facet delete NAME` removes it", and that delete (exit 0) dropped the
    # metadata of vectors that were in the other data folder (the metadata exploration of the
    # sixth session of 2026-12-05).
    store_elsewhere: str | None = None
    # Why its embedded store's files cannot be read (a file cut short or garbled: the store's
    # message, naming the file), else None: ``points`` is None, and searches and indexing
    # fail; `facet delete` removes it. A listing failed on it (every collection unlisted, exit
    # 4), and so did the delete its message advised.
    store_damaged: str | None = None
    # Why its embedded store's files cannot be opened by this process, though they are there: a
    # folder another user owns or that cannot be read (a restore run as root, a copy made with
    # another user's permissions), a read-only mount of its folder. ``points`` is None; its
    # searches fail saying the same. One such collection failed the whole listing (exit 7,
    # naming only it; a folder that could not be read at all, a traceback).
    store_unreadable: str | None = None
    # How many of its chunks have no point in the store (``chunks`` - ``points``, where the store
    # holds fewer; 0 otherwise): a store older than its database (a backup whose qdrant-edge/
    # was copied before facet.db, or restored from another day). Its searches cannot find those
    # chunks; the listing said "47 chunks, 40 points" without a word, and searches nothing.
    # The next `facet index` of its sources writes them again. Compared only while no job
    # writes it, and not where its points are another store's (``store_in_use``).
    points_missing: int = 0
    # A stray's other database: the data folder's facet.db, where FACET_DATABASE_URL names the
    # one in use and facet.db records a collection of its name (``FOLDER_DATABASE``; with why
    # where it cannot be read). The listing advised `facet delete` for a laptop's collections
    # seen under a new PostgreSQL URL, and following it destroyed their vectors.
    owner: str | None = None
    # The store in use where it is not the one the collection was indexed into: FACET_QDRANT_URL
    # set over collections of the embedded store read "its folder qdrant-edge/NAME is missing"
    # beside that very folder; any switch of FACET_VECTOR_BACKEND too (edge, local, server).
    store_in_use: str | None = None
    # The vector a search (a clustering, the UI's picker) that names no embedder uses
    # (``default_vector``): the one FACET_DEFAULT_EMBEDDER names, else the first added; one
    # with vectors of every document over a default that lacks some (an embedder being added).
    # Nothing said which, and the listing named the embedders in the order added. None for a
    # collection of no embedder.
    default_embedder: str | None = None
    # Where its newest job is a removal that stopped part-way (``stopped_removal_text``): that
    # removal and the command that finishes it; else None. Its deleted points read as missing
    # from the store, and the advice there, `facet index` of its sources, added back the
    # documents being removed.
    stopped_removal: str | None = None

    @property
    def store_note(self) -> str | None:
        """What a listing says of a collection whose store is missing, damaged, unreadable or
        short of points (None otherwise)."""
        if self.store_damaged is not None:
            return f"store files damaged: {self.store_damaged}"
        if self.store_unreadable is not None:
            return f"store files unreadable: {self.store_unreadable}"
        if self.points_missing > 0 and self.points is not None:
            return points_missing_text(self.points, self.chunks, self.stopped_removal)
        if self.store_in_use is not None:
            return ("not in the vector store in use: "
                    + backend_mismatch(self.name, self.backend, self.store_in_use,
                                       held=not self.store_missing))
        if not self.store_missing:
            return None
        where = (f"its folder qdrant-edge/{self.name} is missing" if self.backend == "edge"
                 else f"its folder qdrant-local/collection/{self.name} is missing"
                 if self.backend == "local" else "the vector store has no collection of its name")
        if self.store_elsewhere is not None:
            return (f"store files missing: {where}; {self.store_elsewhere}: set it to that folder "
                    f"(`facet delete {self.name} --force` deletes its metadata)")
        return (f"store files missing: {where}; searches fail until its sources are indexed "
                f"again (`facet index`), or `facet delete {self.name}` removes it")

    def embedders_label(self) -> str:
        """``minilm (384-d, default), causal-eos (576-d, from /path/to/checkpoint; no vectors for 3
        of the 40 documents)``: for listings; ``default`` marks, among two or more, the one a
        search naming none uses (``default_embedder``)."""
        def details(name: str, dim: int) -> str:
            source = f", from {self.sources[name]}" if name in self.sources else ""
            missing = (f"; no vectors for {self.vectors_missing[name]:,} of the "
                       f"{self.documents_indexed:,} documents" if self.vectors_missing.get(name) else "")
            # Which of two or more a search naming none uses (``default_embedder``).
            default = ", default" if name == self.default_embedder and len(self.embedders) > 1 else ""
            return f"{name} ({dim}-d{default}{source}{missing})"
        return ", ".join(details(name, dim) for name, dim in self.embedders.items())


def store_folder_here(settings: Any) -> str:
    """What ``Collection.store_folder`` records of a collection whose vectors are written in
    this process's data folder (resolved: a folder reached by a link is the same folder)."""
    return os.path.realpath(settings.data_dir)


def wrong_data_folder(session: Session, settings: Any, store: Any,
                      coll: md.Collection) -> str | None:
    """Why FACET_DATA_DIR may not be the data folder of ``coll``, whose store folder is missing
    here, else None: only with ``FACET_DATABASE_URL`` set (a folder's own facet.db is its own)
    and the embedded store. Where it recorded its folder (``Collection.store_folder``), that
    folder, if it is another; else (a collection of an older Facet) where, of the database's
    collections of the embedded store with chunks, none has its store folder here."""
    if settings.database_url is None or store.backend != "edge" or coll.backend != "edge":
        return None
    here = store_folder_here(settings)
    if coll.store_folder is not None:
        if coll.store_folder == here:
            return None
        return (f"its vectors were written in the data folder {coll.store_folder}, and "
                f"FACET_DATA_DIR is {here}: FACET_DATA_DIR may not be the data folder it was "
                "indexed into")
    written = select(md.Chunk.id).join(md.Document).where(
        md.Document.collection_id == md.Collection.id).exists()
    names = set(session.scalars(select(md.Collection.name).where(
        md.Collection.backend == "edge", written)))
    try:
        present = set(store.list_collections())
    except StoreError:
        return None
    if not names or names & present:
        return None
    return (f"no collection of this database (FACET_DATABASE_URL) has its store folder in "
            f"this data folder ({settings.data_dir}): FACET_DATA_DIR may not be the data folder "
            "they were indexed into")


def elsewhere_refusal(name: str, store_elsewhere: str) -> ConflictError:
    """The refusal to delete collection ``name`` whose store folder is missing from a data
    folder that may not be its own (``CollectionInfo.store_elsewhere``)."""
    return ConflictError(f"collection {name!r} has no store folder here, and {store_elsewhere}; "
                         "set FACET_DATA_DIR to that folder, or `facet delete "
                         f"{shell_word(name)} --force` deletes its metadata; nothing was deleted")


# Every state a job is shown in (``effective_state``: ``stalled`` is a running job whose writer
# stopped renewing its lease); /openapi.json lists them, for clients generated from it.
JobState = Literal["queued", "running", "completed", "failed", "interrupted", "cancelled", "stalled"]


@dataclass
class JobInfo:
    """An index job as its row records it, with its state as it truly is now.

    Attributes:
        id: the job's id.
        collection: the collection it indexes into.
        source: the absolute path it indexes.
        embedder: the embedder's name.
        state: ``queued``, ``running``, ``completed``, ``failed``, ``interrupted``,
            ``cancelled`` or ``stalled`` (running, its writer no longer renewing its lease).
        docs_seen: documents read so far.
        docs_indexed: documents written (new or changed).
        docs_skipped: documents unchanged, left as they were.
        docs_failed: documents that could not be read or indexed.
        docs_deleted: documents removed as gone from the source (``sync``).
        chunks_written: chunks written to the store.
        timings: seconds per stage (``parse_chunk``, ``encode``, ``store``, ``metadata``;
            ``load_model`` where the run loaded the model).
        started_at: when it began running (ISO 8601 UTC); None for a job that never ran.
        finished_at: when it ended (ISO 8601 UTC), None until then.
        resumed_from: the id of the job it resumes, else None.
        message: what it is doing or how it ended, where there is more to say than ``state``
            (the stage a running job is in, why it failed or stopped and how to resume, the
            documents that failed in a completed one), else None.
        errors: the first of its per-document errors and warnings, each ``{"document",
            "kind", "message"}``; none in a listing of jobs. A removal's keys are no errors:
            ``removed_keys`` lists them.
        runner: what runs it: ``inline``, ``thread``, ``process`` or ``celery``.
        host: the host of the process that submitted it or, once started, runs it; None
            where not recorded.
        chunks_total: a worker job's planned chunk tasks; 0 for a job run in one process.
        chunks_done: a worker job's finished chunk tasks; 0 for a job run in one process.
        docs_total: the documents it expects (or, once completed, saw); 0 where not known.
        docs_total_estimated: whether ``docs_total`` is an estimate (records counted by lines).
        errors_total: how many per-document errors and warnings it has in all.
        removed_keys: a removal's document keys (`facet delete C --document KEY`, source
            ``remove: KEY``), the keys it was given, in order: as many as ``errors``
            (``CollectionService.job``'s ``errors``: 100 unless asked) after its first
            ``errors_offset`` (a removal has no errors, so that offset pages its keys); none in
            a listing of jobs, nor for an index job.
        removed_keys_total: how many keys the removal was given in all (0 for an index job);
            ``docs_deleted`` counts the documents it removed.
        queued_at: when it was asked for (ISO 8601 UTC).
        cancel_requested: someone asked it to stop (``Facet.cancel_job``); it ends
            ``cancelled`` at its next batch boundary.
        sync: the ``--sync``/``--no-sync`` it was asked (None: its source's default, a folder
            syncs and a file does not), which what resumes it repeats.
    """

    id: int
    collection: str
    source: str
    embedder: str
    state: JobState
    docs_seen: int
    docs_indexed: int
    docs_skipped: int
    docs_failed: int
    docs_deleted: int
    chunks_written: int
    timings: dict[str, float]
    # When the job began running: None for a job that never ran (still queued, or failed,
    # cancelled or superseded before it started); ``queued_at`` says when it was asked for.
    started_at: str | None
    finished_at: str | None
    resumed_from: int | None
    message: str | None
    errors: list[dict[str, str]] = field(default_factory=list)
    runner: str = "inline"
    host: str | None = None
    # A worker job's chunk tasks (planned, finished); 0 for a job run in one process.
    chunks_total: int = 0
    chunks_done: int = 0
    docs_total: int = 0
    # Whether ``docs_total`` is an estimate: a job run in one process records the documents it
    # expects when it starts (records counted by their lines) and the documents seen once it
    # completes; a worker job's planned total, and a completed job's, are counts.
    docs_total_estimated: bool = False
    # How many per-document errors and warnings the job has in all; ``errors`` holds the
    # first of them (``CollectionService.job``'s ``errors``: 100 unless asked), none in a
    # listing of jobs.
    errors_total: int = 0
    queued_at: str = ""
    # A removal's keys (recorded as job-error rows of kind ``REMOVAL_KEY_KIND``, which are
    # not errors: until 2026-11-30 a removal of 500 documents listed "500 errors").
    removed_keys: list[str] = field(default_factory=list)
    removed_keys_total: int = 0
    # Someone asked the job to stop (``Facet.cancel_job``): a running job goes on to its next
    # batch boundary, then ends ``cancelled``.
    cancel_requested: bool = False
    # --sync / --no-sync as the job was asked (None: its source's default, a folder syncs and a
    # file does not); what resumes it asks the same (the UI's Resume synced a --no-sync job).
    sync: bool | None = None

    def when(self) -> str:
        """When the job started, or that it has not: "started T", "queued T" (waiting), or
        "queued T, never started" (it ended before it ran: a model that would not load, a
        source gone, a later job that superseded it). It said "started" at its queue time."""
        if self.started_at:
            return f"started {self.started_at}"
        waiting = self.state == "queued"
        return f"queued {self.queued_at or '?'}" + ("" if waiting else ", never started")


MAX_JOBS_LISTED = 1000

# The states of a job that has not ended: a listing shows every such job, however old.
LIVE_STATES = ("queued", "running", "stalled")


class JobList(list[JobInfo]):
    """A listing of jobs (``CollectionService.jobs``), with how many older ones it leaves out
    and, where it leaves some out, ``next_before``: the next page's ``before``, the id of the
    last of its newest ``limit`` jobs (the older ones that have not ended, listed after them on
    a first page, come again in their place)."""

    not_shown: int = 0
    next_before: int | None = None


# A document's states (``md.Document.status``): ``pending`` (its points may be partly written:
# a run stopped between the store and its row), ``indexed``, or ``error`` (``error`` says why).
DocumentStatus = Literal["indexed", "error", "pending"]
DOCUMENT_STATUSES: tuple[str, ...] = ("indexed", "error", "pending")
MAX_DOCUMENTS_LISTED = 1000


@dataclass
class DocumentInfo:
    """A document of a collection as ``CollectionService.documents`` lists it.

    Attributes:
        key: its key, as searches return it (``doc_id``) and as a removal takes it (`facet
            delete C --document KEY`, ``DELETE /collections/{name}/documents?key=``): a file's
            absolute path, a jsonl/csv/json record's id.
        source: the file it was read from (a record's file).
        title: its title, where it has one.
        status: ``indexed``, ``error`` (``error`` says why) or ``pending`` (its points may be
            partly written: a run stopped between the store and its row).
        chunks: how many chunks it has in the store.
        updated_at: when its row was last written (ISO 8601 UTC): its content indexed, or its
            status or metadata changed.
        metadata: its metadata (a record's other fields: what ``--filter`` matches).
        error: why it could not be indexed (status ``error``), else None.
    """

    key: str
    source: str
    title: str | None
    status: DocumentStatus
    chunks: int
    updated_at: str
    metadata: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


class DocumentList(list[DocumentInfo]):
    """A page of a collection's documents (``CollectionService.documents``), with how many
    past it are left out, and ``twins``: the keys of the page that another key of the
    collection equals but for its Unicode normalization form (a file named in NFC and one in
    NFD, from macOS: two documents whose keys print alike), on this page or not."""

    not_shown: int = 0
    twins: frozenset[str] = frozenset()


# Per-document errors a job comes with unless asked for more (or fewer), and the most an edge
# may ask for: a job with 20,000 errors answered 2.5 MB at each poll of its progress.
DEFAULT_JOB_ERRORS = 100
MAX_JOB_ERRORS = 1000


# A listing's count of an edge shard's points, kept in its folder with the state of the shard's
# files it was counted at (``CollectionService._keep_count``): other processes' listings read it
# while those files are unchanged.
COUNT_SIDE = "facet_listing_count.json"

# A worker job queued this long with no job writing its collection gets a hint in `facet jobs`.
QUEUED_HINT_S = 300.0


def _later_completed(job: md.IndexJob) -> int | None:
    """A job of the same collection, source and embedder that completed after ``job`` was
    queued (the newest), or None."""
    session = object_session(job)
    if session is None:
        return None
    J = md.IndexJob
    return session.scalar(select(J.id).where(
        J.collection_id == job.collection_id, J.source == job.source, J.embedder == job.embedder,
        J.id > job.id, J.state == "completed").order_by(J.id.desc()).limit(1))


# How a queued job's message starts once a later job did its work (`facet jobs --follow` stops).
SUPERSEDED = "superseded by job"


def utc_text(moment: dt.datetime) -> str:
    """A stored time (naive UTC) as ISO 8601 marked UTC, ``2026-11-28T10:19:45Z``: without the
    zone a reader (or JavaScript's Date) took it for local time, hours off."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC).replace(tzinfo=None)
    return moment.isoformat(timespec="seconds") + "Z"


def follow_hint(job_id: int) -> str:
    """How to wait for job ``job_id``, in the words of every edge (these messages reach the
    CLI, the API and the UI alike)."""
    return (f"wait for job {job_id} to finish (`facet jobs {job_id} --follow`, GET "
            f"/jobs/{job_id}, or the UI's Collections tab)")


def kept_said(job: Any, indexed: int | None = None) -> str:
    """``": what was indexed is kept"``, ending a stopped job's resume hint where the job wrote
    something (documents indexed, or chunks of a file it stopped within); ``""`` where it wrote
    nothing: a job cancelled before its first batch said "nothing was written; ... press
    Resume: what was indexed is kept" (the UI exploration of the fourth session of
    2026-12-07). ``job``: a job row or a ``JobInfo``. A row's counts are read as loaded, never
    from the database: this is said after a rollback, in an outage too (a read there raised
    inside the handler that says the outage); where they are not loaded, ``indexed`` (the
    caller's count of the run) says, else it is said."""
    state = getattr(job, "_sa_instance_state", None)
    values = state.dict if state is not None else vars(job)
    counts = [values.get("docs_indexed"), values.get("chunks_written")]
    if all(count is None for count in counts):  # (expired: not known here)
        return ": what was indexed is kept" if indexed is None or indexed else ""
    return ": what was indexed is kept" if any(counts) else ""


def resume_command(job: md.IndexJob) -> str:
    """The `facet index` that goes on with ``job``: its source, collection, embedder and
    ``--text-column`` (the hint named no embedder, so following it after a second embedder's
    job stopped ran the default one, which found nothing to do: the second embedder's vectors
    stayed missing). A
    job of the workers goes on on the workers (``--background``): in the foreground, beside a
    worker that holds an embedded store's collection, it was refused as open elsewhere."""
    spec = next((e.spec for e in job.collection.embedders if e.name == job.embedder),
                job.embedder)
    # The job's --text-column too: without it the rerun read the default field ("text") of
    # every record, re-embedding the ones done and indexing the wrong field, exit 0.
    column = f" --text-column {shell_word(job.text_column)}" if job.text_column else ""
    # Its --sync / --no-sync too: a --no-sync job of a folder resumed without it synced, and
    # removed the documents kept on purpose (their files deleted at the source).
    sync = {True: " --sync", False: " --no-sync"}.get(job.sync) if job.sync is not None else ""
    return (f"facet index {shell_word(job.source)} --collection {job.collection.name} "
            f"--embedder {shell_word(spec)}{column}{sync or ''}"
            + (" --background" if job.runner == "celery" else ""))


# How a removal's job row starts its ``source`` (``indexing.removal_source``): ``remove: KEY``,
# ``remove: KEY and 3 more``.
REMOVAL_PREFIX = "remove: "


def is_removal(job: md.IndexJob) -> bool:
    """Whether ``job`` is a removal (`facet delete C --document KEY`), not an index job: it
    has no `facet index` that resumes it."""
    return (job.source or "").startswith(REMOVAL_PREFIX)


# The kind of the job-error rows that record each key a removal of several keys was given
# (``IndexService.remove_documents``): its ``source`` names only the first ("remove: KEY and 2
# more"), and the hint to run it again asked for "all 3 keys it was given" that only the caller
# knew. They are no errors: `facet jobs ID` and ``GET /jobs/{id}`` list them as the job's
# ``removed_keys`` (``JobInfo``), not among its ``errors`` (until 2026-11-30 they did, a removal
# of 500 documents read as 500 errors).
REMOVAL_KEY_KIND = "removing"
# Why a job id is not found, after "no index job N" (the UI says it in its own words).
JOB_GONE = "a job is deleted with its collection: `facet collections` lists those left"
# How many of a stopped removal's keys its rerun hint names in its command (the rest: `facet
# jobs ID` lists them).
REMOVAL_KEYS_SHOWN = 5


def removal_keys(job: md.IndexJob) -> list[str]:
    """The keys a removal job was given, as its job-error rows of kind ``REMOVAL_KEY_KIND``
    record them (a removal of several keys since 2026-11-30); empty where none are recorded
    (one key, named by its ``source``, or an older Facet's removal)."""
    try:
        return [e.document_key for e in job.errors if e.kind == REMOVAL_KEY_KIND]
    except SQLAlchemyError:  # a hint only: the source names the first key
        return []


def removal_rerun_hint(job: md.IndexJob, *, started: bool = True) -> str:
    """What to do after a removal job stopped before it finished: run the same removal
    again (its keys are all still known: the metadata rows go last, in one commit).
    ``started``: it may have removed part (its points); else it removed nothing. The keys
    recorded on the job (``removal_keys``) are named, the first ``REMOVAL_KEYS_SHOWN``."""
    named = (job.source or "").removeprefix(REMOVAL_PREFIX)
    match = re.fullmatch(r"(.*) and (\d+) more", named, re.S)
    key, more = (match.group(1), int(match.group(2))) if match else (named, 0)
    recorded = removal_keys(job) if more else []
    keys = recorded[:REMOVAL_KEYS_SHOWN] or [key]
    name = job.collection.name
    command = (f"facet delete {shell_word(name)} "
               + " ".join(f"--document {shell_word(k)}" for k in keys))
    route = f"DELETE /collections/{urllib.parse.quote(name, safe='')}/documents?key=…"
    total = len(recorded) or more + 1
    listed = (f" (`facet jobs {job.id}` lists them all)" if total > len(keys) and recorded
              else "")
    others = f" with all {total} keys it was given{listed}" if more else ""
    more = total - len(keys)
    done = ("the removal may be partly done (its documents' points gone, their rows kept)"
            if started else "nothing was removed")
    return f"{done}; run `{command}{' …' if more > 0 else ''}` ({route}) again{others}"


def stopped_removal_text(session: Session, collection_id: int) -> str | None:
    """Where a removal of the collection stopped part-way (interrupted or failed: its points
    deleted, its documents' rows kept) and is not finished yet (documents it names are still
    there: no later removal or sync took them), that removal and its rerun hint
    (``removal_rerun_hint``), the newest such; else None. The points it deleted read as
    "missing from the store", and the advice there (`facet index` of its sources) added back
    the documents being removed. Not only the newest job: a later removal (another batch, a
    part of the rerun) hid it, and the advice came back."""
    J = md.IndexJob
    removals = session.scalars(select(J).where(
        J.collection_id == collection_id, J.source.startswith(REMOVAL_PREFIX, autoescape=True))
        .order_by(J.id.desc()).limit(STOPPED_REMOVALS_READ)).all()
    for job in removals:
        if effective_state(job)[0] not in ("interrupted", "failed") or job.started_at is None:
            continue
        named = removal_keys(job) or [(job.source or "").removeprefix(REMOVAL_PREFIX)]
        if not md.documents_by_key(session, collection_id, named):
            continue  # finished since (a later removal, a sync)
        rerun = removal_rerun_hint(job).split("; ", 1)[-1]
        return (f"a removal (job {job.id}) stopped part-way, after it deleted the vectors of "
                f"the documents it removes and before their rows; {rerun} to finish it")
    return None


# How many of a collection's newest removals ``stopped_removal_text`` reads.
STOPPED_REMOVALS_READ = 50


def stopped_before_interrupted_existed(job: md.IndexJob) -> bool:
    """A job stopped by Ctrl-C under an older Facet, which recorded it ``failed`` with the
    exception's name for message ("KeyboardInterrupt: "); today's records it ``interrupted``
    (``IndexService.run``), so no job of today's has such a row. It is read as interrupted: its
    documents were kept, and it was shown failed, with no hint, and resumed unsaid."""
    return job.state == "failed" and (job.message or "").startswith("KeyboardInterrupt") \
        and not is_removal(job)


def _disk_full_now() -> str:
    """``"; " +`` what to say where this process's data folder's disk is full now, else "": a
    writer that died on a full disk (a bus error, FACET_MIN_FREE_MB at 0 or the disk filled by
    another program) was "interrupted: its writer stopped without finishing", the cause unsaid,
    and its rerun died the same way."""
    from app.settings import get_settings
    from indexer.errors import disk_full_text

    try:
        full = disk_full_text(get_settings().data_dir)
    except Exception:  # a message only: a bad FACET_* variable is said where it is used
        return ""
    return f"; {full.removesuffix('; nothing was lost')}" if full else ""


def _visibility_timeout_s() -> int:
    """The broker's visibility timeout (``FACET_VISIBILITY_TIMEOUT_S``) as this process's
    settings have it, for the stalled message; the default where they do not parse."""
    from app.settings import FacetSettings, get_settings

    try:
        return get_settings().visibility_timeout_s
    except Exception:  # a message only: a bad FACET_* variable is said where it is used
        return int(FacetSettings.model_fields["visibility_timeout_s"].default)


def _the_writer(current: leases.Holder, seen: dt.datetime | None) -> bool:
    """Whether the holder's pid on this host is still the process that wrote the lease: its
    ``process_identity`` is the one the lease recorded, or (a lease an older Facet wrote) it
    started before the lease was last ``seen`` (its last heartbeat). A pid the system gave to
    another process since the writer ended is not it (told "stalled ... `kill PID`", a user
    would end that process)."""
    if not current.pid:
        return False
    if current.identity is not None:
        return leases.process_identity(current.pid) == current.identity
    started = leases.process_started_at(current.pid)
    return started is not None and seen is not None and started <= seen + dt.timedelta(seconds=2)


def effective_state(job: md.IndexJob) -> tuple[str, str | None]:
    """The job's state as it truly is now, and the message to show with it.

    A ``running`` job whose writer stopped renewing the collection's lease (killed, host
    gone) is ``interrupted``, whatever its row still says; so is a ``queued`` job whose
    submitting process on this host is gone (a queued worker job waits in the broker instead),
    and a job an older Facet recorded ``failed`` when Ctrl-C stopped it
    (``stopped_before_interrupted_existed``).
    """
    # A removal has no `facet index` that resumes it (`facet index 'remove: KEY'` exits 3).
    hint = (removal_rerun_hint(job) if is_removal(job) else
            f"run `{resume_command(job)}` again to resume{kept_said(job)}")
    if stopped_before_interrupted_existed(job):
        stopped = f"stopped (Ctrl-C) with {plural(job.docs_indexed, 'document')} indexed"
        later = _later_completed(job)
        return "interrupted", (f"{stopped}; job {later} indexed the same source since" if later
                               else f"{stopped}; {hint}")
    if job.state == "running":
        # SQLite reads outside a transaction: this row may predate the lease read below. A writer
        # commits its final state before it releases the lease, so a released lease with a
        # freshly read row that says otherwise is a job that just ended, not an interrupted one.
        current = leases.holder(job.collection)
        if current is None or current.job_id != job.id or not current.alive():
            session = object_session(job)
            if session is not None:
                try:
                    session.refresh(job)
                    if job.state == "running":
                        # The lease read afresh too, after the row (a job takes it in the commit
                        # that makes it `running`): the collection row was loaded before the job
                        # started (a search's session), and a job running for a second was said
                        # "interrupted ... ended before it wrote any document" (the verification
                        # round's search/index race). Lost since: the row, read again, says how
                        # the job ended (its end is committed before the lease goes).
                        session.refresh(job.collection)
                        current = leases.holder(job.collection)
                        if current is None or current.job_id != job.id or not current.alive():
                            session.refresh(job)
                except RowGoneError:  # the row is gone (its collection was just deleted)
                    return "interrupted", "its collection was deleted while it ran"
                if job.state != "running":
                    return job.state, job.message
        if job.runner == "celery" and current is not None and current.job_id == job.id \
                and not current.alive():
            # Its chunks wait in the broker: a worker that starts again goes on with them.
            idle = ("no worker has made progress on it for over "
                    f"{(md.utcnow() - current.heartbeat_at).total_seconds():.0f}s"
                    if current.heartbeat_at else "no worker has made progress")
            taken = ("a chunk whose worker was killed is taken again only after "
                     f"FACET_VISIBILITY_TIMEOUT_S ({_visibility_timeout_s()}s)")
            if job.cancel_requested:
                # (It said the job "goes on" and how to go on now, of a job asked to stop.)
                return "stalled", (f"cancel requested, and {idle}: it ends cancelled when a "
                                   "worker takes its next chunk: start one if none runs (`facet "
                                   f"worker --queues index`); {taken}")
            return "stalled", (f"{idle}; it goes on when a worker takes its next chunk: start one "
                               f"if none runs (`facet worker --queues index`); {taken}, so to go "
                               f"on now, {hint}")
        if current is not None and current.job_id == job.id and current.host == leases.HOST \
                and current.pid and leases.pid_alive(current.pid) and not current.alive() \
                and _the_writer(current, current.heartbeat_at or job.started_at):
            # Its lease lapsed, yet its process is alive on this host: stopped (SIGSTOP, ^Z, a
            # debugger) or starved, not dead. It goes on when it runs again, and holds the
            # collection meanwhile: it was "interrupted ... run it again to resume", a rerun the
            # collection then refused (open in that pid), and a cancel refused as well.
            silent = (f" for {(md.utcnow() - current.heartbeat_at).total_seconds():.0f}s"
                      if current.heartbeat_at else "")
            if not leases.process_stopped(current.pid):
                # Not stopped: most often a laptop that just woke up (its beat comes within a
                # quarter of the lease); told to `kill` it, a user ended a healthy job.
                return "stalled", (f"no heartbeat{silent}, yet its process (pid {current.pid}) is "
                                   "alive and not stopped on this host: it renews the lease at its "
                                   "next beat (after a sleep, within a quarter of the lease), or "
                                   f"is starved or hung; if it stays so, end it (`kill {current.pid}`) "
                                   f"and {hint}")
            return "stalled", (f"no heartbeat{silent}, yet its process (pid {current.pid}) is "
                               "alive on this host: stopped, not ended; it goes on "
                               f"when it runs again (`kill -CONT {current.pid}`), "
                               f"or end it (`kill {current.pid}`) and {hint}")
        if current is None or current.job_id != job.id or not current.alive():
            since = (f" (last heartbeat {utc_text(current.heartbeat_at)})"
                     if current is not None and current.job_id == job.id and current.heartbeat_at
                     else "")
            return "interrupted", f"its writer stopped without finishing{since}; {hint}{_disk_full_now()}"
    if job.state == "queued" and job.runner != "celery" and job.host == leases.HOST \
            and not leases.pid_alive(job.pid):
        # A `--background` job's row names its own process (``facet run-job``), killed before it
        # ran: "the process that queued it" (the CLI, which exited normally) and "what was
        # indexed is kept" (nothing was) misled.
        who = (f"its process (pid {job.pid}, `facet index --background`'s)" if job.runner == "process"
               else "the process that queued it")
        return "interrupted", (f"{who} ended before it ran; "
                               + (removal_rerun_hint(job, started=False) if is_removal(job)
                                  else f"run `{resume_command(job)}` again to index it"))
    if job.state == "queued" and job.runner == "celery" and job.message is None:
        waited = (md.utcnow() - job.queued_at).total_seconds()
        later = _later_completed(job) if waited > QUEUED_HINT_S else None
        if later is not None:
            # Its hint was followed: the hint must not go on asking for the run that was made.
            return "queued", (f"{SUPERSEDED} {later}, which indexed the same source with the "
                              "same embedder after this one was queued; if this one's task still "
                              "reaches a worker, it finds nothing to do")
        if waited > QUEUED_HINT_S and leases.holder(job.collection) is None:
            # Nothing says why: no worker ran, or its task was lost with the broker's data
            # (it then stayed `queued` for ever, and `--follow` waited with it).
            return "queued", (f"waiting for a worker for {waited / 60:.0f} min and no job is "
                              "writing this collection: start one (`facet worker --queues index`); "
                              "if workers are running and idle, its task was lost (a broker that "
                              "lost its data), dropped by a worker on another database (its "
                              "FACET_DATA_DIR or FACET_DATABASE_URL other than this server's: its "
                              "log says \"not in this worker's database\"), or a worker failed it "
                              "(its log says why: a worker of an older Facet cannot open a database "
                              f"a newer one migrated): {hint}")
    return job.state, job.message


def _waiting_jobs(session: Session, collection_id: int) -> list[int]:
    """The ids of a collection's jobs that wait to run (``queued`` as ``effective_state`` reads
    them: not one whose submitting process is gone, nor one whose failure only its runner
    knows, ``unrecorded``), oldest first."""
    return sorted(job.id for job in md.running_jobs(session, collection_id, states=("queued",))
                  if effective_state(job)[0] == "queued" and unrecorded(job) is None)


def _queued_text(job_ids: list[int], *, refusal: bool = False) -> str:
    """"job 6 queued to index it (cancel it: `facet jobs 6 --cancel`, POST /jobs/6/cancel)", or
    of several jobs; ``refusal``: as the whole reason of a refused delete, "job 6 queued to
    index it: cancel it (...) or wait for it to end, then delete the collection" (it said "cancel
    it" twice)."""
    if len(job_ids) == 1:
        [n] = job_ids
        what, them, how = f"job {n}", "it", f"`facet jobs {n} --cancel`, POST /jobs/{n}/cancel"
    else:
        ids = ", ".join(map(str, job_ids))
        what, them = f"jobs {ids}", "them"
        how = f"each: `facet jobs N --cancel`, POST /jobs/N/cancel, N one of {ids}"
    if refusal:
        return (f"{what} queued to index it: cancel {them} ({how}) or wait for {them} to end, "
                "then delete the collection")
    return f"{what} queued to index it (cancel {'it: ' if len(job_ids) == 1 else ''}{how})"


def _job_errors(session: Session, job_id: int, limit: int | None,
                offset: int = 0) -> list[dict[str, str]]:
    """The first ``limit`` (None: all) of the job's per-document errors after the first
    ``offset``, in the order written (an SQL LIMIT and OFFSET on their ids: a running job only
    adds errors after the last, so its pages stay put while it writes). A removal's keys
    (``REMOVAL_KEY_KIND``) are no errors: ``_removed_keys``."""
    if limit == 0:
        return []
    E = md.JobError
    query = select(E).where(E.job_id == job_id, E.kind != REMOVAL_KEY_KIND).order_by(E.id)
    if limit is not None:
        query = query.limit(limit)
    if offset > 0:
        query = query.offset(offset)
    return [{"document": e.document_key, "kind": e.kind, "message": e.message}
            for e in session.scalars(query)]


def _unicode_twins(session: Session, collection_id: int, keys: list[str]) -> frozenset[str]:
    """Those of ``keys`` whose NFC or NFD form, another string, is a key of the collection too
    (one query, for the keys that are not ASCII alone), and those the page holds of one NFC
    form (a key written in both forms, "re\u0301sumé", is neither one's): ``DocumentList.twins``.
    Told apart on one page only, a twin whose other form fell on another page printed as the
    other does (the second verification of the fifth session of 2026-12-06)."""
    forms: dict[str, list[str]] = {}
    for key in keys:
        forms.setdefault(unicodedata.normalize("NFC", key), []).append(key)
    on_page = {key for same in forms.values() if len(same) > 1 for key in same}
    others: dict[str, list[str]] = {}
    for key in keys:
        if not key.isascii():
            for form in ("NFC", "NFD"):
                other = unicodedata.normalize(form, key)
                if other != key:
                    others.setdefault(other, []).append(key)
    if not others:
        return frozenset(on_page)
    found = session.scalars(select(md.Document.key).where(
        md.Document.collection_id == collection_id, md.Document.key.in_(list(others))))
    return frozenset(on_page | {key for other in found for key in others[other]})


def _check_offset(offset: object, param: str) -> int:
    """``offset`` (``GET /jobs?offset=``, ``/jobs/{id}?errors_offset=``) as the count of rows
    to skip, or an InvalidRequestError naming ``param``. One past any table's rows reads
    nothing: it is capped there (``md.MAX_ROW_ID``), as SQL would refuse a number past 64 bits
    (a 500)."""
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidRequestError(f"{param} must be a whole number, 0 or more, got {offset!r}",
                                  param=param)
    return min(offset, md.MAX_ROW_ID)


def _error_counts(session: Session, job_ids: list[int], *,
                  removal: bool = False) -> dict[int, int]:
    """How many per-document errors each job has (one counting query, not one row read);
    ``removal``: how many removal keys (``REMOVAL_KEY_KIND``) instead, which are no errors."""
    if not job_ids:
        return {}
    E = md.JobError
    kind = E.kind == REMOVAL_KEY_KIND if removal else E.kind != REMOVAL_KEY_KIND
    rows = session.execute(select(E.job_id, func.count()).where(E.job_id.in_(job_ids), kind)
                           .group_by(E.job_id))
    return {int(job_id): int(n) for job_id, n in rows}


def _removed_keys(session: Session, job: md.IndexJob, limit: int | None,
                  recorded: int, offset: int = 0) -> tuple[list[str], int]:
    """A removal's keys, ``limit`` of them (None: all) after the first ``offset``, and how
    many in all: its rows of kind ``REMOVAL_KEY_KIND`` (``recorded`` of them) or, where none
    are (a removal of one key, or an older Facet's), the first key its ``source`` names
    ("remove: KEY and 2 more"). ``offset``: ``job``'s ``errors_offset``, which pages a
    removal's keys (it has no errors): a removal of 20,000 keys listed its first 1,000 only."""
    if not is_removal(job):
        return [], 0
    if not recorded:
        named = (job.source or "").removeprefix(REMOVAL_PREFIX)
        match = re.fullmatch(r"(.*) and (\d+) more", named, re.S)
        key, more = (match.group(1), int(match.group(2))) if match else (named, 0)
        return ([key] if key and limit != 0 and not offset else []), (more + 1 if key else 0)
    if limit == 0:
        return [], recorded
    E = md.JobError
    query = select(E.document_key).where(E.job_id == job.id, E.kind == REMOVAL_KEY_KIND
                                         ).order_by(E.id).offset(offset)
    if limit is not None:
        query = query.limit(limit)
    return [str(k) for k in session.scalars(query)], recorded


def job_timings(job: md.IndexJob) -> dict[str, float]:
    """The job's seconds per stage, as its run's report has them (``IndexReport.timings``):
    ``load_model`` only where the run loaded the model (a deferred load)."""
    timings = {"parse_chunk": round(job.parse_s, 3), "encode": round(job.encode_s, 3),
               "store": round(job.store_s, 3), "metadata": round(job.metadata_s, 3)}
    if job.load_s:
        timings["load_model"] = round(job.load_s, 3)
    return timings


def unrecorded(job: md.IndexJob) -> str | None:
    """The message of a job that failed in this process without its row saying so, or None.

    A runner whose job failed because the metadata database would not take a write (a data
    folder that became read-only under a running `facet serve`) could not record the failure
    either: the job showed `queued` for ever. The runner remembers it (``app.jobs``).
    """
    if job.state not in md.UNENDED_STATES:
        return None
    from app.jobs import unrecorded_failure  # (app.jobs imports the services)

    cause = unrecorded_failure(job.id, job.collection.name, job.source, job.embedder)
    if cause is None:
        return None
    return (f"{one_line(cause)}; its row could not be updated (it still says {job.state}): only "
            "this process knows of this failure, until it stops")


def one_line(text: str) -> str:
    """``text`` as one line: its first, less SQLAlchemy's "(Background on this error at: URL)"
    (a failure's text was shown with every line of a chained SQLAlchemy error)."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return re.sub(r"\s*\(Background on this error at: [^)]*\)", "", first)


# -------------------------------------------------- job ends the database did not take

@dataclass
class UnrecordedEnd:
    """How a job of this process ended, that its row could not be told (the metadata database
    went out of reach under the run): the row still says ``running`` and the job's lease is
    held, so every edge showed it running (or failed with SQLAlchemy's text), and a new job
    into its collection was refused until the lease lapsed."""

    sessions: Callable[[], Session]
    job_id: int
    collection_id: int
    state: str
    message: str
    finished_at: dt.datetime
    since: float = field(default_factory=time.monotonic)


# Written once the database is back: by a thread of their own (a running server: `facet jobs`
# in another process reads the row), and before this process reads or submits jobs. Given up
# after ``_UNRECORDED_KEPT_S`` (the lease lapsed long before: the row reads interrupted).
_UNRECORDED: dict[tuple[int, int], UnrecordedEnd] = {}
_UNRECORDED_LOCK = threading.Lock()
_UNRECORDED_KEPT_S = 3600.0
_UNRECORDED_RETRY_S = 1.0
_retrying: threading.Thread | None = None


def remember_unrecorded_end(end: UnrecordedEnd) -> None:
    """Keep ``end`` to write when the database is back (``record_unrecorded_ends``)."""
    global _retrying
    with _UNRECORDED_LOCK:
        _UNRECORDED[(id(end.sessions), end.job_id)] = end
        if _retrying is None or not _retrying.is_alive():
            _retrying = threading.Thread(target=_retry_unrecorded, name="facet-unrecorded-jobs",
                                         daemon=True)
            _retrying.start()


def _retry_unrecorded() -> None:
    while True:
        time.sleep(_UNRECORDED_RETRY_S)
        record_unrecorded_ends()
        with _UNRECORDED_LOCK:
            if not _UNRECORDED:
                return


def record_unrecorded_ends(sessions: Callable[[], Session] | None = None) -> None:
    """Write the ends this process kept (of the database of ``sessions``; None: all): the row,
    where it still says running (or queued), gets the state and message, and the lease goes.
    One that cannot be written yet stays for the next call; none raises."""
    with _UNRECORDED_LOCK:
        if not _UNRECORDED:
            return
        ends = [e for e in _UNRECORDED.values() if sessions is None or e.sessions is sessions]
    for end in ends:
        written = False
        try:
            with end.sessions() as session:
                J = md.IndexJob
                session.execute(update(J).where(J.id == end.job_id, J.state.in_(md.UNENDED_STATES)).values(
                    state=end.state, message=end.message, finished_at=end.finished_at))
                leases.release(session, end.collection_id, end.job_id)  # (commits both)
            written = True
            logger.info("job %d: recorded %s now that the metadata database is back",
                        end.job_id, end.state)
        except (SQLAlchemyError, OSError) as e:  # still out of reach: next time
            logger.debug("job %d's end not recorded yet: %s", end.job_id, one_line(str(e)))
        with _UNRECORDED_LOCK:
            key = (id(end.sessions), end.job_id)
            if _UNRECORDED.get(key) is end and (
                    written or time.monotonic() - end.since > _UNRECORDED_KEPT_S):
                del _UNRECORDED[key]


def _job_info(job: md.IndexJob, errors: list[dict[str, str]], errors_total: int,
              removed: tuple[list[str], int] = ([], 0)) -> JobInfo:
    state, message = effective_state(job)
    failed = unrecorded(job)
    if failed is not None:
        state, message = "failed", failed
    return JobInfo(
        id=job.id, collection=job.collection.name, source=job.source, embedder=job.embedder,
        state=cast(JobState, state), docs_seen=job.docs_seen, docs_indexed=job.docs_indexed,
        docs_skipped=job.docs_skipped, docs_failed=job.docs_failed, docs_deleted=job.docs_deleted,
        chunks_written=job.chunks_written,
        timings=job_timings(job),
        queued_at=utc_text(job.queued_at),
        started_at=utc_text(job.started_at) if job.started_at else None,
        finished_at=utc_text(job.finished_at) if job.finished_at else None,
        resumed_from=job.resumed_from, message=message,
        errors=errors, errors_total=errors_total,
        removed_keys=removed[0], removed_keys_total=removed[1],
        runner=job.runner, host=job.host, chunks_total=job.chunks_total,
        chunks_done=job.chunks_done, docs_total=job.docs_total,
        docs_total_estimated=bool(job.docs_total) and job.runner != "celery"
        and state != "completed",
        cancel_requested=job.cancel_requested, sync=job.sync)


def disk_bytes(store: VectorStore, collection: str) -> int | None:
    """The disk space ``collection``'s vectors take on this machine, as ``du`` counts it
    (allocated blocks: an edge shard's files are mostly sparse, 180 MB long for 0.2 MB of
    data): its edge shard's folder with the files beside it, or local mode's collection
    folder. None for a server's (not known here) or a collection with no folder (yet).

    It only stats files: the shard is not opened nor its folder lock taken, so a collection
    another process holds is measured all the same.
    """
    root = getattr(store, "root", None)  # EdgeStore's: <root>/<name>
    local = getattr(store, "_folder", None)  # local mode's: <folder>/collection/<name>
    if store.backend == "edge" and root is not None:
        folder = Path(root) / validate_name(collection)
    elif store.backend == "local" and local is not None:
        folder = Path(local) / "collection" / validate_name(collection)
    else:
        return None  # a server's, or local mode in memory
    try:
        total = _allocated(os.lstat(folder))
    except OSError:  # not created yet, or removed meanwhile
        return None
    for parent, dirs, names in os.walk(folder):
        for name in (*dirs, *names):
            try:
                total += _allocated(os.lstat(os.path.join(parent, name)))
            except OSError:  # removed meanwhile (a segment merged away)
                continue
    return total


def _unreadable_text(name: str, error: BaseException) -> str:
    """Why collection ``name``'s store files cannot be opened (``CollectionInfo.store_unreadable``),
    without the "collection 'NAME': " the store's message starts with."""
    if isinstance(error, OSError):
        where = f": {error.filename}" if error.filename else ""
        return (f"{error.strerror or error}{where}; give its files back to this user (chown -R) "
                "or make them readable, or run as their owner")
    text = " ".join(str(error).split()) or type(error).__name__
    prefix = f"collection {name!r}: "
    return text[len(prefix):] if text.startswith(prefix) else text


def _allocated(st: os.stat_result) -> int:
    blocks = getattr(st, "st_blocks", None)  # not on Windows
    return st.st_size if blocks is None else int(blocks) * 512


def _folder_locked(path: Path) -> bool:
    """Whether a process (this one included) holds the edge folder lock at ``path`` now.

    A shared, non-blocking ``flock`` taken on a fresh descriptor and dropped at once: it
    conflicts with any holder's exclusive one, and loads nothing. An unreadable lock file
    counts as held (the count that follows says why).
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False  # never opened
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:  # BlockingIOError: held
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


class CollectionService:
    """Read and remove what the index service wrote."""

    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx
        self.store = ctx.store
        # Collection -> (its shard's state when counted, (points, lexical, lexical_note)):
        # see ``_shard_state``; the points are kept beside the shard too, for other processes
        # (``_keep_count``).
        self._counted: dict[str, tuple[Any, tuple[int | None, bool | None, str | None]]] = {}
        # Strays ``delete`` removes even where the data folder's facet.db owns them
        # (``deleting_owned``: `facet delete --force`).
        self._forced: set[str] = set()

    def check_store(self) -> None:
        """Raise ``StoreUnavailableError`` when nothing answers at the Qdrant server's URL (one
        TCP connect, ``REACH_TIMEOUT_S`` at most), or something else does (one request, listing
        its collections, answered by no Qdrant: a web server's page listed "no collections
        yet"). An embedded store has nothing to reach and is not asked anything
        (``VectorStore.check_reachable``).

        A listing of no collections sent the server nothing, and said "no collections yet" for
        a URL nothing answered on; the SQL rows, which are still readable, are no listing of a
        store that cannot be read.
        """
        self.store.check_reachable(timeout_s=REACH_TIMEOUT_S, ask=True)

    def _recorded_lexical(self, name: str) -> tuple[bool | None, str | None]:
        """Whether ``name`` keeps term vectors, and their note, as recorded beside its shard
        (``EdgeStore.lexical_version``'s side file, written with the shard's term vectors), read
        without opening it nor waiting for its folder lock; (None, None) where that cannot be
        told (not created yet, gone, a definition this Facet does not know)."""
        try:
            lexical = self.store.has_lexical(name)
            return lexical, self.store.older_lexical(name) if lexical else None
        except StoreError:
            return None, None

    def _shard_state(self, coll: md.Collection, chunks: int) -> Any:
        """What changes whenever ``coll``'s points may have: its row and chunk count, and each
        file of its edge shard folder (inode, size, mtime); None where no figure is kept.

        Counting a collection this process has not open loads its shard and closes it again
        (0.2 s each: a listing of N collections, on every UI page, took N x 0.2 s). Every write
        to a shard, by any process, goes to its files (a writer's WAL, then its flush and close
        at the lease's release), and a deleted and re-created collection has another row and
        other files: while none of this changed, the last count still holds. A damaged shard
        (points lost, so ``points`` and ``chunks`` disagree) changed its files too.

        None too while any process holds the shard's folder lock: where it is open
        (``open_in``) is not in its files, and a cached count hid it; counting it then
        fails busy and says where, as without a cache. Looked at before and after the files
        are read: a process that took the lock meanwhile may be changing them.
        """
        root = getattr(self.store, "root", None)
        if self.store.backend != "edge" or root is None:
            return None  # a server or local mode counts without opening anything per collection
        lock = Path(root) / f"{coll.name}.lock"  # EdgeStore's <root>/<name>.lock
        if _folder_locked(lock):
            return None
        files = []
        for folder, _dirs, names in os.walk(Path(root) / coll.name):  # EdgeStore's <root>/<name>
            for name in names:
                if name.startswith(COUNT_SIDE):  # the count kept beside it (and its temp file)
                    continue
                try:
                    st = os.stat(os.path.join(folder, name))
                except OSError:  # removed meanwhile: count again
                    return None
                files.append((folder, name, st.st_ino, st.st_size, st.st_mtime_ns))
        if not files or _folder_locked(lock):
            return None
        return coll.id, utc_text(coll.created_at), chunks, tuple(sorted(files))

    def _kept_count(self, name: str, state: Any) -> int | None:
        """The points count a listing of another process kept beside ``name``'s shard
        (``_keep_count``) at exactly ``state``; None where there is none, or it was taken at
        another state (a write since, by any process, changed the shard's files)."""
        root = getattr(self.store, "root", None)
        if root is None:
            return None
        try:
            kept = json.loads((Path(root) / name / COUNT_SIDE).read_text())
        except (OSError, ValueError):  # none yet, or unreadable: count
            return None
        if not isinstance(kept, dict) or kept.get("format") != 1 or type(kept.get("points")) is not int \
                or kept.get("state") != json.loads(json.dumps(state)):  # JSON's lists, as kept
            return None
        return int(kept["points"])

    def _keep_count(self, name: str, state: Any, points: int) -> None:
        """Keep ``points`` beside ``name``'s shard with the ``state`` it was counted at, for the
        listings of other processes (`facet collections` is a new process each time: it loaded
        and closed every shard, 0.11 s each, and wrote into each). Written whole (a temp file
        renamed over it); where it cannot be (a read-only folder), nothing is kept."""
        root = getattr(self.store, "root", None)
        if root is None:
            return
        path = Path(root) / name / COUNT_SIDE
        tmp = path.with_name(f"{COUNT_SIDE}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps({"format": 1, "state": state, "points": points}))
            os.replace(tmp, path)
        except OSError as e:
            logger.debug("cannot keep the count of %s beside its shard: %s", name, e)
            with contextlib.suppress(OSError):
                tmp.unlink()

    def _info(self, session: Session, coll: md.Collection) -> CollectionInfo:
        current = leases.holder(coll)
        writer = current.describe() if current is not None and current.alive() else None
        points: int | None = None
        lexical: bool | None = None
        lexical_note: str | None = None
        open_in: str | None = None
        missing = False
        damaged: str | None = None
        unreadable: str | None = None
        chunks = md.count_chunks(session, coll.id)
        try:
            if current is not None and writer is not None and self.store.backend != "server" \
                    and not current.is_this_process():
                # An embedded collection belongs to its writer's process until the lease is
                # released. The writer closes the shard just before that, so opening it would
                # succeed for a moment and show counts beside "being indexed"; never touch it.
                # Whether it keeps term vectors is recorded beside it: "words (lexical/hybrid)"
                # went missing from the listing for as long as another process's job wrote it.
                lexical, lexical_note = self._recorded_lexical(coll.name)
            else:
                # A collection this process did not have open is closed again once counted:
                # each open shard maps ~38 MB, and a server listing 40 collections grew from
                # 0.8 to 3.2 GB, kept for its life.
                was_open = self.store.is_open(coll.name)
                state = None if was_open else self._shard_state(coll, chunks)
                counted = self._counted.get(coll.name)
                kept = (None if state is None or (counted is not None and counted[0] == state)
                        else self._kept_count(coll.name, state))
                if state is not None and counted is not None and counted[0] == state:
                    points, lexical, lexical_note = counted[1]  # unchanged since counted
                elif state is not None and kept is not None:
                    # Counted at this very state by another process's listing: read beside the
                    # shard, which is not opened (nor its lock file written).
                    points = kept
                    lexical = self.store.has_lexical(coll.name)
                    lexical_note = self.store.older_lexical(coll.name) if lexical else None
                    self._counted[coll.name] = (state, (points, lexical, lexical_note))
                else:
                    if not was_open and self.store.backend == "edge":
                        # Held by another process (a server that searched it): said at once, as
                        # below; opening it waited FACET_STORE_WAIT_S (3 s) for each such
                        # collection (a listing beside a server holding 8 of them took 25 s).
                        self.store.check_free(coll.name, wait_s=0)
                    try:
                        exists = self.store.collection_exists(coll.name)
                        # (A new collection's store collection is made when its first job
                        # runs: one with no chunks yet has none to miss.)
                        missing = not exists and chunks > 0
                        points = self.store.count(coll.name) if exists else None
                        lexical = self.store.has_lexical(coll.name) if exists else None
                        lexical_note = self.store.older_lexical(coll.name) if lexical else None
                    finally:
                        if not was_open:
                            self.store.release(coll.name)
                    # Read after the release: what the close itself wrote is part of it.
                    state = None if was_open or not exists else self._shard_state(coll, chunks)
                    if state is not None and points is not None:
                        self._counted[coll.name] = (state, (points, lexical, lexical_note))
                        self._keep_count(coll.name, state, points)
        except StoreBusyError as e:
            # An embedded store's collection open in another process: the writer's, or one that
            # only reads it (a server); never touch it. Whether it keeps term vectors is in a
            # side file beside the shard (``EdgeStore.lexical_version``), read without opening
            # it: "words (lexical/hybrid)" went missing while a server held the collection.
            points = None
            lexical, lexical_note = self._recorded_lexical(coll.name)
            if writer is None:
                open_in = (f"pid {e.holder.get('pid')} on host {e.holder.get('host')}" if e.holder
                           else "another process")
        except StoreDamagedError as e:  # shown, uncounted, with why: the others still listed
            points = None
            damaged = str(e).split(": the vector store's files cannot be read: ", 1)[-1]
        except (StoreError, OSError) as e:
            # Its embedded store's files there, but not for this process: another user's (a
            # restore run as root), a read-only mount of its folder, a folder it cannot read. Shown
            # with why, as a damaged one: the others are still listed. (A Qdrant server out of
            # reach is said of the whole listing.)
            if self.store.backend == "server":
                raise
            points = None
            if isinstance(e, CollectionNotFoundError):  # removed meanwhile
                missing = chunks > 0
            else:
                unreadable = _unreadable_text(coll.name, e)
        store_in_use = self.store.backend if self.store.backend != coll.backend else None
        # Fewer points than chunks: the store older than the database. Compared only where both
        # were read with no job writing between (an embedded store's writer holds it, so its
        # points are not counted; a server's is counted while the job writes).
        points_missing = (chunks - points if points is not None and writer is None
                          and store_in_use is None and points < chunks else 0)
        indexed = md.count_documents(session, coll.id, "indexed")
        vectors_missing = md.vectors_missing(session, coll.id, [e.name for e in coll.embedders],
                                             indexed)
        return CollectionInfo(
            name=coll.name, backend=coll.backend, embedders={e.name: e.dim for e in coll.embedders},
            sources={e.name: e.spec for e in coll.embedders if e.spec != e.name},
            chunk_size=coll.chunk_size, chunk_overlap=coll.chunk_overlap,
            documents=md.count_documents(session, coll.id),
            documents_indexed=indexed,
            vectors_missing=vectors_missing,
            default_embedder=default_vector(self.ctx.settings.default_embedder,
                                            [(e.name, e.spec) for e in coll.embedders],
                                            vectors_missing)[0],
            documents_failed=md.count_documents(session, coll.id, "error"),
            chunks=chunks, points=points,
            created_at=utc_text(coll.created_at), writer=writer, lexical=lexical,
            lexical_note=lexical_note, open_in=open_in,
            disk_bytes=disk_bytes(self.store, coll.name), store_missing=missing,
            store_damaged=damaged, store_unreadable=unreadable, points_missing=points_missing,
            store_in_use=store_in_use,
            store_elsewhere=wrong_data_folder(session, self.ctx.settings, self.store, coll)
            if missing and store_in_use is None else None,
            stopped_removal=stopped_removal_text(session, coll.id) if points_missing else None)

    def list_all(self) -> list[CollectionInfo]:
        """Every collection the metadata knows, with what the store says of it.

        Raises:
            StoreUnavailableError: nothing answers at the Qdrant server's URL (``check_store``),
                even where no collection is recorded yet.
        """
        self.check_store()
        with self.ctx.sessions() as session:
            return [self._info(session, c) for c in md.list_collections(session)]

    def get(self, name: str) -> CollectionInfo:
        check_collection_text(name, param=None)  # (the route's path names it: no field)
        # A server out of reach is said in 2 s, not the client's 30 s per request. Only a
        # connect, trusted for seconds (the UI asks this at each job refresh): a server that is
        # not Qdrant is said by the store's first request, which this read makes (``_info``).
        self.store.check_reachable(timeout_s=REACH_TIMEOUT_S)
        with self.ctx.sessions() as session:
            coll = md.get_collection(session, name)
            if coll is None:
                raise self._not_found(session, name)
            return self._info(session, coll)

    @contextlib.contextmanager
    def deleting_owned(self, name: str) -> Iterator[None]:
        """Within it, ``delete`` removes the stray vectors ``name`` even where the data
        folder's facet.db owns them (``CollectionInfo.owner``), and the collection ``name``
        even where its store folder may be in another data folder
        (``CollectionInfo.store_elsewhere``): `facet delete --force`."""
        self._forced.add(name)
        try:
            yield
        finally:
            self._forced.discard(name)

    def _owner(self, name: str) -> str | None:
        """A stray ``name``'s ``owner`` (``CollectionInfo.owner``): read from the data
        folder's facet.db, where the database in use is another."""
        owners = folder_owners(self.ctx.settings)
        if owners is not None and owners[1] is not None:
            logger.warning("%s", owners[1])
        return folder_owner(self.ctx.settings, name)

    def _let_an_ended_job_release(self, name: str) -> None:
        """Where ``name``'s lease holder is a job whose row already says how it ended, give it
        a moment to let the lease go (``leases.settled_holder``), before the delete reads the
        lease in a session of its own."""
        with self.ctx.sessions() as session:
            coll = md.get_collection(session, name)
            coll_id = coll.id if coll is not None and coll.writer_job_id is not None else None
        if coll_id is not None:  # (no lease: nothing to wait for, no second read)
            leases.settled_holder(self.ctx.sessions, coll_id)

    def delete(self, name: str) -> CollectionInfo:
        """Delete a collection from the store and the metadata; returns what it held.

        Raises:
            ConflictError: a job is indexing it, or is queued to (it would fail when its turn
                came, its submitter told "no index job N" meanwhile); or it is a stray whose
                vectors the data folder's facet.db owns (``CollectionInfo.owner``), outside
                ``deleting_owned``.
            InvalidRequestError: a name that is not Unicode text (``check_collection_text``).
        """
        check_collection_text(name)
        self._let_an_ended_job_release(name)
        with self.ctx.sessions() as session:
            coll = md.get_collection(session, name)
            if coll is None:
                orphan = self._delete_orphan(name)
                if orphan is not None:
                    return orphan
                # The field, as search names it, for Python callers; DELETE
                # /collections/{name}, whose path names the resource, answers it with None,
                # as ``get`` leaves it.
                raise self._not_found(session, name, param="collection")
            # The row as first read, in plain values: a look after this one (the lease's,
            # ``leases.live_holder``) reloads ``coll`` in place from whatever row now has its id,
            # which SQLite gives a collection created again meanwhile.
            seen = (coll.id, coll.created_at)
            self._refuse_writers(session, name, coll.id)
            info = self._info(session, coll)
            if info.store_elsewhere is not None and name not in self._forced:
                raise elsewhere_refusal(name, info.store_elsewhere)
            if info.store_unreadable is not None:
                # Its folder not this user's to remove (the listing shows it, since): refused
                # before anything is removed, as when the listing failed on it, rather than a
                # traceback from the folder's removal part-way.
                raise StoreUnavailableError(f"collection {name!r}: {info.store_unreadable}")
            # Looked at again under the database's write lock, held until the commit: a job
            # that queued or took the lease after the look above (another client's `facet
            # index` of the same name) had its rows deleted under it, and its next write failed
            # with "StaleDataError: UPDATE statement on table 'index_jobs' expected to update 1
            # row(s); 0 were matched", its vectors dropped mid-run (the soak test's
            # delete/re-create race). One that comes after it finds the collection gone.
            self._lock_row(session, coll.id)
            try:
                self._check_still_there(session, name, seen)
                self._refuse_writers(session, name, coll.id)
            except (ConflictError, NotFoundError):
                session.rollback()
                raise
            # The metadata's rows first, flushed (this takes the database's write lock, or fails
            # busy with nothing changed), then the vectors, then the commit: dropping the vectors
            # first left a database locked by another writer listing a collection whose vectors
            # were gone, and the delete said it had failed.
            job_ids = md.collection_job_ids(session, coll.id)
            with _deleting(name):
                md.delete_collection(session, coll)
                session.flush()
                self._counted.pop(name, None)
                self.store.drop_collection(name)
                session.commit()
        # The logs of its background jobs, whose rows went with it: nothing named them any more,
        # and a data folder kept one file per job ever run (soak exploration).
        for job_id in job_ids:
            with contextlib.suppress(OSError):
                job_log_path(self.ctx.settings.data_dir, job_id).unlink(missing_ok=True)
        if info.store_in_use is not None:
            # What it clears is the store in use's copy, where it holds one; the vectors the row
            # recorded are in another store, which this process does not open.
            logger.warning(
                "deleted collection %s from the metadata and from %s in use; its vectors in %s "
                "stay there; `facet delete %s` removes them once that store is in use again: %s",
                name, _store_label(info.store_in_use), store_place(info.backend, name), name,
                _back_to(info.backend, info.store_in_use))
        # (It said "None points" of a collection whose store had none made yet.)
        logger.info("deleted collection %s (%s, %s)", name, plural(info.documents, "document"),
                    "no points" if info.points is None else plural(info.points, "point"))
        return info

    @staticmethod
    def _refuse_writers(session: Session, name: str, collection_id: int) -> None:
        """Raise ``ConflictError`` where a job holds the collection's lease or is queued to
        write it: deleted under them, a queued job's submitter got 404 for it, and its runner
        failed it when its turn came ("index job 6 no longer exists"); a running one failed its
        next write."""
        current = leases.live_holder(session, collection_id)
        queued = _waiting_jobs(session, collection_id)
        if current is not None:
            job = md.get_job(session, current.job_id)
            # Just after a cancel: it said to cancel it (the PostgreSQL exploration of the sixth
            # session of 2026-12-05).
            then = ("its cancel is requested: it stops at its next batch; delete it then (in a "
                    "few seconds)" if job is not None and job.cancel_requested else
                    f"{follow_hint(current.job_id)} or cancel it (`facet jobs {current.job_id} "
                    f"--cancel`, POST /jobs/{current.job_id}/cancel), and delete it then")
            raise ConflictError(
                f"collection {name!r} is being indexed by {current.describe()}; {then}"
                + (f"; {_queued_text(queued)} too" if queued else ""))
        if queued:
            raise ConflictError(f"collection {name!r} has {_queued_text(queued, refusal=True)}")

    @staticmethod
    def _lock_row(session: Session, collection_id: int) -> None:
        """Hold what a new job of the collection needs until the session's commit: SQLite's
        write lock (taken by the first write: a no-op update of the row), so that no job's row
        nor lease is committed in between; PostgreSQL's lock of the row (FOR UPDATE), which a
        job's insert (its foreign key) and a lease's update wait for, and then find the row
        gone."""
        C = md.Collection
        session.execute(select(C.id).where(C.id == collection_id).with_for_update())
        session.execute(update(C).where(C.id == collection_id).values(name=C.name))

    @classmethod
    def _check_still_there(cls, session: Session, name: str,
                           seen: tuple[int, dt.datetime]) -> None:
        """Under the lock ``_lock_row`` took: the row first read (``seen``: its id and creation
        time) is still the one of that name. Two overlapping deletes both answered 200, and the later one's lock, by id,
        then took a collection created again under the name meanwhile (SQLite gives a new row
        the id of the last one deleted), deleting a collection its client had never seen: gone
        is a 404, as for a delete that came after; created again, a 409 with nothing deleted.

        Raises:
            NotFoundError: no collection of that name any more.
            ConflictError: the name's collection now is another one (created meanwhile).
        """
        C = md.Collection
        now = session.execute(select(C.id, C.created_at).where(C.name == name)).one_or_none()
        if now is None:
            raise cls._not_found(session, name, param="collection")
        if (now.id, now.created_at) != seen:
            raise ConflictError(
                f"collection {name!r} was deleted by another request and created again "
                "while this delete ran; nothing was deleted (delete it again to remove the new "
                "one)")

    def orphan(self, name: str) -> CollectionInfo | None:
        """What the store holds under ``name`` that this metadata database does not know (its
        own lost, or another database's over the same store), which indexing refuses to take
        over; None when the database knows ``name`` or the store holds nothing under it."""
        check_collection_text(name)
        with self.ctx.sessions() as session:
            if md.get_collection(session, name) is not None:
                return None
        info = self._orphan(name)
        if info is not None:
            info.owner = self._owner(name)
        return info

    def strays(self) -> list[CollectionInfo]:
        """The embedded store's collections that this metadata database does not know (its
        database lost, or restored from another copy than ``qdrant-edge/``): ``list_all`` showed "no
        collections yet" over them; local mode's too (its client has loaded the whole folder:
        listing its collections reads nothing more). None of a Qdrant server's: it may hold
        other applications' collections."""
        if self.store.backend not in ("edge", "local"):
            return []
        with self.ctx.sessions() as session:
            known = {c.name for c in md.list_collections(session)}
        found = []
        stored, unreadable = self._stored_names()
        for name in stored:
            if name in known:
                continue
            # Another database's process writing it: shown uncounted.
            info = self._orphan(name, busy_uncounted=True)
            if info is not None:
                found.append(info)
        for name, why in unreadable.items():
            if name not in known:  # (a known one's line says it)
                found.append(CollectionInfo(name, self.store.backend, {}, 0, 0, 0, 0, 0, 0, None,
                                            "", disk_bytes=disk_bytes(self.store, name),
                                            store_unreadable=why))
        found.sort(key=lambda i: i.name)
        owners = folder_owners(self.ctx.settings) if found else None
        if owners is not None:
            names, error = owners
            if error is not None:
                logger.warning("%s", error)
            owner = folder_database_owner(self.ctx.settings)
            for info in found:
                info.owner = (f"{owner} ({error})" if error is not None
                              else owner if info.name in names else None)
        return found

    def _stored_names(self) -> tuple[list[str], dict[str, str]]:
        """The store's collections (``VectorStore.list_collections``), and, for an embedded
        store whose listing failed on a folder it cannot read (another user's, after a restore
        run as root), the folders whose vectors could not be looked at, with why: the store's
        listing failed on one such folder, and so did `facet collections` (whose line for it
        says why) with "cannot read the vector store's folder"."""
        try:
            return self.store.list_collections(), {}
        except StoreError as e:
            root = getattr(self.store, "root", None)
            side = getattr(self.store, "_SIDE", None)  # EdgeStore's <root>/<name>/facet_vectors.json
            if self.store.backend != "edge" or root is None or side is None:
                raise
            try:
                folders = sorted(p for p in Path(root).iterdir() if p.is_dir())
            except OSError:  # the store's folder itself: as the store said
                raise e from None
        names: list[str] = []
        unreadable: dict[str, str] = {}
        for folder in folders:
            try:
                if (folder / side).is_file():
                    names.append(folder.name)
            except OSError as e:
                unreadable[folder.name] = _unreadable_text(folder.name, e)
        return names, unreadable

    def _orphan(self, name: str, *, busy_uncounted: bool = False) -> CollectionInfo | None:
        """``orphan``'s answer; a shard another process holds raises ``StoreBusyError`` unless
        ``busy_uncounted`` (a listing), which shows it without sizes or points."""
        was_open = self.store.is_open(name)
        try:
            if not self.store.collection_exists(name):
                return None
            sizes = dict(self.store.vector_sizes(name))
            points = self.store.count(name)
        except StoreBusyError:
            if not busy_uncounted:
                raise
            sizes, points = {}, None
        except Exception:  # an unreadable orphan is still shown, and removed
            sizes, points = {}, None
        finally:
            # Counted, then let go, as ``_info`` lets a collection go: a server that listed a
            # stray held it, and `facet delete` of it was refused while the server ran.
            if not was_open:
                self.store.release(name)
        return CollectionInfo(name, self.store.backend, sizes, 0, 0, 0, 0, 0, 0, points, "",
                              disk_bytes=disk_bytes(self.store, name))

    def _delete_orphan(self, name: str) -> CollectionInfo | None:
        """Remove the vectors ``orphan`` describes; None when the store has none either."""
        info = self._orphan(name)
        if info is None:
            return None
        info.owner = self._owner(name)
        if info.owner is not None and name not in self._forced:
            raise ConflictError(owned_elsewhere(name, info.owner))
        self.store.drop_collection(name)
        logger.info("deleted the vectors of %s, which no collection of this metadata owned", name)
        return info

    def jobs(self, collection: str | None = None, limit: int = 20, offset: int = 0,
             before: int | None = None) -> JobList:
        """The newest ``limit`` jobs (of one collection when named), newest first, then every
        older job that has not ended (queued, running or stalled: ``LIVE_STATES``), newest
        first too: a 33-minute job still running was cut off once 20 small jobs had been sent
        after it, and nothing said more existed. ``not_shown`` says how many older ones are
        left out (one COUNT).

        ``offset`` skips the newest ``offset`` jobs (an SQL OFFSET on the id order, newest
        first): a page, the ``limit`` jobs after them, and no more (the older jobs that have
        not ended follow the first page only, ``offset`` 0; later pages list them in their
        place), so pages of one ``limit`` concatenate to every job. Jobs queued while paging
        shift later pages by as many (a row may come again at a page's edge); a collection
        deleted while paging takes its jobs out, shifting them back (as many rows are skipped).
        ``before`` (a job id): only the jobs below it, ``offset`` counted among those (a keyset
        page: the next is before this page's last id, which no job sent or deleted shifts);
        the older jobs that have not ended follow a first page only (``offset`` 0, no ``before``).
        ``not_shown`` counts the jobs older than the page's last that it leaves out, in the same
        read's terms (a job sent between the page's read and a count of every job made the
        count say more followed a last page).

        Raises:
            InvalidRequestError: ``limit`` outside 1..1000 (SQLite reads a negative LIMIT as none);
                ``offset`` not a whole number from 0.
            NotFoundError: an unknown collection.
        """
        if isinstance(limit, bool) or not 1 <= limit <= MAX_JOBS_LISTED:
            raise InvalidRequestError(f"limit must be from 1 to {MAX_JOBS_LISTED}, got {limit}",
                                      param="limit")
        offset = _check_offset(offset, "offset")
        if before is not None:
            if isinstance(before, bool) or not isinstance(before, int) or before < 1:
                raise InvalidRequestError(f"before must be a job id, a whole number from 1, got "
                                          f"{before!r}", param="before")
            # Past any id: every job (SQLite refused a number past 64 bits: a 500).
            before = min(before, md.MAX_ROW_ID)
        check_collection_text(collection)
        record_unrecorded_ends(self.ctx.sessions)  # (a job's end the database did not take)
        with self.ctx.sessions() as session:
            coll_id = None
            if collection is not None:
                coll = md.get_collection(session, collection)
                if coll is None:
                    raise self._not_found(session, collection, param="collection")
                coll_id = coll.id
            jobs = md.list_jobs(session, coll_id, limit, offset=offset, before=before,
                                unfinished=0 if offset or before is not None else MAX_JOBS_LISTED)
            counts = _error_counts(session, [j.id for j in jobs])
            keys = _error_counts(session, [j.id for j in jobs if is_removal(j)], removal=True)
            infos = [_job_info(j, [], counts.get(j.id, 0),
                               _removed_keys(session, j, 0, keys.get(j.id, 0))) for j in jobs]
            # An older row that says queued or running may be a job whose writer was killed
            # (``effective_state``: interrupted): it has ended, and waits its turn as others do.
            older = [i for i in infos[limit:] if i.state in LIVE_STATES]
            shown = JobList(infos[:limit] + older)
            # Those older than the page's newest rows' last, but the older live ones it shows.
            shown.not_shown = max(0, md.count_jobs(session, coll_id, before=infos[limit - 1].id)
                                  - len(older)) if len(infos) >= limit else 0
            if shown.not_shown:
                shown.next_before = infos[limit - 1].id
            return shown

    def documents(self, collection: str, limit: int = 20, offset: int = 0,
                  status: str | None = None, prefix: str | None = None,
                  after: str | None = None) -> DocumentList:
        """A page of ``collection``'s documents in key order: the ``limit`` after the first
        ``offset`` (an SQL LIMIT and OFFSET on the (collection, key) index), ``status`` and
        ``prefix`` (how the key or the source starts, compared as text, case kept) narrowing
        them.
        ``not_shown`` says how many more match past the page (one COUNT), so pages of one
        ``limit`` read every document once; documents indexed or removed while paging shift
        later pages by as many. ``after``: only the documents whose key sorts after it (the
        next page is ``after`` this page's last key, a page no write shifts: the offset then
        counts from there, and ``not_shown`` counts past the page among those). Nothing is read
        from the vector store.

        Raises:
            NotFoundError: an unknown collection (``param`` ``collection``).
            InvalidRequestError: ``limit`` outside 1..1000, ``offset`` not a whole number from
                0, ``status`` not one of indexed, error, pending, ``prefix`` not a str (or
                not storable text).
        """
        if isinstance(limit, bool) or not isinstance(limit, int) \
                or not 1 <= limit <= MAX_DOCUMENTS_LISTED:
            raise InvalidRequestError(f"limit must be from 1 to {MAX_DOCUMENTS_LISTED}, got "
                                      f"{limit!r}", param="limit")
        offset = _check_offset(offset, "offset")
        if status is not None and status not in DOCUMENT_STATUSES:
            raise InvalidRequestError(f"status must be one of {', '.join(DOCUMENT_STATUSES)}, "
                                      f"got {status!r}", param="status")
        if prefix is not None:
            if not isinstance(prefix, str):
                raise InvalidRequestError(f"prefix must be a str, got {type(prefix).__name__}",
                                          param="prefix")
            check_text_encodable(prefix, "prefix", param="prefix")
        if after is not None:
            if not isinstance(after, str):
                raise InvalidRequestError(f"after must be a str, got {type(after).__name__}",
                                          param="after")
            check_text_encodable(after, "after", param="after")
        check_collection_text(collection)
        with self.ctx.sessions() as session:
            coll = md.get_collection(session, collection)
            if coll is None:
                raise self._not_found(session, collection, param="collection")
            rows, total = md.page_documents(session, coll.id, limit, offset=offset,
                                            status=status, prefix=prefix, after=after)
            shown = DocumentList(DocumentInfo(
                key=d.key, source=d.source, title=d.title,
                status=cast(DocumentStatus, d.status), chunks=d.n_chunks,
                updated_at=utc_text(d.updated_at), metadata=dict(d.meta or {}), error=d.error)
                for d in rows)
            shown.not_shown = max(0, total - offset - len(shown))
            shown.twins = _unicode_twins(session, coll.id, [d.key for d in rows])
            return shown

    def job(self, job_id: int, errors: int | None = DEFAULT_JOB_ERRORS,
            collection: str | None = None, errors_offset: int = 0) -> JobInfo:
        """One job with the first ``errors`` of its per-document errors (None: all of them,
        for the page that removes the uploads that cannot be indexed) and their total
        (``errors_total``). Both are read by SQL (a LIMIT and a COUNT), not by loading every
        error: a job with 20,000 of them took a second and 2.5 MB to answer at each poll.
        A removal's keys, no errors, are its ``removed_keys`` (``errors`` of them after the
        first ``errors_offset``, which pages them) and ``removed_keys_total``.

        Args:
            job_id: the job.
            errors: how many per-document errors to return, 0 to ``MAX_JOB_ERRORS``.
            collection: when given, the collection the job must be of.
            errors_offset: how many of the first errors to skip (an SQL OFFSET, in the order
                written): the errors past the first 1,000 could not be read at all.

        Raises:
            InvalidRequestError: a job id, ``errors`` or ``errors_offset`` that is not a whole
                number in range; a job of another collection than ``collection``.
            NotFoundError: an unknown job.
        """
        if isinstance(job_id, bool) or not isinstance(job_id, int):
            raise InvalidRequestError(f"a job id is a whole number, got {job_id!r}", param="job_id")
        if errors is not None and (isinstance(errors, bool) or not isinstance(errors, int)
                                   or not 0 <= errors <= MAX_JOB_ERRORS):
            raise InvalidRequestError(f"errors must be from 0 to {MAX_JOB_ERRORS}, got {errors!r}",
                                      param="errors")
        errors_offset = _check_offset(errors_offset, "errors_offset")
        check_collection_text(collection)
        if not 1 <= job_id <= md.MAX_ROW_ID:  # SQL cannot even look it up (PostgreSQL's
            # INTEGER ends at 2**31 - 1; a larger id was a 500 there, "no job" on SQLite)
            raise NotFoundError(f"no index job {job_id}")
        record_unrecorded_ends(self.ctx.sessions)  # (a job's end the database did not take)
        with self.ctx.sessions() as session:
            job = md.get_job(session, job_id)
            if job is None:
                # A client following its job after someone deleted the collection read a bare
                # "no index job 3": a job goes with its collection.
                raise NotFoundError(f"no index job {job_id} ({JOB_GONE})")
            if collection is not None and job.collection.name != collection:
                raise InvalidRequestError(f"job {job_id} is not of collection {collection!r} "
                                          f"but of {job.collection.name!r}", param="collection")
            # The errors first, then their count: a running job adds errors meanwhile, and
            # the total is never fewer than those shown.
            shown = _job_errors(session, job.id, errors, errors_offset)
            total = _error_counts(session, [job.id]).get(job.id, 0)
            removed = _removed_keys(session, job, errors, _error_counts(
                session, [job.id], removal=True).get(job.id, 0) if is_removal(job) else 0,
                errors_offset)
            return _job_info(job, shown, max(total, errors_offset + len(shown) if shown else 0),
                             removed)

    def busy_message(self, collection: str, fallback: str) -> str:
        """Why ``collection`` cannot be read now: the job writing it, and what to do."""
        with self.ctx.sessions() as session:
            coll = md.get_collection(session, collection)
            current = leases.holder(coll) if coll is not None else None
            if current is None or not current.alive():
                return fallback
            return (f"collection {collection!r} is being indexed by {current.describe()}; an "
                    "embedded store opens a collection in one process at a time, so "
                    f"{follow_hint(current.job_id)}, or serve readers and writers "
                    "from one `facet serve` (or the full stack: docs/deploy.md)")

    @staticmethod
    def _not_found(session: Session, name: str, param: str | None = None) -> NotFoundError:
        """``param``: the request field that named it (``GET /jobs?collection=``); None where
        the name is the route's path (``GET /collections/{name}``), the resource itself."""
        known = ", ".join(c.name for c in md.list_collections(session)) or "none"
        return NotFoundError(f"unknown collection {name!r} (known: {known}); "
                             "see `facet collections`", param=param)
