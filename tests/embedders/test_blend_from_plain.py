"""``encode_from_plain``: an embedder whose vectors under an instruction blend in its bare ones
(``instruction_weight`` under 1) computes them from given bare vectors, as a collection stores
them, reading the texts under the instruction only, with the model it is (no second one)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest

from embedders import load_embedder
from embedders.contract import EncodesFromPlain
from embedders.errors import InvalidInputError

TEXTS = ["My card was declined at the supermarket", "How do I top up with a bank transfer?", "Hi"]
INSTRUCTION = "Find messages about topping up"


@contextmanager
def _rows(model) -> Iterator[list[int]]:
    """Texts run through ``model``'s backbone meanwhile (a list that grows; forward hook)."""
    seen: list[int] = []
    handle = model.backbone.base_model().register_forward_pre_hook(
        lambda _module, args, kwargs: seen.append(int(kwargs["input_ids"].shape[0])), with_kwargs=True)
    try:
        yield seen
    finally:
        handle.remove()


def test_minilm_from_its_bare_vectors_is_its_encode_under_the_instruction(minilm) -> None:
    assert isinstance(minilm, EncodesFromPlain) and minilm.config.instruction_weight == 0.25  # as served
    plain = minilm.encode(TEXTS, role="document")
    for role in ("document", "query"):
        want = minilm.encode(TEXTS, role=role, instruction=INSTRUCTION)
        base = plain if role == "document" else minilm.encode(TEXTS, role=role)
        with _rows(minilm) as seen:
            got = minilm.encode_from_plain(base, TEXTS, role=role, instruction=INSTRUCTION)
        assert sum(seen) == len(TEXTS)  # each text read once, under the instruction
        assert got.dtype == np.float32 and got.shape == want.shape
        assert np.allclose(got, want, atol=1e-5)
        assert not np.allclose(got, base, atol=1e-3)  # the instruction did count
    # No instruction (or a blank one): the bare vectors themselves, nothing encoded.
    with _rows(minilm) as seen:
        assert np.allclose(minilm.encode_from_plain(plain, TEXTS, instruction="  "), plain, atol=1e-7)
    assert seen == []
    with pytest.raises(InvalidInputError, match="one row per text"):
        minilm.encode_from_plain(plain[:2], TEXTS, instruction=INSTRUCTION)
    # The weight's ends: 1 reads only the instructed text, 0 ignores the instruction.
    for w in ("1", "0"):
        other = load_embedder(f"minilm[instruction_weight={w}]")
        assert np.allclose(other.encode_from_plain(plain, TEXTS, instruction=INSTRUCTION),
                           other.encode(TEXTS, instruction=INSTRUCTION), atol=1e-5)
    assert minilm.config.instruction_weight == 0.25  # the copy that read the instructed half was its own


@pytest.mark.parametrize("pooling", ["1st-gen", "avg-gen"])
def test_inbedder_from_its_bare_vectors_is_its_encode_under_the_instruction(tiny_inbedder_dir, pooling) -> None:
    """Read bare, InBedder reads a text under its default instruction: that is the half blended in."""
    model = load_embedder(f"{tiny_inbedder_dir}[instruction_weight=0.25,pooling={pooling},gen_tokens=2]",
                          device="cpu")
    assert isinstance(model, EncodesFromPlain)
    plain = model.encode(TEXTS, role="document")
    want = model.encode(TEXTS, role="document", instruction=INSTRUCTION)
    got = model.encode_from_plain(plain, TEXTS, role="document", instruction=INSTRUCTION)
    assert np.allclose(got, want, atol=1e-5)
    assert not np.allclose(got, plain, atol=1e-3)
    default = model.config.default_instruction  # read as bare: the bare vectors as they are
    assert np.allclose(model.encode_from_plain(plain, TEXTS, instruction=default), plain, atol=1e-7)
