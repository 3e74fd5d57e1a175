"""GIRCSE test-time scaling in one pass: Spearman on an STS set for every K up to --max-k.

A GIRCSE embedding with K soft tokens is the mean of the first K generated states, and
generation is autoregressive (step k never depends on how many steps follow), so one
generation of ``max_k`` states gives the embedding for every K <= max_k: the sweep costs
one ``facet eval`` at K = max_k instead of one per K. The K = 5 figure equals what
``facet eval 'CKPT[soft_tokens=5]' --suite full --tasks stsb`` prints (tested).

    .venv/bin/python scripts/gircse_k_sweep.py checkpoints/gircse --max-k 20 --split test \
        --out results/eval/gircse-k-sweep.json

``--pools`` scores, from one generation of max_k + 1 states, other ways to pool the first
max_k (weighted by position, as ``step_weighting=linear`` weighs the training losses; the mean
of the normalised states; the last state alone; the mean without the first state) beside the
paper's mean and the mean of all max_k + 1 (a dev-only probe: select on ``--split dev``).
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


def _states(model, texts: list[str], k: int, batch_size: int, with_prompt: bool = False):
    """Per batch, the (batch, k, hidden) float states of ``model.generate_states``."""
    with torch.inference_mode():
        for i in tqdm(range(0, len(texts), batch_size), desc=f"gircse K<={k}", unit="batch"):
            yield model.generate_states(texts[i:i + batch_size], Role.DOCUMENT, None, k,
                                        use_cache=model.config.use_cache, with_prompt_state=with_prompt).float()


def k_prefix_embeddings(model, texts: list[str], max_k: int, batch_size: int = 32,
                        with_prompt: bool = False) -> np.ndarray:
    """(n, max_k, hidden) normalised embeddings for K = 1..max_k (mean of the first K states).

    With ``with_prompt``, (n, 1 + max_k, hidden): row K is the mean of the prompt's last-token
    state and the first K soft-token states (row 0: the prompt state alone), a pooling variant.
    """
    out = []
    for states in _states(model, texts, max_k, batch_size, with_prompt):
        steps = torch.arange(1, states.shape[1] + 1, device=states.device).view(1, -1, 1)
        means = states.cumsum(dim=1) / steps  # (batch, max_k, hidden): mean of the first K
        out.append(torch.nn.functional.normalize(means, dim=-1).cpu().numpy())
    return np.concatenate(out)


def _texts(pairs: list[loaders.StsPair]) -> list[str]:
    return [p.sentence1 for p in pairs] + [p.sentence2 for p in pairs]


def _pair_spearman(emb: np.ndarray, pairs: list[loaders.StsPair]) -> float:
    """Spearman x 100 of cosine vs gold, ``emb`` being the normalised embeddings of ``_texts(pairs)``."""
    n = len(pairs)
    return round(100 * spearman((emb[:n] * emb[n:]).sum(-1), [p.score for p in pairs]), 2)


def sweep(model, pairs: list[loaders.StsPair], max_k: int, batch_size: int = 32,
          with_prompt: bool = False) -> dict[int, float]:
    """Spearman x 100 of cosine vs gold for each K in 1..max_k (0..max_k ``with_prompt``: the
    pool that also averages in the prompt's last-token state)."""
    emb = k_prefix_embeddings(model, _texts(pairs), max_k, batch_size, with_prompt)
    first = 0 if with_prompt else 1
    return {k + first: _pair_spearman(emb[:, k], pairs) for k in range(emb.shape[1])}


def pools(states: np.ndarray, k: int) -> dict[str, np.ndarray]:
    """(n, k + 1, hidden) states -> {pool name: (n, hidden) embedding of the first k, and the
    mean of all k + 1}."""
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


def pool_scores(model, pairs: list[loaders.StsPair], k: int, batch_size: int = 32) -> dict[str, float]:
    """Spearman x 100 of each of ``pools`` at K = k, from one generation of k + 1 states."""
    states = np.concatenate([s.cpu().numpy() for s in _states(model, _texts(pairs), k + 1, batch_size)])
    return {name: _pair_spearman(emb / np.linalg.norm(emb, axis=-1, keepdims=True), pairs)
            for name, emb in pools(states, k).items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", help="a GIRCSE checkpoint path or registered name")
    ap.add_argument("--max-k", type=int, default=20)
    # Named each time: a default of test let a sweep run to pick K select on the test split.
    ap.add_argument("--split", choices=("test", "dev"), required=True,
                    help="STS-B split: dev to select (K, a pool, a checkpoint), test to report")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--with-prompt", action="store_true",
                    help="the pooling variant that averages the prompt's last-token state in too (K=0: it alone)")
    ap.add_argument("--pools", action="store_true",
                    help="score other pools of the first max_k states instead of each K (see above)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.pools and (args.with_prompt or args.max_k < 2):
        ap.error("--pools needs --max-k 2 or more and no --with-prompt")
    model = load_embedder(args.checkpoint)
    if not hasattr(model, "generate_states"):
        raise SystemExit(f"{args.checkpoint} is not a GIRCSE checkpoint")
    root = Path(get_settings().shared_data_dir)
    pairs = loaders.load_sts_csv(root / "stsb_en" / f"stsb-en-{args.split}.csv")
    t = time.time()
    result: dict = {"checkpoint": str(args.checkpoint), "task": f"stsb-{args.split}", "pairs": len(pairs)}
    if args.pools:
        result |= {"k": args.max_k, "spearman_by_pool": pool_scores(model, pairs, args.max_k, args.batch_size)}
    else:
        key = "spearman_by_k_with_prompt" if args.with_prompt else "spearman_by_k"
        result[key] = sweep(model, pairs, args.max_k, args.batch_size, args.with_prompt)
    result["seconds"] = round(time.time() - t, 1)
    print(json.dumps(result))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
