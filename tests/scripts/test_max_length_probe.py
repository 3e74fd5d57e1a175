"""scripts/max_length_probe.py: one dev row per token budget, measured at that budget."""

from __future__ import annotations

import torch

from embedders.backbone import LoraSettings
from embedders.methods.causal_eos import CausalEOSConfig, CausalEOSEmbedder
from tests.scripts import load_script


def test_each_budget_is_scored_at_that_budget(shared_data, caplog, smollm2_cut):
    torch.manual_seed(0)
    lora = LoraSettings(r=2, target_modules=("q_proj",))
    model = CausalEOSEmbedder(CausalEOSConfig(backbone=smollm2_cut, lora=lora, max_length=128), device="cpu")
    seen: list[int] = []
    encode = model.encode

    def spy(texts, **kwargs):
        seen.append(model.max_length)
        return encode(texts, **kwargs)

    model.encode = spy  # type: ignore[method-assign]
    with caplog.at_level("WARNING"):
        rows = load_script("max_length_probe.py").probe(model, shared_data, [40, 96], docs=6, queries=3, sts_pairs=0)
    assert [r["max_length"] for r in rows] == [40, 96]
    for row in rows:
        assert 0 <= row["scifact-dev-whole/ndcg@10"] <= 100
        assert "stsb-dev/spearman" not in row
    # Queries and documents of the first row were encoded at 40 tokens, of the second at 96,
    # and whole abstracts do not fit either budget.
    assert seen[: len(seen) // 2] == [40] * (len(seen) // 2) and seen[len(seen) // 2:] == [96] * (len(seen) // 2)
    assert "truncated" in caplog.text
    assert model.max_length == 96
