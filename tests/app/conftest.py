"""Fixtures shared by the tests under tests/app."""

from __future__ import annotations

import pytest

from app.encoding import EmbedderCache


@pytest.fixture
def cache(minilm) -> EmbedderCache:
    """An embedder cache holding the session's real minilm (loaded once), on the CPU."""
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    return cache
