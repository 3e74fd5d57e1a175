"""Large contrastive batches at small-batch memory: gradients through cached representations.

A contrastive loss needs the whole batch's representations at once (in-batch negatives, the
teacher's similarity matrix, CoSENT's pairs), but the backward pass through the model does
not: the loss's gradient with respect to each text's representation is all a text's forward
pass needs. So a step runs in three parts (Gao et al.'s "gradient cache" idea):

1. every side of the batch is encoded in chunks of ``chunk`` texts *without* autograd, and the
   random state before each chunk is kept (LoRA dropout);
2. the loss is computed on those representations as leaf tensors and backpropagated to them;
3. each chunk is encoded again, with the same random state so with the same dropout masks,
   and backpropagated with its slice of the cached gradient.

The parameter gradients equal those of a plain backward pass of the whole batch with the same
dropout masks (up to float rounding), memory is that of one chunk's
activations, and the compute is one extra forward pass, which smaller chunks can repay on a CPU
(a GIRCSE batch of 64 SICK pairs: 60 s a step plain, a median of 60 s in chunks of 32, one
thread). On this CPU it is what lets a corpus method train at the batch size of the GPU runs: a
GIRCSE batch of 32 SciFact triplets held 23.4 GB without it.

A model takes part if it has ``batch_sides(batch)``, ``training_reps(texts, role,
instruction)`` (one row per text, depending on that text only) and ``loss_from_reps(batch,
*reps)``, as the corpus methods (``embedders.methods.corpus``) have.
"""

from __future__ import annotations

from typing import Any

import torch

REQUIRED = ("batch_sides", "training_reps", "loss_from_reps")


def supports_grad_cache(model: Any) -> bool:
    """Whether ``model`` exposes the three methods a cached step needs."""
    return all(callable(getattr(model, name, None)) for name in REQUIRED)


def require_grad_cache(model: Any, name: str) -> None:
    """Raise ValueError, naming the method ``name``, unless ``model`` has a cached-gradient path."""
    if not supports_grad_cache(model):
        raise ValueError(f"--grad-cache: {name} has no cached-gradient path (the corpus methods have one); "
                         "train it without --grad-cache")


def _rng_state(device: torch.device) -> tuple[torch.Tensor, torch.Tensor | None]:
    cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
    return torch.get_rng_state(), cuda


def _set_rng_state(state: tuple[torch.Tensor, torch.Tensor | None], device: torch.device) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], device)


def cached_backward(model: Any, batch: Any, chunk: int) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss of ``batch`` with its parameter gradients accumulated (``.grad``), computing at
    most ``chunk`` texts' activations at a time.

    Returns the detached loss and the method's metrics. A non-finite loss is returned without
    any backward pass, so the caller can skip the batch with the gradients untouched.
    """
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    device = torch.device(getattr(model, "device", "cpu"))
    sides = model.batch_sides(batch)
    saved: list[list[tuple[torch.Tensor, torch.Tensor | None]]] = []
    reps: list[torch.Tensor | None] = []
    with torch.no_grad():
        for texts, role, instruction in sides:
            states = []
            parts = []
            for start in range(0, len(texts), chunk):
                states.append(_rng_state(device))
                parts.append(model.training_reps(texts[start:start + chunk], role, instruction))
            saved.append(states)
            reps.append(torch.cat(parts) if parts else None)
    after = _rng_state(device)
    leaves = [r.detach().requires_grad_(True) if r is not None else None for r in reps]
    loss, metrics = model.loss_from_reps(batch, *leaves)
    if not torch.isfinite(loss.detach()):
        return loss.detach(), metrics
    loss.backward()
    for (texts, role, instruction), states, leaf in zip(sides, saved, leaves, strict=True):
        if leaf is None or leaf.grad is None:
            continue
        for i, start in enumerate(range(0, len(texts), chunk)):
            _set_rng_state(states[i], device)
            part = model.training_reps(texts[start:start + chunk], role, instruction)
            part.backward(leaf.grad[start:start + chunk])
    _set_rng_state(after, device)
    return loss.detach(), metrics
