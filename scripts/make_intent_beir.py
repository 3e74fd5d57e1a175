"""An intent-retrieval set in BEIR layout, built from BANKING77 *train* only (never its test split).

A seeded 3,000 training texts are the corpus and 200 other training texts the queries; a corpus
text is relevant to a query when both carry the same intent. Paraphrase, not shared words, is
what finds them, so it balances SciFact (where the words alone are strong) when the hybrid
search's fusion is chosen (docs/indexing.md); being train data, it is a dev set.

    .venv/bin/python scripts/make_intent_beir.py /tmp/b77-intent-beir
    .venv/bin/python scripts/hybrid_eval.py minilm --beir /tmp/b77-intent-beir --split train \\
        --instruction "Find messages with the same customer intent" --exact --grid
"""

from __future__ import annotations

import argparse
import csv
import json
import random
from pathlib import Path

from app.settings import get_settings


def build(source: Path, out: Path, *, n_docs: int = 3000, n_queries: int = 200, seed: int = 0) -> dict[str, int]:
    """Write corpus.jsonl, queries.jsonl and qrels/train.tsv under ``out``; returns the counts."""
    with source.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    random.Random(seed).shuffle(rows)
    corpus, queries = rows[:n_docs], rows[n_docs:n_docs + n_queries]
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    with (out / "corpus.jsonl").open("w") as f:
        f.writelines(json.dumps({"_id": f"d{i}", "title": "", "text": r["text"]}) + "\n" for i, r in enumerate(corpus))
    with (out / "queries.jsonl").open("w") as f:
        f.writelines(json.dumps({"_id": f"q{i}", "text": r["text"]}) + "\n" for i, r in enumerate(queries))
    judged = 0
    with (out / "qrels" / "train.tsv").open("w") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for i, q in enumerate(queries):
            for j, d in enumerate(corpus):
                if d["category"] == q["category"]:
                    f.write(f"q{i}\td{j}\t1\n")
                    judged += 1
    return {"documents": len(corpus), "queries": len(queries), "judgements": judged}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--data-root", type=Path, default=None, help="datasets root (default: the settings')")
    args = parser.parse_args(argv)
    root = args.data_root or Path(get_settings().shared_data_dir)
    print(json.dumps(build(root / "banking77" / "train.csv", args.out)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
