"""``facet cluster``: cluster texts under an instruction and explain each cluster.

Texts come from a file (one per line in .txt, a text field or a JSON string per line in
.jsonl, a JSON list of strings or of objects or a GoalEx ``data.json`` with a ``texts`` list, or
the text column of a .csv; the field or column ``--text-column``, else text, contents, content
or body, as ``facet index`` reads them: the same reader as the UI's upload,
``app.services.clustering.read_text_file``)
or from a collection (``--collection``, with ``--filter``), or from a search of one
(``--collection`` with ``--query``: its results, as ``ClusterRequest(search=SearchRequest(...))``,
the UI's "search results" source). The work is the cluster service's
(``app.services.clustering``): the instruction embedder embeds the texts under ``--instruction``,
k-means groups them, and an explainer (``--explain``: an InBedder checkpoint, or an
embedder registered as one) answers the same instruction about
every text; each cluster is described by the most distinctive words of its members' answers, its most
shared answer and its most central members. ``--labels FILE`` (gold labels of a file's texts, read
as the UI's gold-labels upload) adds the V-measure against them, as the UI's Cluster tab gives it.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from app.commands.common import (
    argument_text,
    expand_home,
    handle_errors,
    json_out_path,
    open_facet,
    path_value,
    prepare_out_file,
    stdout_may_close,
    write_out_file,
)
from app.errors import InvalidRequestError, NotFoundError, TooLargeError
from app.files import absent, is_stdout, is_stream
from app.services.clustering import MAX_K, SEARCH_RESULTS_CLUSTERED
from app.settings import get_settings
from app.text import bar_size, plural, printable, printable_json

DEFAULT_K = 8


# How the reader tells a user of `facet cluster` to name a file's column of texts.
CHOOSE_TEXT_COLUMN = "name the one holding the texts with --text-column NAME"


# How messages name SOURCE ``-``, the texts read from standard input.
STDIN_NAME = "standard input"


def is_stdin(path: Path | str | None) -> bool:
    """Whether SOURCE ``path`` is ``-``: the texts on standard input, as Unix tools read it."""
    return path is not None and str(path) == "-"


def _stdin_stream() -> Any:
    """Standard input's bytes (None where there is none); a text stream put in its place is
    read and encoded."""
    stdin = sys.stdin
    stream = None if stdin is None else getattr(stdin, "buffer", None)
    if stdin is not None and stream is None:  # (a text stream put in its place)
        stream = io.BytesIO(stdin.read().encode("utf-8"))
    return stream


def read_stdin_texts(text_column: str | None, skipped: list[int] | None = None) -> list[str]:
    """The texts on standard input, read as a .txt file is (``read_text_file``: one text per
    line, blank lines skipped, a UTF-8 BOM and CRLF line ends handled, binary or non-UTF-8
    input refused), at most ``STDIN_MAX_BYTES`` of it. A closed stdin reads as empty. Until
    2026-11-30 (seventh session) `facet cluster -` said "- does not exist" (exit 3), though
    ``--out -`` is stdout. (``facet embed -``'s reader; ``facet cluster -`` reads JSON lines as
    records too: ``_stream_records``.) ``skipped``: the blank lines' numbers are added to it."""
    return _stream_records(_stdin_stream(), STDIN_NAME, ".txt", text_column, utf8_only=True,
                           skipped=skipped)[0]


@contextmanager
def _held(stream: Any, name: str, suffix: str, advice: str) -> Iterator[Path]:
    """A stream (standard input, a pipe, ``<(...)``'s ``/dev/fd/N``) held in a temporary file of
    ``suffix``, at most ``STDIN_MAX_BYTES`` of it (`facet cluster - </dev/zero` was read until
    the out-of-memory killer ended it), for the readers of files; a closed one is empty."""
    import tempfile

    from app.commands.common import STDIN_MAX_BYTES, read_capped
    from app.errors import FacetError

    try:
        data = b"" if stream is None else read_capped(stream, STDIN_MAX_BYTES, name, advice)
    except FacetError:
        raise
    except (OSError, ValueError):  # closed under it
        data = b""
    with tempfile.TemporaryDirectory(prefix="facet-stdin-") as folder:
        held = Path(folder) / f"stream{suffix}"
        held.write_bytes(data)
        yield held


def json_lines(data: bytes) -> bool:
    """Whether ``data`` is JSON lines: UTF-8 whose every non-blank line is a JSON object (at
    least one). A file of lines is clustered a line a text, so `jq -c '.[]' data.json | facet
    cluster -` clustered each record's JSON source, ids and labels included."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return False
    found = False
    # Lines end at "\n" (a CRLF's "\r" is stripped below), as a .jsonl file's do: splitlines
    # also split at U+2028 or U+0085 inside a JSON string (`jq -c` writes them raw), and such
    # a stream was clustered as lines.
    for line in text.split("\n"):
        line = line.strip()
        if not line:
            continue
        if not line.startswith("{"):
            return False
        try:
            record = json.loads(line)
        except ValueError:
            return False
        if not isinstance(record, dict):
            return False
        found = True
    return found


def _stream_records(stream: Any, name: str, suffix: str, text_column: str | None,
                    label_column: str | None = None, *, utf8_only: bool = False,
                    records: bool = False, skipped: list[int] | None = None,
                    ) -> tuple[list[str], list[str]]:
    """The texts of a stream, and their labels from ``label_column`` (else none), read as a file
    of ``suffix`` is (``_held``). With ``records`` (``facet cluster``), a stream of no suffix
    whose lines are all JSON objects (``json_lines``) is read as a ``.jsonl`` file (each record's
    text field, or ``text_column``; ``label_column`` taken), said on stderr. ``skipped`` as
    ``read_text_file``'s.

    Raises:
        InvalidRequestError: ``label_column`` for a stream of lines (``param`` ``label_column``).
    """
    from app.services.clustering import read_labelled_text_file, read_text_file

    with _held(stream, name, suffix, "give the texts in a file, or fewer of them") as held:
        if records and suffix == ".txt" and json_lines(held.read_bytes()):
            typer.echo(f"note: every line of {printable(name)} is a JSON object: read as JSON lines "
                       "(each record's text field; --text-column NAME picks another)", err=True)
            held = held.rename(held.with_suffix(".jsonl"))
        if label_column is None:
            return read_text_file(held, name=name, text_column=text_column,
                                  choose=CHOOSE_TEXT_COLUMN, utf8_only=utf8_only,
                                  skipped=skipped), []
        if held.suffix == ".txt":
            what = "standard input is" if name == STDIN_NAME else f"{name} is a pipe or a device,"
            raise InvalidRequestError(f"{what} read as one text per line, with no columns (JSON "
                                      "lines, a JSON object a line, are read as records); give a "
                                      ".csv, .jsonl or .json file, or the labels with --labels FILE",
                                      param="label_column")
        return read_labelled_text_file(held, label_column, name=name, text_column=text_column,
                                       choose=CHOOSE_TEXT_COLUMN)


def read_texts(path: Path, limit: int | None = None, text_column: str | None = None,
               held_count: list[int] | None = None, label_column: str | None = None,
               labels_out: list[str] | None = None) -> list[str]:
    """Texts from a .txt, .json, .jsonl or .csv file (``read_text_file``: the column or field
    ``text_column``, else text, contents, content or body), or from standard input where
    ``path`` is ``-`` (one text per line, as a .txt file), the first ``limit`` of them (None
    or 0: all). ``held_count``, where given, gets the number of texts the file holds (before
    the limit: what ``--labels`` is counted against). With ``label_column`` (a .csv, .jsonl or
    .json file of records), ``labels_out`` gets the gold label of each text returned, from
    that column of its record (``read_labelled_text_file``).

    Raises:
        NotFoundError: no such file.
        DataError: a file the reader refuses (type, encoding, shape, no column of texts; the
            line is named).
        InvalidRequestError: a negative limit, fewer than 2 texts, or a text column for a file
            of lines.
    """
    from app.services.clustering import limit_option, read_labelled_text_file, read_text_file

    limit = limit_option(limit)
    where: Path | str = path
    labels: list[str] = []
    stdin = is_stdin(path)
    if stdin:
        where = STDIN_NAME
    elif path.is_dir():
        raise InvalidRequestError(f"{path} is a folder; give a file of texts, or index the "
                                  "folder and cluster it with --collection")
    piped = not stdin and is_stream(path)
    if not stdin and not piped and not path.is_file():
        raise NotFoundError(f"{path} {absent(path)}")
    try:
        if stdin:
            held, labels = _stream_records(_stdin_stream(), STDIN_NAME, ".txt", text_column,
                                           label_column, utf8_only=True, records=True)
        elif piped:
            with path.open("rb") as stream:
                held, labels = _stream_records(stream, str(path), path.suffix or ".txt",
                                               text_column, label_column, records=True)
        elif label_column is None:
            held = read_text_file(path, text_column=text_column, choose=CHOOSE_TEXT_COLUMN)
        else:
            held, labels = read_labelled_text_file(path, label_column, text_column=text_column,
                                                   choose=CHOOSE_TEXT_COLUMN)
    except InvalidRequestError as e:  # a column for a file of lines: the option's name
        if e.param == "text_column":
            raise InvalidRequestError(f"--text-column {text_column}: {e}") from e
        if e.param == "label_column":
            raise InvalidRequestError(f"--label-column {label_column}: {e}") from e
        raise
    texts = held[:limit] if limit else held
    if labels_out is not None:
        labels_out.extend(labels[:len(texts)])
    if held_count is not None:
        held_count.append(len(held))
    if len(texts) < 2:
        # "holds 1 text (--limit 1)" of a file of 12: what it holds, then what the limit took.
        took = f"; --limit {limit} took {len(texts)}" if limit and len(held) > len(texts) else ""
        raise InvalidRequestError(f"{where} holds {plural(len(held), 'text')}{took}; clustering "
                                  f"needs at least 2{'; give a larger --limit' if took else ''}")
    return texts


def read_gold_labels(path: Path) -> list[str]:
    """Gold labels of a file's texts, in order, read as the UI's gold-labels upload reads them
    (``read_label_file``: a .json list or an object with a ``labels`` list, else one per line).

    Raises:
        NotFoundError: no such file.
        DataError: a file the reader refuses.
        InvalidRequestError: a folder.
    """
    from app.services.clustering import read_label_file

    if path.is_dir():
        raise InvalidRequestError(f"--labels {path} is a folder; give a file of labels, one per "
                                  "text in order (.json list or labels.json, or lines)")
    if is_stream(path):  # (`--labels <(cut -f2 data.tsv)` said "/dev/fd/63 does not exist")
        with path.open("rb") as stream, \
                _held(stream, f"--labels {path}", path.suffix or ".txt", "give the labels in a file") as held:
            return read_label_file(held, name=f"--labels {path}")
    if not path.is_file():
        raise NotFoundError(f"--labels {path} {absent(path)}")
    return read_label_file(path)


def labels_line(v_measure: float, labels: list[str], k: int, k_chosen: bool) -> str:
    """The summary's line of the V-measure against gold labels ("V-measure 57.79 (out of 100)
    against 500 labels (147 classes)"), with the number of classes to give as --k where k chosen by
    silhouette is far from it (``far_apart``, as the UI's summary says it)."""
    from app.services.clustering import far_apart

    classes = len(set(labels))
    # "Out of 100": the JSON's `v_measure` is 0 to 1, and 0.87 here read as a strong 0-1 score
    # (the quality exploration of the fourth session of 2026-12-07).
    line = (f"V-measure {100 * v_measure:.2f} (out of 100) against {plural(len(labels), 'label')} "
            f"({plural(classes, 'class', 'classes')})")
    if k_chosen and far_apart(classes, k):
        line += f"; the labels have {classes:,} classes: --k {classes} clusters into as many"
    return line


def _same_file(out: Path, source: Path) -> bool:
    """Whether ``out`` names the file ``source`` (a link, another spelling of its path)."""
    try:
        if out.exists() and source.exists():
            return os.path.samefile(out, source)
    except OSError:
        pass
    return out.resolve() == source.resolve()


# Texts above which a run on the CPU that reads them with a language model (an explainer, or an
# embedder other than minilm) starts with a heads-up (``long_run_note``): 200 AG News texts took
# 4 min 49 s with InBedder embedding (the default until 2026-12-01) on the 2-core CPU (README,
# "What facet cluster costs").
LONG_RUN_TEXTS = 200

# A stage that counts texts ("encoding 64/1140 texts", "inbedder answering 32/1140 texts").
_COUNTED = re.compile(r"^(?P<what>.*?)(?P<done>\d+)/(?P<total>\d+) texts$")


def long_run_note(model: object, total: int, embedder: str, explainer: str | None,
                  searched: bool = False) -> str | None:
    """The heads-up before a clustering that may take long: ``total`` texts on the CPU, read by
    a language model (the embedder ``model``, unless it is minilm's kind, or any explainer); None
    otherwise, or where the model is not loaded here (the workers encode). No time is guessed
    here: the bar says how much is left once the first batch is measured. ``searched``: the
    texts are a search's results (``--query``), fewer of which is ``--top-k N`` (``--limit N``
    was advised there, and refused when followed: the README review of the sixth session of
    2026-12-06)."""
    device = getattr(getattr(model, "device", None), "type", None)
    if model is None or device != "cpu" or total < LONG_RUN_TEXTS:
        return None
    from embedders.baselines import EncoderMeanEmbedder  # (torch: loaded with the model)

    if explainer is None and isinstance(model, EncoderMeanEmbedder):
        return None
    models = f"embedder {embedder}" + (f" and explainer {explainer}" if explainer else "")
    # Only the advice not followed already (--embedder minilm was suggested to minilm's run).
    quicker = [] if isinstance(model, EncoderMeanEmbedder) else ["--embedder minilm"]
    quicker += ["--explain ''"] if explainer else []
    return (f"heads-up: {total:,} texts with {models} on the CPU can take a long time (the "
            f"time left shows after the first batch); for a quicker run: {' '.join(quicker)} "
            f"or {'--top-k' if searched else '--limit'} N. Ctrl-C stops it")


def _time_left(seconds: float) -> str:
    return f"~{seconds / 60:.0f} min left" if seconds >= 90 else f"~{max(1, round(seconds))} s left"


class ClusterBar:
    """A percentage bar on stderr naming the stage ("inbedder answering 128/200 texts"); on a
    terminal it redraws, otherwise each stage is one line (a long clustering is never silent).

    A stage that counts texts says the time it has left, from its own pace so far (measured,
    never assumed: "encoding 64/1140 texts, ~25 min left"); the first count of the encoding
    calls ``encoding_starts`` with the number of texts (the heads-up of a long run).
    """

    def __init__(self, encoding_starts: Callable[[int], str | None] | None = None) -> None:
        from tqdm import tqdm

        self.tty = sys.stderr.isatty()
        self.bar = tqdm(total=100, unit="%", file=sys.stderr, **bar_size(), disable=not self.tty,
                        bar_format="{desc} {percentage:3.0f}%|{bar}| {elapsed}<{remaining}")
        self.stage = ""  # the last stage told, as told (what a Ctrl-C interrupted)
        self._shown = ""
        self._started: dict[str, tuple[float, int]] = {}  # a counted stage's first (time, count)
        self._told: tuple[str, float, int] = ("", 0.0, 0)  # off a terminal: the last counted line
        self._encoding_starts = encoding_starts

    def update(self, fraction: float, stage: str) -> None:
        self.stage = stage
        shown = stage
        counted = _COUNTED.match(stage)
        if counted:
            what, done, total = counted["what"], int(counted["done"]), int(counted["total"])
            now = time.perf_counter()
            first = self._started.setdefault(what, (now, done))
            if what == "encoding " and first == (now, done) and self._encoding_starts is not None:
                note = self._encoding_starts(total)
                if note:
                    self.say(note)
            if done > first[1]:
                shown = f"{stage}, {_time_left((now - first[0]) / (done - first[1]) * (total - done))}"
        if not self.tty:
            if shown != self._shown and (not counted or self._due(counted["what"], int(
                    counted["done"]), int(counted["total"]))):
                typer.echo(f"  {fraction:4.0%} {shown}", err=True)
                self._shown = shown
            return
        self.bar.set_description(shown, refresh=False)
        step = round(100 * fraction) - self.bar.n
        if step:
            self.bar.update(step)
        else:  # a new stage below a whole percent (a batch of 5,000 texts) still shows
            self.bar.refresh()

    def _due(self, what: str, done: int, total: int) -> bool:
        """Off a terminal, whether a counted stage's line is printed: its first and its last,
        and between them as `facet index` logs (``log_line_due``: a tenth of its texts moved, or
        30 s passed; a line for every batch of 32 was 276 lines for 5,000 texts)."""
        from app.commands.collections import log_line_due

        now = time.perf_counter()
        last_what, last_at, last_done = self._told
        due = (what != last_what or done >= total
               or log_line_due(((done, last_done, total),), now - last_at))
        if due:
            self._told = (what, now, done)
        return due

    def say(self, line: str) -> None:
        """A line on stderr above the bar."""
        if self.tty:
            self.bar.write(line, file=sys.stderr)
        else:
            typer.echo(line, err=True)

    def close(self) -> None:
        self.bar.close()


# Characters of a representative text shown at most (a longer one ends with "…").
SHOWN_CHARS = 110


def _one_line(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters with "…" where it was longer (a cut
    text ended mid-word, "...declined delive", as if that were all of it)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 1].rstrip() + "…"


def k_line(result: Any, max_k: int) -> str | None:
    """How k was chosen, for a clustering with ``--k 0``: the silhouette of the k chosen, the
    range tried, and whether the choice is the largest k tried (where a larger --max-k might
    fit better); None where k was given or not chosen (the note says why)."""
    if not result.k_chosen or result.silhouette is None or result.max_k_tried is None:
        return None
    top = result.max_k_tried
    # (One k tried is no "best of k = 2 to 2": the UI says it so.)
    tried = "k = 2 the only one tried" if top == 2 else f"the best of k = 2 to {top}"
    line = (f"k = {result.k} chosen by silhouette ({result.silhouette:.3f}), {tried}"
            + ("" if top == max_k else f" (--max-k {max_k}; these texts allow no more than {top})"))
    if result.k == top and top == max_k:
        line += (f"; {top} is the largest k tried (--max-k {max_k}): a larger --max-k may find "
                 "a better k")
    return line


# 128 + SIGTERM: the status of a process that SIGTERM ended (``facet index``'s too).
SIGTERM_EXIT = 143


@contextmanager
def _sigterm_stops() -> Iterator[None]:
    """SIGTERM (``kill``, ``docker stop``) ends the clustering as Ctrl-C does: with a line and
    exit 143 (it ended the process with no word). Only over the default handler, in the main
    thread; Ctrl-C needs nothing: Python raises KeyboardInterrupt between two layers of a
    forward pass, within about a second (nothing is written, so nothing waits for a batch's end).
    A SIGINT ignored from the start (a background job of a shell script) stays ignored."""
    import signal
    import threading

    def stop(_signum: int, _frame: Any) -> None:
        raise SystemExit(SIGTERM_EXIT)

    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def register(cli: typer.Typer) -> None:
    """Add ``facet cluster`` to the CLI."""

    @cli.command("cluster")
    @handle_errors
    def cluster_cmd(
        ctx: typer.Context,
        instruction: Annotated[str, typer.Option("--instruction", "-i", help="the aspect to group by")],
        source: Annotated[Path | None, typer.Argument(
            help=".txt (one text per line), .json (list or GoalEx data.json), .jsonl (text field), "
                 ".csv (text column; see --text-column); '-' reads one text per line from "
                 "standard input; or use --collection",
            callback=expand_home, parser=path_value)
        ] = None,
        collection: Annotated[str | None, typer.Option(
            "--collection", "-c", help="cluster this collection's chunks instead of a file")] = None,
        filters: Annotated[list[str] | None, typer.Option(
            "--filter", "-f", help="with --collection: key=value or key:=JSON, the chunks "
                                   "clustered (with --query: the search's filters, as `facet "
                                   "search --filter`); repeat a key for any-of")] = None,
        query: Annotated[str | None, typer.Option(
            "--query", "-q", help="with --collection: cluster the results of this search (as "
                                  "`facet search QUERY`; '-' reads it from standard input) "
                                  "instead of the collection's chunks")] = None,
        search_instruction: Annotated[str | None, typer.Option(
            "--search-instruction", help="with --query: what the query means (`facet search "
                                         "--instruction`); --instruction stays what the "
                                         "results are grouped by")] = None,
        top_k: Annotated[int | None, typer.Option(
            "--top-k", help=f"with --query: the results to cluster (`facet search --top-k`; "
                            f"default {SEARCH_RESULTS_CLUSTERED}, at most 1000 and "
                            "FACET_MAX_CLUSTER_TEXTS)")] = None,
        mode: Annotated[str | None, typer.Option(
            "--mode", "-m", help="with --query: the search's mode, as `facet search --mode`: "
                                 "auto (the default), dense, lexical or hybrid")] = None,
        search_embedder: Annotated[str | None, typer.Option(
            "--search-embedder", help="with --query: which of the collection's embedders to "
                                      "search (`facet search --embedder`); --embedder stays "
                                      "the one that clusters the results")] = None,
        k: Annotated[int, typer.Option("--k", help="number of clusters; 0 chooses it by silhouette")] = DEFAULT_K,
        max_k: Annotated[int | None, typer.Option(
            "--max-k", help=f"with --k 0: the largest k tried (2 to {MAX_K}; default 10)")] = None,
        text_column: Annotated[str | None, typer.Option(
            "--text-column", help="the .csv column or .json/.jsonl field holding the texts "
                                  "(default: text, contents, content or body)")] = None,
        embedder: Annotated[str | None, typer.Option(
            "--embedder", "-e", help="the embedder that reads the texts under the instruction "
                                     "(name or path; default FACET_DEFAULT_EMBEDDER, minilm "
                                     "unless set: it clustered CLINC's dev texts better than "
                                     "InBedder and InstEmb, docs/results.md)")] = None,
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
        keywords: Annotated[int, typer.Option(
            "--keywords", help="keywords per cluster: the most distinctive words of its members' "
                               "answers where an explainer answers, else of its texts")] = 5,
        members: Annotated[int, typer.Option("--members", help="representative members per cluster")] = 3,
        answer_tokens: Annotated[int | None, typer.Option(
            "--answer-tokens", help="tokens InBedder generates per text (default: its answer_max_tokens)")] = None,
        seed: Annotated[int, typer.Option(
            "--seed", help="k-means' random seed: the same seed and texts give the same "
                           "clusters; another seed may group them differently")] = 0,
        out: Annotated[Path | None, typer.Option(
            "--out", "-o", help="write the clusters as JSON to this file ('-': standard output; "
                                "the listing then goes to stderr)", parser=json_out_path, callback=expand_home)] = None,
        as_json: Annotated[bool, typer.Option(
            "--json", help="machine-readable output: one JSON object (as POST /cluster answers, "
                           "with each cluster's members) instead of the listing")] = False,
        labels: Annotated[Path | None, typer.Option(
            "--labels", help="gold labels of the file's texts, one per text in order (.json "
                             "list or labels.json, else one per line, as the UI's upload): the "
                             "summary and --json give the V-measure against them",
            callback=expand_home, parser=path_value)] = None,
        label_column: Annotated[str | None, typer.Option(
            "--label-column", help="the gold labels are in this .csv column or .json/.jsonl field "
                                   "of the file of texts (Banking77's category): scored as "
                                   "--labels is")] = None,
    ) -> None:
        """Cluster texts under INSTRUCTION and print each cluster's name, keywords and members."""
        from app.commands.search import spec_label
        from app.services.clustering import K_BY_SILHOUETTE, ClusterRequest, k_option, limit_option
        from app.services.search import MAX_TOP_K, SearchRequest, parse_filters

        instruction = argument_text(instruction, "--instruction", "instruction") or ""
        if query != "-":
            query = argument_text(query, "--query", "query")
        search_instruction = argument_text(search_instruction, "--search-instruction",
                                           "search_instruction")
        filters = [argument_text(f, "--filter", "filters") or "" for f in filters or []]
        if query is not None and source is not None:
            raise InvalidRequestError("--query clusters the results of a search of a collection "
                                      "(--collection NAME); a file's texts are all clustered")
        if query is not None and collection is None:
            raise InvalidRequestError("--query clusters the results of a search: give the "
                                      "collection to search with --collection NAME")
        if (source is None) == (collection is None):
            raise InvalidRequestError("give a file of texts or --collection NAME (one of them)")
        if query is None:  # the search's own options, unused without one
            unused = [flag for flag, value in (("--search-instruction", search_instruction),
                                               ("--top-k", top_k), ("--mode", mode),
                                               ("--search-embedder", search_embedder))
                      if value is not None]
            if unused:
                raise InvalidRequestError(f"{unused[0]} is an option of the search whose results "
                                          "are clustered (--collection NAME --query TEXT)")
        elif limit is not None:
            raise InvalidRequestError("--limit takes a file's or a collection's first texts; with "
                                      "--query, --top-k N is how many results are clustered")
        if answer_tokens is not None and not (explain or "").strip():
            # Only the explainer generates answers: without one the option did nothing.
            raise InvalidRequestError("--answer-tokens is how many tokens the explainer generates "
                                      "per text; --explain '' names none (the keywords come from "
                                      "the texts)")
        chosen_k = k_option(k)
        # "(the default)" only where --k was not given: "--k 8 (the default)" of a typed --k 8.
        default = ("" if getattr(ctx.get_parameter_source("k"), "name", "DEFAULT")
                   not in ("DEFAULT", "DEFAULT_MAP") else " (the default)")
        if source is not None and filters:
            raise InvalidRequestError("--filter selects a collection's chunks (with --collection); "
                                      "a file's texts are all clustered")
        if label_column is not None and labels is not None:
            raise InvalidRequestError("--label-column reads the gold labels from the file of texts; "
                                      "--labels FILE is a file of labels: give one of the two")
        if label_column is not None and source is None:
            raise InvalidRequestError("--label-column reads the gold labels from a file of texts "
                                      "(a .csv column or a .jsonl field); a collection's chunks have none")
        if labels is not None and source is None:
            raise InvalidRequestError("--labels scores the clustering of a file's texts (one label "
                                      "per text, in order); a collection's chunks have none")
        if text_column is not None and source is None:
            raise InvalidRequestError("--text-column names a file's column of texts; a collection's "
                                      "chunks are their text")
        if max_k is not None:  # as POST /cluster's max_k
            if chosen_k is not None:
                raise InvalidRequestError(f"--max-k is the largest k tried when k is chosen by "
                                          f"silhouette (--k 0); --k {k}{default} sets k itself")
            if not 2 <= max_k <= MAX_K:
                raise InvalidRequestError(f"--max-k must be from 2 to {MAX_K}, got {max_k}")
        to_stdout = out is not None and is_stdout(out)
        if (out is not None and not to_stdout and source is not None and not is_stdin(source)
                and _same_file(out, source)):
            # The JSON result replaced the texts (exit 0): refused before any work.
            raise InvalidRequestError(f"--out {out} is the file of texts being clustered; writing "
                                      "the result there would overwrite it: name another JSON file")
        if out is not None and not to_stdout and labels is not None and _same_file(out, labels):
            # The JSON result replaced the gold labels (exit 0, "wrote LABELS").
            raise InvalidRequestError(f"--out {out} is the --labels file; writing the result there "
                                      "would overwrite the labels: name another JSON file")
        if out is not None:  # before the work (a folder or a read-only path was found at the end)
            prepare_out_file(out)
        held: list[int] = []
        named = STDIN_NAME if is_stdin(source) else source  # how the lines below name SOURCE
        own_labels: list[str] = []
        texts = read_texts(source, limit, text_column, held, label_column, own_labels) \
            if source is not None else None
        gold: list[str] | None = own_labels if label_column is not None else None
        if labels is not None and texts is not None:
            gold = read_gold_labels(labels)
            # Counted before --limit, as the UI's upload: the labels label the whole file.
            if len(gold) != held[0]:
                columns = (", or, for labels in a column of the file of texts, --label-column NAME "
                           "instead" if labels.suffix.lower() in (".csv", ".jsonl") else "")
                raise InvalidRequestError(f"--labels {labels} holds {plural(len(gold), 'label')} "
                                          f"for the {plural(held[0], 'text')} of {named}; give "
                                          f"one label per text, in the same order{columns}")
            gold = gold[:len(texts)]
        cap = get_settings().max_cluster_texts
        # What --limit took of the file, where it took fewer than it holds ("--limit 20 took 20
        # of its 30 texts"): the lines below counted the texts taken as the file's.
        cut = (texts is not None and bool(limit) and held[0] > len(texts))
        took = f"--limit {limit} took {len(texts or [])} of its {plural(held[0] if held else 0, 'text')}"
        if texts is not None and len(texts) > cap:
            whose = f"{named}: {took}," if cut else f"{named} holds {plural(len(texts), 'text')},"
            raise TooLargeError(f"{whose} more than the "
                                f"{cap:,} clustered at most (FACET_MAX_CLUSTER_TEXTS); cluster the "
                                f"first {cap:,} with --limit {cap}, or raise FACET_MAX_CLUSTER_TEXTS")
        if texts is not None and chosen_k is not None and chosen_k > len(texts):
            if cut:
                raise InvalidRequestError(f"--k {k}{default} is more than the "
                                          f"{plural(len(texts), 'text')} clustered ({named}: {took}); "
                                          "give a smaller --k or a larger --limit, or --k 0 to "
                                          "choose it")
            raise InvalidRequestError(f"--k {k}{default} is more than the {plural(len(texts), 'text')} of "
                                      f"{named}; give a smaller --k, or --k 0 to choose it")
        search: SearchRequest | None = None
        if query is not None:
            assert collection is not None
            if query == "-":
                from app.commands.search import query_from_stdin

                query = query_from_stdin()
            # As the UI's "search results" source: at most a search's 1,000 results, and at
            # most FACET_MAX_CLUSTER_TEXTS (more was refused after the search had run).
            most = min(MAX_TOP_K, cap)
            if top_k is not None and not 2 <= top_k <= most:
                why = ("a search returns at most 1,000" if most == MAX_TOP_K
                       else "FACET_MAX_CLUSTER_TEXTS caps it")
                raise InvalidRequestError(f"--top-k is the number of results clustered: from 2 to "
                                          f"{most:,} ({why}), got {top_k}")
            results = top_k if top_k is not None else min(SEARCH_RESULTS_CLUSTERED, most)
            if chosen_k is not None and chosen_k > results:
                given = (f"--top-k {results}" if top_k is not None else
                         f"--top-k {results}, the default" if results == SEARCH_RESULTS_CLUSTERED else
                         "FACET_MAX_CLUSTER_TEXTS")
                raise InvalidRequestError(f"--k {k}{default} is more than the {results} results "
                                          f"clustered ({given}); give a smaller --k or a larger "
                                          "--top-k, or --k 0 to choose it")
            search = SearchRequest(query=query, collection=collection, instruction=search_instruction,
                                   top_k=results, filters=parse_filters(filters or []),
                                   embedder=search_embedder, mode=mode or SearchRequest.mode)
        request = ClusterRequest(
            instruction=instruction, texts=texts, collection=collection if search is None else None,
            search=search, filters=parse_filters(filters or []) if search is None else {},
            limit=limit_option(limit) if collection and search is None else None,
            k=chosen_k, max_k=max_k if max_k is not None else ClusterRequest.max_k, embedder=embedder,
            explainer=explain or None, keywords=keywords, members=members,
            answer_tokens=answer_tokens, seed=seed)
        with open_facet() as facet:
            # (None: the collection's own embedder, else FACET_DEFAULT_EMBEDDER, as the facade
            # picks it; named in the heads-up of a long run.)
            spec = facet.cluster_embedder(request)
            bar = ClusterBar(lambda total: long_run_note(
                facet.embedder_cache.peek(spec), total, spec, request.explainer,
                searched=search is not None))
            try:
                with _sigterm_stops():
                    result = facet.cluster(request, progress=bar.update)
            except InvalidRequestError as e:  # a k over a collection's chunks: this edge's way
                if not str(e).endswith(K_BY_SILHOUETTE):
                    raise
                raise InvalidRequestError(f"{e} (--k 0)") from e
            except (KeyboardInterrupt, SystemExit) as e:  # Ctrl-C 130; SIGTERM 143
                if isinstance(e, SystemExit) and e.code != SIGTERM_EXIT:
                    raise
                bar.close()
                signal_name = "Ctrl-C" if isinstance(e, KeyboardInterrupt) else "SIGTERM"
                during = f" while {printable(bar.stage)}" if bar.stage else ""
                typer.echo(f"stopped by {signal_name}{during}; nothing was kept (a clustering is "
                           "not resumed: run it again, perhaps with --limit N)", err=True)
                raise typer.Exit(130 if isinstance(e, KeyboardInterrupt) else SIGTERM_EXIT) from None
            finally:
                bar.close()
        typer.echo(f"{plural(len(result.texts), 'text')} in {plural(result.k, 'cluster')} in "
                   f"{sum(result.timings_ms.values()) / 1000:.1f}s ("
                   + ", ".join(f"{stage} {ms / 1000:.1f}s" for stage, ms in result.timings_ms.items())
                   + ("; embeddings reused" if result.encode_reused else "")
                   + ("; stored vectors read" if result.stored_vectors_used else "")
                   + f"), embedder {printable(spec_label(result.embedder, result.embedder_spec))}",
                   err=True)
        # What the texts were grouped by: the --out file and the UI showed it, the summary not.
        typer.echo(f"grouped by: {printable(_one_line(result.instruction, 200))}", err=True)
        chosen = k_line(result, request.max_k)
        if chosen:
            typer.echo(chosen, err=True)
        score: float | None = None
        if gold is not None:
            from app.services.clustering import labels_v_measure  # (the UI's V-measure too)

            score = labels_v_measure(gold, result.labels)
            typer.echo(printable(labels_line(score, gold, result.k, result.k_chosen)), err=True)
        if result.note:
            typer.echo(f"note: {printable(result.note)}", err=True)
        # With --json the object replaces the listing, as `facet search --json`'s; with `-o -`
        # stdout carries the JSON alone and the listing goes to stderr.
        # A closed stdout (`... -o FILE 2>&1 | head -1`) still leaves the file (``stdout_may_close``).
        with stdout_may_close():
            for c in result.clusters if not as_json else ():
                # Names and keywords are words of the texts' answers, members the texts: a control
                # character in them would reach the terminal (printable shows it escaped).
                share = f" ({c.name_share_label})" if c.name_share_label else ""
                name = printable(' '.join(c.name.split()))
                # No " · " without keywords: "(no keywords) · " ended in a dangling separator.
                words = f" · {', '.join(printable(w) for w in c.keywords)}" if c.keywords else ""
                typer.echo(f"cluster {c.id} ({plural(c.size, 'text')}): {name}{share}{words}",
                           err=to_stdout)
                for text in c.representatives:  # one line each: a text's own newlines could pass for output
                    typer.echo(f"    - {printable(_one_line(text), body=True)}", err=to_stdout)
            if out is None and not as_json:
                return
            payload = cluster_payload(result, str(source or collection), seed)
            if search is not None:
                # The search whose results were clustered: a saved --query run read as a plain
                # --collection one, the search unsaid.
                payload["search"] = {"query": search.query, "collection": search.collection,
                                     "instruction": search.instruction, "k": search.top_k,
                                     "filters": search.filters, "embedder": search.embedder,
                                     "mode": search.mode}
            if score is not None:
                payload["v_measure"] = score
            if as_json:
                typer.echo(printable_json(payload))
            if out is not None and not (to_stdout and as_json):  # (`--json -o -`: printed once)
                write_out_file(out, json.dumps(payload, indent=1))
                if not to_stdout:
                    typer.echo(f"wrote {printable(str(out))}", err=as_json)


def cluster_payload(result: Any, source: str, seed: int) -> dict[str, Any]:
    """What ``--json`` prints and ``--out`` writes: the clustering as POST /cluster answers it
    (``ClusterResponse.to_dict``), the ``source`` (the file or collection) and ``seed``, and in
    each cluster its ``members``: every text of it in the order of ``texts``, each with its
    ``index`` there, its ``text``, where it came from (a collection's chunk: ``doc_id``,
    ``chunk_no``, ``title`` and ``id``, its point id, as `facet search --json` gives it) and,
    where an explainer named the clusters, its ``answer``."""
    payload: dict[str, Any] = result.to_dict() | {"source": source, "seed": seed}
    members: dict[int, list[dict[str, Any]]] = {c.id: [] for c in result.clusters}
    for i, (label, text, where) in enumerate(zip(result.labels, result.texts, result.sources,
                                                 strict=True)):
        member: dict[str, Any] = {"index": i}
        if where.get("doc_id") is not None and where.get("chunk_no") is not None:
            from indexer.store import point_id

            member["id"] = point_id(where["doc_id"], where["chunk_no"])
        member |= {key: value for key, value in where.items() if key != "index"}
        member["text"] = text
        if result.answers is not None:
            member["answer"] = result.answers[i]
        members.setdefault(int(label), []).append(member)
    for cluster in payload["clusters"]:
        cluster["members"] = members.get(cluster["id"], [])
    return payload
