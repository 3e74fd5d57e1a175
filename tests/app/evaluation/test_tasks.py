"""Cache, tasks and report on fake embedders whose right answers are known."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from app.evaluation import loaders
from app.evaluation.cache import EmbeddingCache
from app.evaluation.runner import EvalRunner, markdown_table, write_report
from app.evaluation.tasks import (
    ClassificationTask,
    ClusteringTask,
    EvalContext,
    MultiViewClusteringTask,
    RerankTask,
    RetrievalTask,
    StsTask,
    sample_indices,
    truncate_words,
)
from tests.app.evaluation.conftest import FakeEmbedder, hashed_vector


def _ctx(embedder: FakeEmbedder, tmp_path: Path | None = None, **others: FakeEmbedder) -> EvalContext:
    cache = EmbeddingCache(tmp_path / "cache" if tmp_path else None)
    return EvalContext(embedder, cache, show_progress=False, load_embedder=lambda n: others[n])


# -- cache ---------------------------------------------------------------------------------


def test_cache_encodes_each_text_once_and_survives_restart(tmp_path: Path) -> None:
    emb = FakeEmbedder(lambda t, r, i: hashed_vector(t), 16)
    cache = EmbeddingCache(tmp_path)
    first = cache.encode(emb, ["a", "b", "a"], role="query", instruction="x")
    assert [e[0] for e in emb.encoded] == ["a", "b"]  # the duplicate is encoded once
    np.testing.assert_allclose(first[0], first[2])
    emb.encoded.clear()
    again = EmbeddingCache(tmp_path).encode(emb, ["b", "a", "c"], role="query", instruction="x")
    assert [e[0] for e in emb.encoded] == ["c"]  # a and b came from disk
    np.testing.assert_allclose(again[1], first[0], atol=1e-7)
    assert again.dtype == np.float32


def test_a_damaged_cache_chunk_is_encoded_again_not_a_failed_run(tmp_path: Path, caplog) -> None:
    """A chunk cut short or with a flipped byte is a zipfile.BadZipFile ("Bad CRC-32 for file
    'keys.npy'"), which ended the run with a traceback; a chunk whose keys and vectors differ
    in number, a ValueError of zip(strict=True) outside the guarded load. Each is logged and
    its texts encoded again (2026-12-05)."""
    emb = FakeEmbedder(lambda t, r, i: hashed_vector(t), 16)
    EmbeddingCache(tmp_path).encode(emb, ["a", "b"], role="query", instruction=None)
    EmbeddingCache(tmp_path).encode(emb, ["c"], role="query", instruction=None)
    chunks = sorted(tmp_path.rglob("chunk-*.npz"), key=lambda p: p.stat().st_size)
    assert len(chunks) == 2
    data = bytearray(chunks[1].read_bytes())  # a and b
    data[len(data) // 2] ^= 0xFF
    chunks[1].write_bytes(bytes(data))
    with open(chunks[0], "wb") as f:  # c: its keys and vectors differ in number
        np.savez(f, keys=np.array(["x", "c"], dtype="<U64"), vectors=np.zeros((1, 16), np.float32))
    emb.encoded.clear()
    with caplog.at_level("WARNING"):
        again = EmbeddingCache(tmp_path).encode(emb, ["a", "b", "c"], role="query", instruction=None)
    assert sorted(e[0] for e in emb.encoded) == ["a", "b", "c"]
    np.testing.assert_allclose(again[2], emb.encode(["c"])[0], atol=1e-7)
    assert sum("ignoring unreadable cache chunk" in r.getMessage() for r in caplog.records) == 2


def test_cache_key_includes_identity_role_and_instruction(tmp_path: Path) -> None:
    emb = FakeEmbedder(lambda t, r, i: hashed_vector(f"{t}|{r}|{i}"), 16)
    cache = EmbeddingCache(tmp_path)
    cache.encode(emb, ["a"], role="query", instruction="x")
    cache.encode(emb, ["a"], role="document", instruction="x")
    cache.encode(emb, ["a"], role="query", instruction="y")
    cache.encode(emb, ["a"], role="query", instruction=" x ")  # same instruction once stripped
    emb.version = 1  # identity changes -> new embeddings
    cache.encode(emb, ["a"], role="query", instruction="x")
    assert emb.encoded == [("a", "query", "x"), ("a", "document", "x"), ("a", "query", "y"), ("a", "query", "x")]


def test_a_killed_encode_keeps_its_finished_parts_and_the_rerun_does_only_the_rest(tmp_path: Path) -> None:
    # An hour-long corpus encode killed part-way (here: the embedder raises on its third
    # part, as a KeyboardInterrupt would) keeps the parts written before it.
    texts = [f"text {i:02d}" + "x" * (i % 3) for i in range(10)]
    emb = FakeEmbedder(lambda t, r, i: hashed_vector(t), 16)
    calls: list[int] = []
    encode = emb.encode

    def dies_on_third_part(part: list[str], **kw: object) -> np.ndarray:
        calls.append(len(part))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return encode(part, **kw)

    emb.encode = dies_on_third_part
    with pytest.raises(KeyboardInterrupt):
        EmbeddingCache(tmp_path, write_every=4).encode(emb, texts, role="document", instruction=None)
    assert calls == [4, 4, 2] and len(emb.encoded) == 8
    emb.encode = encode
    emb.encoded.clear()
    cache = EmbeddingCache(tmp_path, write_every=4)
    out = cache.encode(emb, texts, role="document", instruction=None)
    assert len(emb.encoded) == 2 and (cache.hits, cache.misses, cache.repeats) == (8, 2, 0)
    cache.encode(emb, [texts[0], texts[0]], role="document", instruction=None)
    # Found in the cache once, and a repeat once, as a cold run counts it (a warm run counted
    # both as hits: results.json's repeated_texts changed with the cache's state).
    assert (cache.hits, cache.misses, cache.repeats) == (9, 2, 1)
    from app.commands.eval import cache_summary

    assert cache_summary(cache) == "cache: 9 hits, 2 encoded, 1 repeated text read once"
    whole = EmbeddingCache(None).encode(emb, texts, role="document", instruction=None)
    np.testing.assert_allclose(out, whole, atol=1e-7)  # in the caller's order, parts or not
    with pytest.raises(ValueError, match="write_every"):
        EmbeddingCache(tmp_path, write_every=0)


def test_disabled_cache_always_encodes() -> None:
    emb = FakeEmbedder(lambda t, r, i: hashed_vector(t), 8)
    cache = EmbeddingCache(None)
    cache.encode(emb, ["a"], role="query", instruction=None)
    cache.encode(emb, ["a"], role="query", instruction=None)
    assert len(emb.encoded) == 2
    # A text repeated within a call is encoded once, and is no cache hit: `--no-cache` said
    # "cache: 5 hits" of STS-B's repeated sentences.
    cache.encode(emb, ["b", "c", "b"], role="query", instruction=None)
    assert (cache.hits, cache.misses, cache.repeats) == (0, 4, 1)
    from app.commands.eval import cache_summary

    assert cache_summary(cache) == "no cache (--no-cache): 4 texts encoded, 1 repeated text encoded once"
    assert cache.encode(emb, [], role="query", instruction=None).shape == (0, 8)


# -- helpers -------------------------------------------------------------------------------


def test_sampling_and_truncation_are_fixed() -> None:
    assert sample_indices(10, None, 0) == list(range(10))
    a = sample_indices(100, 7, 3)
    assert a == sample_indices(100, 7, 3) and a == sorted(a) and len(set(a)) == 7
    assert a != sample_indices(100, 7, 4)
    assert truncate_words("one two  three four", 2) == "one two"
    assert truncate_words("one two", None) == "one two"


# -- STS -------------------------------------------------------------------------------------


def test_sts_task_spearman_of_cosine() -> None:
    # 2-d unit vectors at angle theta: cosine between "s" and "a<k>" = cos(k * 20 degrees).
    def fn(t: str, r: str, i: str | None) -> list[float]:
        k = 0 if t == "s" else int(t[1:])
        return [math.cos(math.radians(20 * k)), math.sin(math.radians(20 * k))]

    pairs = [loaders.StsPair("s", f"a{k}", gold) for k, gold in [(1, 5.0), (2, 3.0), (3, 4.0), (4, 1.0)]]
    task = StsTask("t", lambda: pairs)
    result = task.run(_ctx(FakeEmbedder(fn, 2)))
    # cosines decrease with k: ranks 4,3,2,1 vs gold ranks 4,2,3,1 -> rho = 1 - 6*2/(4*15) = 0.8
    assert result.scores["spearman"] == pytest.approx(0.8)
    assert result.info["pairs"] == 4


def _sts_pairs(first: list[str], second: list[str]) -> list[loaders.StsPair]:
    return [loaders.StsPair(a, b, float(gold)) for gold, (a, b) in enumerate(zip(first, second, strict=True))]


def test_sts_with_constant_similarities_has_no_score_and_says_why() -> None:
    """Each sentence paired with itself: every cosine is 1 up to float rounding, and Spearman
    ranked the rounding (-80.00 in the audit); exactly constant, it raised and ended the run."""
    texts = [f"sentence {i}" for i in range(30)]
    task = StsTask("self", lambda: _sts_pairs(texts, texts))
    emb = FakeEmbedder(lambda t, r, i: hashed_vector(t, 64), 64)
    cosine = np.array([float(v @ v) for v in emb.encode(texts)], dtype=np.float32)
    assert 0 < float(cosine.max() - cosine.min()) < 1e-6  # the noise is there, and small
    result = task.run(_ctx(emb))
    assert math.isnan(result.main_score), result.main_score  # not a ranking of the rounding noise
    assert result.error is not None and "spearman is undefined" in result.error
    assert "same cosine similarity" in result.error and "a sentence and itself" in result.error
    assert result.info["pairs"] == 30
    as_json = json.loads(json.dumps(result.to_dict()))  # NaN would be written as invalid JSON
    assert as_json["scores"] == {"spearman": None} and as_json["error"] == result.error
    # One vector for every text: exactly constant (this raised "spearman is undefined ..." and ended the run).
    collapsed = StsTask("one-vector", lambda: _sts_pairs(texts[:4], texts[4:8]))
    result = collapsed.run(_ctx(FakeEmbedder(lambda t, r, i: [1.0, 2.0], 2)))
    assert result.error is not None and "spearman is undefined" in result.error
    # A spread well above rounding is scored.
    assert StsTask("t", lambda: _sts_pairs(texts[:4], texts[4:8])).run(_ctx(emb)).error is None


def test_sts_with_nan_similarities_is_an_error_naming_the_count() -> None:
    """NaN similarities were ranked by their position: four NaN scored 100.00."""
    texts = [f"sentence {i}" for i in range(8)]

    def fn(t: str, r: str, i: str | None) -> np.ndarray:
        return np.full(4, np.nan) if t in ("sentence 1", "sentence 6") else hashed_vector(t, 4)

    result = StsTask("nan", lambda: _sts_pairs(texts[:4], texts[4:])).run(_ctx(FakeEmbedder(fn, 4)))
    assert math.isnan(result.main_score), result.main_score
    assert result.error == "the embedder returned NaN for 2 of 4 pairs (the first: 'sentence 1' and 'sentence 5')"
    assert result.to_dict()["scores"] == {"spearman": None}


def test_a_failed_task_does_not_cost_the_other_tasks_their_figures(tmp_path: Path) -> None:
    texts = [f"sentence {i}" for i in range(6)]
    same = [f"same {i}" for i in range(6)]  # all embedded as one vector: every cosine exactly 1
    tasks = [
        StsTask("self", lambda: _sts_pairs(same[:3], same[3:])),
        StsTask("pairs", lambda: _sts_pairs(texts[:3], texts[3:])),
    ]
    one_for_same = FakeEmbedder(lambda t, r, i: np.eye(16)[0] if t.startswith("same") else hashed_vector(t), 16,
                                name="fake")
    models = {"fake": one_for_same}
    runner = EvalRunner(models.__getitem__, EmbeddingCache(None), show_progress=False)
    seen: list[str] = []
    report = runner.run("fake", [], tasks, "quick", on_result=lambda name, r: seen.append(r.task))
    assert seen == ["self", "pairs"]
    self_result, pairs_result = report.runs[0].results
    assert self_result.error is not None and pairs_result.error is None
    json_path, md_path = write_report(report, tmp_path / "out")
    results = json.loads(json_path.read_text())["runs"][0]["results"]
    assert results[0]["scores"] == {"spearman": None} and "undefined" in results[0]["error"]
    assert isinstance(results[1]["scores"]["spearman"], float) and "error" not in results[1]
    md = md_path.read_text()
    assert "| self | **spearman** | failed [1] |" in md  # was `nan`, with no reason
    assert "- [1] fake on self: spearman is undefined" in md


# -- retrieval and rerank ------------------------------------------------------------------------


def _beir() -> loaders.BeirData:
    corpus = {f"d{i}": ("", f"doc {i}") for i in range(6)}
    queries = {"q0": "query 0", "q1": "query 1"}
    qrels = {"q0": {"d0": 1.0}, "q1": {"d1": 1.0, "d2": 1.0}}
    return loaders.BeirData(corpus, queries, qrels)


def _topic_vectors(t: str, r: str, i: str | None) -> np.ndarray:
    # Queries and docs share a direction per number; doc 2 is only close to query 1 with the instruction.
    n = int(t.split()[-1])
    v = np.zeros(8)
    if t.startswith("query"):
        v[n] = 1.0
        if i and n == 1:
            v[2] = 0.9
    else:
        v[n] = 1.0
    return v


def test_retrieval_task_hand_case() -> None:
    task = RetrievalTask("r", _beir, instruction="find", recall_k=1)
    result = task.run(_ctx(FakeEmbedder(_topic_vectors, 8)))
    # q0 -> d0 first: nDCG 1. q1 -> d1 (1.0), d2 (0.9 after normalising) first and second: nDCG 1.
    assert result.scores["ndcg@10"] == pytest.approx(1.0)
    # recall@1: q0 1/1, q1 1/2
    assert result.scores["recall@1"] == pytest.approx(0.75)
    no_instruction = RetrievalTask("r", _beir, instruction=None, recall_k=10).run(_ctx(FakeEmbedder(_topic_vectors, 8)))
    # q1 finds d1 at rank 1, d2 ties with d0, d3.. at zero similarity -> lower index first: d0,d2
    ideal = 1 + 1 / math.log2(3)
    expected_q1 = (1 + 1 / math.log2(4)) / ideal
    assert no_instruction.scores["ndcg@10"] == pytest.approx((1 + expected_q1) / 2)


def test_documents_of_one_text_tie_whatever_else_is_scored() -> None:
    """Two documents of one text tie and the lower id ranks first (docs/evaluation.md, "Ties").
    Their vectors were equal but their scores, from one float32 matrix product, 6e-8 apart on
    this machine's BLAS, in an order set by their place and by the number of queries: a query's
    ranking of them, and its nDCG, changed when an unrelated query was added (2026-12-05)."""
    texts = {"d0": "doc a", "d1": "dup", "d2": "doc b", "d3": "doc c", "d4": "dup", "d5": "doc d"}

    def beir(n_queries: int) -> loaders.BeirData:
        queries = {f"q{i}": f"query {i}" for i in range(n_queries)}
        qrels = {q: {"d4": 1.0} for q in queries}
        return loaders.BeirData({d: ("", t) for d, t in texts.items()}, queries, qrels)

    embedder = FakeEmbedder(lambda t, r, i: hashed_vector(t, 384), 384)
    rankings = {}
    for n in (1, 2, 3, 5):
        task = RetrievalTask("r", lambda n=n: beir(n), instruction=None)
        ranked = task.rank(_ctx(embedder), None, 6, None)
        for qid, order in ranked.items():
            assert order.index("d4") == order.index("d1") + 1, (n, qid, order)
            rankings.setdefault(qid, set()).add(tuple(order))
    assert all(len(seen) == 1 for seen in rankings.values()), rankings
    # The reranker's sort too: equal scores keep the first stage's order (d1 before d4).
    first = FakeEmbedder(lambda t, r, i: hashed_vector(t, 384), 384, name="first")
    other = FakeEmbedder(lambda t, r, i: hashed_vector(t + "!", 384), 384, name="other")
    rerank = RerankTask("rr", RetrievalTask("r", lambda: beir(1), instruction=None),
                        first_stage="first", top_n=6)
    ndcg = rerank.run(_ctx(other, first=first)).scores["ndcg@10"]

    def unit(v: np.ndarray) -> np.ndarray:
        return v / np.linalg.norm(v)

    query = unit(hashed_vector("query 0!", 384))
    score = {d: float(unit(hashed_vector(t + "!", 384)) @ query) for d, t in texts.items()}
    order = sorted(rerank.candidates(_ctx(other, first=first))["q0"], key=lambda d: -score[d])
    assert order.index("d4") == order.index("d1") + 1  # (float64: equal, the sort is stable)
    assert ndcg == pytest.approx(1 / math.log2(order.index("d4") + 2))


def test_retrieval_info_counts_queries_without_a_relevant_document() -> None:
    """Such a query scores 0 and counts in the mean (trec_eval/BEIR); results.json now says how many."""

    def only_zero_for_q1() -> loaders.BeirData:
        data = _beir()
        data.qrels["q1"] = {"d1": 0.0}
        return data

    result = RetrievalTask("r", only_zero_for_q1, instruction=None).run(_ctx(FakeEmbedder(_topic_vectors, 8)))
    assert result.scores["ndcg@10"] == pytest.approx(0.5)  # q0: 1, q1: 0
    assert result.info["queries"] == 2 and result.info["queries_without_relevant"] == 1
    assert "queries_without_relevant" not in RetrievalTask("r", _beir, instruction=None).info()


def test_retrieval_subset_keeps_judged_docs_and_truncates() -> None:
    task = RetrievalTask("r", _beir, instruction=None, n_queries=1, n_docs=3, doc_max_words=1, seed=0)
    data = task.data()
    assert len(data.query_ids) == 1 and len(data.doc_ids) == 3
    judged = set(data.qrels[data.query_ids[0]])
    assert judged <= set(data.doc_ids)
    assert all(t == "doc" for t in data.doc_texts)


def test_rerank_reorders_first_stage_candidates() -> None:
    # First stage (no instruction) ranks q1: d1, then d0 and d2 tied at 0 (lower index first), so
    # its top-3 is d1, d0, d2; the reranker with the instruction lifts d2 above d0.
    first = FakeEmbedder(_topic_vectors, 8, name="first")
    reranker = FakeEmbedder(_topic_vectors, 8, name="reranker")
    retrieval = RetrievalTask("rr", _beir, instruction="find")
    task = RerankTask("rr", retrieval, first_stage="first", top_n=3)
    result = task.run(_ctx(reranker, first=first))
    assert result.scores["ndcg@10"] == pytest.approx(1.0)
    # First stage alone: q0 perfect; q1 has d2 at rank 3 -> (1 + 1/log2(4)) / (1 + 1/log2(3)).
    expected_first = (1 + (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))) / 2
    assert result.scores["first_stage_ndcg@10"] == pytest.approx(expected_first)
    assert result.scores["first_stage_recall@3"] == pytest.approx(1.0)
    # The reranker embedded only candidate documents (top-3 of both queries: d0, d1, d2).
    docs = {t for t, r, _ in reranker.encoded if r == "document"}
    assert docs == {"doc 0", "doc 1", "doc 2"}
    # With top-2 the relevant d2 is never a candidate, so reranking cannot recover it.
    short = RerankTask("rr", retrieval, first_stage="first", top_n=2).run(_ctx(reranker, first=first))
    assert short.scores["ndcg@10"] == pytest.approx((1 + 1 / (1 + 1 / math.log2(3))) / 2)


# -- clustering ----------------------------------------------------------------------------------

TEXTS = [f"{topic}-{style}-{j}" for topic in ("sport", "money") for style in ("formal", "slang") for j in range(3)]
TOPIC = [0 if t.startswith("sport") else 1 for t in TEXTS]
STYLE = [0 if "-formal-" in t else 1 for t in TEXTS]


def _steerable(t: str, r: str, i: str | None) -> np.ndarray:
    """Embeds by topic under the topic instruction, by style under the style instruction."""
    topic, style, _ = t.split("-")
    jitter = 0.01 * hashed_vector(t, 4)
    if i == "style":
        base = [1.0, 0.0] if style == "formal" else [0.0, 1.0]
    else:
        base = [1.0, 0.0] if topic == "sport" else [0.0, 1.0]
    return np.concatenate([base, [0.0, 0.0]]) + jitter


def _views() -> list[loaders.ClusteringView]:
    return [
        loaders.ClusteringView("topic", list(TEXTS), TOPIC, "topic"),
        loaders.ClusteringView("style", list(TEXTS), STYLE, "style"),
    ]


def test_clustering_task_perfect_separation() -> None:
    task = ClusteringTask("c", lambda: _views()[0])
    result = task.run(_ctx(FakeEmbedder(_steerable, 4)))
    assert result.scores["v_measure"] == pytest.approx(1.0)
    assert result.info["k"] == 2 and result.info["instruction"] == "topic"


def test_multiview_cross_check_detects_steering() -> None:
    result = MultiViewClusteringTask("mv", _views).run(_ctx(FakeEmbedder(_steerable, 4)))
    s = result.scores
    assert s["v_topic"] == pytest.approx(1.0) and s["v_style"] == pytest.approx(1.0)
    assert s["hmean"] == pytest.approx(1.0)
    # Topic labels on style embeddings: each style cluster holds half of each topic -> V = 0.
    assert s["cross_topic_under_style"] == pytest.approx(0.0, abs=1e-9)
    assert s["steer_gap"] == pytest.approx(1.0)


def test_multiview_instruction_blind_embedder_has_no_gap() -> None:
    blind = FakeEmbedder(lambda t, r, i: _steerable(t, r, None), 4)
    s = MultiViewClusteringTask("mv", _views).run(_ctx(blind)).scores
    assert s["v_topic"] == pytest.approx(1.0)
    assert s["v_style"] == pytest.approx(0.0, abs=1e-9)
    assert s["hmean"] == 0.0
    assert s["steer_gap"] == pytest.approx(0.0, abs=1e-9)


def test_multiview_rejects_different_texts() -> None:
    views = _views()
    views[1].texts[0] = "changed"
    with pytest.raises(loaders.DataError, match="differs"):
        MultiViewClusteringTask("mv", lambda: views).run(_ctx(FakeEmbedder(_steerable, 4)))


# -- classification ---------------------------------------------------------------------------------


def test_classification_accuracy() -> None:
    train = loaders.LabelledTexts(list(TEXTS), ["s" if x == 0 else "m" for x in TOPIC])
    test = loaders.LabelledTexts(["sport-formal-9", "money-slang-9", "money-formal-8"], ["s", "m", "s"])
    task = ClassificationTask("cls", lambda: train, lambda: test, instruction="topic")
    result = task.run(_ctx(FakeEmbedder(_steerable, 4)))
    # the third gold label is deliberately wrong: 2 of 3 correct
    assert result.scores["accuracy"] == pytest.approx(2 / 3)


# -- runner and report ---------------------------------------------------------------------------


def test_runner_report_side_by_side(tmp_path: Path) -> None:
    models = {
        "good": FakeEmbedder(_steerable, 4, name="good"),
        "blind": FakeEmbedder(lambda t, r, i: _steerable(t, r, None), 4, name="blind"),
    }
    runner = EvalRunner(models.__getitem__, EmbeddingCache(tmp_path / "c"), show_progress=False)
    report = runner.run("good", ["blind", "good"], [MultiViewClusteringTask("mv", _views)], "quick")
    assert [r.embedder for r in report.runs] == ["good", "blind"]
    table = markdown_table(report)
    assert "| task | metric | good | blind |" in table
    assert "| mv | **hmean** | 100.00 | 0.00 |" in table
    json_path, md_path = write_report(report, tmp_path / "out", "facet eval good")
    data = json.loads(json_path.read_text())
    assert data["runs"][1]["results"][0]["scores"]["hmean"] == 0.0
    assert "facet eval good" in md_path.read_text()


def test_a_cached_encode_in_parts_says_its_truncations_once(tmp_path, minilm, caplog) -> None:
    """The cache encodes its misses in parts of ``write_every`` (saved as it goes); each part's
    ``encode`` logged its own "N of M texts were longer ... truncated" (9 lines on SciFact, per
    part counts, no total). The parts share one tally: one line for the call."""
    import logging

    long = [f"text {i} " + "many words here " * 120 for i in range(6)]
    with caplog.at_level(logging.WARNING):
        EmbeddingCache(tmp_path, write_every=2).encode(minilm, long, role="document",
                                                       instruction=None)
    said = [r.getMessage() for r in caplog.records if "were truncated" in r.getMessage()]
    assert len(said) == 1 and "6 of 6 texts" in said[0], said


def test_kmeans_on_fewer_distinct_texts_than_classes_says_so_once(caplog) -> None:
    """Six texts, two distinct, three classes: scikit-learn's ConvergenceWarning ("Possibly due
    to duplicate points in X") came through py.warnings once a seed, with its source line and
    no word of what it meant for the score. One warning line says it."""
    import logging
    import warnings

    from app.evaluation.tasks import kmeans_v_measure

    x = np.array([[1.0, 0.0]] * 3 + [[0.0, 1.0]] * 3, dtype=np.float32)
    with warnings.catch_warnings(record=True) as raised, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        mean, _ = kmeans_v_measure(x, [0, 0, 1, 1, 2, 2], seeds=[1, 2, 3, 4, 5])
    assert not [w for w in raised if "ConvergenceWarning" in type(w.message).__name__]
    said = [r.getMessage() for r in caplog.records if "distinct embeddings" in r.getMessage()]
    assert said == ["2 distinct embeddings for 3 classes: k-means cannot make 3 clusters (texts "
                    "that are the same, or that the embedder reads alike); the V-measure counts "
                    "fewer"]
    assert 0.0 < mean < 1.0
