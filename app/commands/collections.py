"""``facet collections``, ``facet jobs`` and ``facet delete``."""

from __future__ import annotations

import logging
import math
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated, TextIO
from urllib.parse import quote

import typer

from app.commands.common import handle_errors, open_facet
from app.errors import ConflictError, InvalidRequestError, NotFoundError
from app.services.collections import (
    DEFAULT_JOB_ERRORS,
    FOLDER_DATABASE,
    MAX_JOB_ERRORS,
    MAX_JOBS_LISTED,
    MOVE_IT,
    SUPERSEDED,
    CollectionInfo,
    JobInfo,
    JobList,
    owned_elsewhere,
)
from app.text import plural, printable, printable_json, size_text

if TYPE_CHECKING:
    from app.core import Facet


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


def error_lines(j: JobInfo, job_id: int, offset: int = 0, asked: int | None = None) -> list[str]:
    """The job's errors as printed, then "... N more" when it has more than were read;
    ``offset``: how many of its first errors were skipped (``--errors-offset``)."""
    lines = []
    if offset > 0 and not j.errors_total:
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
        said = doc in e["message"] or (bool(record) and e["message"].startswith(base))
        named = f"{printable(doc)}: " if doc and not said else ""
        # Messages quote document ids and file names: printable() shows their control
        # characters escaped instead of sending them to the terminal.
        lines.append(f"  {printable(e['kind'])}: {named}{printable(e['message'])}")
    more = j.errors_total - offset - len(j.errors)
    # The next page's whole command, its page size kept (the hint named only --errors-offset,
    # and following it showed 20 a page; the first page's never named --errors-offset, a dead
    # end past --errors 1000).
    size = f"--errors {asked} " if asked is not None and asked != SHOWN_ERRORS else ""
    if more > 0:
        lines.append(f"  ... {more} more (of {j.errors_total}): facet jobs {job_id} {size}"
                     f"--errors-offset {offset + len(j.errors)} shows the next ones (--errors N: "
                     f"N a page, up to {MAX_JOB_ERRORS})")
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


def _one_line(message: str) -> str:
    """``message``'s first line, cut to ``LIST_MESSAGE_CHARS`` (with "…" where cut)."""
    lines = message.strip().splitlines() or [""]
    first = lines[0]
    if len(first) > LIST_MESSAGE_CHARS:
        return first[:LIST_MESSAGE_CHARS - 1].rstrip() + "…"
    return first + (" …" if len(lines) > 1 else "")


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
        live = [j for j in listed if j.state in ("queued", "running", "stalled")]
        if live and not any(j.state == "completed" for j in listed):
            first = min(live, key=lambda j: j.id)
            return f"no points yet (job {first.id} {first.state})"
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


def _remove_documents(collection: str, keys: list[str], yes: bool) -> None:
    """`facet delete C --document KEY ...`: check, ask, remove, say what went and what comes
    back.

    A relative path given as a key is read from the working folder (files are keyed by their
    absolute paths). Everything is checked before the question (an unknown collection or key,
    too many keys, a job writing it): the answer was asked for, then refused."""
    with open_facet() as facet:
        resolved = facet.check_removal(collection, keys, base=os.getcwd())
        shown = ", ".join(printable(k) for k in resolved[:5]) + (
            f" and {len(resolved) - 5} more" if len(resolved) > 5 else "")
        if not yes and not _confirm(f"remove {plural(len(resolved), 'document')} from "
                                    f"{collection!r} ({shown})?"):
            raise typer.Abort()
        try:
            with _quiet_log("app.services.indexing"):  # the lines below say it
                report = facet.remove_documents(collection, resolved, base=os.getcwd())
        except ConflictError as e:
            if "(facet serve" not in str(e):
                raise
            raise ConflictError(f"{e}: {_removal_request(collection, resolved)} on its API "
                                "(docs/api.md)", param=e.param) from e
    was = {"error": ", the entry of a failed document", "pending": ", a pending entry"}
    for d in report.removed:
        typer.echo(f"removed {printable(d.key)} ({plural(d.chunks, 'chunk')}"
                   f"{was.get(d.status, '')})")
    typer.echo(f"removed {plural(report.docs_deleted, 'document')} "
               f"({plural(report.chunks_deleted, 'chunk')}) from {collection}: job "
               f"{report.job_id} (`facet jobs {report.job_id}`)")
    for d in report.still_in_source():
        typer.echo(f"  warning: {printable(d.source)} is still there: delete it (or the record) "
                   "from there too, or the next `facet index` of it (or of a folder holding it) "
                   f"adds {printable(d.key)} back", err=True)


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


def _follow(job_id: int, interval: float, out: TextIO | None = None) -> int:
    """Show the job's progress until it ends (``JobFollower``: in place on a terminal, sparse
    into a log); the exit code."""
    out = out if out is not None else sys.stdout
    follower = JobFollower(out, tty=out.isatty())
    with open_facet() as facet:
        while True:
            # No errors: they were all read again at each interval, 20,000 of them on a big job.
            code = follower.show(facet.job(job_id, errors=0))
            if code is not None:
                return code
            time.sleep(max(0.1, interval))


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
                infos = [facet.collection(name)] if name else facet.collections()
                strays = [] if name else facet.stray_collections()
            except NotFoundError:  # a name the listing shows as vectors only is one too
                stray = facet.orphan_collection(name) if name else None
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
            typer.echo(printable_json(listed[0] if name else listed))
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
                     else f" · words (lexical/hybrid; {printable(i.lexical_note)})" if i.lexical_note
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
        as_json: Annotated[bool, typer.Option(
            "--json", help="machine-readable output: a list, or with JOB_ID its object (as GET "
                           "/jobs/ID)")] = False,
        follow: Annotated[bool, typer.Option(
            "--follow", "-f", help="show JOB_ID's progress live until it ends (exit 1 if it "
                                   "failed or was interrupted)")] = False,
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
            if as_json:
                typer.echo(printable_json(asdict(job)))
            else:
                asked = (" (cancel requested: it stops at its next batch)"
                         if job.state not in _ENDED else "")
                typer.echo(f"job {job.id} {job.state}{asked}")
                if job.message and job.state in _ENDED:
                    typer.echo(f"  {printable(job.message)}")
            if follow:
                raise typer.Exit(_follow(job_id, interval))
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
                    else facet.jobs(collection, limit, offset))
            there = 0
            if job_id is None and offset and not jobs and not as_json:
                # Past the end: how many there are ("no index jobs past the newest 20" read as
                # if 20 existed). The first page of one, with the count of those it leaves out.
                first = facet.jobs(collection, 1)
                there = len(first) + (first.not_shown if isinstance(first, JobList) else 0)
        if follow:
            assert job_id is not None
            raise typer.Exit(_follow(job_id, interval))
        if as_json:
            # One job asked for by its id: its object, as `--cancel --json`, `facet index
            # --background --json` and GET /jobs/ID give it (it was a one-element list).
            typer.echo(printable_json(asdict(jobs[0]) if job_id is not None
                                      else [asdict(j) for j in jobs]))
            return
        if not jobs and offset:
            typer.echo(f"no index jobs past the newest {offset}: there "
                       f"{'is' if there == 1 else 'are'} {there or 'none'}"
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
            note = (f" · {printable(_one_line(j.message))}"
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
                for line in error_lines(j, job_id, errors_offset, errors):
                    typer.echo(line)
        if isinstance(jobs, JobList) and jobs.not_shown:
            # Jobs still going are listed whatever their age (``CollectionService.jobs``); the
            # rest past --limit were left out without a word. The next page's command keeps
            # the page size (following "--offset K" alone listed 20).
            size = f"--limit {limit} " if limit != DEFAULT_JOBS_LISTED else ""
            typer.echo(f"… {plural(jobs.not_shown, 'older job')} not shown ({size}--offset "
                       f"{offset + limit} shows the next ones; --limit N: N a page, up to "
                       f"{MAX_JOBS_LISTED})")

    @cli.command("delete")
    @handle_errors
    def delete_cmd(
        collection: Annotated[str, typer.Argument(help="collection to delete (or to remove the --document KEYs from)")],
        yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask")] = False,
        force: Annotated[bool, typer.Option(
            "--force", help="delete vectors no collection of this database owns even where the "
                            "data folder's facet.db records them (FACET_DATABASE_URL naming "
                            "another database); refused otherwise, exit 5")] = False,
        documents: Annotated[list[str] | None, typer.Option(
            "--document", "-d", metavar="KEY",
            help="remove only this document (its key as `facet search` and `facet jobs ID` "
                 "show it: a file's path, a record's id); repeat for several. The collection "
                 "stays; a key it does not hold removes nothing (exit 3)")] = None,
    ) -> None:
        """Delete a collection, or only its --document KEYs.

        Without --document: its points and all its metadata go. With it: only the documents
        named, the collection stays."""
        if documents:
            if force:
                raise InvalidRequestError("--force is for a stray's vectors; it does not go with "
                                          "--document")
            _remove_documents(collection, documents, yes)
            return
        with open_facet() as facet, _serve_deletes(collection):
            try:
                info = facet.collection(collection)
                orphan = False
            except NotFoundError:
                # Vectors no collection of this database owns (indexing into the name is
                # refused until they are deleted) are removed the same way.
                stray = facet.orphan_collection(collection)
                if stray is None:
                    raise
                info, orphan = stray, True
            if orphan and info.owner is not None and not force:
                # Before asking: the prompt said "points that no collection of this database
                # owns" of a laptop's collection seen under a new FACET_DATABASE_URL.
                raise ConflictError(owned_elsewhere(collection, info.owner))
            points = points_text(info, None if orphan else _jobs_of_unwritten(facet, info))
            if points == "? points" and not orphan and _never_stored(info):
                points = "no points"  # ("deleted c6: 0 documents, ? points")
            what = (f"{points} of collection {collection!r} of {printable(info.owner)}, not of "
                    "this database" if orphan and info.owner is not None else
                    f"{points} that no collection of this database owns" if orphan
                    else f"{plural(info.documents, 'document')}, {points}")
            if not yes and not _confirm(f"delete {collection!r} ({what})?"):
                raise typer.Abort()
            forced = facet.catalog.deleting_owned(collection) if force else nullcontext()
            with _quiet_log("app.services.collections"), forced:  # the line below says it
                facet.delete_collection(collection)
        typer.echo(f"deleted {collection}: {what}")
