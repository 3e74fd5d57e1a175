"""scripts/instruction_view_eval.py: nDCG@10 with documents embedded without / under the instruction."""

from __future__ import annotations

import json

import numpy as np

from app.evaluation import metrics
from tests.scripts import load_script


def test_dense_and_view_scores_match_a_hand_computation(tmp_path, minilm):
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    docs = {"d1": "my card was declined", "d2": "top up failed twice", "d3": "wrong exchange rate",
            "d4": "please block my lost card", "d5": "how do I top up by bank transfer"}
    queries = {"q1": "card not working", "q2": "adding money did not work"}
    qrels = {"q1": {"d1": 1, "d4": 1}, "q2": {"d2": 1, "d5": 1}}
    (beir / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n"
                                               for d, t in docs.items()))
    (beir / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()))
    (beir / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t{s}\n" for q, rel in qrels.items() for d, s in rel.items()))
    out = tmp_path / "row.json"
    instruction = "Find messages about the same problem"
    assert load_script("instruction_view_eval.py").main(
        ["minilm", "--beir", str(beir), "--split", "dev", "--instruction", instruction, "--out", str(out),
         "--no-cache", "--query-blends", "0,1"]) == 0
    row = json.loads(out.read_text())
    ids = sorted(docs)
    q = minilm.encode([queries["q1"], queries["q2"]], role="query", instruction=instruction)

    def score(doc_instruction: str | None, queries_read=q) -> float:
        d = minilm.encode([docs[i] for i in ids], role="document", instruction=doc_instruction)
        ranked = [[ids[i] for i in np.argsort(-(d @ v), kind="stable")] for v in queries_read]
        return round(100 * float(np.mean([metrics.ndcg_at_k(r, qrels[qid], 10)
                                           for r, qid in zip(ranked, ("q1", "q2"), strict=True)])), 2)

    assert (row["dense"], row["view"]) == (score(None), score(instruction))
    assert row["queries"] == 2 and row["docs"] == 5
    # Query blends against the plain documents: weight 1 is the dense row, 0 the query without its instruction.
    q0 = minilm.encode([queries["q1"], queries["q2"]], role="query")
    assert row["query_blends"]["1"]["ndcg"] == row["dense"]
    assert row["query_blends"]["0"]["ndcg"] == score(None, q0)
    assert abs(row["view_minus_dense"]["diff"] - (row["view"] - row["dense"])) < 0.02
