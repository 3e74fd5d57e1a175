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

Code outside this package registers in every process through plugins (docs/plugins.md): the
entry points of group ``facet.embedders`` of the installed distributions, and the modules named
in ``FACET_PLUGINS``, are loaded with the packaged names, so the CLI, the server, the workers
and a detached ``run-job`` child all know the same names.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import json
import logging
import os
import re
import signal
import site
import sys
import sysconfig
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast, get_type_hints

import numpy as np

from embedders.base import CONFIG_FILE, BaseEmbedder, check_format_version, recover_checkpoint
from embedders.contract import BlendsInstruction, Embedder
from embedders.errors import (
    CheckpointError,
    DuplicateRegistrationError,
    EmbedderError,
    InvalidInputError,
    PluginError,
    UnknownEmbedderError,
    UnusableVectorsError,
)

logger = logging.getLogger(__name__)

# Called as ``factory(device=..., **kwargs)``; anything with the ``Embedder`` protocol's
# members will do (a plugin need not subclass the torch-based BaseEmbedder).
EmbedderFactory = Callable[..., Embedder]
CheckpointLoader = Callable[[Path, dict[str, Any], str | None], Embedder]

PLUGIN_GROUP = "facet.embedders"  # the entry point group plugins register under
PLUGINS_ENV = "FACET_PLUGINS"  # comma-separated modules ("pkg" or "pkg.mod:function") to load


@dataclass(frozen=True)
class EmbedderInfo:
    """One registered embedder name."""

    name: str
    description: str
    kind: str  # "baseline" (packaged), "plugin" (registered by other code) or "checkpoint"
    factory: EmbedderFactory
    path: Path | None = None  # a registered checkpoint's directory
    explains: bool | None = None  # whether its model generates answers (None: not said)
    reads_instructions: bool = True  # False: its model ignores an instruction (a plugin says)
    # The class of the model its factory builds, where the registration said (``model_class=``):
    # its OPTIONS and ``config_class`` let ``check_embedder`` check options without loading it.
    model_class: type | None = None
    method: str | None = None  # a registered checkpoint's method, as its config names it


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

    def load(path: Path, meta: dict[str, Any], device: str | None) -> Embedder:
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


# Where a wheel installs the shipped checkpoints, under the environment's prefix (pyproject.toml's
# data-files): an installed package has no checkout's checkpoints/ beside it.
INSTALLED_CHECKPOINTS = Path("share", "facet-search", "checkpoints")


def default_checkpoint_dir() -> Path:
    """The project's ``checkpoints/`` folder: beside the packages in a source or editable install,
    else the copy a ``pip install`` put under ``share/facet-search/checkpoints`` of the
    environment (or of the user base, for ``pip install --user``). ``FACET_CHECKPOINT_DIR``
    (``set_checkpoint_dir``) overrides both.

    The environment's data folder is sysconfig's, then ``sys.prefix``: a system Python of
    Debian or Fedora has ``sys.prefix`` ``/usr`` while pip installs data files under
    ``/usr/local`` (their default install scheme), where the checkpoints were not looked for."""
    checkout = Path(__file__).resolve().parents[1] / "checkpoints"
    if checkout.is_dir():
        return checkout
    for base in dict.fromkeys((sysconfig.get_path("data"), sys.prefix, site.getuserbase())):
        installed = Path(base) / INSTALLED_CHECKPOINTS
        if installed.is_dir():
            return installed
    return checkout  # none: the unknown-name message says so and how to point at a folder


def _registrable(path: Path) -> bool:
    """Whether ``path`` is a checkpoint folder ``register_checkpoints`` registers; one this user
    may not look into is skipped with a warning (it stopped every command)."""
    try:
        return is_checkpoint_dir(path)
    except CheckpointError as e:
        logger.warning("checkpoint %s not registered: %s", path, e)
        return False


def set_checkpoint_dir(path: str | Path | None) -> None:
    """Where named checkpoints are looked up (the app's settings call this); None = the default."""
    global _checkpoint_dir
    _checkpoint_dir = Path(path) if path is not None else None
    # A registered checkpoint is told by its directory, not by its label: a plugin may label
    # itself "checkpoint" (``kind`` is free text), and it was removed here.
    for name in [n for n, info in _EMBEDDERS.items() if info.path is not None]:
        del _EMBEDDERS[name]
    if _builtins_loaded:
        register_checkpoints()


def checkpoint_dir() -> Path:
    return _checkpoint_dir or default_checkpoint_dir()


def checkpoint_dir_note() -> str | None:
    """Why no trained checkpoint has a name, or None when one has: the checkpoint folder is
    not there, holds no checkpoint, or is itself one checkpoint (FACET_CHECKPOINT_DIR set to a
    checkpoint rather than to the folder holding it registered nothing, with no word)."""
    _ensure_builtins()  # (asked first, before any name was looked up: nothing registered yet)
    if any(info.path is not None for info in _EMBEDDERS.values()):
        return None
    root = checkpoint_dir()
    # An installed (non-editable) package has no checkpoints/ beside it: the trained names
    # (causal2vec, inbedder...) were simply missing from the list, and nothing said why.
    set_it = ("set FACET_CHECKPOINT_DIR to a folder of checkpoints, such as a Facet checkout's "
              "checkpoints/")
    try:
        if not root.is_dir():
            return f"no checkpoints folder at {root}, so no trained checkpoint has a name: {set_it}"
        if is_checkpoint_dir(root):
            return (f"the checkpoints folder {root} is itself one checkpoint, so no trained "
                    f"checkpoint has a name: set FACET_CHECKPOINT_DIR to the folder holding it "
                    f"({root.parent}), or load it by its path")
        # Some there but none registered (a name taken, a damaged config): each was warned of
        # with why, and "holds no checkpoint folder" was false.
        if any(_holds_config(path) for path in root.iterdir()):
            return None
    except (OSError, CheckpointError):
        return None  # not looked into: register_checkpoints warned
    return (f"the checkpoints folder {root} holds no checkpoint folder (one with {CONFIG_FILE}), "
            f"so no trained checkpoint has a name: {set_it}")


def _holds_config(path: Path) -> bool:
    """Whether ``path`` looks like a checkpoint folder (its config is there), whatever it holds."""
    try:
        return (path / CONFIG_FILE).exists()
    except OSError:
        return True  # (not looked into: warned of as such)


def register_checkpoints() -> list[str]:
    """Register every checkpoint directory directly under ``checkpoint_dir()`` by its folder name
    (a name already taken by a baseline is skipped with a warning). Returns the names added."""
    root = checkpoint_dir()
    added: list[str] = []
    if not root.is_dir():
        return added
    for path in sorted(p for p in root.iterdir() if _registrable(p)):
        name = path.name.lower()
        try:
            # A plugin's name rule: 'x,y' could not be written in --baselines, 'a#b' broke the
            # vector store, and both were listed and loaded.
            _check_name(name)
        except PluginError as e:
            logger.warning("checkpoint %s not registered: %s; rename the folder (or load it by "
                           "its path)", path, e)
            continue
        if name in _EMBEDDERS:
            held = _EMBEDDERS[name]
            if held.path is None:
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
        method = meta.get("method") if isinstance(meta, dict) else None
        if not isinstance(method, str):  # {"method": 5} read "trained 5 checkpoint"
            method = None
        description = f"trained {method or '?'} checkpoint ({path})"

        def factory(device: str | None = None, _path: Path = path, **_: Any) -> Embedder:
            return load_checkpoint(_path, device=device)

        _EMBEDDERS[name] = EmbedderInfo(name, description, "checkpoint", factory, path.resolve(),
                                        method=method)
        added.append(name)
    return added


# Characters a registered name may not hold: lists of embedders are comma-separated
# (``FACET_API_MODELS``, ``facet eval -e a,b``), ``name[key=value]`` gives options, and a name with
# a path separator (``../evil``) is read as a folder where a checkpoint is looked up.
_NAME_REFUSED = frozenset(",[]/\\")
_NAME_ALLOWED = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")  # the store's vector names


def _check_name(name: object) -> str:
    """``name`` as ``register_embedder`` keeps it (lower case).

    Raises:
        PluginError: not a string, blank, ``.``/``..``, or holding a space or control character
            or one of ``, [ ] / \\``: such a name could never be loaded by every command, or
            broke the lists and paths embedder names are written in.
    """
    if not isinstance(name, str):
        raise PluginError(f"an embedder name must be a string, got {type(name).__name__} ({name!r:.40})")
    bad = sorted({c for c in name if c in _NAME_REFUSED or c.isspace() or not c.isprintable()})
    if not name.strip() or name in (".", "..") or bad:
        why = (f"it holds {', '.join(repr(c) for c in bad)}" if bad else "it is blank or a folder's name")
        raise PluginError(
            f"embedder name {name!r} is refused: {why}; a name is written in comma-separated lists, "
            "with options after it in brackets (NAME[key=value]) and beside folder paths, so it "
            "may not hold a space, a control character, ',', '[', ']', '/' or '\\'")
    if not _NAME_ALLOWED.fullmatch(name):
        # The vector store's rule for the vector name a collection keeps its vectors under
        # (``indexer.store.validate_name``): 'a#b', '--help', 'ünï' or a 300-character name
        # registered, listed and embedded, then every `facet index` failed with "invalid vector
        # name", naming no plugin, and left an empty collection behind (the plugin exploration).
        raise PluginError(
            f"embedder name {name!r} is refused: a collection keeps its vectors under its "
            "embedder's name, which must be 1-128 ASCII letters, digits, '_', '-' or '.', "
            "starting with a letter or digit")
    return name.lower()


def _owner(obj: object) -> str:
    """The module that defined ``obj`` (a factory, a loader), for messages."""
    return str(getattr(obj, "__module__", None) or "?")


def _trusted(obj: object) -> bool:
    """Whether ``obj`` (a factory, a checkpoint loader) is Facet's own (``embedders.*``): its
    models are built and tested with Facet, and are not wrapped in ``PluginModel``."""
    owner = _owner(obj)
    return owner == "embedders" or owner.startswith("embedders.")


def register_embedder(name: str, factory: EmbedderFactory, description: str, kind: str | None = None,
                      *, explains: bool | None = None, reads_instructions: bool = True,
                      model_class: type | None = None) -> None:
    """Make ``name`` loadable with ``load_embedder(name)``.

    Args:
        name: the name to load it by (kept lower case); the model ``factory`` builds must carry
            it as its ``name``, the name a collection records its vectors under.
        factory: called as ``factory(device=..., **kwargs)``; returns an ``Embedder``.
        description: one line for ``facet embedders``.
        kind: the label ``facet embedders`` shows; default ``baseline`` for the packaged
            embedders, ``plugin`` for any other code's.
        explains: whether the model generates answers (an ``AnswerGenerator``, a cluster
            explainer); None leaves ``answers_questions`` unable to tell without loading it.
        reads_instructions: False for a model whose vectors an instruction does not change (a
            hashing or bag-of-words model): searches say its instruction was not read, and
            ``auto`` mode stays hybrid for it (``reads_instructions``).
        model_class: the class of the model ``factory`` builds, whose ``OPTIONS`` (and
            ``config_class``, a dataclass, if it has one) ``check_embedder`` checks a spec's
            ``[key=value]`` options against without loading it. Default: a class registered as
            its own factory, else the concrete class the factory's return annotation names
            (``def factory(**kw) -> MyEmbedder``); with neither, options are checked when the
            model loads.

    Raises:
        DuplicateRegistrationError: the name is taken (by a packaged embedder or checkpoint too,
            even before anything was loaded: a plugin registering ``minilm`` first broke the
            packaged names' registration for the whole process).
        PluginError: a name no command could load or list (``_check_name``): blank, or holding
            a space, a control character, ``,``, ``[``, ``]``, ``/`` or ``\\``.
    """
    key = _check_name(name)
    _ensure_builtins()
    if key in _EMBEDDERS:
        owner = getattr(_EMBEDDERS[key].factory, "__module__", "?")
        raise DuplicateRegistrationError(
            f"an embedder named {name!r} is already registered (by {owner}); pick another name"
        )
    if kind is None:
        kind = "baseline" if getattr(factory, "__module__", "") == "embedders.builtin" else "plugin"
    _EMBEDDERS[key] = EmbedderInfo(key, description, kind, factory, explains=explains,
                                   reads_instructions=bool(reads_instructions), model_class=model_class)


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
    """All registered embedder names, sorted. A checkpoint whose method no loader serves (its
    plugin not installed, a config edited) says so in its description, read at the time of
    listing, so a loader a plugin registers later is seen: it was listed as any other
    ("trained nosuch checkpoint") and failed only when loaded."""
    _ensure_builtins()
    return [_unloadable(_EMBEDDERS[k]) for k in sorted(_EMBEDDERS)]


def _unloadable(info: EmbedderInfo) -> EmbedderInfo:
    if info.path is None or info.method in _LOADERS:  # (a plugin labelled "checkpoint" loads)
        return info
    why = (f"method {info.method!r} has no loader (a plugin not installed?)" if info.method
           else "its config names no method")
    return dataclasses.replace(info, description=f"{info.description}; cannot be loaded: {why}")


def embedder_names() -> list[str]:
    return [info.name for info in list_embedders()]


def _checkpoint_path(spec: str | Path, *, log: bool = False) -> Path | None:
    """The checkpoint directory the path ``spec`` names, or None. A relative ``checkpoints/NAME``
    (the form of the docs and of the commands the results files record) that is not a checkpoint
    from the working directory is looked up under ``checkpoint_dir()``: from any other folder, or
    with an installed package, it was an unknown embedder. The model, and so its identity (the
    eval caches' key), is the same as from the checkout's root."""
    if not str(spec).strip():  # no path: Path("") is the current folder, which it never named
        return None
    path = Path(spec)
    refused: CheckpointError | None = None
    try:
        if is_checkpoint_dir(path):
            return path
    except CheckpointError as e:  # a folder on its way this user may not enter (the current one)
        refused = e
    if len(path.parts) > 1 and path.parts[0] == "checkpoints":
        shipped = checkpoint_dir().joinpath(*path.parts[1:])
        if is_checkpoint_dir(shipped):
            if log:
                logger.info("%s: no such checkpoint in %s; loading the shipped %s", spec, _cwd(), shipped)
            return shipped
    # A bare name is not one (``_unknown`` says the folder could not be looked into); so a
    # registered name with options (``minilm[pooling=mean]``) is read as one.
    if refused is not None and not _bare(str(spec)):
        raise refused
    return None


def _cwd() -> str:
    """The current folder's path, or a word for it where it has none (deleted)."""
    try:
        return os.getcwd()
    except OSError:
        return "the current folder"


def _cwd_unreadable() -> bool:
    """Whether this user may not look into the current folder (``chmod 000``, another user's
    ``700``): a relative path, a bare name's folder, cannot be looked up there."""
    return not os.access(os.curdir, os.R_OK | os.X_OK)


def registered_checkpoint(name: str) -> Path | None:
    """The directory of the checkpoint registered as the bare ``name`` (``causal-eos``), or None
    where ``name`` is not one: a path, another kind of embedder, or no registered name."""
    _ensure_builtins()
    info = _EMBEDDERS.get(name.lower())
    return info.path if info is not None and _bare(name) else None


def _bare(name: str) -> bool:
    """A name, not a path: no separator (``./causal-eos`` is the folder, ``causal-eos`` the name)."""
    return "/" not in name and os.sep not in name


def shown_path(path: str | Path) -> str:
    """A checkpoint path as a log records it: a folder of the working directory keeps its
    ``./`` (``Path("./causal-eos")`` prints ``causal-eos``, which names the registered
    checkpoint: a train log or a soup's ingredients read as if it went in)."""
    text = str(path)
    return text if not _bare(text) else f".{os.sep}{text}"


_SHADOWED_SAID: set[str] = set()


def warn_if_shadowed(name: str) -> None:
    """Say (once per process) that a registered ``name`` is loaded, not the checkpoint folder of
    that name in the working directory (``facet train --out causal-eos`` made one): every
    command reads a bare registered name as the registered model (``facet soup`` and
    ``--init-from`` took the folder, the others the shipped model), and ``./NAME`` the folder."""
    if not _bare(name) or name in _SHADOWED_SAID:
        return
    try:
        if not is_checkpoint_dir(name):
            return
    except CheckpointError as e:  # the current folder unreadable: the name loads all the same
        logger.debug("could not look for a checkpoint folder ./%s in %s: %s", name, _cwd(), e)
        return
    info = _EMBEDDERS.get(name.lower())
    if info is None or (info.path is not None and info.path == Path(name).resolve()):
        return
    _SHADOWED_SAID.add(name)
    what = f"the registered checkpoint {info.path}" if info.path is not None else f"the registered {info.kind} embedder"
    logger.warning("%r is %s; the checkpoint folder ./%s in %s is not loaded: write ./%s to load it",
                   name, what, name, Path.cwd(), name)


def is_checkpoint_dir(path: str | Path) -> bool:
    """Whether ``path`` is a checkpoint folder (it holds ``facet_config.json``; one a kill left
    mid-save is recovered first).

    Raises:
        CheckpointError: it cannot be looked into (a folder on its way this user may not enter,
            the current one for a relative path): Python 3.11's ``is_file`` raised the
            PermissionError, a traceback from every command run in such a folder.
    """
    if not str(path).strip():  # no path (Path("") is ".", whose checkpoint it never named)
        return False
    try:
        if (Path(path) / CONFIG_FILE).is_file():
            return True
        return recover_checkpoint(path) and (Path(path) / CONFIG_FILE).is_file()
    except CheckpointError:
        raise
    except OSError as e:
        hint = ""
        if not Path(path).is_absolute() and _cwd_unreadable():
            hint = (f"; this user may not look into the current folder {_cwd()}: cd to another "
                    "folder, or give the checkpoint's full path")
        raise CheckpointError(f"cannot look for a checkpoint in {shown_path(path)}: {e.strerror or e} "
                              f"({e.filename}){hint}") from e


def read_checkpoint_config(directory: Path) -> dict[str, Any]:
    """The saved ``facet_config.json`` of a checkpoint directory, without loading any weights.

    Raises:
        CheckpointError: the file is missing or not valid JSON, or it was saved in a format this
            Facet cannot read (``check_format_version``).
    """
    config_path = directory / CONFIG_FILE
    try:
        meta = json.loads(config_path.read_text())
    except FileNotFoundError as e:
        raise CheckpointError(f"{directory} is not a Facet checkpoint: {CONFIG_FILE} is missing") from e
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{config_path} is not valid JSON: {e}") from e
    check_format_version(meta, directory)
    return cast(dict[str, Any], meta)


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
    loader = _LOADERS[method]
    if _trusted(loader):
        return cast(BaseEmbedder, loader(directory, config, device))
    label = f"checkpoint {shown_path(directory)} (method {method!r}, loaded by {_owner(loader)})"
    model = _guarded_load(label, lambda: loader(directory, config, device))
    return cast(BaseEmbedder, _checked_model(model, label))


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


def join_options(base: str, options: dict[str, str]) -> str:
    """``split_options``'s inverse: ``("name", {"k": "v"})`` -> ``"name[k=v]"``; no options ->
    ``base``."""
    if not options:
        return base
    return f"{base}[{','.join(f'{k}={v}' for k, v in options.items())}]"


def _offered(fields: Any, declared: Any) -> list[str]:
    """The options an embedder offers: its config's fields (``fields``: their names; None where
    its config is not known, then every name) that its ``OPTIONS`` (``declared``) names."""
    names = set(declared or ())
    return sorted(names if fields is None else (k for k in fields if k in names))


def _no_option(name: str, key: str, options: list[str]) -> InvalidInputError:
    return InvalidInputError(
        f"embedder {name!r} has no option {key!r}; options: {', '.join(options) or 'none'}"
        + ("" if options else " (an embedder offers the fields of its `config` dataclass that "
           "its OPTIONS tuple names)"))


def _parse_option(name: str, model_class: type, config: Any, key: str, value: str) -> tuple[Any, bool]:
    """``key=value`` read for an embedder named ``name`` of class ``model_class`` whose config (a
    dataclass instance) is ``config``, ``key`` being one of its options: the value parsed as the
    field's current type, and whether a settable property of the class takes it (its setter
    validates the value) rather than the config field directly.

    Raises:
        InvalidInputError: the value does not parse, or the class has a read-only property of
            that name.
    """
    current = getattr(config, key)
    kind_of = type(current)
    if kind_of is int and _declared_type(config, key) == "float":
        # A float field a config saved as a whole number ("instruction_weight": 1): read as
        # an int, "0.5" was refused as "expected a whole number".
        kind_of = float
    try:
        parsed: Any
        if isinstance(current, bool):
            if value.lower() not in ("true", "false", "1", "0"):
                raise ValueError(value)
            parsed = value.lower() in ("true", "1")
        else:
            parsed = kind_of(value)
    except ValueError as e:
        kind = {"int": "whole number", "float": "number", "bool": "true or false",
                "str": "text"}.get(kind_of.__name__, kind_of.__name__)
        raise InvalidInputError(f"option {key}={value!r}: expected a {kind}") from e
    attribute = getattr(model_class, key, None)
    if not isinstance(attribute, property):
        return parsed, False
    if attribute.fset is None:
        # A read-only property was an AttributeError traceback (`toy[dim=16]`); setting
        # the config field under it could leave whatever the model built from it stale.
        raise InvalidInputError(
            f"option {key!r} of embedder {name!r} cannot be set: {model_class.__name__}."
            f"{key} is a read-only property; the embedder should give it a setter, or "
            "drop it from OPTIONS")
    return parsed, True


def _declared_type(config: Any, key: str) -> str | None:
    """The type a dataclass config declares for field ``key`` (as written: "float",
    "int | None"), its first part; None where it declares none."""
    if not dataclasses.is_dataclass(config):
        return None
    for f in dataclasses.fields(config):
        if f.name == key:
            declared = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
            return declared.split("|")[0].strip()
    return None


def _replaced(config: Any, key: str, value: str, parsed: Any) -> Any:
    """A copy of ``config`` with ``key`` set to ``parsed``, made by ``dataclasses.replace``, which
    runs the config's checks.

    Raises:
        InvalidInputError: the config's checks refuse the value (their message).
    """
    try:
        return dataclasses.replace(config, **{key: parsed})
    except ValueError as e:
        raise InvalidInputError(f"option {key}={value!r}: {e}") from e


def apply_option(model: Embedder, key: str, value: str) -> None:
    """Set an inference-time option (a field of the model's config) from its string form.

    The value is parsed as the field's current type, so ``soft_tokens=10`` becomes an int.

    Raises:
        InvalidInputError: the model has no such option, or the value does not parse.
    """
    model = unwrapped(model)  # (a plugin's: its class's properties take the values)
    config = getattr(model, "config", None)
    options = _offered(getattr(config, "__dataclass_fields__", {}), getattr(model, "OPTIONS", ()))
    if key not in options:
        raise _no_option(model.name, key, options)
    parsed, through_property = _parse_option(model.name, type(model), config, key, value)
    if not through_property:
        _replaced(config, key, value, parsed)  # runs the config's checks
        setattr(config, key, parsed)
        return
    try:
        setattr(model, key, parsed)  # a property validates the value
    except ValueError as e:
        raise InvalidInputError(f"option {key}={value!r}: {e}") from e


def check_options(name: str, model_class: type, config: Any, options: dict[str, str]) -> None:
    """Check ``options`` (``split_options``'s) as ``apply_option`` would apply them, one after
    another, to the embedder named ``name`` of class ``model_class``, without one. ``config``
    is the config it would load with (a dataclass instance: names and values are checked, the
    values by the config's own checks, a property's too, as its setter makes them), its config
    class (names only), or None where only the class is known (names checked against its
    ``OPTIONS``); unchecked values are checked when it loads, as are a setter's checks that need
    the loaded model (a ``max_length`` past the backbone's positions).

    Raises:
        InvalidInputError: as ``apply_option``, with its messages.
    """
    fields = None if config is None else getattr(config, "__dataclass_fields__", {})
    offered = _offered(fields, getattr(model_class, "OPTIONS", ()))
    for key, value in options.items():
        if key not in offered:
            raise _no_option(name, key, offered)
        if config is not None and not isinstance(config, type):
            parsed = _parse_option(name, model_class, config, key, value)[0]
            config = _replaced(config, key, value, parsed)


def load_embedder(name_or_path: str | Path, *, device: str | None = None, **kwargs: Any) -> BaseEmbedder:
    """Build an embedder by registered name or from a checkpoint directory.

    Args:
        name_or_path: a name from ``facet embedders`` or a directory holding facet_config.json.
        device: device override (``cpu``, ``cuda``...).
        **kwargs: passed to the factory of a named embedder.

    Returns:
        typed as the packaged models are, for the code that trains and benchmarks them; a
        plugin's model need only have the ``Embedder`` protocol's members.

    Raises:
        UnknownEmbedderError: neither a registered name nor a checkpoint; lists the valid names.
        PluginError: a registered factory that cannot be called as ``factory(device=...,
            **kwargs)``, or whose model is not named as it is registered.
    """
    if not isinstance(name_or_path, str | Path) or not str(name_or_path).strip():
        raise _unknown(name_or_path)
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
        warn_if_shadowed(str(name_or_path))
        return cast(BaseEmbedder, _build(_EMBEDDERS[key], device, kwargs))
    directory = _checkpoint_path(name_or_path, log=True)
    if directory is not None:
        return load_checkpoint(directory, device=device)
    raise _unknown(str(name_or_path))


def _build(info: EmbedderInfo, device: str | None, kwargs: dict[str, Any]) -> Embedder:
    """``info``'s model, from its factory; a factory or model that breaks the contract is
    refused with what to change, not a TypeError traceback or vectors under another name."""
    owner = getattr(info.factory, "__module__", "?")
    try:
        inspect.signature(info.factory).bind(device=device, **kwargs)
    except TypeError as e:
        raise PluginError(
            f"embedder {info.name!r} (registered by {owner}) cannot be built: its factory is called "
            f"as factory(device=..., **kwargs) and refused that ({e}); define it as "
            "`def factory(device=None, **kwargs)`") from None
    except ValueError:  # no signature to read (a builtin): let the call tell
        pass
    trusted = _trusted(info.factory)
    label = f"embedder {info.name!r} (registered by {owner})"
    if trusted:
        model = info.factory(device=device, **kwargs)
    else:
        model = _guarded_load(label, lambda: info.factory(device=device, **kwargs))
    # A collection records the vectors under the model's name and the commands look them up by
    # the registered one (``saved_name``): `toy2` building a model named `toy-hash2` indexed
    # vectors no search found, and `minilm-plain` building one named `minilm` wrote into the
    # packaged model's vectors.
    if info.path is None and getattr(model, "name", None) != info.name:
        raise PluginError(
            f"embedder {info.name!r} (registered by {owner}) built a model named "
            f"{getattr(model, 'name', None)!r}; a registered embedder's model must carry the name "
            f"it is registered under ({info.name!r}, lower case), the name collections record its "
            "vectors under")
    return model if trusted else _checked_model(model, label)


# -- a plugin's model, held to the contract --------------------------------------------------

# The members of the ``Embedder`` protocol a model must have: without one it was refused only
# where it was first used (an AttributeError after a collection had been created).
_REQUIRED = ("name", "dim", "identity", "encode")
# Methods of a model that return vectors, besides ``encode``, that the application calls
# (``EncodesFromPlain``): ``PluginModel`` checks their output as it checks ``encode``'s.
_VECTOR_METHODS = frozenset({"encode_from_plain"})
# A row whose length is this close to 1 is kept as it is (not divided by its norm again).
_UNIT_TOLERANCE = 1e-5


# ``plugin_stdout``'s state: how many threads are inside it, and the stdout it put aside.
_STDOUT_LOCK = threading.Lock()
_stdout_users = 0
_stdout_kept: Any = None


@contextlib.contextmanager
def plugin_stdout() -> Iterator[None]:
    """Within it, what is written to ``sys.stdout`` (a plugin's ``print()``: a debug line in its
    import, factory or ``encode``) goes to standard error: it was written into the machine
    output of `facet embedders --json`, `facet embed` and `search --json`, which then did not
    parse. ``contextlib.redirect_stdout(sys.stderr)``, but counted across threads (the server
    and the encoders call plugins from several): the first in puts stdout aside and the last
    out puts it back, where two ``redirect_stdout`` interleaved could leave stdout on stderr.
    Whatever any thread prints in that time goes to stderr too (Facet's own output is
    printed once the plugin has returned)."""
    global _stdout_users, _stdout_kept
    with _STDOUT_LOCK:
        if _stdout_users == 0:
            _stdout_kept = sys.stdout
            sys.stdout = sys.stderr
        _stdout_users += 1
    try:
        yield
    finally:
        with _STDOUT_LOCK:
            _stdout_users -= 1
            if _stdout_users == 0:
                sys.stdout, _stdout_kept = _stdout_kept, None


def _guarded_load(label: str, load: Callable[[], Any]) -> Any:
    """``load()``, a plugin's factory or checkpoint loader: an error of its own that is not an
    ``EmbedderError`` (a RuntimeError "weights file missing") was a raw traceback in the CLI and
    an anonymous 500 "internal error (RuntimeError)"; it is a ``PluginError`` naming the
    embedder and the plugin. An ``EmbedderError`` it raises says what it means and is kept. A
    ``SystemExit`` (a plugin's ``sys.exit()``) is one too: it ended the command with the plugin's
    exit status and nothing said (a KeyboardInterrupt is passed on). What it prints goes to
    standard error (``plugin_stdout``). The guard is ``_guarded_call``'s, worded "failed to load"."""
    return _guarded_call(label, "load", load, doing="to load")


def _checked_model(model: Any, label: str) -> Embedder:
    """``model`` (a plugin's) checked for the protocol's members and wrapped in a ``PluginModel``.

    Raises:
        PluginError: a member of the ``Embedder`` protocol is missing (``encode`` not callable,
            ``dim`` not a positive whole number).
    """
    if isinstance(model, PluginModel):  # a plugin's factory that loads another plugin's model
        model = model.unwrapped
    # (looked up without running a property, such as an identity that digests the weights; a
    # model that makes its members up in __getattr__ is asked)
    missing = [m for m in _REQUIRED
               if inspect.getattr_static(model, m, _MISSING) is _MISSING and not hasattr(model, m)]
    if missing:
        raise PluginError(
            f"{label} built a model ({type(model).__name__}) without {', '.join(missing)}, which "
            "the Embedder protocol requires (name, dim, identity and encode: docs/plugins.md)")
    if not callable(getattr(model, "encode", None)):
        raise PluginError(f"{label} built a model whose encode is not a method (docs/plugins.md)")
    _dim(model, label)
    # An identity held as a value (not a property, which may digest the weights: it is checked
    # where it is read, by ``PluginModel``) is checked now: `identity = None` indexed a collection
    # that recorded no embedder, and every later search of it failed.
    if not hasattr(type(inspect.getattr_static(model, "identity", None)), "__get__"):
        _identity(getattr(model, "identity", None), label)
    return cast(Embedder, PluginModel(model, label))


_MISSING = object()


def _identity(identity: Any, label: str) -> str:
    """``identity``, a plugin's model's, as the str the contract says it is.

    Raises:
        PluginError: anything else (None, a dict), or an empty or blank string: it told no two
            embedders' vectors apart (each collection records the identity it was indexed with).
    """
    if not isinstance(identity, str):
        raise PluginError(
            f"{label} has identity {identity!r:.80} ({type(identity).__name__}); it must be a string, "
            "such as json.dumps({...}) of the settings its vectors depend on (docs/plugins.md)")
    if not identity.strip():
        raise PluginError(
            f"{label} has identity {identity!r:.80} (a blank string); it must be a string that is not "
            "blank, such as json.dumps({...}) of the settings its vectors depend on (docs/plugins.md)")
    return identity


def _member(model: Any, name: str, label: str) -> Any:
    """A plugin's model's ``name`` (``dim``, ``identity``: a property may run the plugin's code,
    such as an identity that digests the weights), read as ``_guarded_call`` calls its methods:
    a property that raises or exits is a ``PluginError`` naming the plugin (it was the property's
    own traceback, or the end of the command with the plugin's status), and what it prints goes
    to standard error."""
    return _guarded_call(label, name, getattr, model, name, doing=f"reading its {name}")


def _guarded_call(label: str, method: str, function: Callable[..., Any], *args: Any,
                  doing: str | None = None, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)``, a plugin's model's ``method``: an error of its own that is not
    an ``EmbedderError`` (a RuntimeError "backend crashed", the TypeError of an ``encode`` without
    the ``role`` keyword) was a raw traceback in the CLI and an anonymous 500 "internal error
    (RuntimeError)"; it is a ``PluginError`` naming the embedder, the plugin and the error. An
    ``EmbedderError`` it raises (``InvalidInputError``) says what it means and is kept, as are a
    MemoryError and, in the main thread (a Ctrl-C), a KeyboardInterrupt; elsewhere (a server's
    request thread) that is a ``PluginError`` too. A ``SystemExit`` it raises (``sys.exit()``) is a
    ``PluginError`` too: it ended the command, or a server's worker, with the plugin's status.
    What it prints goes to standard error (``plugin_stdout``). ``doing`` words the failure
    ("reading its dim"; by default "in METHOD")."""
    try:
        with plugin_stdout():
            return function(*args, **kwargs)
    except (EmbedderError, MemoryError):
        raise
    except KeyboardInterrupt as e:
        if threading.current_thread() is threading.main_thread() and not _ctrl_c_ignored():
            raise  # a Ctrl-C: it stops the command
        # Raised by the plugin itself (a signal reaches the main thread only, none where it is
        # ignored, as in a worker's pool processes, and an index job's first Ctrl-C raises
        # nothing, ``_ctrl_c_ignored``): it ended the whole of `facet serve` from
        # one request (the plugin exploration), and a worker's pool process, whose caller then
        # read "the worker failed: WorkerLostError".
        raise PluginError(f"{label} failed {doing or 'in ' + method}: KeyboardInterrupt raised by "
                          "its code, where no Ctrl-C raises one") from e
    except (Exception, SystemExit) as e:
        hint = ""
        refused = [k for k in kwargs if not _takes_keyword(function, k)]
        if isinstance(e, TypeError) and refused:
            first = "texts" if method == "encode" else "plain, texts"
            hint = (f" (it does not take {', '.join(refused)}: Facet calls {method}({first}, *, role=..., "
                    "instruction=..., batch_size=...), docs/plugins.md)")
        raise PluginError(f"{label} failed {doing or 'in ' + method}: {type(e).__name__}: {e}{hint}") from e


def _dim(model: Any, label: str) -> int:
    """``model.dim`` as an int.

    Raises:
        PluginError: not a positive whole number.
    """
    dim = _member(model, "dim", label)
    if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or dim < 1:
        raise PluginError(f"{label} has dim {dim!r}; the vector width must be a positive whole number")
    return int(dim)


def checked_vectors(out: Any, count: int, model: Any, label: str, method: str = "encode") -> np.ndarray:
    """``out``, what a plugin's ``method`` returned for ``count`` texts, as the contract says
    every embedder returns it: float32 ``(count, dim)``, every value finite, each row of unit
    length (rows a little off are divided by their norm).

    Raises:
        PluginError: anything else, naming the embedder, the plugin and what was wrong: not an
            array of numbers, another shape (1-D; a row short; 127 columns under a dim of
            128), a NaN or infinity (it was written into the JSON and the index as is), an
            all-zero row (no direction to compare).
    """
    said = f"{label} returned"
    if callable(getattr(out, "detach", None)) and callable(getattr(out, "cpu", None)):
        # A torch tensor: numpy reads neither one on a GPU nor bfloat16, an LLM's usual dtype
        # (refused: "Got unsupported ScalarType BFloat16"; the plugin exploration).
        out = out.detach().cpu()
        if "bfloat16" in str(getattr(out, "dtype", "")):
            out = out.float()
    try:
        array = np.asarray(out)
    except Exception as e:
        raise PluginError(f"{said} {type(out).__name__} from {method}, not an array of vectors ({e})") from e
    kind = array.dtype.kind
    if kind not in "fiu":  # (bool, complex, object, text)
        raise PluginError(f"{said} {type(out).__name__} of {array.dtype} from {method}; it must return "
                          "an array of numbers (float32)")
    dim = _dim(model, label)
    if array.shape != (count, dim):
        if array.ndim != 2:
            got = f"a {array.ndim}-D array of shape {array.shape}"
        elif array.shape[0] != count:
            got = f"{array.shape[0]} vector{'s' if array.shape[0] != 1 else ''}"
        else:
            got = f"vectors of {array.shape[1]} values"
        raise PluginError(f"{said} {got} from {method} for {count} text{'s' if count != 1 else ''}; it must "
                          f"return one row of dim={dim} values per text, shape ({count}, {dim})")
    with np.errstate(over="ignore", invalid="ignore"):
        vectors = array.astype(np.float32, copy=False)
        if not np.isfinite(vectors.sum(dtype=np.float64)):  # (a NaN or infinity reaches the sum)
            finite = np.isfinite(vectors).all(axis=1)
            # (counted from 1, as `facet embed` counts)
            first = f" (the first: text {int(np.argmin(finite)) + 1})" if count > 1 else ""
            raise UnusableVectorsError(f"{said} non-finite values (NaN or infinity, or past float32's range) "
                                       f"from {method} for {int((~finite).sum())} of {count} "
                                       f"text{'s' if count != 1 else ''}{first}")
        norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors)).astype(np.float64)
    odd = (norms == 0) | ~np.isfinite(norms)  # squares under or over float32's range: in float64
    if odd.any():
        norms[odd] = np.linalg.norm(vectors[odd].astype(np.float64), axis=1)
    zero = norms == 0
    if zero.any():
        first = f" (the first: text {int(np.argmax(zero)) + 1})" if count > 1 else ""
        raise UnusableVectorsError(f"{said} an all-zero vector from {method} for {int(zero.sum())} of {count} "
                                   f"text{'s' if count != 1 else ''}{first}; a vector must have a direction to be "
                                   "compared: return a fixed unit vector for a text with nothing to read, or "
                                   "refuse it with InvalidInputError")
    if np.all(np.abs(norms - 1.0) <= _UNIT_TOLERANCE):
        return vectors
    return (vectors / norms[:, None]).astype(np.float32)


def _ctrl_c_ignored() -> bool:
    """Whether no Ctrl-C can raise KeyboardInterrupt here now: this process ignores SIGINT
    (Celery's pool processes do), or its SIGINT handler defers a first Ctrl-C and has had none
    (an index job's, ``app.services.indexing._DeferredInterrupt``: it only sets a flag, checked
    between batches; a handler says so by a true ``defers_ctrl_c`` and its ``requested``), or
    its handler never raises one (a true ``raises_no_keyboard_interrupt``: Celery's in a
    worker's main process, where ``--pool solo`` runs the tasks: it ended that worker). A
    plugin's own KeyboardInterrupt there read "stopped (Ctrl-C)" on a job no one stopped, a
    detached ``--background`` one too."""
    try:
        handler = signal.getsignal(signal.SIGINT)
    except (AttributeError, ValueError):  # (no SIGINT on this platform)
        return False
    if handler is signal.SIG_IGN or getattr(handler, "raises_no_keyboard_interrupt", False) is True:
        return True  # (the second: a Celery worker's own handler, marked by ``worker.app``)
    owner = getattr(handler, "__self__", None)
    return getattr(owner, "defers_ctrl_c", False) is True and getattr(owner, "requested", True) is False


def _takes_keyword(function: Any, keyword: str) -> bool:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == keyword or p.kind is p.VAR_KEYWORD for p in parameters)


class PluginModel:
    """A plugin's model, as ``load_embedder`` returns it: every attribute is the model's (read,
    set and deleted through), ``isinstance`` sees the model's class and the protocols it
    meets, and what its ``encode`` (and ``encode_from_plain``) return is checked by
    ``checked_vectors``, so every caller (embed, index, search, rerank, cluster, eval, the
    workers) gets float32 ``(len(texts), dim)`` unit rows or a ``PluginError`` naming the
    plugin. Facet's own models are not wrapped.
    """

    __slots__ = ("__weakref__", "_facet_label", "_facet_model", "_facet_progress")

    def __init__(self, model: Any, label: str) -> None:
        object.__setattr__(self, "_facet_model", model)
        object.__setattr__(self, "_facet_label", label)
        object.__setattr__(self, "_facet_progress", _takes_keyword(model.encode, "show_progress"))

    @property
    def unwrapped(self) -> Any:
        """The plugin's own model."""
        return self._facet_model

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance(wrapped, PluginsBaseClass) holds
        return type(self._facet_model)

    def encode(self, texts: Any, *args: Any, **kwargs: Any) -> np.ndarray:
        """The model's ``encode``, checked; ``show_progress`` is passed only where it takes it."""
        if not self._facet_progress:
            kwargs.pop("show_progress", None)
        if not hasattr(texts, "__len__"):
            texts = list(texts)
        out = _guarded_call(self._facet_label, "encode", self._facet_model.encode, texts, *args, **kwargs)
        return checked_vectors(out, len(texts), self._facet_model, self._facet_label)

    def _checked_method(self, name: str, method: Callable[..., Any]) -> Callable[..., np.ndarray]:
        def call(first: Any, texts: Any, *args: Any, **kwargs: Any) -> np.ndarray:
            if not hasattr(texts, "__len__"):
                texts = list(texts)
            out = _guarded_call(self._facet_label, name, method, first, texts, *args, **kwargs)
            return checked_vectors(out, len(texts), self._facet_model, self._facet_label, name)

        with contextlib.suppress(TypeError, ValueError):  # (the model's, for callers that read it)
            call.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
        call.__name__ = call.__qualname__ = name
        call.__doc__ = method.__doc__
        return call

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_facet_"):  # (unpickling, before __init__): not the model's
            raise AttributeError(name)
        if name == "identity":  # (a property's value: a plain one was checked at load)
            return _identity(_member(self._facet_model, name, self._facet_label), self._facet_label)
        if name == "dim":
            return _member(self._facet_model, name, self._facet_label)
        value = getattr(self._facet_model, name)
        if name in _VECTOR_METHODS and callable(value):
            return self._checked_method(name, value)
        if name == "generate_answers" and callable(value):
            # An explainer's answers go through the same guard as encode: a KeyboardInterrupt
            # it raised killed `facet serve`'s encoder thread (every later encode hung) and a
            # worker's pool process (the task re-delivered, crashing each one in turn).
            label = self._facet_label

            def answers(*args: Any, **kwargs: Any) -> Any:
                return _guarded_call(label, name, value, *args, **kwargs)

            answers.__name__ = answers.__qualname__ = name
            answers.__doc__ = value.__doc__
            return answers
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._facet_model, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._facet_model, name)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self._facet_model)) | {"encode", "unwrapped"})

    def __reduce__(self) -> tuple[Any, ...]:
        return PluginModel, (self._facet_model, self._facet_label)

    def __repr__(self) -> str:
        return f"<checked {self._facet_model!r}>"


def unwrapped(model: Any) -> Any:
    """The plugin's own model behind a ``PluginModel``; any other model as it is."""
    return model.unwrapped if isinstance(model, PluginModel) else model


def _split_spec(spec: str) -> tuple[str, dict[str, str]]:
    """``split_options``, except that a registered name or a checkpoint directory whose own name
    ends in brackets is read as it is (a real name wins over the ``name[key=value]`` reading)."""
    if spec.lower() in _EMBEDDERS or _checkpoint_path(spec) is not None:
        return spec, {}
    # Options after such a name (`runs/eos[v2][max_length=64]`): the name is what comes before
    # the last pair of brackets, where it is real (it was refused, "give the options in one
    # pair of brackets", which that folder cannot).
    base = spec[:-1].rpartition("[")[0] if spec.endswith("]") else ""
    if ("[" in base or "]" in base) and (base.lower() in _EMBEDDERS or _checkpoint_path(base) is not None):
        return base, split_options("name" + spec[len(base):])[1]
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
    directory = info.path if info is not None else _checkpoint_path(base)
    return (info, directory) if directory is not None and is_checkpoint_dir(directory) else (None, None)


def embedder_method(name_or_path: str) -> str | None:
    """The method of the model ``name_or_path`` loads, known without loading it: a checkpoint's
    config's, or the ``method`` of the class a registered name builds (``_model_class``); None
    where nothing says (a plugin whose class is not known, a name that is none)."""
    info, directory = _resolve(str(name_or_path))
    if directory is not None:
        method = read_checkpoint_config(directory).get("method")
        return method if isinstance(method, str) else None
    model_class = _model_class(info) if info is not None else None
    method = getattr(model_class, "method", None) if model_class is not None else None
    return method if isinstance(method, str) else None


# What a saved checkpoint holds beside its config (``BaseEmbedder.save``).
_WEIGHT_FILES = ("adapter.safetensors", "heads.safetensors")


def config_missing(path: str | Path) -> str | None:
    """What to say of a folder holding a checkpoint's weights but no ``facet_config.json``
    (lost in a copy, deleted by hand), else None: it was "unknown embedder ...: not a
    registered name" (exit 2), as if the path were mistyped."""
    try:
        found = [name for name in _WEIGHT_FILES if (Path(path) / name).is_file()]
    except OSError:
        return None
    if not found or (Path(path) / CONFIG_FILE).exists():
        return None
    return (f"{path} holds {' and '.join(found)} but no {CONFIG_FILE}: the checkpoint is "
            f"damaged (put its {CONFIG_FILE} back, or train it again)")


def _unknown(spec: object) -> UnknownEmbedderError | CheckpointError:
    """The refusal of ``spec``, which names no embedder; an empty or blank one (``""`` read as the
    current folder's path was a ValueError traceback) or a non-string said as such; a folder of
    weights without its config: ``CheckpointError`` (``config_missing``)."""
    if not isinstance(spec, str | Path) or not str(spec).strip():
        return UnknownEmbedderError(f"embedder must be a non-empty name or path, got {spec!r}; "
                                    f"valid names: {', '.join(embedder_names())}")
    spec = str(spec)
    damaged = config_missing(_split_spec(spec)[0])
    if damaged is not None:
        return CheckpointError(damaged)
    note = checkpoint_dir_note()
    missing = f" ({note})" if note else ""
    # A plugin that failed to load would otherwise leave only "unknown embedder" for its names.
    failed = plugin_failures()
    unseen = (f" (this user may not look into the current folder {_cwd()}, so no folder there "
              "could be found)" if _bare(spec) and _cwd_unreadable() else "")
    # Options whose bracket is not closed (a shell's line cut, a typo) were read as part of a
    # name: "unknown embedder 'gircse[soft_tokens=10'" named no cause.
    opened = spec.rfind("[")
    unclosed = (f" (its '[' is not closed: options go in one pair of brackets, "
                f"{spec[:opened]}[key=value])" if opened > 0 and "]" not in spec[opened:] else "")
    return UnknownEmbedderError(
        f"unknown embedder {spec!r}{unclosed}: not a registered name and not a directory with "
        f"{CONFIG_FILE}{unseen}. Valid names: {', '.join(embedder_names())}{missing}{failed}")


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


def findable(name_or_path: str) -> bool:
    """Whether ``name_or_path`` names an embedder this process finds (a registered name, a
    checkpoint directory that is there, options its embedder takes), read without loading it:
    ``check_embedder`` without its error."""
    try:
        check_embedder(name_or_path)
    except EmbedderError:
        return False
    return True


def check_embedder(name_or_path: str) -> None:
    """Check, without loading any weights, that ``name_or_path`` can be loaded: a registered
    name, or a checkpoint directory whose config a known method reads, and the ``[key=value]``
    options after it, as ``apply_option`` checks them (``check_options``): each name one the
    embedder offers, each value of its field's type and accepted by its config's checks. For
    commands that run one embedder after another, so that a typo in the last one is found before
    the first has run, and for the server and workers, checked at start.

    The options are known without loading for a checkpoint of a trainable method (its model
    class's ``OPTIONS``, its saved config) and for a registered name whose model class is known
    (``register_embedder``'s ``model_class``, or its factory's return annotation: the packaged
    names'); where only a class without a config class is known, the names are
    checked and the values when it loads. A plugin's name whose class is not known, and a
    checkpoint of a method that is not trainable (a saved baseline), keep their options
    checked when they load.

    Raises:
        UnknownEmbedderError: neither a registered name nor a checkpoint directory.
        CheckpointError: a config that cannot be read, an unknown method, a config value its
            method refuses, a missing or damaged weight file (its header read, no tensor).
        InvalidInputError: options not written ``name[key=value,...]``, an option the embedder
            does not offer, or a value its field or config refuses (``apply_option``'s message).
    """
    info, directory = _resolve(str(name_or_path))
    options = _split_spec(str(name_or_path))[1]
    if directory is None:
        if info is None:
            raise _unknown(str(name_or_path))
        model_class = _model_class(info) if options else None
        if model_class is not None:
            check_options(info.name, model_class, _default_config(model_class), options)
        return
    meta = read_checkpoint_config(directory)
    method = meta.get("method")
    if method not in _LOADERS:
        raise CheckpointError(
            f"{directory / CONFIG_FILE} names method {method!r}, which has no loader; known methods: "
            f"{', '.join(sorted(_LOADERS)) or 'none'}")
    registered = trainable_methods().get(str(method))
    if registered is not None:  # the check its loader makes first (a baseline's has no config)
        config = registered.model_class.saved_config(directory, meta)
        # ...and its weight files' headers (no tensor read): a truncated adapter of the last
        # baseline was found after the first embedder had run every task.
        from embedders.methods.common import MethodConfig, check_saved_weights

        if isinstance(config, MethodConfig):
            check_saved_weights(directory, config)
        if options:  # the loaded model's name: its config's, else its method's
            name = str(meta.get("name") or getattr(registered.model_class, "method", method))
            check_options(name, registered.model_class, config, options)


def embedder_options(name_or_path: str) -> dict[str, Any] | None:
    """The load-time options (``NAME[key=value]``) the embedder ``name_or_path`` offers, each with
    the value it serves, read without loading any weights: a checkpoint of a trainable method
    from its saved config, a registered name whose model class is known from that class's
    default config; None where they are not known before it loads (a plugin that says nothing
    of its model), or its config cannot be read (loading it says why)."""
    try:
        info, directory = _resolve(str(name_or_path))
        if directory is not None:
            meta = read_checkpoint_config(directory)
            registered = trainable_methods().get(str(meta.get("method")))
            if registered is None:
                return None
            model_class: type | None = registered.model_class
            config: Any = registered.model_class.saved_config(directory, meta)
        elif info is not None:
            model_class = _model_class(info)
            config = None if model_class is None else _default_config(model_class)
        else:
            return None
    except EmbedderError:
        return None
    if model_class is not None and not getattr(model_class, "OPTIONS", ()):
        return {}  # a known model that offers none
    if model_class is None or config is None or isinstance(config, type):
        return None
    offered = _offered(getattr(config, "__dataclass_fields__", {}), getattr(model_class, "OPTIONS", ()))
    return {key: getattr(config, key) for key in offered}


def _model_class(info: EmbedderInfo) -> type | None:
    """The class of the model ``info``'s factory builds, known without calling it: the one its
    registration gave, a class registered as its own factory, or the concrete class its factory's
    return annotation names (not a protocol nor an abstract base, which a subclass with other
    options would fill); None where none says."""
    if info.model_class is not None:
        return info.model_class
    if inspect.isclass(info.factory):
        return info.factory
    try:
        returned = get_type_hints(info.factory).get("return")
    except Exception:  # an annotation that does not resolve here: the load will tell
        return None
    if not inspect.isclass(returned) or inspect.isabstract(returned) or getattr(returned, "_is_protocol", False):
        return None
    return returned


def _default_config(model_class: type) -> Any:
    """A default config of ``model_class``'s ``config_class`` (a dataclass), to check option values
    on; the class itself where it has no default (its field names only); None without one."""
    config_class = getattr(model_class, "config_class", None)
    if not (isinstance(config_class, type) and dataclasses.is_dataclass(config_class)):
        return None
    try:
        return config_class()
    except Exception:  # required fields, or defaults its own checks refuse: names only
        return config_class


def answers_questions(name_or_path: str) -> bool | None:
    """Whether ``name_or_path`` loads a model that generates answers (an InBedder-style
    cluster explainer), read without loading any weights: False for the packaged baselines and
    for checkpoints of methods that do not answer; what a plugin said when it registered
    (``register_embedder(..., explains=)``); None where only loading would tell (a plugin that
    did not say, a name that loads nothing)."""
    info, directory = _resolve(str(name_or_path))
    if directory is None:
        packaged = info is not None and getattr(info.factory, "__module__", "") == "embedders.builtin"
        return False if packaged else (info.explains if info is not None else None)
    try:
        method = read_checkpoint_config(directory).get("method")
    except CheckpointError:
        return None
    registered = trainable_methods().get(str(method))
    if registered is None:
        return None
    return callable(getattr(registered.model_class, "generate_answers", None))


def reads_instructions(name_or_path: str) -> bool:
    """Whether ``name_or_path`` loads a model an instruction changes, read without loading it:
    False for a name registered with ``reads_instructions=False`` and for a spec whose options
    turn the instruction off (``minilm[instruction_weight=0]``, InBedder's too: its embedding is
    the one without the instruction); every other packaged embedder and checkpoint reads one,
    and a name that loads nothing is left to fail where it is loaded."""
    info, _directory = _resolve(str(name_or_path))
    weight = _split_spec(str(name_or_path))[1].get("instruction_weight")
    if weight is not None:
        try:
            if float(weight) == 0.0:
                return False
        except ValueError:
            pass  # refused where it loads
    return info is None or info.reads_instructions


# Below this blend weight an instruction barely changes a model's results (minilm at its
# default 0.25 shared 9-10 of its top 10 with and without a domain instruction on CLINC val:
# docs/indexing.md "minilm and instructions"); searches and clusterings say so.
WEAK_BLEND = 0.5


def instruction_use(name_or_path: str) -> str:
    """How the embedder ``name_or_path`` reads an instruction, told without loading it, as
    ``facet embedders`` lists it: ``none`` where it reads none
    (``reads_instructions``); ``trained`` for a checkpoint of a method trained on instruction
    triples (InstEmb, InBedder); ``blended W`` for a ``BlendsInstruction`` model (minilm), its
    weight the spec's ``instruction_weight`` or its config's default; ``read`` for a plugin's
    model; else ``prompted`` (the backbones and the corpus methods put it in their prompt).
    A name that loads nothing reads as ``read``: it fails where it is loaded."""
    kind, weight = _instruction_reading(str(name_or_path))
    if weight is None:
        return kind
    # InBedder: trained on instructions, and served blended (its default 0.25): "trained" alone
    # hid the blend, and its searches got no "barely steers" note (README: it barely steers).
    return f"trained, blended {weight:g}" if kind == "trained" else f"blended {weight:g}"


def weak_instruction(spec: str) -> float | None:
    """The blend weight of ``spec`` where an instruction barely changes its vectors (a
    ``blended W`` below ``WEAK_BLEND``: minilm's default 0.25), else None."""
    weight = _instruction_reading(spec)[1]
    return weight if weight is not None and 0.0 < weight < WEAK_BLEND else None


def _instruction_reading(spec: str) -> tuple[str, float | None]:
    """``instruction_use``'s kind (``blended`` for a blend) and, for a blend, its weight."""
    if not reads_instructions(spec):
        return "none", None
    info, directory = _resolve(spec)
    method = info.method if info is not None else None
    if method is None and directory is not None:
        try:
            method = read_checkpoint_config(directory).get("method")
        except CheckpointError:
            method = None
    trainable = _TRAINABLE.get(method) if isinstance(method, str) else None
    trained = trainable is not None and trainable.data == "triples"
    model_class = (trainable.model_class if trainable is not None else
                   _model_class(info) if info is not None and directory is None else None)
    if inspect.isclass(model_class) and issubclass(model_class, BlendsInstruction):
        weight: Any = _split_spec(spec)[1].get("instruction_weight")
        saved = directory or (info.path if info is not None else None)
        if weight is None and saved is not None:  # a checkpoint serves its own (InBedder 0.25)
            try:
                weight = read_checkpoint_config(saved).get("config", {}).get("instruction_weight")
            except (CheckpointError, AttributeError):
                weight = None
        if weight is None:
            weight = getattr(_default_config(model_class), "instruction_weight", None)
        try:
            return "trained" if trained else "blended", float(weight)
        except (TypeError, ValueError):  # refused where it loads
            return "trained" if trained else "read", None
    if trained:
        return "trained", None
    if trainable is not None or (info is not None and info.kind == "baseline"):
        return "prompted", None
    return "read", None


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
    directory = _checkpoint_path(spec)
    return info.path is not None and directory is not None and directory.expanduser().resolve() == info.path


def portable_spec(name_or_path: str) -> str:
    """The spec that loads the same embedder from any working directory: a checkpoint
    directory's path made absolute (options kept: ``runs/x[pooling=P]`` ->
    ``/abs/runs/x[pooling=P]``); registered names, with or without options, unchanged."""
    _ensure_builtins()
    spec = str(name_or_path)
    base = _split_spec(spec)[0]
    directory = _checkpoint_path(base)
    if base.lower() in _EMBEDDERS or directory is None:
        return spec
    return str(directory.expanduser().resolve()) + spec[len(base):]


_builtins_loaded = False  # begun (set first: the packaged modules' register_* calls come back)
_builtins_ready = False  # done: every other thread may read the registry
# Held by the thread registering them. The first searches of a new process, run at once (a
# LangChain batch, threads, asyncio.gather), met a registry marked loaded but still empty:
# "unknown embedder 'minilm'; valid names: " (nothing) in all but one of them (the RAG
# exploration of the sixth session of 2026-12-02).
_BUILTINS_LOCK = threading.RLock()
_PLUGIN_ERRORS: dict[str, str] = {}  # plugin -> why it did not load


def plugin_failures() -> str:
    """"; plugin P failed to load: WHY" for each plugin that did not load, for a refusal of a
    name that may have been one of theirs ("" where every plugin loaded)."""
    return "".join(f"; plugin {plugin} failed to load: {error}"
                   for plugin, error in _PLUGIN_ERRORS.items())


def _ensure_builtins() -> None:
    """Register the packaged embedders, the checkpoints and the plugins on first use (keeps
    `import embedders` cheap); another thread's first use waits until they are in."""
    global _builtins_loaded, _builtins_ready
    if _builtins_ready:
        return
    with _BUILTINS_LOCK:
        if _builtins_loaded:  # done while this thread waited, or this thread's own call back
            return
        _builtins_loaded = True
        try:
            try:
                import embedders.builtin  # noqa: F401  (registers on import)
            except BaseException:
                _builtins_loaded = False  # the next use tries again instead of a half-empty registry
                raise
            register_checkpoints()
            load_plugins()
        finally:
            _builtins_ready = _builtins_loaded


def _plugin_targets() -> list[tuple[str, Callable[[], Any]]]:
    """Each plugin to load, as (its name for messages, what loads it): the entry points of group
    ``facet.embedders``, then the ``FACET_PLUGINS`` modules, in order."""
    from importlib.metadata import entry_points  # ~15 ms of scanning, paid with the packaged models

    targets: list[tuple[str, Callable[[], Any]]] = [
        (f"{ep.name} = {ep.value} (entry point {PLUGIN_GROUP})", ep.load) for ep in entry_points(group=PLUGIN_GROUP)]
    for spec in filter(None, (part.strip() for part in os.environ.get(PLUGINS_ENV, "").split(","))):
        module, _, attr = spec.partition(":")

        def load(module: str = module, attr: str = attr) -> Any:
            loaded = importlib.import_module(module)
            return getattr(loaded, attr) if attr else loaded

        targets.append((f"{spec} (from {PLUGINS_ENV})", load))
    return targets


def load_plugins() -> None:
    """Load every plugin once (``_ensure_builtins`` calls it): a module is imported (its import may
    register) and its ``register()``, if it has one, called; a function (``module:function``) is
    called. A plugin that fails is logged and skipped, and its error is told with any name that
    is then unknown: the rest of Facet keeps working."""
    done: set[Any] = set()
    try:
        targets = _plugin_targets()
    except Exception as e:  # a distribution's unreadable metadata: the packaged names still work
        _PLUGIN_ERRORS[PLUGIN_GROUP] = f"{type(e).__name__}: {e}"
        logger.warning("plugins not loaded: %s: %s", type(e).__name__, e)
        return
    for label, load in targets:
        before, methods_before = set(_EMBEDDERS), set(_LOADERS)
        on_import: set[str] = set()
        try:
            with plugin_stdout():  # (a print() at import or in register() is not machine output)
                target = load()
                on_import = set(_EMBEDDERS) - before
                if inspect.ismodule(target):
                    target = getattr(target, "register", None)
                if target is None or target in done:  # registered on import / listed twice
                    continue
                done.add(target)
                if not callable(target):
                    raise TypeError(f"{target!r} is not callable; point at a module or a register() function")
                target()
        except (Exception, SystemExit) as e:  # (a plugin's exit() must not end every command)
            _plugin_failed(label, e, sorted(set(_EMBEDDERS) - before), sorted(set(_LOADERS) - methods_before),
                           on_import)


def _plugin_failed(label: str, error: BaseException, names: list[str], methods: list[str],
                   on_import: set[str]) -> None:
    """Log (and keep for ``_unknown``) that the plugin ``label`` failed with ``error``. What it
    registered before failing (``names``, checkpoint ``methods``) is kept and loads, and the
    warning says so: it said "not loaded" of a plugin whose first names were listed and worked
    (a ``register()`` stopped by a clash with ``minilm`` halfway)."""
    said = f"{type(error).__name__}: {error}"
    kept = [*names, *(f"checkpoint method {m}" for m in methods)]
    if not kept:
        _PLUGIN_ERRORS[label] = said
        logger.warning("plugin %s not loaded: %s", label, said)
        return
    hint = ""
    if isinstance(error, DuplicateRegistrationError) and any(repr(n) in str(error) for n in on_import):
        hint = (" (it registers the same name as it is imported and again in its register(): "
                "docs/plugins.md, do one or the other)")
    _PLUGIN_ERRORS[label] = f"{said}, after it had registered {', '.join(kept)}{hint}"
    logger.warning("plugin %s failed partway: %s%s; what it registered before that stays registered "
                   "and loads: %s", label, said, hint, ", ".join(kept))
