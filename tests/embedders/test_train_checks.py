"""The checks around training and serving a trained method: the position limit counts the
tokens a method generates after its ``max_length`` prompt (GIRCSE's soft tokens, InBedder's
avg-gen answer tokens) and is read before the weights load; a soup goes on past an
ingredient's unreadable ``train_log.json`` with a warning naming it.

Real models: SmolLM2 cut to two layers (tests/conftest.py), its config saying 64 positions
(RoPE, so the weights are the same; only the limit the checks read changes)."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
import torch

from embedders.backbone import LoraSettings
from embedders.errors import InvalidInputError
from embedders.registry import apply_option

LORA = LoraSettings(r=2, alpha=4, target_modules=("q_proj",))
LIMIT = 64


def _with_positions(source: str, target: Path, positions: int, *, weights: bool = True) -> str:
    """``source``'s backbone directory with ``max_position_embeddings`` set to ``positions``
    (its other files linked, or, ``weights=False``, the config alone)."""
    target.mkdir()
    for item in Path(source).iterdir():
        if item.name != "config.json" and weights:
            (target / item.name).symlink_to(item)
    config = json.loads((Path(source) / "config.json").read_text())
    config["max_position_embeddings"] = positions
    (target / "config.json").write_text(json.dumps(config))
    return str(target)


@pytest.fixture(scope="module")
def short(smollm2_cut, tmp_path_factory) -> str:
    return _with_positions(smollm2_cut, tmp_path_factory.mktemp("short") / "bb", LIMIT)


def test_gircse_counts_its_soft_tokens_against_the_position_limit(short) -> None:
    """max_length 62 plus 5 soft tokens is 67 positions: it passed and failed inside the model."""
    from embedders.methods.gircse import GircseConfig, GircseEmbedder

    with pytest.raises(ValueError, match=r"max_length 62 plus the 5 soft tokens GIRCSE generates after the "
                                         r"text \(soft_tokens=5\) is 67 positions, more than backbone .* can "
                                         r"read: its position limit \(max_position_embeddings\) is 64 tokens; "
                                         r"give max_length at most 59"):
        GircseEmbedder(GircseConfig(lora=LORA, max_length=62, backbone=short), device="cpu")
    model = GircseEmbedder(GircseConfig(lora=LORA, max_length=59, backbone=short), device="cpu")
    with pytest.raises(InvalidInputError, match=r"option max_length='60': max_length 60 plus the 5 soft"):
        apply_option(model, "max_length", "60")
    # In either order: a K that no longer fits is refused, and leaves the model as it was.
    with pytest.raises(InvalidInputError, match=r"option soft_tokens='6': max_length 59 plus the 6 soft tokens"):
        apply_option(model, "soft_tokens", "6")
    assert model.soft_tokens == 5 and model.max_length == 59
    apply_option(model, "soft_tokens", "2")
    apply_option(model, "max_length", "62")
    assert model.encode(["a dog runs"]).shape[0] == 1


def test_inbedder_counts_its_avg_gen_answer_tokens(short) -> None:
    from embedders.methods.inbedder import InBedderConfig, InBedderEmbedder

    with pytest.raises(ValueError, match=r"max_length 62 plus the 3 answer tokens InBedder generates after the "
                                         r"text \(pooling=avg-gen, gen_tokens=3\) is 65 positions"):
        InBedderEmbedder(InBedderConfig(lora=LORA, max_length=62, answer_max_tokens=4, pooling="avg-gen",
                                        backbone=short), device="cpu")
    # 1st-gen generates nothing: the whole limit is the prompt's.
    model = InBedderEmbedder(InBedderConfig(lora=LORA, max_length=LIMIT, answer_max_tokens=4, backbone=short),
                             device="cpu")
    with pytest.raises(InvalidInputError, match=r"option pooling='avg-gen': max_length 64 plus the 3 answer"):
        apply_option(model, "pooling", "avg-gen")
    assert model.pooling == "1st-gen"
    apply_option(model, "max_length", "61")
    apply_option(model, "pooling", "avg-gen")
    with pytest.raises(InvalidInputError, match=r"option gen_tokens='4': max_length 61 plus the 4 answer"):
        apply_option(model, "gen_tokens", "4")
    assert model.gen_tokens == 3


def test_the_limit_is_read_before_the_weights_load(smollm2_cut, tmp_path) -> None:
    """A backbone folder holding only its config: the check said nothing until the load failed
    (seconds later, for a real backbone) on the missing weights."""
    from embedders.methods.gircse import GircseConfig, GircseEmbedder

    bare = _with_positions(smollm2_cut, tmp_path / "bare", LIMIT, weights=False)
    with pytest.raises(ValueError, match=r"max_length 62 plus the 5 soft tokens .* position limit "
                                         r"\(max_position_embeddings\) is 64 tokens"):
        GircseEmbedder(GircseConfig(lora=LORA, max_length=62, backbone=bare), device="cpu")


def test_training_counts_the_training_soft_tokens(short, tmp_path) -> None:
    """encode's K fits, training's K does not: the first step ran 66 positions on a 64 limit."""
    from embedders.methods.gircse import GircseConfig, GircseEmbedder
    from embedders.training.data import PairBatch
    from embedders.training.trainer import TrainConfig, train

    class Pairs:
        def next_batch(self) -> PairBatch:
            return PairBatch(["a dog runs", "a cat sleeps"], ["a dog is running", "a cat is asleep"], [],
                             None, True, "toy")

    model = GircseEmbedder(GircseConfig(lora=LORA, max_length=59, train_soft_tokens=7, backbone=short),
                           device="cpu")
    with pytest.raises(ValueError, match=r"max_length 59 plus the 7 soft tokens GIRCSE generates after the "
                                         r"text \(train_soft_tokens=7\) is 66 positions"):
        train(model, Pairs(), TrainConfig(steps=1, warmup=0), tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


# -- soups ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pair(smollm2_cut, tmp_path_factory) -> tuple[Path, Path]:
    from embedders.methods.causal_eos import CausalEOSConfig, CausalEOSEmbedder

    root = tmp_path_factory.mktemp("soup")
    paths = []
    for seed, name in ((1, "a"), (2, "b")):
        torch.manual_seed(seed)
        model = CausalEOSEmbedder(CausalEOSConfig(lora=LORA, max_length=32, backbone=smollm2_cut), device="cpu")
        with torch.no_grad():
            for param_name, param in model.backbone.model.named_parameters():
                if "lora_" in param_name:
                    param.copy_(0.05 * torch.randn(param.shape))
        paths.append(model.save(root / name))
    return paths[0], paths[1]


@pytest.mark.parametrize(("content", "problem"), [
    (b"\xff\xfe{not json", r"cannot be read as JSON \(UnicodeDecodeError"),  # a traceback
    (b"{\"weights_steps\": 12", r"cannot be read as JSON \(JSONDecodeError"),  # silent
    (b"[1, 2]", r"is not a JSON object \(it holds a list\)"),  # silent
])
def test_a_soup_warns_of_an_unreadable_ingredient_log_and_is_made(pair, tmp_path, caplog, content, problem) -> None:
    from embedders.training.soup import make_soup

    a, b = (Path(shutil.copytree(p, tmp_path / p.name)) for p in pair)
    (a / "train_log.json").write_bytes(content)
    (b / "train_log.json").write_text(json.dumps({"weights_steps": 30}))
    with caplog.at_level(logging.WARNING, logger="embedders.training.soup"):
        make_soup([a, b], tmp_path / "soup")
    [record] = [r for r in caplog.records if "train_log.json" in r.getMessage()]
    assert record.levelno == logging.WARNING
    message = record.getMessage()
    assert message.startswith(f"{a / 'train_log.json'} ") and "the soup is made without it" in message
    import re

    assert re.search(problem, message), message
    log = json.loads((tmp_path / "soup" / "train_log.json").read_text())
    assert log["weights_steps"] == 30 and log["ingredient_logs"] == [None, {"weights_steps": 30}]


def test_a_soup_of_an_ingredient_log_with_fields_of_another_shape_counts_no_steps(pair, tmp_path, caplog) -> None:
    """``"ingredient_logs": 5`` was a TypeError traceback."""
    from embedders.training.soup import make_soup

    a, b = (Path(shutil.copytree(p, tmp_path / p.name)) for p in pair)
    (a / "train_log.json").write_text(json.dumps({"ingredient_logs": 5, "weights_steps": "12"}))
    (b / "train_log.json").write_text(json.dumps({"ingredient_logs": [{"steps_done": 7}, "x"]}))
    make_soup([a, b], tmp_path / "soup")
    assert json.loads((tmp_path / "soup" / "train_log.json").read_text())["weights_steps"] == 7


@pytest.mark.parametrize("method", ["inbedder", "instemb"])
def test_training_prompt_length_says_which_questions_leave_the_text_no_room(smollm2_cut, method) -> None:
    """What ``facet train`` leaves out is exactly what the training step cannot read."""
    from embedders.methods.inbedder import InBedderConfig, InBedderEmbedder
    from embedders.methods.instemb import InstEmbConfig, InstEmbEmbedder
    from embedders.training.instruct_data import TripleBatch

    classes = {"inbedder": (InBedderConfig, InBedderEmbedder), "instemb": (InstEmbConfig, InstEmbEmbedder)}
    config_class, model_class = classes[method]
    model = model_class(config_class(lora=LORA, max_length=40, backbone=smollm2_cut), device="cpu")
    questions = [" ".join(["why"] * n) + "?" for n in (1, 5, 10, 15, 20, 25, 30)]
    lengths = [model.training_prompt_length(q) for q in questions]
    assert lengths == sorted(lengths) and lengths[0] < model.max_length <= lengths[-1]
    for question, length in zip(questions, lengths, strict=True):
        batch = TripleBatch(["a short input text", "another one"], [question] * 2, ["yes", "no"], "t")
        if length < model.max_length:
            model.training_loss(batch)
        else:
            with pytest.raises(InvalidInputError, match="the instruction is too long"):
                model.training_loss(batch)


def test_a_unit_of_triples_is_left_out_whole(shared_data) -> None:
    from embedders.training.instruct_data import UNIT_SIZES, keep_units, load_clinc_views

    views = load_clinc_views(shared_data)
    size = UNIT_SIZES["clinc-views"]
    refused = views[1].instruction
    kept = keep_units(views, "clinc-views", lambda t: t.instruction != refused)
    assert len(kept) % size == 0 and all(t.instruction != refused for t in kept)
    whole = {tuple(views[i:i + size]) for i in range(0, len(views), size)}
    assert {tuple(kept[i:i + size]) for i in range(0, len(kept), size)} <= whole
    assert keep_units(views, "clinc-views", lambda t: False) == []
