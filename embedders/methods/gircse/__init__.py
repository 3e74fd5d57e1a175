"""GIRCSE: embeddings from generated soft tokens, refined step by step."""

from embedders.methods.gircse.config import GircseConfig
from embedders.methods.gircse.model import GircseEmbedder
from embedders.registry import TrainableMethod, register_trainable

__all__ = ["GircseConfig", "GircseEmbedder"]

register_trainable(TrainableMethod(
    "gircse", GircseEmbedder, data="pairs", dev_suite="corpus",
    description="K generated soft tokens after the template, mean of their states; any K at inference",
))
