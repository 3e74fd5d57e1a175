"""The index service: source -> parse -> chunk -> hash -> encode -> upsert -> metadata.

Crash safety. Documents are processed in batches of about ``batch_chunks`` chunks; each
batch goes through three steps:

1. the documents about to be (re)written are marked ``pending`` and committed;
2. their points are written (old points of changed documents deleted first; points of a
   ``pending`` or ``error`` document, whose previous write may be incomplete, are deleted by
   payload filter) and the store is flushed;
3. chunk rows, hashes and ``indexed`` status are committed in one transaction.

Point ids are deterministic, so a run killed anywhere and started again rewrites the
same ids: no duplicates, and the hash check redoes exactly the documents whose last
step 3 never happened. Nothing already ``indexed`` is touched unless its content
changed, and a document that now fails to parse keeps its indexed version.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import os
import re
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar, NoReturn

import numpy as np
from sqlalchemy import ColumnElement, delete, func, select, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session

from app.encoding import (
    CHUNK_MARGIN,
    cut_count,
    cut_message,
    longest_first,
    max_length_spec,
    unread_message,
    unread_rows,
)
from app.errors import (
    ConflictError,
    DataError,
    FacetError,
    InvalidRequestError,
    ModelOutputError,
    NotFoundError,
    TooLargeError,
    UnavailableError,
    UnknownModelError,
    as_domain_error,
)
from app.files import expand_user, is_stream
from app.roots import lies_under, real_path, real_paths
from app.services import leases
from app.services.collections import (
    REMOVAL_KEY_KIND,
    REMOVAL_PREFIX,
    UnrecordedEnd,
    check_collection_text,
    follow_hint,
    is_removal,
    is_text,
    kept_said,
    named_default,
    record_unrecorded_ends,
    remember_unrecorded_end,
    removal_keys,
    removal_rerun_hint,
    resume_command,
    stopped_before_interrupted_existed,
    store_folder_here,
    store_place,
    wrong_data_folder,
)
from app.services.context import ServiceContext
from app.services.search import (
    added_options,
    check_bool,
    check_int,
    check_spec,
    check_str,
    plain_number,
    with_recorded_options,
)
from app.text import plural, printable, shell_word
from app.uploads import upload_folder_path
from embedders.contract import Embedder, HasTokenizer, Role, identity_changes
from indexer import metadata as md
from indexer.chunking import (
    Chunk,
    ChunkingConfig,
    TokenSpans,
    chunk_text,
    stream_chunks,
    tokenizer_spans,
    whitespace_spans,
)
from indexer.errors import (
    DISK_GONE_ERRNOS,
    SourceNotFoundError,
    StoreBusyError,
    StoreDamagedError,
    StoreError,
    StoreUnavailableError,
    UnsupportedSourceError,
    free_bytes,
)
from indexer.parsing import (
    SYSTEM_FOLDERS,
    UNREADABLE,
    CheckedFile,
    DocumentError,
    ParsedDocument,
    ParseResult,
    StreamedDocument,
    discover,
    discover_files,
    display_path,
    first_bad_name,
    parse_file,
    skip_reason,
    supported_types,
)
from indexer.store import (
    DOC_ID_FIELD,
    PointRecord,
    point_id,
    validate_name,
    validate_new_collection_name,
)

logger = logging.getLogger(__name__)

# How often (seconds) a running job's row shows how far its batch's encoding is.
ENCODING_SHOWN_S = 1.0
# How often a batch being encoded reads whether its job was asked to stop (one small query).
CANCEL_READ_S = 1.0
# The moved documents a run's report lists (``IndexReport.moved``); it counts them all.
MOVES_LISTED = 20


@dataclass(frozen=True)
class IndexOptions:
    """Per-run options. ``None`` chunk settings take the collection's (or the settings').

    Attributes:
        embedder: the embedder (name, checkpoint path, or spec with options) to index with;
            None: the collection's, or ``FACET_DEFAULT_EMBEDDER`` for a new collection.
        chunk_size: tokens per chunk, for a new collection; an existing one's is fixed (a
            different value is refused).
        chunk_overlap: tokens shared by consecutive chunks, smaller than ``chunk_size``; fixed
            per collection as ``chunk_size`` is.
        sync: remove the documents of the source that no longer exist (deleted files, records
            gone from a jsonl); ``None`` (the default) syncs a folder source and not a single file.
        batch_chunks: chunks encoded, written and committed together; None:
            ``FACET_INDEX_BATCH_CHUNKS`` (256).
        text_column: the csv column / jsonl field holding the text; None: the first of
            ``text``, ``contents``, ``content``, ``body`` present.
        confine: folders the run reads files under (links resolved), checked as it walks its
            source: a file elsewhere is skipped with a warning; None: any file the process can
            read. The API sets ``FACET_API_ALLOWED_ROOTS``, the UI its own roots.
    """

    embedder: str | None = None
    chunk_size: int | None = None
    chunk_overlap: int | None = None
    sync: bool | None = None
    batch_chunks: int | None = None
    text_column: str | None = None  # the csv column / jsonl field holding the text
    # The folders the run may read files under (the API's FACET_API_ALLOWED_ROOTS, the UI's
    # FACET_UI_ALLOWED_ROOTS), checked again as the job reads its source: a link to a file
    # elsewhere made after the job was submitted and checked was followed (the security
    # exploration of the sixth session of 2026-12-02). None: any file the process can read.
    confine: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.confine is not None:  # (a list once sent to a worker as JSON)
            object.__setattr__(self, "confine", tuple(str(root) for root in self.confine))
        # A numpy integer (np.int64(128), what pandas and numpy hand around) as the int it is:
        # it passed the int check and SQLite stored it as an 8-byte BLOB, the run failed with
        # an untyped ValueError and the collection kept the BLOB as its chunk size (every
        # listing of collections failed after that).
        for name in ("chunk_size", "chunk_overlap", "batch_chunks"):
            object.__setattr__(self, name, plain_number(getattr(self, name)))

    def syncs(self, source: Path) -> bool:
        """Whether a run over ``source`` removes what is gone from it (see ``sync``).

        Raises:
            UnavailableError: ``source`` cannot be reached (its share or drive gone under its
                mount: a traceback at the end of the run, its documents read since counted
                failed).
        """
        if self.sync is not None:
            return self.sync
        try:
            return Path(source).is_dir()
        except OSError as e:
            raise source_unreachable(source, e) from e


# Why a file a walk found was not read: it lies outside the folders the run may read.
OUTSIDE_ROOTS = "a link to a file outside the folders this server may index, not read"


# Why a file a walk found was not read: a link into Facet's own data folder, which a walk never
# enters (the store's files, every collection's staged uploads), whatever folders it may read.
INTO_DATA_FOLDER = "a link to a file in Facet's own data folder (FACET_DATA_DIR), not read"


def outside_own(files: list[Path], own: Sequence[Path], source: Path) -> tuple[list[Path], list[Path]]:
    """``files`` (a walk of ``source``) split into those to read and the links that lead into
    ``own`` (the data folder) from outside it (``app.roots.links_into``): through one, another
    collection's staged upload was indexed and returned by search, on every edge, allowed
    roots or not."""
    from app.roots import links_into

    into = links_into(files, own, source)
    if not into:
        return files, []
    left = set(into)
    return [f for f in files if f not in left], into


def confined(files: list[Path], roots: Sequence[str] | None) -> tuple[list[Path], list[Path]]:
    """``files`` split as ``app.roots.split_under`` splits them under ``roots`` (a run's
    ``confine``); all of them inside where ``roots`` is None."""
    if roots is None:
        return files, []
    from app.roots import split_under

    return split_under(files, roots)


# Where Linux names a process's open files: opening /proc/self/fd/N opens the file open as N
# itself (whatever its path leads to now), and reading the link gives its real path.
PROC_FD = "/proc/self/fd"
# A fifo or a device put in a checked file's place is not waited on when it is opened (a fifo
# with no writer hangs an open for reading), nor made the process's terminal.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)


@dataclass(frozen=True)
class OutsideRoots:
    """A file a confined run found outside its folders when it came to read it (not read)."""

    path: Path


class OpenedUnder:
    """A file of a confined run opened, and where what was opened lies checked against the
    run's folders, before anything of it is read (``checked`` is then what the parser reads,
    ``CheckedFile``): a file checked as the run walked its source and opened by its path later
    could have been made a link to a file elsewhere in between (or a folder on its path a link
    to a folder elsewhere), and that file was read and indexed, its text then readable through
    search (the time-of-check/time-of-use finding of the security review, left open by the
    check at walk time, ``confined``). Closed on leaving (``with``).

    On Linux what was opened is named by the kernel (``PROC_FD``) and read through its open
    file, so no change of the path after the open can lead the read elsewhere: the race is
    closed. Elsewhere the path's real path is checked with the opened file's identity (device
    and inode) right after the open and again after the read (``still_under``), and each file
    the parser opens is that same file (``CheckedFile.open``): that narrows the race but may
    not close it (a folder on the real path could be swapped and swapped back between two
    checks).

    Attributes:
        checked: what the parser reads, or None where the file opened lies outside the
            folders (it is not read: ``OUTSIDE_ROOTS``).
        stat: the opened file's ``os.fstat``.
        by_fd: whether it is read through its open file (the race closed), not the fallback.

    Raises:
        OSError: ``path`` cannot be opened (gone, no permission), or what was opened is not a
            regular file (made a fifo or a folder since the walk).
    """

    def __init__(self, path: Path, allowed: Sequence[Path]) -> None:
        self.path, self.allowed = path, allowed
        self._fd = os.open(path, _OPEN_FLAGS)
        try:
            self.stat = os.fstat(self._fd)
            if not stat.S_ISREG(self.stat.st_mode):
                raise OSError("not a regular file (it changed since the folder was walked)")
            self._identity = (self.stat.st_dev, self.stat.st_ino)
            self.checked: CheckedFile | None = None
            self.by_fd = True
            try:
                opened = os.readlink(f"{PROC_FD}/{self._fd}")
            except OSError:  # not Linux, or no /proc: the fallback
                opened = ""
            if opened.startswith(os.sep):
                # The kernel's name of the open file ("... (deleted)" once it was removed since:
                # still the file opened, where it was). The path's own stat is not compared:
                # what is read is this open file, wherever the path leads by then.
                where = Path(opened.removesuffix(" (deleted)"))
                if lies_under(where, allowed) is not None:
                    self.checked = CheckedFile(Path(f"{PROC_FD}/{self._fd}"), self._identity,
                                               self.stat.st_size)
            else:
                self.by_fd = False
                real = self._real_under()
                if real is not None:
                    self.checked = CheckedFile(real, self._identity, self.stat.st_size)
        except BaseException:
            os.close(self._fd)
            raise

    def _real_under(self) -> Path | None:
        """The fallback's check: ``path``'s real path where it lies under the folders and is
        the file opened (its device and inode), else None."""
        try:
            real = real_path(self.path)
            st = os.stat(real)
        except (OSError, ValueError):
            return None
        if (st.st_dev, st.st_ino) != self._identity or lies_under(real, self.allowed) is None:
            return None
        return real

    def still_under(self) -> bool:
        """Whether the file read is still the one checked, under the folders, after its read:
        always, where it was read through its open file (Linux); the fallback checks again."""
        return self.checked is not None and (self.by_fd or self._real_under() is not None)

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> OpenedUnder:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def parse_under(path: Path, allowed: Sequence[Path], **kwargs: Any
                ) -> Iterator[ParseResult | OutsideRoots]:
    """``parse_file(path, **kwargs)`` for a confined run (``allowed``: its folders as
    ``app.roots.real_paths`` gives them): of the file ``OpenedUnder`` opened and checked, or
    one ``OutsideRoots`` where that lies elsewhere. The file stays open until the generator
    moves past its documents, so that a ``StreamedDocument``'s second read (done before the
    next document is asked for) reads it again through the same open file."""
    try:
        opened = OpenedUnder(path, allowed)
    except OSError as e:  # as parse_file says a file it cannot read
        key = display_path(path)
        yield DocumentError(key, key, f"cannot read {key}: {e}")
        return
    with opened:
        if opened.checked is None:
            yield OutsideRoots(path)
            return
        results = parse_file(path, checked=opened.checked, **kwargs)
        if opened.by_fd:  # (read through its open file: nothing to check after)
            yield from results
            return
        # The fallback: what was read is given only if the file is still the one checked,
        # under the folders, once it has been read.
        read = list(results)
        if not opened.still_under():
            yield OutsideRoots(path)
            return
        yield from read


def check_options(options: IndexOptions) -> None:
    """Refuse options of the wrong type (the HTTP API's schema checks its own; a library
    caller's ``chunk_size="100"`` failed deep inside with a TypeError, ``sync="no"`` synced).

    Raises:
        InvalidRequestError: naming the field and the type expected; ``param`` as the HTTP API
            names it (``chunk_tokens`` for ``chunk_size``).
    """
    for name in ("embedder", "text_column"):
        check_str(getattr(options, name), name, optional=True)
    check_spec(options.embedder, "embedder", default="the collection's embedder or the default")
    check_int(options.chunk_size, "chunk_size", optional=True, param="chunk_tokens")
    check_int(options.chunk_overlap, "chunk_overlap", optional=True)
    check_int(options.batch_chunks, "batch_chunks", optional=True)
    check_bool(options.sync, "sync", optional=True)
    if options.confine is not None and not all(isinstance(root, str) and root for root in options.confine):
        raise InvalidRequestError(f"confine must list folders (paths), got {options.confine!r:.80}",
                                  param="confine")


def check_progress(progress: Any) -> None:
    """Refuse a ``progress`` that is neither callable nor None, before anything is recorded:
    ``progress=5`` failed the job at its first batch with a raw TypeError.

    Raises:
        InvalidRequestError: naming it.
    """
    if progress is not None and not callable(progress):
        raise InvalidRequestError(f"progress must be a callable taking a Progress (or None), "
                                  f"got {type(progress).__name__} {progress!r:.60}",
                                  param="progress")


@dataclass
class Seen:
    """What a run read from its source, for ``--sync``: the document keys, and the files that
    gave an error (a malformed line, an unreadable file), whose records this run could not
    name: their missing keys may be records that still exist, so sync leaves them."""

    keys: set[str] = field(default_factory=set)
    failed_sources: set[str] = field(default_factory=set)
    # Of those, the record files that hold no record at all (``holds_no_records``).
    empty_sources: set[str] = field(default_factory=set)
    # The source each key was first read from (a duplicate's message names it).
    sources: dict[str, str] = field(default_factory=dict)
    # What the walk could not read (a folder it cannot list or look into, an entry whose type
    # cannot be read), as ``display_path`` names it: what was indexed under it is not gone.
    # Synced away ("1 removed", unsaid) before; ``unreadable_folder``.
    failed_folders: set[str] = field(default_factory=set)
    # The run indexes a collection's upload folder (``upload_run``): a duplicate's way out is
    # the page's, not an edit of files the user cannot reach.
    uploads: bool = False
    # How many keys each source gave first (``sources``' values counted): whether removing a
    # duplicate's first record takes its file with it (its only one).
    firsts: collections.Counter[str] = field(default_factory=collections.Counter)

    def kept(self, source: str) -> bool:
        """Whether a sync keeps the documents of ``source`` this run did not see: the file
        gave an error, or it is under something this run could not read."""
        return source in self.failed_sources or self.unreadable_folder(source) is not None

    def unreadable_folder(self, source: str) -> str | None:
        """What this run could not read that holds ``source`` (the nearest): a folder the walk
        could not read, or, where the walk said nothing (a worker's plan), the folder of a file
        that cannot be looked at (no permission: it may well be there). None where ``source``
        can be seen to be gone, or is there."""
        for folder in sorted(self.failed_folders, key=len, reverse=True):
            if source == folder or source.startswith(folder.rstrip(os.sep) + os.sep):
                return folder
        # (The entry itself, not a link's target: a walk lists the link.)
        return os.path.dirname(source) if _source_state(source, follow=False) is None else None

    def add(self, item: ParsedDocument | DocumentError | StreamedDocument) -> None:
        self.keys.add(item.key)
        if item.key not in self.sources:
            self.sources[item.key] = str(item.source)
            self.firsts[str(item.source)] += 1
        if isinstance(item, DocumentError):
            self.failed_sources.add(item.source)
            if holds_no_records(item):
                self.empty_sources.add(item.source)

    def duplicate_message(self, key: str, source: str) -> str:
        """The error for a second document with ``key``, read from ``source``: it named only
        the file of the second, which read as that file repeating its own id when the first
        was another file's."""
        first = self.sources.get(key)
        where = ("the file repeats it" if first in (None, str(source))
                 else f"{first} already has a record with it")
        way_out = "give each record an id of its own"
        if self.uploads and first is not None and first != str(source):
            # Staged uploads: every upload job indexes them all again, so this error came back
            # with each later upload, and no document row showed it (the UI review of
            # 2026-12-06); the files cannot be edited where they are. Removing the document
            # helps only where it is the other file's one record (the file goes with it); else
            # the next upload job reads that file again, first in name order, and the same.
            upload = "upload one of the files again with ids of its own"
            way_out = ("every upload job says this again while both files are staged (they are "
                       "read in name order, the first keeping the id): "
                       + (f"remove document {key!r} (the other file's only record: the file goes "
                          f"with it) and the next upload job indexes this one, or {upload}"
                          if self.firsts[first] == 1 else upload))
        return (f"{duplicate_prefix(key, source)}{where}; only the first occurrence is indexed "
                f"({way_out})")


def upload_run(settings: Any, source: str | None, collection: str) -> bool:
    """Whether a job's ``source`` is ``collection``'s own upload folder (``Facet.upload_folder``:
    ``DATA_DIR/uploads/NAME``), which every upload job indexes whole."""
    if not source:
        return False
    try:
        return os.path.realpath(source) == os.path.realpath(upload_folder_path(settings.data_dir,
                                                                               collection))
    except (OSError, ValueError):
        return False


def duplicate_prefix(key: str, source: str | Path) -> str:
    """How a job's error for a second record with id ``key``, read from ``source``, starts
    (``Seen.duplicate_message``): an upload whose every record is another's is found by it
    (``app.uploads.drop_unindexable``)."""
    return f"duplicate document id {key!r} in {source}: "


@dataclass(frozen=True)
class Progress:
    """Reported after every batch, after every chunk batch of a streamed (large) file, and
    between the encoder's pieces of a batch.

    Attributes:
        current: the large file being streamed now, else None.
        current_fraction: how far into ``current`` (by bytes, approximate), else None.
        stage: a step that takes a while: encoding a batch ("encoding chunk 96/480 of this
            batch": a batch of long documents took minutes with an LLM embedder on a CPU, the
            bar frozen meanwhile), or, after the documents, the store's ``optimize`` (tens of
            seconds at 50k chunks, the bar sat at 100% meanwhile).
    """

    docs_done: int
    docs_total: int
    chunks_written: int
    elapsed_s: float
    current: str | None = None
    current_fraction: float | None = None
    stage: str | None = None


@dataclass
class IndexReport:
    """What a run did (also stored as the job row). Counts are of this run only.

    Attributes:
        job_id: the job's id (``facet jobs ID``).
        collection: the collection indexed into.
        embedder: the embedder's name (the collection's vector name).
        state: how the job ended: ``completed``, ``failed``, ``interrupted`` or ``cancelled``.
        docs_seen: documents read from the source (failed ones included).
        docs_indexed: documents written (new or changed).
        docs_skipped: documents left as they were: unchanged, their vectors already stored.
        docs_failed: documents that could not be read or indexed (see ``errors``).
        docs_deleted: documents removed because the source no longer has them (``sync``).
        chunks_written: chunks written to the store.
        elapsed_s: seconds the run took, a model's load excluded.
        timings: seconds per stage (``parse_chunk``, ``encode``, ``store``, ``metadata``;
            ``load_model`` where the run loaded a model: its own, or another embedder's of
            the collection, which encodes the documents written anew too).
        loads: embedder name -> seconds its model took to load in this run, for each model
            the run loaded (none for one already loaded in the process).
        errors: (document key, message) of each failed document.
        warnings: (document key or embedder name, message) of each non-fatal problem.
        collection_removed: the collection this run created was removed again, nothing having
            been indexed into it: every document failed, or the source held none of a
            supported type (an empty folder; ``state`` is ``completed`` and ``docs_seen`` 0
            then). Its job went with it: ``job_id`` names a job that no longer exists
            (``Facet.job(job_id)`` raises ``NotFoundError``); ``message`` says so.
        unread_chunks: chunks mostly of tokens the embedder's tokenizer does not know.
        unread_documents: the documents holding such chunks (the keys, in order).
        cut_chunks: embedder name -> chunks longer than it reads whole (their ends unread).
        cut_budget: embedder name -> the tokens of text it reads whole (None where unknown).
        cut_encoded: embedder name -> the chunks it encoded (of which ``cut_chunks`` were cut).
        cut_options: embedder name -> its spec with ``[max_length=N]`` (reading whole chunks),
            where it takes that option.
        skipped_files: files left out as of an unsupported type.
        skipped_other: (path, why) of files left out for another reason (a name that is not
            UTF-8, a link to a folder, a broken link).
        chunks_reused: chunks written with the stored vectors of a document of the same content
            (a file moved, renamed or copied), not encoded.
        docs_moved: documents whose old place is gone (moved, not copied): removed from there.
        chunks_moved: the chunks of the moved documents.
        moved: (old source, new source) of the first ``MOVES_LISTED`` (20) moved documents.
        removed: the keys of the first ``MOVES_LISTED`` documents a sync removed.
        vectors_left_out: embedder name -> the documents written without that other embedder's
            vectors: it gave unusable vectors (NaN, all zero) for them (a warning names each;
            its next run with --embedder tries them again).
        stopped_within: the key of a large file (read in pieces) the run stopped part-way
            through: its chunks so far are searchable, and the next run reads it from its start
            (it is committed whole at its end); None otherwise.
        message: what happened that the counts do not say, where the job that would say it is
            gone (``collection_removed``): "nothing to index in SOURCE: collection 'c' was not
            created, and job 8 was removed with it" (`facet index` prints the same), or "N of
            N documents failed, none indexed: ...". None otherwise.
    """

    job_id: int
    collection: str
    embedder: str
    state: str
    docs_seen: int = 0
    docs_indexed: int = 0
    docs_skipped: int = 0
    docs_failed: int = 0
    docs_deleted: int = 0
    chunks_written: int = 0
    elapsed_s: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    loads: dict[str, float] = field(default_factory=dict)
    errors: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    collection_removed: bool = False
    # Chunks mostly unknown tokens to the embedder's tokenizer (``encoding.unread_rows``), and
    # the documents they are in, in order (the keys of a dict: a set that keeps the order).
    unread_chunks: int = 0
    unread_documents: dict[str, None] = field(default_factory=dict)
    # Chunks longer than an embedder reads whole (``encoding.cut_count``), by its name, and the
    # budget it reads (tokens of text).
    cut_chunks: dict[str, int] = field(default_factory=dict)
    cut_budget: dict[str, int | None] = field(default_factory=dict)
    # The chunks each such embedder encoded (a companion encodes only the documents written
    # anew: "1 of 17" counted another embedder's chunks), and its spec with [max_length=N]
    # where it takes that option (``encoding.max_length_spec``).
    cut_encoded: dict[str, int] = field(default_factory=dict)
    cut_options: dict[str, str] = field(default_factory=dict)
    skipped_files: list[str] = field(default_factory=list)  # of unsupported types
    # Left out for another reason (a name that is not UTF-8, a link to a folder, a broken
    # link): (the path as printable text, why).
    skipped_other: list[tuple[str, str]] = field(default_factory=list)
    # Documents written with the vectors of an indexed document of the same content (a file
    # moved, renamed or copied), not encoded; of those, the ones whose old place was gone (its
    # file moved away), removed as moved, and the first ``MOVES_LISTED`` (old, new source).
    chunks_reused: int = 0
    docs_moved: int = 0
    chunks_moved: int = 0  # the moved documents' chunks (the moved note counts these)
    moved: list[tuple[str, str]] = field(default_factory=list)
    # The first ``MOVES_LISTED`` documents a sync removed (``docs_deleted`` counts them all):
    # "1 removed" named none, not even a wrong removal's.
    removed: list[str] = field(default_factory=list)
    # Documents written without another embedder's vectors, by its name: it gave unusable
    # vectors (NaN, all zero) for them (``_companion_apart``; a warning names each).
    vectors_left_out: dict[str, list[str]] = field(default_factory=dict)
    # A removed collection's word (``collection_removed``): an empty folder's run said
    # "completed", no warning, and a job id ``job()`` no longer found.
    message: str | None = None
    # A large file (read in pieces) the run stopped part-way through: its chunks so far are
    # searchable, but it is committed whole at its end, so the next run reads it from its start
    # (a stopped run said "what was indexed is kept", and its rerun redid 2,048 chunks).
    stopped_within: str | None = None

    @property
    def docs_per_s(self) -> float:
        return self.docs_seen / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def failure(self, shown: str = "the errors above") -> DataError | None:
        """The run's document failures as one error (None when every document went in).

        The report is complete either way; an edge decides whether failed documents fail the
        call (the CLI exits non-zero unless told ``--allow-failures``). ``shown``: where the
        edge showed the errors (``facet index --json``: in the record's ``errors``, no lines
        above).
        """
        if not self.docs_failed:
            return None
        if self.collection_removed:  # its job row went with it
            return DataError(f"{self.docs_failed} of {self.docs_seen} documents failed; nothing "
                             f"was indexed, so the new collection {self.collection!r} was "
                             "removed again")
        return DataError(f"{self.docs_failed} of {self.docs_seen} documents failed; see "
                         f"{shown} or `facet jobs {self.job_id}`")


def removed_collection_message(report: IndexReport, source: Path | str) -> str:
    """``IndexReport.message`` of a run whose new collection was removed again, nothing having
    been indexed (``collection_removed``): the collection and the job went, which the report's
    ``completed`` and ``job_id`` do not say."""
    gone = (f"collection {report.collection!r} was not created, and job {report.job_id} was "
            "removed with it")
    if report.docs_failed:
        return (f"{report.docs_failed} of {report.docs_seen} documents failed, none indexed: "
                f"{gone}")
    return f"nothing to index in {display_path(source)}: {gone}"


def left_empty(session: Session, coll: md.Collection, job: md.IndexJob) -> bool:
    """Whether ``coll`` holds no indexed document and no job but ``job``: made for it, and
    left empty by it."""
    return not (md.count_documents(session, coll.id, status="indexed") or
                any(j.id != job.id for j in md.list_jobs(session, coll.id, limit=2)))


# What ``left_empty_note`` says of the collection, before the ways to delete it (the UI says its
# own way: ``ui.render.job_message``).
LEFT_EMPTY = "was made for this job and holds no indexed document"


def left_empty_note(collection: str) -> str:
    """A background job's note on the collection made for it that it left empty. Kept (its
    caller reads the job later, which goes with it; a foreground run removes it), but `facet
    collections` and GET /collections listed an empty collection that neither the job nor its
    message ("nothing to index: ...") named."""
    return (f"collection {collection!r} {LEFT_EMPTY}: "
            f"`facet delete {collection}` (DELETE /collections/{collection}) removes it")


def _path_key(key: Any) -> Any:
    """A document key given as a path (``os.PathLike``) as its str; anything else as given,
    for ``_removal_keys`` to check (a path of bytes stays a bytes path, refused as such)."""
    if isinstance(key, os.PathLike):
        path = os.fspath(key)
        return path if isinstance(path, str) else key
    return key


def give_back_freed_memory() -> None:
    """Hand the heap freed by a batch's encoding back to the system (Linux's glibc).

    Each forward pass allocates activation buffers of its batch's shape and frees them, and
    glibc keeps freed heap for reuse instead of returning it: a `facet index` of SciFact with
    minilm grew from ~440 MB to 1.2 GB at 5,000 documents with nothing of Facet's growing (the
    store's segment took ~15 MB per 1,000 documents). Trimmed after each batch it stays flat
    (1,000 documents: 438 -> 453 MB). Elsewhere (musl, macOS) there is nothing to call."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


def moved_message(report: IndexReport) -> str:
    """The note of a run that found documents moved (``IndexReport.docs_moved``)."""
    old, new = report.moved[0]
    return _moved_text(report.docs_moved, report.chunks_moved, f"{old} is now {new}")


def _moved_tail(docs: int) -> str:
    more = f" and {plural(docs - 1, 'other')}" if docs > 1 else ""
    entries = ("their entries at the old paths, which no longer exist, were" if docs > 1
               else "its entry at the old path, which no longer exists, was")
    return f"{more}; {entries} removed"


def _moved_text(docs: int, chunks: int, example: str) -> str:
    # The moved documents' chunks only: a worker job sums its chunk tasks' notes, and only
    # tasks that moved documents write one (a sum that also counted copies differed from an
    # in-process run's).
    return (f"{plural(docs, 'document')} moved ({plural(chunks, 'chunk')} of this run re-used "
            f"stored vectors, not encoded again): {example}{_moved_tail(docs)}")


_MOVED = re.compile(r"([\d,]+) documents? moved \(([\d,]+) chunks? of this run re-used stored "
                    r"vectors, not encoded again\): (.*)", re.DOTALL)


def summed_moved_message(messages: list[str]) -> str | None:
    """One note for the ``moved_message`` notes of a worker job's chunks (each chunk task found
    some of the moves), as an in-process run gives it; None if any is not one."""
    docs = chunks = 0
    example = None
    for message in messages:
        found = _MOVED.fullmatch(message)
        if found is None:
            return None
        n = int(found.group(1).replace(",", ""))
        tail = _moved_tail(n)
        if not found.group(3).endswith(tail):
            return None
        docs, chunks = docs + n, chunks + int(found.group(2).replace(",", ""))
        example = example or found.group(3)[:-len(tail)]
    return _moved_text(docs, chunks, example) if example is not None else None


# The most document keys one removal names (``IndexService.remove_documents``): a longer list
# is refused (TooLargeError), as a query string of that many keys would be.
MAX_REMOVED_KEYS = 1000
# How many of a collection's stopped removals a completed one looks back at
# (``IndexService._mark_completed_removals``).
STOPPED_REMOVALS_READ = 50
# The keys of a removal that its job row's source and message name (the report lists them all).
REMOVED_KEYS_NAMED = 5


@dataclass
class RemovedDocument:
    """One document a removal took out of a collection.

    Attributes:
        key: its key, as `facet search` and `facet jobs ID` show it.
        source: the file it was read from (a record's file for a jsonl/csv record).
        status: what it was: ``indexed``, ``error`` (a failed document's entry) or ``pending``.
        chunks: the chunks (store points) removed with it.
        source_exists: its file is still there (on the machine that removed it): the next index
            of that file or of a folder holding it adds it back, unless it is deleted from there.
        source_deleted: its file was an upload staged in Facet's own folder for the collection
            (``DATA_DIR/uploads/NAME``, which every upload job indexes whole) and was deleted
            with it, once the removal committed (``source_exists`` is then False). A file
            anywhere else is never touched, nor a staged record file whose other records are
            still indexed.
    """

    key: str
    source: str
    status: str
    chunks: int
    source_exists: bool
    source_deleted: bool = False


@dataclass
class RemoveReport:
    """What ``IndexService.remove_documents`` did (also recorded as a job row, ``facet jobs``).

    Attributes:
        job_id: the job row recording the removal (its source ``remove: KEY``); 0 where no
            job was made: with ``missing_ok``, none of the keys named a document.
        collection: the collection the documents were removed from.
        removed: each document removed, in the order the keys were given.
        docs_deleted: how many documents were removed (``len(removed)``).
        chunks_deleted: how many chunks (store points) went with them.
        elapsed_s: seconds the removal took.
        skipped_keys: with ``missing_ok``, the keys (as given) that named no document of the
            collection (removed already, or never there), left out instead of refused.
    """

    job_id: int
    collection: str
    removed: list[RemovedDocument] = field(default_factory=list)
    docs_deleted: int = 0
    chunks_deleted: int = 0
    elapsed_s: float = 0.0
    skipped_keys: list[str] = field(default_factory=list)

    def still_in_source(self) -> list[RemovedDocument]:
        """The removed documents whose file is still there (indexing it again adds them back)."""
        return [d for d in self.removed if d.source_exists]

    def uploads_deleted(self) -> list[RemovedDocument]:
        """The removed documents whose staged upload file was deleted with them
        (``RemovedDocument.source_deleted``)."""
        return [d for d in self.removed if d.source_deleted]

    def upload_files_deleted(self) -> list[str]:
        """The staged upload files deleted, each once: a csv's two records removed deleted one
        file (the UI's toast said "2 uploaded files deleted")."""
        return list(dict.fromkeys(d.source for d in self.uploads_deleted()))


def removal_source(keys: list[str]) -> str:
    """How a removal's job row names what it did, in its ``source`` column (``facet jobs``
    lists it where an index job's folder is): ``remove: KEY``, ``remove: KEY and 3 more``."""
    more = f" and {len(keys) - 1} more" if len(keys) > 1 else ""
    return f"{REMOVAL_PREFIX}{keys[0]}{more}"


def removal_message(removed: list[RemovedDocument]) -> str:
    """A removal job's message: what it removed, the first keys named."""
    chunks = sum(d.chunks for d in removed)
    named = ", ".join(d.key for d in removed[:REMOVED_KEYS_NAMED])
    more = (f" and {len(removed) - REMOVED_KEYS_NAMED} more" if len(removed) > REMOVED_KEYS_NAMED
            else "")
    return (f"removed {plural(len(removed), 'document')} ({plural(chunks, 'chunk')}) on request: "
            f"{named}{more}")


# Linux's limits on a file's name and path (bytes): a longer source is no file's.
NAME_MAX = 255
PATH_MAX = 4096


def check_source_text(source: Path) -> None:
    """Refuse a source whose path (as given, or as its links lead) the job row cannot record:
    a name that is not valid UTF-8, the component to rename named in the words a folder walk
    says of such a file ("its name is not valid UTF-8; rename it"). `facet index $'dir\\xe9'`
    ended in a UnicodeEncodeError traceback from the database driver.

    Raises:
        InvalidRequestError: naming it (``param="source"``).
    """
    def unreadable(path: Path) -> InvalidRequestError:
        return InvalidRequestError(
            f"{display_path(path)}: its name cannot be read in this locale's encoding "
            f"({sys.getfilesystemencoding()}); run Facet under a UTF-8 locale "
            "(LC_ALL=C.UTF-8)", param="source")

    text = str(source)
    if "\x00" in text:  # (POST /jobs: realpath's ValueError was a 500)
        raise InvalidRequestError("the source path holds a NUL character, which no file name "
                                  "holds; give the folder or file to index", param="source")
    if any(0xD800 <= ord(c) <= 0xDC7F or 0xDD00 <= ord(c) <= 0xDFFF for c in text):
        # A surrogate no file name's bytes give (those arrive as U+DC80-U+DCFF): a JSON
        # "\ud800", said as every other field says it, not as the server's locale.
        raise InvalidRequestError("the source path holds an unpaired surrogate (not Unicode "
                                  "text); send it as valid UTF-8", param="source")
    encoded = text.encode("utf-8", "surrogateescape")  # (its bytes, as a UTF-8 system writes them)
    longest = max((len(part) for part in encoded.split(b"/")), default=0)
    if len(encoded) >= PATH_MAX or longest > NAME_MAX:
        # (the walk said "cannot read <the whole name> (File name too long); make it
        # readable", a 422 echoing 300 KB)
        name = f", one name {longest:,}" if longest > NAME_MAX else ""
        raise InvalidRequestError(
            f"the source path is too long ({len(encoded):,} bytes{name}: {display_path(text)[:80]}…): "
            f"no file has such a path (a name takes at most {NAME_MAX} bytes, a path {PATH_MAX:,}); "
            "give the folder or file to index", param="source")
    try:
        paths: tuple[Path, ...] = (source.absolute(), source.resolve())
    except UnicodeEncodeError:  # a name given as text (POST /jobs) the locale cannot write: a 500
        raise unreadable(source) from None
    except RuntimeError:  # a loop of links (Python 3.11's resolve): the walk says so, exit 4
        paths = (source.absolute(),)
    for path in paths:
        bad = first_bad_name(path)
        if bad is not None:
            raise InvalidRequestError(f"{display_path(bad)}: its name is not valid UTF-8; "
                                      "rename it", param="source")
        if not is_text(str(path)):  # valid UTF-8, read in a locale's other encoding (LC_ALL=C)
            raise unreadable(path)


def kept_version_message(message: str, collection: str, key: str) -> str:
    """The error of a document that failed this run and keeps its indexed version (the
    module's policy): that version stays searchable until the file reads again or the document
    is removed."""
    return (f"{message}; its indexed version is kept and stays searchable (`facet delete "
            f"{shell_word(collection)} --document {shell_word(key)}` removes it)")


# How ``indexer.parsing`` ends the error of a record file (jsonl, json, csv) that holds no
# record at all: emptied (on purpose, perhaps), not malformed.
_NO_RECORDS = ("no records to index", "is empty: no header row", "has a header but no rows")


def holds_no_records(entry: DocumentError) -> bool:
    """Whether ``entry`` is the error of a whole record file that holds no record at all."""
    return entry.key == entry.source and entry.message.endswith(_NO_RECORDS)


def kept_records_message(message: str, collection: str, path: str, keys: list[str]) -> str:
    """The error of a record file that holds no record now (``holds_no_records``) whose
    indexed records ``keys`` are kept: that they stay searchable and what removes them (a .txt
    emptied said so of its indexed version; a jsonl emptied said nothing)."""
    n, name = len(keys), shell_word(collection)
    return (f"{message}; its {plural(n, 'indexed record')} "
            f"{'is kept and stays' if n == 1 else 'are kept and stay'} searchable (`facet delete "
            f"{name} -d KEY` for each, e.g. {shell_word(keys[0])}, or deleting the file and "
            f"`facet index {shell_word(path)} -c {name} --sync`, removes "
            f"{'it' if n == 1 else 'them'})")


def failed_documents_message(failed: int, seen: int, indexed: int, deleted: int = 0) -> str | None:
    """A completed job's message when some of its documents failed, or when it found none
    (None otherwise): the job ends ``completed`` either way, and its message is what says that
    it did not all go in."""
    if not seen:
        # A background job of an empty folder kept its empty collection with nothing said.
        if deleted:  # a synced folder emptied on purpose: what happened, not an error
            return (f"the source holds no document of a supported type now: "
                    f"{plural(deleted, 'document')} removed from the collection")
        return "nothing to index: the source holds no document of a supported type"
    if not failed:
        return None
    return f"{failed} of {seen} documents failed, {indexed} indexed: see the job's errors"


# Failed documents a job's end line names before saying how many more.
FAILED_LOGGED = 5


def job_end_line(job_id: int, state: str, collection: str, counts: Sequence[int],
                 failed_keys: Sequence[str], done: str = "") -> tuple[int, str]:
    """The log line of a job's end, and its level (WARNING where documents failed), the same
    from the in-process runner and the workers: the collection, the counts (``counts``: seen,
    indexed, unchanged, failed, deleted), ``done`` (", 12 chunks in 3.1s"), the job's message
    where documents failed, and the first ``FAILED_LOGGED`` of them (``failed_keys``, as
    printable text). A worker's said "job 1 completed" and no more, and neither named a failed
    file: an operator read them with `facet jobs N` (the logs review of the seventh session of
    2026-12-06)."""
    seen, indexed, unchanged, failed, deleted = counts
    line = (f"job {job_id} {state} (collection {collection!r}): {seen} seen, "
            f"{indexed} indexed, {unchanged} unchanged, {failed} failed, {deleted} deleted{done}")
    if not failed:
        return logging.INFO, line
    message = failed_documents_message(failed, seen, indexed, deleted)
    named = ", ".join(printable(k) for k in failed_keys[:FAILED_LOGGED])
    more = failed - min(len(failed_keys), FAILED_LOGGED)
    if named:
        named = f"; failed: {named}" + (f" and {more:,} more" if more > 0 else "")
    return logging.WARNING, f"{line}: {message}{named}"


@dataclass(frozen=True)
class PreparedJob:
    """An index job whose collection and job row exist (state ``queued``), ready to ``run``.

    Only JSON-safe fields, so a job can be handed to another thread or process by value.
    """

    job_id: int
    collection: str
    source: str
    embedder: str
    options: IndexOptions
    # Seconds ``prepare`` spent loading the model for a run in the same call (runner inline): a
    # first index into a new collection loads it there, and its summary left the load out.
    load_s: float = 0.0
    # The embedder (vector name) that ``prepare`` added to the collection for this job, else
    # None: a run that ends before writing any vector of it takes it out again
    # (``_forget_unwritten_embedder``).
    added_embedder: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types (what a Celery task carries)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PreparedJob:
        """The inverse of ``to_dict``."""
        return cls(job_id=int(data["job_id"]), collection=str(data["collection"]),
                   source=str(data["source"]), embedder=str(data["embedder"]),
                   options=IndexOptions(**data.get("options", {})),
                   load_s=float(data.get("load_s", 0.0)),
                   added_embedder=data.get("added_embedder"))


# Jobs of this process that are queued or running (their rows say ``queued``/``running`` and
# name this pid, which is alive: they are not leftovers of a dead run), and one lock per
# collection so that two of them never write the same collection at once.
_ACTIVE_JOBS: set[int] = set()
_COLLECTION_LOCKS: dict[str, threading.Lock] = {}
# The job of this process writing each collection now (holding its lock): the one another job
# of this process waits for (said in the log: the wait was silent, for as long as it writes).
_WRITING: dict[str, int] = {}
# The removal job of this process removing documents of each collection now (holding its lock),
# which a removal or an index job refused meanwhile names (it said "an index job").
_REMOVING: dict[str, int] = {}
_REGISTRY_LOCK = threading.Lock()


# A document's status before a write that says its points may be partly written (a run stopped
# between the store and the metadata, or a write that failed part-way): the next write deletes
# them by payload filter first.
PARTIAL = ("pending", "error")


def note_document_error(session: Session, collection_id: int, key: str, source: str,
                        message: str, row: md.Document | None) -> None:
    """Record that document ``key`` failed to index: a new document gets an ``error`` row, a
    ``pending`` one (its write may be partial) becomes ``error``, and an ``indexed`` one keeps
    what was indexed before, with only the error noted beside it (one indexed with no chunk
    keeps nothing, and becomes ``error``). ``error`` documents count as failed in a
    collection's figures and are indexed again by the next job."""
    if row is None:
        if md.fits_key(key) and md.fits_key(source):
            session.add(md.Document(collection_id=collection_id, key=key, source=source,
                                    status="error", error=message, meta={}))
        return  # (one too long to store is only the job's error: `storable` refused it)
    row.error = message
    if row.status != "indexed" or not row.n_chunks:
        row.status = "error"


def storable(batch: list[Any]) -> list[Any]:
    """``batch`` with every document whose id or source path is longer than a collection
    stores (``md.MAX_KEY_CHARS``) turned into that document's error: PostgreSQL refused the
    whole batch with a traceback (and a worker's chunk failed for ever), SQLite stored it."""
    out = []
    for item in batch:
        names = (("path", item.source),) if item.key == item.source else \
            (("id", item.key), ("path", item.source))  # a file's key is its path
        too_long = next(((what, len(value)) for what, value in names
                         if not md.fits_key(value)), None)
        if too_long is None or isinstance(item, DocumentError):
            out.append(item)
            continue
        what, n = too_long
        fix = "give the record a shorter id" if what == "id" else "move it to a shorter path"
        name = item.key if len(item.key) <= 80 else f"{item.key[:60]}...{item.key[-17:]}"
        out.append(DocumentError(item.key, item.source, f"{name}: its {what} is {n:,} characters, "
                                 f"over the {md.MAX_KEY_CHARS:,} a collection stores; {fix}"))
    return out


def _note_replaced_source(doc: ParsedDocument, row: md.Document | None,
                          scope: str | None = None) -> ParsedDocument:
    """A record whose id is already a document of another file replaces it (ids are unique
    in a collection: a file renamed or a record moved must go on being one document), with a
    warning: indexing jan.csv and then feb.csv, both with ids 1 and 2, replaced January's
    records without a word. A copy carries the warning (parsed documents may be cached).

    ``scope``: what the run indexes (the job's source). A file under it is read by this run
    too: if it still holds the id, the run says so as a duplicate of its own; if not, the
    record moved (an edited a.csv gave its id 2 to a new b.csv), and "a.csv, which still
    exists" warned of a conflict there was none of."""
    if row is None or row.source == doc.source or row.key == doc.key == doc.source:
        return doc
    if row.status != "indexed" or _source_state(row.source) is not True:
        return doc
    if scope is not None and (row.source == scope or
                              row.source.startswith(scope.rstrip(os.sep) + os.sep)):
        return doc
    note = (f"document id {doc.key!r} was a record of {row.source}, which still exists; this "
            f"record of {doc.source} replaced it (ids are unique in a collection: give the "
            "records their own ids, or index the files into separate collections)")
    return dataclasses.replace(doc, warnings=[*doc.warnings, note])


def companion_key(name: str) -> str:
    """How a run's warning about another embedder's missing vectors is keyed."""
    return f"embedder {name}"


def check_same_embedder(coll: md.Collection, embedder: Embedder, identity: str,
                        worker: str | None = None, spec: str | None = None) -> None:
    """Refuse to add vectors to ``coll`` from a different version of an embedder that wrote it.

    Same name, other vectors: a retrained checkpoint under its registered name, or a served
    option changed (``max_length``). Unchanged documents keep their vectors on a re-index, so
    the collection would mix two models' vectors and rank them against each other.

    Args:
        identity: ``embedder.identity``, computed once by the caller (a trained checkpoint's
            digests its weights).
        worker: the worker running a job's plan or chunk (``host:pid``), whose copy of the
            checkpoint is then what differs from the submitting process's, most often: the
            message says so (it told the user to delete the collection or index into a new one,
            which failed the same way).
        spec: what was asked for (``--embedder``): where the collection records another spec
            for this name (a user's own checkpoint of a method, named after it), the message
            names that one to index with; nothing was "changed since" then.

    Raises:
        ConflictError: says what changed and how to go on; nothing has been written.
    """
    for row in coll.embedders:
        if row.name != embedder.name:
            continue
        changes = identity_changes(row.identity, identity)
        if changes and worker is not None:
            raise ConflictError(
                f"worker {worker} loads {row.spec!r} as a different version of {embedder.name!r} "
                f"than the one collection {coll.name!r} records ({', '.join(changes)} differ), "
                "recorded by the process that submitted the job or indexed the collection: give "
                "every worker the same checkpoint files (the same path, or FACET_CHECKPOINT_DIR "
                "holding the same copy) as that process, restart the workers and submit again")
        if changes and spec is not None and row.source and _other_spec(spec, row.source):
            # A checkpoint's vectors are named after its config's "name" (its method's name,
            # as `facet train` writes it): another name makes it an embedder of its own here.
            directory = expand_user(spec.split("[", 1)[0])
            config = "facet_config.json"  # (embedders.base.CONFIG_FILE)
            rename = (f"; or, to keep both in this collection as two embedders, give the new "
                      f"checkpoint another name: set \"name\" in "
                      f"{directory / config} (say \"{embedder.name}-2\"), then index with "
                      f"--embedder {shell_word(spec)} again (searches pick one with --embedder)"
                      if (directory / config).is_file() else "")
            raise ConflictError(
                f"collection {coll.name!r} holds {embedder.name!r} vectors written by "
                f"{row.source!r}, and {spec!r} loads another model of that name ({', '.join(changes)} "
                f"differ): to add to them, index with --embedder {shell_word(row.source)} (the "
                f"API's embedder field); else index into a new collection{rename}")
        if not changes and row.dim and int(embedder.dim) != row.dim:
            # A plugin whose width changed with its identity the same: the store's raw "Vector
            # dimension error: expected dim: 64, got 96" named neither (the plugin exploration).
            raise ConflictError(
                f"collection {coll.name!r} holds {row.dim}-d {embedder.name!r} vectors, and "
                f"{embedder.name!r} now gives {embedder.dim}-d ones: its width changed while its "
                "identity did not (a plugin reading its width from a setting?); index with the "
                "embedder as it was, or into a new collection")
        if changes:
            # The same weights read with other served options (one added since it was indexed,
            # InstEmb's ``text_quotes``): the spec that reads as the collection's vectors were made.
            same = with_recorded_options(embedder, row.source or spec or embedder.name, row.identity,
                                         identity, changes) if (row.source or spec) else None
            raise ConflictError(
                f"collection {coll.name!r} holds {embedder.name!r} vectors from a different version of "
                f"that embedder ({', '.join(changes)} changed since it was indexed): new vectors would "
                f"not be comparable with them. "
                + (f"Index with --embedder {shell_word(same)} (the API's embedder field), which reads "
                   f"as they were made; or index into a new collection" if same else
                   "Index into a new collection")
                + f", or delete this one (facet delete {coll.name}) and index its sources again")


def _sets_added_options(recorded: str, given: str, identity: str) -> bool:
    """Whether spec ``given`` is the ``recorded`` one with options set that the collection's
    recorded ``identity`` does not hold at all (added to the embedder since it was indexed)."""
    from embedders.errors import InvalidInputError
    from embedders.registry import split_options

    try:
        base, options = split_options(given)
        recorded_base, recorded_options = split_options(recorded)
    except InvalidInputError:
        return False
    extra = sorted(k for k, v in options.items() if recorded_options.get(k) != v)
    return base == recorded_base and bool(extra) and added_options(identity, extra) == extra


def _other_spec(spec: str, recorded: str) -> bool:
    """Whether ``spec`` names something else than the ``recorded`` spec of a collection's
    embedder (a registered name against a checkpoint directory, or two directories)."""
    from embedders.registry import portable_spec  # (the model is loaded: torch is too)

    try:
        return portable_spec(spec) != recorded
    except Exception:  # a spec that no longer resolves: not what to blame here
        return False


class _Deferred:
    """The embedder of a run over a collection that already records it, not loaded until the
    run has chunks to encode: re-indexing an unchanged folder loaded the model (seconds for
    MiniLM, much longer for a 0.5B LLM embedder) only to find nothing to do.

    Its name and width are the collection's record. The identity check (``check_same_embedder``)
    needs the model (a trained checkpoint's identity digests its loaded weights), so it is made
    when the model loads (``load``), before anything is written: a run with nothing to write
    does not notice a checkpoint retrained since, and writes nothing that could mix with it.
    Anything else asked of it loads the model first.
    """

    def __init__(self, cache: Any, spec: str, name: str, dim: int, collection: str = "") -> None:
        self.spec, self.name, self._dim, self.collection = spec, name, dim, collection
        self._cache = cache
        self._model: Embedder | None = None
        self.check: Callable[[Embedder], None] | None = None  # run on the model when it loads
        # Seconds the load took: left out of the stages' timings and the run's elapsed time, as
        # a load before the run was (a one-document change read as 0.1 chunks/s, its 14 s
        # "encoding" mostly the load).
        self.load_s = 0.0

    @property
    def dim(self) -> int:
        return self._dim

    def load(self) -> Embedder:
        """The model (loaded now, the first time), checked against the collection."""
        if self._model is None:
            try:
                # Timed by the cache: a twin's lookup or another thread's load is none of this
                # run's (the verification round of the fourth session of 2026-12-07).
                model, load_s = self._cache.get_timed(self.spec)
            except UnknownModelError as e:  # (a checkpoint moved or deleted since)
                # Said as what the collection records, and how to point it elsewhere: a bare
                # "unknown embedder '/old/path'" named neither.
                raise UnknownModelError(
                    f"the {self.name!r} vectors of collection {self.collection!r} were written by "
                    f"{self.spec!r}, which cannot be loaded now ({e}); put it back, or index with "
                    "--embedder (the API's `embedder`) naming the same weights where they are now: "
                    "the collection then records that place", param=e.param) from e
            if model.name != self.name:  # (a checkpoint's config edited since)
                raise ConflictError(f"{self.spec!r} now loads embedder {model.name!r}, not the "
                                    f"{self.name!r} this collection records it as; index it into "
                                    "a new collection")
            if self.check is not None:
                self.check(model)
            self._model = model
            self.load_s = load_s
        return self._model

    @property
    def identity(self) -> str:
        return str(self._cache.identity(self.load()))

    def encode(self, texts: Any, **kwargs: Any) -> np.ndarray:
        return self.load().encode(texts, **kwargs)

    def __getattr__(self, attr: str) -> Any:  # the tokenizer, max_length...
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(self.load(), attr)


def loaded(embedder: Embedder) -> Embedder:
    """``embedder``'s model, loaded (and checked) now if it was deferred (``_Deferred``)."""
    return embedder.load() if isinstance(embedder, _Deferred) else embedder


def _when_called(make: Callable[[], TokenSpans]) -> TokenSpans:
    """A tokenizer made by ``make`` when it first cuts a text (a deferred model's)."""
    made: list[TokenSpans] = []

    def spans(text: str) -> Any:
        if not made:
            made.append(make())
        return made[0](text)
    return spans


def writing_job(collection: str) -> int | None:
    """The job of this process writing ``collection`` now (``IndexService.index``, a
    background job), if any."""
    with _REGISTRY_LOCK:
        return _WRITING.get(collection)


def _collection_lock(name: str) -> threading.Lock:
    with _REGISTRY_LOCK:
        return _COLLECTION_LOCKS.setdefault(name, threading.Lock())


class _Refused(Exception):
    """The embedder refused a text of a streamed document's chunk batch (its message)."""


class _Unreadable(Exception):
    """A streamed document's second read (its chunks) failed: the whole message."""


def _read_again(doc: StreamedDocument, digest: Any) -> Iterator[str]:
    """``doc``'s pieces for its chunks (fed to ``digest``), a failed read as ``_Unreadable``:
    a file deleted, or given bytes its codec refuses, after its hash pass was a traceback that
    failed the whole job (the documents after it not indexed, no sync), where the same at the
    first read is one document's error."""
    try:
        yield from doc.pieces(digest=digest)
    except (OSError, UnicodeDecodeError) as e:
        raise _Unreadable(f"cannot read {doc.source}: {e}") from e


@dataclass
class _Item:
    doc: ParsedDocument
    hash: str
    row: md.Document | None
    mode: str  # "write" (new/changed content) or "vectors" (only this embedder's vectors)
    chunks: list[md.Chunk] = field(default_factory=list)
    # An indexed document of the same content whose vectors this one copies (``_donors``), and
    # those vectors, one {embedder: vector} per chunk, once read; ``mover``: this document's old
    # place (its file gone), removed once this one is written, whether its vectors were copied
    # or (another embedder joining in this run) encoded again.
    donor: md.Document | None = None
    reused: list[dict[str, Any]] | None = None
    mover: md.Document | None = None
    # Whether the chunks are cut from the text (not the donor's copied): a donor of other
    # content, its own row whose metadata or title changed, donates only if the cut chunks
    # are its own, number for number and text for text (``_reused_vectors``).
    recut: bool = True
    # Its chunks as cut from the text, before anything is marked (``recut`` only).
    pieces: list[Any] | None = None


def keyed_by_path(key: str, source: str) -> bool:
    """Whether a document's identity is its place: a whole file (its key is its path), or a
    record without an id of its own (``path#L3``, ``path#row2``: moved with its file, it is
    the same record; one with its own id is a record of that id wherever it comes from)."""
    return key == source or key.startswith(source + "#")


def donor_chunks(donor: md.Document) -> list[Chunk]:
    """``donor``'s chunks, in order, as the chunker gives them."""
    return [Chunk(c.number, c.text, c.start, c.end, c.n_tokens)
            for c in sorted(donor.chunks, key=lambda c: c.number)]


def estimate_documents(files: list[Path]) -> int:
    """Documents a source will yield (records for jsonl/csv), for the progress bar's ETA."""
    total = 0
    for path in files:
        suffix = path.suffix.lower()
        if suffix in (".jsonl", ".csv"):
            try:
                with path.open("rb") as fh:
                    lines = sum(1 for line in fh if line.strip())
            except OSError:
                lines = 1
            total += max(1, lines - (1 if suffix == ".csv" else 0))
        else:
            total += 1
    return total


def _one_truncation_line() -> contextlib.AbstractContextManager[None]:
    """The run's texts cut by its embedders said in one line at its end, not one per batch
    (``embedders.base.truncation_tally``; its job's warning says it too, ``cut_message``), where
    the run encodes in its own thread (the CLI, a worker). Only once a model is loaded: torch
    is not imported for it."""
    base = sys.modules.get("embedders.base")
    tally = getattr(base, "truncation_tally", None)
    return tally() if tally is not None else contextlib.nullcontext()


@contextlib.contextmanager
def _store_errors() -> Iterator[None]:
    """The store's refusals as domain errors: another process holding the collection is a
    conflict, a server out of reach unavailable, a collection whose files cannot be read a data
    error (it was a bad request: exit 2), anything else a bad request."""
    try:
        yield
    except StoreBusyError as e:
        raise ConflictError(str(e)) from e
    except StoreUnavailableError as e:  # (a server out of reach with its Retry-After)
        raise as_domain_error(e) or UnavailableError(str(e)) from e
    except StoreDamagedError as e:
        raise DataError(str(e)) from e
    except StoreError as e:
        raise InvalidRequestError(str(e)) from e


class _ServerStopping(Exception):
    """Raised between batches when the process that runs the job is shutting down (a `facet
    serve` stopped by SIGTERM): the job ends ``interrupted``, ready to resume."""


# The counts a run keeps on its report and its job row alike (``IndexService._sync_counters``).
_COUNTERS = ("docs_seen", "docs_indexed", "docs_skipped", "docs_failed", "docs_deleted",
             "chunks_written")


class _Cancelled(Exception):
    """Raised at a batch boundary when someone asked the job to stop (``cancel``, its row's
    ``cancel_requested``): the job ends ``cancelled``, what went in kept and searchable, and
    the next job of the same source resumes it. ``skipped``: where every document of the source
    had gone in (the check after the last batch), the steps of the job's end it stopped before
    (``cancelled_message``); None where documents were left to index."""

    def __init__(self, message: str, skipped: list[str] | None = None) -> None:
        super().__init__(message)
        self.skipped = skipped


# What the next run does of a large file (read in pieces) a job stopped within.
READ_AGAIN = "is read again from its start (a large file is committed whole)"

# How a cancelled job's message begins where every document had gone in (``cancelled_message``).
CANCELLED_ALL_IN = "cancelled after every document had gone in"


def cancelled_message(indexed: int, skipped: list[str] | None = None, chunks: int = 0,
                      within: str | None = None) -> str:
    """A running job's message once its cancellation stopped it. ``skipped``: the cancel came
    after every document of the source had gone in (during the last batch, or a worker job's
    last chunk), and the job stopped before these steps of its end ("optimizing the store"):
    nothing is left to index, and the next run of the source only does them. Until 2026-11-30
    (seventh session) that job said "index the same source again to resume" too. ``chunks``:
    the chunks the job wrote; where no document was indexed, those of a large file it stopped
    within (``within``, where known: written in pieces, searchable, the file not marked indexed
    and read again from its start by the next run): it said "nothing was written" of them (the
    API exploration of the third session of 2026-12-07), as an interrupted job says it."""
    if skipped is not None:
        steps = " and ".join(skipped) or "its end"
        return (f"{CANCELLED_ALL_IN} ({indexed} indexed), before {steps}; index the same "
                "source again to finish: nothing will be re-embedded")
    again = f"; {within} was stopped part-way and {READ_AGAIN}" if within else ""
    if not indexed and chunks:
        return (f"cancelled part-way through {within or 'a large file'}, before any document was "
                f"indexed whole: its first {plural(chunks, 'chunk')} were written and are "
                f"searchable; index the same source again to finish: it {READ_AGAIN}")
    if not indexed:  # (nothing to resume: "cancelled after 0 documents indexed; ... resume")
        return "cancelled before any document was indexed: nothing was written"
    return (f"cancelled after {plural(indexed, 'document')} indexed; index the same source again to "
            f"resume: what was indexed is kept{again}")


def _count_failed(job: md.IndexJob, report: IndexReport) -> None:
    """The documents failed since the job row's counts were last written (an empty or binary
    file of the batch being written), counted on it, as seen too: their errors go out with the
    commit this precedes (step 1's: every error of a batch is recorded before it, so the
    encoding step's commits that follow add none), and the UI's bar said "0 failed"
    for minutes above an errors table listing two, or for good after a cancel at the batch's
    first encoding step (the UI exploration and the verification round of the fourth session
    of 2026-12-07). The batch's end writes all the counts (``_sync_counters``)."""
    job.docs_seen += max(0, report.docs_failed - job.docs_failed)
    job.docs_failed = max(job.docs_failed, report.docs_failed)


# How long after it was queued a `--background` job whose process is alive counts as starting,
# a writer about to take the lease (``IndexService._refuse_other_writer``).
BACKGROUND_START_S = 60.0

# The steps of a job's end a cancel after its last batch stops before (``cancelled_message``).
OPTIMIZE_STEP = "optimizing the store"


def removal_step(gone: int) -> str:
    """The sync's step, removing ``gone`` documents no longer in the source."""
    return f"removing {plural(gone, 'document')} no longer in the source"


QUEUED_CANCELLED = "cancelled before it started"

# How ``as_domain_error`` ends a database out of reach (one statement refused): not said of a job
# whose batches so far are kept (``job_failure_message``).
NOTHING_CHANGED = "; nothing was changed: retry when it is back (FACET_DATABASE_URL)"

# A completed job's message where the cancel came after its last batch (it was answered 200,
# ``cancel_requested``, and the job then read completed with no word of it).
CANCEL_TOO_LATE = ("the cancel came after every document had gone in (while the store was "
                   "optimized), so the job completed")


def lost_lease(job_id: int, collection: str, ttl_s: float) -> ConflictError:
    """A job's stop for its lease lost: another writer took the collection over after this
    process went without a heartbeat for the lease's time (stalled: SIGSTOP, a frozen VM)."""
    return ConflictError(f"job {job_id} lost the lease of {collection!r} (no heartbeat for "
                         f"{ttl_s:.0f}s: was this process stalled?) and another writer took "
                         "over; it stopped before writing more")


def _database_gone(error: BaseException | None, *, chain: bool = False) -> SQLAlchemyError | None:
    """``error`` where it is the metadata database server out of reach (PostgreSQL stopped or
    restarted: ``as_domain_error``'s ``UnavailableError``), else None; SQLite's errors are not.
    ``chain``: or the first such error it was raised from or while handling (a
    ``PendingRollbackError`` after one)."""
    from app.errors import database_server_gone

    for _ in range(8 if chain else 1):
        if isinstance(error, SQLAlchemyError) and database_server_gone(error):
            return error
        if error is None:
            break
        error = error.__cause__ or error.__context__
    return None


def source_unreachable(source: Path, error: OSError) -> UnavailableError:
    """The error for a source that cannot be reached any more (its network share or drive gone
    under its mount, ``Transport endpoint is not connected``)."""
    return UnavailableError(f"the source {display_path(source)} cannot be reached ({error.strerror or error}): "
                            "is its network share or drive still mounted? Mount it again")


def check_source_reachable(source: Path) -> None:
    """Raise where ``source``'s file system has gone away under its mount: a look that reaches
    the file system's driver (a folder listed, a file opened), as ``is_dir`` does not where the
    kernel still holds the folder's attributes from before (FUSE keeps them a while).

    Raises:
        UnavailableError: the error is one of a disk gone (``DISK_GONE_ERRNOS``); any other
            (the source removed, no permission) is left to the run's own words.
    """
    try:
        if source.is_dir():
            with os.scandir(source) as entries:
                next(entries, None)
        else:
            with open(source, "rb"):
                pass
    except OSError as e:
        if e.errno in DISK_GONE_ERRNOS:
            raise source_unreachable(source, e) from e


def _empty_folder(source: Path) -> bool:
    """Whether ``source`` is a folder with nothing in it at all (hidden entries included)."""
    try:
        return source.is_dir() and next(source.iterdir(), None) is None
    except OSError:
        return False


def case_twin(session: Session, name: str, *, made_before: int | None = None) -> str | None:
    """The name of a collection that differs from ``name`` only in case, or None; with
    ``made_before``, only one whose row was made before that id."""
    twins = sorted((c.id, c.name) for c in md.list_collections(session)
                   if c.name != name and c.name.lower() == name.lower()
                   and (made_before is None or c.id < made_before))
    return twins[0][1] if twins else None


def case_twin_error(twin: str, name: str) -> ConflictError:
    """The refusal of ``name`` where collection ``twin`` differs from it only in case."""
    return ConflictError(
        f"collection {twin!r} exists, and {name!r} differs from it only in case: their folders "
        "would be one on a disk that ignores case (macOS, Windows, exFAT or FAT drives); index "
        f"into {twin!r}, or pick another name", param="collection")


def refuse_case_twin(session: Session, name: str) -> None:
    """Refuse to create ``name`` where a collection of the same name but for case exists: its
    store folder, lock file and upload folder are named after it, and on a disk that ignores
    case (macOS's and Windows' defaults, exFAT and FAT drives) ``Notes`` and ``notes`` were
    one folder: the second collection's vectors went into the first's, whose own were then
    called strays that "`facet delete Notes` removes", and deleting them emptied both.

    Raises:
        ConflictError: naming the existing collection.
    """
    twin = case_twin(session, name)
    if twin is not None:
        raise case_twin_error(twin, name)


def _back_out_of_a_case_race(session: Session, coll: md.Collection) -> None:
    """After ``coll`` was made: where another process made a case twin of it at the same moment
    (both checked, neither saw the other), the later of the two rows goes, before anything of
    it is written (the verification round: 4 in 8 concurrent pairs both made on ext4).

    Raises:
        ConflictError: this one was the later.
    """
    twin = case_twin(session, coll.name, made_before=coll.id)
    if twin is not None:
        name = coll.name
        session.delete(coll)
        session.commit()
        raise case_twin_error(twin, name)


class Terminated(SystemExit):
    """SIGTERM stopped an index job between batches (``docker stop``, systemd, ``kill``): it
    ends ``interrupted`` with the resume hint, as after Ctrl-C. A ``SystemExit`` whose code is
    143 (128 + SIGTERM, the conventional status of a process that SIGTERM ended), so a
    process that does not catch it exits with that status, without a traceback."""

    EXIT_CODE = 143

    def __init__(self) -> None:
        super().__init__(self.EXIT_CODE)


class _DeferredInterrupt:
    """Ctrl-C (or SIGTERM) while a job writes stops it between batches, not inside a database
    commit.

    A KeyboardInterrupt raised in the middle of SQLAlchemy's commit or pool code can leave a
    connection holding SQLite's write lock, so that recording the job as interrupted then
    failed with "database is locked" (seen under load). The first Ctrl-C or SIGTERM only sets a
    flag, which the writer checks before each batch (``check``): it raises KeyboardInterrupt
    after Ctrl-C, ``Terminated`` after SIGTERM; a second signal stops at once. Installed only in
    the main thread, and only over Python's default handlers (each signal on its own), so a
    server's (uvicorn's, Celery's) own handling is never replaced; there the jobs run on other
    threads anyway. Before this, SIGTERM killed a `facet index` (or the process behind
    ``--background``) at once, and its job read like a crash.
    """

    _DEFAULTS: ClassVar[dict[int, Any]] = {signal.SIGINT: signal.default_int_handler,
                                            signal.SIGTERM: signal.SIG_DFL}
    _NAMES: ClassVar[dict[int, str]] = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}
    # Until a first signal (``requested``), no Ctrl-C raises KeyboardInterrupt: one raised
    # meanwhile is a plugin's own, its error (``embedders.registry._ctrl_c_ignored``).
    defers_ctrl_c = True

    def __init__(self, stopping: threading.Event | None = None) -> None:
        self.requested = False
        self.signum: int | None = None  # the signal that asked to stop
        self.stopping = stopping
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _DeferredInterrupt:
        if threading.current_thread() is threading.main_thread():
            for signum, default in self._DEFAULTS.items():
                if signal.getsignal(signum) is default:
                    self._previous[signum] = signal.signal(signum, self._handle)
        return self

    @staticmethod
    def _stop(signum: int) -> BaseException:
        return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.requested:
            raise self._stop(signum)
        self.requested, self.signum = True, signum
        name = self._NAMES.get(signum, f"signal {signum}")
        # (Between the encoder's pieces of a batch too, since the third session of 2026-12-01:
        # the line said "after the batch being written" while a large document's encoding
        # stopped within about a second.)
        logger.warning("%s: stopping at the next safe point, between the encoder's pieces or "
                       "once the batch being written is in (Ctrl-C or SIGTERM again to stop at "
                       "once)", name)

    def check(self) -> None:
        """Raise the deferred KeyboardInterrupt or ``Terminated`` (or ``_ServerStopping``), at
        a point where no write is half done."""
        if self.requested:
            raise self._stop(self.signum or signal.SIGINT)
        if self.stopping is not None and self.stopping.is_set():
            raise _ServerStopping("the server is stopping")

    def __exit__(self, *_exc: object) -> None:
        previous, self._previous = self._previous, {}
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _source_state(path: str, *, follow: bool = True) -> bool | None:
    """Whether a document's source file is there (True), can be seen to be gone (False), or
    cannot be looked at (None: a folder without permission, a dead mount; it may well be
    there). A key is the UTF-8 text of the file's name, so it is looked up as those bytes,
    whatever the locale's encoding: ``Path(key).exists()`` was False for "café.txt" under a
    C locale (a copy of it then "moved" it, removing its entry) and raised PermissionError
    below a folder without permission (every later run failed on a traceback). ``follow``:
    through a link to its target (else the link itself)."""
    try:
        name = path.encode("utf-8")
    except UnicodeError:
        try:
            name = os.fsencode(path)  # (a name kept in its own bytes: surrogate escapes)
        except UnicodeError:
            return False  # (no file has such a name)
    try:
        os.stat(name, follow_symlinks=follow)
    except (FileNotFoundError, NotADirectoryError, ValueError):  # (ValueError: a NUL in it)
        return False
    except OSError:
        return None
    return True


def _exists(path: str) -> bool:
    """Whether a document's source file can be seen to be there (False for a name the OS
    refuses, or one that cannot be looked at)."""
    return _source_state(path) is True


def path_keys(key: str, base: Path | None) -> list[str]:
    """The absolute paths ``key`` may name read from ``base`` (a file's document key), the most
    literal first: as written (``..`` folded, no link followed: a walked folder keys a symlink by
    its own path), its folder's links resolved, then every link resolved; none without ``base``.
    (Resolving first made ``-d lnk/alias.txt``, a link to another indexed file, remove that
    other document, and delete its staged upload.)"""
    if base is None:
        return []
    try:
        path = expand_user(key)
        whole = path if path.is_absolute() else base / path
        found = [display_path(Path(os.path.normpath(whole))),
                 display_path(whole.parent.resolve() / whole.name), display_path(whole.resolve())]
    except (OSError, ValueError, RuntimeError):
        return []
    return list(dict.fromkeys(found))


def _unwalked(source: Path, files: list[Path], rows: list[md.Document]) -> list[md.Document]:
    """The documents of ``rows`` whose files are still there though a walk of ``source`` never
    reads them (hidden files and folders: ``_walk_skips``): a sync keeps them
    (``IndexingService._keep_unwalked``)."""
    read = {display_path(f) for f in files}
    root = display_path(source).rstrip(os.sep) + os.sep
    return [row for row in rows if row.status != "error" and row.source not in read
            and row.source.startswith(root) and _walk_skips(row.source[len(root):])
            and _source_state(row.source) is True]


def _walk_skips(relative: str) -> bool:
    """Whether a folder's walk leaves out the path ``relative`` to it: a hidden file, or one
    under a hidden or system folder (``discover_files``)."""
    *folders, name = relative.split(os.sep)
    return name.startswith(".") or any(
        part.startswith(".") or part.lower() in SYSTEM_FOLDERS for part in folders)


def _documents_from(session: Session, collection_id: int, source: Path) -> int:
    """Documents of the collection whose source is ``source`` or under it (as a folder)."""
    path = display_path(source)
    return len(md.document_keys_under(session, collection_id, [path], path.rstrip(os.sep) + os.sep))


class IndexService:
    """Bulk indexing into a collection; see the module docstring for the write protocol."""

    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx
        self.store = ctx.store
        self.sessions = ctx.sessions
        self.settings = ctx.settings
        # Jobs this service ran (took the lease of): a failure of theirs is no refusal, and
        # their rows are kept (``_forget_refused``).
        self._started: set[int] = set()  # (until ``index`` or ``run`` returns)

    # ------------------------------------------------------------------ entry

    def index(self, source: Path | str, collection: str, options: IndexOptions | None = None,
              progress: Callable[[Progress], None] | None = None) -> IndexReport:
        """Index ``source`` into ``collection`` (created on first use), in this thread.

        A job of this process writing the collection (``submit_index``'s background job, an
        earlier call of another thread or of an earlier ``Facet`` not closed) is waited for:
        this run starts when it ends, and the log says so once (INFO, "waiting for job N (this
        process) to finish writing ..."). Another process's writer is refused instead
        (``ConflictError``). Interrupted (Ctrl-C) before it starts, the job leaves nothing, as a
        refused one: no row, no collection it created.

        Raises:
            NotFoundError: the source path does not exist.
            InvalidRequestError: bad collection name, chunk settings or embedder mismatch; a
                source or an option of the wrong type (``check_options``); a ``progress``
                that is not callable.
            ConflictError: another live process is indexing into the collection.
            DataError: a single file of an unsupported type.
        """
        check_progress(progress)
        prepared: PreparedJob | None = None
        created = False
        try:
            # (In the try: a Ctrl-C as the prepared job came back left its row `queued`, and
            # the CLI said "job 1 queued: ".)
            prepared, created = self._prepare(source, collection, options)
            return self._run_prepared(prepared, progress)
        except BaseException:
            # Said to the caller, who holds no job id: a refusal before the job started (the
            # store busy, the disk too full) left a failed job "queued T, never started" in
            # `facet jobs`, and an empty collection where this call had created it. So did a
            # Ctrl-C before it started (waiting behind another job of this process, reading a
            # large folder): its row stayed `queued` for the life of the process.
            if prepared is not None:
                self._forget_refused(prepared.job_id, created)
            raise
        finally:
            if prepared is not None:
                self._started.discard(prepared.job_id)

    def _default_spec(self, collection: str) -> str:
        """The embedder a job that names none indexes ``collection`` with: the default
        (``FACET_DEFAULT_EMBEDDER``) where the collection is new or has its vectors, else the
        collection's first embedder, as recorded. `facet index DIR -c NAME` run again on a
        causal2vec collection added minilm to it, re-embedding every document, and searches
        that named no embedder then used minilm."""
        default = self.settings.default_embedder
        with self.sessions() as session:
            coll = md.get_collection(session, collection)
            recorded = [] if coll is None else [(e.name, e.spec) for e in coll.embedders]
        if not recorded or named_default(default, recorded) is not None:
            return default
        name, spec = recorded[0]
        return spec or name

    def prepare(self, source: Path | str, collection: str,
                options: IndexOptions | None = None, runner: str = "inline") -> PreparedJob:
        """Validate a request, create the collection if needed and record a ``queued`` job.

        Everything that can be wrong with the request is found here, before any work is
        queued, so a background submission answers with an error or a job id at once. The
        store is not written here: the collection's vectors are created by ``run``, under the
        collection's single-writer lease.

        Args:
            runner: who will run it (``inline``, ``thread``, ``process``, ``celery``); recorded
                on the job so that its state can be judged truthfully later.

        Raises:
            As ``index``.
        """
        return self._prepare(source, collection, options, runner)[0]

    def _prepare(self, source: Path | str, collection: str, options: IndexOptions | None = None,
                 runner: str = "inline") -> tuple[PreparedJob, bool]:
        """``prepare``, and whether it created the collection."""
        options = options or IndexOptions()
        if not isinstance(source, str | os.PathLike):  # 5 failed in pathlib with a TypeError
            raise InvalidRequestError(f"the source must be a str or a path (pathlib.Path), got "
                                      f"{type(source).__name__} {source!r:.60}", param="source")
        check_options(options)
        if not str(source).strip():  # Path("") is ".": it indexed the process's folder
            raise InvalidRequestError("the source is empty; give the folder or file to index",
                                      param="source")
        if options.text_column is not None and "\x00" in options.text_column:
            # (PostgreSQL cannot store one: the job row's insert was a 500 over HTTP.)
            raise InvalidRequestError("the text column's name holds a NUL character",
                                      param="text_column")
        source = expand_user(source)
        check_collection_text(collection)
        check_source_text(source)
        if is_stream(source):
            # `facet index <(...)` said "/proc/N/fd/pipe:[M] does not exist ... (it was there when
            # the job was queued)"; /dev/zero was "skipped: not a regular file", exit 0.
            raise InvalidRequestError(
                f"{display_path(source)} is a pipe or a device, not a file or folder: index reads "
                "files and folders (it reads them again to find changes); save what it gives to a "
                "file first", param="source")
        try:
            validate_name(collection)
            discover(source, self._own_folders())
        except SourceNotFoundError as e:
            # A file (or folder) indexed before and deleted since: an explicit sync removes
            # its documents (``_run_job``); without one the refusal says so. There was no way
            # to take a deleted file's documents out of a collection but syncing its folder.
            gone = self.documents_from(collection, source.resolve())
            if not gone:
                raise NotFoundError(str(e), param="source") from e
            if options.sync is not True:
                raise NotFoundError(
                    f"{e}; collection {collection!r} has {plural(gone, 'document')} from "
                    f"{source}: index it with --sync (sync: true over the API) to remove "
                    f"{'it' if gone == 1 else 'them'}", param="source") from e
        except UnsupportedSourceError as e:
            raise DataError(str(e), param="source") from e
        except StoreError as e:  # validate_name's: discover raises none
            raise InvalidRequestError(str(e), param="collection") from e
        with _store_errors():
            # A Qdrant server out of reach is said in REACH_TIMEOUT_S, before the model loads
            # (10 s and more) and the first request waits the client's 30 s.
            self.store.check_reachable()
        spec = options.embedder or self._default_spec(collection)
        loaded, t0 = self.ctx.embedders.peek(spec) is not None, time.perf_counter()
        embedder = self._embedder_for(collection, spec)
        load_s = 0.0 if loaded or isinstance(embedder, _Deferred) or runner != "inline" \
            else time.perf_counter() - t0
        # A job of this process whose end the database did not take (it went out of reach
        # under the run) holds its collection's lease until it is written: a new job into the
        # collection was refused as "still indexing" for a minute.
        record_unrecorded_ends(self.sessions)
        with self.sessions() as session:
            coll, created = self._collection_for(session, collection, embedder, options,
                                                 spec)
            coll_id = coll.id
            added = False
            try:
                added = self._check_collection(session, coll, embedder, options, spec)
                if not created:
                    with _store_errors():
                        if not self.store.collection_exists(collection):
                            self._refuse_wrong_folder(session, coll)
                self._refuse_other_writer(session, coll, runner)
                if runner in ("thread", "process", "celery"):
                    # Queued for later, the run met another process's open shard and failed
                    # seconds after a 202 (exit 0); refused now, as a foreground run is. Not
                    # where this process holds it (a server running its own queue, or sending
                    # its workers a job: it lets the collection go once sent): the folder lock
                    # is per process. A worker's job met a `facet serve` holding it, retried as
                    # an outage with nothing said on the job, and failed minutes later.
                    with _store_errors():
                        if self.store.collection_exists(collection):
                            try:
                                self.store.check_free(collection)
                            except StoreBusyError as e:
                                self._refuse_busy_store(session, coll, runner, e)
                    # A disk too full is refused now too: the job was accepted (a 202, "queued")
                    # and failed the same second, its new collection left empty.
                    self.check_room(started=False)
                    if runner == "thread" and not created:
                        # This process runs the job (a server's queue) and keeps the shard open
                        # as the job will: opened now, a store whose files cannot be read is a
                        # refusal (422) with no job, not a 202 and a job failed a second later
                        # (the API exploration of the third session of 2026-12-07). The last
                        # check: a refusal after it left the collection open with no job to let
                        # it go.
                        with _store_errors():
                            if self.store.collection_exists(collection):
                                self.store.count(collection)
                fields: dict[str, Any] = {
                    "collection": collection, "source": str(source.resolve()), "embedder": spec,
                    "options": options, "load_s": load_s,
                    "added_embedder": embedder.name if added else None}
                # What the workers' sweeper sends again if the broker loses the planner task.
                plan = (json.dumps({k: v for k, v in PreparedJob(0, **fields).to_dict().items()
                                    if k != "job_id"}) if runner == "celery" else None)
                job = self._start_job(session, coll, fields["source"], embedder.name, runner,
                                      options.text_column, options.sync, plan)
            except BaseException:
                # Refused (or interrupted: Ctrl-C) after this call created the collection: no
                # empty one is left behind (`facet collections` listed a collection nothing was
                # ever indexed into).
                session.rollback()
                if created:
                    self._drop_unused_collection(session, coll_id)
                elif added:  # (committed by the check: the refusal left it on the collection)
                    self._forget_unwritten_embedder(collection, embedder.name)
                raise
            try:
                prepared = PreparedJob(job.id, **fields)
            except BaseException:  # (Ctrl-C as its row was recorded: the row goes, as the caller's)
                if runner == "inline":
                    self._forget_refused(job.id, created)
                raise
            return prepared, created

    def _refuse_other_writer(self, session: Session, coll: md.Collection,
                             runner: str = "inline") -> None:
        """Refuse a new job into ``coll`` while another live job writes it, except one it
        queues behind: a job of this process (its own queue runs them in turn), or, for a job
        sent to the workers, a worker job (a worker plans a job only once the collection's
        lease is free: ``WriterBusy``). The latter held only in the server that sent the worker
        job, by a job id it never let go (``handed_off``): a server started since refused the
        same upload (409) that this one queued. Nor while a `--background` job of another
        process, queued into ``coll``, has not taken the lease yet (its detached process
        starting): two submitted together both answered "queued" (exit 0), and the second
        failed a moment later, "never started" (the multi-process exploration of the fourth
        session of 2026-12-07)."""
        if runner != "celery":
            # Queued in the last minute only: its process takes the lease within seconds, and a
            # row left queued by one killed before it ran must not hold the collection for good
            # once another process gets that pid.
            J = md.IndexJob
            recent = md.utcnow() - timedelta(seconds=BACKGROUND_START_S)
            for waiting in session.scalars(select(J).where(
                    J.collection_id == coll.id, J.state == "queued", J.runner == "process",
                    J.pid != os.getpid(), J.host == leases.HOST, J.queued_at >= recent
            ).order_by(J.id)):
                if leases.pid_alive(waiting.pid):
                    raise ConflictError(
                        f"collection {coll.name!r} has job {waiting.id} queued by `facet index "
                        f"--background` (pid {waiting.pid}), about to index it: "
                        f"{follow_hint(waiting.id)}, or cancel it (`facet jobs {waiting.id} "
                        "--cancel`), then send this one again")
        current = leases.live_holder(session, coll.id)
        for _ in range(8):  # (a new holder each time round: bounded, however busy)
            if current is None:
                return
            with _REGISTRY_LOCK:
                if current.job_id in _ACTIVE_JOBS:  # queued behind it in this process: fine
                    return
            if runner == "celery":
                holder_job = md.get_job(session, current.job_id)
                if holder_job is not None and holder_job.runner == "celery":
                    return  # (a worker job: the workers run this one after it)
            # A job of this process lets its lease go before it leaves ``_ACTIVE_JOBS`` (and
            # joins it before taking one): one that finished between the read above and that
            # look is gone from both, and a job of this server was refused (a 409 naming a
            # completed job of the same pid). So the lease is read again, after the look, and
            # only a holder that still holds it is refused. Read in a session of its own: this
            # one may be in a transaction whose snapshot (SQLite WAL) predates the release.
            # (Not "a holder with this pid is ours": a lease kept while the database was out
            # of reach, ``_lease_unreleased``, is this pid's, and is refused until written.)
            with self.sessions() as fresh:
                again = leases.live_holder(fresh, coll.id)
            if again is not None and again.job_id == current.job_id:
                break
            current = again
        if current is not None:
            raise ConflictError(self.one_writer_message(coll.name, current))

    def _refuse_busy_store(self, session: Session, coll: md.Collection, runner: str,
                           error: StoreBusyError) -> NoReturn:
        """The embedded store's folder is held by another process: where a live job writes the
        collection (a worker's, which a job for the workers is otherwise queued behind), the
        refusal names that job and what to do, not only a pid with advice that fits a server
        ("serve every reader and writer from one `facet serve`")."""
        current = leases.live_holder(session, coll.id)
        if current is None:
            raise error
        queued = (" (a job for the workers is queued behind a worker job where the vectors are "
                  "in a Qdrant server: docs/deploy.md)" if runner == "celery" else "")
        raise StoreBusyError(
            f"collection {coll.name!r} is being indexed by {current.describe()}, which holds its "
            "embedded store folder (one process at a time), so no job can be queued for it "
            f"now{queued}; {follow_hint(current.job_id)}, then send this one again",
            error.collection, error.holder) from error

    @staticmethod
    def one_writer_message(collection: str, current: leases.Holder) -> str:
        """The one-writer refusal, naming the live writer."""
        return (f"{current.describe()} is still indexing into {collection!r}; "
                f"{follow_hint(current.job_id)} or stop it first (one writer per collection)")

    def run(self, prepared: PreparedJob,
            progress: Callable[[Progress], None] | None = None) -> IndexReport:
        """Do a prepared job: parse, chunk, encode, write; the job row follows every batch.

        Raises:
            NotFoundError: the source disappeared since ``prepare``, or the job row is gone.
            UnavailableError: the metadata database went out of reach under the run: one
                line with the command that resumes it; the job's end is written, and its lease
                let go, once the database is back (``record_unrecorded_ends``).
            InvalidRequestError: a ``progress`` that is not callable (the job is failed).
        """
        try:
            check_progress(progress)
        except InvalidRequestError as e:
            self.fail(prepared.job_id, str(e))
            raise
        try:
            return self._run_prepared(prepared, progress)
        finally:
            self._started.discard(prepared.job_id)

    def _run_prepared(self, prepared: PreparedJob,
                      progress: Callable[[Progress], None] | None) -> IndexReport:
        """``run``, with the job's id left in ``_started`` where it started (``index``)."""
        options = prepared.options
        lock = _collection_lock(prepared.collection)
        try:  # (the id leaves the registry however this ends: a Ctrl-C while waiting too)
            try:
                self._wait_for_writer(lock, prepared)
            except BaseException as e:  # Ctrl-C while it waited: it never started
                self._stop_unstarted(prepared.job_id, e)
                self._forget_unwritten_embedder(prepared.collection, prepared.added_embedder,
                                                prepared.job_id)
                raise
            try:
                with _REGISTRY_LOCK:
                    _WRITING[prepared.collection] = prepared.job_id
                try:
                    report = self._run_job(prepared, options, progress)
                except BaseException:
                    # Refused (the store held by a `facet serve`), failed or interrupted before
                    # it wrote any vector of the embedder its `prepare` added: the collection
                    # listed it anyway, and every search naming no embedder failed on it
                    # ("has no vectors from 'minilm'") for good, no job row saying why.
                    self._forget_unwritten_embedder(prepared.collection, prepared.added_embedder,
                                                    prepared.job_id)
                    raise
                if report.state != "completed":  # (stopped: cancelled, the server stopping)
                    self._forget_unwritten_embedder(prepared.collection, prepared.added_embedder,
                                                    prepared.job_id)
                return report
            finally:
                # The lock first: a removal that finds it held reads who holds it (``_WRITING``),
                # and one in the gap found nobody and was refused at once, not waited for. (A job
                # taking the lock meanwhile writes its own id, which this leaves.)
                lock.release()
                with _REGISTRY_LOCK:
                    if _WRITING.get(prepared.collection) == prepared.job_id:
                        del _WRITING[prepared.collection]
        finally:
            with _REGISTRY_LOCK:
                _ACTIVE_JOBS.discard(prepared.job_id)

    @staticmethod
    def _wait_for_writer(lock: threading.Lock, prepared: PreparedJob) -> None:
        """Take the collection's lock: at once where no job of this process writes it, else
        after saying, once, which job this one waits for (the wait was silent, for as long as
        that job writes: hours for a large folder)."""
        if lock.acquire(blocking=False):
            return
        with _REGISTRY_LOCK:
            writer = _WRITING.get(prepared.collection)
        logger.info("job %d waits for %s (this process) to finish writing %r; it starts then",
                    prepared.job_id, f"job {writer}" if writer is not None else "another job",
                    prepared.collection)
        lock.acquire()

    def _stop_unstarted(self, job_id: int, e: BaseException, *, held: bool = False) -> None:
        """Record a job stopped (Ctrl-C, SIGTERM, an exit) before it started ``interrupted``,
        letting go of its lease, if it took one, and where ``held`` of its collection's shard:
        it stayed `queued` for the life of the process, in this process's registry and in
        `facet jobs`. An error (an ``Exception``) is no stop: the caller records it failed.
        ``index`` then removes the row, as a refused job's (``_forget_refused``): its caller
        holds no job id. Not ``held`` where it stopped waiting for another job of this process
        (that one's shard stays open)."""
        if isinstance(e, Exception):
            return
        why = ("SIGTERM" if isinstance(e, Terminated) else
               "Ctrl-C" if isinstance(e, KeyboardInterrupt) else "exit")
        try:
            with self.sessions() as session:
                session.rollback()
                job = md.get_job(session, job_id)
                if job is None or job.state not in md.UNENDED_STATES or \
                        job.started_at is not None:
                    return
                job.state, job.finished_at = "interrupted", md.utcnow()
                job.message = (f"stopped ({why}) before it started; run "
                               f"`{resume_command(job)}` (or submit the job) again")
                session.commit()
                leases.release(session, job.collection_id, job_id)
                if held:
                    self.store.release(job.collection.name)
        except Exception as err:  # (the interrupt is what the caller is told)
            logger.warning("could not record job %d as interrupted: %s", job_id, err)

    def _run_job(self, prepared: PreparedJob, options: IndexOptions,
                 progress: Callable[[Progress], None] | None) -> IndexReport:
        source = Path(prepared.source)
        with self.sessions() as session:
            # Cancelled while it waited (its thread's turn, a detached process starting): it is
            # not run, nor is its model loaded.
            job = md.get_job(session, prepared.job_id)
            if job is not None and job.state == "cancelled":
                logger.info("job %d was cancelled before it started; not run", job.id)
                return IndexReport(job_id=job.id, collection=prepared.collection,
                                   embedder=job.embedder, state="cancelled")
            if job is None:
                # Its row went with its collection: a delete is refused while a job is queued,
                # so it was cancelled first, then the collection deleted. Not run, and no
                # error: it said "ERROR index job N failed: ... no longer exists" at its turn.
                logger.info("job %d was cancelled and its collection %r deleted before it "
                            "started; not run", prepared.job_id, prepared.collection)
                return IndexReport(job_id=prepared.job_id, collection=prepared.collection,
                                   embedder=prepared.embedder, state="cancelled")
        try:
            embedder = self._embedder_for(prepared.collection, prepared.embedder)
        except Exception as e:
            # A model this process cannot load (a checkpoint gone since the job was queued): the
            # job failed before it started. It stayed `queued`, for ever in a server.
            self.fail(prepared.job_id, self.failure_message(e))
            raise
        except BaseException as e:  # Ctrl-C while the model loads: it stayed `queued` too
            self._stop_unstarted(prepared.job_id, e)
            raise
        with self.sessions() as session:
            job = md.get_job(session, prepared.job_id)
            if job is None:
                raise NotFoundError(f"index job {prepared.job_id} no longer exists (its "
                                    "collection was deleted?)")
            coll = job.collection
            report = IndexReport(job_id=job.id, collection=coll.name, embedder=embedder.name,
                                 state="running")
            # What the end of the run needs, read now: once the run fails, the database may be
            # what failed (PostgreSQL stopped), and a lazy load of the collection's embedders
            # for the resume command raised again, as PendingRollbackError, with ~460 lines.
            job_id, coll_id, coll_name = job.id, coll.id, coll.name
            resume = resume_command(job)
            # The store first: a process holding the collection open is found before this job
            # takes the lease (a stalled writer's expired lease was taken, then both jobs
            # failed) or records documents as about to be written (left 'pending' for ever).
            try:
                self.hold_store_collection(coll.name)
            except FacetError as e:  # refused, not interrupted: nothing to resume
                job.state, job.finished_at, job.message = "failed", md.utcnow(), str(e)
                session.commit()
                raise
            except BaseException as e:  # a Ctrl-C: recorded interrupted, not left `queued`
                session.rollback()
                self._stop_unstarted(job_id, e, held=True)
                raise
            try:
                # Checked before the job starts, not only when it was queued: the model may
                # have been loaded since (a background or worker run) from a checkpoint
                # retrained meanwhile, and the source may be gone. Either fails the job
                # unstarted (it was recorded `running` first, as if it had begun). A model not
                # loaded yet is checked when it loads, before it encodes anything.
                if isinstance(embedder, _Deferred):
                    identity = self.ctx.embedders.identity
                    embedder.check = lambda model: check_same_embedder(
                        coll, model, identity(model), spec=prepared.embedder)
                else:
                    check_same_embedder(coll, embedder, self.ctx.embedders.identity(embedder),
                                        spec=prepared.embedder)
                outside: list[Path] = []
                into_own: list[Path] = []
                try:
                    files, skipped = discover_files(source, self._own_folders())
                    files, into_own = outside_own(files, self._own_folders(), source)
                    files, outside = confined(files, options.confine)
                    skipped = sorted([*skipped, *outside, *into_own])  # (said why: ``_note_skipped``)
                except SourceNotFoundError as e:
                    # Gone, with --sync: its documents are removed (``_sync``), nothing read.
                    if options.sync is not True or not _documents_from(session, coll.id, source):
                        raise NotFoundError(f"{e} (it was there when the job was queued)") from e
                    files, skipped = [], []
                except UnsupportedSourceError as e:
                    raise NotFoundError(f"{e} (it was there when the job was queued)") from e
                # A disk too full is a refusal before the job starts, as a busy store is: it
                # was checked once the job ran, after its lease and its start were recorded.
                self.check_room(started=False)  # (a new store collection maps its first files)
            except BaseException as e:
                # A Ctrl-C too (reading a large folder takes a while): the job stayed `queued`,
                # and the store held, for the life of the process.
                session.rollback()
                if not isinstance(e, Exception):
                    self._stop_unstarted(job_id, e, held=True)
                    raise
                self.fail_held(session, job, self.job_failure_message(job, e))
                raise
            try:
                self.take_lease(session, coll, job)
                self._started.add(job_id)
                started = time.perf_counter()
                job.state, job.pid, job.host = "running", os.getpid(), leases.HOST
                job.started_at = md.utcnow()
                session.commit()
            except BaseException as e:  # (an error: as before; a Ctrl-C: not left `queued`)
                if not isinstance(e, Exception):
                    session.rollback()
                    self._stop_unstarted(job_id, e, held=True)
                raise
            heartbeat = leases.Heartbeat(self.sessions, coll.id, job.id,
                                         self.settings.lease_ttl_s, name=coll.name)
            interrupt = _DeferredInterrupt(self.ctx.stopping)
            failure: BaseException | None = None
            try:
                interrupt.__enter__()
                heartbeat.__enter__()
                unreadable = self._note_skipped(job, report, skipped, set(outside), set(into_own))
                self.ensure_store_collection(session, coll, job, embedder)
                tokenize = (_when_called(lambda: self._tokenizer_for(coll, loaded(embedder)))
                            if isinstance(embedder, _Deferred) else
                            self._tokenizer_for(coll, embedder))
                chunking = ChunkingConfig(coll.chunk_size, coll.chunk_overlap)
                total = estimate_documents(files)
                # On the row at once (GET /jobs/ID, `facet jobs ID`, `--follow`): it said 0
                # until the end. An estimate (records counted by lines) until the job completes,
                # when it is set to the documents seen.
                job.docs_total = total
                session.commit()
                with _one_truncation_line():
                    seen = self._run(session, coll, job, report, files, embedder,
                                     prepared.embedder, tokenize, chunking, options, progress,
                                     total, started, heartbeat=heartbeat, interrupt=interrupt)
                seen.failed_folders.update(unreadable)
                if seen.failed_sources or seen.failed_folders:
                    # Its drive or share gone while it was read: every document read since was
                    # counted failed (988 of 1,500, exit 4) where the kernel still answered for
                    # the folder itself, in about one pulled drive in two; it is the source.
                    check_source_reachable(source)
                self._note_moved(job, report)
                interrupt.check()
                # A cancel asked while the last batch went in: the job ends cancelled, as a
                # worker's does (it completed, and nothing said the cancel had come too late),
                # its message naming what it stopped before: every document is in.
                try:
                    self.check_cancelled(job.id)
                except _Cancelled as e:
                    e.skipped = self._end_steps(session, coll, source, files, seen, options)
                    raise
                if not heartbeat.holds():  # (a sync would remove what the new writer wrote)
                    raise lost_lease(job.id, coll.name, self.settings.lease_ttl_s)
                emptied = None  # (what a sync of an empty folder kept, said as the job's message)
                if options.syncs(source):
                    emptied = self._sync(session, coll, job, report, source, files, seen)
                else:
                    self._drop_stale_errors(session, coll, source, files, seen)
                    self._note_unsynced(session, coll, job, report, source, files, seen)
                # Nothing of the metadata is written while the store optimizes (tens of seconds
                # for a large collection: its HNSW index, a term-vector rewrite): the sync's
                # query had opened a write transaction (autoflush), and other processes' jobs
                # failed busy after waiting the whole 30 s for it.
                session.commit()
                if progress is not None:
                    # Every document is read: their count is the total now, not the estimate
                    # (a csv's quoted multi-line fields counted as lines: "3/6 documents (50%)
                    # ... optimizing the store" was a finished run's last line).
                    progress(Progress(report.docs_seen, report.docs_seen,
                                      report.chunks_written, time.perf_counter() - started,
                                      stage="optimizing the store"))
                t0 = time.perf_counter()
                self.store.optimize(coll.name)
                self.store.flush()
                # The optimizer's buffers (its index builds took ~4.7 KB a record at their
                # peak), freed and kept by glibc: ~200 MB a 100,000 records stayed with a
                # server or worker after the job (helper-540's measurement, 2026-12-07).
                give_back_freed_memory()
                job.store_s += time.perf_counter() - t0
                # The total a worker job plans up front, known here at the end: its record said
                # 0 (POST /jobs, `submit_index`). Its chunk-task counts stay 0: it had none.
                job.docs_total = report.docs_seen
                self._note_incomplete_embedders(session, coll, job, report, embedder.name, source)
                # A trailing duplicate id counts on the report only (no batch synced it).
                self._sync_counters(job, report)
                job.state = "completed"
                # The state stays `completed` (the documents that went in are searchable), but
                # a client polling for it read a run whose every document failed as a success.
                job.message = emptied or failed_documents_message(
                    report.docs_failed, report.docs_seen, report.docs_indexed,
                    report.docs_deleted) or job.message
                if not source.exists():  # a sync of a file or folder deleted since it was indexed
                    job.message = (f"{display_path(source)} no longer exists: "
                                   f"{plural(report.docs_deleted, 'document')} of it removed "
                                   "from the collection (--sync)")
            except BaseException as e:
                failure = e
                # The server stopping also fails a batch on its way out (the encoder closes):
                # that is an interruption too, not the job's failure.
                stopping = isinstance(e, _ServerStopping) or self.ctx.stopping.is_set()
                cancelled = isinstance(e, _Cancelled)
                # The job row's counts, reloaded after the rollback, are what was kept; the
                # report also counts the batch that was being written. None where the database
                # cannot be read (it may be what failed).
                kept = self._reload_kept(session, job, job_id)
                indexed = report.docs_indexed if kept is None else kept
                if kept is not None:
                    # The report as the row: the run's log line said "cancelled: 512 seen" of a
                    # job whose row, the page and `facet jobs` said 256 (the batch rolled back).
                    self._counters_from_row(job, report)
                if cancelled:
                    job.state = "cancelled"
                    job.message = cancelled_message(
                        indexed, e.skipped if isinstance(e, _Cancelled) else None,
                        job.chunks_written or 0,
                        printable(report.stopped_within) if report.stopped_within else None)
                elif isinstance(e, KeyboardInterrupt | SystemExit) or stopping:
                    job.state = "interrupted"
                    why = (self.ctx.stop_reason if stopping else
                           "SIGTERM" if isinstance(e, Terminated) else
                           "Ctrl-C" if isinstance(e, KeyboardInterrupt) else "exit")
                    job.message = (f"stopped ({why}) with {plural(indexed, 'document')} "
                                   f"indexed; run `{resume}` (or submit the job) again to "
                                   f"resume{kept_said(job, indexed)}"
                                   + (f"; {printable(report.stopped_within)} was stopped part-way "
                                      f"and {READ_AGAIN}" if report.stopped_within else ""))
                else:
                    job.state = "failed"
                    job.message = self.job_failure_message(job, e, resume)
                if kept is not None:
                    self._note_moved(job, report)  # (once: the completed path may have, too)
                if not (stopping or cancelled) and (_database_gone(e) is not None or isinstance(
                        as_domain_error(e) if isinstance(e, Exception) else None,
                        UnavailableError)):
                    # An outage as its edges say it, with the command that resumes the job (a
                    # database's own said "nothing was changed"; a disk under FACET_MIN_FREE_MB
                    # said only to free some space, and not that the documents so far are kept).
                    raise UnavailableError(job.message.removeprefix(
                        f"{UnavailableError.__name__}: ")) from e
                if not (stopping or cancelled):
                    raise
            finally:
                heartbeat.__exit__(None, None, None)
                interrupt.__exit__(None, None, None)
                # Without a model load made during the run (a deferred one), as without the
                # load made before it.
                load_s = embedder.load_s if isinstance(embedder, _Deferred) else 0.0
                # And the collection's other embedders' loads (``_companion_vectors``): the
                # encode time and the rate counted a second model's seconds of loading.
                others_s = sum(s for name, s in report.loads.items() if name != report.embedder)
                report.elapsed_s = time.perf_counter() - started - load_s - others_s
                # On the job row too: `facet jobs ID` (and the API, the UI) showed the stages
                # without the load the run's own summary counted. With the load ``prepare``
                # made for this run (a new collection's first run, in the same call).
                load_s += prepared.load_s
                if load_s:
                    report.loads = {report.embedder: load_s} | {
                        name: s for name, s in report.loads.items() if name != report.embedder}
                load_s += others_s
                recorded = released = False  # the row holds how the job ended; the lease went
                try:
                    job.finished_at = md.utcnow()
                    report.state = job.state
                    job.load_s = load_s
                    report.timings = {"parse_chunk": job.parse_s, "encode": job.encode_s,
                                      "store": job.store_s, "metadata": job.metadata_s}
                    if load_s:
                        report.timings["load_model"] = load_s  # (a stage of its own)
                    session.commit()
                    recorded = True
                    # A cancel asked after the last batch's check (the sync, the store's
                    # optimize, up to this commit: the row still read running) is answered 200;
                    # the job completed, and says so. Read after the commit, so none is missed.
                    if job.state == "completed" and self._cancel_asked(job_id):
                        job.message = "; ".join(filter(None, (job.message, CANCEL_TOO_LATE)))
                        session.commit()
                    # The shard is closed before the lease goes: a reader that finds no lease
                    # must find the shard free too (the other order let a `facet search` in the
                    # gap meet a held shard and fail with "busy" instead of the writer's
                    # message).
                    self.store.release(coll_name)
                    leases.release(session, coll_id, job_id)
                    released = True
                except SQLAlchemyError as db_error:
                    outage = _database_gone(failure) or _database_gone(db_error, chain=True)
                    if outage is None:
                        raise
                    if recorded:
                        # Out of reach after the row took the job's end: the job is what the row
                        # says (it answered "run again to resume" of a completed job); only its
                        # lease waits for the database (``remember_unrecorded_end``).
                        self._lease_unreleased(session, job_id, coll_id, coll_name, report.state)
                    else:
                        self._end_unrecorded(session, job, report, failure, outage, resume,
                                             job_id, coll_id, coll_name)
            if job.runner == "inline" and report.state == "completed" and released:
                report.collection_removed = self._drop_if_nothing_indexed(session, coll, job)
                if report.collection_removed:
                    report.message = removed_collection_message(report, source)
            elif report.state in ("completed", "cancelled") and released:
                # Cancelled before it wrote a document too: "nothing was written" read as if
                # no collection had been made, and the empty one it made was named nowhere.
                self._note_left_empty(session, coll, job)
        logger.debug("job %d %s: %d seen, %d indexed, %d unchanged, %d failed, %d deleted, "
                    "%d chunks in %.1fs", report.job_id, report.state, report.docs_seen,
                    report.docs_indexed, report.docs_skipped, report.docs_failed,
                    report.docs_deleted, report.chunks_written, report.elapsed_s)
        return report

    @staticmethod
    def _note_incomplete_embedders(session: Session, coll: md.Collection, job: md.IndexJob,
                                   report: IndexReport, running: str, source: Path) -> None:
        """One warning per other embedder of ``coll`` whose vectors some indexed documents
        lack (a job adding it that stopped part-way), with the command that fills them in: a
        plain re-run after an interrupted second embedder's job said "completed ... 30
        unchanged", not that searches with the other missed 20 documents. Not where this run
        said so already (``_companion_vectors``: it could not load it)."""
        others = [e for e in coll.embedders if e.name != running
                  and not any(k == companion_key(e.name) for k, _ in report.warnings)]
        if not others:
            return
        indexed = md.count_documents(session, coll.id, "indexed")
        missing = md.vectors_missing(session, coll.id, [e.name for e in others], indexed)
        for other in others:
            # (Less those this run wrote without its vectors, each named by a warning already.)
            lacking = missing.get(other.name, 0) - len(report.vectors_left_out.get(other.name, ()))
            if lacking <= 0:
                continue
            command = (f"facet index {shell_word(str(source))} -c {shell_word(coll.name)} "
                       f"-e {shell_word(other.spec)}")
            message = (f"embedder {other.name!r} of collection {coll.name!r} still has no vectors "
                       f"for {lacking:,} of the {indexed:,} documents (a job adding it stopped "
                       f"part-way or read other sources, or a run could not load it), so "
                       f"searches with it cannot find them: `{command}` (with each of their "
                       "sources) fills them in")
            key = companion_key(other.name)
            report.warnings.append((key, message))
            job.errors.append(md.JobError(document_key=key, kind="warning", message=message))

    @staticmethod
    def _note_skipped(job: md.IndexJob, report: IndexReport, skipped: list[Path],
                      outside: Collection[Path] = (), into_own: Collection[Path] = ()) -> set[str]:
        """Name what discovery left out on the report and, as warnings, on the job (``outside``:
        those ``confined`` left out; ``into_own``: the links ``outside_own`` left out); returns
        what of it could not be read (``Seen.failed_folders``)."""
        reasons = [(display_path(p), INTO_DATA_FOLDER if p in into_own else OUTSIDE_ROOTS if p in outside
                    else skip_reason(p)) for p in skipped]
        report.skipped_files = [name for name, why in reasons if why.startswith("unsupported")]
        report.skipped_other = [(name, why) for name, why in reasons
                                if not why.startswith("unsupported")]
        for name, why in reasons[:100]:
            supported = f" (supported: {supported_types()})" if why.startswith("unsupported") else ""
            job.errors.append(md.JobError(document_key=name, kind="warning",
                                          message=f"{name}: skipped, {why}{supported}"))
        logger.debug("skipped %d files", len(skipped))
        return {name for name, why in reasons if why.startswith(UNREADABLE)}

    @staticmethod
    def note_outside(job: Any, report: IndexReport, path: Path) -> None:
        """Say, as ``_note_skipped`` says those the walk left out, that ``path`` was found
        outside the run's folders when it came to be read, and not read (``parse_under``)."""
        name = display_path(path)
        report.skipped_other.append((name, OUTSIDE_ROOTS))
        job.errors.append(md.JobError(document_key=name, kind="warning",
                                      message=f"{name}: skipped, {OUTSIDE_ROOTS}"))
        logger.warning("%s: skipped, %s (found so when it came to be read)", name, OUTSIDE_ROOTS)

    @staticmethod
    def _note_left_empty(session: Session, coll: md.Collection, job: md.IndexJob) -> None:
        """Say on a background job's row that the collection made for it holds nothing
        (``left_empty_note``); a note only, its end recorded already."""
        try:
            if left_empty(session, coll, job):
                job.message = "; ".join(filter(None, (job.message, left_empty_note(coll.name))))
                session.commit()
        except SQLAlchemyError as e:
            logger.debug("job %d: the empty collection's note was not written: %s", job.id, e)
            with contextlib.suppress(SQLAlchemyError):
                session.rollback()

    def _drop_if_nothing_indexed(self, session: Session, coll: md.Collection,
                                 job: md.IndexJob) -> bool:
        """Remove a collection this inline job created and left empty (every document failed).

        Only for ``inline`` runs, whose caller holds the report with every error: a background
        job's row is what its caller reads later, and it goes with its collection; and for a
        job a stopping server never ran (``abandon_queued``, which logs its resend). A collection
        that any other job touched, or that holds an indexed document, is kept.
        """
        if not left_empty(session, coll, job):
            return False
        name = coll.name
        try:
            self.store.drop_collection(name)
        except StoreError as e:  # the metadata still names it: say so, keep going
            logger.warning("could not remove the empty collection %r from the store: %s", name, e)
            return False
        md.delete_collection(session, coll)
        session.commit()
        logger.debug("removed collection %r: job %d indexed nothing", name, job.id)
        return True

    def fail_held(self, session: Session, job: md.IndexJob, message: str) -> None:
        """Record ``job`` failed with ``message`` and let go of what it holds: its lease, if it
        took one, and the store's shard of its collection."""
        job.state, job.finished_at, job.message = "failed", md.utcnow(), message
        session.commit()
        leases.release(session, job.collection.id, job.id)
        self.store.release(job.collection.name)

    def job_failure_message(self, job: md.IndexJob, e: BaseException,
                            resume: str | None = None) -> str:
        """A failed job's message (``failure_message``), with how to resume it where the
        failure is an outage (in-process runs and the workers' index tasks). ``resume``: the
        resume command, read before the run (else read from ``job`` now, which loads its
        collection's embedders: not where the database may be what failed)."""
        message = self.failure_message(e)
        if isinstance(as_domain_error(e) if isinstance(e, Exception) else None, UnavailableError):
            # A disk full or made read-only, a server out of reach: what was written is kept,
            # and the same run goes on once it is back (`facet collections` pointed at `facet
            # jobs` for how, which said nothing). A database out of reach "changed nothing" of
            # the one statement it refused, not of the job: its batches so far are kept.
            message = message.removesuffix(NOTHING_CHANGED)
            message += (f"; run `{resume or resume_command(job)}` again once it is back to "
                        f"resume{kept_said(job)}")
        return message

    @staticmethod
    def _reload_kept(session: Session, job: md.IndexJob, job_id: int) -> int | None:
        """After a run failed: the session rolled back and the job's kept document count read
        afresh; None where the database cannot be read (it may be what failed)."""
        try:
            session.rollback()
            return int(job.docs_indexed)
        except SQLAlchemyError as e:
            logger.debug("job %d's row could not be read back: %s", job_id, e)
            with contextlib.suppress(SQLAlchemyError):
                session.rollback()
            return None

    def _end_unrecorded(self, session: Session, job: md.IndexJob, report: IndexReport,
                        failure: BaseException | None, outage: SQLAlchemyError, resume: str,
                        job_id: int, coll_id: int, coll_name: str) -> None:
        """The end of a run whose row the metadata database would not take (it went out of
        reach): the shard is let go, the end kept for when the database is back
        (``remember_unrecorded_end``: the row, then the lease), and the caller told by the
        database's ``UnavailableError``, one line with the resume command: a chained
        ``PendingRollbackError`` of ~460 lines (exit 1) reached the CLI, and a server showed
        the job failed and running at once, its collection refused for a minute.

        Raises:
            UnavailableError: the database out of reach; Ctrl-C, SIGTERM and an exit go on as
                they were (the run was being stopped).
        """
        # What the run decided, where it did (set on the object, not read from the database),
        # read before the rollback, which expires it (read after, every end was "failed").
        state, message = vars(job).get("state"), vars(job).get("message")
        said = self.job_failure_message(job, outage, resume)
        if state not in ("failed", "interrupted", "cancelled") or not message:
            state, message = "failed", said  # (it completed, or had not got as far)
        report.state = state
        self._keep_end(session, job_id, coll_id, coll_name, state, message)
        logger.debug("job %d's end (%s) kept until the metadata database is back", job_id, state)
        if isinstance(failure, BaseException) and not isinstance(failure, Exception):
            return  # (Ctrl-C, SIGTERM: the run stops as asked)
        raise UnavailableError(said.removeprefix(f"{UnavailableError.__name__}: ")) from outage

    def _keep_end(self, session: Session, job_id: int, coll_id: int, coll_name: str,
                  state: str, message: str) -> None:
        """A run's end the database did not take (its row, or only its lease): the session
        rolled back, the shard let go, the end kept to write once the database is back
        (``remember_unrecorded_end``: the row where it still says running, then the lease)."""
        with contextlib.suppress(SQLAlchemyError):
            session.rollback()
        with contextlib.suppress(StoreError, OSError):
            self.store.release(coll_name)
        remember_unrecorded_end(UnrecordedEnd(self.sessions, job_id, coll_id, state, message,
                                              md.utcnow()))

    def _lease_unreleased(self, session: Session, job_id: int, coll_id: int, coll_name: str,
                          state: str) -> None:
        """The end of a run the database took, whose lease it did not (it went out of reach
        right after): the shard let go, the lease kept to release once it is back."""
        self._keep_end(session, job_id, coll_id, coll_name, state, "")
        logger.warning("job %d %s; the metadata database went out of reach before its "
                       "collection's lease was let go: it is, once the database is back",
                       job_id, state)

    def _forget_refused(self, job_id: int, created: bool) -> None:
        """After a foreground run (``index``) failed: its job row goes where the job never
        started (refused: the store busy, the disk too full; its caller was told, and holds no
        job id), and the collection goes too where this run created it and nothing was written
        into it (``_drop_unused_collection``). A job that started keeps its row, and so does
        one whose id was handed out (``submit_index``, a worker's): they do not come here."""
        if job_id in self._started:
            return  # it ran: its row is kept (and may be what the database did not take)
        try:
            with self.sessions() as session:
                job = md.get_job(session, job_id)
                # Failed (refused), or interrupted (Ctrl-C) before it started: its row and the
                # collection it created go. (Not a completed run's: that one started.)
                # (``queued``: this call's own, stopped before its run marked it.)
                if job is None or job.state not in ("failed", "interrupted", "queued") or (
                        job.state != "failed" and job.started_at is not None):
                    return
                if created and self._drop_unused_collection(session, job.collection_id, job):
                    return
                if job.started_at is None:
                    J = md.IndexJob
                    session.execute(delete(md.JobError).where(md.JobError.job_id == job.id))
                    session.execute(delete(md.JobChunk).where(md.JobChunk.job_id == job.id))
                    session.execute(delete(J).where(J.id == job.id, J.started_at.is_(None)))
                    session.commit()
                    logger.debug("removed job %d: refused before it started", job.id)
        except (SQLAlchemyError, OSError) as e:  # the refusal is what the caller is told
            logger.warning("could not remove refused job %d: %s", job_id, e)

    def _drop_unused_collection(self, session: Session, collection_id: int,
                                job: md.IndexJob | None = None) -> bool:
        """Remove a collection that this process created a moment ago for ``job`` (or for a job
        it did not record) and that nothing was written into: no document, no other job (another
        process indexing into it since), no store collection (this job's own store collection,
        empty, goes with it; a store collection held elsewhere is left, and the metadata with
        it). Returns whether it was removed."""
        session.rollback()  # (read afresh: another process may have used it meanwhile)
        coll = session.get(md.Collection, collection_id)
        if coll is None:
            return False
        D, J = md.Document, md.IndexJob
        other_jobs = select(func.count()).select_from(J).where(
            J.collection_id == coll.id, J.id != (job.id if job is not None else -1))
        if session.scalar(select(func.count()).select_from(D).where(D.collection_id == coll.id)) \
                or session.scalar(other_jobs):
            return False
        name = coll.name
        try:
            if self.store.collection_exists(name):
                # Only one this job may have made (it had started) and that holds nothing.
                if job is None or job.started_at is None:
                    return False
                if self.store.count(name):
                    self.store.release(name)
                    return False
                self.store.drop_collection(name)
        except StoreError as e:  # held by another process, unreadable: the metadata stays too
            logger.warning("could not remove the empty collection %r from the store: %s", name, e)
            return False
        md.delete_collection(session, coll)
        session.commit()
        logger.debug("removed collection %r: created by a refused job, nothing written", name)
        return True

    @staticmethod
    def failure_message(e: BaseException) -> str:
        """A failed job's message: a lower package's error as its edges say it ("database is
        locked" was stored as the SQL statement and its parameters, for every edge to show)."""
        domain = as_domain_error(e) if isinstance(e, Exception) else None
        if domain is None and isinstance(e, MemoryError):
            # (It read "MemoryError: ", the error's own text being empty as a rule.)
            said = f": {e}" if str(e) else ""
            return (f"out of memory (MemoryError{said}); index fewer chunks at a "
                    "time (--batch-chunks, FACET_INDEX_BATCH_CHUNKS) or with a smaller model")
        return (f"{type(domain).__name__}: {domain}" if domain is not None
                else f"{type(e).__name__}: {e}")

    def _cancel_asked(self, job_id: int) -> bool:
        """Whether someone asked job ``job_id`` to stop (a session of its own, as
        ``check_cancelled`` reads it)."""
        with self.sessions() as session:
            return md.cancel_requested(session, job_id)

    def check_cancelled(self, job_id: int) -> None:
        """Raise ``_Cancelled`` if someone asked job ``job_id`` to stop: called at each batch
        boundary, one small query on a session of its own (the job's session may hold an older
        snapshot, and its pending changes are not flushed for it)."""
        if self._cancel_asked(job_id):
            raise _Cancelled(f"job {job_id} was cancelled")
        self.check_room()

    def check_room(self, *, started: bool = True) -> None:
        """Raise ``UnavailableError`` where the data folder's disk has less free space than
        ``FACET_MIN_FREE_MB``: called before each batch (with ``check_cancelled``) and before a
        store collection is made. A write past a full disk killed the process with a bus error
        (the embedded store's files are memory-mapped: a `facet serve` and all its clients with
        it) or failed as SQLite's "disk I/O error"; now the job stops between batches, its
        documents so far kept, resumable. ``started``: False where the job has written nothing
        yet (its submission, its start): it is "refused", not "stopped before writing more"."""
        need = self.settings.min_free_mb * 2**20
        if not need or (self.store.backend == "server" and self.settings.database_url):
            return  # (nothing of the job's is written to this disk)
        folder = self.settings.data_dir
        free = free_bytes(folder)
        if free is None:
            return  # (gone, unreadable, or a disk that tells no size: the write itself will say)
        if free < need:
            what = "stopped before writing more" if started else "refused before writing anything"
            raise UnavailableError(
                f"{what}: the disk of the data folder {folder} has "
                f"{free / 2**20:,.1f} MiB free, under FACET_MIN_FREE_MB "
                f"({self.settings.min_free_mb:,.0f}); free some space there (or lower "
                "FACET_MIN_FREE_MB)")

    def cancel(self, job_id: int) -> bool:
        """Cancel a job: a ``queued`` one at once (its runner, when its turn comes, finds it
        ``cancelled`` and skips it); a ``running`` one is asked to stop (``cancel_requested``),
        which its runner does at its next batch boundary. The flag is set on a queued job too:
        a runner that took it in the meantime still stops at its first batch. A job in another
        state is left as it is, and False says so (it ended since the caller read its state:
        the caller refuses it, where a 200 answered a cancel that changed nothing)."""
        J = md.IndexJob
        with self.sessions() as session:
            asked = session.execute(update(J).where(J.id == job_id, J.state.in_(md.UNENDED_STATES))
                                    .values(cancel_requested=True))
            unstarted = session.execute(update(J).where(J.id == job_id, J.state == "queued").values(
                state="cancelled", finished_at=md.utcnow(), message=QUEUED_CANCELLED))
            session.commit()
            if getattr(unstarted, "rowcount", 0):
                # A collection made for it, left empty, is kept (its job, read later, goes with
                # it), as a background job's that indexed nothing: its message says so and how
                # to remove it; `facet collections` listed it, and its searches said "job N
                # (cancelled) has not written its first documents", named by nothing else.
                job = md.get_job(session, job_id)
                if job is not None and left_empty(session, job.collection, job):
                    job.message = f"{QUEUED_CANCELLED}; {left_empty_note(job.collection.name)}"
                    session.commit()
        if not getattr(asked, "rowcount", 1):
            return False
        # DEBUG: the caller says who asked (`facet serve`'s "job N: cancellation asked by
        # CLIENT"); at INFO each cancel over HTTP was logged twice, once naming nobody.
        logger.debug("job %d: cancellation asked", job_id)
        return True

    def note_message(self, job_id: int, message: str) -> None:
        """Set an ended job's message (what its cancel did besides: ``Facet.cancel_job``)."""
        with self.sessions() as session:
            job = md.get_job(session, job_id)
            if job is not None and job.state not in md.UNENDED_STATES:
                job.message = message
                session.commit()

    def set_job_process(self, job_id: int, pid: int) -> None:
        """Record the process that will run a queued job (a detached ``facet run-job``)."""
        with self.sessions() as session:
            job = md.get_job(session, job_id)
            if job is not None and job.state == "queued":
                job.pid, job.host = pid, leases.HOST
                session.commit()

    def abandon_queued(self, job_id: int) -> None:
        """A job still queued when its runner closed (the server stopping): failed, said in
        one WARNING with the command that submits it again, and a collection it created that
        holds nothing, no other job, removed (``_drop_if_nothing_indexed``) with the job's
        row. Both were silent: the job read `failed`, named in no log line, and the empty
        collection's searches said "job N (failed) has not written its first documents"."""
        with _REGISTRY_LOCK:
            _ACTIVE_JOBS.discard(job_id)
        with self.sessions() as session:
            job = md.get_job(session, job_id)
            if job is None or job.state not in md.UNENDED_STATES:
                return
            again = resume_command(job)
            job.state, job.finished_at = "failed", md.utcnow()
            job.message = (f"the server stopped before the job started; run `{again}` (or "
                           "submit the job) again")
            session.commit()
            name = job.collection.name
            try:
                removed = self._drop_if_nothing_indexed(session, job.collection, job)
            except Exception as e:  # (the job's end is recorded; the warning still comes)
                logger.debug("could not remove the empty collection %r: %s", name, e)
                removed = False
            logger.warning("job %d into %s was still queued when the server stopped: not run%s; "
                           "run `%s` (or submit the job) again", job_id, name,
                           f" (its empty collection {name} removed)" if removed else "", again)

    def handed_off(self, job_id: int) -> None:
        """A prepared job was sent to run in another process (a worker, a detached ``facet
        run-job``): it is no longer one of this process's jobs. It stayed in ``_ACTIVE_JOBS``
        for the life of the process, so a new job into its collection was taken for "queued
        behind it in this process" instead of being refused while the worker wrote (as a
        server started since refuses it), and another data folder's job of the same id
        (a script with two folders; the test suite) was taken for this process's."""
        with _REGISTRY_LOCK:
            _ACTIVE_JOBS.discard(job_id)

    def fail(self, job_id: int, message: str) -> None:
        """Mark a queued job failed without running it (its runner could not start it)."""
        with _REGISTRY_LOCK:
            _ACTIVE_JOBS.discard(job_id)
        with self.sessions() as session:
            job = md.get_job(session, job_id)
            if job is not None and job.state in md.UNENDED_STATES:
                job.state, job.message, job.finished_at = "failed", message, md.utcnow()
                session.commit()

    # ----------------------------------------------------------------- removal

    def remove_documents(self, collection: str, keys: Sequence[str | os.PathLike[str]], *,
                         base: Path | None = None, missing_ok: bool = False) -> RemoveReport:
        """Remove the documents ``keys`` from ``collection``: their chunks' points, their
        entries in the store and their metadata rows, as ``--sync`` removes a document gone
        from its source. It writes as an index job does: under the collection's single-writer
        lease (refused while a job writes it) and recorded as a job row (``facet jobs``: source
        ``remove: KEY``, its documents counted as removed).

        Nothing is removed unless every key names a document of the collection (a typo never
        half-applies), nor when a key is a record file's own entry while records of the file
        are still indexed (``_refuse_record_files``). The files are not touched, except an
        upload staged in Facet's own folder for the collection (``DATA_DIR/uploads/NAME``,
        which every upload job indexes whole), deleted once the removal committed
        (``RemovedDocument.source_deleted``): a document whose file is still there comes back
        with the next index of that file or of a folder holding it
        (``RemovedDocument.source_exists`` says which).

        Args:
            keys: document keys as `facet search` and `facet jobs ID` show them: a file's
                path, a record's id (``path#L3`` for a record without one); repeats count once.
            base: where a key that is no document's key but a relative path (``inbox/a.txt``)
                is read from (the CLI's working folder); None: keys are taken as given.
            missing_ok: keys that name no document of the collection (removed already, or
                never there) are skipped instead of refused, as ``removal_parts`` with
                ``skipped`` skips them (the same check): listed in the report's
                ``skipped_keys``, the others removed; where none names a document, nothing is
                removed and no job is made (``job_id`` 0). A record file's path whose records
                are still indexed is refused all the same.

        Raises:
            InvalidRequestError: no key, an empty one, or keys not a list of str.
            TooLargeError: more than ``MAX_REMOVED_KEYS`` keys.
            NotFoundError: an unknown collection (``param="collection"``), or keys that name no
                document of it (``param="key"``, each named; nothing was removed), unless
                ``missing_ok``.
            ConflictError: another job writes the collection (or another process holds its
                store folder), or its vectors are in another store than the one in use.
        """
        check_str(collection, "collection", param="collection")
        check_bool(missing_ok, "missing_ok", param="missing_ok")
        wanted = self._removal_keys(keys)
        started = time.perf_counter()
        lock = self._take_collection_lock(collection)
        try:
            report = self._remove(collection, wanted, base, [] if missing_ok else None)
        finally:
            lock.release()
        report.elapsed_s = time.perf_counter() - started
        if report.job_id:
            logger.info("removed %s (%s) from %s: job %d%s",
                        plural(report.docs_deleted, "document"),
                        plural(report.chunks_deleted, "chunk"), collection, report.job_id,
                        f" ({plural(len(report.skipped_keys), 'key')} skipped, no document)"
                        if report.skipped_keys else "")
        else:
            logger.info("nothing removed from %s: none of the %s named a document (skipped)",
                        collection, plural(len(report.skipped_keys), "key"))
        return report

    def check_removal(self, collection: str, keys: Sequence[str | os.PathLike[str]], *,
                      base: Path | None = None) -> list[str]:
        """What ``remove_documents`` would remove, checked without removing anything (for a
        caller that asks before it removes): the document keys ``keys`` name (relative paths
        read from ``base``), each once, in order. It reads only: the removal itself checks
        again.

        Raises:
            as ``remove_documents`` does before it writes: bad or too many keys, an unknown
            collection or keys, a collection in another store, a job writing it.
        """
        check_str(collection, "collection", param="collection")
        wanted = self._removal_keys(keys)
        with self.sessions() as session:
            coll = self._removal_collection(session, collection)
            keys_named = self._named_keys(session, coll, wanted, base)
        self._check_no_writer_here(collection)
        return keys_named

    def removal_parts(self, collection: str, keys: Sequence[str | os.PathLike[str]], *,
                      base: Path | None = None,
                      skipped: list[str] | None = None) -> list[list[str]]:
        """``check_removal`` of any number of keys, split into the removals that take them:
        every key checked at once (an unknown one refuses them all, nothing removed), then
        parts of at most ``MAX_REMOVED_KEYS`` keys, each one removal (``remove_documents``),
        run in order. A record file's own entry named with its records goes in the last part
        (removed before its records, it was refused: ``_refuse_record_files``).

        Args:
            skipped: None: every key must name a document (all or nothing). A list: keys the
                collection does not hold (now: removed already by an earlier run, or never
                there) are appended to it, as given, and left out instead of refused
                (`facet delete C --documents-from FILE --missing-ok`, the rerun of a removal
                stopped after some of its parts); no part at all where none is held.

        Raises:
            as ``check_removal`` does, but for too many keys.
        """
        check_str(collection, "collection", param="collection")
        wanted = self._removal_keys(keys, capped=False)
        with self.sessions() as session:
            coll = self._removal_collection(session, collection)
            named = self._named_keys(session, coll, wanted, base, skipped)
            D = md.Document
            files: set[str] = set()
            for start in range(0, len(named), 500):  # stay under SQL parameter limits
                files.update(str(s) for s in session.scalars(select(D.source).where(
                    D.collection_id == coll.id, D.key.in_(named[start:start + 500]),
                    D.key != D.source)))
        self._check_no_writer_here(collection)
        ordered = [k for k in named if k not in files] + [k for k in named if k in files]
        return [ordered[i:i + MAX_REMOVED_KEYS] for i in range(0, len(ordered), MAX_REMOVED_KEYS)]

    def _take_collection_lock(self, collection: str) -> threading.Lock:
        """The collection's lock of this process, taken (the caller lets it go), or the refusal
        naming what holds it (``_busy_here``). A job of this process whose row records its end
        is waited for (``_writer_ending``)."""
        lock = _collection_lock(collection)
        if lock.acquire(blocking=False):
            return lock
        if self._writer_ending(collection) and lock.acquire(timeout=leases.ENDING_WAIT_S):
            return lock
        raise self._busy_here(collection)

    def _check_no_writer_here(self, collection: str) -> None:
        """``_take_collection_lock``'s refusal, for a check that only looks: the lock is not
        taken (taken even briefly, a removal or another check of the same moment found it held
        by nobody it could name, and was refused)."""
        lock = _collection_lock(collection)
        if not lock.locked():
            return
        if self._writer_ending(collection):
            deadline = time.monotonic() + leases.ENDING_WAIT_S
            while lock.locked() and time.monotonic() < deadline:
                time.sleep(0.02)
            if not lock.locked():
                return
        raise self._busy_here(collection)

    def _writer_ending(self, collection: str) -> bool:
        """Whether the job of this process writing ``collection`` has its end recorded on its
        row: it lets go of its store shard, its lease and then the lock just after that commit
        (within ``leases.ENDING_WAIT_S``), and a client that polled the job (``GET /jobs/N``,
        ``facet.job``) to its end and then removed documents was refused "index job N of this
        process is writing" in that gap."""
        job_id = writing_job(collection)
        if job_id is None:
            return False
        with self.sessions() as session:
            job = md.get_job(session, job_id)
            return job is None or job.state not in md.UNENDED_STATES

    @staticmethod
    def _busy_here(collection: str) -> ConflictError:
        """The refusal of a removal while a job of this process writes ``collection`` (named,
        as a job of another process is: ``one_writer_message``)."""
        job_id = writing_job(collection)
        with _REGISTRY_LOCK:
            removal = _REMOVING.get(collection)
        writer = (f"index job {job_id} of this process is writing {collection!r}; "
                  f"{follow_hint(job_id)}, then try again" if job_id is not None else
                  f"removal job {removal} of this process is removing documents of "
                  f"{collection!r}; try again once it is done" if removal is not None else
                  f"a job of this process is writing {collection!r}; try again once it is done")
        return ConflictError(f"{writer} (one writer per collection); nothing was removed",
                             param="collection")

    @staticmethod
    def _removal_keys(keys: Any, *, capped: bool = True) -> list[str]:
        """``keys`` checked (a list or tuple of non-empty str, at most ``MAX_REMOVED_KEYS``),
        each once, in order. A path (``os.PathLike``: a ``pathlib.Path``) is taken as its
        ``os.fspath``: a file's key is its absolute path, and ``index`` takes a Path (a Path
        key was refused, "a document key must be a str, got PosixPath")."""
        if isinstance(keys, str | bytes) or not isinstance(keys, list | tuple):
            raise InvalidRequestError(f"keys must be a list of document keys (str or "
                                      f"pathlib.Path), got {type(keys).__name__} {keys!r:.60}",
                                      param="key")
        keys = [_path_key(key) for key in keys]
        for key in keys:
            if not isinstance(key, str):
                raise InvalidRequestError(f"a document key must be a str or a path "
                                          f"(pathlib.Path), got {type(key).__name__} "
                                          f"{key!r:.60}", param="key")
            if not key.strip():
                raise InvalidRequestError("a document key is empty; give the keys of the "
                                          "documents to remove", param="key")
            if not is_text(key):  # (the database's driver raised UnicodeEncodeError)
                raise InvalidRequestError(
                    f"{display_path(key)}: its name is not valid UTF-8, so no document has it "
                    "(a folder walk skips such a file: rename it)", param="key")
        # As plain str: a str subclass (numpy's ``np.str_``) was shown by its repr in the
        # refusal ("no document np.str_('nosuch')").
        wanted = list(dict.fromkeys(str.__str__(k) for k in keys))
        if not wanted:
            raise InvalidRequestError("no document key given: name the documents to remove",
                                      param="key")
        if capped and len(wanted) > MAX_REMOVED_KEYS:
            parts = -(-len(wanted) // MAX_REMOVED_KEYS)
            raise TooLargeError(f"{len(wanted):,} document keys, over the {MAX_REMOVED_KEYS:,} "
                                f"one removal takes; remove them in {parts} parts of at most "
                                f"{MAX_REMOVED_KEYS:,} keys each, one request after the other "
                                "(`facet delete C --documents-from FILE` does so itself)",
                                param="key")
        return wanted

    def _remove(self, name: str, wanted: list[str], base: Path | None,
                skipped: list[str] | None = None) -> RemoveReport:
        """``remove_documents`` under the collection's thread lock. ``skipped``: a list (its
        ``missing_ok``) takes the keys that name no document, as ``_named_keys`` does, and
        becomes the report's ``skipped_keys``; no job where it takes them all."""
        with self.sessions() as session:
            coll = self._removal_collection(session, name)
            keys = self._named_keys(session, coll, wanted, base, skipped)
            if not keys:  # (only with ``skipped``: else an unknown key was refused)
                return RemoveReport(0, coll.name, skipped_keys=list(skipped or []))
            embedder = coll.embedders[0].name if coll.embedders else (coll.tokenizer or "-")
            job = md.IndexJob(collection_id=coll.id, source=removal_source(keys),
                              embedder=embedder, pid=os.getpid(), host=leases.HOST,
                              runner="inline", state="queued")
            if len(keys) > 1:
                # Its source names only the first key ("remove: KEY and 2 more"): each is
                # recorded, so that a removal stopped part-way can be run again with all of
                # them (``removal_rerun_hint``) by a caller that no longer has its request.
                job.errors.extend(md.JobError(document_key=key, kind=REMOVAL_KEY_KIND,
                                              message="one of the keys this removal was given")
                                  for key in keys)
            session.add(job)
            session.commit()
            job_id, coll_id = job.id, coll.id
            # Registered before it takes the lease, and left after it lets it go, as an index
            # job is: an index job of this process queues behind it, and one that read the
            # lease in between was refused ("job N ... is still indexing", ``_refuse_other_writer``).
            with _REGISTRY_LOCK:
                _ACTIVE_JOBS.add(job_id)
                _REMOVING[name] = job_id
            try:
                try:
                    # As an index job starts: the store's folder first (another process holding
                    # it open is found before the lease is taken), then the lease.
                    self.hold_store_collection(name)
                    try:
                        self.take_lease(session, coll, job)
                    except Exception:
                        self.store.release(name)
                        raise
                except Exception:
                    session.rollback()
                    self._forget_unstarted(session, job_id)
                    raise
            except BaseException:
                with _REGISTRY_LOCK:
                    _ACTIVE_JOBS.discard(job_id)
                    if _REMOVING.get(name) == job_id:
                        del _REMOVING[name]
                raise
            try:
                report = self._remove_held(session, coll, job, keys)
                report.skipped_keys = list(skipped or [])
                return report
            except BaseException as e:
                session.rollback()
                with contextlib.suppress(SQLAlchemyError):
                    failed = session.get(md.IndexJob, job_id)
                    if failed is not None and failed.state == "running":
                        # Ctrl-C or an exit stops it as it stops an index job: interrupted.
                        stopped = not isinstance(e, Exception)
                        failed.state = "interrupted" if stopped else "failed"
                        failed.finished_at = md.utcnow()
                        why = (f"stopped ({type(e).__name__})" if stopped
                               else self.failure_message(e))
                        failed.message = f"{why}; {removal_rerun_hint(failed)}"
                        session.commit()
                raise
            finally:
                try:
                    try:
                        self.store.release(name)
                    finally:
                        leases.release(session, coll_id, job_id)
                finally:
                    with _REGISTRY_LOCK:
                        _ACTIVE_JOBS.discard(job_id)
                        if _REMOVING.get(name) == job_id:
                            del _REMOVING[name]

    def _removal_collection(self, session: Session, name: str) -> md.Collection:
        """The collection a removal writes, or the refusal: unknown, in another store, or a
        job (of any process) writing it."""
        check_collection_text(name)
        coll = md.get_collection(session, name)
        if coll is None:
            known = ", ".join(c.name for c in md.list_collections(session)) or "none"
            raise NotFoundError(f"unknown collection {name!r} (known: {known}); see "
                                "`facet collections`", param="collection")
        if coll.backend != self.store.backend:
            # Its points are in a store this process does not open: removing only the rows
            # would leave them searchable there.
            from app.services.collections import backend_mismatch

            raise ConflictError(f"collection {name!r} is not in the vector store in use: "
                                + backend_mismatch(name, coll.backend, self.store.backend)
                                + "; nothing was removed", param="collection")
        current = leases.live_holder(session, coll.id)
        if current is not None:  # (a job that recorded its end lets go at once: waited for)
            current = leases.settled_holder(self.sessions, coll.id)
        if current is not None:
            raise ConflictError(self.one_writer_message(name, current) + "; nothing was "
                                "removed", param="collection")
        return coll

    def _remove_held(self, session: Session, coll: md.Collection, job: md.IndexJob,
                     keys: list[str]) -> RemoveReport:
        """Remove the documents ``keys`` of ``coll``, whose lease ``job`` holds, as ``_sync``
        removes those gone from a source: the chunks' points, the store's document entries,
        a flush, then the metadata rows."""
        job.state, job.started_at = "running", md.utcnow()
        session.commit()
        # Read again under the lease: a document another writer removed in the meantime is gone
        # already (what the caller asked for), and is not listed as removed here.
        found = md.documents_by_key(session, coll.id, keys)
        rows = [found[k] for k in keys if k in found]
        points = self._points_of(session, [r.id for r in rows])
        t0 = time.perf_counter()
        with _store_errors():
            exists = bool(rows) and self.store.collection_exists(coll.name)
            # A large file a job stopped within (read in pieces, ``pending``) has points and no
            # chunk rows yet, or rows of its last version: its points are counted in the store,
            # where the delete by its key finds them (its removal said "0 chunks" of the 2,304
            # points it deleted; the API exploration of the third session of 2026-12-07).
            unlisted = {r.id: self.store.count(coll.name, {DOC_ID_FIELD: r.key}) for r in rows
                        if exists and r.status in PARTIAL}
            removed = [RemovedDocument(r.key, r.source, r.status,
                                       unlisted.get(r.id, len(points.get(r.id, []))),
                                       _exists(r.source)) for r in rows]
            if exists:
                self.store.delete(coll.name, [p for r in rows for p in points.get(r.id, [])])
                self.store.delete_documents(coll.name, [r.key for r in rows])
                self.store.flush()
        job.store_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        md.delete_documents(session, rows)
        job.metadata_s = time.perf_counter() - t0
        job.docs_deleted = len(rows)
        # The staged uploads go before the removal is committed (what it deletes of them is
        # read in its own transaction): deleted after it, a process killed in between left
        # the file in the collection's upload folder, which every upload job indexes whole,
        # and the next upload brought the erased document back, with nothing left to say it.
        # Killed now, the removal is not committed and runs again; its files are gone already.
        deleted = self._delete_staged(session, coll, removed)
        job.state, job.finished_at = "completed", md.utcnow()
        job.message = (removal_message(removed) if removed else
                       "nothing removed: the documents were removed by another job meanwhile")
        if deleted:
            job.message += (f"; {plural(deleted, 'uploaded file')} deleted from the collection's "
                            "upload folder with them")
        session.commit()
        self._mark_completed_removals(session, coll, job, keys)
        return RemoveReport(job.id, coll.name, removed, len(removed),
                            sum(d.chunks for d in removed))

    @staticmethod
    def _mark_completed_removals(session: Session, coll: md.Collection, job: md.IndexJob,
                                 keys: list[str]) -> None:
        """Earlier removals of ``coll`` that stopped part-way (Ctrl-C, a failure) and whose
        documents ``job`` (completed, of ``keys``) removed, the last of them: their message,
        which asked to run them again, says that job completed them instead (a job stopped by
        SIGTERM said so already, "job 11 ran the same removal again"; one stopped by Ctrl-C
        went on asking for the rerun that was made)."""
        J = md.IndexJob
        try:
            stopped = session.scalars(select(J).where(
                J.collection_id == coll.id, J.id < job.id, J.state.in_(("interrupted", "failed")),
                J.source.startswith(REMOVAL_PREFIX, autoescape=True))
                .order_by(J.id.desc()).limit(STOPPED_REMOVALS_READ)).all()
            done = set(keys)
            changed = False
            for old in stopped:
                message = old.message or ""
                hints = [f"; {removal_rerun_hint(old, started=ran)}" for ran in (True, False)]
                hint = next((h for h in hints if message.endswith(h)), None)
                if hint is None:
                    continue
                named = removal_keys(old) or [
                    (old.source or "").removeprefix(REMOVAL_PREFIX)]
                if done.isdisjoint(named) or md.documents_by_key(session, coll.id, named):
                    continue  # not this job's, or documents of it are still there
                what = (f"job {job.id} ran the same removal again" if set(named) == done else
                        f"completed by job {job.id}, which removed the last of its documents")
                old.message = message[:-len(hint)] + f"; {what}"
                changed = True
            if changed:
                session.commit()
        except SQLAlchemyError as e:  # a message only: the removal is done
            session.rollback()
            logger.warning("job %d: the removals it completed not marked: %s", job.id, e)

    def _delete_staged(self, session: Session, coll: md.Collection,
                       removed: list[RemovedDocument]) -> int:
        """Delete the files of ``removed`` (their rows deleted in ``session``, not committed
        yet) that are uploads staged in Facet's own folder for ``coll``
        (``Facet.upload_folder``: ``DATA_DIR/uploads/NAME``): every upload job indexes that
        folder whole, so a removed upload came back with the next upload, and no UI or API
        user can delete a file there. A file outside that folder is never
        touched; nor is a staged record file (jsonl, csv) while other records of it are still
        indexed (deleting it would not remove them: they stay until a sync of the folder).
        Each one deleted is marked (``source_deleted``, ``source_exists`` False); how many
        files were deleted."""
        try:
            folder = upload_folder_path(self.settings.data_dir, coll.name).resolve()
        except (OSError, ValueError, RuntimeError):
            return 0
        if not folder.is_dir():
            return 0
        staged: dict[str, Path] = {}
        for d in removed:
            if not d.source_exists or d.source in staged:
                continue
            try:
                # Its folder's links resolved, not its own: a document keyed by a link outside
                # the folder to a file staged in it removed that staged file (unlink removes a
                # staged link itself, never its target).
                named = Path(d.source)
                path = named.parent.resolve() / named.name
            except (OSError, ValueError, RuntimeError):
                continue
            if path != folder and path.is_relative_to(folder) and path.is_file():
                staged[d.source] = path
        if not staged:
            return 0
        D = md.Document
        sources = list(staged)
        kept: set[str] = set()
        for start in range(0, len(sources), 500):  # stay under SQL parameter limits
            kept.update(str(s) for s in session.scalars(select(D.source).where(
                D.collection_id == coll.id, D.source.in_(sources[start:start + 500])).distinct()))
        deleted = 0
        for source, path in staged.items():
            if source in kept:  # records of it are still indexed
                continue
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            except OSError as e:  # the removal is done; the file is said to be still there
                logger.warning("could not delete the staged upload %s: %s", path, e)
                continue
            deleted += 1
            for d in removed:
                if d.source == source:
                    d.source_deleted, d.source_exists = True, False
        return deleted

    @staticmethod
    def _points_of(session: Session, document_ids: list[int]) -> dict[int, list[str]]:
        """The store point ids of each document's chunks."""
        C = md.Chunk
        out: dict[int, list[str]] = {}
        for start in range(0, len(document_ids), 500):  # stay under SQL parameter limits
            part = document_ids[start:start + 500]
            for doc_id, pid in session.execute(select(C.document_id, C.point_id).where(
                    C.document_id.in_(part))).all():
                out.setdefault(int(doc_id), []).append(str(pid))
        return out

    @staticmethod
    def _named_keys(session: Session, coll: md.Collection, wanted: list[str],
                    base: Path | None, skipped: list[str] | None = None) -> list[str]:
        """The document keys ``wanted`` names, in order: each as given, or, where ``base`` is
        set and it is no key, the absolute path it names from there (files are keyed by their
        absolute paths). ``skipped``: a list takes the keys that name no document (as given)
        instead of their refusal, but for a record file's path whose records are indexed.

        Raises:
            NotFoundError: keys that name no document of ``coll`` (all of them, with what they
                may have meant); nothing is removed.
        """
        rows = md.documents_by_key(session, coll.id, wanted)
        candidates = {k: alts for k in wanted if k not in rows
                      and (alts := [p for p in path_keys(k, base) if p != k])}
        if candidates:
            rows.update(md.documents_by_key(session, coll.id,
                                            {p for alts in candidates.values() for p in alts}))
        # Each the first of its paths that is a key (else the literal one, for the hints).
        paths = {k: next((p for p in alts if p in rows), alts[0])
                 for k, alts in candidates.items()}
        keys: list[str] = []
        unknown: list[str] = []
        for k in wanted:
            key = k if k in rows else paths.get(k)
            if key is not None and key in rows:
                keys.append(key)
            else:
                unknown.append(k)
        # A jsonl/csv file named where its records are the documents: say so.
        named = {k: [k, *([paths[k]] if k in paths else [])] for k in unknown}
        sources = (md.document_keys_under(session, coll.id,
                                          [s for alts in named.values() for s in alts], None)
                   if unknown else {})
        files = {k for k, alts in named.items()
                 if any(source in alts for source in sources.values())}
        if skipped is not None:
            # (a record file is no gone document: its records are still there)
            skipped.extend(k for k in unknown if k not in files)
            unknown = [k for k in unknown if k in files]
            named = {k: alts for k, alts in named.items() if k in files}
        if not unknown:
            keys = list(dict.fromkeys(keys))  # (a key given twice, as a path and as itself)
            IndexService._refuse_record_files(session, coll, keys)
            return keys
        hints = []
        for k, alts in named.items():
            records = sorted(key for key, source in sources.items() if source in alts)
            if records:
                shown = ", ".join(repr(r) for r in records[:3])
                hints.append(f"{k!r} is the file of {plural(len(records), 'record')} (keys "
                             f"{shown}{', ...' if len(records) > 3 else ''}): name those keys, or "
                             "delete the records from the file and index it with --sync")
        shown = ", ".join(repr(k) for k in unknown[:10])
        more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
        raise NotFoundError(
            f"{'no document' if len(unknown) == 1 else 'no documents'} {shown}{more} in "
            f"collection {coll.name!r}; nothing was removed. Keys are as `facet search` and "
            "`facet jobs ID` show them: a file's absolute path, a record's id"
            + "".join(f"; {h}" for h in hints), param="key")

    @staticmethod
    def _refuse_record_files(session: Session, coll: md.Collection, keys: list[str]) -> None:
        """Refuse keys that are a record file's own entry (the error of a failed read of the
        file, keyed by its path) while records of that file, not named too, are still indexed:
        removing the entry alone said "removed 1 document" and left every record searchable.
        Refused as naming the file is where it has no entry (``_named_keys``): the same words,
        the same error, whether or not a failed run recorded one.

        Raises:
            NotFoundError: such keys (param ``key``), each with its record keys; nothing is
                removed.
        """
        D = md.Document
        named = set(keys)
        records: dict[str, list[str]] = {}
        for start in range(0, len(keys), 500):  # stay under SQL parameter limits
            part = keys[start:start + 500]
            for key, source in session.execute(select(D.key, D.source).where(
                    D.collection_id == coll.id, D.source.in_(part), D.key != D.source)).all():
                if str(key) not in named:
                    records.setdefault(str(source), []).append(str(key))
        if not records:
            return
        hints = []
        for path in (k for k in keys if k in records):
            found = sorted(records[path])
            shown = ", ".join(repr(r) for r in found[:3])
            hints.append(f"{path!r} is the file of {plural(len(found), 'record')} (keys "
                         f"{shown}{', ...' if len(found) > 3 else ''}): name those keys, or "
                         "delete the records from the file and index it with --sync")
        raise NotFoundError(
            f"{'a key names' if len(hints) == 1 else 'keys name'} a record file, not a document, "
            f"in collection {coll.name!r}; nothing was removed. Keys are as `facet search` and "
            "`facet jobs ID` show them: a file's absolute path, a record's id"
            + "".join(f"; {h}" for h in hints), param="key")

    def _forget_unstarted(self, session: Session, job_id: int) -> None:
        """Remove the row of a removal refused before it started (the store busy, the lease
        taken): its caller was told, and `facet jobs` listed a failed job that did nothing."""
        try:
            J = md.IndexJob
            session.execute(delete(md.JobError).where(md.JobError.job_id == job_id))
            session.execute(delete(J).where(J.id == job_id, J.started_at.is_(None)))
            session.commit()
        except SQLAlchemyError as e:  # the refusal is what the caller is told
            session.rollback()
            logger.warning("could not remove refused job %d: %s", job_id, e)

    def documents_from(self, collection: str, source: Path) -> int:
        """How many documents of ``collection`` were read from ``source`` (a file, or anything
        under a folder of that path): what a sync of it removes where it no longer exists."""
        check_collection_text(collection)
        with self.sessions() as session:
            coll = md.get_collection(session, collection)
            return 0 if coll is None else _documents_from(session, coll.id, source)

    # ------------------------------------------------------------ preparation

    def _refuse_orphan(self, name: str) -> None:
        """Refuse to create ``name`` over store vectors that no collection row owns (this
        database lost, or another database's: a FACET_DATABASE_URL switched or mistyped over
        the same store). Taken over, they answered its searches with documents it never
        indexed, unremovable; dropped, another database's collection lost its vectors.

        Raises:
            ConflictError: the store holds such vectors (deleting the collection removes them).
        """
        with _store_errors():
            if self.store.collection_exists(name):
                # A backup of the embedded folder that copied facet.db alone while a server had
                # it open lost its newest writes to the -wal file (docs/deploy.md).
                copy = (", a copy of facet.db made without its facet.db-wal while a process had "
                        "it open" if self.store.backend == "edge" and self.settings.database_url is None
                        else "")  # (facet.db is no file of a FACET_DATABASE_URL's database)
                from app.services.collections import owned_advice

                owned = owned_advice(self.settings, name)
                if owned is not None:  # (`facet delete` refuses those: do not advise it)
                    raise ConflictError(
                        f"the vector store already holds a collection {name!r} that this "
                        f"metadata database does not know: {owned}", param="collection")
                raise ConflictError(
                    f"the vector store already holds a collection {name!r} that this metadata "
                    f"database does not know (its own database lost{copy}, or another "
                    f"database's over the same store?): index into another name, or delete "
                    f"{name!r} (which removes those vectors) and index again",
                    param="collection")  # (as search and cluster name it)

    def _collection_for(self, session: Session, name: str, embedder: Embedder,
                        options: IndexOptions, spec: str) -> tuple[md.Collection, bool]:
        """Collection ``name``, created (committed) if there is none yet; and whether this call
        created it (not when another process created it a moment before)."""
        for value, what in ((options.chunk_size, "chunk size"), (options.batch_chunks, "batch_chunks")):
            if value is not None and (isinstance(value, bool) or value < 1):
                # 0 read as "unset", then as a mismatch with the collection it had just created.
                raise InvalidRequestError(f"{what} must be at least 1, got {value}",
                                          param="chunk_tokens" if what == "chunk size" else None)
        coll = md.get_collection(session, name)
        if coll is None:
            refuse_case_twin(session, name)
            self._refuse_orphan(name)
            size = options.chunk_size or self.settings.chunk_tokens
            # Not clamped to size - 1 any more (a one-token stride, the index 100 times larger).
            overlap = (options.chunk_overlap if options.chunk_overlap is not None
                       else self.settings.chunk_overlap_for(size))
            try:
                ChunkingConfig(size, overlap)
            except ValueError as e:  # (the overlap's, or the setting's where none was given)
                raise InvalidRequestError(
                    str(e), param="chunk_overlap" if options.chunk_overlap is not None else None) from e
            budget_of = getattr(embedder, "document_budget", None)
            budget = budget_of() if callable(budget_of) else None
            if isinstance(budget, int) and budget > 0 and size > budget:
                # The shipped causal checkpoints serve 96 tokens, the default chunk is 200:
                # most of every chunk never reaches its vector. The job's warning counts the
                # chunks cut (``cut_message``, the same advice); this says it before any encode.
                max_spec = max_length_spec(embedder, spec)
                option = f", or load it as {max_spec}" if max_spec else ""
                logger.warning("chunks of %d tokens are longer than %s reads whole (%d tokens of "
                               "text): the encoder reads only the start of each; for whole chunks "
                               "create the collection with --chunk-tokens %d or less%s", size,
                               embedder.name, budget, max(1, budget - CHUNK_MARGIN), option)
            try:
                validate_new_collection_name(name)
            except StoreError as e:
                raise InvalidRequestError(str(e), param="collection") from None
            try:
                coll = md.create_collection(session, name, backend=self.store.backend,
                                            chunk_size=size, chunk_overlap=overlap,
                                            tokenizer=embedder.name)
                session.commit()
                _back_out_of_a_case_race(session, coll)
                return coll, True
            except IntegrityError:
                # Another process created it a moment ago: take theirs (and its chunking).
                session.rollback()
                coll = md.get_collection(session, name)
                if coll is None:
                    raise ConflictError(f"collection {name!r} was created and deleted by other "
                                        "processes at this moment; try again") from None
        return coll, False

    def _check_collection(self, session: Session, coll: md.Collection, embedder: Embedder,
                          options: IndexOptions, spec: str) -> bool:
        """Refuse options or an embedder that ``coll`` cannot take; record the embedder on it.
        Returns whether this call added the embedder to the collection (committed)."""
        name = coll.name
        if coll.chunk_size is not None:
            for value, current, what, option in (
                    (options.chunk_size, coll.chunk_size, "chunk size", "chunk_tokens"),
                    (options.chunk_overlap, coll.chunk_overlap, "overlap", "chunk_overlap")):
                if value is not None and value != current:
                    raise InvalidRequestError(
                        f"collection {name!r} was created with {what} {current}; chunking is fixed "
                        "per collection: drop the option, or index into a new collection",
                        param=option)
        if coll.backend == self.store.backend:
            # (Else its run moves it here, dropping this store's copy: ``ensure_store_collection``.)
            self._check_store(name, embedder)
        else:
            with _store_errors():
                self._refuse_server_namesake(coll)
        if isinstance(embedder, _Deferred) and any(e.name == embedder.name for e in coll.embedders):
            return False  # recorded already; the model is checked against it when a run loads it
        identity = self.ctx.embedders.identity(embedder)
        check_same_embedder(coll, embedder, identity, spec=spec)
        added = not any(e.name == embedder.name for e in coll.embedders)
        try:
            # What loads this embedder again (searches that name none, workers' index chunks):
            # the spec as given, a checkpoint's path made absolute.
            from embedders.registry import findable, portable_spec  # (torch: loaded, the model)

            source = portable_spec(spec)
            row = md.ensure_collection_embedder(session, coll, embedder.name, int(embedder.dim),
                                                identity, source=source)
            if row.source != source and _sets_added_options(row.spec, source, row.identity):
                # The recorded spec loads the embedder with an option added since the collection
                # was indexed, set otherwise now (InstEmb's ``text_quotes``), and this spec reads
                # as the vectors were made (checked above): what loads it from now on, as the
                # refused search said ("record it once").
                logger.info("collection %r: embedder %r now loads as %s (was %s)",
                            coll.name, embedder.name, source, row.spec)
                row.source = source
            elif row.source != source and not findable(row.spec):
                # The checkpoint moved (a folder renamed, another machine): the same model
                # (checked above) from its new path is what loads it now. Kept, every search
                # that named no embedder failed on the old path for good.
                logger.info("collection %r: embedder %r now loads from %s (was %s, gone)",
                            coll.name, embedder.name, source, row.spec)
                row.source = source
            session.commit()
        except IntegrityError:
            session.rollback()  # added by a racing process: theirs is the same row
            session.refresh(coll)
            return False
        return added

    def _forget_unwritten_embedder(self, collection: str, name: str | None,
                                   job_id: int | None = None) -> None:
        """Take embedder ``name`` (added to ``collection`` for job ``job_id`` by its
        ``prepare``) off the collection again where the job ended before any document got a
        vector of it: refused (another process holding the store, the disk too full), failed
        or interrupted before its first batch. Kept where some document has its vectors, where
        it is the collection's only embedder (the collection goes, or stays, with it), and
        where another queued or running job of the collection writes it. The store is as the
        job left it: a refused job touched nothing; one stopped later may have declared the
        (empty) vector in it, which the same embedder takes again."""
        if not name:
            return
        D, V, J = md.Document, md.DocumentVector, md.IndexJob
        try:
            with self.sessions() as session:
                coll = md.get_collection(session, collection)
                if coll is None or len(coll.embedders) < 2:
                    return
                row = next((e for e in coll.embedders if e.name == name), None)
                if row is None:
                    return
                written = session.scalar(select(func.count()).select_from(V).join(
                    D, D.id == V.document_id).where(D.collection_id == coll.id, V.embedder == name))
                others = session.scalar(select(func.count()).select_from(J).where(
                    J.collection_id == coll.id, J.id != (job_id if job_id is not None else -1),
                    J.embedder == name, J.state.in_(md.UNENDED_STATES)))
                if written or others:
                    return
                coll.embedders.remove(row)
                session.commit()
                logger.debug("collection %r: embedder %r taken off again, its job %s wrote "
                             "none of its vectors", collection, name, job_id)
        except (SQLAlchemyError, OSError) as e:  # what the caller is told stands
            # The database server out of reach: the caller's error says it (and how to resume,
            # which writes the embedder's vectors); this was a three-line SQLAlchemy warning
            # before that one line, naming a clean-up that had nothing to do (the multi-process
            # exploration of the fourth session of 2026-12-07). SQLite's own refusals (locked,
            # read-only) still warn: the embedder stays recorded with no vectors.
            said = as_domain_error(e)
            logger.log(logging.DEBUG if _database_gone(e, chain=True) is not None else logging.WARNING,
                       "could not take embedder %r off collection %r: %s", name, collection,
                       said or str(e).splitlines()[0])

    def _own_folders(self) -> tuple[Path, ...]:
        """The folders a walk of a source leaves out: this process's data folder (its vector
        store's files and the collections' staged uploads were indexed as documents of a
        folder that held it, `facet index ~/work` with the data in ~/work/facet-data)."""
        return (self.ctx.settings.data_dir,)

    def _embedder_for(self, collection: str, spec: str) -> Embedder:
        """The embedder ``spec`` of a run into ``collection``: the model, loaded now if need be,
        or, where the model is not loaded in this process and the collection already records
        this very spec, a ``_Deferred`` that loads it once the run has something to encode.

        Raises:
            UnknownModelError, DataError: as ``EmbedderCache.get``.
        """
        model = self.ctx.embedders.peek(spec)
        if model is not None:
            return model
        recorded = self._recorded_embedder(collection, spec)
        if recorded is None:
            return self.ctx.embedders.get(spec)
        deferred = _Deferred(self.ctx.embedders, spec, *recorded, collection=collection)
        place = expand_user(spec.split("[", 1)[0])
        if len(place.parts) > 1 and not place.exists():
            # A checkpoint moved or deleted since: said now, as a foreground run says it when
            # it loads (`--background` and POST /jobs took the job and failed it seconds later).
            deferred.load()  # (raises the collection's own message)
        return deferred

    def _recorded_embedder(self, collection: str, spec: str) -> tuple[str, int] | None:
        """The name and width ``collection`` records for ``spec`` (the same spec, loading the
        same name), read without loading the model; None if it records no such embedder."""
        with self.sessions() as session:
            coll = md.get_collection(session, collection)
            recorded = {e.spec: (e.name, int(e.dim)) for e in coll.embedders} if coll else {}
        if not recorded:
            return None
        if spec in recorded:
            # What the collection recorded, as given (a registered name, an absolute path): no
            # need for the registry, which imports torch (seconds); `_Deferred.load` checks
            # the name it loads.
            return recorded[spec]
        from embedders.errors import EmbedderError
        from embedders.registry import portable_spec, saved_name

        try:
            name, portable = saved_name(spec), portable_spec(spec)
        except EmbedderError:  # unknown, or unreadable: loading it says why
            return None
        hit = recorded.get(portable)
        return hit if hit is not None and hit[0] == name else None

    def _check_store(self, name: str, embedder: Embedder) -> None:
        """Refuse an embedder the collection's store cannot take, without writing anything."""
        with _store_errors():
            if not self.store.collection_exists(name):
                return
            sizes = self.store.vector_sizes(name)
        have = sizes.get(embedder.name)
        if have is not None and have != int(embedder.dim):
            raise InvalidRequestError(
                f"collection {name!r} has vector {embedder.name!r} of size {have}, not "
                f"{embedder.dim}; use another collection for this embedder")
        if have is None and self.store.backend != "edge":
            raise InvalidRequestError(
                f"collection {name!r} has no vector {embedder.name!r} and the "
                f"{self.store.backend} backend cannot add one to an existing collection; index "
                "this embedder into a new collection, or use the edge backend "
                "(FACET_VECTOR_BACKEND=edge)")

    def _refuse_server_namesake(self, coll: md.Collection) -> None:
        """Refuse to move ``coll`` (recorded in another store) onto a Qdrant server that holds a
        collection of its name: a server's collections may be another data folder's or
        application's, and the move dropped it (verification, 2026-11-30: the other folder's
        searches then returned this folder's documents). The embedded stores' folders are this
        data folder's own, where such a copy is this collection's, stale, and is dropped.

        Raises:
            ConflictError: the server holds a collection of that name.
        """
        if self.store.backend != "server" or not self.store.collection_exists(coll.name):
            return
        from app.services.collections import store_place

        raise ConflictError(
            f"collection {coll.name!r} was indexed into {store_place(coll.backend, coll.name)}, "
            f"and the Qdrant server in use already holds a collection {coll.name!r}, which may "
            "be another data folder's or application's: it is not replaced; unset "
            "FACET_QDRANT_URL to use the collection where it is, index into another collection "
            "name, or delete the server's collection first if it is a stale copy of this one",
            param="collection")

    def _refuse_wrong_folder(self, session: Session, coll: md.Collection) -> None:
        """Refuse to write ``coll`` again into a data folder that may not be its own
        (``wrong_data_folder``): its documents were "written again" there, a second copy, and
        the other collections of the database, their folders still missing beside this one's,
        read "`facet delete NAME` removes it" once more (the verification round of the sixth
        session of 2026-12-05)."""
        if coll.backend != self.store.backend or not md.count_chunks(session, coll.id):
            return
        why = wrong_data_folder(session, self.ctx.settings, self.store, coll)
        if why is not None:
            raise ConflictError(
                f"collection {coll.name!r} has no store folder here, and {why}; set "
                "FACET_DATA_DIR to that folder (if its vectors are lost, `facet delete "
                f"{shell_word(coll.name)} --force`, then index it again); nothing was indexed")

    def ensure_store_collection(self, session: Session, coll: md.Collection, job: Any,
                                embedder: Embedder) -> None:
        """Create the collection's vectors in the store (the lease holder does this), with the
        term vectors of lexical and hybrid search (added to an edge collection without them).

        A store that had no such collection although documents of it are indexed (its folder
        removed, or the metadata restored apart from it) had every document "unchanged" for
        ever and searches empty: they are marked to be written again, with a warning on
        ``job`` (this run writes those under its source).

        A collection indexed into another store (``Collection.backend``: FACET_VECTOR_BACKEND or
        FACET_QDRANT_URL switched since) moves to this one: whatever copy of it this store holds
        is dropped (an earlier move's, stale), every document is written again as above, and
        the row records this store. An index run under another store wrote a second copy while
        the row kept the first store; switching back, every document was "unchanged" and
        searches served the first, stale copy.
        """
        moved_from = coll.backend if coll.backend != self.store.backend else None
        with _store_errors():
            if moved_from is not None:
                self._refuse_server_namesake(coll)
                self.store.drop_collection(coll.name)  # (this data folder's own: a stale copy)
            existed = self.store.collection_exists(coll.name)
            if not existed and moved_from is None:
                self._refuse_wrong_folder(session, coll)
            here = store_folder_here(self.ctx.settings)
            if self.store.backend == "edge" and coll.store_folder != here:
                # Where its vectors are (``wrong_data_folder``): recorded by the run that makes
                # or finds them here (a folder moved since, a collection of an older Facet);
                # committed with the job's rows.
                coll.store_folder = here
            # Every embedder of the collection: a store collection recreated with this one's
            # vector alone refused the points its other embedders' vectors go with.
            vectors = {e.name: int(e.dim) for e in coll.embedders}
            self.store.ensure_collection(coll.name, {**vectors, embedder.name: int(embedder.dim)},
                                         lexical=True)
        D = md.Document
        where: ColumnElement[bool]
        stale: list[str] = []
        if existed:
            lost_ids, stale = self._compare_points(session, coll)
            if stale:
                with _store_errors():
                    self.store.delete(coll.name, stale)
            where = D.id.in_(lost_ids)
        else:
            where = D.collection_id == coll.id
        lost = int(session.scalar(select(func.count()).select_from(D).where(
            where, D.status == "indexed")) or 0)
        if moved_from is not None:
            coll.backend = self.store.backend
            # The collection's other sources, as its jobs name them: their documents stay
            # pending (unsearchable) until indexed again; the warning said "the other sources"
            # without naming them.
            mine = getattr(job, "source", None)
            others = sorted({str(s) for s in session.scalars(
                select(md.IndexJob.source).where(md.IndexJob.collection_id == coll.id).distinct())
                if s and s != mine})
            again = ("; index its other sources again too, their documents unsearchable until "
                     "then: " + ", ".join(f"facet index {shell_word(s)} -c {shell_word(coll.name)}"
                                          for s in others[:3])
                     + (f" and {len(others) - 3} more (facet jobs -c {shell_word(coll.name)})"
                        if len(others) > 3 else "")) if others else ""
            moved = (f"collection {coll.name!r} moves from {store_place(moved_from, coll.name)} "
                     f"to {store_place(self.store.backend, coll.name)}, the store in use: every "
                     f"document is encoded again ({plural(lost, 'indexed document')}: those of "
                     f"this run's source now{again}); the old copy "
                     f"stays in {store_place(moved_from, coll.name)}, unused, until removed "
                     "(docs/deploy.md: switching the vector store)")
            logger.warning("%s", moved)
            job.errors.append(md.JobError(document_key=coll.name, kind="warning", message=moved))
            if lost:
                session.execute(update(D).where(where, D.status == "indexed")
                                .values(status="pending"))
                session.execute(delete(md.DocumentVector).where(
                    md.DocumentVector.document_id.in_(select(D.id).where(where))))
            session.commit()
            return
        if not lost and not stale:
            return
        session.execute(update(D).where(where, D.status == "indexed").values(status="pending"))
        session.execute(delete(md.DocumentVector).where(md.DocumentVector.document_id.in_(
            select(D.id).where(where))))
        parts = ([f"lacked the points of {plural(lost, 'indexed document')}, written again (those "
                  "of this run's source now; index the other sources again too)"] if lost else [])
        parts += ([f"held {plural(len(stale), 'point')} of documents the database does not have "
                   "(removed or rewritten since, or written after the database was copied), "
                   "deleted"] if stale else [])
        message = (f"the vector store of collection {coll.name!r} {' and '.join(parts)} (its "
                   "store folder and its metadata restored from copies of different times?)"
                   if existed else
                   f"the vector store held nothing of collection {coll.name!r}, whose metadata "
                   f"lists {plural(lost, 'indexed document')} (its store folder removed, or the "
                   "metadata restored apart from it?): they are written again, those of this "
                   "run's source now; index the other sources again too")
        logger.warning("%s", message)
        job.errors.append(md.JobError(document_key=coll.name, kind="warning", message=message))
        session.commit()

    def _compare_points(self, session: Session, coll: md.Collection) -> tuple[list[int], list[str]]:
        """The store's point ids against the metadata's chunks (a store folder restored from an
        older copy under newer metadata: every search missed what was written since, and
        returned what was removed since, for good, each run taking it all as unchanged).

        Returns the indexed documents with a chunk whose point the store lacks, and the store's
        points that no chunk of the collection's documents names (but those of a document being
        written). Ids only, every run (what changed in place since the copy, and a vector of an
        embedder added since, are not seen).
        """
        D, C = md.Document, md.Chunk
        chunks = select(C.point_id, C.document_id, D.status).join(D, C.document_id == D.id).where(
            D.collection_id == coll.id)
        with _store_errors():
            held = self.store.count(coll.name)
            present = {h.id for h in self.store.scroll(coll.name, limit=held + 1,
                                                       with_payload=False)}
        known: set[str] = set()
        lost: set[int] = set()
        for pid, doc, status in session.execute(chunks):
            known.add(pid)
            if status == "indexed" and pid not in present:
                lost.add(doc)
        unknown = sorted(present - known)
        if not unknown:
            return sorted(lost), []
        # A point no chunk names is stale unless its document is still being written (a job
        # stopped between its store write and its metadata's: that document is not "indexed",
        # and the run that writes it again replaces its points; not a restored copy).
        with _store_errors():
            owners = {h.id: str(h.payload.get("doc_id"))
                      for h, _ in self.store.retrieve(coll.name, unknown)}
        statuses = {k: d.status for k, d in
                    md.documents_by_key(session, coll.id, set(owners.values())).items()}
        stale = [pid for pid, key in owners.items() if statuses.get(key, "indexed") == "indexed"]
        return sorted(lost), sorted(stale)

    def hold_store_collection(self, name: str) -> None:
        """Open an existing collection in the store for this writer (``VectorStore.hold``); of
        a new one, check that no other process holds its folder (``VectorStore.check_free``).

        Raises:
            ConflictError: another process has it open.
        """
        with _store_errors():
            if self.store.collection_exists(name):
                self.store.hold(name)
            else:  # a new one: another process holding its folder (making it) is found now too
                self.store.check_free(name)

    def take_lease(self, session: Session, coll: md.Collection, job: md.IndexJob) -> None:
        """Become the collection's single writer for ``job``, or raise the one-writer conflict.

        Unfinished jobs left behind by writers that died are marked ``interrupted``; the
        newest of them with the same source is this job's ``resumed_from``.

        Raises:
            ConflictError: another job holds a live lease.
        """
        current = leases.acquire(session, coll.id, job.id, self.settings.lease_ttl_s)
        if current is not None:
            job.state, job.finished_at = "failed", md.utcnow()
            job.message = self.one_writer_message(coll.name, current)
            session.commit()
            raise ConflictError(job.message)
        with _REGISTRY_LOCK:
            active = set(_ACTIVE_JOBS)
        for old in md.running_jobs(session, coll.id, states=md.UNENDED_STATES):
            if old.id == job.id:
                continue
            if old.state == "queued" and (old.runner == "celery" or old.id in active or (
                    old.host == leases.HOST and leases.pid_alive(old.pid))
                    or old.host not in (None, leases.HOST)):
                continue  # still waiting for its turn
            was = old.state
            old.state = "interrupted"
            old.finished_at = old.finished_at or md.utcnow()
            if is_removal(old):  # no index job resumes a removal, nor is one resumed
                ran = was == "running" or old.started_at is not None
                old.message = ("its process ended without finishing; "
                               + (f"job {job.id} ran the same removal again" if
                                  old.source == job.source
                                  else removal_rerun_hint(old, started=ran)))
            elif old.source == job.source and old.embedder == job.embedder:
                old.message = f"its process ended without finishing; resumed by job {job.id}"
                if was == "running":
                    job.resumed_from = max(job.resumed_from or 0, old.id)
            else:  # another source or embedder: this job does not do its work
                old.message = (f"its process ended without finishing; run `{resume_command(old)}` "
                               f"again to finish it{kept_said(old)}")
        if not job.resumed_from and not is_removal(job):
            self._link_stopped_job(session, coll, job)
        if job.resumed_from:
            # Its state as recorded ("cancelled", "interrupted"): a cancelled job was logged
            # "resuming interrupted job 22".
            resumed = session.get(md.IndexJob, job.resumed_from)
            logger.info("resuming %s job %d as job %d",
                        resumed.state if resumed is not None else "interrupted", job.resumed_from, job.id)
        session.commit()

    @staticmethod
    def _link_stopped_job(session: Session, coll: md.Collection, job: md.IndexJob) -> None:
        """A job stopped by Ctrl-C (or an exit) is ``interrupted`` already and says to run it
        again: the next job of the same source resumes it, and its message then says by which
        job (it kept saying "run ... again to resume" after that run had finished). So is one an
        older Facet recorded ``failed`` for a Ctrl-C (``stopped_before_interrupted_existed``): it
        was resumed unsaid; it is recorded ``interrupted`` now."""
        J = md.IndexJob
        # Jobs that never ran are passed over: a server stopping fails the queued duplicate of
        # its interrupted job ("submit it again"), and that one, the latest, hid the interrupted
        # job from its resume. Any job that ran (a completed one, one resumed already) ends the
        # look back: it covered what came before it.
        never_ran = J.started_at.is_(None) & (
            J.state.in_(("queued", "cancelled")) | ((J.state == "failed") & ~func.coalesce(
                J.message, "").startswith("KeyboardInterrupt")))
        last = session.scalar(select(J).where(J.collection_id == coll.id, J.source == job.source,
                                              J.embedder == job.embedder, J.id < job.id,
                                              ~never_ran)
                              .order_by(J.id.desc()).limit(1))
        # A job cancelled while it ran stopped as an interrupted one does: it is resumed too.
        stopped = ("interrupted", "cancelled")
        if last is None or (last.state not in stopped and not stopped_before_interrupted_existed(last)):
            return
        if session.scalar(select(func.count()).select_from(J).where(J.resumed_from == last.id)):
            return  # resumed already
        job.resumed_from = last.id
        if last.state not in stopped:  # an older Facet's "failed", "KeyboardInterrupt: "
            last.state = "interrupted"
            last.message = f"stopped (Ctrl-C) with {plural(last.docs_indexed, 'document')} indexed"
        # A job cancelled once every document had gone in left only its end to do: the next
        # job finished it.
        done = "finished" if (last.message or "").startswith(CANCELLED_ALL_IN) else "resumed"
        last.message = f"{(last.message or 'stopped').split(';')[0]}; {done} by job {job.id}"

    def _tokenizer_for(self, coll: md.Collection, embedder: Embedder) -> TokenSpans:
        # Chunks are shared by every embedder of a collection, so they are always cut
        # with the tokenizer of the embedder that created it.
        # (Loaded as recorded: by its name alone, a checkpoint that is no registered name, a
        # path, was an "unknown embedder" to every embedder added after it.)
        owner = embedder if coll.tokenizer == embedder.name else self.ctx.embedders.get(
            next((e.spec for e in coll.embedders if e.name == coll.tokenizer), coll.tokenizer))
        tokenizer = owner.tokenizer if isinstance(owner, HasTokenizer) else None
        if tokenizer is None:
            logger.warning("%s has no tokenizer; chunking on whitespace", owner.name)
            return whitespace_spans
        return tokenizer_spans(tokenizer)

    def _start_job(self, session: Session, coll: md.Collection, source: str,
                   embedder: str, runner: str, text_column: str | None = None,
                   sync: bool | None = None, plan: str | None = None) -> md.IndexJob:
        job = md.IndexJob(collection_id=coll.id, source=source, embedder=embedder,
                          pid=os.getpid(), host=leases.HOST, runner=runner, state="queued",
                          text_column=text_column, sync=sync, plan=plan)
        name = coll.name  # (read before a rollback expires the row)
        session.add(job)
        try:
            session.commit()
        except IntegrityError as e:
            # The collection's row deleted (another process's `facet delete`) between this
            # request's read of it and the job's insert: a 500 "unexpected error
            # (IntegrityError)" with the FOREIGN KEY failure.
            session.rollback()
            if md.get_collection(session, name) is not None:
                raise
            raise ConflictError(f"collection {name!r} was deleted while this job was being "
                                "queued; nothing was indexed: run it again to index into a new "
                                f"{name!r}") from e
        with _REGISTRY_LOCK:
            _ACTIVE_JOBS.add(job.id)
        return job

    # ------------------------------------------------------------------- main

    def _parsed(self, files: list[Path], text_column: str | None = None,
                confine: Sequence[str] | None = None
                ) -> Iterator[ParsedDocument | DocumentError | StreamedDocument | OutsideRoots]:
        """The documents of ``files``; for a confined run (``confine``: its folders) each file
        read only where what is opened lies under them, else one ``OutsideRoots``
        (``parse_under``: the walk's check alone left a race)."""
        max_bytes = int(self.settings.max_document_mb * 2**20)
        stream_over = int(self.settings.stream_document_mb * 2**20)
        if confine is None:
            for path in files:
                yield from parse_file(path, max_bytes=max_bytes, text_column=text_column,
                                      stream_over_bytes=stream_over)
            return
        allowed = real_paths(confine)
        for path in files:
            yield from parse_under(path, allowed, max_bytes=max_bytes, text_column=text_column,
                                   stream_over_bytes=stream_over)

    def _run(self, session: Session, coll: md.Collection, job: md.IndexJob, report: IndexReport,
             files: list[Path], embedder: Embedder, spec: str, tokenize: TokenSpans,
             chunking: ChunkingConfig, options: IndexOptions,
             progress: Callable[[Progress], None] | None, total: int,
             started: float, heartbeat: leases.Heartbeat | None = None,
             interrupt: _DeferredInterrupt | None = None) -> Seen:
        batch_limit = options.batch_chunks or self.settings.index_batch_chunks
        moves = options.sync is not False  # `--no-sync` keeps what is gone, moved or not
        pending: list[ParsedDocument | DocumentError] = []
        pending_tokens = 0
        seen = Seen(uploads=upload_run(self.settings, job.source, coll.name))
        parsed = self._parsed(files, options.text_column, options.confine)
        shown = [0.0]  # when the job row last showed the encoding step
        asked = [0.0]  # when the encoding step last read whether a cancel was asked

        def encoding(done: int, texts: int, current: str | None = None,
                     fraction: float | None = None, vector: str | None = None) -> None:
            """Between the encoder's pieces of a batch (``current``: of a streamed file's chunk
            batch, ``fraction`` of the way into it; ``vector``: another embedder's vectors of
            the batch): the CLI's bar and the job row (what the UI and the API show) say how
            far; documents count once written. A cancel, Ctrl-C or SIGTERM, or the server
            stopping, is taken here too (the cancel read at most every ``CANCEL_READ_S``),
            raised before anything of the batch is written: one large document is one batch
            (18,725 chunks of a 15 MB csv field), and the job only stopped once all of it was
            encoded and written, minutes after the cancel was answered 200."""
            now = time.perf_counter()
            if interrupt is not None:
                interrupt.check()
            if now - asked[0] >= CANCEL_READ_S:
                asked[0] = now
                if self._cancel_asked(job.id):
                    raise _Cancelled(f"job {job.id} was cancelled")
            stage = (f"encoding chunk {done:,}/{texts:,} of this batch"
                     + (f" for {vector!r}" if vector else ""))
            if now - shown[0] >= ENCODING_SHOWN_S:  # a commit at most every second
                shown[0] = now
                job.message = stage
                session.commit()
            if progress is not None:
                progress(Progress(report.docs_seen - len(pending), max(total, report.docs_seen),
                                  report.chunks_written, now - started, current, fraction, stage))

        def within(key: str) -> Callable[[float], None] | None:
            """Progress inside a streamed file: its chunk batches move the bar."""
            if progress is None:
                return None
            report_progress = progress

            def tell(fraction: float) -> None:
                report_progress(Progress(report.docs_seen, max(total, report.docs_seen),
                                         report.chunks_written, time.perf_counter() - started,
                                         key, fraction))
            return tell
        while True:
            if interrupt is not None:
                interrupt.check()
            t0 = time.perf_counter()
            item = next(parsed, None)
            if isinstance(item, OutsideRoots):  # not read: said as the walk says its own
                job.parse_s += time.perf_counter() - t0
                self.note_outside(job, report, item.path)
                continue
            if item is not None:
                item = storable([item])[0]
            job.parse_s += time.perf_counter() - t0
            if item is not None and item.key in seen.keys:
                # Recorded on the job only: the document row belongs to the first occurrence.
                message = seen.duplicate_message(item.key, item.source)
                report.docs_seen += 1
                report.docs_failed += 1
                report.errors.append((item.key, message))
                job.errors.append(md.JobError(document_key=item.key, kind="error", message=message))
            elif isinstance(item, StreamedDocument):
                seen.add(item)
                if pending:  # what came before it goes first: documents stay in order
                    self.check_cancelled(job.id)
                    self._process_batch(session, coll, job, report, pending, embedder, spec,
                                        tokenize, chunking, moves=moves, heartbeat=heartbeat,
                                        scope=job.source)
                    pending, pending_tokens = [], 0
                self._process_streamed(session, coll, job, report, item, embedder, spec,
                                       tokenize, chunking, batch_limit, heartbeat,
                                       within(item.key), interrupt, encoding, moves=moves)
                job.message = None  # committed with the next batch (or the job's end)
                if progress is not None:
                    progress(Progress(report.docs_seen, max(total, report.docs_seen),
                                      report.chunks_written, time.perf_counter() - started))
                continue
            elif item is not None:
                seen.add(item)
                pending.append(item)
                if isinstance(item, ParsedDocument):
                    # A cheap size estimate (4 chars per token) decides when to flush.
                    pending_tokens += max(1, len(item.text) // 4)
            if item is None or pending_tokens >= batch_limit * chunking.size // 2 or \
                    len(pending) >= batch_limit:
                if pending:
                    if heartbeat is not None and heartbeat.lost:
                        raise lost_lease(job.id, coll.name, self.settings.lease_ttl_s)
                    self.check_cancelled(job.id)
                    self._process_batch(session, coll, job, report, pending, embedder, spec,
                                        tokenize, chunking, encoding=encoding, moves=moves,
                                        heartbeat=heartbeat, scope=job.source)
                    job.message = None  # committed with the next batch (or the job's end)
                    if progress is not None:
                        progress(Progress(report.docs_seen, max(total, report.docs_seen),
                                          report.chunks_written, time.perf_counter() - started))
                pending, pending_tokens = [], 0
            if item is None:
                break
        if report.unread_chunks:
            message = unread_message(embedder.name, report.unread_chunks, report.chunks_written,
                                     "chunks written", list(report.unread_documents))
            report.warnings.append((embedder.name, message))
            job.errors.append(md.JobError(document_key=embedder.name, kind="warning",
                                          message=message))
        self._note_cut(job, report)
        return seen

    @staticmethod
    def _note_moved(job: md.IndexJob, report: IndexReport) -> None:
        """Say, as the sync's removals are, that the run found documents moved: their entries
        at the old paths are gone. Also of a run stopped or failed after some batches (their
        moves are committed; the job only said how many documents it indexed)."""
        if not report.docs_moved:
            return
        message = moved_message(report)
        if not any(k == "moved" for k, _ in report.warnings):
            report.warnings.append(("moved", message))
        try:
            if not any(e.document_key == "moved" and e.kind == "warning" for e in job.errors):
                job.errors.append(md.JobError(document_key="moved", kind="warning", message=message))
        except SQLAlchemyError:  # (a failed run's database may be what failed: the note waits)
            logger.debug("could not note the moves on job %s", job.id, exc_info=True)

    def _process_streamed(self, session: Session, coll: md.Collection, job: md.IndexJob,
                          report: IndexReport, doc: StreamedDocument, embedder: Embedder,
                          spec: str, tokenize: TokenSpans, chunking: ChunkingConfig,
                          batch_limit: int, heartbeat: leases.Heartbeat | None,
                          progress: Callable[[float], None] | None,
                          interrupt: _DeferredInterrupt | None = None,
                          encoding: Callable[..., None] | None = None, moves: bool = True) -> None:
        """The write protocol for one large file, its chunks encoded and written ``batch_limit``
        at a time as the file is read (step 2 runs once per chunk batch; step 3 once, at the
        end), so memory holds one piece of the file and one batch of vectors, and progress
        moves with the chunks, and with the encoder's pieces of each batch (``encoding``, as
        ``_process_batch``'s, told the file and how far into it: the bar stood still through
        each batch's encoding, minutes with an LLM embedder on a CPU)."""
        t0 = time.perf_counter()
        row = md.documents_by_key(session, coll.id, [doc.key]).get(doc.key)
        if row is not None and row.status == "indexed" and row.content_hash == doc.content_hash:
            job.metadata_s += time.perf_counter() - t0
            # Unchanged (or only this embedder's vectors missing): the chunks are in the
            # metadata already, so the batch path handles it without reading the file.
            self._process_batch(session, coll, job, report, [doc], embedder, spec,  # type: ignore[list-item]
                                tokenize, chunking, moves=moves, heartbeat=heartbeat,
                                scope=job.source)
            return
        # The same content indexed at another place: its chunks copy their vectors, batch by
        # batch (``_process_batch``'s donors), its chunks the donor's (the file is not cut
        # again, and a move loads no model).
        names = self._vector_names(coll, embedder)
        donor, mover = self._donors(session, coll, names,  # (a mover only where ``moves``)
                                    [(doc.key, doc.content_hash, row, keyed_by_path(doc.key, doc.source))],
                                    {doc.key})[0]
        if donor is None:
            t1 = time.perf_counter()
            embedder = loaded(embedder)  # (checked before anything is marked or written)
            t0 += time.perf_counter() - t1  # (a load is timed apart: ``_Deferred.load_s``)
        mover = mover if moves else None
        copied_all = donor is not None  # every batch copied the donor's vectors
        report.docs_seen += 1
        before = "new" if row is None else row.status
        old_ids = [] if row is None else [c.point_id for c in row.chunks]
        if row is None:
            row = md.Document(collection_id=coll.id, key=doc.key, source=doc.source,
                              title=doc.title, meta=doc.metadata, status="pending")
            session.add(row)
        else:
            row.status = "pending"
        session.commit()
        job.metadata_s += time.perf_counter() - t0
        if before in PARTIAL:
            self.store.delete_documents(coll.name, [doc.key])  # an earlier write may be partial
        title = doc.title or Path(doc.source).name
        rows: list[md.Chunk] = []
        batch: list[Any] = []
        companions_written: dict[str, Any] = {}  # the other embedders that wrote every batch

        def write(batch: list[Any]) -> None:
            if interrupt is not None:
                interrupt.check()
            if heartbeat is not None and heartbeat.lost:
                raise lost_lease(job.id, coll.name, self.settings.lease_ttl_s)
            self.check_cancelled(job.id)
            t0 = time.perf_counter()
            told: Callable[..., None] | None = None
            if encoding is not None:
                # How far into the file: from where this batch starts to where it ends, in
                # equal shares for this embedder and each other one of the collection.
                was = rows[-1].end / max(1, doc.size) if rows else 0.0
                upto = batch[-1].end / max(1, doc.size)
                shares = [None, *(e.name for e in coll.embedders if e.name != embedder.name)]
                say = encoding

                def within_file(done: int, texts: int, vector: str | None = None) -> None:
                    share = shares.index(vector) if vector in shares else 0
                    part = (share + done / max(1, texts)) / len(shares)
                    say(done, texts, doc.key, min(0.99, was + (upto - was) * part), vector=vector)
                told = within_file
            nonlocal copied_all, embedder
            named = self._reused_vectors(coll, names, [(batch, donor)])[0] if donor else None
            if named is None:
                copied_all = False
                embedder = loaded(embedder)  # (a donor the store lost points of: encoded)
                texts = [c.text for c in batch]
                try:
                    vectors = self._encode_chunks(texts, spec, told)
                except (InvalidRequestError, ModelOutputError) as e:  # refused, or NaN for, some text
                    raise _Refused(str(e)) from e
                self._count_unread(report, embedder, texts, [doc.key] * len(texts))
                self._count_cut(report, embedder, texts, spec)
                companions = self._companion_vectors(coll, embedder, texts, job, report, told,
                                                     keys=[doc.key] * len(texts), part=True)
                companions_written.update(companions)
                named = [self._named_vectors(embedder.name, vec, companions, j)
                         for j, vec in enumerate(vectors)]
            else:
                companions_written.update((name, None) for name in names - {embedder.name})
                report.chunks_reused += len(batch)
            job.encode_s += time.perf_counter() - t0
            if heartbeat is not None and not heartbeat.holds():  # (stalled while it encoded?)
                raise lost_lease(job.id, coll.name, self.settings.lease_ttl_s)
            t0 = time.perf_counter()
            points = [PointRecord(point_id(doc.key, c.number), vecs, {
                "doc_id": doc.key, "source": doc.source, "title": title, "chunk_no": c.number,
                "text": c.text, "start": c.start, "end": c.end, "meta": doc.metadata})
                for c, vecs in zip(batch, named, strict=True)]
            for start in range(0, len(points), 512):
                self.store.upsert(coll.name, points[start:start + 512])
            self.store.flush()
            job.store_s += time.perf_counter() - t0
            rows.extend(md.Chunk(number=c.number, point_id=point_id(doc.key, c.number),
                                 start=c.start, end=c.end, n_tokens=c.n_tokens, text=c.text)
                        for c in batch)
            report.chunks_written += len(batch)
            job.chunks_written = report.chunks_written
            session.commit()  # the job row shows the chunks as they go
            give_back_freed_memory()
            if progress is not None:
                progress(min(0.99, batch[-1].end / max(1, doc.size)))

        t0 = time.perf_counter()
        digest = hashlib.sha256()  # of what this read gives: the hash recorded with its chunks
        try:
            for chunk in (donor_chunks(donor) if donor is not None else
                          stream_chunks(_read_again(doc, digest), tokenize, chunking)):
                batch.append(chunk)
                if len(batch) >= batch_limit:
                    job.parse_s += time.perf_counter() - t0
                    write(batch)
                    batch = []
                    t0 = time.perf_counter()
            job.parse_s += time.perf_counter() - t0
            if batch:
                write(batch)
            if not rows and donor is None:
                raise _Unreadable(f"{doc.key} had no text when it was read for its chunks "
                                  "(emptied while it was indexed?): not indexed")
        except (_Cancelled, _ServerStopping, KeyboardInterrupt, SystemExit):
            # Stopped (between the encoder's pieces, or at a chunk batch) before any chunk of
            # the file went in: its row is put back as ``_process_batch``'s are; once some
            # went in it stays ``pending`` (the next run writes the file again).
            if not rows:
                self._unmark(session, [(row, before)])
            else:
                report.stopped_within = doc.key
            raise
        except (_Refused, _Unreadable) as e:
            # A failed document, as ``_process_batch``'s refused ones: one indexed before keeps
            # that version where nothing of the new one was written yet.
            if before == "indexed" and not rows:
                row.status = before
            said = str(e) if isinstance(e, _Unreadable) else f"{doc.key}: {e}"
            self._withdraw_left_out(job, report, doc.key)  # (it is not written at all)
            if rows:
                # Its batches before the failure are in the store: they were found by searches
                # (and written again by each re-run) while the job said it failed. Removed,
                # with its chunks and vector hashes (an earlier indexed version was written
                # over by them: its points share their ids).
                self.store.delete_documents(coll.name, [doc.key])
                self.store.flush()
                md.replace_chunks_many(session, [(row, [])])
                for name in names:
                    md.clear_vector_hashes(session, [row], name)
                if before == "indexed":
                    said += ("; its earlier indexed version is gone from searches (written "
                             "over part-way)")
            self._record_error(session, coll, job, report, DocumentError(doc.key, doc.source, said),
                               row)
            self._sync_counters(job, report)
            session.commit()
            return
        content_hash = doc.content_hash if donor is not None else doc.read_hash(digest)
        if content_hash != doc.content_hash:
            # Changed between its two reads: its chunks are of the second, recorded under that
            # text's hash, so the next run finds the file as it is now changed and reads it
            # again (under the first read's hash a half-rewritten file stayed half indexed).
            doc.warnings.append(f"{doc.key} changed while it was indexed: what was read is "
                                "indexed, and the next run indexes it again")
        t0 = time.perf_counter()
        new_ids = {c.point_id for c in rows}
        stale = [i for i in old_ids if i not in new_ids]
        if stale:
            self.store.delete(coll.name, stale)
            self.store.flush()
        job.store_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        md.replace_chunks_many(session, [(row, rows)], new={row.id} if before == "new" else ())
        md.set_vector_hashes(session, [(row, content_hash)], embedder.name)
        for name in names - {embedder.name}:
            if (name in companions_written and doc.key not in report.vectors_left_out.get(name, ())
                    and not any(k == companion_key(name) for k, _ in report.warnings)):  # none missed
                md.set_vector_hashes(session, [(row, content_hash)], name)
            else:  # its vectors of this file's points were left out (``_process_batch``'s)
                md.clear_vector_hashes(session, [row], name)
        row.source, row.title, row.meta = doc.source, doc.title, doc.metadata
        row.content_hash, row.status, row.error = content_hash, "indexed", None
        row.warning = "; ".join(doc.warnings) or None
        for w in doc.warnings:
            job.errors.append(md.JobError(document_key=doc.key, kind="warning", message=w))
            report.warnings.append((doc.key, w))
        report.docs_indexed += 1
        # Moved: the old place goes as the new is recorded (its vectors copied, or encoded).
        gone = self._forget_moved(session, report, [] if mover is None else [
            (mover, doc.source, donor is not None and copied_all)])
        self._sync_counters(job, report)
        session.commit()
        job.metadata_s += time.perf_counter() - t0
        self._drop_moved_points(coll, job, gone)

    def _process_batch(self, session: Session, coll: md.Collection, job: Any,
                       report: IndexReport, batch: list[ParsedDocument | DocumentError],
                       embedder: Embedder, spec: str, tokenize: TokenSpans,
                       chunking: ChunkingConfig,
                       finish: Callable[[Session], None] | None = None,
                       encoding: Callable[..., None] | None = None, moves: bool = True,
                       heartbeat: leases.Heartbeat | None = None,
                       scope: str | None = None) -> None:
        """Steps 1-3 of the write protocol for one batch of documents (``moves``: a document
        whose content's old place is gone removes it; ``--no-sync`` keeps it, copying only).

        Args:
            job: the job row, or (a chunk task) any object with the same timing attributes
                and an ``errors`` list.
            finish: run inside step 3's transaction instead of copying the report's counters
                onto ``job`` (a chunk task adds its counts to the shared job row there).
            encoding: told (chunks encoded, chunks to encode) between the encoder's pieces,
                with ``vector=`` the other embedder's name for a companion's vectors.
            heartbeat: the job's lease, checked (``holds``) after the encode, before step 2:
                lost there, nothing of the batch is written and its documents are put back.
            scope: the job's source, which the whole run reads (``_note_replaced_source``).
        """
        t0 = time.perf_counter()
        rows = md.documents_by_key(session, coll.id, [b.key for b in batch])
        vec_hashes = md.vector_hashes(session, [r.id for r in rows.values()], embedder.name)
        items: list[_Item] = []
        for entry in batch:
            report.docs_seen += 1
            row = rows.get(entry.key)
            if isinstance(entry, DocumentError):
                self._record_error(session, coll, job, report, entry, row)
                continue
            digest = entry.content_hash
            # A record whose file was renamed or moved is written again (its source, in the row
            # and the payload, named the old path for ever, and `--sync` of that path then
            # removed records that still exist).
            if row is not None and row.status == "indexed" and row.content_hash == digest and \
                    row.source == entry.source:
                if vec_hashes.get(row.id) == digest:
                    report.docs_skipped += 1
                    # An error a failed run noted beside the indexed version (the file caught
                    # mid-write, empty) is over: the file reads as it was indexed again. It
                    # stayed for good ("facet documents": indexed, "... is empty").
                    row.error = None
                    continue
                items.append(_Item(entry, digest, row, "vectors"))
            else:
                items.append(_Item(_note_replaced_source(entry, row, scope), digest, row, "write"))
        # Content the collection holds already (a file moved or renamed, a copy) copies its
        # vectors: a moved folder was encoded again whole, hours with an LLM embedder. Looked up
        # before step 1 marks the rows about to be written (a record's own row is a donor).
        names = self._vector_names(coll, embedder)
        writes = [it for it in items if it.mode == "write"]
        for it, (donor, mover) in zip(writes, self._donors(
                session, coll, names, [(it.doc.key, it.hash, it.row, keyed_by_path(it.doc.key, it.doc.source))
                                       for it in writes],
                {it.doc.key for it in items}, own_text=True), strict=True):
            it.donor, it.mover = donor, mover if moves else None
            it.recut = donor is None or donor.content_hash != it.hash
        if isinstance(embedder, _Deferred) and any(
                it.mode == "vectors" or it.recut for it in items):
            # Something to encode, or to cut (its own row's vectors reused only if its chunks
            # are the same: cut with the model's tokenizer): the model loads (and is checked)
            # now, before anything is marked, timed apart (``_Deferred.load_s``), not as this
            # batch's parsing or encoding. Documents that all copy a donor's chunks and vectors
            # (a moved folder) need no model at all.
            t1 = time.perf_counter()
            embedder = embedder.load()
            t0 += time.perf_counter() - t1
        # A text its tokenizer reads no token of (combining marks, private-use characters
        # alone) cuts into no chunk: it was "indexed" with 0 chunks, which no search finds. Cut
        # before anything is marked, and failed as an empty file is (its indexed version kept).
        t1 = time.perf_counter()
        for it in [it for it in items if it.mode == "write" and it.recut]:
            it.pieces = chunk_text(it.doc.text, tokenize, chunking)
            if not it.pieces:
                self._record_error(session, coll, job, report, DocumentError(
                    it.doc.key, it.doc.source, f"{it.doc.key} holds no text the embedder's tokenizer "
                    "reads (marks or private-use characters alone): no text to index"), it.row)
                items.remove(it)
        job.parse_s += time.perf_counter() - t1
        t0 += time.perf_counter() - t1
        # Step 1: mark what is about to be written.
        to_write = [it for it in items if it.mode == "write"]
        previous_status: dict[str, str] = {}
        for it in to_write:
            if it.row is None:
                it.row = md.Document(collection_id=coll.id, key=it.doc.key, source=it.doc.source,
                                     title=it.doc.title, meta=it.doc.metadata, status="pending")
                session.add(it.row)
                previous_status[it.doc.key] = "new"
            else:
                previous_status[it.doc.key] = it.row.status
                it.row.status = "pending"
        if isinstance(job, md.IndexJob):  # (a chunk task's tally adds its errors at its end)
            _count_failed(job, report)
        session.commit()
        job.metadata_s += time.perf_counter() - t0

        # Chunk (the chunks of unchanged content come back from the metadata).
        t0 = time.perf_counter()
        for it in items:
            assert it.row is not None
            if it.mode == "write":
                # The same content in the same collection (one tokenizer, one chunking) is cut
                # as its donor was: its chunks are copied, not cut again with the model's
                # tokenizer (which loaded the model for a move that encodes nothing).
                pieces = (it.pieces or [] if it.recut else
                          donor_chunks(it.donor) if it.donor is not None else [])
                it.chunks = [md.Chunk(number=c.number, point_id=point_id(it.doc.key, c.number),
                                      start=c.start, end=c.end, n_tokens=c.n_tokens, text=c.text)
                             for c in pieces]
            else:
                it.chunks = list(it.row.chunks)
        job.parse_s += time.perf_counter() - t0
        t0 = time.perf_counter()  # the donors' vectors, where their chunks are the same
        reusing = [it for it in items if it.donor is not None
                   and len(it.chunks) == len(it.donor.chunks)]
        for it, reused in zip(reusing, self._reused_vectors(
                coll, names, [(it.chunks, it.donor) for it in reusing if it.donor]), strict=True):
            it.reused = reused
        job.store_s += time.perf_counter() - t0
        texts = [c.text for it in items if it.reused is None for c in it.chunks]
        if texts and isinstance(embedder, _Deferred):
            # A donor whose points the store no longer holds all of: encoded after all, and
            # the model checked before it encodes (``_Deferred.load``).
            embedder = embedder.load()  # (between the timed stages: timed apart)
        # No transaction stays open through the encode: loading the chunks above flushed the
        # job's timing, which holds SQLite's write lock until the next commit (the lease's
        # heartbeat and every other writer then waited, and failed, for the whole encode).
        session.commit()

        t0 = time.perf_counter()
        try:
            # Through the encoder (bulk): in a server the model thread serves waiting searches
            # between this batch's pieces.
            try:
                vectors = (self._encode_chunks(texts, spec, encoding)
                           if texts else np.zeros((0, int(embedder.dim)), dtype=np.float32))
            except (InvalidRequestError, ModelOutputError) as e:
                # The embedder refused some text of the batch (a plugin's InvalidInputError),
                # or gave unusable vectors for some (NaN, all zero: ``ModelOutputError``): each
                # document is encoded alone, those it refuses or fails recorded as failed
                # documents with its message, the rest written (it failed the whole job, no
                # document counted; a NaN's message named the text's place in the batch).
                items, vectors = self._encode_apart(session, coll, job, report, items,
                                                    previous_status, spec, e)
                texts = [c.text for it in items if it.reused is None for c in it.chunks]
            self._count_unread(report, embedder, texts,
                               [it.doc.key for it in items if it.reused is None for _c in it.chunks])
            self._count_cut(report, embedder, texts, spec)
            job.encode_s += time.perf_counter() - t0
            t0 = time.perf_counter()
            fresh = [it for it in items if it.mode == "write" and it.reused is None]
            companions = self._companion_vectors(
                coll, embedder, [c.text for it in fresh for c in it.chunks], job, report,
                encoding, keys=[it.doc.key for it in fresh for _c in it.chunks])
            job.encode_s += time.perf_counter() - t0
        except (_Cancelled, _ServerStopping, KeyboardInterrupt, SystemExit):
            # Stopped between the encoder's pieces (``encoding``: a cancel, Ctrl-C or SIGTERM,
            # the server stopping): nothing of the batch is in the store yet, so its documents
            # are left as a stop between batches leaves them, not ``pending``.
            self._unmark(session, [(it.row, previous_status.get(it.doc.key)) for it in to_write])
            raise
        if heartbeat is not None and not heartbeat.holds():
            # Stalled past the lease's time while it encoded (the usual place: most of a
            # batch's time), and another writer took over: this batch was written over it.
            # Its documents are left as step 1 marked them (``pending``: written again by the
            # next run), not put back: the writer that took over may have read those rows
            # already, and deleting the new ones under it failed its write (StaleDataError) with
            # its points in the store and no rows for them (the clock exploration of the fourth
            # session of 2026-12-02). A writer that lost its lease touches no row any more.
            with contextlib.suppress(SQLAlchemyError):
                session.rollback()
            raise lost_lease(heartbeat.job_id, coll.name, self.settings.lease_ttl_s)  # (job: a tally in a chunk task)

        # Step 2: the store.
        t0 = time.perf_counter()
        offset = 0
        written = 0  # chunks written whole so far: the row of the companions' vectors
        points: list[PointRecord] = []
        stale_ids: list[str] = []
        refilter: list[str] = []
        update_ids: list[str] = []
        update_rows: list[int] = []
        for it in items:
            assert it.row is not None
            n = len(it.chunks)
            if it.mode == "write":
                before = previous_status[it.doc.key]
                if before in PARTIAL:
                    refilter.append(it.doc.key)  # an earlier write may be partial
                elif before != "new":
                    new_ids = {c.point_id for c in it.chunks}
                    stale_ids.extend(c.point_id for c in it.row.chunks if c.point_id not in new_ids)
                # A file's name is its title; records of a jsonl/csv have their own or none.
                title = it.doc.title or (Path(it.doc.source).name if it.doc.key == it.doc.source
                                         else None)
                if it.reused is not None:  # the donor's vectors, every embedder's
                    points.extend(PointRecord(c.point_id, named, {
                        "doc_id": it.doc.key, "source": it.doc.source, "title": title,
                        "chunk_no": c.number, "text": c.text, "start": c.start, "end": c.end,
                        "meta": it.doc.metadata}) for c, named in zip(it.chunks, it.reused, strict=True))
                    continue  # (none of the encoded rows are its own)
                for j, (c, vec) in enumerate(zip(it.chunks, vectors[offset:offset + n], strict=True)):
                    named = self._named_vectors(embedder.name, vec, companions, written + j)
                    points.append(PointRecord(c.point_id, named, {
                        "doc_id": it.doc.key, "source": it.doc.source, "title": title,
                        "chunk_no": c.number, "text": c.text, "start": c.start, "end": c.end,
                        "meta": it.doc.metadata}))
                written += n
            else:
                update_ids.extend(c.point_id for c in it.chunks)
                update_rows.extend(range(offset, offset + n))
            offset += n
        if refilter:
            self.store.delete_documents(coll.name, refilter)
        if stale_ids:
            self.store.delete(coll.name, stale_ids)
        for start in range(0, len(points), 512):
            self.store.upsert(coll.name, points[start:start + 512])
        if update_ids:
            self.store.update_vectors(coll.name, embedder.name, update_ids, vectors[update_rows])
        if refilter or stale_ids or points or update_ids:
            # Durable before step 3 records it. A batch of unchanged documents writes nothing:
            # its flush cost ~6 fsyncs, 197 times in a no-change run over 50k chunks.
            self.store.flush()
        job.store_s += time.perf_counter() - t0

        # Step 3: metadata, one transaction.
        t0 = time.perf_counter()
        # Bulk writes: one DELETE and one SELECT per batch, not one of each per document.
        md.replace_chunks_many(
            session, [(it.row, it.chunks) for it in items if it.mode == "write" and it.row],
            new={it.row.id for it in items
                 if it.row is not None and previous_status.get(it.doc.key) == "new"})
        md.set_vector_hashes(session, [(it.row, it.hash) for it in items if it.row is not None],
                             embedder.name)
        encoded = [(it.row, it.hash, it.doc.key) for it in items
                   if it.row is not None and it.mode == "write" and it.reused is None]
        for name in names - {embedder.name}:
            failed = set(report.vectors_left_out.get(name, ())) if name in companions else None
            if failed is not None:
                md.set_vector_hashes(session, [(row, h) for row, h, key in encoded
                                               if key not in failed], name)
            # Left out (it could not be loaded, or failed the document): written without it.
            md.clear_vector_hashes(session, [row for row, _, key in encoded
                                             if failed is None or key in failed], name)
        copied = [it for it in items if it.row is not None and it.reused is not None]
        for name in names - {embedder.name}:
            md.set_vector_hashes(session, [(it.row, it.hash) for it in copied if it.row], name)
        for it in items:
            assert it.row is not None
            if it.mode == "write":
                it.row.source = it.doc.source
                it.row.title = it.doc.title
                it.row.meta = it.doc.metadata
                it.row.content_hash = it.hash
            it.row.status = "indexed"
            it.row.error = None
            it.row.warning = "; ".join(it.doc.warnings) or None
            for w in it.doc.warnings:
                job.errors.append(md.JobError(document_key=it.doc.key, kind="warning", message=w))
                report.warnings.append((it.doc.key, w))
            report.docs_indexed += 1
            report.chunks_written += len(it.chunks)
            report.chunks_reused += len(it.chunks) if it.reused is not None else 0
        # A moved document's old place goes in the same transaction as its new one is recorded.
        gone = self._forget_moved(session, report, [
            (it.mover, it.doc.source, it.reused is not None) for it in items
            if it.mode == "write" and it.mover is not None])
        if finish is not None:
            finish(session)
        else:
            self._sync_counters(job, report)
        session.commit()
        job.metadata_s += time.perf_counter() - t0
        self._drop_moved_points(coll, job, gone)
        give_back_freed_memory()

    @staticmethod
    def _unmark(session: Session, marked: list[tuple[md.Document | None, str | None]]) -> None:
        """Undo step 1 of ``_process_batch`` for a batch stopped before its store write
        (``marked``: each row marked ``pending``, with its status before, "new" where it was
        made then): a new document's row goes, another's status is put back (an indexed one
        keeps its version).
        Where the database cannot take it, the rows stay ``pending``, as a failed batch leaves
        them (the next run writes them again)."""
        try:
            session.rollback()
            for row, before in marked:
                if row is None or before is None:
                    continue
                if before == "new":
                    session.delete(row)
                else:
                    row.status = before
            session.commit()
        except SQLAlchemyError:
            logger.debug("could not unmark a stopped batch's documents", exc_info=True)
            with contextlib.suppress(SQLAlchemyError):
                session.rollback()

    @staticmethod
    def _vector_names(coll: md.Collection, embedder: Embedder) -> set[str]:
        """The named vectors a point of ``coll`` written by ``embedder``'s run carries."""
        return {embedder.name, *(e.name for e in coll.embedders)}

    @staticmethod
    def _donors(session: Session, coll: md.Collection, names: set[str],
                wanted: list[tuple[str, str, md.Document | None, bool]],
                batch_keys: set[str], *,
                own_text: bool = False) -> list[tuple[md.Document | None, md.Document | None]]:
        """For each document about to be written, as (key, content hash, its row or None,
        whether its key is its place: ``keyed_by_path``), (the indexed document of the same
        content whose vectors it can copy, the indexed document that moved here): None where
        there is none; a changed document has neither (but see ``own_text``).

        A donor holds vectors of every one of ``names`` for that very content (its vector
        hashes), so a copy carries what a write encodes. The document's own row donates when
        only its source changed (a record's file renamed: same id); else another document of the
        collection does, never one of this batch: one whose source is gone first (each the
        old place of one document only), else any (a copy: both stay, the vectors shared).

        With ``own_text``, a document whose content hash changed (its metadata, or its text)
        has its own row as the donor too, where that row holds the vectors of every one of
        ``names`` for the content it records (vector hashes equal to its content hash: the
        vectors of its stored chunks). The caller cuts the new text and copies a vector only
        if every chunk is the row's own, same number and same text (``_reused_vectors``): a
        nightly export that changes only a field (``exported_at``, 1 -> 1.0) encodes nothing,
        its payloads and rows rewritten; a changed text, or any vector not held for the row's
        content (an embedder left out, one joining), is encoded as before.

        A mover has this content and is keyed by its place too, which is gone: it is this
        document's old place, removed once this one is written, with or without the vectors
        of every one of ``names`` (an embedder joining the collection in the run of a moved
        folder has none; the move is encoded, and is a move still). Records with ids of their
        own are never moves: a record's id is its identity, and two ids with one text are two
        records; records without one, ``path#L3``, move with their file.
        """
        out: list[tuple[md.Document | None, md.Document | None]] = [(None, None)] * len(wanted)
        own = {i: row for i, (_, digest, row, _) in enumerate(wanted) if row is not None
               and row.status == "indexed" and (own_text or row.content_hash == digest)}
        fresh = [i for i, (_, _, row, _) in enumerate(wanted) if row is None]
        if not own and not fresh:
            return out
        found = md.indexed_by_hash(session, coll.id, {wanted[i][1] for i in fresh}) if fresh else {}
        ids = {row.id for row in own.values()} | {d.id for docs in found.values() for d in docs}
        held = md.vector_hashes_by_embedder(session, ids)

        def complete(doc: md.Document, digest: str) -> bool:
            return all(held.get(doc.id, {}).get(name) == digest for name in names)

        for i, row in own.items():
            if complete(row, row.content_hash or ""):
                out[i] = (row, None)
        exists: dict[str, bool] = {}
        claimed: set[int] = set()
        for i in fresh:
            digest = wanted[i][1]
            others = [d for d in found.get(digest, []) if d.key not in batch_keys]
            usable = [d for d in others if complete(d, digest)]
            mover = None
            # The old place whose vectors are whole first: it is then the donor too.
            for d in sorted(others, key=lambda d: not complete(d, digest)):
                if d.id in claimed or not (wanted[i][3] and keyed_by_path(d.key, d.source)):
                    continue
                if d.source not in exists:  # (a source that cannot be looked at is no move)
                    exists[d.source] = _source_state(d.source) is not False
                if not exists[d.source]:
                    mover = d
                    claimed.add(d.id)
                    break
            donor = mover if mover is not None and complete(mover, digest) else \
                (usable[0] if usable else None)
            out[i] = (donor, mover)
        return out

    def _reused_vectors(self, coll: md.Collection, names: set[str],
                        pairs: list[tuple[list[Any], md.Document]]) -> list[list[dict[str, Any]] | None]:
        """For each (chunks about to be written, donor), the donor's stored vectors of ``names``
        for each chunk, one {name: vector} each, or None unless every chunk is one of the
        donor's (same number, same text) and the store holds all of their vectors: the same
        text through the same model gives the same vector, so nothing is encoded for it."""
        matched: list[list[str] | None] = []  # the donor's point of each chunk
        for chunks, donor in pairs:
            old = {c.number: c for c in donor.chunks}
            same = [old[c.number].point_id for c in chunks
                    if c.number in old and old[c.number].text == c.text]
            matched.append(same if len(same) == len(chunks) else None)
        ids = [i for same in matched if same for i in same]
        stored: dict[str, dict[str, Any]] = {}
        with _store_errors():
            for start in range(0, len(ids), 512):
                stored.update((hit.id, vectors) for hit, vectors in self.store.retrieve(
                    coll.name, ids[start:start + 512], with_vectors=True))
        out: list[list[dict[str, Any]] | None] = []
        for points in matched:
            found = [stored.get(i) for i in points or []]
            whole = points is not None and all(v is not None and names <= v.keys() for v in found)
            # Anything short of all of them is encoded, as any new document.
            out.append([{name: v[name] for name in names} for v in found if v is not None]
                       if whole else None)
        return out

    @staticmethod
    def _forget_moved(session: Session, report: IndexReport,
                      movers: list[tuple[md.Document, str, bool]]) -> tuple[list[str], list[str]]:
        """Delete the rows of documents that moved (each (old row, new source, whether its
        vectors were copied)), in the caller's transaction, the one that records them at their
        new place; returns their point ids and keys, for ``_drop_moved_points`` once that is
        committed."""
        donors = {old.id: (old, new, copied) for old, new, copied in movers}
        if not donors:
            return [], []
        ids = [c.point_id for old, _, _ in donors.values() for c in old.chunks]
        keys = [old.key for old, _, _ in donors.values()]
        for old, new, _ in donors.values():
            if len(report.moved) < MOVES_LISTED:
                report.moved.append((old.source, new))
        report.chunks_moved += sum(len(old.chunks) for old, _, copied in donors.values() if copied)
        md.delete_documents(session, [old for old, _, _ in donors.values()])
        for old, _, _ in donors.values():
            session.expunge(old)  # (deleted by SQL: no stale object left in the session)
        report.docs_moved += len(donors)
        return ids, keys

    def _drop_moved_points(self, coll: md.Collection, job: Any,
                           gone: tuple[list[str], list[str]]) -> None:
        """Remove the points of moved documents whose rows ``_forget_moved`` deleted. A run
        stopped before this leaves them to the next run's start (``_compare_points``: points of
        no document), not to searches for ever."""
        ids, keys = gone
        if not keys:
            return
        t0 = time.perf_counter()
        with _store_errors():
            self.store.delete(coll.name, ids)
            self.store.delete_documents(coll.name, keys)
            self.store.flush()
        job.store_s += time.perf_counter() - t0

    @staticmethod
    def _count_cut(report: IndexReport, model: Any, texts: list[str], spec: str,
                   name: str | None = None) -> None:
        """Counts the ``texts`` (chunks) longer than ``model`` (loaded as ``spec``) reads whole,
        under its vector's ``name`` (default the model's), and the chunks it encoded."""
        if not texts:  # (before the model: a deferred one is not loaded for nothing)
            return
        name = name or model.name
        report.cut_encoded[name] = report.cut_encoded.get(name, 0) + len(texts)
        cut = cut_count(model, texts)
        if cut:
            report.cut_chunks[name] = report.cut_chunks.get(name, 0) + cut
            report.cut_budget[name] = model.document_budget()
            option = max_length_spec(model, spec)
            if option:
                report.cut_options[name] = option

    @staticmethod
    def _note_cut(job: Any, report: IndexReport) -> None:
        """One warning per embedder that read only the start of some chunks this run."""
        for name, count in report.cut_chunks.items():
            message = cut_message(name, count, report.cut_encoded.get(name, report.chunks_written),
                                  report.cut_budget.get(name), report.cut_options.get(name))
            report.warnings.append((name, message))
            job.errors.append(md.JobError(document_key=name, kind="warning", message=message))

    @staticmethod
    def _count_unread(report: IndexReport, embedder: Any, texts: list[str], keys: list[str]) -> None:
        """Counts the ``texts`` (chunks of the documents ``keys``, one per text) the embedder's
        tokenizer reads as mostly unknown tokens, and notes their documents."""
        rows = unread_rows(embedder, texts)
        report.unread_chunks += len(rows)
        for i in rows:
            report.unread_documents.setdefault(keys[i])

    def _encode_apart(self, session: Session, coll: md.Collection, job: Any,
                      report: IndexReport, items: list[_Item], previous_status: dict[str, str],
                      spec: str, refusal: InvalidRequestError | ModelOutputError,
                      ) -> tuple[list[_Item], np.ndarray]:
        """After the embedder refused a batch's texts or gave unusable vectors for some
        (``refusal``): each document's chunks encoded alone; each document it refuses or fails
        so is recorded as failed (``_record_error``: one indexed before keeps that version) and
        left out. Returns the items kept and their vectors, in order. Where it fails none
        alone, ``refusal`` is raised again."""
        kept: list[_Item] = []
        parts: list[np.ndarray] = []
        refused = 0
        for it in items:
            if it.reused is None and it.chunks:
                try:
                    parts.append(self._encode_chunks([c.text for c in it.chunks], spec, None))
                except (InvalidRequestError, ModelOutputError) as e:
                    refused += 1
                    assert it.row is not None
                    before = previous_status.get(it.doc.key)
                    if before is not None and before != "new":
                        it.row.status = before  # (marked pending in step 1: nothing written)
                    self._record_error(session, coll, job, report,
                                       DocumentError(it.doc.key, it.doc.source,
                                                     f"{it.doc.key}: {e}"), it.row)
                    continue
            kept.append(it)
        if not refused:
            raise refusal
        session.commit()
        dim = parts[0].shape[1] if parts else 0
        return kept, (np.concatenate(parts, axis=0) if parts else
                      np.zeros((0, dim), dtype=np.float32))

    def _encode_chunks(self, texts: list[str], spec: str,
                       encoding: Callable[..., None] | None,
                       **more: Any) -> np.ndarray:
        """The vectors of a batch's chunks; with ``encoding``, in pieces of the encoder's batch
        size, longest first (``longest_first``: the same batches, so the same vectors, as one
        call; a server's model thread may cut them into timed parts, equal within float
        rounding, to let queries through), telling it how far after each. An encoder without a batch size (the workers')
        gets one call, as a piece there is a round trip."""
        size = getattr(self.ctx.encoder, "batch_size", None)
        if encoding is None or not isinstance(size, int) or len(texts) <= size:
            return self.ctx.encoder.encode(texts, embedder=spec, role=Role.DOCUMENT, bulk=True)
        out: np.ndarray | None = None
        done = 0
        for piece in longest_first(texts, size):
            encoding(done, len(texts), **more)
            vectors = self.ctx.encoder.encode([texts[i] for i in piece], embedder=spec,
                                              role=Role.DOCUMENT, bulk=True)
            if out is None:
                out = np.empty((len(texts), vectors.shape[1]), dtype=vectors.dtype)
            out[piece] = vectors
            done += len(piece)
        encoding(done, len(texts), **more)
        assert out is not None
        return out

    def _companion_vectors(self, coll: md.Collection, embedder: Embedder, texts: list[str],
                           job: Any, report: IndexReport,
                           encoding: Callable[..., None] | None = None, *,
                           keys: list[str] | None = None,
                           part: bool = False) -> dict[str, np.ndarray]:
        """The vectors of ``texts`` (chunks about to be written whole) by each other embedder
        of ``coll``, by name: a point written anew keeps every named vector of the collection
        (it kept only the running embedder's, so a changed or new document was missing from
        every search with the others until each indexed the collection again).

        Where another embedder gives unusable vectors (NaN, all zero) for some text, ``keys``
        (each text's document) given, each document's texts are encoded by it alone
        (``_companion_apart``): a document it fails so is written without its vectors (NaN
        rows here; ``_named_vectors`` leaves them out), with a warning, and is listed in
        ``report.vectors_left_out`` (its vector hash under that embedder is cleared). That
        failed the whole job.

        An embedder that cannot be loaded here, or that loads a different version than the one
        that wrote the collection, is left out with one warning per run: its vectors of these
        documents are missing until it indexes the collection again (its vector hashes say
        so, and that run fills them in).
        """
        out: dict[str, np.ndarray] = {}
        if not texts:
            return out
        from embedders.errors import EmbedderError

        for other in list(coll.embedders):
            key = companion_key(other.name)
            if other.name == embedder.name or any(k == key for k, _ in report.warnings):
                continue
            try:
                # Its load timed apart, as the run's own embedder's (``_Deferred.load_s``): the
                # caller's encode time counted it (4.7 s "encoding" one chunk, 4.5 of them the
                # load of a second model), and the summary named the first model's load only.
                model, spent = self.ctx.embedders.get_timed(other.spec)
                if spent:
                    report.loads[other.name] = report.loads.get(other.name, 0.0) + spent
                    job.encode_s -= spent  # (the caller adds this call's whole time)
                changes = identity_changes(other.identity, self.ctx.embedders.identity(model))
                if changes:
                    # Retrained since: its vectors would not be comparable with the stored ones,
                    # and `facet index --embedder` with it is refused for the same reason.
                    message = (f"the {other.name!r} vectors of the documents this run writes are "
                               f"missing: {other.spec!r} now loads a different version "
                               f"({', '.join(changes)} changed) than the one that wrote them, so "
                               f"they cannot be filled in from it; put that version back (then "
                               f"`facet index` with --embedder {other.spec} fills them in), or "
                               f"index the sources into a new collection")
                    raise ConflictError(message)
                # In the encoder's pieces, told how far as the running embedder's are.
                try:
                    out[other.name] = self._encode_chunks(texts, other.spec, encoding,
                                                          vector=other.name)
                except ModelOutputError as e:  # NaN or zero for some text: which document's?
                    if keys is None:
                        raise
                    out[other.name] = self._companion_apart(other, int(model.dim), texts, keys,
                                                            e, job, report, part)
                self._count_cut(report, model, texts, other.spec, other.name)
            except (UnknownModelError, DataError, ConflictError, EmbedderError) as e:
                # (Not a busy or closed encoder: the run stops then, as for its own embedder.)
                message = str(e) if isinstance(e, ConflictError) else (
                    f"the {other.name!r} vectors of the documents this run writes are "
                    f"missing: {e}; searches with {other.name!r} miss them until "
                    f"`facet index` runs on this collection with --embedder {other.spec}")
                logger.warning("%s", message)
                report.warnings.append((key, message))
                job.errors.append(md.JobError(document_key=key, kind="warning", message=message))
        return out

    def _companion_apart(self, other: md.CollectionEmbedder, dim: int, texts: list[str],
                         keys: list[str], failure: ModelOutputError, job: Any,
                         report: IndexReport, part: bool = False) -> np.ndarray:
        """``_companion_vectors`` after the embedder ``other`` gave unusable vectors for some
        of ``texts`` (``failure``): the texts of each document (``keys``) encoded alone; the
        rows of a document it fails again are left NaN and the document noted, once a run
        (``part``: the texts are a part of a streamed document, whose other parts may have
        its vectors). Where it fails none alone, ``failure`` is raised again."""
        vectors = np.full((len(texts), dim), np.nan, dtype=np.float32)
        rows: dict[str, list[int]] = {}
        for i, key in enumerate(keys):
            rows.setdefault(key, []).append(i)
        failed = False
        for key, mine in rows.items():
            try:
                vectors[mine] = self._encode_chunks([texts[i] for i in mine], other.spec, None)
            except ModelOutputError as e:
                failed = True
                listed = report.vectors_left_out.setdefault(other.name, [])
                if key in listed:  # (a streamed document's earlier part: said once)
                    continue
                listed.append(key)
                message = (f"the {other.name!r} vectors of "
                           + (f"a part of {key} (a file read in parts: each part it failed) are "
                              f"missing: {e}; searches with {other.name!r} may miss it"
                              if part else
                              f"{key} are missing: {e}; searches with {other.name!r} miss it")
                           + f" (`facet index` with --embedder {other.spec} tries it again)")
                logger.warning("%s", message)
                report.warnings.append((key, message))
                job.errors.append(md.JobError(document_key=key, kind="warning", message=message))
        if not failed:
            raise failure
        return vectors

    @staticmethod
    def _withdraw_left_out(job: Any, report: IndexReport, key: str) -> None:
        """A document that failed after another embedder's vectors of it were left out
        (``_companion_apart``: a streamed one's earlier part): not one written without them;
        its warnings of that are taken back (they said searches miss only those vectors, and
        hid the end-of-run count of documents lacking them)."""
        names = [name for name, keys in report.vectors_left_out.items() if key in keys]
        if not names:
            return
        said = tuple(f"the {name!r} vectors of {part}{key} " for name in names
                     for part in ("", "a part of "))
        for name in names:
            report.vectors_left_out[name].remove(key)
            if not report.vectors_left_out[name]:
                del report.vectors_left_out[name]
        report.warnings[:] = [(k, m) for k, m in report.warnings
                              if not (k == key and m.startswith(said))]
        for error in [e for e in job.errors if e.document_key == key and e.kind == "warning"
                      and (e.message or "").startswith(said)]:
            job.errors.remove(error)

    @staticmethod
    def _named_vectors(name: str, vector: np.ndarray, companions: dict[str, np.ndarray],
                       row: int) -> dict[str, np.ndarray]:
        """A point's named vectors: the running embedder's and each other one's at ``row`` of
        ``companions``, but a NaN row (``_companion_apart``: that embedder failed the
        document)."""
        return {name: vector} | {other: v[row] for other, v in companions.items()
                                 if not np.isnan(v[row, 0])}

    def _record_error(self, session: Session, coll: md.Collection, job: Any,
                      report: IndexReport, entry: DocumentError, row: md.Document | None) -> None:
        message = entry.message
        if row is not None and row.status == "indexed" and row.n_chunks:
            # It keeps its indexed version (``note_document_error``): the error line said only
            # what was wrong ("is empty: no text to index"), and the old text stayed found.
            # (Not one indexed with no chunk, which nothing finds: a file of invisible
            # characters, "indexed" before 2026-12-01, was said to stay searchable.)
            message = kept_version_message(message, coll.name, entry.key)
        elif (row is None or row.status == "error") and holds_no_records(entry):
            # (Its failed row of the file's key, which the first such run made: every run after
            # said only "is empty: no records to index", the records still searchable.)
            D = md.Document
            records = list(session.scalars(select(D.key).where(
                D.collection_id == coll.id, D.source == entry.source, D.status == "indexed")
                .order_by(D.id)))
            if records:
                message = kept_records_message(message, coll.name, entry.source, records)
        report.docs_failed += 1
        report.errors.append((entry.key, message))
        job.errors.append(md.JobError(document_key=entry.key, kind="error", message=message))
        note_document_error(session, coll.id, entry.key, entry.source, entry.message, row)

    def _drop_stale_errors(self, session: Session, coll: md.Collection, source: Path,
                           files: list[Path], seen: Seen) -> None:
        """Without a sync: the error rows of a file this run read that it did not give again (a
        record's line fixed or moved) are stale, and removed; those holding an older indexed
        copy's chunks stay, as a run without a sync keeps what it does not see. A re-read
        ``bad.jsonl``, valid now, kept its four line errors ("#L5: duplicate id" of a file of
        four lines), counted as failed where the job said 0. (A sync removes them with the
        rest, ``_sync``.)"""
        read = set(seen.sources.values()) | seen.failed_sources
        stale = [row for row in self._gone_rows(session, coll, source, files, seen)
                 if row.status == "error" and not row.n_chunks and row.source in read]
        if stale:
            md.delete_documents(session, stale)

    def _note_unsynced(self, session: Session, coll: md.Collection, job: md.IndexJob,
                       report: IndexReport, source: Path, files: list[Path], seen: Seen) -> None:
        """A single file indexed without a sync: say how many of its indexed records this run
        did not see (removed from the file since), which are kept; ``--sync`` removes them.
        They were kept with "0 removed" and no word. Not of a file that gave errors this run
        (a record on a malformed line is not gone), nor of a folder (synced by default)."""
        if not source.is_file() or display_path(source) in seen.failed_sources:
            return
        gone = [r for r in self._gone_rows(session, coll, source, files, seen)
                if r.status != "error" and not seen.kept(r.source)]
        if not gone:
            return
        path = display_path(source)
        records = [r for r in gone if r.source == path]
        # What was indexed under the path when it was a folder is no record of the file.
        under = [r for r in gone if r.source != path]
        for rows, what in ((records, f"{plural(len(records), 'indexed record')} of {path} not in "
                                     "it any more"),
                           (under, f"{plural(len(under), 'document')} indexed under {path} when "
                                   "it was a folder")):
            if not rows:
                continue
            message = (f"{what} (e.g. {rows[0].key!r}) kept: a single file is synced only when "
                       f"asked; `facet index {shell_word(path)} -c {shell_word(coll.name)} --sync` "
                       f"(sync: true over the API) removes {'it' if len(rows) == 1 else 'them'}")
            report.warnings.append((path, message))
            job.errors.append(md.JobError(document_key=path, kind="warning", message=message))

    @staticmethod
    def _sync_counters(job: md.IndexJob, report: IndexReport) -> None:
        for name in _COUNTERS:
            setattr(job, name, getattr(report, name))

    @staticmethod
    def _counters_from_row(job: md.IndexJob, report: IndexReport) -> None:
        """``_sync_counters`` the other way: the report's counts as the job's row kept them."""
        for name in _COUNTERS:
            setattr(report, name, getattr(job, name))

    def _end_steps(self, session: Session, coll: md.Collection, source: Path,
                   files: list[Path], seen: Seen, options: IndexOptions) -> list[str]:
        """The steps of a run's end after its last batch, for a cancel that stops it there
        (``cancelled_message``): the sync's removals, where it syncs and something is gone (a
        read only; unnamed where the database cannot be read), and the store's optimize."""
        steps = [OPTIMIZE_STEP]
        if options.syncs(source):
            try:
                rows = [row for row in self._gone_rows(session, coll, source, files, seen)
                        if row.status != "error" and not seen.kept(row.source)]
                # (less what the sync keeps of files the walk never reads: ``_keep_unwalked``)
                gone = len(rows) - len(_unwalked(source, files, rows))
            except SQLAlchemyError as e:  # (the database may be what fails next: it is said)
                logger.debug("could not count the documents a sync would remove: %s", e)
                steps.insert(0, "removing the documents no longer in the source")
            else:
                if gone:
                    steps.insert(0, removal_step(gone))
        return steps

    @staticmethod
    def _gone_rows(session: Session, coll: md.Collection, source: Path, files: list[Path],
                   seen: Seen) -> list[md.Document]:
        """The documents under ``source`` that this run did not see (``_sync``), those of a
        file that gave an error this run included."""
        # Keyed as ``parse_file`` keys them: by the UTF-8 text of their names, whatever the
        # locale's encoding (``display_path``).
        # (A source gone since it was indexed, a file or a folder: what was under it too; and
        # under a file that was a folder when they were indexed, which a file's --sync kept.)
        prefix = display_path(source).rstrip(os.sep) + os.sep
        known = md.document_keys_under(session, coll.id,
                                       [display_path(f) for f in files] + [display_path(source)],
                                       prefix)
        gone = sorted(set(known) - seen.keys)
        if not gone:
            return []
        return list(md.documents_by_key(session, coll.id, gone).values())

    @staticmethod
    def _keep_unwalked(coll: md.Collection, job: md.IndexJob, report: IndexReport, source: Path,
                       files: list[Path], rows: list[md.Document]) -> list[md.Document]:
        """``rows`` less the documents of files still there that a folder's walk never reads: a
        hidden file (or one in a hidden or system folder) is indexed only when given itself,
        and a sync of its folder removed it as gone ("1 removed", named nowhere). They are
        kept, with one warning."""
        kept = _unwalked(source, files, rows)
        if not kept:
            return rows
        first = kept[0].source
        message = (f"{plural(len(kept), 'indexed document')} under {source} kept though the "
                   f"folder's walk does not read {'its file' if len(kept) == 1 else 'their files'} "
                   f"({first}{' and others' if len({r.source for r in kept}) > 1 else ''}): "
                   "hidden files and folders (a leading dot) are indexed only when given "
                   f"themselves; `facet delete {shell_word(coll.name)} -d KEY` removes one")
        report.warnings.append((str(source), message))
        job.errors.append(md.JobError(document_key=str(source), kind="warning", message=message))
        ids = {id(row) for row in kept}
        return [row for row in rows if id(row) not in ids]

    def _sync(self, session: Session, coll: md.Collection, job: md.IndexJob, report: IndexReport,
              source: Path, files: list[Path], seen: Seen) -> str | None:
        """Drop documents under ``source`` that this run did not see (deleted files/records),
        except the records of a file that gave an error this run: a record on a malformed
        line, or in a file that could not be read, is not gone (it was deleted, data lost);
        nor what was indexed under a folder this run could not read (``Seen.kept``); nor
        anything of a folder that is empty now (returns what it says of those, else None)."""
        rows = self._gone_rows(session, coll, source, files, seen)
        if not rows:
            return None
        if not files and _empty_folder(source):
            # A share or drive not mounted reads as its empty mount point: a scheduled re-index
            # then removed every document (the network-filesystem exploration of the fourth
            # session of 2026-12-02). An empty folder removes nothing, as an empty file does not.
            n = sum(1 for row in rows if row.status != "error")
            message = (f"{plural(n, 'indexed document')} under {source} kept: the folder is empty "
                       "now, and a sync removes nothing of an empty folder (a share or drive not "
                       "mounted reads so); if it was emptied on purpose, remove them with `facet "
                       f"delete {shell_word(coll.name)}` (the whole collection) or `facet delete "
                       f"{shell_word(coll.name)} -d KEY`")
            report.warnings.append((str(source), message))
            job.errors.append(md.JobError(document_key=str(source), kind="warning", message=message))
            return message
        kept: dict[str, int] = {}
        under: dict[str, int] = {}
        for row in rows:
            if row.source in seen.failed_sources:
                # An error row of such a file that this run did not give again is stale (its
                # errors were listed afresh): removed below, not counted as a record kept. It
                # stayed ("bad.jsonl#L5: duplicate id" of a file of 4 lines), counted as failed
                # beside the job's count and called an "indexed record".
                if row.status != "error":
                    kept[row.source] = kept.get(row.source, 0) + 1
            elif row.status != "error" and (folder := seen.unreadable_folder(row.source)):
                under[folder] = under.get(folder, 0) + 1
        for folder, n in sorted(under.items()):
            message = (f"{plural(n, 'indexed document')} under {folder} not seen this run kept: "
                       "it could not be read, so they may still be there; make it readable "
                       "and index again to remove what is really gone")
            report.warnings.append((folder, message))
            job.errors.append(md.JobError(document_key=folder, kind="warning", message=message))
        for path, n in sorted(kept.items()):
            message = (f"{plural(n, 'indexed record')} of {path} kept: the file holds no record "
                       "now, and a sync removes none of an empty file (it may be being written); "
                       f"if it was emptied on purpose, delete the file and run `facet index "
                       f"{shell_word(path)} -c {shell_word(coll.name)} --sync`, or remove them "
                       f"with `facet delete {shell_word(coll.name)} -d KEY`"
                       if path in seen.empty_sources else
                       f"{plural(n, 'indexed record')} of {path} not seen this run kept: the "
                       "file had errors (listed here), so a missing record may only be unreadable; "
                       "fix the file and index again to remove what is really gone")
            report.warnings.append((path, message))
            job.errors.append(md.JobError(document_key=path, kind="warning", message=message))
        rows = [row for row in rows if not seen.kept(row.source) or (
            row.status == "error" and row.source in seen.failed_sources)]
        rows = self._keep_unwalked(coll, job, report, source, files, rows)
        if not rows:
            return None
        gone = [row.key for row in rows]
        t0 = time.perf_counter()
        self.store.delete(coll.name, md.chunk_point_ids(session, [r.id for r in rows]))
        self.store.delete_documents(coll.name, gone)
        self.store.flush()
        job.store_s += time.perf_counter() - t0
        md.delete_documents(session, rows)
        # An error row of a line or file that now reads (or is gone) is not a document removed.
        report.docs_deleted += sum(1 for row in rows if row.status != "error")
        report.removed.extend([row.key for row in rows if row.status != "error"]
                              [:max(MOVES_LISTED - len(report.removed), 0)])
        self._sync_counters(job, report)
        session.commit()
        logger.debug("sync removed %d documents no longer in %s", len(rows), printable(str(source)))
        return None
