"""``facet embedders`` and ``facet embed``."""

from __future__ import annotations

from typing import Annotated

import typer

from app.commands.common import argument_text, handle_errors, open_facet
from app.errors import InvalidRequestError
from app.text import blank, empty_said, plural, printable, printable_json


def _texts_from_stdin(skipped: list[int]) -> list[str]:
    """`facet embed -`: the texts on standard input, one a line, read as `facet cluster -`
    reads them (``read_texts``'s reader: a UTF-8 BOM and CRLF handled, blank lines skipped,
    their numbers added to ``skipped``, input that is not UTF-8 text refused, exit 4); none is
    refused as an empty query is (exit 2). Until 2026-12-01 ``-`` was embedded as the text "-".

    Raises:
        InvalidRequestError: standard input holds no text.
    """
    from app.commands.cluster import read_stdin_texts

    texts = read_stdin_texts(None, skipped)
    if not texts:
        raise InvalidRequestError("standard input holds no text to embed: give one text a line")
    return texts


def skipped_note(skipped: list[int]) -> str:
    """The note on standard input's blank lines, which have no vector: a script pairing lines
    with vectors had them out of step from the first blank line on, with nothing said."""
    shown = ", ".join(map(str, skipped[:10])) + (", ..." if len(skipped) > 10 else "")
    return (f"note: {plural(len(skipped), 'blank line')} of standard input skipped ("
            f"{'line' if len(skipped) == 1 else 'lines'} {shown}, in \"skipped_lines\"): the "
            "vectors are of the other lines, in order")


# The most characters of a description `facet embedders` prints in its table (the packaged
# embedders' longest, minilm's, is ~175); `--json` gives it whole.
DESCRIPTION_WIDTH = 200


def table_description(description: str) -> str:
    """``description`` (a plugin's, as it registered it) as one cell of `facet embedders`'
    table: its first line that is not blank, its control characters shown as escapes
    (``printable``), cut to ``DESCRIPTION_WIDTH`` characters with an ellipsis ("..."), also put
    where lines were left off. A plugin's multi-line, very long or escape-laden description
    broke the table into lines that were not rows (or acted on the terminal)."""
    lines = [line.strip() for line in str(description).splitlines()]
    kept = [line for line in lines if line]
    first = kept[0] if kept else ""
    shown = printable(first)
    if len(shown) > DESCRIPTION_WIDTH:
        return shown[:DESCRIPTION_WIDTH - 3].rstrip() + "..."
    return f"{shown} ..." if len(kept) > 1 else shown


EMBEDDERS_HELP = (
    "List the embedders that can be loaded by name: name, kind, how it reads an instruction, "
    "description.\n\n"
    "How it reads an instruction: trained (trained to follow one: InstEmb), prompted (written "
    "into the prompt of a model not trained on instructions), blended W (its plain vector mixed "
    "with W of the instruction-prepended one: minilm's default 0.25 barely changes results), "
    "trained, blended W (trained to follow one, served blended: InBedder at 0.25), read (a "
    "plugin's model; how, not said), none "
    "(its vectors are the same under any instruction). --json adds each one's load-time options "
    "with the values it serves (null where they are known only once it loads): set one as "
    "NAME\\[key=value], e.g. 'instemb\\[text_quotes=keep]'."  # (\\[: not Rich markup, which ate it)
)


def register(cli: typer.Typer) -> None:
    """Add the embedding commands to the ``facet`` CLI."""

    @cli.command("embedders", help=EMBEDDERS_HELP)
    @handle_errors
    def embedders_cmd(
        as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
    ) -> None:
        from embedders.registry import checkpoint_dir_note, embedder_options, instruction_use, list_embedders

        infos = list_embedders()
        uses = [instruction_use(i.name) for i in infos]
        note = checkpoint_dir_note()
        if note:  # (a FACET_CHECKPOINT_DIR of one checkpoint, or of none, listed none, no word why)
            typer.echo(f"note: {printable(note)}", err=True)
        if as_json:
            typer.echo(printable_json([{"name": i.name, "kind": i.kind, "instructions": use,
                                        "description": i.description, "options": embedder_options(i.name)}
                                       for i, use in zip(infos, uses, strict=True)]))
            return
        width = max(len(i.name) for i in infos)
        # (9 wide, "checkpoint" ran into the next column; a plugin's kind= label is cut at 20)
        kinds = [printable(i.kind)[:20] for i in infos]
        kind_width = max(len(kind) for kind in kinds)
        use_width = max(len(use) for use in uses)
        for info, kind, use in zip(infos, kinds, uses, strict=True):
            typer.echo(f"{info.name:<{width}}  {kind:<{kind_width}}  {use:<{use_width}}  "
                       f"{table_description(info.description)}")

    @cli.command("embed")
    @handle_errors
    def embed_cmd(
        texts: Annotated[list[str], typer.Argument(
            help="texts to embed; - reads them from standard input, one a line")],
        embedder: Annotated[str | None, typer.Option(
            "--embedder", "-e", help="name or checkpoint path (default FACET_DEFAULT_EMBEDDER)")] = None,
        instruction: Annotated[str | None, typer.Option(
            "--instruction", "-i", help="what the texts are embedded for (instruction embedders)")
        ] = None,
        role: Annotated[str, typer.Option("--role", help="query or document")] = "document",
        batch_size: Annotated[int, typer.Option("--batch-size", help="texts per forward pass")] = 32,
        as_json: Annotated[bool, typer.Option(
            "--json", help="already JSON: accepted, as every command's --json, and changes nothing")
                           ] = False,
    ) -> None:
        """Embed TEXTS and print a JSON object with the vectors (L2-normalised float32)."""
        # No embedder named: the facade's default, FACET_DEFAULT_EMBEDDER (a hard-coded "minilm"
        # embedded with minilm whatever the corpus embedder was set to).
        from app.encoding import EmbedderCache, InlineQueryEncoder
        from app.settings import get_settings
        from app.text import check_texts

        del as_json  # the output is JSON either way (scripts pass --json to every command)
        skipped: list[int] = []  # standard input's blank lines, which have no vector
        if texts == ["-"]:
            texts = _texts_from_stdin(skipped)
        elif "-" in texts:
            raise InvalidRequestError("- reads the texts from standard input: give it alone, not "
                                      "beside other texts")
        else:
            texts = [argument_text(t, f"text {i}", "texts") or "" for i, t in enumerate(texts, 1)]
            # Counted as typed, from 1 ("texts[1] is empty" named the second, as the API's
            # list index does).
            # (``blank``, as the facade's check: a zero-width space alone was refused there as
            # "texts[1]", counted from 0.)
            empty = next((i for i, t in enumerate(texts, 1) if blank(t)), None)
            if empty is not None:
                raise InvalidRequestError(f"text {empty} is {empty_said(texts[empty - 1])}; every "
                                          "text must contain something to embed", param="texts")
        instruction = argument_text(instruction, "--instruction", "instruction")
        settings = get_settings()
        cache = EmbedderCache(settings.device)
        encoder = InlineQueryEncoder(cache, batch_size, query_threads=settings.query_threads)
        # FACET_MAX_TEXTS_PER_CALL is the API's bound on one request: `seq 3000 | facet embed -`
        # was refused by it. The texts go in slices of it, checked whole first (so a bad text
        # is named by its place in the input, not in its slice).
        limit = settings.max_texts_per_call
        if len(texts) > limit:
            check_texts(texts)
        with open_facet(embedders=cache, encoder=encoder) as facet:
            parts = [facet.embed(texts[i:i + limit], embedder=embedder, role=role, instruction=instruction)
                     for i in range(0, max(len(texts), 1), limit)]
        result = parts[0]
        vectors = [row for part in parts for row in part.vectors]
        typer.echo(printable_json({
            "embedder": result.embedder,
            # The spec loaded, options included (`embedder` is the model's name: a default of
            # minilm[instruction_weight=1] said only "minilm").
            "spec": embedder or settings.default_embedder,
            "dim": result.dim,
            "role": result.role,
            "instruction": result.instruction,  # what was used: a blank one is none
            # False (with a note) where the embedder reads none: search's `instruction_read`.
            "instruction_read": result.instruction_read,
            **({"note": result.note} if result.note else {}),
            **({"skipped_lines": skipped} if skipped else {}),
            "vectors": [[round(float(x), 6) for x in row] for row in vectors],
        }, indent=None))
        if skipped:
            typer.echo(skipped_note(skipped), err=True)
