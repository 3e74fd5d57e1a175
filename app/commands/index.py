"""``facet index``: index a folder or file into a collection (in this process, with a progress bar)."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from app.commands.common import exit_code, handle_errors, open_facet, path_value, stdout_may_close
from app.errors import FacetError, InvalidRequestError
from app.files import expand_user
from app.services.collections import MAX_JOB_ERRORS
from app.text import bar_size, plural, printable, printable_json

if TYPE_CHECKING:
    from app.core import Facet
    from app.services.indexing import IndexReport


def _duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h10m``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _log_lines(start: str | None, quiet_s: float,
               clock: Callable[[], float]) -> Callable[[Any], None]:
    """``progress_bar``'s updates into a log: ``start`` at the first, then a plain line when the
    documents moved by a tenth of their total or, when anything moved, at most every
    ``quiet_s`` (``log_line_due``, as `facet jobs ID --follow` prints into a log), and once for
    each step after the documents (optimizing the store). Nothing was printed until the summary:
    a 600-document run under cron or docker logs was silent for 95 s."""
    from app.commands.collections import PROGRESS_MESSAGES, log_line_due

    out = sys.stderr

    def say(text: str) -> None:
        out.write(text + "\n")
        out.flush()

    # ``start`` with the first update, once the run has begun: a refusal before it (the store
    # out of reach, busy) stays the one line it was.
    last: dict[str, Any] = {"done": 0.0, "chunks": 0, "stage": None, "at": clock(), "start": start}
    # The pace of the documents this run encoded: seconds and documents of the stretches in
    # which chunks were written, measured from the last update where the documents moved.
    # Stretches of skipped documents alone (unchanged, or done before a resume) wrote nothing
    # and are left out: counted at no cost, "86/600 documents (14%), about 0s left" was said
    # with two minutes to go.
    pace = {"elapsed": 0.0, "done": 0.0, "chunks": 0, "spent": 0.0, "encoded": 0.0}

    def measure(p: Any, done: float) -> None:
        if done == pace["done"]:
            return  # (an encoder's piece, a stage: the stretch goes on)
        if p.chunks_written > pace["chunks"] and done > pace["done"]:
            pace["spent"] += max(0.0, p.elapsed_s - pace["elapsed"])
            pace["encoded"] += done - pace["done"]
        pace.update(elapsed=p.elapsed_s, done=done, chunks=p.chunks_written)

    def update(p: Any) -> None:
        if last["start"]:
            say(last["start"])
            last["start"] = None
        done = (p.docs_done - 1 + (p.current_fraction or 0.0) if p.current is not None
                else float(p.docs_done))
        measure(p, done)
        total = max(p.docs_total, p.docs_done) if p.docs_total else 0
        stage = getattr(p, "stage", None)
        step = stage if stage and not stage.startswith(PROGRESS_MESSAGES) else None
        if step is not None:  # a wait after the documents: said once
            if step == last["stage"]:
                return
        elif (done, p.chunks_written) == (last["done"], last["chunks"]) or not log_line_due(
                ((done, last["done"], total),), clock() - last["at"], quiet_s):
            return
        last.update(done=done, chunks=p.chunks_written, stage=step, at=clock())
        # A large file being streamed is counted once it is done, its share in the percentage:
        # "1/1 documents (100%)" was said of one barely begun ("big.txt 10%").
        finished = p.docs_done - 1 if p.current is not None else p.docs_done
        counted = (f"{finished}/{total} documents ({done / total:.0%})" if total
                   else plural(finished, "document"))
        # Nothing until a stretch of encoded documents was timed (a run of unchanged ones
        # has no time left to tell). Once some went by unchanged, the rest may too, which
        # nothing can tell before reading them: the time is what encoding them all would take,
        # an upper bound ("about 5m19s left" was said of a sync that ended 2 s later, its
        # changed records first).
        some_unchanged = done - pace["encoded"] >= 1
        left = (f", {'up to ' if some_unchanged else ''}about "
                f"{_duration(pace['spent'] * (total - done) / pace['encoded'])} left"
                + (" (unchanged documents go faster)" if some_unchanged else "")
                if total and 0 < done < total and pace["encoded"] > 0 and pace["spent"] > 0
                else "")
        inside = (f" · {printable(Path(p.current).name)} {p.current_fraction or 0:.0%}"
                  if p.current is not None else "")
        say(f"  {counted}, {plural(p.chunks_written, 'chunk')} written, "
            f"{_duration(p.elapsed_s)} elapsed{left}{inside}"
            + (f" · {printable(step)}" if step else ""))

    return update


def progress_bar(start: str | None = None, *, quiet_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> tuple[Any, Any]:
    """A tqdm bar on stderr (documents/s and ETA) on a terminal; into a log (stderr not a
    terminal: cron, systemd, docker logs), plain lines (``_log_lines``): ``start``, then one
    per tenth of the documents or per ``quiet_s`` (default ``FOLLOW_QUIET_S``, 30 s)."""
    from tqdm import tqdm

    from app.commands.collections import FOLLOW_QUIET_S

    bar = tqdm(total=None, unit="doc", file=sys.stderr, **bar_size(), disable=None)
    if bar.disable:  # not a terminal
        return bar, _log_lines(start, FOLLOW_QUIET_S if quiet_s is None else quiet_s, clock)

    def update(p: Any) -> None:
        if bar.total != p.docs_total:
            bar.total = p.docs_total
        if p.current is not None:  # inside a large file: its chunks move the bar
            bar.set_description(f"{printable(Path(p.current).name)} {p.current_fraction or 0:.0%}",
                                refresh=False)
        elif getattr(p, "stage", None):  # after the documents: what the wait is for
            bar.set_description(p.stage, refresh=False)
        elif getattr(bar, "desc", ""):
            bar.set_description("", refresh=False)
        bar.set_postfix(chunks=p.chunks_written, refresh=False)
        # A streamed file counts as the fraction of it done, not as done when it starts.
        done = (p.docs_done - 1 + round(p.current_fraction or 0.0, 2) if p.current is not None
                else p.docs_done)
        # Only documents move the counter: tqdm's update(0) between the encoder's pieces
        # restarted its rate interval, so the batch's documents then counted over the time
        # since the last piece (67 docs at 38 s showed 288 doc/s and 17 s left, of 33 min).
        if done != bar.n:
            bar.update(done - bar.n)
        bar.refresh()  # the new description and postfix

    return bar, update


class _UnreadSaidBelow(logging.Filter):
    """Drops the embedder's log lines on texts its tokenizer cannot read ("N of M texts are
    mostly unknown tokens to its tokenizer") and on texts it cut ("N of M texts were longer
    than ... and were truncated": one per batch of a run, "32 of 32" each): the run's summary
    prints the job's own warnings of them (``unread_message``, ``cut_message``), which name the
    documents and count the run's chunks (stderr said it twice, or 30 times)."""

    SAID = ("mostly unknown tokens to its tokenizer", "and were truncated")

    def filter(self, record: logging.LogRecord) -> bool:
        return not any(said in str(record.msg) for said in self.SAID)


@contextmanager
def _unread_logged_once(enabled: bool) -> Iterator[None]:
    if not enabled:
        yield
        return
    logger, drop = logging.getLogger("embedders.base"), _UnreadSaidBelow()
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


def _submit(source: Path, collection: str, options: Any, as_json: bool) -> None:
    """``--background``: record a queued job, hand it to its runner, print its id."""
    from app.remote import ProcessJobRunner
    from app.settings import get_settings

    settings = get_settings()
    with open_facet() as facet:
        if not settings.broker_url:  # embedded: a detached `facet run-job` process
            facet.job_runner = ProcessJobRunner(settings,
                                                on_started=facet.indexing.set_job_process)
        job = facet.submit_index(source, collection, options)
    if as_json:
        typer.echo(printable_json(asdict(job)))
        return
    where = "the workers' index queue" if settings.broker_url else "a background process"
    typer.echo(f"{job.id}")
    typer.echo(f"job {job.id} queued on {where}: follow it with `facet jobs {job.id} --follow`",
               err=True)


def newest_job_id(facet: Facet, collection: str) -> int:
    """The id of ``collection``'s newest job, 0 where it has none (or does not exist yet)."""
    try:
        jobs = facet.jobs(collection, limit=1)
    except FacetError:
        return 0
    return jobs[0].id if jobs else 0


def say_how_to_resume(facet: Facet, collection: str, source: Path, before: int) -> None:
    """After Ctrl-C or SIGTERM: the stopped job's line (what was kept, how to go on), which was only in
    ``facet jobs``. This run's job is the newest one of ``collection`` after ``before`` (its
    newest job when the run began) that indexes ``source`` in this process; where there is none,
    the run stopped before its job was recorded (loading the model): nothing was written. The
    collection's newest job was said instead, another run's ("job 29 completed: ")."""
    try:
        where = str(expand_user(source).resolve())
        ours = [j for j in facet.jobs(collection, limit=20)
                if j.id > before and j.runner == "inline" and j.source == where]
        job = facet.job(ours[0].id, errors=None) if ours else None
    except (FacetError, OSError, RuntimeError):
        job = None
    if job is None or (job.state == "queued" and job.started_at is None):
        # (Its row is removed as the run stops; one read before that said "job 1 queued: ".)
        typer.echo(f"interrupted before the job started (no job was recorded): nothing was written "
                   f"to collection {printable(collection)!r}", err=True)
        return
    typer.echo(f"job {job.id} {job.state}: {printable(job.message or '')}", err=True)
    # Documents found moved before it stopped: their old entries are gone already.
    for e in job.errors:
        if e.get("document") == "moved" and e.get("kind") == "warning":
            typer.echo(f"  warning: {printable(e.get('message', ''))}", err=True)


def _cancelled_said(facet: Any, report: IndexReport) -> str:
    """A cancelled run's message, as its job row has it ("cancelled after every document had
    gone in ..., before optimizing the store; index the same source again to finish"); where
    the row cannot be read, the one a cancel before the last batch gives. Until 2026-11-30
    (seventh session) that one was said whatever the job had left to do."""
    from app.services.indexing import cancelled_message

    try:
        message = facet.job(report.job_id).message
    except Exception:  # (a message only: the run's end is said either way)
        message = None
    return str(message or cancelled_message(report.docs_indexed))


def _job_record(facet: Any, report: IndexReport, said: str | None) -> dict[str, Any]:
    """``facet index --json``'s object: the run's report with the job's record over it, so a
    script reads one shape from this, ``--background --json`` and `facet jobs ID --json`:
    ``id``, ``errors`` as ``{"document", "kind", "message"}`` (every one, warnings included;
    ``errors_total`` counts them), ``message`` and the job's other keys, beside the report's own
    (``job_id``, ``warnings`` as pairs, ``elapsed_s``, ``docs_per_s``, ...), whose values are
    kept where both have a key (the counts, ``timings``). Where the job is
    gone with the collection it created (``collection_removed``) or cannot be read, ``id``,
    ``errors``, ``errors_total`` and ``message`` are made from the report. A cancelled run's
    ``message`` is the one its ``error:`` line says (``said``). Until 2026-12-01 ``errors``
    were ``[key, message]`` pairs, without ``id`` (``.job_id // .id``), and a cancelled run's
    ``message`` was null."""
    out = asdict(report) | {"docs_per_s": report.docs_per_s}
    try:
        job: dict[str, Any] = asdict(facet.job(report.job_id, errors=None))
    except Exception:  # (gone with its collection, or unreadable: the report says the rest)
        errors = ([{"document": k, "kind": "error", "message": m} for k, m in report.errors]
                  + [{"document": k, "kind": "warning", "message": m} for k, m in report.warnings])
        job = {"id": report.job_id, "errors": errors, "errors_total": len(errors),
               "message": report.message}
    # The report's own values stay (its timings unrounded, its counts); the job gives the keys
    # the report lacks, and its ``errors`` and ``message``.
    out |= {k: v for k, v in job.items() if k not in out or k in ("errors", "message")}
    if said is not None:
        out["message"] = said
    return out


def _cancelled_line(job_id: int, said: str | None) -> str:
    """The ``error:`` line of a run cancelled from elsewhere (with or without ``--json``)."""
    return (f"error: job {job_id} was cancelled by a request (`facet jobs {job_id} --cancel`, "
            f"the API or the UI): {printable(said or '')}")


def rate(report: IndexReport) -> str:
    """The run's speed: documents per second, and chunks per second where documents were cut
    into more chunks than one each; chunks alone where the documents' rate rounds to 0.0 (one
    large streamed file read "0.0 docs/s"). (The unit switched at one document a second, so of
    two embedders on one corpus the faster read "1.1 docs/s" beside the slower's "1.9 chunks/s".)"""
    docs = f"{report.docs_per_s:.1f} docs/s"
    if report.chunks_written <= report.docs_indexed or report.elapsed_s <= 0:
        return docs
    chunks = f"{report.chunks_written / report.elapsed_s:.1f} chunks/s"
    return chunks if docs.startswith("0.0 ") else f"{docs}, {chunks}"


def register(cli: typer.Typer) -> None:
    """Add ``facet index`` to the CLI."""

    @cli.command("index")
    @handle_errors
    def index_cmd(
        source: Annotated[Path, typer.Argument(help="folder, file (txt md html pdf docx json jsonl csv) "
                                                    "or BEIR corpus.jsonl", parser=path_value)],
        collection: Annotated[str, typer.Option("--collection", "-c", help="collection name")],
        embedder: Annotated[str | None, typer.Option(
            "--embedder", "-e", help="corpus embedder (default FACET_DEFAULT_EMBEDDER)")] = None,
        sync: Annotated[bool | None, typer.Option(
            "--sync/--no-sync", help="remove documents of SOURCE that no longer exist (default: "
                                     "--sync for a folder, --no-sync for a file)",
            show_default=False)] = None,
        chunk_tokens: Annotated[int | None, typer.Option(
            "--chunk-tokens", help="tokens per chunk (new collections; default FACET_CHUNK_TOKENS)")
        ] = None,
        chunk_overlap: Annotated[int | None, typer.Option(
            "--chunk-overlap", help="overlap in tokens (new collections)")] = None,
        text_column: Annotated[str | None, typer.Option(
            "--text-column", help="the csv column / jsonl field holding the text (default: text, "
                                  "contents, content or body, in any case; a csv with one column "
                                  "takes it, unless it is an id; a csv or record without them "
                                  "is refused)")] = None,
        batch_chunks: Annotated[int | None, typer.Option(
            "--batch-chunks", help="chunks per encode/write/commit step")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
        allow_failures: Annotated[bool, typer.Option(
            "--allow-failures", help="exit 0 even when some documents failed (they are listed "
                                     "either way)")] = False,
        background: Annotated[bool, typer.Option(
            "--background", help="queue the job and print its id at once (to the workers when "
                                 "FACET_BROKER_URL is set, else a detached process); follow it "
                                 "with `facet jobs ID --follow`")] = False,
    ) -> None:
        """Index SOURCE into a collection (only new or changed documents are embedded)."""
        from app.services.indexing import IndexOptions, Terminated

        if str(source) == "-":  # "- does not exist" (exit 3), though `--out -` is stdout
            raise InvalidRequestError(
                "facet index reads files and folders, not standard input ('-'): save the texts "
                "to a file (.txt one per line, .jsonl, .csv) and index that file")
        options = IndexOptions(embedder=embedder, chunk_size=chunk_tokens,
                               chunk_overlap=chunk_overlap, sync=sync, batch_chunks=batch_chunks,
                               text_column=text_column)
        if background:
            _submit(source, collection, options, as_json)
            return
        with open_facet() as facet:
            before = newest_job_id(facet, collection)  # this run's job comes after it
            # With a broker set, a run without --background is not the workers' (its job's
            # runner is "inline"): the line said nothing of it while workers sat idle.
            here = (" in this process (--background sends it to the workers)"
                    if facet.settings.broker_url else "")
            bar, update = progress_bar(f"indexing {printable(str(source))} into collection "
                                       f"{printable(collection)}{here}")
            try:
                # --json prints no warning lines: the log's is the one on stderr there.
                with _unread_logged_once(not as_json):
                    report = facet.index(source, collection, options, progress=update)
                # A cancelled job's own message: it says whether documents were left to index
                # or only the job's end (the sync, the store's optimize).
                said = _cancelled_said(facet, report) if report.state == "cancelled" else None
                record = _job_record(facet, report, said) if as_json else None
            except (KeyboardInterrupt, Terminated) as e:  # Ctrl-C 130; SIGTERM (docker stop) 143
                bar.close()
                say_how_to_resume(facet, collection, source, before)
                raise typer.Exit(Terminated.EXIT_CODE if isinstance(e, Terminated) else 130) from None
            finally:
                bar.close()
        failure = None if allow_failures else report.failure(
            'the record\'s "errors"' if as_json else "the errors above")
        # Cancelled from elsewhere (`facet jobs N --cancel`, the API, the UI): exit 0 let
        # `facet index ... && next-step` go on with half a collection.
        cancelled = 1 if report.state == "cancelled" else 0
        # A closed stdout (`facet index DIR 2>&1 | head -1`) keeps the error lines, the exit
        # code (4 for failed documents, 1 cancelled): it was 0 (``stdout_may_close``).
        with stdout_may_close():
            if as_json:
                typer.echo(printable_json(record))
                if failure is not None:  # the error line too, as without --json (it said none)
                    typer.echo(f"error: {printable(str(failure))} (--allow-failures to exit 0 "
                               "anyway)", err=True)
                    raise typer.Exit(exit_code(failure))
                if cancelled:  # stdout carries the JSON alone; stderr says why the exit is 1, as
                    # without --json (until 2026-11-30, seventh session, it said nothing)
                    typer.echo(_cancelled_line(report.job_id, said), err=True)
                    raise typer.Exit(cancelled)
                return
            # A model loaded during the run is timed apart (``timings["load_model"]``), not in
            # elapsed_s: said here, "1 chunk in 0.2s" read as the whole of a 9 s run.
            # Each model loaded, the collection's other embedders' too (their load was
            # counted as encoding, and only the first model named).
            loads = report.loads or {report.embedder: report.timings.get("load_model", 0.0)}
            loading = ", ".join(f"{s:.1f}s loading {name}" for name, s in loads.items() if s >= 0.05)
            loading = f"+ {loading}; " if loading else ""
            typer.echo(
                f"job {report.job_id} {report.state}: {plural(report.docs_seen, 'document')} seen, "
                f"{report.docs_indexed} indexed, {report.docs_skipped} unchanged, "
                f"{report.docs_failed} failed, {report.docs_deleted} removed; "
                f"{plural(report.chunks_written, 'chunk')} in {report.elapsed_s:.1f}s "
                f"({loading}{rate(report)})")
            if report.removed:
                # "1 removed" named nothing, a wrong removal's document not even in `facet jobs`.
                shown = ", ".join(printable(k) for k in report.removed[:5])
                more = report.docs_deleted - min(len(report.removed), 5)
                typer.echo(f"  removed, no longer in the source: {shown}"
                           f"{f' and {more:,} more' if more > 0 else ''}", err=True)
            if report.skipped_files:
                from app.core import Facet

                # File names and messages come from the source: printable() shows a control
                # character in them escaped instead of sending it to the terminal.
                shown = ", ".join(printable(Path(f).name) for f in report.skipped_files[:10])
                more = len(report.skipped_files) - 10
                typer.echo(f"  skipped {len(report.skipped_files)} "
                           f"{'file' if len(report.skipped_files) == 1 else 'files'} of unsupported "
                           f"types: {shown}{f' and {more} more' if more > 0 else ''} "
                           f"(supported: {' '.join(Facet.supported_suffixes())})", err=True)
            for name, why in report.skipped_other[:10]:
                typer.echo(f"  skipped {printable(name)}: {printable(why)}", err=True)
            if len(report.skipped_other) > 10:
                typer.echo(f"  ... {len(report.skipped_other) - 10} more skipped: facet jobs "
                           f"{report.job_id}", err=True)
            for _key, message in report.errors[:20]:
                typer.echo(f"  error: {printable(message)}", err=True)
            if len(report.errors) > 20:
                more = len(report.errors) - 20
                # `facet jobs ID` alone prints the same first 20 again.
                listed = min(MAX_JOB_ERRORS, len(report.errors) + len(report.warnings))
                typer.echo(f"  ... {more} more: facet jobs {report.job_id} --errors {listed}",
                           err=True)
            for _key, message in report.warnings[:5]:
                typer.echo(f"  warning: {printable(message)}", err=True)
            if len(report.warnings) > 5:  # the rest were dropped without a word
                listed = min(MAX_JOB_ERRORS, len(report.errors) + len(report.warnings))
                typer.echo(f"  ... and {len(report.warnings) - 5} more "
                           f"{'warning' if len(report.warnings) == 6 else 'warnings'}: facet jobs "
                           f"{report.job_id} --errors {listed}", err=True)
            if report.collection_removed and not report.docs_failed and report.message:
                # "completed", then `facet search` said the collection was unknown; the report's
                # own line (``removed_collection_message``), as a Python caller reads it.
                typer.echo(f"  {printable(report.message)}", err=True)
            if failure is not None:
                typer.echo(f"error: {printable(str(failure))} (--allow-failures to exit 0 anyway)", err=True)
                raise typer.Exit(exit_code(failure))
            if cancelled:
                typer.echo(_cancelled_line(report.job_id, said), err=True)
                raise typer.Exit(cancelled)
