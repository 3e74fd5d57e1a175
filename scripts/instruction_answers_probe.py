"""Do an InBedder checkpoint's *answers* follow the CLINC instructions? A dev-only probe.

Greedy answers (up to 4 tokens) to one seeded sample of CLINC150 *validation* texts under
the intent and the domain instruction of the multi-view task; each distinct answer string is
a cluster, scored by V-measure against the intent and the domain labels. The number of
distinct answers says how coarse the model answers under each instruction; the V-measures
say how well that grouping lines up with CLINC's own labels (V-measure moves with the
number of clusters, so a lower V with fewer answers says "not better", not "worse"). Never a
test split.

    .venv/bin/python scripts/instruction_answers_probe.py checkpoints/inbedder --seed 0 \
        --out results/eval/answers-probe/inbedder.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from sklearn.metrics import v_measure_score

from app.evaluation import loaders
from app.settings import get_settings
from embedders.registry import load_embedder


def probe(model, root: Path, *, seed: int = 0, texts: int = 400, max_new_tokens: int = 4) -> dict:
    """Per instruction: distinct answers and the V-measure of the answers against each labeling."""
    views = loaders.build_clinc_multiview(root / "clinc150" / "data_full.json", root / "clinc150" / "domains.json",
                                          split="val", n=texts, seed=seed)
    sample = views[0].texts
    out: dict = {}
    for view in views:
        start = time.perf_counter()
        answers = model.generate_answers(sample, view.instruction, max_new_tokens=max_new_tokens)
        ids = {a: i for i, a in enumerate(sorted(set(answers)))}
        clusters = [ids[a] for a in answers]
        out[view.name] = {
            "instruction": view.instruction,
            "distinct_answers": len(ids),
            **{f"v_vs_{v.name}": round(100 * v_measure_score(v.labels, clusters), 2) for v in views},
            "examples": [[t, a] for t, a in zip(sample[:8], answers[:8], strict=True)],
            "seconds": round(time.perf_counter() - start, 1),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="an InBedder checkpoint (directory or registered name)")
    parser.add_argument("--seed", type=int, default=0, help="CLINC val sample seed (0 = training's dev sample)")
    parser.add_argument("--texts", type=int, default=400, help="CLINC val texts")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--out", type=Path, default=None, help="write the result as JSON here")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    model = load_embedder(args.checkpoint, device="cpu")
    if not hasattr(model, "generate_answers"):
        parser.error(f"{args.checkpoint} does not generate answers (an InBedder checkpoint is needed)")
    result = {"checkpoint": args.checkpoint, "seed": args.seed, "texts": args.texts,
              "views": probe(model, Path(get_settings().shared_data_dir), seed=args.seed, texts=args.texts)}
    for name, row in result["views"].items():
        print(f"{name:7s} answers {row['distinct_answers']:4d}  " +
              "  ".join(f"{k} {v:.2f}" for k, v in row.items() if k.startswith("v_vs_")))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
