"""InBedder: instruction-following embeddings from the state that predicts a short answer."""

from embedders.methods.inbedder.config import INBEDDER_PROMPTS, InBedderConfig
from embedders.methods.inbedder.model import InBedderEmbedder
from embedders.registry import TrainableMethod, register_trainable

__all__ = ["INBEDDER_PROMPTS", "InBedderConfig", "InBedderEmbedder"]

register_trainable(TrainableMethod(
    "inbedder", InBedderEmbedder, data="triples", dev_suite="instruction",
    description="answers (input, instruction) in a few words; embedding = state predicting the first answer token",
))
