"""Weight-space averaging ("model soups") of checkpoints of one trainable method.

Checkpoints fine-tuned from a shared start (continuations of one line, or side-by-side runs
from the same weights) can be averaged in weight space into one model that often generalises
better than any of them (Wortsman et al., 2022, "Model soups"); it costs no training and serves
at the price of one model. Selection stays on dev: a soup is an ordinary checkpoint to score.

A LoRA checkpoint stores each adapted weight's update as ``scale * B @ A``, so the average of
the updates, ``sum_i w_i * scale_i * B_i @ A_i``, has rank up to the sum of the ranks. It is
computed exactly in factored form (the ingredients' factors stacked side by side), then
brought back to ``rank`` with a truncated SVD (thin QR of each stacked factor, SVD of the small
core), so the soup stores as much as one ingredient. ``SoupReport.energy_kept`` says how much
of the exact average survives the truncation (1.0 = nothing lost; ``rank=None`` keeps the sum
of the ranks, exact). A method's extra modules (heads.safetensors, e.g. Causal2Vec's
projector) are full weights and are averaged directly.

Only inference-relevant settings must agree: the configs may differ in LoRA rank, alpha and
dropout, and in the fields the method's config declares ``TRAINING_ONLY``; anything else
(backbone, template, pooling, token budget...) would make the average mean nothing and is refused.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from embedders.backbone import DEFAULT_DECODER, same_backbone
from embedders.base import CONFIG_FILE
from embedders.errors import CheckpointError, InvalidInputError
from embedders.methods.common import ADAPTER_FILE, HEADS_FILE, read_weights
from embedders.training.trainer import replace_dir

logger = logging.getLogger(__name__)

TRAIN_LOG_FILE = "train_log.json"
_LORA_FREE = ("r", "alpha", "dropout")
# The served token budget: chosen on dev after training (docs/training.md, 6.), so a shipped
# checkpoint may serve 256 while the runs continued from it say the 96 they trained at. The
# weights do not depend on it; the soup serves the first ingredient's.
_SERVING_FREE = frozenset({"max_length"})


@dataclass
class SoupReport:
    """What a soup was made of and how faithful its stored adapter is to the exact average."""

    ingredients: list[str]
    weights: list[float]
    method: str
    rank: int
    exact_rank: int
    energy_kept: float  # min over adapted weights of |truncated update|^2 / |exact update|^2
    energy_kept_mean: float
    modules: int
    heads_averaged: int
    config_differences: dict[str, list[Any]] = field(default_factory=dict)
    # Ingredients whose weights are identical to an earlier one's (e.g. a continuation that kept
    # its start): [earlier index, later index]. Such a pair counts that model twice.
    duplicates: list[list[int]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _comparable(config: dict[str, Any], free: frozenset[str]) -> dict[str, Any]:
    # (the backbone is compared by ``same_backbone``: an older checkpoint's relative folder and
    # a newer one's absolute path to it are one backbone)
    out = {k: v for k, v in config.items() if k not in free and k != "backbone"}
    if isinstance(out.get("lora"), dict):
        out["lora"] = {k: v for k, v in out["lora"].items() if k not in _LORA_FREE}
    return out


def _check_compatible(paths: list[Path], metas: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Raise InvalidInputError unless every ingredient is the same method with the same inference
    settings (the served ``max_length`` aside): a combination that cannot be averaged is a bad
    request (exit 2), not a damaged checkpoint (exit 4, as it was: a script could not tell them
    apart); return the training-only fields and budgets that differ (reported, not refused)."""
    from embedders.registry import training_only_fields

    first = metas[0]
    free = training_only_fields(str(first.get("method"))) | _SERVING_FREE
    for path, meta in zip(paths[1:], metas[1:], strict=True):
        if meta.get("method") != first.get("method"):
            raise InvalidInputError(f"cannot average {paths[0]} ({first.get('method')}) with {path} "
                                  f"({meta.get('method')}): a soup needs one method")
        a, b = (_comparable(m.get("config", {}), free) for m in (first, meta))
        backbones = [str(m.get("config", {}).get("backbone", DEFAULT_DECODER)) for m in (first, meta)]
        if not same_backbone(*backbones):
            a["backbone"], b["backbone"] = backbones
        if a != b:
            keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            raise InvalidInputError(f"cannot average {paths[0]} with {path}: their configs differ in "
                                  f"{', '.join(keys)} (only LoRA rank/alpha/dropout, max_length and "
                                  "training-only fields may differ)")
    diffs: dict[str, list[Any]] = {}
    # Training-only fields and the served budget that differ: the soup keeps the first
    # ingredient's value (what a continuation from it trains with, what it serves); reported,
    # not refused.
    for key in sorted(free):
        values = [m.get("config", {}).get(key) for m in metas]
        if any(v != values[0] for v in values):
            diffs[key] = values
    return diffs


def _lora_pairs(state: dict[str, torch.Tensor], path: Path) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """``{module prefix: (A, B)}`` from an adapter state dict."""
    pairs: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for key in state:
        if ".lora_A." not in key:
            if ".lora_B." not in key:
                raise CheckpointError(f"{path / ADAPTER_FILE} holds {key!r}, which is not a LoRA factor")
            continue
        prefix, _, suffix = key.partition(".lora_A.")
        b_key = f"{prefix}.lora_B.{suffix}"
        if b_key not in state:
            raise CheckpointError(f"{path / ADAPTER_FILE} has {key} but no {b_key}")
        pairs[key] = (state[key].float(), state[b_key].float())
    return pairs


def _check_factor_shapes(paths: list[Path], states: list[dict[str, tuple[torch.Tensor, torch.Tensor]]],
                         ranks: list[int]) -> None:
    """Each ingredient's factors as its config's rank says (A: r x in, B: out x r) and of the
    same module widths as the first's: another backbone's adapter ended in torch.cat's
    RuntimeError traceback, and a config whose ``r`` disagreed with its tensors was averaged at
    the wrong scale (alpha / r), exit 0.

    Raises:
        CheckpointError: factors not of their config's rank (damaged), naming the file, the
            module and the shapes.
        InvalidInputError: factors of other module widths than the first's (another backbone).
    """
    for p, state, r in zip(paths, states, ranks, strict=True):
        for key, (a, b) in state.items():
            if a.dim() != 2 or b.dim() != 2 or a.shape[0] != r or b.shape[1] != r:
                raise CheckpointError(
                    f"{p / ADAPTER_FILE}: {key} has factors {tuple(a.shape)} and {tuple(b.shape)}, "
                    f"not of the rank its {CONFIG_FILE} gives (r={r}); the checkpoint is damaged "
                    "or its config edited")
    for p, state in zip(paths[1:], states[1:], strict=True):
        for key, (a, b) in state.items():
            a0, b0 = states[0][key]
            if a.shape[1] != a0.shape[1] or b.shape[0] != b0.shape[0]:
                raise InvalidInputError(
                    f"{p / ADAPTER_FILE}: {key} adapts a {a.shape[1]} -> {b.shape[0]} weight where "
                    f"{paths[0] / ADAPTER_FILE} adapts {a0.shape[1]} -> {b0.shape[0]}; a soup "
                    "needs checkpoints of the same backbone")


def weights_steps(log: dict[str, Any]) -> int:
    """The training steps behind a checkpoint's weights, from its ``train_log.json``: its
    ``weights_steps`` (every step across runs), else ``steps_done``, else (a soup written
    before it recorded them) the most of its ingredients'. Fields of another shape count as
    absent."""
    for key in ("weights_steps", "steps_done"):
        value = log.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return int(value)
    found = log.get("ingredient_logs")
    ingredients = [x for x in found if isinstance(x, dict)] if isinstance(found, list) else []
    return max((weights_steps(x) for x in ingredients), default=0)


def _ingredient_log(path: Path) -> dict[str, Any] | None:
    """An ingredient's ``train_log.json``, or None where it has none or it cannot be read.

    The log is the soup's record only (the ingredient logs it keeps, the steps behind its
    weights that a continuation counts); the weights do not depend on it, so one that is not
    a JSON object is said in a warning naming the file and left out, not refused.
    """
    if not path.exists():
        return None
    try:
        log = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        problem = f"cannot be read as JSON ({type(e).__name__}: {e})"
    else:
        if isinstance(log, dict):
            return log
        problem = f"is not a JSON object (it holds a {type(log).__name__})"
    logger.warning("%s %s; the soup is made without it: its log leaves that ingredient's training "
                   "record out and does not count its steps", path, problem)
    return None


def _truncate(b_cat: torch.Tensor, a_cat: torch.Tensor, rank: int) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Best rank-``rank`` factors (B', A') of ``b_cat @ a_cat`` and the energy they keep."""
    qb, rb = torch.linalg.qr(b_cat.double())  # (out, k), (k, k)
    qa, ra = torch.linalg.qr(a_cat.double().T)  # (in, k), (k, k)
    u, s, vh = torch.linalg.svd(rb @ ra.T)
    total = float((s ** 2).sum())
    keep = min(rank, s.numel())
    root = s[:keep].sqrt()
    b_new = (qb @ u[:, :keep]) * root  # (out, keep)
    a_new = root[:, None] * (vh[:keep] @ qa.T)  # (keep, in)
    if keep < rank:  # pad with zero directions so every module has the configured rank
        b_new = torch.cat([b_new, b_new.new_zeros(b_new.shape[0], rank - keep)], dim=1)
        a_new = torch.cat([a_new, a_new.new_zeros(rank - keep, a_new.shape[1])], dim=0)
    energy = 1.0 if total == 0.0 else float((s[:keep] ** 2).sum()) / total
    return b_new.float(), a_new.float(), energy


def make_soup(checkpoints: Sequence[str | Path], out: str | Path, *, weights: list[float] | None = None,
              rank: int | None = None) -> SoupReport:
    """Average ``checkpoints`` (directories of one method) into a new checkpoint at ``out``.

    Args:
        checkpoints: two or more checkpoint directories.
        out: the directory to write (not one of the ingredients nor a folder above one); it is
            replaced whole, atomically, like a training checkpoint (``replace_dir``).
        weights: one non-negative weight per ingredient (normalised to sum 1); None = uniform.
        rank: the soup's LoRA rank; None = the first ingredient's. The exact average needs the
            sum of the ranks (``SoupReport.exact_rank``); pass that for no truncation.

    Raises:
        CheckpointError: fewer than two ingredients, a missing or damaged file.
        InvalidInputError: ingredients that cannot be averaged (mixed methods, configs,
            targets or backbones, heads in some only).
        ValueError: bad weights or rank.
    """
    paths = [Path(p) for p in checkpoints]
    target = Path(out)
    if len(paths) < 2:
        raise CheckpointError("a soup needs at least two checkpoints")
    if any(target.resolve() == p.resolve() for p in paths):
        raise CheckpointError(f"--out {target} is one of the ingredients; write the soup elsewhere")
    if any(target.resolve() in p.resolve().parents for p in paths):  # replacing it deletes them
        raise CheckpointError(f"--out {target} holds one of the ingredients; write the soup elsewhere")
    if weights is None:
        weights = [1.0] * len(paths)
    if len(weights) != len(paths):
        raise ValueError(f"{len(weights)} weights for {len(paths)} checkpoints")
    if any(not math.isfinite(w) for w in weights):
        raise ValueError(f"weights must be finite numbers, got {weights}")
    if any(w < 0 for w in weights) or sum(weights) <= 0:
        raise ValueError(f"weights must be non-negative with a positive sum, got {weights}")
    total_w = sum(weights)
    if not math.isfinite(total_w):  # 1e308,1e308: each finite, their sum not (it made all zeros)
        raise ValueError(f"weights {weights} are too large to add up; give relative sizes like 3,1")
    weights = [w / total_w for w in weights]
    if rank is not None and rank < 1:
        raise ValueError(f"rank must be at least 1, got {rank}")

    from embedders.registry import read_checkpoint_config

    metas = [read_checkpoint_config(p) for p in paths]
    for p, meta in zip(paths, metas, strict=True):
        if not isinstance(meta, dict) or not isinstance(meta.get("config"), dict):
            # (a traceback: "'NoneType' object has no attribute 'items'"; loading it says this)
            raise CheckpointError(f"{p / CONFIG_FILE} has no \"config\" object")
    diffs = _check_compatible(paths, metas)
    logs = [_ingredient_log(p / TRAIN_LOG_FILE) for p in paths]  # read (and any warned about) first
    loras = [m.get("config", {}).get("lora", {}) for m in metas]
    ranks = [int(lo.get("r", 0)) for lo in loras]
    if any(r != ranks[0] for r in ranks) and 0 in ranks:
        raise InvalidInputError("cannot average a checkpoint without LoRA (r=0) with one that has it")

    # The adapters: sum_i w_i * scale_i * B_i @ A_i per module, in stacked factored form.
    report_energy: list[float] = []
    duplicates: list[list[int]] = []
    adapter: dict[str, torch.Tensor] = {}
    out_rank = 0
    exact_rank = sum(ranks)
    if rank is not None and not exact_rank:  # (it was ignored without a word)
        raise ValueError(f"rank {rank} is the rank of the averaged LoRA adapter, and these "
                         "checkpoints have none (r=0): leave --rank out")
    if rank is not None and exact_rank and rank > exact_rank:
        # Past the exact average's rank it only padded zero directions: a 101 MB adapter at
        # --rank 500 with rank 16's vectors, and a huge rank ran for minutes on gigabytes.
        raise ValueError(f"rank {rank} is over the exact average's rank, {exact_rank} (the sum "
                         f"of the ingredients' ranks): give --rank {exact_rank} for no "
                         "truncation, or less")
    if ranks[0] > 0:
        states = []
        for p in paths:
            if not (p / ADAPTER_FILE).is_file():
                raise CheckpointError(f"{p} has no {ADAPTER_FILE}")
            states.append(_lora_pairs(read_weights(p / ADAPTER_FILE), p))
        keys = set(states[0])
        for p, s in zip(paths[1:], states[1:], strict=True):
            if set(s) != keys:
                raise InvalidInputError(f"{p} adapts other modules than {paths[0]}; a soup needs the "
                                        "same targets")
        _check_factor_shapes(paths, states, ranks)
        scales = [float(lo.get("alpha", 16)) / int(lo["r"]) for lo in loras]
        for j in range(1, len(states)):
            for i in range(j):  # every earlier ingredient with the same adapter (heads below)
                if ranks[i] == ranks[j] and scales[i] == scales[j] and all(
                        torch.equal(states[i][k][0], states[j][k][0]) and torch.equal(states[i][k][1], states[j][k][1])
                        for k in keys):
                    duplicates.append([i, j])
        out_rank = rank or ranks[0]
        out_scale = scales[0]
        for a_key in sorted(keys):
            b_cat = torch.cat([w * sc * s[a_key][1] for w, sc, s in zip(weights, scales, states, strict=True)], dim=1)
            a_cat = torch.cat([s[a_key][0] for s in states], dim=0)
            b_new, a_new, energy = _truncate(b_cat, a_cat, out_rank)
            report_energy.append(energy)
            adapter[a_key] = a_new.half().contiguous()
            adapter[a_key.replace(".lora_A.", ".lora_B.")] = (b_new / out_scale).half().contiguous()

    # The heads: full weights, averaged directly.
    heads: dict[str, torch.Tensor] = {}
    head_files = [p / HEADS_FILE for p in paths]
    present = [f.is_file() for f in head_files]
    if any(present) and not all(present):
        raise InvalidInputError("some ingredients have heads.safetensors and others do not")
    if all(present):
        head_states = [read_weights(f) for f in head_files]
        for f, hs in zip(head_files[1:], head_states[1:], strict=True):
            if set(hs) != set(head_states[0]) or any(hs[k].shape != head_states[0][k].shape for k in hs):
                raise CheckpointError(f"{f} does not match {head_files[0]}")
        for key in head_states[0]:
            mean = sum(w * hs[key].float() for w, hs in zip(weights, head_states, strict=True))
            heads[key] = torch.as_tensor(mean).half().contiguous()
        # Same adapter but other heads is no duplicate (the warning said it was).
        duplicates = [[i, j] for i, j in duplicates
                      if all(torch.equal(head_states[i][k], head_states[j][k]) for k in head_states[i])]
    if not adapter and not heads:
        # A plugin method's checkpoints, whose weights are files of its own: a soup of their
        # configs alone was written, "100% of the exact average's energy kept", its weights lost.
        raise InvalidInputError(f"nothing to average: the checkpoints hold no LoRA adapter "
                                f"({ADAPTER_FILE}) and no heads ({HEADS_FILE}), the weights a soup "
                                "averages; a method that keeps its weights in other files cannot "
                                "be souped")
    # Each ingredient paired with the first earlier one it duplicates (of adapter and heads: a
    # first match of adapter alone, then dropped for its heads, hid a later true duplicate).
    firsts: dict[int, int] = {}
    for i, j in duplicates:
        firsts.setdefault(j, i)
    duplicates = [[i, j] for j, i in sorted(firsts.items())]

    meta = json.loads(json.dumps(metas[0]))
    # The backbone as an ingredient recorded it absolute, where one did (loadable from any
    # working folder; an older ingredient's relative name opens only in its own).
    recorded = [m["config"].get("backbone") for m in metas]
    absolute = next((b for b in recorded if isinstance(b, str) and Path(b).expanduser().is_absolute()), None)
    if absolute is not None and isinstance(meta["config"].get("backbone"), str):
        meta["config"]["backbone"] = absolute
    if out_rank:
        meta["config"]["lora"]["r"] = out_rank
        alpha = out_scale * out_rank
        meta["config"]["lora"]["alpha"] = int(alpha) if float(alpha).is_integer() else alpha
    from embedders.registry import shown_path

    report = SoupReport(
        ingredients=[shown_path(p) for p in paths], weights=[round(w, 6) for w in weights], method=str(meta["method"]),
        rank=out_rank, exact_rank=exact_rank,
        energy_kept=round(min(report_energy), 6) if report_energy else 1.0,
        energy_kept_mean=round(sum(report_energy) / len(report_energy), 6) if report_energy else 1.0,
        modules=len(report_energy), heads_averaged=len(heads), config_differences=diffs, duplicates=duplicates,
    )
    # The steps behind the averaged weights: the longest ingredient's (`facet train --init-from`
    # a soup counted them as 0, as if it started from scratch).
    steps = max((weights_steps(log) for log in logs if log is not None), default=0)

    def fill(folder: Path) -> None:
        if adapter:
            save_file(adapter, str(folder / ADAPTER_FILE))
        if heads:
            save_file(heads, str(folder / HEADS_FILE))
        (folder / TRAIN_LOG_FILE).write_text(json.dumps(
            {"soup": report.to_dict(), "weights_steps": steps, "ingredient_logs": logs},
            indent=2) + "\n")
        (folder / CONFIG_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")

    # Written beside the target and swapped in (facet soup --force): a kill or a full disk midway
    # left a checkpoint with its config deleted and half its files, the old one lost.
    replace_dir(target, fill)
    return report
