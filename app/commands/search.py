"""``facet search``: one instruction-aware search, printed with highlighted snippets."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from typing import Annotated, Any

import typer

from app.commands.common import argument_text, handle_errors, open_facet, shorten
from app.services.search import SearchResponse, why_no_results
from app.text import plural, printable, printable_json

# The characters of a result's title a result line shows (metadata values: ``META_WIDTH``).
TITLE_SHOWN = 200


def spec_label(name: str, spec: str | None) -> str:
    """How the output names an embedder that ran: its spec where that says more than the name
    (``minilm[instruction_weight=1]``, the name then the checkpoint directory it was loaded from),
    else the name. The header said "minilm" for a query read at ``minilm[instruction_weight=1]``."""
    if spec is None or spec == name:
        return name
    return spec if spec.startswith(f"{name}[") else f"{name} ({spec})"


def colours_wanted() -> bool:
    """Whether the output may carry ANSI styles (the query terms in bold): not where NO_COLOR is
    set (no-color.org: any value but an empty one) or TERM is ``dumb``. Piped, click strips them
    either way; on a terminal they were sent regardless."""
    return not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def query_from_stdin() -> str:
    """The query ``facet search -`` reads: all of standard input as UTF-8, a BOM before it and
    the blanks around it (a trailing newline or CRLF) removed; "" where it is empty or closed
    (the query's own "empty" error then says so). ``-`` was searched for as the text "-".

    Bytes that are not UTF-8 are refused as `facet cluster -` refuses them: "standard input is
    not UTF-8 text", exit 4. Until 2026-11-30 (seventh session) Python's ``surrogateescape``
    for stdin let them through as lone surrogates, and the query was refused as holding "an
    unpaired surrogate ... send the text as valid UTF-8 / paired \\u escapes"; until
    2026-12-01 stdin was read in the locale's encoding, so under an ASCII locale (LC_ALL=C with
    PYTHONUTF8=0) "café" was "not ascii text" while `facet cluster -` read it.

    Raises:
        DataError: standard input is not UTF-8 text.
    """
    from app.commands.common import read_capped
    from app.errors import DataError, FacetError
    from app.services.search import MAX_QUERY_CHARS

    stdin = sys.stdin
    try:
        buffer = getattr(stdin, "buffer", None)
        # At most what the longest query takes in UTF-8, and room for blanks around it: an
        # endless input (</dev/zero) was read until the out-of-memory killer ended it.
        data = (b"" if stdin is None else
                read_capped(buffer, 4 * MAX_QUERY_CHARS + 2**16, "standard input",
                            f"a query takes at most {MAX_QUERY_CHARS:,} characters", param="query")
                if buffer is not None else stdin.read().encode("utf-8", "surrogateescape"))
    except FacetError:  # (over the cap: a ValueError too, it read as an empty query)
        raise
    except (OSError, ValueError):  # a descriptor closed under it, or not readable
        data = b""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"standard input is not UTF-8 text (byte {e.start}); send the query as "
                        "UTF-8", param="query") from None
    return text.lstrip("\ufeff").strip()


# How many characters of a metadata value the text output shows (--json gives it whole).
META_WIDTH = 120


def meta_text(value: Any, width: int = META_WIDTH) -> str:
    """A metadata value as the text output shows it: a string as it is, anything else as JSON
    (a list ``["card", "fee"]``, a boolean ``true``: they were Python's ``['card']`` and
    ``True``), cut to ``width`` characters with its full length said ("… (2,000,000
    characters)"): a 2 MB field was printed whole under every result. (A key is cut so too.)"""
    return shorten(value if isinstance(value, str)
                   else json.dumps(value, ensure_ascii=False, default=str), width)


def print_results(response: SearchResponse, filtered: Mapping[str, Any] | bool = False) -> None:
    """Results as a ranked list with the query terms in bold; ``filtered``: the search had
    filters (what an empty list then points at)."""
    # Everything a document, a file name or the user gave goes through printable(): a control
    # character in it would reach the terminal (clear the screen, set its title, write the
    # clipboard); piped, click strips colours but not those.
    bold = colours_wanted()
    embedder = printable(spec_label(response.embedder, response.embedder_spec))
    header = f"{printable(response.collection)} · {embedder}"
    if response.mode != "dense":
        header += f" · {response.mode}"
    if response.reranker:
        header += f" · reranked by {printable(spec_label(response.reranker, response.reranker_spec))}"
    if response.instruction:
        header += f"\ninstruction: {printable(shorten(response.instruction))}"
        if not response.instruction_read:  # why: a word search, or an embedder that reads none
            header += (" (not read: lexical search matches the words only)" if response.words_alone
                       else " (not read: see the note)")
    typer.echo(header)
    loads = [(response.timings_ms.get("load_model"), embedder),
             (response.timings_ms.get("load_reranker"),
              printable(spec_label(response.reranker or "", response.reranker_spec)))]
    loaded = [(ms, what) for ms, what in loads if ms]
    took = f"{response.timings_ms['total'] - sum(ms for ms, _ in loaded):.0f} ms"
    if loaded:
        took += ", after " + " and ".join(f"{ms / 1000:.1f} s loading {what}" for ms, what in loaded)
    typer.echo(f"query: {printable(shorten(response.query))}   ({took})")
    if not response.results:
        typer.echo(f"  no results ({printable(why_no_results(response, filtered))})")
    elif response.note:  # what the results cannot show (with none, the line above says it)
        typer.echo(f"  note: {printable(response.note)}")
    for r in response.results:
        # Each piece escaped on its own: the highlights are offsets into the raw snippet.
        pieces, at = [], 0
        for a, b in sorted(r.highlights):
            term = printable(r.snippet[a:b], body=True)
            pieces += [printable(r.snippet[at:a], body=True),
                       typer.style(term, bold=True) if bold else term]
            at = b
        snippet = "".join(pieces) + printable(r.snippet[at:], body=True)
        # Cut: a Markdown file whose first heading ran 389 KB printed one 389,000-character line
        # (the huge-inputs review of the seventh session of 2026-12-06); --json has it whole.
        label = printable(shorten(r.title, TITLE_SHOWN) if r.title else r.doc_id)
        meta = " ".join(printable(f"{meta_text(k)}={meta_text(v)}") for k, v in r.metadata.items())
        chunks = f"#{r.chunk_no}" + (f" (+{plural(len(r.more_chunks), 'more chunk', 'more chunks')})"
                                     if r.more_chunks else "")
        line = f"{r.rank:>3}. {r.score:.3f}  {label}  [{printable(r.doc_id)} {chunks}] {meta}"
        typer.echo(line.rstrip())
        # Every line of a snippet indented (a table's or a PDF's lines ran down the margin).
        typer.echo("\n".join(f"       {line}" for line in snippet.splitlines() or [""]))


def register(cli: typer.Typer) -> None:
    """Add ``facet search`` to the CLI."""

    @cli.command("search")
    @handle_errors
    def search_cmd(
        query: Annotated[str, typer.Argument(
            help="what to search for; - reads it from standard input")],
        collection: Annotated[str, typer.Option("--collection", "-c", help="collection to search")],
        instruction: Annotated[str | None, typer.Option(
            "--instruction", "-i", help="what the query means, e.g. 'find the customer intent'")
        ] = None,
        top_k: Annotated[int, typer.Option("--top-k", "-k", help="results to return")] = 10,
        filters: Annotated[list[str] | None, typer.Option(
            "--filter", "-f", help="key=value (string) or key:=JSON; repeat a key for any-of")
        ] = None,
        rerank: Annotated[str | None, typer.Option(
            "--rerank", help="instruction embedder to rerank the candidates")] = None,
        rerank_depth: Annotated[int | None, typer.Option(
            "--rerank-depth", help="candidates to rerank (default 5 x top-k)")] = None,
        embedder: Annotated[str | None, typer.Option(
            "--embedder", "-e", help="which of the collection's embedders to search")] = None,
        group: Annotated[bool, typer.Option(
            "--group-by-document/--per-chunk",
            help="one result per document (its best chunk; the default, as POST /search): "
                 "top-k documents; --per-chunk: top-k chunks, several of one document "
                 "possible")] = True,
        mode: Annotated[str, typer.Option(
            "--mode", "-m", help="auto (hybrid without an instruction where the collection keeps "
                                 "term vectors, else dense), dense (the embedder), lexical (BM25 "
                                 "over the words) or hybrid (both, fused by rank; "
                                 "docs/indexing.md)")] = "auto",
        score_threshold: Annotated[float | None, typer.Option(
            "--score-threshold", help="drop results scoring below this: the cosine, or the "
                                      "rerank score when reranked (auto then searches dense: "
                                      "fused scores are on another scale)")] = None,
        exact: Annotated[bool, typer.Option(
            "--exact", help="compare the query with every chunk (brute force) instead of the "
                            "approximate HNSW index: slower, nothing missed")] = False,
        as_json: Annotated[bool, typer.Option(
            "--json", help="machine-readable output (as POST /search answers)")] = False,
    ) -> None:
        """Search a collection with an optional instruction, filters and rerank."""
        from app.services.search import SearchRequest, parse_filters

        if query == "-":
            query = query_from_stdin()
        query = argument_text(query, "the query", "query") or ""
        instruction = argument_text(instruction, "--instruction", "instruction")
        filters = [argument_text(f, "--filter", "filters") or "" for f in filters or []]
        request = SearchRequest(query=query, collection=collection, instruction=instruction,
                                top_k=top_k, filters=parse_filters(filters or []), rerank=rerank,
                                rerank_depth=rerank_depth, embedder=embedder,
                                group_by_document=group, mode=mode, exact=exact,
                                score_threshold=score_threshold)
        with open_facet() as facet:
            response = facet.search(request)
        if as_json:
            from indexer.store import point_id

            payload = response.to_dict()
            # Each result's point id, as the HTTP API and the LangChain adapter give it (the
            # chunk's id in the vector store): the CLI's JSON left it out.
            payload["results"] = [{"id": point_id(r["doc_id"], r["chunk_no"]), **r}
                                  for r in payload["results"]]
            typer.echo(printable_json(payload))
        else:
            print_results(response, filtered=request.filters)
