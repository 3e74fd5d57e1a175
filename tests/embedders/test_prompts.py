from __future__ import annotations

import pytest

from embedders import InvalidInputError, PromptConfig, Role
from embedders.base import PromptTokenizer
from embedders.baselines import PROMPTEOL


def test_prompt_config_renders_instruction_only_when_given():
    cfg = PromptConfig(query="Q: {instruction}{text}", document="{text}", instruction_format="[{instruction}] ")
    assert cfg.render("hi", Role.QUERY, "find it") == "Q: [find it] hi"
    assert cfg.render("hi", Role.QUERY, None) == "Q: hi"
    assert cfg.render("hi", Role.DOCUMENT, "find it") == "hi"


def test_prompt_config_validates_templates():
    with pytest.raises(ValueError, match="exactly once"):
        PromptConfig(query="no text here")
    with pytest.raises(ValueError, match="instruction_format"):
        PromptConfig(instruction_format="nothing")


def test_prompt_tokenizer_keeps_suffix_when_truncating(prompteol):
    tok = prompteol.backbone.tokenizer
    pt = PromptTokenizer(tok, PROMPTEOL, max_length=32)
    out = pt(["word " * 500, "A cat."], Role.DOCUMENT, None)
    assert out.truncated == 1
    assert len(out.sequences[0]) == 32
    suffix_ids = tok(' means in one word:"', add_special_tokens=False)["input_ids"]
    assert out.sequences[0][-len(suffix_ids):] == suffix_ids
    # The span of a short text covers exactly its tokens.
    start, end = out.text_spans[1]
    assert tok.decode(out.sequences[1][start:end]).strip().startswith("A cat")


def test_prompt_tokenizer_rejects_instruction_that_fills_context(prompteol):
    pt = PromptTokenizer(prompteol.backbone.tokenizer, PROMPTEOL, max_length=16)
    with pytest.raises(InvalidInputError, match="shorten the instruction") as e:
        pt(["x"], Role.DOCUMENT, "a very long instruction " * 20)
    # Said for every edge: no CLI flag, no option only some embedders take (the UI offered
    # `--max-length`, and minilm refused [max_length=N]); how much room there is instead.
    assert "--max-length" not in str(e.value) and "max_length=" not in str(e.value)
    bare = len(pt(["x"], Role.DOCUMENT, None).sequences[0]) - 1  # the prompt without the text
    assert "of the 16 tokens the embedder reads" in str(e.value)
    assert f"well under {16 - bare - 1} tokens" in str(e.value)


def test_prompt_tokenizer_each_reads_every_text_under_its_own_instruction(prompteol):
    prompts = PromptConfig(query="### Input:\n{text}\n\n### Instruction:\n{instruction}\n\n### Response:",
                           instruction_format="{instruction}")
    tok = PromptTokenizer(prompteol.backbone.tokenizer, prompts, max_length=24)
    texts = ["a cat sat on the mat and looked around", "refund please", "another long text about many things"]
    instructions = ["What animal?", "What does the customer want?", "What animal?"]
    mixed = tok.each(texts, Role.QUERY, instructions)
    for i, (text, instruction) in enumerate(zip(texts, instructions, strict=True)):
        alone = tok([text], Role.QUERY, instruction)
        assert mixed.sequences[i] == alone.sequences[0] and mixed.text_spans[i] == alone.text_spans[0]
    alone_truncated = sum(tok([t], Role.QUERY, i).truncated for t, i in zip(texts, instructions, strict=True))
    assert mixed.truncated >= 1 and mixed.truncated == alone_truncated
    with pytest.raises(ValueError, match="3 texts but 2 instructions"):
        tok.each(texts, Role.QUERY, instructions[:2])
