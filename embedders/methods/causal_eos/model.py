"""Causal-EOS model: a LoRA-tuned decoder pooled at an explicitly appended EOS token."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from embedders.base import PromptTokenizer, Role
from embedders.losses import info_nce
from embedders.methods.causal_eos.config import CausalEOSConfig
from embedders.methods.common import TrainableDecoderEmbedder
from embedders.pooling import last_token_pool


class ContrastiveMixin:
    """InfoNCE training over (query, positive, optional hard negative) batches."""

    config: Any

    if TYPE_CHECKING:  # provided by TrainableDecoderEmbedder, which follows in the MRO

        def embed_with_grad(self, texts: list[str], role: Role, instruction: str | None) -> torch.Tensor: ...

    def training_loss(self, batch: Any) -> tuple[torch.Tensor, dict[str, float]]:
        q = self.embed_with_grad(batch.queries, Role.QUERY, batch.instruction)
        doc_instruction = batch.instruction if batch.symmetric else None
        doc_role = Role.QUERY if batch.symmetric else Role.DOCUMENT
        p = self.embed_with_grad(batch.positives, doc_role, doc_instruction)
        n = self.embed_with_grad(batch.negatives, doc_role, doc_instruction) if batch.negatives else None
        loss = info_nce(q, p, n, temperature=self.config.temperature)
        return loss, {"loss": float(loss.detach())}


class CausalEOSEmbedder(ContrastiveMixin, TrainableDecoderEmbedder):
    """LoRA decoder, EOS appended explicitly, last-token pooling."""

    method = "causal-eos"
    config_class = CausalEOSConfig
    config: CausalEOSConfig

    def __init__(self, config: CausalEOSConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config or CausalEOSConfig(), **kwargs)
        tok = self.backbone.tokenizer
        self._tokenize = PromptTokenizer(tok, self.prompts, self.max_length, end_ids=[tok.eos_token_id])

    def _embed_batch(self, texts: list[str], role: Role, instruction: str | None) -> torch.Tensor:
        batch = self.tokenize(texts, role, instruction)
        return last_token_pool(self.hidden_states(batch), batch.attention_mask)
