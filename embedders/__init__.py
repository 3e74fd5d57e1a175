"""Facet embedders: the four trained methods, the baselines and their shared contract.

The names below load on first use (PEP 562), so ``import embedders.errors`` and the CLI's
commands that never embed (``facet collections``, ``jobs``, ``delete``, ``index --background``)
do not pay for importing torch (~1.8 s of a 2.4 s start).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from embedders.errors import (
    CheckpointError,
    DuplicateRegistrationError,
    EmbedderError,
    InvalidInputError,
    UnknownEmbedderError,
)

if TYPE_CHECKING:
    from embedders.base import BaseEmbedder, Embedder, HasTokenizer, PromptConfig, Role
    from embedders.registry import (
        list_embedders,
        load_checkpoint,
        load_embedder,
        register_embedder,
        register_method,
    )

_LAZY = {
    "BaseEmbedder": "embedders.base", "Embedder": "embedders.contract", "HasTokenizer": "embedders.contract",
    "PromptConfig": "embedders.contract", "Role": "embedders.contract",
    "list_embedders": "embedders.registry", "load_checkpoint": "embedders.registry",
    "load_embedder": "embedders.registry", "register_embedder": "embedders.registry",
    "register_method": "embedders.registry",  # docs/plugins.md names both beside each other
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'embedders' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "BaseEmbedder",
    "CheckpointError",
    "DuplicateRegistrationError",
    "Embedder",
    "EmbedderError",
    "HasTokenizer",
    "InvalidInputError",
    "PromptConfig",
    "Role",
    "UnknownEmbedderError",
    "list_embedders",
    "load_checkpoint",
    "load_embedder",
    "register_embedder",
    "register_method",
]
