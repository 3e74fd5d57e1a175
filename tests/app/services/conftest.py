"""Fixtures for the app services: a ServiceContext on a temp data dir sharing the session minilm."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.services.context import EmbedderCache, ServiceContext
from app.settings import FacetSettings


@pytest.fixture
def make_ctx(minilm, tmp_path: Path) -> Iterator[Callable[..., ServiceContext]]:
    """Build contexts (closed at teardown); keyword arguments are FacetSettings fields."""
    opened: list[ServiceContext] = []
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)

    def make(**fields: Any) -> ServiceContext:
        fields.setdefault("data_dir", tmp_path / "data")
        fields.setdefault("chunk_tokens", 64)
        fields.setdefault("chunk_overlap", 8)
        ctx = ServiceContext(FacetSettings(**fields), embedders=cache)
        opened.append(ctx)
        return ctx

    yield make
    for ctx in opened:
        ctx.close()


def write_corpus(root: Path, n: int, words: int = 40) -> dict[str, str]:
    """``n`` small distinct text files; returns {path: text}."""
    root.mkdir(parents=True, exist_ok=True)
    topics = ["bank card", "mortgage rate", "weather forecast", "football match", "python code",
              "cooking pasta", "train delay", "hotel booking"]
    out = {}
    for i in range(n):
        topic = topics[i % len(topics)]
        text = " ".join(f"{topic} note {i} sentence {j}." for j in range(words // 5))
        path = root / f"doc{i:03d}.txt"
        path.write_text(text)
        out[str(path)] = text
    return out
