from __future__ import annotations

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
    assert sum(c.n_tokens for c in chunks) - 8 * (len(chunks) - 1) == n_tokens
    for c in chunks:
        assert text[c.start:c.end] == c.text
        # The chunk re-tokenizes to the same number of tokens: windows end on token edges.
        assert len(spans(c.text)) == c.n_tokens


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
