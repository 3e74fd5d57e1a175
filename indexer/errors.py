"""Errors raised by the indexer. The app layer maps them onto its domain errors."""

from __future__ import annotations

import errno
import os
import re
import shutil
from typing import Any


class IndexerError(Exception):
    """Base class for indexer failures."""


class SourceNotFoundError(IndexerError):
    """The path to index does not exist."""


class UnsupportedSourceError(IndexerError):
    """A single file was given whose type the parsers do not know."""


class SourceUnavailableError(IndexerError):
    """The path to index is on a drive or share gone under its mount (``DISK_GONE_ERRNOS``):
    an outage to mount again, not a path to make readable."""


class MetadataFileMovedError(IndexerError):
    """A commit through a SQLite connection whose file is no longer the one at its path: the
    data folder's facet.db was moved aside (``facet move-metadata``) or replaced after this
    process opened it. Refused before the commit, so nothing lands in the renamed file.

    ``path``: the database file as the process opened it.
    """

    def __init__(self, path: str) -> None:
        super().__init__(f"the metadata database {path} was moved or replaced after this "
                         "process opened it")
        self.path = path


class StoreError(IndexerError):
    """The vector store refused an operation (missing collection, wrong size, locked folder).

    ``param``: the request field the refusal is about, where it is one (a filter the store
    cannot match: ``filters``); the application's domain error carries it on.
    """

    def __init__(self, *args: object, param: str | None = None) -> None:
        super().__init__(*args)
        self.param = param


class CollectionNotFoundError(StoreError):
    """A collection does not exist in the vector store."""


class StoreDamagedError(StoreError):
    """An embedded store's collection whose files cannot be read (a file cut short, garbled or
    edited by hand): a fault of the data on disk, not of the request nor of another process.

    Attributes:
        collection: the collection.
        path: the file (or folder) the store could not read.
    """

    def __init__(self, message: str, collection: str, path: str | None = None) -> None:
        super().__init__(message)
        self.collection = collection
        self.path = path


class StoreBusyError(StoreError):
    """An embedded store's collection is open in another process (its folder takes one).

    Attributes:
        collection: the collection.
        holder: what the other process wrote in the lock file (pid, host), if readable.
    """

    def __init__(self, message: str, collection: str, holder: dict[str, object] | None = None
                 ) -> None:
        super().__init__(message)
        self.collection = collection
        self.holder = holder or {}


class StoreUnavailableError(StoreError):
    """The vector store cannot serve now: a server out of reach (down, wrong URL, network), or an
    embedded store's folder that cannot be written (a read-only mount); may be transient."""


class StoreUnreachableError(StoreUnavailableError):
    """A Qdrant server nothing answers on (down, restarting, a network between): the one
    unavailability that passes by itself, so a client may retry (HTTP ``Retry-After``)."""


# Below this much free space a disk counts as full: SQLite reports a failed write of its WAL or
# shared memory as "disk I/O error", and the store's memory-mapped files fail with SIGBUS (a
# shard's load replays its WAL into them), so a little room is needed to do anything at all.
DISK_FULL_BYTES = 1 << 20


def disk_full_text(folder: Any, what: str | None = None, setting: str = "FACET_DATA_DIR"
                   ) -> str | None:
    """What to say when the disk of ``folder`` has under ``DISK_FULL_BYTES`` free, or None
    where it has room (or cannot be asked). ``what``: the thing on that disk, by default "the
    data folder FOLDER"; ``setting``: the one that would point it at another disk. A read-only
    disk is not a full one (its free space may read 0): its own errors say what it is."""
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return None
    except (OSError, AttributeError):  # (AttributeError: no statvfs, on Windows)
        return None
    free = free_bytes(folder)
    if free is None or free >= DISK_FULL_BYTES:
        return None
    return disk_full_words(what or f"the data folder {folder}", setting, free)


# The errors of a disk that went away under its mount (a drive pulled, a network share dropped
# or stale), read by the data folder's checks and by the embedded store: an outage to wait out.
DISK_GONE_ERRNOS = frozenset({errno.ENOTCONN, errno.ECONNABORTED, errno.EIO, errno.ESTALE,
                              errno.ENODEV, errno.EHOSTDOWN, errno.EHOSTUNREACH})
# What to do once such a disk is back, as both say it.
REMOUNT_AND_RERUN = "Mount it again and run the command again; an index job resumes where it stopped"


def free_bytes(folder: Any) -> int | None:
    """The free bytes of ``folder``'s disk, or None where it cannot be asked or does not say: a
    disk that reports no size at all (a FUSE driver such as fusefat: ``df`` shows 0 blocks) was
    "full (0 bytes free)", refused by every command and by any FACET_MIN_FREE_MB."""
    try:
        st = os.statvfs(folder)
        if st.f_blocks == 0:
            return None
    except AttributeError:  # (no statvfs, on Windows)
        pass
    except OSError:
        return None
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def disk_full_words(what: str, setting: str = "FACET_DATA_DIR", free: int | None = None) -> str:
    """How a full disk is said (``disk_full_text``'s words), where the disk of ``what`` is
    full; ``free``: its free bytes, where they were read."""
    room = f" ({free:,} bytes free)" if free is not None else ""
    return (f"the disk of {what} is full{room}: free some space there (or point {setting} at a "
            "disk with room) and try again; nothing was lost")


# The secrets a URL may carry, masked wherever one is shown (messages, log lines): the password
# of its user info ("http://admin:secret@host") and a key-like query parameter ("?api_key=...").
# Here, dependency-free, so that the indexer (which imports nothing of ``app``) uses them too;
# ``app.settings.mask_passwords`` / ``masked_url`` are these.
# Found from its "://", the scheme before it read backwards: a pattern starting with the scheme
# (``[A-Za-z][A-Za-z0-9+.-]*://``) was tried from every letter of a long word and read to its
# end each time, time growing with the square of its length: a 300,000-character name in a
# request held the API's event loop for minutes, SIGTERM and /health too (the API exploration).
# The password runs to the last "@" before a "/" (httpx and urllib read "u:p@ss@h" as the
# password "p@ss": it was shown "u:***@ss@h"), "?" and "#" in it too (a password is masked
# whatever it holds: "s3cr#et" was shown once the "@" rule stopped at them). A URL with a query
# and no path that holds an "@" is masked past its host: more hidden, never less. The user name
# may hold an "@" too ("user@corp.com:pw@db", as SQLAlchemy and redis-py read it: the password
# "pw" was shown in clear).
_URL_USERINFO = re.compile(r"://([^\s/:?#]*):[^\s/]*@")
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")


def _mask_url_passwords(text: str) -> str:
    """``text`` with the password of each ``scheme://user:password@`` in it as ``***``: a
    scheme is a letter and then letters, digits, "+", "." or "-", right before the "://"."""
    out: list[str] = []
    done = 0
    for match in _URL_USERINFO.finditer(text):
        start = match.start()
        scheme = False  # a letter in the run of scheme characters before "://"
        while start > 0 and text[start - 1] in _SCHEME_CHARS:  # (runs of two matches apart)
            start -= 1
            scheme = scheme or text[start].isalpha()
        if scheme:
            out.append(text[done:match.start()])
            out.append(f"://{match.group(1)}:***@")
            done = match.end()
    out.append(text[done:])
    return "".join(out)
# A key-like parameter name; "_" and "-" also percent-encoded ("api%5Fkey" was shown in clear).
_SEP = r"(?:[_-]|%5[Ff]|%2[Dd])"
# Signed URLs' and sessions' names too (S3's X-Amz-Signature, "sig", "session", "jwt",
# "bearer", "pass", JSESSIONID: shown in clear in the access line until the third session of
# 2026-12-07); the short ones only as the whole name ("first_pass", "per_session" are not).
_SECRET_NAME = (rf"(?:(?:[A-Za-z0-9_.-]*{_SEP})?(?:api{_SEP}?key|apikey|key|token|"
                rf"access{_SEP}?token|password|passwd|pwd|secret|auth|authorization|credentials?|"
                rf"signature)|pass|sig|session(?:{_SEP}?id)?|j?sessionid|phpsessid|sessid|sid|"
                r"jwt|bearer)")
_SECRET_PARAM = re.compile(
    rf"([?&;]{_SECRET_NAME}=)"
    # The value, up to the next parameter or the URL's end (a ":", "," or "." followed by a
    # space, or ending the text, is the message's own).
    r"[^&#;\s'\"]*?(?=[&#;\s'\"]|[:,.)](?:\s|$)|$)", re.IGNORECASE)


# A bearer token as an HTTP header or an error quoting one shows it (httpx's "Illegal header
# value b'Bearer KEY\n'"), up to a quote or the text's end, escapes (``\n``) and all.
_BEARER = re.compile(r"(\bBearer\s+)[^'\"\s]+", re.IGNORECASE)


def mask_secrets(text: str) -> str:
    """``text`` with the password of every URL in it, the value of every key-like query
    parameter (``api_key``, ``token``, ``password``...) and every bearer token as ``***``."""
    return _BEARER.sub(r"\1***", _SECRET_PARAM.sub(r"\1***", _mask_url_passwords(text)))


def mask_query(target: str) -> str:
    """A request target (path and query string, as an access-log line shows it) with the whole
    value of every key-like query parameter as ``***``: up to the next ``&``, ``;`` or ``#``,
    quotes and all (``mask_secrets``, made for messages, ends a value at a quote, so
    ``?api_key=ab'cd`` showed ``cd``), its name also read percent-decoded."""
    from urllib.parse import unquote_plus

    path, sep, query = target.partition("?")
    if not sep:
        return mask_secrets(target)
    query, hash_, fragment = query.partition("#")
    parts = re.split(r"([&;])", query)
    for i in range(0, len(parts), 2):  # the separators are at the odd places
        name, eq, _ = parts[i].partition("=")
        # Read as the server reads it ("+" a space, blanks around it dropped): "api_key+=K"
        # was the parameter "api_key " to the API, and was logged in clear.
        if eq and re.fullmatch(_SECRET_NAME, unquote_plus(name).strip(), re.IGNORECASE):
            parts[i] = f"{name}=***"
    return f"{mask_secrets(path)}?{''.join(parts)}{hash_}{fragment}"


def _port_read(url: str) -> bool:
    """Whether ``url``'s port reads as a number (or it has none)."""
    from urllib.parse import urlsplit

    try:
        _ = urlsplit(url).port
    except ValueError:
        return False
    return True


def masked_url(url: str) -> str:
    """``url`` as it may be shown: its password (any characters) and key-like query parameters
    as ``***``."""
    from urllib.parse import urlsplit

    listed = url.split(";")
    if len(listed) > 1 and all("://" in part and ("@" in part or _port_read(part))
                               for part in listed):
        # Celery's failover and sentinel lists ("sentinel://:pw@h1:26379;sentinel://...")
        # masked each (read whole, the first URL's host was cut out of the message). Not where
        # a piece holds no "@" and cannot be read: a ";" in a password ("redis://:pa;ss://x@h"
        # was shown whole, each piece read as a URL with no password), which the whole URL's
        # masking hides.
        return ";".join(masked_url(part) for part in listed)
    port_read = _port_read(url)  # (False too where urlsplit refuses the URL: "http://[x")
    password = urlsplit(url).password if port_read else None
    if password:
        url = url.replace(f":{password}@", ":***@", 1)
    start = url.find("://") + 3
    at = url.rfind("@")
    if 3 <= start < at:
        slash = url.find("/", start)
        authority = url[start:slash if slash != -1 else len(url)]
        # A password holding "/", "?" or "#" (not percent-encoded) ends the host there: its
        # start read as the port ("redis://u:se/cret@h:1/0" was shown whole in "cannot reach
        # the broker at ..."), or, holding an "@" before it, as the host ("redis://:p@ss/word@h"
        # showed "ss/word"; the settings review of the sixth session of 2026-12-06 and the
        # final read). All from the first ":" of the user info to the last "@" is masked:
        # more hidden where an "@" is the path's own, never less.
        if not port_read or ("@" in authority and -1 < slash < at):
            colon = url.find(":", start, at)
            if colon != -1:  # (blanks too: "redis://:my pass/word@h" was shown whole)
                url = f"{url[:colon]}:***{url[at:]}"
    return mask_secrets(url)
