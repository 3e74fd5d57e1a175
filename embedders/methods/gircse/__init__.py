"""GIRCSE: embeddings from generated soft tokens, refined step by step."""

from embedders.methods.gircse.config import GircseConfig
from embedders.methods.gircse.model import GircseEmbedder

__all__ = ["GircseConfig", "GircseEmbedder"]
