"""``facet docs [NAME]``: the documentation the messages and help texts point at.

Help texts and messages say "see docs/api.md"; an installed wheel had no docs/ anywhere (the
security exploration of the sixth session of 2026-12-02). The wheel installs them under
``<prefix>/share/facet-search/docs`` (pyproject.toml's data-files), as it does the checkpoints;
this command finds them there or in a checkout, lists them, prints one, or says where it is.
"""

from __future__ import annotations

import difflib
import site
import sys
import sysconfig
from pathlib import Path
from typing import Annotated

import typer

from app.errors import InvalidRequestError, UnavailableError

INSTALLED_DOCS = Path("share", "facet-search", "docs")


def docs_dir() -> Path | None:
    """The ``docs/`` folder beside the packages (a checkout or an editable install), else the
    copy a ``pip install`` put under ``share/facet-search/docs`` of the environment (or of the
    user base); None where neither is."""
    checkout = Path(__file__).resolve().parents[2] / "docs"
    if (checkout / "api.md").is_file():
        return checkout
    for base in dict.fromkeys((sysconfig.get_path("data"), sys.prefix, site.getuserbase())):
        installed = Path(base) / INSTALLED_DOCS
        if (installed / "api.md").is_file():
            return installed
    return None


def _first_heading(path: Path) -> str:
    try:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    except OSError:
        pass
    return ""


def register(cli: typer.Typer) -> None:
    """Add ``facet docs`` to the CLI."""
    from app.commands.common import handle_errors

    @cli.command("docs")
    @handle_errors
    def docs_cmd(
        name: Annotated[str | None, typer.Argument(
            help="a document: api, cli, deploy, evaluation, indexing, plugins, training, ui... "
                 "(docs/NAME.md, as messages name them); none: list them")] = None,
        path: Annotated[bool, typer.Option("--path", help="print where the document is, not its "
                                                          "text (with no NAME: their folder)")]
            = False,
    ) -> None:
        """Print a document of Facet's documentation (what "see docs/NAME.md" points at), or list them."""
        folder = docs_dir()
        if folder is None:
            raise UnavailableError(
                "Facet's documentation is not installed here (no docs/ beside the packages, none "
                f"under {INSTALLED_DOCS} of this environment); it is in the source repository's "
                "docs/ folder")
        docs = {p.stem: p for p in sorted(folder.glob("*.md"))}
        if name is None and path:  # (it listed them, --path unheeded)
            typer.echo(str(folder))
            return
        if name is None:
            width = max(len(n) for n in docs)
            for stem, doc in docs.items():
                typer.echo(f"{stem:<{width}}  {_first_heading(doc)}")
            typer.echo(f"(in {folder}; `facet docs NAME` prints one)")
            return
        from app.commands.common import shorten

        given, _, anchor = name.strip().partition("#")
        where = Path(given)
        said = shorten(name, 80)  # (a 5,000-character name was echoed whole)
        folders = [part.lower() for part in where.parent.parts if part != "."]  # (DOCS/ too)
        if where.is_absolute() or folders not in ([], ["docs"]):
            # (``/etc/api.md`` printed Facet's api.md, as if it had read the file named)
            raise InvalidRequestError(
                f"{said!r} is not one of Facet's documents: give a name (api) or docs/NAME.md, as "
                "messages name them")
        stem = where.name.lower().removesuffix(".md")  # (``Api.MD`` was refused)
        found = docs.get(stem)
        if found is None:
            close = difflib.get_close_matches(stem, list(docs), n=1, cutoff=0.6)
            raise InvalidRequestError(
                f"no document {said!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                + f"; the documents: {', '.join(docs)}")
        text = found.read_text(encoding="utf-8")
        part = section(text, anchor, found.name) if anchor else text  # (checked for --path too)
        if path:
            typer.echo(str(found))
            return
        typer.echo(part, nl=False)


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it (what the docs' links use): lower case, spaces to
    hyphens, punctuation other than hyphens and underscores dropped."""
    kept = "".join(c for c in heading.strip().lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def section(text: str, anchor: str, name: str) -> str:
    """The part of the Markdown ``text`` from the heading whose anchor is ``anchor`` to the next
    heading of its level or above (``facet docs indexing.md#lexical-and-hybrid-search``, as the
    docs link to it: an anchor was refused as part of the name).

    Raises:
        InvalidRequestError: no heading has that anchor (the closest named).
    """
    lines = text.splitlines(keepends=True)
    headings: list[tuple[int, int, str]] = []  # (line, level, anchor)
    fenced = False
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced  # (a "# comment" in a shell block is no heading)
        elif not fenced and line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            if line[level:level + 1] in (" ", "\t"):
                headings.append((i, level, _slug(line[level:].strip())))
    wanted = anchor.strip().lower()
    for n, (start, level, slug) in enumerate(headings):
        if slug == wanted:
            end = next((line for line, lvl, _ in headings[n + 1:] if lvl <= level), len(lines))
            return "".join(lines[start:end])
    close = difflib.get_close_matches(wanted, [slug for _, _, slug in headings], n=1, cutoff=0.6)
    from app.commands.common import shorten

    raise InvalidRequestError(f"{name} has no section #{shorten(anchor, 80)}"
                              + (f" (did you mean #{close[0]}?)" if close else "")
                              + f"; `facet docs {name}` prints it whole")
