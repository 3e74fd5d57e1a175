"""The ``facet`` command line: the CLI edge of the application core.

Commands live in ``app.commands`` (one module per command group, each with a
``register(cli)``); they parse arguments, call one ``Facet`` method and print. This module
owns what only the CLI needs: logging set-up and the mapping of domain errors to a one-line
message and an exit code.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from app.errors import (
    BusyError,
    ConflictError,
    DataError,
    FacetError,
    InvalidRequestError,
    NotFoundError,
    UnavailableError,
    UnknownModelError,
)
from app.settings import apply_settings, get_settings

if TYPE_CHECKING:
    from app.core import Facet

cli = typer.Typer(
    name="facet",
    help="Facet: instruction-aware retrieval with LLM-based embedders.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

F = TypeVar("F", bound=Callable[..., Any])

# Most specific first. An unknown embedder name is a bad option value (2), as it always was.
EXIT_CODES: list[tuple[type[FacetError], int]] = [
    (UnknownModelError, 2),
    (InvalidRequestError, 2),
    (NotFoundError, 3),
    (DataError, 4),
    (ConflictError, 5),
    (BusyError, 6),
    (UnavailableError, 7),
    (FacetError, 1),
]


def exit_code(error: FacetError) -> int:
    """The exit code the CLI uses for a domain error."""
    return next(code for cls, code in EXIT_CODES if isinstance(error, cls))


def handle_errors(func: F) -> F:
    """Turn domain and embedder errors into a one-line message and an exit code (no traceback)."""
    from embedders.errors import EmbedderError

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except FacetError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(exit_code(e)) from e
        except EmbedderError as e:  # commands that use an embedder directly (eval, train)
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from e

    return wrapper  # type: ignore[return-value]


@contextmanager
def open_facet(**kwargs: Any) -> Iterator[Facet]:
    """The application core over the environment's settings, closed on exit."""
    from app.core import Facet

    facet = Facet.open(get_settings(), **kwargs)
    try:
        yield facet
    finally:
        facet.close()


@cli.callback()
def _main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="debug logging")] = False,
) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("httpx", "urllib3", "filelock", "transformers", "alembic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if not verbose:
        quiet_libraries()
    apply_settings(get_settings())


def quiet_libraries() -> None:
    """No per-command library noise: the "Loading weights" bar transformers draws for every
    model load, and the libraries' FutureWarnings (deprecations the user cannot act on).
    ``--verbose`` keeps both."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # read when transformers loads
    # Its tokenizer's "sequence length is longer than ..." for a long query: the embedder's own
    # truncation warning says it once, with what to do.
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if "transformers" in sys.modules:  # already imported (in-process callers, tests)
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    warnings.filterwarnings("ignore", category=FutureWarning)


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 document``, ``2 documents``."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def shorten(text: str | None, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was (a pasted query)."""
    text = text or ""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def command_line(ctx: typer.Context) -> str:
    """The running command as a reproducible shell line: ``sys.argv`` under ``facet``/``python -m app``,
    else (called in-process, as tests do) rebuilt from the parsed parameters that differ from their
    defaults."""
    import shlex

    name = ctx.info_name or ""
    if len(sys.argv) > 1 and sys.argv[1] == name:
        return "facet " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    parts = [name]
    for param in ctx.command.params:
        value = ctx.params.get(param.name or "")
        if value is None or value == param.default or value in ((), []):
            continue
        if param.param_type_name == "argument":
            parts.append(shlex.quote(str(value)))
            continue
        flag = param.opts[0]
        if isinstance(value, bool):
            secondary = getattr(param, "secondary_opts", [])
            parts.append(flag if value else (secondary[0] if secondary else flag))
            continue
        for item in value if isinstance(value, list | tuple) else [value]:
            parts.append(f"{flag} {shlex.quote(str(item))}")
    return "facet " + " ".join(parts)


def _register_command_groups() -> None:
    import importlib
    import pkgutil

    import app.commands as commands

    for module in pkgutil.iter_modules(commands.__path__):
        mod = importlib.import_module(f"app.commands.{module.name}")
        register = getattr(mod, "register", None)
        if register is not None:
            register(cli)


_register_command_groups()


def main() -> None:
    """Console-script entry point."""
    cli()
