"""Configuration of Causal2Vec."""

from __future__ import annotations

from dataclasses import dataclass

from embedders.backbone import DEFAULT_ENCODER
from embedders.methods.common import MethodConfig


@dataclass
class Causal2VecConfig(MethodConfig):
    """Causal2Vec settings.

    Attributes:
        encoder: the bidirectional encoder that makes the Contextual token (frozen).
        encoder_max_length: its token budget.
        mlp_hidden: width of the 2-layer GELU MLP from encoder width to LLM width.
        temperature: InfoNCE temperature (0.05 in the paper).
    """

    encoder: str = DEFAULT_ENCODER
    encoder_max_length: int = 256
    mlp_hidden: int = 1024
    temperature: float = 0.05

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.temperature <= 0:
            raise ValueError(f"temperature must be positive, got {self.temperature}")
        if self.mlp_hidden < 1:
            raise ValueError(f"mlp_hidden must be positive, got {self.mlp_hidden}")
