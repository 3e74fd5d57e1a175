"""Shared pieces of the trainable methods: config base, LoRA-wrapped decoder, save/load.

A trained method is saved as one directory:

* ``facet_config.json``: ``method``, the method's config, ``format_version``;
* ``adapter.safetensors``: LoRA weights (fp16);
* ``heads.safetensors``: the method's extra modules (fp16), when it has any.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

import torch
from safetensors.torch import load_file, save_file

from embedders.backbone import (
    DEFAULT_DECODER,
    Backbone,
    LoraSettings,
    add_lora,
    load_decoder,
    load_lora_state_dict,
    lora_state_dict,
)
from embedders.base import CONFIG_FILE, FORMAT_VERSION, PromptConfig, PromptTokenizer, Role
from embedders.baselines import DecoderEmbedder
from embedders.errors import CheckpointError

ADAPTER_FILE = "adapter.safetensors"
HEADS_FILE = "heads.safetensors"

# E5-style task instruction: the query side carries it, documents do not. The corpus
# methods' ``template="eos"`` (the papers' layout: this prompt + an appended EOS).
CORPUS_PROMPTS = PromptConfig(
    query="{instruction}{text}",
    document="{instruction}{text}",
    instruction_format="Instruct: {instruction}\nQuery: ",
)

# PromptEOL: the instruction (when there is one) on its own line, then the text inside a
# template whose last token the model is pooled at (see ``embedders.methods.corpus``).
PROMPTEOL_PROMPTS = PromptConfig(
    query='{instruction}This sentence : "{text}" means in one word:"',
    document='{instruction}This sentence : "{text}" means in one word:"',
    instruction_format="{instruction}\n",
)

# The instruction methods' (InBedder, InstEmb) templates. Both read (input, instruction)
# and either answer it or look ahead to the answer, which starts right after the prompt.
# ``prompteol`` (default): the instruction above the PromptEOL sentence; untrained it
# scores CLINC-val hmean 49.6 against 24.4 for ``alpaca``, the papers' layout (input,
# then instruction, then "### Response:"), kept for checkpoints trained with it.
ALPACA_TEMPLATE = "### Input:\n{text}\n\n### Instruction:\n{instruction}\n\n### Response:"
# ``instruction-last``: the PromptEOL sentence, then the instruction, then a question that
# asks for the answer, so the instruction is the last thing read before the pooled position
# (the default's fixed ``means in one word`` asks for the text's meaning whatever the
# instruction says).
INSTRUCTION_LAST_TEMPLATE = 'This sentence : "{text}"\n{instruction}In one word:"'
INSTRUCTION_TEMPLATES: dict[str, PromptConfig] = {
    "prompteol": PROMPTEOL_PROMPTS,
    "alpaca": PromptConfig(query=ALPACA_TEMPLATE, document=ALPACA_TEMPLATE, instruction_format="{instruction}"),
    "instruction-last": PromptConfig(query=INSTRUCTION_LAST_TEMPLATE, document=INSTRUCTION_LAST_TEMPLATE,
                                     instruction_format="{instruction}\n"),
}
# What precedes an answer's first word: PromptEOL's answer follows its opening quote
# directly; after "Response:" a space makes it tokenise as running text.
ANSWER_LEADS = {"prompteol": "", "alpaca": " ", "instruction-last": ""}


@dataclass
class MethodConfig:
    """Fields every trainable method has; subclasses add their own.

    ``TRAINING_ONLY`` names the fields that shape training and never the vectors given weights
    (a loss temperature or weight): a collection indexed by a checkpoint stays comparable with
    the same weights under another value of them (``embedders.contract.identity_changes``).
    """

    TRAINING_ONLY: ClassVar[frozenset[str]] = frozenset()

    backbone: str = DEFAULT_DECODER
    max_length: int = 256
    lora: LoraSettings = field(default_factory=LoraSettings)
    prompts: PromptConfig = CORPUS_PROMPTS

    def __post_init__(self) -> None:
        if self.max_length < 16:
            raise ValueError(f"max_length must be at least 16 tokens, got {self.max_length}")
        if isinstance(self.lora, dict):
            self.lora = LoraSettings.from_dict(self.lora)
        if isinstance(self.prompts, dict):
            self.prompts = PromptConfig(**self.prompts)

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["lora"] = self.lora.to_dict()
        data["prompts"] = asdict(self.prompts)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MethodConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise CheckpointError(
                f"{cls.__name__} does not know the fields {unknown}; valid fields: {sorted(known)}"
            )
        # (A str where a number goes said "'<' not supported between...", naming no field; a
        # nested one was a traceback.)
        problem = _type_problem(cls, data)
        if problem is not None:
            raise CheckpointError(f"a saved {cls.__name__} that is not valid: {problem}")
        try:
            return cls(**data)
        except (TypeError, ValueError) as e:  # a saved value out of range or of the wrong shape
            raise CheckpointError(f"a saved {cls.__name__} that is not valid: {e}") from e


# How a saved config's refusal names the type a field wants.
TYPE_WORDS = {bool: "true or false", int: "a whole number", float: "a number", str: "text"}


def _type_problem(cls: type, data: Mapping[str, Any], prefix: str = "") -> str | None:
    """The first saved value of ``data`` whose type is not its field's in dataclass ``cls``
    (the default's: a number, text, true/false, a list of names, or a nested settings object
    such as ``lora`` and ``prompts``, read in turn), said "lora.alpha is None, not a whole
    number"; None where every one fits (ranges are the config's own checks)."""
    for f in fields(cls):
        if f.name not in data:
            continue
        value, name = data[f.name], f"{prefix}{f.name}"
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if isinstance(default, (bool, int, float, str)):
            wanted = type(default)
            ok = (isinstance(value, wanted) and (wanted is bool or not isinstance(value, bool))) or (
                wanted is float and isinstance(value, int) and not isinstance(value, bool))
            if not ok:
                return f"{name} is {value!r}, not {TYPE_WORDS[wanted]}"
        elif dataclasses.is_dataclass(default) and not isinstance(value, type(default)):
            if not isinstance(value, Mapping):
                return f"{name} is {value!r}, not an object of settings"
            inner = _type_problem(type(default), value, f"{name}.")
            if inner is not None:
                return inner
        elif isinstance(default, tuple) and all(isinstance(item, str) for item in default) and (
                not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value)):
            return f"{name} is {value!r}, not a list of names"
        elif "tuple[int" in str(f.type) and value is not None and (  # lora.layers: or None
                not isinstance(value, list | tuple)
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
            return f"{name} is {value!r}, not a list of whole numbers"
    return None


@dataclass
class TemplatedConfig(MethodConfig):
    """A method whose prompts follow a named template (``TEMPLATES``, set by each subclass).

    Attributes:
        template: a key of ``TEMPLATES``.
        prompts: derived from ``template``; saved so a checkpoint says what it read.
    """

    TEMPLATES: ClassVar[dict[str, PromptConfig]] = {"prompteol": PROMPTEOL_PROMPTS}
    # What a checkpoint saved before templates existed read.
    LEGACY_TEMPLATE: ClassVar[str] = "prompteol"

    template: str = "prompteol"
    prompts: PromptConfig = PROMPTEOL_PROMPTS

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.template not in self.TEMPLATES:
            raise ValueError(f"template must be one of {', '.join(self.TEMPLATES)}, got {self.template!r}")
        self.prompts = self.TEMPLATES[self.template]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MethodConfig:
        if "template" not in data:
            data = {**data, "template": cls.LEGACY_TEMPLATE}
        return super().from_dict(data)


TEXT_QUOTES = ("keep", "drop")


def without_double_quotes(text: str) -> str:
    """``text`` without its double quotes; a text of nothing else stays as it is (it would be
    read as an empty one)."""
    return text.replace('"', "") or text


def quotes_text(prompts: PromptConfig) -> bool:
    """Whether a template puts the text inside double quotes (PromptEOL's ``"{text}"``)."""
    return '"{text}"' in prompts.query or '"{text}"' in prompts.document


def text_reader(embedder: Any) -> Callable[[str], str]:
    """How ``embedder`` (an instruction method) reads a text into its template, asked of its
    config at each call: without double quotes under ``text_quotes=drop`` when the template
    quotes the text, else as written."""
    def read(text: str) -> str:
        if embedder.config.text_quotes == "drop" and quotes_text(embedder.prompts):
            return without_double_quotes(text)
        return text
    return read


@dataclass
class InstructedConfig(TemplatedConfig):
    """Fields of the instruction methods (InBedder, InstEmb): ``template`` is ``prompteol``
    (default), ``alpaca`` or ``instruction-last`` (see ``INSTRUCTION_TEMPLATES``);
    checkpoints without one read Alpaca.

    Attributes:
        text_quotes: ``keep`` reads a text as written; ``drop`` reads it without its double
            quotes where the template quotes the text, since a ``"`` inside it closes the
            template's own quote (the shipped InBedder then predicts the end of its answer at
            once, and that state is its embedding). ``keep`` is what every checkpoint saved
            before the option read; the shipped ones set the value chosen on CLINC *train* and
            STS-B *dev* (docs/results.md).
    """

    TEMPLATES: ClassVar[dict[str, PromptConfig]] = INSTRUCTION_TEMPLATES
    LEGACY_TEMPLATE: ClassVar[str] = "alpaca"

    text_quotes: str = "keep"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.text_quotes not in TEXT_QUOTES:
            raise ValueError(f"text_quotes must be one of {', '.join(TEXT_QUOTES)}, got {self.text_quotes!r}")

    @property
    def answer_lead(self) -> str:
        return ANSWER_LEADS[self.template]


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    """A safetensors file's tensors; a damaged one (truncated, empty, not safetensors) is a
    ``CheckpointError`` naming it, not the reader's own exception."""
    try:
        weights = load_file(str(path))
    except Exception as e:  # safetensors raises its own SafetensorError, OSError, ValueError
        raise CheckpointError(f"{path} cannot be read ({type(e).__name__}: {e}); the checkpoint "
                              "is damaged: copy it again or retrain it") from e
    # A file that reads but holds NaN or infinite weights embedded every text as NaNs (and
    # `facet train --init-lora-from` it skipped every step, saved nothing and exited 0).
    bad = next((key for key, tensor in weights.items()
                if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all())), None)
    if bad is not None:
        raise CheckpointError(f"{path} holds weights that are not finite (NaN or infinite, in "
                              f"{bad}); the checkpoint is damaged: copy it again or retrain it")
    return weights


def check_weights_file(path: Path) -> None:
    """Open a safetensors file's header only (no tensor is read): a damaged one (truncated,
    empty, not safetensors, its header not covering the file) is the ``CheckpointError``
    ``read_weights`` would raise on loading, found before any work."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as handle:
            handle.keys()
    except Exception as e:  # SafetensorError, OSError...
        raise CheckpointError(f"{path} cannot be read ({type(e).__name__}: {e}); the checkpoint "
                              "is damaged: copy it again or retrain it") from e


def check_saved_weights(path: Path, config: MethodConfig) -> None:
    """What ``TrainableDecoderEmbedder.load`` refuses of the weight files in checkpoint ``path``
    (saved with ``config``), checked from the files' headers alone: a missing adapter where the
    config has LoRA, and a damaged adapter or heads file.

    Raises:
        CheckpointError: as ``load`` would, naming the file.
    """
    adapter_path = path / ADAPTER_FILE
    if config.lora.r > 0:
        if not adapter_path.is_file():
            raise CheckpointError(f"{path} has no {ADAPTER_FILE} but its config has LoRA r={config.lora.r}")
        check_weights_file(adapter_path)
    if (path / HEADS_FILE).is_file():
        check_weights_file(path / HEADS_FILE)


def generated_tokens(config: MethodConfig, *, training: bool = False) -> tuple[int, str]:
    """The most positions ``config``'s method reads past its ``max_length`` prompt, and what they
    are (for a message; "" when none): the tokens it generates after the prompt, its template
    already inside ``max_length``. GIRCSE's soft tokens (``soft_tokens``; in training also
    ``train_soft_tokens``) and InBedder's answer tokens under ``pooling=avg-gen``
    (``gen_tokens``); what a method keeps inside ``max_length`` (Causal2Vec's Contextual token,
    InstEmb's look-ahead tokens, InBedder's training answers) adds nothing.

    Read from the config's fields, so the settings a loaded model serves with count as its
    saved ones do.
    """
    found: list[tuple[int, str]] = []
    fields_ = ("soft_tokens", "train_soft_tokens") if training else ("soft_tokens",)
    for name in fields_:  # GIRCSE: K soft tokens generated after the template
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            found.append((value, f"soft tokens GIRCSE generates after the text ({name}={value})"))
    gen = getattr(config, "gen_tokens", None)  # InBedder: answer tokens decoded for avg-gen
    if getattr(config, "pooling", None) == "avg-gen" and isinstance(gen, int) and gen > 0:
        found.append((gen, f"answer tokens InBedder generates after the text (pooling=avg-gen, gen_tokens={gen})"))
    return max(found, default=(0, ""), key=lambda item: item[0])


def position_limit(backbone: str) -> int | None:
    """The positions backbone ``backbone`` can read (its config's ``max_position_embeddings``),
    read from its config alone, before any weights load; None when no config can be read here
    or it does not say (the check then waits for the loaded backbone)."""
    from embedders.backbone import config_count

    return config_count(backbone, "max_position_embeddings")


def check_positions(limit: int | None, backbone: str, max_length: int, config: MethodConfig | None = None,
                    *, training: bool = False) -> None:
    """Refuse a ``max_length`` that, with the tokens the method generates after it
    (``generated_tokens``), is beyond ``limit``, the positions backbone ``backbone`` can read.

    Raises:
        ValueError: naming the limit and the largest ``max_length`` that fits.
    """
    if limit is None:
        return
    extra, what = generated_tokens(config, training=training) if config is not None else (0, "")
    if max_length + extra <= limit:
        return
    reason = f"its position limit (max_position_embeddings) is {limit} tokens"
    if not extra:
        raise ValueError(f"max_length {max_length} is more than backbone {backbone!r} can read: {reason}")
    fits = (f"give max_length at most {limit - extra}" if limit - extra >= 16
            else "generate fewer tokens after the text")
    raise ValueError(f"max_length {max_length} plus the {extra} {what} is {max_length + extra} positions, "
                     f"more than backbone {backbone!r} can read: {reason}; {fits}")


def check_position_limit(backbone: Backbone, max_length: int, config: MethodConfig | None = None,
                         *, training: bool = False) -> None:
    """``check_positions`` against the loaded ``backbone`` (``MethodConfig`` checks only the
    lower bound of ``max_length``, as the limit is known once the backbone is).

    Raises:
        ValueError: ``max_length`` plus the generated tokens is more than the backbone's limit.
    """
    check_positions(backbone.max_positions, backbone.name, max_length, config, training=training)


# Inference options that change how many tokens a method generates after its prompt
# (``generated_tokens``): setting one re-runs the position check.
_GENERATION_OPTIONS = frozenset({"soft_tokens", "pooling", "gen_tokens"})


class TrainableDecoderEmbedder(DecoderEmbedder):
    """A decoder embedder with its own (unshared) backbone wrapped in LoRA, plus extra heads.

    Subclasses define ``method``, ``config_class``, build their heads in
    ``_build_heads`` and implement ``_embed_batch`` (used for inference and, with
    gradients on, for training) and ``training_loss``.
    """

    method = "trainable"
    config_class: ClassVar[type[MethodConfig]] = MethodConfig

    def __init__(self, config: MethodConfig, *, name: str | None = None, device: str | None = None,
                 dtype: str | torch.dtype | None = None) -> None:
        self.config = config
        # From the backbone's config file where it can be read: refused before the weights load.
        check_positions(position_limit(config.backbone), config.backbone, config.max_length, config)
        backbone = add_lora(load_decoder(config.backbone, device=device, dtype=dtype, shared=False), config.lora)
        check_position_limit(backbone, config.max_length, config)
        super().__init__(name or self.method, config.backbone, prompts=config.prompts,
                         max_length=config.max_length, padding_side="left", backbone=backbone)
        self._set_tokenizer()  # the method's own tokenizer(s), in place of the plain one
        self.heads = torch.nn.ModuleDict()
        self._build_heads()
        self.heads.to(device=self.device, dtype=self.backbone.spec.dtype)
        self.eval()

    def _build_heads(self) -> None:
        """Create extra trainable modules in ``self.heads``."""

    # -- the token budget (an inference option of every method) -------------------------

    @property
    def max_length(self) -> int:
        """Token budget per sequence, prompt included (the config's ``max_length``).

        Settable at load time (``"ckpt[max_length=256]"``): a checkpoint trained on short
        sentences can read a whole index chunk at inference. A refused value changes nothing.
        """
        return self.config.max_length

    @max_length.setter
    def max_length(self, value: int) -> None:
        old = self.config.max_length
        if value != old:
            dataclasses.replace(self.config, max_length=value)  # runs the config's checks
            if hasattr(self, "backbone"):
                check_position_limit(self.backbone, value, self.config)
        self.config.max_length = value
        # DecoderEmbedder.__init__ assigns it before any tokenizer exists: the config holds it.
        if hasattr(self, "_tokenize"):
            try:
                self._set_tokenizer()
            except ValueError:
                self.config.max_length = old
                self._set_tokenizer()
                raise

    def __setattr__(self, name: str, value: Any) -> None:
        """Setting an option that changes the tokens generated after the prompt (GIRCSE's
        ``soft_tokens``, InBedder's ``pooling`` and ``gen_tokens``) checks the positions again,
        as ``max_length`` does: ``[max_length=N,soft_tokens=K]`` is refused in either order. A
        refused value changes nothing."""
        old = getattr(self, name, None) if name in _GENERATION_OPTIONS and hasattr(self, "backbone") else None
        if old is None:
            super().__setattr__(name, value)
            return
        super().__setattr__(name, value)
        try:
            check_position_limit(self.backbone, self.config.max_length, self.config)
        except ValueError:
            super().__setattr__(name, old)
            raise

    def _set_tokenizer(self) -> None:
        """(Re)build the prompt tokenizer(s) for the current prompts and ``max_length``."""
        tok = self.backbone.tokenizer
        self._tokenize = PromptTokenizer(tok, self.prompts, self.max_length, empty_ids=[tok.eos_token_id])

    # -- modes and parameters ----------------------------------------------------------

    def train(self) -> None:
        self.backbone.model.train()
        self.heads.train()

    def eval(self) -> None:
        self.backbone.model.eval()
        self.heads.eval()

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        params = [p for p in self.backbone.model.parameters() if p.requires_grad]
        params += [p for p in self.heads.parameters() if p.requires_grad]
        return params

    def enable_gradient_checkpointing(self) -> None:
        """Recompute each layer's activations in the backward pass instead of keeping them: training
        memory drops several-fold (a batch of 48 sequences of 128 tokens held ~17 GB without it on
        the CPU) for about half again the step time. Methods that generate with a KV cache while
        training (GIRCSE) refuse it."""
        self.backbone.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})

    def head_parameters(self) -> list[torch.nn.Parameter]:
        """The extra heads' trainable parameters (the trainer may give them their own learning rate)."""
        return [p for p in self.heads.parameters() if p.requires_grad]

    def named_trainable_parameters(self) -> list[str]:
        names = [n for n, p in self.backbone.model.named_parameters() if p.requires_grad]
        names += [f"heads.{n}" for n, p in self.heads.named_parameters() if p.requires_grad]
        return names

    def embed_with_grad(self, texts: list[str], role: Role, instruction: str | None) -> torch.Tensor:
        """``_embed_batch`` outside inference mode, for training. Returns (batch, dim), unnormalised."""
        return self._embed_batch(texts, role, instruction)

    def training_loss(self, batch: Any) -> tuple[torch.Tensor, dict[str, float]]:
        raise NotImplementedError

    # -- persistence -------------------------------------------------------------------

    def _config_dict(self) -> dict[str, Any]:
        return {"name": self.name, "config": self.config.to_dict()}

    @property
    def identity(self) -> str:
        """Config plus a digest of the trained weights: two checkpoints never share a cache key."""
        digest = hashlib.sha256()
        for part in (lora_state_dict(self.backbone), self.heads.state_dict()):
            for key in sorted(part):
                digest.update(key.encode())
                digest.update(part[key].detach().to("cpu", torch.float16).numpy().tobytes())
        return json.dumps({"method": self.method, **self._config_dict(), "weights": digest.hexdigest()[:16],
                           **self._dtype_tag()}, sort_keys=True, default=str)

    def save(self, path: str | Path) -> Path:
        target = Path(path)
        target.mkdir(parents=True, exist_ok=True)
        meta = {"method": self.method, "format_version": FORMAT_VERSION, **self._config_dict()}
        (target / CONFIG_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True))
        adapter = {k: v.detach().to("cpu", torch.float16).contiguous()
                   for k, v in lora_state_dict(self.backbone).items()}
        if adapter:
            save_file(adapter, str(target / ADAPTER_FILE))
        heads = {k: v.detach().to("cpu", torch.float16).contiguous() for k, v in self.heads.state_dict().items()}
        if heads:
            save_file(heads, str(target / HEADS_FILE))
        return target

    @classmethod
    def saved_config(cls, path: Path, meta: dict[str, Any]) -> MethodConfig:
        """The config a checkpoint in ``path`` was saved with (``meta``: its parsed
        facet_config.json), read without loading any weights.

        Raises:
            CheckpointError: no ``config`` object, or one this method refuses (naming the file).
        """
        saved = meta.get("config")
        if not isinstance(saved, dict):
            raise CheckpointError(f"{path / CONFIG_FILE} has no \"config\" object")
        try:
            return cls.config_class.from_dict(saved)
        except CheckpointError as e:
            raise CheckpointError(f"{path / CONFIG_FILE}: {e}") from e

    @classmethod
    def load(cls, path: Path, meta: dict[str, Any], device: str | None = None, *,
             dtype: str | torch.dtype | None = None, config: MethodConfig | None = None) -> TrainableDecoderEmbedder:
        """Rebuild a saved checkpoint.

        Args:
            path: the checkpoint directory; meta: its parsed facet_config.json.
            device, dtype: where and in what precision to run (automatic when None).
            config: a config to build instead of the saved one (training continued with other
                settings); its architecture must fit the saved weights.

        Raises:
            CheckpointError: missing weights, or weights that do not fit the config.
        """
        config = config or cls.saved_config(path, meta)
        try:
            model = cls(config, name=meta.get("name"), device=device, dtype=dtype)
        except ValueError as e:  # a config value the loaded backbone refuses (max_length past its positions)
            raise CheckpointError(f"{path / CONFIG_FILE}: {e}") from e
        dtype = model.backbone.spec.dtype
        adapter_path = path / ADAPTER_FILE
        if config.lora.r > 0:
            if not adapter_path.is_file():
                raise CheckpointError(f"{path} has no {ADAPTER_FILE} but its config has LoRA r={config.lora.r}")
            state = {k: v.to(dtype) for k, v in read_weights(adapter_path).items()}
            try:
                load_lora_state_dict(model.backbone, state)
            except CheckpointError as e:  # keys that do not fit: name the file
                raise CheckpointError(f"{adapter_path}: {e}") from e
            except RuntimeError as e:  # a size mismatch: the config's rank is not the file's
                # torch lists every mismatched tensor (hundreds of lines): name one.
                first = next((line.strip() for line in str(e).splitlines()
                              if "size mismatch" in line), str(e).splitlines()[0])
                raise CheckpointError(f"{adapter_path} does not fit the LoRA settings in its "
                                      f"config ({config.lora.to_dict()}): {first}") from e
        heads_path = path / HEADS_FILE
        if len(model.heads.state_dict()):
            if not heads_path.is_file():
                raise CheckpointError(f"{path} has no {HEADS_FILE}; the {cls.method} heads are missing")
            state = {k: v.to(dtype) for k, v in read_weights(heads_path).items()}
            try:
                model.heads.load_state_dict(state)
            except RuntimeError as e:
                raise CheckpointError(f"{heads_path} does not fit the {cls.method} config: {e}") from e
        model.eval()
        return model
