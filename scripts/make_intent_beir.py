"""An intent-retrieval set in BEIR layout, built from BANKING77 *train* only (never its test split).

A seeded 3,000 training texts are the corpus and 200 other training texts the queries; a corpus
text is relevant to a query when both carry the same intent. Paraphrase, not shared words, is
what finds them, so it balances SciFact (where the words alone are strong) when the hybrid
search's fusion is chosen (docs/indexing.md); being train data, it is a dev set.

``--clinc`` builds a set where the instruction decides what is relevant, from CLINC150
*validation* only: 2,800 texts as the corpus, 200 others as queries, and two qrels files for the
same queries: ``intent`` (same intent) and ``domain`` (same domain, *another* intent: the texts
of the query's own intent are paraphrases any search finds; what the domain instruction has to
add is the rest of its domain). Searched under ``INTENT_QUERY`` and ``DOMAIN_QUERY``.

    .venv/bin/python scripts/make_intent_beir.py /tmp/b77-intent-beir
    .venv/bin/python scripts/hybrid_eval.py minilm --beir /tmp/b77-intent-beir --split train \\
        --instruction "Find messages with the same customer intent" --exact --grid
    .venv/bin/python scripts/make_intent_beir.py --clinc /tmp/clinc-views-beir
    .venv/bin/python scripts/hybrid_eval.py minilm --beir /tmp/clinc-views-beir --split domain \\
        --instruction "$(.venv/bin/python scripts/make_intent_beir.py --print-instruction domain)" --exact
"""

from __future__ import annotations

import argparse
import csv
import json
import random
from collections.abc import Callable
from pathlib import Path

from app.settings import get_settings

INTENT_QUERY = "Find requests to a virtual assistant with the same specific intent"
DOMAIN_QUERY = "Find requests to a virtual assistant from the same broad domain, such as banking, travel or cooking"


def build(source: Path, out: Path, *, n_docs: int = 3000, n_queries: int = 200, seed: int = 0) -> dict[str, int]:
    """Write corpus.jsonl, queries.jsonl and qrels/train.tsv under ``out``; returns the counts."""
    with source.open(newline="", encoding="utf-8") as fh:
        rows = [(r["text"], r["category"]) for r in csv.DictReader(fh)]
    random.Random(seed).shuffle(rows)
    corpus, queries = rows[:n_docs], rows[n_docs:n_docs + n_queries]
    judged = _write(out, corpus, queries, {"train": lambda q, d: q[1] == d[1]})
    return {"documents": len(corpus), "queries": len(queries), "judgements": judged["train"]}


def build_clinc(data: Path, domains: Path, out: Path, *, n_docs: int = 2800, n_queries: int = 200,
                seed: int = 0) -> dict[str, int]:
    """Write corpus.jsonl, queries.jsonl, qrels/intent.tsv and qrels/domain.tsv from CLINC150's
    validation split; returns the counts."""
    domain_of = {i: d for d, intents in json.loads(domains.read_text()).items() for i in intents}
    rows = [(t, i) for t, i in json.loads(data.read_text())["val"]]
    random.Random(seed).shuffle(rows)
    corpus, queries = rows[:n_docs], rows[n_docs:n_docs + n_queries]
    judged = _write(out, corpus, queries, {
        "intent": lambda q, d: q[1] == d[1],
        "domain": lambda q, d: q[1] != d[1] and domain_of[q[1]] == domain_of[d[1]]})
    return {"documents": len(corpus), "queries": len(queries), **{f"judgements_{k}": v for k, v in judged.items()}}


def _write(out: Path, corpus: list[tuple[str, str]], queries: list[tuple[str, str]],
           relevant: dict[str, Callable[[tuple[str, str], tuple[str, str]], bool]]) -> dict[str, int]:
    """BEIR files for (text, label) rows: one qrels file per entry of ``relevant``."""
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    with (out / "corpus.jsonl").open("w") as f:
        f.writelines(json.dumps({"_id": f"d{i}", "title": "", "text": r[0]}) + "\n" for i, r in enumerate(corpus))
    with (out / "queries.jsonl").open("w") as f:
        f.writelines(json.dumps({"_id": f"q{i}", "text": r[0]}) + "\n" for i, r in enumerate(queries))
    judged = {}
    for split, rule in relevant.items():
        judged[split] = 0
        with (out / "qrels" / f"{split}.tsv").open("w") as f:
            f.write("query-id\tcorpus-id\tscore\n")
            for i, q in enumerate(queries):
                for j, d in enumerate(corpus):
                    if rule(q, d):
                        f.write(f"q{i}\td{j}\t1\n")
                        judged[split] += 1
    return judged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, nargs="?")
    parser.add_argument("--data-root", type=Path, default=None, help="datasets root (default: the settings')")
    parser.add_argument("--clinc", action="store_true",
                        help="the CLINC150-validation set of two views (intent, domain) instead")
    parser.add_argument("--print-instruction", choices=("intent", "domain"),
                        help="print the --clinc set's query instruction for that view and exit")
    args = parser.parse_args(argv)
    if args.print_instruction:
        print(INTENT_QUERY if args.print_instruction == "intent" else DOMAIN_QUERY)
        return 0
    if args.out is None:
        parser.error("give the output folder")
    root = args.data_root or Path(get_settings().shared_data_dir)
    if args.clinc:
        counts = build_clinc(root / "clinc150" / "data_full.json", root / "clinc150" / "domains.json", args.out)
    else:
        counts = build(root / "banking77" / "train.csv", args.out)
    print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
