"""The contract table: every embedder crossed with the shared checks.

Adding a method adds a row to ``EMBEDDERS``; every check then runs against it.

The decoder rows run on SmolLM2 cut to its first two layers (``smollm2_cut`` in
tests/conftest.py): the checks are about batching, padding, truncation, options and
save/load, which the depth does not change, and each forward pass runs 2 of the 30
layers. One row, ``causal-eos@shipped``, is the committed checkpoint loaded by its
registered name: the whole 30-layer backbone with its trained LoRA, as users get it.
"""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import torch

from embedders import InvalidInputError, Role, load_checkpoint, load_embedder
from embedders.registry import saved_name


def _untrained(spec: str, backbone: str):
    """A freshly initialised trainable method (LoRA B = 0, heads seeded) on ``backbone``;
    ``method[key=value]`` rows set inference options the way ``load_embedder`` does."""
    from embedders.registry import apply_option, split_options, trainable_methods

    method, options = split_options(spec)
    torch.manual_seed(0)
    model_class = trainable_methods()[method].model_class
    model = model_class(model_class.config_class(backbone=backbone), device="cpu")
    for key, value in options.items():
        apply_option(model, key, value)
    return model


# InBedder has two rows: its avg-gen pooling decodes greedily, a path 1st-gen never takes.
EMBEDDERS = ["minilm", "backbone-mean", "backbone-prompteol", "causal2vec", "gircse", "causal-eos",
             "inbedder", "inbedder[pooling=avg-gen]", "instemb", "causal-eos@shipped"]
TRAINABLE = {"causal2vec", "gircse", "causal-eos", "inbedder", "inbedder[pooling=avg-gen]", "instemb"}
SHIPPED = "@shipped"  # the committed checkpoint of that name, at full depth

# Batch-size invariance tolerance (max abs difference of L2-normalised components). GIRCSE
# feeds softmax(lm_head(h)) @ E back into the model K times, which amplifies the fp32
# rounding differences between batched GEMM kernels: measured 1.3e-4 at K=1 and 7.7e-4 at
# K=5 on TEXTS for the untrained model (eager attention gives the same, so it is not the
# attention mask). This is a known deviation from the 1e-4 contract; every other row meets it.
BATCH_TOLERANCE = {"gircse": 2e-3}
# Checkpoints store LoRA and heads in fp16 (project rule), so a reload differs from the
# live fp32 model by fp16 rounding of the heads; a reload of the reload is exact.
SAVE_TOLERANCE = {"causal2vec": 5e-3, "gircse": 5e-3, "causal-eos": 5e-3, "inbedder": 5e-3, "instemb": 5e-3}

TEXTS = [
    "A man is playing a guitar.",
    "The quick brown fox jumps over the lazy dog while the farmer watches from the old barn.",
    "Hi",
    "Stock markets fell sharply on Tuesday after the central bank raised interest rates again.",
    "",
    "Which card should I use to pay abroad without fees?",
]


@pytest.fixture(scope="module", params=EMBEDDERS)
def embedder(request, smollm2_cut):
    if request.param.endswith(SHIPPED):
        return load_embedder(request.param.removesuffix(SHIPPED), device="cpu")
    if request.param in TRAINABLE:
        return _untrained(request.param, smollm2_cut)
    if request.param == "minilm":
        return load_embedder("minilm", device="cpu")
    return load_embedder(request.param, device="cpu", backbone_name=smollm2_cut)


def _tolerance(embedder) -> float:
    return BATCH_TOLERANCE.get(embedder.method, 1e-4)


def test_shape_dtype_and_unit_norm(embedder):
    out = embedder.encode(TEXTS)
    assert out.shape == (len(TEXTS), embedder.dim)
    assert out.dtype == np.float32
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    assert np.isfinite(out).all()


@pytest.mark.parametrize("role", ["query", "document"])
def test_batch_size_1_vs_32_vs_mixed_lengths(embedder, role):
    full = embedder.encode(TEXTS, role=role, batch_size=32)  # mixed lengths padded together
    single = embedder.encode(TEXTS, role=role, batch_size=1)  # each text alone, no padding
    pairs = embedder.encode(TEXTS, role=role, batch_size=2)
    tol = _tolerance(embedder)
    assert np.abs(full - single).max() < tol
    assert np.abs(full - pairs).max() < tol


def test_padding_side_does_not_change_embeddings(embedder):
    if not hasattr(embedder, "padding_side"):
        pytest.skip("encoder embedders always pad right")
    if embedder.method == "gircse":
        pytest.skip("GIRCSE generates after the prompt, which needs left padding")
    left = embedder.encode(TEXTS, batch_size=8)
    embedder.padding_side = "right"
    try:
        right = embedder.encode(TEXTS, batch_size=8)
    finally:
        embedder.padding_side = "left"
    assert np.abs(left - right).max() < 1e-4


def test_instruction_changes_the_embedding(embedder):
    plain = embedder.encode(TEXTS[:2], role=Role.QUERY)
    steered = embedder.encode(TEXTS[:2], role=Role.QUERY, instruction="Represent the topic of the text")
    assert np.abs(plain - steered).max() > 1e-3


def test_composed_and_decomposed_accents_embed_alike(embedder):
    """"é" as one code point and as "e" + U+0301 are one text: byte-level BPE read them as
    different tokens (Causal2Vec: cosine 0.86 between the two forms of one sentence), so a
    document stored decomposed ranked below the same text typed composed."""
    import unicodedata

    text = "Le café crème et la pâte brisée de l'été"
    instruction = "Représente le thème"
    nfc = embedder.encode([unicodedata.normalize("NFC", text)], instruction=instruction)
    nfd = embedder.encode([unicodedata.normalize("NFD", text)],
                          instruction=unicodedata.normalize("NFD", instruction))
    assert np.abs(nfc - nfd).max() < 1e-5


def test_save_load_round_trip(embedder, tmp_path):
    embedder.save(tmp_path / "ckpt")
    again = load_checkpoint(tmp_path / "ckpt", device="cpu")
    assert again.method == embedder.method
    assert again.identity == embedder.identity
    a = embedder.encode(TEXTS, instruction="Find the topic")
    b = again.encode(TEXTS, instruction="Find the topic")
    assert np.abs(a - b).max() < SAVE_TOLERANCE.get(embedder.method, 1e-5)
    again.save(tmp_path / "ckpt2")
    third = load_checkpoint(tmp_path / "ckpt2", device="cpu")
    assert np.abs(b - third.encode(TEXTS, instruction="Find the topic")).max() < 1e-5
    # A checkpoint path is accepted wherever a name is, and its name reads without loading it.
    assert load_embedder(str(tmp_path / "ckpt")).dim == embedder.dim
    assert saved_name(str(tmp_path / "ckpt")) == saved_name(f"{tmp_path / 'ckpt'}[max_length=16]") == embedder.name


def test_empty_list_gives_empty_array(embedder):
    out = embedder.encode([])
    assert out.shape == (0, embedder.dim) and out.dtype == np.float32


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [(None, "texts is None"), ("just one string", "not a single string"), (["ok", 3], "texts[1] is int"),
     (["ok", None], "texts[1] is NoneType"), (42, "got int")],
)
def test_bad_input_raises_clear_error(embedder, bad, fragment):
    with pytest.raises(InvalidInputError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        embedder.encode(bad)


def test_bad_role_and_batch_size(embedder):
    with pytest.raises(InvalidInputError, match="unknown role 'passage'; use one of: query, document"):
        embedder.encode(["x"], role="passage")
    with pytest.raises(InvalidInputError, match="the batch size must be a positive whole number"):
        embedder.encode(["x"], batch_size=0)


def test_truncation_is_said_once_per_encode_call(minilm, caplog):
    """Summed over the call's batches, not one line per batch (a full SciFact run logged 163)."""
    texts = ["word " * 600] * 5 + ["short"] * 3
    with caplog.at_level(logging.WARNING, logger="embedders.base"):
        minilm.encode(texts, batch_size=2)
    said = [r.getMessage() for r in caplog.records if "were truncated" in r.getMessage()]
    assert len(said) == 1 and "5 of 8 texts were longer than 256 tokens" in said[0], said
    # Under an instruction minilm reads each text bare too (a blend): counted once, not twice
    # ("10 of 16").
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="embedders.base"):
        minilm.encode(texts, batch_size=4, instruction="topic")
    said = [r.getMessage() for r in caplog.records if "were truncated" in r.getMessage()]
    assert len(said) == 1 and "5 of 8 texts were longer than the" in said[0], said
    # None of them would fit without it: shortening the instruction is not offered.
    assert "none of these texts would have fit whole without it" in said[0], said
    assert "shorten the instruction" not in said[0], said
    # Read bare only (instruction_weight=0: the instruction blended out), still said.
    from embedders.baselines import EncoderMeanEmbedder

    bare = EncoderMeanEmbedder(name="minilm", backbone=minilm.backbone, instruction_weight=0.0)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="embedders.base"):
        bare.encode(texts, batch_size=4, instruction="topic")
    said = [r.getMessage() for r in caplog.records if "were truncated" in r.getMessage()]
    assert len(said) == 1 and "5 of 8 texts were longer than 256 tokens" in said[0], said


def test_texts_the_tokenizer_cannot_read_are_said_once_per_encode_call(minilm, caplog):
    """all-MiniLM reads every Thai text (and emoji) as ``[UNK]``: different texts embedded
    identically and ranked arbitrarily, and nothing said so."""
    thai = ["ฝนตกหนักมากวันนี้", "แมวชอบนอนบนโซฟา"]  # "heavy rain today", "the cat sleeps on the sofa"
    with caplog.at_level(logging.WARNING, logger="embedders.base"):
        out = minilm.encode([*thai, "A man is playing a guitar."], instruction="Find the topic", batch_size=1)
    said = [r.getMessage() for r in caplog.records if "unknown tokens" in r.getMessage()]
    assert len(said) == 1, said
    assert said[0].startswith("minilm: 2 of 3 texts are mostly unknown tokens to its tokenizer"), said
    assert "causal2vec" in said[0]
    assert float(out[0] @ out[1]) > 0.999  # why it matters: the two texts embed alike
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="embedders.base"):
        minilm.encode([*TEXTS[:4], "שלום עולם"], instruction="Find the topic")
    assert not [r for r in caplog.records if "unknown tokens" in r.getMessage()], caplog.text


def test_text_beyond_context_is_truncated_with_warning(embedder, caplog):
    long_text = "word " * 20_000
    with caplog.at_level(logging.WARNING):
        out = embedder.encode([long_text, "short"])
    assert out.shape == (2, embedder.dim)
    assert np.isfinite(out).all()
    assert any("were truncated" in r.getMessage() and "1 of 2" in r.getMessage() for r in caplog.records)
    # Truncation keeps the head of the text: a text that only differs after the cut embeds the same
    # (up to batch-composition rounding: the first call batched it with "short").
    other = embedder.encode([long_text + " completely different ending"])
    assert np.abs(out[0] - other[0]).max() < BATCH_TOLERANCE.get(embedder.method, 1e-5)


def _text_of(tokenizer, n: int) -> str:
    """A text the tokenizer reads as exactly ``n`` tokens (varied words, so no run merges)."""
    words = [f"{w}{i % 7}" if i % 3 else w for i, w in enumerate(
        ("ferry harbour timetable winter crossing island pier morning " * 60).split())]
    for k in range(1, len(words)):
        text = " ".join(words[:k])
        if len(tokenizer(text, add_special_tokens=False)["input_ids"]) >= n:
            return text
    raise AssertionError(f"no text of {n} tokens")


def test_document_budget_is_where_encode_starts_cutting_a_document(embedder, caplog):
    """``document_budget`` and ``documents_cut`` (what an index job compares its chunks with)
    agree with ``encode``'s own cut of a document, for every embedder's prompt."""
    budget = embedder.document_budget()
    assert budget is not None and 0 < budget <= embedder.max_length
    for extra in (-1, 0, 1, 2):
        text = _text_of(embedder.tokenizer, budget + extra)
        tokens = len(embedder.tokenizer(text, add_special_tokens=False)["input_ids"])
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="embedders.base"):
            embedder.encode([text, "short"], role="document")
        logged = any("were truncated" in r.getMessage() for r in caplog.records)
        assert embedder.documents_cut([text, "short"]) == int(logged) == int(tokens > budget), (
            extra, tokens, budget)
    assert embedder.documents_cut([]) == 0


def test_max_length_is_a_checked_inference_option_of_every_trained_method(embedder):
    """``ckpt[max_length=N]`` re-budgets a trained method (the corpus checkpoints serve more
    tokens than they trained with); a budget that leaves no room is refused and changes nothing."""
    from embedders.registry import apply_option

    if embedder.method not in {"causal2vec", "gircse", "causal-eos", "inbedder", "instemb"}:
        pytest.skip("baselines take their budget at construction")
    before, identity = embedder.max_length, embedder.identity
    text = "The quick brown fox jumps over the lazy dog while the farmer watches. " * 30  # ~450 tokens
    try:
        apply_option(embedder, "max_length", "300")
        assert embedder.max_length == embedder.config.max_length == 300
        assert embedder.identity != identity
        tokens = embedder._tokenize([text], Role.DOCUMENT, None)
        assert 290 <= len(tokens.sequences[0]) <= 300  # the tokenizer took the new budget
        with pytest.raises(InvalidInputError, match="max_length"):
            apply_option(embedder, "max_length", "9")
        assert embedder.max_length == 300
        assert len(embedder._tokenize([text], Role.DOCUMENT, None).sequences[0]) == len(tokens.sequences[0])
    finally:
        apply_option(embedder, "max_length", str(before))
    assert embedder.identity == identity


def test_identity_changes_name_what_makes_vectors_incomparable():
    from embedders.contract import identity_changes

    old = json.dumps({"method": "causal2vec", "max_length": 256, "weights": "aaaa", "template": "prompteol"})
    retrained = json.dumps({"method": "causal2vec", "max_length": 96, "weights": "bbbb", "template": "prompteol"})
    assert identity_changes(old, retrained) == ["max_length", "weights"]
    assert identity_changes(old, old) == []
    # A GPU worker's bf16 vectors and GIRCSE's KV cache switch are comparable with the CPU's.
    on_gpu = json.dumps({**json.loads(old), "dtype": "bfloat16", "use_cache": False})
    assert identity_changes(old, on_gpu) == []
    # A field a later version added (with the earlier behaviour as its default) is not a change.
    assert identity_changes(old, json.dumps({**json.loads(old), "step_weighting": "uniform"})) == []
    assert identity_changes("", retrained) == []  # nothing recorded
    assert identity_changes("not json", retrained) == ["identity"]
    assert identity_changes(old, retrained, ignore=frozenset({"max_length"})) == ["weights"]


def test_a_trained_methods_settings_are_compared_one_by_one_and_training_only_ones_do_not_count():
    """A trained checkpoint's identity nests its settings under ``config``: a changed budget is
    named (and ignorable at search), GIRCSE's KV cache and loss settings are not changes."""
    import dataclasses

    from embedders.contract import identity_changes
    from embedders.registry import trainable_methods, training_only_fields

    config = {"max_length": 96, "soft_tokens": 5, "train_soft_tokens": 5, "temperature": 0.02,
              "step_weighting": "linear", "refinement_weight": 5.0, "use_cache": True,
              "prompts": {"query": "{text}"}}
    shipped = json.dumps({"method": "gircse", "name": "gircse", "config": config, "weights": "aaaa"})

    def variant(weights: str = "aaaa", **changes: object) -> str:
        return json.dumps({"method": "gircse", "name": "gircse", "config": {**config, **changes},
                           "weights": weights})

    assert identity_changes(shipped, variant(max_length=256)) == ["max_length"]
    assert identity_changes(shipped, variant(max_length=256), ignore=frozenset({"max_length"})) == []
    assert identity_changes(shipped, variant(use_cache=False, step_weighting="uniform", temperature=0.05,
                                             refinement_weight=1.0, train_soft_tokens=3)) == []
    assert identity_changes(shipped, variant("bbbb", soft_tokens=8, prompts={"query": "Q: {text}"})) == [
        "prompts", "soft_tokens", "weights"]
    # A setting added later (soft_temperature): missing on the recorded side means its default,
    # the earlier behaviour; served at another value it is a change.
    assert identity_changes(shipped, variant(soft_temperature=1.0)) == []
    assert identity_changes(shipped, variant(soft_temperature=1.5)) == ["soft_temperature"]
    assert identity_changes(variant(soft_temperature=1.5), shipped) == ["soft_temperature"]
    # Every method's training-only names are fields of its config (a misspelt name would match
    # nothing, and the field it meant would still count as a change).
    for name, method in trainable_methods().items():
        known = {f.name for f in dataclasses.fields(method.model_class.config_class)}
        assert training_only_fields(name) <= known, name
    assert "temperature" in training_only_fields("causal-eos") and not training_only_fields("inbedder")
