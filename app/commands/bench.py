"""``facet bench``: indexing throughput, store and search latency, SciFact consistency, the
GIRCSE KV cache, and the HTTP API's search latency (idle and during an index job) and embeddings
throughput.

It measures; the measuring code is in ``app.services.benchmark``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from app.commands.common import (
    check_embedder_option,
    expand_home,
    handle_errors,
    json_out_path,
    path_value,
    prepare_out_file,
    stdout_may_close,
    write_out_file,
)
from app.errors import DataError, InvalidRequestError, NotFoundError
from app.files import absent, is_stdout
from app.settings import get_settings

BENCH_QUERIES = ["my card was declined", "how do I get a refund", "exchange rate is wrong",
                 "top up failed", "I forgot my PIN", "where is my new card", "cash withdrawal fee",
                 "transfer is pending", "verify my identity", "close my account",
                 "someone used my card", "change my address", "apple pay not working",
                 "card expired", "send money abroad", "salary not received", "charged twice",
                 "freeze my card", "virtual card", "statement download"]


def register(cli: typer.Typer) -> None:
    """``facet bench``: indexing throughput, store and search latency, SciFact consistency."""

    @cli.command("bench")
    @handle_errors
    def bench_cmd(
        parts: Annotated[str, typer.Option(
            "--parts", help="comma-separated: index, store, search, scifact, gircse-cache, "
                            "api-search, api-embed, api-load")] = "index,store,search",
        source: Annotated[Path | None, typer.Option(
            "--source", help="corpus for the indexing benchmark (default: the first --index-docs "
                             "BANKING77 training texts)", callback=expand_home, parser=path_value)] = None,
        index_docs: Annotated[int, typer.Option(
            "--index-docs", min=1, help="BANKING77 texts in the default indexing corpus")] = 2000,
        rounds: Annotated[int, typer.Option(
            "--rounds", min=1, help="rounds of the index, gircse-cache, api-search and api-embed parts "
                                    "(alternating bare / measured runs; medians reported)")] = 3,
        embedder: Annotated[str, typer.Option(
            "--embedder", "-e", help="embedder (name or checkpoint path) of every part but "
                                     "gircse-cache: it indexes, embeds and searches (store: its "
                                     "vector size)")] = "minilm",
        rerank: Annotated[str, typer.Option(
            "--rerank", help="search: the instruction embedder whose reranking is timed "
                             "against no reranking")] = "minilm",
        rerank_depth: Annotated[int, typer.Option(
            "--rerank-depth", min=1, help="candidates the reranker re-scores per search")] = 30,
        points: Annotated[int, typer.Option(
            "--points", min=1, help="synthetic chunks of the search-latency collection (edge)")
        ] = 100_000,
        local_points: Annotated[int, typer.Option(
            "--local-points", min=1, help="points for the edge vs qdrant-client local comparison")
        ] = 20_000,
        scifact_docs: Annotated[int | None, typer.Option(
            "--scifact-docs", min=1, help="SciFact corpus subset on both sides: judged docs + facet "
                                   "eval's seeded sample of the others (default: all)")] = None,
        gircse: Annotated[str, typer.Option(
            "--gircse", help="gircse-cache: the GIRCSE checkpoint")] = "gircse",
        gircse_baseline: Annotated[str, typer.Option(
            "--gircse-baseline", help="gircse-cache: embedder the times are divided by")] = "causal-eos",
        texts: Annotated[int, typer.Option(
            "--texts", min=1, help="gircse-cache: STS-B training sentences encoded")] = 512,
        soft_tokens: Annotated[int, typer.Option(
            "--soft-tokens", min=1, help="gircse-cache: K generated soft tokens")] = 5,
        bench_dir: Annotated[Path | None, typer.Option(
            "--bench-dir", help="api-search: keep the --points collection here and reuse it "
                                "(default: a temporary folder); api-load: its files and data "
                                "folder go in a temporary folder in it", callback=expand_home,
            parser=path_value)] = None,
        clients: Annotated[int, typer.Option(
            "--clients", min=1, help="api-embed: concurrent clients")] = 8,
        api_texts: Annotated[int, typer.Option(
            "--api-texts", min=1, help="api-embed: BANKING77 texts sent per run")] = 512,
        texts_per_request: Annotated[int, typer.Option(
            "--texts-per-request", min=1, help="api-embed: texts in each request")] = 1,
        load_docs: Annotated[int, typer.Option(
            "--load-docs", min=1, help="api-load: small text files the index job reads")] = 1500,
        load_clients: Annotated[int, typer.Option(
            "--load-clients", min=1, help="api-load: concurrent search clients")] = 4,
        load_idle_s: Annotated[float, typer.Option(
            "--load-idle-s", min=0.1, help="api-load: seconds the clients search the idle "
                                           "server")] = 5.0,
        threads: Annotated[int | None, typer.Option(
            "--threads", min=1, help="api-*: torch threads of the server's model thread and of the "
                              "bare runs (default FACET_QUERY_THREADS)")] = None,
        out: Annotated[Path | None, typer.Option(
            "--out", help="write results as JSON ('-': standard output; the lines said while "
                          "measuring then go to stderr)", parser=json_out_path, callback=expand_home)] = None,
    ) -> None:
        """Measure indexing throughput, store upsert/search, search latency, SciFact nDCG, GIRCSE's KV cache."""
        import tempfile

        from app.services import benchmark as bm
        from app.services.context import EmbedderCache
        from indexer.store import EdgeStore, QdrantClientStore

        settings = get_settings()
        cache = EmbedderCache(settings.device)
        wanted = {p.strip() for p in parts.split(",") if p.strip()}
        known = {"index", "store", "search", "scifact", "gircse-cache", "api-search", "api-embed",
                 "api-load"}
        unknown = wanted - known
        if unknown:
            raise InvalidRequestError(f"unknown --parts {', '.join(sorted(unknown))}; pick from "
                                      f"{', '.join(sorted(known))}")
        if not wanted:  # it measured nothing and wrote a JSON of load averages, exit 0
            raise InvalidRequestError(f"--parts names no part; pick from {', '.join(sorted(known))}")
        if source is not None and not source.exists():
            raise NotFoundError(f"--source {source} {absent(source)}")
        if source is not None and "index" in wanted:
            _check_source(source)
        _check_part_data(settings.shared_data_dir, wanted, source)
        # Every embedder a part loads, before any part runs: a typo in --rerank was found when
        # the search part started, and the index and store figures already measured were lost.
        for spec, option in _embedders_used(wanted, embedder, rerank, gircse,
                                            gircse_baseline).items():
            check_embedder_option(option, spec)
        if "gircse-cache" in wanted:
            _check_gircse_part(gircse, soft_tokens)
        if out is not None:  # before the work, not after it (the figures were lost)
            prepare_out_file(out)
        results: dict[str, Any] = {"load_average_start": bm.load_average(),
                                   "cpus": os.cpu_count()}
        # `--out -`: stdout carries the JSON alone, so the lines said while measuring go to
        # stderr (they were mixed into the JSON a script read).
        # `--out FILE | head -1`: the measuring goes on to the file, not ended by the closed
        # stdout at its second line (exit 0, no file; ``stdout_may_close``).
        with contextlib.redirect_stdout(sys.stderr) if out is not None and is_stdout(out) \
                else stdout_may_close() if out is not None else contextlib.nullcontext():
            typer.echo(f"load average {results['load_average_start']} on {os.cpu_count()} CPUs")
            if "index" in wanted:
                with tempfile.TemporaryDirectory(prefix="facet-bench-src-") as tmp:
                    src = source or bm.banking77_corpus(
                        settings.shared_data_dir / "banking77" / "train.csv",
                        Path(tmp) / "banking77_train.jsonl", index_docs)
                    r = bm.bench_indexing(src, embedder, cache, rounds=rounds, log=typer.echo)
                if not r["chunks"]:  # "0 docs ... ratio 0.000 ... non-encode share 100.0%"
                    raise DataError(f"--source {src}: no text to index in it ({r['documents']} "
                                    "documents, 0 chunks); nothing to measure")
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
                           f"{r['rerank']['p95_ms']:.1f} ms; stage p50 without rerank "
                           f"{_stages(r['no_rerank']['stage_p50_ms'])}; with rerank "
                           f"{_stages(r['rerank']['stage_p50_ms'])}; the same search again "
                           f"(what it encoded kept): no rerank p50/p95 "
                           f"{r['repeated_query']['p50_ms']:.1f}/{r['repeated_query']['p95_ms']:.1f} "
                           f"ms, rerank {r['repeated_query_rerank']['p50_ms']:.1f}/"
                           f"{r['repeated_query_rerank']['p95_ms']:.1f} ms, stage p50 without rerank "
                           f"{_stages(r['repeated_query']['stage_p50_ms'])}; with rerank "
                           f"{_stages(r['repeated_query_rerank']['stage_p50_ms'])}")
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
            if wanted & {"api-search", "api-embed", "api-load"}:
                results.update(_api_parts(wanted, settings, cache, embedder, points, bench_dir,
                                          clients, api_texts, texts_per_request,
                                          threads or settings.query_threads, rounds,
                                          (load_docs, load_clients, load_idle_s)))
            results["load_average_end"] = bm.load_average()
            typer.echo(f"load average at the end {results['load_average_end']}")
        if out is not None:
            write_out_file(out, json.dumps(results, indent=2))
            if not is_stdout(out):
                typer.echo(f"wrote {out}")


def _check_part_data(root: Path, wanted: set[str], source: Path | None) -> None:
    """The dataset files the parts asked for read, there before any part runs: a missing one was
    found when its part began, after the others' figures (BANKING77, STS-B: a 50-line
    FileNotFoundError traceback; the default data folder is ../shared/data from where the
    command runs).

    Raises:
        NotFoundError: naming the file and the parts that read it.
    """
    needs: dict[Path, list[str]] = {root / "banking77" / "train.csv": [p for p in ("index", "api-embed") if p in wanted
                                                and (p != "index" or source is None)],
             root / "beir_scifact" / "corpus.jsonl": [p for p in ("scifact",) if p in wanted],
             root / "stsb_en" / "stsb-en-train.csv": [p for p in ("gircse-cache",) if p in wanted]}
    for path, parts in needs.items():
        if parts and not path.is_file():
            raise NotFoundError(f"{path} not found, which the {' and '.join(parts)} part(s) read: set "
                                "FACET_SHARED_DATA_DIR to the datasets' folder"
                                + (", or give the index part --source FOLDER" if "index" in parts else ""))


def _check_source(source: Path) -> None:
    """Refuse an indexing source with no file ``facet index`` reads (an empty folder was measured
    as "0 docs ... ratio 0.000 ... non-encode share 100.0%")."""
    from app.errors import domain_errors
    from indexer.parsing import discover_files, skip_reason, supported_types

    with domain_errors():
        files, skipped = discover_files(source)
    if not files:
        left_out = (f" ({len(skipped)} left out, e.g. {skipped[0].name}: {skip_reason(skipped[0])})"
                    if skipped else "")
        raise InvalidRequestError(f"--source {source} holds no file to index{left_out}; give a "
                                  f"folder or file of a supported type: {supported_types()}")


def _check_gircse_part(gircse: str, soft_tokens: int) -> None:
    """What the gircse-cache part refused only once it started, the figures of the parts before
    it lost with a traceback: a ``--gircse`` of another method (``causal-eos``), and
    ``--soft-tokens`` past GIRCSE's limit."""
    from embedders.methods.gircse.config import MAX_SOFT_TOKENS
    from embedders.registry import embedder_method

    method = embedder_method(gircse)
    if method is not None and method != "gircse":
        article = "an" if method[:1] in "aeiou" else "a"  # ("a encoder-mean embedder")
        raise InvalidRequestError(f"--gircse {gircse}: {article} {method} embedder, not a GIRCSE one; "
                                  "give a GIRCSE checkpoint (gircse, the default)")
    if soft_tokens > MAX_SOFT_TOKENS:
        raise InvalidRequestError(f"--soft-tokens must be from 1 to {MAX_SOFT_TOKENS}, not "
                                  f"{soft_tokens}")


def _embedders_used(wanted: set[str], embedder: str, rerank: str, gircse: str,
                    gircse_baseline: str) -> dict[str, str]:
    """The embedders the ``wanted`` parts load, each once, in the order given, with the option
    that names each (its first)."""
    used: list[tuple[str, str]] = []
    if wanted - {"gircse-cache"}:
        used.append(("--embedder", embedder))
    if "search" in wanted:
        used.append(("--rerank", rerank))
    if "gircse-cache" in wanted:
        used += [("--gircse", gircse), ("--gircse-baseline", gircse_baseline)]
    named: dict[str, str] = {}
    for option, spec in used:
        named.setdefault(spec, option)
    return named


def _stages(stages_ms: dict[str, float]) -> str:
    """Stage timings as text: ``encode_query 103.12 ms, search 2.03 ms`` (the dict itself
    printed with 14 digits and no unit)."""
    return ", ".join(f"{name} {ms:.2f} ms" for name, ms in stages_ms.items())


def _store_line(label: str, r: dict[str, Any]) -> str:
    return (f"store {label} {r['points']} x {r['dim']} ({r['vectors']}): upsert {r['upsert_s']:.1f}s "
            f"({r['upsert_points_per_s']:.0f} pts/s), optimize {r['optimize_s']:.1f}s, search "
            f"p50/p95 {r['search_p50_ms']:.2f}/{r['search_p95_ms']:.2f} ms, filtered "
            f"{r['filtered_p50_ms']:.2f}/{r['filtered_p95_ms']:.2f} ms, recall@10 "
            f"{r['recall_at_10']:.3f} (exact search {r['exact_recall_at_10']:.3f}) vs numpy "
            f"brute force, load {r['load_average']}")


def _api_parts(wanted: set[str], settings: Any, cache: Any, embedder: str, points: int,
               bench_dir: Path | None, clients: int, api_texts: int, texts_per_request: int,
               threads: int, rounds: int,
               load: tuple[int, int, float] = (1500, 4, 5.0)) -> dict[str, Any]:
    import csv
    import tempfile

    from app.services import api_bench as ab
    from app.services import benchmark as bm

    results: dict[str, Any] = {}
    instruction = "Find the customer's intent"
    with tempfile.TemporaryDirectory(prefix="facet-bench-api-") as tmp:
        root = bench_dir or Path(tmp)
        if "api-search" in wanted:
            data = root / f"search-{points}"
            if bm.search_bench_built(data, embedder):
                typer.echo(f"reusing the {points}-chunk collection in {data}")
            else:
                # A build interrupted part-way (its facet.db made, its store not finished) was
                # taken for a finished one, and every later run failed on it; one of another
                # embedder was searched with this one's queries.
                if data.exists() and any(data.iterdir()):
                    typer.echo(f"{data} holds an unfinished build or another embedder's "
                               "collection: building it again")
                    shutil.rmtree(data)
                data.mkdir(parents=True, exist_ok=True)
                built = bm.build_search_bench_collection(data, cache, embedder, points)
                typer.echo(_store_line("edge", built))
            ref = {label: ab.inprocess_search_latency(data, "bench", cache, embedder,
                                                      BENCH_QUERIES, instruction=instruction,
                                                      threads=t)
                   for label, t in (("default_threads", None), ("query_threads", threads))}
            for r in ref.values():
                typer.echo(f"in-process Facet.search, calling thread, {r['threads']} torch "
                           f"thread(s): p50/p95 {r['p50_ms']:.1f}/{r['p95_ms']:.1f} ms; stage "
                           f"p50 {_stages(r['stage_p50_ms'])}")
            r = ab.api_search_latency(data, "bench", cache, embedder, BENCH_QUERIES,
                                      instruction=instruction, rounds=rounds, threads=threads,
                                      log=typer.echo)
            results["api_search"] = r | {"points": points, "in_process": ref}
            typer.echo(
                f"API POST /search on {points} chunks ({r['searches']} warm searches, top "
                f"{r['top_k']}, {embedder}, {threads} model thread(s)): p50/p95 "
                f"{r['api_p50_ms']:.1f}/{r['api_p95_ms']:.1f} ms; bare query encode p50/p95 "
                f"{r['encode_p50_ms']:.1f}/{r['encode_p95_ms']:.1f} ms; p50 - encode = "
                f"{r['p50_minus_encode_ms']:.1f} ms (target <= 20), ratio "
                f"{r['p50_ratio_to_encode']:.2f}; server stage p50 {_stages(r['server_stage_p50_ms'])}; "
                f"HTTP + client p50 {r['http_and_client_p50_ms']:.1f} ms")
        if "api-embed" in wanted:
            path = settings.shared_data_dir / "banking77" / "train.csv"
            with path.open(newline="") as fh:
                texts = [row["text"] for _, row in zip(range(api_texts), csv.DictReader(fh),
                                                       strict=False)]
            r = ab.api_embeddings_throughput(root / "embed", cache, embedder, texts,
                                             texts_per_request=texts_per_request,
                                             clients=clients, threads=threads, rounds=rounds,
                                             log=typer.echo)
            results["api_embed"] = r
            for label in ("batching", "no_batching"):
                x = r[label]
                typer.echo(
                    f"/v1/embeddings, {r['requests']} requests of {texts_per_request} "
                    f"text(s) shared by {clients} clients ({embedder}, {threads} model thread(s)), "
                    f"{label}: {x['api_texts_per_s']:.1f} texts/s vs bare encode loop "
                    f"{x['bare_loop_texts_per_s']:.1f} texts/s: ratio {x['ratio']:.2f} "
                    f"({x['mean_texts_per_batch']:.1f} texts per server batch, largest "
                    f"{x['largest_batch']})")
            typer.echo(f"bare encode of all {r['texts']} texts in batches of 32: "
                       f"{r['bare_batched_texts_per_s']:.1f} texts/s")
        if "api-load" in wanted:
            results["api_load"] = _api_load(root, settings, embedder, threads, *load)
    return results


def _api_load(root: Path, settings: Any, embedder: str, threads: int, docs: int, clients: int,
              idle_s: float) -> dict[str, Any]:
    """The api-load part: search latency idle and during an index job of ``docs`` small files,
    and the job's docs/s with ``clients`` searching and alone; printed and returned."""
    import tempfile

    from app.services import api_bench as ab

    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="facet-bench-load-", dir=root) as tmp:
        source = ab.write_load_corpus(Path(tmp) / "files", docs)
        typer.echo(f"api-load: {docs} small text files, {clients} search client(s), "
                   f"{embedder}, {threads} model thread(s), FACET_BULK_PIECE_MS "
                   f"{settings.bulk_piece_ms:g}")
        r = ab.api_search_under_load(Path(tmp) / "data", source, embedder, BENCH_QUERIES,
                                     clients=clients, idle_s=idle_s, threads=threads,
                                     log=typer.echo)
    r["bulk_piece_ms"] = settings.bulk_piece_ms

    def ms(x: float | None) -> str:
        return "-" if x is None else f"{x:.1f}"

    alone, idle, busy = r["job_alone"], r["idle"], r["during_job"]
    job = busy["job"]
    typer.echo(f"API search under load ({clients} client(s), top {r['top_k']}): idle "
               f"p50/p95/max {ms(idle['p50_ms'])}/{ms(idle['p95_ms'])}/{ms(idle['max_ms'])} ms "
               f"({idle['searches_per_s']:.1f} searches/s, {idle['refused_429']} x 429); during "
               f"the index job of {r['docs']} docs p50/p95/max {ms(busy['p50_ms'])}/"
               f"{ms(busy['p95_ms'])}/{ms(busy['max_ms'])} ms ({busy['searches']} searches, "
               f"{busy['searches_per_s']:.1f}/s, {busy['refused_429']} x 429)")
    ratio = r["job_docs_per_s_ratio"]
    typer.echo(f"index job of {r['docs']} docs: {job['docs_per_s']:.1f} docs/s with the "
               f"clients searching ({job['docs_indexed']} indexed, {job['state']}, "
               f"{job['seconds']:.1f}s), {alone['docs_per_s']:.1f} docs/s alone "
               f"({alone['docs_indexed']} indexed, {alone['state']}, {alone['seconds']:.1f}s): "
               f"ratio {'-' if ratio is None else f'{ratio:.2f}'}")
    return r
