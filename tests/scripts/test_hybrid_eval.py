"""scripts/hybrid_eval.py: SciFact through the search service in each mode, on a small subset."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from app.evaluation.cache import EmbeddingCache
from app.evaluation.loaders import load_beir
from app.evaluation.suites import SCIFACT_INSTRUCTION
from app.evaluation.tasks import EvalContext, RetrievalTask
from app.services.search import HYBRID_FUSION
from tests.scripts import load_script


def test_dense_mode_scores_as_facet_eval_and_the_grid_holds_the_served_fusion(shared_data, minilm, tmp_path,
                                                                             capsys):
    out = tmp_path / "hybrid.json"
    script = load_script("hybrid_eval.py")
    assert script.main(["minilm", "--split", "test", "--queries", "8", "--docs", "40", "--grid", "--exact",
                        "--data-root", str(shared_data), "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert json.loads(capsys.readouterr().out) == result
    assert (result["queries"], result["documents"], result["chunks"]) == (8, 40, 40)
    # The dense mode through index -> store -> search service equals facet eval's scifact task
    # on the same subset (same sampling, same instruction).
    task = RetrievalTask("scifact", lambda: load_beir(shared_data / "beir_scifact", "test"),
                         instruction=SCIFACT_INSTRUCTION, n_queries=8, n_docs=40, seed=0)
    scores, _ = task.evaluate(EvalContext(minilm, EmbeddingCache(None), show_progress=False))
    assert result["dense"]["ndcg@10"] == pytest.approx(round(100 * scores["ndcg@10"], 2), abs=0.011)
    assert result["dense"]["recall@100"] == 100.0 == result["hybrid"]["recall@100"]  # 40 docs, top 100
    assert 0 < result["lexical"]["ndcg@10"] <= 100
    boot = result["paired_bootstrap_ndcg@10"]["hybrid - dense"]
    assert boot["diff"] == pytest.approx(result["hybrid"]["ndcg@10"] - result["dense"]["ndcg@10"], abs=0.011)
    assert boot["ci95_low"] <= boot["diff"] <= boot["ci95_high"]
    assert len(result["per_query_ndcg@10"]["dense"]) == 8
    assert len(result["grid"]) == 12
    served = [row for row in result["grid"]
              if {k: row[k] for k in asdict(HYBRID_FUSION)} == asdict(HYBRID_FUSION)]
    assert [row["ndcg@10"] for row in served] == [result["hybrid"]["ndcg@10"]] == [result["hybrid_again"]["ndcg@10"]]


def test_a_users_own_beir_folder(tmp_path, capsys):
    folder = tmp_path / "mine"
    (folder / "qrels").mkdir(parents=True)
    docs = {"d1": "The zebra crossing on Elm Street is repainted every spring",
            "d2": "Our bakery sells sourdough and rye bread on weekends",
            "d3": "Pedestrian safety near schools improved after new crossings",
            "d4": "Quarterly revenue grew while costs fell"}
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "title": "", "text": t}) + "\n"
                                                 for i, t in docs.items()))
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "zebra crossing"}) + "\n"
                                          + json.dumps({"_id": "q2", "text": "where to buy rye bread"}) + "\n")
    (folder / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n")
    script = load_script("hybrid_eval.py")
    assert script.main(["minilm", "--beir", str(folder), "--split", "dev"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["queries"], result["documents"], result["instruction"]) == (2, 4, None)
    # Each query's one relevant text holds its words, so BM25 ranks it first.
    assert result["lexical"]["ndcg@10"] == 100.0
    assert result["hybrid"]["recall@100"] == 100.0
    with pytest.raises(SystemExit):
        script.main(["minilm", "--split", "train"])  # SciFact takes dev or test only


def test_the_intent_set_is_built_from_banking77_train_with_same_intent_judgements(shared_data, tmp_path, capsys):
    import csv

    assert load_script("make_intent_beir.py").main([str(tmp_path), "--data-root", str(shared_data)]) == 0
    counts = json.loads(capsys.readouterr().out)
    assert (counts["documents"], counts["queries"]) == (3000, 200)
    train = {r["text"] for r in csv.DictReader((shared_data / "banking77" / "train.csv").open())}
    data = load_beir(tmp_path, "train")
    assert len(data.queries) == 200 and sum(len(r) for r in data.qrels.values()) == counts["judgements"]
    assert {t for _, t in data.corpus.values()} <= train  # train texts only, never the test split
    assert set(data.queries.values()) <= train


def test_the_clinc_set_judges_one_query_set_by_intent_and_by_the_rest_of_its_domain(shared_data, tmp_path,
                                                                                     capsys):
    script = load_script("make_intent_beir.py")
    assert script.main([str(tmp_path), "--clinc", "--data-root", str(shared_data)]) == 0
    counts = json.loads(capsys.readouterr().out)
    assert (counts["documents"], counts["queries"]) == (2800, 200)
    clinc = json.loads((shared_data / "clinc150" / "data_full.json").read_text())
    intent_of = {t: i for t, i in clinc["val"]}  # validation texts only, never the test split
    domain_of = {i: d for d, intents in json.loads((shared_data / "clinc150" / "domains.json").read_text()).items()
                 for i in intents}
    intent, domain = load_beir(tmp_path, "intent"), load_beir(tmp_path, "domain")
    assert intent.queries == domain.queries and len(intent.queries) == 200
    assert {t for _, t in intent.corpus.values()} | set(intent.queries.values()) <= set(intent_of)
    for qrels, key in ((intent, "judgements_intent"), (domain, "judgements_domain")):
        assert sum(len(r) for r in qrels.qrels.values()) == counts[key]
    for q, text in list(intent.queries.items())[:20]:
        want = intent_of[text]
        assert {intent_of[intent.corpus[d][1]] for d in intent.qrels[q]} == {want}
        judged = {intent_of[domain.corpus[d][1]] for d in domain.qrels[q]}
        assert want not in judged and {domain_of[i] for i in judged} == {domain_of[want]}
    assert script.main(["--print-instruction", "domain"]) == 0
    assert capsys.readouterr().out.strip() == script.DOMAIN_QUERY
