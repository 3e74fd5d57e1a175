"""``facet cluster``: cluster texts under an instruction and explain each cluster.

Texts come from a file (one per line in .txt, a ``text`` field or a JSON string per line in
.jsonl, a JSON list of strings or a GoalEx ``data.json`` with a ``texts`` list, or the ``text``
column of a .csv: the same reader as the UI's upload, ``app.services.clustering.read_text_file``)
or from a collection (``--collection``, with ``--filter``). The work is the cluster service's
(``app.services.clustering``): the instruction embedder embeds the texts under ``--instruction``,
k-means groups them, and an explainer (``--explain``: an InBedder checkpoint, or an
embedder registered as one) answers the same instruction about
every text; each cluster is described by the most distinctive words of its members' answers, its most
shared answer and its most central members.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from app.commands.common import handle_errors, open_facet, prepare_out_file, write_out_file
from app.errors import InvalidRequestError, NotFoundError
from app.text import plural, printable

DEFAULT_K = 8


def read_texts(path: Path, limit: int | None = None) -> list[str]:
    """Texts from a .txt, .json, .jsonl or .csv file (``read_text_file``), the first ``limit``
    of them (None or 0: all).

    Raises:
        NotFoundError: no such file.
        DataError: a file the reader refuses (type, encoding, shape; the line is named).
        InvalidRequestError: a negative limit, or fewer than 2 texts.
    """
    from app.services.clustering import limit_option, read_text_file

    limit = limit_option(limit)
    if path.is_dir():
        raise InvalidRequestError(f"{path} is a folder; give a file of texts, or index the folder "
                                  "and cluster it with --collection")
    if not path.is_file():
        raise NotFoundError(f"{path} does not exist")
    texts = read_text_file(path)
    texts = texts[:limit] if limit else texts
    if len(texts) < 2:
        raise InvalidRequestError(f"{path} holds {plural(len(texts), 'text')}"
                                  f"{f' (--limit {limit})' if limit else ''}; clustering needs at least 2")
    return texts


def progress_bar() -> tuple[Any, Callable[[float, str], None]]:
    """A percentage bar on stderr naming the stage ("inbedder answering 128/200 texts"); on a
    terminal it redraws, otherwise each stage is one line (a long clustering is never silent)."""
    from tqdm import tqdm

    tty = sys.stderr.isatty()
    bar = tqdm(total=100, unit="%", file=sys.stderr, dynamic_ncols=True, disable=not tty,
               bar_format="{desc} {percentage:3.0f}%|{bar}| {elapsed}<{remaining}")
    last = [""]

    def update(fraction: float, stage: str) -> None:
        if not tty:
            if stage != last[0]:
                typer.echo(f"  {fraction:4.0%} {stage}", err=True)
                last[0] = stage
            return
        bar.set_description(stage, refresh=False)
        bar.update(round(100 * fraction) - bar.n)

    return bar, update


def register(cli: typer.Typer) -> None:
    """Add ``facet cluster`` to the CLI."""

    @cli.command("cluster")
    @handle_errors
    def cluster_cmd(
        instruction: Annotated[str, typer.Option("--instruction", "-i", help="the aspect to group by")],
        source: Annotated[Path | None, typer.Argument(
            help=".txt (one text per line), .json (list or GoalEx data.json), .jsonl (text field), "
                 ".csv (text column); or use --collection")
        ] = None,
        collection: Annotated[str | None, typer.Option(
            "--collection", "-c", help="cluster this collection's chunks instead of a file")] = None,
        filters: Annotated[list[str] | None, typer.Option(
            "--filter", "-f", help="with --collection: key=value or key:=JSON")] = None,
        k: Annotated[int, typer.Option("--k", help="number of clusters; 0 chooses it by silhouette")] = DEFAULT_K,
        embedder: Annotated[str, typer.Option("--embedder", "-e", help="instruction embedder (name or path)")]
            = "inbedder",
        explain: Annotated[str | None, typer.Option(
            "--explain", help="a model that generates answers (an InBedder checkpoint, or an "
                         "embedder registered as an explainer) whose answers name the clusters "
                         "('' to skip)")]
            = "inbedder",
        limit: Annotated[int | None, typer.Option(
            "--limit", help="use only the first N texts (0 = all, up to FACET_MAX_CLUSTER_TEXTS, "
                            "5000 unless set: a file with more is refused, --collection takes "
                            "its first chunks up to N or that cap and the note says how many "
                            "of how many)")] = None,
        keywords: Annotated[int, typer.Option("--keywords", help="keywords per cluster")] = 5,
        members: Annotated[int, typer.Option("--members", help="representative members per cluster")] = 3,
        answer_tokens: Annotated[int | None, typer.Option(
            "--answer-tokens", help="tokens InBedder generates per text (default: its answer_max_tokens)")] = None,
        seed: Annotated[int, typer.Option("--seed")] = 0,
        out: Annotated[Path | None, typer.Option("--out", "-o", help="write the clusters as JSON")] = None,
    ) -> None:
        """Cluster texts under INSTRUCTION and print each cluster's name, keywords and members."""
        from app.commands.search import spec_label
        from app.services.clustering import K_BY_SILHOUETTE, ClusterRequest, k_option, limit_option
        from app.services.search import parse_filters

        if (source is None) == (collection is None):
            raise InvalidRequestError("give a file of texts or --collection NAME (one of them)")
        chosen_k = k_option(k)
        if source is not None and filters:
            raise InvalidRequestError("--filter selects a collection's chunks (with --collection); "
                                      "a file's texts are all clustered")
        if out is not None:  # before the work (a folder or a read-only path was found at the end)
            prepare_out_file(out)
        texts = read_texts(source, limit) if source is not None else None
        if texts is not None and chosen_k is not None and chosen_k > len(texts):
            default = " (the default)" if k == DEFAULT_K else ""
            raise InvalidRequestError(f"--k {k}{default} is more than the {plural(len(texts), 'text')} of "
                                      f"{source}; give a smaller --k, or --k 0 to choose it")
        request = ClusterRequest(
            instruction=instruction, texts=texts, collection=collection,
            filters=parse_filters(filters or []), limit=limit_option(limit) if collection else None,
            k=chosen_k, embedder=embedder,
            explainer=explain or None, keywords=keywords, members=members,
            answer_tokens=answer_tokens, seed=seed)
        with open_facet() as facet:
            bar, update = progress_bar()
            try:
                result = facet.cluster(request, progress=update)
            except InvalidRequestError as e:  # a k over a collection's chunks: this edge's way
                if not str(e).endswith(K_BY_SILHOUETTE):
                    raise
                raise InvalidRequestError(f"{e} (--k 0)") from e
            finally:
                bar.close()
        typer.echo(f"{plural(len(result.texts), 'text')} in {plural(result.k, 'cluster')} in "
                   f"{sum(result.timings_ms.values()) / 1000:.1f}s ("
                   + ", ".join(f"{stage} {ms / 1000:.1f}s" for stage, ms in result.timings_ms.items())
                   + ("; embeddings reused" if result.encode_reused else "")
                   + ("; stored vectors read" if result.stored_vectors_used else "")
                   + f"), embedder {printable(spec_label(result.embedder, result.embedder_spec))}",
                   err=True)
        if result.note:
            typer.echo(f"note: {printable(result.note)}", err=True)
        for c in result.clusters:
            # Names and keywords are words of the texts' answers, members the texts: a control
            # character in them would reach the terminal (printable shows it escaped).
            share = f" ({c.name_share} answers)" if c.name_share else ""
            name = printable(' '.join(c.name.split()))
            words = ', '.join(printable(w) for w in c.keywords)
            typer.echo(f"cluster {c.id} ({plural(c.size, 'text')}): {name}{share} · {words}")
            for text in c.representatives:  # one line each: a text's own newlines could pass for output
                typer.echo(f"    - {printable(' '.join(text.split())[:110], body=True)}")
        if out is not None:
            payload = result.to_dict() | {"source": str(source or collection), "seed": seed}
            write_out_file(out, json.dumps(payload, indent=1))
            typer.echo(f"wrote {printable(str(out))}")
