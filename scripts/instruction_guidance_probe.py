"""Instruction guidance on CLINC *val*: does amplifying what the instruction changes steer more?

By analogy with classifier-free guidance, an instruction model's embedding of a text under an
instruction I is pushed further from its embedding under the model's neutral default
instruction: ``e_w = e_0 + w (e_I - e_0)``, normalised (w = 1 is the plain embedding). This
scores the instruction dev suite's two views (intent and domain) for each w on seeded samples
of CLINC150 validation texts: V-measure per view, crossed V-measures, hmean, steer gap. A dev
probe (never a test split); the w = 1 rows equal the dev suite's own scores (tested).

    .venv/bin/python scripts/instruction_guidance_probe.py checkpoints/instemb --seeds 0,1 \
        --out results/eval/instruction-guidance/instemb.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from app.evaluation import loaders
from app.evaluation.dev import DEV_KMEANS_SEEDS
from app.evaluation.tasks import multiview_scores
from app.settings import get_settings
from embedders.registry import load_embedder


def guided(e0: np.ndarray, e_instr: np.ndarray, w: float) -> np.ndarray:
    """``e0 + w (e_instr - e0)``, each row normalised to unit length."""
    g = e0 + w * (e_instr - e0)
    return g / np.linalg.norm(g, axis=1, keepdims=True)


def score_views(model: Any, views: list[loaders.ClusteringView], weights: list[float],
                kmeans_seeds: tuple[int, ...] = DEV_KMEANS_SEEDS) -> list[dict[str, float]]:
    """One row per guidance weight: the multi-view task's scores (``v_<view>``,
    ``cross_<labels>_under_<instruction>``, ``hmean``, ``steer_gap``; x 100, as the dev suite
    reports them) and ``score``."""
    texts = views[0].texts
    e0 = np.asarray(model.encode(texts, role="query", instruction=None), dtype=np.float64)
    plain = {v.name: np.asarray(model.encode(texts, role="query", instruction=v.instruction), dtype=np.float64)
             for v in views}
    rows = []
    for w in weights:
        scores = multiview_scores({name: guided(e0, e, w) for name, e in plain.items()}, views, kmeans_seeds)
        row: dict[str, float] = {"w": w, **{key: round(100 * value, 2) for key, value in scores.items()}}
        row["score"] = round(row["hmean"] + row["steer_gap"], 2)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="an instruction checkpoint (directory or registered name)")
    parser.add_argument("--weights", default="1,1.5,2,3,5", help="comma-separated guidance weights w")
    parser.add_argument("--seeds", default="0,1", help="CLINC val sample seeds (0 = training's dev sample)")
    parser.add_argument("--texts", type=int, default=400, help="CLINC val texts per sample")
    parser.add_argument("--data-dir", type=Path, default=None, help="datasets root (default: the settings')")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--out", type=Path, default=None, help="write the rows and their means as JSON here")
    args = parser.parse_args(argv)
    try:
        weights = [float(w) for w in args.weights.split(",") if w.strip()]
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError as e:
        parser.error(f"--weights and --seeds take comma-separated numbers: {e}")
    if not weights or not seeds:
        parser.error("--weights and --seeds need at least one value each")
    torch.set_num_threads(args.threads)
    root = Path(args.data_dir or get_settings().shared_data_dir) / "clinc150"
    model = load_embedder(args.checkpoint, device="cpu")
    rows: list[dict[str, float]] = []
    for seed in seeds:
        start = time.perf_counter()
        views = loaders.build_clinc_multiview(root / "data_full.json", root / "domains.json", split="val",
                                              n=args.texts, seed=seed)
        for row in score_views(model, views, weights):
            rows.append({"seed": seed, **row})
            print(json.dumps(rows[-1]), flush=True)
        print(f"seed {seed}: {time.perf_counter() - start:.0f} s", flush=True)
    means = {str(w): {k: round(statistics.fmean(r[k] for r in rows if r["w"] == w), 2)
                      for k in ("hmean", "steer_gap", "score")} for w in weights}
    for w, m in means.items():
        print(f"w={w:>4}  hmean {m['hmean']:6.2f}  steer {m['steer_gap']:+6.2f}  score {m['score']:6.2f}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"checkpoint": args.checkpoint, "texts": args.texts, "rows": rows,
                                        "means": means}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
