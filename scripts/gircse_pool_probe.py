"""Other pools of GIRCSE's soft-token states, scored on an STS-B split from one generation.

GIRCSE's embedding is the plain mean of the K generated states (the paper). This probe
generates K+1 states once and scores other ways to pool the first K: weighted by position
(as ``step_weighting=linear`` weighs the training losses), the mean of the normalised states,
the last state alone, the mean without the first state, and the mean of all K+1 (= K+1 soft
tokens, for reference). A dev-only probe: select on ``--split dev``.

    .venv/bin/python scripts/gircse_pool_probe.py checkpoints/gircse --split dev \
        --out results/eval/gircse-k-sweep/stsb-dev-gircse-pools.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from app.evaluation import loaders
from app.evaluation.metrics import spearman
from app.settings import get_settings
from embedders import Role
from embedders.registry import load_embedder


def pools(states: np.ndarray, k: int) -> dict[str, np.ndarray]:
    """(n, k + 1, hidden) states -> {pool name: (n, hidden) embedding}."""
    first = states[:, :k]
    normalised = first / np.linalg.norm(first, axis=-1, keepdims=True)
    weights = np.arange(1, k + 1, dtype=first.dtype)[None, :, None]
    return {
        "mean": first.mean(1),  # the paper's pool, what encode() serves
        "linear": (first * weights).sum(1),
        "mean_of_normalised": normalised.mean(1),
        "last": first[:, -1],
        "drop_first": first[:, 1:].mean(1),
        f"mean_k{k + 1}": states.mean(1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", help="a GIRCSE checkpoint path or registered name")
    ap.add_argument("--k", type=int, default=5, help="the served K the pools are built from (default 5)")
    ap.add_argument("--split", choices=("test", "dev"), default="dev")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    model = load_embedder(args.checkpoint)
    if not hasattr(model, "generate_states"):
        raise SystemExit(f"{args.checkpoint} is not a GIRCSE checkpoint")
    if args.k < 2:
        raise SystemExit("--k must be at least 2")
    pairs = loaders.load_sts_csv(Path(get_settings().shared_data_dir) / "stsb_en" / f"stsb-en-{args.split}.csv")
    texts = [p.sentence1 for p in pairs] + [p.sentence2 for p in pairs]
    t = time.time()
    chunks = []
    with torch.inference_mode():
        for i in tqdm(range(0, len(texts), args.batch_size), desc=f"gircse K={args.k + 1}", unit="batch"):
            chunks.append(model.generate_states(texts[i:i + args.batch_size], Role.DOCUMENT, None,
                                                args.k + 1).float().numpy())
    states = np.concatenate(chunks)
    n, gold = len(pairs), [p.score for p in pairs]
    scores = {}
    for name, emb in pools(states, args.k).items():
        emb = emb / np.linalg.norm(emb, axis=-1, keepdims=True)
        scores[name] = round(100 * spearman((emb[:n] * emb[n:]).sum(-1), gold), 2)
    result = {"checkpoint": str(args.checkpoint), "task": f"stsb-{args.split}", "pairs": n, "k": args.k,
              "spearman_by_pool": scores, "seconds": round(time.time() - t, 1)}
    print(json.dumps(result))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
