"""Configuration of GIRCSE."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from embedders.losses import REFINEMENT_TARGETS, STEP_WEIGHTINGS
from embedders.methods.corpus import CorpusConfig

MAX_SOFT_TOKENS = 64


# The smallest soft-token temperature served (see ``GircseConfig``).
MIN_SOFT_TEMPERATURE = 0.001


@dataclass
class GircseConfig(CorpusConfig):
    """GIRCSE settings. The soft tokens are generated after the template (see
    ``embedders.methods.corpus``): with PromptEOL, after its closing quote.

    Attributes:
        train_soft_tokens: K used in training (5 in the paper).
        soft_tokens: K used by ``encode`` (any K >= 1; test-time scaling).
        temperature: stepwise InfoNCE temperature (0.02 in the paper).
        refinement_weight: weight of the iterative refinement regulariser.
        step_weighting: how the K stepwise losses are averaged: ``uniform`` (the paper) or
            ``linear`` (L_k weighted by k; see ``embedders.losses.step_weights``).
        refinement_target: ``both`` (the paper) or ``later``: the regulariser only pushes a
            worse later step down, not an earlier one up (``embedders.losses.
            iterative_refinement_penalty``).
        use_cache: generate with the KV cache (one prefill + K cached steps).
        soft_temperature: T in s = softmax(lm_head(h) / T), the distribution each soft token
            mixes the input embeddings by; 1 is the paper, T < 1 sharpens towards the most
            likely token, T > 1 flattens. Settable at load time like ``soft_tokens``.
    """

    TRAINING_ONLY: ClassVar[frozenset[str]] = CorpusConfig.TRAINING_ONLY | {
        "train_soft_tokens", "refinement_weight", "step_weighting", "refinement_target"}

    train_soft_tokens: int = 5
    soft_tokens: int = 5
    temperature: float = 0.02  # GIRCSE's own default (CorpusConfig: 0.05)
    refinement_weight: float = 1.0
    step_weighting: str = "uniform"
    refinement_target: str = "both"
    use_cache: bool = True
    soft_temperature: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.train_soft_tokens < 1 or self.soft_tokens < 1:
            raise ValueError("soft token counts must be >= 1")
        if max(self.train_soft_tokens, self.soft_tokens) > MAX_SOFT_TOKENS:
            # Each soft token is one more sequential forward pass (2,000 ran for minutes on two
            # texts); the K curve is flat well before this.
            raise ValueError(f"soft token counts must be at most {MAX_SOFT_TOKENS}, got "
                             f"{max(self.train_soft_tokens, self.soft_tokens)}")
        if not self.soft_temperature > 0:
            raise ValueError(f"soft_temperature must be > 0, got {self.soft_temperature}")
        if self.soft_temperature < MIN_SOFT_TEMPERATURE:
            # logits / 1e-45 overflowed to inf and every vector was NaN, with exit 0; at 0.001
            # the mixture is already the most likely token's embedding.
            raise ValueError(f"soft_temperature must be at least {MIN_SOFT_TEMPERATURE} (already "
                             f"one most likely token), got {self.soft_temperature}")
        if self.refinement_weight < 0:
            raise ValueError(f"refinement_weight must be >= 0, got {self.refinement_weight}")
        if self.step_weighting not in STEP_WEIGHTINGS:
            raise ValueError(f"step_weighting must be one of {', '.join(STEP_WEIGHTINGS)}, got {self.step_weighting!r}")
        if self.refinement_target not in REFINEMENT_TARGETS:
            raise ValueError(f"refinement_target must be one of {', '.join(REFINEMENT_TARGETS)}, "
                             f"got {self.refinement_target!r}")
