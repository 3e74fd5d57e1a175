"""Small wording helpers shared by the edges (CLI, UI) and the services' messages, and the one
rule for texts to embed."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
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
