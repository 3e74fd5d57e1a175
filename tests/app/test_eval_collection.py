"""``facet eval --collection NAME --task beir:FOLDER``: an indexed collection scored through
its own search (``Facet.search``), nothing embedded again. A tiny BEIR folder, indexed with
real minilm in 24-token pieces so that a document has several and grouping matters."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.app.cli_runner import invoke_cli

TOPICS = {
    "d1": ("Aspirin and heart attacks", "Daily low-dose aspirin reduces the risk of a first heart attack in "
           "adults at high cardiovascular risk. The trial followed twenty thousand patients for five years. "
           "Bleeding in the stomach was the main harm seen with aspirin. Doctors weigh the benefit for the "
           "heart against the bleeding risk before they prescribe it. Older patients bled more often."),
    "d2": ("Statins and cholesterol", "Statins lower LDL cholesterol by blocking an enzyme in the liver. "
           "Lower cholesterol means fewer heart attacks and strokes over ten years. Muscle pain is a common "
           "complaint, though trials with placebo found it nearly as often without the drug. The liver "
           "makes most of the body's cholesterol at night, so some statins are taken in the evening."),
    "d3": ("Vitamin D and bones", "Vitamin D supplements did not prevent fractures in older adults living "
           "at home. Calcium with vitamin D gave a small benefit only in care homes. Sunlight makes vitamin "
           "D in the skin, and winter levels fall in northern countries. Bone density did not change over "
           "two years of supplements in the largest trial."),
    "d4": ("Sleep and memory", "Sleep after learning strengthens new memories. Students who slept recalled "
           "more word pairs than students kept awake. Deep slow-wave sleep replays the day's experience in "
           "the hippocampus. A short nap helped as well, but less than a full night of sleep."),
    "d5": ("Coffee and the liver", "Drinking coffee was linked with a lower risk of liver cirrhosis in a "
           "large cohort. Two cups a day or more gave the largest effect. Tea did not show the same link. "
           "The liver enzymes of coffee drinkers were lower too, whatever they drank besides."),
    "d6": ("Exercise and depression", "Regular aerobic exercise eased the symptoms of mild depression as "
           "much as medication in a twelve week trial. Running three times a week was enough. Patients who "
           "kept exercising relapsed less often in the following year."),
    "d7": ("Salt and blood pressure", "Eating less salt lowers blood pressure, most in people with "
           "hypertension. A diet rich in vegetables lowered it further. The kidneys keep the balance of "
           "salt and water, and blood pressure rises when they fail to."),
    "d8": ("Antibiotics and colds", "Antibiotics do not shorten the common cold, a viral infection. They "
           "caused diarrhoea and rashes in some children. Prescribing them for colds breeds resistant "
           "bacteria in the community."),
    "d9": ("Heart rhythm", "Atrial fibrillation is an irregular heart rhythm that raises the risk of stroke. "
           "Blood thinners lower that risk. The heart's upper chambers quiver instead of beating."),
    "d10": ("Gut bacteria", "The bacteria of the gut digest fibre into short chain fatty acids. Antibiotics "
            "change the gut flora for months."),
    "d11": ("Migraine", "Migraine headaches come with nausea and sensitivity to light."),
    "d12": ("Smoking and lungs", "Smoking causes most lung cancers. Quitting at any age lowers the risk."),
}
QUERIES = {
    "1": "aspirin prevents heart attacks but causes bleeding",
    "2": "statins lower cholesterol made in the liver",
    "3": "vitamin D supplements and fractures in older people",
    "4": "sleep improves memory of what was learned",
    "5": "coffee protects the liver",
    "6": "heart disease risk",
}
QRELS = {"1": {"d1": 2, "d9": 1}, "2": {"d2": 1}, "3": {"d3": 1}, "4": {"d4": 1}, "5": {"d5": 1},
         "6": {"d1": 1, "d2": 1, "d9": 1}}


def write_beir(folder: Path, corpus: dict[str, tuple[str, str]], queries: dict[str, str],
               qrels: dict[str, dict[str, int]]) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": d, "title": t, "text": x}) + "\n" for d, (t, x) in corpus.items()))
    (folder / "queries.jsonl").write_text("".join(
        json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t{g}\n" for q, rel in qrels.items() for d, g in rel.items()))
    return folder


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> tuple[Path, Path]:
    """(data folder holding collection ``sci``, its BEIR folder)."""
    root = tmp_path_factory.mktemp("evalcoll")
    beir = write_beir(root / "beir", TOPICS, QUERIES, QRELS)
    data = root / "data"
    done = invoke_cli("index", str(beir / "corpus.jsonl"), "-c", "sci", "-e", "minilm",
                      "--chunk-tokens", "24", "--chunk-overlap", "0", env={"FACET_DATA_DIR": str(data)})
    assert done.returncode == 0, done.stderr
    return data, beir


def eval_collection(data: Path, *args: str):
    return invoke_cli("eval", "--collection", "sci", "--no-progress", *args,
                      env={"FACET_DATA_DIR": str(data), "OMP_NUM_THREADS": "1"})


def hand_ndcg10(ranked: list[str], rel: dict[str, int]) -> float:
    """nDCG@10 written out: gain/log2(rank+1), a repeated document earns nothing."""
    seen: set[str] = set()
    dcg = 0.0
    for i, d in enumerate(ranked[:10]):
        if d not in seen:
            dcg += rel.get(d, 0) / math.log2(i + 2)
        seen.add(d)
    ideal = sorted(rel.values(), reverse=True)[:10]
    return dcg / sum(g / math.log2(i + 2) for i, g in enumerate(ideal))


def facade_rankings(data: Path, mode: str, grouped: bool, monkeypatch) -> dict[str, list[str]]:
    from app.core import Facet
    from app.services.search import SearchRequest
    from app.settings import get_settings

    monkeypatch.setenv("FACET_DATA_DIR", str(data))
    get_settings.cache_clear()
    try:
        with Facet.open() as facet:
            return {q: [r.doc_id for r in facet.search(SearchRequest(
                text, "sci", top_k=10, mode=mode, group_by_document=grouped)).results]
                for q, text in QUERIES.items()}
    finally:
        monkeypatch.delenv("FACET_DATA_DIR")
        get_settings.cache_clear()


def run_json(data: Path, tmp_path: Path, beir: Path, *extra: str) -> dict:
    done = eval_collection(data, "--task", f"beir:{beir}", "--mode", "dense,lexical", "--mode", "hybrid",
                           "--json", "--out", str(tmp_path / "out"), *extra)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (tmp_path / "out" / "results.json").is_file() and (tmp_path / "out" / "results.md").is_file()
    return report


def test_ndcg_is_that_of_the_facades_own_search_grouped_by_default(indexed, tmp_path, monkeypatch) -> None:
    data, beir = indexed
    report = run_json(data, tmp_path, beir)
    assert report["results_per"] == "document" and report["chunk_tokens"] == 24
    assert report["queries"] == len(QUERIES) and report["coverage"] == 1.0
    assert [r["mode"] for r in report["runs"]] == ["dense", "lexical", "hybrid"]
    for run in report["runs"]:
        ranked = facade_rankings(data, run["mode"], True, monkeypatch)
        expected = sum(hand_ndcg10(ranked[q], QRELS[q]) for q in QUERIES) / len(QUERIES)
        assert run["ndcg@10"] == pytest.approx(expected, abs=1e-12), run["mode"]
        assert run["ran"] == [run["mode"]]
        # One result per document: ten distinct ones where a dense search has twelve to rank.
        assert run["distinct_docs@10"] == 10 or run["mode"] == "lexical"  # BM25: documents with the words
        assert 0 < run["recall@100"] <= 1


def test_per_chunk_scores_the_chunks_as_ranked_and_differs(indexed, tmp_path, monkeypatch) -> None:
    data, beir = indexed
    grouped = {r["mode"]: r for r in run_json(data, tmp_path / "g", beir)["runs"]}
    chunks = run_json(data, tmp_path / "c", beir, "--per-chunk")
    assert chunks["results_per"] == "chunk"
    for run in chunks["runs"]:
        ranked = facade_rankings(data, run["mode"], False, monkeypatch)
        # a document holds two places of some query's top 10 (long documents, 24-token pieces)
        assert any(len(set(r)) < len(r) for r in ranked.values()), run["mode"]
        expected = sum(hand_ndcg10(ranked[q], QRELS[q]) for q in QUERIES) / len(QUERIES)
        assert run["ndcg@10"] == pytest.approx(expected, abs=1e-12), run["mode"]
        assert run["distinct_docs@10"] < 10
    assert any(chunks_run["ndcg@10"] != grouped[chunks_run["mode"]]["ndcg@10"] for chunks_run in chunks["runs"])


def test_table_on_stdout_and_report_files(indexed, tmp_path) -> None:
    data, beir = indexed
    done = eval_collection(data, "--task", f"beir:{beir}", "--task-instruction",
                           "retrieve the medical abstract", "--out", str(tmp_path / "o"))
    assert done.returncode == 0, done.stderr
    assert "| mode | ran | nDCG@10 | Recall@100 |" in done.stdout
    assert "| auto | dense |" in done.stdout  # an instruction: auto searches dense
    saved = json.loads((tmp_path / "o" / "results.json").read_text())
    assert saved["instruction"] == "retrieve the medical abstract" and "command" in saved


@pytest.mark.parametrize(("args", "says"), [
    (("--baselines", "minilm"), "--baselines"),
    (("--suite", "full"), "--suite"),
    (("--batch-size", "8"), "--batch-size"),
    (("minilm,bge",), "embedder list"),
    (("--task-instruction", "x", "--no-instruction"), "not both"),
    (("--mode", "sideways"), "--mode 'sideways'"),
])
def test_refuses_what_belongs_to_embedding_evaluation(indexed, args, says) -> None:
    data, beir = indexed
    done = eval_collection(data, "--task", f"beir:{beir}", *args)
    assert done.returncode != 0 and says in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_refuses_unknown_collection_and_non_beir_folders(indexed, tmp_path) -> None:
    data, beir = indexed
    unknown = invoke_cli("eval", "--collection", "nope", "--task", f"beir:{beir}", "--no-progress",
                         "--out", str(tmp_path / "u"), env={"FACET_DATA_DIR": str(data)})
    assert unknown.returncode == 3 and "nope" in unknown.stderr, unknown.stderr
    assert not (tmp_path / "u").exists()  # no empty report folder left
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("hello")
    not_beir = eval_collection(data, "--task", f"beir:{tmp_path / 'plain'}")
    assert not_beir.returncode == 2 and "corpus.jsonl" in not_beir.stderr, not_beir.stderr
    sts = eval_collection(data, "--task", f"sts:{tmp_path / 'plain' / 'notes.txt'}")
    assert sts.returncode != 0 and "beir:FOLDER" in sts.stderr, sts.stderr
    none = eval_collection(data)
    assert none.returncode != 0 and "--task beir:FOLDER" in none.stderr, none.stderr


def test_qrels_of_another_corpus_refused_and_partial_coverage_warned(indexed, tmp_path) -> None:
    data, _ = indexed
    other = write_beir(tmp_path / "other", {"x1": ("", "quantum chromodynamics"), "x2": ("", "jets")},
                       {"1": "quarks"}, {"1": {"x1": 1}})
    refused = eval_collection(data, "--task", f"beir:{other}", "--out", str(tmp_path / "r" / "x"))
    assert refused.returncode == 4
    assert "none of the judged documents is in the collection — indexed from another corpus?" in refused.stderr
    # Neither the folder made for the report nor its parent is left, empty (`results/` was, as
    # the run's default --out is `results/NAME`: the exit-code audit of 2026-12-06).
    assert not (tmp_path / "r").exists()
    part = write_beir(tmp_path / "part", {**TOPICS, "z9": ("", "a document never indexed")},
                      {"1": QUERIES["1"], "2": QUERIES["2"]}, {"1": {"d1": 1}, "2": {"z9": 1}})
    warned = eval_collection(data, "--task", f"beir:{part}", "--mode", "lexical", "--json",
                             "--out", str(tmp_path / "p"))
    assert warned.returncode == 0, warned.stderr
    assert "only 1 of the 2 judged documents" in warned.stderr and "coverage 50.0%" in warned.stderr
    assert json.loads(warned.stdout)["coverage"] == 0.5


def test_collection_only_options_refused_without_it(tmp_path) -> None:
    done = invoke_cli("eval", "minilm", "--per-chunk", env={"FACET_DATA_DIR": str(tmp_path / "d")})
    assert done.returncode != 0 and "--per-chunk applies to --collection" in done.stderr, done.stderr
