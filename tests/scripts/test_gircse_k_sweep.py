"""scripts/gircse_k_sweep.py: the one-pass K sweep equals encoding at each K."""

from __future__ import annotations

import numpy as np
import torch

from app.evaluation.loaders import StsPair
from embedders.backbone import LoraSettings
from embedders.methods.gircse import GircseConfig, GircseEmbedder
from tests.scripts import load_script


def test_prefix_embeddings_equal_encode_at_each_k(smollm2_cut):
    torch.manual_seed(0)
    lora = LoraSettings(r=4, alpha=8, dropout=0.0, target_modules=("q_proj",))
    model = GircseEmbedder(GircseConfig(backbone=smollm2_cut, lora=lora, max_length=48), device="cpu")
    texts = ["A man plays the guitar.", "Share prices dropped sharply on Monday.", "A cat sleeps."]
    sweep = load_script("gircse_k_sweep.py")
    prefix = sweep.k_prefix_embeddings(model, texts, max_k=4, batch_size=2)
    assert prefix.shape[:2] == (3, 4)
    for k in (1, 2, 4):
        model.soft_tokens = k
        direct = model.encode(texts, role="document")
        np.testing.assert_allclose(prefix[:, k - 1], direct, atol=1e-4)
    # The K rows differ (a sweep that repeated one K would pass the equality above only by chance).
    assert not np.allclose(prefix[:, 0], prefix[:, 3], atol=1e-3)
    pairs = [StsPair(texts[0], texts[1], 1.0), StsPair(texts[0], texts[0], 5.0), StsPair(texts[1], texts[2], 0.0)]
    scores = sweep.sweep(model, pairs, max_k=3, batch_size=4)
    assert sorted(scores) == [1, 2, 3] and all(-100 <= s <= 100 for s in scores.values())


def test_the_with_prompt_pool_averages_the_prompt_state_in(smollm2_cut):
    from embedders import Role

    torch.manual_seed(0)
    lora = LoraSettings(r=4, alpha=8, dropout=0.0, target_modules=("q_proj",))
    model = GircseEmbedder(GircseConfig(backbone=smollm2_cut, lora=lora, max_length=48), device="cpu")
    texts = ["A man plays the guitar.", "Share prices dropped sharply on Monday.", "A cat sleeps."]
    with torch.inference_mode():
        states = model.generate_states(texts, Role.DOCUMENT, None, 3, with_prompt_state=True)
        soft = model.generate_states(texts, Role.DOCUMENT, None, 3)
        reference = model.generate_states(texts, Role.DOCUMENT, None, 3, with_prompt_state=True, use_cache=False)
    assert states.shape[1] == 4
    torch.testing.assert_close(states[:, 1:], soft)  # the soft tokens are untouched
    torch.testing.assert_close(states, reference, atol=1e-4, rtol=1e-4)
    sweep = load_script("gircse_k_sweep.py")
    pooled = sweep.k_prefix_embeddings(model, texts, max_k=3, batch_size=2, with_prompt=True)
    for k in (0, 3):
        expected = torch.nn.functional.normalize(states[:, : k + 1].float().mean(dim=1), dim=-1).numpy()
        np.testing.assert_allclose(pooled[:, k], expected, atol=1e-4)
    pairs = [StsPair(texts[0], texts[1], 1.0), StsPair(texts[0], texts[0], 5.0), StsPair(texts[1], texts[2], 0.0)]
    assert sorted(sweep.sweep(model, pairs, max_k=2, batch_size=4, with_prompt=True)) == [0, 1, 2]


def test_the_pool_probe_s_mean_pools_are_what_encode_serves(smollm2_cut):
    """``--pools``: its "mean" pool is encode() at K, its last pool encode() at K + 1, and the
    other pools are other vectors."""
    from embedders import Role

    torch.manual_seed(0)
    lora = LoraSettings(r=4, alpha=8, dropout=0.0, target_modules=("q_proj",))
    model = GircseEmbedder(GircseConfig(backbone=smollm2_cut, lora=lora, max_length=48), device="cpu")
    texts = ["A man plays the guitar.", "Share prices dropped sharply on Monday.", "A cat sleeps."]
    with torch.inference_mode():
        states = model.generate_states(texts, Role.DOCUMENT, None, 4).float().numpy()
    sweep = load_script("gircse_k_sweep.py")
    pools = sweep.pools(states, 3)
    assert sorted(pools) == ["drop_first", "last", "linear", "mean", "mean_k4", "mean_of_normalised"]

    def unit(x):
        return x / np.linalg.norm(x, axis=-1, keepdims=True)

    for k, name in ((3, "mean"), (4, "mean_k4")):
        model.soft_tokens = k
        np.testing.assert_allclose(unit(pools[name]), model.encode(texts, role="document"), atol=1e-4)
    np.testing.assert_allclose(pools["last"], states[:, 2], atol=1e-6)
    assert not np.allclose(unit(pools["linear"]), unit(pools["mean"]), atol=1e-4)
    pairs = [StsPair(texts[0], texts[1], 1.0), StsPair(texts[0], texts[0], 5.0), StsPair(texts[1], texts[2], 0.0)]
    scores = sweep.pool_scores(model, pairs, 3, batch_size=4)
    model.soft_tokens = 3
    assert scores["mean"] == sweep.sweep(model, pairs, max_k=3, batch_size=4)[3]  # the paper's pool, either way
    assert sorted(scores) == sorted(pools) and all(-100 <= v <= 100 for v in scores.values())
