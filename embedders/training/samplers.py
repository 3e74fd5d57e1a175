"""Batch builders by data kind: what a trainable method declares as its ``data`` ("pairs" or
"triples") maps to the loader and sampler here."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


def _sources(kind: str) -> Mapping[str, object]:
    """The sources a data kind's ``--tasks`` may name (its loaders, by name)."""
    if kind == "pairs":
        from embedders.training.data import LOADERS as PAIR_LOADERS

        return PAIR_LOADERS
    from embedders.training.instruct_data import LOADERS as TRIPLE_LOADERS

    return TRIPLE_LOADERS


def pair_sampler(root: Path, tasks: str, batch_size: int, seed: int,
                 keep: Callable[[Any], bool] | None = None) -> tuple[Any, dict[str, Any]]:
    """Contrastive pairs: the default mix, or ``tasks`` ("snli:0.5,stsb,scifact:0.1").
    ``keep`` is not used: a pair's instruction is its source's, fixed, and ``facet train``
    checks those against ``--max-length`` before the data loads."""
    del keep
    from embedders.training.data import DEFAULT_MIX, BatchSampler, build_pairs, parse_mix

    mix = parse_mix(tasks, _sources("pairs")) or dict(DEFAULT_MIX)
    pairs = build_pairs(root, tuple(mix))
    sampler = BatchSampler(pairs, batch_size, seed=seed, mix=mix)
    return sampler, {"tasks": {t: len(p) for t, p in pairs.items()},
                     "mix": {t: round(v, 4) for t, v in sampler.shares().items()}}


def triple_sampler(root: Path, tasks: str, batch_size: int, seed: int,
                   keep: Callable[[Any], bool] | None = None) -> tuple[Any, dict[str, Any]]:
    """(input, instruction, answer) triples: every source (weighted by sqrt(size)), or ``tasks``
    ("c3,banking77:0.5": banking77 half the batches). ``keep``: the triples the model can
    read; a sampling unit (a text's views, a steer quad) with one it cannot is left out whole,
    and ``"left_out"`` counts them by source."""
    from embedders.training.data import parse_mix
    from embedders.training.instruct_data import DEFAULT_TASKS, TripleSampler, build_triples, keep_units

    mix = parse_mix(tasks, _sources("triples")) or dict.fromkeys(DEFAULT_TASKS, 0.0)
    triples = build_triples(root, tuple(mix))
    left_out: dict[str, int] = {}
    if keep is not None:
        for task, rows in triples.items():
            kept = keep_units(rows, task, keep)
            if len(kept) < len(rows):
                left_out[task] = len(rows) - len(kept)
                triples[task] = kept
    sampler = TripleSampler(triples, batch_size, seed=seed, mix=mix)
    return sampler, {"tasks": {t: len(v) for t, v in triples.items()},
                     "mix": {t: round(v, 4) for t, v in sampler.shares().items()},
                     **({"left_out": left_out} if left_out else {})}


SAMPLERS: dict[str, Callable[[Path, str, int, int, Callable[[Any], bool] | None], tuple[Any, dict[str, Any]]]] = {
    "pairs": pair_sampler, "triples": triple_sampler,
}


def check_tasks(kind: str, tasks: str) -> None:
    """Refuse a ``--tasks`` spec its data kind cannot sample (an unknown source, a weight that is
    not a positive finite number) without loading anything.

    Raises:
        ValueError: what is wrong with it.
    """
    from embedders.training.data import parse_mix

    if kind in SAMPLERS:
        parse_mix(tasks, _sources(kind))


def build_sampler(kind: str, root: Path, tasks: str, batch_size: int, seed: int,
                  keep: Callable[[Any], bool] | None = None) -> tuple[Any, dict[str, Any]]:
    """The sampler for a data kind. ``keep``: for triples, the ones the model can read (the
    others are left out, counted in ``"left_out"``).

    Raises:
        ValueError: an unknown kind, source or weight.
        FileNotFoundError: a dataset file is missing.
    """
    if kind not in SAMPLERS:
        raise ValueError(f"unknown training data kind {kind!r}; known: {', '.join(SAMPLERS)}")
    return SAMPLERS[kind](root, tasks, batch_size, seed, keep)
