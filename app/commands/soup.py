"""``facet soup CKPT CKPT... --out DIR``: average checkpoints of one method in weight space.

The averaging lives in ``embedders.training.soup``; this edge resolves names, parses the
weights and prints what was written. Score the soup on dev like any checkpoint before keeping it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.commands.common import expand_home, path_value
from app.errors import InvalidRequestError
from app.text import printable_json


def register(cli: typer.Typer) -> None:
    from app.cli import handle_errors

    @cli.command("soup")
    @handle_errors
    def soup_cmd(
        checkpoints: Annotated[list[str], typer.Argument(
            help="two or more checkpoints of one method (directories or registered names)")],
        out: Annotated[Path, typer.Option(
            "--out", "-o", help="directory to write the averaged checkpoint to", callback=expand_home,
            parser=path_value)],
        weights: Annotated[str | None, typer.Option(
            help="comma-separated weight per checkpoint, normalised to sum 1 (default: uniform)")] = None,
        rank: Annotated[int | None, typer.Option(
            help="LoRA rank of the soup (default: the first checkpoint's; the sum of the ranks is exact)")]
            = None,
        force: Annotated[bool, typer.Option("--force", help="overwrite a checkpoint already at --out")] = False,
    ) -> None:
        """Average checkpoints of one method (a "model soup"): no training, one model to serve."""
        from app.commands.train import _resolve_checkpoint, check_out_dir
        from embedders.base import CONFIG_FILE, PARTIAL_SAVE_AGE_S, recover_checkpoint
        from embedders.training.soup import make_soup

        if len(checkpoints) < 2:  # (a usage slip, said before any checkpoint is looked at)
            raise InvalidRequestError(f"a soup needs at least two checkpoints; {len(checkpoints)} given")
        paths = [_resolve_checkpoint(name, "soup")[0] for name in checkpoints]
        if any(out.resolve() == p.resolve() for p in paths):  # before --force is suggested
            raise InvalidRequestError(f"--out {out} is one of the ingredients; write the soup elsewhere")
        parsed: list[float] | None = None
        if weights is not None:  # (--weights '' was the uniform default, silently)
            try:
                parsed = [float(w) for w in weights.split(",")]
            except ValueError as e:
                raise InvalidRequestError(f"--weights {weights!r}: expected comma-separated numbers") from e
        if out.exists() and not out.is_dir():
            raise InvalidRequestError(f"--out {out} is a file; give a directory for the soup")
        # A soup killed between its two renames left the old checkpoint as .NAME.old: put back,
        # it is refused below like any other; partial writes of killed soups are removed.
        recover_checkpoint(out, partial_older_than_s=PARTIAL_SAVE_AGE_S)
        # The soup replaces the whole directory (atomically, as a training save): other files
        # in it would be deleted, and a folder it cannot write is refused before the averaging.
        check_out_dir(out, "--out")
        if (out / CONFIG_FILE).exists() and not force:
            raise InvalidRequestError(f"--out {out} already holds a checkpoint; pass --force to overwrite it")
        try:
            report = make_soup(paths, out, weights=parsed, rank=rank)
        except ValueError as e:
            raise InvalidRequestError(str(e)) from e
        typer.echo(printable_json(report.to_dict()))
        for i, j in report.duplicates:
            typer.echo(f"warning: {paths[j]} holds the same adapter as {paths[i]}; that model counts twice",
                       err=True)
        typer.echo(f"wrote {out} ({report.method}, rank {report.rank}, {report.energy_kept:.4%} of the exact "
                   "average's energy kept in the worst module); score it on dev before keeping it", err=True)
