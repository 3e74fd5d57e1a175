"""Facet embedders: the four trained methods, the baselines and their shared contract."""

from __future__ import annotations

from embedders.base import BaseEmbedder, Embedder, HasTokenizer, PromptConfig, Role
from embedders.errors import (
    CheckpointError,
    DuplicateRegistrationError,
    EmbedderError,
    InvalidInputError,
    UnknownEmbedderError,
)
from embedders.registry import list_embedders, load_checkpoint, load_embedder, register_embedder

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
]
