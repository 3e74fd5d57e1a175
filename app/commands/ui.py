"""``facet ui``: serve the Gradio UI on its own (``facet serve`` also mounts it at /ui)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated

import typer

from app.commands.common import check_port, handle_errors, mask_access_log, serving_lock
from app.commands.serve import is_loopback, preload_names
from app.errors import InvalidRequestError, UnavailableError
from app.files import raise_open_files_limit

if TYPE_CHECKING:
    from app.settings import FacetSettings

logger = logging.getLogger(__name__)


def register(cli: typer.Typer) -> None:
    """Add ``facet ui`` to the CLI."""

    @cli.command("ui")
    @handle_errors
    def ui_cmd(
        host: Annotated[str, typer.Option("--host", help="interface to listen on")] = "127.0.0.1",
        port: Annotated[int, typer.Option("--port", "-p", min=1, max=65535, help="port to listen on")] = 7860,
        preload: Annotated[list[str] | None, typer.Option(
            "--preload", help="embedder to load at start-up (repeat; default FACET_DEFAULT_EMBEDDER)")
        ] = None,
        root_path: Annotated[str | None, typer.Option(
            "--root-path", help="the path a reverse proxy serves the UI under (/facet), which it "
                                "removes before passing requests on; default FACET_ROOT_PATH")] = None,
    ) -> None:
        """Serve the search / cluster / index UI from this process (it owns the data folder).

        Login: FACET_UI_AUTH='user:password', else the API key when FACET_API_KEY is set.
        Server folders the Index tab may read: FACET_UI_ALLOWED_ROOTS='["/data/docs"]'.
        See docs/ui.md.
        """
        import importlib.util

        missing = [m for m in ("gradio", "plotly") if importlib.util.find_spec(m) is None]
        if missing:
            raise UnavailableError(f"facet ui needs the ui extra ({', '.join(missing)} missing): "
                                   "pip install 'facet-search[ui]'")
        # `facet serve`'s checks, in create_app (the rerankers' where it mounts the UI)
        from app.api.server import check_api_models, check_ui_rerankers
        from app.core import Facet
        from app.settings import get_settings

        if ":" in host:
            # Gradio writes its own URL as http://HOST:PORT without brackets, and then fails
            # on it ("Invalid port: ':1:7860'") after the page started loading.
            raise InvalidRequestError(f"the UI cannot listen on the IPv6 address {host!r}; give "
                                      "--host an IPv4 address (127.0.0.1, 0.0.0.0) or a host name")
        check_port(host, port)
        settings = get_settings()
        if root_path is not None:  # (checked as the setting is)
            from app.settings import FacetSettings

            try:
                settings = settings.model_copy(update={"root_path": FacetSettings.root_path_of(root_path)})
            except ValueError as e:
                raise InvalidRequestError(f"--root-path {e}") from e
        names = preload_names(preload, settings)  # before the data folder opens
        # As `facet serve` (exit 2, one line): the pickers offered a name that cannot be served.
        check_api_models(settings.api_models)
        check_ui_rerankers(settings)
        from ui.app import launch_ui, ui_auth  # Gradio: seconds, after the checks that need none

        _warn_open(host, settings, login=ui_auth(settings) is not None)
        raise_open_files_limit()  # as facet serve: connections and shard files
        with serving_lock(settings, "facet ui", f"http://{host}:{port}"):
            facet = Facet.for_serving(settings)
            Facet.set_shared(facet)
            try:
                for name in names:
                    facet.embed(["warm-up"], embedder=name)
                typer.echo(f"Facet UI on http://{host}:{port} (data dir {settings.data_dir})")
                mask_access_log()  # as `facet serve`'s: Gradio's uvicorn may log the query string
                # Gradio launched quiet: its "To create a public link, set `share=True` in
                # `launch()`" was advice to Python code a facet user cannot act on (and its
                # "Running on local URL" repeated the line above); blocking here as it would.
                demo = launch_ui(facet, host=host, port=port, block=False)
                try:
                    demo.block_thread()  # until Ctrl-C
                finally:
                    demo.close(verbose=False)
            finally:
                facet.close(reason="the server stopping")


def _warn_open(host: str, settings: FacetSettings, *, login: bool) -> None:
    """One warning when anyone who can reach ``host`` may use the UI: no login
    (``ui.app.ui_auth``: FACET_UI_AUTH, else FACET_API_KEY) on a host that is not loopback
    (``app.commands.serve.is_loopback``, as `facet serve`'s own warning). It said nothing, yet
    the page lets anyone search, index into (uploads, FACET_UI_ALLOWED_ROOTS' folders) and
    delete every collection."""
    if not login and not is_loopback(host):
        logger.warning("listening on %s without a login: anyone who can reach this port can "
                       "read, index into and delete every collection of %s (uploads, and the "
                       "FACET_UI_ALLOWED_ROOTS folders); set FACET_UI_AUTH='user:<a long random "
                       "password>' (or FACET_API_KEY), or listen on 127.0.0.1 (docs/ui.md)",
                       host, settings.data_dir)
