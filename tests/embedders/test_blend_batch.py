"""A blend under an instruction reads each text twice (with and without it): both readings share
forward passes, one for a single query, never more rows per pass than the batch had, and the
vectors are those of two separate passes.

The reference is the one-reading path called explicitly (``_mean``, ``_answer_state``); forward
passes are counted with hooks on the real torch modules.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
import torch

from embedders import Role, load_embedder
from embedders.backbone import LoraSettings
from embedders.methods.inbedder import InBedderConfig, InBedderEmbedder

INSTRUCTION = "Find messages about top-ups"
QUERY = ["how long does a transfer take"]
# Lengths that differ so that the rows of a pass are padded.
TEXTS = ["my card was declined at the shop", "Hi",
         " ".join(["the transfer to my savings account has been pending for three days now"] * 4),
         "why was I charged a fee for topping up with a card"]


@contextmanager
def forward_shapes(module: torch.nn.Module) -> Iterator[list[tuple[int, int]]]:
    """The (rows, columns) of ``input_ids`` in each forward pass of ``module``, in order."""
    shapes: list[tuple[int, int]] = []
    handle = module.register_forward_hook(
        lambda _m, _args, kwargs, _out: shapes.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True)
    try:
        yield shapes
    finally:
        handle.remove()


def _passes(texts: list[str]) -> list[int]:
    """Rows of the forward passes of a blend: both readings of one text in one pass; a batch in
    two passes of its own size."""
    return [2] if len(texts) == 1 else [len(texts), len(texts)]


def _blend(weight: float, plain: torch.Tensor, under: torch.Tensor) -> np.ndarray:
    """What the two-pass blend computed, then ``encode``'s normalisation."""
    unit = torch.nn.functional.normalize
    mixed = (1 - weight) * unit(plain.float(), dim=-1) + weight * unit(under.float(), dim=-1)
    return unit(mixed, dim=-1).numpy()


def _same_directions(a: np.ndarray, b: np.ndarray) -> None:
    assert a.shape == b.shape
    assert np.abs(1 - (a * b).sum(axis=1)).max() < 1e-5
    assert np.allclose(a, b, atol=1e-5)


def test_minilm_blends_in_one_pass_for_a_query_and_matches_two_passes(minilm) -> None:
    weight = minilm.config.instruction_weight
    assert 0 < weight < 1
    for texts in (QUERY, TEXTS):
        with torch.inference_mode():
            expected = _blend(weight, minilm._mean(texts, Role.QUERY, None),
                              minilm._mean(texts, Role.QUERY, INSTRUCTION))
        with forward_shapes(minilm.backbone.model) as shapes:
            got = minilm.encode(texts, role="query", instruction=INSTRUCTION)
        _same_directions(got, expected)
        assert [rows for rows, _ in shapes] == _passes(texts), shapes


def test_minilm_passes_stay_within_the_batch_size(minilm) -> None:
    texts = TEXTS * 3  # 12 texts in batches of 5, 5 and 2
    with torch.inference_mode():
        expected = _blend(minilm.config.instruction_weight, minilm._mean(texts, Role.DOCUMENT, None),
                          minilm._mean(texts, Role.DOCUMENT, INSTRUCTION))
    with forward_shapes(minilm.backbone.model) as shapes:
        got = minilm.encode(texts, instruction=INSTRUCTION, batch_size=5)
    _same_directions(got, expected)
    assert [rows for rows, _ in shapes] == [5, 5, 5, 5, 2, 2], shapes


@pytest.mark.parametrize("weight", [0.0, 1.0])
def test_minilm_weights_zero_and_one_read_the_text_once(weight: float) -> None:
    model = load_embedder(f"minilm[instruction_weight={weight:g}]", device="cpu")
    with forward_shapes(model.backbone.model) as shapes:
        got = model.encode(QUERY, role="query", instruction=INSTRUCTION)
    assert [rows for rows, _ in shapes] == [1]
    reading = QUERY if weight == 0 else [f"{INSTRUCTION} {QUERY[0]}"]  # minilm prepends it and a space
    _same_directions(got, model.encode(reading, role="query"))


@pytest.fixture(scope="module")
def inbedder(smollm2_cut):
    """An untrained InBedder over SmolLM2 cut to two layers that blends (w = 0.25, the shipped
    checkpoint's value; loading that one takes ~10 s): the check is the batching, not quality."""
    torch.manual_seed(0)
    config = InBedderConfig(lora=LoraSettings(r=2, target_modules=("q_proj",)), max_length=64,
                            backbone=smollm2_cut, instruction_weight=0.25)
    return InBedderEmbedder(config, device="cpu")


@pytest.mark.parametrize(("pooling", "side"), [("1st-gen", "left"), ("1st-gen", "right"), ("avg-gen", "left")])
def test_inbedder_blends_in_shared_passes_and_matches_two_passes(inbedder, pooling: str, side: str) -> None:
    inbedder.pooling, inbedder.padding_side = pooling, side  # avg-gen always pads on the left
    body = inbedder.backbone.base_model()
    default = inbedder.config.default_instruction
    try:
        for texts in (QUERY, TEXTS):
            with torch.inference_mode():
                expected = _blend(0.25, inbedder._answer_state(texts, Role.QUERY, default),
                                  inbedder._answer_state(texts, Role.QUERY, INSTRUCTION))
            with forward_shapes(body) as shapes:
                got = inbedder.encode(texts, role="query", instruction=INSTRUCTION)
            _same_directions(got, expected)
            # Prefills read whole prompts; avg-gen's decoding steps then feed one token a row.
            assert [rows for rows, columns in shapes if columns > 1] == _passes(texts), shapes
            if pooling == "avg-gen" and len(texts) == 1:
                assert len(shapes) <= 1 + inbedder.gen_tokens, shapes
    finally:
        inbedder.pooling, inbedder.padding_side = "1st-gen", "left"
