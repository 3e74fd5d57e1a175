"""``facet collections``, ``facet jobs``, ``facet documents`` and ``facet delete``."""

from __future__ import annotations

import logging
import math
import os
import re
import sys
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, BinaryIO, TextIO
from urllib.parse import quote

import typer

from app.commands.common import (
    STDIN_MAX_BYTES,
    argument_text,
    exit_code,
    handle_errors,
    open_facet,
    read_capped,
)
from app.commands.index import newest_job_id
from app.errors import ConflictError, DataError, InvalidRequestError, NotFoundError
from app.services.collections import (
    DEFAULT_JOB_ERRORS,
    DOCUMENT_STATUSES,
    FOLDER_DATABASE,
    LIVE_STATES,
    MAX_DOCUMENTS_LISTED,
    MAX_JOB_ERRORS,
    MAX_JOBS_LISTED,
    MOVE_IT,
    MOVED_TO,
    MOVING,
    SUPERSEDED,
    CollectionInfo,
    DocumentInfo,
    DocumentList,
    JobInfo,
    JobList,
    elsewhere_refusal,
    owned_elsewhere,
)
from app.text import plural, printable, printable_json, shell_word, size_text, unicode_twin_hint

if TYPE_CHECKING:
    from app.core import Facet
    from app.services.indexing import RemovedDocument, RemoveReport


def timings_text(timings: Mapping[str, float]) -> str:
    """A job's stage timings as ``parse_chunk 0.012s, encode 1.4s``: it printed the dict."""
    if not timings:
        return "none recorded"
    return ", ".join(f"{printable(name)} {seconds:.1f}s" if seconds >= 0.1 else
                     f"{printable(name)} {seconds:.3f}s" for name, seconds in timings.items())


@contextmanager
def _quiet_log(name: str) -> Iterator[None]:
    """``name``'s INFO lines left out while inside (the command prints what they say), unless
    ``--verbose`` (debug logging) asked for everything."""
    logger = logging.getLogger(name)
    if logger.getEffectiveLevel() <= logging.DEBUG:
        yield
        return
    before = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(before)


def _confirm(question: str) -> bool:
    """Ask on stderr, read y/yes (default no) from stdin (``confirm``, shared with the other
    command that asks); no answer (stdin ended or closed) is one ``error:`` line and exit 2."""
    from app.commands.common import confirm

    return confirm(question, "nothing was deleted; give -y to delete without asking")


def progress_line(j: JobInfo) -> str:
    """One line of a job's progress: "N/T documents" where the total is known (a worker job's,
    or a completed job's), else "N documents seen". A job run in one process records no total,
    and "126/126 documents" read as done with 274 still to go."""
    total = j.docs_total or (j.docs_seen if j.state == "completed" else 0)
    done = (f"{j.docs_seen}/{total} documents" if total else
            f"{plural(j.docs_seen, 'document')} seen")
    chunks = f", chunk tasks {j.chunks_done}/{j.chunks_total}" if j.chunks_total else ""
    # Documents a sync removed (gone from the source), as `facet jobs ID` counts them: the
    # final line of `--follow` left them out while `facet jobs ID` said "removed 2".
    removed = f", {j.docs_deleted} removed" if j.docs_deleted else ""
    return (f"job {j.id} {j.state}: {done} ({j.docs_indexed} "
            f"indexed, {j.docs_skipped} unchanged, {j.docs_failed} failed{removed}){chunks}, "
            f"{plural(j.chunks_written, 'chunk')} written")


# Per-document errors `facet jobs ID` prints unless --errors says (as many as `facet index`
# prints before its "... N more").
SHOWN_ERRORS = 20
DEFAULT_JOBS_LISTED = 20  # facet jobs --limit


# A document's key or path longer than this is shown cut (its start and its end), as the
# indexer's own errors name one ("/corpus/dddd...dddd/deep.txt: its path is 3,856 characters").
NAME_SHOWN_CHARS = 80


def shown_name(name: str) -> str:
    """``name`` (a key, a path) cut to its first 60 and last 17 characters where it is longer
    than ``NAME_SHOWN_CHARS``, as ``app.services.indexing.storable`` cuts it in its error."""
    return name if len(name) <= NAME_SHOWN_CHARS else f"{name[:60]}...{name[-17:]}"


def error_lines(j: JobInfo, job_id: int, offset: int = 0, asked: int | None = None) -> list[str]:
    """The job's errors as printed, then "... N more" when it has more than were read;
    ``offset``: how many of its first errors were skipped (``--errors-offset``)."""
    lines = []
    if offset > 0 and not j.errors_total and j.removed_keys_total:
        pass  # a removal's keys, paged by --errors-offset (``removed_key_lines``), no errors
    elif offset > 0 and not j.errors_total:
        lines.append(f"  no errors past the first {offset}: the job has none")
    elif offset > 0:
        # Past the end: what there is ("(of 27)" read as if the first 100 existed).
        lines.append(f"  errors {offset + 1} to {offset + len(j.errors)} of {j.errors_total}:"
                     if j.errors else f"  no errors past the first {offset}: the job has "
                                      f"{j.errors_total}")
    for e in j.errors:
        # A chunk's failure names no document in its message: ten identical lines.
        doc = e.get("document") or ""
        # A record's key (``path#L4``) beside a message that starts with its file and line
        # (``path:4: malformed ...``) said the location twice.
        base, record, _ = doc.partition("#")
        short = shown_name(doc)
        said = (doc in e["message"] or short in e["message"]
                or (bool(record) and e["message"].startswith(base)))
        named = f"{printable(short)}: " if doc and not said else ""
        # Messages quote document ids and file names: printable() shows their control
        # characters escaped instead of sending them to the terminal.
        lines.append(f"  {printable(e['kind'])}: {named}{printable(e['message'])}")
    more = j.errors_total - offset - len(j.errors)
    # The next page's whole command, its page size kept (the hint named only --errors-offset,
    # and following it showed 20 a page; the first page's never named --errors-offset, a dead
    # end past --errors 1000).
    size = _page_size(asked)
    if more > 0:
        lines.append(f"  ... {more} more (of {j.errors_total}): facet jobs {job_id} {size}"
                     f"--errors-offset {offset + len(j.errors)} shows the next ones (--errors N: "
                     f"N a page, up to {MAX_JOB_ERRORS})")
    return lines


def _page_size(asked: int | None) -> str:
    """The ``--errors N `` of the next page's command: the page size asked for, kept; none for
    the default, nor for ``--errors 0`` (its "next page" was the same empty page again)."""
    return f"--errors {asked} " if asked and asked != SHOWN_ERRORS else ""


def removed_key_lines(j: JobInfo, job_id: int, asked: int | None = None,
                      offset: int = 0) -> list[str]:
    """A removal's keys (``JobInfo.removed_keys``: no errors, they were listed as "removing"
    errors until 2026-11-30), one a line, then how many more when it has more than were read,
    with the next page's command (``--errors N`` a page, ``--errors-offset`` paging them: until
    2026-12-01 the keys past the first 1,000 of a removal could not be listed)."""
    if not j.removed_keys_total:
        return []
    # A completed removal removed them all (every key names a document, or none is removed).
    done = "removed" if j.state == "completed" else "to remove"
    total = j.removed_keys_total
    if offset > 0:
        lines = [f"  document keys {offset + 1:,} to {offset + len(j.removed_keys):,} of "
                 f"{total:,} {done}:" if j.removed_keys else
                 f"  no document keys past the first {offset:,}: the removal has {total:,}"]
    else:
        lines = [f"  {plural(total, 'document key')} {done}:"]
    lines += [f"    {printable(k)}" for k in j.removed_keys]
    more = total - offset - len(j.removed_keys)
    if more > 0:
        size = _page_size(asked)
        lines.append(f"    ... {more:,} more (of {total:,}): facet jobs {job_id} {size}"
                     f"--errors-offset {offset + len(j.removed_keys)} shows the next ones "
                     f"(--errors N: N a page, up to {MAX_JOB_ERRORS})")
    return lines


# `--follow` into a log (stdout not a terminal): a progress line at most this often, unless the
# job's state changes or its counts move by a tenth of the total.
FOLLOW_QUIET_S = 30.0
# A job's messages that are progress, not news: the step of the batch being encoded, rewritten
# each second ("encoding chunk 96/480 of this batch"). They go on the progress line.
PROGRESS_MESSAGES = ("encoding chunk ",)
_ENDED = ("completed", "failed", "interrupted", "cancelled")


def log_line_due(moves: Iterable[tuple[float, float, float]], since_s: float,
                 quiet_s: float = FOLLOW_QUIET_S) -> bool:
    """Whether a progress line into a log (not a terminal) is due, its text having changed: a
    count moved by at least a tenth of its known total since the last line ((now, then, total)
    each; a total of 0 is not known), or ``quiet_s`` passed since that line. `facet jobs ID
    --follow` (``JobFollower``) and `facet index` (``app.commands.index.progress_bar``) print by
    it."""
    moved = any(abs(now - then) * 10 >= total for now, then, total in moves if total)
    return moved or since_s >= quiet_s


def _message_kind(message: str) -> str:
    """A message with its numbers masked: "no worker has made progress on it for over 61s" is
    the hint said at 60s, and "waiting for a worker for 7 min" the one said at 6."""
    return re.sub(r"\d[\d,.]*", "#", message)


def _terminal_columns(out: TextIO) -> int | None:
    """The width of the terminal ``out`` writes to, None where it is not one (or not known)."""
    try:
        return os.get_terminal_size(out.fileno()).columns or None
    except (AttributeError, OSError, ValueError):  # not a file, not a terminal, closed
        return None


def _fit(text: str, columns: int | None) -> str:
    """``text`` cut to fit one row of ``columns`` (with room for the cursor), ending in "…"."""
    if columns is None or len(text) < columns:
        return text
    return text[:max(1, columns - 2)] + "…"


class JobFollower:
    """What `facet jobs ID --follow` prints of each look at a job (``show``).

    On a terminal (``tty``) the progress line, with the batch's encoding step, is rewritten in
    place (a carriage return); a new line starts only when the job's state changes or a hint
    is printed. Into a log, a progress line is printed when the state changes, when the
    documents seen (or the chunk tasks done) move by at least a tenth of their known total,
    or, when its text changed, at most once per ``quiet_s`` (30 s): the encoding step changed
    every second, and a big job printed thousands of lines. Either way each hint (no worker,
    stalled, superseded, waiting for a writer) is printed once, on a line of its own; the
    same hint with its numbers grown (minutes waited) is not printed again.
    """

    def __init__(self, out: TextIO, *, tty: bool, quiet_s: float = FOLLOW_QUIET_S,
                 clock: Callable[[], float] = time.monotonic,
                 columns: Callable[[], int | None] | None = None) -> None:
        self.out, self.tty, self.quiet_s, self.clock = out, tty, quiet_s, clock
        # The terminal's width, read at each line (a resized window): a line as wide as it
        # wraps, and the carriage return then rewrote only its last row (an 80-column terminal
        # kept one stale row per update). None: not known, lines are not cut.
        self.columns = columns or (lambda: _terminal_columns(out))
        self.state: str | None = None  # the state of the last line printed
        self.printed: JobInfo | None = None  # the job as its last line in a log showed it
        self.printed_at = -math.inf
        self.line = ""  # the last progress text printed
        self.width = 0  # the in-place line's length on a terminal; 0: no line open
        self.said: set[str] = set()

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def _end_line(self) -> None:
        if self.width:
            self._write("\n")
            self.width = 0

    def _print(self, text: str) -> None:
        self._end_line()
        self._write(text + "\n")

    def _due(self, job: JobInfo, text: str) -> bool:
        """Whether a log gets this progress line (the rules in the class docstring)."""
        last = self.printed
        if last is None or job.state != last.state:
            return True
        if text == self.line:
            return False
        return log_line_due(((job.docs_seen, last.docs_seen, job.docs_total),
                             (job.chunks_done, last.chunks_done, job.chunks_total)),
                            self.clock() - self.printed_at, self.quiet_s)

    def show(self, job: JobInfo) -> int | None:
        """Print what is new about ``job``; the exit code once it has ended (or can never move:
        superseded), else None."""
        message = printable(job.message) if job.message else ""
        stage = message if message.startswith(PROGRESS_MESSAGES) else ""
        text = progress_line(job) + (f" · {stage}" if stage else "")
        if self.tty:
            if job.state != self.state:
                self._end_line()  # the last state's line stays on the screen
            if text != self.line or not self.width:
                # (The final line whole: it stays on the screen, and may wrap.)
                shown = text if job.state in _ENDED else _fit(text, self.columns())
                self._write("\r" + shown + " " * max(0, self.width - len(shown)))
                self.width = len(shown)
        elif self._due(job, text):
            self._print(text)
            self.printed, self.printed_at = job, self.clock()
        self.line, self.state = text, job.state
        if job.state in _ENDED:
            self._end_line()
            if message and not stage:
                self._write(f"  {message}\n")
            return 0 if job.state == "completed" else 1
        if message and not stage and _message_kind(message) not in self.said:
            # A queued job's hints (no worker for minutes, superseded) and a stalled job's:
            # only `facet jobs ID` showed them, while this waited without a word.
            self._print(f"  {message}")
            self.said.add(_message_kind(message))
        if job.state == "queued" and message.startswith(SUPERSEDED):
            self._end_line()
            return 0  # a later job indexed its source: nothing will ever move here
        return None


# A message on a `facet jobs` list line: its first line, cut to this many characters.
LIST_MESSAGE_CHARS = 120


def _one_line(message: str, names: Iterable[str] = ()) -> str:
    """``message``'s first line, cut to ``LIST_MESSAGE_CHARS`` (with "…" where cut). A line break
    inside a name it quotes (``names``: the job's source, its keys) is the name's, no line of
    the message: shown escaped (``printable``), as the name is on the line ("removed 1 document
    (1 chunk) on request: /corpus/new …" cut a key at its newline)."""
    held = sorted({n for n in names if n and _LINE_BREAKS.search(n)}, key=len, reverse=True)
    for name in held:
        message = message.replace(name, printable(name))
    if message.startswith("removed ") and " on request: " in message:
        # A removal's message ends with the keys it removed (``removal_message``): all names.
        said, _, named = message.partition(" on request: ")
        message = f"{said} on request: {printable(named)}"
    lines = message.strip().splitlines() or [""]
    first = lines[0]
    if len(first) > LIST_MESSAGE_CHARS:
        return first[:LIST_MESSAGE_CHARS - 1].rstrip() + "…"
    return first + (" …" if len(lines) > 1 else "")


# What str.splitlines() breaks a line at.
_LINE_BREAKS = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _job_names(j: JobInfo) -> list[str]:
    """The names a job's message may quote: its source and, for a removal (source ``remove:
    KEY and 3 more``), its first key and those it lists."""
    source = j.source or ""
    key = re.sub(r" and \d+ more$", "", source.removeprefix("remove: "))
    return [source, key, *j.removed_keys]


def _unwritten(info: CollectionInfo) -> bool:
    """Whether nothing of the collection is known written: its points uncounted, no chunk or
    document recorded, its store neither missing nor damaged."""
    return (info.points is None and not info.chunks and not info.documents_indexed
            and not info.store_missing and info.store_damaged is None)


def _never_stored(info: CollectionInfo) -> bool:
    """Whether the collection's store collection was never made (its first job never ran):
    its points uncounted for no other reason (no process holds it, none writes it, it is
    neither missing, damaged nor unreadable)."""
    return (_unwritten(info) and info.open_in is None and info.writer is None
            and info.store_unreadable is None and info.store_in_use is None)


def points_text(info: CollectionInfo, jobs: Iterable[JobInfo] | None = None) -> str:
    """A collection's points for a listing or a prompt: "3 points"; "no points yet (job 11
    queued)" where nothing was written yet (``_unwritten``, no job of it completed, its first
    job queued or running: ``jobs``, its jobs as listed); else "? points" (another process
    holds its store, the store is missing or damaged). A collection whose only job waited for
    a worker read "? points", as if its points could not be counted."""
    if info.points is not None:
        return plural(info.points, "point")
    if jobs is not None and _unwritten(info):
        listed = list(jobs)
        live = [j for j in listed if j.state in LIVE_STATES]
        completed = any(j.state == "completed" for j in listed)
        if live and not completed:
            first = min(live, key=lambda j: j.id)
            return f"no points yet (job {first.id} {first.state})"
        if not completed and _never_stored(info):
            # Its jobs ended before one made the store (its first killed as it started): "?
            # points" claimed a store held, missing or damaged (``facet delete`` said so too).
            return "no points"
    return "? points"


def _jobs_of_unwritten(facet: Facet, info: CollectionInfo) -> list[JobInfo] | None:
    """The jobs of a collection whose points are unknown and of which nothing is written yet
    (``points_text``), all of them; None for any other (or one with too many jobs to list)."""
    if not _unwritten(info):
        return None
    try:
        jobs = facet.jobs(info.name, DEFAULT_JOBS_LISTED)
    except NotFoundError:  # deleted meanwhile
        return None
    return None if isinstance(jobs, JobList) and jobs.not_shown else list(jobs)


# The short mark a row of `facet collections` carries for term vectors of an older definition
# of a term; the note itself (``Store.older_lexical``, about 400 characters) follows the rows,
# once per distinct text: in each row, four such collections printed the paragraph four times.
OLDER_TERMS_MARK = "older term vectors: see the note below"
_NAME_SLOT = "\x00collection\x00"  # a collection's quoted name in a note (no name holds NUL)


def lexical_note_groups(notes: Iterable[tuple[str, str]]) -> list[str]:
    """Each distinct note of ``(collection, note)`` pairs once, in the order first seen, naming
    every collection it applies to. Two notes are the same when they are equal once each
    collection's own quoted name (``repr``) is taken out: "collection 'a' keeps the term vectors
    of ..." and "collection 'b' keeps ..." read "each of collections 'a' and 'b' keeps ...". A
    note of one collection that names it is returned as it is; one that names no collection is
    prefixed with the names it applies to."""
    groups: dict[str, list[str]] = {}
    for name, note in notes:
        groups.setdefault(note.replace(repr(name), _NAME_SLOT), []).append(name)
    lines = []
    for text, names in groups.items():
        quoted = [repr(n) for n in names]
        listed = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} and {quoted[-1]}"
        head = f"collection {_NAME_SLOT}"
        if len(names) > 1 and text.startswith(head):
            text = f"each of collections {listed}{text[len(head):]}"
        elif _NAME_SLOT not in text:  # a note that does not name its collection
            text = f"{'collection' if len(names) == 1 else 'collections'} {listed}: {text}"
        lines.append(text.replace(_NAME_SLOT, listed))
    return lines


@contextmanager
def _serve_deletes(collection: str) -> Iterator[None]:
    """A delete refused because a running ``facet serve`` holds the collection open: the
    refusal names the route that deletes it there (it said "its HTTP API", which had none)."""
    try:
        yield
    except ConflictError as e:
        if "(facet serve" not in str(e):
            raise
        raise ConflictError(f"{e}: `DELETE /collections/{collection}` on its API (docs/api.md)",
                            param=e.param) from e


def _keys_from(path: str, null: bool = False) -> list[str]:
    """The document keys of ``--documents-from PATH`` (``-``: standard input): one a line,
    blank lines skipped, a trailing CR (a file saved on Windows) stripped, a leading UTF-8 BOM
    (Notepad's) too. Lines end at a newline only: a CR inside a key is the key's (the file
    was read with universal newlines, which split ``x\\rb`` into two keys; standard input
    was not). ``null``: the keys are NUL-separated instead (``find -print0``), each as it is:
    a key holding a newline can be given so; empty ones skipped."""
    def capped(stream: BinaryIO) -> str:  # (</dev/zero, or a path to it, was read until memory ran out)
        return read_capped(stream, STDIN_MAX_BYTES, f"--documents-from {printable(path)}",
                           "give the keys in parts", param="documents_from").decode("utf-8")

    try:
        if path == "-":
            stdin = getattr(sys.stdin, "buffer", None)
            text = capped(stdin) if stdin is not None else sys.stdin.read()
        else:
            with open(os.path.expanduser(path), "rb") as f:
                text = capped(f)
    except IsADirectoryError as e:
        raise InvalidRequestError(f"--documents-from {printable(path)} is a folder; give a file "
                                  "of keys, one a line", param="documents_from") from e
    except (FileNotFoundError, NotADirectoryError) as e:  # (exit 3, as every missing file: it was 2)
        from app.files import absent

        raise NotFoundError(f"--documents-from {printable(path)} "
                            f"{absent(Path(os.path.expanduser(path)))}",
                            param="documents_from") from e
    except UnicodeDecodeError as e:  # (exit 4, as standard input that is not UTF-8 text)
        raise DataError(f"--documents-from {printable(path)} is not UTF-8 text ({e.reason} at "
                        f"byte {e.start})", param="documents_from") from e
    except OSError as e:
        raise InvalidRequestError(f"--documents-from {printable(path)}: cannot read it: "
                                  f"{printable(str(e))}", param="documents_from") from e
    text = text.removeprefix("\ufeff")
    if null:
        return [key for key in text.split("\0") if key]
    keys = []
    for line in text.split("\n"):
        line = line.removesuffix("\r")
        if line.strip():
            keys.append(line)
    return keys


# A key as `printable` shows it: a control character written \x07, \u202e.
_ESCAPE_SHOWN = re.compile(r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4})")
# The refused keys `_misnamed_key_hints` looks at (each one or two more lookups).
HINTED_KEYS = 10


def _unescaped(key: str) -> str:
    """``key`` with the escapes ``printable`` writes (``\\x07``, ``\\u202e``) turned back into
    the characters they show."""
    return _ESCAPE_SHOWN.sub(lambda m: chr(int(m.group()[2:], 16)), key)


def _misnamed_key_hints(facet: Facet, collection: str, keys: list[str]) -> list[str]:
    """After a refusal of ``keys`` as naming no document: the keys meant where a key was pasted
    as `facet search` prints it (a control character shown as ``\\x07``: in the shell that is
    four characters) or differs from one only in its Unicode form (``résumé`` composed, the
    file's name from macOS decomposed), each as a word to paste back (``shell_word``). The
    first ``HINTED_KEYS`` such keys are looked up; nothing is removed or picked for the user."""
    def known(key: str) -> bool:
        try:
            facet.removal_parts(collection, [key], base=os.getcwd())
        except Exception:  # unknown, or anything else: a hint only, the refusal is said anyway
            return False
        return True

    hints: list[str] = []
    looked = 0
    for key in dict.fromkeys(keys):
        meant = _unescaped(key)
        forms = [f for f in dict.fromkeys([meant, unicodedata.normalize("NFC", key),
                                          unicodedata.normalize("NFD", key)]) if f != key]
        if not forms or looked >= HINTED_KEYS:
            continue
        looked += 1
        if known(key):
            continue
        if meant != key and known(meant):
            hints.append(f"{shell_word(key)} is how facet prints a key holding control "
                         f"characters, shown escaped; that key is {shell_word(meant)} in a shell")
            continue
        twins = [f for f in forms if f != meant and known(f)]  # (meant: looked up above)
        if twins:
            hints.append(unicode_twin_hint(key, twins))
    return hints


def _count(n: int, word: str) -> str:
    """``1 key``, ``1,990 keys``."""
    return f"{n:,} {word if n == 1 else word + 's'}"


# The --document keys a rerun command names before it writes "…" for the rest.
RERUN_KEYS_SHOWN = 10


def rerun_command(collection: str, documents: list[str], documents_from: str | None,
                  null: bool) -> str:
    """The command the user ran (`facet delete C -d KEY --documents-from FILE`) with
    ``--missing-ok -y``: what finishes a removal stopped after some of its parts (the keys
    removed already are skipped, the rest removed)."""
    words = ["facet", "delete", shell_word(collection)]
    for key in documents[:RERUN_KEYS_SHOWN]:
        words += ["--document", shell_word(key)]
    if len(documents) > RERUN_KEYS_SHOWN:
        words.append(f"… ({len(documents) - RERUN_KEYS_SHOWN:,} more --document keys, as given)")
    if documents_from is not None:
        words += ["--documents-from", shell_word(documents_from)]
        if null:
            words.append("--null")
    return " ".join([*words, "--missing-ok", "-y"])


def _rerun_text(rerun: str) -> str:
    """``rerun`` (``rerun_command``) as a hint: run it (standard input given the same keys)."""
    stdin = (" with the same keys on standard input" if " --documents-from - " in f"{rerun} "
             else "")
    return (f"run `{rerun}`{stdin} (the same command with --missing-ok: it skips the keys "
            "removed already and removes the rest)")


def _last_job(jobs: Sequence[JobInfo], before: int | None, offset: int) -> int | None:
    """The next page's ``--before`` (``JobList.next_before``) for a first page or a page of
    `facet jobs --before`, as GET /jobs' Link names it; None for a page of ``--offset K``, whose
    next page is by offset, as it was asked (the first page named ``--offset 20``, which a
    collection deleted meanwhile shifted: as many jobs were never listed)."""
    keyset = before is not None or not offset
    return jobs.next_before if keyset and isinstance(jobs, JobList) else None


def _not_shown_line(not_shown: int, limit: int, offset: int, what: str = "older job",
                    default: int = DEFAULT_JOBS_LISTED, most: int = MAX_JOBS_LISTED, *,
                    after: str | None = None, before: int | None = None,
                    twins: frozenset[str] = frozenset()) -> str:
    """The line under a page of `facet jobs` (``what`` "older job") or `facet documents` that
    leaves some out, with the next page's options (the page size kept unless ``default``:
    following "--offset K" alone listed 20; ``most``: the largest page). ``after``: the page's
    last key, for a first page or a page of `facet documents --after` (the next is after it);
    ``before``: the next page's ``--before`` (``_last_job``) for `facet jobs`; neither: the next
    ``--offset`` (``twins``: keys written escaped, as their lines are)."""
    size = f"--limit {limit} " if limit != default else ""
    step = (f"--after {shell_word(after, ascii_only=after in twins)}" if after is not None else
            f"--before {before}" if before is not None else f"--offset {offset + limit}")
    return (f"… {plural(not_shown, what, grouped=True)} not shown ({size}{step} shows the next "
            f"ones; --limit N: N a page, up to {most})")


DEFAULT_DOCUMENTS_LISTED = 20  # facet documents --limit
# A listed document's error cut to this many characters (`facet jobs ID` shows it whole).
DOCUMENT_ERROR_SHOWN = 100


def document_line(d: DocumentInfo, *, twin: bool = False) -> str:
    """``facet documents``' line of one document: its key first, as one shell word
    (``shell_word``: printable, and pasted back into `facet delete C --document KEY` it is the
    key, also with spaces or control characters in it), its status, chunks, then its title and,
    where it is not the key, its source, cut (``shown_name``); an error's reason, cut.
    ``twin``: another key of the collection differs from it only in its Unicode normalization
    form (``DocumentList.twins``), so it is written with its non-ASCII characters escaped
    (``$'re\\u0301sume.txt'``)."""
    parts = [shell_word(d.key, ascii_only=twin), d.status, plural(d.chunks, "chunk")]
    if d.title:
        parts.append(printable(shown_name(d.title)))
    if d.source != d.key:
        parts.append(f"from {printable(shown_name(d.source))}")
    line = "  ".join(parts)
    if d.error:
        why = _one_line(d.error)
        cut = why if len(why) <= DOCUMENT_ERROR_SHOWN else f"{why[:DOCUMENT_ERROR_SHOWN - 3]}..."
        line += f" · {printable(cut)}"
    return line


def _prefix_path(prefix: str | None) -> str | None:
    """``facet documents --prefix``: a relative path that names a file or folder here, as the
    absolute path a file's key is (`--prefix corpus/` matched nothing: keys are absolute, and
    `facet delete --document a.txt` reads a relative key so), its links resolved as `facet
    index` resolves a source's (`--prefix link/` through a linked folder listed nothing while
    `facet delete -d link/a.txt` found the file), its trailing ``/`` kept; any other prefix (a
    record id's start, an absolute path) as given."""
    if not prefix or os.path.isabs(prefix) or prefix.startswith("~"):
        return prefix
    try:
        if not os.path.exists(prefix):
            return prefix
        absolute = os.path.realpath(prefix)
    except (OSError, ValueError):
        return prefix
    return absolute + os.sep if prefix.endswith(("/", os.sep)) else absolute


def _gone_path_prefixes(given: str | None, used: str | None) -> list[str]:
    """The absolute paths a relative ``--prefix`` that names nothing here may be, as `facet
    delete --document` reads such a key (``path_keys``): what ``_prefix_path`` kept as given
    (``used``), read from the working folder, its trailing ``/`` kept."""
    if not given or used != given or os.path.isabs(given) or given.startswith("~"):
        return []
    from app.services.indexing import path_keys  # (not at start-up: a large module)

    slash = os.sep if given.endswith(("/", os.sep)) else ""
    return [path.rstrip(os.sep) + slash for path in path_keys(given, Path.cwd())]


def _jobs_text(ids: list[int]) -> str:
    """``job 5``, ``jobs 5-7``, ``jobs 5, 8``."""
    if len(ids) == 1:
        return f"job {ids[0]}"
    if ids == list(range(ids[0], ids[0] + len(ids))):
        return f"jobs {ids[0]}-{ids[-1]}"
    return "jobs " + ", ".join(str(i) for i in ids)


def _parts_done_text(ids: list[int], total: int) -> str:
    """``part 1 of 3 was removed (job 5)``, ``parts 1-2 of 3 were removed (jobs 5-6)``."""
    n = len(ids)
    parts = f"part 1 of {total} was" if n == 1 else f"parts 1-{n} of {total} were"
    return f"{parts} removed ({_jobs_text(ids)})"


def _remove_documents(collection: str, keys: list[str], yes: bool, *, missing_ok: bool = False,
                      rerun: str | None = None, file_driven: bool = False) -> None:
    """`facet delete C --document KEY ...`: check, ask, remove, say what went and what comes
    back.

    A relative path given as a key is read from the working folder (files are keyed by their
    absolute paths). Every key is checked before the question (an unknown collection or key,
    a job writing it): the answer was asked for, then refused. More keys than one removal
    takes (``MAX_REMOVED_KEYS``) are removed in parts, one removal job each, in order.
    ``missing_ok``: keys the collection does not hold are skipped (counted) instead of
    refusing them all. ``rerun``: the command that finishes the removal if it stops part-way
    (``rerun_command``), said for a ``file_driven`` (--documents-from) or multi-part run."""
    with open_facet() as facet:
        skipped: list[str] | None = [] if missing_ok else None
        try:
            parts = facet.removal_parts(collection, keys, base=os.getcwd(), skipped=skipped)
        except NotFoundError as e:
            hints = ([h for h in _misnamed_key_hints(facet, collection, keys) if h not in str(e)]
                     if e.param == "key" else [])
            if not hints:
                raise
            raise NotFoundError("; ".join([str(e), *hints]), param=e.param) from e
        if skipped:
            shown = ", ".join(printable(k) for k in skipped[:3]) + (
                ", ..." if len(skipped) > 3 else "")
            typer.echo(f"{_count(len(skipped), 'key')} already gone, skipped: {collection!r} "
                       f"holds no such document (removed already, or never there: {shown})")
        if not parts:
            typer.echo(f"nothing to remove: {collection!r} holds none of the "
                       f"{_count(len(skipped or []), 'key')} given")
            return
        resolved = [k for part in parts for k in part]
        shown = ", ".join(printable(k) for k in resolved[:5]) + (
            f" and {len(resolved) - 5} more" if len(resolved) > 5 else "")
        split = f" in {len(parts)} parts" if len(parts) > 1 else ""
        if not yes and not _confirm(f"remove {plural(len(resolved), 'document')} from "
                                    f"{collection!r}{split} ({shown})?"):
            raise typer.Exit(1)  # (``confirm`` said what was not done)
        before = newest_job_id(facet, collection)
        if not file_driven and len(parts) < 2:
            rerun = None  # (the job's own hint names its keys)
        reports: list[RemoveReport] = []
        for n, part in enumerate(parts, 1):
            try:
                with _quiet_log("app.services.indexing"):  # the lines below say it
                    reports.append(facet.remove_documents(collection, part, base=os.getcwd()))
            except KeyboardInterrupt:
                _say_stopped_removal(facet, collection, reports, parts, n, rerun=rerun,
                                     before=before)
                raise typer.Exit(130) from None
            except ConflictError as e:
                _say_parts_done(reports, parts, n, rerun)
                if "(facet serve" not in str(e):
                    raise
                raise ConflictError(f"{e}: {_removal_request(collection, part)} on its API "
                                    "(docs/api.md)", param=e.param) from e
            except Exception:
                _say_parts_done(reports, parts, n, rerun)
                raise
    for report in reports:
        _say_removed(report)
    if len(reports) > 1:
        first, last = reports[0].job_id, reports[-1].job_id
        typer.echo(f"removed {plural(sum(r.docs_deleted for r in reports), 'document')} "
                   f"({plural(sum(r.chunks_deleted for r in reports), 'chunk')}) from "
                   f"{collection} in {len(reports)} parts (jobs {first}-{last}), at most "
                   f"{_max_removed():,} keys a removal")
    _warn_still_there([d for r in reports for d in r.still_in_source()],
                      ", ".join(str(r.job_id) for r in reports))


def _max_removed() -> int:
    from app.services.indexing import MAX_REMOVED_KEYS

    return MAX_REMOVED_KEYS


def _say_parts_done(reports: list[RemoveReport], parts: list[list[str]], n: int,
                    rerun: str | None = None) -> None:
    """Before the error of part ``n`` of several: the parts removed already (they stay
    removed), what is left, and the command that removes it (``rerun``)."""
    if len(parts) < 2:
        return
    for report in reports:
        _say_removed(report)
    left = sum(len(p) for p in parts[n - 1:])
    done = (f"{_parts_done_text([r.job_id for r in reports], len(parts))}; " if reports
            else "")
    then = (_rerun_text(rerun) if rerun is not None else
            "run the removal again with those keys only (those removed are no documents any "
            "more, and would refuse it)")
    typer.echo(f"error: {done}part {n} was refused, and the {_count(left, 'key')} of parts "
               f"{n}-{len(parts)} are not removed: once the cause below is fixed, {then}",
               err=True)


def _say_stopped_removal(facet: Facet, collection: str, reports: list[RemoveReport],
                         parts: list[list[str]], n: int, *, rerun: str | None = None,
                         before: int = 0) -> None:
    """Ctrl-C during a removal (part ``n`` of ``parts``): what was done and how to finish
    (it printed nothing, exit 130, the removal half done). The Ctrl-C may land after part
    ``n`` committed (its job completed) and before its call returned: then that part is said
    done. ``rerun``: the command that finishes it (``rerun_command``: the user's own, with
    --missing-ok), said for a multi-part or file-driven run; else the job's own rerun hint.
    ``before``: the newest job id before the first part (an older removal is none of this
    run's)."""
    for report in reports:
        _say_removed(report)
    job = None
    try:
        listed = facet.jobs(collection)
        job = next((j for j in listed if (j.source or "").startswith("remove: ")), None)
    except Exception:  # a hint only
        job = None
    ours = {r.job_id for r in reports}
    if job is not None and (job.id <= before or job.id in ours):
        job = None  # not part n's: it had no job row yet
    done = [r.job_id for r in reports]
    completed = job is not None and job.state == "completed"
    if job is not None and completed:
        done.append(job.id)
    of = f" (part {n} of {len(parts)})" if len(parts) > 1 else ""
    message = job.message if job is not None and job.state in ("interrupted", "failed") else None
    if completed and job is not None:
        what = f"part {n} of {len(parts)}" if len(parts) > 1 else "the removal"
        typer.echo(f"interrupted after {what} completed: removal job {job.id} removed its "
                   f"{_count(len(parts[n - 1]), 'document')} (`facet jobs {job.id}`)", err=True)
    elif job is not None and message:
        # Its own rerun hint (``removal_rerun_hint``): the keys it was given are all still there.
        _, _, hint = message.partition("; ")
        hint = hint or message
        if rerun is not None:  # what it did only: the command to run is said below
            hint = hint.split("; run `", 1)[0]
        typer.echo(f"interrupted: removal job {job.id}{of} stopped; {hint}", err=True)
    elif rerun is not None:
        typer.echo(f"interrupted{of}: the removal may be partly done (`facet jobs` shows its "
                   "job)", err=True)
    else:
        typer.echo(f"interrupted{of}: the removal may be partly done; run the same removal "
                   "again (`facet jobs` shows its job)", err=True)
    if rerun is None:
        return
    removed = f"{_parts_done_text(done, len(parts))}; " if done and len(parts) > 1 else ""
    if len(done) == len(parts):
        if len(parts) > 1:
            typer.echo(f"  {removed.removesuffix('; ')}: all of them, nothing is left to do",
                       err=True)
        return
    left = sum(len(p) for p in parts[len(done):])
    nxt = len(done) + 1
    rest = (f"part {nxt} is the next to run" if nxt == len(parts) else
            f"parts {nxt}-{len(parts)} are the ones to run")
    keys = f" ({_count(left, 'key')})" if len(parts) > 1 else ""
    if len(parts) == 1:
        rest = "the removal is not done"
    typer.echo(f"  {removed}{rest}{keys}: {_rerun_text(rerun)}", err=True)


def _say_removed(report: RemoveReport) -> None:
    """One removal's lines: each document removed, then the count and the job."""
    was = {"error": ", the entry of a failed document", "pending": ", a pending entry"}
    for d in report.removed:
        deleted = ", its uploaded file deleted" if d.source_deleted else ""
        typer.echo(f"removed {printable(d.key)} ({plural(d.chunks, 'chunk')}"
                   f"{was.get(d.status, '')}{deleted})")
    typer.echo(f"removed {plural(report.docs_deleted, 'document')} "
               f"({plural(report.chunks_deleted, 'chunk')}) from {report.collection}: job "
               f"{report.job_id} (`facet jobs {report.job_id}`)")
    uploads = report.upload_files_deleted()
    if uploads:
        typer.echo(f"deleted {plural(len(uploads), 'uploaded file')} from "
                   "the collection's upload folder (an upload job indexes it whole, and would "
                   "have added them back)")


def _warn_still_there(still: list[RemovedDocument], jobs: str) -> None:
    """The "is still there" warnings: one per source file (a jsonl's 1,000 records said the
    same file 1,000 times), its removed records counted, the first ``WARNINGS_SHOWN`` files,
    then one line that counts the rest."""
    by_file: dict[str, list[RemovedDocument]] = {}
    for d in still:
        by_file.setdefault(d.source, []).append(d)
    files = list(by_file.items())
    for source, docs in files[:WARNINGS_SHOWN]:
        if len(docs) == 1 and docs[0].key == source:
            typer.echo(f"  warning: {printable(source)} is still there: delete it (or the record) "
                       "from there too, or the next `facet index` of it (or of a folder holding "
                       f"it) adds {printable(source)} back", err=True)
        else:
            first = ", ".join(printable(d.key) for d in docs[:3])
            typer.echo(f"  warning: {printable(source)} is still there: "
                       f"{len(docs):,} of its records removed ({first}"
                       f"{', ...' if len(docs) > 3 else ''}): delete "
                       f"{'it' if len(docs) == 1 else 'them'} from the file too, or indexing it "
                       f"again (or a folder holding it) adds {'it' if len(docs) == 1 else 'them'} "
                       "back", err=True)
    if len(files) > WARNINGS_SHOWN:
        # One line each for 500 files buried the rest of the output.
        rest = files[WARNINGS_SHOWN:]
        docs_left = sum(len(docs) for _, docs in rest)
        in_files = (f" in {plural(len(rest), 'more file')}" if docs_left != len(rest) else "")
        lists = f"`facet jobs {jobs}` lists" if "," not in jobs else f"jobs {jobs} list"
        typer.echo(f"  warning: and {plural(docs_left, 'more removed document')}{in_files} "
                   f"whose file is still there ({len(still):,} in all; {lists} the keys): "
                   "delete them from there too, or the next `facet index` of them adds them "
                   "back", err=True)


# The "is still there" warnings a removal prints one by one, a line per file (the rest: one
# line that counts them).
WARNINGS_SHOWN = 10


# Keys a server's removal request shows in full (the rest are counted).
REQUEST_KEYS_SHOWN = 3


def _removal_request(collection: str, keys: list[str]) -> str:
    """The API request that removes ``keys`` (as the service resolved them: the API reads no
    relative path) from ``collection``: every key URL-encoded whole, the first few shown and
    the rest counted."""
    query = "&".join(f"key={quote(k, safe='')}" for k in keys[:REQUEST_KEYS_SHOWN])
    rest = len(keys) - REQUEST_KEYS_SHOWN
    named = ", ".join(printable(k) for k in keys[REQUEST_KEYS_SHOWN:REQUEST_KEYS_SHOWN + 5])
    more = (f" … and {plural(rest, 'more key')}, a key= each ({named}{', …' if rest > 5 else ''})"
            if rest > 0 else "")
    return f"`DELETE /collections/{quote(collection, safe='')}/documents?{query}`{more}"


# The longest wait between two updates of `facet jobs ID --follow` (a day).
MAX_FOLLOW_INTERVAL_S = 86_400


def _follow(job_id: int, interval: float, out: TextIO | None = None, *,
            as_json: bool = False, allow_failures: bool = False) -> int:
    """Show the job's progress until it ends (``JobFollower``: in place on a terminal, sparse
    into a log); the exit code. ``as_json``: the progress goes to stderr and stdout gets the
    job's final record, as `facet jobs ID --json` prints it (until 2026-12-01 --json was
    ignored here: text lines on stdout, after the record with --cancel). A job that completed
    with failed documents exits as `facet index` does (4, the error line on stderr) unless
    ``allow_failures``: it exited 0, so `facet index --background` then `facet jobs N --follow
    && next-step` went on with a collection missing documents, or holding none."""
    out = out if out is not None else sys.stderr if as_json else sys.stdout
    follower = JobFollower(out, tty=out.isatty())
    with open_facet() as facet:
        while True:
            # No errors: they were all read again at each interval, 20,000 of them on a big job.
            job = facet.job(job_id, errors=0)
            code = follower.show(job)
            if code is not None:
                if as_json:
                    typer.echo(printable_json(asdict(facet.job(job_id, errors=DEFAULT_JOB_ERRORS))))
                if code == 0 and job.state == "completed" and job.docs_failed and not allow_failures:
                    failure = DataError(f"{job.docs_failed} of {job.docs_seen} documents failed; "
                                        f"see `facet jobs {job_id}`")
                    typer.echo(f"error: {failure} (--allow-failures to exit 0 anyway)", err=True)
                    return exit_code(failure)
                return code
            time.sleep(max(0.1, interval))


def _say_cancelled(job: JobInfo) -> None:
    """`facet jobs ID --cancel`'s line: the job's state (and how it ended, where it has)."""
    # A stalled job's next batch waits for a worker (its message says so): "stops at its next
    # batch" read as at once.
    asked = ("" if job.state in _ENDED else
             f" ({printable(job.message)})" if job.state == "stalled" and job.message else
             " (cancel requested: it stops at its next batch)")
    typer.echo(f"job {job.id} {job.state}{asked}")
    if job.message and job.state in _ENDED:
        typer.echo(f"  {printable(job.message)}")


def register(cli: typer.Typer) -> None:
    """Add the collection and job commands to the CLI."""

    @cli.command("collections")
    @handle_errors
    def collections_cmd(
        name: Annotated[str | None, typer.Argument(help="show one collection")] = None,
        as_json: Annotated[bool, typer.Option(
            "--json", help="machine-readable output: a list, or with NAME its object (as GET "
                           "/collections/NAME); vectors no collection owns have \"stray\": true "
                           "(and \"owner\": the data folder's facet.db where it records them)")
                           ] = False,
    ) -> None:
        """List collections (documents, chunks, points, embedders)."""
        unwritten: dict[str, list[JobInfo]] = {}
        with open_facet() as facet:
            try:
                # ``''`` is a name (refused as one, exit 2), not "no name": `facet collections
                # "$NAME" --json` with NAME empty listed every collection, exit 0.
                infos = [facet.collection(name)] if name is not None else facet.collections()
                strays = [] if name is not None else facet.stray_collections()
            except NotFoundError:  # a name the listing shows as vectors only is one too
                stray = facet.orphan_collection(name) if name is not None else None
                if stray is None:
                    raise
                infos, strays = [], [stray]
            if not as_json:
                for i in infos:
                    jobs_of = _jobs_of_unwritten(facet, i)
                    if jobs_of is not None:
                        unwritten[i.name] = jobs_of
        if as_json:
            # The vectors only (``stray``) too, as the text lists them: left out, a script saw
            # nothing under a name that indexing then refused.
            listed = ([asdict(i) | {"stray": True} for i in strays]
                      + [asdict(i) | {"stray": False} for i in infos])
            # One collection asked for by name: its object, as GET /collections/NAME gives it
            # (it was a one-element list).
            typer.echo(printable_json(listed[0] if name is not None else listed))
            return
        if not infos and not strays:
            typer.echo("no collections yet; create one with `facet index SOURCE --collection NAME`")
        # facet.db is named only where it is the database: under FACET_DATABASE_URL (PostgreSQL,
        # or a SQLite file elsewhere) "facet.db lost" blamed a file that was never used.
        lost = ("facet.db lost, or restored from another copy than qdrant-edge/"
                if facet.settings.database_url is None else
                "the database FACET_DATABASE_URL names emptied, or restored from another copy "
                "than qdrant-edge/")
        # Listed first, in name order, then the collections in name order (docs/cli.md).
        for stray in strays:  # it read "no collections yet" over a restored store's vectors
            points = "? points" if stray.points is None else plural(stray.points, "point")
            disk = f", {size_text(stray.disk_bytes)} on disk" if stray.disk_bytes is not None else ""
            if stray.owner == FOLDER_DATABASE:
                # A laptop's collections under a new FACET_DATABASE_URL: `facet delete`, as this
                # line advised, destroyed them.
                typer.echo(f"{stray.name}: vectors only ({points}{disk}) of collection "
                           f"{stray.name!r} of {FOLDER_DATABASE}, not of the database "
                           "FACET_DATABASE_URL names: unset FACET_DATABASE_URL to use them, "
                           f"{MOVE_IT} (docs/deploy.md)")
            elif stray.owner is not None and (MOVING in stray.owner or MOVED_TO in stray.owner):
                # A move's (unfinished, or finished to another database than this one): "unset
                # FACET_DATABASE_URL to look" was wrong, every command then refusing.
                typer.echo(f"{stray.name}: vectors only ({points}{disk}), not of this database: "
                           f"{printable(owned_elsewhere(stray.name, stray.owner))}")
            elif stray.owner is not None:
                typer.echo(f"{stray.name}: vectors only ({points}{disk}), which no collection of "
                           f"this database owns; they may be of {printable(stray.owner)}: unset "
                           "FACET_DATABASE_URL to look")
            else:
                typer.echo(f"{stray.name}: vectors only ({points}{disk}), which no collection of "
                           f"this database owns ({lost}, or another database's): `facet delete "
                           f"{stray.name}` removes them")
        for i in infos:
            # The name is a folder name ([A-Za-z0-9_.-], validate_name), the embedders' names
            # too; a checkpoint's path (its source) and the host a writer names are any text, and
            # a control character in them would reach the terminal.
            emb = printable(i.embedders_label())
            points = points_text(i, unwritten.get(i.name))
            busy = (f" · being indexed by {printable(i.writer)}" if i.writer else
                    f" · open in {printable(i.open_in)} (not indexing; its points are counted "
                    "there)" if i.open_in else "")
            words = ("" if i.lexical is None else " · no word index (dense only)" if not i.lexical
                     else f" · words (lexical/hybrid; {OLDER_TERMS_MARK})" if i.lexical_note
                     else " · words (lexical/hybrid)")
            # Documents a job began and did not finish (kill -9 between its writes): counted
            # nowhere, so "76 indexed, 0 failed, 95 points" did not add up.
            pending = i.documents - i.documents_indexed - i.documents_failed
            unfinished = ("" if pending <= 0 else f", {pending} pending" if i.writer else
                          f", {pending} pending (a job stopped before finishing them: `facet jobs` "
                          "says how to resume it)")
            disk = f" · {size_text(i.disk_bytes)} on disk" if i.disk_bytes is not None else ""
            # "? points" said nothing of why: its store's folder was removed, and only a search
            # said so.
            gone = f" · {printable(i.store_note)}" if i.store_note else ""
            typer.echo(f"{i.name}: {plural(i.documents_indexed, 'document')} indexed, "
                       f"{i.documents_failed} failed{unfinished}, {plural(i.chunks, 'chunk')}, "
                       f"{points} · {emb} · "
                       f"{i.backend}{disk} · "
                       f"chunks {i.chunk_size}/{i.chunk_overlap} tokens{words}{busy}{gone}")
        # The notes the rows mark, each text once below them (`--json` keeps each one's own).
        for note in lexical_note_groups((i.name, i.lexical_note) for i in infos
                                        if i.lexical and i.lexical_note):
            typer.echo(printable(note))

    @cli.command("jobs")
    @handle_errors
    def jobs_cmd(
        job_id: Annotated[int | None, typer.Argument(help="show one job with its errors")] = None,
        collection: Annotated[str | None, typer.Option(
            "--collection", "-c", help="only this collection's jobs")] = None,
        limit: Annotated[int, typer.Option(
            "--limit", help="list the newest N jobs (1-1000), and older ones that have not ended")
                         ] = DEFAULT_JOBS_LISTED,
        offset: Annotated[int, typer.Option(
            "--offset", help="skip the newest K jobs: --limit N --offset K lists jobs K+1 to K+N "
                             "(older ones that have not ended come only with --offset 0)")] = 0,
        before: Annotated[int | None, typer.Option(
            "--before", metavar="ID",
            help="only the jobs older than job ID (a page's last: the next page, which jobs "
                 "sent or deleted meanwhile do not shift, as they shift --offset)")] = None,
        as_json: Annotated[bool, typer.Option(
            "--json", help="machine-readable output: a list, or with JOB_ID its object (as GET "
                           "/jobs/ID)")] = False,
        follow: Annotated[bool, typer.Option(
            "--follow", "-f", help="show JOB_ID's progress live until it ends (exit 1 if it "
                                   "failed, was cancelled or interrupted; 4 if it completed "
                                   "with failed documents, as `facet index`)")] = False,
        allow_failures: Annotated[bool, typer.Option(
            "--allow-failures", help="with --follow: exit 0 when the job completed, even with "
                                     "failed documents")] = False,
        interval: Annotated[float, typer.Option("--interval", help="seconds between updates")
                            ] = 1.0,
        errors: Annotated[int | None, typer.Option(
            "--errors", help=f"with JOB_ID: show its first N per-document errors (default "
                             f"{SHOWN_ERRORS}, {DEFAULT_JOB_ERRORS} with --json; at most "
                             f"{MAX_JOB_ERRORS}); the rest are counted")
                          ] = None,
        errors_offset: Annotated[int, typer.Option(
            "--errors-offset", help="with JOB_ID: skip its first K per-document errors (--errors "
                                    "N --errors-offset K shows errors K+1 to K+N)")] = 0,
        cancel: Annotated[bool, typer.Option(
            "--cancel", help="cancel JOB_ID: a queued job at once, a running one at its next "
                             "batch (what it indexed is kept; indexing the source again "
                             "resumes it)")] = False,
    ) -> None:
        """List index jobs, or show one with its per-document errors (or cancel it)."""
        if follow and job_id is None:
            typer.echo("error: --follow needs a JOB_ID (see `facet jobs`)", err=True)
            raise typer.Exit(2)
        if allow_failures and not follow:
            typer.echo("error: --allow-failures goes with --follow (it sets the exit code of a "
                       "job followed to its end)", err=True)
            raise typer.Exit(2)
        if not (math.isfinite(interval) and 0 < interval <= MAX_FOLLOW_INTERVAL_S):
            # (1e12 or inf was an OverflowError traceback at the first wait; nan and -1 were 0.1)
            typer.echo(f"error: --interval must be a number of seconds above 0, at most "
                       f"{MAX_FOLLOW_INTERVAL_S:,}, got {interval}", err=True)
            raise typer.Exit(2)
        if errors is not None and job_id is None:
            typer.echo("error: --errors needs a JOB_ID (a list of jobs shows no errors)", err=True)
            raise typer.Exit(2)
        if errors_offset and job_id is None:
            typer.echo("error: --errors-offset needs a JOB_ID (a list of jobs shows no errors; "
                       "--offset pages the list)", err=True)
            raise typer.Exit(2)
        if offset and job_id is not None:
            typer.echo("error: --offset pages the list of jobs; with a JOB_ID, --errors-offset "
                       "pages its errors", err=True)
            raise typer.Exit(2)
        if cancel and (job_id is None or errors is not None or errors_offset):
            typer.echo("error: --cancel needs a JOB_ID and takes no --errors or --errors-offset "
                       "(see `facet jobs`)", err=True)
            raise typer.Exit(2)
        if cancel:
            assert job_id is not None
            with open_facet() as facet:
                job = facet.cancel_job(job_id, collection)
            if follow:  # with --json: the job's final record alone on stdout, when it ends
                if not as_json:
                    _say_cancelled(job)
                raise typer.Exit(_follow(job_id, interval, as_json=as_json,
                                         allow_failures=allow_failures))
            if as_json:
                typer.echo(printable_json(asdict(job)))
            else:
                _say_cancelled(job)
            return
        if (errors is not None or errors_offset) and follow:
            asked = (f" --errors {errors}" if errors is not None else "") + (
                f" --errors-offset {errors_offset}" if errors_offset else "")
            typer.echo("error: --follow shows no per-document errors; run `facet jobs "
                       f"{job_id}{asked}` after it", err=True)
            raise typer.Exit(2)
        with open_facet() as facet:
            # Only the errors shown are read (SQL LIMIT), and counted: a job with 20,000
            # printed 20,002 lines.
            shown = errors if errors is not None else DEFAULT_JOB_ERRORS if as_json else SHOWN_ERRORS
            jobs = ([facet.job(job_id, collection, shown, errors_offset)] if job_id is not None
                    else facet.jobs(collection, limit, offset, before))
            there = 0
            if job_id is None and offset and not jobs and not as_json:
                # Past the end: how many there are ("no index jobs past the newest 20" read as
                # if 20 existed). The first page of one, with the count of those it leaves out.
                first = facet.jobs(collection, 1, 0, before)
                there = len(first) + (first.not_shown if isinstance(first, JobList) else 0)
        if follow:
            assert job_id is not None
            raise typer.Exit(_follow(job_id, interval, as_json=as_json,
                                     allow_failures=allow_failures))
        if as_json:
            # One job asked for by its id: its object, as `--cancel --json`, `facet index
            # --background --json` and GET /jobs/ID give it (it was a one-element list).
            typer.echo(printable_json(asdict(jobs[0]) if job_id is not None
                                      else [asdict(j) for j in jobs]))
            if isinstance(jobs, JobList) and jobs.not_shown:
                # stdout stays the bare list; the older jobs left out are said on stderr (a
                # full page read as the last one until 2026-12-01), as GET /jobs' Link header.
                typer.echo(_not_shown_line(jobs.not_shown, limit, offset,
                                           before=_last_job(jobs, before, offset)), err=True)
            return
        older = f" older than job {before}" if before is not None else ""
        if not jobs and offset:
            typer.echo(f"no index jobs{older} past the newest {offset}: there "
                       f"{'is' if there == 1 else 'are'} {there or 'none'}"
                       + (f" of collection {printable(collection)}" if collection else ""))
        elif not jobs and before is not None:
            typer.echo(f"no index jobs{older}"
                       + (f" of collection {printable(collection)}" if collection else ""))
        elif not jobs:
            typer.echo("no index jobs yet")
        for j in jobs:
            resumed = f" (resumes job {j.resumed_from})" if j.resumed_from else ""
            # A job still going: of how many (estimated, for a job run in one process).
            of = (f" of {'~' if j.docs_total_estimated else ''}{j.docs_total}"
                  if j.docs_total and j.state not in _ENDED else "")
            # A list line's message: a completed job's too (every document failed), cut to one
            # line; `facet jobs ID` shows it whole below.
            note = (f" · {printable(_one_line(j.message, _job_names(j)))}"
                    if j.message and job_id is None and j.state == "completed" else "")
            typer.echo(f"job {j.id} {j.state}{resumed}: {printable(j.collection)} <- "
                       f"{printable(j.source)} [{printable(j.embedder)}] seen {j.docs_seen}{of}, "
                       f"indexed {j.docs_indexed}, "
                       f"unchanged {j.docs_skipped}, failed {j.docs_failed}, removed "
                       f"{j.docs_deleted}, chunks {j.chunks_written} · "
                       f"{j.when()}{note}")
            if job_id is not None:
                ended = f", finished {j.finished_at}" if j.finished_at else ""
                typer.echo(f"  queued {j.queued_at}, "
                           f"{f'started {j.started_at}' if j.started_at else 'not started'}{ended}")
                typer.echo(f"  timings: {timings_text(j.timings)}")
            if j.message and (job_id is not None or j.state != "completed"):
                # Interrupted, stalled or failed: say why and how to go on in the list too.
                typer.echo(f"  {printable(j.message)}")
            if job_id is not None:
                for line in removed_key_lines(j, job_id, errors, errors_offset):
                    typer.echo(line)
                for line in error_lines(j, job_id, errors_offset, errors):
                    typer.echo(line)
        if isinstance(jobs, JobList) and jobs.not_shown:
            # Jobs still going are listed whatever their age (``CollectionService.jobs``); the
            # rest past --limit were left out without a word. The next page's command keeps
            # the page size (following "--offset K" alone listed 20).
            typer.echo(_not_shown_line(jobs.not_shown, limit, offset,
                                       before=_last_job(jobs, before, offset)))

    @cli.command("documents")
    @handle_errors
    def documents_cmd(
        collection: Annotated[str, typer.Argument(help="the collection whose documents to list")],
        limit: Annotated[int, typer.Option(
            "--limit", help=f"list N documents (1-{MAX_DOCUMENTS_LISTED})")
                         ] = DEFAULT_DOCUMENTS_LISTED,
        offset: Annotated[int, typer.Option(
            "--offset", help="skip the first K documents (in key order): --limit N --offset K "
                             "lists documents K+1 to K+N")] = 0,
        status: Annotated[str | None, typer.Option(
            "--status", metavar="|".join(DOCUMENT_STATUSES),
            help="only the documents of this status (error: those that could not be indexed, "
                 "with why)")] = None,
        prefix: Annotated[str | None, typer.Option(
            "--prefix", metavar="KEY_PREFIX",
            help="only the documents whose key, or the file they were read from, starts with "
                 "KEY_PREFIX (a folder's path, a csv/jsonl file's path, a record id's start; "
                 "case kept, no wildcards)")] = None,
        after: Annotated[str | None, typer.Option(
            "--after", metavar="KEY",
            help="only the documents whose key sorts after KEY (a page's last key: the next "
                 "page, which documents indexed or removed meanwhile do not shift, as they "
                 "shift --offset)")] = None,
        as_json: Annotated[bool, typer.Option(
            "--json", help="machine-readable output: a list, as GET /collections/NAME/documents "
                           "(the documents left out said on stderr)")] = False,
    ) -> None:
        """List a collection's documents, a page at a time, in key order.

        One line each: its key, status, chunks, title (and source where it is not the key).
        A key is printed as one shell word: pasted into `facet delete NAME --document KEY` it
        removes that document (keys are what `facet search` shows as doc_id)."""
        given = argument_text(prefix, "--prefix", "prefix")
        after = argument_text(after, "--after", "after")
        prefix = _prefix_path(given)
        with open_facet() as facet:
            gone = _gone_path_prefixes(given, prefix)
            if gone and not facet.documents(collection, 1, 0, status, prefix):
                # A relative path no longer there (a file deleted since it was indexed: when
                # its entries are listed, to remove them) matched as a record id's start only,
                # while `facet delete -d` found it; decided on the first page, so that every
                # page (--offset) and the count past the end read the same prefix.
                prefix = next((path for path in gone
                               if facet.documents(collection, 1, 0, status, path)), prefix)
            docs = facet.documents(collection, limit, offset, status, prefix, after)
            there = 0
            if offset and not docs and not as_json:
                # Past the end: how many there are, as `facet jobs --offset` says it.
                first = facet.documents(collection, 1, 0, status, prefix, after)
                there = len(first) + first.not_shown
            # No error documents, while its newest job failed some: failures that are no
            # document of the collection (a record whose id another one has), which the job
            # counts and lists. "no error documents" alone left a user whose runs kept
            # exiting 4 with nothing to find (the CLI exploration of the third session of
            # 2026-12-07).
            newest = (facet.jobs(collection, limit=1) if status == "error" and not docs
                      and not as_json and not (offset or prefix or after) else [])
            unlisted = newest[0] if newest and newest[0].docs_failed else None
        not_shown = docs.not_shown if isinstance(docs, DocumentList) else 0
        # Keys that print alike (a file's name in NFC and in NFD, from macOS: two documents),
        # on this page or another, are told apart (the i18n review of the fifth session of
        # 2026-12-06: both lines read '/docs/résumé.txt'; only `facet delete`'s refusal showed
        # the difference).
        twins = docs.twins if isinstance(docs, DocumentList) else frozenset()
        # The next page is after this one's last key (a keyset page, as the API's Link), from the
        # first page on; a page of --offset K names the next --offset, as it was asked. The
        # first page named "--offset 20": a document indexed or removed meanwhile shifted every
        # later page, so a key came twice or was never listed.
        last = docs[-1].key if (after is not None or not offset) and docs else None
        if as_json:
            typer.echo(printable_json([asdict(d) for d in docs]))
            if not_shown:
                # stdout stays the bare list, as `facet jobs --json` keeps it.
                typer.echo(_not_shown_line(not_shown, limit, offset, "more document",
                                           DEFAULT_DOCUMENTS_LISTED, MAX_DOCUMENTS_LISTED,
                                           after=last, twins=twins), err=True)
            return
        which = f"{status} document" if status else "document"
        narrowed = (f" whose key or file starts with {printable(prefix)}" if prefix else "")
        if after is not None:  # (cut: a 100 kB key was said whole)
            word = shell_word(after, ascii_only=after in twins)
            narrowed += f" after {word if len(word) <= 200 else word[:197] + '...'}"
        if not docs and offset:
            typer.echo(f"no {which}s{narrowed} past the first {offset:,}: collection "
                       f"{printable(collection)} has {plural(there, which, grouped=True) if there else 'none'}"
                       f"{narrowed if there else ''}")
        elif not docs:
            typer.echo(f"no {which}s{narrowed} in collection {printable(collection)}")
            if unlisted is not None:
                typer.echo(f"  its newest job, {unlisted.id}, counted "
                           f"{plural(unlisted.docs_failed, 'failure')} that left no document here "
                           f"(such as a record whose id another record has): `facet jobs "
                           f"{unlisted.id}` lists why")
        for d in docs:
            typer.echo(document_line(d, twin=d.key in twins))
        if not_shown:
            typer.echo(_not_shown_line(not_shown, limit, offset, "more document",
                                       DEFAULT_DOCUMENTS_LISTED, MAX_DOCUMENTS_LISTED, after=last,
                                       twins=twins))

    @cli.command("delete")
    @handle_errors
    def delete_cmd(
        collection: Annotated[str, typer.Argument(help="collection to delete (or to remove the --document KEYs from)")],
        yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask")] = False,
        force: Annotated[bool, typer.Option(
            "--force", help="delete vectors no collection of this database owns even where the "
                            "data folder's facet.db records them (FACET_DATABASE_URL naming "
                            "another database), or a collection whose store folder is missing "
                            "here and whose vectors were written in another data folder "
                            "(FACET_DATA_DIR perhaps not its); refused otherwise, exit 5")] = False,
        documents: Annotated[list[str] | None, typer.Option(
            "--document", "-d", metavar="KEY",
            help="remove only this document (its key as `facet search` and `facet jobs ID` "
                 "show it: a file's path, a record's id); repeat for several. The collection "
                 "stays; a key it does not hold removes nothing (exit 3). One removal takes at "
                 "most 1,000 keys: more are all checked first, then removed in parts of 1,000, "
                 "one job each")] = None,
        documents_from: Annotated[str | None, typer.Option(
            "--documents-from", metavar="FILE",
            help="remove the documents whose keys FILE lists, one a line (- reads standard "
                 "input; blank lines skipped); with --document too. A FILE with no key "
                 "removes nothing (exit 2): it never deletes the collection")] = None,
        null: Annotated[bool, typer.Option(
            "--null", "-0",
            help="with --documents-from: the keys in FILE are separated by NUL characters, not "
                 "lines (as `find -print0` writes them), for keys that hold a newline")] = False,
        missing_ok: Annotated[bool, typer.Option(
            "--missing-ok",
            help="with --document/--documents-from: skip (and count) the keys the collection "
                 "does not hold, removed already or never there, instead of removing nothing "
                 "(exit 3): the rerun of a removal stopped after some of its parts. Without "
                 "them: a collection that does not exist is a note on stderr and exit 0, not "
                 "exit 3 (a teardown run twice)")] = False,
    ) -> None:
        """Delete a collection, or only its --document KEYs.

        Without --document: its points and all its metadata go. With it: only the documents
        named, the collection stays (over 1,000 keys: removed in parts of 1,000, one job
        each)."""
        if null and documents_from is None:
            typer.echo("error: --null says how --documents-from FILE separates its keys; give "
                       "--documents-from too", err=True)
            raise typer.Exit(2)
        if documents_from == "-" and not yes:
            # Asked after the keys were read, the question found standard input at its end
            # ("no answer on standard input").
            typer.echo("error: standard input holds the keys: give -y (or read keys from a "
                       "file); nothing was removed", err=True)
            raise typer.Exit(2)
        given = list(documents or [])
        if documents_from is not None:
            listed = _keys_from(documents_from, null)
            if not listed and not given:
                # `facet delete big $(sed 's/^/-d /' empty.txt) -y` deleted the whole collection.
                typer.echo(f"error: no document key in {printable(documents_from)}: nothing "
                           "removed; to delete the collection itself, run without "
                           "--documents-from", err=True)
                raise typer.Exit(2)
            if not listed:
                typer.echo(f"warning: no document key in {printable(documents_from)}: removing "
                           f"the {plural(len(given), '--document key')} only", err=True)
            documents = [*given, *listed]
        if documents:
            if force:
                raise InvalidRequestError("--force is for a stray's vectors; it does not go with "
                                          "--document")
            _remove_documents(collection, documents, yes, missing_ok=missing_ok,
                              rerun=rerun_command(collection, given, documents_from, null),
                              file_driven=documents_from is not None)
            return
        with open_facet() as facet, _serve_deletes(collection):
            try:
                info = facet.collection(collection)
                orphan = False
            except NotFoundError:
                # Vectors no collection of this database owns (indexing into the name is
                # refused until they are deleted) are removed the same way.
                stray = facet.orphan_collection(collection)
                if stray is None and missing_ok:
                    # A teardown run twice (until 2026-12-01 --missing-ok here was exit 2).
                    typer.echo(f"no collection {printable(collection)}: nothing to delete",
                               err=True)
                    return
                if stray is None:
                    raise
                info, orphan = stray, True
            if orphan and info.owner is not None and not force:
                # Before asking: the prompt said "points that no collection of this database
                # owns" of a laptop's collection seen under a new FACET_DATABASE_URL.
                raise ConflictError(owned_elsewhere(collection, info.owner))
            if not orphan and info.store_elsewhere is not None and not force:
                raise elsewhere_refusal(collection, info.store_elsewhere)  # (before asking)
            # ("deleted c6: 0 documents, ? points" of one never stored: "no points")
            points = points_text(info, None if orphan else _jobs_of_unwritten(facet, info))
            what = (f"{points} of collection {collection!r} of {printable(info.owner)}, not of "
                    "this database" if orphan and info.owner is not None else
                    f"{points} that no collection of this database owns" if orphan
                    else f"{plural(info.documents, 'document')}, {points}")
            if not yes and not _confirm(f"delete {collection!r} ({what})?"):
                raise typer.Exit(1)  # (``confirm`` said what was not done)
            forced = facet.catalog.deleting_owned(collection) if force else nullcontext()
            with _quiet_log("app.services.collections"), forced:  # the line below says it
                facet.delete_collection(collection)
        typer.echo(f"deleted {collection}: {what}")
