"""Causal-EOS model: a LoRA-tuned decoder pooled at its last token (the template's end, or an EOS)."""

from __future__ import annotations

from typing import Any

import torch

from embedders.base import Role
from embedders.methods.causal_eos.config import CausalEOSConfig
from embedders.methods.corpus import CorpusEmbedder
from embedders.pooling import last_token_pool


class CausalEOSEmbedder(CorpusEmbedder):
    """LoRA decoder, last-token pooling of the template (see ``embedders.methods.corpus``)."""

    method = "causal-eos"
    config_class = CausalEOSConfig
    config: CausalEOSConfig

    def __init__(self, config: CausalEOSConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config or CausalEOSConfig(), **kwargs)

    def _embed_batch(self, texts: list[str], role: Role, instruction: str | None) -> torch.Tensor:
        batch = self.tokenize(texts, role, instruction)
        return last_token_pool(self.hidden_states(batch), batch.attention_mask)
