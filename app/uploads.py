"""Uploaded files staged into a collection's upload folder (``Facet.upload_folder``:
``DATA_DIR/uploads/NAME``) for a job that indexes the folder: the UI's Index tab and the API's
``POST /collections/{name}/uploads`` alike (``Facet.upload``). No Gradio, no models.

One folder per collection: uploading a file again updates its document instead of adding a
copy; two uploads of one name get numbered names; a file is copied under a hidden name and
renamed, so a job never reads half of one; what a refused job staged is put back as it was;
what a finished upload job could not index at all is removed from the folder
(``drop_unindexable``), so each later job does not list its errors again. (Moved here from
``ui.inputs`` on 2026-12-01, when the API got its upload route.)
"""

from __future__ import annotations

import contextlib
import filecmp
import itertools
import json
import os
import re
import secrets
import shutil
import tempfile
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.services.collections import JobInfo

def upload_folder_path(data_dir: Path | str, collection: str) -> Path:
    """A collection's upload folder, ``DATA_DIR/uploads/NAME``, which every upload job indexes
    whole (the name as given: ``Facet.upload_folder`` checks it first)."""
    return Path(data_dir) / "uploads" / collection


def _suffix(path: Path) -> str:
    return path.suffix.lower()


@dataclass(frozen=True)
class UploadResult:
    """What ``Facet.upload`` did: the job that indexes the collection's upload folder, the
    uploads refused (each with why: too large, a type the indexer does not read), those saved
    under another name (another file has theirs) or once (given twice), the paths the files
    were saved at (a file's document key there, which ``remove_documents`` takes; a record
    file's records are keyed by their ids, or ``PATH#L3``), and the files an earlier upload
    job could not index that were removed from the folder first."""

    job: JobInfo
    refused: list[str]
    renamed: list[str]
    removed: list[str]
    staged: list[str] = field(default_factory=list)  # the files' paths on the server: their keys


@dataclass(frozen=True)
class CheckedUploads:
    """Uploaded files split into what can be indexed and what was refused (with why)."""

    accepted: list[Path]
    refused: list[str]


def check_uploads(paths: Sequence[str | Path], *, max_mb: float, suffixes: Sequence[str],
                  limit: str = "FACET_UI_MAX_UPLOAD_MB") -> CheckedUploads:
    """Refuse uploads over ``max_mb`` (``limit``: the setting that says so) or of a type the
    indexer does not read.

    The UI's Gradio already refuses larger files at upload (``max_file_size``), the API's body
    limit larger requests; this is the same rule for every way in.
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
                           f"({limit})")
        elif _suffix(path) not in suffixes:
            refused.append(f"{name}: {path.suffix or 'no suffix'} files cannot be indexed; "
                           f"upload {', '.join(suffixes)}")
        else:
            accepted.append(path)
    return CheckedUploads(accepted, refused)


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
    # In composed form (NFC): the same name typed on a Mac arrives decomposed (NFD), and was
    # staged as a second file beside the first, two documents of one name.
    cleaned = _UNSAFE_NAME.sub("_", unicodedata.normalize("NFC", path.name)).strip()
    name = cleaned.lstrip(".").strip()
    if not Path(name).suffix and Path(cleaned).suffix:
        # "..txt" became "txt": no suffix, skipped, and kept in the uploads for good.
        name = "upload" + Path(cleaned).suffix
    stem, suffix = Path(name).stem, Path(name).suffix
    if not stem or stem == suffix:
        stem = "upload"
    while len(suffix.encode("utf-8")) > _MAX_NAME_BYTES // 2:
        # No type Facet reads has such a suffix: cut, the file is refused for its type. Whole,
        # it made a name the file system refused, a 500 from the upload route.
        suffix = suffix[:-1]
    while stem and len((stem + suffix).encode("utf-8")) > _MAX_NAME_BYTES:
        stem = stem[:-1]
    return (stem or "upload") + suffix


@dataclass
class Staged:
    """Uploads copied into a collection's folder, with the files they replaced kept aside
    (in a folder of this staging's own, ``aside``) until the job is accepted: a refused job
    puts the folder back as it was (deleting a replaced file there would make the next upload
    job's sync drop its document)."""

    copies: list[Path]
    previous: dict[Path, Path]  # copy -> the version it replaced, kept outside the folder
    renamed: list[str] = field(default_factory=list)  # notices: uploads given a numbered name
    aside: Path | None = None  # where ``previous`` are kept: made when the first is

    def undo(self) -> None:
        for copy in reversed(self.copies):
            kept = self.previous.get(copy)
            if kept is not None:
                os.replace(kept, copy)
            else:
                copy.unlink(missing_ok=True)
        self._drop_aside()

    def keep(self) -> None:
        for kept in self.previous.values():
            kept.unlink(missing_ok=True)
        self._drop_aside()

    def _drop_aside(self) -> None:
        if self.aside is not None:
            shutil.rmtree(self.aside, ignore_errors=True)

    def put_aside(self, target: Path) -> None:
        """Keep the file (or link) at ``target`` in this staging's aside folder, made at the
        first (``tempfile.mkdtemp``: new, private, never a path someone planted): a second
        name for it, so that it stays in the folder until the new copy replaces it in one
        rename. It was moved out first: a process killed between the two renames left the
        folder without the file, and the next upload job's sync removed its document."""
        if self.aside is None:
            self.aside = Path(tempfile.mkdtemp(prefix=f".previous-{target.parent.name}-",
                                               dir=target.parent.parent))
        kept = self.aside / target.name
        try:
            os.link(target, kept, follow_symlinks=False)
        except OSError:
            # A disk without hard links (exFAT, FAT): a copy, so that the file stays in the
            # folder all the same (it was moved out, the window this closes on other disks).
            shutil.copy2(target, kept, follow_symlinks=False)
        self.previous[target] = kept


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


def _distinct(files: Sequence[Path], targets: list[Path], *, ignores_case: bool = False) -> list[Path]:
    """``targets`` with each name that an earlier one in the list has numbered (``a (2).txt``,
    ``a (3).txt``), and a cut name (``_cut``) numbered too when a different file has it in
    the folder already: two uploads of one name, or of long names Gradio cut to one, were
    refused (their names apparently different), and a later upload of such a name replaced an
    earlier job's file, its document silently lost. Numbered in order, so the same uploads
    again get the same names and update their documents (a cut name's file whose bytes are
    the same is the same file).

    ``ignores_case``: the folder's disk takes names apart from case as one (``_ignores_case``):
    there ``Report.txt`` and ``report.txt`` are one file, so a name is taken by an earlier one
    of the list that differs only in case, and by a file in the folder named so; the second
    replaced the first, whose document was then removed as gone."""
    def key(name: Path) -> str:
        return name.name.lower() if ignores_case else name.name

    listing: set[str] | None = None

    def other_case_on_disk(name: Path) -> bool:
        nonlocal listing
        if not ignores_case or not os.path.lexists(name):
            return False
        if listing is None:
            listing = set(os.listdir(name.parent))
        return name.name not in listing  # found only under another case: another file

    taken: set[str] = set()
    out = []
    for path, target in zip(files, targets, strict=True):
        n = 1
        name = target
        while key(name) in taken or other_case_on_disk(name) or (
                _cut(target) and name.is_file() and not filecmp.cmp(path, name, shallow=False)):
            n += 1
            name = _numbered(target, n)
        taken.add(key(name))
        out.append(name)
    return out


def _ignores_case(folder: Path) -> bool:
    """Whether ``folder``'s disk takes names that differ only in case as one (macOS's and
    Windows' defaults, exFAT and FAT drives), tried with a hidden file of its own."""
    fd, probe = _new_hidden(folder, "case-probe")
    os.close(fd)
    try:
        return os.path.lexists(probe.with_name(probe.name.upper()))
    finally:
        probe.unlink(missing_ok=True)


def _new_hidden(folder: Path, name: str) -> tuple[int, Path]:
    """A new hidden file in ``folder`` for a copy of ``name`` on its way in, open for writing:
    ``.NAME.<random>.part``, made with ``O_CREAT | O_EXCL`` (a name that exists, a link
    included, is never opened: another is drawn), its mode as the umask makes a new file's."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        partial = folder / f".{name}.{secrets.token_hex(4)}.part"
        try:
            return os.open(partial, flags, 0o666), partial
        except FileExistsError:
            continue
    raise FileExistsError(f"no free hidden name for {name} in {folder}")


def _once(files: Sequence[Path], notes: list[str], *, ignores_case: bool) -> list[Path]:
    """``files`` without a repeat of an earlier one: the same name (as the disk compares it)
    and the same bytes, noted in ``notes``. The UI's upload box keeps its files after a refused
    job (a mistyped collection name), so that pressing the button again works; a user who
    chose the file again sent it twice, and it was indexed twice, as NAME and "NAME (2)", each
    search then showing it twice (the UI review of the fourth session of 2026-12-06)."""
    kept: dict[str, list[Path]] = {}
    out = []
    for path in files:
        name = original_name(path)
        seen = kept.setdefault(name.lower() if ignores_case else name, [])
        if any(_same_file(path, earlier) for earlier in seen):
            notes.append(f"{path.name} was given twice, the same file: it is saved once")
            continue
        seen.append(path)
        out.append(path)
    return out


def _same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` hold the same bytes (the same path, or equal content)."""
    try:
        return os.path.samefile(a, b) or filecmp.cmp(a, b, shallow=False)
    except OSError:
        return False


# What a cancelled upload job's message says of the files taken back (``Facet.cancel_job``),
# then their names; the UI offers no Resume for such a job.
TAKEN_BACK = "the files it uploaded were taken back"


def stage_uploads(files: Sequence[Path], folder: Path) -> Staged:
    """Copy accepted uploads into ``folder`` (one per collection, so uploading a file again
    updates its document instead of adding a copy). Uploads that would share a name there
    get numbered names (``_distinct``), each named in ``Staged.renamed``; a file given twice
    (the same name and bytes) is saved once (``_once``), said there too.

    Each is copied into a new hidden file of a name of its own (``_new_hidden``: created, never
    opened through a link planted there), then renamed over its target, so a job, the
    clean-up of files that cannot be indexed (``drop_unindexable``) or another upload at the
    same time never sees half a file; the name was ``.NAME.part``, the same for every upload, so
    two uploads at once raced on it (a 500, a file of both), and a link planted at that name had
    the copy written wherever it pointed. A failure part-way (a full disk) puts back what was
    staged before it, as a refused job does.
    """
    folder.mkdir(parents=True, exist_ok=True)
    ignores_case = _ignores_case(folder)
    staged = Staged([], {})
    files = _once(files, staged.renamed, ignores_case=ignores_case)
    first = [folder / original_name(path) for path in files]
    targets = _distinct(files, first, ignores_case=ignores_case)
    # Names asked for so far (sets: an upload may hold a thousand files), as given and as the
    # disk compares them.
    exact_before: set[str] = set()
    compared_before: set[str] = set()
    for path, wanted, target in zip(files, first, targets, strict=True):
        compared = wanted.name.lower() if ignores_case else wanted.name
        if target != wanted:
            if compared in compared_before:
                why = "another file of this upload has that name"
                case_only = wanted.name not in exact_before
            else:
                why = "a different file in the collection's uploads has that name"
                case_only = not _cut(wanted)
            if case_only:
                why += " but for case, and this disk takes names that differ only in case as one"
            elif _cut(wanted):
                why += " (a long name is cut to 200 bytes)"
            staged.renamed.append(f"{path.name} was saved as {target.name}: {why}")
        exact_before.add(wanted.name)
        compared_before.add(compared)
    try:
        for path, target in zip(files, targets, strict=True):
            fd, partial = _new_hidden(folder, target.name)
            try:
                with open(fd, "wb") as out, path.open("rb") as given:
                    shutil.copyfileobj(given, out)
                if os.path.lexists(target):
                    staged.put_aside(target)
                staged.copies.append(target)  # (undone from here on: its previous version back)
                os.replace(partial, target)
            except BaseException:
                partial.unlink(missing_ok=True)
                raise
    except BaseException:
        staged.undo()
        raise
    return staged


def drop_unindexable(folder: Path, documents: Iterable[str], *, max_bytes: int,
                     remove: bool = True, messages: Iterable[tuple[str, str]] = ()) -> list[str]:
    """Remove from an upload ``folder`` the files among ``documents`` (the keys of a job's
    per-document errors) that cannot be indexed at all, and return the names of those no longer
    there (``remove=False``: only return them). Left there, each later upload job (which
    indexes the whole folder) listed the same errors again, and the collection counted them as
    failed for good. With ``remove``, each file in the folder of a type the indexer does not
    read goes too, named after them (``_unreadable_types``).

    A file counts only when parsing it again now gives nothing but an error for the file
    itself (binary, empty, malformed JSON, an unreadable PDF...): a bad record of a .jsonl
    (``file#L3``) leaves the file and its other records alone, a file replaced since by one
    that reads is kept (as is one replaced while it was being parsed), and so is one whose
    error was the server's (a worker that failed), not its content's.

    ``messages``: the job's errors as ``(document, message)``; a record file every record of
    which was refused as a duplicate of another file's id (``duplicate_prefix``) goes too: it
    added nothing, and every later upload job refused its records again, while the page had no
    row of it to remove (the UI exploration of the sixth session of 2026-12-05).
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
    gone += _only_duplicates(folder, messages, max_bytes, remove)
    if remove:
        for path in _unreadable_types(folder, SUPPORTED_SUFFIXES):
            path.unlink(missing_ok=True)
            gone.append(path.name)
    return gone


def _only_duplicates(folder: Path, messages: Iterable[tuple[str, str]], max_bytes: int,
                     remove: bool) -> list[str]:
    """The record files of ``folder`` whose every record the job refused as a duplicate of
    another file's id (``messages``: its errors), removed (``remove=False``: only those no
    longer there named); their names."""
    from app.services.indexing import duplicate_prefix
    from indexer.parsing import DocumentError, parse_file

    refused: dict[str, list[str]] = {}  # key -> its messages, one per occurrence refused
    named: set[str] = set()
    for key, message in messages:
        start = duplicate_prefix(key, folder / "x")[:-len("x: ")]  # "... in FOLDER/"
        if message.startswith(start):
            refused.setdefault(key, []).append(message)
            named.add(message[len(start):].split(": ", 1)[0])
    gone: list[str] = []
    for name in sorted(named):
        path = folder / name
        if path.parent != folder:
            continue
        if not path.is_file():
            gone.append(name)
            continue
        if not remove:
            continue
        before = path.stat()
        keys = Counter(r.key for r in parse_file(path, max_bytes=max_bytes)
                       if not isinstance(r, DocumentError))
        # Every occurrence of every id refused: its first is another file's (a file repeating
        # its own id had its first indexed, and a job's errors cut at MAX_JOB_ERRORS miss some).
        mine = {key: [m[len(duplicate_prefix(key, path)):] for m in refused.get(key, ())
                      if m.startswith(duplicate_prefix(key, path))] for key in keys}
        if not keys or any(len(mine[key]) != count for key, count in keys.items()):
            continue
        # ... and that other file uploaded before this one: the folder is read in name order,
        # so a later upload whose name sorts first takes the ids over (its records replace the
        # indexed ones), and the earlier file, all of whose records are then refused, is the
        # one whose content is lost if it goes (the verification round).
        firsts = {said.split(" already has a record with it", 1)[0]
                  for said in itertools.chain.from_iterable(mine.values())}
        if not all(_uploaded_before(Path(first), before) for first in firsts):
            continue
        if _replaced(path, before):
            continue
        path.unlink(missing_ok=True)
        gone.append(name)
    return gone


def _uploaded_before(first: Path, this: os.stat_result) -> bool:
    """Whether the upload ``first`` is there and was written before the file of ``this``."""
    try:
        return first.is_file() and first.stat().st_mtime_ns < this.st_mtime_ns
    except OSError:
        return False


def _unreadable_types(folder: Path, suffixes: Iterable[str]) -> list[Path]:
    """The files in an upload ``folder`` of a type the indexer does not read (sorted): a job
    only warns "skipped, unsupported type", no document is made, so nothing but a shell removed
    one, and every later upload job warned of it again. Uploads of such types are refused on
    arrival, so each is a leftover: the suffix-less ``txt`` that the ASCII-only names of before
    2026-11-28 made of "отчёт.txt", a file put there by hand. Hidden names (a copy on its way
    in, ``.NAME.<random>.part``) and what is not a regular file are left alone."""
    wanted = frozenset(suffixes)
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    out = []
    for entry in entries:
        try:
            regular = entry.is_file(follow_symlinks=False)
        except OSError:
            continue
        path = Path(entry.path)
        if regular and not entry.name.startswith(".") and _suffix(path) not in wanted:
            out.append(path)
    return sorted(out)


def _replaced(path: Path, before: os.stat_result) -> bool:
    try:
        now = path.stat()
    except FileNotFoundError:
        return False
    return (now.st_ino, now.st_mtime_ns, now.st_size) != (before.st_ino, before.st_mtime_ns,
                                                          before.st_size)


def remove_collection_uploads(folder: Path) -> None:
    """Remove a collection's upload ``folder`` (``DATA_DIR/uploads/NAME``) and the staging
    leftovers of that collection beside it: the files an upload put aside until its job was
    accepted (``Staged.put_aside``: ``uploads/.previous-NAME-<random>/``, left by a crash),
    and the ``uploads/.previous/NAME/`` of an older Facet. Deleting the collection removed only
    the folder, and those stayed for good. Another collection's are never touched: the random
    part is ``tempfile.mkdtemp``'s, 8 characters of ``[a-z0-9_]`` (no ``-``), so collection
    ``a``'s ``.previous-a-XXXXXXXX`` is never ``a-b``'s ``.previous-a-b-XXXXXXXX``."""
    uploads = folder.parent
    shutil.rmtree(folder, ignore_errors=True)
    older = uploads / ".previous"
    shutil.rmtree(older / folder.name, ignore_errors=True)
    with contextlib.suppress(OSError):
        older.rmdir()  # (only where empty: other collections' may be there)
    aside = re.compile(rf"\.previous-{re.escape(folder.name)}-[a-z0-9_]{{8}}")
    try:
        entries = list(os.scandir(uploads))
    except OSError:
        return
    for entry in entries:
        if aside.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)


# What each upload job added to its collection's folder, in the uploads' own folder for them
# (hidden: a collection's name never starts with a dot): ``uploads/.staged/N.json``.
_NOTES = ".staged"


def _note(folder: Path, job_id: int) -> Path:
    return folder.parent / _NOTES / f"{job_id}.json"


def note_staged(folder: Path, job_id: int, staged: Staged) -> None:
    """Write down which files upload job ``job_id`` added to ``folder`` (new names only, with
    their size, time and inode), so that cancelling it before it starts takes them back
    (``take_back``). A name it replaced is not among them: its earlier version is gone."""
    added = []
    for copy in staged.copies:
        if copy in staged.previous:
            continue
        st = copy.stat()
        added.append([copy.name, st.st_size, st.st_mtime_ns, st.st_ino])
    if not added:
        return
    notes = folder.parent / _NOTES
    notes.mkdir(exist_ok=True)
    fd, partial = _new_hidden(notes, f"{job_id}.json")
    with open(fd, "w", encoding="utf-8") as out:
        json.dump({"folder": folder.name, "added": added}, out)
    os.replace(partial, _note(folder, job_id))


def take_back(folder: Path, job_id: int) -> list[str]:
    """Remove the files upload job ``job_id`` added to ``folder`` (``note_staged``) that are
    as it left them (a file uploaded again since is another upload's), and the note; their
    names. Called when the job is cancelled before it started: its files were never read, and
    every later upload job, which indexes the whole folder, indexed them anyway."""
    note = _note(folder, job_id)
    try:
        noted = json.loads(note.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    gone = []
    if noted.get("folder") == folder.name:
        for name, size, mtime_ns, inode in noted.get("added", []):
            path = folder / name
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if (st.st_size, st.st_mtime_ns, st.st_ino) == (size, mtime_ns, inode):
                path.unlink(missing_ok=True)
                gone.append(name)
    note.unlink(missing_ok=True)
    return gone


def forget_staged(uploads: Path, keep: Callable[[int], bool]) -> None:
    """Remove the notes (``note_staged``) under ``uploads`` (the data folder's ``uploads``) of
    the jobs ``keep`` says no to (those that started or ended: nothing to take back)."""
    for path in (uploads / _NOTES).glob("*.json"):
        if path.stem.isdigit() and not keep(int(path.stem)):
            path.unlink(missing_ok=True)
