from __future__ import annotations

import itertools
import unicodedata

import pytest

from indexer.chunking import (
    ChunkingConfig,
    chunk_spans,
    chunk_text,
    stream_chunks,
    tokenizer_spans,
    whitespace_spans,
)


def test_windows_overlap_and_cover_every_token() -> None:
    spans = [(i, i + 1) for i in range(10)]
    windows = chunk_spans(spans, ChunkingConfig(size=4, overlap=1))
    assert windows == [(0, 4), (3, 7), (6, 10)]
    covered = {t for a, b in windows for t in range(a, b)}
    assert covered == set(range(10))


def test_no_trailing_window_that_only_repeats_the_overlap() -> None:
    spans = [(i, i + 1) for i in range(7)]
    assert chunk_spans(spans, ChunkingConfig(size=4, overlap=1)) == [(0, 4), (3, 7)]


def test_offsets_point_back_at_the_text() -> None:
    text = "  The quick  brown fox\njumps over the lazy dog.  "
    chunks = chunk_text(text, whitespace_spans, ChunkingConfig(size=3, overlap=1))
    assert [c.text for c in chunks] == ["The quick  brown", "brown fox\njumps", "jumps over the",
                                        "the lazy dog."]
    for c in chunks:
        assert text[c.start:c.end] == c.text
    assert [c.number for c in chunks] == [0, 1, 2, 3]


def test_empty_text_gives_no_chunks() -> None:
    assert chunk_text("   \n", whitespace_spans, ChunkingConfig()) == []


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (4, 4), (4, -1)])
def test_bad_config_is_rejected_with_the_rule(size: int, overlap: int) -> None:
    with pytest.raises(ValueError, match="chunk"):
        ChunkingConfig(size=size, overlap=overlap)


def test_token_aware_with_the_minilm_tokenizer(minilm) -> None:
    text = "Unbelievably, tokenization splits words into word-pieces. " * 20
    spans = tokenizer_spans(minilm.backbone.tokenizer)
    chunks = chunk_text(text, spans, ChunkingConfig(size=32, overlap=8))
    n_tokens = len(spans(text))
    assert n_tokens > 100
    assert all(c.n_tokens <= 32 for c in chunks)
    covered = [(c.start, c.end) for c in chunks]
    assert covered[0][0] == 0 and covered[-1][1] == len(text.rstrip())
    assert all(b[0] < a[1] for a, b in itertools.pairwise(covered))  # they overlap: no gap
    for c in chunks:
        assert text[c.start:c.end] == c.text
        # The chunk re-tokenizes to the same number of tokens: windows end on token edges.
        assert len(spans(c.text)) == c.n_tokens
        # ... and on word edges: a window cut inside "tokenization" began at "##ization".
        assert c.start == 0 or text[c.start - 1].isspace(), c.text[:20]
        assert c.end == len(text) or text[c.end].isspace(), c.text[-20:]


def test_windows_fall_between_words_and_cut_a_word_only_when_it_is_longer_than_one() -> None:
    """'catwalk' is two tokens here: a window that began at its second half gave lexical search
    the term 'walk' for a text holding none."""
    text = "A " + " ".join(["catwalk"] * 20)

    def pieces(t: str) -> list[tuple[int, int]]:  # "cat" + "walk", "A": one token each
        out = []
        for word in whitespace_spans(t):
            a, b = word
            out += [(a, a + 3), (a + 3, b)] if t[a:b] == "catwalk" else [word]
        return out

    for size, overlap in ((5, 2), (4, 1), (6, 0)):
        chunks = chunk_text(text, pieces, ChunkingConfig(size, overlap))
        assert all(c.text.startswith(("A", "cat")) and c.text.endswith("walk") for c in chunks)
        assert all(c.n_tokens <= size for c in chunks)
        assert {w for c in chunks for w in c.text.split()} == {"A", "catwalk"}
        assert chunks[-1].end == len(text)
    # One word longer than the window: cut inside it, as there is no other way.
    long = chunk_text("antidisestablishment", lambda t: [(i, i + 4) for i in range(0, len(t), 4)],
                      ChunkingConfig(2, 1))
    assert [c.text for c in long] == ["antidise", "disestab", "stablish", "lishment"]


@pytest.fixture(scope="module")
def bpe_spans():
    """The LLM embedders' byte-level BPE tokenizer (SmolLM2's): its spans hold the space
    before a word (" cat", "walk")."""
    from transformers import AutoTokenizer

    from embedders.backbone import DEFAULT_DECODER, resolve_model_path

    return tokenizer_spans(AutoTokenizer.from_pretrained(resolve_model_path(DEFAULT_DECODER)))


def test_byte_level_bpe_windows_fall_between_words_too(bpe_spans) -> None:
    """Every collection of an LLM embedder was still cut inside words ("...down the cat" |
    "walk in Paris"): no BPE token follows a gap, the space is inside the next token."""
    text = " ".join(["The model walked down the catwalk in Paris."] * 12 +
                     ["Internationalization overwhelmingly\nmatters."] * 6)
    for config in (ChunkingConfig(16, 4), ChunkingConfig(7, 2), ChunkingConfig(32, 0)):
        chunks = chunk_text(text, bpe_spans, config)
        assert len(chunks) > 3
        for c in chunks:
            assert c.text == text[c.start:c.end] and c.text == c.text.strip()
            assert c.start == 0 or text[c.start - 1].isspace(), c.text
            assert c.end == len(text) or text[c.end].isspace(), c.text
        assert {w for c in chunks for w in c.text.split()} == set(text.split())


def test_windows_of_whitespace_alone_are_no_chunks(bpe_spans) -> None:
    """BPE makes tokens of whitespace runs (a padded log, NBSP-filled HTML): 10 of 12 chunks
    held only whitespace, and blank snippets topped every search."""
    text = "Intro words here.\n" + "\n \t\n \u00a0\n" * 400 + "Closing words about ferries."
    for config in (ChunkingConfig(16, 4), ChunkingConfig(64, 8)):
        chunks = chunk_text(text, bpe_spans, config)
        assert [c.number for c in chunks] == list(range(len(chunks)))
        assert chunks and not any(c.text.isspace() for c in chunks)
        assert chunks[0].text.startswith("Intro") and chunks[-1].text.endswith("ferries.")
        pieces = (text[i:i + 137] for i in range(0, len(text), 137))
        assert list(stream_chunks(pieces, bpe_spans, config)) == chunks


@pytest.mark.parametrize("config", [ChunkingConfig(64, 8), ChunkingConfig(200, 32),
                                    ChunkingConfig(5, 0), ChunkingConfig(16, 4)])
def test_streamed_bpe_chunks_are_those_of_the_whole_text(bpe_spans, config) -> None:
    """With CJK and emoji (several byte tokens to one character) the streamed windows of a
    BPE tokenizer ended elsewhere than the whole text's."""
    import random

    rng = random.Random(1)
    words = ["catwalk", "the", "plan", "Hello", "world.", "日本語のテキスト", "emoji😀", "café",
             "Straße", "—", "\n", "x" * 40]
    text = " ".join(rng.choice(words) for _ in range(3_000))
    whole = chunk_text(text, bpe_spans, config)
    for piece in (137, 4096):
        pieces = (text[i:i + piece] for i in range(0, len(text), piece))
        assert list(stream_chunks(pieces, bpe_spans, config)) == whole


@pytest.mark.parametrize("config", [ChunkingConfig(64, 8), ChunkingConfig(200, 32),
                                    ChunkingConfig(5, 0)])
def test_streamed_chunks_are_those_of_the_whole_text(minilm, config) -> None:
    import random

    rng = random.Random(0)
    words = ["unbelievable", "card", "fee", "\n\n", "naïve", "co-operation", "x", "  ",
             "antidisestablishmentarianism", "1,234.5", "café", "déjà-vu"]
    text = " ".join(rng.choice(words) for _ in range(12_000))
    for tokenize in (whitespace_spans, tokenizer_spans(minilm.backbone.tokenizer)):
        whole = chunk_text(text, tokenize, config)
        for piece in (997, 8192, 10**6):
            pieces = (text[i:i + piece] for i in range(0, len(text), piece))
            assert list(stream_chunks(pieces, tokenize, config)) == whole


def test_a_long_text_is_tokenized_in_pieces_with_the_same_chunks(minilm, monkeypatch) -> None:
    """A whole 15 MB record was tokenized at once (~3 GB of token lists); above the piece size
    it is tokenized a piece at a time, giving the chunks of the whole text."""
    import indexer.chunking as chunking

    text = " ".join(f"word{i % 97} unbelievable co-operation café" for i in range(3000))
    tokenize = tokenizer_spans(minilm.backbone.tokenizer)
    whole = chunk_text(text, tokenize, ChunkingConfig(64, 8))
    longest = [0]

    def counting(t: str):
        longest[0] = max(longest[0], len(t))
        return tokenize(t)

    monkeypatch.setattr(chunking, "_WHOLE_TEXT_CHARS", 20_000)
    assert len(text) > 5 * 20_000
    assert chunk_text(text, counting, ChunkingConfig(64, 8)) == whole
    assert longest[0] < 2 * 20_000


def _assert_rebuilds_the_text(text: str, chunks, config: ChunkingConfig) -> None:
    """Consecutive chunks each end past the one before (none lies inside its predecessor),
    and the chunks minus their overlaps are the whole text: nothing but whitespace between or
    around them, so every character is in some chunk."""
    assert [c.number for c in chunks] == list(range(len(chunks)))
    pos = 0
    for prev, c in itertools.pairwise([None, *chunks]):
        assert c.text == text[c.start:c.end] and c.n_tokens <= config.size
        if prev is not None:
            assert c.start > prev.start and c.end > prev.end, (prev.text, c.text)
        assert not text[pos:c.start].strip(), repr(text[pos:c.start])
        pos = max(pos, c.end)
    assert not text[pos:].strip(), repr(text[pos:])


_ZH = "大熊猫是中国特有的动物，主要生活在四川的山区。它们每天花很多时间吃竹子，一只成年熊猫一天可以吃掉十几公斤竹子。"
_JA = "日本の歴史は古く、縄文時代から始まり、弥生時代、古墳時代を経て、飛鳥時代に国家の形が整えられた。"


@pytest.mark.parametrize("text", [" iPhone 15 ".join([_ZH] * 4), "# 日本の歴史\n\n" + _JA * 5],
                         ids=["chinese-with-a-few-spaces", "japanese-under-a-heading"])
def test_no_window_lies_inside_the_one_before_it(minilm, bpe_spans, text) -> None:
    """In CJK text with a few spaces the next window fell back to a word start however far
    before the end, then retreated to the same word boundary as its predecessor: a chunk
    wholly inside the one before ((56, 131) then (66, 131); '# 日本の歴史' then '日本の歴史')."""
    spans = tokenizer_spans(minilm.backbone.tokenizer)
    for config in (ChunkingConfig(64, 8), ChunkingConfig(32, 8), ChunkingConfig(16, 4)):
        chunks = chunk_text(text, spans, config)
        assert len(chunks) > 1
        _assert_rebuilds_the_text(text, chunks, config)
        windows = chunk_spans(spans(text), config, text)
        for (a0, a1), (b0, b1) in itertools.pairwise(windows):
            # Each window makes progress, and they overlap by about `overlap` tokens.
            assert a0 < b0 <= a1 < b1 and a1 - b0 <= 2 * config.overlap, windows
        for tokenize in (spans, bpe_spans):
            whole = chunk_text(text, tokenize, config)
            pieces = (text[i:i + 37] for i in range(0, len(text), 37))
            assert list(stream_chunks(pieces, tokenize, config)) == whole


def test_a_window_past_its_predecessor_only_by_whitespace_is_not_a_chunk(bpe_spans) -> None:
    """BPE makes a token of "\n\n": a window ending past its predecessor only by that token
    was trimmed to lie inside it (a paragraph of 199 words, a blank line, then a long run
    without spaces: chunk 1 (1008, 1193) inside chunk 0 (0, 1193), a duplicate hit)."""
    text = " ".join(["alpha"] * 199) + "\n\n" + "".join(f"{i:04x}" for i in range(200))
    config = ChunkingConfig(200, 32)
    chunks = chunk_text(text, bpe_spans, config)
    _assert_rebuilds_the_text(text, chunks, config)
    pieces = (text[i:i + 97] for i in range(0, len(text), 97))
    assert list(stream_chunks(pieces, bpe_spans, config)) == chunks


_ARABIC = "ذَهَبَ الوَلَدُ إلى المَدْرَسَةِ فِي الصَّبَاحِ " * 4
_FRENCH = unicodedata.normalize("NFD", "Le café enneigé, j'ai mangé du pâté et du rosé. " * 10)
_HEBREW = "בְּרֵאשִׁית בָּרָא אֱלֹהִים אֵת הַשָּׁמַיִם וְאֵת הָאָרֶץ׃ " * 8


@pytest.mark.parametrize("text", [
    _ARABIC, _ARABIC.rstrip(),  # it ends with a mark (kasra)
    _FRENCH, _FRENCH + unicodedata.normalize("NFD", "Un rosé"),  # ... with U+0301
    _HEBREW,
], ids=["arabic", "arabic-ending-in-a-mark", "french-nfd", "french-nfd-ending-in-a-mark",
        "hebrew"])
def test_combining_marks_the_tokenizer_strips_stay_inside_their_words(minilm, text) -> None:
    """MiniLM's uncased tokenizer strips accents: the combining marks of NFD text, Arabic
    harakat and Hebrew points fall between token spans, and every such gap counted as a word
    start. Chunks began and ended inside words ('ذَهَبَ الوَلَدُ إلى المَدْر' + 'َ...'), a chunk
    ending before a mark dropped it, and the text's last mark was in no chunk at all."""
    spans = tokenizer_spans(minilm.backbone.tokenizer)
    assert any(unicodedata.combining(ch) for ch in text)
    for config in (ChunkingConfig(16, 4), ChunkingConfig(32, 8), ChunkingConfig(64, 8)):
        chunks = chunk_text(text, spans, config)
        assert len(chunks) > 1 or config.size == 64
        _assert_rebuilds_the_text(text, chunks, config)
        for c in chunks:
            assert c.start == 0 or text[c.start - 1].isspace(), c.text
            assert c.end == len(text) or text[c.end].isspace(), c.text
            assert not unicodedata.combining(c.text[0]), c.text
            assert len(spans(c.text)) == c.n_tokens
        pieces = (text[i:i + 41] for i in range(0, len(text), 41))
        assert list(stream_chunks(pieces, spans, config)) == chunks


def test_only_a_gap_with_whitespace_is_a_word_boundary() -> None:
    """A tokenizer that leaves characters out (here: one token per letter, marks dropped):
    the marks belong to their word, and to the chunk that holds the letter before them."""
    text = unicodedata.normalize("NFD", "été élève rôtie ") * 6 + unicodedata.normalize("NFD", "été")

    def letters(t: str) -> list[tuple[int, int]]:
        return [(i, i + 1) for i, ch in enumerate(t) if not ch.isspace()
                and not unicodedata.combining(ch)]

    for config in (ChunkingConfig(8, 2), ChunkingConfig(12, 3), ChunkingConfig(6, 0)):
        chunks = chunk_text(text, letters, config)
        _assert_rebuilds_the_text(text, chunks, config)
        words = set(text.split())
        assert all(set(c.text.split()) <= words for c in chunks), [c.text for c in chunks]
        assert chunks[-1].end == len(text)


_THAI = "ร้านกาแฟแห่งนี้มีขนมปังอร่อยมากและราคาไม่แพง"
_EMOJI = "👩‍👩‍👧‍👦👍🏽🇹🇭❤️" * 3


def _graphemes(text: str) -> set[int]:
    """Where each user-perceived character of ``text`` begins, and its end (the ``regex``
    module's \\X: Unicode's grapheme clusters, an oracle of its own)."""
    regex = pytest.importorskip("regex")
    return {m.start() for m in regex.finditer(r"\X", text)} | {len(text)}


@pytest.mark.parametrize("text", [
    (_THAI * 700 + "\n") * 3, _EMOJI * 60, "a" * 5000 + " b", _THAI * 40 + " " + "naïve " * 300,
    "a🇺🇸🇫🇷🇯🇵🇩🇪" * 300, unicodedata.normalize("NFD", "한국어텍스트") * 300,
    "🙂🙂🙂🙂🙂#️⃣🙂🙂🙂🙂" * 300,
], ids=["thai", "emoji", "one-long-word", "thai-then-words", "flags", "hangul-nfd", "keycaps"])
def test_text_without_spaces_is_cut_into_chunks_as_short_as_those_of_words(minilm, bpe_spans,
                                                                           text) -> None:
    """The i18n review of the fifth session of 2026-12-06: WordPiece reads a run without spaces
    as one [UNK] token (and the whitespace fallback as one word), so a 277 kB Thai file was one
    chunk of 92,402 characters, returned whole as a search hit's text. Such a token counts as
    pieces of about four characters; no chunk begins or ends inside a user-perceived character
    (its verification: a flag's two regional indicators, a decomposed Hangul syllable's jamo,
    and a keycap's U+20E3, which WordPiece splits from its "#", were cut apart); text of words
    is cut as before. Byte-level BPE (the LLM embedders') gives one character several tokens,
    and cut Thai, emoji, flags and Hangul inside characters too (29 of 172 Thai chunks began on
    a mark): its windows end and begin between characters as well."""
    config = ChunkingConfig(200, 32)
    boundaries = _graphemes(text)
    for tokenize in (tokenizer_spans(minilm.backbone.tokenizer), whitespace_spans, bpe_spans):
        chunks = chunk_text(text, tokenize, config)
        _assert_rebuilds_the_text(text, chunks, config)
        assert len(chunks) > 1
        assert max(len(c.text) for c in chunks) <= 200 * 8, max(len(c.text) for c in chunks)
        inside = [(c.start, c.end, c.text[:3]) for c in chunks
                  if c.start not in boundaries or c.end not in boundaries]
        assert not inside, inside[:5]
        pieces = (text[i:i + 997] for i in range(0, len(text), 997))
        assert list(stream_chunks(pieces, tokenize, config)) == chunks
    # Words are cut as before: no token of theirs is over 32 characters.
    words = " ".join(["unbelievable", "card", "co-operation", "x" * 32] * 200)
    tokenize = whitespace_spans
    windows = chunk_spans(tokenize(words), config, words)
    assert [c.n_tokens for c in chunk_text(words, tokenize, config)] == [b - a for a, b in windows]


@pytest.mark.parametrize("text", [
    "ภาษาไทยเป็นภาษาที่มีระดับเสียงของคำแน่นอนหรือวรรณยุกต์ที่น้ำ" * 20,
    "हिन्दी भाषा में लिखा गया पाठ न्दी " * 40, "\u0600\u0661\u0662 رقم " * 40,
    "a🇺🇸🇫🇷🇯🇵🇩🇪" * 40, "x " + "🇺🇸🇫🇷🇯🇵🇩🇪" * 100, "ﾊﾟﾝﾀﾞｶﾞｷﾞ" * 150,
], ids=["thai-sara-am", "devanagari-conjuncts", "arabic-number-sign", "flags", "a-run-of-flags",
        "half-width-katakana"])
def test_small_windows_begin_and_end_between_characters_too(minilm, bpe_spans, text) -> None:
    """The second verification of the fifth session of 2026-12-06: Thai's SARA AM (U+0E33, a
    letter that joins the one before it: "น้ำ") was cut from it at 64-token windows, as are an
    Indic conjunct's consonants and what an Arabic number sign prefixes (Unicode's
    SpacingMark, InCB=Linker and Prepend, not of category M); in a run of over 128 flags the
    pairs were counted 256 characters back only, and a flag was cut in two."""
    boundaries = _graphemes(text)
    for tokenize in (tokenizer_spans(minilm.backbone.tokenizer), bpe_spans):
        for config in (ChunkingConfig(64, 8), ChunkingConfig(16, 4)):
            chunks = chunk_text(text, tokenize, config)
            _assert_rebuilds_the_text(text, chunks, config)
            inside = [(c.start, c.end) for c in chunks
                      if c.start not in boundaries or c.end not in boundaries]
            assert not inside, (config, inside[:5])


def test_a_stream_tokenizes_text_up_to_the_same_whitespace_once() -> None:
    """A round up to the same last whitespace as the round before tokenized the same text again
    and stopped at the same window: a 92 kB Thai file (whitespace every 30,000 characters) read
    in pieces was tokenized ~30 times over (11 s of this test file's 20 s). The chunks are
    those of the whole text, with one tokenization per whitespace reached."""
    text = "word " + "ก" * 50_000 + " end " + "ข" * 20_000
    calls: list[int] = []

    def counted(part: str) -> list[tuple[int, int]]:
        calls.append(len(part))
        return whitespace_spans(part)

    config = ChunkingConfig(200, 32)
    pieces = (text[i:i + 1000] for i in range(0, len(text), 1000))
    assert list(stream_chunks(pieces, counted, config)) == chunk_text(text, whitespace_spans, config)
    assert len(calls) <= 3, calls
