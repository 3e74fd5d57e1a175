"""Metadata in SQLAlchemy 2: collections, documents, chunks, index jobs and their errors.

The models are typed (``Mapped[...]``); repository functions take the ``Session`` as
their first argument and never commit unless their name says so, so callers choose the
transaction boundaries (the index service commits once per batch of documents). Works
on SQLite (the embedded default) and PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import sqlite3
import sys
import time
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    create_engine,
    delete,
    event,
    func,
    or_,
    select,
)
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship, validates
from sqlalchemy.pool import NullPool

logger = logging.getLogger(__name__)

# The longest document key / source path a collection stores (the columns' width, which
# PostgreSQL enforces and SQLite does not: a longer one is refused as that document's error
# on both, by ``app.services.indexing``).
MAX_KEY_CHARS = 1024


def fits_key(value: str) -> bool:
    """Whether ``value`` fits a document's key or source column (``MAX_KEY_CHARS``)."""
    return len(value) <= MAX_KEY_CHARS


# The largest id an INTEGER primary key holds on PostgreSQL (a larger one is no row: looking
# it up raised there, and an OverflowError past 2**63 on SQLite).
MAX_ROW_ID = 2**31 - 1


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


class Base(DeclarativeBase):
    pass


class _StoredInt(TypeDecorator[int]):
    """An INTEGER column that also reads the BLOB a numpy integer was stored as before
    2026-11-30 (SQLite kept ``np.int64(100)`` from a notebook's ``IndexOptions`` as its 8 bytes):
    such a row, left in an upgraded data folder, broke every collection listing (a bytes value
    in the JSON) and every index run into its collection. Values written are plain ints."""

    impl = Integer
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> int | None:
        return None if value is None else int(value)

    def process_result_value(self, value: Any, dialect: Any) -> int | None:
        if isinstance(value, (bytes, memoryview)) and len(value) in (1, 2, 4, 8):
            return int.from_bytes(bytes(value), sys.byteorder, signed=True)  # as numpy wrote it
        return value


class Collection(Base):
    """A searchable collection; its chunking settings are fixed when it is created."""

    __tablename__ = "collections"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    backend: Mapped[str] = mapped_column(String(16))
    chunk_size: Mapped[int] = mapped_column(_StoredInt)
    chunk_overlap: Mapped[int] = mapped_column(_StoredInt)
    tokenizer: Mapped[str] = mapped_column(String(256))
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    # The single-writer lease (app/services/leases.py): which job writes the collection, from
    # which host and process, and until when the lease holds without a new heartbeat.
    writer_job_id: Mapped[int | None] = mapped_column(Integer, default=None)
    writer_host: Mapped[str | None] = mapped_column(String(255), default=None)
    writer_pid: Mapped[int | None] = mapped_column(Integer, default=None)
    # That process as no clock step moves it and no recycled pid shares it: its boot and start
    # (``leases.process_identity``); None where an older Facet took the lease.
    writer_process: Mapped[str | None] = mapped_column(String(80), default=None)
    heartbeat_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    lease_expires_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    # The data folder (resolved) an embedded store's vectors of it were written in (migration
    # 0013): a listing, delete or index run from another folder, its store folder missing there,
    # names it; None for another store or a collection of an older Facet.
    store_folder: Mapped[str | None] = mapped_column(Text, default=None)

    # In the order they were added (the first wrote the collection first): a search naming no
    # embedder takes the first where the default is not among them, and the database's own
    # order made a later one the default.
    embedders: Mapped[list[CollectionEmbedder]] = relationship(
        back_populates="collection", cascade="all, delete-orphan", passive_deletes=True,
        order_by="CollectionEmbedder.id")


class CollectionEmbedder(Base):
    """One named vector of a collection: which embedder wrote it, and its size."""

    __tablename__ = "collection_embedders"
    __table_args__ = (UniqueConstraint("collection_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    collection_id: Mapped[int] = mapped_column(ForeignKey("collections.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(128))
    dim: Mapped[int] = mapped_column(Integer)
    identity: Mapped[str] = mapped_column(Text)
    # What loads the embedder that wrote the vector, from any working directory: a registered
    # name, a checkpoint's absolute path, either with ``[options]``. Searches that name no
    # embedder, and index chunks run by workers, load this. NULL in rows from before it existed
    # (migration 0003): the name.
    source: Mapped[str | None] = mapped_column(Text, nullable=True)

    collection: Mapped[Collection] = relationship(back_populates="embedders")

    @property
    def spec(self) -> str:
        """What to load for this vector: ``source``, else the name."""
        return self.source or self.name


def visible_nul(value: str | None) -> str | None:
    """``value`` with each NUL character written ``\\x00``: PostgreSQL cannot store one, and a
    message quoting a record's field name that held one failed the whole batch there."""
    return value.replace("\x00", "\\x00") if value and "\x00" in value else value


class Document(Base):
    """A parsed document (or a record of a jsonl/csv file).

    ``status``: ``pending`` (its points may be partly written: a run stopped between the
    store and this row), ``indexed`` or ``error`` (``error`` says why).
    """

    __tablename__ = "documents"
    # (collection, content hash): a moved or copied document's donor (migration 0009).
    __table_args__ = (UniqueConstraint("collection_id", "key"),
                      Index("ix_documents_collection_hash", "collection_id", "content_hash"))

    id: Mapped[int] = mapped_column(primary_key=True)
    collection_id: Mapped[int] = mapped_column(
        ForeignKey("collections.id", ondelete="CASCADE"), index=True)
    key: Mapped[str] = mapped_column(String(MAX_KEY_CHARS))
    source: Mapped[str] = mapped_column(String(MAX_KEY_CHARS), index=True)
    title: Mapped[str | None] = mapped_column(Text, default=None)
    content_hash: Mapped[str | None] = mapped_column(String(64), default=None)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    error: Mapped[str | None] = mapped_column(Text, default=None)
    warning: Mapped[str | None] = mapped_column(Text, default=None)
    n_chunks: Mapped[int] = mapped_column(Integer, default=0)
    meta: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    chunks: Mapped[list[Chunk]] = relationship(
        back_populates="document", cascade="all, delete-orphan", passive_deletes=True,
        order_by="Chunk.number")
    vectors: Mapped[list[DocumentVector]] = relationship(
        cascade="all, delete-orphan", passive_deletes=True)

    @validates("error", "warning")
    def _storable(self, _key: str, value: str | None) -> str | None:
        return visible_nul(value)


class DocumentVector(Base):
    """Document ``document_id`` has vectors from ``embedder`` for content ``content_hash``."""

    __tablename__ = "document_vectors"
    __table_args__ = (UniqueConstraint("document_id", "embedder"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    document_id: Mapped[int] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"))
    embedder: Mapped[str] = mapped_column(String(128))
    content_hash: Mapped[str] = mapped_column(String(64))


class Chunk(Base):
    """One chunk of a document, mirrored by one point in the vector store."""

    __tablename__ = "chunks"
    __table_args__ = (UniqueConstraint("document_id", "number"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    document_id: Mapped[int] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"),
                                             index=True)
    number: Mapped[int] = mapped_column(Integer)
    point_id: Mapped[str] = mapped_column(String(36))
    start: Mapped[int] = mapped_column(Integer)
    end: Mapped[int] = mapped_column(Integer)
    n_tokens: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)

    document: Mapped[Document] = relationship(back_populates="chunks")


# The states of a job (and of a job's chunk) that has not ended: it may still write. Each other
# state is an end (distributed.TERMINAL_JOB_STATES; collections.LIVE_STATES adds ``stalled``).
UNENDED_STATES = ("queued", "running")


class IndexJob(Base):
    """One ``facet index`` run: state, counters, timings (seconds per stage).

    Ids are never reused (SQLite ``AUTOINCREMENT``, a sequence on PostgreSQL), so a chunk
    task of a job whose collection was deleted can never be mistaken for a newer job's.
    ``runner``: ``inline`` (this process), ``thread`` (a server's job thread), ``process``
    (a detached ``facet`` process) or ``celery`` (chunk tasks on workers).
    """

    __tablename__ = "index_jobs"
    __table_args__ = {"sqlite_autoincrement": True}  # noqa: RUF012 (SQLAlchemy reads it)

    id: Mapped[int] = mapped_column(primary_key=True)
    collection_id: Mapped[int] = mapped_column(
        ForeignKey("collections.id", ondelete="CASCADE"), index=True)
    # Text, not VARCHAR (migration 0005): PostgreSQL enforces a length SQLite ignores, and a
    # folder's path, a csv header or a refused document's key has none.
    source: Mapped[str] = mapped_column(Text)
    embedder: Mapped[str] = mapped_column(String(128))
    state: Mapped[str] = mapped_column(String(16), default="running")
    pid: Mapped[int | None] = mapped_column(Integer, default=None)
    resumed_from: Mapped[int | None] = mapped_column(Integer, default=None)
    docs_seen: Mapped[int] = mapped_column(Integer, default=0)
    docs_indexed: Mapped[int] = mapped_column(Integer, default=0)
    docs_skipped: Mapped[int] = mapped_column(Integer, default=0)
    docs_failed: Mapped[int] = mapped_column(Integer, default=0)
    docs_deleted: Mapped[int] = mapped_column(Integer, default=0)
    chunks_written: Mapped[int] = mapped_column(Integer, default=0)
    parse_s: Mapped[float] = mapped_column(Float, default=0.0)
    encode_s: Mapped[float] = mapped_column(Float, default=0.0)
    store_s: Mapped[float] = mapped_column(Float, default=0.0)
    metadata_s: Mapped[float] = mapped_column(Float, default=0.0)
    # The model's load where the run made it (a deferred one: the collection's embedder, not
    # loaded in this process until something needed encoding; migration 0007), else 0.
    load_s: Mapped[float] = mapped_column(Float, default=0.0)
    message: Mapped[str | None] = mapped_column(Text, default=None)
    # When the job was queued, and when it began running: None until then, and for ever for a
    # job that failed before it ran (migration 0006; started_at was the queue time till then).
    queued_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    started_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    finished_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    host: Mapped[str | None] = mapped_column(String(255), default=None)
    runner: Mapped[str] = mapped_column(String(16), default="inline")
    chunks_total: Mapped[int] = mapped_column(Integer, default=0)
    chunks_done: Mapped[int] = mapped_column(Integer, default=0)
    docs_total: Mapped[int] = mapped_column(Integer, default=0)
    # The csv column / jsonl field holding the text (migration 0004): workers' chunks read it.
    text_column: Mapped[str | None] = mapped_column(Text, default=None)
    # Someone asked the running job to stop (migration 0008, ``Facet.cancel_job``): its runner
    # reads this at each batch boundary and ends the job ``cancelled``.
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    # --sync / --no-sync as asked (migration 0011); None: the source's default (a folder
    # syncs, a file does not). Its resume hint repeats it.
    sync: Mapped[bool | None] = mapped_column(Boolean, default=None)
    # A worker job's planner task as sent (``PreparedJob.to_dict()`` without its id, JSON;
    # migration 0012), for the workers' sweeper to send again where the broker lost it; None for
    # a job run by this process or sent by an older Facet.
    plan: Mapped[str | None] = mapped_column(Text, default=None)

    errors: Mapped[list[JobError]] = relationship(
        cascade="all, delete-orphan", passive_deletes=True, order_by="JobError.id")
    collection: Mapped[Collection] = relationship()

    @validates("message")
    def _storable(self, _key: str, value: str | None) -> str | None:
        return visible_nul(value)


class JobError(Base):
    """A per-document error or warning of a job."""

    __tablename__ = "job_errors"

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("index_jobs.id", ondelete="CASCADE"), index=True)
    document_key: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(String(16))  # "error" or "warning"
    message: Mapped[str] = mapped_column(Text)

    @validates("document_key", "message")
    def _storable(self, _key: str, value: str) -> str:
        return visible_nul(value) or value


class JobChunk(Base):
    """One chunk task of a job run by workers: a few documents, claimed by one worker at a time.

    ``state``: ``queued``, ``running`` (claimed until ``claimed_until``; the claimer renews it),
    ``done`` or ``failed``. ``attempts`` counts claims that did not end in a handled outcome
    (a worker that died mid-chunk); past the poison limit the chunk fails instead of running
    again. ``docs``: ``[[key, source, content_hash], ...]`` as planned, with a fourth element,
    the job's folders, where the job is confined (``IndexOptions.confine``: the chunk reads a
    file only where what it opens lies under them).
    """

    __tablename__ = "job_chunks"
    __table_args__ = (UniqueConstraint("job_id", "number"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("index_jobs.id", ondelete="CASCADE"), index=True)
    number: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16), default="queued")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    docs: Mapped[list[Any]] = mapped_column(JSON, default=list)
    worker: Mapped[str | None] = mapped_column(String(255), default=None)
    claimed_until: Mapped[dt.datetime | None] = mapped_column(default=None)
    error: Mapped[str | None] = mapped_column(Text, default=None)
    finished_at: Mapped[dt.datetime | None] = mapped_column(default=None)

    @validates("error")
    def _storable(self, _key: str, value: str | None) -> str | None:
        return visible_nul(value)


# ------------------------------------------------------------------- engine


SQLITE_BUSY_TIMEOUT_S = 30
# How long opening a PostgreSQL connection may take (libpq's ``connect_timeout``, whole
# seconds) before it fails as out of reach: a host that accepted the TCP connection and never
# answered held every command, and `facet serve`'s start, with no output (killed at 90 s).
# Redis and Qdrant get 3 s and 2 s; a URL's own ``?connect_timeout=`` wins.
POSTGRES_CONNECT_TIMEOUT_S = 5
# The PostgreSQL driver Facet installs (psycopg 3): ``postgres://`` (what hosting providers
# give) and ``postgresql://`` (SQLAlchemy's psycopg2, not installed) are read as using it.
POSTGRES_DRIVER = "psycopg"


def engine_url(url: str) -> str:
    """``url`` as ``make_engine`` opens it: ``postgres://``, ``postgresql://`` (no driver) and
    ``postgresql+psycopg2://`` as ``postgresql+psycopg://``, ``postgres+DRIVER://`` as ``postgresql+DRIVER://``, their
    scheme and SQLite's in any case; the rest of the URL, and any other URL, as given.
    ``postgres://`` was "Can't load plugin: sqlalchemy.dialects:postgres" (exit 1), and
    ``postgresql://`` looked for psycopg2."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    backend, plus, driver = scheme.lower().partition("+")
    if backend == "sqlite":  # a scheme is read in any case (SQLAlchemy took only lower case)
        return f"{scheme.lower()}://{rest}"
    if backend not in ("postgres", "postgresql"):
        return url
    # psycopg2 (a URL copied from another application) is not installed: psycopg 3 reads the
    # same URL ("No module named 'psycopg2'", exit 1, before).
    return f"postgresql+{driver if plus and driver != 'psycopg2' else POSTGRES_DRIVER}://{rest}"


def _set_wal(cursor: Any, timeout_s: float) -> None:
    """Put a SQLite database in WAL mode (a setting stored in the file, so usually already on).

    Switching a new file to WAL needs an exclusive lock that SQLite's busy timeout does not
    wait for: processes opening a new database at once got "database is locked" here about
    once in 25 tries on two busy cores. So read the mode first, and retry the switch with a
    short backoff for up to ``timeout_s``.
    """
    if str(cursor.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
        return
    deadline = time.monotonic() + timeout_s
    delay = 0.01
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.25)


def make_engine(url: str, *, migrate: bool = True, pooled: bool = True) -> Engine:
    """An engine for ``url`` with the schema at the current migration (``indexer.migrate``).

    SQLite gets foreign keys, WAL and a 30 s busy timeout (a worker, a CLI and a server may
    write the same file); PostgreSQL the same 30 s as its ``lock_timeout``, and at most
    ``POSTGRES_CONNECT_TIMEOUT_S`` to connect. ``url`` is read by ``engine_url`` (``postgres://``
    is PostgreSQL with psycopg). ``pooled=False`` keeps no connection open between uses (for a
    process that forks children).
    """
    url = engine_url(url)
    connect_args: dict[str, Any] = {"timeout": SQLITE_BUSY_TIMEOUT_S} if url.startswith("sqlite") else {}
    if url.startswith("postgresql"):
        # The same wait for a lock as SQLite's busy timeout, then an error (a table locked by
        # another session, idle in its transaction, held every command and request for ever).
        connect_args["options"] = f"-c lock_timeout={int(SQLITE_BUSY_TIMEOUT_S * 1000)}"
        # A bounded connect: a host that took the TCP connection and never answered hung
        # every command (psycopg's ConnectionTimeout: an OperationalError, out of reach).
        # connect_args override the URL's query, so a ?connect_timeout= given there is kept.
        if "connect_timeout" not in make_url(url).query:
            connect_args["connect_timeout"] = POSTGRES_CONNECT_TIMEOUT_S
    extra: dict[str, Any] = {} if pooled else {"poolclass": NullPool}
    if not url.startswith("sqlite"):
        # A server restarted (or a pooled connection dropped) under a long-running `facet
        # serve` answered the next request with a 500: test a pooled connection before use.
        extra["pool_pre_ping"] = True
    engine = create_engine(url, future=True, connect_args=connect_args, **extra)
    if engine.dialect.name == "sqlite":
        from indexer.migrate import sqlite_file

        # (Absolute: a later chdir must not make it another file.)
        path = sqlite_file(engine.url)
        file = os.path.abspath(path) if path is not None else None

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(conn: Any, _record: Any) -> None:
            cursor = conn.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            _set_wal(cursor, SQLITE_BUSY_TIMEOUT_S)
            cursor.execute("PRAGMA synchronous=NORMAL")
            # A removed document's text is overwritten in the file, not left in free pages
            # until a VACUUM that never comes (Debian's SQLite is built this way; Python.org's
            # and macOS's are not, and kept it there).
            cursor.execute("PRAGMA secure_delete=ON")
            cursor.close()
            if file is not None:
                _record.info["facet_file"] = _file_identity(file)

        if file is not None:

            @event.listens_for(engine, "commit")
            def _still_the_same_file(conn: Any) -> None:
                # A process that opened facet.db before `facet move-metadata` renamed it aside
                # kept writing the renamed file through its open connection (a `facet index`
                # loading its model had no job row for the move to see: its collection, job and
                # documents went there, "completed", and the target never had them). One stat
                # a commit; a writer that waited on the move's lock commits after the rename.
                # Only where a move is seen (no file there now, or a renamed one beside it): a
                # file system that numbers its files afresh (some FUSE mounts) is no move.
                opened = conn.info.get("facet_file")
                if opened is not None and _file_identity(file) != opened and _moved_aside(file):
                    from indexer.errors import MetadataFileMovedError

                    raise MetadataFileMovedError(file)

    if migrate:
        from indexer.migrate import upgrade

        upgrade(engine)
    return engine


def _moved_aside(path: str) -> bool:
    """Whether the database file ``path`` is gone, or has a ``NAME.moved-*`` beside it (``facet
    move-metadata`` renames it so)."""
    folder, name = os.path.split(path)
    try:
        return not os.path.exists(path) or any(
            entry.startswith(f"{name}.moved-") for entry in os.listdir(folder or "."))
    except OSError:
        return True


def _file_identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``; None where there is none now."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


# --------------------------------------------------------------- repository


def get_collection(session: Session, name: str) -> Collection | None:
    if "\x00" in name:  # no collection is named so (PostgreSQL refused the lookup: a 500)
        return None
    return session.scalar(select(Collection).where(Collection.name == name))


def list_collections(session: Session) -> Sequence[Collection]:
    return session.scalars(select(Collection).order_by(Collection.name)).all()


def create_collection(session: Session, name: str, *, backend: str, chunk_size: int,
                      chunk_overlap: int, tokenizer: str) -> Collection:
    collection = Collection(name=name, backend=backend, chunk_size=chunk_size,
                            chunk_overlap=chunk_overlap, tokenizer=tokenizer)
    session.add(collection)
    session.flush()
    return collection


def ensure_collection_embedder(session: Session, collection: Collection, name: str, dim: int,
                               identity: str, source: str | None = None) -> CollectionEmbedder:
    """The collection's row for vector ``name``, added if missing. ``source``: what loads the
    embedder (``CollectionEmbedder.source``); kept from the first run that recorded one."""
    for existing in collection.embedders:
        if existing.name == name:
            if existing.source is None and source is not None:
                existing.source = source
                session.flush()
            return existing
    row = CollectionEmbedder(name=name, dim=dim, identity=identity, source=source)
    collection.embedders.append(row)
    session.flush()
    return row


def documents_by_key(session: Session, collection_id: int,
                     keys: Iterable[str]) -> dict[str, Document]:
    keys = [k for k in keys if fits_key(k)]  # a longer one is no row
    out: dict[str, Document] = {}
    for start in range(0, len(keys), 500):  # stay under SQL parameter limits
        part = keys[start:start + 500]
        rows = session.scalars(select(Document).where(
            Document.collection_id == collection_id, Document.key.in_(part))).all()
        out.update({d.key: d for d in rows})
    return out


def vector_hashes(session: Session, document_ids: Iterable[int], embedder: str) -> dict[int, str]:
    ids = list(document_ids)
    out: dict[int, str] = {}
    for start in range(0, len(ids), 500):
        rows = session.execute(select(DocumentVector.document_id, DocumentVector.content_hash)
                               .where(DocumentVector.document_id.in_(ids[start:start + 500]),
                                      DocumentVector.embedder == embedder)).all()
        out.update({int(r[0]): str(r[1]) for r in rows})
    return out


def indexed_by_hash(session: Session, collection_id: int,
                    hashes: Iterable[str]) -> dict[str, list[Document]]:
    """The ``indexed`` documents of a collection whose content hash is one of ``hashes``, by
    hash (oldest first): a document moved or copied to another key can re-use their vectors."""
    wanted = sorted(set(hashes))
    out: dict[str, list[Document]] = {}
    for start in range(0, len(wanted), 500):
        rows = session.scalars(select(Document).where(
            Document.collection_id == collection_id, Document.status == "indexed",
            Document.content_hash.in_(wanted[start:start + 500])).order_by(Document.id)).all()
        for row in rows:
            out.setdefault(str(row.content_hash), []).append(row)
    return out


def vector_hashes_by_embedder(session: Session,
                              document_ids: Iterable[int]) -> dict[int, dict[str, str]]:
    """``vector_hashes`` of every embedder at once: document id -> {embedder: content hash}."""
    ids = list(document_ids)
    out: dict[int, dict[str, str]] = {}
    for start in range(0, len(ids), 500):
        rows = session.execute(select(DocumentVector.document_id, DocumentVector.embedder,
                                      DocumentVector.content_hash)
                               .where(DocumentVector.document_id.in_(ids[start:start + 500]))).all()
        for doc_id, embedder, content_hash in rows:
            out.setdefault(int(doc_id), {})[str(embedder)] = str(content_hash)
    return out


def set_vector_hash(session: Session, document: Document, embedder: str, content_hash: str) -> None:
    for row in document.vectors:
        if row.embedder == embedder:
            row.content_hash = content_hash
            return
    document.vectors.append(DocumentVector(embedder=embedder, content_hash=content_hash))


def set_vector_hashes(session: Session, hashes: Sequence[tuple[Document, str]],
                      embedder: str) -> None:
    """``set_vector_hash`` for many documents with one SELECT (not one lazy load per document).

    The rows are written by ``document_id``; a document's ``vectors`` collection, if loaded,
    is expired so that it is read again when next used.
    """
    ids = [d.id for d, _ in hashes]
    existing: dict[int, DocumentVector] = {}
    for start in range(0, len(ids), 500):
        existing.update({r.document_id: r for r in session.scalars(select(DocumentVector).where(
            DocumentVector.document_id.in_(ids[start:start + 500]),
            DocumentVector.embedder == embedder))})
    for document, content_hash in hashes:
        row = existing.get(document.id)
        if row is None:
            session.add(DocumentVector(document_id=document.id, embedder=embedder,
                                       content_hash=content_hash))
        else:
            row.content_hash = content_hash
        if "vectors" in document.__dict__:
            session.expire(document, ["vectors"])


def clear_vector_hashes(session: Session, documents: Sequence[Document], embedder: str) -> None:
    """Forget that ``documents`` hold ``embedder``'s vectors of their content: their points were
    written again without them (that embedder could not be loaded), so its next run encodes
    them. A stale hash read "unchanged" once the content came back to it, for good."""
    ids = [d.id for d in documents]
    for start in range(0, len(ids), 500):
        session.execute(delete(DocumentVector).where(
            DocumentVector.document_id.in_(ids[start:start + 500]),
            DocumentVector.embedder == embedder))
    for document in documents:
        if "vectors" in document.__dict__:
            session.expire(document, ["vectors"])


def document_keys_under(session: Session, collection_id: int,
                        sources: Sequence[str], prefix: str | None) -> dict[str, str]:
    """Keys of documents whose source is one of ``sources`` or starts with ``prefix``,
    mapped to their source (used by ``--sync`` to find deleted files and records)."""
    query = select(Document.key, Document.source).where(Document.collection_id == collection_id)
    rows = session.execute(query).all()
    wanted = set(sources)
    return {str(k): str(s) for k, s in rows
            if s in wanted or (prefix is not None and str(s).startswith(prefix))}


def chunk_point_ids(session: Session, document_ids: Iterable[int]) -> list[str]:
    ids = list(document_ids)
    out: list[str] = []
    for start in range(0, len(ids), 500):
        out.extend(session.scalars(select(Chunk.point_id).where(
            Chunk.document_id.in_(ids[start:start + 500]))).all())
    return out


def replace_chunks(session: Session, document: Document, chunks: Sequence[Chunk]) -> None:
    session.execute(delete(Chunk).where(Chunk.document_id == document.id))
    session.expire(document, ["chunks"])
    for chunk in chunks:
        chunk.document_id = document.id
        session.add(chunk)
    document.n_chunks = len(chunks)


def replace_chunks_many(session: Session, documents: Sequence[tuple[Document, Sequence[Chunk]]],
                        *, new: Iterable[int] = ()) -> None:
    """``replace_chunks`` for a batch: one DELETE for all of them (documents whose id is in
    ``new`` were created in this run and have no chunks to delete) and one bulk insert."""
    skip = set(new)
    old_ids = [d.id for d, _ in documents if d.id not in skip]
    for start in range(0, len(old_ids), 500):
        session.execute(delete(Chunk).where(Chunk.document_id.in_(old_ids[start:start + 500])))
    for document, chunks in documents:
        if "chunks" in document.__dict__:
            session.expire(document, ["chunks"])
        for chunk in chunks:
            chunk.document_id = document.id
        session.add_all(chunks)
        document.n_chunks = len(chunks)


def count_documents(session: Session, collection_id: int, status: str | None = None) -> int:
    query = (select(func.count()).select_from(Document)
             .where(Document.collection_id == collection_id))
    if status is not None:
        query = query.where(Document.status == status)
    return int(session.scalar(query) or 0)


def page_documents(session: Session, collection_id: int, limit: int, *, offset: int = 0,
                   status: str | None = None, prefix: str | None = None,
                   after: str | None = None) -> tuple[list[Document], int]:
    """A page of a collection's documents in key order (the (collection, key) unique index's
    order: pages of one ``limit`` read every document once while none is added or removed),
    ``limit`` of them after the first ``offset`` (an SQL LIMIT and OFFSET), and how many match
    in all (one COUNT); ``status`` and ``prefix`` (the start of the key or of the source, the
    file it was read from, so a csv's records are found by the file's path; compared as text:
    no LIKE wildcards, case kept, in the prefix's NFC or NFD form) narrow both. Their chunks and vectors are not loaded.

    The page and the COUNT are two statements (SQLite's driver opens no read transaction for
    them), so a job writing between them made them disagree: a page of 11 documents under a
    limit of 1000 said 20 more followed, and its next page was empty (the API review of the
    fifth session of 2026-12-06). The page reads one row past ``limit`` and the total is made
    to agree with it: past the page's end when that row exists, not when it does not.

    ``after``: only the documents whose key sorts after it (a keyset page: the next page is
    ``after`` the last key of this one, which a document indexed or removed meanwhile does not
    shift, as it shifts an offset); the count is of those too."""
    where = [Document.collection_id == collection_id]
    if after is not None:
        where.append(Document.key > after)
    if status is not None:
        where.append(Document.status == status)
    if prefix:
        # In either Unicode form: an "é" typed on Linux (NFC) finds a file that macOS named
        # "e" + U+0301 (NFD), and the other way round (the i18n review of the fifth session of
        # 2026-12-06: --prefix found only the form typed). Listings tell such twins apart.
        forms = dict.fromkeys([prefix, *(unicodedata.normalize(f, prefix) for f in ("NFC", "NFD"))])
        where.append(or_(*(column_start == form for form in forms
                           for column_start in (func.substr(Document.key, 1, len(form)),
                                                func.substr(Document.source, 1, len(form))))))
    query = select(Document).where(*where).order_by(Document.key).limit(limit + 1)
    if offset > 0:
        query = query.offset(offset)
    rows = list(session.scalars(query).all())
    more = len(rows) > limit
    del rows[limit:]
    total = int(session.scalar(select(func.count()).select_from(Document).where(*where)) or 0)
    end = offset + len(rows)
    return rows, (max(total, end + 1) if more else min(total, end))


def vectors_missing(session: Session, collection_id: int, embedders: Iterable[str],
                    indexed: int) -> dict[str, int]:
    """How many of a collection's ``indexed`` documents lack each embedder's vectors of their
    current content (an embedder added to a collection and stopped part-way, or one left out
    of a rewrite because it could not be loaded): searches with it cannot find them. Only the
    embedders that lack some."""
    # Rows unpack as tuples (``Result.tuples()`` is deprecated since SQLAlchemy 2.1: a caller
    # running with warnings as errors failed on it).
    have = {name: count for name, count in session.execute(
        select(DocumentVector.embedder, func.count()).join(
            Document, Document.id == DocumentVector.document_id)
        .where(Document.collection_id == collection_id, Document.status == "indexed",
               DocumentVector.content_hash == Document.content_hash)
        .group_by(DocumentVector.embedder))}
    return {name: indexed - int(have.get(name, 0)) for name in embedders
            if indexed - int(have.get(name, 0)) > 0}


def count_chunks(session: Session, collection_id: int) -> int:
    return int(session.scalar(
        select(func.count()).select_from(Chunk).join(Document)
        .where(Document.collection_id == collection_id)) or 0)


def get_job(session: Session, job_id: int) -> IndexJob | None:
    if not 0 < job_id <= MAX_ROW_ID:  # PostgreSQL's INTEGER refuses a larger one outright
        return None
    return session.get(IndexJob, job_id)


def list_jobs(session: Session, collection_id: int | None = None, limit: int = 20, *,
              unfinished: int = 0, offset: int = 0,
              before: int | None = None) -> Sequence[IndexJob]:
    """The newest ``limit`` jobs after the newest ``offset`` (an SQL OFFSET), newest first;
    then, with ``unfinished``, up to that many older ones whose row says ``queued`` or
    ``running`` (newest first too). A listing takes them so that a job still going is never cut
    off by newer ones: a 33-minute job was missing from `facet jobs` once 20 small jobs had
    been sent after it. Whether such a row's job is truly alive is the reader's to tell
    (``effective_state``: a killed writer's row still says ``running``). ``before``: only the
    jobs whose id is below it (a keyset page: the next is before this page's last id)."""
    query = select(IndexJob).order_by(IndexJob.id.desc()).limit(limit)
    if before is not None:
        query = query.where(IndexJob.id < before)
    if offset > 0:
        query = query.offset(offset)
    if collection_id is not None:
        query = query.where(IndexJob.collection_id == collection_id)
    newest = list(session.scalars(query).all())
    if unfinished <= 0 or len(newest) < limit:
        return newest  # no older job exists
    older = (select(IndexJob).where(IndexJob.id < newest[-1].id,
                                    IndexJob.state.in_(UNENDED_STATES))
             .order_by(IndexJob.id.desc()).limit(unfinished))
    if collection_id is not None:
        older = older.where(IndexJob.collection_id == collection_id)
    return newest + list(session.scalars(older).all())


def count_jobs(session: Session, collection_id: int | None = None, *,
               before: int | None = None) -> int:
    """How many jobs there are (of one collection when given; whose id is below ``before``
    when given): one COUNT."""
    query = select(func.count()).select_from(IndexJob)
    if before is not None:
        query = query.where(IndexJob.id < before)
    if collection_id is not None:
        query = query.where(IndexJob.collection_id == collection_id)
    return int(session.scalar(query) or 0)


def collections_with_worker_jobs(session: Session, names: Sequence[str]) -> list[str]:
    """Those of ``names`` with a worker (Celery) job queued or running."""
    return list(session.scalars(
        select(Collection.name).join(IndexJob, IndexJob.collection_id == Collection.id).where(
            Collection.name.in_(list(names)), IndexJob.runner == "celery",
            IndexJob.state.in_(UNENDED_STATES)).distinct()))


def cancel_requested(session: Session, job_id: int) -> bool:
    """Whether someone asked job ``job_id`` to stop: one small query, read by a runner at each
    batch boundary (the flag is set by another process's session, so the row it holds is stale)."""
    return bool(session.scalar(select(IndexJob.cancel_requested).where(IndexJob.id == job_id)))


def running_jobs(session: Session, collection_id: int,
                 states: Sequence[str] = ("running",)) -> Sequence[IndexJob]:
    """Jobs of a collection in one of ``states`` (a queued job counts as unfinished too)."""
    return session.scalars(select(IndexJob).where(IndexJob.collection_id == collection_id,
                                                  IndexJob.state.in_(list(states)))).all()


def collection_job_ids(session: Session, collection_id: int) -> list[int]:
    """The ids of every job of a collection, ended or not."""
    return list(session.scalars(select(IndexJob.id).where(IndexJob.collection_id == collection_id)))


def delete_collection(session: Session, collection: Collection) -> None:
    """Delete a collection and, explicitly (SQLite may lack cascades), everything under it."""
    doc_ids = select(Document.id).where(Document.collection_id == collection.id)
    session.execute(delete(Chunk).where(Chunk.document_id.in_(doc_ids)))
    session.execute(delete(DocumentVector).where(DocumentVector.document_id.in_(doc_ids)))
    session.execute(delete(Document).where(Document.collection_id == collection.id))
    job_ids = select(IndexJob.id).where(IndexJob.collection_id == collection.id)
    session.execute(delete(JobError).where(JobError.job_id.in_(job_ids)))
    session.execute(delete(JobChunk).where(JobChunk.job_id.in_(job_ids)))
    session.execute(delete(IndexJob).where(IndexJob.collection_id == collection.id))
    session.delete(collection)  # its CollectionEmbedder rows go with it (ORM cascade)


def delete_documents(session: Session, documents: Sequence[Document]) -> None:
    ids = [d.id for d in documents]
    for start in range(0, len(ids), 500):
        part = ids[start:start + 500]
        session.execute(delete(Chunk).where(Chunk.document_id.in_(part)))
        session.execute(delete(DocumentVector).where(DocumentVector.document_id.in_(part)))
        session.execute(delete(Document).where(Document.id.in_(part)))
