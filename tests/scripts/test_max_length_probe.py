"""scripts/max_length_probe.py: one dev row per token budget, measured at that budget."""

from __future__ import annotations

import pytest
import torch

from embedders.backbone import LoraSettings
from embedders.methods.causal_eos import CausalEOSConfig, CausalEOSEmbedder
from tests.scripts import load_script


def spied_model(smollm2_cut) -> tuple[CausalEOSEmbedder, list[tuple[int, int]]]:
    """A seeded two-layer Causal-EOS whose every ``encode`` call is recorded as
    (max_length at the call, number of texts)."""
    torch.manual_seed(0)
    lora = LoraSettings(r=2, target_modules=("q_proj",))
    model = CausalEOSEmbedder(CausalEOSConfig(backbone=smollm2_cut, lora=lora, max_length=128), device="cpu")
    calls: list[tuple[int, int]] = []
    encode = model.encode

    def spy(texts, **kwargs):
        calls.append((model.max_length, len(texts)))
        return encode(texts, **kwargs)

    model.encode = spy  # type: ignore[method-assign]
    return model, calls


def test_each_budget_is_scored_at_that_budget(shared_data, caplog, smollm2_cut):
    model, calls = spied_model(smollm2_cut)
    with caplog.at_level("WARNING"):
        rows = load_script("max_length_probe.py").probe(model, shared_data, [40, 96], docs=6, queries=3, sts_pairs=0)
    assert [r["max_length"] for r in rows] == [40, 96]
    for row in rows:
        assert 0 <= row["scifact-dev-whole/ndcg@10"] <= 100
        assert "stsb-dev/spearman" not in row
    # Queries and documents of the first row were encoded at 40 tokens, of the second at 96,
    # and whole abstracts do not fit either budget.
    seen = [length for length, _ in calls]
    assert seen[: len(seen) // 2] == [40] * (len(seen) // 2) and seen[len(seen) // 2:] == [96] * (len(seen) // 2)
    assert "truncated" in caplog.text
    assert model.max_length == 96


def test_a_cached_budget_encodes_only_what_it_has_not_seen(shared_data, tmp_path, smollm2_cut):
    """With --cache-dir the probe shares vectors (keyed by identity, which holds max_length) with
    facet eval, so a second probe of the same budgets encodes nothing and scores the same."""
    model, calls = spied_model(smollm2_cut)
    probe = load_script("max_length_probe.py").probe
    first = probe(model, shared_data, [40, 96], docs=6, queries=3, sts_pairs=0, cache_dir=tmp_path)
    assert sum(n for _, n in calls) > 0
    calls.clear()
    again = probe(model, shared_data, [40, 96], docs=6, queries=3, sts_pairs=0, cache_dir=tmp_path)
    assert sum(n for _, n in calls) == 0
    for a, b in zip(first, again, strict=True):
        assert a["scifact-dev-whole/ndcg@10"] == b["scifact-dev-whole/ndcg@10"]
    # The two budgets did not share vectors: a budget the cache has not seen is encoded.
    probe(model, shared_data, [64], docs=6, queries=3, sts_pairs=0, cache_dir=tmp_path)
    assert sum(n for _, n in calls) > 0


def test_a_non_positive_corpus_size_is_refused(shared_data, smollm2_cut):
    model = CausalEOSEmbedder(CausalEOSConfig(backbone=smollm2_cut, max_length=64), device="cpu")
    with pytest.raises(ValueError, match="whole corpus"):
        load_script("max_length_probe.py").probe(model, shared_data, [40], docs=0, sts_pairs=0)
