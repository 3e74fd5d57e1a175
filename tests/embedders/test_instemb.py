"""InstEmb: trainable parts, the frozen teacher, the losses' wiring, pooling and instructions.

The shared contract checks live in test_contract.py.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
import torch

from embedders import Role, load_embedder
from embedders.backbone import LoraSettings
from embedders.errors import InvalidInputError
from embedders.methods.instemb import InstEmbConfig, InstEmbEmbedder
from embedders.training.instruct_data import TripleBatch

# Dropout off so the loss before and after a step is a deterministic function of the weights.
LORA = LoraSettings(r=4, alpha=8, dropout=0.0, target_modules=("q_proj", "v_proj"))
INTENT = "What does the customer want?"
FEELING = "How does the writer feel?"
BATCH = TripleBatch(
    inputs=["Please send me my money back.", "My new card still has not arrived.",
            "I am thrilled with the quick service!", "Refund the double charge, please."],
    instructions=[INTENT, INTENT, FEELING, INTENT],
    answers=["refund", "card arrival", "joy", "refund"],
    task="test",
)


@pytest.fixture(scope="module")
def model(smollm2_cut):
    """On SmolLM2 cut to two layers (tests/conftest.py): the checks here are the losses' wiring."""
    torch.manual_seed(0)
    return InstEmbEmbedder(InstEmbConfig(lora=LORA, max_length=64, look_ahead=3, backbone=smollm2_cut), device="cpu")


def test_only_lora_and_look_ahead_are_trainable(model):
    names = model.named_trainable_parameters()
    assert any(n.startswith("heads.look_ahead") for n in names)
    assert all("lora_" in n or n.startswith("heads.") for n in names), names
    assert all(not p.requires_grad for n, p in model.backbone.model.named_parameters() if "lora_" not in n)


def test_teacher_is_the_backbone_without_adapters_and_gets_no_gradient(model):
    model.train()
    try:
        before = model.teacher_states(BATCH.inputs, BATCH.instructions, BATCH.answers)
        assert not any(t.requires_grad for t in before)
        lora_b = [p for n, p in model.backbone.model.named_parameters() if "lora_B" in n]
        saved = [p.detach().clone() for p in lora_b]
        with torch.no_grad():
            for p in lora_b:
                p.add_(0.5)  # a large adapter change moves the student...
        after = model.teacher_states(BATCH.inputs, BATCH.instructions, BATCH.answers)
        student_changed = model.student_states(BATCH.inputs[:1], BATCH.instructions[:1])[0]
        with torch.no_grad():
            for p, s in zip(lora_b, saved, strict=True):
                p.copy_(s)
        student_orig = model.student_states(BATCH.inputs[:1], BATCH.instructions[:1])[0]
        # ...but not the teacher, which runs with the adapters disabled.
        for x, y in zip(before, after, strict=True):
            torch.testing.assert_close(x, y)
        assert (student_changed - student_orig).abs().max() > 1e-3
        model.backbone.model.zero_grad(set_to_none=True)
        loss, _ = model.training_loss(BATCH)
        loss.backward()
        graded = [n for n, p in model.backbone.model.named_parameters() if p.grad is not None]
        assert graded and all("lora_" in n for n in graded)
        assert model.heads["look_ahead"].embeddings.grad is not None
    finally:
        model.backbone.model.zero_grad(set_to_none=True)
        model.eval()


@contextmanager
def training_trial(model, **settings):
    """Train mode with config ``settings`` for the block; on exit the trainable weights, the
    settings, the gradients and eval mode are restored, so the module's model stays untouched."""
    params = model.trainable_parameters()
    saved = [p.detach().clone() for p in params]
    before = {key: getattr(model.config, key) for key in settings}
    for key, value in settings.items():
        setattr(model.config, key, value)
    model.train()
    try:
        yield params
    finally:
        with torch.no_grad():
            for p, s in zip(params, saved, strict=True):
                p.copy_(s)
        model.backbone.model.zero_grad(set_to_none=True)
        model.heads.zero_grad(set_to_none=True)
        for key, value in before.items():
            setattr(model.config, key, value)
        model.eval()


def assert_a_step_lowers(model, params, loss) -> None:
    """One SGD step on the gradients ``loss`` left, then the same batch's loss is lower."""
    torch.optim.SGD(params, lr=2e-3).step()
    with torch.no_grad():
        after, _ = model.training_loss(BATCH)
    assert float(after) < float(loss)


@pytest.mark.parametrize("distill", ["mse", "mse-centered", "kl"])
def test_one_optimiser_step_lowers_the_loss(model, distill):
    with training_trial(model, distill=distill) as params:
        loss, metrics = model.training_loss(BATCH)
        assert set(metrics) == {"loss", "distill", "contrastive"}
        assert metrics["distill"] > 0 and metrics["contrastive"] > 0
        model.backbone.model.zero_grad(set_to_none=True)
        model.heads.zero_grad(set_to_none=True)
        loss.backward()
        assert_a_step_lowers(model, params, loss)


@pytest.mark.parametrize("pooling", ["daap", "all-mean"])
def test_contrastive_on_served_reaches_the_look_ahead_and_its_step_lowers_the_loss(model, pooling):
    """With distillation weighted out, only the contrastive term trains: at the last input token
    (the paper) it never reaches the look-ahead embeddings; on the served embedding it does."""
    with training_trial(model, distill_weight=0.0, pooling=pooling, contrastive_on="input-last") as params:
        grads = {}
        for where in ("input-last", "served"):
            model.config.contrastive_on = where
            model.backbone.model.zero_grad(set_to_none=True)
            model.heads.zero_grad(set_to_none=True)
            loss, _ = model.training_loss(BATCH)
            loss.backward()
            grad = model.heads["look_ahead"].embeddings.grad
            grads[where] = 0.0 if grad is None else float(grad.abs().sum())
        assert grads["input-last"] == 0.0 and grads["served"] > 0.0
        assert_a_step_lowers(model, params, loss)


def test_answer_ids_end_with_eos_and_respect_the_budget(model):
    eos = model.backbone.tokenizer.eos_token_id
    ids = model.answer_ids(["refund", " ".join(["word"] * 100)])
    assert ids[0][-1] == eos and len(ids[0]) >= 2
    assert len(ids[1]) == model.config.answer_max_tokens and ids[1][-1] == eos


def test_daap_is_the_mean_of_the_two_ablation_poolings(model):
    text = ["Please send me my money back."]
    out = {}
    for pooling in ("daap", "input-last", "special-mean", "all-mean"):
        model.config.pooling = pooling
        with torch.no_grad():
            out[pooling] = model._embed_batch(text, Role.QUERY, INTENT)
    model.config.pooling = "daap"
    torch.testing.assert_close(out["daap"], 0.5 * (out["input-last"] + out["special-mean"]))
    assert (out["input-last"] - out["special-mean"]).abs().max() > 1e-3
    # all-mean averages every position: the prompt's and the look-ahead ones.
    assert min((out["all-mean"] - out[p]).abs().max() for p in ("input-last", "special-mean")) > 1e-3


def test_the_instruction_steers_the_embedding(model):
    text = ["I got charged twice and I am furious about it."]
    a = model.encode(text, instruction=INTENT)
    b = model.encode(text, instruction=FEELING)
    assert float(a[0] @ b[0]) < 0.9999
    default = model.encode(text)  # no instruction -> the configured default instruction
    np.testing.assert_allclose(default, model.encode(text, instruction=model.config.default_instruction), atol=1e-6)


def test_a_max_length_too_short_for_the_default_instruction_says_so(model, tmp_path):
    """`instemb[max_length=20]` with no instruction said "the instruction is too long ...
    shorten the instruction": none was given (the default one is read)."""
    from embedders.errors import InvalidInputError

    model.save(tmp_path / "ie")
    short = load_embedder(f"{tmp_path / 'ie'}[max_length=20]")
    with pytest.raises(InvalidInputError) as said:
        short.encode(["a text"])
    least = int(str(said.value).rsplit("give max_length ", 1)[1].split()[0])
    assert str(said.value) == (
        f"max_length=20 is too short for {short.name} to read a text under its default "
        f"instruction {model.config.default_instruction!r} (read when none is given): give "
        f"max_length {least} or more"), said.value
    assert load_embedder(f"{tmp_path / 'ie'}[max_length={least}]").encode(["a text"]).shape[0] == 1
    with pytest.raises(InvalidInputError, match="the instruction is too long"):  # one given
        short.encode(["a text"], instruction="Represent the intent of this customer message")


def test_pooling_option_through_load_embedder(model, tmp_path):
    model.save(tmp_path / "ie")
    loaded = load_embedder(f"{tmp_path / 'ie'}[pooling=input-last]")
    assert loaded.config.pooling == "input-last"
    with pytest.raises(ValueError, match="pooling"):
        load_embedder(f"{tmp_path / 'ie'}[pooling=nope]")


def test_text_quotes_drop_reads_texts_without_their_double_quotes_in_inference_and_training(model, tmp_path):
    """PromptEOL quotes the text, so a `"` inside it closed the template's own quote; under
    ``text_quotes=drop`` a text is read without them, as an option and from a saved config,
    in ``encode`` and in the training sequences alike. ``keep`` (the default) reads it as written."""
    quoted = ['tell mom "i love you', 'send a text to jack saying "hi"', "no quote here"]
    bare = [t.replace('"', "") for t in quoted]
    assert model.config.text_quotes == "keep"
    model.save(tmp_path / "ie")  # (its weights saved in half precision: compared loaded with loaded)
    keeping = load_embedder(tmp_path / "ie")
    kept = keeping.encode(quoted, instruction=INTENT)
    assert not np.allclose(kept[:2], keeping.encode(bare[:2], instruction=INTENT), atol=1e-4)
    dropping = load_embedder(f"{tmp_path / 'ie'}[text_quotes=drop]")
    read = dropping.encode(quoted, instruction=INTENT)
    np.testing.assert_allclose(read, dropping.encode(bare, instruction=INTENT), atol=1e-5)
    np.testing.assert_allclose(read[2], kept[2], atol=1e-5)  # a text without one: as before
    assert dropping._sequences(quoted, [INTENT] * 3) == dropping._sequences(bare, [INTENT] * 3)
    assert model._sequences(quoted, [INTENT] * 3) != model._sequences(bare, [INTENT] * 3)
    # A text of nothing but quotes is not read as an empty one.
    assert dropping._sequences(['""'], [INTENT]) == model._sequences(['""'], [INTENT])
    dropping.save(tmp_path / "ie2")  # the checkpoint's own setting, as the shipped one sets it
    np.testing.assert_allclose(load_embedder(tmp_path / "ie2").encode(quoted, instruction=INTENT), read, atol=1e-5)
    with pytest.raises(InvalidInputError, match="text_quotes must be one of keep, drop"):
        load_embedder(f"{tmp_path / 'ie'}[text_quotes=strip]")


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="text_quotes"):
        InstEmbConfig(text_quotes="strip")
    with pytest.raises(ValueError, match="pooling"):
        InstEmbConfig(pooling="max")
    with pytest.raises(ValueError, match="contrastive_on"):
        InstEmbConfig(contrastive_on="everywhere")
    with pytest.raises(ValueError, match="distill"):
        InstEmbConfig(distill="l1")
    with pytest.raises(ValueError, match="look_ahead"):
        InstEmbConfig(look_ahead=0)


def test_a_frozen_llm_trains_only_the_look_ahead_embeddings(smollm2_cut):
    """--lora-r 0 passes `facet train`'s check (the look-ahead embeddings still train), but the
    teacher pass asked the backbone, now no peft model, to disable its adapter: AttributeError
    at the first step. The frozen backbone is the teacher; one step lowers the loss."""
    torch.manual_seed(0)
    frozen = InstEmbEmbedder(InstEmbConfig(lora=LoraSettings(r=0), max_length=64, look_ahead=3,
                                           backbone=smollm2_cut), device="cpu")
    assert list(frozen.named_trainable_parameters()) == ["heads.look_ahead.embeddings"]
    with training_trial(frozen) as params:
        loss, metrics = frozen.training_loss(BATCH)
        assert metrics["distill"] > 0
        loss.backward()
        assert_a_step_lowers(frozen, params, loss)


def test_the_shipped_checkpoint_reads_texts_without_double_quotes_as_chosen_on_train_and_dev():
    """The shipped InstEmb serves ``text_quotes=drop``, the reading chosen on CLINC *train* and
    STS-B *dev* (``inference_selection`` in its train_log.json says how); its weights trained
    with ``keep``."""
    import json
    from pathlib import Path

    shipped = Path(__file__).resolve().parents[2] / "checkpoints" / "instemb"
    config = json.loads((shipped / "facet_config.json").read_text())["config"]
    selection = json.loads((shipped / "train_log.json").read_text())["inference_selection"]
    assert config["text_quotes"] == selection["text_quotes"] == "drop"
    assert load_embedder("instemb", device="cpu").config.text_quotes == "drop"
    inbedder = Path(__file__).resolve().parents[2] / "checkpoints" / "inbedder" / "facet_config.json"
    assert json.loads(inbedder.read_text())["config"].get("text_quotes", "keep") == "keep"  # failed the rule
