"""Named embedders, trainable methods and saved-checkpoint loading.

Three registries:

* embedder names (``minilm``, ``backbone-prompteol``, ``causal2vec``...) -> a factory
  building a ready embedder, with a one-line description for ``facet embedders``. The
  trained checkpoints shipped in the project's ``checkpoints/`` folder are registered
  under their folder names, so ``load_embedder("inbedder")`` works from any directory;
* method names (the ``method`` field of a saved ``facet_config.json``) -> a loader
  that rebuilds the embedder from a directory;
* trainable methods (``register_trainable``): what ``facet train METHOD`` can build.
  Each method package registers itself when imported (``embedders/methods/<name>/
  __init__.py``), the way peft's tuners do; the CLI only looks names up.

``load_embedder(name_or_path)`` accepts a name or a path. Registering a name twice is
an error that says which module got there first.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embedders.base import CONFIG_FILE, BaseEmbedder, recover_checkpoint
from embedders.errors import CheckpointError, DuplicateRegistrationError, InvalidInputError, UnknownEmbedderError

logger = logging.getLogger(__name__)

EmbedderFactory = Callable[..., BaseEmbedder]
CheckpointLoader = Callable[[Path, dict[str, Any], str | None], BaseEmbedder]


@dataclass(frozen=True)
class EmbedderInfo:
    """One registered embedder name."""

    name: str
    description: str
    kind: str  # "baseline", "method" or "checkpoint"
    factory: EmbedderFactory
    path: Path | None = None  # a registered checkpoint's directory


_EMBEDDERS: dict[str, EmbedderInfo] = {}
_LOADERS: dict[str, CheckpointLoader] = {}
_TRAINABLE: dict[str, TrainableMethod] = {}


@dataclass(frozen=True)
class TrainableMethod:
    """A method ``facet train`` can build.

    Attributes:
        name: the method name (also the ``method`` field of its checkpoints).
        model_class: the embedder class; it has ``config_class`` (a dataclass config),
            ``load(path, meta, device, dtype=, config=)`` and ``training_loss(batch)``.
        data: the kind of training batches it consumes: ``pairs`` (contrastive) or
            ``triples`` (input, instruction, answer).
        dev_suite: the dev suite that selects its checkpoints: ``corpus`` or ``instruction``.
        description: one line for listings.
        defaults: training defaults that differ from the global ones (e.g. ``lr``).
    """

    name: str
    model_class: Any
    data: str
    dev_suite: str
    description: str
    defaults: dict[str, Any] = dataclasses.field(default_factory=dict)


def register_trainable(method: TrainableMethod) -> None:
    """Make ``method`` trainable with ``facet train`` and its checkpoints loadable.

    Raises:
        DuplicateRegistrationError: the name is taken.
    """
    _ensure_builtins()
    if method.name in _TRAINABLE:
        owner = getattr(_TRAINABLE[method.name].model_class, "__module__", "?")
        raise DuplicateRegistrationError(
            f"trainable method {method.name!r} is already registered (by {owner}); each method registers "
            "once, from its own package"
        )
    cls = method.model_class

    def load(path: Path, meta: dict[str, Any], device: str | None) -> BaseEmbedder:
        return cls.load(path, meta, device)

    load.__module__ = cls.__module__
    register_method(method.name, load)
    _TRAINABLE[method.name] = method


def trainable_methods() -> dict[str, TrainableMethod]:
    """Every registered trainable method, by name."""
    _ensure_builtins()
    return dict(sorted(_TRAINABLE.items()))


def _config_class(method: str) -> Any:
    """The config class of trainable ``method``; None if it is not trainable or not known here."""
    registered = trainable_methods().get(method)
    return getattr(getattr(registered, "model_class", None), "config_class", None)


def training_only_fields(method: str) -> frozenset[str]:
    """The config fields of trainable ``method`` that shape training only (its config class's
    ``TRAINING_ONLY``); empty for a method that is not trainable or not known here."""
    return frozenset(getattr(_config_class(method), "TRAINING_ONLY", frozenset()))


def config_defaults(method: str) -> dict[str, Any]:
    """The plain default of each config field of trainable ``method`` (fields built by a factory
    left out); empty for a method that is not trainable or not known here."""
    config_class = _config_class(method)
    if config_class is None or not dataclasses.is_dataclass(config_class):
        return {}
    return {f.name: f.default for f in dataclasses.fields(config_class) if f.default is not dataclasses.MISSING}


# -- shipped checkpoints ------------------------------------------------------------------

_checkpoint_dir: Path | None = None


def default_checkpoint_dir() -> Path:
    """The project's ``checkpoints/`` folder (beside the packages in a source or editable install)."""
    return Path(__file__).resolve().parents[1] / "checkpoints"


def set_checkpoint_dir(path: str | Path | None) -> None:
    """Where named checkpoints are looked up (the app's settings call this); None = the default."""
    global _checkpoint_dir
    _checkpoint_dir = Path(path) if path is not None else None
    for name in [n for n, info in _EMBEDDERS.items() if info.kind == "checkpoint"]:
        del _EMBEDDERS[name]
    if _builtins_loaded:
        register_checkpoints()


def checkpoint_dir() -> Path:
    return _checkpoint_dir or default_checkpoint_dir()


def register_checkpoints() -> list[str]:
    """Register every checkpoint directory directly under ``checkpoint_dir()`` by its folder name
    (a name already taken by a baseline is skipped with a warning). Returns the names added."""
    root = checkpoint_dir()
    added: list[str] = []
    if not root.is_dir():
        return added
    for path in sorted(p for p in root.iterdir() if is_checkpoint_dir(p)):
        name = path.name.lower()
        if name in _EMBEDDERS:
            held = _EMBEDDERS[name]
            if held.kind != "checkpoint":
                logger.warning("checkpoint %s not registered: the name %r is taken", path, name)
            elif held.path is not None and held.path != path.resolve():
                # Folders whose names differ only in case ("myeos", "MyEOS"): the name loaded
                # the other one's model, without a word.
                logger.warning("checkpoint %s not registered: the name %r already loads %s (the "
                               "folder names differ only in case); rename one, or load it by "
                               "its path", path, name, held.path)
            continue
        try:
            meta = json.loads((path / CONFIG_FILE).read_text())
        except (OSError, json.JSONDecodeError) as e:
            logger.warning("checkpoint %s not registered: %s", path, e)
            continue
        description = f"trained {meta.get('method', '?')} checkpoint ({path})"

        def factory(device: str | None = None, _path: Path = path, **_: Any) -> BaseEmbedder:
            return load_checkpoint(_path, device=device)

        _EMBEDDERS[name] = EmbedderInfo(name, description, "checkpoint", factory, path.resolve())
        added.append(name)
    return added


def register_embedder(name: str, factory: EmbedderFactory, description: str, kind: str = "baseline") -> None:
    """Make ``name`` loadable with ``load_embedder(name)``.

    Raises:
        DuplicateRegistrationError: the name is taken (by a packaged embedder or checkpoint too,
            even before anything was loaded: a plugin registering ``minilm`` first broke the
            packaged names' registration for the whole process).
    """
    _ensure_builtins()
    key = name.lower()
    if key in _EMBEDDERS:
        owner = getattr(_EMBEDDERS[key].factory, "__module__", "?")
        raise DuplicateRegistrationError(
            f"an embedder named {name!r} is already registered (by {owner}); pick another name "
            "or call unregister_embedder first"
        )
    _EMBEDDERS[key] = EmbedderInfo(key, description, kind, factory)


def unregister_embedder(name: str) -> None:
    _EMBEDDERS.pop(name.lower(), None)


def register_method(method: str, loader: CheckpointLoader) -> None:
    """Make saved checkpoints whose config says ``method`` loadable.

    Raises:
        DuplicateRegistrationError: the method already has a loader.
    """
    _ensure_builtins()
    if method in _LOADERS:
        owner = getattr(_LOADERS[method], "__module__", "?")
        raise DuplicateRegistrationError(
            f"checkpoint method {method!r} already has a loader (from {owner}); each method "
            "registers once, in its own package"
        )
    _LOADERS[method] = loader


def list_embedders() -> list[EmbedderInfo]:
    """All registered embedder names, sorted."""
    _ensure_builtins()
    return [_EMBEDDERS[k] for k in sorted(_EMBEDDERS)]


def embedder_names() -> list[str]:
    return [info.name for info in list_embedders()]


def is_checkpoint_dir(path: str | Path) -> bool:
    if (Path(path) / CONFIG_FILE).is_file():
        return True
    return recover_checkpoint(path) and (Path(path) / CONFIG_FILE).is_file()


def read_checkpoint_config(directory: Path) -> dict[str, Any]:
    """The saved ``facet_config.json`` of a checkpoint directory, without loading any weights.

    Raises:
        CheckpointError: the file is missing or not valid JSON.
    """
    config_path = directory / CONFIG_FILE
    try:
        return json.loads(config_path.read_text())
    except FileNotFoundError as e:
        raise CheckpointError(f"{directory} is not a Facet checkpoint: {CONFIG_FILE} is missing") from e
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{config_path} is not valid JSON: {e}") from e


def load_checkpoint(path: str | Path, device: str | None = None) -> BaseEmbedder:
    """Rebuild an embedder saved with ``save(path)``.

    Raises:
        CheckpointError: missing/corrupt config or an unknown method.
    """
    _ensure_builtins()
    directory = Path(path)
    config_path = directory / CONFIG_FILE
    config = read_checkpoint_config(directory)
    method = config.get("method")
    if method not in _LOADERS:
        raise CheckpointError(
            f"{config_path} names method {method!r}, which has no loader; known methods: "
            f"{', '.join(sorted(_LOADERS)) or 'none'}"
        )
    return _LOADERS[method](directory, config, device)


def split_options(spec: str) -> tuple[str, dict[str, str]]:
    """``"name[k=v,k2=v2]"`` -> ``("name", {"k": "v", "k2": "v2"})``; no brackets -> no options.

    Raises:
        InvalidInputError: brackets present but an item is not ``key=value``.
    """
    if not spec.endswith("]") or "[" not in spec:
        return spec, {}
    base, _, inner = spec[:-1].rpartition("[")
    if "[" in base or "]" in base or "[" in inner:
        raise InvalidInputError(f"{spec!r}: give the options in one pair of brackets, "
                                "name[key=value,key2=value2]")
    options: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in inner.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidInputError(f"embedder option {item!r} in {spec!r} is not key=value")
        if key.strip() in options:  # the last one silently won
            raise InvalidInputError(f"embedder option {key.strip()!r} is given twice in {spec!r}")
        options[key.strip()] = value.strip()
    return base, options


def apply_option(model: BaseEmbedder, key: str, value: str) -> None:
    """Set an inference-time option (a field of the model's config) from its string form.

    The value is parsed as the field's current type, so ``soft_tokens=10`` becomes an int.

    Raises:
        InvalidInputError: the model has no such option, or the value does not parse.
    """
    config = getattr(model, "config", None)
    options = sorted(k for k in getattr(config, "__dataclass_fields__", {}) if k in getattr(model, "OPTIONS", ()))
    if key not in options:
        raise InvalidInputError(
            f"embedder {model.name!r} has no option {key!r}; options: {', '.join(options) or 'none'}"
        )
    current = getattr(config, key)
    try:
        parsed: Any
        if isinstance(current, bool):
            if value.lower() not in ("true", "false", "1", "0"):
                raise ValueError(value)
            parsed = value.lower() in ("true", "1")
        else:
            parsed = type(current)(value)
    except ValueError as e:
        kind = {"int": "whole number", "float": "number", "bool": "true or false",
                "str": "text"}.get(type(current).__name__, type(current).__name__)
        raise InvalidInputError(f"option {key}={value!r}: expected a {kind}") from e
    try:
        if isinstance(getattr(type(model), key, None), property):
            setattr(model, key, parsed)  # a property validates the value
        else:
            dataclasses.replace(config, **{key: parsed})  # type: ignore[type-var]  # runs the config's checks
            setattr(config, key, parsed)
    except ValueError as e:
        raise InvalidInputError(f"option {key}={value!r}: {e}") from e


def load_embedder(name_or_path: str | Path, *, device: str | None = None, **kwargs: Any) -> BaseEmbedder:
    """Build an embedder by registered name or from a checkpoint directory.

    Args:
        name_or_path: a name from ``facet embedders`` or a directory holding facet_config.json.
        device: device override (``cpu``, ``cuda``...).
        **kwargs: passed to the factory of a named embedder.

    Raises:
        UnknownEmbedderError: neither a registered name nor a checkpoint; lists the valid names.
    """
    if not isinstance(name_or_path, str | Path) or not str(name_or_path).strip():
        raise UnknownEmbedderError(
            f"embedder must be a non-empty name or path, got {name_or_path!r}; valid names: "
            f"{', '.join(embedder_names())}"
        )
    _ensure_builtins()
    base, options = _split_spec(str(name_or_path))
    if base != str(name_or_path) and not options:  # "minilm[]": no options, the model itself
        return load_embedder(base, device=device, **kwargs)
    if options:
        model = load_embedder(base, device=device, **kwargs)
        for key, value in options.items():
            apply_option(model, key, value)
        return model
    key = str(name_or_path).lower()
    if key in _EMBEDDERS:
        return _EMBEDDERS[key].factory(device=device, **kwargs)
    if is_checkpoint_dir(name_or_path):
        return load_checkpoint(name_or_path, device=device)
    raise _unknown(str(name_or_path))


def _split_spec(spec: str) -> tuple[str, dict[str, str]]:
    """``split_options``, except that a registered name or a checkpoint directory whose own name
    ends in brackets is read as it is (a real name wins over the ``name[key=value]`` reading)."""
    if spec.lower() in _EMBEDDERS or is_checkpoint_dir(spec):
        return spec, {}
    return split_options(spec)


def without_options(spec: str) -> str:
    """``spec`` less its ``[key=value]`` options: ``runs/x[pooling=P]`` -> ``runs/x`` (a registered
    name or checkpoint directory whose own name ends in brackets is kept whole)."""
    return _split_spec(spec)[0]


def _resolve(spec: str) -> tuple[EmbedderInfo | None, Path | None]:
    """What ``spec`` (options allowed) names, without loading anything: ``(info, None)`` for a
    registered non-checkpoint embedder, ``(info or None, directory)`` for a checkpoint
    directory (registered or a path), ``(None, None)`` for neither."""
    _ensure_builtins()
    base = _split_spec(spec)[0]
    info = _EMBEDDERS.get(base.lower())
    if info is not None and info.path is None:
        return info, None
    directory = info.path if info is not None else Path(base)
    return (info, directory) if directory is not None and is_checkpoint_dir(directory) else (None, None)


def _unknown(spec: str) -> UnknownEmbedderError:
    root = checkpoint_dir()
    # An installed (non-editable) package has no checkpoints/ beside it: the trained names
    # (causal2vec, inbedder...) were simply missing from the list, and nothing said why.
    missing = (f" (no checkpoints folder at {root}, so no trained checkpoint has a name: set "
               "FACET_CHECKPOINT_DIR to a folder of checkpoints, such as a Facet checkout's "
               "checkpoints/)" if not root.is_dir() else "")
    return UnknownEmbedderError(
        f"unknown embedder {spec!r}: not a registered name and not a directory with {CONFIG_FILE}. "
        f"Valid names: {', '.join(embedder_names())}{missing}")


def saved_name(name_or_path: str) -> str | None:
    """The ``name`` the embedder ``name_or_path`` (options allowed) loads as, read without loading
    any weights: a baseline's registered name, a checkpoint's ``name`` in its config. None where
    only loading it would tell (a config without a name).

    Raises:
        UnknownEmbedderError: neither a registered name nor a checkpoint directory.
        CheckpointError: a config that cannot be read.
    """
    info, directory = _resolve(str(name_or_path))
    if directory is None:
        if info is None:
            raise _unknown(str(name_or_path))
        return info.name
    name = read_checkpoint_config(directory).get("name")
    return str(name) if name else None


def check_embedder(name_or_path: str) -> None:
    """Check, without loading any weights, that ``name_or_path`` can be loaded: a registered
    name, or a checkpoint directory whose config a known method reads (options after the name
    are checked when it loads). For commands that run one embedder after another, so that a
    typo in the last one is found before the first has run.

    Raises:
        UnknownEmbedderError: neither a registered name nor a checkpoint directory.
        CheckpointError: a config that cannot be read, an unknown method, a config value its
            method refuses.
    """
    info, directory = _resolve(str(name_or_path))
    if directory is None:
        if info is None:
            raise _unknown(str(name_or_path))
        return
    meta = read_checkpoint_config(directory)
    method = meta.get("method")
    if method not in _LOADERS:
        raise CheckpointError(
            f"{directory / CONFIG_FILE} names method {method!r}, which has no loader; known methods: "
            f"{', '.join(sorted(_LOADERS)) or 'none'}")
    registered = trainable_methods().get(str(method))
    if registered is not None:  # the check its loader makes first (a baseline's has no config)
        registered.model_class.saved_config(directory, meta)


def answers_questions(name_or_path: str) -> bool | None:
    """Whether ``name_or_path`` loads a model that generates answers (an InBedder-style
    cluster explainer), read without loading any weights: False for the packaged baselines and
    for checkpoints of methods that do not answer; None where only loading would tell (an
    embedder registered by other code, a name that loads nothing)."""
    info, directory = _resolve(str(name_or_path))
    if directory is None:
        packaged = info is not None and getattr(info.factory, "__module__", "") == "embedders.builtin"
        return False if packaged else None
    try:
        method = read_checkpoint_config(directory).get("method")
    except CheckpointError:
        return None
    registered = trainable_methods().get(str(method))
    if registered is None:
        return None
    return callable(getattr(registered.model_class, "generate_answers", None))


def loads_registered(spec: str, name: str) -> bool:
    """Whether ``spec`` loads exactly what the registered ``name`` loads: that name itself, or,
    for a registered checkpoint, a path to its directory; never a spec with options, nor another
    directory that merely carries the same name in its config (a ``facet train`` output is named
    after its method)."""
    _ensure_builtins()
    info = _EMBEDDERS.get(name.lower())
    if info is None:
        return False
    if spec.lower() == info.name.lower():
        return True
    return (info.path is not None and is_checkpoint_dir(spec)
            and Path(spec).expanduser().resolve() == info.path)


def portable_spec(name_or_path: str) -> str:
    """The spec that loads the same embedder from any working directory: a checkpoint
    directory's path made absolute (options kept: ``runs/x[pooling=P]`` ->
    ``/abs/runs/x[pooling=P]``); registered names, with or without options, unchanged."""
    _ensure_builtins()
    spec = str(name_or_path)
    base = _split_spec(spec)[0]
    if base.lower() in _EMBEDDERS or not is_checkpoint_dir(base):
        return spec
    return str(Path(base).expanduser().resolve()) + spec[len(base):]


_builtins_loaded = False


def _ensure_builtins() -> None:
    """Register the packaged embedders on first use (keeps `import embedders` cheap)."""
    global _builtins_loaded
    if _builtins_loaded:
        return
    _builtins_loaded = True  # first: the packaged modules' own register_* calls come back here
    try:
        import embedders.builtin  # noqa: F401  (registers on import)
    except BaseException:
        _builtins_loaded = False  # the next use tries again instead of a half-empty registry
        raise
    register_checkpoints()
