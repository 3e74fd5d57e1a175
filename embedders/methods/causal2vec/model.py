"""Causal2Vec model.

The Contextual token is MLP(mean-pooled encoder states of the text), placed directly
in the LLM's embedding space. With the default PromptEOL template the LLM reads
``This sentence : "<ctx>{text}" means in one word:"``: the token sits inside the
template right before the text, so every text token can attend to the bidirectional
summary. Embedding = concat(last-layer state at the Contextual token, last-layer state
at the last token): the first carries the encoder's summary through the LLM, the
second the usual last-token view, which together lessen recency bias.

An untrained MLP emits a vector of arbitrary size; fed raw, it can swamp the prompt and
ruin the strong PromptEOL start. By default its output is rescaled to the mean norm of
the LLM's token embeddings (times a learnable gain), and the two pooled halves are
normalised before concatenation so neither dominates by scale.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from embedders.backbone import load_encoder
from embedders.base import Role, pad_sequences
from embedders.baselines import EncoderMeanEmbedder
from embedders.methods.causal2vec.config import CONTEXT_PLACEMENTS, CONTEXT_POOLINGS, Causal2VecConfig
from embedders.methods.corpus import CorpusEmbedder
from embedders.pooling import gather_positions, last_token_pool


class ContextualProjector(nn.Module):
    """2-layer MLP with GELU: encoder width -> LLM embedding width.

    Args:
        target_norm: when given, outputs are rescaled to this L2 norm times a learnable
            gain (initialised to 1); when None, the raw MLP output is returned.
    """

    def __init__(self, in_dim: int, hidden: int, out_dim: int, target_norm: float | None = None) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_dim, hidden), nn.GELU(), nn.Linear(hidden, out_dim))
        self.target_norm = target_norm
        if target_norm is not None:
            self.gain = nn.Parameter(torch.ones(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.net(x)
        if self.target_norm is None:
            return out
        return F.normalize(out, dim=-1) * (self.target_norm * self.gain)


class Causal2VecEmbedder(CorpusEmbedder):
    """Causal2Vec over a LoRA-tuned decoder and a frozen bidirectional encoder.

    ``context_placement`` and ``context_pooling`` are inference options too, for the
    ablation (``'checkpoints/causal2vec[context_pooling=last]'``).
    """

    method = "causal2vec"
    config_class = Causal2VecConfig
    config: Causal2VecConfig
    OPTIONS = ("template", "max_length", "context_placement", "context_pooling")

    def __init__(self, config: Causal2VecConfig | None = None, **kwargs: Any) -> None:
        config = config or Causal2VecConfig()
        device = kwargs.get("device")
        encoder = load_encoder(config.encoder, device=device, shared=True)
        self.encoder = EncoderMeanEmbedder("causal2vec-encoder", config.encoder,
                                           max_length=config.encoder_max_length, backbone=encoder)
        self.reserved_positions = 1  # the Contextual token's
        super().__init__(config, **kwargs)

    def _build_heads(self) -> None:
        target = None
        if self.config.context_scale:
            table = self.backbone.model.get_input_embeddings().weight.detach().float()
            target = float(table.norm(dim=-1).mean())
        self.heads["projector"] = ContextualProjector(
            self.encoder.dim, self.config.mlp_hidden, self.backbone.hidden_size, target)

    # -- inference options (validated, so a bad value never reaches the forward pass) --

    @property
    def context_placement(self) -> str:
        return self.config.context_placement

    @context_placement.setter
    def context_placement(self, value: str) -> None:
        if value not in CONTEXT_PLACEMENTS:
            raise ValueError(f"context_placement must be one of {', '.join(CONTEXT_PLACEMENTS)}, got {value!r}")
        if value == "none" and self.config.context_pooling != "last":
            raise ValueError("context_placement=none needs context_pooling=last (there is no Contextual state)")
        self.config.context_placement = value

    @property
    def context_pooling(self) -> str:
        return self.config.context_pooling

    @context_pooling.setter
    def context_pooling(self, value: str) -> None:
        if value not in CONTEXT_POOLINGS:
            raise ValueError(f"context_pooling must be one of {', '.join(CONTEXT_POOLINGS)}, got {value!r}")
        if value != "last" and self.config.context_placement == "none":
            # The other order of the two options was caught; this one broke at the first
            # encode (a 576-d state into 1152 columns).
            raise ValueError(f"context_pooling={value} needs the Contextual state, which "
                             "context_placement=none leaves out; use context_pooling=last")
        self.config.context_pooling = value

    @property
    def dim(self) -> int:
        # concat pools two states; the 'last' ablation one.
        return self.backbone.hidden_size * (1 if self.config.context_pooling == "last" else 2)

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
        placement = self.config.context_placement
        if placement == "none":
            ids, mask = pad_sequences(tokens.sequences, pad_id, self.padding_side, self.device)
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            hidden = self.backbone.base_model()(input_ids=ids, attention_mask=mask, position_ids=positions,
                                                use_cache=False).last_hidden_state
            return last_token_pool(hidden, mask)
        # A placeholder id marks where the Contextual token goes: before the text or the prompt.
        starts = [start if placement == "text" else 0 for start, _ in tokens.text_spans]
        seqs = [[*seq[:s], pad_id, *seq[s:]] for seq, s in zip(tokens.sequences, starts, strict=True)]
        ids, mask = pad_sequences(seqs, pad_id, self.padding_side, self.device)
        width = ids.shape[1]
        ctx_pos = torch.tensor(
            [(width - len(seq) if self.padding_side == "left" else 0) + s for seq, s in zip(seqs, starts, strict=True)],
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
        h_last = last_token_pool(hidden, mask)
        pooling = self.config.context_pooling
        if pooling == "last":
            return h_last
        h_ctx = gather_positions(hidden, ctx_pos)
        if pooling == "concat":
            h_ctx, h_last = F.normalize(h_ctx, dim=-1), F.normalize(h_last, dim=-1)
        return torch.cat([h_ctx, h_last], dim=-1)
