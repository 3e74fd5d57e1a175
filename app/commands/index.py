"""``facet index / search / collections / jobs / delete / demo / bench``.

Commands parse, call a service, print.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

from app.cli import handle_errors
from app.errors import InvalidRequestError
from app.settings import get_settings

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


def _context() -> Any:
    from app.services.context import ServiceContext

    return ServiceContext(get_settings())


def _progress_bar() -> tuple[Any, Any]:
    """A tqdm bar on stderr (documents/s and ETA); silent when stderr is not a terminal."""
    from tqdm import tqdm

    bar = tqdm(total=None, unit="doc", file=sys.stderr, dynamic_ncols=True, disable=None)

    def update(p: Any) -> None:
        if bar.total != p.docs_total:
            bar.total = p.docs_total
        bar.update(p.docs_done - bar.n)
        bar.set_postfix(chunks=p.chunks_written, refresh=False)

    return bar, update


def _print_results(response: Any) -> None:
    header = f"{response.collection} · {response.embedder}"
    if response.reranker:
        header += f" · reranked by {response.reranker}"
    if response.instruction:
        header += f"\ninstruction: {response.instruction}"
    typer.echo(header)
    typer.echo(f"query: {response.query}   ({response.timings_ms['total']:.0f} ms)")
    if not response.results:
        typer.echo("  no results (check the filters)")
    for r in response.results:
        snippet = r.snippet
        for a, b in sorted(r.highlights, reverse=True):
            snippet = snippet[:a] + typer.style(snippet[a:b], bold=True) + snippet[b:]
        label = r.title or r.doc_id
        meta = " ".join(f"{k}={v}" for k, v in r.metadata.items())
        line = f"{r.rank:>3}. {r.score:.3f}  {label}  [{r.doc_id} #{r.chunk_no}] {meta}"
        typer.echo(line.rstrip())
        typer.echo(f"       {snippet}")


def register(cli: typer.Typer) -> None:
    """Add the indexing and search commands to the ``facet`` CLI."""
    register_bench(cli)

    @cli.command("index")
    @handle_errors
    def index_cmd(
        source: Annotated[Path, typer.Argument(help="folder, file (txt md html pdf jsonl csv) "
                                                    "or BEIR corpus.jsonl")],
        collection: Annotated[str, typer.Option("--collection", "-c", help="collection name")],
        embedder: Annotated[str | None, typer.Option(
            "--embedder", "-e", help="corpus embedder (default FACET_DEFAULT_EMBEDDER)")] = None,
        sync: Annotated[bool, typer.Option(
            "--sync", help="remove documents of SOURCE that no longer exist")] = False,
        chunk_tokens: Annotated[int | None, typer.Option(
            "--chunk-tokens", help="tokens per chunk (new collections; default FACET_CHUNK_TOKENS)")
        ] = None,
        chunk_overlap: Annotated[int | None, typer.Option(
            "--chunk-overlap", help="overlap in tokens (new collections)")] = None,
        batch_chunks: Annotated[int | None, typer.Option(
            "--batch-chunks", help="chunks per encode/write/commit step")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    ) -> None:
        """Index SOURCE into a collection (only new or changed documents are embedded)."""
        from app.services.indexing import IndexOptions, IndexService

        options = IndexOptions(embedder=embedder, chunk_size=chunk_tokens,
                               chunk_overlap=chunk_overlap, sync=sync, batch_chunks=batch_chunks)
        with _context() as ctx:
            bar, update = _progress_bar()
            try:
                report = IndexService(ctx).index(source, collection, options, progress=update)
            finally:
                bar.close()
        if as_json:
            typer.echo(json.dumps(asdict(report) | {"docs_per_s": report.docs_per_s}, indent=2))
            return
        typer.echo(
            f"job {report.job_id} {report.state}: {report.docs_seen} documents seen, "
            f"{report.docs_indexed} indexed, {report.docs_skipped} unchanged, "
            f"{report.docs_failed} failed, {report.docs_deleted} removed; "
            f"{report.chunks_written} chunks in {report.elapsed_s:.1f}s "
            f"({report.docs_per_s:.1f} docs/s)")
        for _key, message in report.errors[:20]:
            typer.echo(f"  error: {message}", err=True)
        if len(report.errors) > 20:
            more = len(report.errors) - 20
            typer.echo(f"  ... {more} more: facet jobs {report.job_id}", err=True)
        for _key, message in report.warnings[:5]:
            typer.echo(f"  warning: {message}", err=True)

    @cli.command("search")
    @handle_errors
    def search_cmd(
        query: Annotated[str, typer.Argument(help="what to search for")],
        collection: Annotated[str, typer.Option("--collection", "-c")],
        instruction: Annotated[str | None, typer.Option(
            "--instruction", "-i", help="what the query means, e.g. 'find the customer intent'")
        ] = None,
        top_k: Annotated[int, typer.Option("--top-k", "-k")] = 10,
        filters: Annotated[list[str] | None, typer.Option(
            "--filter", "-f", help="key=value (string) or key:=JSON; repeat a key for any-of")
        ] = None,
        rerank: Annotated[str | None, typer.Option(
            "--rerank", help="instruction embedder to rerank the candidates")] = None,
        rerank_depth: Annotated[int | None, typer.Option(
            "--rerank-depth", help="candidates to rerank (default 5 x top-k)")] = None,
        embedder: Annotated[str | None, typer.Option(
            "--embedder", "-e", help="which of the collection's embedders to search")] = None,
        as_json: Annotated[bool, typer.Option("--json")] = False,
    ) -> None:
        """Search a collection with an optional instruction, filters and rerank."""
        from app.services.search import SearchRequest, SearchService, parse_filters

        request = SearchRequest(query=query, collection=collection, instruction=instruction,
                                top_k=top_k, filters=parse_filters(filters or []), rerank=rerank,
                                rerank_depth=rerank_depth, embedder=embedder)
        with _context() as ctx:
            response = SearchService(ctx).search(request)
        if as_json:
            typer.echo(json.dumps(response.to_dict(), indent=2, ensure_ascii=False))
        else:
            _print_results(response)

    @cli.command("collections")
    @handle_errors
    def collections_cmd(
        name: Annotated[str | None, typer.Argument(help="show one collection")] = None,
        as_json: Annotated[bool, typer.Option("--json")] = False,
    ) -> None:
        """List collections (documents, chunks, points, embedders)."""
        from app.services.collections import CollectionService

        with _context() as ctx:
            service = CollectionService(ctx)
            infos = [service.get(name)] if name else service.list_all()
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
        from app.services.collections import CollectionService

        with _context() as ctx:
            service = CollectionService(ctx)
            jobs = [service.job(job_id)] if job_id is not None else service.jobs(collection, limit)
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
        from app.services.collections import CollectionService

        with _context() as ctx:
            service = CollectionService(ctx)
            info = service.get(collection)
            if not yes:
                typer.confirm(f"delete {collection!r} ({info.documents} documents, {info.points} "
                              "points)?", abort=True)
            service.delete(collection)
        typer.echo(f"deleted {collection}: {info.documents} documents, {info.points} points")

    @cli.command("demo")
    @handle_errors
    def demo_cmd(
        embedder: Annotated[str | None, typer.Option("--embedder", "-e")] = None,
        rerank: Annotated[str | None, typer.Option("--rerank")] = None,
    ) -> None:
        """Index the bundled BANKING77 sample and run a few instruction searches."""
        from app.services.indexing import IndexOptions, IndexService
        from app.services.search import SearchRequest, SearchService, parse_filters

        started = time.perf_counter()
        with _context() as ctx:
            typer.echo(f"indexing {SAMPLE_FILE} into {DEMO_COLLECTION!r} "
                       f"(data dir {ctx.settings.data_dir})")
            bar, update = _progress_bar()
            try:
                report = IndexService(ctx).index(SAMPLE_FILE, DEMO_COLLECTION,
                                                 IndexOptions(embedder=embedder), progress=update)
            finally:
                bar.close()
            typer.echo(f"{report.docs_indexed} indexed, {report.docs_skipped} unchanged, "
                       f"{report.docs_failed} failed in {report.elapsed_s:.1f}s\n")
            service = SearchService(ctx)
            for query, instruction, filters in DEMO_SEARCHES:
                response = service.search(SearchRequest(
                    query=query, collection=DEMO_COLLECTION, instruction=instruction, top_k=3,
                    filters=parse_filters(filters), rerank=rerank, embedder=embedder))
                if filters:
                    typer.echo(f"filters: {' '.join(filters)}")
                _print_results(response)
                typer.echo("")
        typer.echo(f"demo done in {time.perf_counter() - started:.1f}s; try: facet search "
                   f"\"lost my card\" -i \"Find the customer's intent\" -c {DEMO_COLLECTION}")


BENCH_QUERIES = ["my card was declined", "how do I get a refund", "exchange rate is wrong",
                 "top up failed", "I forgot my PIN", "where is my new card", "cash withdrawal fee",
                 "transfer is pending", "verify my identity", "close my account",
                 "someone used my card", "change my address", "apple pay not working",
                 "card expired", "send money abroad", "salary not received", "charged twice",
                 "freeze my card", "virtual card", "statement download"]


def register_bench(cli: typer.Typer) -> None:
    """``facet bench``: indexing throughput, store and search latency, SciFact consistency."""

    @cli.command("bench")
    @handle_errors
    def bench_cmd(
        parts: Annotated[str, typer.Option(
            "--parts", help="comma-separated: index, store, search, scifact, gircse-cache")] = "index,store,search",
        source: Annotated[Path | None, typer.Option(
            "--source", help="corpus for the indexing benchmark (default: the first --index-docs "
                             "BANKING77 training texts)")] = None,
        index_docs: Annotated[int, typer.Option(
            "--index-docs", help="BANKING77 texts in the default indexing corpus")] = 2000,
        rounds: Annotated[int, typer.Option(
            "--rounds", help="alternating bare / end-to-end indexing runs (medians reported)")] = 3,
        embedder: Annotated[str, typer.Option("--embedder", "-e")] = "minilm",
        rerank: Annotated[str, typer.Option("--rerank")] = "minilm",
        rerank_depth: Annotated[int, typer.Option(
            "--rerank-depth", help="candidates the reranker re-scores per search")] = 30,
        points: Annotated[int, typer.Option(
            "--points", help="synthetic chunks of the search-latency collection (edge)")
        ] = 100_000,
        local_points: Annotated[int, typer.Option(
            "--local-points", help="points for the edge vs qdrant-client local comparison")
        ] = 20_000,
        scifact_docs: Annotated[int | None, typer.Option(
            "--scifact-docs", help="SciFact corpus subset on both sides: judged docs + facet "
                                   "eval's seeded sample of the others (default: all)")] = None,
        gircse: Annotated[str, typer.Option(
            "--gircse", help="gircse-cache: the GIRCSE checkpoint")] = "gircse",
        gircse_baseline: Annotated[str, typer.Option(
            "--gircse-baseline", help="gircse-cache: embedder the times are divided by")] = "causal-eos",
        texts: Annotated[int, typer.Option(
            "--texts", help="gircse-cache: STS-B training sentences encoded")] = 512,
        soft_tokens: Annotated[int, typer.Option(
            "--soft-tokens", help="gircse-cache: K generated soft tokens")] = 5,
        out: Annotated[Path | None, typer.Option("--out", help="write results as JSON")] = None,
    ) -> None:
        """Measure indexing throughput, store upsert/search, search latency, SciFact nDCG, GIRCSE's KV cache."""
        import tempfile

        from app.services import benchmark as bm
        from app.services.context import EmbedderCache
        from indexer.store import EdgeStore, QdrantClientStore

        settings = get_settings()
        cache = EmbedderCache(settings.device)
        wanted = {p.strip() for p in parts.split(",") if p.strip()}
        unknown = wanted - {"index", "store", "search", "scifact", "gircse-cache"}
        if unknown:
            raise InvalidRequestError(f"unknown --parts {', '.join(sorted(unknown))}; pick from "
                                      "index, store, search, scifact, gircse-cache")
        results: dict[str, Any] = {"load_average_start": bm.load_average(),
                                   "cpus": os.cpu_count()}
        typer.echo(f"load average {results['load_average_start']} on {os.cpu_count()} CPUs")
        if "index" in wanted:
            with tempfile.TemporaryDirectory(prefix="facet-bench-src-") as tmp:
                src = source or bm.banking77_corpus(
                    settings.shared_data_dir / "banking77" / "train.csv",
                    Path(tmp) / "banking77_train.jsonl", index_docs)
                r = bm.bench_indexing(src, embedder, cache, rounds=rounds, log=typer.echo)
            results["index"] = r
            st = r["stage_s_median"]
            typer.echo(
                f"indexing {r['documents']} docs / {r['chunks']} chunks with {r['embedder']}, "
                f"median of {rounds} alternating runs: bare encode {r['bare_encode_s']:.1f}s "
                f"({r['bare_chunks_per_s']:.1f} chunks/s), end-to-end {r['end_to_end_s']:.1f}s "
                f"({r['end_to_end_chunks_per_s']:.1f} chunks/s): ratio {r['ratio']:.3f} "
                f"(CPU-seconds ratio {r['cpu_ratio']:.3f}); median stages "
                + ", ".join(f"{k} {v:.2f}s" for k, v in st.items())
                + f"; non-encode share {r['non_encode_share']:.1%}")
        if "store" in wanted:
            dim = int(cache.get(embedder).dim)
            rows = []
            with tempfile.TemporaryDirectory(prefix="facet-bench-") as tmp:
                for label, make in (("edge", lambda t: EdgeStore(Path(t) / "edge")),
                                    ("local", lambda t: QdrantClientStore(path=Path(t) / "local"))):
                    store = make(tmp)
                    try:
                        r = bm.bench_store(store, local_points, dim)
                    finally:
                        store.close()
                    rows.append(r)
                    typer.echo(_store_line(label, r))
            results["store"] = rows
        if "search" in wanted:
            with tempfile.TemporaryDirectory(prefix="facet-bench-") as tmp:
                built = bm.build_search_bench_collection(Path(tmp), cache, embedder, points)
                typer.echo(_store_line("edge", built))
                r = bm.bench_search_latency(Path(tmp), cache, embedder, rerank, BENCH_QUERIES,
                                            rerank_depth=rerank_depth)
            results["search"] = r | {"points": points, "store": built}
            typer.echo(f"search service on {points} chunks ({len(BENCH_QUERIES)} queries x 3, "
                       f"top 10): no rerank p50/p95 {r['no_rerank']['p50_ms']:.1f}/"
                       f"{r['no_rerank']['p95_ms']:.1f} ms; rerank ({rerank}, depth "
                       f"{r['rerank_depth']}) {r['rerank']['p50_ms']:.1f}/"
                       f"{r['rerank']['p95_ms']:.1f} ms; stage p50 {r['no_rerank']['stage_p50_ms']}"
                       f" / {r['rerank']['stage_p50_ms']}")
        if "scifact" in wanted:
            folder = settings.shared_data_dir / "beir_scifact"
            r = bm.scifact_consistency(folder, embedder, cache, settings, log=typer.echo,
                                       max_docs=scifact_docs)
            results["scifact"] = r
            typer.echo(f"SciFact nDCG@10 ({r['queries']} queries, {r['documents']} docs, "
                       f"{r['chunks']} chunks, {r['docs_with_same_text_as_eval']} with facet "
                       f"eval's text, {r['embedder']}): index -> search service "
                       f"{r['service_ndcg10']:.4f}, facet eval {r['facet_eval_ndcg10']:.4f}, "
                       f"|diff| {r['abs_diff']:.4f}")
        if "gircse-cache" in wanted:
            sentences = bm.stsb_sentences(settings.shared_data_dir, texts)
            r = bm.bench_gircse_cache(gircse, gircse_baseline, sentences, device=settings.device,
                                      rounds=rounds, soft_tokens=soft_tokens, log=typer.echo)
            results["gircse_cache"] = r
            med = r["seconds_median"]
            typer.echo(f"GIRCSE K={r['soft_tokens']} encode of {r['texts']} STS-B sentences on {r['device']} "
                       f"(median of {rounds}): with KV cache {med['cache']:.2f}s, without {med['no_cache']:.2f}s, "
                       f"{r['baseline']} {med['baseline']:.2f}s; ratio to {r['baseline']}: cache "
                       f"{r['ratio_cache_to_baseline']:.2f}x, no cache {r['ratio_no_cache_to_baseline']:.2f}x; "
                       f"cache speed-up {r['speedup_cache']:.2f}x; max |cache - no cache| "
                       f"{r['max_abs_diff_cache_vs_no_cache']:.2e}")
        results["load_average_end"] = bm.load_average()
        typer.echo(f"load average at the end {results['load_average_end']}")
        if out is not None:
            out.write_text(json.dumps(results, indent=2))
            typer.echo(f"wrote {out}")


def _store_line(label: str, r: dict[str, Any]) -> str:
    return (f"store {label} {r['points']} x {r['dim']} ({r['vectors']}): upsert {r['upsert_s']:.1f}s "
            f"({r['upsert_points_per_s']:.0f} pts/s), optimize {r['optimize_s']:.1f}s, search "
            f"p50/p95 {r['search_p50_ms']:.2f}/{r['search_p95_ms']:.2f} ms, filtered "
            f"{r['filtered_p50_ms']:.2f}/{r['filtered_p95_ms']:.2f} ms, recall@10 "
            f"{r['recall_at_10']:.3f} (exact search {r['exact_recall_at_10']:.3f}) vs numpy "
            f"brute force, load {r['load_average']}")
