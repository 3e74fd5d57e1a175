"""Index jobs split into chunk tasks for workers: plan, run one chunk, finish.

The Celery tasks in ``worker/tasks.py`` are thin wrappers over this service; everything a
job knows lives in SQL (the job row and its ``job_chunks`` rows), never in the broker or the
result backend, so a worker killed with ``kill -9``, a Redis restart or a re-delivered task
loses and duplicates nothing:

* **plan** (task ``facet.index_job``): take the collection's lease for the job, read the
  source once, skip unchanged documents, record parse errors, apply ``--sync`` deletions,
  and write the remaining documents as chunk rows of ``worker_chunk_docs`` documents each
  (key, source, content hash, and a confined job's folders: each chunk reads a file only where
  what it opens lies under them, ``_ParseCache.pick``, as the plan did). Re-delivered, it
  re-sends the chunks still ``queued``.
* **run_chunk** (task ``facet.index_chunk``): *claim* the chunk (one conditional UPDATE: only
  a ``queued`` chunk or one whose claimer stopped renewing), re-read its documents from the
  source (a per-process parse cache keyed by file and stamp, ``_ParseCache``), and run the index
  service's write protocol on them; marking the chunk ``done`` and adding its counts to the
  job happen in the same transaction as the documents' ``indexed`` status, so a chunk
  re-delivered after it committed does nothing and counts nothing.
* **finish**: whoever commits the last chunk optimises the collection and completes the job
  (idempotent: a second finisher finds it completed).

Point ids are deterministic (document id + chunk number), so a chunk re-run after a crash
between the store write and its commit overwrites its own points.

A chunk task the broker lost (a worker killed between taking the message and recording it as
unacknowledged) is found by ``stalled_chunks`` and re-sent by the workers' sweeper
(``worker/recovery.py``).

A worker process lets a collection of the embedded store go (``_IdleRelease``) once no chunk
or plan of it has run in the process for ``idle_release_s``: a job whose lost chunk waits for
the broker's visibility timeout (its worker was killed) left the collection held by every
worker that had run one of its chunks, until the job ended, so the stalled job's advised
rerun, and any search, were refused as "open in pid N (facet worker)" for up to an hour.

A chunk that keeps killing its worker (out of memory, a crash in a native library) is
re-delivered by ``task_reject_on_worker_lost``; each claim counts an attempt, and past
``worker_poison_limit`` the chunk is failed with its documents recorded as errors instead
of being run again.
"""

from __future__ import annotations

import array
import collections
import contextlib
import datetime as dt
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import Session

from app.encoding import CUT_MARK, cut_counted, cut_message, unread_counted, unread_documents, unread_message
from app.errors import FacetError, NotFoundError, UnknownModelError
from app.roots import real_paths
from app.services import leases
from app.services.context import ServiceContext
from app.services.indexing import (
    CANCEL_TOO_LATE,
    FAILED_LOGGED,
    OPTIMIZE_STEP,
    IndexOptions,
    IndexReport,
    IndexService,
    OpenedUnder,
    OutsideRoots,
    PreparedJob,
    Seen,
    cancelled_message,
    check_same_embedder,
    companion_key,
    confined,
    failed_documents_message,
    give_back_freed_memory,
    job_end_line,
    left_empty,
    left_empty_note,
    moved_message,
    note_document_error,
    outside_own,
    storable,
    summed_moved_message,
    upload_run,
)
from app.services.search import PLUGIN_LOADS_WHERE_REGISTERED
from app.text import plural
from indexer import metadata as md
from indexer.chunking import ChunkingConfig
from indexer.errors import SourceNotFoundError, UnsupportedSourceError
from indexer.parsing import (
    CheckedFile,
    DocumentError,
    ParsedDocument,
    ParseResult,
    discover,
    parse_file,
    reads_records_by_line,
)

logger = logging.getLogger(__name__)

TERMINAL_JOB_STATES = ("completed", "failed", "interrupted", "cancelled")

# How long a chunk task waits before trying again where another worker holds the collection's
# embedded store (``ChunkedIndexService._wait_if_store_held``): a turn, not an outage.
STORE_TURN_WAIT_S = 5.0


def load_here(ctx: ServiceContext, spec: str, worker: str) -> tuple[Any, float]:
    """``ctx.embedders.get_timed(spec)`` in a worker (the model, and the seconds this call took
    to load it: the job's ``load_model``); a name this worker does not know (a plugin's,
    registered where the job was submitted but not here) is refused saying so, as a search's
    refusal says it (``SearchService._missing_embedder_hints``): the job failed with a bare
    "unknown embedder", as if the client had misspelt it.

    Raises:
        UnknownModelError: ``spec`` is no embedder here, with that hint after a name.
    """
    try:
        return ctx.embedders.get_timed(spec)
    except UnknownModelError as e:
        if "/" in spec or "\\" in spec:  # a checkpoint directory's path: its message says
            raise
        raise UnknownModelError(
            f"{e} (on worker {worker}: {PLUGIN_LOADS_WHERE_REGISTERED}; start the worker with "
            "the plugins the server has)", param=e.param) from e


class JobGone(FacetError):
    """The job row is not in this worker's database: its collection was deleted, or the job
    was queued by a server on another database (a worker whose FACET_DATA_DIR or
    FACET_DATABASE_URL differ from the server's); drop the task. The message says which one,
    where that can be told (``gone_message``). ``elsewhere``: certainly another database's
    job (its id above any this database handed out, or another job under its id): the task
    goes back to the broker for a worker on that database rather than dropped."""

    def __init__(self, message: str, *, elsewhere: bool = False) -> None:
        super().__init__(message)
        self.elsewhere = elsewhere


# Said of a worker that reads another database than the server that queues the jobs.
_OTHER_DATABASE = ("a worker whose FACET_DATA_DIR / FACET_DATABASE_URL differ from the "
                   "server's drops every job")


def highest_job_id(session: Session) -> int | None:
    """The highest job id this database ever handed out (0: none yet), counting the jobs
    deleted since (ids are never reused: SQLite ``AUTOINCREMENT``, a sequence on PostgreSQL);
    None where that cannot be read."""
    from sqlalchemy import text

    try:
        dialect = session.get_bind().dialect.name
        if dialect == "sqlite":
            seq = session.execute(text(
                "SELECT seq FROM sqlite_sequence WHERE name = 'index_jobs'")).scalar()
            return int(seq or 0)
        if dialect == "postgresql":
            name = session.execute(text(
                "SELECT pg_get_serial_sequence('index_jobs', 'id')")).scalar()
            if not name:
                return None
            row = session.execute(text(f"SELECT last_value, is_called FROM {name}")).one()
            return int(row[0]) if row[1] else 0
    except Exception:  # an older schema, no rights on the sequence: say both possibilities
        session.rollback()
    return None


def gone_message(job_id: int, database: str, highest: int | None,
                 then: str = "dropping it") -> str:
    """Why job ``job_id`` is not in ``database`` (a description, password masked), given the
    highest job id that database ever handed out (None: unknown); ``then``: what becomes of
    the task of another database's job (a chunk's is sent back)."""
    if highest is not None and job_id > highest:
        had = ("which has never had a job" if highest == 0
               else f"which never had it (its highest job id is {highest})")
        return (f"index job {job_id} is not in this worker's database ({database}), {had}: the "
                f"job was queued by a server on another database; {_OTHER_DATABASE}; start the "
                f"worker with the server's FACET_DATA_DIR / FACET_DATABASE_URL; {then}")
    return (f"index job {job_id} no longer exists in this worker's database ({database}): its "
            f"collection was deleted, or the job was queued by a server on another database "
            f"({_OTHER_DATABASE}); dropping it")


class WriterBusy(FacetError):
    """Another live job holds the collection's lease: try the job again later."""

    def __init__(self, message: str, retry_in_s: float) -> None:
        super().__init__(message)
        self.retry_in_s = retry_in_s


class ChunkBusy(FacetError):
    """The chunk is claimed by a worker that still renews the claim, or another worker holds the
    collection's embedded store (``_wait_if_store_held``): try again later, a turn, not one of
    the transient retries."""

    def __init__(self, message: str, retry_in_s: float) -> None:
        super().__init__(message)
        self.retry_in_s = retry_in_s


class _ClaimLost(Exception):
    """This worker's claim on the chunk lapsed (this process stalled past ``lease_ttl_s``) and
    the chunk's row moved on meanwhile: another run took it over (another worker's, or another
    thread's of this one), it went back to the queue, or its job was cancelled or deleted
    (``message`` says which). The chunk's transaction is rolled back: only the other run, or
    the next, counts."""

    @staticmethod
    def message(holder: str | None, state: str | None = "running", me: str | None = None) -> str:
        """Said of the chunk as its row is now: ``holder`` running it, or, ``queued``, handed
        back with no worker on it (it named the last worker that had claimed it as running it:
        the distributed exploration of the fourth session of 2026-12-07), ``cancelled`` with its
        job; ``me``: this worker, never said to have taken it over."""
        if state is None:
            return "the claim lapsed and the chunk's job is gone; this run's counts are dropped"
        if state == "cancelled":
            return ("the claim lapsed and the job was cancelled meanwhile; this run's counts are "
                    "dropped")
        if state == "queued":
            return ("the claim lapsed and the chunk went back to the queue, to run again; this "
                    "run's counts are dropped (its points are the same)")
        who = "another run in this worker" if holder is not None and holder == me else holder
        taken = "took the chunk over" + {"done": " and finished it", "failed": " and failed it"}.get(
            str(state), "")
        return (f"the claim lapsed and {who} {taken}; this run's counts are dropped (its "
                "points are the same)")


@dataclass
class ChunkOutcome:
    """What one ``run_chunk`` call did."""

    job_id: int
    number: int
    outcome: str  # done | duplicate | gone | skipped | poisoned | failed
    docs: int = 0
    chunks_written: int = 0
    finished_job: bool = False
    message: str | None = None


@dataclass
class _Tally:
    """The timing attributes and errors of one chunk, added to the shared job row at commit."""

    parse_s: float = 0.0
    encode_s: float = 0.0
    store_s: float = 0.0
    metadata_s: float = 0.0
    # Seconds this chunk's worker spent loading models (its embedder where not loaded yet, the
    # collection's other embedders: ``IndexReport.loads``): the job row's ``load_s``, as an
    # inline run records it. A worker's first chunk of a model not preloaded said no load.
    load_s: float = 0.0
    errors: list[md.JobError] = field(default_factory=list)
    # Planned documents not read: their file lay outside the job's folders when the chunk
    # came to read it (not counted seen, as the walk's own are not; the job's total less them).
    outside: int = 0


def _held(item: ParsedDocument | DocumentError) -> int:
    """About what ``item`` takes in memory, in bytes: its strings and metadata, and the objects
    around them (within 15% of tracemalloc's figure on a jsonl of titled records with two
    metadata fields, 20 to 400 words each: held 2.2 times the file's size). Metadata values
    that are lists or objects count by their outer size only: an underestimate there."""
    size = sys.getsizeof
    if isinstance(item, DocumentError):
        return 200 + size(item.key) + size(item.source) + size(item.message)
    return (200 + size(item.key) + size(item.source) + size(item.text)
            + (size(item.title) if item.title else 0) + size(item.metadata)
            + sum(size(k) + size(v) for k, v in item.metadata.items())
            + sum(size(w) for w in item.warnings))


class _Passed:
    """The keys a read of a record file has passed, by their hashes (8 bytes a key; sorted at
    ``settle``): whether a key was given before. A csv gives a repeated id again under the same
    key (a jsonl's is an error keyed by its line), and a window that starts past the first of a
    key must not keep a later one: it was served to the chunk asking for that key (the review of
    the second session of 2026-12-07). Two keys hashing alike make the later look given before:
    a window leaves it out, and the chunk asking for it reads it from the top, exactly."""

    def __init__(self) -> None:
        self._sorted = np.empty(0, dtype=np.int64)
        self._new = array.array("q")

    def add(self, key: str) -> None:
        self._new.append(hash(key))

    def settle(self) -> None:
        """From now on ``had`` knows the keys added so far."""
        if self._new:
            self._sorted = np.sort(np.concatenate(
                [self._sorted, np.frombuffer(self._new, dtype=np.int64)]))
            self._new = array.array("q")

    def had(self, key: str) -> bool:
        """Whether ``key`` (or one hashing alike) was added before the last ``settle``."""
        return self.count(key) > 0

    def count(self, key: str) -> int:
        """How many times ``key`` (or one hashing alike) was added before the last ``settle``."""
        h = hash(key)
        return int(np.searchsorted(self._sorted, h, side="right")
                   - np.searchsorted(self._sorted, h, side="left"))


class _Rest:
    """A record file's read left where its window ended, to go on from there for the next chunk
    that asks for documents past it (a worker process's chunks of a file come in the file's
    order): its parser, the file open in it (and a confined job's checked file), and the keys
    it has passed. Read again from the top for each window, a 10 GB file at the default budget
    was read some 40 times over by each worker process (the same review)."""

    def __init__(self, results: Generator[ParseResult, None, None],
                 files: contextlib.ExitStack) -> None:
        self.results, self.files, self.passed = results, files, _Passed()

    def close(self) -> None:
        self.results.close()
        self.files.close()


@dataclass
class _Kept:
    """One file's documents in ``_ParseCache``: all of them by key (the first of a repeated
    key) with the later ones of a repeated key, or (``window``) some of a record file read a
    line at a time, each the first of its key in the file, and where its read stopped
    (``rest``); ``held``: about what they take."""

    stamp: tuple[int, ...]
    docs: dict[str, ParsedDocument | DocumentError]
    repeated: list[ParsedDocument | DocumentError]
    held: int
    window: bool = False
    rest: _Rest | None = None
    # Every key of the file (as of ``stamp``), once a read of it reached its end: a key asked
    # for that is not among them is not looked for (the file lost it since the plan; each chunk
    # with such a key read the whole file, 76 reads for 79 chunks with 1% of records removed).
    known: _Passed | None = None

    def present(self, keys: set[str]) -> set[str]:
        """``keys`` less those the file is known not to have."""
        known = self.known
        return keys if known is None else {key for key in keys if known.had(key)}

    def close(self) -> None:
        if self.rest is not None:
            self.rest.close()
            self.rest = None


class _Gate:
    """One reader of a file's window at a time: threads that missed the window together each
    read the file again (four threads: 19 reads where one read 5; the same review)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0


@dataclass
class _Opened:
    """A file ``_ParseCache`` reads a line at a time: ``gone`` where it cannot be looked at
    (nothing of it is read, as ``read`` answers), ``outside`` where a confined job finds it
    outside its folders; else its stamp, what to read (a confined job's checked file) and
    whether what was read is still the file checked, after the read (``OpenedUnder``)."""

    stamp: tuple[int, ...] = ()
    checked: CheckedFile | None = None
    still_under: Callable[[], bool] = lambda: True
    by_fd: bool = True
    gone: bool = False
    outside: bool = False


class _ParseCache:
    """Parsed documents of recently read source files, per process (a jsonl corpus is read
    once by a worker process, not once per chunk). Keyed by path and the job's text column,
    stamped with (size, mtime, inode, ctime): a file changed since it was read is read again.

    A file modified less than ``RACY_NS`` before it was read is read again each time (git's
    "racy" rule): a disk keeps times to a tick (2 s on FAT, whole seconds through exFAT's FUSE
    driver), and an edit of the same size within the tick of the read left every stamp as it
    was, so a worker planned the old text as unchanged (the exFAT exploration of the fourth
    session of 2026-12-02).

    What it keeps is bounded by about the memory its documents take (``max_bytes_kept``,
    ``FACET_WORKER_PARSE_CACHE_MB``; ``_held``); the most recent file is kept whatever that is,
    so the chunks of a file read it once). A record file over the stream limit
    (``records_over_bytes``) is read a line at a time and kept at most the budget at a time, as
    a window of its documents: the plan keeps its first ones; a chunk asking for others reads
    the file from the top, and the windows after go on from where that read stopped (``_Rest``:
    a process's chunks of a file come in the file's order), from the top again only for a chunk
    behind it. Kept whole, a 190 MB jsonl held 650 MB in each worker process that planned or ran
    a chunk of it, and a corpus larger than the machine's memory could not be indexed by
    workers at all (the memory review of the first session of 2026-12-07)."""

    RACY_NS = 3_000_000_000

    def __init__(self, max_files: int = 4096, max_bytes_kept: int = 512 << 20,
                 records_over_bytes: int = 4 << 20) -> None:
        self.max_files = max_files
        self.max_bytes_kept = max_bytes_kept
        self.records_over_bytes = records_over_bytes
        self._files: collections.OrderedDict[str, _Kept] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._gates: dict[str, _Gate] = {}

    # ------------------------------------------------------------------ what a job asks for

    def planned(self, path: str, max_bytes: int, text_column: str | None = None,
                allowed: Sequence[Path] | None = None
                ) -> Iterator[ParsedDocument | DocumentError | OutsideRoots]:
        """The file's documents for a job's plan: the first of each key in the file's order,
        then the later ones of a repeated key (an id the file gives twice: the plan reports
        each as the inline run does); one ``OutsideRoots`` instead where a confined job
        (``allowed``: its folders' real paths) finds the file outside its folders."""
        if not self._by_line(path):
            found = self._read_whole(path, max_bytes, text_column, allowed)
            if found is None:
                yield OutsideRoots(Path(path))
                return
            yield from found[0].values()
            yield from found[1]
            return
        read_at = time.time_ns()
        with self._opened(path, allowed) as source:
            if source.gone:
                return
            if source.outside:
                yield OutsideRoots(Path(path))
                return
            results: Iterable[ParseResult] = parse_file(
                Path(path), max_bytes=max_bytes, text_column=text_column, checked=source.checked,
                records_over_bytes=self.records_over_bytes)
            if not source.by_fd:  # (the fallback: given only if still the file checked after)
                results = list(results)
                if not source.still_under():
                    yield OutsideRoots(Path(path))
                    return
            keys: set[str] = set()
            repeated: list[ParsedDocument | DocumentError] = []
            first: dict[str, ParsedDocument | DocumentError] = {}  # (kept for the chunks)
            held = 0
            cache_key = self._key(path, text_column, allowed)
            budget = self._share(cache_key)
            for item in results:
                if not isinstance(item, ParsedDocument | DocumentError):
                    continue
                if item.key in keys:
                    repeated.append(item)
                    continue
                keys.add(item.key)
                if held < budget:
                    first[item.key] = item
                    held += _held(item)
                yield item
            yield from repeated
        known = _Passed()  # (every key of the file: a chunk does not look for one it lacks)
        for key in keys:
            known.add(key)
        known.settle()
        with self._gate(cache_key):  # (not while a chunk's read goes on in another thread)
            self._keep(cache_key, read_at, _Kept(source.stamp, first, [], held, window=True,
                                                 known=known))

    def pick(self, path: str, keys: set[str], max_bytes: int, text_column: str | None = None,
             allowed: Sequence[Path] | None = None
             ) -> dict[str, ParsedDocument | DocumentError] | None:
        """The file's documents by key for a chunk that asks for ``keys`` (the first of a
        repeated key): all of them, or, of a record file read a line at a time, at least those
        asked for that it still has. None where a confined job (``allowed``) finds the file
        outside its folders."""
        if not self._by_line(path):
            whole = self._read_whole(path, max_bytes, text_column, allowed)
            return None if whole is None else whole[0]
        cache_key = self._key(path, text_column, allowed)
        with contextlib.ExitStack() as files:
            read_at = time.time_ns()
            source = files.enter_context(self._opened(path, allowed))
            if source.gone:
                return {}
            if source.outside:
                return None
            with self._lock:  # (a hit waits for no thread's read)
                hit = self._served(cache_key, source.stamp, keys)
            if hit is not None:
                return hit
            with self._gate(cache_key):
                return self._read_window(cache_key, source, files, read_at, keys, Path(path),
                                         max_bytes, text_column)
        raise AssertionError("unreachable")  # (an ExitStack may swallow what the block raised)

    def _read_window(self, cache_key: str, source: _Opened, files: contextlib.ExitStack,
                     read_at: int, keys: set[str], path: Path, max_bytes: int,
                     text_column: str | None) -> dict[str, ParsedDocument | DocumentError] | None:
        """``pick``'s read of a record file, its gate held: on from where the file's window
        ended where that can be, else from the top (``files``: what holds ``source`` open,
        handed to the read that is kept)."""
        with self._lock:  # (another thread's read, while this one waited at the gate)
            hit = self._served(cache_key, source.stamp, keys)
            if hit is not None:
                return hit
            kept = self._files.pop(cache_key, None)
        same = kept is not None and kept.stamp == source.stamp and kept.window
        if kept is not None and same:
            keys = kept.present(keys)  # (not looked for where the file is known to lack them)
        budget = self._share(cache_key)
        rest, carried = None, {}
        known = kept.known if kept is not None and same else None
        if kept is not None:  # let its window go before the next is read (peak: twice)
            if same and kept.rest is not None:
                # The same file: read on from where the window ended, with those asked for that
                # it holds (a chunk across its end) and its last quarter, eight chunks at least,
                # half its share of the budget at most (the chunks of other threads of the
                # process that ask after this one: with four threads, 9 reads from the top of a
                # 97 MB file at a 32 MB budget).
                rest, kept.rest = kept.rest, None
                carried = self._tail(kept.docs, max(len(kept.docs) // 4, 8 * len(keys)), budget // 2)
                carried.update((k, kept.docs[k]) for k in keys if k in kept.docs)
            kept.close()
            del kept
            give_back_freed_memory()  # (glibc keeps what its documents freed)
        try:
            found = None
            if rest is not None:
                found = self._window(rest, keys, budget, from_top=False, carried=carried)
                if found is None:  # one asked for lies behind where it stopped
                    rest.close()
            if found is None:
                rest = _Rest(parse_file(path, max_bytes=max_bytes, text_column=text_column,
                                        checked=source.checked,
                                        records_over_bytes=self.records_over_bytes),
                             files.pop_all())  # (the file stays open with its parser)
                found = self._window(rest, keys, budget, from_top=True)
        except BaseException:
            if rest is not None:
                rest.close()
            raise
        assert found is not None and rest is not None
        docs, held, ended = found
        if ended:
            rest.close()
            rest.passed.settle()
            known = rest.passed  # (every key of the file)
        if not source.still_under():
            rest.close()
            return None
        self._keep(cache_key, read_at, _Kept(source.stamp, docs, [], held, window=True,
                                             rest=None if ended else rest, known=known))
        return docs

    # ------------------------------------------------------------------ files read whole

    def read(self, path: str, max_bytes: int, text_column: str | None = None
             ) -> tuple[dict[str, ParsedDocument | DocumentError], list[ParsedDocument | DocumentError]]:
        """The file's documents by key, and the later ones of a repeated key."""
        found = self._read_whole(path, max_bytes, text_column, None)
        assert found is not None  # (only a confined read finds a file outside)
        return found

    def read_under(self, path: str, max_bytes: int, text_column: str | None,
                   allowed: Sequence[Path]
                   ) -> tuple[dict[str, ParsedDocument | DocumentError],
                              list[ParsedDocument | DocumentError]] | None:
        """``read`` for a confined job (``allowed``: its folders' real paths): the file read
        only where what is opened lies under them (``OpenedUnder``, the walk's check alone left
        a race), else None (``OUTSIDE_ROOTS``). Stamped from the open file itself and cached
        apart from ``read``'s (whose stamp is taken before a read that may be of another file),
        so a hit is the text of the very file just checked."""
        return self._read_whole(path, max_bytes, text_column, allowed)

    def _read_whole(self, path: str, max_bytes: int, text_column: str | None,
                    allowed: Sequence[Path] | None
                    ) -> tuple[dict[str, ParsedDocument | DocumentError],
                               list[ParsedDocument | DocumentError]] | None:
        """``read`` (``allowed`` None) or ``read_under``: a file it cannot look at gives
        nothing, one a confined job finds outside its folders None."""
        read_at = time.time_ns()
        key = self._key(path, text_column, allowed)
        with self._opened(path, allowed) as source:
            if source.gone:
                return {}, []
            if source.outside:
                return None
            with self._lock:
                hit = self._files.get(key)
                if hit is not None and hit.stamp == source.stamp and not hit.window:
                    self._files.move_to_end(key)
                    return hit.docs, hit.repeated
            docs, repeated = self._parse(Path(path), max_bytes, text_column, source.checked)
            if not source.still_under():  # (the fallback's check after the read)
                return None
        self._keep(key, read_at, self._whole(source.stamp, docs, repeated))
        return docs, repeated

    # ------------------------------------------------------------------ inside

    def _by_line(self, path: str) -> bool:
        """Whether ``path`` is a record file read a line at a time (never kept whole)."""
        try:
            size = os.stat(path).st_size
        except OSError:
            return False  # (``read`` answers it)
        return reads_records_by_line(Path(path), size, self.records_over_bytes)

    @staticmethod
    def _key(path: str, text_column: str | None, allowed: Sequence[Path] | None) -> str:
        # (a confined job's reads cached apart: see ``read_under``)
        return f"{path}\0{text_column or ''}" + ("" if allowed is None else "\0confined")

    @staticmethod
    def _stamp(st: os.stat_result, confined: bool) -> tuple[int, ...]:
        return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns) + \
            ((st.st_dev,) if confined else ())

    @contextlib.contextmanager
    def _opened(self, path: str, allowed: Sequence[Path] | None) -> Iterator[_Opened]:
        """The file to read a line at a time, stamped as ``read`` / ``read_under`` stamp it."""
        if allowed is None:
            try:
                st = os.stat(path)
            except OSError:
                yield _Opened(gone=True)
                return
            yield _Opened(self._stamp(st, confined=False))
            return
        try:
            opened = OpenedUnder(Path(path), allowed)
        except OSError:
            yield _Opened(gone=True)
            return
        with opened:
            if opened.checked is None:
                yield _Opened(outside=True)
                return
            yield _Opened(self._stamp(opened.stat, confined=True), opened.checked,
                          opened.still_under, opened.by_fd)

    def _window(self, rest: _Rest, wanted: set[str], budget: int, from_top: bool,
                carried: dict[str, ParsedDocument | DocumentError] | None = None
                ) -> tuple[dict[str, ParsedDocument | DocumentError], int, bool] | None:
        """Read on in ``rest`` for the documents of the keys in ``wanted`` and, from the first
        of them on, those that follow, each the first of its key in the file, until about
        ``budget`` is held; no further once that is so and every key wanted is found.
        Gives the documents, what they take, and whether the file's end was reached; None,
        where the read goes on from a window (not ``from_top``), when a key wanted was given
        before where it went on from or is not found after it (read from the top then).
        Going on, the window starts where the read goes on (the chunks between, other
        threads' or processes', come next), with ``carried``: those wanted that the window
        before held (a chunk across its end)."""
        docs: dict[str, ParsedDocument | DocumentError] = dict(carried or {})
        missing = set(wanted) - docs.keys()
        passed = rest.passed
        held = sum(map(_held, docs.values()))
        started = not from_top
        if started:
            passed.settle()
            if any(passed.had(key) for key in missing):
                return None  # (its first lies behind: not read on to the end to find that)
        # Read from the top, the window starts a little before the first wanted (a quarter of
        # the budget, eight chunks at least, half the budget at most): the chunks of other threads of the process that
        # ask after this one.
        before: collections.deque[tuple[ParsedDocument | DocumentError, int]] = collections.deque()
        before_held, lookback, lookback_docs = 0, budget // 4, 8 * len(wanted)
        for item in rest.results:
            if not isinstance(item, ParsedDocument | DocumentError):
                continue
            key = item.key
            if not started:
                passed.add(key)
                if key not in missing:
                    before.append((item, size := _held(item)))
                    before_held += size
                    while (before_held > lookback and len(before) > lookback_docs) \
                            or before_held > budget // 2:
                        before_held -= before.popleft()[1]
                    continue
                passed.settle()  # (every key before the window)
                started = True
                for earlier, size in before:  # (each the only one of its key so far)
                    if earlier.key not in docs and passed.count(earlier.key) == 1:
                        docs[earlier.key] = earlier
                        held += size
                before.clear()
            else:
                passed.add(key)
            if key in docs:
                continue  # (a later one of a key in the window)
            if key in missing:  # (going on, checked against those passed before, at the start)
                missing.discard(key)
            elif held >= budget or passed.had(key):
                continue  # (past the budget, or a later one of a key given before it)
            docs[key] = item
            held += _held(item)
            if not missing and held >= budget:
                return docs, held, False
        if missing and not from_top:
            return None
        return docs, held, True

    def _served(self, cache_key: str, stamp: tuple[int, ...], keys: set[str]
                ) -> dict[str, ParsedDocument | DocumentError] | None:
        """Under the lock: the file's window where it is of the file as stamped now and holds
        every key asked for (those the file is known to have), else None."""
        kept = self._files.get(cache_key)
        if kept is not None and kept.stamp == stamp and kept.window \
                and kept.present(keys) <= kept.docs.keys():
            self._files.move_to_end(cache_key)
            return kept.docs
        return None

    def _share(self, cache_key: str) -> int:
        """What a window of the file under ``cache_key`` may hold: its share of the budget with
        the other files' windows kept, less a tenth for what a window takes past it (the
        document that fills it, those asked for beyond it). Each held the whole budget, and two
        large files whose chunks come in turn (two jobs) each let the other's window go: read
        from the top at every chunk."""
        with self._lock:
            others = sum(entry.window for key, entry in self._files.items() if key != cache_key)
        return int(0.9 * self.max_bytes_kept) // (1 + others)

    def close_reads(self) -> None:
        """Close the reads kept open at the end of windows (their files, and the parsers in
        them): a worker idle, or its job done, held its last files open with no end, a
        deleted upload's disk space with them. The next chunk of such a file reads it from the
        top."""
        with self._lock:
            rests = [entry.rest for entry in self._files.values() if entry.rest is not None]
            for entry in self._files.values():
                entry.rest = None
        for rest in rests:
            rest.close()

    @staticmethod
    def _tail(docs: dict[str, ParsedDocument | DocumentError], count: int, most: int
              ) -> dict[str, ParsedDocument | DocumentError]:
        """The last ``count`` of ``docs`` (in the file's order), no more than ``most`` bytes."""
        tail: list[tuple[str, ParsedDocument | DocumentError]] = []
        held = 0
        for key in reversed(docs):
            if len(tail) >= count or held + (size := _held(docs[key])) > most:
                break
            tail.append((key, docs[key]))
            held += size
        return dict(reversed(tail))

    @contextlib.contextmanager
    def _gate(self, cache_key: str) -> Iterator[None]:
        """Hold the file's gate (``_Gate``) for the block."""
        with self._lock:
            gate = self._gates.get(cache_key)
            if gate is None:
                gate = self._gates[cache_key] = _Gate()
            gate.users += 1
        try:
            with gate.lock:
                yield
        finally:
            with self._lock:
                gate.users -= 1
                if not gate.users:
                    del self._gates[cache_key]

    def _parse(self, path: Path, max_bytes: int, text_column: str | None,
               checked: CheckedFile | None = None
               ) -> tuple[dict[str, ParsedDocument | DocumentError], list[ParsedDocument | DocumentError]]:
        docs: dict[str, ParsedDocument | DocumentError] = {}
        repeated: list[ParsedDocument | DocumentError] = []
        # Whole documents (a large .txt is not streamed: it is one document, held to be
        # chunked), read as the job's inline run would read them.
        for item in parse_file(path, max_bytes=max_bytes, text_column=text_column,
                               checked=checked, records_over_bytes=self.records_over_bytes):
            if isinstance(item, ParsedDocument | DocumentError):
                if item.key in docs:
                    repeated.append(item)
                else:
                    docs[item.key] = item
        return docs, repeated

    @staticmethod
    def _whole(stamp: tuple[int, ...], docs: dict[str, ParsedDocument | DocumentError],
               repeated: list[ParsedDocument | DocumentError]) -> _Kept:
        return _Kept(stamp, docs, repeated,
                     sum(_held(item) for item in docs.values()) + sum(map(_held, repeated)))

    def _keep(self, key: str, read_at: int, entry: _Kept) -> None:
        """Keep ``entry`` as the file's (unless it is "racy"), then let the least recent go
        while over the budget; what is let go is closed (a window's open read)."""
        gone: list[_Kept] = []
        with self._lock:
            old = self._files.pop(key, None)
            if old is not None and old is not entry:
                gone.append(old)
            if entry.stamp[1] < read_at - self.RACY_NS:  # (mtime; else read again next time)
                self._files[key] = entry
            else:
                gone.append(entry)
            kept = sum(kept.held for kept in self._files.values())
            while len(self._files) > 1 and (len(self._files) > self.max_files or
                                            kept > self.max_bytes_kept):
                _, least = self._files.popitem(last=False)
                kept -= least.held
                gone.append(least)
        for entry in gone:
            entry.close()

    def configure(self, max_bytes_kept: int, records_over_bytes: int) -> None:
        """From now on keep about ``max_bytes_kept`` bytes of documents in all (the most recent
        file's whatever they take: ``FACET_WORKER_PARSE_CACHE_MB``) and read a record file over
        ``records_over_bytes`` a line at a time (``FACET_STREAM_DOCUMENT_MB``)."""
        with self._lock:
            self.max_bytes_kept, self.records_over_bytes = max_bytes_kept, records_over_bytes


_PARSED = _ParseCache()


class _IdleRelease:
    """Lets the store's collections go once no chunk (or plan) of theirs has run in this
    process for ``idle_s`` seconds (an embedded store's folder is held by one process at a
    time; a server's ``release`` does nothing).

    Held until the job's end, a collection stayed open in every worker that had run a chunk of
    a job whose last chunk was lost with a killed worker, until the broker re-delivered it
    (``FACET_VISIBILITY_TIMEOUT_S``, an hour): the stalled job's advised rerun, a search, a
    ``POST /jobs`` were all refused as open in that worker. Let go after each chunk, the next
    chunk of the same job reopened it: about 100 ms a chunk (a 240-point collection: 30-65 ms
    to load the shard, 30-80 ms to flush and close it, measured 2026-11-30), against a 4-document
    chunk's 330 ms. So it is let go after a short idle instead: a worker going from one chunk of
    a job to the next (milliseconds apart) keeps it open.

    One daemon thread, started on first use in the process that uses it (a pool process, after
    the fork); ``idle_s`` 0 lets go at once, in the caller's thread.
    """

    def __init__(self, store: Any, idle_s: float) -> None:
        self.store = store
        self.idle_s = max(0.0, idle_s)
        self._cond = threading.Condition()
        self._busy: collections.Counter[str] = collections.Counter()
        self._due: dict[str, float] = {}  # collection -> when it is let go (monotonic)
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def using(self, collection: str) -> Iterator[None]:
        """Count ``collection`` used for the block; let it go ``idle_s`` after the last use."""
        with self._cond:  # waits for a release of it in progress: the block reopens it then
            self._busy[collection] += 1
            self._due.pop(collection, None)
        try:
            yield
        finally:
            now_release = False
            with self._cond:
                self._busy[collection] -= 1
                if self._busy[collection] <= 0:
                    del self._busy[collection]
                    if self.idle_s <= 0:
                        now_release = True
                    else:
                        self._due[collection] = time.monotonic() + self.idle_s
                        if self._thread is None or not self._thread.is_alive():
                            self._thread = threading.Thread(
                                target=self._run, name="facet-store-idle-release", daemon=True)
                            self._thread.start()
                        self._cond.notify_all()
            if now_release:
                self._release(collection)

    def _release(self, collection: str) -> None:
        try:
            self.store.release(collection)
        except Exception as e:  # its next use reopens it, or says what is wrong
            logger.warning("collection %r could not be let go after its chunks: %s: %s",
                           collection, type(e).__name__, e)
        else:
            logger.debug("collection %r let go: no chunk of it running in this process",
                         collection)
        with self._cond:  # (held already where the idle thread calls: re-entrant)
            idle = not self._busy and not self._due
        if idle:  # (no chunk of any collection runs here: no file need stay open; a busy
            _PARSED.close_reads()  # one's read was closed too, and read from the top again)

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._due:
                    self._cond.wait()
                    continue
                collection, at = min(self._due.items(), key=lambda item: item[1])
                left = at - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                del self._due[collection]
                # Under the condition: a chunk of it arriving now waits for the release, then
                # reopens it (never a release under a running chunk).
                self._release(collection)

    def pending(self) -> list[str]:
        """The collections waiting to be let go (for tests and logs)."""
        with self._cond:
            return sorted(self._due)


class ChunkedIndexService:
    """Plans index jobs into chunk rows and runs chunks; see the module docstring.

    Args:
        ctx: the worker's context (store, sessions, embedders, an in-process encoder).
        idle_release_s: let a collection's store go this long after the last chunk or plan of
            it ended in this process (``_IdleRelease``; 0: at once); None (default): held until
            its job ends, as a process that runs every chunk of a job itself wants.
    """

    def __init__(self, ctx: ServiceContext, idle_release_s: float | None = None) -> None:
        self.ctx = ctx
        self.index = IndexService(ctx)
        self.settings = ctx.settings
        self.sessions = ctx.sessions
        self.store = ctx.store
        self.worker = f"{leases.HOST}:{os.getpid()}"
        self.idle = None if idle_release_s is None else _IdleRelease(ctx.store, idle_release_s)
        _PARSED.configure(int(self.settings.worker_parse_cache_mb * 2**20),
                          int(self.settings.stream_document_mb * 2**20))

    def _using(self, collection: str) -> contextlib.AbstractContextManager[None]:
        """The block uses ``collection``'s store: let go after an idle, where so configured."""
        return contextlib.nullcontext() if self.idle is None else self.idle.using(collection)

    # ------------------------------------------------------------------ plan

    def plan(self, prepared: PreparedJob, chunk_docs: int | None = None) -> list[int]:
        """Plan a queued job into chunk rows (or find its plan again); the chunks to send.

        Raises:
            JobGone: the job is not in this database (its collection was deleted, or this
                worker reads another database than the server that queued it).
            WriterBusy: another live job writes the collection.
            NotFoundError: the source is gone (the job is marked failed).
            UnknownModelError: the job's model cannot be loaded here (the job is marked failed).
        """
        with self._using(prepared.collection):  # planning makes (opens) its store collection
            return self._plan_held(prepared, chunk_docs)

    def _plan_held(self, prepared: PreparedJob, chunk_docs: int | None) -> list[int]:
        chunk_docs = chunk_docs or self.settings.worker_chunk_docs
        try:
            embedder, load_s = load_here(self.ctx, prepared.embedder, self.worker)
        except Exception as e:
            if not is_transient(e):
                # A model this worker cannot load (a checkpoint removed or unreadable since the
                # job was queued) fails the job, said on its row: the task's handler counts on
                # that for a domain error, and the job stayed `queued` for ever.
                self.index.fail(prepared.job_id, IndexService.failure_message(e))
            raise
        with self.sessions() as session:
            job = md.get_job(session, prepared.job_id)
            back = "sending its task back to the broker for a worker on that database"
            if job is None:
                # Certainly another database's (its id above this one's highest), the planner
                # task goes back to the broker as a chunk task does: dropped, with a worker on
                # the right database idle beside this one, the job stayed `queued` for ever.
                highest = highest_job_id(session)
                elsewhere = highest is not None and prepared.job_id > highest
                raise JobGone(gone_message(
                    prepared.job_id, self.settings.database_description(path=True), highest,
                    then=back), elsewhere=elsewhere)
            if (job.collection.name, job.source) != (prepared.collection, prepared.source):
                # Another job of the same id: this worker reads another database than the
                # server that queued it (which it would have planned, into another collection).
                raise JobGone(
                    f"index job {job.id} in this worker's database "
                    f"({self.settings.database_description(path=True)}) indexes "
                    f"{job.source!r} into {job.collection.name!r}, not the {prepared.source!r} "
                    f"into {prepared.collection!r} that was queued: the job was queued by a server "
                    f"on another database; {_OTHER_DATABASE}; {back}", elsewhere=True)
            if job.state in TERMINAL_JOB_STATES:  # cancelled while queued, or done already
                logger.info("job %d is %s; nothing to plan", job.id, job.state)
                return []
            coll = job.collection
            current = leases.acquire(session, coll.id, job.id, self.settings.lease_ttl_s)
            if current is not None:
                job.message = f"waiting for {current.describe()} to finish writing {coll.name!r}"
                session.commit()
                raise WriterBusy(job.message, retry_in_s=min(30.0, self.settings.lease_ttl_s))
            if job.chunks_total:  # planned already: a re-delivered planner re-sends the rest
                return self._queued_numbers(session, job.id)
            if job.state != "running":  # (running: a planner died before its plan committed)
                self.index.take_lease(session, coll, job)
                # Only from ``queued``, in one statement: a cancel committed since the row was
                # read above made it ``cancelled``, which the planner turned back to running,
                # ran the job's sync (its removals) and ended it "cancelled before any
                # document was indexed: nothing was written".
                J = md.IndexJob
                started = session.execute(update(J).where(J.id == job.id, J.state == "queued").values(
                    state="running", pid=os.getpid(), host=leases.HOST, started_at=md.utcnow(),
                    message=None))
                session.commit()
                if not getattr(started, "rowcount", 1):
                    leases.release(session, coll.id, job.id)
                    session.refresh(job)
                    logger.info("job %d is %s; nothing to plan", job.id, job.state)
                    return []
                session.refresh(job)
            try:
                job.load_s += load_s  # on the job row, as a chunk's load (``_Tally.load_s``)
                return self._plan(session, coll, job, prepared, embedder, chunk_docs)
            except BaseException as e:
                session.rollback()
                if isinstance(e, Exception) and is_transient(e):
                    raise  # the task plans again (nothing was committed); see ``give_up``
                self.index.fail_held(session, job, f"{type(e).__name__}: {e}")
                raise

    def job_state(self, job_id: int) -> str | None:
        """Job ``job_id``'s state as recorded now; None where it has no row."""
        with self.sessions() as session:
            job = md.get_job(session, job_id)
            return None if job is None else job.state

    def give_up(self, job_id: int, message: str) -> None:
        """Fail a job whose planning kept meeting transient errors (its retries ran out)."""
        with self.sessions() as session:
            job = md.get_job(session, job_id)
            if job is not None and job.state in md.UNENDED_STATES:
                self.index.fail_held(session, job, message)

    def _plan(self, session: Session, coll: md.Collection, job: md.IndexJob,
              prepared: PreparedJob, embedder: Any, chunk_docs: int) -> list[int]:
        t0 = time.perf_counter()
        source = Path(prepared.source)
        # This worker's model may not be the one the job was queued against (retrained since,
        # or another checkpoint on this machine): refuse before planning anything.
        check_same_embedder(coll, embedder, self.ctx.embedders.identity(embedder),
                            worker=self.worker)
        try:
            files = discover(source, (self.settings.data_dir,))  # as the job was checked
        except (SourceNotFoundError, UnsupportedSourceError) as e:
            raise NotFoundError(f"{e} (it was there when the job was queued)") from e
        files, into_own = outside_own(files, (self.settings.data_dir,), source)
        files, outside = confined(files, prepared.options.confine)  # (links made since the check)
        self.index.ensure_store_collection(session, coll, job, embedder)
        report = IndexReport(job_id=job.id, collection=coll.name, embedder=embedder.name,
                             state="running")
        # (as a run in one process says them)
        self.index._note_skipped(job, report, sorted([*outside, *into_own]), set(outside), set(into_own))
        max_bytes = int(self.settings.max_document_mb * 2**20)
        seen = Seen(uploads=upload_run(self.settings, job.source, coll.name))
        todo: list[list[Any]] = []
        # A confined job's folders: its files read only where what is opened lies under them
        # (``read_under``), here and again in each chunk, whose documents carry them.
        confine = prepared.options.confine
        allowed = None if confine is None else real_paths(confine)
        pending: list[ParsedDocument | DocumentError] = []

        def classify(batch: list[ParsedDocument | DocumentError]) -> None:
            batch = storable(batch)
            rows = md.documents_by_key(session, coll.id, [b.key for b in batch])
            hashes = md.vector_hashes(session, [r.id for r in rows.values()], embedder.name)
            for item in batch:
                row = rows.get(item.key)
                if isinstance(item, DocumentError):
                    report.docs_seen += 1
                    self.index._record_error(session, coll, job, report, item, row)
                    continue
                digest = item.content_hash
                if row is not None and row.status == "indexed" and row.content_hash == digest \
                        and hashes.get(row.id) == digest and row.source == item.source:  # not moved
                    report.docs_seen += 1
                    report.docs_skipped += 1
                    row.error = None  # (a failed run's note beside the indexed version is over)
                else:
                    todo.append([item.key, item.source, digest] +
                                ([] if confine is None else [list(confine)]))

        for path in files:
            for item in _PARSED.planned(str(path), max_bytes, job.text_column, allowed):
                if isinstance(item, OutsideRoots):  # not read: said as the walk's own are
                    self.index.note_outside(job, report, path)
                    break
                if item.key in seen.keys:
                    message = seen.duplicate_message(item.key, item.source)
                    report.docs_seen += 1
                    report.docs_failed += 1
                    report.errors.append((item.key, message))
                    job.errors.append(md.JobError(document_key=item.key, kind="error",
                                                  message=message))
                    continue
                seen.add(item)
                pending.append(item)
                if len(pending) >= 500:
                    classify(pending)
                    pending = []
        if pending:
            classify(pending)
        if prepared.options.syncs(source):
            self.index._sync(session, coll, job, report, source, files, seen)
        else:  # as an embedded run ends (``IndexService.index``)
            self.index._drop_stale_errors(session, coll, source, files, seen)
            self.index._note_unsynced(session, coll, job, report, source, files, seen)
        numbers = []
        for number, start in enumerate(range(0, len(todo), chunk_docs)):
            session.add(md.JobChunk(job_id=job.id, number=number, state="queued", attempts=0,
                                    docs=todo[start:start + chunk_docs]))
            numbers.append(number)
        IndexService._sync_counters(job, report)
        job.docs_total = report.docs_seen + len(todo)
        job.chunks_total = len(numbers)
        job.parse_s += time.perf_counter() - t0
        session.commit()
        logger.info("job %d planned: %d documents to index in %d chunks, %d unchanged, %d failed",
                    job.id, len(todo), len(numbers), report.docs_skipped, report.docs_failed)
        if not numbers:
            self._finish(session, job.id)
        return numbers

    @staticmethod
    def _queued_numbers(session: Session, job_id: int) -> list[int]:
        return list(session.scalars(select(md.JobChunk.number).where(
            md.JobChunk.job_id == job_id, md.JobChunk.state == "queued")
            .order_by(md.JobChunk.number)))

    # ------------------------------------------------------------------ chunks

    def _claim(self, session: Session, job_id: int, number: int) -> bool:
        now = md.utcnow()
        until = now + dt.timedelta(seconds=self.settings.lease_ttl_s)
        C = md.JobChunk
        result = session.execute(update(C).where(
            C.job_id == job_id, C.number == number,
            or_(C.state == "queued",
                (C.state == "running") & (or_(C.claimed_until.is_(None), C.claimed_until <= now)))
        ).values(state="running", attempts=C.attempts + 1, worker=self.worker,
                 claimed_until=until))
        session.commit()
        return bool(result.rowcount == 1)  # type: ignore[attr-defined]

    def _renew_claim(self, job_id: int, number: int) -> Any:
        def renew(session: Session) -> None:
            C = md.JobChunk
            session.execute(update(C).where(C.job_id == job_id, C.number == number,
                                            C.worker == self.worker, C.state == "running")
                            .values(claimed_until=md.utcnow() + dt.timedelta(
                                seconds=self.settings.lease_ttl_s)))
            session.commit()
        return renew

    def release_claim(self, job_id: int, number: int) -> None:
        """Put a claimed chunk back to ``queued`` after a transient error (a retry follows);
        the attempt does not count towards the poison limit."""
        with self.sessions() as session:
            C = md.JobChunk
            session.execute(update(C).where(C.job_id == job_id, C.number == number,
                                            C.state == "running", C.worker == self.worker)
                            .values(state="queued", attempts=C.attempts - 1, claimed_until=None))
            session.commit()

    def run_chunk(self, job_id: int, number: int) -> ChunkOutcome:
        """Index one chunk of a planned job (see the module docstring).

        Raises:
            ChunkBusy: another live worker holds the chunk's claim, or the collection's
                embedded store (the chunk is neither claimed nor encoded).
            JobGone: the job is not in this database, whose highest job id ever is below it:
                the job of a server on another database (the task sends it back).
            Transient errors of the store or database (the caller retries them; call
            ``release_claim`` first).
        """
        with contextlib.ExitStack() as held:
            return self._run_chunk(job_id, number, held)

    def _run_chunk(self, job_id: int, number: int, held: contextlib.ExitStack) -> ChunkOutcome:
        with self.sessions() as session:
            job = md.get_job(session, job_id)
            if job is not None:  # its collection in use until the chunk's end (``_IdleRelease``)
                held.enter_context(self._using(job.collection.name))
            if job is None:
                highest = highest_job_id(session)
                message = gone_message(
                    job_id, self.settings.database_description(path=True), highest,
                    then="sending its task back to the broker for a worker on that database")
                if highest is not None and job_id > highest:
                    # Certainly another database's job (this worker's FACET_DATA_DIR /
                    # FACET_DATABASE_URL differ from the server's): the task sends it back to
                    # the broker for a worker on the right one (it dropped it, said as a
                    # deleted collection, and the job waited for the sweeper).
                    raise JobGone(message, elsewhere=True)
                # Its collection deleted, most likely (or an older job of another database):
                # dropped, said at INFO (a deleted collection's chunks are many).
                logger.info("chunk %d: %s", number, message)
                return ChunkOutcome(job_id, number, "gone", message=message)
            if job.state != "running":
                return ChunkOutcome(job_id, number, "skipped", message=f"job is {job.state}")
            if job.cancel_requested:  # (the job row read fresh: the check costs nothing more)
                finished = self._cancel_chunks(session, job_id)
                return ChunkOutcome(job_id, number, "skipped", finished_job=finished,
                                    message="job cancelled")
            chunk = session.scalar(select(md.JobChunk).where(md.JobChunk.job_id == job_id,
                                                             md.JobChunk.number == number))
            if chunk is None:
                return ChunkOutcome(job_id, number, "gone", message="no such chunk")
            if chunk.state not in ("done", "failed"):  # (a finished one completes its job now)
                self._wait_if_store_held(job.collection.name, job_id, number)
            if not self._claim(session, job_id, number):
                session.refresh(chunk)
                if chunk.state in ("done", "failed"):
                    # A re-delivered (or swept) task of a finished chunk still completes the job
                    # if its last chunk's run could not: it raised in the finish, or its worker
                    # died between the chunk's commit and the finish.
                    finished = self._finish(session, job_id)
                    return ChunkOutcome(job_id, number, "duplicate", finished_job=finished,
                                        message=f"chunk already {chunk.state}")
                left = ((chunk.claimed_until - md.utcnow()).total_seconds()
                        if chunk.claimed_until else 1.0)
                raise ChunkBusy(f"chunk {number} of job {job_id} is claimed by {chunk.worker}",
                                retry_in_s=max(1.0, min(left + 0.5, 60.0)))
            session.refresh(chunk)
            coll = job.collection
            docs = [tuple(d) for d in chunk.docs]
            if chunk.attempts > self.settings.worker_poison_limit:
                message = (f"chunk {number} was started {plural(chunk.attempts - 1, 'time')} and its worker "
                           "died each time (out of memory? a crash?); its documents are skipped "
                           f"(FACET_WORKER_POISON_LIMIT={self.settings.worker_poison_limit})")
                self._fail_chunk(session, job, chunk, docs, message)
                finished = self._finish(session, job_id)
                return ChunkOutcome(job_id, number, "poisoned", len(docs), finished_job=finished,
                                    message=message)
            current = leases.acquire(session, coll.id, job.id, self.settings.lease_ttl_s)
            if current is not None:
                message = (f"job {job_id} lost the lease of {coll.name!r} to {current.describe()}"
                           "; this chunk is not written")
                # The documents are the holder's now: their rows are left as it writes them.
                self._fail_chunk(session, job, chunk, docs, message, documents=False)
                return ChunkOutcome(job_id, number, "failed", len(docs), message=message)
            with leases.Heartbeat(self.sessions, coll.id, job.id, self.settings.lease_ttl_s,
                                  extra=self._renew_claim(job_id, number),
                                  name=coll.name) as heartbeat:
                try:
                    written = self._write_chunk(session, coll, job, chunk, docs, heartbeat)
                except _ClaimLost as e:
                    session.rollback()
                    logger.warning("chunk %d of job %d: %s", number, job_id, e)
                    return ChunkOutcome(job_id, number, "duplicate", message=str(e))
                except Exception as e:
                    if is_transient(e):
                        raise
                    session.rollback()
                    chunk = session.get(md.JobChunk, chunk.id, populate_existing=True)
                    job = md.get_job(session, job_id)
                    if job is None or chunk is None:
                        return ChunkOutcome(job_id, number, "gone",
                                            message="the job was deleted while the chunk ran")
                    if chunk.state != "running" or chunk.worker != self.worker:
                        # Taken over while this run stalled: the error comes from the two runs
                        # meeting (e.g. both inserting the chunk rows); the other run counts.
                        message = (f"{_ClaimLost.message(chunk.worker, chunk.state, self.worker)} "
                                   f"(this run ended with "
                                   f"{type(e).__name__})")
                        logger.warning("chunk %d of job %d: %s", number, job_id, message)
                        return ChunkOutcome(job_id, number, "duplicate", message=message)
                    if heartbeat.lost:
                        # Taken over by another job (this run stalled past the lease): its
                        # documents are that job's, which had just indexed them; failing them
                        # here marked them errors and counted them failed in the collection.
                        message = (f"chunk {number} not written: {IndexService.failure_message(e)}; "
                                   "its documents are left to the job that holds the collection now")
                        logger.warning("job %d: %s", job_id, message)
                        self._fail_chunk(session, job, chunk, docs, message, documents=False)
                        return ChunkOutcome(job_id, number, "failed", len(docs),
                                            finished_job=self._finish(session, job_id), message=message)
                    message = f"chunk {number} failed: {IndexService.failure_message(e)}"
                    logger.exception("job %d: %s", job_id, message)
                    self._fail_chunk(session, job, chunk, docs, message)
                    finished = self._finish(session, job_id)
                    return ChunkOutcome(job_id, number, "failed", len(docs),
                                        finished_job=finished, message=message)
            finished = self._finish(session, job_id)
            return ChunkOutcome(job_id, number, "done", len(docs), written, finished)

    def _wait_if_store_held(self, collection: str, job_id: int, number: int) -> None:
        """Before the chunk is claimed or encoded: where another process holds the collection's
        embedded store, wait for it now, not after the encode (a second worker encoded each chunk
        in full, ~7 s, then found the store held and threw the work away, half the CPU spent
        for nothing, and with a holder stopped kept the job's lease alive as if it progressed:
        the distributed exploration of the fourth session of 2026-12-07). Another `facet
        worker` writing it is a turn to wait for (``ChunkBusy``: not among the transient
        retries, as a claim's wait is not); any other holder (a `facet serve` that opened it)
        is the transient error it was, before any work.

        Raises:
            ChunkBusy: another worker holds it.
            StoreBusyError: another process holds it.
        """
        from indexer.errors import StoreBusyError
        from indexer.store import held_by_worker

        try:
            self.store.check_free(collection, wait_s=0)
        except StoreBusyError as e:
            if not held_by_worker(e.holder):
                raise
            logger.info("chunk %d of job %d: %s; trying again in %.0fs", number, job_id, e,
                        STORE_TURN_WAIT_S)
            raise ChunkBusy(str(e), retry_in_s=STORE_TURN_WAIT_S) from e
        except Exception:
            # Anything else (a Qdrant server refusing its key: a server store is locked by no
            # process, yet its check asks it) is the write's to meet, which fails the chunk with
            # its reason: raised here, outside that handling, the task failed on a traceback and
            # the job said nothing (the verification round of the fourth session of 2026-12-07).
            return

    def _current_documents(self, docs: list[tuple[Any, ...]], text_column: str | None = None
                           ) -> tuple[list[ParsedDocument | DocumentError], list[str]]:
        """The chunk's documents as the source holds them now (changed ones noted), and the
        files of a confined job's documents found outside its folders now (not read: a file
        the plan read can have been made a link to a file elsewhere since)."""
        max_bytes = int(self.settings.max_document_mb * 2**20)
        out: list[ParsedDocument | DocumentError] = []
        outside: list[str] = []
        # The keys asked of each file (with the job's folders, where confined), each file read
        # once for all of them: a large record file's are all that is kept of it.
        wanted: dict[tuple[str, tuple[str, ...] | None], set[str]] = {}
        for key, source, _, *confine in docs:
            roots = tuple(str(root) for root in confine[0]) if confine else None
            wanted.setdefault((str(source), roots), set()).add(str(key))
        allowed: dict[tuple[str, ...], list[Path]] = {}
        found: dict[tuple[str, tuple[str, ...] | None],
                    dict[str, ParsedDocument | DocumentError] | None] = {}
        for (source, roots), keys in wanted.items():
            if roots is not None and roots not in allowed:
                allowed[roots] = real_paths(roots)
            found[source, roots] = _PARSED.pick(source, keys, max_bytes, text_column,
                                                None if roots is None else allowed[roots])
        for key, source, planned_hash, *confine in docs:
            of_file = found[str(source), tuple(str(root) for root in confine[0]) if confine else None]
            if of_file is None:  # (a confined job's file found outside its folders)
                if str(source) not in outside:
                    outside.append(str(source))
                continue
            item = of_file.get(str(key))
            if item is None:
                # (A plain file, its own key, deleted meanwhile "is no longer in" itself.)
                deleted = not os.path.lexists(str(source))
                said = (f"{source} was deleted after the job was planned" if str(key) == str(source)
                        else f"{key} is no longer in {source} ("
                        + ("the file was deleted" if deleted else "removed") + " after the job was "
                        "planned)")
                out.append(DocumentError(str(key), str(source), f"{said}; not indexed"))
                continue
            if isinstance(item, ParsedDocument) and item.content_hash != planned_hash:
                item = ParsedDocument(item.key, item.source, item.text, item.title,
                                      dict(item.metadata), [*item.warnings,
                                      f"{key} changed after the job was planned; its current "
                                      "content was indexed"])
            out.append(item)
        return out, outside

    def _write_chunk(self, session: Session, coll: md.Collection, job: md.IndexJob,
                     chunk: md.JobChunk, docs: list[tuple[Any, ...]],
                     heartbeat: leases.Heartbeat | None = None) -> int:
        # The job names the vector; the collection records what loads its embedder (a checkpoint's
        # path, options), which the vector's name alone would not.
        spec = next((e.spec for e in coll.embedders if e.name == job.embedder), job.embedder)
        embedder, load_s = load_here(self.ctx, spec, self.worker)
        # Each chunk may run on another worker, with its own copy of the checkpoint: a copy that
        # differs from the one the collection was indexed with fails this chunk, writing nothing.
        check_same_embedder(coll, embedder, self.ctx.embedders.identity(embedder),
                            worker=self.worker)
        tokenize = self.index._tokenizer_for(coll, embedder)
        chunking = ChunkingConfig(coll.chunk_size, coll.chunk_overlap)
        t0 = time.perf_counter()
        items, outside = self._current_documents(docs, job.text_column)
        tally = _Tally(parse_s=time.perf_counter() - t0, load_s=load_s)
        report = IndexReport(job_id=job.id, collection=coll.name, embedder=embedder.name,
                             state="running")
        for source in outside:  # said as an inline run says them (``note_outside``)
            self.index.note_outside(tally, report, Path(source))
        tally.outside = len(docs) - len(items)
        # Another embedder of the collection that an earlier chunk of this job could not load
        # is not tried (nor warned about: once a job, as inline) again in each chunk.
        J = md.JobError
        report.warnings.extend((str(k), str(m)) for k, m in session.execute(
            select(J.document_key, J.message).where(
                J.job_id == job.id, J.kind == "warning",
                J.document_key.in_([companion_key(e.name) for e in coll.embedders]))))
        job_id, chunk_id = job.id, chunk.id

        def finish(s: Session) -> None:
            # Only while this worker still holds the claim: a worker that stalled past the
            # claim's ttl may find the chunk re-delivered to and run by another one, and the
            # chunk must count once (its points are the same: deterministic ids).
            C = md.JobChunk
            taken = s.execute(update(C).where(
                C.id == chunk_id, C.state == "running", C.worker == self.worker).values(
                state="done", finished_at=md.utcnow(), claimed_until=None, error=None))
            if taken.rowcount != 1:  # type: ignore[attr-defined]
                now = s.execute(select(C.worker, C.state).where(C.id == chunk_id)).first()
                holder, state = (now[0], now[1]) if now is not None else (None, None)
                raise _ClaimLost(_ClaimLost.message(holder, state, self.worker))
            if report.docs_moved:  # summed into the job's one note when it completes
                tally.errors.append(md.JobError(document_key="moved", kind="warning",
                                                message=moved_message(report)))
            if report.unread_chunks:  # summed into the job's one warning when it completes
                tally.errors.append(md.JobError(
                    document_key=embedder.name, kind="warning", message=unread_message(
                        embedder.name, report.unread_chunks, report.chunks_written,
                        "chunks written", list(report.unread_documents))))
            for name, count in report.cut_chunks.items():  # summed as the [UNK] warning is
                tally.errors.append(md.JobError(
                    document_key=name, kind="warning", message=cut_message(
                        name, count, report.cut_encoded.get(name, report.chunks_written),
                        report.cut_budget.get(name), report.cut_options.get(name))))
            for error in tally.errors:
                error.job_id = job_id
            s.add_all(tally.errors)
            self._add_counts(s, job_id, report, tally, chunks_done=1)

        self.index._process_batch(session, coll, tally, report, items, embedder, spec,
                                  tokenize, chunking, finish=finish, heartbeat=heartbeat,
                                  scope=job.source)
        return report.chunks_written

    @staticmethod
    def _add_counts(session: Session, job_id: int, report: IndexReport, tally: _Tally,
                    chunks_done: int) -> None:
        J = md.IndexJob
        total = {"docs_total": J.docs_total - tally.outside} if tally.outside else {}
        session.execute(update(J).where(J.id == job_id).values(
            **total,
            docs_seen=J.docs_seen + report.docs_seen,
            docs_indexed=J.docs_indexed + report.docs_indexed,
            docs_skipped=J.docs_skipped + report.docs_skipped,
            docs_failed=J.docs_failed + report.docs_failed,
            chunks_written=J.chunks_written + report.chunks_written,
            chunks_done=J.chunks_done + chunks_done,
            parse_s=J.parse_s + tally.parse_s, encode_s=J.encode_s + tally.encode_s,
            store_s=J.store_s + tally.store_s, metadata_s=J.metadata_s + tally.metadata_s,
            # With the other embedders' loads (companions), which the report holds.
            load_s=J.load_s + tally.load_s + sum(report.loads.values())))

    def _fail_chunk(self, session: Session, job: md.IndexJob, chunk: md.JobChunk,
                    docs: list[tuple[Any, ...]], message: str, *, documents: bool = True) -> None:
        """The chunk failed, each of its documents a job error; with ``documents`` False their
        rows are not touched (another job holds the collection and writes them)."""
        job_id, chunk_id, number = job.id, chunk.id, chunk.number
        try:
            self._record_failed_chunk(session, job, chunk, docs, message, documents=documents)
        except Exception as e:
            if is_transient(e):
                raise
            # Recording each document's error failed too (the error that failed the chunk can
            # fail its record: PostgreSQL refused a key SQLite stored). Raising here left the
            # chunk `running`: the sweeper sent it again every minute, past the poison limit,
            # and the job never ended. The chunk fails with one error instead.
            logger.exception("job %d: chunk %d's document errors could not be recorded", job_id,
                             number)
            session.rollback()
            job_row = md.get_job(session, job_id)
            chunk_row = session.get(md.JobChunk, chunk_id, populate_existing=True)
            if job_row is None or chunk_row is None:
                return
            self._record_failed_chunk(
                session, job_row, chunk_row, [], f"{message} (its {len(docs)} documents' own "
                f"errors could not be recorded: {type(e).__name__})", docs_failed=len(docs))

    def _record_failed_chunk(self, session: Session, job: md.IndexJob, chunk: md.JobChunk,
                             docs: list[tuple[Any, ...]], message: str,
                             docs_failed: int | None = None, *, documents: bool = True) -> None:
        """The chunk ``failed``; each of ``docs`` a job error and a failed document (with no
        ``docs``, one job error names the chunk and ``docs_failed`` documents are counted)."""
        n = len(docs) if docs_failed is None else docs_failed
        chunk.state, chunk.error, chunk.finished_at = "failed", message, md.utcnow()
        chunk.claimed_until = None
        report = IndexReport(job_id=job.id, collection=job.collection.name,
                             embedder=job.embedder, state="running",
                             docs_seen=n, docs_failed=n)
        tally = _Tally(errors=[md.JobError(job_id=job.id, document_key=str(key), kind="error",
                                           message=message) for key, *_ in docs] or
                       [md.JobError(job_id=job.id, document_key=f"chunk {chunk.number}",
                                    kind="error", message=message)])
        session.add_all(tally.errors)
        # The documents' rows say so too (a write that failed part-way left them ``pending``,
        # counted in the collection's documents but neither indexed nor failed).
        # (Not where ``documents`` is False: another job holds the collection and writes them.)
        rows = md.documents_by_key(session, job.collection_id,
                                   [str(key) for key, *_ in docs]) if documents else {}
        for key, source, *_ in docs if documents else ():
            note_document_error(session, job.collection_id, str(key), str(source), message,
                                rows.get(str(key)))
        self._add_counts(session, job.id, report, tally, chunks_done=1)
        session.commit()

    def fail_chunk(self, job_id: int, number: int, message: str) -> None:
        """Give a chunk up (its retries ran out); its documents become job errors."""
        with self.sessions() as session:
            job = md.get_job(session, job_id)
            chunk = session.scalar(select(md.JobChunk).where(md.JobChunk.job_id == job_id,
                                                             md.JobChunk.number == number))
            if job is None or chunk is None or chunk.state in ("done", "failed"):
                return
            self._fail_chunk(session, job, chunk, [tuple(d) for d in chunk.docs], message)
            self._finish(session, job_id)

    def _cancel_chunks(self, session: Session, job_id: int) -> bool:
        """A cancelled job's chunks that no worker is writing now (queued, or claimed by a
        worker that stopped renewing) end ``cancelled``; the chunks being written finish, and
        the last to finish ends the job (``_finish``). True if this call ended it."""
        now = md.utcnow()
        C = md.JobChunk
        session.execute(update(C).where(
            C.job_id == job_id,
            or_(C.state == "queued",
                (C.state == "running") & (or_(C.claimed_until.is_(None), C.claimed_until <= now)))
        ).values(state="cancelled", finished_at=now, claimed_until=None))
        session.commit()
        return self._finish(session, job_id)

    # ------------------------------------------------------------------ finish

    def _finish(self, session: Session, job_id: int) -> bool:
        """Complete the job if no chunk is left; True if this call completed it."""
        C = md.JobChunk
        left = session.scalar(select(func.count()).select_from(C).where(
            C.job_id == job_id, C.state.in_(md.UNENDED_STATES)))
        if left:
            return False
        job = md.get_job(session, job_id)
        if job is None or job.state != "running":
            return False
        coll = job.collection
        # The cancellation another process asked for is not on the row this session loaded.
        session.refresh(job)
        cancelled = job.cancel_requested
        t0 = time.perf_counter()
        notes = []
        # A cancelled job stops before the store's optimize, as an in-process one does (the
        # next run of the source does it); it was optimised, and then said "index the same
        # source again to resume" where every chunk had gone in (until 2026-11-30).
        if not cancelled:
            try:
                self.store.optimize(coll.name)
                self.store.flush()
                give_back_freed_memory()  # (what the optimizer freed: as an in-process job)
            except Exception as e:
                if is_transient(e):
                    raise  # the task is retried; its next run finds the chunk done and finishes
                # Every chunk is written and committed: the job is done, its index built later
                # by the store itself. Left running, nothing would ever complete it.
                logger.exception("job %d: the store could not be optimised", job_id)
                notes.append(f"the store could not be optimised ({type(e).__name__}: {e}); "
                             "every chunk was written")
        failed = session.scalar(select(func.count()).select_from(C).where(
            C.job_id == job_id, C.state == "failed")) or 0
        if failed:
            notes.insert(0, f"{plural(failed, 'chunk')} failed; their documents are listed as errors: "
                            f"facet jobs {job_id}")
        # The counts the chunks added by SQL updates (``_add_counts``) are not on the row this
        # session loaded either.
        session.refresh(job)
        state = "cancelled" if cancelled else "completed"
        if cancelled:
            # No chunk cancelled: every document had gone in (the cancel came while the last
            # chunks were written), and only the optimize is left, as the in-process runner says.
            left = session.scalar(select(func.count()).select_from(C).where(
                C.job_id == job_id, C.state == "cancelled")) or 0
            said: str | None = cancelled_message(job.docs_indexed,
                                                 None if left else [OPTIMIZE_STEP],
                                                 job.chunks_written or 0)
        else:
            # As the in-process runner says it: the state stays `completed`, and the message is
            # what says that not every document went in.
            said = failed_documents_message(job.docs_failed, job.docs_seen, job.docs_indexed,
                                            job.docs_deleted)
        if said:
            notes.insert(0, said)
        if left_empty(session, coll, job):  # (cancelled too, as the in-process runner says)
            notes.append(left_empty_note(coll.name))
        J = md.IndexJob
        done = session.execute(update(J).where(J.id == job_id, J.state == "running").values(
            state=state, finished_at=md.utcnow(), store_s=J.store_s + (
                time.perf_counter() - t0),
            message="; ".join(notes) or None))
        if done.rowcount == 1:  # type: ignore[attr-defined]
            self._sum_unread(session, job_id, job.embedder)
            self._sum_cut(session, job_id)
            self._sum_moved(session, job_id)
        session.commit()
        if done.rowcount == 1 and not cancelled and md.cancel_requested(session, job_id):  # type: ignore[attr-defined]
            # Asked after the check above (during the optimize, up to the commit): answered 200,
            # the job completed, and says so, as an in-process one does.
            session.execute(update(J).where(J.id == job_id).values(
                message="; ".join([*notes, CANCEL_TOO_LATE])))
            session.commit()
        leases.release(session, coll.id, job_id)
        self.store.release(coll.name)
        if done.rowcount == 1:  # type: ignore[attr-defined]
            # As the in-process runner logs it (this said "job 1 completed" and no more, its
            # failed documents and collection unsaid).
            keys = session.scalars(select(md.JobError.document_key).where(
                md.JobError.job_id == job_id, md.JobError.kind == "error").order_by(
                md.JobError.id).limit(FAILED_LOGGED)).all() if job.docs_failed else []
            level, line = job_end_line(job_id, state, coll.name, (
                job.docs_seen, job.docs_indexed, job.docs_skipped, job.docs_failed,
                job.docs_deleted), list(keys))
            logger.log(level, "%s", line)
            return True
        return False

    @staticmethod
    def _sum_moved(session: Session, job_id: int) -> None:
        """The chunks' notes of documents found moved (their old entries removed), as the one
        note an in-process run gives (workers never said it: the old entries went silently)."""
        E = md.JobError
        rows = session.scalars(select(E).where(E.job_id == job_id, E.kind == "warning",
                                               E.document_key == "moved").order_by(E.id)).all()
        summed = summed_moved_message([row.message for row in rows]) if len(rows) > 1 else None
        if summed is None:
            return
        for row in rows:
            session.delete(row)
        session.add(E(job_id=job_id, document_key="moved", kind="warning", message=summed))

    @staticmethod
    def _sum_cut(session: Session, job_id: int) -> None:
        """The chunk tasks' warnings of chunks longer than an embedder reads whole, as the one
        warning per embedder an inline job gives, over all the chunks it encoded."""
        E = md.JobError
        rows = session.scalars(select(E).where(E.job_id == job_id, E.kind == "warning",
                                               E.message.contains(CUT_MARK)).order_by(E.id)).all()
        # name -> (cut, budget, option spec). Counted against all the chunks the job wrote: a
        # chunk task that cut nothing leaves no row to say what its companions encoded.
        sums: dict[str, tuple[int, int | None, str | None]] = {}
        for row in rows:
            parts = cut_counted(row.message)
            if parts is None:
                continue
            cut, budget, option = sums.get(row.document_key, (0, None, None))
            sums[row.document_key] = (cut + parts[0], budget or parts[2], option or parts[3])
            session.delete(row)
        if not sums:
            return
        J = md.IndexJob
        written = session.scalar(select(J.chunks_written).where(J.id == job_id)) or 0
        session.add_all(E(job_id=job_id, document_key=name, kind="warning",
                          message=cut_message(name, cut, max(written, cut), budget, option))
                        for name, (cut, budget, option) in sums.items())

    @staticmethod
    def _sum_unread(session: Session, job_id: int, name: str) -> None:
        """The chunks' warnings of text ``name``'s tokenizer cannot read (``[UNK]``), as the one
        warning an inline job gives, over all the chunks written (workers never said it)."""
        E = md.JobError
        rows = session.scalars(select(E).where(E.job_id == job_id, E.kind == "warning",
                                               E.document_key == name).order_by(E.id)).all()
        counted = [(row, n) for row in rows if (n := unread_counted(row.message)) is not None]
        if not counted:
            return
        for row, _n in counted:
            session.delete(row)
        J = md.IndexJob
        written = session.scalar(select(J.chunks_written).where(J.id == job_id)) or 0
        # Each chunk task names the first of its own documents; a document is in one task.
        named: list[str] = []
        in_documents = 0
        for row, _n in counted:
            keys, n_docs = unread_documents(row.message)
            named.extend(keys)
            in_documents += n_docs
        session.add(E(job_id=job_id, document_key=name, kind="warning", message=unread_message(
            name, sum(n for _row, n in counted), written, "chunks written", named,
            in_documents)))


def stalled_chunks(sessions: Any) -> list[tuple[int, int]]:
    """``(job id, chunk number)`` of each unfinished chunk of a worker job nobody advances.

    The job runs on Celery, is planned, and its collection lease lapsed (``facet jobs`` says
    ``stalled``); the chunk is ``queued``, or ``running`` with a lapsed claim. Such a chunk is
    waiting for its task, which is either still in the broker (a worker will take it) or was
    lost with a worker killed as it took the message (see ``worker/recovery.py``). A stalled job
    whose chunks all finished (its finish raised, or its finisher died) yields its last chunk:
    that chunk's task, sent again, completes the job.

    Args:
        sessions: a session factory of the metadata database.
    """
    from app.services.collections import effective_state

    now = md.utcnow()
    J, C = md.IndexJob, md.JobChunk
    out: list[tuple[int, int]] = []
    with sessions() as session:
        jobs = session.scalars(select(J).where(J.state == "running", J.runner == "celery",
                                               J.chunks_total > 0)).all()
        for job in jobs:
            if effective_state(job)[0] != "stalled":
                continue
            numbers = session.scalars(select(C.number).where(
                C.job_id == job.id,
                or_(C.state == "queued",
                    (C.state == "running") & (or_(C.claimed_until.is_(None),
                                                  C.claimed_until <= now))))
                .order_by(C.number)).all()
            if not numbers:
                # Every chunk finished but nothing completed the job (its finisher died or
                # raised): a task of its last chunk finds the chunk done and completes it.
                numbers = [session.scalar(select(func.max(C.number)).where(C.job_id == job.id))]
            out.extend((job.id, int(n)) for n in numbers if n is not None)
    return out


def unplanned_jobs(sessions: Any) -> dict[int, dict[str, Any]]:
    """Job id -> its planner task's payload (``PreparedJob.to_dict()``), of each worker job
    still `queued` that no worker has planned and that recorded one (``IndexJob.plan``): its
    task is in the broker, or was lost (``worker/recovery.py``)."""
    J = md.IndexJob
    out: dict[int, dict[str, Any]] = {}
    with sessions() as session:
        for job_id, plan in session.execute(select(J.id, J.plan).where(
                J.state == "queued", J.runner == "celery", J.chunks_total == 0,
                J.plan.is_not(None))):
            try:
                payload = json.loads(plan)
            except ValueError:
                continue
            if isinstance(payload, dict):
                out[int(job_id)] = payload | {"job_id": int(job_id)}
    return out


def is_transient(error: BaseException) -> bool:
    """Errors worth a retry with backoff: the store server or the database out of reach, or an
    embedded store's collection open in another process for now (a search, another pool
    process). A domain error raised from such an error (``raise ... from e``) is one too."""
    from sqlalchemy.exc import DBAPIError, OperationalError

    from indexer.errors import StoreBusyError, StoreUnavailableError

    return any(isinstance(seen, StoreUnavailableError | StoreBusyError | OperationalError)
               or (isinstance(seen, DBAPIError) and bool(seen.connection_invalidated))
               for seen in raised_from(error))


def raised_from(error: BaseException, depth: int = 4) -> Iterator[BaseException]:
    """``error`` and the errors it was raised from (``raise ... from``), nearest first, ``depth``
    in all at most."""
    seen: BaseException | None = error
    for _ in range(depth):
        if seen is None:
            return
        yield seen
        seen = seen.__cause__


__all__ = ["ChunkBusy", "ChunkOutcome", "ChunkedIndexService", "IndexOptions", "JobGone",
           "WriterBusy", "is_transient", "raised_from"]
