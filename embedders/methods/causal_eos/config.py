"""Configuration of the Causal-EOS baseline."""

from __future__ import annotations

from dataclasses import dataclass

from embedders.methods.common import MethodConfig


@dataclass
class CausalEOSConfig(MethodConfig):
    """Causal-EOS: [instruction; text; EOS], embedding = last-layer state at EOS.

    Attributes:
        temperature: InfoNCE temperature (same as Causal2Vec so the comparison is fair).
    """

    temperature: float = 0.05

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.temperature <= 0:
            raise ValueError(f"temperature must be positive, got {self.temperature}")
