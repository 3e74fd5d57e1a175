"""Does an instruction steer? A small hand-written probe, through the facade's embeddings.

Two corpora of 24 short texts written for this probe (``examples/steer-probe/``): reviews
(4 topics x 3 sentiments x 2) and styles (4 topics x 3 writing styles x 2). For each embedder:

* **search**: three generic queries ("here is my opinion") under an instruction that names
  one class ("Find texts about sport", "Find negative reviews and complaints", "Find texts
  written in casual internet slang"); hits@6 = how many of the 6 nearest texts are of that
  class (chance: 1.5 for a topic, 2.0 for a sentiment or style). Exact cosine over the texts
  embedded as documents without an instruction, as a collection holds them: what dense search
  returns.
* **rerank**: the same, with the texts read under the instruction too (what the reranker
  does when ``RERANK_DOCUMENTS_INSTRUCTED``) against bare (the search row).
* **cluster**: k-means (the cluster service's, 10 seeds) of the texts embedded under a topic
  instruction and under a sentiment (style) instruction; V-measure against each label set;
  steer gap = mean over the two label sets of (V under the matching instruction - V under the
  other). Positive: the grouping follows the instruction.

An illustration of what a user sees on a few dozen texts, not a benchmark: 24 texts and 21
searches per embedder, no intervals. Dev and test sets for steering are CLINC-val and
CLINC/GoalEx (docs/evaluation.md).

    .venv/bin/python scripts/steer_probe.py minilm 'minilm[instruction_weight=1]' instemb \
        inbedder 'inbedder[instruction_weight=1]' causal2vec gircse \
        --out results/eval/steer-probe/probe.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

CORPORA = Path(__file__).resolve().parent.parent / "examples" / "steer-probe"
QUERIES = ["it was quite an experience", "let me tell you what happened", "here is my opinion"]
SEARCHES = {
    "reviews": [("Find texts about sport", "topic", "sport"),
                ("Find texts about food and restaurants", "topic", "food"),
                ("Find texts about travel and hotels", "topic", "travel"),
                ("Find texts about phones and laptops", "topic", "phone"),
                ("Find negative reviews and complaints", "sentiment", "neg"),
                ("Find positive, happy reviews", "sentiment", "pos"),
                ("Find neutral factual statements", "sentiment", "neu")],
    "styles": [("Find texts written in casual internet slang", "style", "slang"),
               ("Find texts written in formal official language", "style", "formal"),
               ("Find poetic, lyrical texts", "style", "poetic")],
}
VIEWS = {"topic": "What is the topic of this text?",
         "sentiment": "Is the sentiment of this review positive, negative or neutral?",
         "style": "What is the writing style of this text: formal, casual slang, or poetic?"}
K_SEEDS = range(10)


def load(name: str) -> list[dict[str, str]]:
    with open(CORPORA / f"{name}.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def hits(docs: np.ndarray, query: np.ndarray, gold: np.ndarray, k: int = 6) -> int:
    top = np.argsort(-(docs @ query), kind="stable")[:k]
    return int(gold[top].sum())


def probe(facet, embedder: str) -> dict[str, float]:
    from sklearn.metrics import v_measure_score

    from app.services.clustering import _kmeans

    def embed(texts: list[str], role: str, instruction: str | None = None) -> np.ndarray:
        return facet.embed(texts, embedder=embedder, role=role, instruction=instruction).vectors

    out: dict[str, float] = {}
    for corpus, searches in SEARCHES.items():
        rows = load(corpus)
        texts = [r["text"] for r in rows]
        bare = embed(texts, "document")
        got: dict[tuple[str, str], list[int]] = {}
        for instruction, key, value in searches:
            gold = np.array([r[key] == value for r in rows])
            read = embed(texts, "document", instruction)
            for q in QUERIES:
                qv = embed([q], "query", instruction)[0]
                got.setdefault(("search", key), []).append(hits(bare, qv, gold))
                got.setdefault(("rerank", key), []).append(hits(read, qv, gold))
        for (what, key), values in got.items():
            out[f"{corpus}/{what}_{key}_hits@6"] = float(np.mean(values))
        other = "sentiment" if corpus == "reviews" else "style"
        k = {"topic": 4, other: 3}
        v: dict[tuple[str, str], float] = {}
        for view in ("topic", other):
            x = embed(texts, "document", VIEWS[view])
            for target in ("topic", other):
                labels = [r[target] for r in rows]
                v[(view, target)] = 100 * float(np.mean(
                    [v_measure_score(labels, _kmeans(x, k[target], s)) for s in K_SEEDS]))
        for (view, target), score in v.items():
            out[f"{corpus}/v_{target}_under_{view}"] = score
        out[f"{corpus}/steer_gap"] = ((v[("topic", "topic")] - v[(other, "topic")])
                                      + (v[(other, other)] - v[("topic", other)])) / 2
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("embedders", nargs="+")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    import torch

    from app.core import Facet

    torch.set_num_threads(1)
    rows = {}
    with Facet.open() as facet:
        for name in args.embedders:
            t0 = time.perf_counter()
            rows[name] = probe(facet, name)
            r = rows[name]
            print(f"{name:32s} search topic {r['reviews/search_topic_hits@6']:.2f} sentiment "
                  f"{r['reviews/search_sentiment_hits@6']:.2f} style {r['styles/search_style_hits@6']:.2f}"
                  f" | rerank topic {r['reviews/rerank_topic_hits@6']:.2f} sentiment "
                  f"{r['reviews/rerank_sentiment_hits@6']:.2f} style {r['styles/rerank_style_hits@6']:.2f}"
                  f" | steer gap reviews {r['reviews/steer_gap']:+.1f} styles {r['styles/steer_gap']:+.1f}"
                  f" ({time.perf_counter() - t0:.0f}s)", flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"queries": QUERIES, "searches": SEARCHES, "views": VIEWS,
                                        "results": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
