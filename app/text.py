"""Small wording helpers shared by the edges (CLI, UI) and the services' messages, and the one
rule for texts to embed."""

from __future__ import annotations

import json
import re
import shlex
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

from app.errors import InvalidRequestError
from embedders.contract import check_encodable
from embedders.errors import InvalidInputError


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 document``, ``2 documents``."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def check_texts(texts: Sequence[Any], name: str = "texts") -> None:
    """Every text to embed or cluster is a string with something in it (and text: no unpaired
    surrogate), as every document to
    index and every query must be: an empty text has no meaning to embed (the vector would be
    the prompt's alone), and the HTTP API's OpenAI-style ``input`` refuses it too.

    ``name`` is the field as the caller's API names it (``texts``; ``input`` for /v1/embeddings),
    in the message and, with the item's index, as the error's ``param`` (``texts[1]``, the way
    pydantic names an item of a list it refuses).

    Raises:
        InvalidRequestError: naming the first item that is not a string or is blank.
    """
    for i, item in enumerate(texts):
        where = f"{name}[{i}]"
        if not isinstance(item, str):
            decode = ("; decode it first (data.decode('utf-8'))"
                      if isinstance(item, (bytes, bytearray, memoryview)) else "")
            raise InvalidRequestError(f"{where} is {type(item).__name__} "
                                      f"({json.dumps(item, default=str)[:40]}), not a string; "
                                      f"every text must be a string{decode}", param=where)
        if not item.strip():
            raise InvalidRequestError(f"{where} is empty; every text must contain something "
                                      "to embed", param=where)
        check_text_encodable(item, where, param=where)


def check_text_encodable(text: str, where: str, *, param: str | None = None) -> None:
    """``InvalidRequestError`` for a string holding an unpaired surrogate (not Unicode text);
    ``param`` is the request field it names (``query``), as the caller's API names it."""
    try:
        check_encodable(text, where)
    except InvalidInputError as e:
        raise InvalidRequestError(str(e), param=param) from None


# C0 controls but tab, DEL and the C1 controls: ESC starts the terminal's escape sequences (clear
# the screen, set the window title, OSC 8 links, OSC 52 clipboard writes), BEL ends an OSC, CR
# and BS overwrite what was printed, and 0x9b/0x9d are CSI/OSC in one byte on some terminals.
_CONTROLS = r"\x00-\x08\x0a-\x1f\x7f-\x9f"
# The bidi embedding, override and isolate controls (LRE RLE PDF LRO RLO, LRI RLI FSI PDI): they
# reorder what follows on the line, so a name can read as another ("invoice\u202efdp.exe").
_BIDI = r"\u202a-\u202e\u2066-\u2069"
_LABEL_UNSAFE = re.compile(f"[{_CONTROLS}{_BIDI}]")
_BODY_UNSAFE = re.compile(f"[{_CONTROLS}]")
# What str.splitlines() breaks a text at: running text keeps its lines, as one "\n" each.
_LINE_BREAK = re.compile(r"\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str, *, body: bool = False) -> str:
    """``text`` from a document (or a file name, an id) made safe to print on a terminal: each
    control character it holds is shown as a visible escape (``\\x1b``, ``\\x07``, ``\\u202e``)
    instead of reaching the terminal, which would act on it. Tab is kept; text without such
    characters is returned as it is.

    ``body=False`` (a label: id, title, source, name, keyword, message, printed within a line of
    the CLI's own): newlines and the bidi embedding/override/isolate controls are escaped too.

    ``body=True`` (running text printed as lines of its own: a snippet, a cluster's member):
    its line breaks stay, each one ``"\\n"`` (``\\r\\n``, a lone ``\\r``, form feed and the rest
    ``str.splitlines`` breaks at), and bidi controls stay: right-to-left text can hold them
    legitimately, and on a line of its own they reorder nothing but the document's own words.
    """
    if body:
        return "\n".join(_BODY_UNSAFE.sub(_escape, line) for line in _LINE_BREAK.split(text))
    return _LABEL_UNSAFE.sub(_escape, text)


# What json.dumps(ensure_ascii=False) writes raw and a terminal may act on or reorder: DEL, the
# C1 controls (0x9b/0x9d are CSI/OSC in one byte), the bidi controls, the line and paragraph
# separators (line breaks to some terminals and viewers); and lone surrogates (a file name's
# undecodable bytes), which no UTF-8 output can carry. JSON escapes the C0 controls itself.
_JSON_UNSAFE = re.compile(f"[\\x7f-\\x9f{_BIDI}\\u2028\\u2029\\ud800-\\udfff]")


def printable_json(value: Any, indent: int | None = 2) -> str:
    """``value`` as JSON to print (``--json``): non-ASCII text stays readable (``café``, not
    ``caf\\u00e9``), and every character above that a terminal could act on is written as a
    ``\\uXXXX`` escape, so the output still decodes to the same strings."""
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    # Outside its strings JSON is ASCII: every such character is inside a string.
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def size_text(n: int) -> str:
    """``1.8 MB``: bytes as a person reads them (decimal units, as ``du -h --si``)."""
    if n < 1000:
        return f"{n} B"
    value = float(n)
    for unit in ("kB", "MB", "GB"):
        value /= 1000
        if round(value, 1) < 1000:  # not "1000.0 kB"
            return f"{value:.1f} {unit}"
    return f"{value / 1000:.1f} TB"


# What a POSIX shell's single quotes cannot show a person: the controls (tab and newline too:
# a pasted tab is completion, a newline ends the command), the bidi controls (they reorder
# the line), the line and paragraph separators, and lone surrogates (no UTF-8 can carry them).
_SHELL_UNSAFE = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f{_BIDI}\\u2028\\u2029\\ud800-\\udfff]")
_SHELL_NON_ASCII = re.compile("[^\\x20-\\x7e]")
# In $'...': a backslash and a single quote are escaped too.
_SHELL_ESCAPED = {False: re.compile(f"[\\\\'{_SHELL_UNSAFE.pattern[1:-1]}]"),
                  True: re.compile("[\\\\'\\x00-\\x1f\\x7f-\\U0010ffff]")}
_DOLLAR_QUOTED = {"\\": "\\\\", "'": "\\'"}


def _dollar_escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _DOLLAR_QUOTED:
        return _DOLLAR_QUOTED[char]
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte of a file's name (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0x7F:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def shell_word(text: str, *, ascii_only: bool = False) -> str:
    """``text`` quoted as one word for a POSIX shell, so that pasting it back gives the exact
    string: ``shlex.quote`` where it holds nothing a terminal would act on or a person could
    not see (``'/a b.txt'``, ``/plain.txt``), else bash/zsh/ksh ``$'...'`` quoting with
    ``\\xHH`` / ``\\uHHHH`` escapes (``$'/docs/bell\\x07.txt'``).

    ``printable`` shows such a character as ``\\x07`` too, but ``'/docs/bell\\x07.txt'`` pasted
    into a shell is a backslash and four characters, a key that does not exist. The result is
    printable as it is (``printable(shell_word(t)) == shell_word(t)``). A C1 control or bidi
    control is written ``\\u0085``/``\\u202e`` (``\\x85`` in ``$'...'`` is one byte, not the
    character's UTF-8).

    ``ascii_only=True``: every non-ASCII character is escaped too, where the difference is in them
    (``$'re\\u0301sume\\u0301.txt'``, a decomposed ``résumé.txt``)."""
    unsafe = _SHELL_NON_ASCII if ascii_only else _SHELL_UNSAFE
    if not unsafe.search(text):
        return shlex.quote(text)
    return "$'" + _SHELL_ESCAPED[ascii_only].sub(_dollar_escape, text) + "'"


def unicode_twins(wanted: Iterable[str], known: Iterable[str]) -> dict[str, list[str]]:
    """For each of ``wanted`` that is not in ``known``, the keys of ``known`` it equals but for
    its Unicode normalization form (``résumé`` typed as one code point each, NFC, where the
    file's name, from macOS, holds ``e`` + a combining accent, NFD): they print alike, and a
    refusal that names the key typed reads as if the key were not there. Only those that have
    such twins are in the result; nothing is normalized to pick one (both forms can be keys of
    one collection, two files of one folder)."""
    known = set(known)
    by_form: dict[str, list[str]] = {}
    for key in known:
        by_form.setdefault(unicodedata.normalize("NFC", key), []).append(key)
    out: dict[str, list[str]] = {}
    for w in wanted:
        if w in known:
            continue
        twins = sorted(by_form.get(unicodedata.normalize("NFC", w), []))
        if twins:
            out[w] = twins
    return out


def unicode_twin_hint(key: str, twins: Sequence[str]) -> str:
    """The refusal's words for ``key``, which differs from ``twins`` (``unicode_twins``) only
    in its Unicode normalization form: each twin with its non-ASCII characters escaped (they
    print alike otherwise), as a word that pastes back exactly (``shell_word(..., ascii_only=True)``).
    """
    shown = " or ".join(shell_word(t, ascii_only=True) for t in twins)
    return (f"{shell_word(key, ascii_only=True)} differs from the key {shown} only in its "
            "Unicode form (accents composed or decomposed, as in a name from macOS): name that "
            "key as written here")
