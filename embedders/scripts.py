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
