"""``facet worker``, ``facet jobs ID --follow`` helpers and the hidden ``facet run-job``."""

from __future__ import annotations

import importlib
import json
from typing import Annotated

import typer

from app.commands.common import handle_errors, open_facet


def register(cli: typer.Typer) -> None:
    """Add ``facet worker`` and ``facet run-job`` to the CLI."""

    @cli.command("worker")
    @handle_errors
    def worker_cmd(
        queues: Annotated[str, typer.Option(
            "--queues", "-Q", help="queues to consume: index (index jobs), query (query "
                                   "encoding and rerank)")] = "index,query",
        concurrency: Annotated[int, typer.Option(
            "--concurrency", "-c", help="worker processes (one model copy each); on a GPU "
                                        "host run one worker per GPU")] = 1,
        pool: Annotated[str, typer.Option("--pool", help="prefork (default), solo or threads")
                        ] = "prefork",
        loglevel: Annotated[str, typer.Option(
            "--loglevel", "-l", help="Celery's log level: debug, info, warning, error")] = "info",
        name: Annotated[str | None, typer.Option(
            "--name", "-n", help="Celery node name (default facet-PID@HOST; %h = host name)")
        ] = None,
    ) -> None:
        """Run a Celery worker for the full stack (FACET_BROKER_URL, docs/deploy.md)."""
        # app never imports worker at module level (imports point worker -> app).
        main = importlib.import_module("worker.main")
        main.run(queues=queues, concurrency=concurrency, loglevel=loglevel, pool=pool, name=name)

    @cli.command("run-job", hidden=True)
    @handle_errors
    def run_job_cmd(payload: Annotated[str, typer.Argument(help="PreparedJob as JSON")]) -> None:
        """Run one prepared index job in this process (what `facet index --background`
        starts in embedded mode)."""
        from app.services.indexing import PreparedJob
        from app.settings import get_settings

        job = PreparedJob.from_dict(json.loads(payload))
        threads = get_settings().index_threads
        if threads:  # a background job's own process: FACET_INDEX_THREADS, as a worker's
            import torch

            torch.set_num_threads(threads)
        with open_facet() as facet:
            report = facet._run_job(job)
        typer.echo(f"job {report.job_id} {report.state}: {report.docs_indexed} indexed, "
                   f"{report.chunks_written} chunks")
