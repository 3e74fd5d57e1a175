"""InstEmb: instruction-conditioned embeddings from learnable look-ahead tokens."""

from embedders.methods.instemb.config import InstEmbConfig
from embedders.methods.instemb.model import InstEmbEmbedder
from embedders.registry import TrainableMethod, register_trainable

__all__ = ["InstEmbConfig", "InstEmbEmbedder"]

register_trainable(TrainableMethod(
    "instemb", InstEmbEmbedder, data="triples", dev_suite="instruction",
    description="look-ahead tokens distilled from a frozen teacher reading the answer; DAAP pooling",
))
