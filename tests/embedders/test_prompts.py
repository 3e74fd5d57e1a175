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
    assert f"({bare} more are its prompt), leaving the text no room" in str(e.value)


# An instruction that takes most of minilm's 256 tokens but leaves the text some: 130 words.
LONG_INSTRUCTION = " ".join(("Find customer reviews that describe a product or service experience in detail "
                             "paying attention to what happened " * 10).split()[:130])


def test_an_instruction_that_leaves_the_text_too_little_is_refused_naming_it(minilm):
    """With InstEmb an 80-word instruction left a query one or two tokens (every query returned
    the same list) and only "no room at all" was refused, with advice ("about 255
    characters") that contradicted what passed (525). An instruction may take half of what the
    prompt leaves; the error names it, its tokens, the embedder's, and a limit in tokens and in
    characters that is what is accepted."""
    pt = minilm._tokenize
    limit = pt.instruction_limit(Role.QUERY)
    assert limit == (256 - 2) // 2  # [CLS] and [SEP] are minilm's whole prompt
    cost = pt.instruction_tokens(Role.QUERY, LONG_INSTRUCTION)
    assert limit < cost < 256 - 2  # the old rule let it through: the text kept a few tokens
    with pytest.raises(InvalidInputError) as e:
        minilm.check_instruction("query", LONG_INSTRUCTION)  # what the application calls first
    message = str(e.value)
    assert message.startswith("the instruction is too long for this embedder"), message
    assert f"it takes {cost} of the 256 tokens the embedder reads" in message
    assert f"leaving the text {256 - 2 - cost} tokens" in message
    assert f"at most {limit} tokens" in message and "shorten the instruction" in message
    assert "max_length" not in message  # said for every edge: the UI and the API have none
    # The characters it names are accepted: the instruction cut to that many characters passes.
    chars = int(message.split("(about ")[1].split(" characters")[0])
    words = LONG_INSTRUCTION[:chars].rsplit(" ", 1)[0]
    assert pt.instruction_tokens(Role.QUERY, words) <= limit
    minilm.check_instruction("query", words)
    assert minilm.encode(["the battery died"], role="query", instruction=words).shape == (1, minilm.dim)
    # Called directly (evaluation, training at a short max_length), the embedder still reads it,
    # cutting the text as it always did; only the application's edges refuse it
    # (tests/app/api/test_instruction_budget.py).
    assert minilm.encode(["the battery died"], role="query", instruction=LONG_INSTRUCTION).shape == (1, minilm.dim)


def test_instemb_refuses_an_instruction_that_would_leave_its_query_a_token(smollm2_cut):
    """InstEmb reads through ``PromptTokenizer.each``, which does not refuse (training batches
    mix instructions); ``check_instruction`` applies the limit for it too. The exploration's 80
    words left a query 1-2 tokens of the 92 the packaged InstEmb reads (96, 4 kept for
    look-ahead)."""
    import torch

    from embedders.methods.instemb import InstEmbConfig, InstEmbEmbedder

    torch.manual_seed(0)
    model = InstEmbEmbedder(InstEmbConfig(max_length=96, look_ahead=4, backbone=smollm2_cut), device="cpu")
    words = ("Find customer reviews that describe a product or service experience in detail paying "
             "attention to what happened " * 10).split()
    long = " ".join(words[:80])
    with pytest.raises(InvalidInputError, match=r"it takes \d+ of the 92 tokens the embedder reads"):
        model.check_instruction("query", long)
    pt = model._tokenize
    assert pt.instruction_limit(Role.QUERY) == 41  # (92 - 10 for PromptEOL) // 2
    mixed = pt.each(["a query " * 30, "another"], Role.QUERY, [long, "Find reviews"])  # training: cut
    assert mixed.truncated == 1
    fine = " ".join(words[:30])  # longer than any instruction the suites and examples use
    model.check_instruction("query", fine)
    assert model.encode(["the battery died"], role="query", instruction=fine).shape == (1, model.dim)


def test_a_truncation_log_says_how_much_of_the_cut_is_the_instructions(minilm, caplog):
    """The log said "1 of 1 texts were longer than 96 tokens and were truncated (raise
    max_length or chunk the text ...)", blaming the text, when an instruction took most of
    the budget; it names what the instruction took and which texts would have fit without it."""
    import logging

    instruction = " ".join(LONG_INSTRUCTION.split()[:100])  # under the limit: accepted
    taken = minilm._tokenize.instruction_tokens(Role.DOCUMENT, instruction)
    fits_alone = "the battery died and the screen cracked " * 25  # ~200 tokens: fits without it
    with caplog.at_level(logging.WARNING, logger="embedders.base"):
        minilm.encode([fits_alone, "word " * 2000, "short"], instruction=instruction)
    said = [r.getMessage() for r in caplog.records if "truncated" in r.getMessage()]
    assert len(said) == 1, said
    assert (f"longer than the {256 - 2 - taken} tokens the instruction left them" in said[0]
            and f"the instruction takes {taken} of the 256 tokens" in said[0]
            and "1 of these texts would have fit whole without it" in said[0]), said
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="embedders.base"):
        minilm.encode(["word " * 2000, "short"])  # no instruction: the message as it was
    said = [r.getMessage() for r in caplog.records if "truncated" in r.getMessage()]
    assert said and "longer than 256 tokens" in said[0] and "instruction" not in said[0], said


def test_prompt_tokenizer_each_reads_every_text_under_its_own_instruction(prompteol):
    prompts = PromptConfig(query="### Input:\n{text}\n\n### Instruction:\n{instruction}\n\n### Response:",
                           instruction_format="{instruction}")
    # 28: the longest instruction (7 tokens) may take half of the 14 the template leaves.
    tok = PromptTokenizer(prompteol.backbone.tokenizer, prompts, max_length=28)
    texts = ["a cat sat on the mat and looked around", "refund please, the parcel never came and I want my money",
             "another long text about many things"]
    instructions = ["What animal?", "What does the customer want?", "What animal?"]
    mixed = tok.each(texts, Role.QUERY, instructions)
    for i, (text, instruction) in enumerate(zip(texts, instructions, strict=True)):
        alone = tok([text], Role.QUERY, instruction)
        assert mixed.sequences[i] == alone.sequences[0] and mixed.text_spans[i] == alone.text_spans[0]
    alone_truncated = sum(tok([t], Role.QUERY, i).truncated for t, i in zip(texts, instructions, strict=True))
    assert mixed.truncated >= 1 and mixed.truncated == alone_truncated
    with pytest.raises(ValueError, match="3 texts but 2 instructions"):
        tok.each(texts, Role.QUERY, instructions[:2])


def test_a_text_of_long_tokens_that_fits_is_read_whole(prompteol):
    """SmolLM2's vocabulary holds tokens of up to 81 characters (runs of '#', '-', '=', spaces
    after a line break): a text longer than 32 characters a token of room was cut at that many
    characters, its end lost, and counted truncated, though its tokens fitted."""
    tok = prompteol.backbone.tokenizer
    pt = PromptTokenizer(tok, PROMPTEOL, max_length=96)
    text = "Report" + ("#" * 80 + " item") * 35 + " END"
    assert len(tok(text, add_special_tokens=False)["input_ids"]) < 86  # (96 less the template)
    out = pt([text], Role.DOCUMENT, None)
    assert out.truncated == 0
    start, end = out.text_spans[0]
    assert tok.decode(out.sequences[0][start:end]).endswith(" END")
    assert pt.chars_per_token >= 64


def test_an_instruction_format_with_other_braces_renders_them_as_written():
    """'{"task": "{instruction}"} ' was accepted, then every instructed encode raised KeyError
    '"task"' (the format was read by str.format, the templates by replace)."""
    cfg = PromptConfig(query="{instruction}{text}", document="{text}", instruction_format='{"task": "{instruction}"} ')
    assert cfg.render("hi", Role.QUERY, "find docs") == '{"task": "find docs"} hi'
    assert cfg.render("hi", Role.QUERY, "a {b} c") == '{"task": "a {b} c"} hi'
    escaped = PromptConfig(query="{instruction}{text}", document="{text}", instruction_format="{{{instruction}}} ")
    assert escaped.render("hi", Role.QUERY, "find") == "{find} hi"  # (str.format's escapes, as they read)


def test_the_usage_count_reads_a_text_of_long_tokens_as_the_prompt_does(prompteol):
    """/v1/embeddings' usage figure cut each text at 32 characters a token of the cap: a text of
    SmolLM2's long tokens (runs of '#') was under-counted."""
    from app.core import Facet

    text = "#" * (80 * 300)
    tokens = len(prompteol.backbone.tokenizer(text, add_special_tokens=False)["input_ids"])
    assert len(text) > prompteol.max_length * 32 and tokens < prompteol.max_length  # it fits
    assert Facet.count_tokens(prompteol, [text]) == min(tokens, prompteol.max_length)


def test_a_text_after_a_word_wordpiece_reads_as_one_unknown_is_read(minilm):
    """A word past WordPiece's 100 characters is one [UNK]: a chunk of a 9,000-character hash
    and a sentence was ten tokens, but over 32 characters a token of room, so it was cut at 8,128
    characters, the sentence never read (its vector the hash's alone: "octopus" found it at
    0.05) and the chunk said "longer than minilm reads whole"."""
    sentence = "The octopus hides in the coral reef and changes colour to escape sharks."
    text = "checksum " + "f" * 9000 + " " + sentence
    out = minilm._tokenize([text], Role.DOCUMENT, None)
    assert out.truncated == 0
    start, end = out.text_spans[0]
    assert minilm.tokenizer.decode(out.sequences[0][start:end]).endswith("escape sharks.")
    blob, alone, query = minilm.encode([text, "checksum " + "f" * 9000, "octopus hiding in a coral reef"])
    assert float(blob @ query) > 0.5 and float(blob @ alone) < 0.9
    # A long text that is cut is still cut at the budget, from its start.
    cut = minilm._tokenize(["word " * 20_000], Role.DOCUMENT, None)
    assert cut.truncated == 1 and len(cut.sequences[0]) == minilm.max_length


def test_a_long_text_is_read_as_far_as_its_budget_needs_and_no_further(minilm, monkeypatch):
    """The reading of a long text grew until it held the budget's tokens: a 10 MB text of one
    "word" (a hex dump: one [UNK]) was tokenised whole, several times (32 s; 0.01 s before).
    And a slice ending inside a word over 100 characters read its part as word pieces (not
    the word's one [UNK]), so a text that fits was cut there."""
    random = __import__("random").Random(0)
    words = ["".join(random.choice("0123456789abcdef") for _ in range(140)) for _ in range(231)]
    fits = " ".join(words) + " the customer wants a refund"  # 32,598 characters, 237 tokens
    out = minilm._tokenize([fits], Role.DOCUMENT, None)
    start, end = out.text_spans[0]
    assert out.truncated == 0
    assert minilm.tokenizer.decode(out.sequences[0][start:end]).endswith("the customer wants a refund")
    read: list[int] = []
    tokenizer = minilm._tokenize.tokenizer

    class Counting:
        def __call__(self, texts, *args, **kwargs):
            read.append(sum(map(len, [texts] if isinstance(texts, str) else texts)))
            return tokenizer(texts, *args, **kwargs)

        def __getattr__(self, name):
            return getattr(tokenizer, name)

    monkeypatch.setattr(minilm._tokenize, "tokenizer", Counting())
    cut = minilm._tokenize(["a" * 10_000_000], Role.DOCUMENT, None)
    assert cut.truncated == 1 and len(cut.sequences[0]) == 3  # [CLS] [UNK] [SEP]
    first = (minilm.max_length - 2) * minilm._tokenize.chars_per_token
    assert sum(read) < 2 * 64 * first, read  # at most 64 times the first slice, doubling


def test_a_long_run_without_spaces_after_a_title_is_read(minilm):
    """A slice ending far into a run without spaces (CJK prose) was cut back to the run's
    start, every slice up to the read's cap: a title then a million CJK characters was embedded
    as its title alone ([CLS] [UNK] [UNK] [SEP])."""
    out = minilm._tokenize(["标题 " + "中文文本内容" * 200_000], Role.DOCUMENT, None)
    assert out.truncated == 1 and len(out.sequences[0]) == minilm.max_length
    start, end = out.text_spans[0]
    assert "文 本" in minilm.tokenizer.decode(out.sequences[0][start:end])


@pytest.mark.parametrize("tail", [30, 99, 120])
def test_a_slice_ending_in_a_word_after_a_cjk_character_reads_as_the_whole_text_does(minilm, tail):
    """Words end where BERT's tokenizer ends them, not only at spaces: a slice ending 30
    characters into the 150-letter word after a CJK character read that part as word pieces
    ("##aaaa"), where the whole text reads the word as one [UNK]."""
    tok = minilm._tokenize
    n = (minilm.max_length - 2) * tok.chars_per_token
    head = "title " + "word " * 240
    text = head + "h" * (n - len(head) - 1 - tail) + "中" + "a" * 150 + " more words here" * 40
    out = tok([text], Role.DOCUMENT, None)
    start, end = out.text_spans[0]
    whole = tok.tokenizer(text, add_special_tokens=False)["input_ids"][: end - start]
    assert list(out.sequences[0][start:end]) == list(whole)


def test_the_prompt_parts_cache_is_bounded_by_characters_too(minilm):
    """Prompt parts were cached up to 4,096 of them, whatever their size: a server searching
    under a new 190 KB instruction each time (one long word is one unknown token to minilm:
    accepted) held 350 KB more a request, up to 0.8 GB (the leak review of the seventh session
    of 2026-12-06)."""
    pt = PromptTokenizer(minilm.backbone.tokenizer, minilm.prompts, 256)
    reference = pt(["a cat"], Role.QUERY, "w" * 150_000 + "0")
    for i in range(20):
        out = pt(["a cat"], Role.QUERY, "w" * 150_000 + str(i % 10))
        held = sum(len(part) for part in pt._fixed)
        assert held <= 1 << 20, (i, held)  # a megabyte of characters at most
    # What the cache gives is what tokenising gives.
    assert pt(["a cat"], Role.QUERY, "w" * 150_000 + "0").sequences == reference.sequences
    assert out.sequences == reference.sequences  # (one unknown token, whichever the word)
    assert pt(["a dog"], Role.QUERY, "w" * 150_000 + "0").sequences != reference.sequences
