"""Small wording helpers shared by the edges (CLI, UI) and the services' messages, and the one
rule for texts to embed."""

from __future__ import annotations

import json
import re
import shlex
import sys
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from app.errors import InvalidRequestError
from embedders.contract import check_encodable
from embedders.errors import InvalidInputError
from embedders.scripts import blank, invisible_alone  # (app.text.blank: one rule with the indexer's)
from embedders.terminal import bar_size  # noqa: F401 (the edges' progress bars import it here)


def shorten(text: str | None, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was (a pasted query)."""
    text = text or ""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def plural(n: int, word: str, many: str | None = None, *, grouped: bool = False) -> str:
    """``1 document``, ``2 documents``; ``grouped``: ``1,000 documents``, with a thousands
    separator, as the UI writes every count (it read "1,000 of 1000 documents")."""
    return (f"{n:,}" if grouped else str(n)) + f" {word if n == 1 else (many or word + 's')}"


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
        if blank(item):  # (a text of a zero-width space alone was embedded: its prompt's vector)
            raise InvalidRequestError(f"{where} is {empty_said(item)}; every text must contain "
                                      "something to embed", param=where)
        check_text_encodable(item, where, param=where)


def empty_said(text: str) -> str:
    """How a ``blank`` text is named in a refusal: "empty", or "empty (invisible characters
    alone)" for one that is not whitespace alone (a zero-width space, a bidi control), which
    would look like text where it is shown, or "empty (control, private-use or combining
    characters alone)" for one holding such (NUL, U+E000, U+0301), which no embedder reads."""
    if not text.strip():
        return "empty"
    return ("empty (invisible characters alone)" if invisible_alone(text)
            else "empty (control, private-use or combining characters alone)")


def check_text_encodable(text: str, where: str, *, param: str | None = None) -> None:
    """``InvalidRequestError`` for a string holding an unpaired surrogate (not Unicode text);
    ``param`` is the request field it names (``query``), as the caller's API names it."""
    try:
        check_encodable(text, where)
    except InvalidInputError as e:
        raise InvalidRequestError(str(e), param=param) from None


def header_unsafe_at(value: str) -> int | None:
    """Where ``value`` first holds a character that no client sends in an HTTP header (the
    index), or None: anything outside printable ASCII, space included. Header values travel
    as ASCII (httpx raises UnicodeEncodeError on "kéy"; curl's UTF-8 bytes arrive as Latin-1),
    and a control character (a line break, a tab) ends or splits the header. The server's
    ``FACET_API_KEY`` check and the LangChain retriever's ``api_key`` check both ask this, so a
    key one accepts the other does (a key with an inner space works: the server reads the
    token after "Bearer ")."""
    return next((i for i, c in enumerate(value) if not " " <= c <= "~"), None)


# C0 controls but tab, DEL and the C1 controls: ESC starts the terminal's escape sequences (clear
# the screen, set the window title, OSC 8 links, OSC 52 clipboard writes), BEL ends an OSC, CR
# and BS overwrite what was printed, and 0x9b/0x9d are CSI/OSC in one byte on some terminals.
_CONTROLS = r"\x00-\x08\x0a-\x1f\x7f-\x9f"
# The bidi embedding, override and isolate controls (LRE RLE PDF LRO RLO, LRI RLI FSI PDI): they
# reorder what follows on the line, so a name can read as another ("invoice\u202efdp.exe").
_BIDI = r"\u202a-\u202e\u2066-\u2069"
# The other format characters (Unicode category Cf): invisible, so two keys that differ by one
# (U+200B zero width space, U+200D joiner, U+2060 word joiner, U+FEFF, U+00AD soft hyphen, the
# LRM/RLM marks, the tags) print alike. Written out, not read from ``unicodedata`` at import:
# Unicode 15's Cf (a test checks it against the running Python's); 0x2065 is unassigned.
_FORMAT = (r"\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
           r"\u2060-\u2065\u206a-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
           r"\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
           r"\U000e0020-\U000e007f")
# A label (a key, a name, within a line of the CLI's own) escapes these too: tab (it broke the
# CLI's aligned columns and is a blank to a reader) and the line and paragraph separators.
_LABEL_UNSAFE = re.compile(rf"[\t{_CONTROLS}{_BIDI}{_FORMAT}\u2028\u2029]")
_BODY_UNSAFE = re.compile(f"[{_CONTROLS}]")
_TAGS = ("\U000e0020", "\U000e007f")
# What str.splitlines() breaks a text at: running text keeps its lines, as one "\n" each.
_LINE_BREAK = re.compile(r"\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF else \
        f"\\U{code:08x}"


def _shapes(char: str) -> bool:
    """A letter or mark of a script whose shaping a ZWJ/ZWNJ visibly changes (Arabic, Syriac,
    the Indic and South-East Asian scripts, Mongolian): there the joiner is spelling (Persian
    ``\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645``), not an invisible difference."""
    if not char or unicodedata.category(char)[0] not in "LM":
        return False
    code = ord(char)
    return (0x0600 <= code <= 0x109F or 0x1780 <= code <= 0x18AF or 0x1900 <= code <= 0x1CFF
            or 0xA800 <= code <= 0xABFF or 0xFB50 <= code <= 0xFDFF or 0xFE70 <= code <= 0xFEFC
            or 0x10800 <= code <= 0x11FFF)


def _emoji(char: str) -> bool:
    """A pictograph an emoji ZWJ sequence joins (``\U0001f469\u200d\U0001f4bb``, woman technologist)."""
    return bool(char) and ord(char) >= 0x2190 and unicodedata.category(char) == "So"


def _joins(text: str, at: int) -> bool:
    """Whether the format character at ``text[at]`` is part of what it joins, visibly, so kept
    as it is in a label: a ZWJ inside an emoji sequence (after a pictograph, its VS16 or skin
    tone, before a pictograph), a ZWJ/ZWNJ between two letters of a shaping script
    (``_shapes``), and the tags of a subdivision flag (after U+1F3F4). Anywhere else it is an
    invisible character that makes two names print alike, and is escaped."""
    char = text[at]
    before = text[at - 1] if at else ""
    after = text[at + 1:at + 2]
    if char == "\u200d" and (_emoji(before) or before == "\ufe0f"
                             or "\U0001f3fb" <= before <= "\U0001f3ff") and _emoji(after):
        return True
    if char in "\u200c\u200d":
        return _shapes(before) and _shapes(after)
    if _TAGS[0] <= char <= _TAGS[1]:
        while at and _TAGS[0] <= text[at - 1] <= _TAGS[1]:
            at -= 1
        return at > 0 and text[at - 1] == "\U0001f3f4"
    return False


def _label_sub(pattern: re.Pattern[str], escape: Callable[[re.Match[str]], str], text: str) -> str:
    """``pattern.sub(escape, text)`` but for the format characters that join (``_joins``)."""
    return pattern.sub(lambda m: m.group() if _joins(text, m.start()) else escape(m), text)


def printable(text: str, *, body: bool = False) -> str:
    """``text`` from a document (or a file name, an id) made safe to print on a terminal: each
    control character it holds is shown as a visible escape (``\\x1b``, ``\\x07``, ``\\u202e``)
    instead of reaching the terminal, which would act on it. Text without such characters is
    returned as it is.

    ``body=False`` (a label: id, title, source, name, keyword, message, printed within a line of
    the CLI's own): newlines, tab (``\x09``: it broke the CLI's aligned output), the line and
    paragraph separators, the bidi embedding/override/isolate controls and the other invisible
    format characters (Unicode category Cf: ``\u200b``, ``\u200d``, ``\u2060``, ``\ufeff``, ``\xad``;
    two keys that differ by one printed alike) are escaped too; a joiner that visibly joins
    (an emoji ZWJ sequence, a ZWNJ in a Persian word: ``_joins``) is kept.

    ``body=True`` (running text printed as lines of its own: a snippet, a cluster's member):
    its line breaks stay, each one ``"\\n"`` (``\\r\\n``, a lone ``\\r``, form feed and the rest
    ``str.splitlines`` breaks at), and bidi controls stay: right-to-left text can hold them
    legitimately, and on a line of its own they reorder nothing but the document's own words;
    tab and the format characters stay too (a document's own text, shown as written).
    """
    if body:
        return "\n".join(_BODY_UNSAFE.sub(_escape, line) for line in _LINE_BREAK.split(text))
    return _label_sub(_LABEL_UNSAFE, _escape, text)


# What json.dumps(ensure_ascii=False) writes raw and a terminal may act on or reorder: DEL, the
# C1 controls (0x9b/0x9d are CSI/OSC in one byte), the bidi controls, the line and paragraph
# separators (line breaks to some terminals and viewers); and lone surrogates (a file name's
# undecodable bytes), which no UTF-8 output can carry. JSON escapes the C0 controls itself.
_JSON_UNSAFE = re.compile(f"[\\x7f-\\x9f{_BIDI}\\u2028\\u2029\\ud800-\\udfff]")


def printable_json(value: Any, indent: int | None = 2) -> str:
    """``value`` as JSON to print (``--json``): non-ASCII text stays readable (``café``, not
    ``caf\\u00e9``), and every character above that a terminal could act on is written as a
    ``\\uXXXX`` escape, so the output still decodes to the same strings. Where standard output
    is not UTF-8 (PYTHONIOENCODING=cp1252, a Latin-1 locale) every non-ASCII character is an
    escape: the JSON was written in that encoding, which JSON readers (``jq``, ``json.load``
    of the bytes) read as UTF-8, turning "café" into "caf\ufffd"."""
    text = json.dumps(value, indent=indent, ensure_ascii=not _stdout_is_utf8())
    # Outside its strings JSON is ASCII: every such character is inside a string.
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _stdout_is_utf8() -> bool:
    """Whether standard output writes UTF-8 (or cannot say: a stream without an encoding)."""
    import codecs

    encoding = getattr(sys.stdout, "encoding", None)
    try:
        return not encoding or codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return True


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
# the line), the other format characters (invisible: ``printable`` escapes them, so
# '/a\\u200bb.txt' printed would paste as a backslash; but for those that join, ``_joins``),
# the line and paragraph separators, and lone surrogates (no UTF-8 can carry them).
_SHELL_UNSAFE = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f{_BIDI}{_FORMAT}\\u2028\\u2029\\ud800-\\udfff]")
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
    if ascii_only:
        if not _SHELL_NON_ASCII.search(text):
            return shlex.quote(text)
        return "$'" + _SHELL_ESCAPED[True].sub(_dollar_escape, text) + "'"
    # A joiner that joins (an emoji ZWJ sequence) is shown, and pasted, as it is, as printable
    # shows it.
    if all(_joins(text, m.start()) for m in _SHELL_UNSAFE.finditer(text)):
        return shlex.quote(text)
    return "$'" + _label_sub(_SHELL_ESCAPED[False], _dollar_escape, text) + "'"


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
