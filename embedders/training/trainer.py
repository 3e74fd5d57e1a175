"""The optimisation loop shared by every trainable method.

A method supplies ``trainable_parameters()`` and ``training_loss(batch)``; the loop
does seeding, AdamW with linear warm-up and decay, gradient clipping, progress,
an optional wall-clock budget, and saving (checkpoint + ``train_log.json``).
"""

from __future__ import annotations

import json
import logging
import math
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

logger = logging.getLogger(__name__)


class Trainable(Protocol):
    method: str

    def train(self) -> None: ...
    def eval(self) -> None: ...
    def trainable_parameters(self) -> list[torch.nn.Parameter]: ...
    def training_loss(self, batch: Any) -> tuple[torch.Tensor, dict[str, float]]: ...
    def save(self, path: str | Path) -> Path: ...


class Sampler(Protocol):
    def next_batch(self) -> Any: ...


@dataclass
class TrainConfig:
    """Optimisation settings.

    Attributes:
        steps: optimiser steps.
        lr: peak learning rate (AdamW).
        warmup: linear warm-up steps, then linear decay to 10% of the peak.
        weight_decay: AdamW weight decay.
        grad_clip: max gradient norm (0 disables).
        seed: seeds python, numpy and torch.
        log_every: steps between log lines.
        time_budget_s: stop early (and save) after this many seconds, or None.
        stop_after: stop early (and save) after this many steps, keeping the learning-rate
            schedule of ``steps``; replays a run that a time budget cut, step for step.
        max_skipped: batches with a non-finite loss that are skipped before giving up.
    """

    steps: int = 200
    lr: float = 2e-4
    warmup: int = 10
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    seed: int = 0
    log_every: int = 10
    time_budget_s: float | None = None
    stop_after: int | None = None
    max_skipped: int = 10

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")
        if self.lr <= 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        if self.stop_after is not None and not 1 <= self.stop_after <= self.steps:
            raise ValueError(f"stop_after must be between 1 and steps ({self.steps}), got {self.stop_after}")


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _lr_factor(step: int, config: TrainConfig) -> float:
    if step < config.warmup:
        return (step + 1) / max(1, config.warmup)
    span = max(1, config.steps - config.warmup)
    return max(0.1, 1.0 - 0.9 * (step - config.warmup) / span)


def train(model: Trainable, sampler: Sampler, config: TrainConfig, out_dir: str | Path | None = None,
          *, progress: bool = True, extra_log: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run the loop; save the model and a log to ``out_dir`` if given.

    Returns:
        The log: config, per-step losses and metrics, wall time, steps done.
    """
    set_seed(config.seed)
    params = model.trainable_parameters()
    if not params:
        raise ValueError(f"{model.method} has no trainable parameters")
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: _lr_factor(s, config))
    history: list[dict[str, Any]] = []
    last = config.stop_after or config.steps  # the schedule still spans config.steps
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=last, desc=f"train {model.method}", unit="step", file=sys.stderr)
    model.train()
    # Weights and maths stay fp32; on a GPU, TF32 matmuls. A 135M model's step is bound by
    # kernel launches more than arithmetic, and a bf16-autocast trial hit a NaN loss.
    if torch.device(getattr(model, "device", "cpu")).type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    skipped = 0
    start = time.perf_counter()
    step = 0
    try:
        for step in range(last):
            batch = sampler.next_batch()
            loss, metrics = model.training_loss(batch)
            if not math.isfinite(float(loss)):
                # One bad batch should not end a long run; many in a row mean divergence.
                skipped += 1
                logger.warning("non-finite loss at step %d (task %s); batch skipped", step + 1, batch.task)
                if skipped > config.max_skipped:
                    raise FloatingPointError(
                        f"loss was non-finite on {skipped} batches (last at step {step + 1}, task {batch.task}); "
                        "lower --lr or check the data")
                optimizer.zero_grad(set_to_none=True)
                continue
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if config.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
            optimizer.step()
            scheduler.step()
            record = {"step": step + 1, "task": getattr(batch, "task", None), **metrics,
                      "lr": scheduler.get_last_lr()[0], "seconds": round(time.perf_counter() - start, 2)}
            history.append(record)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{metrics.get('loss', float(loss)):.3f}", task=record["task"])
            if (step + 1) % config.log_every == 0:
                recent = [h["loss"] for h in history[-config.log_every:] if "loss" in h]
                logger.info("step %d/%d mean loss %.4f (%.0fs)", step + 1, config.steps,
                            sum(recent) / max(1, len(recent)), record["seconds"])
            if config.time_budget_s is not None and time.perf_counter() - start > config.time_budget_s:
                logger.warning("time budget of %.0fs reached after %d steps; stopping", config.time_budget_s, step + 1)
                break
    finally:
        if bar is not None:
            bar.close()
        model.eval()
    log = {"method": model.method, "config": asdict(config), "steps_done": len(history), "skipped": skipped,
           "seconds": round(time.perf_counter() - start, 1), "history": history, **(extra_log or {})}
    if out_dir is not None:
        target = model.save(out_dir)
        (Path(target) / "train_log.json").write_text(json.dumps(log, indent=1))
    return log
