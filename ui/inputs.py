"""Parsing and checking what a person typed or uploaded in the UI (no Gradio, no models).

Every function here either returns clean values or raises an ``app.errors`` domain error
whose message says what was wrong and how to fix it; the handlers turn those into
``gr.Error``. Nothing here touches the store: paths are checked against the configured
allowed roots before the core ever sees them.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from app.errors import DataError, InvalidRequestError, NotFoundError
from app.files import expand_user
from app.roots import lies_under, links_outside, real_path, real_paths
from app.services.clustering import TEXT_FILE_SUFFIXES, read_label_file, read_text_file, text_lines
from app.services.search import parse_filters
from app.text import blank

# Cluster inputs read from an upload (text lists), whatever the file type.
CLUSTER_FILE_SUFFIXES = TEXT_FILE_SUFFIXES


def clip(text: str | None, limit: int, what: str) -> tuple[str, str | None]:
    """``text`` cut to ``limit`` characters, and a notice saying so when it was cut.

    The notice gives the sizes, never the text itself (a 100k-character paste is not echoed),
    and does not promise that what is left fits: an embedder reads a number of tokens, often
    fewer (an instruction that leaves it no room for the text is refused, saying how long it
    may be).
    """
    text = text or ""
    if len(text) <= limit:
        return text, None
    return text[:limit], (f"The {what} had {len(text):,} characters; only the first {limit:,} were "
                          f"used (FACET_UI_MAX_QUERY_CHARS). The embedder's own limit is in tokens "
                          "and may be lower.")


def results_k(k: float | None, most: int, default: int = 10) -> tuple[int, str | None]:
    """The number of results a Search or Compare box asks for, and a notice when it was changed.

    Above ``most`` it is cut to ``most`` and a fraction is rounded down, each saying so (the
    page's slider did both silently: 100000 searched with 50, 2.5 with 2 while the box kept
    "2.5"), as a long query is cut with a notice. Below 1 it is refused, as an empty query is:
    there is nothing to search with.

    Raises:
        InvalidRequestError: below 1 (or not a number).
    """
    if k is None:
        return default, None
    if not k >= 1:  # NaN too
        raise InvalidRequestError(f"k (the number of results) must be at least 1, got {k:g}")
    top_k = most if k > most else int(k)
    if top_k == k:
        return top_k, None
    return top_k, f"k is a whole number of results from 1 to {most}; searched with {top_k}, not {k:g}."


def whole_number(value: float | None, box: str, default: int) -> int:
    """A Cluster box's whole number as typed (``default`` when empty).

    The boxes had ``precision=0``, and Gradio rounded what was typed before the handler saw
    it: "Largest k to try" 2.5 ran with 2 while the box kept "2.5", with nothing said.

    Raises:
        InvalidRequestError: naming the box, for a fraction (or NaN, or infinity).
    """
    if value is None:
        return default
    if not math.isfinite(value) or value != int(value):
        # repr, not :g, which showed 50.0000001 as "50"
        raise InvalidRequestError(f"{box} must be a whole number, got {value!r}")
    if abs(value) > LARGEST_BOX_NUMBER:
        # (1e300 was taken whole and echoed back as a 301-digit number by the checks after)
        # (-1e13 was told "at most 1,000,000,000,000", which it is)
        bound = f"at most {LARGEST_BOX_NUMBER:,}" if value > 0 else f"at least -{LARGEST_BOX_NUMBER:,}"
        raise InvalidRequestError(f"{box} must be a whole number of {bound}, got {value:.6g}")
    return int(value)


# Past any count a box can mean (texts, clusters).
LARGEST_BOX_NUMBER = 10**12


def require_text(text: str | None, what: str, example: str) -> str:
    """``text`` stripped; an ``InvalidRequestError`` naming the box when it is blank (invisible
    characters alone too: a query of U+200B got the search's own words, an instruction of it
    the Cluster tab's "instruction must not be empty", not the box's)."""
    clean = (text or "").strip()
    if blank(clean):
        raise InvalidRequestError(f"The {what} is empty: type one first (for example "
                                  f"\u201c{example}\u201d).")
    return clean


def parse_filter_text(text: str | None) -> dict[str, Any]:
    """Filters typed as ``key=value`` (or ``key:=JSON``), one per line or separated by ``;``.
    A ``;`` inside the JSON value of a ``key:=`` item (a quoted string, brackets) is part of
    it: ``k:="a;b"`` is the string "a;b" (it was split into ``k:="a`` and ``b"``, bad JSON),
    as the CLI and the API take it; a plain ``key=value`` ends at the first ``;``, so a value
    holding one is written as a JSON string (``url:="http://x/?a=1;b=2"``).

    Raises:
        InvalidRequestError: an item without ``=`` or with bad JSON after ``:=``.
    """
    items = [part.strip() for line in text_lines(text or "") for part in _split_items(line)]
    return parse_filters([item for item in items if item])


def _split_items(line: str) -> list[str]:
    """``line`` cut at each ``;`` outside the JSON value of a ``key:=`` item (the item's first
    ``=``, with ``:`` before it, as ``parse_filters`` reads it)."""
    items: list[str] = []
    start = 0
    json_value = quoted = escaped = False
    depth = 0
    for i, char in enumerate(line):
        if not json_value:
            if char == ";":
                items.append(line[start:i])
                start = i + 1
            elif char == "=" and "=" not in line[start:i]:
                json_value = i > start and line[i - 1] == ":"
            continue
        if quoted:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                quoted = False
        elif char == '"':
            quoted = True
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth = max(depth - 1, 0)
        elif char == ";" and depth == 0:
            items.append(line[start:i])
            start = i + 1
            json_value = False
    items.append(line[start:])
    return items


def pasted_texts(text: str | None) -> list[str]:
    """One text per non-empty line (``text_lines``: a U+2028 pasted inside a text does not
    make it two); a line of invisible characters alone is empty too, as a file's is."""
    return [line.strip() for line in text_lines(text or "") if not blank(line)]


def _suffix(path: Path) -> str:
    return path.suffix.lower()


@contextlib.contextmanager
def _this_threads_warnings(logger_name: str) -> Iterator[list[str]]:
    """The warnings ``logger_name`` logs from this thread inside the block (another session's,
    read at the same time in another thread, are not its)."""
    caught: list[str] = []
    me = threading.get_ident()

    class _Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.thread == me and record.levelno >= logging.WARNING:
                caught.append(record.getMessage())

    handler = _Catch()
    logger = logging.getLogger(logger_name)
    logger.addHandler(handler)
    try:
        yield caught
    finally:
        logger.removeHandler(handler)


def read_text_list(path: Path, notes: list[str] | None = None) -> list[str]:
    """Texts from an uploaded file: ``.txt`` (one per line), ``.json`` (a list of strings, or a
    GoalEx-style object with a ``texts`` list), ``.jsonl`` (a ``text`` field or a string per
    line) or ``.csv`` (the ``text`` column, else the first). The CLI's ``facet cluster FILE``
    reads files with the same function (``app.services.clustering.read_text_file``).

    ``notes`` gets what the reading warned of (records skipped for a blank text, a legacy
    charset guessed), said on the page: it reached the server's log alone.

    Raises:
        DataError: another file type, binary or of no encoding detected, not of the expected shape, or a text
            that is not a string (``null``); named by the upload's name, never its server path.
    """
    if path.suffix.lower() not in CLUSTER_FILE_SUFFIXES:
        raise DataError(f"{path.name}: texts to cluster must be in a "
                        f"{', '.join(CLUSTER_FILE_SUFFIXES)} file, not {path.suffix or 'a file without a suffix'}")
    _still_there(path)
    with _this_threads_warnings("app.services.clustering") as warned:
        texts = read_text_file(path, name=path.name)
    if notes is not None:
        notes += warned
    return texts


def no_texts_in(path: Path) -> str:
    """Why an uploaded file of texts gave none, naming it by its name: empty, or blank lines, a
    header without rows, records of blank texts."""
    try:
        empty = path.stat().st_size == 0
    except OSError:
        empty = False
    why = ("it is empty" if empty else
           "it holds blank lines only, a header without rows, or records whose texts are blank")
    return f"No texts in {path.name}: {why}; give a file with one text per line (or a record each)"


def read_labels(path: Path) -> list[str]:
    """Gold labels for the texts, in order: ``.json`` (a list, or an object with a ``labels``
    list, as GoalEx's labels.json), else one label per line.

    Raises:
        DataError: unreadable, or not of that shape.
    """
    _still_there(path)
    return read_label_file(path, name=path.name)


def _still_there(path: Path) -> None:
    """Refuse an upload that is no longer on the server: Gradio removes its copies an hour
    after the upload (``ui.app.DELETE_CACHE``), and a page left open still names the file
    ("data.json cannot be read: No such file or directory" said nothing of what to do)."""
    if not path.exists():
        raise DataError(f"{path.name}: the upload is gone from the server; upload it again")


# ------------------------------------------------------------------ uploads


def remove_cached_uploads(paths: Iterable[str | Path], cache: Path | None) -> int:
    """Remove Gradio's own copies of uploads the page is done with (staged into a collection's
    upload folder, or refused), so the only copy left is Facet's, which deleting the collection
    removes: Gradio kept every uploaded file in its cache folder (``GRADIO_TEMP_DIR``, default
    ``/tmp/gradio``) for as long as the server ran, and for good without ``delete_cache``,
    served at ``/gradio_api/file=...`` after its collection was deleted.

    Only a file lying (symbolic links resolved) below ``cache`` is removed, with its folder
    when that is left empty (Gradio keeps each upload in a folder named by its content's hash);
    any other path (a caller's own file; ``cache`` None: handlers called in process) is left
    alone. Returns how many files were removed.
    """
    if cache is None:
        return 0
    root = Path(os.path.realpath(cache))
    removed = 0
    for item in dict.fromkeys(str(p) for p in paths):
        real = Path(os.path.realpath(item))
        if real == root or not real.is_relative_to(root) or not real.is_file():
            continue
        try:
            real.unlink()
        except OSError:
            continue  # gone meanwhile, or not ours to remove: delete_cache's, then
        removed += 1
        if real.parent != root:
            with contextlib.suppress(OSError):  # not empty: another upload of the same bytes
                real.parent.rmdir()
    return removed


# ------------------------------------------------------------ allowed roots


def resolve_under_roots(choice: str | None, roots: Sequence[Path], *,
                        exclude: Sequence[Path] = ()) -> Path:
    """The folder ``choice`` names, if it lies under one of the allowed ``roots``.

    ``choice`` is an absolute path or one relative to the first root. Symbolic links are
    resolved first, so a link cannot lead outside. ``exclude``: the server's own folders (its
    data folder, ``FACET_DATA_DIR``): neither they nor a folder inside them may be indexed, and
    a folder holding one is indexed without it (``discover_files``; indexing an allowed root
    that held the data folder read its vector store's json files and the collections' staged
    uploads into the collection).

    Raises:
        InvalidRequestError: no roots configured, an empty choice, a path outside them, or
            an excluded folder (or one inside it).
        NotFoundError: the folder does not exist.
    """
    if not roots:
        raise InvalidRequestError("No server folders may be indexed here (FACET_UI_ALLOWED_ROOTS "
                                  "is empty); upload the files instead")
    text = (choice or "").strip()
    if not text:
        raise InvalidRequestError("Pick a folder first (one under "
                                  f"{', '.join(str(r) for r in roots)})")
    if "\x00" in text:  # no path holds one ("Something went wrong on the server")
        raise InvalidRequestError("A folder name cannot hold a NUL character; pick a folder "
                                  f"under {', '.join(str(r) for r in roots)}")
    resolved_roots = real_paths(roots)
    candidate = expand_user(text)
    if not candidate.is_absolute():
        candidate = resolved_roots[0] / candidate
    resolved = real_path(candidate)
    if lies_under(resolved, resolved_roots) is None:
        raise InvalidRequestError(
            f"{text} is outside the folders this server may index "
            f"({', '.join(str(r) for r in resolved_roots)}); pick one of those or ask the operator "
            "to add it to FACET_UI_ALLOWED_ROOTS")
    if not resolved.is_dir():
        raise NotFoundError(f"{text} is not a folder on the server; pick one from the list")
    own = real_paths(exclude)
    inside = lies_under(resolved, own)
    if inside is not None:
        raise InvalidRequestError(
            f"{text} is the server's own data folder ({inside}, FACET_DATA_DIR) or lies inside "
            "it; it cannot be indexed: pick another folder")
    # Indexing reads a link to a file wherever it points: a link inside the folder must not
    # reach past the allowed roots either (the folder alone was checked).
    outside = links_outside(resolved, resolved_roots, own)
    if outside:
        raise InvalidRequestError(
            f"{text} holds {len(outside)} link(s) to files outside the folders this server may "
            f"index or in its own data folder (e.g. {outside[0].name}); nothing was indexed: "
            "remove them or pick another folder")
    return resolved


def list_folders(roots: Sequence[Path], *, depth: int = 2, limit: int = 200,
                 exclude: Sequence[Path] = ()) -> list[str]:
    """The allowed roots and their subfolders down to ``depth`` (hidden ones skipped), without
    ``exclude`` (the server's data folder) and what lies inside it, nor links to folders
    outside the roots (``resolve_under_roots`` refuses them: the data folder and its
    ``qdrant-edge`` were offered)."""
    own = real_paths(exclude)
    allowed = real_paths(roots)

    def offered(folder: Path) -> bool:
        # Where it leads (a link to a folder outside the roots was listed, and Index refused
        # it as "outside the folders this server may index").
        real = real_path(folder)
        return lies_under(real, own) is None and lies_under(real, allowed) is not None

    found: list[str] = []
    for root in roots:
        base = real_path(root)
        if not base.is_dir() or lies_under(base, own) is not None:
            continue
        found.append(str(base))
        for dirpath, dirnames, _ in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")
                                 and offered(Path(dirpath, d)))
            level = len(Path(dirpath).relative_to(base).parts)
            if level >= depth:
                dirnames[:] = []
            for d in dirnames:
                found.append(str(Path(dirpath) / d))
                if len(found) >= limit:
                    return found
    return found

