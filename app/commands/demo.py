"""``facet demo``: index the bundled BANKING77 sample and run a few instruction searches."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from app.commands.common import check_embedder_option, handle_errors, open_facet

SAMPLE_FILE = Path(__file__).resolve().parents[1] / "sample_corpus" / "banking77_sample.jsonl"
DEMO_COLLECTION = "demo-banking77"
DEMO_SEARCHES = [
    ("my card payment was declined at the shop", "Find messages with the same customer intent",
     []),
    ("I want my money back", "Find messages about the customer's problem with a card",
     []),
    ("where is it?", "Find messages asking about the status of a new card", []),
    ("how long does it take", "Find messages about top-ups",
     []),
    ("fees", "Find messages about exchange rates or currency",
     ["intent=exchange_rate", "intent=exchange_charge"]),
]
# An instruction that names what to find rather than the task ("Find messages about top-ups")
# steers minilm only as read whole: its default blends in a quarter of it (chosen on dev sets,
# docs/indexing.md), and the demo's top-up search then found card deliveries and transfers.
# That search is run as minilm reads such instructions (the same vectors: no re-index).
STEERING = {"Find messages about top-ups"}
STEERING_SPECS = {"minilm": "minilm[instruction_weight=1]"}


def register(cli: typer.Typer) -> None:
    """Add ``facet demo`` to the CLI."""

    @cli.command("demo")
    @handle_errors
    def demo_cmd(
        embedder: Annotated[str | None, typer.Option(
            "--embedder", "-e", help="embedder to index and search the sample with, a name or "
                                     "checkpoint path (default FACET_DEFAULT_EMBEDDER)")] = None,
        rerank: Annotated[str | None, typer.Option(
            "--rerank", help="instruction embedder to rerank each search's candidates "
                             "(default: no reranking)")] = None,
    ) -> None:
        """Index the bundled BANKING77 sample and run a few instruction searches."""
        from app.commands.index import newest_job_id, progress_bar, say_how_to_resume
        from app.commands.search import print_results
        from app.services.indexing import IndexOptions, Terminated
        from app.services.search import SearchRequest, SearchService, parse_filters
        from app.text import shell_word

        started = time.perf_counter()
        # The searches' options before the sample is indexed: a typo in --rerank was found
        # after it (a minute with -e instemb), the collection written.
        SearchService.validate(SearchRequest(query=DEMO_SEARCHES[0][0], collection=DEMO_COLLECTION,
                                             rerank=rerank, embedder=embedder))
        # (Before anything is said on stdout: `facet demo -e bogus` printed its "indexing ..."
        # line first, the only line of a failed run there.)
        for option, spec in (("--embedder", embedder), ("--rerank", rerank)):
            if spec:
                check_embedder_option(option, spec)
        with open_facet() as facet:
            typer.echo(f"indexing {SAMPLE_FILE} into {DEMO_COLLECTION!r} "
                       f"(data dir {facet.settings.data_dir})")
            before = newest_job_id(facet, DEMO_COLLECTION)
            bar, update = progress_bar()
            try:
                report = facet.index(SAMPLE_FILE, DEMO_COLLECTION, IndexOptions(embedder=embedder),
                                     progress=update)
            except (KeyboardInterrupt, Terminated) as e:  # as `facet index` says it (exit 130)
                bar.close()
                say_how_to_resume(facet, DEMO_COLLECTION, SAMPLE_FILE, before)
                again = "".join(f" {option} {shell_word(spec)}" for option, spec in
                                (("-e", embedder), ("--rerank", rerank)) if spec)
                typer.echo(f"(or run `facet demo{again}` again: it goes on with what was "
                           "indexed)", err=True)
                raise typer.Exit(Terminated.EXIT_CODE if isinstance(e, Terminated) else 130) \
                    from None
            finally:
                bar.close()
            typer.echo(f"{report.docs_indexed} indexed, {report.docs_skipped} unchanged, "
                       f"{report.docs_failed} failed in {report.elapsed_s:.1f}s\n")
            # The embedder the run indexed with: with no -e, the collection's own (one built
            # with -e instemb before), not the default, whose steering spec it has no vectors of.
            served = embedder or report.embedder or facet.settings.default_embedder
            for query, instruction, filters in DEMO_SEARCHES:
                steer = STEERING_SPECS.get(served) if instruction in STEERING else None
                response = facet.search(SearchRequest(
                    query=query, collection=DEMO_COLLECTION, instruction=instruction, top_k=3,
                    filters=parse_filters(filters), rerank=rerank, embedder=steer or embedder))
                if steer:
                    typer.echo(f"(a steering instruction: read whole, as {steer}; plain {served} "
                               "blends in a quarter of it, docs/indexing.md)")
                if filters:
                    typer.echo(f"filters: {' '.join(filters)}")
                print_results(response)
                typer.echo("")
        typer.echo(f"demo done in {time.perf_counter() - started:.1f}s; try: facet search "
                   f"\"lost my card\" -i \"Find the customer's intent\" -c {DEMO_COLLECTION}")

