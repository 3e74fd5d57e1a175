"""Does reading a text without its double quotes help an embedder? Train and dev data only.

PromptEOL quotes the text (``This sentence : "{text}" means in one word:"``), so a ``"`` inside
it closes the template's own quote. The instruction methods take ``text_quotes=keep|drop``;
this script scores each spec given as written, on the texts that hold a double quote:

* CLINC150 *train* (never in the instruction methods' training mix): every train text with a
  ``"`` (31) is a query against ``--pool`` random train texts without one (seed 0), with the
  other quoted texts (``_all``) and without them (``_plain``); top-1 / top-5: whether the
  nearest / any of the 5 nearest other texts shares its intent. Read under ``--instruction``.
* STS-B *dev*: Spearman x 100 on the pairs where either sentence holds a ``"``, read bare.

    .venv/bin/python scripts/quote_probe.py 'checkpoints/instemb[text_quotes=keep]' \\
        'checkpoints/instemb[text_quotes=drop]' --out results/eval/quote-probe/instemb.json

No test split is read: the choice of ``text_quotes`` for a shipped checkpoint is made here.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy.stats import spearmanr

from app.evaluation.dev import stsb_dev
from app.settings import get_settings
from embedders.registry import load_embedder


def clinc_quoted(root: Path, pool: int, seed: int = 0) -> tuple[list[str], list[str], int]:
    """(texts, intents, how many of the first are quoted queries): the quoted CLINC train
    texts first, then ``pool`` random unquoted ones."""
    data = json.loads((root / "clinc150" / "data_full.json").read_text())
    train = [(t, y) for t, y in data["train"]]
    quoted = [(t, y) for t, y in train if '"' in t]
    others = [(t, y) for t, y in train if '"' not in t]
    rows = quoted + random.Random(seed).sample(others, pool)
    return [t for t, _ in rows], [y for _, y in rows], len(quoted)


def neighbours(vectors: np.ndarray, labels: list[str], queries: int) -> dict[str, float]:
    """Top-1 / top-5 same-label rates of the first ``queries`` rows (the quoted texts), among
    all the other rows (``_all``: the other quoted texts too, which may share a quoting pattern)
    and among the unquoted rows only (``_plain``: how a quoted query finds ordinary texts)."""
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    sims = unit[:queries] @ unit.T
    sims[np.arange(queries), np.arange(queries)] = -np.inf
    out = {}
    for name, scores in (("all", sims), ("plain", sims[:, queries:])):
        offset = 0 if name == "all" else queries
        order = np.argsort(-scores, axis=1)[:, :5] + offset
        same = np.array([[labels[j] == labels[i] for j in row] for i, row in enumerate(order)])
        out[f"top1_{name}"] = round(float(same[:, 0].mean()), 3)
        out[f"top5_{name}"] = round(float(same.any(axis=1).mean()), 3)
    return out


def sts_quoted(model: Any, root: Path) -> dict[str, float]:
    pairs = [p for p in stsb_dev(root) if '"' in p.sentence1 or '"' in p.sentence2]
    a = model.encode([p.sentence1 for p in pairs])
    b = model.encode([p.sentence2 for p in pairs])
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return {"pairs": len(pairs),
            "spearman": round(100 * float(spearmanr(cos, [p.score for p in pairs]).statistic), 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("specs", nargs="+", help="embedder specs, e.g. 'checkpoints/instemb[text_quotes=drop]'")
    parser.add_argument("--instruction", default="What does the user want?",
                        help="the CLINC texts' instruction (default: %(default)s)")
    parser.add_argument("--pool", type=int, default=1500, help="unquoted CLINC train texts (default: 1500)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    root = Path(get_settings().shared_data_dir)
    texts, intents, queries = clinc_quoted(root, args.pool)
    rows = []
    for spec in args.specs:
        start = time.perf_counter()
        model = load_embedder(spec, device="cpu")
        row = {"spec": spec, "clinc_train_queries": queries, "clinc_train_pool": len(texts),
               **neighbours(model.encode(texts, role="query", instruction=args.instruction), intents, queries),
               "stsb_dev_quoted": sts_quoted(model, root), "seconds": round(time.perf_counter() - start, 1)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"argv": sys.argv[1:], "instruction": args.instruction, "rows": rows},
                                       indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
