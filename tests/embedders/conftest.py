"""Fixtures of the embedder tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from embedders.registry import unregister_embedder


@pytest.fixture
def registered() -> Iterator[list[str]]:
    """Names registered by a test (it appends them), unregistered after it."""
    names: list[str] = []
    yield names
    for name in names:
        unregister_embedder(name)
