"""Baseline embedders reported beside the four methods.

* ``minilm``: the packaged all-MiniLM-L6-v2 sentence-transformer (mean pooling over
  its tokens). It was never trained on instructions: under one, its embedding is a blend of the
  text's embedding with and without the instruction prepended (``instruction_weight``, the
  prepended one's share; chosen on dev data, docs/indexing.md).
* ``backbone-mean``: the untrained decoder backbone, mean of the last-layer states.
* ``backbone-prompteol``: the untrained decoder backbone, last-token state of the
  PromptEOL prompt ``This sentence : "{text}" means in one word:"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch

from embedders.backbone import DEFAULT_DECODER, DEFAULT_ENCODER, Backbone, load_decoder, load_encoder
from embedders.base import BaseEmbedder, PromptConfig, PromptTokenizer, Role, TokenBatch, pad_sequences
from embedders.contract import BlendsInstruction, check_instruction_weight
from embedders.pooling import blend_instruction, last_token_pool, mean_pool, pooled_pairs

# minilm's share of the instruction-prepended embedding under an instruction (EncoderMeanConfig),
# chosen on dev data only (docs/indexing.md, "minilm and instructions").
INSTRUCTION_WEIGHT = 0.25


@dataclass
class EncoderMeanConfig:
    """Inference settings of ``EncoderMeanEmbedder``.

    Attributes:
        instruction_weight: under an instruction, the embedding is
            ``normalize((1 - w) * e(text) + w * e(instruction + text))`` (each term normalised):
            1 reads only the prepended form (what every encoder-mean embedder did before the
            seventeenth session of 2026-11-27), 0 ignores the instruction.
    """

    instruction_weight: float = INSTRUCTION_WEIGHT

    def __post_init__(self) -> None:
        check_instruction_weight(self.instruction_weight)


class EncoderMeanEmbedder(BlendsInstruction, BaseEmbedder):
    """A bidirectional encoder with mean pooling (sentence-transformers style). Its vectors under
    an instruction blend in the bare ones (``EncoderMeanConfig``), so given those it computes them
    reading each text under the instruction only (``encode_from_plain``)."""

    method = "encoder-mean"
    OPTIONS = ("instruction_weight",)  # "minilm[instruction_weight=1]"
    # Its options' values are checked without loading it too (``check_embedder``).
    config_class: ClassVar[type[EncoderMeanConfig]] = EncoderMeanConfig

    def __init__(self, name: str = "minilm", backbone_name: str = DEFAULT_ENCODER, *,
                 prompts: PromptConfig | None = None, max_length: int = 256,
                 device: str | None = None, backbone: Backbone | None = None,
                 instruction_weight: float = INSTRUCTION_WEIGHT) -> None:
        self.name = name
        self.config = EncoderMeanConfig(instruction_weight)
        self.backbone_name = backbone_name
        self.prompts = prompts or PromptConfig(instruction_format="{instruction} ")
        self.max_length = max_length
        self.backbone = backbone or load_encoder(backbone_name, device=device, shared=True)
        tok = self.backbone.tokenizer
        self._tokenize = PromptTokenizer(
            tok, self.prompts, max_length, start_ids=[tok.cls_token_id], end_ids=[tok.sep_token_id]
        )

    @property
    def dim(self) -> int:
        return self.backbone.hidden_size

    @property
    def device(self) -> torch.device:
        return self.backbone.spec.device

    @property
    def tokenizer(self) -> Any:
        return self.backbone.tokenizer

    def _embed_batch(self, texts: list[str], role: Role, instruction: str | None) -> torch.Tensor:
        if not instruction:
            return self._mean(texts, role, None)
        # A blend reads each text with and without the instruction, both in shared passes.
        def both() -> tuple[torch.Tensor, torch.Tensor]:
            plain, under = self._tokenize(texts, role, None), self._tokenize(texts, role, instruction)
            # Each text counts once in the truncation warning ("12 of 16 texts" for 6 of 8): the
            # instructed reading, the longer prompt, cuts every text the bare one cuts.
            self._warn_truncated(max(plain.truncated, under.truncated), len(texts), self.max_length)
            return pooled_pairs(plain.sequences, under.sequences, self._pool)
        return blend_instruction(self.config.instruction_weight, lambda: self._mean(texts, role, None),
                                 lambda: self._mean(texts, role, instruction), both)

    def _mean(self, texts: list[str], role: Role, instruction: str | None) -> torch.Tensor:
        return self._pool(self._sequences(texts, role, instruction))

    def _sequences(self, texts: list[str], role: Role, instruction: str | None) -> list[list[int]]:
        tokens = self._tokenize(texts, role, instruction)
        self._warn_truncated(tokens.truncated, len(texts), self.max_length)
        return tokens.sequences

    def _pool(self, sequences: Sequence[Sequence[int]]) -> torch.Tensor:
        """Mean-pooled last-layer states of token id lists, in one forward pass."""
        ids, mask = pad_sequences(sequences, self.backbone.tokenizer.pad_token_id, "right", self.device)
        hidden = self.backbone.model(input_ids=ids, attention_mask=mask).last_hidden_state
        return mean_pool(hidden, mask)

    def _config_dict(self) -> dict[str, Any]:
        return {**super()._config_dict(), "backbone": self.backbone_name,
                "instruction_weight": self.config.instruction_weight}


class DecoderEmbedder(BaseEmbedder):
    """Shared machinery for embedders over a causal LM: tokenising, padding, forward pass.

    Args:
        name: registry / display name.
        backbone_name: decoder backbone (default SmolLM2-135M-Instruct).
        prompts: prompt templates per role.
        max_length: token budget per sequence, prompt included.
        padding_side: ``left`` (default, needed for generation) or ``right``.
        device: device override.
        backbone: an already loaded backbone to use.
    """

    method = "decoder"
    pooling = "mean"

    def __init__(self, name: str, backbone_name: str = DEFAULT_DECODER, *,
                 prompts: PromptConfig | None = None, max_length: int = 512,
                 padding_side: str = "left", device: str | None = None,
                 backbone: Backbone | None = None) -> None:
        if padding_side not in ("left", "right"):
            raise ValueError(f"padding_side must be 'left' or 'right', got {padding_side!r}")
        self.name = name
        self.backbone_name = backbone_name
        self.prompts = prompts or PromptConfig()
        self.max_length = max_length
        self.padding_side = padding_side
        self.backbone = backbone or load_decoder(backbone_name, device=device, shared=True)
        tok = self.backbone.tokenizer
        self._tokenize = PromptTokenizer(tok, self.prompts, max_length, empty_ids=[tok.eos_token_id])

    @property
    def dim(self) -> int:
        return self.backbone.hidden_size

    @property
    def device(self) -> torch.device:
        return self.backbone.spec.device

    @property
    def tokenizer(self) -> Any:
        return self.backbone.tokenizer

    def tokenize(self, texts: list[str], role: Role, instruction: str | None) -> TokenBatch:
        tokens = self._tokenize(texts, role, instruction)
        self._warn_truncated(tokens.truncated, len(texts), self.max_length)
        ids, mask = pad_sequences(tokens.sequences, self.backbone.tokenizer.pad_token_id,
                                  self.padding_side, self.device)
        return TokenBatch(ids, mask, tokens.truncated)

    def hidden_states(self, batch: TokenBatch) -> torch.Tensor:
        """Last-layer states, (batch, seq, hidden), without computing LM logits."""
        body = self.backbone.base_model()
        out = body(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                   position_ids=batch.position_ids(), use_cache=False)
        return out.last_hidden_state

    def _embed_batch(self, texts: list[str], role: Role, instruction: str | None) -> torch.Tensor:
        batch = self.tokenize(texts, role, instruction)
        hidden = self.hidden_states(batch)
        if self.pooling == "last":
            return last_token_pool(hidden, batch.attention_mask)
        return mean_pool(hidden, batch.attention_mask)

    def _config_dict(self) -> dict[str, Any]:
        return {**super()._config_dict(), "backbone": self.backbone_name,
                "padding_side": self.padding_side}


class BackboneMeanEmbedder(DecoderEmbedder):
    """Untrained decoder, mean pooling over the (instruction +) text tokens."""

    method = "backbone-mean"
    pooling = "mean"


PROMPTEOL = PromptConfig(
    query='{instruction}This sentence : "{text}" means in one word:"',
    document='{instruction}This sentence : "{text}" means in one word:"',
)


class BackbonePromptEOLEmbedder(DecoderEmbedder):
    """Untrained decoder, last-token state of the PromptEOL prompt."""

    method = "backbone-prompteol"
    pooling = "last"


def _prompts_from(config: dict[str, Any]) -> PromptConfig | None:
    return PromptConfig(**config["prompts"]) if "prompts" in config else None


def load_baseline(path: Path, config: dict[str, Any], device: str | None = None) -> BaseEmbedder:
    """Rebuild a baseline from its saved facet_config.json (they have no weights)."""
    method = config["method"]
    common = {"prompts": _prompts_from(config), "max_length": config.get("max_length", 512),
              "device": device}
    if method == EncoderMeanEmbedder.method:  # saved before the option existed: the old behaviour
        return EncoderMeanEmbedder(config["name"], config["backbone"],
                                   instruction_weight=config.get("instruction_weight", 1.0), **common)
    cls = {BackboneMeanEmbedder.method: BackboneMeanEmbedder,
           BackbonePromptEOLEmbedder.method: BackbonePromptEOLEmbedder}[method]
    return cls(config["name"], config["backbone"], padding_side=config.get("padding_side", "left"), **common)

