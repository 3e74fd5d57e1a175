"""Causal-EOS: the fair baseline of the Causal2Vec and GIRCSE papers (LoRA, last-token pooling)."""

from embedders.methods.causal_eos.config import CausalEOSConfig
from embedders.methods.causal_eos.model import CausalEOSEmbedder

__all__ = ["CausalEOSConfig", "CausalEOSEmbedder"]
