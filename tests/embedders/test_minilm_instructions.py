"""minilm under an instruction: a blend of its embeddings with and without the instruction."""

from __future__ import annotations

import json

import numpy as np
import pytest

from embedders import load_embedder
from embedders.baselines import INSTRUCTION_WEIGHT
from embedders.contract import identity_changes
from embedders.errors import InvalidInputError

TEXTS = ["my card was declined at the shop", "how long does a transfer take"]
INSTRUCTION = "Find messages about top-ups"


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_the_weight_blends_the_plain_and_the_instructed_embeddings(minilm) -> None:
    assert minilm.config.instruction_weight == INSTRUCTION_WEIGHT
    old = load_embedder("minilm[instruction_weight=1]")
    prepended = old.encode(TEXTS, role="query", instruction=INSTRUCTION)
    # w=1 is the prepended text, as every minilm before the option (the instruction and a space).
    assert np.allclose(prepended, old.encode([f"{INSTRUCTION} {t}" for t in TEXTS], role="query"), atol=1e-5)
    plain = minilm.encode(TEXTS, role="query")
    ignore = load_embedder("minilm[instruction_weight=0]")
    assert np.allclose(ignore.encode(TEXTS, role="query", instruction=INSTRUCTION), plain, atol=1e-6)
    half = load_embedder("minilm[instruction_weight=0.5]")
    assert np.allclose(half.encode(TEXTS, role="query", instruction=INSTRUCTION),
                       _unit(0.5 * plain + 0.5 * prepended), atol=1e-5)
    # Without an instruction the weight changes nothing; each loaded copy keeps its own weight.
    assert np.allclose(half.encode(TEXTS, role="document"), minilm.encode(TEXTS, role="document"), atol=1e-6)
    assert (old.config.instruction_weight, half.config.instruction_weight) == (1.0, 0.5)
    with pytest.raises(InvalidInputError, match="from 0 to 1"):
        load_embedder("minilm[instruction_weight=1.5]")


def test_the_weight_is_saved_and_old_configs_keep_the_old_behaviour(tmp_path) -> None:
    half = load_embedder("minilm[instruction_weight=0.5]")
    assert load_embedder(half.save(tmp_path / "half")).config.instruction_weight == 0.5
    config_file = tmp_path / "half" / "facet_config.json"
    config = json.loads(config_file.read_text())
    del config["instruction_weight"]  # as saved before the option existed
    config_file.write_text(json.dumps(config))
    assert load_embedder(tmp_path / "half").config.instruction_weight == 1.0


def test_the_weight_changes_the_cache_key_but_not_what_a_collection_can_be_searched_with(minilm) -> None:
    other = load_embedder("minilm[instruction_weight=1]" if INSTRUCTION_WEIGHT != 1 else
                          "minilm[instruction_weight=0.5]")
    assert other.identity != minilm.identity  # instructed embeddings differ: the eval cache must too
    assert identity_changes(minilm.identity, other.identity) == []  # documents carry no instruction
