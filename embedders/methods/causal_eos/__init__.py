"""Causal-EOS: the fair baseline of the Causal2Vec and GIRCSE papers (LoRA, last-token pooling)."""

from embedders.methods.causal_eos.config import CausalEOSConfig
from embedders.methods.causal_eos.model import CausalEOSEmbedder
from embedders.registry import TrainableMethod, register_trainable

__all__ = ["CausalEOSConfig", "CausalEOSEmbedder"]

register_trainable(TrainableMethod(
    "causal-eos", CausalEOSEmbedder, data="pairs", dev_suite="corpus",
    description="the papers' fair baseline: LoRA decoder pooled at the last template token (PromptEOL) or an EOS",
))
