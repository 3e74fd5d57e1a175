"""``facet serve``: run the HTTP API (OpenAI-compatible embeddings, search, cluster, jobs)."""

from __future__ import annotations

from typing import Annotated

import typer

from app.commands.common import check_port, handle_errors
from app.errors import UnavailableError


def register(cli: typer.Typer) -> None:
    """Add ``facet serve`` to the CLI."""

    @cli.command("serve")
    @handle_errors
    def serve_cmd(
        host: Annotated[str, typer.Option("--host", help="interface to listen on")] = "127.0.0.1",
        port: Annotated[int, typer.Option("--port", "-p", min=1, max=65535)] = 8000,
        preload: Annotated[list[str] | None, typer.Option(
            "--preload", help="embedder to load at start-up (repeat; default FACET_DEFAULT_EMBEDDER)")
        ] = None,
        log_level: Annotated[str, typer.Option("--log-level")] = "info",
    ) -> None:
        """Serve the API from this process (it owns the data folder: one process per folder).

        Set FACET_API_KEY to require 'Authorization: Bearer <key>'. Routes: docs/api.md.
        """
        try:
            import uvicorn

            from app.api import create_app
        except ImportError as e:
            raise UnavailableError(f"facet serve needs the api extra ({e.name} is missing): "
                                   "pip install 'facet-search[api]'") from e
        from app.settings import get_settings

        check_port(host, port)
        settings = get_settings()
        names = preload if preload is not None else [settings.default_embedder]
        app = create_app(settings=settings, preload=[n for n in names if n])
        # One process: the embedded store folder belongs to exactly one.
        uvicorn.run(app, host=host, port=port, log_level=log_level, workers=1)
