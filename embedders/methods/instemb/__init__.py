"""InstEmb: instruction-conditioned embeddings from learnable look-ahead tokens."""

from embedders.methods.instemb.config import InstEmbConfig
from embedders.methods.instemb.model import InstEmbEmbedder

__all__ = ["InstEmbConfig", "InstEmbEmbedder"]
