"""InBedder: instruction-following embeddings from the state that predicts a short answer."""

from embedders.methods.inbedder.config import INBEDDER_PROMPTS, InBedderConfig
from embedders.methods.inbedder.model import InBedderEmbedder

__all__ = ["INBEDDER_PROMPTS", "InBedderConfig", "InBedderEmbedder"]
