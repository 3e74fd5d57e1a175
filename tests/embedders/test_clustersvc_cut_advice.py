"""The truncation log's advice names max_length only where the embedder takes that option: minilm
said "raise max_length", and `-e 'minilm[max_length=512]'` was refused ("embedder 'minilm' has
no option 'max_length'"). The budget and count of texts cut under an instruction (what a
clustering reads) are known without the model."""

from __future__ import annotations

import copy
import logging

import pytest

LONG = "the battery died and the screen cracked " * 60  # ~480 tokens


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "were truncated" in r.getMessage()]


def test_minilm_is_not_told_to_raise_a_max_length_it_does_not_take(minilm, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="embedders.base"):
        minilm.encode([LONG, "short"])
        minilm.encode([LONG, "short"], instruction="What is broken?")
    said = _said(caplog)
    assert len(said) == 2, said
    for line in said:
        assert "max_length" not in line and "split the texts into shorter ones to keep the rest" in line


def test_an_embedder_that_takes_max_length_is_told_to_raise_it(minilm, caplog) -> None:
    offering = copy.copy(minilm)
    offering.OPTIONS = ("instruction_weight", "max_length")
    with caplog.at_level(logging.WARNING, logger="embedders.base"):
        offering.encode([LONG, "short"])
    said = _said(caplog)
    assert len(said) == 1 and "(raise max_length or chunk the text to keep the rest)" in said[0], said


def test_the_budget_and_cut_count_under_an_instruction(minilm) -> None:
    from embedders.contract import Role

    instruction = "What does the customer want?"
    taken = minilm._tokenize.instruction_tokens(Role.DOCUMENT, instruction)
    assert minilm.document_budget() == 254
    assert minilm.document_budget(instruction) == 254 - taken
    # Fits bare, cut under the instruction.
    edge = " ".join(["word"] * 252)
    assert minilm.documents_cut([edge, "short"]) == 0
    assert minilm.documents_cut([edge, "short"], instruction=instruction) == 1
    assert minilm.documents_cut([LONG, edge], instruction=" ") == 1  # a blank one: bare
