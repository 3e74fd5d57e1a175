from __future__ import annotations

import pytest

from indexer.chunking import (
    ChunkingConfig,
    chunk_spans,
    chunk_text,
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
