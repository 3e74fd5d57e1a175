"""Causal2Vec: a Contextual token from a small bidirectional encoder steers a decoder LLM."""

from embedders.methods.causal2vec.config import Causal2VecConfig
from embedders.methods.causal2vec.model import Causal2VecEmbedder

__all__ = ["Causal2VecConfig", "Causal2VecEmbedder"]
