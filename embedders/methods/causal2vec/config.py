"""Configuration of Causal2Vec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from embedders.backbone import DEFAULT_ENCODER
from embedders.methods.common import MethodConfig
from embedders.methods.corpus import CorpusConfig

CONTEXT_POOLINGS = ("concat", "concat-raw", "last")
CONTEXT_PLACEMENTS = ("text", "start", "none")


@dataclass
class Causal2VecConfig(CorpusConfig):
    """Causal2Vec settings.

    Attributes:
        encoder: the bidirectional encoder that makes the Contextual token (frozen).
        encoder_max_length: its token budget.
        mlp_hidden: width of the 2-layer GELU MLP from encoder width to LLM width.
        context_scale: rescale the MLP output to the mean norm of the LLM's token
            embeddings (times a learnable gain starting at 1), so an untrained projector
            feeds the LLM a vector of the size it expects instead of one that swamps the
            prompt. False feeds the raw MLP output (the paper's form).
        context_placement: where the Contextual token goes: ``text`` (inside the template,
            right before the text; default), ``start`` (before the whole prompt, as the
            paper puts it after the instruction), or ``none`` (no token; the ablation).
        context_pooling: ``concat`` (the paper: [state at the Contextual token; last
            state], each half L2-normalised so neither dominates by its scale),
            ``concat-raw`` (the same without normalising the halves; what checkpoints made
            before templates used) or ``last`` (the last state only).
    """

    encoder: str = DEFAULT_ENCODER
    encoder_max_length: int = 256
    mlp_hidden: int = 1024
    context_scale: bool = True
    context_placement: str = "text"
    context_pooling: str = "concat"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mlp_hidden < 1:
            raise ValueError(f"mlp_hidden must be positive, got {self.mlp_hidden}")
        if self.context_placement not in CONTEXT_PLACEMENTS:
            raise ValueError(f"context_placement must be one of {', '.join(CONTEXT_PLACEMENTS)}, "
                             f"got {self.context_placement!r}")
        if self.context_pooling not in CONTEXT_POOLINGS:
            raise ValueError(f"context_pooling must be one of {', '.join(CONTEXT_POOLINGS)}, "
                             f"got {self.context_pooling!r}")
        if self.context_placement == "none" and self.context_pooling != "last":
            raise ValueError("context_placement=none needs context_pooling=last (there is no "
                             "Contextual state)")
        if self.context_placement == "none" and self.context_pooling != "last":
            raise ValueError(f"context_pooling={self.context_pooling!r} needs a Contextual token; use "
                             "context_pooling='last' "
                             "with context_placement='none'")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MethodConfig:
        # Checkpoints written before templates: raw MLP output, raw concatenation.
        if "template" not in data:
            data = {"context_scale": False, "context_pooling": "concat-raw", **data}
        return super().from_dict(data)
