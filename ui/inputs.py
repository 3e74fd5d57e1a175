"""Parsing and checking what a person typed or uploaded in the UI (no Gradio, no models).

Every function here either returns clean values or raises an ``app.errors`` domain error
whose message says what was wrong and how to fix it; the handlers turn those into
``gr.Error``. Nothing here touches the store: paths are checked against the configured
allowed roots before the core ever sees them.
"""

from __future__ import annotations

import contextlib
import filecmp
import math
import os
import re
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.errors import DataError, InvalidRequestError, NotFoundError
from app.files import expand_user
from app.roots import lies_under, links_outside, real_path, real_paths
from app.services.clustering import TEXT_FILE_SUFFIXES, read_label_file, read_text_file
from app.services.search import parse_filters

# Cluster inputs read from an upload (text lists), whatever the file type.
CLUSTER_FILE_SUFFIXES = TEXT_FILE_SUFFIXES
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


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
    return int(value)


def require_text(text: str | None, what: str, example: str) -> str:
    """``text`` stripped; an ``InvalidRequestError`` naming the box when it is blank."""
    clean = (text or "").strip()
    if not clean:
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
    items = [part.strip() for line in (text or "").splitlines() for part in _split_items(line)]
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
    """One text per non-empty line."""
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


def _suffix(path: Path) -> str:
    return path.suffix.lower()


def read_text_list(path: Path) -> list[str]:
    """Texts from an uploaded file: ``.txt`` (one per line), ``.json`` (a list of strings, or a
    GoalEx-style object with a ``texts`` list), ``.jsonl`` (a ``text`` field or a string per
    line) or ``.csv`` (the ``text`` column, else the first). The CLI's ``facet cluster FILE``
    reads files with the same function (``app.services.clustering.read_text_file``).

    Raises:
        DataError: another file type, binary or of no encoding detected, not of the expected shape, or a text
            that is not a string (``null``); named by the upload's name, never its server path.
    """
    if path.suffix.lower() not in CLUSTER_FILE_SUFFIXES:
        raise DataError(f"{path.name}: texts to cluster must be in a "
                        f"{', '.join(CLUSTER_FILE_SUFFIXES)} file, not {path.suffix or 'a file without a suffix'}")
    _still_there(path)
    return read_text_file(path, name=path.name)


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


@dataclass(frozen=True)
class CheckedUploads:
    """Uploaded files split into what can be indexed and what was refused (with why)."""

    accepted: list[Path]
    refused: list[str]


def check_uploads(paths: Sequence[str | Path], *, max_mb: float,
                  suffixes: Sequence[str]) -> CheckedUploads:
    """Refuse uploads over ``max_mb`` or of a type the indexer does not read.

    Gradio already refuses larger files at upload (``max_file_size``); this is the same rule
    for callers that reach the handler another way.
    """
    accepted, refused = [], []
    for item in paths:
        path = Path(item)
        name = path.name
        size = path.stat().st_size if path.is_file() else 0
        if not path.is_file():
            refused.append(f"{name}: the upload is gone from the server; upload it again")
        elif size > max_mb * 2**20:
            refused.append(f"{name} is {size / 2**20:.1f} MB, over the {max_mb:g} MB upload limit "
                           "(FACET_UI_MAX_UPLOAD_MB)")
        elif _suffix(path) not in suffixes:
            refused.append(f"{name}: {path.suffix or 'no suffix'} files cannot be indexed; "
                           f"upload {', '.join(suffixes)}")
        else:
            accepted.append(path)
    return CheckedUploads(accepted, refused)


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


# What a file name on the server may not hold: separators, characters Windows refuses (a
# folder may be shared), control characters.
_UNSAFE_NAME = re.compile(r'[\x00-\x1f\x7f/\\:*?"<>|]+')
_MAX_NAME_BYTES = 200  # file systems allow 255 bytes; Cyrillic and CJK take 2-3 per character


def original_name(path: Path) -> str:
    """The upload's own name as the server's file name (Gradio keeps it as the last part),
    with only what a file name cannot hold replaced, and no leading dot (a hidden file is
    never indexed). Letters of any script, spaces and brackets stay: keeping only ASCII made
    "отчёт.txt" the file "txt", which has no suffix and was skipped, and made "my notes.txt"
    and "my_notes.txt" one file."""
    cleaned = _UNSAFE_NAME.sub("_", path.name).strip()
    name = cleaned.lstrip(".").strip()
    if not Path(name).suffix and Path(cleaned).suffix:
        # "..txt" became "txt": no suffix, skipped, and kept in the uploads for good.
        name = "upload" + Path(cleaned).suffix
    stem, suffix = Path(name).stem, Path(name).suffix
    if not stem or stem == suffix:
        stem = "upload"
    while stem and len((stem + suffix).encode("utf-8")) > _MAX_NAME_BYTES:
        stem = stem[:-1]
    return (stem or "upload") + suffix


def _legacy_name(path: Path) -> str:
    """The name uploads were given before: ASCII letters, digits and ``._-`` only."""
    return (_SAFE_NAME.sub("_", path.name).strip("._") or "upload")[:120]


@dataclass
class Staged:
    """Uploads copied into a collection's folder, with the files they replaced kept aside
    until the job is accepted: a refused job puts the folder back as it was (deleting a
    replaced file there would make the next upload job's sync drop its document)."""

    copies: list[Path]
    previous: dict[Path, Path]  # copy -> the version it replaced, kept outside the folder
    renamed: list[str] = field(default_factory=list)  # notices: uploads given a numbered name

    def undo(self) -> None:
        for copy in self.copies:
            kept = self.previous.get(copy)
            if kept is not None:
                os.replace(kept, copy)
            else:
                copy.unlink(missing_ok=True)

    def keep(self) -> None:
        for kept in self.previous.values():
            kept.unlink(missing_ok=True)


def _target(folder: Path, upload: Path) -> Path:
    """Where ``upload`` goes in ``folder``: its name (``original_name``), or the name an
    earlier upload of it was given under the old ASCII-only rule if that file is there, so that
    uploading it again still updates its document rather than adding a second one."""
    target = folder / original_name(upload)
    legacy = folder / _legacy_name(upload)
    if legacy != target and not target.exists() and legacy.is_file() \
            and legacy.suffix.lower() == target.suffix.lower() and legacy.stem:
        return legacy
    return target


def _numbered(target: Path, n: int) -> Path:
    """``target`` as ``stem (n).suffix``, the stem cut to keep the name within
    ``_MAX_NAME_BYTES`` and the suffix whole."""
    stem, suffix = target.stem, target.suffix
    while stem and len(f"{stem} ({n}){suffix}".encode()) > _MAX_NAME_BYTES:
        stem = stem[:-1]
    return target.with_name(f"{stem.rstrip()} ({n}){suffix}")


def _cut(target: Path) -> bool:
    """Whether ``target``'s name is as long as a name gets (Gradio cuts an upload's to 200
    bytes, ``original_name`` too; a character is up to 4): likely cut from a longer one."""
    return len(target.name.encode()) > _MAX_NAME_BYTES - 4


def _distinct(files: Sequence[Path], targets: list[Path]) -> list[Path]:
    """``targets`` with each name that an earlier one in the list has numbered (``a (2).txt``,
    ``a (3).txt``), and a cut name (``_cut``) numbered too when a different file has it in
    the folder already: two uploads of one name, or of long names Gradio cut to one, were
    refused (their names apparently different), and a later upload of such a name replaced an
    earlier job's file, its document silently lost. Numbered in order, so the same uploads
    again get the same names and update their documents (a cut name's file whose bytes are
    the same is the same file)."""
    taken: set[Path] = set()
    out = []
    for path, target in zip(files, targets, strict=True):
        n = 1
        name = target
        while name in taken or (_cut(target) and name.is_file()
                                and not filecmp.cmp(path, name, shallow=False)):
            n += 1
            name = _numbered(target, n)
        taken.add(name)
        out.append(name)
    return out


def stage_uploads(files: Sequence[Path], folder: Path) -> Staged:
    """Copy accepted uploads into ``folder`` (one per collection, so uploading a file again
    updates its document instead of adding a copy). Uploads that would share a name there
    get numbered names (``_distinct``), each named in ``Staged.renamed``.
    """
    folder.mkdir(parents=True, exist_ok=True)
    first = [_target(folder, path) for path in files]
    targets = _distinct(files, first)
    aside = folder.parent / ".previous" / folder.name
    staged = Staged([], {}, [f"{path.name} was saved as {target.name}: another upload has that name on "
                             "the server (a long name is cut to 200 bytes)"
                             for path, wanted, target in zip(files, first, targets, strict=True)
                             if target != wanted])
    for path, target in zip(files, targets, strict=True):
        if target.exists():
            aside.mkdir(parents=True, exist_ok=True)
            kept = aside / target.name
            os.replace(target, kept)
            staged.previous[target] = kept
        # Copied under a hidden name (never indexed), then renamed: a job, or the clean-up of
        # files that cannot be indexed (``drop_unindexable``), never sees half a file.
        partial = target.with_name(f".{target.name}.part")
        shutil.copyfile(path, partial)
        os.replace(partial, target)
        staged.copies.append(target)
    return staged


def drop_unindexable(folder: Path, documents: Iterable[str], *, max_bytes: int,
                     remove: bool = True) -> list[str]:
    """Remove from an upload ``folder`` the files among ``documents`` (the keys of a job's
    per-document errors) that cannot be indexed at all, and return the names of those no longer
    there (``remove=False``: only return them). Left there, each later upload job (which
    indexes the whole folder) listed the same errors again, and the collection counted them as
    failed for good.

    A file counts only when parsing it again now gives nothing but an error for the file
    itself (binary, empty, malformed JSON, an unreadable PDF...): a bad record of a .jsonl
    (``file#L3``) leaves the file and its other records alone, a file replaced since by one
    that reads is kept (as is one replaced while it was being parsed), and so is one whose
    error was the server's (a worker that failed), not its content's.
    """
    from indexer.parsing import SUPPORTED_SUFFIXES, DocumentError, parse_file

    folder = folder.resolve()
    gone: list[str] = []
    for key in dict.fromkeys(documents):
        path = Path(key)
        if path.parent != folder or _suffix(path) not in SUPPORTED_SUFFIXES:
            continue  # a record (``file.jsonl#L3``, an id) or a file elsewhere
        if path.is_file():
            if not remove:
                continue
            before = path.stat()
            results = list(parse_file(path, max_bytes=max_bytes))
            if not results or not all(isinstance(r, DocumentError) and r.key == key
                                      for r in results):
                continue
            if _replaced(path, before):
                continue  # a new upload of it arrived meanwhile: not the file that failed
            path.unlink(missing_ok=True)
        gone.append(path.name)
    return gone


def _replaced(path: Path, before: os.stat_result) -> bool:
    try:
        now = path.stat()
    except FileNotFoundError:
        return False
    return (now.st_ino, now.st_mtime_ns, now.st_size) != (before.st_ino, before.st_mtime_ns,
                                                          before.st_size)


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
            f"index (e.g. {outside[0].name}); nothing was indexed: remove them or pick another "
            "folder")
    return resolved


def list_folders(roots: Sequence[Path], *, depth: int = 2, limit: int = 200,
                 exclude: Sequence[Path] = ()) -> list[str]:
    """The allowed roots and their subfolders down to ``depth`` (hidden ones skipped), without
    ``exclude`` (the server's data folder) and what lies inside it (``resolve_under_roots``
    refuses them: the data folder and its ``qdrant-edge`` were offered)."""
    own = real_paths(exclude)
    found: list[str] = []
    for root in roots:
        base = real_path(root)
        if not base.is_dir() or lies_under(base, own) is not None:
            continue
        found.append(str(base))
        for dirpath, dirnames, _ in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")
                                 and lies_under(real_path(Path(dirpath, d)), own) is None)
            level = len(Path(dirpath).relative_to(base).parts)
            if level >= depth:
                dirnames[:] = []
            for d in dirnames:
                found.append(str(Path(dirpath) / d))
                if len(found) >= limit:
                    return found
    return found

