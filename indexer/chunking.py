"""Token-aware chunking with overlap. Pure functions: no I/O, no model.

A tokenizer is reduced to one callable, ``TokenSpans``: text -> list of ``(start, end)``
character offsets, one per token, in order. Chunks are windows of at most ``size`` tokens
that overlap by about ``overlap`` tokens and begin and end on word boundaries where the text
has any (``_window``); each chunk's text is the exact slice of the document between its
first token's start and its last token's end (widened over the characters of its words that
the tokenizer left out, such as the accents an uncased one strips: ``_chunk_bounds``), so the
offsets in the payload always point back at the source text. A token of over 32 characters
(text without spaces that the tokenizer reads as one: Thai, emoji, for WordPiece) counts as
pieces of about 4 characters (``_bounded``), so its chunks are no longer than those of words;
where windows cut between tokens, they do not cut inside a user-perceived character
(``_cut_inside``: a letter and its marks, an emoji sequence, a flag).
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from embedders.scripts import joins_previous

TokenSpans = Callable[[str], Sequence[tuple[int, int]]]

_WORD = re.compile(r"\S+")


# The largest size the metadata's integer column holds (PostgreSQL's 32-bit INTEGER); a larger
# one overflowed it (an HTTP 500). Sizes far above an embedder's max_length are legitimate: a
# whole document as one chunk (scripts/hybrid_eval.py uses 100,000).
MAX_CHUNK_TOKENS = 2**31 - 1


@dataclass(frozen=True)
class ChunkingConfig:
    """How documents are cut.

    Attributes:
        size: tokens per chunk (the embedder sees at most this many text tokens).
        overlap: tokens shared by consecutive chunks; must be smaller than ``size``.
    """

    size: int = 200
    overlap: int = 32

    def __post_init__(self) -> None:
        for what, value in (("size", self.size), ("overlap", self.overlap)):
            # A ValueError, as for a bad value, which the callers turn into the domain's
            # refusal: a string ("5") failed on the comparison below with a TypeError.
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise ValueError(f"chunk {what} must be an int, got {type(value).__name__} "
                                 f"{value!r:.60}")
        if not 1 <= self.size <= MAX_CHUNK_TOKENS:
            raise ValueError(f"chunk size must be from 1 to {MAX_CHUNK_TOKENS:,} tokens, got {self.size}")
        if not 0 <= self.overlap < self.size:
            raise ValueError(
                f"chunk overlap must be >= 0 and smaller than the chunk size ({self.size}), "
                f"got {self.overlap}"
            )


@dataclass(frozen=True)
class Chunk:
    """One piece of a document.

    Attributes:
        number: position of the chunk in its document, from 0.
        text: ``document[start:end]``.
        start: character offset of the first token (or of characters of its word before it
            that the tokenizer left out).
        end: character offset just past the last token (and the characters of its word after
            it that the tokenizer left out: combining marks an uncased tokenizer strips).
        n_tokens: tokens in the chunk (a token of over 32 characters counted as its pieces
            of about 4: ``_bounded``).
    """

    number: int
    text: str
    start: int
    end: int
    n_tokens: int


def whitespace_spans(text: str) -> list[tuple[int, int]]:
    """A tokenizer-free fallback: one token per run of non-space characters."""
    return [(m.start(), m.end()) for m in _WORD.finditer(text)]


def tokenizer_spans(tokenizer: Any) -> TokenSpans:
    """Wrap a Hugging Face fast tokenizer as a ``TokenSpans`` callable.

    Special tokens are left out; tokens with an empty span (some tokenizers emit them for
    whitespace) are dropped so every span covers text.
    """

    def spans(text: str) -> list[tuple[int, int]]:
        encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True,
                            return_attention_mask=False, return_token_type_ids=False,
                            verbose=False)
        return [(int(s), int(e)) for s, e in encoded["offset_mapping"] if e > s]

    return spans


# A token longer than this many characters (not whitespace alone) is counted as pieces of
# about _PIECE_CHARS characters (``_bounded``): WordPiece reads a run without spaces (Thai, a
# line of emoji, a long hash) as one [UNK] token, and the whitespace fallback as one word, so
# a 277 kB Thai file was one chunk of 92,402 characters, returned whole as every hit's text.
_LONG_TOKEN_CHARS = 32
# (The indexer's own estimate of characters per token.)
_PIECE_CHARS = 4


def _cut_inside(text: str | None, spans: Sequence[tuple[int, int]], i: int, start: int, *,
                end: bool) -> bool:
    """Whether a window cut at token ``i`` falls inside a character of the text (``joins_previous``):
    where a window from token ``start`` ending before token ``i`` ends (``end``), or where
    one beginning at token ``i`` begins, each as its chunk's text is cut (``_chunk_bounds``:
    over the marks an uncased tokenizer leaves out; byte-level BPE gives one character several
    tokens of the same span). A chunk began with a keycap's U+20E3 or a Hangul vowel, or cut a
    flag in two."""
    if text is None or not 0 < i < len(spans):
        return False
    at = (_chunk_bounds(text, spans, start, i)[1] if end
          else _chunk_bounds(text, spans, i, i + 1)[0])
    # (A run of flags is counted from the window's start, a boundary: counted 256 characters
    # back, a flag of a longer run was cut in two.)
    return joins_previous(text, at, floor=min(spans[start][0], at))


def _bounded(spans: Sequence[tuple[int, int]], text: str) -> Sequence[tuple[int, int]]:
    """``spans`` with each token longer than ``_LONG_TOKEN_CHARS`` characters split into pieces
    of about ``_PIECE_CHARS`` characters (never inside a character and its marks: ``joins_previous``),
    each counted as a token, so that a chunk of text without spaces holds about as many
    characters as one of words. Whitespace tokens are left whole (they are no chunk's text)."""
    if all(b - a <= _LONG_TOKEN_CHARS for a, b in spans):
        return spans
    out: list[tuple[int, int]] = []
    for a, b in spans:
        if b - a <= _LONG_TOKEN_CHARS or text[a:b].isspace():
            out.append((a, b))
            continue
        i = a
        while i < b:
            j = min(i + _PIECE_CHARS, b)
            while j < b and joins_previous(text, j, floor=i):
                j += 1
            out.append((i, j))
            i = j
    return out


def _starts_word(spans: Sequence[tuple[int, int]], i: int, text: str | None = None) -> bool:
    """Whether token ``i`` begins a word: the first token, one after whitespace (a word-piece
    such as "##walk", or punctuation glued to a word, does not), or, given ``text``, one whose
    span starts with whitespace or follows a token that ends with it. Byte-level BPE (the LLM
    embedders' tokenizers) puts the space inside the next token (" cat", "walk"), so without
    the text no token ever followed a gap and their windows cut inside words.

    Given ``text``, a gap between two tokens is a word boundary only if it holds whitespace:
    an uncased WordPiece tokenizer strips accents, so the combining marks of NFD text, Arabic
    harakat and Hebrew points fall between the spans of one word's tokens ("المَدْرَسَةِ"),
    and counting every gap as a boundary cut windows inside words."""
    if i == 0:
        return True
    gap_start, gap_end = spans[i - 1][1], spans[i][0]
    if text is None:
        return gap_end > gap_start
    if any(ch.isspace() for ch in text[gap_start:gap_end]):
        return True
    return text[spans[i][0]].isspace() or text[spans[i - 1][1] - 1].isspace()


def _trimmed(text: str, a: int, b: int) -> tuple[int, int]:
    """``text[a:b]`` without its leading and trailing whitespace (a byte-level BPE window
    begins with its first word's space); the span unchanged when it is all whitespace (BPE
    makes tokens of whitespace runs: such a window is no chunk, and is skipped)."""
    stripped = text[a:b].strip()
    if not stripped:
        return a, b
    a += len(text[a:b]) - len(text[a:b].lstrip())
    return a, a + len(stripped)


def _chunk_bounds(text: str, spans: Sequence[tuple[int, int]], first: int, last: int,
                  head: bool = True) -> tuple[int, int]:
    """The character span of the window ``spans[first:last]``: from its first token's start
    to its last token's end, widened over the characters the tokenizer left out (the marks an
    uncased tokenizer strips, control and format characters) that belong to its words, and
    without leading or trailing whitespace (``_trimmed``).

    A gap's characters before its first whitespace belong to the word before it (a combining
    mark follows its letter); those after its last whitespace to the word after it; the rest
    (a dropped character alone between spaces) to the window that ends before the gap, so
    that every character is in some chunk. ``head``: ``spans[0]`` is the first token of the
    whole text (the characters before it go to the first window)."""
    a, b = spans[first][0], spans[last - 1][1]
    lo = spans[first - 1][1] if first > 0 else 0
    before = text[lo:a]
    if first == 0 and head:
        a = lo + len(before) - len(before.lstrip())
    else:
        ws = max((k for k, ch in enumerate(before) if ch.isspace()), default=None)
        if ws is not None:
            a = lo + ws + 1
    hi = spans[last][0] if last < len(spans) else len(text)
    after = text[b:hi]
    if last < len(spans):
        ws = max((k for k, ch in enumerate(after) if ch.isspace()), default=None)
        if ws is not None:
            after = after[:ws]
    b += len(after.rstrip())
    return _trimmed(text, a, b)


def _window(spans: Sequence[tuple[int, int]], start: int, config: ChunkingConfig,
            n: int, text: str | None = None, floor: int = 0) -> tuple[int, int]:
    """The window that begins at token ``start``: ``(end, next_start)``, ``end`` exclusive and
    ``next_start`` ``n`` for the last window. ``floor``: where the previous window ended.

    A window holds at most ``size`` tokens and ends before a word, not inside one; the next
    begins at a word about ``overlap`` tokens before the end (a little earlier rather than
    later). Cutting inside words made lexical search find fragments ("catwalk" cut as
    "cat|walk" matched "walk") and snippets start mid-word. Where no word boundary is near
    (a word longer than the window, text without spaces) the windows cut tokens as before.

    A window ends past ``floor`` and, unless it is the last, holds more than ``overlap``
    tokens (the next would repeat a shorter one almost whole), and "a little earlier" is at
    most ``overlap`` tokens more: in CJK text with a few spaces the next start fell back to a
    word however far before the end, the window from there retreated to the same word
    boundary as its predecessor, and it was emitted inside it.

    Given ``text``, a window neither ends nor begins inside a user-perceived character
    (``_cut_inside``), which byte-level BPE splits into several tokens: one token or more
    less (a next start: more, where none before it will do), unless the character alone is
    longer than a window.
    """
    end = min(start + config.size, n)
    if end < n and not _starts_word(spans, end, text):
        low = max(start + config.overlap, floor)
        boundary = next((i for i in range(end - 1, low, -1) if _starts_word(spans, i, text)), None)
        if boundary is not None:
            end = boundary
    # Not inside a character (``_cut_inside``), where tokens are cut: a token or more less.
    end = _outside(text, spans, end, start, end=True)
    if end >= n:
        return end, n
    nxt = max(end - config.overlap, start + 1)
    if not _starts_word(spans, nxt, text):
        low = max(nxt - config.overlap - 1, start)
        earlier = next((i for i in range(nxt - 1, low, -1) if _starts_word(spans, i, text)), None)
        later = None if earlier is not None else next(
            (i for i in range(nxt + 1, end + 1) if _starts_word(spans, i, text)), None)
        nxt = earlier if earlier is not None else later if later is not None else nxt
    nxt = _outside(text, spans, nxt, start, end=False)
    if _cut_inside(text, spans, nxt, start, end=False):
        # No start before it but inside a character (one of more tokens than a window holds,
        # zalgo text): the first after it, up to the window's end, that is not.
        nxt = next((i for i in range(nxt + 1, end) if not _cut_inside(text, spans, i, start,
                                                                       end=False)), nxt)
    return end, nxt


def _outside(text: str | None, spans: Sequence[tuple[int, int]], i: int, start: int, *,
             end: bool) -> int:
    """Token ``i``, or the nearest before it (past ``start``) where a window's end (``end``) or
    start is not cut inside a character of the text (``_cut_inside``); ``i`` itself where each
    one between is (a single character of more tokens than a window holds)."""
    k = i
    while k > start + 1 and _cut_inside(text, spans, k, start, end=end):
        k -= 1
    return i if _cut_inside(text, spans, k, start, end=end) else k


def chunk_spans(
    spans: Sequence[tuple[int, int]], config: ChunkingConfig, text: str | None = None
) -> list[tuple[int, int]]:
    """Token windows as ``(first_token, last_token_exclusive)`` index pairs, on word
    boundaries where there are any (``_window``).

    The last window is not padded: it holds whatever tokens remain, and a window that
    would only repeat the overlap of its predecessor is not emitted: each ends past the end
    of the one before it.
    """
    n = len(spans)
    windows: list[tuple[int, int]] = []
    start = end = 0
    while start < n:
        end, nxt = _window(spans, start, config, n, text, floor=end)
        windows.append((start, end))
        start = nxt
    return windows


# Texts longer than this are tokenized in pieces of this size (``chunk_text``).
_WHOLE_TEXT_CHARS = 1 << 20


def chunk_text(text: str, tokenize: TokenSpans, config: ChunkingConfig) -> list[Chunk]:
    """Cut ``text`` into overlapping token windows.

    Args:
        text: the document.
        tokenize: text -> token character spans (see ``tokenizer_spans``).
        config: chunk size and overlap in tokens.

    Returns:
        Chunks in document order; empty when the text has no tokens.
    """
    if len(text) > _WHOLE_TEXT_CHARS:
        # Tokenizing a whole large text at once took ~175 bytes of memory per character (the
        # token ids, masks and offsets as Python lists): 3 GB for a 15 MB record. In pieces,
        # the same chunks (stream_chunks' contract) in the memory of one piece.
        pieces = (text[i:i + _WHOLE_TEXT_CHARS] for i in range(0, len(text), _WHOLE_TEXT_CHARS))
        return list(stream_chunks(pieces, tokenize, config))
    spans = _bounded(tokenize(text), text)
    chunks: list[Chunk] = []
    for first, last in chunk_spans(spans, config, text):
        start, end = _chunk_bounds(text, spans, first, last)
        if text[start:end].isspace():
            continue  # a window of whitespace tokens alone (see _trimmed)
        if chunks and end <= chunks[-1].end:
            # Inside the previous chunk once trimmed: a window that ended past its predecessor
            # only by a whitespace token (BPE's "\n\n" before a long run without spaces).
            continue
        chunks.append(Chunk(number=len(chunks), text=text[start:end], start=start, end=end,
                            n_tokens=last - first))
    return chunks


# Tokens kept back from the end of the text read so far: a token near where the text was cut
# may change once the rest of its word (or whitespace run) arrives.
_STREAM_MARGIN = 16


def _word_before(text: str, index: int) -> int:
    """Where the word before the one holding ``index`` starts (tokenizing from there gives
    the tokens at ``index`` the context they have in the whole text)."""
    i = index
    while i > 0 and not text[i - 1].isspace():
        i -= 1
    while i > 0 and text[i - 1].isspace():
        i -= 1
    while i > 0 and not text[i - 1].isspace():
        i -= 1
    return i


def _last_space(text: str) -> int:
    """Index of the last whitespace character of ``text``; -1 when it has none."""
    i = len(text) - 1
    while i >= 0 and not text[i].isspace():
        i -= 1
    return i


def _token_at(spans: Sequence[tuple[int, int]], offset: int, dups: int) -> int:
    """Index of the first token that starts at or after ``offset``, plus ``dups``."""
    first = next((i for i, (a, _) in enumerate(spans) if a >= offset), len(spans))
    return min(first + dups, len(spans))


def _dups_before(spans: Sequence[tuple[int, int]], i: int) -> int:
    """Tokens just before token ``i`` that start at the same character."""
    k = 0
    while i - k > 0 and spans[i - k - 1][0] == spans[i][0]:
        k += 1
    return k


def stream_chunks(pieces: Iterable[str], tokenize: TokenSpans, config: ChunkingConfig
                  ) -> Iterator[Chunk]:
    """``chunk_text`` over a text that arrives in pieces (a large file read in a stream).

    Holds about one piece and one chunk of text at a time: each round tokenizes what was read
    up to its last whitespace, emits the complete windows that end well before that point,
    and keeps the text from the next window's start (re-tokenized from the word before it, so
    its tokens see the context they have in the whole text). For tokenizers that split on
    whitespace first (WordPiece, byte-level BPE) the chunks are those of ``chunk_text`` on the
    whole text: same numbers, offsets, token counts and texts.
    """
    buffer = ""
    base = 0  # offset of buffer[0] in the whole text
    target = 0  # offset in buffer of the next window's first token
    # Tokens before it that start at the same character: byte-level BPE splits one CJK
    # character or emoji into several tokens with the same span (the offset alone named the
    # first of them, and the streamed windows drifted from the whole text's).
    target_dup = 0
    # Where the last window emitted ended (``_window``'s floor), kept the same way.
    floor_at, floor_dup = 0, 0
    number = 0
    last_end = -1  # where the last chunk yielded ends (a chunk inside it is not yielded)
    # Where the last round's text ended, in the whole text: a round up to the same point would
    # tokenize the same text again and stop at the same window (92 kB of Thai, whitespace every
    # 30,000 characters, read in 1,000-character pieces: tokenized again for each, 11 s, not 1).
    worked_to = -1
    # Where the last whitespace read so far is, in the whole text (-1: none yet): each piece is
    # scanned for it, not the whole buffer again (a run of megabytes without whitespace was
    # scanned character by character once per piece).
    space_at = -1
    source = iter(pieces)
    while True:
        piece = next(source, None)
        final = piece is None
        if piece is not None:
            buffer += piece
            if (j := _last_space(piece)) >= 0:
                space_at = base + len(buffer) - len(piece) + j
            cut = space_at - base  # (negative: no whitespace in the buffer)
            if cut <= target or base + cut == worked_to:
                continue  # no whitespace after the next window's start, or the last round's
            work = buffer[:cut]
            worked_to = base + cut
        else:
            work = buffer
        spans = _bounded(tokenize(work), work)
        n = len(spans)
        start = _token_at(spans, target, target_dup)
        floor = _token_at(spans, floor_at, floor_dup)
        while start < n:
            if not final and min(start + config.size, n) > n - _STREAM_MARGIN:
                break  # too near the cut: wait for more text
            end, nxt = _window(spans, start, config, n, work, floor)
            a, b = _chunk_bounds(work, spans, start, end, head=base == 0)
            if not work[a:b].isspace() and base + b > last_end:  # (as in chunk_text)
                yield Chunk(number=number, text=work[a:b], start=base + a, end=base + b,
                            n_tokens=end - start)
                number += 1
                last_end = base + b
            start, floor = nxt, end
        if final:
            return
        if start >= n:  # everything read so far is chunked (cannot happen before the end)
            base, buffer, target, target_dup = base + len(work), buffer[len(work):], 0, 0
            floor_at, floor_dup = 0, 0
            continue
        target_dup = _dups_before(spans, start)
        floor_dup = _dups_before(spans, floor)
        keep_from = _word_before(work, spans[start][0])
        target = spans[start][0] - keep_from
        floor_at = spans[floor][0] - keep_from  # the floor is never before the next start
        base += keep_from
        buffer = buffer[keep_from:]
