"""Registers the trainable methods' checkpoint loaders and default (untrained) names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from embedders.methods.causal2vec import Causal2VecEmbedder
from embedders.methods.causal_eos import CausalEOSEmbedder
from embedders.methods.common import TrainableDecoderEmbedder
from embedders.methods.gircse import GircseEmbedder
from embedders.methods.inbedder import InBedderEmbedder
from embedders.methods.instemb import InstEmbEmbedder
from embedders.registry import register_method

METHODS: dict[str, type[TrainableDecoderEmbedder]] = {
    cls.method: cls for cls in (Causal2VecEmbedder, GircseEmbedder, CausalEOSEmbedder, InstEmbEmbedder,
                                InBedderEmbedder)
}


def _loader(cls: type[TrainableDecoderEmbedder]) -> Any:
    def load(path: Path, meta: dict[str, Any], device: str | None) -> TrainableDecoderEmbedder:
        return cls.load(path, meta, device)

    load.__module__ = cls.__module__
    return load


for _name, _cls in METHODS.items():
    register_method(_name, _loader(_cls))
