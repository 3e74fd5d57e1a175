"""Pooling functions over token states: pure tensor functions, easy to test on random input.

All functions take ``hidden`` of shape (batch, seq, dim) and ``mask`` of shape
(batch, seq) with 1 for real tokens and 0 for padding, and work for either padding
side.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Average of the states of real tokens.

    Args:
        hidden: (batch, seq, dim) token states.
        mask: (batch, seq) attention mask, 1 for real tokens.

    Returns:
        (batch, dim) averages; rows with no real token are zero.
    """
    weights = mask.to(hidden.dtype).unsqueeze(-1)  # (batch, seq, 1)
    summed = (hidden * weights).sum(dim=1)
    counts = weights.sum(dim=1).clamp(min=1.0)
    return summed / counts


def last_token_index(mask: torch.Tensor) -> torch.Tensor:
    """Index of the last real token of each row, for left or right padding alike.

    Args:
        mask: (batch, seq) attention mask.

    Returns:
        (batch,) long tensor of positions.
    """
    seq = mask.shape[1]
    positions = torch.arange(seq, device=mask.device).expand_as(mask)
    # Padding positions get -1 so the max picks the last real token whichever side pads.
    return torch.where(mask.bool(), positions, torch.full_like(positions, -1)).max(dim=1).values


def last_token_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """State of the last real token of each row (EOS / PromptEOL pooling).

    Args:
        hidden: (batch, seq, dim) token states.
        mask: (batch, seq) attention mask.

    Returns:
        (batch, dim) states.
    """
    idx = last_token_index(mask).clamp(min=0)
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), idx]


def gather_positions(hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """States at given positions, one or several per row.

    Args:
        hidden: (batch, seq, dim).
        positions: (batch,) or (batch, k) long tensor.

    Returns:
        (batch, dim) or (batch, k, dim).
    """
    rows = torch.arange(hidden.shape[0], device=hidden.device)
    if positions.dim() == 1:
        return hidden[rows, positions]
    return hidden[rows.unsqueeze(1), positions]


def blend_instruction(weight: float, neutral: Callable[[], torch.Tensor],
                      instructed: Callable[[], torch.Tensor]) -> torch.Tensor:
    """``(1 - w) n(neutral) + w n(instructed)`` (``n``: unit length), the embedding under an
    instruction with the embedding without it (or under a neutral one) blended in; ``weight``
    1 is ``instructed()`` as it is and 0 is ``n(neutral())``, each computing one pass only.

    Args:
        weight: the instructed embedding's share, from 0 to 1.
        neutral: computes the (batch, dim) embeddings without the instruction.
        instructed: computes the (batch, dim) embeddings under it.
    """
    if weight == 1.0:
        return instructed()
    plain = torch.nn.functional.normalize(neutral().float(), dim=-1)
    if weight == 0.0:
        return plain
    return (1.0 - weight) * plain + weight * torch.nn.functional.normalize(instructed().float(), dim=-1)
