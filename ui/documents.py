"""The Collections tab's documents view: how a page of a collection's documents
(``Facet.documents``) and a removal (``Facet.remove_documents``) are shown. Formatting only;
``ui.handlers`` calls the facade.

A key is shown as the person knows it: an upload's key is its path in the server's data folder
(``DATA_DIR/uploads/NAME/report.pdf``), shown as the file's name as uploaded (``report.pdf``);
any other key (a server folder's file, a record's id) as it is, its control characters and bidi
controls escaped (``printable``) as the CLI shows them.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.services.collections import DocumentInfo, DocumentList
from app.services.indexing import RemovedDocument, RemoveReport
from app.text import plural, printable
from ui.render import source_relative

# Documents a page of the table lists (as `facet documents` lists by default).
DOCUMENTS_PAGE = 20
# The status filter's choices: every document, or those of one status (``DOCUMENT_STATUSES``).
ALL_STATUSES = "all"
STATUS_CHOICES = [ALL_STATUSES, "indexed", "error", "pending"]
DOCUMENT_COLUMNS = ["document", "title", "status", "chunks", "updated"]
# As the jobs table's: left to the content, a long key squeezed the other headers mid-word.
DOCUMENT_COLUMN_WIDTHS = ["34%", "26%", "18%", "72px", "16%"]
# Keys a removal's toast names before saying how many more.
KEYS_NAMED = 5


@dataclass(frozen=True)
class PageCursor:
    """Where the documents view stands, kept by the page in a hidden box (so a server restart
    loses no place): ``after``, the key the page on show starts after (None: the first page),
    and ``last``, the last key it listed (Next pages after it; Previous lists those up to
    ``after``). Pages are keyset pages, as `facet documents` and the API's ``Link`` page: a
    document indexed or removed by another process while one pages does not shift the later
    pages, as it shifted the offset the view kept until the seventh session of 2026-12-06 (a
    document skipped or shown twice)."""

    after: str | None = None
    last: str | None = None

    def value(self) -> dict[str, str | None]:
        """As the hidden box holds it."""
        return {"after": self.after, "last": self.last}


# A key the hidden box may hold: longer is no document's (and is not sent to the database).
_CURSOR_KEY_MAX = 4096


def page_cursor(value: object) -> PageCursor:
    """The hidden box's cursor; the first page's where it holds none (a page just opened) or
    not one (sent by a client of the page's API: each part a key or null)."""
    if isinstance(value, PageCursor):
        return value
    if not isinstance(value, dict):
        return PageCursor()
    parts = [value.get("after"), value.get("last")]
    if not all(p is None or (isinstance(p, str) and 0 < len(p) <= _CURSOR_KEY_MAX) for p in parts):
        return PageCursor()
    return PageCursor(*parts)


def shown_key(key: str, uploads: Path | None) -> str:
    """``key`` as the page shows it: relative to the collection's upload folder (``uploads``)
    when it lies there (the uploaded file's name; a record's ``#L3`` kept), else as it is."""
    if uploads is not None:
        folder = str(uploads).rstrip("/") + "/"
        if key.startswith(folder) and len(key) > len(folder):
            key = key[len(folder):]
    return printable(key)


def _form(key: str) -> str:
    """How ``key`` writes its accents, for telling twins (``DocumentList.twins``: keys that
    another equals but for its Unicode normalization form) apart; one that writes them both
    ways, with its separate marks shown as escapes (two such keys read alike)."""
    if unicodedata.is_normalized("NFC", key):
        return "accents as single characters, NFC"
    if unicodedata.is_normalized("NFD", key):
        return "accents as separate marks, NFD"
    marks = "".join(f"\\u{ord(c):04x}" if unicodedata.combining(c) else c for c in key)
    return f"accents written both ways: {marks}"


def shown_twin(key: str, uploads: Path | None, twins: Set[str] = frozenset()) -> str:
    """``shown_key``, with how it writes its accents where it is one of ``twins``."""
    shown = shown_key(key, uploads)
    return f"{shown} ({_form(key)})" if key in twins else shown


def shown_document(doc: DocumentInfo | RemovedDocument, uploads: Path | None,
                   twins: Set[str] = frozenset()) -> str:
    """A document as the page names it: its key (``shown_key``), and for a record keyed by its
    id (a csv/jsonl file's) the file it was read from, as `facet documents` says "from SOURCE"
    (a bare id did not say which upload it came from). A key of ``twins`` says how it writes
    its accents (the i18n review of the fifth session of 2026-12-06: "résumé.txt" twice)."""
    shown = shown_twin(doc.key, uploads, twins)
    if doc.source and doc.source != doc.key and not doc.key.startswith(doc.source):
        shown += f" (from {shown_key(doc.source, uploads)})"
    return shown


def document_rows(docs: DocumentList, uploads: Path | None) -> list[list[Any]]:
    """One row per document: its name (``shown_document``), title, status (an error's reason
    after it), chunks (a number, so the column sorts as numbers), when its row was last
    written."""
    rows: list[list[Any]] = []
    twins = docs.twins
    for d in docs:
        # An upload's error names it by the name it was uploaded under, as the key and the Index
        # tab's errors table do (it showed the server's data folder: "DATA/uploads/C/a.txt").
        status = (f"{d.status}: {printable(source_relative(d.error, None if uploads is None else str(uploads)))}"
                  if d.status == "error" and d.error else d.status)
        rows.append([shown_document(d, uploads, twins), printable(d.title or ""), status, d.chunks,
                     d.updated_at.replace("T", " ")[:19]])
    return rows


def removal_choices(docs: DocumentList, uploads: Path | None) -> list[tuple[str, str]]:
    """The "remove" checkboxes of a page: each document as the table names it, its value the
    real key."""
    twins = docs.twins
    return [(shown_document(d, uploads, twins), d.key) for d in docs]


def page_text(collection: str, shown: int, offset: int, not_shown: int, status: str | None,
              prefix: str | None, total: int | None = None) -> str:
    """The line over the table: which documents of how many, and how many are not shown
    (``total``: how many match, where the page is past the end and ``not_shown`` cannot say)."""
    which = f"{status} document" if status else "document"
    # Quoted as typed: repr doubled each backslash of a Windows-style prefix (and of the
    # escapes printable writes), so the line did not show what was typed.
    narrowed = f" whose key or name starts with '{printable(prefix)}'" if prefix else ""
    total = offset + shown + not_shown if total is None else total
    if not shown:
        if offset and total:
            return (f"No {which}s past the first {offset:,}{narrowed} in {printable(collection)} "
                    f"(it has {plural(total, which, grouped=True)}); press Previous.")
        return f"No {which}s{narrowed} in {printable(collection)}."
    span = (f"{which} {offset + 1:,}" if shown == 1 else
            f"{which}s {offset + 1:,}–{offset + shown:,}")
    said = f"{printable(collection)}: {span} of {total:,}{narrowed}"
    if not_shown:
        said += f"; {not_shown:,} more not shown (Next page shows them)"
    return said + "."


def listed(names: Sequence[str]) -> str:
    """``names`` joined, the first ``KEYS_NAMED`` of them, then how many more."""
    more = len(names) - KEYS_NAMED
    return ", ".join(names[:KEYS_NAMED]) + (f" and {more:,} more" if more > 0 else "")


def gone_text(keys: Sequence[str], collection: str, uploads: Path | None, *, others: bool,
              twins: Set[str] = frozenset()) -> str:
    """What a removal says of ticked documents the collection no longer holds (removed by
    another page or a job since the page was shown); ``others``: the rest were removed;
    ``twins``: keys named with how they write their accents, as the page names them."""
    return (f"{plural(len(keys), 'ticked document', grouped=True)} "
            f"({listed([shown_twin(k, uploads, twins) for k in keys])}) no longer in "
            f"{printable(collection)}: "
            "removed meanwhile, from another page or by a job; "
            + ("the others were removed. " if others else "nothing else was removed. ")
            + "The list is refreshed.")


def removed_text(report: RemoveReport, uploads: Path | None,
                 twins: Set[str] = frozenset()) -> str:
    """The removal's toast: what went, which uploaded files were deleted with them, and which
    come back with the next index of their folder (their file is still there); ``twins`` as
    ``gone_text``'s (the UI review of the sixth session of 2026-12-06: "Removed 1 document:
    résumé.txt" said nothing of which of the two went)."""
    said = (f"Removed {plural(report.docs_deleted, 'document', grouped=True)} "
            f"({plural(report.chunks_deleted, 'chunk', grouped=True)}) from "
            f"{printable(report.collection)}: "
            f"{listed([shown_document(d, uploads, twins) for d in report.removed])} "
            f"(job {report.job_id}).")
    deleted = report.upload_files_deleted()
    if deleted:
        said += (f" {plural(len(deleted), 'uploaded file')} deleted with "
                 f"{'it' if report.docs_deleted == 1 else 'them'}: a later upload job does not "
                 f"add {'it' if len(deleted) == 1 else 'them'} back.")
    folder = None if uploads is None else str(uploads).rstrip("/") + "/"
    still = report.still_in_source()
    staged = [d for d in still if folder is not None and d.source.startswith(folder)]
    elsewhere = [d for d in still if d not in staged]
    if staged:
        # A record of an uploaded csv/jsonl whose other records stay indexed: its file stays
        # staged, and every upload job indexes the upload folder whole. It said "still in the
        # folder indexed: ... unless they are deleted there", a folder the page cannot reach,
        # and not that the next, unrelated upload brings the record back (the UI review of
        # 2026-12-06).
        files = list(dict.fromkeys(shown_key(d.source, uploads) for d in staged))
        one, one_file = len(staged) == 1, len(files) == 1
        them = "it" if one else "them"
        said += (f" {plural(len(staged), 'record')} of {listed(files)}, which "
                 f"{'holds' if one_file else 'hold'} other indexed records, "
                 f"{'stays' if one else 'stay'} in the upload: the next upload job into this "
                 f"collection adds {them} back; to keep {them} out, upload "
                 f"{'that file' if one_file else 'those files'} again without {them}, or remove "
                 f"every record of {'it' if one_file else 'them'}.")
    if elsewhere:
        kept = len({d.source for d in elsewhere})
        one = kept == 1
        said += (f" {plural(kept, 'file')} still in the folder indexed: indexing "
                 f"{'it' if one else 'them'} again adds {'its' if one else 'their'} documents "
                 f"back unless {'it is' if one else 'they are'} deleted there.")
    return said
