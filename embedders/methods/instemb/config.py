"""Configuration of InstEmb."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from embedders.methods.common import InstructedConfig

# The look-ahead tokens follow the prompt, exactly where the frozen teacher reads the gold
# answer. Templates (``template``): see ``embedders.methods.common.INSTRUCTION_TEMPLATES``.
POOLINGS = ("daap", "input-last", "special-mean", "all-mean")
DISTILL_LOSSES = ("mse", "mse-centered", "kl")
CONTRASTIVE_ON = ("input-last", "served")


@dataclass
class InstEmbConfig(InstructedConfig):
    """InstEmb settings.

    Attributes:
        look_ahead: L, learnable embeddings appended after instruction + input.
        pooling: ``daap`` = 0.5 * (last input state + mean look-ahead state) (the
            paper's choice); ``input-last`` = last input token only; ``special-mean`` =
            mean of the look-ahead states only; ``all-mean`` = mean over every prompt and
            look-ahead position (the ablations).
        distill: ``mse`` on normalised look-ahead vs teacher answer states,
            ``mse-centered`` the same after subtracting each side's batch-mean state (so the
            states' shared direction cannot satisfy it), or ``kl`` between their LM-head
            distributions.
        distill_weight: weight of the distillation term.
        contrastive_weight: weight of the multi-view supervised contrastive term.
        contrastive_on: ``input-last`` contrasts the last input token's state (the paper);
            ``served`` contrasts the pooled embedding ``encode`` returns (the student's views
            under ``pooling``; the teacher's view pools its last input token with the
            distillation targets), so the loss acts on what clustering and search use.
        temperature: SupCon tau.
        answer_max_tokens: gold-answer tokens the teacher reads.
        default_instruction: used when ``encode`` gets no instruction.
    """

    TRAINING_ONLY: ClassVar[frozenset[str]] = frozenset({
        "distill", "distill_weight", "contrastive_weight", "contrastive_on", "temperature",
        "answer_max_tokens"})

    look_ahead: int = 4
    pooling: str = "daap"
    distill: str = "mse"
    distill_weight: float = 1.0
    contrastive_weight: float = 1.0
    contrastive_on: str = "input-last"
    temperature: float = 0.1
    answer_max_tokens: int = 16
    default_instruction: str = "What is this text about?"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.look_ahead < 1:
            raise ValueError(f"look_ahead must be >= 1, got {self.look_ahead}")
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {self.pooling!r}")
        if self.distill not in DISTILL_LOSSES:
            raise ValueError(f"distill must be one of {', '.join(DISTILL_LOSSES)}, got {self.distill!r}")
        if self.contrastive_on not in CONTRASTIVE_ON:
            raise ValueError(f"contrastive_on must be one of {', '.join(CONTRASTIVE_ON)}, got {self.contrastive_on!r}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be positive, got {self.temperature}")
        if self.distill_weight < 0 or self.contrastive_weight < 0:
            raise ValueError("loss weights must be >= 0")
        if self.answer_max_tokens < 1:
            raise ValueError(f"answer_max_tokens must be >= 1, got {self.answer_max_tokens}")
