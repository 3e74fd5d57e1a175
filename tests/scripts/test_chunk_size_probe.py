"""scripts/chunk_size_probe.py: SciFact dev through the product path at each chunk size."""

from __future__ import annotations

from app.services.context import EmbedderCache
from tests.scripts import load_script


def test_rows_per_chunk_size_over_the_judged_abstracts_and_others(shared_data, minilm) -> None:
    script = load_script("chunk_size_probe.py")
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    # 15 abstracts (the 8 queries' judged ones and a sample of others): each is still cut into
    # more chunks at 48 tokens than at 200 (SciFact abstracts run ~200-300 tokens).
    rows = script.probe("minilm", [200, 48], docs=15, queries=8, root=shared_data, embedders=cache)
    assert [(r["chunk_tokens"], r["chunk_overlap"]) for r in rows] == [(200, 32), (48, 12)]
    assert all(r["queries"] == 8 and r["documents"] == 15 for r in rows)
    assert rows[1]["chunks"] > rows[0]["chunks"] >= 15  # smaller chunks: more of them
    for r in rows:
        assert 0.0 < r["ndcg@10"] <= 1.0 and 0.0 < r["recall@10"] <= 1.0
    # Every judged abstract of the queries is in the corpus, and the sample is seeded.
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1, "d3": 1}}
    ids = [f"d{i}" for i in range(1, 20)]
    kept = script.corpus_ids(qrels, ids, 6)
    assert {"d1", "d2", "d3"} <= kept and len(kept) == 6 and kept == script.corpus_ids(qrels, ids, 6)
    assert script.corpus_ids(qrels, ids, 0) == set(ids)
