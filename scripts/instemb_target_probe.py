"""Does InstEmb's student anticipate the answer its instruction asks for? A diagnostic probe.

InstEmb's look-ahead states are distilled onto the frozen teacher's states at the gold
answer's tokens. If the student had learnt that, its look-ahead states under a coarse
instruction would group texts by the coarse answer, as the teacher's targets do. This probe
measures both on one seeded sample, under a fine and a coarse instruction:

* ``clusters``: V-measure (k-means, k = number of labels, 3 seeds) of the fine and the coarse
  labels on the student's last input state, its mean look-ahead state and DAAP, and on the
  teacher's targets (mean over the look-ahead slots; the teacher reads the gold answer, so
  this row is the ceiling the distillation aims at, not something a model can reach);
* ``cosine``: the mean cosine between each look-ahead state and its target, raw and after
  subtracting each side's mean state over the sample (how much of the fit is the states'
  shared direction), and how close the targets are to their own mean.

Datasets: ``banking77`` (the family InstEmb trains on, texts from the *test* split, which
training never reads: intent, and the banking area of ``instruct_data.banking77_area``) or
``clinc`` (CLINC150 *validation*: intent and domain, the multi-view task's instructions). A
diagnostic only: no checkpoint is chosen on it.

    .venv/bin/python scripts/instemb_target_probe.py checkpoints/instemb --data banking77 \
        --out results/eval/instemb-target-probe/banking77.json
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from app.evaluation import loaders
from app.evaluation.tasks import kmeans_v_measure
from app.settings import get_settings
from embedders.losses import distill_mse
from embedders.registry import load_embedder
from embedders.training.instruct_data import (
    BANKING77_AREA_INSTRUCTIONS,
    BANKING77_INSTRUCTIONS,
    banking77_area,
)

KMEANS_SEEDS = (0, 1, 2)


def views(root: Path, data: str, n: int, seed: int) -> tuple[list[str], list[dict[str, Any]]]:
    """Texts and, per view, its name, instruction, labels and gold answer strings."""
    if data == "banking77":
        test = loaders.load_labelled_texts(root / "banking77" / "test.csv", label_column="category")
        rows = list(zip(test.texts, test.labels, strict=True))
        rows = random.Random(seed).sample(rows, min(n, len(rows)))
        texts = [t for t, _ in rows]
        fine = [i for _, i in rows]
        coarse = [banking77_area(i) for i in fine]
        pairs: tuple[tuple[str, str, list[str]], ...] = (
            ("intent", BANKING77_INSTRUCTIONS[0], fine), ("area", BANKING77_AREA_INSTRUCTIONS[0], coarse))
    elif data == "clinc":
        clinc = loaders.build_clinc_multiview(root / "clinc150" / "data_full.json", root / "clinc150" / "domains.json",
                                              split="val", n=n, seed=seed)
        texts = clinc[0].texts
        pairs = tuple((v.name, v.instruction or "", [v.label_names[label] for label in v.labels]) for v in clinc)
    else:
        raise ValueError(f"--data must be banking77 or clinc, got {data!r}")
    out = []
    for name, instruction, names in pairs:
        ids = {a: i for i, a in enumerate(sorted(set(names)))}
        out.append({"name": name, "instruction": instruction, "labels": [ids[a] for a in names],
                    "answers": [a.replace("_", " ") for a in names]})
    return texts, out


@torch.no_grad()
def states(model: Any, texts: list[str], instruction: str, answers: list[str],
           batch_size: int = 32) -> dict[str, torch.Tensor]:
    """Student states (last input, look-ahead, DAAP) and the teacher's targets, float32 on CPU."""
    parts: dict[str, list[torch.Tensor]] = {"last_input": [], "look_ahead": [], "daap": [], "target": []}
    for i in range(0, len(texts), batch_size):
        batch, gold = texts[i:i + batch_size], answers[i:i + batch_size]
        student = model.student_states(batch, [instruction] * len(batch))
        _, target, _ = model.teacher_states(batch, [instruction] * len(batch), gold)
        parts["last_input"].append(student.last_input.float().cpu())
        parts["look_ahead"].append(student.look_ahead.float().cpu())  # (batch, L, hidden)
        parts["daap"].append(model.pool(student).float().cpu())
        parts["target"].append(target.float().cpu())  # (batch, L, hidden)
    return {k: torch.cat(v) for k, v in parts.items()}


def _cos(a: torch.Tensor, b: torch.Tensor, *, center: bool = False) -> float:
    """Mean cosine of matching states, read off the distillation loss itself (= 2 - 2 cos),
    so ``center`` removes each side's mean state exactly as ``distill=mse-centered`` does."""
    return round(1.0 - float(distill_mse(a, b, center=center)) / 2, 3)


def probe(model: Any, root: Path, *, data: str = "banking77", texts: int = 400, seed: int = 0) -> dict[str, Any]:
    sample, labelled = views(root, data, texts, seed)
    result: dict[str, Any] = {"data": data, "texts": len(sample), "seed": seed, "views": {}}
    for view in labelled:
        start = time.perf_counter()
        got = states(model, sample, view["instruction"], view["answers"])
        pooled = {"student last input": got["last_input"], "student look-ahead": got["look_ahead"].mean(1),
                  "student daap": got["daap"], "teacher target (reads the gold answer)": got["target"].mean(1)}
        clusters = {}
        for part, emb in pooled.items():
            x = F.normalize(emb, dim=-1).numpy().astype(np.float32)
            clusters[part] = {other["name"]: round(100 * kmeans_v_measure(x, other["labels"], KMEANS_SEEDS)[0], 2)
                              for other in labelled}
        look, target = got["look_ahead"], got["target"]
        result["views"][view["name"]] = {
            "instruction": view["instruction"],
            "k": len(set(view["labels"])),
            "clusters": clusters,
            "cosine": {"raw": _cos(look, target),
                       "centred": _cos(look, target, center=True),
                       "target_vs_its_mean": _cos(target, target.mean((0, 1)).expand_as(target))},
            "seconds": round(time.perf_counter() - start, 1),
        }
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint", help="an InstEmb checkpoint path or registered name")
    ap.add_argument("--data", choices=("banking77", "clinc"), default="banking77")
    ap.add_argument("--texts", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = load_embedder(args.checkpoint, device="cpu")
    if getattr(model, "method", None) != "instemb":
        raise SystemExit(f"{args.checkpoint} is a {getattr(model, 'method', '?')} model; this probe needs InstEmb")
    model.eval()  # type: ignore[attr-defined]  # an InstEmb model (a torch Module), checked above
    result = {"checkpoint": args.checkpoint, **probe(model, get_settings().shared_data_dir, data=args.data,
                                                       texts=args.texts, seed=args.seed)}
    for name, row in result["views"].items():
        print(f"under the {name} instruction ({row['instruction']!r}):")
        for part, scores in row["clusters"].items():
            print(f"  {part:40s} " + "  ".join(f"V {k} {v:6.2f}" for k, v in scores.items()))
        print(f"  look-ahead vs target cosine: raw {row['cosine']['raw']}, centred {row['cosine']['centred']} "
              f"(targets vs their mean {row['cosine']['target_vs_its_mean']})")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
