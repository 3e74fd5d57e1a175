"""The optimisation loop shared by every trainable method.

A method supplies ``trainable_parameters()`` and ``training_loss(batch)``; the loop
does seeding, AdamW with linear warm-up and decay, gradient clipping, progress,
an optional wall-clock budget, periodic dev evaluation with best-checkpoint
selection, and saving (checkpoint + ``train_log.json``). Texts cut to ``max_length``
while training are reported once per log window (``log_every`` steps), not per batch.

Saving is crash-safe: a checkpoint is written into a temporary sibling directory and
swapped in by renames, and the log is replaced atomically, so a run killed at any
moment leaves the last good checkpoint loadable; ``kill`` (SIGTERM, what stops a run in
the background) stops it like Ctrl-C, with its log written. With an evaluator, the directory
always holds the best checkpoint seen so far (the start counts: if training never beats
it, the start is what is kept) and the log holds the dev curve.
"""

from __future__ import annotations

import glob
import json
import logging
import math
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from embedders.base import PARTIAL_SAVE_AGE_S, recover_checkpoint, truncation_tally
from embedders.training.grad_cache import cached_backward, require_grad_cache

logger = logging.getLogger(__name__)


class LastSaveInterrupted(KeyboardInterrupt):
    """Ctrl-C while the ``last_out`` save ran, after the run had ended: ``out_dir`` holds the
    run's checkpoint and log, and ``log`` is what ``train`` would have returned."""

    def __init__(self, log: dict[str, Any]) -> None:
        super().__init__()
        self.log = log


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
        eval_every: with an evaluator, score the model every this many steps (and at the
            start and the end); without one, save the weights this often. 0 = only at the end.
        head_lr_mult: learning-rate multiplier for a method's extra heads (``head_parameters()``,
            e.g. Causal2Vec's projector, trained from scratch while LoRA adapts a trained model).
        decay_over: ``"steps"``: the decay spans ``steps``; ``"time"``: it spans whichever ends
            first, ``steps`` or ``time_budget_s`` (the learning rate reaches its floor when the
            budget runs out, for runs sized by wall time on hardware of unknown speed).
        eval_every_s: with an evaluator, also score the model once this many seconds of
            training have passed since the last evaluation (None = by steps only).
        grad_cache: encode each batch in chunks of this many texts and backpropagate the
            whole-batch loss through cached representations (``embedders.training.grad_cache``):
            the negatives of the full batch at the memory of one chunk. None = a plain step.
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
    eval_every: int = 0
    head_lr_mult: float = 1.0
    decay_over: str = "steps"
    eval_every_s: float | None = None
    grad_cache: int | None = None

    def __post_init__(self) -> None:
        if self.grad_cache is not None and self.grad_cache < 1:
            raise ValueError(f"grad_cache must be >= 1 texts per chunk, got {self.grad_cache}")
        if self.decay_over not in ("steps", "time"):
            raise ValueError(f"decay_over must be 'steps' or 'time', got {self.decay_over!r}")
        if self.decay_over == "time" and self.time_budget_s is None:
            raise ValueError("decay_over='time' needs a time budget")
        if self.eval_every_s is not None and self.eval_every_s <= 0:
            raise ValueError(f"eval_every_s must be positive, got {self.eval_every_s}")
        if not self.head_lr_mult > 0 or not math.isfinite(self.head_lr_mult):
            raise ValueError(f"head_lr_mult must be a positive number, got {self.head_lr_mult}")
        if self.eval_every < 0:
            raise ValueError(f"eval_every must be >= 0, got {self.eval_every}")
        if self.log_every < 1:
            raise ValueError(f"log_every must be >= 1, got {self.log_every}")
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")
        if not self.lr > 0 or not math.isfinite(self.lr):  # NaN passed `<= 0` and trained NaNs
            raise ValueError(f"lr must be a positive number, got {self.lr}")
        if self.stop_after is not None and not 1 <= self.stop_after <= self.steps:
            raise ValueError(f"stop_after must be between 1 and steps ({self.steps}), got {self.stop_after}")


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


# The trainer's clock (tests replace it to make time-based behaviour deterministic).
_clock = time.perf_counter


def _lr_factor(step: int, config: TrainConfig, elapsed: float = 0.0) -> float:
    """Linear warm-up over ``warmup`` steps, then linear decay to 10% of the peak over the
    rest of the steps, or of the time budget if that ends sooner (``decay_over="time"``)."""
    if step < config.warmup:
        return (step + 1) / max(1, config.warmup)
    progress = (step - config.warmup) / max(1, config.steps - config.warmup)
    if config.decay_over == "time" and config.time_budget_s:
        progress = max(progress, elapsed / config.time_budget_s)
    return max(0.1, 1.0 - 0.9 * progress)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Replace ``path`` atomically (a reader never sees half a file). The temporary file a run
    killed mid-write left (``.NAME.tmp``; ``facet train --out`` accepts a directory holding it)
    is replaced, not written through: a read-only one could not be opened for writing."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def _saved_step(out_dir: str | Path) -> tuple[str, int] | None:
    """The run and best step the checkpoint in ``out_dir`` records, or None (no checkpoint, no
    log, or one from before logs named their run)."""
    try:
        log = json.loads((Path(out_dir) / "train_log.json").read_text())
        best = log.get("best")
        return (str(log["run_id"]), int(best["step"])) if isinstance(best, dict) else None
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def save_checkpoint(model: Trainable, out_dir: str | Path, log: dict[str, Any]) -> Path:
    """Write the model and its log into ``out_dir`` so that a kill at any moment leaves either
    the previous complete checkpoint or the new one: the new one is written beside it and
    swapped in by two renames."""
    def fill(tmp: Path) -> None:
        model.save(tmp)
        _write_json(tmp / "train_log.json", log)

    return replace_dir(out_dir, fill)


def replace_dir(out_dir: str | Path, fill: Callable[[Path], Any]) -> Path:
    """Replace the directory ``out_dir`` with one that ``fill`` writes, so that a kill (or an
    error in ``fill``) at any moment leaves either the previous complete directory or the new
    one: ``fill`` writes into a new sibling ``.NAME.new-*``, which is swapped in by two renames
    (a kill between them leaves ``.NAME.old``, which ``recover_checkpoint`` puts back). The
    files get the umask's modes. Checkpoint saves and ``facet soup`` write through it."""
    target = Path(os.path.abspath(out_dir))  # "." has no name to make siblings of
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(f".{glob.escape(target.name)}.old.trash-*"):
        shutil.rmtree(stale, ignore_errors=True)  # (an earlier save killed while it deleted)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.new-", dir=target.parent))
    try:
        fill(tmp)
        _umask_modes(tmp)
        old = target.with_name(f".{target.name}.old")
        if old.exists():
            _discard(old)
        if target.exists():
            os.replace(target, old)
        os.replace(tmp, target)
        _discard(old)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _discard(folder: Path) -> None:
    """Delete ``folder`` under another name first: ``.NAME.old`` is what ``recover_checkpoint``
    puts back as complete, and a kill part-way through deleting it under that name left half a
    checkpoint there, restored (without its weights) once the run's folder was moved away."""
    if not folder.exists():
        return
    trash = Path(tempfile.mkdtemp(prefix=f"{folder.name}.trash-", dir=folder.parent))
    os.replace(folder, trash / folder.name)
    shutil.rmtree(trash, ignore_errors=True)


def current_umask() -> int:
    """The process's umask (read by setting it and back: there is no getter)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _umask_modes(folder: Path) -> None:
    """Give ``folder`` and its files the modes a plain mkdir / open would (mkdtemp makes 0700,
    and some writers 0600), so a worker running as another user can load the checkpoint.

    A disk that does not keep Unix modes may refuse the change (FAT mounted with a mask,
    a FUSE driver without chmod): a courtesy to other users, so it is a warning, and the
    checkpoint is kept (the save failed, and the written checkpoint was deleted)."""
    mask = current_umask()
    refused: list[str] = []
    for path, mode in [(folder, 0o777 & ~mask)] + [(f, 0o666 & ~mask) for f in sorted(folder.iterdir())
                                                   if f.is_file()]:
        try:
            path.chmod(mode)
        except OSError as e:
            refused.append(f"{'its folder' if path == folder else path.name}: {e.strerror or e}")
    if refused:
        logger.warning("the checkpoint's files keep the modes they were written with (this disk "
                       "refused a change: %s); other users may not be able to read it",
                       "; ".join(refused[:3]) + ("; ..." if len(refused) > 3 else ""))


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While training (and while ``facet train`` loads), SIGTERM raises ``KeyboardInterrupt`` as
    Ctrl-C does, so ``kill PID`` on a background run keeps the best checkpoint and writes the
    log's ``stopped`` instead of dying mid-step. Only the main thread can own signal handlers;
    elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _method_settings(model: Any) -> dict[str, Any] | None:
    """The method's configuration (``MethodConfig.to_dict``), training-only fields included."""
    config = getattr(model, "config", None)
    to_dict = getattr(config, "to_dict", None)
    return to_dict() if callable(to_dict) else None


def train(model: Trainable, sampler: Sampler, config: TrainConfig, out_dir: str | Path | None = None,
          *, progress: bool = True, extra_log: dict[str, Any] | None = None,
          evaluate: Callable[[Any], dict[str, Any]] | None = None,
          last_out: str | Path | None = None) -> dict[str, Any]:
    """Run the loop; save the model and a log to ``out_dir`` if given.

    Args:
        evaluate: scores the model on dev data and returns a dict with a ``score`` to
            maximise; run at the start, every ``config.eval_every`` steps and at the end.
            The best-scoring weights are what ``out_dir`` keeps.
        last_out: also save the weights as they are when the run ends (completed or out of
            time, not interrupted), whether or not they scored best: an ingredient for a soup
            or a run to continue. Its log's ``weights_steps`` counts every step done.

    Returns:
        The log: config, per-step losses and metrics, dev curve, wall time, steps done.
    """
    set_seed(config.seed)
    params = model.trainable_parameters()
    if not params:
        raise ValueError(f"{model.method} has no trainable parameters")
    from embedders.methods.common import TrainableDecoderEmbedder, check_position_limit

    if isinstance(model, TrainableDecoderEmbedder):  # training may generate more than encode (GIRCSE's K)
        check_position_limit(model.backbone, model.config.max_length, model.config, training=True)
    if config.grad_cache is not None:
        require_grad_cache(model, model.method)
    heads = {id(p) for p in getattr(model, "head_parameters", list)()}
    groups = [{"params": [p for p in params if id(p) not in heads], "lr": config.lr},
              {"params": [p for p in params if id(p) in heads], "lr": config.lr * config.head_lr_mult}]
    optimizer = torch.optim.AdamW([g for g in groups if g["params"]], weight_decay=config.weight_decay)
    start = _clock()
    last_eval = start  # when the last evaluation ended (eval_every_s counts training time from there)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: _lr_factor(s, config, _clock() - start))
    history: list[dict[str, Any]] = []
    curve: list[dict[str, Any]] = []
    best: dict[str, Any] = {}
    last = config.stop_after or config.steps  # the schedule still spans config.steps
    if out_dir is not None:
        recover_checkpoint(out_dir, partial_older_than_s=PARTIAL_SAVE_AGE_S)
    skipped = 0
    # Which run wrote a checkpoint's log: a save stopped mid-way is told from one that landed by
    # it, not by the step alone (another run's checkpoint there, whose best was the same step,
    # had its log overwritten with this run's over its own weights).
    run_id = uuid.uuid4().hex
    # What a log written mid-run says: a run killed outright (SIGKILL, power loss) leaves
    # its last checkpoint's log saying "running", not "completed".
    stopped = "running"

    def make_log() -> dict[str, Any]:
        log = {"method": model.method, "run_id": run_id, "config": asdict(config),
               # The method's own settings this run trained with (a continuation inherits its
               # checkpoint's distillation, temperature, refinement weight...: no log said which).
               "method_config": _method_settings(model), "steps_done": len(history), "skipped": skipped,
               "seconds": round(_clock() - start, 1), "stopped": stopped,
               "seconds_per_step": round(sum(h["step_seconds"] for h in history) / max(1, len(history)), 3),
               **(extra_log or {})}
        # Optimiser steps behind the saved weights, counting those of an --init-from checkpoint.
        # (Optimiser steps: a skipped batch's step, non-finite, changed nothing.)
        log["weights_steps"] = log.get("init_weights_steps", 0) + (
            sum(1 for h in history if h["step"] <= best["step"]) if best else len(history))
        if evaluate is not None:
            log["dev_curve"] = curve
            log["best"] = best
        log["history"] = history
        return log

    def checkpoint(step: int) -> None:
        """Evaluate (if an evaluator was given) and save when the model is the best so far."""
        nonlocal last_eval
        if evaluate is None:
            if out_dir is not None and step > 0:
                save_checkpoint(model, out_dir, make_log())
            return
        model.eval()
        scores = evaluate(model)
        model.train()
        point = {"step": step, "seconds": round(_clock() - start, 1), **scores}
        curve.append(point)
        # A NaN best (a dev metric undefined at the start, e.g. every STS cosine equal) would
        # never be beaten (no number is > NaN), so nothing trained after it would be kept.
        improved = not best or math.isnan(best["score"]) or scores["score"] > best["score"]
        previous = dict(best)
        if improved:
            best.clear()
            best.update(point)
        logger.info("dev at step %d: %s%s", step, {k: v for k, v in scores.items() if k != "eval_seconds"},
                    " (best so far)" if improved else f" (best {best['score']} at step {best['step']})")
        if out_dir is not None:
            if improved:
                try:
                    save_checkpoint(model, out_dir, make_log())
                except BaseException:
                    # Stopped (Ctrl-C, SIGTERM: how a background run is stopped) or failed
                    # mid-save: the folder keeps the weights it had unless the swap landed, and
                    # the best recorded is the one there. The log said the new step over the
                    # old weights (and over none, the first save: a lone train_log.json).
                    if _saved_step(out_dir) != (run_id, step):
                        best.clear()
                        best.update(previous)
                    raise
            else:
                _write_json(Path(out_dir) / "train_log.json", make_log())
        last_eval = _clock()

    bar = None
    if progress:
        from tqdm.auto import tqdm

        from embedders.terminal import bar_size

        bar = tqdm(total=last, desc=f"train {model.method}", unit="step", file=sys.stderr,
                   **bar_size())
    model.train()
    # Weights and maths stay fp32; on a GPU, TF32 matmuls. A 135M model's step is bound by
    # kernel launches more than arithmetic, and a bf16-autocast trial hit a NaN loss.
    if torch.device(getattr(model, "device", "cpu")).type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    done_at = 0

    def end_of_step(step: int) -> bool:
        """A dev evaluation where one is due after loop step ``step``; True where the time
        budget is spent (the run stops)."""
        nonlocal stopped
        due = bool(config.eval_every) and (step + 1) % config.eval_every == 0
        if config.eval_every_s is not None and evaluate is not None:
            due = due or _clock() - last_eval >= config.eval_every_s
        if due and step + 1 < last:
            checkpoint(step + 1)
        if config.time_budget_s is not None and _clock() - start > config.time_budget_s:
            logger.warning("time budget of %.0fs reached after %d steps; stopping", config.time_budget_s, step + 1)
            stopped = "time budget"
            if bar is not None:
                bar.total = done_at
                bar.refresh()
            return True
        return False

    # Truncation warnings summed over a log window: a long-passage source would otherwise log
    # a line for every tokenised side of every batch and bury the progress.
    window = ExitStack()
    guard = ExitStack()
    try:
        guard.enter_context(sigterm_as_interrupt())
        if evaluate is not None:
            checkpoint(0)
        for step in range(last):
            step_start = _clock()
            if step % config.log_every == 0:
                window.close()
                window.enter_context(truncation_tally())
            batch = sampler.next_batch()
            optimizer.zero_grad(set_to_none=True)
            if config.grad_cache is not None:
                # The gradients are accumulated here, chunk by chunk (none if the loss is non-finite).
                loss, metrics = cached_backward(model, batch, config.grad_cache)
            else:
                loss, metrics = model.training_loss(batch)
            if not math.isfinite(float(loss.detach())):
                # One bad batch should not end a long run; many in a row mean divergence.
                skipped += 1
                logger.warning("non-finite loss at step %d (task %s); batch skipped", step + 1, batch.task)
                if skipped > config.max_skipped:
                    raise FloatingPointError(
                        f"loss was non-finite on {skipped} batches (last at step {step + 1}, task {batch.task}); "
                        "lower --lr or check the data")
                optimizer.zero_grad(set_to_none=True)
                # Its step's dev evaluation and time-budget check still come (they were skipped).
                if end_of_step(step):
                    break
                continue
            if config.grad_cache is None:
                loss.backward()
            if config.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
            optimizer.step()
            scheduler.step()
            done_at = step + 1
            record = {"step": step + 1, "task": getattr(batch, "task", None), **metrics,
                      "lr": scheduler.get_last_lr()[0], "seconds": round(_clock() - start, 2),
                      "step_seconds": round(_clock() - step_start, 3)}
            history.append(record)
            if bar is not None:
                bar.update(1)
                postfix = {"loss": f"{metrics.get('loss', float(loss.detach())):.3f}", "task": record["task"]}
                if best:
                    postfix["dev"] = f"{best['score']:.2f}@{best['step']}"
                if config.time_budget_s is not None:
                    # The time budget, not --steps, usually ends such a run: show the steps it
                    # will allow at the pace so far, so the bar's end and ETA are the real ones.
                    elapsed = _clock() - start
                    left = max(0.0, config.time_budget_s - elapsed)
                    postfix["left"] = f"{left / 60:.0f}min"
                    bar.total = min(last, done_at + int(left * done_at / max(elapsed, 1e-9)) + 1)
                bar.set_postfix(postfix)
            if (step + 1) % config.log_every == 0:
                window.close()
                recent = [h["loss"] for h in history[-config.log_every:] if "loss" in h]
                logger.info("step %d/%d mean loss %.4f (%.0fs)", step + 1, config.steps,
                            sum(recent) / max(1, len(recent)), record["seconds"])
            if end_of_step(step):
                break
        if stopped == "running":
            # (--stop-after ends the run early on purpose: it was logged "completed".)
            stopped = "completed" if last >= config.steps else f"stopped after {last} steps (--stop-after)"
        if not curve or curve[-1]["step"] != done_at or evaluate is None:
            checkpoint(done_at)
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM: keep what is saved (the best so far), or the current weights when nothing scores them.
        # Before the first step nothing is saved: the weights are the starting ones, and saving them
        # made an untrained checkpoint, or rewrote the one an in-place continuation started from.
        stopped = "interrupted"
        if evaluate is None and not history:
            logger.warning("interrupted before the first step; nothing saved")
        elif evaluate is not None and not best:
            # (Stopped during the first evaluation: it said "keeping the best checkpoint so far",
            # then "nothing saved".)
            logger.warning("interrupted after %d steps, before any checkpoint was kept", done_at)
        else:
            logger.warning("interrupted after %d steps; %s", done_at, "keeping the best checkpoint so far"
                           if evaluate is not None else "saving the current weights")
        if out_dir is not None:
            if evaluate is None:
                if history:
                    save_checkpoint(model, out_dir, make_log())
            elif best:
                _write_json(Path(out_dir) / "train_log.json", make_log())
    finally:
        guard.close()
        window.close()
        if bar is not None:
            bar.close()
        model.eval()
    log = make_log()
    if out_dir is not None and stopped != "interrupted" and Path(out_dir).is_dir():
        _write_json(Path(out_dir) / "train_log.json", log)
    if last_out is not None and stopped != "interrupted":
        try:
            # (SIGTERM too: the training's handler was given back above, and a kill here exited
            # 143 without a word)
            with sigterm_as_interrupt():
                save_checkpoint(model, last_out, {**log, "weights": "last",
                                                  "weights_steps": log.get("init_weights_steps", 0) + len(history)})
        except KeyboardInterrupt:
            raise LastSaveInterrupted(log) from None
    return log
