"""Score checkpoints on their method's dev suite, as `facet train` selects: dev splits only.

For comparing candidates that training did not score itself, such as a `facet soup` or runs
brought back from a GPU, against the shipped weights re-scored on the same machine. Each
checkpoint is scored on the dev suite its method declares (corpus: STS-B dev + SciFact
held-out train queries; instruction: CLINC val), with the sizes `facet train` uses by
default. `--gircse-k N` adds, for a GIRCSE checkpoint, the Spearman on all 1,500 STS-B dev
pairs for every K up to N (GIRCSE's keep rule reads that curve). `--dev-sts-pairs all` scores
the corpus suite's STS part on all 1,500 dev pairs instead of the trainer's seeded 400.
`--suite` scores any embedder on a named suite (an untrained one such as `minilm` has no
method to declare one), and `--clinc-samples N` averages the instruction suite over CLINC-val
seeds 0..N-1 (one 400-text sample's score has an sd of 1.2-2.2 points: scripts/dev_noise.py).

    .venv/bin/python scripts/dev_score.py checkpoints/gircse runs/soup/four --gircse-k 5 \
        --out results/eval/soups/gircse-dev.jsonl
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from app.evaluation.dev import DEV_SUITES, DevEvaluator, DevSizes, one_size, sts_pairs_option, stsb_dev
from app.provenance import run_environment
from app.settings import get_settings
from embedders.registry import load_embedder, trainable_methods


def score(checkpoint: str, root: Path, *, sizes: DevSizes | None = None, gircse_k: int = 0,
          suite: str | None = None) -> dict[str, Any]:
    """The dev-suite scores of one checkpoint (and GIRCSE's STS-B dev curve over K when asked).

    ``suite`` names the dev suite for an embedder whose method declares none (``minilm``) or
    to score a checkpoint on another suite than its method's."""
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:  # the K sweep is a sibling script
        sys.path.insert(0, here)
    from gircse_k_sweep import sweep

    start = time.perf_counter()
    model = load_embedder(checkpoint, device="cpu")
    method = getattr(model, "method", None)
    spec = trainable_methods().get(str(method))
    if suite is None:
        if spec is None:
            raise SystemExit(f"{checkpoint} is not a checkpoint of a trainable method (no dev suite of "
                             f"its own): name one with --suite ({', '.join(DEV_SUITES)})")
        suite = spec.dev_suite
    row: dict[str, Any] = {"checkpoint": checkpoint, "method": method, "suite": suite,
                           "dev": DevEvaluator(root, suite, sizes=sizes)(model)}
    if gircse_k and hasattr(model, "generate_states"):
        row["stsb_dev_by_k"] = sweep(model, stsb_dev(root), gircse_k)
    row["seconds"] = round(time.perf_counter() - start, 1)
    # When and on what it was scored: a later re-score of the same weights is compared with it.
    row["created"] = datetime.now(UTC).isoformat(timespec="seconds")
    row["environment"] = run_environment()
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", nargs="+", help="checkpoint directories or registered names")
    parser.add_argument("--gircse-k", type=int, default=0, help="GIRCSE: STS-B dev Spearman for K = 1..N")
    parser.add_argument("--dev-size", type=int, default=None, help="dev subsample size (as facet train --dev-size)")
    parser.add_argument("--dev-sts-pairs", default=None,
                        help="corpus methods: STS-B dev pairs, a number or 'all' (as facet train --dev-sts-pairs)")
    parser.add_argument("--suite", choices=DEV_SUITES, default=None,
                        help="the dev suite (default: the checkpoint's method's; needed for untrained embedders)")
    parser.add_argument("--clinc-samples", type=int, default=None,
                        help="instruction suite: seeded CLINC-val samples averaged (seeds 0..N-1; default 1)")
    parser.add_argument("--data-dir", type=Path, default=None, help="datasets root (default: the settings')")
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    parser.add_argument("--out", type=Path, default=None, help="append one JSON line per checkpoint here")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    root = Path(args.data_dir or get_settings().shared_data_dir)
    given: dict[str, Any] = one_size(args.dev_size) if args.dev_size is not None else {}
    if args.dev_sts_pairs is not None:
        try:
            given["sts_pairs"] = sts_pairs_option(args.dev_sts_pairs)
        except ValueError as e:
            parser.error(str(e))
    if args.clinc_samples is not None:
        given["clinc_samples"] = args.clinc_samples
    try:
        sizes = DevSizes(**given) if given else None
    except ValueError as e:
        parser.error(str(e))
    for checkpoint in args.checkpoints:
        row = score(checkpoint, root, sizes=sizes, gircse_k=args.gircse_k, suite=args.suite)
        row["command"] = shlex.join(["scripts/dev_score.py", *(sys.argv[1:] if argv is None else argv)])
        print(json.dumps(row), flush=True)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            with args.out.open("a") as f:
                f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
