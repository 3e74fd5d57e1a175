"""``facet move-metadata``: move the data folder's SQLite metadata into PostgreSQL."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from app.commands.common import handle_errors
from app.settings import get_settings
from app.text import bar_size, plural

HELP = "\n\n".join((
    "Move the data folder's SQLite metadata (facet.db) into PostgreSQL (FACET_DATABASE_URL).",
    'Collections, documents, chunks, index jobs and their errors are copied into the database'
    ' --to names (a URL as FACET_DATABASE_URL takes it: '
    'postgresql://USER:PASSWORD@HOST:PORT/DATABASE, postgres:// too, or sqlite:///PATH). The '
    "target is brought to Facet's schema and must hold no collection and no job; nothing may "
    'be indexing (stop `facet serve`, `facet ui` and the workers first). Every table is '
    'copied in one transaction, the id sequences are set past the ids copied and the row '
    'counts compared; then facet.db is renamed facet.db.moved-<UTC time>, so that only the '
    "new database owns the data folder's vectors. On any failure nothing is written to the "
    'target and facet.db stays as it was.',
    'Afterwards set FACET_DATABASE_URL to the URL (the command prints the line) and keep the '
    'same FACET_DATA_DIR: the vectors stay in its qdrant-edge/. The move leaves '
    'metadata-moved.json in the data folder: a command run there without FACET_DATABASE_URL '
    'then refuses, naming the database, rather than start an empty facet.db. Ctrl-C or SIGTERM '
    'stops the move (nothing moved, exit 130 or 143) until facet.db is renamed; after that '
    'the move finishes, says so, and exits 0. While it runs, `facet serve` and `facet ui` '
    'refuse to start on the data folder.',
))


def _confirm(question: str) -> bool:
    """Ask on stderr, read y/yes (default no) from stdin (``confirm``, shared with the other
    command that asks); no answer (stdin ended or closed) is one ``error:`` line and exit 2."""
    from app.commands.common import confirm

    return confirm(question, "nothing was moved; give -y to move without asking")


class _Bar:
    """A tqdm bar on stderr (none where stderr is not a terminal) once the move is big enough
    (``PROGRESS_ROWS`` rows) to be worth one."""

    def __init__(self) -> None:
        self.bar: Any = None

    def __call__(self, done: int, total: int) -> None:
        from app.services.metadata_move import PROGRESS_ROWS

        if total < PROGRESS_ROWS:
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="row", desc="copying", file=sys.stderr,
                            **bar_size(), disable=None)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def register(cli: typer.Typer) -> None:
    """Add ``move-metadata`` to the CLI."""

    @cli.command("move-metadata", help=HELP)
    @handle_errors
    def move_metadata_cmd(
        to: Annotated[str, typer.Option(
            "--to", metavar="URL", help="the target database, as FACET_DATABASE_URL takes it "
                                        "(postgresql://USER:PASSWORD@HOST:PORT/DATABASE)")],
        yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask")] = False,
    ) -> None:
        from app.services.metadata_move import move_metadata, plan_move

        settings = get_settings()
        if not yes:
            plan = plan_move(settings, to)
            question = (f"move {plural(plan.collections, 'collection')}, "
                        f"{plural(plan.jobs, 'index job')} ({plural(plan.total_rows, 'row')} in all) "
                        f"from {plan.source} to {plan.target}, and rename facet.db aside?")
            if not _confirm(question):
                raise typer.Exit(1)  # (``confirm`` said what was not done)
        from app.services.metadata_move import MoveInterrupted

        bar = _Bar()
        try:
            report = move_metadata(settings, to, progress=bar)
        except (KeyboardInterrupt, MoveInterrupted) as e:
            # (Ctrl-C: 130, SIGTERM: 143) the target's transaction rolled back, facet.db back.
            bar.close()
            typer.echo("interrupted: nothing was moved; facet.db is as it was", err=True)
            raise typer.Exit(128 + getattr(e, "signum", 2)) from None
        finally:
            bar.close()
        from app.services.metadata_move import tables

        counts = ", ".join(f"{name} {report.rows.get(name, 0)}" for name in
                           (t.name for t in tables()))
        typer.echo(f"moved {plural(report.total_rows, 'row')} to {report.target} ({counts}); "
                   "row counts checked", err=True)
        # (Its -wal and -shm, named only while there: the checkpoint folds them in.)
        sides = [p.name for p in report.renamed[1:] if p.exists()]
        typer.echo(f"renamed {report.source} to {report.renamed[0].name}"
                   + (f" (with {', '.join(sides)})" if sides else ""), err=True)
        typer.echo(f"{report.vectors}; from now on set:", err=True)
        typer.echo(report.export_line)
        if report.password_masked:
            typer.echo("(put the database's password in place of ***)", err=True)
        if report.signalled is not None:
            # Noted during the rename and the commit (never interrupted: a commit cut short
            # here landed on the server after "nothing was moved"): the move is done, exit 0.
            import signal

            try:
                name = signal.Signals(report.signalled).name
            except ValueError:
                name = f"signal {report.signalled}"
            typer.echo(f"note: the move completed before the signal ({name}) was acted on: the "
                       f"metadata is in {report.target} and facet.db was renamed; set "
                       "FACET_DATABASE_URL as above", err=True)
