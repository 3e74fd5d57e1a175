"""``facet train METHOD``: train a method on the shared datasets' training splits."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from app.errors import InvalidRequestError
from app.settings import get_settings

if TYPE_CHECKING:
    from embedders.backbone import LoraSettings
    from embedders.methods.common import TrainableDecoderEmbedder

CORPUS_METHODS = ("causal2vec", "gircse", "causal-eos")
INSTRUCTION_METHODS = ("instemb", "inbedder")
METHODS = CORPUS_METHODS + INSTRUCTION_METHODS


def register(cli: typer.Typer) -> None:
    from app.cli import handle_errors

    @cli.command("train")
    @handle_errors
    def train_cmd(
        method: Annotated[str, typer.Argument(help=f"one of: {', '.join(METHODS)}")],
        out: Annotated[Path, typer.Option("--out", "-o", help="checkpoint directory to write")],
        steps: Annotated[int, typer.Option(help="optimiser steps")] = 200,
        batch_size: Annotated[int, typer.Option(help="examples per batch (pairs or triples; in-batch negatives)")] = 16,
        lr: Annotated[float, typer.Option(help="peak learning rate")] = 2e-4,
        seed: Annotated[int, typer.Option()] = 0,
        tasks: Annotated[str, typer.Option(help="comma-separated training sources")] = "",
        max_length: Annotated[int, typer.Option(help="token budget per text")] = 128,
        lora_r: Annotated[int, typer.Option(help="LoRA rank (0 = frozen LLM)")] = 8,
        lora_layers: Annotated[str, typer.Option(help="'all' or e.g. '20-29' (top layers only)")] = "all",
        lora_targets: Annotated[str, typer.Option(help="comma-separated module names")] =
            "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj",
        temperature: Annotated[float | None, typer.Option(help="contrastive tau (default per method)")] = None,
        soft_tokens: Annotated[int, typer.Option(help="GIRCSE: K generated soft tokens in training")] = 5,
        refine_weight: Annotated[float, typer.Option(help="GIRCSE: iterative refinement weight")] = 1.0,
        look_ahead: Annotated[int, typer.Option(help="InstEmb: learnable look-ahead tokens")] = 4,
        distill: Annotated[str, typer.Option(help="InstEmb: distillation loss, mse or kl")] = "mse",
        pooling: Annotated[str | None, typer.Option(
            help="InstEmb: daap / input-last / special-mean / all-mean; InBedder: 1st-gen / avg-gen")] = None,
        time_budget_min: Annotated[float | None, typer.Option(help="stop and save after this many minutes")]
            = None,
        stop_after: Annotated[int | None, typer.Option(
            help="stop and save after this many steps, keeping the --steps schedule (replays a budget-cut run)")]
            = None,
        data_dir: Annotated[Path | None, typer.Option(help="shared datasets root")] = None,
        device: Annotated[str | None, typer.Option(help="cpu / cuda; automatic when unset")] = None,
    ) -> None:
        """Train METHOD and save a checkpoint (LoRA adapter + heads in fp16 + config + train_log.json)."""
        from embedders.backbone import ALL_LINEAR, LoraSettings
        from embedders.training.trainer import TrainConfig, train

        if method not in METHODS:
            raise InvalidRequestError(f"unknown method {method!r}; trainable here: {', '.join(METHODS)}")
        settings = get_settings()
        root = data_dir or settings.shared_data_dir
        if not Path(root).is_dir():
            raise InvalidRequestError(f"datasets not found at {root}; pass --data-dir")
        layers = None
        if lora_layers != "all":
            try:
                lo, _, hi = lora_layers.partition("-")
                layers = tuple(range(int(lo), int(hi or lo) + 1))
            except ValueError as e:
                raise InvalidRequestError(f"--lora-layers must be 'all' or 'A-B', got {lora_layers!r}") from e
        targets = tuple(t.strip() for t in lora_targets.split(",") if t.strip()) or ALL_LINEAR
        lora = LoraSettings(r=lora_r, alpha=2 * max(1, lora_r), target_modules=targets, layers=layers)
        try:
            config = TrainConfig(steps=steps, lr=lr, seed=seed, stop_after=stop_after,
                                 time_budget_s=time_budget_min * 60 if time_budget_min else None)
        except ValueError as e:
            raise InvalidRequestError(str(e)) from e
        sampler, counts = _sampler(method, root, tasks, batch_size, seed)
        try:
            if method in CORPUS_METHODS:
                model = _build(method, lora, max_length, temperature, soft_tokens, refine_weight,
                               device or settings.device)
            else:
                model = _build_instruction(method, lora, max_length, temperature, look_ahead, distill, pooling,
                                           device or settings.device)
        except ValueError as e:  # a config value out of range
            raise InvalidRequestError(str(e)) from e
        command = "facet train " + " ".join(shlex.quote(a) for a in sys.argv[2:])
        log = train(model, sampler, config, out, extra_log={
            "command": command, "tasks": counts, "batch_size": batch_size})
        losses = [h["loss"] for h in log["history"]]
        head = sum(losses[:10]) / max(1, len(losses[:10]))
        tail = sum(losses[-10:]) / max(1, len(losses[-10:]))
        typer.echo(f"trained {method}: {log['steps_done']} steps in {log['seconds']}s; "
                   f"mean loss first 10 steps {head:.4f} -> last 10 {tail:.4f}; saved to {out}")


def _build(method: str, lora: LoraSettings, max_length: int, temperature: float | None, soft_tokens: int,
           refine_weight: float, device: str | None) -> TrainableDecoderEmbedder:
    from embedders.methods.causal2vec import Causal2VecConfig, Causal2VecEmbedder
    from embedders.methods.causal_eos import CausalEOSConfig, CausalEOSEmbedder
    from embedders.methods.gircse import GircseConfig, GircseEmbedder

    # Weights train in fp32 everywhere (the trainer enables TF32 matmuls on a GPU).
    if method == "causal2vec":
        return Causal2VecEmbedder(Causal2VecConfig(lora=lora, max_length=max_length,
                                                   temperature=temperature or 0.05), device=device, dtype="float32")
    if method == "causal-eos":
        return CausalEOSEmbedder(CausalEOSConfig(lora=lora, max_length=max_length,
                                                 temperature=temperature or 0.05), device=device, dtype="float32")
    return GircseEmbedder(GircseConfig(lora=lora, max_length=max_length, temperature=temperature or 0.02,
                                       train_soft_tokens=soft_tokens, refinement_weight=refine_weight),
                          device=device, dtype="float32")


def _sampler(method: str, root: Path, tasks: str, batch_size: int, seed: int) -> tuple[Any, dict[str, int]]:
    """The method's training batches: contrastive pairs, or (input, instruction, answer) triples."""
    names = tuple(t.strip() for t in tasks.split(",") if t.strip())
    try:
        if method in CORPUS_METHODS:
            from embedders.training.data import DEFAULT_TASKS, BatchSampler, build_pairs

            pairs = build_pairs(root, names or DEFAULT_TASKS)
            return BatchSampler(pairs, batch_size, seed=seed), {t: len(p) for t, p in pairs.items()}
        from embedders.training.instruct_data import DEFAULT_TASKS as INSTRUCT_TASKS
        from embedders.training.instruct_data import TripleSampler, build_triples

        triples = build_triples(root, names or INSTRUCT_TASKS)
        return TripleSampler(triples, batch_size, seed=seed), {t: len(v) for t, v in triples.items()}
    except (ValueError, FileNotFoundError) as e:
        raise InvalidRequestError(str(e)) from e


def _build_instruction(method: str, lora: LoraSettings, max_length: int, temperature: float | None,
                       look_ahead: int, distill: str, pooling: str | None,
                       device: str | None) -> TrainableDecoderEmbedder:
    if method == "instemb":
        from embedders.methods.instemb import InstEmbConfig, InstEmbEmbedder

        return InstEmbEmbedder(InstEmbConfig(lora=lora, max_length=max_length, temperature=temperature or 0.1,
                                             look_ahead=look_ahead, distill=distill, pooling=pooling or "daap"),
                               device=device, dtype="float32")
    from embedders.methods.inbedder import InBedderConfig, InBedderEmbedder

    return InBedderEmbedder(InBedderConfig(lora=lora, max_length=max_length, pooling=pooling or "1st-gen"),
                            device=device, dtype="float32")
