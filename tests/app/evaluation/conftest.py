"""Fixtures for the evaluation tests: a tiny deterministic fake embedder and tiny datasets."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence

import numpy as np
import pytest

from embedders import Role


class FakeEmbedder:
    """Embeds through a user function ``(text, role, instruction) -> vector``; counts encoded texts."""

    def __init__(
        self, fn: Callable[[str, str, str | None], Sequence[float]], dim: int, name: str = "fake", version: int = 0
    ) -> None:
        self.fn = fn
        self.name = name
        self._dim = dim
        self.version = version
        self.encoded: list[tuple[str, str, str | None]] = []

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def identity(self) -> str:
        return json.dumps({"fake": self.name, "version": self.version})

    def encode(
        self,
        texts: Sequence[str],
        *,
        role: Role | str = Role.DOCUMENT,
        instruction: str | None = None,
        batch_size: int = 32,
        show_progress: bool = False,
    ) -> np.ndarray:
        role_ = Role.parse(role).value
        rows = []
        for t in texts:
            self.encoded.append((t, role_, instruction))
            v = np.asarray(self.fn(t, role_, instruction), dtype=np.float32)
            rows.append(v / max(float(np.linalg.norm(v)), 1e-12))
        return np.stack(rows) if rows else np.zeros((0, self._dim), np.float32)


def hashed_vector(text: str, dim: int = 16) -> np.ndarray:
    """A fixed pseudo-random vector per text (stable across runs)."""
    seed = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
    return np.random.default_rng(seed).normal(size=dim)


@pytest.fixture
def fake_factory() -> type[FakeEmbedder]:
    return FakeEmbedder
