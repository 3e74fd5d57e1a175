"""``facet collections``, ``facet jobs`` and ``facet delete``."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated

import typer

from app.cli import handle_errors, open_facet


def register(cli: typer.Typer) -> None:
    """Add the collection and job commands to the CLI."""

    @cli.command("collections")
    @handle_errors
    def collections_cmd(
        name: Annotated[str | None, typer.Argument(help="show one collection")] = None,
        as_json: Annotated[bool, typer.Option("--json")] = False,
    ) -> None:
        """List collections (documents, chunks, points, embedders)."""
        with open_facet() as facet:
            infos = [facet.collection(name)] if name else facet.collections()
        if as_json:
            typer.echo(json.dumps([asdict(i) for i in infos], indent=2))
            return
        if not infos:
            typer.echo("no collections yet; create one with `facet index SOURCE --collection NAME`")
        for i in infos:
            emb = ", ".join(f"{k} ({v}-d)" for k, v in i.embedders.items())
            typer.echo(f"{i.name}: {i.documents_indexed} documents indexed, {i.documents_failed} "
                       f"failed, {i.chunks} chunks, {i.points} points · {emb} · {i.backend} · "
                       f"chunks {i.chunk_size}/{i.chunk_overlap} tokens")

    @cli.command("jobs")
    @handle_errors
    def jobs_cmd(
        job_id: Annotated[int | None, typer.Argument(help="show one job with its errors")] = None,
        collection: Annotated[str | None, typer.Option("--collection", "-c")] = None,
        limit: Annotated[int, typer.Option("--limit")] = 20,
        as_json: Annotated[bool, typer.Option("--json")] = False,
    ) -> None:
        """List index jobs, or show one with its per-document errors."""
        with open_facet() as facet:
            jobs = [facet.job(job_id)] if job_id is not None else facet.jobs(collection, limit)
        if as_json:
            typer.echo(json.dumps([asdict(j) for j in jobs], indent=2))
            return
        if not jobs:
            typer.echo("no index jobs yet")
        for j in jobs:
            resumed = f" (resumes job {j.resumed_from})" if j.resumed_from else ""
            typer.echo(f"job {j.id} {j.state}{resumed}: {j.collection} <- {j.source} "
                       f"[{j.embedder}] seen {j.docs_seen}, indexed {j.docs_indexed}, "
                       f"unchanged {j.docs_skipped}, failed {j.docs_failed}, removed "
                       f"{j.docs_deleted}, chunks {j.chunks_written} · started {j.started_at}")
            if job_id is not None:
                typer.echo(f"  timings (s): {j.timings}")
                if j.message:
                    typer.echo(f"  {j.message}")
                for e in j.errors:
                    typer.echo(f"  {e['kind']}: {e['message']}")

    @cli.command("delete")
    @handle_errors
    def delete_cmd(
        collection: Annotated[str, typer.Argument(help="collection to delete")],
        yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask")] = False,
    ) -> None:
        """Delete a collection: its points and all its metadata."""
        with open_facet() as facet:
            info = facet.collection(collection)
            if not yes:
                typer.confirm(f"delete {collection!r} ({info.documents} documents, {info.points} "
                              "points)?", abort=True)
            facet.delete_collection(collection)
        typer.echo(f"deleted {collection}: {info.documents} documents, {info.points} points")
