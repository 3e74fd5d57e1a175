"""Causal2Vec: a Contextual token from a small bidirectional encoder steers a decoder LLM."""

from embedders.methods.causal2vec.config import Causal2VecConfig
from embedders.methods.causal2vec.model import Causal2VecEmbedder
from embedders.registry import TrainableMethod, register_trainable

__all__ = ["Causal2VecConfig", "Causal2VecEmbedder"]

register_trainable(TrainableMethod(
    "causal2vec", Causal2VecEmbedder, data="pairs", dev_suite="corpus",
    description="Contextual token from a frozen bidirectional encoder inside the template; "
                "concat(Contextual, last) states",
))
