"""GIRCSE model.

After the prompt, the LLM generates K *soft* tokens: from the last state h,
s = softmax(lm_head(h)) is a distribution over the vocabulary and d = s @ E (E the
input embedding matrix) is fed back as the next input embedding. The embedding is
the mean of the last-layer states at the K generated positions. With the KV cache
this is one prefill plus K single-position steps.
"""

from __future__ import annotations

from typing import Any

import torch

from embedders.backbone import cache_argument, returned_cache
from embedders.base import Role
from embedders.losses import gircse_loss
from embedders.methods.corpus import CorpusEmbedder
from embedders.methods.gircse.config import MAX_SOFT_TOKENS, GircseConfig
from embedders.pooling import last_token_pool


class GircseEmbedder(CorpusEmbedder):
    """GIRCSE over a LoRA-tuned decoder; ``soft_tokens`` sets K at inference."""

    method = "gircse"
    config_class = GircseConfig
    # Settable at load time: "path[soft_tokens=10]".
    OPTIONS = ("soft_tokens", "soft_temperature", "use_cache", "template", "max_length")
    config: GircseConfig

    def __init__(self, config: GircseConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config or GircseConfig(), **kwargs)

    @property
    def soft_tokens(self) -> int:
        return self.config.soft_tokens

    @soft_tokens.setter
    def soft_tokens(self, k: int) -> None:
        if not 1 <= k <= MAX_SOFT_TOKENS:
            raise ValueError(f"soft_tokens must be from 1 to {MAX_SOFT_TOKENS}, got {k}")
        self.config.soft_tokens = k

    def enable_gradient_checkpointing(self) -> None:
        raise ValueError("GIRCSE generates its soft tokens with the KV cache while training, which gradient "
                         "checkpointing disables; lower --batch-size or --max-length to save memory instead")

    def _soft_token(self, state: torch.Tensor) -> torch.Tensor:
        """(batch, hidden) last state -> (batch, hidden) expected input embedding."""
        lm_head = self.backbone.model.get_output_embeddings()
        logits = lm_head(state).float()  # (batch, vocab), fp32 for stability
        probs = torch.softmax(logits / self.config.soft_temperature, dim=-1)  # x / 1.0 is x exactly
        table = self.backbone.model.get_input_embeddings().weight  # (vocab, hidden)
        return probs.to(table.dtype) @ table

    def generate_states(self, texts: list[str], role: Role, instruction: str | None, k: int,
                        *, use_cache: bool = True, with_prompt_state: bool = False) -> torch.Tensor:
        """States of K generated soft tokens, (batch, K, hidden).

        Args:
            use_cache: True for one prefill + K cached steps; False recomputes the whole
                sequence at each step (the reference the cache is tested against).
            with_prompt_state: also return the prompt's last-token state, the one the first
                soft token is read from, first: (batch, 1 + K, hidden).
        """
        batch = self.tokenize(texts, role, instruction)
        body = self.backbone.base_model()
        embed = self.backbone.model.get_input_embeddings()
        inputs = embed(batch.input_ids)  # (batch, seq, hidden)
        mask = batch.attention_mask
        positions = batch.position_ids()
        ones = mask.new_ones(mask.shape[0], 1)
        out = body(inputs_embeds=inputs, attention_mask=mask, position_ids=positions, use_cache=use_cache)
        state = last_token_pool(out.last_hidden_state, mask)  # (batch, hidden)
        cache = returned_cache(out) if use_cache else None
        next_pos = positions.max(dim=1).values  # (batch,) last real position per row
        states = [state] if with_prompt_state else []
        for _ in range(k):
            soft = self._soft_token(state).unsqueeze(1)  # (batch, 1, hidden)
            mask = torch.cat([mask, ones], dim=1)
            next_pos = next_pos + 1
            if use_cache:
                out = body(inputs_embeds=soft, attention_mask=mask, position_ids=next_pos.unsqueeze(1),
                           use_cache=True, **cache_argument(body, cache))
                cache = returned_cache(out)
            else:
                inputs = torch.cat([inputs, soft], dim=1)
                positions = torch.cat([positions, next_pos.unsqueeze(1)], dim=1)
                out = body(inputs_embeds=inputs, attention_mask=mask, position_ids=positions, use_cache=False)
            state = out.last_hidden_state[:, -1]
            states.append(state)
        return torch.stack(states, dim=1)

    def _embed_batch(self, texts: list[str], role: Role, instruction: str | None) -> torch.Tensor:
        states = self.generate_states(texts, role, instruction, self.config.soft_tokens,
                                      use_cache=self.config.use_cache)
        return states.mean(dim=1)

    def training_reps(self, texts: list[str], role: Role, instruction: str | None) -> torch.Tensor:
        """The states of the K training soft tokens, (batch, K, hidden): the stepwise loss reads
        the mean of the first k of them for every k."""
        return self.generate_states(texts, role, instruction, self.config.train_soft_tokens)

    def loss_from_reps(self, batch: Any, q: torch.Tensor | None, p: torch.Tensor | None,
                       n: torch.Tensor | None) -> tuple[torch.Tensor, dict[str, float]]:
        assert q is not None and p is not None
        scores = torch.tensor(batch.scores, device=q.device) if batch.scores is not None else None
        loss, metrics = gircse_loss(q, p, n, temperature=self.config.temperature,
                                    refinement_weight=self.config.refinement_weight, scores=scores,
                                    step_weighting=self.config.step_weighting,
                                    refinement_target=self.config.refinement_target)
        # The teacher sees the embeddings encode() returns: the mean over the K states.
        distill = self.distillation(batch, torch.cat([x.mean(dim=1) for x in (q, p, n) if x is not None]))
        if distill is not None:
            metrics["distill"] = float(distill.detach())
            loss = loss + self.teacher_weight * distill
        metrics["loss"] = float(loss.detach())
        return loss, metrics
