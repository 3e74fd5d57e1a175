"""A BERT encoder in plain torch, for frozen inference (MiniLM, Causal2Vec's encoder).

Why: importing transformers' BERT modelling code costs ~3.5 s of CPU in every new process
(it pulls in the generation, masking and tensor-parallel modules), more than the model's own
load, and every ``facet index``/``facet search``/worker start with the default embedder paid
it. This module computes the same function as ``transformers.BertModel`` (eval mode: no
dropout) from the same ``config.json`` and ``model.safetensors``; ``load_bert`` says None for
anything it does not cover, and ``embedders.backbone`` then loads through ``AutoModel``.
Tested against ``BertModel`` in tests/embedders/test_bert.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class BertConfig:
    """The ``config.json`` fields the forward pass uses."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float
    pad_token_id: int = 0


@dataclass
class EncoderOutput:
    """What callers read of ``BertModel``'s output."""

    last_hidden_state: torch.Tensor


# transformers' parameter names for this module's, per layer and for the embeddings.
_LAYER_NAMES = {"query": "attention.self.query", "key": "attention.self.key",
                "value": "attention.self.value", "attention_out": "attention.output.dense",
                "attention_norm": "attention.output.LayerNorm",
                "intermediate": "intermediate.dense", "out": "output.dense",
                "out_norm": "output.LayerNorm"}
_EMBEDDING_NAMES = {"word_embeddings": "word_embeddings",
                    "position_embeddings": "position_embeddings",
                    "token_type_embeddings": "token_type_embeddings",
                    "embedding_norm": "LayerNorm"}


class _Layer(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        h = c.hidden_size
        self.heads = c.num_attention_heads
        self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
        self.attention_out = nn.Linear(h, h)
        self.attention_norm = nn.LayerNorm(h, eps=c.layer_norm_eps)
        self.intermediate = nn.Linear(h, c.intermediate_size)
        self.out = nn.Linear(c.intermediate_size, h)
        self.out_norm = nn.LayerNorm(h, eps=c.layer_norm_eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, n, h = x.shape

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, n, self.heads, h // self.heads).transpose(1, 2)

        context = F.scaled_dot_product_attention(split(self.query(x)), split(self.key(x)),
                                                 split(self.value(x)), attn_mask=mask)
        x = self.attention_norm(x + self.attention_out(context.transpose(1, 2).reshape(b, n, h)))
        return self.out_norm(x + self.out(F.gelu(self.intermediate(x))))


class BertEncoder(nn.Module):
    """``BertModel``'s last hidden states (no pooler: Facet pools itself)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        h = config.hidden_size
        self.word_embeddings = nn.Embedding(config.vocab_size, h, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, h)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, h)
        self.embedding_norm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.layers = nn.ModuleList(_Layer(config) for _ in range(config.num_hidden_layers))

    def get_input_embeddings(self) -> nn.Embedding:
        return self.word_embeddings

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> EncoderOutput:
        n = input_ids.shape[1]
        if n > self.config.max_position_embeddings:
            raise ValueError(f"{n} tokens is more than this encoder's "
                             f"{self.config.max_position_embeddings} positions")
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        positions = torch.arange(n, device=input_ids.device)
        x = self.embedding_norm(self.word_embeddings(input_ids) + self.position_embeddings(positions)
                                + self.token_type_embeddings(token_type_ids))
        bias = None
        if attention_mask is not None:  # padding keys get the dtype's lowest value, as BERT's
            bias = torch.zeros(attention_mask.shape, dtype=x.dtype, device=x.device)
            bias = bias.masked_fill(attention_mask == 0, torch.finfo(x.dtype).min)[:, None, None, :]
        for layer in self.layers:
            x = layer(x, bias)
        return EncoderOutput(last_hidden_state=x)

    def load_transformers_weights(self, weights: dict[str, torch.Tensor]) -> None:
        """Copy a ``BertModel``'s state dict (optionally under ``bert.``) into this module;
        a missing or misshapen tensor is a ``ValueError`` naming it."""
        weights = {k.removeprefix("bert."): v for k, v in weights.items()}

        def theirs(name: str) -> torch.Tensor:
            if name not in weights:
                raise ValueError(f"{name} is not in model.safetensors")
            return weights[name]

        mapped = {}
        for ours, name in _EMBEDDING_NAMES.items():
            for part in ("weight", "bias") if ours == "embedding_norm" else ("weight",):
                mapped[f"{ours}.{part}"] = theirs(f"embeddings.{name}.{part}")
        for i in range(self.config.num_hidden_layers):
            for ours, name in _LAYER_NAMES.items():
                for part in ("weight", "bias"):
                    mapped[f"layers.{i}.{ours}.{part}"] = theirs(f"encoder.layer.{i}.{name}.{part}")
        own = self.state_dict()
        for name, tensor in mapped.items():
            if tensor.shape != own[name].shape:
                raise ValueError(f"{name}: {tuple(tensor.shape)} in the file, {tuple(own[name].shape)} "
                                 "in the config")
        self.load_state_dict(mapped, strict=True)


def load_bert(path: str | Path, dtype: torch.dtype, device: torch.device) -> BertEncoder | None:
    """The encoder in folder ``path`` as a ``BertEncoder``, or None when it is not a plain
    absolute-position, GELU BERT with a ``model.safetensors`` (``AutoModel`` loads those)."""
    folder = Path(path)
    config_file, weights_file = folder / "config.json", folder / "model.safetensors"
    if not (config_file.is_file() and weights_file.is_file()):
        return None
    raw: dict[str, Any] = json.loads(config_file.read_text(encoding="utf-8"))
    if (raw.get("model_type") != "bert" or raw.get("hidden_act", "gelu") != "gelu"
            or raw.get("position_embedding_type", "absolute") != "absolute"
            or raw.get("is_decoder") or raw.get("add_cross_attention")):
        return None
    fields = {name: raw[name] for name in BertConfig.__dataclass_fields__ if name in raw}
    try:
        config = BertConfig(**fields)
    except TypeError:  # a field missing: not a config this module reads
        return None
    if config.hidden_size % config.num_attention_heads:
        return None
    from safetensors.torch import load_file

    # Built under a fork of torch's generator: the layers' random initial weights, replaced at
    # once, drew from the caller's. A training run seeds, then loads MiniLM (Causal2Vec's
    # encoder) and draws its fresh LoRA: where MiniLM was loaded already, the draws differed,
    # so `--seed` reproduced the fresh weights only in a new process.
    with torch.random.fork_rng(devices=[]):
        model = BertEncoder(config)
    model.load_transformers_weights(load_file(str(weights_file)))
    return model.to(device=device, dtype=dtype).eval()


# The special tokens a BERT tokenizer names (``special_tokens_map.json``), by attribute.
_SPECIAL = ("unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


class _Encoded(dict[str, Any]):
    """What a call of ``BertTokenizer`` gives: ``input_ids`` (and ``offset_mapping`` where asked
    for) as transformers' ``BatchEncoding`` holds them, and its ``encodings``."""

    def __init__(self, data: dict[str, Any], encodings: list[Any]) -> None:
        super().__init__(data)
        self.encodings = encodings


class BertTokenizer:
    """A BERT folder's ``tokenizer.json`` read by the ``tokenizers`` library, with what Facet
    asks of a tokenizer (``PromptTokenizer``, chunking, token counts): transformers'
    ``AutoTokenizer`` gives the same ids and offsets (tests/embedders/test_bert.py) but costs a
    new process ~1.2-1.7 s of imports, more than the rest of MiniLM's load.

    A call takes a text or a list of texts and ``add_special_tokens`` and
    ``return_offsets_mapping`` (the attention mask and token type ids are never returned);
    anything else (padding, truncation, tensors) is refused rather than ignored.
    """

    _IGNORED = frozenset({"return_attention_mask", "return_token_type_ids", "verbose"})

    def __init__(self, backend: Any, special: dict[str, str]) -> None:
        backend.no_truncation()  # (tokenizer.json may carry a training-time 128 and padding)
        backend.no_padding()
        self._backend = backend
        self.padding_side = "right"
        for attr in _SPECIAL:
            token = special.get(attr)
            setattr(self, attr, token)
            setattr(self, f"{attr}_id", backend.token_to_id(token) if token is not None else None)
        self.eos_token: str | None = None
        self.eos_token_id: int | None = None
        self.all_special_ids = [getattr(self, f"{a}_id") for a in _SPECIAL
                                if getattr(self, f"{a}_id") is not None]

    def __call__(self, text: str | list[str], add_special_tokens: bool = True,
                 return_offsets_mapping: bool = False, **kwargs: Any) -> _Encoded:
        unknown = set(kwargs) - self._IGNORED
        if unknown:
            raise TypeError(f"BertTokenizer does not take {', '.join(sorted(unknown))}")
        single = isinstance(text, str)
        encodings = self._backend.encode_batch([text] if single else list(text),
                                               add_special_tokens=add_special_tokens)
        data: dict[str, Any] = {"input_ids": [e.ids for e in encodings]}
        if return_offsets_mapping:
            data["offset_mapping"] = [e.offsets for e in encodings]
        if single:
            data = {key: value[0] for key, value in data.items()}
        return _Encoded(data, encodings)

    def decode(self, ids: Any, skip_special_tokens: bool = False) -> str:
        return str(self._backend.decode(list(ids), skip_special_tokens=skip_special_tokens))


def load_bert_tokenizer(path: str | Path) -> BertTokenizer | None:
    """The tokenizer of folder ``path`` as a ``BertTokenizer``, or None unless it is a BERT
    WordPiece tokenizer with a ``tokenizer.json`` (``AutoTokenizer`` loads the others)."""
    folder = Path(path)
    files = {name: folder / f"{name}.json" for name in ("tokenizer", "tokenizer_config", "special_tokens_map")}
    if not all(f.is_file() for f in files.values()):
        return None
    config: dict[str, Any] = json.loads(files["tokenizer_config"].read_text(encoding="utf-8"))
    if config.get("tokenizer_class") not in ("BertTokenizer", "BertTokenizerFast"):
        return None
    raw: dict[str, Any] = json.loads(files["special_tokens_map"].read_text(encoding="utf-8"))
    special = {attr: value if isinstance(value, str) else value.get("content")
               for attr, value in raw.items() if attr in _SPECIAL and value}
    from tokenizers import Tokenizer

    backend = Tokenizer.from_file(str(files["tokenizer"]))
    if backend.model.__class__.__name__ != "WordPiece" or any(
            backend.token_to_id(token) is None for token in special.values()):
        return None
    return BertTokenizer(backend, special)
