"""Readers for the generic evaluation formats.

Every reader takes a path, so any dataset in the same format can be evaluated, and
raises :class:`app.errors.DataError` naming the file and (1-based) line of the first
malformed record. Files are UTF-8; a leading byte-order mark (files saved "UTF-8 with BOM")
is skipped, and a file starting with a UTF-16 or UTF-32 one (Excel's "Unicode Text") is read in
that encoding, as `facet index` and `facet cluster` read it. Lines end in LF, CRLF, or CR alone
(a file saved by an old Mac's Excel). Formats:

* STS csv (STS-B): no header, ``sentence1,sentence2,score``.
* SICK tsv: header with ``sentence_A``, ``sentence_B``, ``relatedness_score``, ``SemEval_set``.
* BEIR folder: ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``,
  ``text``), ``qrels/<split>.tsv`` (header, then ``query-id corpus-id score``; a header naming
  those columns may add others, which are ignored; TREC's ``qid 0 docid grade`` also reads).
* GoalEx clustering folder: ``data.json`` (``goal``, ``texts``), ``labels.json`` (``labels``).
* Labelled texts (classification): a delimited file with a header naming a text and a label column.
* CLINC150 ``data_full.json`` + ``domains.json``: built into a two-view clustering set.
"""

from __future__ import annotations

import codecs
import contextlib
import contextvars
import csv
import json
import logging
import math
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from app.errors import DataError
from app.text import blank, plural

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StsPair:
    sentence1: str
    sentence2: str
    score: float


@dataclass
class BeirData:
    """A retrieval set.

    ``corpus`` maps doc id -> (title, text); ``qrels`` query id -> {doc id: grade}.
    ``skipped_judgements`` counts the qrels lines naming a query or document that does not
    exist, ``dropped_queries`` the judged queries left with no judgement by that (the query
    unknown, or none of its judged documents in the corpus): a report shows them, since the
    scores rest on fewer queries than the qrels judge.
    """

    corpus: dict[str, tuple[str, str]]
    queries: dict[str, str]
    qrels: dict[str, dict[str, float]]
    skipped_judgements: int = 0
    dropped_queries: int = 0


@dataclass
class ClusteringView:
    """One labelling of a list of texts, with the instruction that asks for it."""

    name: str
    texts: list[str]
    labels: list[int]
    instruction: str | None
    label_names: list[str] = field(default_factory=list)

    @property
    def n_labels(self) -> int:
        return len(set(self.labels))


@dataclass
class LabelledTexts:
    texts: list[str]
    labels: list[str]


# -- helpers ---------------------------------------------------------------------------


def _cut(value: Any, limit: int = 40) -> str:
    """``value``'s repr for a message, a long one cut with an ellipsis (a repr cut at 40
    characters lost its closing quote: ``'text: "The cat sat on the mat and purre``)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _require_file(path: Path) -> None:
    if path.is_dir():  # (it said "file not found (check --data-dir ...)" of a folder there)
        raise DataError(f"{path}: a folder, not a file: the dataset needs a file of that name here")
    if not path.is_file():
        raise DataError(f"{path}: file not found (check the dataset's path, or --data-dir for "
                        "the built-in suites)")


@contextlib.contextmanager
def _open_text(path: Path) -> Iterator[Iterator[str]]:
    """The file's lines, line ends kept (as ``open(newline="")`` gives them), decoded as UTF-8
    one at a time, so a file that is not UTF-8 is a ``DataError`` naming the line and byte
    instead of a ``UnicodeDecodeError`` from wherever the bad byte happens to be read. A
    byte-order mark is skipped (as ``utf-8-sig`` would): it hid a header or became text."""
    _require_file(path)
    try:
        f = path.open("rb")
    except OSError as e:
        raise DataError(f"{path}: cannot be opened: {e}") from e
    with f:
        yield _decoded_lines(path, f)


def _decoded_lines(path: Path, f: IO[bytes]) -> Iterator[str]:
    from indexer.parsing import bom_codecs  # indexing's rule; the store's imports only here

    head = f.read(4)
    f.seek(0)
    if wide := bom_codecs(head):
        yield from _wide_lines(path, f, wide)
        return
    offset = 0
    # UTF-8 never uses the byte 0x0A inside a character, so splitting the bytes at newlines
    # and decoding each piece reads exactly what a text-mode file would.
    for lineno, raw in enumerate(f, start=1):
        if lineno == 1 and raw.startswith(codecs.BOM_UTF8):
            raw = raw[len(codecs.BOM_UTF8):]
            offset = len(codecs.BOM_UTF8)
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise _not_utf8(path, lineno, offset + e.start) from e
        if lineno == 1 and not line.endswith("\n"):  # no LF at all: this is the whole file
            yield from _split_lines(line)
            return
        yield line
        offset += len(raw)


WIDE_CHUNK = 1 << 16  # bytes of a UTF-16/UTF-32 file decoded at a time


def _wide_lines(path: Path, f: IO[bytes], codecs_to_try: list[str]) -> Iterator[str]:
    """The lines of a file that starts with a UTF-32 or UTF-16 byte order mark, decoded a chunk
    at a time (the whole file was read and decoded at once: a corpus of gigabytes held twice in
    memory). The codec is the first of ``codecs_to_try`` that decodes the first chunk; the lines
    split as ``_split_lines`` splits them (at LF, or in a file without one at CR; such a file is
    held whole, as a UTF-8 one is)."""
    chunk = f.read(WIDE_CHUNK)
    for codec in codecs_to_try:
        decoder = codecs.getincrementaldecoder(codec)()
        try:
            text = decoder.decode(chunk, final=len(chunk) < WIDE_CHUNK)
            break
        except UnicodeDecodeError:
            continue
    else:
        raise _not_wide(path, codecs_to_try)
    lf_seen = False
    while True:
        if "\n" in text:
            lf_seen = True
            cut = text.rfind("\n") + 1
            yield from _split_lines(text[:cut])
            text = text[cut:]
        if len(chunk) < WIDE_CHUNK:  # the last read
            break
        chunk = f.read(WIDE_CHUNK)
        try:
            text += decoder.decode(chunk, final=len(chunk) < WIDE_CHUNK)
        except UnicodeDecodeError as e:
            raise _not_wide(path, [codec]) from e
    if text:
        # After the last LF, the last line (a CR in it stays); in a file without any LF, the
        # whole file, split at CR.
        yield from ([text] if lf_seen else _split_lines(text))


def _not_wide(path: Path, codecs_tried: list[str]) -> DataError:
    name = " or ".join(c.upper() for c in codecs_tried)
    return DataError(f"{path}: starts with a {name} byte order mark but is not {name} text; "
                     "save it as UTF-8")


def _wide_text(path: Path, data: bytes, codecs_to_try: list[str]) -> str:
    """A file that starts with a UTF-32 or UTF-16 byte order mark, decoded (``bom_codecs``: UTF-32
    first, as its little-endian mark starts with UTF-16's)."""
    for codec in codecs_to_try:
        try:
            return data.decode(codec)
        except UnicodeDecodeError:
            pass
    raise _not_wide(path, codecs_to_try)


def _split_lines(text: str) -> list[str]:
    """``text``'s lines, ends kept: at each LF, or, in a file with no LF (an old Mac's), at each
    CR. A CR inside a quoted csv field then ends a piece that the csv reader joins again, as it
    does a quoted field's line break in a CRLF file."""
    return [line for line in re.split(r"(?<=\n)" if "\n" in text else r"(?<=\r)", text) if line]


def _not_utf8(path: Path, lineno: int, byte: int) -> DataError:
    return DataError(f"{path}, line {lineno}: not UTF-8 text (byte {byte} of the file); save it as UTF-8")


def _read_json(path: Path) -> Any:
    _require_file(path)
    return _loads(_json_text(path), path)


def _json_text(path: Path) -> str:
    """The text of a JSON file: UTF-8 (a BOM dropped), or UTF-16/UTF-32 with their BOM.

    Raises:
        DataError: it cannot be opened, or is not text in one of them.
    """
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise DataError(f"{path}: cannot be opened: {e}") from e
    from indexer.parsing import bom_codecs

    if wide := bom_codecs(raw[:4]):
        return _wide_text(path, raw, wide)
    start = len(codecs.BOM_UTF8) if raw.startswith(codecs.BOM_UTF8) else 0
    try:
        return raw[start:].decode("utf-8")
    except UnicodeDecodeError as e:
        raise _not_utf8(path, raw.count(b"\n", 0, start + e.start) + 1, start + e.start) from e


def _loads(text: str, path: Path, lineno: int | None = None) -> Any:
    """``text`` (the whole of ``path``, or its line ``lineno``) parsed as JSON.

    Raises:
        DataError: invalid JSON, or JSON nested too deeply to read (a ``RecursionError``
            traceback from `facet eval` before), said as `facet cluster` says it
            (``app.services.clustering.json_too_deep``).
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}, line {lineno or e.lineno}: invalid JSON ({_json_problem(e)})") from e
    except RecursionError as e:
        from app.services.clustering import json_too_deep  # services, only for this message

        raise json_too_deep(f"{path}, line {lineno}" if lineno else str(path)) from e


def _json_problem(error: json.JSONDecodeError) -> str:
    """What ``json`` found wrong, in words with the column: ``unterminated string starting at
    column 18`` (it read "invalid JSON: Invalid control character at", the position cut off)."""
    what = error.msg.removesuffix(" at")
    return f"{what[:1].lower()}{what[1:]} at column {error.colno}"


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with _open_text(path) as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            # Without its line end: an unterminated string ran into the newline ("invalid
            # control character") instead of being said to be unterminated.
            obj = _loads(line.rstrip("\r\n"), path, lineno)
            if not isinstance(obj, dict):
                raise DataError(f"{path}, line {lineno}: expected a JSON object, got {type(obj).__name__}")
            yield lineno, obj


def _str_field(obj: dict[str, Any], key: str, path: Path, lineno: int, *, required: bool = True,
               number: bool = False) -> str:
    """Field ``key`` of a JSON line as text; ``number``: an integer is read as its digits (an
    ``_id``: some BEIR sets write numeric ids). A text or title that is a number is refused as a
    list is (``"text": 5`` was embedded as "5")."""
    if required and key not in obj:  # "must be a string, got None" hid an `id` written for `_id`
        keys = ", ".join(str(k) for k in obj) or "none"
        raise DataError(f"{path}, line {lineno}: no {key!r} field (its keys: {keys:.80})")
    value = obj.get(key)
    if value is None and not required:
        return ""
    if number and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise DataError(f"{path}, line {lineno}: field {key!r} must be a string, got {value!r:.60}")
    return _unicode(value, f"field {key!r}", path, lineno)


def _unicode(value: str, what: str, path: Path, lineno: int) -> str:
    """``value``, refused where it is no Unicode text: JSON's ``"\\ud83d"`` (an emoji cut in
    half, common in scraped data) loads as an unpaired surrogate, which failed the run on a
    UnicodeEncodeError traceback once the model had loaded (the embedding cache's key)."""
    from embedders.contract import check_encodable
    from embedders.errors import InvalidInputError

    try:
        check_encodable(value, what)
    except InvalidInputError as e:
        raise DataError(f"{path}, line {lineno}: {e}") from None
    return value


def _id_field(obj: dict[str, Any], path: Path, lineno: int) -> str:
    """A record's ``_id``: a blank one was accepted, though no judgement (a qrels tsv's column)
    can name it, so such a document was only ever a distractor and such a query never scored."""
    value = _str_field(obj, "_id", path, lineno, number=True)
    if not value.strip():
        raise DataError(f"{path}, line {lineno}: blank _id {value!r}; give every record an id")
    return value


def _float(value: str, what: str, path: Path, lineno: int, header_hint: str = "",
           first_line: int = 1) -> float:
    """``value`` as a finite number; ``header_hint`` is added when the file's first line's
    (``first_line``: the first that is not blank) is not a number (a header row the format does
    not take)."""
    try:
        if "_" in value:  # (Python's digit grouping: "1_0" read as 10, a typo of 1.0 or 1,0)
            raise ValueError(value)
        number = float(value)
    except ValueError as e:
        hint = f" ({header_hint})" if lineno == first_line and header_hint else ""
        raise DataError(f"{path}, line {lineno}: {what} {_cut(value)} is not a number{hint}") from e
    if not math.isfinite(number):  # nan, inf: a nan metric, and a bare NaN in results.json
        raise DataError(f"{path}, line {lineno}: {what} {_cut(value)} is not a finite number")
    return number


# -- STS ------------------------------------------------------------------------------


def _check_pairs(pairs: list[StsPair], path: Path) -> list[StsPair]:
    """``pairs`` if a Spearman correlation can be computed on them (checked before anything
    is encoded): at least two pairs, and gold scores that are not all equal."""
    if len(pairs) < 2:
        raise DataError(f"{path}: only 1 sentence pair; a Spearman correlation needs at least 2")
    if len({p.score for p in pairs}) < 2:
        raise DataError(
            f"{path}: every gold score is {pairs[0].score:g}; a Spearman correlation needs scores that differ"
        )
    return pairs


# The longest sentence an STS csv may hold: the csv module's default field limit. That limit is
# process-wide and the indexer raises it (indexer.parsing.allow_long_csv_fields), so the loader
# bounds fields itself: a file reads the same whether or not something was indexed before.
_STS_FIELD_LIMIT = 131_072


def _sts_field_too_long(p: Path, lineno: int) -> DataError:
    return DataError(f"{p}, line {lineno}: a field of over {_STS_FIELD_LIMIT:,} characters: "
                     "an unbalanced quote that reads on over the lines after it, or a sentence "
                     "far too long for a similarity pair")


def load_sts_csv(path: str | Path) -> list[StsPair]:
    """Read an STS-B style csv: no header, ``sentence1,sentence2,score`` (quoted where needed;
    a space after a comma is allowed, and each sentence is stripped of surrounding spaces).

    Raises:
        DataError: a malformed row (file and line named), text that is not UTF-8, fewer than
            two pairs, or one gold score for every pair (Spearman is undefined then).
    """
    p = Path(path)
    pairs: list[StsPair] = []
    with _open_text(p) as f:
        # Spaces after a comma are skipped: without that, in `"a", "b, c", 4.8` the second
        # quote was not read as one, so its comma split the sentence and the quote marks
        # became text.
        last: list[str] = [""]  # the last line read (a quote opened on the file's last line)

        def remembered(lines: Iterator[str]) -> Iterator[str]:
            for line in lines:
                last[0] = line
                yield line

        reader = csv.reader(remembered(f), skipinitialspace=True)
        lineno = 0
        try:
            for row in reader:
                start, lineno = lineno + 1, reader.line_num
                if any("\n" in c or "\r" in c for c in row):  # (a quote left open ran on)
                    raise _runaway_quote(p, start, lineno, reader)
                if not row or all(not c.strip() for c in row):
                    continue
                if any(len(c) > _STS_FIELD_LIMIT for c in row):
                    raise _sts_field_too_long(p, lineno)
                after = _text_after_quote(last[0]) if start == lineno else None
                if after is not None:
                    raise DataError(
                        f"{p}, line {lineno}: a sentence opens with a quote and goes on after its "
                        f"closing quote ({after.strip()[:40]!r}), so a csv reader drops its quote "
                        "marks; quote the whole sentence and double the quotes inside it "
                        '("""Hello"" she said",...)')
                if len(row) != 3 and last[0].count('"') % 2:
                    # A quote opened on the file's last line, without its line end: one line,
                    # so said as "got 1 field; quote sentences that contain commas".
                    raise _runaway_quote(p, start, lineno, reader)
                if len(row) != 3:
                    raise DataError(
                        f"{p}, line {lineno}: expected 3 fields (sentence1,sentence2,score), "
                        f"got {len(row)}; " + _sts_separator_hint(row)
                    )
                s1, s2, score = (c.strip() for c in row)  # both sentences alike (`"a" , b`)
                if blank(s1) or blank(s2):
                    raise DataError(f"{p}, line {lineno}: empty sentence")
                if not score:  # not "a header line?": `a,b,` is a pair without its score
                    raise DataError(f"{p}, line {lineno}: empty score (the third field)")
                pairs.append(StsPair(s1, s2, _float(score, "score", p, lineno, "a header line? remove it: "
                                                    "the format has none")))
        except csv.Error as e:
            if "field larger than field limit" in str(e):
                # (Python's words; most likely a quote never closed, reading on to the end)
                raise _sts_field_too_long(p, lineno + 1) from e
            raise _csv_error(p, reader.line_num, e, "malformed csv") from e
    if not pairs:
        raise DataError(f"{p}: no sentence pairs found")
    return _check_pairs(pairs, p)


def _text_after_quote(line: str) -> str | None:
    """The text that follows a field's closing quote on ``line`` before its comma
    (``"Hello" she said,...``: " she said"), or None where every quoted field ends at its
    closing quote (spaces after it allowed, as in ``"a" , b``). Python's csv module reads such a
    field with its quote marks dropped ("Hello she said"), and an STS pair was scored on a
    sentence the file does not hold."""
    pos, end = 0, len(line.rstrip("\r\n"))
    while pos < end:
        while pos < end and line[pos] == " ":
            pos += 1
        if pos < end and line[pos] == '"':
            j = pos + 1
            while j < end:
                if line[j] == '"':
                    if line[j + 1:j + 2] == '"':
                        j += 2
                        continue
                    break
                j += 1
            if j >= end:  # never closed: the runaway quote's own message
                return None
            rest = line[j + 1:end]
            tail = rest.split(",", 1)[0]
            if tail.strip(" \t"):
                return tail
            pos = j + 1 + len(tail) + 1
        else:
            comma = line.find(",", pos)
            if comma < 0:
                return None
            pos = comma + 1
    return None


def _runaway_quote(path: Path, start: int, end: int, reader: Any) -> DataError:
    """An STS row read over lines ``start`` to ``end``: a quote opened on line ``start`` and
    not closed on it, so the csv module read the newlines after it as text (a pair per line
    is the format): 26 pairs read as one, the score computed on the rest without a word, or,
    never closed, the last line blamed for "1 field"."""
    try:
        to_end = next(reader, None) is None  # (nothing after: the quote is never closed)
    except (csv.Error, DataError):  # (a bad line after it: the quote's is the first to fix)
        to_end = False
    where = "to the end of the file" if to_end else f"to line {end}"
    return DataError(f"{path}, line {start}: an unbalanced quote: a sentence that opens with a quote "
                     f"runs on {where}, reading the lines between as its text (a pair is one "
                     'line); close the quote on its line, double a quote inside a quoted sentence '
                     '(""), or remove it')


def _csv_error(path: Path, lineno: int, error: csv.Error, what: str) -> DataError:
    """``error`` of the csv module said in the user's terms where it can be: a carriage return
    alone inside a line (a file saved with mixed or old Mac line ends) was Python's "new-line
    character seen in unquoted field - do you need to open the file in universal-newline mode?"."""
    if "new-line character seen in unquoted field" in str(error):
        return DataError(f"{path}, line {lineno}: a carriage return inside a field; re-save the file with "
                         "plain line ends, or quote the field")
    return DataError(f"{path}, line {lineno}: {what}: {error}")


def _sts_separator_hint(row: list[str]) -> str:
    """Why a row did not split into three comma-separated fields: a file separated by tabs or
    semicolons (a spreadsheet's "save as") read as one field, or a comma inside a sentence."""
    for sep, name in (("\t", "tab"), (";", "semicolon")):
        if len(row) < 3 and sum(field.count(sep) for field in row) >= 2:
            return f"the line looks {name}-separated; the STS format is comma-separated (sentence1,sentence2,score)"
    if len(row) > 3 and _is_number(row[2].strip()):  # extra columns after the score, not a comma in a sentence
        return ("the first three fields read as sentence1,sentence2,score and more follow: an sts file has "
                "exactly these three columns, in this order, with no header (no option picks other columns); "
                "remove the extra columns (or quote a sentence that contains commas)")
    return "quote sentences that contain commas"


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def load_sick(path: str | Path, split: str = "TEST") -> list[StsPair]:
    """Read SICK.txt (tab-separated, header); keep rows whose ``SemEval_set`` is ``split``.

    Raises:
        DataError: as ``load_sts_csv``.
    """
    p = Path(path)
    needed = ("sentence_A", "sentence_B", "relatedness_score", "SemEval_set")
    pairs: list[StsPair] = []
    with _open_text(p) as f:
        header_line = next(f, "")
        header = header_line.rstrip("\r\n").split("\t")
        missing = [c for c in needed if c not in header]
        if missing:
            raise DataError(f"{p}, line 1: header lacks column(s) {', '.join(missing)}; found {header}")
        col = {c: header.index(c) for c in needed}
        for lineno, line in enumerate(f, start=2):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != len(header):
                raise DataError(f"{p}, line {lineno}: expected {len(header)} tab-separated fields, got {len(fields)}")
            if fields[col["SemEval_set"]].strip().upper() != split.upper():
                continue
            s1, s2 = fields[col["sentence_A"]], fields[col["sentence_B"]]
            if blank(s1) or blank(s2):
                raise DataError(f"{p}, line {lineno}: empty sentence")
            pairs.append(StsPair(s1, s2, _float(fields[col["relatedness_score"]], "relatedness_score", p, lineno)))
    if not pairs:
        raise DataError(f"{p}: no rows with SemEval_set == {split!r}")
    return _check_pairs(pairs, p)


# -- retrieval -------------------------------------------------------------------------


def load_beir(folder: str | Path, split: str = "test") -> BeirData:
    """Read a BEIR folder. Queries without judgements are dropped; judgements on unknown ids are
    dropped with a warning (some published sets have a few). A judged query with no relevant
    document (every grade 0 or below) is kept, with a warning: it scores 0 in nDCG and Recall
    and counts in their means, as in trec_eval/pytrec_eval and so BEIR.

    Raises:
        DataError: a malformed line, a duplicate ``_id`` (corpus or queries) or judgement (the
            same query and document twice), a blank document (title and text) or query, a
            grade that is not a finite number (file and line named); no usable judgement, or
            none above 0; a header-less qrels line of four fields whose second is not TREC's
            iteration column (``0`` or ``Q0``).
    """
    root = Path(folder)
    if not root.is_dir():
        raise DataError(f"{root}: BEIR folder not found (expected corpus.jsonl, queries.jsonl, qrels/)")
    corpus: dict[str, tuple[str, str]] = {}
    # An empty corpus or queries file was blamed on the qrels ("no usable relevance judgements").
    path = root / "corpus.jsonl"
    for lineno, obj in _jsonl(path):
        doc_id = _id_field(obj, path, lineno)
        title = _str_field(obj, "title", path, lineno, required=False)
        text = _str_field(obj, "text", path, lineno)
        if doc_id in corpus:
            raise DataError(f"{path}, line {lineno}: duplicate _id {doc_id!r}")
        if blank(title) and blank(text):
            raise DataError(f"{path}, line {lineno}: empty document (title and text are blank)")
        corpus[doc_id] = (title, text)
    if not corpus:
        raise DataError(f"{path}: no documents (the file is empty)")
    queries: dict[str, str] = {}
    path = root / "queries.jsonl"
    for lineno, obj in _jsonl(path):
        query_id = _id_field(obj, path, lineno)
        text = _str_field(obj, "text", path, lineno)
        if query_id in queries:
            raise DataError(f"{path}, line {lineno}: duplicate _id {query_id!r}")
        if blank(text):
            raise DataError(f"{path}, line {lineno}: empty query (text is blank)")
        queries[query_id] = text
    if not queries:
        raise DataError(f"{path}: no queries (the file is empty)")
    qrels: dict[str, dict[str, float]] = {}
    path = root / "qrels" / f"{split}.tsv"
    unknown = 0
    unknown_ids: dict[str, None] = {}  # the ids named but not found, in order, for the warning
    judged: set[str] = set()
    first_judgement: tuple[str, str] | None = None
    first_line: dict[tuple[str, str], int] = {}  # (query, doc) -> the line that judged it
    columns: tuple[int, int, int] | None = None  # query, doc, grade: where a header names them
    header: list[str] = []
    first = 0  # the first line that is not blank: the header's, if there is one
    with _open_text(path) as f:
        for lineno, line in enumerate(f, start=1):
            if columns is not None and "\t" in line:
                # Read by the header's names, an empty last cell (a blank `note`) is a field:
                # stripping the line first dropped it, and the line was refused as too short.
                fields = line.strip(" \r\n\f\v").split("\t")  # (blanks stripped but tabs)
                while len(fields) > len(header) and not fields[-1].strip():
                    fields.pop()  # (a trailing tab past the header's columns, as exports leave)
            else:
                fields = line.strip().split("\t") if "\t" in line else line.split()
            if not fields or not line.strip():
                continue
            if not first:  # (a blank line above a header made it a judgement, "score 'score'")
                first = lineno
                named, twice = _qrels_columns(fields)
                if named is None and twice:  # its lines were then read by position, misread
                    raise DataError(f"{path}, line {lineno}: the header names {twice!r} more than once; "
                                    "name each of query-id, corpus-id and score once")
                if named is not None or fields[0] in _QRELS_QUERY_NAMES:
                    header = fields
                    if named is not None and fields != list(_QRELS_STANDARD_HEADER):
                        columns = named
                        extra = [c for i, c in enumerate(fields) if i not in named]
                        if extra:
                            logger.warning("%s: line %d names column(s) %s besides query-id, corpus-id and "
                                           "score; ignored", path, lineno, ", ".join(repr(c) for c in extra))
                    continue
            if columns is not None:  # read by the header's names; every line as wide as it
                if len(fields) != len(header):
                    raise DataError(
                        f"{path}, line {lineno}: expected {len(header)} field(s) as line {first} names them "
                        f"({'<TAB>'.join(header)!r}), got {len(fields)}" + _qrels_separator_hint(fields)
                    )
                fields = [fields[columns[0]], fields[columns[1]], fields[columns[2]]]
            elif len(fields) == 4:
                if fields[1] not in ("0", "Q0"):  # a fourth column, not TREC's `qid 0 docid grade`
                    raise DataError(
                        f"{path}, line {lineno}: 4 fields, and the 2nd ({_cut(fields[1])}) is not TREC's "
                        f"iteration column (0 or Q0); qrels are read as {_QRELS_LAYOUTS}"
                    )
                fields = [fields[0], fields[2], fields[3]]
            if len(fields) != 3:
                raise DataError(
                    f"{path}, line {lineno}: expected 'query-id<TAB>corpus-id<TAB>score', got {len(fields)} field(s)"
                    + _qrels_separator_hint(fields)
                )
            qid, did, grade = fields
            score = _float(grade, "score", path, lineno, "a header line? name its first column query-id, or "
                           "remove it", first_line=first)
            judged.add(qid)
            first_judgement = first_judgement or (qid, did)
            if (qid, did) in first_line:
                raise DataError(
                    f"{path}, line {lineno}: duplicate judgement of query {qid!r} and document {did!r} "
                    f"(first on line {first_line[qid, did]})"
                )
            first_line[qid, did] = lineno
            if qid not in queries or did not in corpus:
                unknown += 1
                for kind, known, name in (("query", queries, qid), ("document", corpus, did)):
                    described = f"{kind} {name!r}"
                    if name not in known:
                        unknown_ids[described] = None
                continue
            qrels.setdefault(qid, {})[did] = score
    dropped = len(judged) - len(qrels)
    if unknown:
        logger.warning(
            "%s: %d judgement(s) name a query or document that does not exist (not found: %s); ignored%s",
            path,
            unknown,
            _first_few(list(unknown_ids)),
            f" ({dropped} of {len(judged)} judged queries left with none, left out)" if dropped and qrels else "",
        )
    if not qrels:
        if first_judgement is None:
            raise DataError(f"{path}: no usable relevance judgements (the file holds none)")
        # Say which ids were compared: a mismatch of id schemes (`q1` vs `1`) is then plain.
        qid, did = first_judgement
        raise DataError(
            f"{path}: no usable relevance judgements: none of its {unknown} names both a query of "
            f"queries.jsonl and a document of corpus.jsonl (the first names query {qid!r} and document "
            f"{did!r}; queries.jsonl has ids such as {next(iter(queries))!r}, corpus.jsonl such as "
            f"{next(iter(corpus))!r})"
        )
    no_relevant = sorted(q for q, rel in qrels.items() if not any(grade > 0 for grade in rel.values()))
    if len(no_relevant) == len(qrels):
        raise DataError(f"{path}: no judgement above 0; every query would score 0 (no relevant document)")
    if no_relevant:
        logger.warning(
            "%s: %d of %d judged queries have no relevant document (every grade <= 0; first %r); "
            "each scores 0 in nDCG and Recall and counts in their means, as in trec_eval and BEIR",
            path,
            len(no_relevant),
            len(qrels),
            no_relevant[0],
        )
    return BeirData(corpus, {q: queries[q] for q in qrels}, qrels, unknown, dropped)


_QRELS_QUERY_NAMES = ("query-id", "query_id", "qid")
_QRELS_STANDARD_HEADER = ("query-id", "corpus-id", "score")
_QRELS_LAYOUTS = ("'query-id<TAB>corpus-id<TAB>score' (a header line naming the columns query-id, corpus-id and "
                  "score may add others), or TREC's 'query-id 0 corpus-id score'")


def _qrels_columns(header: list[str]) -> tuple[tuple[int, int, int] | None, str | None]:
    """Where a qrels header line names the query, document and grade columns (BEIR's names
    ``query-id``, ``corpus-id``, ``score``), or None if it does not name all three once; and
    the first of those names it gives more than once (``query-id corpus-id score score``), else
    None."""
    at = [[i for i, c in enumerate(header) if c in names]
          for names in (_QRELS_QUERY_NAMES, ("corpus-id", "corpus_id"), ("score",))]
    twice = next((header[found[0]] for found in at if len(found) > 1), None)
    if any(len(found) != 1 for found in at):
        return None, twice
    return (at[0][0], at[1][0], at[2][0]), None


def _first_few(items: list[str], n: int = 3) -> str:
    """``items`` joined, the first ``n`` of them and how many in all where there are more."""
    shown = ", ".join(items[:n])
    return f"{shown}, ... ({len(items)} in all)" if len(items) > n else shown


def _qrels_separator_hint(fields: list[str]) -> str:
    """Why a qrels line split into too few fields: a comma-separated file (a spreadsheet's csv)."""
    if len(fields) < 3 and sum(f.count(",") for f in fields) >= 2:
        return "; the line looks comma-separated; qrels are tab-separated"
    return ""


# -- clustering ------------------------------------------------------------------------


_GOAL_REPLACED: contextvars.ContextVar[bool] = contextvars.ContextVar("goal_replaced", default=False)


@contextlib.contextmanager
def goal_replaced() -> Iterator[None]:
    """Within it ``load_goalex`` does not warn of a data.json with no ``goal``: the caller
    embeds under an instruction of its own (or none, chosen), never the goal."""
    token = _GOAL_REPLACED.set(True)
    try:
        yield
    finally:
        _GOAL_REPLACED.reset(token)


def load_goalex(folder: str | Path, instruction: str | None = None, name: str | None = None) -> ClusteringView:
    """Read a GoalEx folder (``data.json`` + ``labels.json``).

    Args:
        folder: the folder.
        instruction: overrides the ``goal`` from data.json as the instruction.
        name: view name; default the folder name.
    """
    root = Path(folder)
    data_path, labels_path = root / "data.json", root / "labels.json"
    data = _read_json(data_path)
    labels_obj = _read_json(labels_path)
    if not isinstance(data, dict) or not isinstance(data.get("texts"), list):
        raise DataError(f"{data_path}, line 1: expected an object with a 'texts' list")
    if not isinstance(labels_obj, dict) or not isinstance(labels_obj.get("labels"), list):
        raise DataError(f"{labels_path}, line 1: expected an object with a 'labels' list")
    texts = data["texts"]
    labels = labels_obj["labels"]
    for i, t in enumerate(texts):
        if not isinstance(t, str) or blank(t):
            raise DataError(
                f"{data_path}, line {_json_item_line(data_path, 'texts', i)}: texts[{i}] is not a non-empty string"
            )
        try:
            t.encode("utf-8")
        except UnicodeEncodeError:  # its line looked for only then (a read of the whole file)
            _unicode(t, f"texts[{i}]", data_path, _json_item_line(data_path, "texts", i))
    for i, label in enumerate(labels):
        if isinstance(label, bool) or not isinstance(label, int):
            raise DataError(
                f"{labels_path}, line {_json_item_line(labels_path, 'labels', i)}: "
                f"labels[{i}] = {_cut(label)} is not an integer"
            )
    if len(texts) != len(labels):
        raise DataError(f"{labels_path}, line 1: {plural(len(labels), 'label')} for "
                        f"{plural(len(texts), 'text')} in {data_path}")
    if len(set(labels)) < 2:
        raise DataError(f"{labels_path}, line 1: needs at least two distinct labels to cluster")
    goal = data.get("goal")
    if instruction is None:
        if goal is not None and not isinstance(goal, str):
            raise DataError(f"{data_path}, line 1: 'goal' must be a string")
        instruction = _unicode(goal, "'goal'", data_path, 1) if goal else None
        # Clustered under no instruction without a word (a "Goal" key, a typo); not said where
        # the caller replaces the goal anyway (--task-instruction, --instruction TASK=...).
        if instruction is None and not _GOAL_REPLACED.get():
            near = [k for k in data if isinstance(k, str) and k != "goal" and k.strip().lower() == "goal"]
            logger.warning(
                "%s: %s, so the clustering runs with no instruction unless --task-instruction or "
                "--instruction TASK=TEXT gives one%s",
                data_path,
                "no \"goal\"" if "goal" not in data else "its \"goal\" is empty",
                f" (it has {near[0]!r}; the key is \"goal\", lower case)" if near else "",
            )
    names = labels_obj.get("class_descriptions")
    label_names = [str(n) for n in names] if isinstance(names, list) else []
    return ClusteringView(name or root.name, list(texts), list(labels), instruction, label_names)


def _json_item_line(path: Path, key: str, index: int) -> int:
    """Best-effort line number of ``key``'s ``index``-th list item in a JSON file (1 if unknown)."""
    try:
        text = _json_text(path)  # as it was read: a UTF-16 file's error was a UnicodeDecodeError
    except DataError:
        return 1
    start = text.find(f'"{key}"')
    if start < 0:
        return 1
    decoder = json.JSONDecoder()
    pos = text.find("[", start) + 1
    for i in range(index + 1):
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if i == index:
            return text.count("\n", 0, pos) + 1
        try:
            _, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            return 1
    return 1


def load_multiview(
    folders: Sequence[str | Path], instructions: Sequence[str | None] | None = None
) -> list[ClusteringView]:
    """Read two or more GoalEx folders that label the same texts (same order).

    Raises:
        DataError: fewer than two views, or a view's texts differ from the first view's.
    """
    if len(folders) < 2:
        raise DataError("multi-view clustering needs at least two GoalEx folders over the same texts")
    if instructions is not None and len(instructions) != len(folders):
        raise DataError(f"{len(instructions)} instructions for {len(folders)} views")
    views = [load_goalex(f, instructions[i] if instructions else None) for i, f in enumerate(folders)]
    check_same_texts(views)
    return views


def check_same_texts(views: Sequence[ClusteringView]) -> None:
    first = views[0]
    for view in views[1:]:
        if len(view.texts) != len(first.texts):
            raise DataError(
                f"view {view.name!r} has {plural(len(view.texts), 'text')}, view {first.name!r} has "
                f"{len(first.texts)}; multi-view sets must label identical texts"
            )
        for i, (a, b) in enumerate(zip(first.texts, view.texts, strict=True)):
            if a != b:
                raise DataError(
                    f"view {view.name!r} text {i} differs from view {first.name!r}: "
                    f"{b!r:.50} vs {a!r:.50}; multi-view sets must label identical texts "
                    "in the same order"
                )


def write_goalex(view: ClusteringView, folder: str | Path) -> Path:
    """Write a view as a GoalEx folder (so a built set can be read back like any other)."""
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    (root / "data.json").write_text(json.dumps({"goal": view.instruction or "", "texts": view.texts}, indent=1))
    (root / "labels.json").write_text(
        json.dumps({"class_descriptions": view.label_names, "labels": view.labels}, indent=1)
    )
    return root


CLINC_INTENT_INSTRUCTION = (
    "Identify the specific intent of this request to a virtual assistant: the exact action the user wants"
)
CLINC_DOMAIN_INSTRUCTION = (
    "Identify the broad domain of this request to a virtual assistant, such as banking, travel or cooking"
)


def build_clinc_multiview(
    data_path: str | Path,
    domains_path: str | Path,
    *,
    split: str = "test",
    n: int | None = 2000,
    seed: int = 0,
    intent_instruction: str = CLINC_INTENT_INSTRUCTION,
    domain_instruction: str = CLINC_DOMAIN_INSTRUCTION,
) -> list[ClusteringView]:
    """Build the intent and domain views of the same CLINC150 texts.

    Args:
        data_path: ``data_full.json`` (splits of ``[text, intent]`` items).
        domains_path: ``domains.json`` mapping domain -> list of intents.
        split: which split to use (out-of-scope items are never included).
        n: size of the seeded subsample; None keeps the whole split.
        seed: subsample seed.
    """
    dp, mp = Path(data_path), Path(domains_path)
    data = _read_json(dp)
    domains = _read_json(mp)
    if not isinstance(data, dict) or not isinstance(data.get(split), list):
        raise DataError(f"{dp}, line 1: no {split!r} split (found {sorted(data) if isinstance(data, dict) else '?'})")
    if not isinstance(domains, dict) or not all(isinstance(v, list) for v in domains.values()):
        raise DataError(f"{mp}, line 1: expected an object mapping domain -> list of intents")
    intent_to_domain: dict[str, str] = {}
    for domain, intents in domains.items():
        for intent in intents:
            if intent in intent_to_domain:
                raise DataError(
                    f"{mp}: intent {intent!r} is listed under both {intent_to_domain[intent]!r} and {domain!r}"
                )
            intent_to_domain[str(intent)] = str(domain)
    items: list[tuple[str, str]] = []
    for i, item in enumerate(data[split]):
        if not (isinstance(item, list) and len(item) == 2 and all(isinstance(x, str) for x in item)):
            raise DataError(
                f"{dp}, line {_json_item_line(dp, split, i)}: {split}[{i}] must be [text, intent], got {item!r:.60}"
            )
        if item[1] not in intent_to_domain:
            raise DataError(
                f"{dp}, line {_json_item_line(dp, split, i)}: intent {item[1]!r} of {split}[{i}] "
                f"is in no domain of {mp}"
            )
        items.append((item[0], item[1]))
    if n is not None and n < len(items):
        items = random.Random(seed).sample(items, n)
    intents = sorted({intent for _, intent in items})
    domain_names = sorted({intent_to_domain[intent] for _, intent in items})
    texts = [t for t, _ in items]
    intent_ids = {name: i for i, name in enumerate(intents)}
    domain_ids = {name: i for i, name in enumerate(domain_names)}
    return [
        ClusteringView("intent", texts, [intent_ids[i] for _, i in items], intent_instruction, intents),
        ClusteringView(
            "domain",
            list(texts),
            [domain_ids[intent_to_domain[i]] for _, i in items],
            domain_instruction,
            domain_names,
        ),
    ]


# -- classification --------------------------------------------------------------------


def load_labelled_texts(
    path: str | Path,
    *,
    delimiter: str = ",",
    text_column: str = "text",
    label_column: str = "label",
) -> LabelledTexts:
    """Read a delimited file with a header row naming ``text_column`` and ``label_column``."""
    p = Path(path)
    texts: list[str] = []
    labels: list[str] = []
    # A long text reads as the indexer and the clustering read it, whatever ran before in this
    # process (the csv limit is process-wide; it said "field larger than field limit" only in a
    # process that had not indexed yet).
    from indexer.parsing import allow_long_csv_fields

    allow_long_csv_fields()
    with _open_text(p) as f:
        reader = csv.reader(f, delimiter=delimiter)
        try:
            header = next(reader, None)
            if header is None:
                raise DataError(f"{p}: empty file (expected a header with {text_column!r} and {label_column!r})")
            missing = [c for c in (text_column, label_column) if c not in header]
            if missing:
                raise DataError(f"{p}, line 1: header lacks column(s) {', '.join(missing)}; found {header}")
            ti, li = header.index(text_column), header.index(label_column)
            for row in reader:
                lineno = reader.line_num
                if not row:
                    continue
                if len(row) != len(header):
                    raise DataError(
                        f"{p}, line {lineno}: expected {len(header)} fields separated by {delimiter!r}, got {len(row)}"
                    )
                if not row[ti].strip() or not row[li].strip():
                    raise DataError(f"{p}, line {lineno}: empty {text_column if not row[ti].strip() else label_column}")
                texts.append(row[ti])
                labels.append(row[li].strip())
        except csv.Error as e:
            raise _csv_error(p, reader.line_num, e, "malformed file") from e
    if not texts:
        raise DataError(f"{p}: no rows after the header")
    return LabelledTexts(texts, labels)
