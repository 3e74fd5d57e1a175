"""Which paths a server may index: the folders an operator allowed (``FACET_UI_ALLOWED_ROOTS``
for the UI's Index tab, ``FACET_API_ALLOWED_ROOTS`` for ``POST /jobs``) and never its own data
folder (``FACET_DATA_DIR``). One check for every edge: the API indexed any path the process
could read (``allowed/docs/../../outside`` included) while the UI refused it.

Paths are compared as the file system leads them: ``~`` expanded, ``..`` folded and symbolic
links resolved, so neither a ``..`` nor a link can lead outside a root.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path

from app.files import expand_user


def real_path(path: Path | str) -> Path:
    """``path`` absolute, ``~`` expanded, ``..`` folded and its links resolved (as far as they
    exist: a path that does not exist yet is kept past its last existing folder). A link loop
    is kept as written, not a ``RuntimeError`` (``Path.resolve`` before Python 3.13).

    Raises:
        ValueError: ``path`` holds a NUL character (no path can).
    """
    return Path(os.path.realpath(expand_user(path)))


def real_paths(folders: Iterable[Path | str]) -> list[Path]:
    """Each of ``folders`` as ``real_path`` gives it."""
    return [real_path(f) for f in folders]


def lies_under(resolved: Path, roots: Iterable[Path]) -> Path | None:
    """The first of ``roots`` that ``resolved`` is or lies under, both real paths already
    (``real_path``: for a walk's many paths against roots resolved once), else None."""
    return next((root for root in roots if resolved == root or resolved.is_relative_to(root)),
                None)


def root_holding(path: Path | str, roots: Iterable[Path | str]) -> Path | None:
    """The first of ``roots`` that ``path`` is or lies under, both compared as ``real_path``
    gives them (the root as that gives it), else None. A path holding a NUL character lies
    under none.
    """
    try:
        resolved = real_path(path)
    except ValueError:  # a NUL character: no such path
        return None
    return lies_under(resolved, real_paths(roots))


def links_outside(folder: Path, roots: Sequence[Path | str],
                  exclude: Collection[Path] = ()) -> list[Path]:
    """The files a walk of ``folder`` (``indexer.parsing.discover``, ``exclude`` left out)
    would read that lie outside every one of ``roots``, or inside one of ``exclude`` (the data
    folder): links to files elsewhere. The walk reads a link to a file wherever it points (it
    does not enter links to folders), so a folder under a root may still lead past it, or into
    the data folder it does not walk (another collection's staged uploads were indexed, and
    found, through a link).

    Raises:
        As ``discover`` (a folder that does not exist).
    """
    from indexer.parsing import discover

    allowed, outside = split_under(discover(folder, exclude), roots)
    return sorted([*outside, *links_into(allowed, exclude, folder)])


def links_into(files: Sequence[Path], folders: Collection[Path | str], source: Path | str) -> list[Path]:
    """Those of ``files`` (a walk of ``source``) whose real path lies under one of ``folders``
    (the data folder): links into it. A source that itself lies in the data folder (a
    collection's upload folder) reads its own files, not the rest of the data folder's. Only
    that one: a source holding the data folder (``/srv`` for ``/srv/data``) exempted every
    file under it, so a link in ``/srv/pub`` to another collection's staged upload was read,
    indexed and found by search (the security review of 2026-12-06), where indexing
    ``/srv/pub`` alone refused it."""
    if not folders:
        return []
    inside = split_under(files, list(folders))[0]
    if not inside:
        return []
    try:
        own = lies_under(real_path(source), real_paths(folders)) is not None
    except ValueError:  # (a NUL: no such source)
        own = False
    return split_under(inside, [source])[1] if own else inside


def split_under(files: Sequence[Path], roots: Sequence[Path | str]) -> tuple[list[Path], list[Path]]:
    """``files`` split into those whose real path lies under one of ``roots`` and the others
    (links to files elsewhere; a path holding a NUL character lies under none): what a walk
    of an allowed folder may read and what it may not (``links_outside`` before a job,
    ``IndexOptions.confine`` as it runs)."""
    allowed = real_paths(roots)
    inside: list[Path] = []
    outside: list[Path] = []
    for path in files:
        try:
            resolved: Path | None = real_path(path)
        except ValueError:
            resolved = None
        (inside if resolved is not None and lies_under(resolved, allowed) is not None else outside).append(path)
    return inside, outside
