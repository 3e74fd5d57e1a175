"""How much of an instruction model's dev score is the sample? A dev-only probe.

Training selects InstEmb and InBedder on one seeded sample of 400 CLINC150 *validation*
texts (``clinc_seed=0``; 150 intents, so ~2.7 texts per intent). This scores a checkpoint
on several such samples, each drawn with its own seed, and prints the spread of the
harmonic mean, the steer gap and the selection score, so a difference between two dev
evaluations can be read against it. Never a test split.

    .venv/bin/python scripts/dev_noise.py checkpoints/instemb --seeds 0,1,2 \
        --out results/eval/dev-noise/instemb.json
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from pathlib import Path

import torch

from app.evaluation.dev import DevEvaluator, DevSizes
from app.settings import get_settings
from embedders.registry import load_embedder

logger = logging.getLogger(__name__)
KEYS = ("clinc-dev/hmean", "clinc-dev/steer_gap", "score")


def probe(model, root: Path, seeds: list[int], *, texts: int = 400) -> list[dict[str, float | int]]:
    """The instruction dev suite of ``model`` on the CLINC val sample of each seed in ``seeds``."""
    rows: list[dict[str, float | int]] = []
    for seed in seeds:
        start = time.perf_counter()
        scores = DevEvaluator(root, "instruction", sizes=DevSizes(clinc_texts=texts, clinc_seed=seed))(model)
        row: dict[str, float | int] = {"seed": seed, **{k: v for k, v in scores.items() if k.startswith("clinc")},
                                       "score": scores["score"]}
        rows.append(row)
        logger.info("seed %d: %s (%.0fs)", seed, {k: row[k] for k in KEYS}, time.perf_counter() - start)
    return rows


def spread(rows: list[dict[str, float | int]]) -> dict[str, dict[str, float]]:
    """Mean and sample standard deviation of each of ``KEYS`` over the rows (sd 0 for one row)."""
    out = {}
    for key in KEYS:
        values = [float(r[key]) for r in rows]
        out[key] = {"mean": round(statistics.fmean(values), 2),
                    "sd": round(statistics.stdev(values), 2) if len(values) > 1 else 0.0,
                    "min": min(values), "max": max(values)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="an instruction checkpoint (directory or registered name)")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated sample seeds (0 = training's dev sample)")
    parser.add_argument("--texts", type=int, default=400, help="CLINC val texts per sample")
    parser.add_argument("--data-dir", type=Path, default=None, help="datasets root (default: the settings')")
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    parser.add_argument("--out", type=Path, default=None, help="write the rows and the spread as JSON here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.threads:
        torch.set_num_threads(args.threads)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    if not seeds:
        parser.error("--seeds needs at least one seed")
    root = args.data_dir or get_settings().shared_data_dir
    model = load_embedder(args.checkpoint, device="cpu")
    rows = probe(model, Path(root), seeds, texts=args.texts)
    summary = {"checkpoint": args.checkpoint, "texts": args.texts, "rows": rows, "spread": spread(rows)}
    for key, s in summary["spread"].items():
        print(f"{key:22s} mean {s['mean']:6.2f}  sd {s['sd']:5.2f}  range {s['min']:.2f} .. {s['max']:.2f}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
