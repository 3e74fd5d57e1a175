"""Registration of the packaged embedders (imported lazily by the registry)."""

from __future__ import annotations

from typing import Any

from embedders.baselines import (
    INSTRUCTION_WEIGHT,
    PROMPTEOL,
    BackboneMeanEmbedder,
    BackbonePromptEOLEmbedder,
    EncoderMeanEmbedder,
    load_baseline,
)
from embedders.registry import register_embedder, register_method


def _minilm(**kwargs: Any) -> EncoderMeanEmbedder:
    return EncoderMeanEmbedder("minilm", **kwargs)


def _backbone_mean(**kwargs: Any) -> BackboneMeanEmbedder:
    return BackboneMeanEmbedder("backbone-mean", **kwargs)


def _backbone_prompteol(**kwargs: Any) -> BackbonePromptEOLEmbedder:
    kwargs.setdefault("prompts", PROMPTEOL)
    return BackbonePromptEOLEmbedder("backbone-prompteol", **kwargs)


register_embedder("minilm", _minilm, "all-MiniLM-L6-v2 (packaged), mean pooling; under an instruction, its plain "
                  f"embedding blended with {INSTRUCTION_WEIGHT:g} of the instruction-prepended one "
                  "(minilm[instruction_weight=W]); 384-d")
register_embedder("backbone-mean", _backbone_mean, "untrained SmolLM2-135M-Instruct, mean of last-layer states; 576-d")
register_embedder(
    "backbone-prompteol", _backbone_prompteol,
    "untrained SmolLM2-135M-Instruct, last token of the PromptEOL prompt; 576-d",
)
for _method in (EncoderMeanEmbedder.method, BackboneMeanEmbedder.method, BackbonePromptEOLEmbedder.method):
    register_method(_method, load_baseline)
import embedders.methods.registration  # noqa: E402,F401  (trainable methods' loaders)
