"""Character classes of writing systems, for the code that cuts text into words without a
tokenizer (cluster keywords, search highlights). Standard library only: the search service
imports it and must not load torch."""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata

# Scripts written without spaces between words, whole blocks (their vowel signs and tone marks
# included, which ``\w`` does not match): Thai, Lao, Myanmar, Khmer, Hangul syllables, kana,
# CJK ideographs (with extensions A-H and the compatibility ones). Hangul is spaced, but its
# words carry their particles (판다가, 판다는), so it is paired like the others.
UNSPACED = ("\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
            "\uff66-\uff9f"  # half-width katakana (ﾊﾟﾝﾀﾞ)
            "\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f")
UNSPACED_RUN = re.compile(f"[{UNSPACED}]+")


@functools.cache
def combining_marks() -> str:
    """Every combining mark (Unicode categories Mn, Mc, Me) as the inside of a regex character
    class. ``\\w`` matches letters and digits but not most marks, so ``\\w+`` cut Hindi, Arabic
    with vowel marks, or decomposed accents into pieces ("दिल्ली" -> द, ल, ल). Built once (~50 ms)."""
    ranges: list[tuple[int, int]] = []
    for cp in range(0x300, 0x20000):
        if unicodedata.category(chr(cp))[0] != "M":
            continue
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))
    return "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
                   for a, b in ranges)


@functools.cache
def word_pattern() -> re.Pattern[str]:
    """A word of a spaced script: a letter or digit, then letters, digits and combining marks,
    none of them ``UNSPACED`` (a Latin word or a number written against Chinese text, as in
    "Python是一种编程语言", is a word of its own; the Chinese is read by ``pair_spans``)."""
    letter = rf"[^\W{UNSPACED}]"
    return re.compile(rf"{letter}(?:{letter}|[{combining_marks()}])*")


def segments(run: str) -> list[list[tuple[int, int]]]:
    """The characters of ``run`` (a run of ``UNSPACED`` text) as (start, end) offsets, each
    with the combining marks that follow it, in segments that the blocks' punctuation (the
    katakana middle dot, Burmese and Khmer full stops) separates."""
    out: list[list[tuple[int, int]]] = []
    units: list[tuple[int, int]] = []
    for i, char in enumerate(run + " "):
        kind = unicodedata.category(char)
        if units and kind.startswith("M"):
            units[-1] = (units[-1][0], i + 1)
        elif kind[0] in "PSZ":
            if units:
                out.append(units)
            units = []
        else:
            units.append((i, i + 1))
    return out


def pair_spans(run: str) -> list[tuple[int, int]]:
    """Overlapping pairs of the characters of ``run`` as (start, end) offsets, within each of its
    ``segments``; a segment of one character gives nothing, as a one-letter word does."""
    return [(a, b) for units in segments(run) for (a, _), (_, b) in itertools.pairwise(units)]


def pairs(run: str) -> list[str]:
    """The pairs of ``pair_spans`` as text (Thai "ร้อน": ร้อ, อน)."""
    return [run[a:b] for a, b in pair_spans(run)]


def singles(run: str) -> list[str]:
    """The characters of ``run`` (with their marks), one by one: the one-character words of
    Chinese and Japanese (猫, 水) and Korean syllables (책) are found by them."""
    return [run[a:b] for units in segments(run) for a, b in units]


# What ``fold`` removes: the Arabic vowel marks (harakat: fathatan ... sukun, the maddah and
# hamza signs, U+064B-U+065F), the superscript alef (U+0670) and the tatweel (U+0640, a
# stretching stroke: كتـــاب is كتاب), and the Hebrew points and cantillation marks (niqqud:
# the combining marks of U+0591-U+05C7; the maqaf, paseq, sof pasuq and nun hafukha there are
# punctuation and letters, and stay).
_FOLD_DROP = dict.fromkeys(
    [cp for cp in range(0x0591, 0x05C8) if unicodedata.category(chr(cp))[0] == "M"]
    + list(range(0x064B, 0x0660)) + [0x0670, 0x0640])
# Turkish dotted capital I is I (lower-casing gives "i" rather than "i" + U+0307, so "İstanbul"
# is "istanbul"), its lower-cased form "i" + combining dot too, and the German sharp s is "ss".
_FOLD_SWAP = (("\u0130", "I"), ("i\u0307", "i"), ("I\u0307", "I"), ("\u00df", "ss"),
              ("\u1e9e", "ss"))


def fold(text: str | None) -> str:
    """``text`` as words are compared, by lexical search (``indexer.lexical``'s folding
    definitions), search highlights and cluster keywords, before any lower-casing: Unicode's
    compatibility form (NFKC: full-width Latin and digits, "Ｃｏｍｐａｎｙ １２３" -> "Company 123";
    half-width katakana, "ｶﾀｶﾅ" -> "カタカナ"; ligatures, "ﬁ" -> "fi"; composed accents), Turkish
    "İ" as "I", "ß" and "ẞ" as "ss", without Arabic harakat and tatweel or Hebrew niqqud
    (``_FOLD_DROP``). Latin, Greek and Cyrillic accents are kept ("café" is not "cafe").
    Folding folded text changes nothing."""
    text = unicodedata.normalize("NFKC", text or "")
    if not text.isascii():
        for old, new in _FOLD_SWAP:
            text = text.replace(old, new)
        text = text.translate(_FOLD_DROP)
        # A mark dropped between a letter and another mark may leave a pair NFKC composes.
        text = unicodedata.normalize("NFKC", text)
    return text


def _fold_unit_end(text: str, i: int) -> int:
    """Where the unit of ``text`` that starts at ``i`` ends: a character with the combining
    marks (and half-width kana sound marks, U+FF9E-U+FF9F) after it, which fold with it."""
    j = i + 1
    while j < len(text) and (unicodedata.category(text[j])[0] == "M" or text[j] in "\uff9e\uff9f"):
        j += 1
    return j


_ASCII_RUN = re.compile(r"[\x00-\x7f]+")


def fold_with_offsets(text: str) -> tuple[str, list[tuple[int, int]]]:
    """``fold`` of ``text`` unit by unit (a character with its marks), and for each character
    of the folded text the (start, end) of the unit of ``text`` it came from: where a word
    found in the folded text is in ``text`` (a highlight of "istanbul" on "İstanbul", of
    "パンダ" on "ﾊﾟﾝﾀﾞ")."""
    if fold(text) == text:  # nearly all text: each character is itself
        return text, [(i, i + 1) for i in range(len(text))]
    out: list[str] = []
    where: list[tuple[int, int]] = []
    i = 0
    while i < len(text):
        # A run of ASCII characters is itself, but for a last one a mark follows (a unit with
        # it): taken whole (unit by unit, an English chunk with one "…" took ~1 ms to fold).
        run = _ASCII_RUN.match(text, i)
        if run is not None:
            j = run.end()
            if j < len(text) and _fold_unit_end(text, j - 1) > j:
                j -= 1
            if j > i:
                out.append(text[i:j])
                where += [(k, k + 1) for k in range(i, j)]
                i = j
                continue
        j = _fold_unit_end(text, i)
        unit = fold(text[i:j])
        out.append(unit)
        where += [(i, j)] * len(unit)
        i = j
    return "".join(out), where


# The format characters (Cf) that are drawn: the prepended concatenation marks (Arabic number
# signs, the end of ayah U+06DD, Syriac's abbreviation mark, Kaithi's number signs). A text of
# one of them is something to read, not blank.
VISIBLE_FORMAT = frozenset("\u0600\u0601\u0602\u0603\u0604\u0605\u06dd\u070f\u0890\u0891\u08e2"
                           "\U000110bd\U000110cd")


def _regional(code: int) -> bool:
    return 0x1F1E6 <= code <= 0x1F1FF  # a regional indicator: two make a flag


def _hangul_lead(code: int) -> bool:
    return 0x1100 <= code <= 0x115F or 0xA960 <= code <= 0xA97C


def _hangul_follows(code: int) -> bool:
    """A conjoining vowel or trailing consonant jamo: part of the syllable before it."""
    return 0x1160 <= code <= 0x11FF or 0xD7B0 <= code <= 0xD7FB


# Letters that join the character before them (Unicode's grapheme SpacingMark, though not of
# category M): Thai's and Lao's SARA AM ("น้ำ").
_SPACING_LETTERS = frozenset("\u0e33\u0eb3")
# Characters that extend the one before them though not of category M (Unicode's
# Other_Grapheme_Extend): the zero-width non-joiner (Persian "می‌"), the half-width katakana
# sound marks ("ﾊﾟ").
_EXTENDING = frozenset("\u200c\uff9e\uff9f")
# Letters that join the one after them (Unicode's Prepend, beside the drawn format characters:
# Malayalam's dot reph, Sharada's, Zanabazar Square's, Soyombo's, Masaram Gondi's repha).
_PREPEND_LETTERS = frozenset("\u0d4e\U000111c2\U000111c3\U0001193f\U00011941\U00011a3a"
                             "\U00011a84\U00011a85\U00011a86\U00011a87\U00011a88\U00011a89"
                             "\U00011d46\U00011f02")
# Indic viramas that link two consonants into one character (a conjunct, "न्द": Unicode's
# InCB=Linker). (The characters that join the one after them, Unicode's Prepend, are the drawn
# format characters, ``VISIBLE_FORMAT``: Arabic number signs.)
_LINKERS = frozenset("\u094d\u09cd\u0acd\u0b4d\u0c4d\u0d4d")


def joins_previous(text: str, i: int, floor: int | None = None) -> bool:
    """Whether ``text[i]`` belongs to the character before it (one user-perceived character,
    as Unicode's grapheme clusters, for the scripts met here), so that no chunk or piece of a
    long token is cut between them: a combining mark (Thai vowels and tone marks, accents, a
    keycap's U+20E3, Thai's SARA AM, a zero-width non-joiner, a half-width sound mark), a
    variation selector, an emoji modifier or tag, either side of a zero-width joiner, the LF
    of a CR LF, the second regional indicator of a flag, a decomposed Hangul
    syllable's jamo, the consonant after an Indic virama (a conjunct), and what follows a
    prepended mark (an Arabic number sign, Malayalam's dot reph): where chunks (``indexer.chunking``) and snippets
    are cut. ``floor``: a known boundary before ``i``, where the count of a run of regional
    indicators may start (0: the text's start); None: at most 256 characters back (a flag in
    a longer run of flags may then be taken apart). ``i`` 0 joins nothing."""
    if i <= 0 or i >= len(text):
        return False
    ch, before = text[i], text[i - 1]
    code, prev = ord(ch), ord(before)
    if (unicodedata.category(ch).startswith("M") or ch == "\u200d" or before == "\u200d"
            or ch in _SPACING_LETTERS or ch in _EXTENDING or before in VISIBLE_FORMAT
            or before in _PREPEND_LETTERS or (before == "\r" and ch == "\n")
            or (before in _LINKERS and unicodedata.category(ch) == "Lo")
            or 0xFE00 <= code <= 0xFE0F or 0x1F3FB <= code <= 0x1F3FF
            or 0xE0020 <= code <= 0xE007F or 0xE0100 <= code <= 0xE01EF):
        return True
    if _hangul_follows(code) or (_hangul_lead(prev) and (
            _hangul_lead(code) or 0xAC00 <= code <= 0xD7A3)):
        return True
    if _regional(code) and _regional(prev):
        # The second of a pair: an odd number of regional indicators just before it.
        k, low = i - 1, max(0, i - 256) if floor is None else floor
        while k > low and _regional(ord(text[k - 1])):
            k -= 1
        return (i - k) % 2 == 1
    return False


# The default-ignorable characters (Unicode's Default_Ignorable_Code_Point) that are not of
# category Cf: the combining grapheme joiner, Hangul fillers, Khmer's inherent vowels,
# Mongolian's variation selectors, the variation selectors (U+FE0F after an emoji) and their
# supplement. Drawn as nothing, as the Cf ones are.
_IGNORABLE = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180f\u3164\uffa0"
                       + "".join(map(chr, range(0xFE00, 0xFE10)))
                       + "".join(map(chr, range(0xE0100, 0xE01F0))))


# Characters that carry nothing to read by themselves (``blank``): control characters (Cc: NUL,
# BEL), private-use ones (Co: no embedder knows them) and combining marks with no letter to
# mark (Mn, Mc, Me). Not the unassigned code points (Cn): Python's Unicode tables may predate
# a character the text holds (an emoji newer than them), which is text.
_UNREAD_CATEGORIES = frozenset({"Cc", "Co", "Mn", "Mc", "Me"})


def blank(text: str) -> bool:
    """Whether ``text`` holds nothing to read: whitespace and invisible characters only (Unicode
    category Cf: a zero-width space U+200B, a word joiner U+2060, a byte order mark U+FEFF, a
    soft hyphen; not the drawn ones, ``VISIBLE_FORMAT``; and the other default-ignorable ones,
    ``_IGNORABLE``: a variation selector U+FE0F alone was embedded, as the text's prompt), with
    control characters, private-use characters and combining marks (``_UNREAD_CATEGORIES``:
    until the fourth session of 2026-12-07 a query or text of NUL, U+E000 or U+0301 alone was
    embedded as the prompt alone, 0 tokens, while indexing refused it as holding no text the
    tokenizer reads). A file of them was "indexed" with no chunks, where a file of spaces is
    refused as empty, and a query of them was searched (dense search returned arbitrary
    results). Stops at the first visible character."""
    for ch in text:
        if ch.isspace() or ch in _IGNORABLE:
            continue
        category = unicodedata.category(ch)
        if category in _UNREAD_CATEGORIES or (category == "Cf" and ch not in VISIBLE_FORMAT):
            continue
        return False
    return True


def invisible_alone(text: str) -> bool:
    """Whether a ``blank`` text is of whitespace and invisible format or default-ignorable
    characters only (no control, private-use or combining character): how a refusal names it."""
    return all(ch.isspace() or ch in _IGNORABLE or unicodedata.category(ch) == "Cf" for ch in text)

