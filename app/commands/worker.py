"""``facet worker``, ``facet jobs ID --follow`` helpers and the hidden ``facet run-job``."""

from __future__ import annotations

import importlib
import json
from typing import Annotated

import typer

from app.commands.common import handle_errors, open_facet

# The settings a worker reads, under `facet worker --help` (its options alone were listed).
WORKER_EPILOG = (
    "Settings it reads, from the environment only (no .env file is read: export them, or "
    "give them to the container, as docker-compose.yml's x-facet-env does):\n\n"
    "FACET_BROKER_URL: the Redis it takes tasks from (required; the one facet serve and "
    "facet index --background send to).\n\n"
    "FACET_DATA_DIR, FACET_DATABASE_URL (and FACET_QDRANT_URL / FACET_VECTOR_BACKEND): must "
    "match the server's, or its jobs are not found.\n\n"
    "FACET_DATA_DIR/uploads: files uploaded through the UI are staged there by the server "
    "and read from the same path by the worker: on another host, mount the server's uploads/ "
    "there (shared storage), or such jobs fail (\"... does not exist\").\n\n"
    "FACET_WORKER_CHUNK_DOCS: documents per chunk task (read here, by the worker that plans a "
    "job, not by facet serve).\n\n"
    "FACET_WORKER_PRELOAD: embedders each process loads at start (JSON list).\n\n"
    "FACET_VISIBILITY_TIMEOUT_S: a killed worker's chunk is re-delivered after this; must "
    "exceed the longest chunk.\n\n"
    "More: docs/deploy.md.")


def register(cli: typer.Typer) -> None:
    """Add ``facet worker`` and ``facet run-job`` to the CLI."""

    @cli.command("worker", epilog=WORKER_EPILOG)
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
            "--loglevel", "-l", help="Celery's log level: debug, info, warning, error, critical")] = "info",
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
