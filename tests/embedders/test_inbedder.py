"""Method-specific checks for InBedder.

The shared contract checks (batch and padding invariance, save/load, bad input) run
through its rows in test_contract.py; here: what is trainable, that one step lowers
the answer loss, the labels, 1st-gen and avg-gen against hand computations, answer
generation and the load-time options.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from embedders import InvalidInputError, PromptConfig, Role, load_checkpoint, load_embedder
from embedders.backbone import LoraSettings
from embedders.methods.inbedder import InBedderConfig, InBedderEmbedder
from embedders.training.instruct_data import TripleBatch

# Dropout off so the loss before and after a step is a deterministic function of the weights.
LORA = LoraSettings(r=4, alpha=8, dropout=0.0, target_modules=("q_proj", "v_proj"))
TEXTS = ["A man is playing a guitar.", "Stock markets fell sharply on Tuesday.", "Hi"]
BATCH = TripleBatch(
    inputs=["I still have not received my new card.", "I am so happy today!", "The film was dull."],
    instructions=["What does the customer want?", "How does the author feel?", "What is the opinion?"],
    answers=["card arrival", "joy", "negative boring"],
    task="test",
)


@pytest.fixture(scope="module")
def model(smollm2_cut):
    """On SmolLM2 cut to two layers (tests/conftest.py): the checks here are generation and
    pooling mechanics, not answer quality."""
    torch.manual_seed(0)
    return InBedderEmbedder(InBedderConfig(lora=LORA, max_length=64, backbone=smollm2_cut), device="cpu")


@pytest.fixture(scope="module")
def checkpoint(model, tmp_path_factory):
    return model.save(tmp_path_factory.mktemp("inbedder") / "ckpt")


def _unit(x: torch.Tensor) -> np.ndarray:
    return torch.nn.functional.normalize(x.float(), dim=-1).numpy()


def _prompt_ids(model, text: str, instruction: str) -> torch.Tensor:
    prompt = model.prompts.render(text, Role.DOCUMENT, instruction)
    return torch.tensor([model.backbone.tokenizer(prompt, add_special_tokens=False)["input_ids"]])


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="pooling must be one of 1st-gen, avg-gen"):
        InBedderConfig(pooling="mean")
    with pytest.raises(ValueError, match="gen_tokens must be >= 1"):
        InBedderConfig(gen_tokens=0)
    # Said as max_length's bound, the option a user sets (inbedder[max_length=24] named
    # answer_max_tokens, which no option sets).
    with pytest.raises(ValueError, match=r"max_length must be at least 80, twice answer_max_tokens "
                                         r"\(40: an answer takes at most half of it\), got 64"):
        InBedderConfig(max_length=64, answer_max_tokens=40)
    with pytest.raises(ValueError, match="answer_max_tokens must be at least 1, got 0"):
        InBedderConfig(answer_max_tokens=0)
    # Prompts follow the template: a hand-written one without the instruction cannot sneak in.
    assert "{instruction}" in InBedderConfig(prompts=PromptConfig(query="{text}", document="{text}")).prompts.query


def test_prompt_puts_the_instruction_in_the_template(model):
    prompt = model.prompts.render("TEXT", Role.QUERY, "QUESTION")
    assert prompt == 'QUESTION\nThis sentence : "TEXT" means in one word:"'
    assert model.prompts.render("TEXT", Role.DOCUMENT, "QUESTION") == prompt
    alpaca = InBedderConfig(template="alpaca").prompts.render("TEXT", Role.QUERY, "QUESTION")
    assert alpaca == "### Input:\nTEXT\n\n### Instruction:\nQUESTION\n\n### Response:"


def test_only_lora_parameters_are_trainable(model):
    names = model.named_trainable_parameters()
    assert names and all("lora_" in n for n in names), names
    assert all(not p.requires_grad for n, p in model.backbone.model.named_parameters() if "lora_" not in n)


def test_labels_cover_answer_and_eos_only(model):
    tok = model.backbone.tokenizer
    eos = tok.eos_token_id
    long_answer = " ".join(["word"] * 40)
    lm = model.build_lm_batch(["A cat.", "A much longer input text about a dog."], ["What animal?", "Which one?"],
                              ["cat", long_answer])
    labels = lm.extras["labels"]
    assert labels.shape == lm.input_ids.shape
    short_prompt = _prompt_ids(model, "A cat.", "What animal?")[0].tolist()
    cat = tok(model.config.answer_lead + "cat", add_special_tokens=False)["input_ids"]
    row = labels[0][lm.attention_mask[0].bool()].tolist()  # row 0 is the shorter: left padded
    assert row == [-100] * len(short_prompt) + cat + [eos]
    assert lm.input_ids[0][lm.attention_mask[0].bool()].tolist() == short_prompt + cat + [eos]
    assert (labels[0][~lm.attention_mask[0].bool()] == -100).all()  # padding costs nothing
    # The long answer is cut to answer_max_tokens; its EOS is kept.
    scored = labels[1][labels[1] != -100].tolist()
    assert len(scored) == model.config.answer_max_tokens + 1 and scored[-1] == eos
    assert lm.input_ids.shape[1] <= model.max_length
    with pytest.raises(ValueError, match="same length, got 2, 1 and 2"):
        model.build_lm_batch(["a", "b"], ["q"], ["x", "y"])
    with pytest.raises(ValueError, match="at least one"):
        model.build_lm_batch([], [], [])


def test_one_optimiser_step_lowers_the_loss(smollm2_cut):
    torch.manual_seed(0)
    model = InBedderEmbedder(InBedderConfig(lora=LORA, max_length=64, backbone=smollm2_cut), device="cpu")
    params = model.trainable_parameters()
    optimizer = torch.optim.AdamW(params, lr=1e-3)
    model.train()
    try:
        before, metrics = model.training_loss(BATCH)
        assert metrics == {"loss": pytest.approx(before.item())}
        optimizer.zero_grad()
        before.backward()
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in params)
        optimizer.step()
        with torch.no_grad():
            after, _ = model.training_loss(BATCH)
    finally:
        model.eval()
    assert after.item() < before.item()


def test_first_gen_is_the_state_after_the_prompt(model):
    body = model.backbone.base_model()
    with torch.inference_mode():
        for instruction, rendered in (("What is the topic?", "What is the topic?"),
                                      (None, model.config.default_instruction)):
            out = model.encode(TEXTS[:2], instruction=instruction)
            expected = [_unit(body(input_ids=_prompt_ids(model, t, rendered)).last_hidden_state[0, -1])
                        for t in TEXTS[:2]]
            assert np.abs(out - np.stack(expected)).max() < 1e-5


def test_instruction_changes_the_embedding(model):
    a = model.encode(TEXTS[:1], instruction="What is the topic?")
    b = model.encode(TEXTS[:1], instruction="What is the sentiment?")
    assert np.abs(a - b).max() > 1e-3


def test_avg_gen_equals_greedy_recomputation_and_differs_from_first_gen(model):
    k = 2
    first = model.encode(TEXTS)
    model.pooling, model.gen_tokens = "avg-gen", k
    try:
        avg = model.encode(TEXTS)
    finally:
        model.pooling, model.gen_tokens = "1st-gen", 3
    assert np.abs(avg - first).max() > 1e-3
    # Reference: no KV cache, the whole sequence recomputed for every generated token.
    body = model.backbone.base_model()
    lm_head = model.backbone.model.get_output_embeddings()
    eos = model.backbone.tokenizer.eos_token_id
    with torch.inference_mode():
        for text, row in zip(TEXTS, avg, strict=True):
            ids = _prompt_ids(model, text, model.config.default_instruction)
            states = [body(input_ids=ids).last_hidden_state[0, -1]]
            for _ in range(k):
                token = lm_head(states[-1]).argmax()
                if token.item() == eos:
                    break
                ids = torch.cat([ids, token.view(1, 1)], dim=1)
                states.append(body(input_ids=ids).last_hidden_state[0, -1])
            assert np.abs(row - _unit(torch.stack(states).mean(0))).max() < 1e-4


def test_option_setters_validate(model):
    with pytest.raises(ValueError, match="pooling must be one of"):
        model.pooling = "mean"
    with pytest.raises(ValueError, match="gen_tokens must be >= 1"):
        model.gen_tokens = 0
    assert model.pooling == "1st-gen" and model.gen_tokens == 3


def test_generate_answers_is_greedy_and_keeps_order(model):
    one = model.generate_answers(TEXTS, "What is this about?", max_new_tokens=3, batch_size=1)
    many = model.generate_answers(TEXTS, "What is this about?", max_new_tokens=3, batch_size=16)
    assert one == many
    assert len(one) == 3 and all(isinstance(a, str) and a == a.strip() for a in one)
    assert model.generate_answers([], None) == []
    with pytest.raises(InvalidInputError, match="max_new_tokens must be a positive integer"):
        model.generate_answers(TEXTS, None, max_new_tokens=0)


def test_save_load_round_trip(model, checkpoint):
    again = load_checkpoint(checkpoint, device="cpu")
    assert isinstance(again, InBedderEmbedder)
    assert again.config.to_dict() == model.config.to_dict()
    a = model.encode(TEXTS, instruction="What is the topic?")
    b = again.encode(TEXTS, instruction="What is the topic?")
    assert np.abs(a - b).max() < 5e-3  # the adapter is stored in fp16


def test_pooling_option_through_load_embedder(checkpoint):
    plain = load_embedder(str(checkpoint), device="cpu")
    steered = load_embedder(f"{checkpoint}[pooling=avg-gen,gen_tokens=2]", device="cpu")
    assert isinstance(steered, InBedderEmbedder)
    assert (steered.pooling, steered.gen_tokens) == ("avg-gen", 2)
    assert steered.identity != plain.identity  # a cache never mixes the two poolings
    assert np.abs(steered.encode(TEXTS[:1]) - plain.encode(TEXTS[:1])).max() > 1e-3
    with pytest.raises(InvalidInputError, match="pooling must be one of"):
        load_embedder(f"{checkpoint}[pooling=mean]", device="cpu")


def test_template_default_prompteol_and_legacy_checkpoints_read_alpaca():
    from embedders.methods.common import INSTRUCTION_TEMPLATES
    from embedders.methods.inbedder import InBedderConfig
    from embedders.methods.instemb import InstEmbConfig

    for cls in (InBedderConfig, InstEmbConfig):
        fresh = cls()
        assert fresh.template == "prompteol" and fresh.prompts == INSTRUCTION_TEMPLATES["prompteol"]
        assert fresh.answer_lead == ""
        saved = fresh.to_dict()
        assert cls.from_dict(saved).prompts == fresh.prompts  # round trip keeps the template
        legacy = {k: v for k, v in saved.items() if k != "template"}
        old = cls.from_dict(legacy)  # a checkpoint from before templates existed
        assert old.template == "alpaca" and "### Response:" in old.prompts.query and old.answer_lead == " "
        with pytest.raises(ValueError, match="template must be one of"):
            cls(template="chatml")


def test_prompteol_answer_follows_the_quote(tiny_inbedder_dir):
    from embedders.registry import load_checkpoint

    model = load_checkpoint(tiny_inbedder_dir, device="cpu")
    batch = model.build_lm_batch(["The card has not arrived."], ["What does the customer want?"], ["card arrival"])
    tok = model.backbone.tokenizer
    labels = [t for t in batch.extras["labels"][0].tolist() if t != -100]
    assert tok.decode(labels[:-1]) == "card arrival" and labels[-1] == tok.eos_token_id
    ids = batch.input_ids[0].tolist()
    text = tok.decode(ids[ids.index(labels[0]) - 3: ids.index(labels[0]) + len(labels) - 1])
    assert text.endswith('word:"card arrival'), text


def test_instruction_last_template_keeps_the_instruction_next_to_the_answer(smollm2_cut, tmp_path):
    """``template=instruction-last``: the instruction follows the text and survives its
    truncation, a training answer follows the template's closing quote, and a checkpoint
    keeps the template."""
    from embedders.registry import load_checkpoint

    instruction = "Identify the broad domain of this request"
    torch.manual_seed(0)
    model = InBedderEmbedder(InBedderConfig(template="instruction-last", lora=LORA, max_length=64,
                                            backbone=smollm2_cut), device="cpu")
    assert model.config.template == "instruction-last" and model.config.answer_lead == ""
    tok = model.backbone.tokenizer
    long_text = "my card has still not arrived " * 40  # far over max_length (64)
    batch = model.build_lm_batch([long_text], [instruction], ["banking"])
    ids = [t for t, keep in zip(batch.input_ids[0].tolist(), batch.attention_mask[0].tolist(), strict=True) if keep]
    assert len(ids) <= model.config.max_length + 2  # the prompt is cut to max_length, then the answer
    decoded = tok.decode(ids)
    assert decoded.startswith('This sentence : "my card') and '"\n' + instruction + '\nIn one word:"banking' in decoded
    # The embedding reads the instruction: two instructions give two embeddings of one text.
    a = model.encode(["my card has not arrived"], instruction=instruction)
    b = model.encode(["my card has not arrived"], instruction="What does the customer want?")
    assert np.abs(a - b).max() > 1e-3
    loaded = load_checkpoint(model.save(tmp_path / "ckpt"), device="cpu")
    assert loaded.config.template == "instruction-last"
    assert np.allclose(loaded.encode(["my card has not arrived"], instruction=instruction), a, atol=1e-5)


def test_instruction_weight_blends_in_the_default_instruction(checkpoint):
    instruction = "What does the customer want?"
    full = load_embedder(checkpoint)  # saved without the option: the paper's reading, w = 1
    assert full.config.instruction_weight == 1.0
    under = full.encode(TEXTS, role="query", instruction=instruction)
    neutral = full.encode(TEXTS, role="query")  # the default instruction
    assert not np.allclose(under, neutral, atol=1e-4)
    for w in (0.0, 0.25):
        blended = load_embedder(f"{checkpoint}[instruction_weight={w}]")
        mixed = (1 - w) * neutral + w * under
        expected = mixed / np.linalg.norm(mixed, axis=1, keepdims=True)
        assert np.allclose(blended.encode(TEXTS, role="query", instruction=instruction), expected, atol=1e-5)
        # The default instruction itself, or none, is one pass and unchanged.
        assert np.allclose(blended.encode(TEXTS, role="query"), neutral, atol=1e-6)
    with pytest.raises(InvalidInputError, match="instruction_weight must be from 0 to 1"):
        load_embedder(f"{checkpoint}[instruction_weight=-0.5]")
    with pytest.raises(ValueError, match="instruction_weight must be from 0 to 1"):
        InBedderConfig(instruction_weight=2.0)


def test_text_quotes_drop_reads_texts_without_their_double_quotes(checkpoint):
    """Under ``text_quotes=drop`` a text's double quotes are not read (they closed PromptEOL's
    own quote), in the blended embedding under an instruction, bare, and in training batches;
    the default ``keep`` reads them."""
    quoted = ['tell mom "i love you', 'text bob "running late']
    bare = [t.replace('"', "") for t in quoted]
    instruction = "What does the customer want?"
    kept = load_embedder(f"{checkpoint}[instruction_weight=0.25]")
    dropping = load_embedder(f"{checkpoint}[instruction_weight=0.25,text_quotes=drop]")
    for reading in ({"instruction": instruction}, {}):
        read = dropping.encode(quoted, role="query", **reading)
        assert np.allclose(read, kept.encode(bare, role="query", **reading), atol=1e-5)
        assert not np.allclose(read, kept.encode(quoted, role="query", **reading), atol=1e-4)
    trained = dropping.build_lm_batch(quoted, [instruction] * 2, ["x", "y"]).input_ids
    assert torch.equal(trained, kept.build_lm_batch(bare, [instruction] * 2, ["x", "y"]).input_ids)
    assert not torch.equal(trained, kept.build_lm_batch(quoted, [instruction] * 2, ["x", "y"]).input_ids)
    with pytest.raises(ValueError, match="text_quotes must be one of keep, drop"):
        InBedderConfig(text_quotes="strip")


def test_the_shipped_checkpoint_serves_the_weight_chosen_on_val():
    shipped = Path(__file__).resolve().parents[2] / "checkpoints" / "inbedder"
    config = json.loads((shipped / "facet_config.json").read_text())["config"]
    selection = json.loads((shipped / "train_log.json").read_text())["inference_selection"]
    assert config["instruction_weight"] == selection["instruction_weight"] == 0.25


def test_the_shipped_checkpoint_answers_texts_that_hold_a_double_quote():
    """PromptEOL quotes the text: a double quote inside it closed the template's own and the
    model answered EOS at once, so 17 of the 32 CLINC test texts holding one explained nothing
    (an empty answer in `facet cluster --json`, counted nowhere). They are read without it."""
    shipped = load_embedder("inbedder", device="cpu")
    quoted = ['address me as "bailey', 'tell mom "i love you', 'text bob "running late',
              'send a text to jack saying "hi"']
    answers = shipped.generate_answers(quoted, "What does the user want?")
    assert all(a.strip() for a in answers), answers
    # The same answer as the text without its quotes; a text without any is read as before.
    bare = shipped.generate_answers([t.replace('"', "") for t in quoted] + ["text bob running late"],
                                    "What does the user want?")
    assert answers == bare[:4] and bare[4] == "running late", bare
