"""The plain-torch BERT (embedders/bert.py) that loads MiniLM without transformers' imports: the
same function as ``transformers.BertModel``, the same token ids and offsets as its
``AutoTokenizer``, and a clear error on a damaged file."""

import shutil
import subprocess
import sys

import pytest
import torch

from embedders.backbone import DEFAULT_ENCODER, load_encoder, resolve_model_path
from embedders.bert import BertEncoder, BertTokenizer, load_bert, load_bert_tokenizer
from embedders.errors import CheckpointError

TEXTS = ["a cat sat on the mat", "Card fees rise in May for foreign payments; the bank says why.",
         "x", "Ünïcödé and numbers 12,345.6 [brackets]"]


def test_the_packaged_minilm_computes_what_transformers_bertmodel_computes():
    from transformers import AutoModel, AutoTokenizer

    ours = load_encoder(DEFAULT_ENCODER)
    assert isinstance(ours.model, BertEncoder) and ours.hidden_size == 384
    reference = AutoModel.from_pretrained(resolve_model_path(DEFAULT_ENCODER)).eval()
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(DEFAULT_ENCODER))
    batch = tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = reference(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        got = ours.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    real = batch["attention_mask"].bool()  # padding positions are never pooled
    assert torch.allclose(got.last_hidden_state[real], expected.last_hidden_state[real], atol=1e-5)
    # Each text alone (no padding) gives its padded batch's states: the mask is applied.
    alone = tokenizer(TEXTS[2:3], return_tensors="pt")
    with torch.no_grad():
        single = ours.model(input_ids=alone["input_ids"]).last_hidden_state[0]
    n = alone["input_ids"].shape[1]
    assert torch.allclose(single, got.last_hidden_state[2, :n], atol=1e-5)


# Texts whose tokenization has edges: accents an uncased tokenizer strips, CJK split per
# character, scripts and emoji it reads as [UNK], a combining mark, full-width and ligature forms,
# the special tokens written out, zero-width and control characters, a long text.
TRICKY = ["", " ", "café naïve Zürich", "東京は日本の首都です", "ภาษาไทย", "emoji 😀🎉 ok",
          "\t tabs\nnewline\r\n", "A\u0301 combining", "ﬁ ligature ＦＵＬＬ width",
          "[CLS] [SEP] [MASK] [PAD] [UNK] literal", "don't stop-believing... e.g. U.S.A.",
          "Ωμέγα Русский العربية עברית", "\u200b zero width \u00a0nbsp", "\x00nul\x07bell",
          "supercalifragilisticexpialidocious " * 300]


def test_the_minilm_tokenizer_gives_autotokenizers_ids_and_offsets():
    """Loaded through the ``tokenizers`` library alone (transformers' import cost a new process
    1.2-1.7 s), the same ids and character offsets as transformers' ``AutoTokenizer``, for one
    text or a batch, with or without the special tokens (3,018 SciFact texts and these compared
    when it was written: no difference)."""
    from transformers import AutoTokenizer

    path = resolve_model_path(DEFAULT_ENCODER)
    reference = AutoTokenizer.from_pretrained(path)
    ours = load_encoder(DEFAULT_ENCODER).tokenizer
    assert isinstance(ours, BertTokenizer)
    texts = TEXTS + TRICKY
    for special in (False, True):
        want = reference(texts, add_special_tokens=special, return_offsets_mapping=True)
        got = ours(texts, add_special_tokens=special, return_offsets_mapping=True)
        assert got["input_ids"] == [list(row) for row in want["input_ids"]]
        assert got["offset_mapping"] == [[tuple(o) for o in row] for row in want["offset_mapping"]]
        assert [e.ids for e in got.encodings] == [e.ids for e in want.encodings]
        for text in texts:
            assert ours(text, add_special_tokens=special)["input_ids"] == list(
                reference(text, add_special_tokens=special)["input_ids"])
    for attr in ("unk_token_id", "cls_token_id", "sep_token_id", "pad_token_id", "pad_token",
                 "eos_token", "eos_token_id"):
        assert getattr(ours, attr) == getattr(reference, attr), attr
    assert sorted(ours.all_special_ids) == sorted(reference.all_special_ids)
    assert len(ours("word " * 600, add_special_tokens=False)["input_ids"]) == 600  # no 128 cut
    with pytest.raises(TypeError, match="does not take padding, return_tensors"):
        ours(texts, padding=True, return_tensors="pt")  # refused, not ignored


def test_other_encoders_go_to_transformers_and_a_damaged_file_is_a_checkpoint_error(tmp_path):
    source = resolve_model_path(DEFAULT_ENCODER)
    relative = tmp_path / "relative"
    shutil.copytree(source, relative)
    config = (relative / "config.json").read_text()
    (relative / "config.json").write_text(config.replace('"absolute"', '"relative_key"'))
    assert load_bert(relative, torch.float32, torch.device("cpu")) is None  # AutoModel's case
    config = (relative / "tokenizer_config.json").read_text()
    (relative / "tokenizer_config.json").write_text(config.replace('"BertTokenizer"', '"RobertaTokenizer"'))
    assert load_bert_tokenizer(relative) is None  # AutoTokenizer's

    damaged = tmp_path / "damaged"
    shutil.copytree(source, damaged)
    from safetensors.torch import load_file, save_file

    weights = load_file(damaged / "model.safetensors")
    del weights["encoder.layer.5.output.LayerNorm.bias"]
    save_file(weights, damaged / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"encoder\.layer\.5\.output\.LayerNorm\.bias is not in "
                       r"model\.safetensors") as info:
        load_encoder(str(damaged))
    assert len(str(info.value).splitlines()) == 1


def test_a_new_process_loads_minilm_without_transformers():
    """What makes `facet search` ~3.5 s (the modelling code) and 1.2-1.7 s (the tokenizer's
    import) quicker to start with the default embedder."""
    script = ("import sys\nfrom embedders import load_embedder\n"
              "vector = load_embedder('minilm').encode(['a cat'])\n"
              "print(sorted(m for m in sys.modules if m.split('.')[0] == 'transformers'), vector.shape)")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().endswith("[] (1, 384)"), run.stdout


def test_loading_minilm_leaves_torchs_generator_as_it_was():
    """Building the encoder drew its random initial weights (replaced at once) from torch's
    global generator: `facet train causal2vec --seed 0` seeds, loads MiniLM as its encoder and
    draws its fresh LoRA, so the fresh weights differed where MiniLM was loaded already (the
    seed test of `facet train` failed when run alone)."""
    torch.manual_seed(0)
    before = torch.random.get_rng_state()
    assert load_bert(resolve_model_path(DEFAULT_ENCODER), torch.float32, torch.device("cpu")) is not None
    assert torch.equal(torch.random.get_rng_state(), before)
