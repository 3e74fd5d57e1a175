"""Causal2Vec model.

LLM input: [instruction tokens; Contextual token; text tokens; EOS], where the
Contextual token is MLP(mean-pooled encoder states of the text) placed directly in
embedding space. Embedding = concat(last-layer state at the Contextual token,
last-layer state at EOS): the first carries the bidirectional summary through the
LLM, the second the usual last-token view, which together lessen recency bias.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from embedders.backbone import load_encoder
from embedders.base import PromptTokenizer, Role, pad_sequences
from embedders.baselines import EncoderMeanEmbedder
from embedders.methods.causal2vec.config import Causal2VecConfig
from embedders.methods.causal_eos.model import ContrastiveMixin
from embedders.methods.common import TrainableDecoderEmbedder
from embedders.pooling import gather_positions, last_token_pool


class ContextualProjector(nn.Module):
    """2-layer MLP with GELU: encoder width -> LLM embedding width."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_dim, hidden), nn.GELU(), nn.Linear(hidden, out_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class Causal2VecEmbedder(ContrastiveMixin, TrainableDecoderEmbedder):
    """Causal2Vec over a LoRA-tuned decoder and a frozen bidirectional encoder."""

    method = "causal2vec"
    config_class = Causal2VecConfig
    config: Causal2VecConfig

    def __init__(self, config: Causal2VecConfig | None = None, **kwargs: Any) -> None:
        config = config or Causal2VecConfig()
        device = kwargs.get("device")
        encoder = load_encoder(config.encoder, device=device, shared=True)
        self.encoder = EncoderMeanEmbedder("causal2vec-encoder", config.encoder,
                                           max_length=config.encoder_max_length, backbone=encoder)
        super().__init__(config, **kwargs)
        tok = self.backbone.tokenizer
        # One position is reserved for the Contextual token.
        self._tokenize = PromptTokenizer(tok, self.prompts, self.max_length - 1, end_ids=[tok.eos_token_id])

    def _build_heads(self) -> None:
        self.heads["projector"] = ContextualProjector(
            self.encoder.dim, self.config.mlp_hidden, self.backbone.hidden_size)

    @property
    def dim(self) -> int:
        return 2 * self.backbone.hidden_size

    def contextual_vectors(self, texts: list[str]) -> torch.Tensor:
        """Mean-pooled encoder states of the texts (no instruction), (batch, encoder_dim).

        The encoder is frozen, so this never needs gradients.
        """
        with torch.no_grad():
            pooled = self.encoder._embed_batch(texts, Role.DOCUMENT, None)
        return pooled.to(device=self.device, dtype=self.backbone.spec.dtype)

    def _embed_batch(self, texts: list[str], role: Role, instruction: str | None) -> torch.Tensor:
        tokens = self._tokenize(texts, role, instruction)
        self._warn_truncated(tokens.truncated, len(texts), self.max_length)
        pad_id = self.backbone.tokenizer.pad_token_id
        # A placeholder id marks where the Contextual token goes: right before the text.
        seqs = [[*seq[:start], pad_id, *seq[start:]] for seq, (start, _) in zip(tokens.sequences, tokens.text_spans,
                                                                                   strict=True)]
        ids, mask = pad_sequences(seqs, pad_id, self.padding_side, self.device)
        width = ids.shape[1]
        ctx_pos = torch.tensor(
            [(width - len(seq) if self.padding_side == "left" else 0) + start
             for seq, (start, _) in zip(seqs, tokens.text_spans, strict=True)],
            device=self.device,
        )
        embed = self.backbone.model.get_input_embeddings()
        inputs = embed(ids)  # (batch, seq, hidden)
        ctx = self.heads["projector"](self.contextual_vectors(texts))  # (batch, hidden)
        rows = torch.arange(len(seqs), device=self.device)
        place = torch.zeros_like(mask, dtype=torch.bool)
        place[rows, ctx_pos] = True
        inputs = torch.where(place.unsqueeze(-1), ctx.unsqueeze(1).to(inputs.dtype), inputs)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        body = self.backbone.base_model()
        hidden = body(inputs_embeds=inputs, attention_mask=mask, position_ids=positions,
                      use_cache=False).last_hidden_state
        h_ctx = gather_positions(hidden, ctx_pos)
        h_eos = last_token_pool(hidden, mask)
        return torch.cat([h_ctx, h_eos], dim=-1)
