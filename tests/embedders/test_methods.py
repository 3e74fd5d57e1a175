"""Method-specific checks for the trainable corpus embedders (Causal2Vec, GIRCSE, Causal-EOS).

The shared contract checks for them live in test_contract.py; here: what is trainable,
that one optimiser step lowers the loss, the KV cache, and the Contextual token.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embedders import Role
from embedders.backbone import LoraSettings
from embedders.methods.causal2vec import Causal2VecConfig, Causal2VecEmbedder
from embedders.methods.causal_eos import CausalEOSConfig, CausalEOSEmbedder
from embedders.methods.gircse import GircseConfig, GircseEmbedder
from embedders.training.data import PairBatch

# Dropout off so the loss before and after a step is a deterministic function of the weights.
LORA = LoraSettings(r=4, alpha=8, dropout=0.0, target_modules=("q_proj", "v_proj"))


def _build(method: str, backbone: str):
    """``method`` on ``backbone`` (SmolLM2 cut to two layers, tests/conftest.py: these checks are
    plumbing, which the depth does not change)."""
    torch.manual_seed(0)
    if method == "causal2vec":
        return Causal2VecEmbedder(Causal2VecConfig(lora=LORA, max_length=64, mlp_hidden=64, backbone=backbone),
                                  device="cpu")
    if method == "gircse":
        return GircseEmbedder(GircseConfig(lora=LORA, max_length=64, train_soft_tokens=3, backbone=backbone),
                              device="cpu")
    return CausalEOSEmbedder(CausalEOSConfig(lora=LORA, max_length=64, backbone=backbone), device="cpu")


@pytest.fixture(scope="module", params=["causal2vec", "gircse", "causal-eos"])
def method(request, smollm2_cut):
    return _build(request.param, smollm2_cut)


BATCH = PairBatch(
    queries=["A man plays the guitar.", "The stock market fell.", "A cat sleeps on the sofa."],
    positives=["Someone is playing a guitar.", "Share prices dropped.", "A kitten naps on a couch."],
    negatives=["A woman is cooking.", "The weather is sunny.", "A dog runs in a park."],
    instruction="Retrieve semantically similar text.", symmetric=True, task="test",
)


def test_only_lora_and_heads_are_trainable(method):
    names = method.named_trainable_parameters()
    assert names, "nothing is trainable"
    for name in names:
        assert "lora_" in name or name.startswith("heads."), name
    frozen = [n for n, p in method.backbone.model.named_parameters() if "lora_" not in n]
    assert frozen and all(not p.requires_grad for n, p in method.backbone.model.named_parameters()
                          if "lora_" not in n)
    if method.method == "causal2vec":
        assert any(n.startswith("heads.projector") for n in names)
        assert all(not p.requires_grad for p in method.encoder.backbone.model.parameters())


def test_one_optimiser_step_lowers_the_loss(method):
    params = method.trainable_parameters()
    optimizer = torch.optim.AdamW(params, lr=1e-3)
    method.train()
    try:
        before, _ = method.training_loss(BATCH)
        optimizer.zero_grad()
        before.backward()
        grads = [p.grad for p in params if p.grad is not None]
        assert grads and any(g.abs().sum() > 0 for g in grads)
        optimizer.step()
        with torch.no_grad():
            after, _ = method.training_loss(BATCH)
    finally:
        method.eval()
    assert after.item() < before.item()


def test_max_length_is_an_inference_option_that_reaches_the_tokenizer(method, caplog):
    """A checkpoint trained at 96 tokens must be able to read a whole index chunk: the
    ``max_length`` option re-budgets the tokenizer, changes the cache identity, and is checked."""
    from embedders import InvalidInputError
    from embedders.registry import apply_option

    # ~110 tokens: over the fixture's 64, under Causal2Vec's encoder budget (256)
    long_text = " ".join(f"Sentence {i} says something new about the weather." for i in range(10))
    identity = method.identity
    try:
        with caplog.at_level("WARNING"):
            short = method.encode([long_text])
        assert "truncated" in caplog.text
        caplog.clear()
        apply_option(method, "max_length", "512")
        assert method.max_length == method.config.max_length == 512
        assert method.identity != identity
        with caplog.at_level("WARNING"):
            whole = method.encode([long_text])
        assert "truncated" not in caplog.text
        assert np.abs(short - whole).max() > 1e-3  # it read more of the text
        with pytest.raises(InvalidInputError, match="max_length must be at least 16"):
            apply_option(method, "max_length", "4")
        assert method.max_length == 512  # a refused value changes nothing
    finally:
        apply_option(method, "max_length", "64")
    assert method.identity == identity


def test_gircse_kv_cache_equals_recomputation(smollm2_cut, caplog):
    from transformers.utils import logging as hf_logging

    model = _build("gircse", smollm2_cut)
    texts = ["A man is playing a guitar.", "Stock markets fell sharply on Tuesday.", "Hi"]
    hf_logging.warning_once.cache_clear()  # an earlier test may have spent the once-only warning
    hf_logging.enable_propagation()  # transformers' warnings reach caplog only while propagating
    try:
        with torch.inference_mode(), caplog.at_level("WARNING"):
            for k in (1, 4):
                cached = model.generate_states(texts, Role.QUERY, "Find the topic", k, use_cache=True)
                full = model.generate_states(texts, Role.QUERY, "Find the topic", k, use_cache=False)
                assert cached.shape == (3, k, model.dim)
                a = torch.nn.functional.normalize(cached.mean(1), dim=-1)
                b = torch.nn.functional.normalize(full.mean(1), dim=-1)
                assert (a - b).abs().max().item() < 1e-4
    finally:
        hf_logging.disable_propagation()
    # The cache travels under the name this transformers version expects (no deprecation warning).
    assert "deprecated" not in caplog.text


def test_gircse_any_k_at_inference(smollm2_cut):
    model = _build("gircse", smollm2_cut)
    outs = {}
    for k in (1, 10):
        model.soft_tokens = k
        outs[k] = model.encode(["A cat.", "A dog."])
        assert outs[k].shape == (2, 576)
    assert np.abs(outs[1] - outs[10]).max() > 1e-3
    with pytest.raises(ValueError, match="soft_tokens must be from 1 to 64, got 0"):
        model.soft_tokens = 0


def test_gircse_soft_temperature_sharpens_the_soft_token(smollm2_cut):
    from embedders.registry import apply_option

    with pytest.raises(ValueError, match=r"soft_temperature must be > 0, got 0\.0"):
        GircseConfig(soft_temperature=0.0)
    with pytest.raises(ValueError, match=r"at least 0\.001 .*got 1e-45"):  # was NaN vectors, exit 0
        GircseConfig(soft_temperature=1e-45)
    model = _build("gircse", smollm2_cut)
    table = model.backbone.model.get_input_embeddings().weight
    state = torch.randn(2, model.dim)
    with torch.no_grad():
        logits = model.backbone.model.get_output_embeddings()(state).float()
        paper = model._soft_token(state)
        expected = torch.softmax(logits, dim=-1).to(table.dtype) @ table
        assert torch.allclose(paper, expected, atol=1e-5)  # T = 1 (the default) is the paper's mixture
        apply_option(model, "soft_temperature", "0.001")  # the load-time option, "ckpt[soft_temperature=...]"
        assert model.config.soft_temperature == 0.001
        sharp = model._soft_token(state)
    # Near zero the mixture becomes the input embedding of the most likely token.
    assert torch.allclose(sharp, table[logits.argmax(dim=-1)], atol=1e-3)
    assert (sharp - paper).abs().max().item() > 1e-3


def test_gircse_step_weighting_is_validated_and_reaches_the_loss(smollm2_cut):
    with pytest.raises(ValueError, match="step_weighting must be one of uniform, linear, got 'square'"):
        GircseConfig(step_weighting="square")
    model = _build("gircse", smollm2_cut)
    with torch.no_grad():
        uniform, metrics = model.training_loss(BATCH)
        model.config.step_weighting = "linear"
        linear, _ = model.training_loss(BATCH)
    steps = torch.tensor([metrics[f"L{k}"] for k in (1, 2, 3)])
    # Same stepwise losses, re-weighted: the two totals differ by exactly the change in weights.
    shift = float(((torch.tensor([1, 2, 3]) / 6 - 1 / 3) * steps).sum())
    assert linear.item() - uniform.item() == pytest.approx(shift, abs=1e-3)


# Positives that do not match (BATCH's rotated): the loss rises from one generated token to the
# next on this batch, so the refinement penalty is active.
MISMATCHED = PairBatch(queries=BATCH.queries, positives=BATCH.positives[1:] + BATCH.positives[:1],
                       negatives=BATCH.positives, instruction=BATCH.instruction, symmetric=True,
                       task="test")


def test_gircse_refinement_target_is_validated_and_reaches_the_loss(smollm2_cut):
    with pytest.raises(ValueError, match="refinement_target must be one of both, later, got 'x'"):
        GircseConfig(refinement_target="x")
    model = _build("gircse", smollm2_cut)
    model.config.refinement_weight = 100.0  # the penalty's gradient dominates the step's
    grads = {}
    for target in ("both", "later"):
        model.config.refinement_target = target
        params = model.trainable_parameters()
        for param in params:
            param.grad = None
        torch.manual_seed(0)  # the same dropout masks
        loss, metrics = model.training_loss(MISMATCHED)
        loss.backward()
        grads[target] = torch.cat([p.grad.flatten() for p in params if p.grad is not None])
    # On this batch a later step is worse (the penalty is active), so its gradient differs.
    assert metrics["refine"] > 0, metrics
    assert not torch.allclose(grads["both"], grads["later"])


def test_causal2vec_contextual_token_changes_the_embedding(smollm2_cut):
    model = _build("causal2vec", smollm2_cut)
    texts = ["A man is playing a guitar.", "Stock markets fell sharply."]
    base = model.encode(texts)
    with torch.no_grad():
        for p in model.heads["projector"].parameters():
            p.add_(0.5 * torch.randn_like(p))
    changed = model.encode(texts)
    assert base.shape == (2, 2 * 576)
    # Both halves move: the Contextual state and, through attention, the EOS state.
    assert np.abs(base[:, :576] - changed[:, :576]).max() > 1e-3
    assert np.abs(base[:, 576:] - changed[:, 576:]).max() > 1e-3


def test_checkpoint_has_fp16_adapter_and_heads(tmp_path, smollm2_cut):
    from safetensors.torch import load_file

    model = _build("causal2vec", smollm2_cut)
    model.save(tmp_path)
    adapter = load_file(str(tmp_path / "adapter.safetensors"))
    heads = load_file(str(tmp_path / "heads.safetensors"))
    assert adapter and all(v.dtype == torch.float16 for v in adapter.values())
    assert heads and all(v.dtype == torch.float16 for v in heads.values())
    assert all("lora_" in k for k in adapter)


def test_gradient_checkpointing_gives_the_same_gradients(smollm2_cut):
    model = _build("causal-eos", smollm2_cut)
    model.train()

    def grads() -> list[torch.Tensor]:
        for p in model.trainable_parameters():
            p.grad = None
        loss, _ = model.training_loss(BATCH)
        loss.backward()
        return [p.grad.clone() for p in model.trainable_parameters()]

    plain = grads()
    model.enable_gradient_checkpointing()
    model.train()
    checkpointed = grads()
    model.eval()
    assert len(plain) == len(checkpointed)
    for a, b in zip(plain, checkpointed, strict=True):
        assert torch.allclose(a, b, atol=1e-6)
    with pytest.raises(ValueError, match="KV cache"):
        _build("gircse", smollm2_cut).enable_gradient_checkpointing()


def _grads(model) -> list[torch.Tensor]:
    return [p.grad.clone() for p in model.trainable_parameters()]


def _zero(model) -> None:
    for p in model.trainable_parameters():
        p.grad = None


def test_grad_cache_gives_the_gradients_of_a_plain_step(method):
    """Chunks of 2 over sides of 3 texts (uneven chunks): the cached step's loss and parameter
    gradients are those of one plain backward pass over the whole batch."""
    from embedders.training.grad_cache import cached_backward

    _zero(method)
    loss, _ = method.training_loss(BATCH)
    loss.backward()
    plain = _grads(method)
    _zero(method)
    cached_loss, metrics = cached_backward(method, BATCH, chunk=2)
    cached = _grads(method)
    _zero(method)
    assert cached_loss.item() == pytest.approx(loss.item(), abs=1e-5) and metrics["loss"] == pytest.approx(loss.item(),
                                                                                                            abs=1e-5)
    assert not cached_loss.requires_grad
    assert any(g.abs().sum() > 0 for g in cached)
    for a, b in zip(plain, cached, strict=True):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-3)


def test_grad_cache_replays_the_dropout_masks_of_its_first_pass(smollm2_cut):
    """With LoRA dropout on, the second pass must see the masks the cached representations were
    made with: the gradients equal a with-grad pass chunked the same way from the same seed, and
    the random stream continues as if each chunk had been encoded once."""
    from embedders.training.grad_cache import cached_backward

    torch.manual_seed(0)
    lora = LoraSettings(r=4, alpha=8, dropout=0.5, target_modules=("q_proj", "v_proj"))
    model = CausalEOSEmbedder(CausalEOSConfig(lora=lora, max_length=64, backbone=smollm2_cut), device="cpu")
    with torch.no_grad():  # LoRA B starts at zero, which would hide the dropout on A's input
        for name, p in model.backbone.model.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.05)
    model.train()
    torch.manual_seed(7)
    reps = [torch.cat([model.training_reps(texts[i:i + 2], role, instruction) for i in range(0, len(texts), 2)])
            for texts, role, instruction in model.batch_sides(BATCH)]
    loss, _ = model.loss_from_reps(BATCH, *reps)
    loss.backward()
    reference, next_draw = _grads(model), torch.rand(1)
    _zero(model)
    torch.manual_seed(7)
    cached_loss, _ = cached_backward(model, BATCH, chunk=2)
    cached, cached_next = _grads(model), torch.rand(1)
    _zero(model)
    torch.manual_seed(8)
    other = [model.training_reps(*side) for side in model.batch_sides(BATCH)]
    model.eval()
    assert cached_loss.item() == pytest.approx(loss.item(), abs=1e-5)
    assert not torch.allclose(other[0], reps[0], atol=1e-4)  # the masks do change the representations
    for a, b in zip(reference, cached, strict=True):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-3)
    assert cached_next.item() == next_draw.item()
