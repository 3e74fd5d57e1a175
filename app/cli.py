"""The ``facet`` command line. Commands only parse arguments, call a service, and print."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from functools import wraps
from typing import Annotated, Any, TypeVar

import typer

from app.errors import FacetError
from app.settings import apply_settings, get_settings

cli = typer.Typer(
    name="facet",
    help="Facet: instruction-aware retrieval with LLM-based embedders.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(func: F) -> F:
    """Turn domain and embedder errors into a one-line message and an exit code (no traceback)."""
    from embedders.errors import EmbedderError

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except FacetError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(e.exit_code) from e
        except EmbedderError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from e

    return wrapper  # type: ignore[return-value]


@cli.callback()
def _main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="debug logging")] = False,
) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("httpx", "urllib3", "filelock", "transformers"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    apply_settings(get_settings())


@cli.command("embedders")
@handle_errors
def embedders_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
) -> None:
    """List the embedders that can be loaded by name."""
    from embedders import list_embedders

    infos = list_embedders()
    if as_json:
        typer.echo(json.dumps([{"name": i.name, "kind": i.kind, "description": i.description}
                               for i in infos], indent=2))
        return
    width = max(len(i.name) for i in infos)
    for info in infos:
        typer.echo(f"{info.name:<{width}}  {info.kind:<9} {info.description}")


@cli.command("embed")
@handle_errors
def embed_cmd(
    texts: Annotated[list[str], typer.Argument(help="texts to embed")],
    embedder: Annotated[str, typer.Option("--embedder", "-e", help="name or checkpoint path")] = "minilm",
    instruction: Annotated[str | None, typer.Option("--instruction", "-i")] = None,
    role: Annotated[str, typer.Option("--role", help="query or document")] = "document",
    batch_size: Annotated[int, typer.Option("--batch-size")] = 32,
) -> None:
    """Embed TEXTS and print a JSON object with the vectors (L2-normalised float32)."""
    from embedders import load_embedder

    model = load_embedder(embedder, device=get_settings().device)
    vectors = model.encode(texts, role=role, instruction=instruction, batch_size=batch_size)
    typer.echo(json.dumps({
        "embedder": model.name,
        "dim": model.dim,
        "role": role,
        "instruction": instruction,
        "vectors": [[round(float(x), 6) for x in row] for row in vectors],
    }))


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
