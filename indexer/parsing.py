"""Turn a source (folder, file, BEIR corpus) into documents, one parser per format.

Every parser yields either a ``ParsedDocument`` or a ``DocumentError``; a bad file or a
bad line never stops the walk, so the caller can record the error and go on.

Decisions on bad input:

* **Binary data** (a NUL byte or more than 10% control characters in the first 8 KiB)
  in a text format is rejected: ``DocumentError`` "looks binary".
* **Text that is not UTF-8** is decoded in its detected encoding, with a warning naming
  it (once per file, on a csv/jsonl/json file's first record): the charset an HTML ``<meta>``
  or XML declaration names when it decodes the bytes, else cp1252 (the superset of Latin-1
  that Windows editors write) when its non-ASCII letters read as Western European words that
  way (cp1254 when those words are Turkish: ``Ýstanbul'da ýlýk`` is ``İstanbul'da ılık``),
  else charset-normalizer's guess (cp1251, cp1250, Shift-JIS...), which for short text is
  rechecked against a Cyrillic (cp1251, KOI8-R, mac_cyrillic) or GBK reading. A file with a
  UTF-32 or UTF-16 byte order mark is read as UTF-32 or UTF-16 (UTF-32's first: its little
  endian mark starts with UTF-16's). UTF-8 with a few bad bytes (as many valid
  multi-byte characters as bad bytes), or bytes nothing fits, are read as UTF-8 with U+FFFD
  replacement characters and a warning naming the first bad byte offset and the count; when
  more than 20% of the characters would be replacements the file is rejected as not text. A
  large file read in a stream is judged by the same rule, counted in pieces.
* **Field names** (csv headers, jsonl/json keys) are stored in Unicode's composed form (NFC),
  and the text column is matched so: a header written decomposed (macOS) matches a name typed
  composed. The usual text, id and title names match them in any case (a header ``ID,Title,Text``),
  the exact spelling first; ``--text-column`` matches exactly.
* **Empty** documents (nothing but whitespace and invisible format characters, Unicode
  category Cf: a zero-width space, a BOM, a soft hyphen; control, private-use and combining
  characters alone: ``embedders.scripts.blank``) are rejected: there is nothing to embed.
* **Too large** documents (over ``max_bytes``, checked before reading) are rejected with
  their size and the limit, so a 50 MB log cannot stall a run. So is a .docx, .pdf or HTML
  file whose extracted text is over ``max_bytes`` in UTF-8 (compressed, a file under the limit
  can hold far more text): rejected, not truncated, as a jsonl/csv record over it is. A PDF's
  pages are not all read once their text is over it.
* **Deeply nested HTML** is read in time linear in its size at any depth.
* **Malformed jsonl lines** are errors keyed ``path#L<line>`` with the line number; the
  other lines of the file are indexed. JSON nested deeper than Python's json reader goes (its
  recursion limit, about a thousand levels) is such an error too ("nested too deeply to read"),
  for a jsonl line or a whole .json file, not a crash of the run.
* **A repeated id** in a jsonl/json file: the later record is an error keyed ``path#L<line>``
  (``path#item<i>``) naming both places and that the first is the one indexed (``_Repeats``).
* **Metadata** keeps strings, numbers, booleans and lists of them; an object or a list holding
  objects, lists or null is left out with a warning, once per file per field
  (``_scalar_metadata``). A Markdown file's YAML front matter fields are its metadata by the
  same rules (``_front_matter_metadata``), its plain values as written (``_front_matter_loader``:
  ``012345``, ``1.10``, ``no`` are text); front matter that is not YAML is a warning; its
  ``title`` starts the text (``_titled``), as an HTML page's ``<title>`` does.
* **Malformed csv rows** are errors keyed ``path#row<n>`` naming their line; the rows after
  them are still read. A field may be as long as the file (a field over the document limit
  is that row's error), not only the csv module's default 128 Ki characters. A quote left open
  to the end of the file is that row's error (the reader made the rest of the file its text);
  cells past the header's columns, a repeated header name (its first column is read) and an
  unnamed header cell (not read) are warnings, once per file.
* **A PDF the reader fails on**, whatever it raises (MemoryError aside), is that file's error
  (``_pdf_error``: an AES one needs the ``cryptography`` package, a password-protected one
  says so); what pypdf logs while reading it is the document's warning (``_PdfLog``).
* **A .docx** is checked before each of its parts is unpacked: ``word/document.xml`` over
  ``_DOCX_XML_FACTOR`` x ``max_bytes`` is an error naming the limit; ``docProps/core.xml``
  (the title) over ``_DOCX_CORE_BYTES`` is skipped with a warning, the text still indexed.
"""

from __future__ import annotations

import contextlib
import csv
import datetime
import errno
import functools
import hashlib
import io
import json
import logging
import math
import os
import re
import stat
import sys
import threading
import time
import unicodedata
from collections.abc import Callable, Collection, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import IO, Any, ClassVar, TypeGuard, TypeVar

from embedders.scripts import blank
from indexer.errors import (
    DISK_GONE_ERRNOS,
    SourceNotFoundError,
    SourceUnavailableError,
    UnsupportedSourceError,
)

logger = logging.getLogger(__name__)

TEXT_SUFFIXES = {".txt", ".md", ".markdown"}
HTML_SUFFIXES = {".html", ".htm"}
RECORD_SUFFIXES = {".jsonl", ".csv", ".json"}
BINARY_SUFFIXES = {".pdf", ".docx"}
SUPPORTED_SUFFIXES = TEXT_SUFFIXES | HTML_SUFFIXES | RECORD_SUFFIXES | BINARY_SUFFIXES

DEFAULT_MAX_BYTES = 20 * 1024 * 1024
_SNIFF = 8192
_MAX_REPLACEMENT_RATIO = 0.2
TEXT_FIELDS = ("text", "contents", "content", "body")
_ID_FIELDS = ("_id", "id", "doc_id")
# A .docx's word/document.xml may unpack to this many times max_bytes (which the .docx file
# itself is under). ElementTree holds ~10-14x the XML in memory while parsing, so the default
# cap (80 MiB of XML) peaks near 1 GB; 10x (200 MiB) peaked at ~3.5 GB. Real documents are far
# below it: a 400-page FCC order's document.xml is 2.8 MB, a formatted thesis 0.8 MB; running
# prose is ~3x its text in XML, so a document at the cap holds more text than max_bytes anyway
# (only a table-heavy one, ~50x, could be refused below that: 1.7 MB of table cells in 80 MB).
_DOCX_XML_FACTOR = 4
# docProps/core.xml holds the metadata (title, author, dates): a few KB in real files.
_DOCX_CORE_BYTES = 1 << 20
# csv's field limit is process-global (csv.field_size_limit sets it for every reader of the
# process, the clustering's too). It only guards memory, and a field cannot outgrow the text
# it is read from, which is already in memory: raised once, to the largest a C long takes
# everywhere (2**31 - 1 on Windows), so a field up to the document limit is read and a longer
# one is that row's "over the per-document limit" error, not the end of the file.
_CSV_FIELD_LIMIT = 2**31 - 1


@dataclass
class ParsedDocument:
    """A document ready to chunk.

    Attributes:
        key: the document id (unique in a collection): a file's absolute path, or the
            ``_id``/``id`` of a jsonl/csv record.
        source: the file it came from.
        text: the text to chunk and embed.
        title: a title when the format has one.
        metadata: user metadata (extra jsonl/csv fields), JSON scalars only.
        warnings: non-fatal problems (the encoding a non-UTF-8 file was read in, replaced
            invalid bytes).
    """

    key: str
    source: str
    text: str
    title: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def content_hash(self) -> str:
        """sha256 over everything that ends up in the vectors or payloads."""
        digest = hashlib.sha256()
        for part in (self.text, self.title or "", json.dumps(self.metadata, sort_keys=True)):
            digest.update(part.encode("utf-8", "surrogatepass"))
            digest.update(b"\x00")
        return digest.hexdigest()


@dataclass
class DocumentError:
    """A document (or line) that could not be parsed; ``message`` says why and what to do."""

    key: str
    source: str
    message: str


@dataclass(frozen=True)
class CheckedFile:
    """A file its caller opened and checked before it is parsed (a run confined to some
    folders: that what was opened lies under them), for ``parse_file(..., checked=)``: the
    parser reads ``read_from`` instead of looking the file's path up again, while the path
    still names its documents and picks its format. A path looked up again could have been
    made a link to a file elsewhere since it was checked (a folder on it swapped for a link
    too), and that file was read and indexed (the time-of-check/time-of-use finding of the
    security review). Each file the parser opens is checked to be the one checked
    (``identity``), so a ``read_from`` that came to name another file is an ``OSError``, not
    another file's text.

    Attributes:
        read_from: what the parser opens: ``/proc/self/fd/N`` of the caller's open file on
            Linux (opening it opens that file itself, whatever its path leads to now), else
            the real path the caller checked.
        identity: ``(st_dev, st_ino)`` of the file checked.
        size: its size in bytes, as the open file gave it.
    """

    read_from: Path
    identity: tuple[int, int]
    size: int

    def open(self, mode: str = "r", **kwargs: Any) -> IO[Any]:
        """``read_from`` opened as ``Path.open`` opens a file, after checking it is the file
        checked. Raises ``OSError``: it cannot be opened, or it is another file (the caller's
        file closed and its number given to another, a swap the fallback could not close)."""
        fh = self.read_from.open(mode, **kwargs)
        try:
            st = os.fstat(fh.fileno())
            if (st.st_dev, st.st_ino) != self.identity:
                raise OSError(f"it is no longer the file checked before it was read ({self.read_from})")
        except BaseException:
            fh.close()
            raise
        return fh


LINK_LOOP = ("leads through a loop of links (a link that points back to itself, or to a link "
             "that does): make it point at a file or folder")


def through_link_loop(path: Path | str) -> bool:
    """Whether ``path`` is not there because it leads through a loop of links (ELOOP), which
    ``exists()`` reports as absent: its message is then ``LINK_LOOP``, not "does not exist"."""
    try:
        os.stat(path)
    except OSError as e:
        return e.errno == errno.ELOOP
    except ValueError:  # a NUL in the path
        return False
    return False


def _open(path: Path, checked: CheckedFile | None, mode: str = "r", **kwargs: Any) -> IO[Any]:
    """``path`` opened, or the ``checked`` file that stands for it."""
    if checked is None:
        return path.open(mode, **kwargs)
    return checked.open(mode, **kwargs)


@dataclass
class StreamedDocument:
    """A large text file, read again in pieces when it is chunked (``pieces``) instead of held
    whole: a 30 MB log costs a few MB, not gigabytes. ``content_hash`` equals the one a
    ``ParsedDocument`` of the same text has, so a file is unchanged whichever way it was read.

    Attributes:
        key, source, title, metadata, warnings: as ``ParsedDocument``.
        content_hash: sha256 over the text, title and metadata (computed in one pass).
        path: the file.
        encoding: the codec the text is decoded with.
        errors: the codec's error handler (``replace`` when invalid bytes were found).
        size: the file's size in bytes.
        checked: what the file's reads open where its run checked it first (``CheckedFile``):
            its second read (``pieces``) is of the file its first read checked, not of
            whatever ``path`` leads to by then.
    """

    key: str
    source: str
    title: str | None
    metadata: dict[str, Any]
    warnings: list[str]
    content_hash: str
    path: Path
    encoding: str
    errors: str
    size: int
    checked: CheckedFile | None = None

    def pieces(self, chars: int = 1 << 20, digest: Any = None) -> Iterator[str]:
        """The text, ``chars`` characters at a time; each also fed to ``digest`` (a
        ``hashlib.sha256()``, where given) as the hash pass fed it, so that ``read_hash``
        is then the content hash of the text this read gave."""
        with _open(self.path, self.checked, encoding=self.encoding, errors=self.errors,
                   newline="") as fh:
            while piece := fh.read(chars):
                if "\x00" in piece:  # dropped, as the hash pass did (see _without_nul)
                    piece = piece.replace("\x00", "")
                if piece:
                    if digest is not None:
                        digest.update(piece.encode("utf-8", "surrogatepass"))
                    yield piece

    def read_hash(self, digest: Any) -> str:
        """The content hash of the text ``pieces(digest=digest)`` read (its title and metadata
        this document's): ``content_hash`` where the file did not change between the two
        reads. The file is read once for the hash, again for the chunks, and whatever the
        second read found went in under the first one's hash (a file rewritten in between was
        then "unchanged" for ever, half of it indexed)."""
        digest.update(b"\x00")
        _hash_title_and_metadata(digest, self.title, self.metadata)
        return str(digest.hexdigest())


ParseResult = ParsedDocument | DocumentError | StreamedDocument


def discover(source: Path, exclude: Collection[Path] = ()) -> list[Path]:
    """The files to parse under ``source``, sorted, hidden files and folders skipped, and the
    folders ``exclude`` names (``discover_files``).

    Raises:
        SourceNotFoundError: ``source`` does not exist.
        UnsupportedSourceError: ``source`` is a file of an unknown type.
    """
    return discover_files(source, exclude)[0]


def supported_types() -> str:
    """The supported suffixes as one line (``.csv .docx ...``), for messages."""
    return " ".join(sorted(SUPPORTED_SUFFIXES))


def display_path(path: Path | str) -> str:
    """``path`` as printable text: a name that is not valid UTF-8 (its bytes arrive as lone
    surrogates) shows its bad bytes as ``\\xe9`` instead of failing to print or to store. A
    surrogate no file name's bytes give (a JSON ``"\\ud800"``) shows as ``\\ud800``."""
    try:
        return os.fsencode(str(path)).decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return str(path).encode("utf-8", "backslashreplace").decode("utf-8")


def utf8_name(path: Path | str) -> bool:
    """Whether ``path``'s bytes are valid UTF-8. Not ``display_path(path) == str(path)``: under
    a locale that is not UTF-8 (``LC_ALL=C PYTHONUTF8=0``, a Latin-1 one) a valid UTF-8 name
    such as ``café.txt`` arrives decoded in that locale's encoding, and it was skipped as "not
    valid UTF-8"."""
    try:
        os.fsencode(str(path)).decode("utf-8")
    except UnicodeError:  # (encode: a surrogate no file name's bytes give, "\\ud800")
        return False
    return True


def first_bad_name(path: Path) -> Path | None:
    """The first of ``path``, its folders first, whose own name is not valid UTF-8
    (``utf8_name``), else None: the one to rename. A file in a folder so named was said to
    have a bad name itself ("h.txt: its name is not valid UTF-8")."""
    for part in [*reversed(path.parents), path]:
        if part.name and not utf8_name(part.name):
            return part
    return None


# How ``skip_reason`` begins for what could not be read (a folder it cannot list or look
# into, an entry whose type cannot be read): a sync keeps the documents indexed from there.
UNREADABLE = "cannot read"


def _unreadable_reason(path: Path) -> str | None:
    """Why ``path`` (left out by ``discover_files``) cannot be read, else None."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"{UNREADABLE} it ({e.strerror or e})"
    if not stat.S_ISDIR(st.st_mode):
        try:
            os.stat(path)  # (a link: what it points to; gone or a loop: a broken link)
        except PermissionError as e:
            return f"{UNREADABLE} it ({e.strerror or e})"
        except OSError:
            return None
        return None
    # A folder (not a link to one) is left out only when it could not be listed or looked into.
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                os.lstat(entry.path)
                break
    except OSError as e:
        why = e.strerror or str(e)
    else:
        why = "it could not be listed then"
    return f"{UNREADABLE} this folder ({why})"


def _named_in_utf8(results: Iterator[ParseResult], path: Path) -> Iterator[ParseResult]:
    """``results`` with their keys, sources, messages and warnings naming ``path`` by the UTF-8
    text of its name: under a locale that is not UTF-8 its ``str`` holds the name's bytes as
    that encoding read them (lone surrogates under ``C``, mojibake under Latin-1), which is not
    what a UTF-8 locale records (the same file got another key) and cannot be stored. The file
    itself is still opened by ``path``."""
    shown = display_path(path)
    name = str(path)
    for r in results:
        r.key, r.source = r.key.replace(name, shown), r.source.replace(name, shown)
        if isinstance(r, DocumentError):
            r.message = r.message.replace(name, shown)
        else:
            r.warnings[:] = [w.replace(name, shown) for w in r.warnings]
        yield r


def skip_reason(path: Path) -> str:
    """Why ``discover_files`` left ``path`` out, for its messages."""
    bad = first_bad_name(path)
    if bad == path:
        return "its name is not valid UTF-8; rename it"
    if bad is not None:
        return (f"the name of its folder {display_path(bad)} is not valid UTF-8; rename that "
                "folder")
    unreadable = _unreadable_reason(path)
    if unreadable is not None:
        return unreadable
    try:
        if path.is_symlink() and path.is_dir():
            return "a link to a folder, not followed (index that folder itself)"
        if path.is_symlink() and not path.exists():
            return "a broken link"
        if not path.is_file():
            return "not a regular file"
    except OSError as e:  # (changed since it was listed)
        return f"{UNREADABLE} it ({e.strerror or e})"
    return f"unsupported type {path.suffix or '(none)'!r}"


def discover_files(source: Path, exclude: Collection[Path] = ()) -> tuple[list[Path], list[Path]]:
    """``discover``, and what it left out (sorted; hidden ones are not listed): files of
    unsupported types, names that are not valid UTF-8 (a folder so named once, not walked),
    links to folders (not followed), broken links, what is not a regular file (a fifo, also
    given as ``source``) and what cannot be read: a folder it cannot list or look into (no
    ``r`` or no ``x`` permission), listed once and not walked, or a link whose target cannot
    be read (``skip_reason`` says which; ``UNREADABLE`` begins the reason of those). Hidden
    folders are not walked at all, nor the folders ``exclude`` names (links resolved), as a
    hidden one: Facet's own data folder (``FACET_DATA_DIR``) where it lies under ``source``,
    whose vector store files and staged uploads were indexed as documents. Raises as
    ``discover``; ``UnsupportedSourceError`` too for a ``source`` that cannot be looked at (in
    a folder without ``x`` permission)."""
    try:
        exists = source.exists()
    except OSError as e:  # (pathlib raised EACCES: a traceback)
        if e.errno in DISK_GONE_ERRNOS:  # (was "make it readable", exit 4: the verification round)
            raise SourceUnavailableError(
                f"the source {display_path(source)} cannot be reached ({e.strerror or e}): is its "
                "network share or drive still mounted? Mount it again") from None
        raise UnsupportedSourceError(
            f"cannot read {display_path(source)} ({e.strerror or e}); make it (and its "
            "folders) readable") from None
    if not exists:
        if through_link_loop(source):  # (was a RuntimeError traceback from resolving it)
            raise UnsupportedSourceError(f"{display_path(source)} {LINK_LOOP}") from None
        raise SourceNotFoundError(
            f"{source} does not exist; pass a folder, a file "
            f"({', '.join(sorted(SUPPORTED_SUFFIXES))}) or a BEIR corpus.jsonl"
        )
    if source.is_file():
        if source.suffix.lower() not in SUPPORTED_SUFFIXES:
            raise UnsupportedSourceError(
                f"{source}: unsupported file type {source.suffix or '(none)'!r}; "
                f"supported: {supported_types()}"
            )
        return [source.resolve()], []
    if not source.is_dir():  # a fifo, a socket: walked as a folder, "0 documents", no word
        return [], [source.resolve()]
    files: list[Path] = []
    skipped: list[Path] = []
    left_out = frozenset(Path(os.path.realpath(p)) for p in exclude)

    def unlisted(e: OSError) -> None:  # a folder os.walk cannot list: it skipped it unsaid
        if e.filename is not None:
            skipped.append(Path(os.fsdecode(e.filename)))

    for dirpath, dirnames, filenames in os.walk(source.resolve(), onerror=unlisted):
        here = Path(dirpath)
        try:
            found, left, walked = _folder_entries(here, dirnames, filenames, left_out)
        except OSError:
            # Its entries' types cannot be read (no ``x`` permission): is_file() raised EACCES,
            # a traceback. Left out whole, once, as a folder it cannot list.
            dirnames[:] = []
            skipped.append(here)
            continue
        dirnames[:] = walked
        files.extend(found)
        skipped.extend(left)
    return sorted(files), sorted(skipped)


# Folders Windows keeps on every drive it writes, hidden by an attribute (not a leading dot) that
# Linux's and macOS's exFAT and FAT drivers do not show: the recycle bin (deleted files, which
# came back as documents) and the system's own files. Skipped as hidden ones are, in any case.
# (Not the RECYCLER / RECYCLED of Windows XP and 9x: a user's own "Recycled" folder was skipped.)
SYSTEM_FOLDERS = frozenset({"$recycle.bin", "system volume information"})


def _folder_entries(here: Path, dirnames: list[str], filenames: list[str],
                    left_out: Collection[Path] = ()) -> tuple[list[Path], list[Path], list[str]]:
    """One folder of ``discover_files``' walk: its files to parse, what it leaves out, and the
    subfolders to walk. Raises ``OSError`` where an entry cannot even be looked at (``lstat``:
    the folder has no ``x`` permission)."""
    found: list[Path] = []
    left: list[Path] = []
    walked: list[str] = []
    for d in dirnames:
        if d.startswith(".") or d.lower() in SYSTEM_FOLDERS or (left_out and here / d in left_out):
            continue
        path = here / d
        if _lstat(path) is None:
            continue
        # os.walk lists a link to a folder among the folders and does not enter it; a folder
        # whose name is not UTF-8 is named once (the one to rename), not each file in it.
        if path.is_symlink() or not utf8_name(d):
            left.append(path)
        else:
            walked.append(d)
    for name in filenames:
        if name.startswith("."):
            continue
        path = here / name
        st = _lstat(path)
        if st is None:
            continue
        mode = st.st_mode
        if not utf8_name(path):
            left.append(path)  # a name that cannot be stored
            continue
        try:
            regular = stat.S_ISREG(mode) or (stat.S_ISLNK(mode) and path.is_file())
        except OSError:  # a link whose target cannot be looked at
            regular = False
        if regular and path.suffix.lower() in SUPPORTED_SUFFIXES:
            found.append(path)
        else:
            left.append(path)  # unsupported, a broken link, a fifo, unreadable
    return found, left, walked


def _lstat(path: Path) -> os.stat_result | None:
    """``os.lstat(path)``; None where it is gone since it was listed. Raises ``OSError``
    otherwise (``EACCES``: its folder has no ``x`` permission)."""
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def parse_source(source: Path, *, max_bytes: int = DEFAULT_MAX_BYTES,
                 text_column: str | None = None) -> Iterator[ParseResult]:
    """Parse every supported file under ``source`` (see ``discover`` for what raises)."""
    for path in discover(source):
        yield from parse_file(path, max_bytes=max_bytes, text_column=text_column)


def parse_file(path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES,
               text_column: str | None = None,
               stream_over_bytes: int | None = None,
               checked: CheckedFile | None = None,
               records_over_bytes: int | None = None) -> Generator[ParseResult, None, None]:
    """Parse one file into documents (one for txt/md/html/pdf, one per record for jsonl/csv).

    Its documents name the file by the UTF-8 text of its name whatever the locale's encoding
    (``_named_in_utf8``).

    Args:
        text_column: the csv column / jsonl field holding the text; default the first of
            ``text``, ``contents``, ``content``, ``body`` present (a csv with none of them is
            refused unless it has one column, not an id, which is then its text).
        stream_over_bytes: a .txt/.md file larger than this becomes a ``StreamedDocument``
            (read in pieces when chunked); None reads every file whole (``records_over_bytes``
            aside).
        checked: the file to read for ``path``, opened and checked by the caller
            (``CheckedFile``: a confined run's); None opens ``path``.
        records_over_bytes: a .jsonl/.csv file larger than this is parsed a line at a time
            (the same documents as read whole, in bounded memory); None: ``stream_over_bytes``.
    """
    results = _parse_file(path, max_bytes=max_bytes, text_column=text_column,
                          stream_over_bytes=stream_over_bytes, checked=checked,
                          records_over_bytes=(stream_over_bytes if records_over_bytes is None
                                              else records_over_bytes))
    if display_path(path) != str(path) and utf8_name(path):
        results = _named_in_utf8(results, path)
    yield from results


def _parse_file(path: Path, *, max_bytes: int, text_column: str | None,
                stream_over_bytes: int | None, checked: CheckedFile | None,
                records_over_bytes: int | None) -> Iterator[ParseResult]:
    suffix = path.suffix.lower()
    key = str(path)
    try:
        size = path.stat().st_size if checked is None else checked.size
    except OSError as e:
        yield DocumentError(key, key, f"cannot read {path}: {e}")
        return
    if suffix in TEXT_SUFFIXES | HTML_SUFFIXES | BINARY_SUFFIXES and size > max_bytes:
        yield DocumentError(
            key, key,
            f"{path} is {size / 2**20:.1f} MiB, over the {max_bytes / 2**20:.1f} MiB per-document "
            "limit; split it or raise FACET_MAX_DOCUMENT_MB",
        )
        return
    if suffix in TEXT_SUFFIXES and stream_over_bytes is not None and size > stream_over_bytes:
        yield _stream_text(path, size, markdown=suffix != ".txt", checked=checked)
        return
    if reads_records_by_line(path, size, records_over_bytes):
        yield from _stream_records(path, suffix, max_bytes, text_column, checked)
        return
    if suffix not in (".pdf", ".docx") and size > _SNIFF:
        # Judged binary by its start before it is read whole: a record file has no size limit,
        # and 2 GB of zeros named .jsonl was read and decoded (18 s, 4.65 GB) to be told it
        # looks binary (the huge-inputs review of the seventh session of 2026-12-06).
        try:
            with _open(path, checked, "rb") as fh:
                head = fh.read(_SNIFF)
        except OSError as e:
            yield DocumentError(key, key, f"cannot read {path}: {e}")
            return
        if not bom_codecs(head) and looks_binary(head):
            yield binary_refusal(key, head)
            return
    try:
        if checked is None:
            data = path.read_bytes()
        else:
            with checked.open("rb") as fh:
                data = fh.read()
    except OSError as e:
        yield DocumentError(key, key, f"cannot read {path}: {e}")
        return
    if suffix == ".pdf":
        yield _parse_pdf(path, data, max_bytes)
        return
    if suffix == ".docx":
        yield _parse_docx(path, data, max_bytes)
        return
    decoded = decode_text(data, str(path))
    if isinstance(decoded, DocumentError):
        yield decoded
        return
    text, warnings = decoded
    if suffix in _LINE_RECORDS:
        yield from _once_per_file(_LINE_RECORDS[suffix](path, _lines(text), warnings, max_bytes,
                                                        text_column), warnings)
    elif suffix == ".json":
        yield from _once_per_file(_parse_json(path, text, warnings, max_bytes, text_column), warnings)
    elif suffix in HTML_SUFFIXES:
        yield _finish(_within_limit(_parse_html(path, text, warnings), max_bytes))
    elif suffix == ".txt":
        yield _finish(ParsedDocument(key, key, text, warnings=warnings))
    else:  # front matter is not part of the text; a title it names starts the text (_titled)
        meta, notes = _front_matter_metadata(text, key)
        yield _finish(ParsedDocument(key, key,
                                     _titled(_front_matter_title(text), _without_front_matter(text)),
                                     title=_markdown_title(text), metadata=meta,
                                     warnings=[*warnings, *notes]))


def _lines(text: str) -> Iterator[str]:
    """``text``'s lines, each with its "\n" (the last one without, where the text does not end
    in one), as a file opened with ``newline="\n"`` gives them. Lines end at "\n" only:
    str.splitlines also splits at U+2028, U+0085 ..., which JSON strings may hold raw
    (json.dumps(..., ensure_ascii=False) writes them so). One at a time: io.StringIO held the
    text again at four bytes a character (35 MB for an 8.7 MB jsonl, against 11 MB split)."""
    start = 0
    while (end := text.find("\n", start)) >= 0:
        yield text[start:end + 1]
        start = end + 1
    if start < len(text):
        yield text[start:]


def _stream_records(path: Path, suffix: str, max_bytes: int, text_column: str | None,
                    checked: CheckedFile | None) -> Iterator[ParseResult]:
    """A .jsonl/.csv file over the stream limit parsed line by line as it is read, its encoding
    chosen first in one pass over it (``_pieces_encoding``): read whole, a 190 MB jsonl took
    720 MB and a 180 MB csv 1 GB (its bytes, its text and its lines at once), and a BEIR corpus
    of gigabytes did not fit. Its documents and notes are those of the file read whole (a legacy
    encoding aside: it is detected on the first 256 KiB, not the whole file)."""
    key = str(path)
    chosen = _pieces_encoding(
        path, lambda encoding, errors: _decode_pass(path, encoding, errors, checked), checked)
    if isinstance(chosen, DocumentError):
        yield chosen
        return
    encoding, errors, warnings, _ = chosen
    given = 0
    try:
        with _open(path, checked, encoding=encoding, errors=errors, newline="\n") as fh:
            for result in _once_per_file(_LINE_RECORDS[suffix](path, fh, warnings, max_bytes,
                                                               text_column), warnings):
                given += 1
                yield result
    except (UnicodeDecodeError, OSError) as e:
        # (The decoder reads ahead: the records of the piece where it failed are not read.)
        why = (f"it changed while it was read: it no longer decodes as {encoding}"
               if isinstance(e, UnicodeDecodeError) else str(e))
        yield DocumentError(key, key, f"cannot read {path}: {why}; " +
                            (f"the records after the first {given} were not read, index it again"
                             if given else "no record was read"))


def _decode_pass(path: Path, encoding: str, errors: str, checked: CheckedFile | None) -> None:
    """One pass decoding the file in pieces: raises ``UnicodeDecodeError`` where it does not."""
    with _open(path, checked, encoding=encoding, errors=errors, newline="") as fh:
        while fh.read(1 << 16):
            pass


def _once_per_file(results: Iterator[ParseResult], notes: list[str]) -> Iterator[ParseResult]:
    """A record file's documents, the notes about the file as a whole (its encoding, a guessed
    text column; ``notes``, which the parser may add to) on its first document only: a
    300-row cp1252 csv gave 300 identical "decoded as cp1252" warnings. The parser gives each
    record only its own warnings."""
    pending = True
    for result in results:
        if pending and isinstance(result, ParsedDocument):
            pending = False
            result.warnings[:0] = notes
        yield result


def _nfc(name: str) -> str:
    """A field name in Unicode's composed form (NFC): a csv header written on macOS spells "é"
    as "e" plus a combining accent, and ``--text-column énoncé`` or a filter on ``catégorie``
    typed composed did not match it. Metadata keys are stored so (their values as written:
    filters match a value in either form)."""
    return unicodedata.normalize("NFC", name)


def looks_binary(data: bytes) -> bool:
    """NUL bytes, or more than 10% control characters, in the first 8 KiB."""
    head = data[:_SNIFF]
    if not head:
        return False
    if b"\x00" in head:
        return True
    control = sum(1 for b in head if b < 32 and b not in (9, 10, 12, 13, 8, 27))
    return control / len(head) > 0.10


def binary_refusal(key: str, data: bytes) -> DocumentError:
    """The document error of a file whose start ``data`` ``looks_binary`` (``binary_message``,
    with the advice a file to index gets)."""
    return DocumentError(key, key, binary_message(key, data, "remove it from the source or "
                                                             "convert it to text"))


def binary_message(name: str, data: bytes, advice: str) -> str:
    """The refusal of ``data`` that ``looks_binary``, naming a likely cause: UTF-16 text saved
    without a byte order mark reads as half NUL bytes (a user was told only "looks binary")."""
    said = f"{name} looks binary (NUL or control bytes), not text"
    codec = utf16_without_bom(data)
    if codec is not None:
        said += (f"; it reads as {codec} text without a byte order mark: save it as UTF-8 (or "
                 "as UTF-16 with its mark)")
    return f"{said}; {advice}"


def utf16_without_bom(data: bytes) -> str | None:
    """``"UTF-16LE"`` or ``"UTF-16BE"`` where the first 8 KiB read as such text with no byte
    order mark (decoded: printable characters and line ends, some of them letters), else None.
    Binary data decodes to unassigned, control and private-use characters, or not at all."""
    head = data[:_SNIFF]
    head = head[:len(head) - len(head) % 2]
    if len(head) < 4:
        return None
    readings: list[tuple[int, str]] = []
    for codec in ("UTF-16LE", "UTF-16BE"):
        try:
            text = head.decode(codec.lower())
        except UnicodeDecodeError:
            continue
        readable = sum((ch.isprintable() and unicodedata.category(ch) not in ("Co", "Cn"))
                       or ch in "\t\r\n" for ch in text)
        # (and of several characters: b"\x00\x01" * 10_000 reads as "ĀĀĀ...")
        if readable >= 0.98 * len(text) and sum(ch.isalpha() for ch in text) >= 0.3 * len(text) \
                and len(set(text)) >= 4:
            # (ASCII letters read the other way round are CJK ideographs: the reading with more
            # ASCII is the one meant)
            readings.append((sum(ch.isascii() for ch in text), codec))
    return max(readings)[1] if readings else None


# Non-ASCII characters Western text decoded as cp1252 holds besides letters.
_TYPOGRAPHIC = set("\u2018\u2019\u201a\u201c\u201d\u201e\u2013\u2014\u2026\u20ac\u2022\u2122"
                   "\u00ab\u00bb\u00b0\u00b7\u00a7\u00a9\u00ae\u00a0\u00a3\u00b4\u00a8")
_DETECT_BYTES = 256 * 1024
_Pass = TypeVar("_Pass")


_LETTERS = re.compile(r"[^\W\d_]+")


def looks_western(text: str) -> bool:
    """Text decoded as cp1252 that reads as Western European: every non-ASCII character a
    letter or common typography (cp1250 Polish shows ``³ ¹ ¿``), and the non-ASCII letters
    inside words of ASCII letters (``élève``, ``Straße``), not words of nothing but accented
    letters (cp1251 Russian read as cp1252 is ``Ìîñêâà``). Judged on the non-ASCII letters
    alone: an HTML page or a config note with a Russian comment is mostly ASCII letters."""
    for ch in text:
        if not ch.isascii() and ch not in _TYPOGRAPHIC and not ch.isalpha():
            return False
    non_ascii = foreign = 0
    for word in _LETTERS.findall(text):
        n = sum(1 for ch in word if not ch.isascii())
        non_ascii += n
        if n == len(word) > 1:  # "à" is a word; "Ìîñêâà" is not
            foreign += n
    return foreign * 2 <= non_ascii


# How cp1254 (Turkish; ISO-8859-9's letters) reads as cp1252: its six letters of its own, at
# the bytes of cp1252's Icelandic ones ("İstanbul'da ılık ... şehir" is "Ýstanbul'da ýlýk ...
# þehir"). Those readings pass ``looks_western`` (letters inside words of ASCII letters).
_TURKISH_AS_CP1252 = set("\u00dd\u00fd\u00de\u00fe\u00d0\u00f0")  # Ý ý Þ þ Ð ð: İ ı Ş ş Ğ ğ
_TURKISH_ALSO = set("\u00e7\u00c7\u00fc\u00dc")  # ç Ç ü Ü: Turkish, never Icelandic
_TURKISH_NEUTRAL = set("\u00f6\u00d6\u00e2\u00c2\u00ee\u00ce\u00fb\u00db")  # ö â î û


def reads_turkish(text: str) -> bool:
    """Whether ``text``, decoded as cp1252 (and passing ``looks_western``), is Turkish cp1254:
    it holds one of ``Ý ý Þ þ Ð ð`` and more signs of Turkish than of Icelandic (or another
    Western language). Turkish: ``ý``/``Ý`` (``ı``/``İ``, its commonest letters), ``Þ``/``þ``
    inside a word (``yaþýyorum``: Icelandic ``þ`` starts words) and ``ç``/``ü``. Against it:
    ``Þ``/``þ`` at a word's start (``Þetta``) and the non-ASCII letters Turkish does not
    write (Icelandic ``á é í ó ú æ``, German ``ä ß``, French ``è à``...). ``Ð``/``ð`` (``ğ``,
    and Icelandic ``ð``, both inside words) count for neither; ``ö â î û`` neither. A tie
    stays cp1252 ("Þetta er ný bók, sagði hún": one ``ý`` against ``Þ``, ``ó`` and ``ú``)."""
    turkish = other = 0
    seen = False
    for word in _LETTERS.findall(text):
        for i, ch in enumerate(word):
            if ch.isascii() or ch in _TURKISH_NEUTRAL:
                continue
            if ch in _TURKISH_AS_CP1252:
                seen = True
                if ch in "\u00dd\u00fd" or (ch in "\u00de\u00fe" and i > 0):
                    turkish += 1
                elif ch in "\u00de\u00fe":
                    other += 1
            elif ch in _TURKISH_ALSO:
                turkish += 1
            else:
                other += 1
    return seen and turkish > other


# Codecs whose guess from charset-normalizer is checked against a Cyrillic or Chinese reading:
# a short text gives it little to go on (KOI8-R was read as Shift-JIS, GBK as cp949, cp1251 as
# mac_cyrillic, a Russian comment in an English note as cp1250). A guess of another script's
# codec (Greek, Hebrew, Arabic...) is kept; Polish or Czech fails the Cyrillic reading's checks.
_CYRILLIC_CODECS = ("cp1251", "koi8_r", "mac_cyrillic")  # in order of preference on a tie
_RECHECKED = {"cp1251", "koi8_r", "koi8_u", "mac_cyrillic", "cp866", "iso8859_5", "kz1048",
              "ptcp154", "cp855", "shift_jis", "shift_jis_2004", "shift_jisx0213", "cp932",
              "euc_jp", "euc_jis_2004", "euc_jisx0213", "cp949", "euc_kr", "johab", "big5",
              "big5hkscs", "cp950", "gb2312", "gbk", "gb18030", "hz", "cp1252", "latin_1",
              "iso8859_15", "mac_roman", "cp1250", "iso8859_2"}
_RUSSIAN_LOWER = set("абвгдеёжзийклмнопрстуфхцчшщъыьэюяіїєґў")
_RUSSIAN = _RUSSIAN_LOWER | {ch.upper() for ch in _RUSSIAN_LOWER}
_DECLARED = re.compile(rb"""<meta\b[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)"""
                       rb"""|<\?xml\b[^>]*?encoding\s*=\s*["']([A-Za-z0-9_.:-]+)""", re.I)


def declared_encoding(data: bytes) -> str | None:
    """The charset an HTML ``<meta charset>`` / ``<meta http-equiv="Content-Type">`` or an XML
    declaration near the start of ``data`` (markup: its first character ``<``) names, as a
    Python codec name, when it decodes
    ``data`` (a latin-1 or ascii label is read as cp1252, as browsers do); None otherwise. A
    UTF-8 or UTF-16 label is not used (``data`` is not UTF-8; UTF-16 has its byte order mark)."""
    import codecs

    # Only a markup document's own declaration: a note or csv that quotes one (a cp1252 .md
    # showing `<meta charset="iso-8859-7">` as an example) was decoded as Greek.
    if data[:16384].lstrip()[:1] != b"<":
        return None
    found = _DECLARED.search(data[:16384])
    if found is None:
        return None
    label = (found.group(1) or found.group(2)).decode("ascii").lower()
    try:
        name = codecs.lookup(label).name.replace("-", "_")
    except LookupError:
        return None
    if name.startswith(("utf_", "utf8")):
        return None
    if name in ("latin_1", "iso8859_1", "ascii"):
        name = "cp1252" if _decodes(data, "cp1252") else "latin_1"
    return name if _decodes(data, name) else None


def _cyrillic_score(text: str) -> int | None:
    """How well ``text`` reads as Russian/Ukrainian: its lowercase Cyrillic letters less the
    non-ASCII characters that are neither Cyrillic letters nor typography (KOI8-R read as
    cp1251 is mostly capitals, ``мОСКВА``; cp1251 read as mac_cyrillic shows ``ћ ј ѕ``). None
    when it is not such text at all: a tenth of its non-ASCII characters other than those
    letters, Cyrillic glued to ASCII letters in a tenth of the words, or no spaces between
    Cyrillic words (Chinese read as Cyrillic)."""
    non_ascii = [ch for ch in text if not ch.isascii() and ch not in _TYPOGRAPHIC]
    other = sum(1 for ch in non_ascii if ch not in _RUSSIAN)
    if not non_ascii or other * 10 > len(non_ascii):
        return None
    words = [w for w in _LETTERS.findall(text) if any(ch in _RUSSIAN for ch in w)]
    mixed = sum(1 for w in words if any(ch.isascii() for ch in w))
    if mixed * 10 > len(words) or sum(map(len, words)) > 15 * len(words):
        return None
    return sum(1 for ch in non_ascii if ch in _RUSSIAN_LOWER) - 4 * other


def _script_switches(text: str) -> int:
    """Changes between Hangul and Chinese characters inside ``text`` (GBK Chinese read as
    cp949 alternates them every character or two; Korean rarely does)."""
    switches, last = 0, None
    for ch in text:
        kind = ("hangul" if "\uac00" <= ch <= "\ud7a3" else
                "han" if "\u4e00" <= ch <= "\u9fff" else None)
        if kind is not None:
            switches += last is not None and kind != last
            last = kind
    return switches


def _chinese(head: bytes) -> str | None:
    """``gbk`` (or ``gb18030``) when ``head`` decodes as it into Chinese characters and CJK
    punctuation only (besides ASCII), else None. (A character cut at its end is left out.)"""
    import codecs

    for codec in ("gbk", "gb18030"):
        try:
            text = codecs.getincrementaldecoder(codec)().decode(head)
        except UnicodeDecodeError:
            continue
        cjk = [ch for ch in text if not ch.isascii() and not ch.isspace()]
        if cjk and all("\u4e00" <= ch <= "\u9fff" or "\u3000" <= ch <= "\u303f"
                       or "\uff00" <= ch <= "\uffef" for ch in cjk):
            return codec
        return None
    return None


def _recheck(head: bytes, guess: str | None) -> str | None:
    """charset-normalizer's ``guess`` for a short text, or a Cyrillic or Chinese codec that
    reads ``head`` better (see ``_RECHECKED``); cp1251 is preferred on a tie."""
    if guess is not None and guess not in _RECHECKED:
        return guess
    scores: dict[str, int] = {}
    for codec in _CYRILLIC_CODECS:
        try:
            score = _cyrillic_score(head.decode(codec))
        except UnicodeDecodeError:
            continue
        if score is not None:
            scores[codec] = score
    if scores:
        return max(scores, key=lambda c: (scores[c], -_CYRILLIC_CODECS.index(c)))
    if guess in ("cp949", "euc_kr", "johab"):
        korean = head.decode(guess, errors="replace")
        if _script_switches(korean) >= 2:
            return _chinese(head) or guess
    return guess


def detect_encoding(data: bytes) -> str | None:
    """The encoding of ``data`` (which is not UTF-8): the one an HTML ``<meta charset>`` or XML
    declaration names when it decodes the bytes, else cp1252 when it reads as Western text (the
    superset of Latin-1 that Windows editors write; a short French line fools detectors) or
    cp1254 when that Western reading is Turkish (``reads_turkish``), else charset-normalizer's
    guess from the first 256 KiB, rechecked against a Cyrillic or Chinese reading for a short
    text (see ``_recheck``); None when nothing fits."""
    from charset_normalizer import from_bytes

    declared = declared_encoding(data)
    if declared is not None:
        return declared
    head = data[:_DETECT_BYTES]
    try:
        western = head.decode("cp1252")
        if looks_western(western):
            # Turkish cp1254 reads as cp1252 "words" too ("Ýstanbul'da ýlýk"), and
            # charset-normalizer guesses cp1250 for a short line of it.
            return "cp1254" if reads_turkish(western) and _decodes(head, "cp1254") else "cp1252"
    except UnicodeDecodeError:
        pass  # a byte cp1252 leaves undefined (0x81, 0x8d, 0x8f, 0x90, 0x9d)
    best = from_bytes(head).best()
    guess = str(best.encoding) if best is not None else None
    return _recheck(head, guess)


def _decodes(data: bytes, encoding: str) -> bool:
    try:
        data.decode(encoding)
    except (UnicodeDecodeError, LookupError):
        return False
    return True


def bom_codecs(data: bytes) -> list[str]:
    """The codecs (``utf-32``, ``utf-16``) whose byte order mark ``data`` starts with, to try in
    that order: UTF-32-LE's mark (FF FE 00 00) starts with UTF-16-LE's (FF FE), so UTF-32 is
    tried first (a UTF-32 file read as UTF-16 kept a NUL after every character), and UTF-16 when
    that does not decode (UTF-16 text whose first character is U+0000)."""
    codecs = []
    if data[:4] in (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff"):
        codecs.append("utf-32")
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        codecs.append("utf-16")
    return codecs


def _bom_note(name: str, codec: str) -> str:
    return f"{name}: {codec.upper()} (byte order mark), not UTF-8"


def decode_text(data: bytes, name: str) -> tuple[str, list[str]] | DocumentError:
    """Decode UTF-8 (BOM allowed), else the detected encoding (with a warning naming it);
    replace what still does not decode with a warning, reject binary data. A UTF-32 or UTF-16
    byte order mark is read as such (with a warning naming it), before the binary check."""
    for codec in bom_codecs(data):
        try:
            return data.decode(codec), [_bom_note(name, codec)]
        except UnicodeDecodeError:
            pass  # judged as bytes below
    if looks_binary(data):
        return binary_refusal(name, data)
    try:
        return data.decode("utf-8-sig"), []
    except UnicodeDecodeError as e:  # e.start counts from after a byte order mark
        first_bad = e.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)
    text = data.decode("utf-8-sig", errors="replace")
    replaced = text.count("\ufffd")
    encoding = None if _still_utf8(_non_ascii(text) - replaced, replaced) else detect_encoding(data)
    if encoding is not None:
        try:
            return data.decode(encoding), [_decoded_as(name, first_bad, encoding)]
        except (UnicodeDecodeError, LookupError):
            pass  # the detection saw only the start of the file
    if text and replaced / len(text) > _MAX_REPLACEMENT_RATIO:
        return DocumentError(
            name, name,
            f"{name} is not UTF-8 text ({replaced} of {len(text)} characters undecodable) and "
            "its encoding could not be detected; convert it to UTF-8 (e.g. iconv -f latin1 -t "
            "utf-8)",
        )
    return text, [_replaced_note(name, first_bad, replaced)]


def _still_utf8(valid: int, replaced: int) -> bool:
    """Bytes read as UTF-8 with ``replaced`` U+FFFD replacements are still UTF-8 when they hold
    as many (``valid``) valid multi-byte characters as bad bytes: a UTF-8 file with a few
    corrupt bytes, not another encoding (whose bytes make valid UTF-8 only by chance). The one
    rule for a file read whole (``decode_text``) and one read in pieces (``_stream_text``)."""
    return valid >= replaced


def _non_ascii(text: str) -> int:
    return len(text) - len(text.encode("ascii", "ignore"))


def _decoded_as(name: str, first_bad: int, encoding: str) -> str:
    return f"{name}: not UTF-8 (first non-UTF-8 byte at {first_bad}); decoded as {encoding}"


def _replaced_note(name: str, first_bad: int, replaced: int) -> str:
    return f"{name}: invalid UTF-8 from byte {first_bad}; {replaced} characters replaced with U+FFFD"


def _utf8_tally(path: Path, checked: CheckedFile | None = None) -> tuple[int, int, int, int]:
    """A file read as UTF-8 in pieces (``decode_text``'s checks without holding it whole): the
    offset of its first invalid byte, its U+FFFD count with invalid bytes replaced, its valid
    non-ASCII characters and its length in characters."""
    import codecs

    strict = codecs.getincrementaldecoder("utf-8")()
    lenient = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
    first_bad, at, replaced, non_ascii, chars = -1, 0, 0, 0, 0
    with _open(path, checked, "rb") as fh:
        while True:
            block = fh.read(1 << 20)
            final = not block
            if first_bad < 0:
                pending = len(strict.getstate()[0])
                try:
                    strict.decode(block, final)
                except UnicodeDecodeError as e:
                    first_bad = at - pending + e.start
            piece = lenient.decode(block, final)
            bad = piece.count("\ufffd")
            replaced += bad
            non_ascii += _non_ascii(piece) - bad
            chars += len(piece)
            at += len(block)
            if final:
                return max(first_bad, 0), replaced, non_ascii, chars


def _hash_pass(path: Path, encoding: str, errors: str,
               checked: CheckedFile | None = None) -> tuple[Any, str, bool, int, int]:
    """One pass over the decoded text: its sha256 (as ``content_hash`` feeds it), its first
    64 KiB, whether it holds anything but whitespace, its U+FFFD count and how many NUL
    characters it drops (as ``pieces`` does: the binary check reads only the first 8 KiB)."""
    digest = hashlib.sha256()
    head, content, replaced, nuls = "", False, 0, 0
    with _open(path, checked, encoding=encoding, errors=errors, newline="") as fh:
        while piece := fh.read(1 << 20):
            if "\x00" in piece:
                nuls += piece.count("\x00")
                piece = piece.replace("\x00", "")
            digest.update(piece.encode("utf-8", "surrogatepass"))
            if len(head) < 65536:
                head += piece[:65536 - len(head)]
            content = content or not blank(piece)
            replaced += piece.count("\ufffd") if errors == "replace" else 0
    digest.update(b"\x00")
    return digest, head, content, replaced, nuls


def _pieces_encoding(path: Path, read_pass: Callable[[str, str], _Pass],
                     checked: CheckedFile | None = None
                     ) -> tuple[str, str, list[str], _Pass] | DocumentError:
    """The codec and error handler a file too large to hold is decoded with, chosen as
    ``decode_text`` chooses them, with its warnings, and what ``read_pass(encoding, errors)``
    (a pass over the decoded file in pieces, raising ``UnicodeDecodeError`` where ``errors``
    is strict and the file does not decode) returned for the choice: a UTF-32 or UTF-16 byte
    order mark, before the binary sniff of its first 8 KiB; UTF-8; UTF-8 with replacements
    when it has as many valid multi-byte characters as bad bytes (counted in pieces); else the
    encoding detected on its first 256 KiB; else UTF-8 with replacements, refused when too
    many; an error naming the file where it cannot be read."""
    key = str(path)
    try:
        return _choose_in_pieces(path, key, read_pass, checked)
    except OSError as e:
        return DocumentError(key, key, f"cannot read {path}: {e}")


def _choose_in_pieces(path: Path, key: str, read_pass: Callable[[str, str], _Pass],
                      checked: CheckedFile | None) -> tuple[str, str, list[str], _Pass] | DocumentError:
    """``_pieces_encoding``'s choice; raises ``OSError``."""
    with _open(path, checked, "rb") as fh:
        head_bytes = fh.read(_DETECT_BYTES)
    for bom_codec in bom_codecs(head_bytes):  # (half or three quarters NULs)
        try:
            return bom_codec, "strict", [_bom_note(key, bom_codec)], read_pass(bom_codec, "strict")
        except UnicodeDecodeError:
            continue  # judged as bytes below
    if looks_binary(head_bytes):
        return binary_refusal(key, head_bytes)
    try:
        return "utf-8-sig", "strict", [], read_pass("utf-8-sig", "strict")
    except UnicodeDecodeError:
        pass
    # decode_text's rule, counted in pieces: a few bad bytes in UTF-8 are replaced (the whole
    # file was once read as cp1252 for one bad byte, past the stream limit).
    first_bad, bad, valid, chars = _utf8_tally(path, checked)
    detected = None if _still_utf8(valid, bad) else detect_encoding(head_bytes)
    if detected is not None:
        try:
            return detected, "strict", [_decoded_as(key, first_bad, detected)], \
                read_pass(detected, "strict")
        except (UnicodeDecodeError, LookupError):
            pass  # the detection saw only the start of the file
    if chars and bad / chars > _MAX_REPLACEMENT_RATIO:
        return DocumentError(key, key, f"{key} is not UTF-8 text ({bad} of {chars} characters "
                                       "undecodable) and its encoding could not be detected; "
                                       "convert it to UTF-8 (e.g. iconv -f latin1 -t utf-8)")
    return "utf-8-sig", "replace", [_replaced_note(key, first_bad, bad)], \
        read_pass("utf-8-sig", "replace")


def _stream_text(path: Path, size: int, *, markdown: bool,
                 checked: CheckedFile | None = None) -> StreamedDocument | DocumentError:
    """A large .txt/.md file as a ``StreamedDocument``: its encoding chosen in pieces
    (``_pieces_encoding``: as ``decode_text`` does, with the same warnings) by the pass that
    hashes it. Every read of it (``checked``: of the file its caller checked) and the
    document's own second read, ``pieces``, are of the same file."""
    key = str(path)
    chosen = _pieces_encoding(
        path, lambda encoding, errors: _hash_pass(path, encoding, errors, checked), checked)
    if isinstance(chosen, DocumentError):
        return chosen
    encoding, errors, warnings, (digest, head, content, _replaced, nuls) = chosen
    if not content:
        return DocumentError(key, key, f"{key} is empty: no text to index")
    if nuls:
        warnings.append(_nuls_removed(key, nuls))
    title = _markdown_title(head) if markdown else None
    meta: dict[str, Any] = {}
    if markdown:  # its front matter is in its first 64 Ki characters, or read as none
        meta, notes = _front_matter_metadata(head, key)
        warnings += notes
    _hash_title_and_metadata(digest, title, meta)
    return StreamedDocument(key, key, title, meta, warnings, digest.hexdigest(), path, encoding,
                            errors, size, checked)


def _hash_title_and_metadata(digest: Any, title: str | None, metadata: dict[str, Any]) -> None:
    """The end of a streamed text's content hash, after its text (``ParsedDocument``'s order)."""
    for part in (title or "", json.dumps(metadata, sort_keys=True)):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")


def _within_limit(doc: ParsedDocument | DocumentError, max_bytes: int) -> ParsedDocument | DocumentError:
    """``doc``, or an error when its text is over ``max_bytes`` in UTF-8: a file's size is
    checked before it is read, but the text of a .docx or a PDF (compressed) or of HTML
    (``&nGt;`` is 5 bytes of source, 6 of text) can be larger than the file. Rejected, as a file
    or a record over the limit is, not truncated."""
    if isinstance(doc, DocumentError) or len(doc.text) <= max_bytes // 4:  # 4 bytes a character at most
        return doc
    size = len(doc.text.encode("utf-8", "surrogatepass"))
    if size <= max_bytes:
        return doc
    return DocumentError(doc.key, doc.source, _text_over_limit(doc.key, size, max_bytes))


def _text_over_limit(where: str, size: int, max_bytes: int) -> str:
    return (f"{where}: its text is {size / 2**20:.1f} MiB, over the {max_bytes / 2**20:.1f} MiB "
            "per-document limit; split it or raise FACET_MAX_DOCUMENT_MB")


def _finish(doc: ParsedDocument | DocumentError) -> ParseResult:
    if isinstance(doc, ParsedDocument):
        doc.text = _without_nul(doc.text, doc.key, doc.warnings)
        if doc.title:
            doc.title = _without_nul(doc.title, f"{doc.key}'s title", doc.warnings) or None
        if blank(doc.text):
            # A scanned PDF has pages of images and no text layer: "is empty" alone read as a
            # broken file.
            scanned = (" (a PDF without a text layer, such as a scan: run OCR on it first, e.g. "
                       "ocrmypdf)" if str(doc.source).lower().endswith(".pdf") else "")
            return DocumentError(doc.key, doc.source, f"{doc.key} is empty: no text to index{scanned}")
    return doc


def _without_nul(text: str, where: str, warnings: list[str]) -> str:
    """``text`` without NUL characters, noting how many went: PostgreSQL cannot store one (the
    whole batch failed there), no tokenizer reads one, and the binary check sees only a file's
    first 8 KiB (a log padded with NULs later, a jsonl ``\\u0000`` escape, a PDF's glyph)."""
    if "\x00" not in text:
        return text
    warnings.append(_nuls_removed(where, text.count("\x00")))
    return text.replace("\x00", "")


def _nuls_removed(where: str, n: int) -> str:
    return f"{where}: {n} NUL character{'s' if n != 1 else ''} removed"


_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_ATX = re.compile(r" {0,3}#[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r" {0,3}=+[ \t]*$")
_INLINE_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")


def _plain_heading(text: str) -> str | None:
    """A heading's words without its inline markup (``**bold**``, ``[link](url)``, code)."""
    text = _INLINE_LINK.sub(r"\1", text)
    text = re.sub(r"(\*\*|__|\*|`)", "", text).strip()
    return text or None


# The first line of a YAML front matter block (after its opening ---): a key, a comment or blank.
_FRONT_MATTER_KEY = re.compile(r"\s*(?:$|#|[\w\"'][^:\n]*:(?:[ \t]|$))")


def _front_matter_block(text: str) -> tuple[str, int] | None:
    """A Markdown file's YAML front matter (a first line ``---`` to the next ``---`` or ``...``
    line, its first line a ``key:``, a comment or blank): its YAML and the offset of the text
    after it; None when it has none. A first ``---`` not followed by a key (a rule) or never
    closed is text."""
    first, nl, rest = text.partition("\n")
    # (The key's line without its CR: a CRLF file whose first key had no value, ``tags:``, was
    # read as text, its YAML indexed and no title or metadata kept.)
    if first.strip() != "---" or not nl or not _FRONT_MATTER_KEY.match(rest.partition("\n")[0].rstrip("\r")):
        return None
    at = len(first) + 1
    for line in rest.splitlines(keepends=True):
        if line.strip() in ("---", "..."):
            return text[len(first) + 1:at], at + len(line)
        at += len(line)
    return None


def _without_front_matter(text: str) -> str:
    """A Markdown file's text without its YAML front matter (``_front_matter_block``): its
    fields were indexed as body text ("tags: [alpha, beta]"). The title it names is read by
    ``_markdown_title``, its other fields by ``_front_matter_metadata``."""
    block = _front_matter_block(text)
    return text if block is None else text[block[1]:]


# What YAML's safe loader builds that JSON has no word for, and no payload holds.
_YAML_ODD = {bytes: "binary data (!!binary)", set: "a set (!!set)",
             tuple: "an ordered mapping (!!omap or !!pairs)"}


def _yaml_scalar(value: Any) -> Any:
    """A YAML date (``2024-05-01``) or timestamp as its ISO text; any other value as it is."""
    return value.isoformat() if isinstance(value, datetime.date) else value


def _yaml_key(key: Any) -> str:
    """A front matter key as a field name: YAML reads ``2021:`` as a number, ``true:`` as a
    boolean, ``2024-05-01:`` as a date; each is its name as written (in YAML's words)."""
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    return _nfc(str(_yaml_scalar(key)))


def _front_matter_metadata(text: str, where: str) -> tuple[dict[str, Any], list[str]]:
    """A Markdown file's front matter fields as metadata, by a jsonl record's rules
    (``_scalar_metadata``: strings, numbers, booleans and lists of them kept; null left out
    unsaid; a mapping or a list holding one, a list or null left out with a warning), and the
    warnings. A date is its ISO text (``date: 2024-05-01`` is "2024-05-01"). ``title`` is the
    title (``_markdown_title``), not a field, as a record's is. Front matter that is not YAML,
    or not a mapping (a list, a line of text), keeps no field, with a warning naming its line:
    the document is indexed all the same. Once, only the title was read and every other field
    was dropped unsaid (a filter ``tags=alpha`` found "no document has a field 'tags'")."""
    block = _front_matter_block(text)
    if block is None:
        return {}, []
    loaded, e = _front_matter_yaml(block[0])
    if e is not None:  # a YAMLError, or a date YAML's pattern takes and the calendar refuses
        said = []  # "while parsing a flow sequence at line 3: expected ',' or ']' ... at line 4"
        for what, mark in (("context", "context_mark"), ("problem", "problem_mark")):
            words, at = getattr(e, what, None), getattr(e, mark, None)
            if words:  # the marks count lines of the YAML from 0, after the opening ---
                said.append(f"{words}{f' at line {at.line + 2}' if at is not None else ''}")
        problem = ": ".join(said) or (str(e).splitlines() or [type(e).__name__])[0]
        return {}, [f"{where}: its front matter is not valid YAML ({problem}); its fields are not "
                    "kept as metadata (the document is indexed without them)"]
    if loaded is None:  # empty, or comments only
        return {}, []
    if not isinstance(loaded, dict):
        return {}, [f"{where}: its front matter (lines 2-{block[0].count(chr(10)) + 1}) is "
                    f"{_json_word(loaded)} in YAML, not a mapping of fields (`key: value` lines); "
                    "no field is kept as metadata"]
    fields: dict[str, Any] = {}
    odd: list[str] = []
    for k, v in loaded.items():
        name = _yaml_key(k)
        v = [_yaml_scalar(x) for x in v] if isinstance(v, list) else _yaml_scalar(v)
        held = next((_YAML_ODD[t] for t in _YAML_ODD
                     if isinstance(v, t) or (isinstance(v, list) and any(isinstance(x, t) for x in v))),
                    None)
        if held is not None:
            fields.pop(name, None)
            odd.append(f"metadata field {name!r} not kept: it is {'a list holding ' if isinstance(v, list) else ''}"
                       f"{held} (metadata keeps strings, numbers, booleans and lists of them)")
            continue
        fields[name] = v
    title_field = next(_named(fields, ("title",)), "title")
    meta, dropped, _ = _scalar_metadata(fields, {title_field})
    return meta, [f"{where}: front matter: {d}" for d in (*odd, *dropped)]


@functools.lru_cache(maxsize=32)
def _front_matter_yaml(block: str) -> tuple[Any, Exception | None]:
    """``block`` (a front matter's YAML) as ``_front_matter_loader`` reads it, or the error it
    raised (read once for the fields and once for the title)."""
    import yaml

    try:
        return yaml.load(block, Loader=_front_matter_loader()), None  # a SafeLoader's subclass
    except Exception as e:  # a YAMLError, or a date the calendar refuses (2024-13-45)
        return None, e


_YAML_NUMBER = "tag:facet:front-matter:number"  # a plain scalar that may be a number
_YAML_KEPT = ("tag:yaml.org,2002:null", "tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:merge")


@functools.cache
def _front_matter_loader() -> type:
    """YAML's safe loader reading plain scalars as the user wrote them. ``yaml.safe_load``
    resolves them by YAML 1.1: ``zip: 012345`` was 5349 (octal), ``duration: 1:30`` 90
    (sexagesimal), ``version: 1.10`` 1.1, ``country: NO`` false, and a filter
    ``zip=012345`` found nothing. Here a plain scalar is a number only when it is written as
    that number prints back (``12``, ``-3``, ``1.5``; not ``012345``, ``1.10``, ``1_000``,
    ``0x1F``, ``1e3``, ``.inf``), a boolean only when it is ``true``/``false`` in any case
    (YAML 1.2's core schema: ``yes``, ``no``, ``on``, ``off``, ``y``, ``n`` are text), null
    and dates as YAML 1.1 reads them (a date is then its ISO text, ``_yaml_scalar``); anything
    else is its text. Quoted scalars and explicit tags (``!!int 0x1F``) are YAML's own."""
    import yaml

    class FrontMatterLoader(yaml.SafeLoader):
        yaml_implicit_resolvers: ClassVar[dict[Any, list[tuple[str, re.Pattern[str]]]]] = {}

        def construct_number(self, node: Any) -> Any:
            written = self.construct_scalar(node)
            try:
                number = float(written) if "." in written else int(written)
            except ValueError:  # over Python's 4,300 digits for an int's text
                return written
            return number if repr(number) == written else written

    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items():
        for tag, pattern in resolvers:
            if tag in _YAML_KEPT:
                FrontMatterLoader.add_implicit_resolver(tag, pattern, [first])
    FrontMatterLoader.add_implicit_resolver(
        "tag:yaml.org,2002:bool", re.compile(r"^(?:[Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee])$"), list("tTfF"))
    FrontMatterLoader.add_implicit_resolver(
        _YAML_NUMBER, re.compile(r"^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?$"), list("-0123456789"))
    FrontMatterLoader.add_constructor(_YAML_NUMBER, FrontMatterLoader.construct_number)
    return FrontMatterLoader


def _title_text(value: Any) -> str | None:
    """A front matter ``title``'s value as a title: its first line (a folded ``>`` block is
    one line a paragraph as YAML reads it; a literal ``|`` block's first line), its blanks
    collapsed; None for none, or for a list or a mapping."""
    if value is None or isinstance(value, bool | list | dict):
        return None
    text = str(_yaml_scalar(value)).strip().split("\n")[0]
    return " ".join(text.split()) or None


def _front_matter_title(text: str) -> str | None:
    """The title a Markdown file's front matter names (its top-level ``title``, any case, as
    ``_front_matter_loader`` reads it: ``title: 1.10`` is "1.10"), else None."""
    block = _front_matter_block(text)
    if block is None:
        return None
    loaded, error = _front_matter_yaml(block[0])
    if error is not None or not isinstance(loaded, dict):
        return None
    return _title_text(next((v for k, v in loaded.items()
                             if isinstance(k, str) and k.strip().lower() == "title"), None))


def _titled(title: str | None, text: str) -> str:
    """``text`` as indexed when its format has a title beside it (an HTML page's ``<title>``, a
    Markdown file's front-matter ``title``): the title's words (blanks collapsed, invisible
    characters dropped) as its first line, as a jsonl record's is ("title\ntext"), so a search
    finds the document by its title's words. Not when the text's first line (a heading's words,
    ``# T``) starts with the title already, nor for a text of nothing (still empty). Chunk
    offsets count from the start of this text, the title line included."""
    head = " ".join(_drop_invisible(title or "").split())
    if not head or blank(text):
        return text
    first = next((line for line in text.splitlines() if line.strip()), "")
    heading = _ATX.match(first)
    first = " ".join((_plain_heading(heading.group(1)) or "" if heading else first).split())
    if first.startswith(head) and not first[len(head):][:1].isalnum():
        return text
    return f"{head}\n{text}"


def _markdown_title(text: str) -> str | None:
    """The document's title: front matter's top-level ``title`` as YAML reads it, else its first
    level-1 heading (``# T``, or a line underlined with ``===``) outside code blocks, within the
    first 40 lines. (A ``# comment`` in a fenced shell block was taken for the title.) Until
    2026-12-01 the front matter was read line by line: a nested ``seo: title:`` above the
    title was taken for it, a ``# comment`` and YAML's quoting were kept in it, and front matter
    that is not YAML still gave one; an empty ``title: ""`` gives no title where the heading
    has one."""
    lines = text.splitlines()[:40]
    start = 0
    block = _front_matter_block(text)
    if block is not None:
        start = text[:block[1]].count("\n")
        title = _front_matter_title(text)
        if title:
            return title
    fence: str | None = None
    for i in range(start, len(lines)):
        line = lines[i]
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        heading = _ATX.match(line)
        if heading:
            return _plain_heading(heading.group(1))
        if line.strip() and i + 1 < len(lines) and _SETEXT.match(lines[i + 1]):
            return _plain_heading(line)
    return None


# Pages with more tags than this are read by ``_HtmlTextStream`` instead of a parsed tree: the
# tree took ~120 MB and ~5 s a megabyte of dense markup (a 20 MB page of tags, under
# FACET_MAX_DOCUMENT_MB, ~2.4 GB and ~100 s extrapolated, per indexing thread); ~145 MB this way.
HTML_TREE_MAX_TAGS = 200_000


def _parse_html(path: Path, text: str, warnings: list[str]) -> ParsedDocument:
    tags = text.count("<")
    if tags > HTML_TREE_MAX_TAGS:
        stream = _HtmlTextStream()
        stream.feed(text)
        stream.close()
        title, text = stream.title, _drop_invisible(stream.text())
        warnings.append(f"{path}: about {tags:,} tags, over {HTML_TREE_MAX_TAGS:,}: read as a "
                        "stream of its text (in bounded memory) rather than as a tree")
    else:
        title, text = _html_tree_text(text)
        text = _drop_invisible(text)
    # A table row is one line (``tr`` is a block), its cells parted by _CELL_SEPARATOR; a cell's
    # own blocks (a <p> in a <td>, a layout table's page) still break lines.
    lines = [_CELL_SEPARATOR.join(c for c in (" ".join(cell.split()) for cell in segment.split(_CELL))
                                  if c)
             for segment in text.split(_BLOCK_BREAK)]
    # The title is part of the text (_titled): no search found a page by the words of its
    # <title> alone.
    body = _titled(title, "\n".join(x for x in lines if x))
    return ParsedDocument(str(path), str(path), body, title=title or None, warnings=warnings)


def _html_tree_text(text: str) -> tuple[str | None, str]:
    """A page's title and text read as a tree (``_HtmlTextStream`` reads the same from the
    tokens, past ``HTML_TREE_MAX_TAGS``)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(text, "html.parser")
    for tag in soup(["script", "style", "noscript", "template"]):
        tag.decompose()
    # An inline SVG's <title> and <desc> are a tooltip and a description, not the page's title
    # or text: an icon's "IconTitle" was the page's title, pasted before its text (the indexing
    # exploration of the fourth session of 2026-12-07).
    for tag in soup(["title", "desc"]):
        if tag.find_parent("svg") is not None:
            tag.decompose()
    title = soup.title.get_text(strip=True) if soup.title else None
    return title, _html_text(_page_of(soup))


def _page_of(soup: Any) -> Any:
    """What of a parsed page is its text: everything but its first ``<head>`` (unless that holds
    the ``<body>``). The ``<body>`` alone dropped the text a browser shows after ``</body>`` (a
    footer a CMS writes past it, pages concatenated) or between ``</head>`` and ``<body>``, as
    it moves that text into the body."""
    head = soup.head
    if head is not None and head.find("body") is None:
        head.extract()
    return soup


def _html_text(body: Any) -> str:
    """The text ``get_text`` gives, with ``_BLOCK_BREAK`` around every block element, for every
    ``<br>`` and for each line break inside a ``<pre>`` or ``<textarea>`` (``_PREFORMATTED``):
    lines break there only (a newline between every text node split words that inline tags
    cut, "gran<i>ola</i>" was "gran\nola", found by no search for "granola").

    One walk with a stack of its own, in linear time at any depth: inserting the breaks into
    the tree (``insert_after`` walks to the tag's last descendant) took time quadratic in the
    nesting, 5,000 nested ``<div>``s ~4 s and 20,000 ~65 s (now ~0.3 s and ~1.2 s).
    """
    from bs4 import NavigableString, Tag

    # The string types get_text keeps (no comments, doctypes, <rt> ruby text).
    types = body.interesting_string_types or Tag.MAIN_CONTENT_STRING_TYPES
    types = {types} if isinstance(types, type) else set(types)
    parts: list[str] = []
    todo: list[Any] = list(reversed(body.contents))
    preformatted = 0  # open <pre>/<textarea> elements: their line breaks are the text's
    while todo:
        node = todo.pop()
        if node is None:  # the end of a block element
            parts.append(_BLOCK_BREAK)
        elif node is _CELL:  # the end of a table cell
            parts.append(_CELL)
        elif node is _PREFORMATTED_END:
            preformatted -= 1
        elif isinstance(node, Tag):
            if node.name == "br":
                parts.append(_BLOCK_BREAK)
                continue
            if node.name in _HTML_BLOCK_NAMES:
                parts.append(_BLOCK_BREAK)
                todo.append(None)
            elif node.name in ("td", "th"):
                parts.append(_CELL)
                todo.append(_CELL)
            if node.name in _PREFORMATTED:
                preformatted += 1
                todo.append(_PREFORMATTED_END)
            todo.extend(reversed(node.contents))
        elif isinstance(node, NavigableString) and type(node) in types:
            text = str(node).replace(_CELL, "")  # (a stray one in the text is no cell)
            parts.append(_line_breaks_kept(text) if preformatted else text)
    return "".join(parts)


# Elements whose line breaks a browser shows as written (bs4's ``preserve_whitespace_tags``):
# the lines of a <pre> block of code or a poem ran together into one ("def f(x): return x
# print(f(2))"), where a <br> or a <p> broke a line.
_PREFORMATTED = frozenset({"pre", "textarea"})
_PREFORMATTED_END = object()  # (``_html_text``'s mark of the end of one)


def _line_breaks_kept(text: str) -> str:
    """``text`` of a preformatted element with each line break a ``_BLOCK_BREAK``, so the lines
    stay lines (the spaces within a line are folded as everywhere)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", _BLOCK_BREAK)


class _Pieces:
    """Strings kept in order, joined a few thousand at a time (a million one-character strings
    took ~50 bytes each as objects)."""

    _JOIN_EVERY = 4096

    def __init__(self) -> None:
        self._joined: list[str] = []
        self._tail: list[str] = []

    def add(self, piece: str) -> None:
        self._tail.append(piece)
        if len(self._tail) >= self._JOIN_EVERY:
            self._joined.append("".join(self._tail))
            self._tail.clear()

    def text(self) -> str:
        return "".join(self._joined) + "".join(self._tail)


class _HtmlTextStream(HTMLParser):
    """The text ``_html_text`` gives of the parsed tree, and the title, read from the tokens as
    they come: the same tokenizer as the tree (Python's ``html.parser``), the tree's rules for
    what an end tag closes (the nearest open element of its name, and the elements opened inside
    it; an end tag of nothing open is dropped), for the elements that hold nothing (``<br>``)
    and for a string of blanks alone (one space, or one line break). Memory grows with the text
    kept and the depth of open elements, not with the tags. Character references are read as
    the tree reads them (an unknown ``&foo;`` is ``&foo``)."""

    _DROPPED = frozenset({"script", "style", "noscript", "template"})  # with all they hold
    _NOT_TEXT = frozenset({"rt", "rp"})  # ruby annotations: their strings are not the text's
    _ASCII_BLANKS = " \n\t\f\r"
    _EMPTY = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "keygen",
                        "link", "menuitem", "meta", "param", "source", "track", "wbr", "basefont",
                        "bgsound", "command", "frame", "image", "isindex", "nextid", "spacer"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)  # as the tree's parser: references below
        self._open: list[str] = []
        self._opened: dict[str, int] = {}  # how many of each name are open (membership in O(1))
        self._dropped = 0  # open elements whose content is dropped
        self._not_text = 0
        self._everywhere = _Pieces()
        self._page = _Pieces()  # all but the first <head>'s (``_page_of``)
        self._head_depth: int | None = None  # the first <head>'s place, while open
        self._head_seen = False
        self._head_holds_body = False  # a <body> opened inside it: the tree keeps the head
        self._title: list[str] | None = None  # the first <title>'s strings
        self._title_depth: int | None = None
        self._pending: list[str] = []
        # The depths of the open <title>/<desc> of an inline SVG (a tooltip, a description):
        # dropped with what they hold, as the tree drops them.
        self._svg_notes: list[int] = []
        # Empty elements opened with no end of their own, by name: a count, not a list scanned
        # at every end tag (100,000 <br>s took 112 s).
        self._ended_empty: dict[str, int] = {}

    @property
    def title(self) -> str | None:
        return None if self._title is None else "".join(x.strip() for x in self._title)

    def text(self) -> str:
        return (self._everywhere if self._head_holds_body else self._page).text()

    def _emit(self, piece: str) -> None:
        if self._dropped:
            return
        self._everywhere.add(piece)
        if self._head_depth is None:
            self._page.add(piece)

    def handle_starttag(self, tag: str, attrs: Any, *, own_end: bool = False) -> None:
        self._flush()
        if tag in self._EMPTY:
            if tag == "br" or tag in _HTML_BLOCK_NAMES:  # (<hr>: a block of nothing)
                self._emit(_BLOCK_BREAK)
                if tag != "br":
                    self._emit(_BLOCK_BREAK)
            if not own_end:
                # The tree's parser takes one later </br> as this element's end: no text
                # parted around it.
                self._ended_empty[tag] = self._ended_empty.get(tag, 0) + 1
            return
        self._open.append(tag)
        self._opened[tag] = self._opened.get(tag, 0) + 1
        if tag == "head" and not self._head_seen and not self._dropped:  # (dropped: not the tree's)
            self._head_seen, self._head_depth = True, len(self._open)
        elif tag == "body" and self._head_depth is not None and not self._dropped:
            self._head_holds_body = True
        elif tag in ("title", "desc") and self._opened.get("svg"):
            self._svg_notes.append(len(self._open))
            self._dropped += 1
            return
        elif tag == "title" and self._title is None and not self._dropped:
            self._title, self._title_depth = [], len(self._open)
        if tag in self._DROPPED:
            self._dropped += 1
        elif tag in self._NOT_TEXT:
            self._not_text += 1
        elif tag in _HTML_BLOCK_NAMES:
            self._emit(_BLOCK_BREAK)
        elif tag in ("td", "th"):
            self._emit(_CELL)

    def handle_startendtag(self, tag: str, attrs: Any) -> None:
        self.handle_starttag(tag, attrs, own_end=True)
        self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._ended_empty.get(tag):
            self._ended_empty[tag] -= 1
            return
        self._flush()
        if not self._opened.get(tag):
            return
        while self._open:
            if self._close() == tag:
                return

    def _close(self) -> str:
        depth = len(self._open)
        tag = self._open.pop()
        self._opened[tag] -= 1
        if self._svg_notes and self._svg_notes[-1] == depth:
            self._svg_notes.pop()
            self._dropped -= 1
        elif tag in self._DROPPED:
            self._dropped -= 1
        elif tag in self._NOT_TEXT:
            self._not_text -= 1
        elif tag in _HTML_BLOCK_NAMES:
            self._emit(_BLOCK_BREAK)
        elif tag in ("td", "th"):
            self._emit(_CELL)
        if depth == self._head_depth:
            self._head_depth = None
        if depth == self._title_depth:
            self._title_depth = None
        return tag

    def handle_data(self, data: str) -> None:
        # Held until the next tag, comment or declaration: the tokenizer hands "x < y" over in
        # pieces, the tree keeps it as one string (stripped whole in the title, and kept whole
        # where a piece is blank).
        self._pending.append(data)

    def handle_entityref(self, name: str) -> None:
        from bs4.dammit import EntitySubstitution

        # An unknown name stays as written (the tree's reading, which drops a ``;`` after it).
        character = EntitySubstitution.HTML_ENTITY_TO_CHARACTER.get(name)
        self.handle_data(character if character is not None else f"&{name}")

    def handle_charref(self, name: str) -> None:
        from bs4.builder._htmlparser import BeautifulSoupHTMLParser

        # The tree's own reading of a number (Windows-1252's 128-159, U+FFFD for what no
        # character is, digits followed by more text), so both give the same characters.
        character, _, rest = BeautifulSoupHTMLParser._dereference_numeric_character_reference(name)
        for piece in (character, rest):
            if piece is not None:
                self.handle_data(piece)

    def _flush(self) -> None:
        if not self._pending:
            return
        data = "".join(self._pending)
        self._pending.clear()
        if self._dropped or self._not_text:
            return
        if not data.strip(self._ASCII_BLANKS) and not self._preformatted():
            data = "\n" if "\n" in data else " "  # as the tree keeps a run of blanks alone
        self._string(data)

    def _preformatted(self) -> bool:
        """Whether a ``<pre>`` or ``<textarea>`` is open (``_PREFORMATTED``)."""
        return any(self._opened.get(tag) for tag in _PREFORMATTED)

    def _string(self, data: str) -> None:
        shown = _line_breaks_kept(data) if self._preformatted() else data
        self._emit(shown.replace(_CELL, ""))  # (a stray one in the text is no cell)
        if self._title_depth is not None and self._title is not None:
            self._title.append(data)

    def unknown_decl(self, data: str) -> None:
        self._flush()
        if data.upper().startswith("CDATA[") and not self._dropped:  # (ruby's too: the tree's)
            self._string(data[len("CDATA["):])

    def handle_comment(self, data: str) -> None:
        self._flush()

    def handle_decl(self, decl: str) -> None:
        self._flush()

    def handle_pi(self, data: str) -> None:
        self._flush()

    def close(self) -> None:
        super().close()
        self._flush()
        while self._open:  # what was never closed ends with the page
            self._close()


# Elements a browser lays out as blocks (a line of their own); every other tag is inline.
# (``center``, ``legend``, ``menu``, ``dir``, ``hgroup`` and ``search`` were missing: two
# ``<center>`` lines read "TopNext".)
_HTML_BLOCKS = ["address", "article", "aside", "blockquote", "body", "caption", "center", "dd", "details",
                "dialog", "dir", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer",
                "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hgroup", "hr", "legend", "li",
                "main", "menu", "nav", "ol", "option", "p", "pre", "search", "section", "summary",
                "table", "tbody", "tfoot", "thead", "tr", "ul"]
_HTML_BLOCK_NAMES = frozenset(_HTML_BLOCKS)
# No text reaches _finish with one (a NUL in the first 8 KiB makes a file binary; a later one
# becomes a line break here, where _finish would have removed it).
_BLOCK_BREAK = "\x00"
# Around each table cell (<td>, <th>), parted by _CELL_SEPARATOR within a line (a cell per
# line parted a price from its product). Removed from the text itself (_html_text).
_CELL = "\x01"
# Characters a reader never sees that split a word for search: soft hyphens (&shy;), zero-width
# spaces, word joiners, a BOM inside the text. (Joiners between letters of some scripts and in
# emoji, U+200C/U+200D, are kept.)
_INVISIBLE: dict[int, str | None] = dict.fromkeys(map(ord, "\u00ad\u200b\u2060\ufeff"))
# Latin ligatures (U+FB00-FB06: "\ufb01nancial work\ufb02ow") a PDF's fonts map their glyphs to,
# unfolded as NFKC does, on that range only: no search for "financial" found them, and minilm
# read them as unknown characters. .docx and HTML text gets the same (a paste from a PDF); text
# and record files are kept as written (a streamed .txt is hashed as its bytes read).
_INVISIBLE.update({cp: unicodedata.normalize("NFKC", chr(cp)) for cp in range(0xFB00, 0xFB07)})


def _drop_invisible(text: str) -> str:
    return text.translate(_INVISIBLE)


# Seconds the text of one PDF may take to read. A 307 KB file of 1,000 pages sharing one
# compressed 70 MB stream of drawing (no text) took ~7 s a page: about two hours in which the
# job could not be cancelled and every other job waited (the security exploration of the sixth
# session of 2026-12-02). An ordinary PDF reads in tens of milliseconds a page.
PDF_READ_BUDGET_S = 300.0


def _parse_pdf(path: Path, data: bytes, max_bytes: int) -> ParseResult:
    key = str(path)
    pages: list[str] = []
    size = 0
    notes: list[str] = []
    started = time.monotonic()
    try:
        with _pdf_log(notes):
            from pypdf import PdfReader

            reader = PdfReader(io.BytesIO(data))
            for page in reader.pages:
                pages.append(page.extract_text() or "")
                # Compressed pages can hold far more text than the file: the pages are not all
                # read once their text is over the limit.
                size += len(pages[-1].encode("utf-8", "surrogatepass"))
                if size > max_bytes:
                    return DocumentError(key, key, _text_over_limit(
                        f"{key} (read to page {len(pages)} of {len(reader.pages)})", size, max_bytes))
                took = time.monotonic() - started
                if took > PDF_READ_BUDGET_S and len(pages) < len(reader.pages):
                    return DocumentError(key, key, (
                        f"cannot read {key} in time: its text took over {PDF_READ_BUDGET_S:g} s to read "
                        f"(read to page {len(pages)} of {len(reader.pages)}, {size:,} bytes of text so "
                        "far): its pages decompress to far more than their text (a file made to stall "
                        "indexing?); re-export it, or split it"))
            title = reader.metadata.title if reader.metadata else None
    except MemoryError:
        raise
    except Exception as e:  # any failure of the reader is this file's error
        # A damaged or encrypted file raises whatever the reader met (LimitReachedError on a
        # self-referencing object, DependencyError on AES, RecursionError, struct.error,
        # zlib.error...): each stopped the whole run with a traceback.
        return DocumentError(key, key, _pdf_error(path, e, notes))
    text = _drop_invisible("\n\n".join(p.strip() for p in pages if p.strip()))
    text = _LINE_END_HYPHEN.sub(r"\1\2", text)
    warnings = []
    if notes:
        shown = "; ".join(dict.fromkeys(notes[:_PDF_NOTES]))
        more = f" (and {len(notes) - _PDF_NOTES} more)" if len(notes) > _PDF_NOTES else ""
        warnings.append(f"{path}: the PDF reader noted: {shown}{more}; its text may be "
                        "incomplete (re-export it if so)")
    return _finish(_within_limit(ParsedDocument(key, key, text, title=str(title) if title else None,
                                                warnings=warnings), max_bytes))


def _pdf_error(path: Path, e: BaseException, notes: list[str]) -> str:
    """Why a PDF could not be read, on one line, with the first of what the reader noted
    (``_PdfLog``: "EOF marker not found")."""
    from pypdf.errors import DependencyError, FileNotDecryptedError

    # (pypdf names an object with its memory address: "IndirectObject(7, 0, 1402028...)".)
    why = re.sub(r"(IndirectObject\(\d+, \d+), \d+\)", r"\1)", " ".join(str(e).split()))
    why = why.rstrip(".") or type(e).__name__
    if isinstance(e, DependencyError) and "AES" in str(e):
        return (f"{path} is encrypted (AES), and pypdf needs the `cryptography` package to read "
                "it, which is not installed: install it (pip install cryptography) or save an "
                "unencrypted copy")
    if isinstance(e, FileNotDecryptedError):
        return (f"{path} is password-protected (encrypted); save a copy without the password or "
                "remove it from the source")
    if isinstance(e, RecursionError):
        why = "its objects are nested or refer to each other too deeply to read"
    if notes:
        why = f"{why}; the reader noted: {'; '.join(dict.fromkeys(notes[:_PDF_NOTES]))}"
    return f"{path} is not a readable PDF ({why}); re-export it or remove it from the source"


# pypdf's log lines while it reads a file ("EOF marker not found", "Xref table invalid") are
# kept as that document's warning (_PdfLog), at most this many named: printed by the logging
# setup, they did not say which file they were about.
_PDF_NOTES = 3


class _PdfLog(logging.Handler):
    """The ``pypdf`` logger's one handler (it no longer propagates): a record logged on a
    thread that is reading a PDF (``_pdf_log``) goes to that read's notes, any other to the
    root logger's handlers as before. Per thread: the server parses in several threads."""

    def __init__(self) -> None:
        super().__init__()
        self.local = threading.local()

    def emit(self, record: logging.LogRecord) -> None:
        notes: list[str] | None = getattr(self.local, "notes", None)
        if notes is None:
            logging.getLogger().handle(record)
        elif record.levelno >= logging.WARNING:
            try:
                notes.append(" ".join(record.getMessage().split()))
            except Exception:  # a message pypdf could not format
                notes.append(str(record.msg))


_PDF_LOG = _PdfLog()
_PDF_LOG_LOCK = threading.Lock()


@contextlib.contextmanager
def _pdf_log(notes: list[str]) -> Iterator[None]:
    """pypdf's log lines on this thread, while inside, appended to ``notes``."""
    with _PDF_LOG_LOCK:
        pypdf_logger = logging.getLogger("pypdf")
        if _PDF_LOG not in pypdf_logger.handlers:
            pypdf_logger.addHandler(_PDF_LOG)
            pypdf_logger.propagate = False
    _PDF_LOG.local.notes = notes
    try:
        yield
    finally:
        _PDF_LOG.local.notes = None


# A word a PDF's layout hyphenated at a line end ("opera-\ntors"): joined, as a reader reads it
# (no search for "operators" found it). Only before a lower-case letter, so "fire-\nSafety" and a
# dash ending a line stay.
_LINE_END_HYPHEN = re.compile(r"(\w)-\n(?=[a-z])([a-z])")


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def _parse_docx(path: Path, data: bytes, max_bytes: int) -> ParseResult:
    """A Word document's paragraphs (``word/document.xml``; tables' cells are paragraphs too),
    read with the standard library: a .docx is a zip of XML."""
    import xml.etree.ElementTree as ET
    import zipfile

    key = str(path)
    warnings: list[str] = []
    # Every part is sized (ZipInfo.file_size, the unpacked size; reading stops there, and a
    # part that holds more fails its CRC check) before it is read: core.xml was read whatever
    # its size (a 306 KB file unpacking it to 300 MB peaked at 933 MB), and document.xml was
    # allowed 10x max_bytes (200 MB of XML peaked at ~3.5 GB in ElementTree).
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            info = zf.getinfo("word/document.xml")
            cap = _DOCX_XML_FACTOR * max_bytes
            if info.file_size > cap:  # a zip bomb, or a document far over the limit
                return DocumentError(
                    key, key,
                    f"{path}: its text part (word/document.xml) is {info.file_size / 2**20:.1f} MiB "
                    f"unpacked, over the {cap / 2**20:.1f} MiB limit ({_DOCX_XML_FACTOR}x the "
                    f"{max_bytes / 2**20:.1f} MiB per-document limit); split the document or raise "
                    "FACET_MAX_DOCUMENT_MB")
            root = ET.fromstring(zf.read(info))
            props = None
            if "docProps/core.xml" in zf.namelist():
                core = zf.getinfo("docProps/core.xml")
                if core.file_size > _DOCX_CORE_BYTES:  # metadata only: the text is still read
                    warnings.append(f"{path}: its metadata part (docProps/core.xml) is "
                                    f"{core.file_size / 2**20:.1f} MiB unpacked, over the "
                                    f"{_DOCX_CORE_BYTES / 2**20:.0f} MiB limit; not read, so "
                                    "the document has no title")
                else:
                    props = zf.read(core)
    except (zipfile.BadZipFile, KeyError, ET.ParseError, OSError) as e:
        return DocumentError(key, key, f"{path} is not a readable .docx ({e}); re-save it from "
                                       "Word or export it as PDF or text")
    # The namespace of the document: transitional (what Word saves by default) or strict
    # ("Strict Open XML", whose text was refused as "empty").
    w = root.tag[:root.tag.index("}") + 1] if root.tag.startswith("{") else _W
    paragraphs: list[str] = []
    try:
        _docx_paragraphs(root, w, paragraphs)
    except RecursionError:  # thousands of elements inside each other: a crash of the run
        return DocumentError(key, key, f"{path}: its XML is nested too deeply to read (elements "
                                       f"inside each other more than about "
                                       f"{sys.getrecursionlimit()} levels deep); re-save it from "
                                       "Word or export it as PDF or text")
    title = None
    if props is not None:
        try:
            found = ET.fromstring(props).find("{http://purl.org/dc/elements/1.1/}title")
            title = (found.text or "").strip() or None if found is not None else None
        except ET.ParseError:
            title = None
    # The text part may be 4x max_bytes, the text itself no more than max_bytes.
    return _finish(_within_limit(ParsedDocument(key, key, _drop_invisible("\n".join(paragraphs)),
                                                title=title, warnings=warnings), max_bytes))


_MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
# Between the cells of a table row, on its line (.docx and HTML).
_CELL_SEPARATOR = " | "


def _docx_skipped(tag: str, w: str) -> bool:
    """Whether a .docx element is not read: ``mc:Fallback`` (a repeat of ``mc:Choice`` for
    older readers) and ``w:moveFrom`` (tracked changes: text moved away, read where it went)."""
    return tag == f"{_MC}Fallback" or tag == f"{w}moveFrom"


def _docx_paragraphs(node: Any, w: str, out: list[str]) -> None:
    """Append the text of every paragraph under ``node`` to ``out``, in order, each once.

    A paragraph's own runs make its line; a paragraph nested in it (a text box's) is a line of
    its own after it, not part of it; ``mc:Fallback`` repeats what ``mc:Choice`` holds, for
    older readers, and is skipped (a text box's text was stored four times, glued to the word
    before it), as is ``w:moveFrom`` (tracked changes: text moved away, read where it was moved
    to, ``w:moveTo``; deleted text is ``w:delText``, not read). A table row is one line, its
    cells' text joined by ``_CELL_SEPARATOR`` (a cell per line parted a price from its
    product). A non-breaking hyphen is a hyphen, a symbol its character (both were dropped:
    "e-mail" became "email", "25°C" "25C")."""
    for child in node:
        if _docx_skipped(child.tag, w):
            continue
        if child.tag == f"{w}tr":
            row = [" ".join(" ".join(cell).split()) for cell in _docx_cells(child, w)]
            line = _CELL_SEPARATOR.join(c for c in row if c)
            if line:
                out.append(line)
        elif child.tag == f"{w}p":
            parts: list[str] = []
            nested: list[str] = []
            _docx_runs(child, w, parts, nested)
            line = "".join(parts).strip()
            if line:
                out.append(line)
            out.extend(nested)
        else:
            _docx_paragraphs(child, w, out)


def _docx_cells(row: Any, w: str) -> Iterator[list[str]]:
    """A table row's cells (``w:tc``, also inside a content control), each as its lines."""
    for child in row:
        if child.tag == f"{w}tc":
            lines: list[str] = []
            _docx_paragraphs(child, w, lines)
            yield lines
        elif child.tag not in (f"{w}trPr", f"{w}tblPrEx") and not _docx_skipped(child.tag, w):
            yield from _docx_cells(child, w)


def _docx_runs(node: Any, w: str, parts: list[str], nested: list[str]) -> None:
    for child in node:
        tag = child.tag
        if _docx_skipped(tag, w):
            continue
        if tag == f"{w}p":
            _docx_paragraphs([child], w, nested)
        elif tag == f"{w}t":
            parts.append(child.text or "")
        elif tag == f"{w}tab":
            parts.append("\t")
        elif tag in (f"{w}br", f"{w}cr"):
            parts.append("\n")
        elif tag == f"{w}noBreakHyphen":
            parts.append("-")
        elif tag == f"{w}sym":
            code = child.get(f"{w}char")
            try:
                value = int(code or "", 16)
            except ValueError:
                continue
            # Symbol fonts address their glyphs at U+F0xx: the character is the low byte.
            parts.append(chr(value - 0xF000 if 0xF020 <= value <= 0xF0FF else value))
        else:
            _docx_runs(child, w, parts, nested)


def _parse_json(path: Path, text: str, warnings: list[str], max_bytes: int,
                text_column: str | None = None) -> Iterator[ParseResult]:
    """A .json file: a list of records (one document each, as jsonl lines) or of strings (one
    document each, keyed ``path#item<i>``, as ``facet cluster`` reads such a list), or one
    record."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        yield DocumentError(str(path), str(path), f"{path}:{e.lineno}: malformed JSON ({e.msg.removesuffix(' at')} at "
                                                  f"column {e.colno})")
        return
    except RecursionError:  # '[' * 100000 stopped the whole run with a traceback
        yield DocumentError(str(path), str(path), f"{path}: {_too_deep_json()}; flatten it")
        return
    if isinstance(data, dict):
        doc = _record_document(path, data, "root", max_bytes, [], text_column)
        if doc.key == f"{path}#root":  # one record without an id: the file is the document
            doc.key = str(path)
        yield doc
        return
    if not isinstance(data, list):
        yield DocumentError(str(path), str(path), f"{path}: expected a JSON object or a list of "
                                                  f"objects, got {_json_word(data)}")
        return
    if not data:
        yield DocumentError(str(path), str(path), f"{path} is an empty list: no records to index")
    noted: set[tuple[str, str]] = set()
    repeats = _Repeats(path, "item")
    if data and not any(isinstance(x, dict | str) for x in data):
        # One line for the file, not one per item (500 numbers gave 500 lines).
        kinds = sorted({_json_word(x) for x in data})
        yield DocumentError(str(path), str(path),
                            f"{path}: a list of {len(data)} items, none an object or a string "
                            f"({', '.join(kinds)}); expected a list of records (objects) or of "
                            "texts (strings)")
        return
    for i, record in enumerate(data):
        if isinstance(record, str):  # a list of texts, one document each (as `facet cluster` reads it)
            record = {text_column if text_column is not None else "text": record}
        if not isinstance(record, dict):
            yield DocumentError(f"{path}#item{i}", str(path),
                                f"{path}: item {i} is {_json_word(record)}, expected an object "
                                "or a string")
            continue
        doc = _record_document(path, record, f"item{i}", max_bytes, [], text_column, noted)
        yield repeats.check(doc, f"item{i}", i, f"{path}: item {i}")


class _Repeats:
    """The ids a jsonl/json file gave so far, and where: a record whose id an earlier record of
    the file has is that line's error, keyed ``path#L<line>`` (``path#item<i>``), naming both
    places and which was kept (the first). The indexer's own check, which this one comes
    before, said only "duplicate document id 'd1' in f.jsonl: the file repeats it", naming
    neither line. (A csv's repeated id is still the indexer's.)

    Each id's first place is kept as one int, its number, negative where that record was an
    error: a tuple of a "line N" string and a flag took ~210 bytes a record, 21 MB a 100,000
    (helper-540's memory measurement of 2026-12-07).

    Args:
        path: the file.
        word: what a place is ("line", "item"): places are ``f"{word} {number}"``.
    """

    def __init__(self, path: Path, word: str) -> None:
        self.path, self.word = path, word
        self.first: dict[str, int] = {}  # id -> the number of its first place, < 0: not indexed

    def check(self, doc: ParseResult, where: str, number: int, prefix: str) -> ParseResult:
        fallback = f"{self.path}#{where}"
        if doc.key == fallback:  # no id: keyed by its place, which no other record has
            return doc
        first = self.first.get(doc.key)
        if first is None:
            # (Numbers from 0: an item's; stored + 1 so that its sign always tells.)
            self.first[doc.key] = (number + 1) * (1 if isinstance(doc, ParsedDocument) else -1)
            return doc
        at, kept, place = f"{self.word} {abs(first) - 1}", first > 0, f"{self.word} {number}"
        kept_words = (f"the record of {at} is the one indexed (the first wins), not this one"
                      if kept else "that record is an error (not indexed), and this one is "
                                   "not indexed either")
        return DocumentError(fallback, str(self.path),
                             f"{prefix}: duplicate id {doc.key!r}: {at} has it too; {kept_words} "
                             f"({place}); give each record an id of its own")


def _too_deep_json() -> str:
    """Why JSON that raised RecursionError was not read (the C reader recurses once per
    nested list or object, up to the interpreter's recursion limit)."""
    return (f"JSON nested too deeply to read (lists or objects inside each other more than about "
            f"{sys.getrecursionlimit()} levels deep)")


def _surrogate_at(text: str) -> int | None:
    """Where ``text`` holds an unpaired surrogate (a JSON ``\\ud83d`` escape without its
    pair), which no tokenizer or database reads; None for real text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return e.start
    return None


def _unstorable(value: Any) -> str | None:
    """Why a metadata value cannot go into a payload, or None."""
    for x in value if isinstance(value, list) else [value]:
        if isinstance(x, float) and not math.isfinite(x):
            return f"{x} is not a finite number"
        if isinstance(x, str) and _surrogate_at(x) is not None:
            return "it holds an unpaired surrogate (a broken \\u escape)"
    return None


def _scalar_metadata(record: dict[str, Any], skip: set[str],
                     noted: set[tuple[str, str]] | None = None
                     ) -> tuple[dict[str, Any], list[str], set[tuple[str, str]]]:
    """The record's scalar fields (and lists of scalars) as metadata, why any other field was
    not kept, and the (field, reason) pairs said. A value is kept when it is a string, a number
    or a boolean, or a list of those (empty included); null is no value (the field is left out
    without a word). Not kept, with a warning: an object, a list holding an object, a list or
    null, NaN or Infinity (which Python's json writes by default) and a broken escape (these
    stop the store and the database). Objects and nested lists were dropped without a word, and
    a filter on them then said only "no document has a field". ``noted``: the (field, reason)
    pairs of objects and nested lists already said for this file, not said again (NaN and a
    broken escape are said of each record: they are a value's, not the field's shape)."""
    meta: dict[str, Any] = {}
    dropped: list[str] = []
    said: set[tuple[str, str]] = set()
    for k, v in record.items():
        if k in skip or v is None:
            continue
        scalar = (str, int, float, bool)
        if isinstance(v, scalar) or (isinstance(v, list) and all(isinstance(x, scalar) for x in v)):
            why = _unstorable(v) or _unstorable(str(k))
            if why is None:
                meta[str(k)] = v
                continue
        else:  # said once per file (the shape of a field is the same record after record)
            why = _not_flat(v)
            if noted is not None and (str(k), why) in noted:
                continue
            said.add((str(k), why))
        name = str(k).encode("utf-8", "backslashreplace").decode()
        dropped.append(f"metadata field {name!r} not kept: {why}")
    return meta, dropped, said


def _not_flat(value: Any) -> str:
    """Why a JSON object or a list of anything but scalars is not kept as metadata."""
    if isinstance(value, dict):
        what = "it is an object"
    else:
        held = [n for t, n in ((dict, "objects"), (list, "lists"), (type(None), "null"))
                if any(isinstance(x, t) for x in value)]
        what = f"it is a list holding {' and '.join(held)}"
    return (f"{what} (metadata keeps strings, numbers, booleans and lists of them: flatten it "
            "or write it as a JSON string; said once per file)")


def _named(keys: dict[str, Any], names: tuple[str, ...]) -> Iterator[str]:
    """The keys of ``keys`` called ``names``, in that order, in any case: each name spelled
    exactly so first, then spelled in other cases (a csv header ``ID,Title,Text`` embedded its
    ``ID`` column, its ids and title unread)."""
    folded: dict[str, list[str]] = {}
    for k in keys:
        folded.setdefault(k.casefold(), []).append(k)
    for name in names:
        if name in keys:
            yield name
        yield from (k for k in folded.get(name, ()) if k != name)


_JSON_TYPES = {dict: "object", list: "array", bool: "boolean"}


def _json_word(value: Any) -> str:
    """A JSON value's type in JSON's words ("an object", "a list"), for messages: Python's
    ("is dict", "got str") meant nothing to one who wrote JSON."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return "a string" if isinstance(value, str) else type(value).__name__


def _records_list(value: Any) -> TypeGuard[list[dict[str, Any]]]:
    """Whether ``value`` is a non-empty list of JSON objects (records)."""
    return isinstance(value, list) and bool(value) and all(isinstance(x, dict) for x in value)


def _nested_records(record: dict[str, Any], where: str, text_field: str | None) -> str | None:
    """Why a .json object is not read when its records are a list inside it (``{"data": [{...},
    ...]}``), its field named as the text column or none being one; else None. (It said to
    name the text column, and naming that field then said it "is list".)"""
    if where != "root":
        return None
    name = text_field if text_field is not None else next(
        (k for k, v in record.items() if _records_list(v)), None)
    value = record.get(name) if name is not None else None
    if not _records_list(value):
        return None
    return (f"the records are nested under {name!r} (a list of {len(value)} objects); a .json "
            f"file is read as a list of records or one record: save that list itself as the "
            f"file (jq '.{name}' FILE) or as a .jsonl, one record a line")


def _record_place(path: Path, where: str) -> str:
    """How a record's messages name it, as the file's other messages do: ``f.jsonl:3`` (a line,
    as a malformed line is said), ``f.csv: row 3``, ``f.json: item 2``, ``f.json`` (its one
    object); ``where`` is the place its key holds (``L3``, ``row3``, ``item2``, ``root``). They
    read ``f.jsonl:L3:`` beside ``f.jsonl:2: malformed JSON line``."""
    found = re.fullmatch(r"(L|row|item)(\d+)", where)
    if found is None:
        return str(path)
    kind, number = found.groups()
    return f"{path}:{number}" if kind == "L" else f"{path}: {kind} {number}"


def _record_document(path: Path, record: dict[str, Any], where: str, max_bytes: int,
                     warnings: list[str], text_column: str | None = None,
                     noted: set[tuple[str, str]] | None = None) -> ParseResult:
    """One record as a document. ``noted``: the metadata fields of this file whose shape was
    already said (``_scalar_metadata``); those said on this record are added to it."""
    fallback_key = f"{path}#{where}"
    said_at = _record_place(path, where)
    if any(not k.isascii() for k in record):
        record = {_nfc(k): v for k, v in record.items()}
    if text_column is not None:
        text_column = _nfc(text_column)
        text_field = text_column if text_column in record else None
        if text_field is None:
            dotted = ("; nested fields are not supported: the text column names a top-level "
                      "field" if "." in text_column else "")
            return DocumentError(fallback_key, str(path),
                                 f"{said_at}: no field {text_column!r} (the text column asked for); "
                                 f"found {', '.join(map(str, record)) or 'none'}{dotted}")
    else:
        text_field = next(_named(record, TEXT_FIELDS), None)
    nested = _nested_records(record, where, text_field)
    if nested is not None:
        return DocumentError(fallback_key, str(path), f"{path}: {nested}")
    if text_field is None:
        return DocumentError(fallback_key, str(path),
                             f"{said_at}: no text field; expected one of "
                             f"{', '.join(TEXT_FIELDS)} "
                             f"(found {', '.join(map(str, record)) or 'none'}); name the one "
                             "holding the text as the text column (`facet index --text-column`, "
                             "text_column in POST /jobs)")
    # An id of nothing but blanks (spaces, zero-width characters) is no id, as an empty one:
    # its record was keyed "   ", which no removal takes ("a document key is empty").
    id_field = next((f for f in _named(record, _ID_FIELDS) if record[f] is not None
                     and not (isinstance(record[f], str) and blank(record[f]))), None)
    record_id = record[id_field] if id_field else None
    if isinstance(record_id, dict | list | bool):  # was stored as Python's repr: "{'a': 1}", "True"
        return DocumentError(fallback_key, str(path),
                             f"{said_at}: the record's id ({id_field!r}) is a JSON "
                             f"{_JSON_TYPES[type(record_id)]}, not a string or a number; fix that "
                             "record")
    if isinstance(record_id, float) and record_id.is_integer():
        record_id = int(record_id)  # 1000.0 reads "1000", as the integer 1000 does
    key = str(record_id) if id_field else fallback_key
    text = record[text_field]
    if text is None and where.startswith("row"):  # csv.DictReader's value for a missing field
        return DocumentError(key, str(path), f"{said_at}: no value in the {text_field!r} "
                                             "column (the row has fewer fields than the header)")
    if not isinstance(text, str):
        return DocumentError(key, str(path), f"{said_at}: field {text_field!r} is "
                                             f"{_json_word(text)}, expected a string")
    if len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        return DocumentError(key, str(path), f"{said_at}: text is over the "
                                             f"{max_bytes / 2**20:.1f} MiB per-document limit")
    title_field = next(_named(record, ("title",)), "title")
    title = record.get(title_field)
    if isinstance(title, list) and all(isinstance(t, str | int | float) and not isinstance(t, bool)
                                       for t in title):
        title = " ".join(str(t) for t in title)  # ["Camp", "Stove"] was "['Camp', 'Stove']"
    elif isinstance(title, dict | list | bool):
        warnings = [*warnings, f"{said_at}: {title_field!r} is a JSON {type(title).__name__}, "
                               "not text; left out (give a string)"]
        title = None
    title = str(title) if title not in (None, "") else None
    if _surrogate_at(key) is not None:
        return DocumentError(fallback_key, str(path), f"{said_at}: the record's id holds an "
                             "unpaired surrogate (a broken \\u escape); fix that record")
    if "\x00" in key:  # no database key holds one (PostgreSQL refused the whole batch)
        return DocumentError(fallback_key, str(path), f"{said_at}: the record's id holds a "
                             "NUL character (a \\u0000 escape); fix that record")
    for name, value in ((repr(text_field), text), (repr(title_field), title or "")):
        at = _surrogate_at(value)
        if at is not None:
            return DocumentError(key, str(path), f"{said_at}: field {name} holds an unpaired "
                                 f"surrogate at character {at} (a broken \\u escape, e.g. half "
                                 "an emoji); fix that record")
    # A BEIR record is title + text; both are embedded, so both are part of the document.
    # (Not when the text is the title itself: `--text-column title` stored it twice.)
    notes = [*warnings]
    text = _without_nul(text, f"{said_at}: field {text_field!r}", notes)
    title = _without_nul(title, f"{said_at}: field {title_field!r}", notes) or None if title else None
    full = f"{title}\n{text}" if title and text.strip() and text_field != title_field else text
    # An id column left empty (or blank) is no metadata either: it was stored as `id=''` on a
    # record keyed by its line, where a filled one is the key and no field (the indexing
    # exploration of the fourth session of 2026-12-07).
    no_id = {f for f in _named(record, _ID_FIELDS)
             if record[f] is None or (isinstance(record[f], str) and blank(record[f]))}
    meta, dropped, said = _scalar_metadata(record, {text_field, title_field, *no_id,
                                                    *(f for f in (id_field,) if f)}, noted)
    doc = ParsedDocument(key, str(path), full, title=title, metadata=meta,
                         warnings=[*notes, *(f"{said_at}: {d}" for d in dropped)])
    if blank(text):
        return DocumentError(key, str(path), f"{said_at}: record {key!r} has empty text")
    if noted is not None:  # said on a document that is indexed (not on an error)
        noted |= said
    return doc


def _parse_jsonl(path: Path, lines: Iterable[str], warnings: list[str], max_bytes: int,
                 text_column: str | None = None) -> Iterator[ParseResult]:
    """The records of a .jsonl file, one a line (``lines``: its text split at "\n" only)."""
    seen = 0
    noted: set[tuple[str, str]] = set()
    repeats = _Repeats(path, "line")
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        seen += 1
        where = f"L{lineno}"
        try:
            record = json.loads(line.removesuffix("\n"))  # (its columns, of this line alone)
        except json.JSONDecodeError as e:
            yield DocumentError(f"{path}#{where}", str(path),
                                f"{path}:{lineno}: malformed JSON line "
                                f"({e.msg.removesuffix(' at')} at column {e.colno}); fix or "
                                "remove that line")
            continue
        except RecursionError:  # one such line stopped the whole run, every file unindexed
            yield DocumentError(f"{path}#{where}", str(path),
                                f"{path}:{lineno}: {_too_deep_json()}; fix or remove that line")
            continue
        if not isinstance(record, dict):
            yield DocumentError(f"{path}#{where}", str(path),
                                f"{path}:{lineno}: expected a JSON object, got "
                                f"{_json_word(record)}")
            continue
        doc = _record_document(path, record, where, max_bytes, [], text_column, noted)
        yield repeats.check(doc, where, lineno, f"{path}:{lineno}")
    if seen == 0:
        yield DocumentError(str(path), str(path), f"{path} is empty: no records to index")


def _parse_csv(path: Path, text: Iterable[str], warnings: list[str], max_bytes: int,
               text_column: str | None = None) -> Iterator[ParseResult]:
    """The rows of a .csv file (``text``: its lines, split at "\n" only)."""
    allow_long_csv_fields()
    # The lines the row being read took, then "" when the reader asked for a line after the
    # last: a row only does that when a quoted field is still open at the end of the file
    # (the reader then ends the field there, every later line inside it).
    row_lines: list[str] = []

    def lines() -> Iterator[str]:
        for line in text:
            row_lines.append(line)
            yield line
        row_lines.append("")

    reader = csv.reader(lines())
    try:
        header = next(reader, None)
    except csv.Error as e:  # was uncaught: the whole run stopped with a traceback
        yield DocumentError(str(path), str(path),
                            f"{path}:{reader.line_num}: malformed CSV header "
                            f"({_csv_error(e)}); no rows were read, fix the header")
        return
    if not header:
        yield DocumentError(str(path), str(path), f"{path} is empty: no header row")
        return
    if row_lines[-1] == "":
        yield DocumentError(str(path), str(path),
                            f"{path}:1: an unclosed quote in the header runs to the end of the "
                            "file; no rows were read, close the quote")
        return
    fields = [_nfc(f.strip()) for f in header]
    columns: dict[str, int] = {}  # the column read for each name: the first of that name
    for i, name in enumerate(fields):
        if name:
            columns.setdefault(name, i)
    if not columns:
        yield DocumentError(str(path), str(path), f"{path}: its header row names no column; "
                                                  "no rows were read, name the columns")
        return
    # A repeated name read the last column of that name; an empty one made a metadata key "".
    repeated = [n for n, i in columns.items() if fields.count(n) > 1]
    if repeated:
        warnings.append(f"{path}: the header names {', '.join(map(repr, repeated))} more than "
                        "once; only the first column of each name is read")
    unnamed = [str(i + 1) for i, name in enumerate(fields) if not name]
    if unnamed:
        warnings.append(f"{path}: column{'s' if len(unnamed) > 1 else ''} {', '.join(unnamed)} "
                        f"of the header ha{'ve' if len(unnamed) > 1 else 's'} no name; not "
                        "read (name it in the header)")
    guessed: str | None = None
    if text_column is not None:
        if _nfc(text_column) not in columns:
            yield DocumentError(str(path), str(path),
                                f"{path}: no column {text_column!r} (the text column asked for); its columns "
                                f"are {', '.join(fields)}")
            return
        text_field = _nfc(text_column)
    else:
        found = next(_named(columns, TEXT_FIELDS), None)
        # None of the text names: one column is the text (as `facet cluster` reads a csv), unless
        # it is the id; of two or more none is guessed, as a jsonl record without a text field
        # is refused. The first column was embedded, with a warning: mostly the id, which is
        # already read as the document id (`id,review,stars`).
        only = next(iter(columns)) if len(columns) == 1 else None
        if found is None and (only is None or next(_named(columns, _ID_FIELDS), None) is not None):
            yield DocumentError(str(path), str(path),
                                f"{path}: no text column; expected one of {', '.join(TEXT_FIELDS)} "
                                f"(found {', '.join(columns)}); no rows were read, name the one "
                                "holding the text as the text column (`facet index --text-column`, "
                                "text_column in POST /jobs)")
            return
        text_field = found or next(iter(columns))
        other = next((d for d in (";", "\t", "|") if len(fields) == 1 and d in fields[0]), None)
        if other is not None:
            # One column whose name holds another separator: no --text-column helps.
            guessed = (f"{path}: its header {fields[0]!r} looks {other!r}-separated, but a .csv "
                       "is read as comma-separated: every row became one column, embedded whole "
                       "(ids included); save it with commas")
    if guessed:  # noted once, on the file's first document (_once_per_file)
        warnings.append(guessed)
    longer = False  # a row with more cells than the header: noted once, on its document
    pending: list[str] = []
    rows = 0
    rowno = 1  # the header's
    while True:
        rowno += 1
        row_lines.clear()
        before = reader.line_num
        try:
            row = next(reader)
            while not row:  # a blank line
                row = next(reader)
        except StopIteration:
            break
        except csv.Error as e:
            # The csv reader drops the rest of the line it failed on and goes on at the next,
            # so one bad row no longer loses every row after it. (With the default dialect no
            # error arises inside a quoted field, the field limit aside, which _CSV_FIELD_LIMIT
            # puts out of reach; a quote left open runs to the end of the file, below.)
            rows += 1
            yield DocumentError(f"{path}#row{rowno}", str(path),
                                f"{path}:{reader.line_num}: malformed CSV row ({_csv_error(e)}); "
                                "that row was skipped, the rows after it were read")
            continue
        rows += 1
        start = before + 1 + next(i for i, x in enumerate(row_lines) if x.strip("\r\n"))  # its line
        if row_lines[-1] == "":  # its rows were silently one record, the raw lines its text
            yield DocumentError(f"{path}#row{rowno}", str(path),
                                f"{path}:{start}: an unclosed quote in row {rowno} (line {start}) "
                                f"runs to the end of the file (line {reader.line_num}): that row "
                                "and the lines after it were not read; close the quote (a quote "
                                "inside a quoted field is written twice)")
            break
        if not longer and any(cell.strip() for cell in row[len(fields):]):
            longer = True
            pending = [f"{path}: row {rowno} (line {start}) has {len(row)} cells, more than the "
                       f"header's {len(fields)} columns; the cells after the last column were not "
                       "read (the first such row; quote a cell that holds a comma)"]
        # A row shorter than the header has no value (None) in its last columns.
        record = {name: row[i] if i < len(row) else None for name, i in columns.items()}
        doc = _record_document(path, record, f"row{rowno}", max_bytes, pending, text_field)
        if isinstance(doc, ParsedDocument):
            pending = []  # noted; a row that was an error leaves it to the next document
        yield doc
    if rows == 0:
        yield DocumentError(str(path), str(path), f"{path} has a header but no rows")


# The record files read a line at a time, by their parsers (``_stream_records`` reads them so
# over the stream limit; a .json array is read whole).
_LINE_RECORDS = {".jsonl": _parse_jsonl, ".csv": _parse_csv}


def reads_records_by_line(path: Path, size: int, records_over_bytes: int | None) -> bool:
    """Whether ``parse_file`` reads ``path`` (of ``size`` bytes) a record at a time, as it is
    read (``_stream_records``): a .jsonl/.csv file over ``records_over_bytes`` (None: never)."""
    return (path.suffix.lower() in _LINE_RECORDS and records_over_bytes is not None
            and size > records_over_bytes)


def allow_long_csv_fields() -> None:
    """Raise the csv module's process-wide field limit to ``_CSV_FIELD_LIMIT`` (once): every
    reader of csv text in memory calls it, so a long field reads the same in any process."""
    if csv.field_size_limit() < _CSV_FIELD_LIMIT:
        csv.field_size_limit(_CSV_FIELD_LIMIT)


def _csv_error(e: csv.Error) -> str:
    """The csv module's message, in words for a reader of the file."""
    if "new-line character seen in unquoted field" in str(e):
        # Its own advice ("universal-newline mode") is about Python code, not the file.
        return ("a carriage return (\\r) inside an unquoted field; quote that field or save the "
                "file with \\n or \\r\\n line ends")
    return str(e)
