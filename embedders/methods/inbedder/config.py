"""Configuration of InBedder."""

from __future__ import annotations

from dataclasses import dataclass

from embedders.contract import check_instruction_weight
from embedders.methods.common import INSTRUCTION_TEMPLATES, InstructedConfig

# The paper's Alpaca-style prompt (``template="alpaca"``): the input first and the
# instruction after it. The default is PromptEOL with the instruction above it, which
# starts far stronger on this backbone (see ``embedders.methods.common``).
INBEDDER_PROMPTS = INSTRUCTION_TEMPLATES["alpaca"]

POOLINGS = ("1st-gen", "avg-gen")


@dataclass
class InBedderConfig(InstructedConfig):
    """InBedder: a decoder tuned to answer (input, instruction) briefly; embedding = answer state.

    Attributes:
        pooling: ``1st-gen`` (last-layer state that predicts the first answer token, one
            forward pass) or ``avg-gen`` (that state averaged with the states of
            ``gen_tokens`` greedily generated answer tokens).
        gen_tokens: tokens generated for ``avg-gen`` (>= 1); ignored by ``1st-gen``.
        answer_max_tokens: answer budget in training (longer answers are cut) and the
            length of generated answers for cluster explanations.
        default_instruction: used when ``encode`` gets no instruction; the prompt always
            has one, since the model was only ever trained with one.
        instruction_weight: under another instruction I, the embedding is
            ``(1 - w) * n(e(default)) + w * n(e(I))`` (``n``: unit length), the answer state
            under the default instruction blended in; 1 (the paper, and every checkpoint saved
            before the option) uses e(I) alone. Inference only: the shipped checkpoint sets the
            value chosen on CLINC *val* (docs/results.md).
    """

    pooling: str = "1st-gen"
    gen_tokens: int = 3
    answer_max_tokens: int = 16
    default_instruction: str = "What is this text about?"
    instruction_weight: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        check_instruction_weight(self.instruction_weight)
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {self.pooling!r}")
        if self.gen_tokens < 1:
            raise ValueError(f"gen_tokens must be >= 1, got {self.gen_tokens}")
        # A training sequence is prompt + answer + EOS within max_length; keep at least half
        # of the budget for the prompt so the input is not cut to nothing.
        if self.answer_max_tokens < 1:
            raise ValueError(f"answer_max_tokens must be at least 1, got {self.answer_max_tokens}")
        if self.answer_max_tokens > self.max_length // 2:
            # Said as max_length's bound: a served model's max_length is an option
            # (inbedder[max_length=24]), its answer_max_tokens is not ("answer_max_tokens must
            # be between 1 and max_length // 2 = 12, got 16" named a field no one could set).
            raise ValueError(
                f"max_length must be at least {2 * self.answer_max_tokens}, twice answer_max_tokens "
                f"({self.answer_max_tokens}: an answer takes at most half of it), got "
                f"{self.max_length}")
        if not self.default_instruction.strip():
            raise ValueError("default_instruction must not be empty: the InBedder prompt always has an instruction")
        for role in ("query", "document"):
            if "{instruction}" not in getattr(self.prompts, role):
                raise ValueError(
                    f"InBedder prompts.{role} must contain '{{instruction}}': the model answers an instruction"
                )
