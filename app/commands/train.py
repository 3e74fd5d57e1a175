"""``facet train METHOD``: train a registered method on the shared datasets' training splits.

The command knows no method by name: it looks METHOD up in the trainable-method registry
(each method package registers itself), builds its config from the common options plus
``--set key=value`` for the method's own fields, and picks the batch builder and dev suite
the method declares. docs/training.md has the recipes and the commands behind every
committed checkpoint.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from app.commands.common import path_value
from app.errors import DataError, InvalidRequestError, NotFoundError
from app.settings import get_settings
from app.text import plural

if TYPE_CHECKING:
    from embedders.backbone import LoraSettings
    from embedders.registry import TrainableMethod

logger = logging.getLogger(__name__)

# --max-length of a fresh model (a continuation keeps its checkpoint's unless the option is given).
DEFAULT_MAX_LENGTH = 128


def register(cli: typer.Typer) -> None:
    from app.cli import handle_errors

    @cli.command("train")
    @handle_errors
    def train_cmd(
        ctx: typer.Context,
        method: Annotated[str, typer.Argument(help="a trainable method (see `facet train --list`)")] = "",
        out: Annotated[Path | None, typer.Option("--out", "-o", help="checkpoint directory to write",
                                                 parser=path_value)] = None,
        steps: Annotated[int, typer.Option(help="optimiser steps (the learning-rate schedule's length)")] = 200,
        batch_size: Annotated[int, typer.Option(help="examples per batch (pairs or triples; in-batch negatives)")] = 16,
        lr: Annotated[float, typer.Option(help="peak learning rate")] = 2e-4,
        head_lr_mult: Annotated[float, typer.Option(
            help="learning-rate multiplier for a method's heads trained from scratch (Causal2Vec's projector)")]
            = 1.0,
        seed: Annotated[int, typer.Option(
            help="random seed of the fresh LoRA and head weights and of the training data's order "
                 "and sampling (0 to 2**32 - 1)")] = 0,
        tasks: Annotated[str | None, typer.Option(
            help="training sources, optionally weighted: 'snli:0.5,stsb:0.2,scifact' (snli half the "
                 "batches, stsb a fifth, scifact the rest; without weights, by sqrt(size); default: "
                 "the method's mix)")]
            = None,
        max_length: Annotated[int | None, typer.Option(
            help=f"token budget per text (default {DEFAULT_MAX_LENGTH}; with --init-from, the checkpoint's)")]
            = None,
        lora_r: Annotated[int, typer.Option(help="LoRA rank (0 = frozen LLM)")] = 8,
        lora_layers: Annotated[str, typer.Option(help="'all' or e.g. '20-29' (top layers only)")] = "all",
        lora_targets: Annotated[str, typer.Option(help="comma-separated module names")] =
            "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj",
        backbone: Annotated[str, typer.Option(help="decoder backbone: the packaged default, a path or a hub id")]
            = "smollm2-135m-instruct",
        set_: Annotated[list[str] | None, typer.Option(
            "--set", help="KEY=VALUE for a field of the method's config (repeatable), e.g. temperature=0.05, "
                          "template=eos, train_soft_tokens=5, distill=kl, pooling=avg-gen")] = None,
        teacher: Annotated[str | None, typer.Option(
            help="corpus methods: distil this embedder's in-batch similarities (e.g. minilm)")] = None,
        teacher_weight: Annotated[float, typer.Option(help="weight of the teacher term")] = 1.0,
        init_from: Annotated[str | None, typer.Option(
            help="continue from a checkpoint of the same method and backbone (directory or registered name)")] = None,
        init_lora_from: Annotated[str | None, typer.Option(
            help="start a fresh model from the LoRA adapter of a checkpoint of ANOTHER method on the same backbone "
                 "(e.g. GIRCSE from Causal-EOS); its LoRA settings are kept, heads start fresh")] = None,
        eval_every: Annotated[int, typer.Option(
            help="score on the method's dev suite every N steps and keep the best (0 = start and end only)")] = 0,
        dev: Annotated[bool, typer.Option("--dev/--no-dev", help="select the checkpoint on the dev suite")] = True,
        dev_size: Annotated[int | None, typer.Option(
            help="dev subsample size (STS pairs, SciFact queries and documents, CLINC texts); default 400 "
                 "(all 162 SciFact dev queries)")] = None,
        dev_sts_pairs: Annotated[str | None, typer.Option(
            help="corpus methods: STS-B dev pairs to score, a number or 'all' (the 1,500; halves the STS part's "
                 "selection noise at ~3.75x its cost); default 400, or --dev-size")] = None,
        dev_corpus: Annotated[str, typer.Option(
            help="corpus methods: rank the SciFact dev queries over a 'sample' (400 abstracts cut to 64 "
                 "words; cheap) or the 'whole' corpus of whole abstracts (what users search; ~20 min per "
                 "evaluation on one CPU thread; far less on a GPU, not yet measured; --dev-size does "
                 "not cut it)")] = "sample",
        dev_samples: Annotated[int, typer.Option(
            help="instruction methods: average the dev score over this many seeded CLINC val samples "
                 "(one sample's score has an sd of 1-2 points; each sample costs one more evaluation)")] = 1,
        time_budget_min: Annotated[float | None, typer.Option(help="stop and save after this many minutes")]
            = None,
        decay_over: Annotated[str, typer.Option(
            help="'steps': the learning rate decays over --steps; 'time': over --time-budget-min when that "
                 "ends first (a run sized by wall time on hardware of unknown speed)")] = "steps",
        eval_every_min: Annotated[float | None, typer.Option(
            help="also score on the dev suite after this many minutes of training since the last score")]
            = None,
        stop_after: Annotated[int | None, typer.Option(
            help="stop and save after this many steps, keeping the --steps schedule (replays a budget-cut run)")]
            = None,
        last_out: Annotated[Path | None, typer.Option(
            help="also save the weights as they are at the end, best on dev or not (a soup "
                 "ingredient); not on Ctrl-C or SIGTERM, which keep only the best",
            parser=path_value)] = None,
        threads: Annotated[int | None, typer.Option(help="CPU threads for torch (1 for a background job)")] = None,
        grad_checkpointing: Annotated[bool, typer.Option(
            "--grad-checkpointing", help="recompute activations in backward: far less memory, ~1.5x the step time")]
            = False,
        grad_cache: Annotated[int | None, typer.Option(
            help="corpus methods: encode each batch in chunks of N texts and backpropagate through cached "
                 "representations: the whole batch's negatives at one chunk's memory, one extra forward pass")]
            = None,
        data_dir: Annotated[Path | None, typer.Option(help="shared datasets root", parser=path_value)] = None,
        device: Annotated[str | None, typer.Option(help="cpu / cuda; automatic when unset")] = None,
        list_methods: Annotated[bool, typer.Option("--list", help="list the trainable methods and exit")] = False,
        force: Annotated[bool, typer.Option(
            "--force", help="replace a checkpoint already at --out (not needed to continue one in place: "
                            "--init-from DIR --out DIR), or one of another method at --last-out")] = False,
    ) -> None:
        """Train METHOD and save a checkpoint (LoRA adapter + heads in fp16 + config + train_log.json)."""
        from embedders.registry import trainable_methods

        methods = trainable_methods()
        if list_methods:
            for spec in methods.values():
                typer.echo(f"{spec.name:<11} {spec.data:<8} dev={spec.dev_suite:<12} {spec.description}")
            return
        if not method:  # "unknown method ''" read as if a name had been given
            raise InvalidRequestError(f"facet train needs a METHOD, one of {', '.join(methods)} "
                                      "(`facet train --list` describes them)")
        if method not in methods:
            raise InvalidRequestError(f"unknown method {method!r}; trainable: {', '.join(methods)}")
        if out is None:
            raise InvalidRequestError("--out DIR is required: the checkpoint directory to write")
        spec = methods[method]
        # A backbone folder is saved with the checkpoint as an absolute path: saved as typed
        # ("../models/x"), the checkpoint loaded only from the folder it was trained in.
        backbone = backbone_as_saved(backbone)
        if last_out is not None and last_out.resolve() == out.resolve():
            raise InvalidRequestError("--last-out must differ from --out (which keeps the best on dev)")
        if last_out is not None and (out.resolve() in last_out.resolve().parents
                                     or last_out.resolve() in out.resolve().parents):
            # A save replaces its whole folder: the end-of-run --last-out deleted the best
            # checkpoint inside it, and the summary said that nothing had been saved.
            raise InvalidRequestError(f"--out {out} and --last-out {last_out} must not hold one another: "
                                      "saving one replaces its whole folder, with the other inside it")
        check_out_dir(out, "--out")
        if last_out is not None:
            check_out_dir(last_out, "--last-out")
        if not force:
            check_not_replacing(out, spec.name, init_from)
            if last_out is not None:
                check_last_out(last_out, spec.name)
        # Bad numbers and dev options are refused before any model is loaded.
        check_numbers(batch_size=batch_size, seed=seed, time_budget_min=time_budget_min,
                      eval_every_min=eval_every_min, teacher_weight=teacher_weight, max_length=max_length)
        lora = _lora(lora_r, lora_layers, lora_targets)
        if init_from is None and init_lora_from is None:  # otherwise the checkpoint's LoRA settings are kept
            check_something_to_train(spec, lora)
            check_lora_layers(lora, backbone, lora_layers)
        if device is not None:
            from app.settings import DEVICE_CHOICES, device_refused

            device = device.strip().lower()
            if device_refused(device):
                raise InvalidRequestError(f"--device {device!r}: {DEVICE_CHOICES}", param="device")
            from embedders.backbone import pick_device

            # One torch has no support for (`mps` on Linux) with the other options, before the
            # datasets are looked for (it was "datasets not found", exit 3, first).
            pick_device(device, "float32")
        if dev_size is not None and dev_size < 10:
            raise InvalidRequestError(f"--dev-size must be at least 10, got {dev_size}")
        if dev_samples < 1:
            raise InvalidRequestError(f"--dev-samples must be at least 1, got {dev_samples}")
        if dev_corpus not in ("sample", "whole"):
            raise InvalidRequestError(f"--dev-corpus must be 'sample' or 'whole', got {dev_corpus!r}")
        if dev_corpus == "whole":
            _require_dev_suite(spec, "--dev-corpus", "corpus")
        sts_pairs: int | None = None
        if dev_sts_pairs is not None:
            from app.evaluation.dev import sts_pairs_option

            try:
                sts_pairs = sts_pairs_option(dev_sts_pairs)
            except ValueError as e:
                raise InvalidRequestError(str(e)) from e
            _require_dev_suite(spec, "--dev-sts-pairs", "corpus")
        if dev_samples > 1:
            _require_dev_suite(spec, "--dev-samples", "instruction", " (fixed STS-B and SciFact dev sets)")
        if eval_every_min is not None and not dev:  # (it was ignored without a word)
            raise InvalidRequestError("--eval-every-min times the dev evaluations, and --no-dev runs none; "
                                      "to save every N steps without them use --eval-every N")
        if tasks is not None and not tasks.strip():  # (an unset variable: it trained the default mix)
            raise InvalidRequestError("--tasks is empty: name the training sources, or leave the "
                                      "option out for the method's mix")
        tasks = tasks or ""
        _check_tasks(spec, tasks)
        settings = get_settings()
        root = Path(data_dir or settings.shared_data_dir)
        if not root.is_dir():
            raise NotFoundError(f"datasets not found at {root}; pass --data-dir or set FACET_SHARED_DATA_DIR")
        # Ctrl-C while the model, data and dev suite load (a minute or more on a CPU): nothing
        # is written yet, and it said nothing at all.
        with _nothing_saved_if_interrupted():
            if threads is not None:
                if threads < 1:
                    raise InvalidRequestError(f"--threads must be >= 1, got {threads}")
                import torch

                torch.set_num_threads(threads)
            from embedders.training.trainer import TrainConfig, train

            try:
                config = TrainConfig(steps=steps, lr=lr, seed=seed, stop_after=stop_after, eval_every=eval_every,
                                     head_lr_mult=head_lr_mult, decay_over=decay_over, grad_cache=grad_cache,
                                     eval_every_s=eval_every_min * 60 if eval_every_min is not None else None,
                                     time_budget_s=time_budget_min * 60 if time_budget_min is not None else None)
            except ValueError as e:
                raise InvalidRequestError(str(e)) from e
            overrides = parse_settings(set_ or [])
            from embedders.training.trainer import set_seed

            set_seed(seed)  # fresh LoRA and head weights are drawn here: the command alone reproduces them
            if init_from and init_lora_from:
                raise InvalidRequestError("use --init-from (same method) or --init-lora-from (another method), "
                                          "not both")
            if init_lora_from:
                model, init_info = _build_from_lora(spec, max_length or DEFAULT_MAX_LENGTH, backbone, overrides,
                                                    init_lora_from, device or settings.device, lora=lora,
                                                    lora_given=_lora_given(ctx, lora_r, lora_layers, lora_targets))
            else:
                model, init_info = _build(spec, lora, max_length, backbone, overrides, init_from,
                                          device or settings.device, lora_given=_lora_given(ctx, lora_r, lora_layers,
                                                                                            lora_targets))
            check_room_for_mix(spec, model, tasks)  # before the data loads; the first step failed on it
            if dev:
                check_room_for_dev(spec, model)  # before the data loads; the first dev evaluation failed on it
            if not model.trainable_parameters():  # before the data loads; train() would raise it as a traceback
                raise InvalidRequestError(f"{spec.name} has nothing to train with --lora-r 0 (a frozen LLM and no "
                                          "heads of its own); give --lora-r 1 or more")
            if teacher:
                _attach_teacher(model, teacher, teacher_weight, device or settings.device)
            if grad_checkpointing:
                try:
                    model.enable_gradient_checkpointing()
                except ValueError as e:
                    raise InvalidRequestError(str(e)) from e
            if grad_cache is not None:  # before the data loads (train() checks it too, for other callers)
                from embedders.training.grad_cache import require_grad_cache

                try:
                    require_grad_cache(model, spec.name)
                except ValueError as e:
                    raise InvalidRequestError(str(e)) from e
            sampler, data_info = _sampler(spec, model, root, tasks, batch_size, seed)
            evaluate = None
            if dev:
                from app.evaluation.dev import DevEvaluator, DevSizes, one_size

                given: dict[str, Any] = {"clinc_samples": dev_samples}
                if dev_size is not None:
                    given.update(one_size(dev_size))
                if dev_sts_pairs is not None:
                    given["sts_pairs"] = sts_pairs
                sizes = DevSizes.whole_corpus(**given) if dev_corpus == "whole" else DevSizes(**given)
                evaluate = DevEvaluator(root, spec.dev_suite, sizes=sizes)
            from app.cli import command_line
            from app.provenance import run_environment

            command = command_line(ctx)
            extra = {"command": command, "environment": run_environment(), "batch_size": batch_size,
                     "grad_checkpointing": grad_checkpointing,
                     **data_info, **init_info,
                     "teacher": {"name": teacher, "weight": teacher_weight} if teacher else None,
                     "dev_suite": spec.dev_suite if dev else None, "device": str(model.device)}
        from embedders.training.trainer import LastSaveInterrupted

        try:
            log = train(model, sampler, config, out, extra_log=extra, evaluate=evaluate, last_out=last_out)
        except LastSaveInterrupted as stop:
            # The run had ended and --out is whole: said as such ("stopped again while saving:
            # --out keeps the checkpoint it held before this save", of the save that ran).
            assert last_out is not None
            typer.echo(summary(stop.log, out))
            typer.echo(_stopped_while_saving(last_out, "stopped while saving the last weights"), err=True)
            raise typer.Exit(130) from None
        except KeyboardInterrupt:
            # A second Ctrl-C while the first one's save ran (it exited 130 without a word): a
            # save is swapped in by renames, so --out holds the checkpoint it had, or none.
            typer.echo(_stopped_while_saving(out), err=True)
            raise typer.Exit(130) from None
        typer.echo(summary(log, out, last_out))
        if log["stopped"] == "interrupted":
            raise typer.Exit(130)


# Tokens of text the --max-length a refusal names leaves beside the longest prompt of the mix.
MIN_TEXT_TOKENS = 16


def check_room_for_mix(spec: TrainableMethod, model: Any, tasks: str) -> None:
    """Refuse a ``max_length`` whose prompt, under one of the training mix's instructions (a
    pair method's fixed task instructions, known from the mix's names), leaves the text no
    token: the first step failed on it with "the instruction is too long for this embedder ...
    shorten the instruction", though the user gave none. Checked with the loaded model's own
    prompt tokenizer (its template, end tokens and reserved positions), before the data loads.

    Raises:
        InvalidRequestError: naming the instruction's task, what it takes and the smallest
            ``--max-length`` that leaves the text ``MIN_TEXT_TOKENS``.
    """
    from embedders.base import PromptTokenizer
    from embedders.contract import Role

    if spec.data != "pairs":  # the triple methods' are the data's questions: their sampler leaves out those too long
        return
    from embedders.training.data import DEFAULT_MIX, INSTRUCTIONS, parse_mix

    try:
        mix = parse_mix(tasks) or dict(DEFAULT_MIX)
    except ValueError:
        return  # the sampler says what is wrong with it
    tokenize = getattr(model, "_tokenize", None)
    if not isinstance(tokenize, PromptTokenizer):
        return
    costs = {task: max(tokenize.prompt_length(role, instruction)
                       for role, instruction in ((Role.QUERY, INSTRUCTIONS.get(task)), (Role.QUERY, None),
                                                 (Role.DOCUMENT, None)))
             for task in mix}
    longest = _no_room(model, tokenize, costs)
    if longest is None:
        return
    task, cost, kept, least = longest
    what = (f"the longest, {task}'s, takes {cost} tokens with the template" if INSTRUCTIONS.get(task)
            else f"the template alone takes {cost} tokens")
    raise InvalidRequestError(f"--max-length {model.max_length} leaves no room for text under the training mix's "
                              f"instructions ({what}{kept}): use --max-length {least} or more")


def _no_room(model: Any, tokenize: Any, costs: dict[str, int]) -> tuple[str, int, str, int] | None:
    """Of ``costs`` (each instruction's prompt length, by name), the longest where it leaves the
    text no token at ``model``'s ``max_length``: its name, its cost, the words for the positions
    the method keeps (Causal2Vec's token) and the ``--max-length`` that leaves the text
    ``MIN_TEXT_TOKENS``; None where every one leaves room (``check_room_for_mix``'s and
    ``check_room_for_dev``'s rule)."""
    name, cost = max(costs.items(), key=lambda item: item[1])
    if cost < tokenize.max_length:
        return None
    reserved = model.max_length - tokenize.max_length
    kept = f", and {reserved} more are reserved" if reserved else ""
    return name, cost, kept, cost + reserved + MIN_TEXT_TOKENS


def check_room_for_dev(spec: TrainableMethod, model: Any) -> None:
    """Refuse a ``max_length`` whose prompt, under one of the dev suite's instructions
    (``app.evaluation.dev.dev_instructions``), leaves the text no token: the run trained, then
    stopped at its first dev evaluation with "the instruction is too long for this embedder ...
    shorten the instruction", an instruction the user never gave. Checked with the loaded
    model's prompt tokenizer, before the data loads; a shorter room only cuts the dev texts
    (logged), as ``encode`` does in evaluation.

    Raises:
        InvalidRequestError: naming the instruction, what it takes and the ``--max-length``
            that leaves the text ``MIN_TEXT_TOKENS`` under every one (or ``--no-dev``).
    """
    from app.evaluation.dev import dev_instructions
    from embedders.base import PromptTokenizer
    from embedders.contract import Role

    tokenize = getattr(model, "_tokenize", None)
    if not isinstance(tokenize, PromptTokenizer):
        return
    costs = {what: tokenize.prompt_length(Role(role), instruction)
             for what, (role, instruction) in dev_instructions(spec.dev_suite).items()}
    longest = _no_room(model, tokenize, costs)
    if longest is None:
        return
    what, cost, kept, least = longest
    raise InvalidRequestError(
        f"--max-length {model.max_length} leaves no room for text under the dev suite's instructions (the "
        f"longest, {what}'s, takes {cost} tokens with the template{kept}): "
        f"use --max-length {least} or more, or --no-dev")


def _stopped_while_saving(out: Path, lead: str = "stopped again while saving") -> str:
    """What a run stopped again while it saved left in ``out``."""
    from embedders.base import CONFIG_FILE

    if not (out / CONFIG_FILE).is_file():
        return f"{lead}: nothing saved to {out}"
    try:
        steps = json.loads((out / "train_log.json").read_text()).get("weights_steps")
    except (OSError, ValueError, AttributeError):
        steps = None
    had = f" ({plural(int(steps), 'step')} in all)" if isinstance(steps, int) else ""
    return f"{lead}: {out} keeps the checkpoint it held before this save{had}"


@contextlib.contextmanager
def _nothing_saved_if_interrupted() -> Iterator[None]:
    """Ctrl-C (KeyboardInterrupt) or SIGTERM inside: say on stderr that nothing was saved, and
    exit 130 (SIGTERM while the model loaded ended the run with 143 and no word)."""
    from embedders.training.trainer import sigterm_as_interrupt

    try:
        with sigterm_as_interrupt():
            yield
    except KeyboardInterrupt:
        typer.echo("nothing saved: stopped before the first step", err=True)
        raise typer.Exit(130) from None


def _lora_given(ctx: typer.Context, r: int, layers: str, targets: str) -> dict[str, str]:
    """The ``--lora-*`` options given on the command line (not left at their defaults), as
    ``{flag: value}``."""
    values = {"lora_r": ("--lora-r", str(r)), "lora_layers": ("--lora-layers", layers),
              "lora_targets": ("--lora-targets", targets)}
    # By the source's name: typer's ParameterSource is its own copy of click's.
    given = {name for name in values if getattr(ctx.get_parameter_source(name), "name", "DEFAULT")
             not in ("DEFAULT", "DEFAULT_MAP")}
    return {flag: value for name, (flag, value) in values.items() if name in given}


def _require_dev_suite(spec: TrainableMethod, flag: str, suite: str, why: str = "") -> None:
    """Refuse ``flag`` for a method whose dev suite is not ``suite`` (before any model loads)."""
    if spec.dev_suite != suite:
        raise InvalidRequestError(f"{flag} is for the {suite} dev suite; {spec.name}'s dev suite is "
                                  f"{spec.dev_suite!r}{why}")


def summary(log: dict[str, Any], out: Path, last_out: Path | None = None) -> str:
    """One paragraph: steps, cost, loss trend, dev selection, where it went."""
    losses = [h["loss"] for h in log["history"] if "loss" in h]
    from embedders.base import CONFIG_FILE

    lines = []
    # The time of a step alone: the run's seconds hold its dev scoring too (the progress bar's
    # s/step, 23, beside the summary's 8.7 read as a contradiction).
    done = (f"trained {log['method']}: {plural(log['steps_done'], 'step')} in {log['seconds']}s "
            f"({log['seconds_per_step']} s/step{' trained, dev scoring besides' if log.get('dev_curve') else ''}, "
            f"{log['stopped']})")
    if losses:  # no step, no loss: the mean of none read as a loss of 0.0000
        if len(losses) >= 20:
            head = sum(losses[:10]) / 10
            tail = sum(losses[-10:]) / 10
            trend = f"mean loss first 10 steps {head:.4f} -> last 10 {tail:.4f}"
        else:  # ("first 10 steps 3.1047 -> last 10 3.1047" of a run of 4)
            trend = (f"loss {losses[0]:.4f} at the first step -> {losses[-1]:.4f} at the last"
                     if len(losses) > 1 else f"loss {losses[0]:.4f}")
        lines.append(f"{done}; {trend}")
    elif log["history"]:
        lines.append(done)
    best = log.get("best")
    if best:
        start = log["dev_curve"][0]
        lines.append(f"dev score {start['score']} at step {start['step']} -> best {best['score']} at step "
                     f"{best['step']} ({', '.join(f'{k} {v}' for k, v in best.items() if '/' in k)})")
    scored = "dev_curve" in log
    if not scored and not log["history"]:
        # No step and nothing scored: the trainer saves nothing (a checkpoint already at
        # ``out``, the one an in-place continuation started from, is not this run's).
        kept = f" ({out} is left as it was)" if (out / CONFIG_FILE).is_file() else ""
        lines.append(f"nothing saved: stopped before the first step{kept}")
    elif not (out / CONFIG_FILE).is_file() or (scored and not best):
        lines.append(f"nothing saved to {out}: the run stopped before its first checkpoint")
    elif best:
        lines.append(f"saved the step-{best['step']} weights ({plural(log['weights_steps'], 'step')} "
                     f"in all) to {out}")
    else:
        lines.append(f"saved to {out}")
    if last_out is not None and log["stopped"] != "interrupted" and (last_out / CONFIG_FILE).is_file():
        steps = log.get("init_weights_steps", 0) + len(log["history"])
        lines.append(f"saved the last weights ({plural(steps, 'step')} in all) to {last_out}")
    elif last_out is not None and log["stopped"] == "interrupted":
        # (An interrupt may land inside an optimizer step: those weights are not saved.) Said:
        # an earlier run's last weights there read as this run's, and a new folder was simply
        # not made.
        held = (" (it holds an earlier run's weights)" if (last_out / CONFIG_FILE).is_file()
                else "")
        lines.append(f"the last weights were not saved to {last_out}{held}: a run stopped by "
                     "Ctrl-C or SIGTERM saves only its best")
    return "\n".join(lines)


# What a checkpoint directory holds (embedders.base.CONFIG_FILE, the methods' ADAPTER_FILE and
# HEADS_FILE, the trainer's log; named here so that the CLI needs no torch to check --out).
CHECKPOINT_FILES = frozenset({"facet_config.json", "adapter.safetensors", "heads.safetensors",
                              "train_log.json"})
# What a run killed while replacing its log leaves beside those files (the trainer's
# ``_write_json`` temporary file, which the next write replaces): it refused the continuation
# in place, as "other files".
CHECKPOINT_LEFTOVERS = frozenset({".train_log.json.tmp"})


def check_out_dir(out: Path, flag: str) -> None:
    """Refuse an output that is a file, or a directory holding anything but a checkpoint's
    files: a save replaces the whole directory (by renames, so a kill never leaves half a
    checkpoint), which deleted whatever else it held.

    Raises:
        InvalidRequestError: as above, or ``-`` (standard output); nothing is written.
    """
    from app.files import refuse_stdout_folder

    refuse_stdout_folder(out, flag, "a checkpoint")
    here = Path.cwd().resolve()
    if out.resolve() == here or out.resolve() in here.parents:
        # A save moves the folder aside and renames a new one in: ``--out .`` trained, then
        # failed its first save on a traceback ("PosixPath('.') has an empty name").
        raise InvalidRequestError(f"{flag} {out} is the current folder or holds it; a save replaces the whole "
                                  "folder, so give a new directory below it (e.g. runs/NAME)")
    if out.exists() and not out.is_dir():
        raise InvalidRequestError(f"{flag} {out} is a file; give a directory (a new one, or a checkpoint "
                                  "to replace)")
    if out.is_dir():
        others = sorted(p.name for p in out.iterdir() if p.name not in CHECKPOINT_FILES | CHECKPOINT_LEFTOVERS)
        if others:
            shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
            raise InvalidRequestError(f"{flag} {out} holds other files ({shown}), which saving a checkpoint "
                                      "there would delete; give a new directory or an existing checkpoint")
    check_out_writable(out, flag)


def check_out_writable(out: Path, flag: str) -> None:
    """Refuse an output that cannot be written, before anything loads: a save makes a sibling
    directory and renames it in, so the nearest existing folder at or above ``out``'s parent
    must take a new entry (found at save time, a read-only ``--last-out`` lost a whole run's
    end weights in a traceback).

    Raises:
        InvalidRequestError: as above; nothing is left behind.
    """
    import os

    from app.files import probe_writable

    place = out.absolute().parent
    while not place.exists() and place != place.parent:
        place = place.parent
    try:
        if not place.is_dir():
            raise NotADirectoryError(f"{place} is not a directory")
        probe_writable(place / f".facet-train-probe-{os.getpid()}")
    except OSError as e:
        raise InvalidRequestError(f"{flag} {out} cannot be written ({place}: "
                                  f"{e.strerror or e}); give a directory you can write") from e


def check_not_replacing(out: Path, method: str, init_from: str | None) -> None:
    """Refuse an ``--out`` that holds a checkpoint (without ``--force``), unless it is the
    ``--init-from`` checkpoint being continued in place: the step-0 save replaced it within
    seconds, even a committed checkpoint of another method.

    Raises:
        InvalidRequestError: as above; nothing is written.
    """
    from embedders.base import CONFIG_FILE, recover_checkpoint

    # A swap killed between its renames left the checkpoint as `.NAME.old`, which the run puts
    # back only later: judged as it is, the missing `--out` let the run replace it unasked.
    recover_checkpoint(out)
    if not (out / CONFIG_FILE).is_file():
        return
    if init_from is not None and checkpoint_source(init_from).resolve() == out.resolve():
        return  # continuing in place
    saved = _saved_method(out)
    what = f"{_article(saved)} {saved!r} checkpoint" if isinstance(saved, str) else "a checkpoint"
    other = f" (training {method!r})" if isinstance(saved, str) and saved != method else ""
    raise InvalidRequestError(f"--out {out} already holds {what}{other}, which the first save would replace; "
                              "give a new directory, --init-from it to continue it in place, or --force to "
                              "replace it")


def check_last_out(last_out: Path, method: str) -> None:
    """Refuse a ``--last-out`` that holds a checkpoint of another method (or one whose method
    cannot be read) without ``--force``: the run's end replaced it without a word (a typo for
    ``checkpoints/gircse`` replaced the shipped GIRCSE with a Causal-EOS run's weights). One of
    the same method is replaced, as a run's last weights are meant to be.

    Raises:
        InvalidRequestError: as above; nothing is written.
    """
    from embedders.base import CONFIG_FILE, recover_checkpoint

    recover_checkpoint(last_out)
    if not (last_out / CONFIG_FILE).is_file():
        return
    saved = _saved_method(last_out)
    if saved == method:
        return
    what = (f"{_article(saved)} {saved!r} checkpoint" if isinstance(saved, str)
            else "a checkpoint whose method cannot be read")
    raise InvalidRequestError(f"--last-out {last_out} already holds {what} (training {method!r}), which the "
                              "run's end would replace; give a new directory, or --force to replace it")


def _article(word: str) -> str:
    """"an" before a vowel ("an 'instemb' checkpoint"), else "a"."""
    return "an" if word[:1].lower() in "aeiou" else "a"


def _saved_method(directory: Path) -> Any:
    """The ``method`` a checkpoint's config names (None where it cannot be read)."""
    from embedders.base import CONFIG_FILE

    try:
        return json.loads((directory / CONFIG_FILE).read_text(encoding="utf-8")).get("method")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return None


def check_numbers(*, batch_size: int, seed: int, time_budget_min: float | None, eval_every_min: float | None,
                  teacher_weight: float, max_length: int | None) -> None:
    """Refuse option values that would fail (or be ignored) only after the model loads.

    Raises:
        InvalidRequestError: naming the option.
    """
    if batch_size < 2:  # in-batch negatives: a batch of 1 was refused once the data had loaded
        raise InvalidRequestError(f"--batch-size must be >= 2 (the other texts of a batch are its negatives), "
                                  f"got {batch_size}")
    if not 0 <= seed < 2**32:  # numpy's seed range; -1 was a ValueError traceback
        raise InvalidRequestError(f"--seed must be between 0 and 2**32 - 1, got {seed}")
    if max_length is not None and max_length < 1:
        raise InvalidRequestError(f"--max-length must be >= 1, got {max_length}")
    for flag, value in (("--time-budget-min", time_budget_min), ("--eval-every-min", eval_every_min)):
        # 0 was ignored (no budget), a negative budget stopped after one step, NaN meant none.
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise InvalidRequestError(f"{flag} must be a positive number of minutes, got {value}")
    if not (teacher_weight >= 0 and math.isfinite(teacher_weight)):
        raise InvalidRequestError(f"--teacher-weight must be a finite number >= 0, got {teacher_weight}")


def check_something_to_train(spec: TrainableMethod, lora: LoraSettings) -> None:
    """Refuse ``--lora-r 0`` (a frozen LLM) for a method with no trainable modules of its own:
    it was refused only once the model had loaded. Causal2Vec (its projector) and InstEmb (its
    look-ahead embeddings) train their heads alone; Causal-EOS, GIRCSE and InBedder have none.
    A method whose parameters this cannot tell is left to the check after the model loads.

    Raises:
        InvalidRequestError: as above.
    """
    from embedders.methods.common import TrainableDecoderEmbedder

    if lora.r > 0:
        return
    cls, base = spec.model_class, TrainableDecoderEmbedder
    if not (isinstance(cls, type) and issubclass(cls, base)):
        return
    if cls._build_heads is base._build_heads and cls.trainable_parameters is base.trainable_parameters:
        raise InvalidRequestError(f"{spec.name} has nothing to train with --lora-r 0 (a frozen LLM and no "
                                  "heads of its own); give --lora-r 1 or more")


def check_lora_layers(lora: LoraSettings, backbone: str, layers_spec: str) -> None:
    """Refuse ``--lora-layers`` past the backbone's last layer, from its config (no weights load):
    a range wholly past it was peft's raw "Target modules not found" error, and one partly past it
    trained (and saved in the config) layers that do not exist.

    Raises:
        InvalidRequestError: naming the backbone's layer count.
    """
    from embedders.backbone import layer_count

    if lora.r == 0 or not lora.layers:
        return
    count = layer_count(backbone)  # None: unreadable here, and the load says why
    if count is not None and max(lora.layers) >= count:
        raise InvalidRequestError(f"--lora-layers {layers_spec} is past the last layer of backbone {backbone!r}, "
                                  f"which has {count} layers (0-{count - 1})")


def parse_settings(items: list[str]) -> dict[str, str]:
    """``["k=v", ...]`` -> ``{"k": "v"}``.

    Raises:
        InvalidRequestError: an item is not KEY=VALUE, or a KEY is given twice with two values
            (the last won without a word: a typo'd run trained with the other one).
    """
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidRequestError(f"--set takes KEY=VALUE, got {item!r}")
        key, value = key.strip(), value.strip()
        if out.get(key, value) != value:
            raise InvalidRequestError(f"--set {key} is given twice, {out[key]!r} and {value!r}: "
                                      "give it once")
        out[key] = value
    return out


def _typed(config_class: Any, base: Any, values: dict[str, str]) -> dict[str, Any]:
    """Parse ``--set`` strings by the type of each field's current value in ``base``."""
    fields = {f.name for f in dataclasses.fields(config_class)}
    fixed = {"lora", "prompts", "backbone", "max_length"}
    typed: dict[str, Any] = {}
    for key, raw in values.items():
        if key not in fields or key in fixed:
            settable = sorted(fields - fixed)
            raise InvalidRequestError(f"--set {key}: not a settable field of {config_class.__name__}; "
                                      f"settable: {', '.join(settable)}")
        current = getattr(base, key)
        try:
            if isinstance(current, bool):
                if raw.lower() not in ("true", "false", "1", "0"):
                    raise ValueError(raw)
                typed[key] = raw.lower() in ("true", "1")
            else:
                typed[key] = type(current)(raw)
                if isinstance(typed[key], float) and not math.isfinite(typed[key]):
                    raise ValueError(raw)
        except ValueError as e:
            wanted = {"int": "an integer", "float": "a finite number", "str": "a string"}.get(
                type(current).__name__, f"a value of type {type(current).__name__}")
            raise InvalidRequestError(f"--set {key}={raw!r}: expected {wanted}") from e
    return typed


def _lora(r: int, layers_spec: str, targets_spec: str) -> LoraSettings:
    from embedders.backbone import ALL_LINEAR, LoraSettings

    layers = None
    if layers_spec != "all":
        try:
            lo, _, hi = layers_spec.partition("-")
            first, last = int(lo), int(hi or lo)
        except ValueError as e:
            raise InvalidRequestError(f"--lora-layers must be 'all' or 'A-B', got {layers_spec!r}") from e
        if first < 0 or last < first:  # an empty range adapted every layer (peft reads [] as all)
            raise InvalidRequestError(f"--lora-layers must be 'all' or 'A-B' with 0 <= A <= B, got {layers_spec!r}")
        layers = tuple(range(first, last + 1))
    targets = tuple(t.strip() for t in targets_spec.split(",") if t.strip()) or ALL_LINEAR
    try:
        return LoraSettings(r=r, alpha=2 * max(1, r), target_modules=targets, layers=layers)
    except ValueError as e:
        raise InvalidRequestError(str(e)) from e


def _build(spec: TrainableMethod, lora: LoraSettings, max_length: int | None, backbone: str, overrides: dict[str, str],
           init_from: str | None, device: str | None, *, lora_given: dict[str, str] | None = None,
           ) -> tuple[Any, dict[str, Any]]:
    """A fresh model, or one continuing ``init_from`` (whose architecture it keeps). Weights are fp32.

    ``max_length`` None: the default for a fresh model, the checkpoint's own for ``init_from``
    (its served budget, e.g. GIRCSE's 256, was reset to the option's default by every continuation).
    ``lora_given``: the ``--lora-*`` options given (``{flag: value}``); with ``init_from``, those
    that differ from the checkpoint's settings are said to be ignored.
    """
    config_class = spec.model_class.config_class
    if init_from is None:
        try:
            base = config_class(lora=lora, max_length=max_length or DEFAULT_MAX_LENGTH, backbone=backbone)
            config = dataclasses.replace(base, **_typed(config_class, base, overrides))
            _check_training_positions(config)
            return spec.model_class(config, device=device, dtype="float32"), {"init_from": None}
        except ValueError as e:  # a config value out of range
            raise InvalidRequestError(str(e)) from e
    path, meta = _init_checkpoint(init_from, spec.name, backbone)
    # Recorded as given (_check_backbone found them the same): an older checkpoint's relative
    # folder was carried into the continuation, loadable only from its training folder.
    from embedders.base import CONFIG_FILE
    from embedders.errors import CheckpointError

    try:
        read = config_class.from_dict(meta["config"])
    except CheckpointError as e:  # named as `facet eval` names it: which file
        raise CheckpointError(f"{path / CONFIG_FILE}: {e}") from e
    saved = dataclasses.replace(read, backbone=backbone)
    ignored = _ignored_lora_options(lora, saved.lora, lora_given or {})
    if ignored:
        logger.info("--init-from keeps the checkpoint's LoRA settings (%s); ignored: %s",
                    saved.lora.to_dict(), ", ".join(ignored))
    try:
        given = {"max_length": max_length} if max_length is not None else {}
        config = dataclasses.replace(saved, **given, **_typed(config_class, saved, overrides))
        _check_training_positions(config)
    except ValueError as e:
        raise InvalidRequestError(str(e)) from e
    model = spec.model_class.load(path, meta, device, dtype="float32", config=config)
    from embedders.registry import shown_path

    return model, {"init_from": shown_path(path), **_prior_runs(path)}


def _ignored_lora_options(lora: LoraSettings, saved: LoraSettings, given: dict[str, str]) -> list[str]:
    """The given ``--lora-*`` options (``{flag: value}``) whose setting differs from the
    checkpoint's ``saved`` one, as ``"--flag value"``."""
    differs = {"--lora-r": lora.r != saved.r, "--lora-layers": lora.layers != saved.layers,
               "--lora-targets": set(lora.target_modules) != set(saved.target_modules)}
    return [f"{flag} {value}" for flag, value in given.items() if differs.get(flag, True)]


def _check_training_positions(config: Any) -> None:
    """Refuse a ``max_length`` that, with the tokens the method generates after the text while
    training or encoding (GIRCSE's soft tokens, InBedder's avg-gen answer tokens), is past the
    backbone's positions, read from its config before any weights load (where it cannot be
    read, the loaded model checks).

    Raises:
        ValueError: as ``embedders.methods.common.check_positions``.
    """
    from embedders.methods import common

    common.check_positions(common.position_limit(config.backbone), config.backbone, config.max_length, config,
                           training=True)


def _build_from_lora(spec: TrainableMethod, max_length: int, backbone: str, overrides: dict[str, str],
                     source: str, device: str | None, *, lora: LoraSettings | None = None,
                     lora_given: dict[str, str] | None = None) -> tuple[Any, dict[str, Any]]:
    """A fresh ``spec`` model whose LoRA adapter is copied from another method's checkpoint.

    ``lora``, ``lora_given``: the ``--lora-*`` options' settings and those given (``{flag: value}``);
    the adapter keeps the checkpoint's settings, so those given that differ are said to be ignored
    (as ``_build`` says them for ``--init-from``), before the model loads.
    """

    from embedders.backbone import LoraSettings, load_lora_state_dict
    from embedders.errors import CheckpointError
    from embedders.methods.common import ADAPTER_FILE, read_weights

    path, meta = _resolve_checkpoint(source, "--init-lora-from")
    if meta.get("method") == spec.name:
        raise InvalidRequestError(f"--init-lora-from {path} is a {spec.name!r} checkpoint: "
                                  "continue it with --init-from")
    _check_backbone(path, meta, backbone, "--init-lora-from")
    saved = LoraSettings.from_dict(meta.get("config", {}).get("lora", {}))
    if saved.r == 0 or not (path / ADAPTER_FILE).is_file():
        raise InvalidRequestError(f"--init-lora-from {path} has no LoRA adapter to start from")
    # A damaged adapter (or one of NaNs) is said as --init-from says it, before the backbone
    # loads (it was safetensors' own traceback, exit 1, after it).
    weights = read_weights(path / ADAPTER_FILE)
    ignored = _ignored_lora_options(lora, saved, lora_given or {}) if lora is not None else []
    if ignored:
        logger.info("--init-lora-from keeps the checkpoint's LoRA settings (%s); ignored: %s",
                    saved.to_dict(), ", ".join(ignored))
    model, _ = _build(spec, saved, max_length, backbone, overrides, None, device)
    try:
        load_lora_state_dict(model.backbone, {k: v.float() for k, v in weights.items()})
    except CheckpointError as e:
        raise InvalidRequestError(f"--init-lora-from {path}: {e}") from e
    from embedders.registry import shown_path

    return model, {"init_lora_from": shown_path(path), "init_lora_method": meta.get("method"),
                   **_prior_runs(path)}


# What a continued checkpoint's log keeps of each run behind its weights (not the per-step
# history: the committed logs stay small).
_RUN_SUMMARY = ("command", "init_from", "init_lora_from", "steps_done", "weights_steps",
                "batch_size", "device", "seconds_per_step", "stopped", "best", "dev_curve",
                "soup", "note", "where", "inference_selection", "not_kept",
                # what the run was (its commit and machine, its training and method settings,
                # teacher and mix): a continuation kept only its command and curve
                "environment", "config", "method_config", "teacher", "tasks", "mix")


# How a continuation records a run behind its weights whose log never got its end.
# (The log holds no process to ask: a run still going when its checkpoint was continued reads so too.)
KILLED_RUN = "no final log: killed, or still running when continued (its log was last written at a save)"


def _prior_runs(path: Path) -> dict[str, Any]:
    """The steps behind ``path``'s weights and the runs that made them, for the new log.

    A run continuing a checkpoint (in place: ``--out X --init-from X``) wrote a fresh log and
    dropped the history the old one held (``earlier_runs``, notes); it is carried over, with
    the old log's own run appended as a summary. A soup's steps are its longest ingredient's.
    """
    from embedders.training.soup import weights_steps

    log_path = path / "train_log.json"
    try:
        prior = json.loads(log_path.read_text(encoding="utf-8")) if log_path.is_file() else {}
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InvalidRequestError(f"{log_path} is not valid JSON ({e}); fix or remove it") from e
    if not isinstance(prior, dict) or not prior:
        return {"init_weights_steps": 0}
    earlier = [r for r in prior.get("earlier_runs") or [] if isinstance(r, dict)]
    summary = {k: prior[k] for k in _RUN_SUMMARY if k in prior}
    if summary.get("stopped") == "running":
        # Its log last written at a save while it ran, never at its end (kill -9, a power
        # cut, or the run still going): "running" was carried into the history for good.
        summary["stopped"] = KILLED_RUN
    return {"init_weights_steps": weights_steps(prior),
            "earlier_runs": [*earlier, summary] if summary else earlier}


def checkpoint_source(name_or_path: str) -> Path:
    """The checkpoint directory ``name_or_path`` names for ``--init-from`` and ``facet soup``: a
    registered name is the registered checkpoint, as every command that loads one reads it (a
    folder of that name in the working directory is ``./NAME``: said when it is left aside);
    else the path, else the name under ``checkpoint_dir()``."""
    from embedders.registry import checkpoint_dir, is_checkpoint_dir, registered_checkpoint, warn_if_shadowed

    path = registered_checkpoint(name_or_path) or Path(name_or_path)
    warn_if_shadowed(name_or_path)
    if not is_checkpoint_dir(path) and is_checkpoint_dir(checkpoint_dir() / name_or_path):
        path = checkpoint_dir() / name_or_path
    return path


def _resolve_checkpoint(name_or_path: str, flag: str) -> tuple[Path, dict[str, Any]]:
    from embedders.base import CONFIG_FILE, check_format_version
    from embedders.errors import CheckpointError
    from embedders.registry import checkpoint_dir, config_missing, is_checkpoint_dir

    path = checkpoint_source(name_or_path)
    if not is_checkpoint_dir(path):
        damaged = config_missing(path)
        if damaged is not None:
            raise DataError(f"{flag} {name_or_path!r}: {damaged}")
        raise NotFoundError(f"{flag} {name_or_path!r}: no checkpoint there (a directory with {CONFIG_FILE}, "
                            f"or a name under {checkpoint_dir()})")
    try:
        meta = json.loads((path / CONFIG_FILE).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(f"{flag} {name_or_path!r}: {path / CONFIG_FILE} is not valid JSON ({e}); "
                        "the checkpoint is damaged") from e
    if not isinstance(meta, dict):
        raise DataError(f"{flag} {name_or_path!r}: {path / CONFIG_FILE} is not a JSON object; "
                        "the checkpoint is damaged")
    try:
        check_format_version(meta, path)
    except CheckpointError as e:
        raise DataError(f"{flag} {name_or_path!r}: {e}") from e
    return path, meta


def backbone_as_saved(backbone: str) -> str:
    """``--backbone`` as a checkpoint records it: a folder that exists here as its absolute
    path (loadable from any working directory), a packaged name or hub id as given."""
    from embedders.backbone import DEFAULT_DECODER, DEFAULT_ENCODER

    if backbone.lower() in (DEFAULT_DECODER, DEFAULT_ENCODER):
        return backbone
    folder = Path(backbone).expanduser()
    return str(folder.resolve()) if folder.is_dir() else backbone


def _check_backbone(path: Path, meta: dict[str, Any], backbone: str, flag: str) -> None:
    from embedders.backbone import DEFAULT_DECODER, same_backbone
    from embedders.base import CONFIG_FILE

    config = meta.get("config")
    if not isinstance(config, dict):  # (a traceback: "'NoneType' object has no attribute 'get'")
        raise DataError(f"{flag} {path}: {path / CONFIG_FILE} has no \"config\" object; the "
                        "checkpoint is damaged")
    # A config that names none loads with the default backbone, as every other command reads
    # it ("trained on backbone None": no --backbone could match that).
    saved_backbone = config.get("backbone", DEFAULT_DECODER)
    # (an older checkpoint may name its backbone folder relative, as it was typed in the folder
    # it was trained in: the same folder, named from another, is the same backbone)
    if not same_backbone(str(saved_backbone), backbone) and \
            backbone_as_saved(str(saved_backbone)) != backbone_as_saved(backbone):
        raise InvalidRequestError(f"{flag} {path} was trained on backbone {saved_backbone!r}, not {backbone!r}; "
                                  "pass --backbone to match it, or start without it")


def _init_checkpoint(name_or_path: str, method: str, backbone: str) -> tuple[Path, dict[str, Any]]:
    """Resolve and check an ``--init-from`` checkpoint.

    Raises:
        NotFoundError: not a checkpoint directory nor a registered checkpoint name.
        InvalidRequestError: a checkpoint of another method or backbone.
    """
    path, meta = _resolve_checkpoint(name_or_path, "--init-from")
    saved = meta.get("method")
    if saved != method:
        what = (f"a checkpoint of {saved!r}" if saved is not None else
                "a checkpoint whose facet_config.json names no method")
        article = "an" if method[:1] in "aeiou" else "a"
        raise InvalidRequestError(f"--init-from {path} is {what}; training {method!r} needs {article} "
                                  f"{method!r} checkpoint (or --init-lora-from to copy only its adapter)")
    _check_backbone(path, meta, backbone, "--init-from")
    return path, meta


def _attach_teacher(model: Any, name: str, weight: float, device: str | None) -> None:
    from embedders import load_embedder

    if not hasattr(model, "set_teacher"):
        raise InvalidRequestError(f"--teacher: {model.method} does not train against a teacher's similarities")
    if not (weight >= 0 and math.isfinite(weight)):  # also checked up front (check_numbers)
        raise InvalidRequestError(f"--teacher-weight must be a finite number >= 0, got {weight}")
    model.set_teacher(load_embedder(name, device=device), weight)


def _check_tasks(spec: TrainableMethod, tasks: str) -> None:
    """``--tasks`` refused before anything loads (a ``nan`` weight failed the first step)."""
    from embedders.training.samplers import check_tasks

    try:
        check_tasks(spec.data, tasks)
    except ValueError as e:
        raise InvalidRequestError(f"--tasks: {e}") from None


def _sampler(spec: TrainableMethod, model: Any, root: Path, tasks: str, batch_size: int,
             seed: int) -> tuple[Any, dict[str, Any]]:
    """The method's training batches and what to log about them.

    A triple whose question (its instruction) leaves the text no room under the model's
    ``max_length`` is left out, and the log says how many and the ``--max-length`` that keeps
    them: a run at ``--max-length 48`` stopped at the first long SQuAD question ("the instruction
    is too long for this embedder ... shorten the instruction", of the data's, not the user's).

    Raises:
        InvalidRequestError: a bad source or weight, a missing file, or no triple left.
    """
    from embedders.training.samplers import build_sampler

    prompt_length: Callable[[str], int] | None = getattr(model, "training_prompt_length", None)
    lengths: dict[str, int] = {}  # by instruction: the classification sources repeat a few

    def keep(triple: Any) -> bool:
        assert prompt_length is not None
        if triple.instruction not in lengths:
            lengths[triple.instruction] = prompt_length(triple.instruction)
        return lengths[triple.instruction] < model.max_length

    try:
        sampler, info = build_sampler(spec.data, root, tasks, batch_size, seed,
                                      keep if prompt_length is not None else None)
    except ValueError as e:
        if lengths and max(lengths.values()) >= model.max_length and str(e) == "no training triples":
            raise InvalidRequestError(_left_out(model.max_length, lengths, None)) from None
        raise InvalidRequestError(str(e)) from e
    except FileNotFoundError as e:
        raise InvalidRequestError(str(e)) from e
    if info.get("left_out"):
        logger.warning("%s", _left_out(model.max_length, lengths, info["left_out"]))
    return sampler, info


def _left_out(max_length: int, lengths: dict[str, int], left_out: dict[str, int] | None) -> str:
    """What leaving out the triples whose question fills ``max_length`` did (``left_out`` by
    source; None: all of them), and the ``--max-length`` that keeps them all."""
    least = max(lengths.values()) + MIN_TEXT_TOKENS
    if left_out is None:
        return (f"--max-length {max_length} leaves no room for the text under any training question of the mix: "
                f"use --max-length {least} or more")
    counts = ", ".join(f"{task}: {count:,}" for task, count in sorted(left_out.items()))
    return (f"--max-length {max_length} leaves no room for the text under some training questions; the "
            f"examples asking them are left out ({counts}); --max-length {least} keeps them all")
