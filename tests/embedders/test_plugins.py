"""Embedders registered by other packages (plugins): found in every process, held to the contract.

The plugin is a numpy-only hashing embedder written into ``tmp_path``, as an outside package
would be; nothing is installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from embedders import (
    InvalidInputError,
    UnknownEmbedderError,
    list_embedders,
    load_embedder,
    register_embedder,
    registry,
)
from embedders.registry import PluginError, answers_questions

PLUGIN = textwrap.dedent('''
    """A numpy-only hashing bag-of-words embedder (the Embedder protocol only, no torch)."""
    import json
    import zlib
    from dataclasses import asdict, dataclass

    import numpy as np


    @dataclass
    class HashConfig:
        dim: int = 64
        bigrams: bool = False


    class HashEmbedder:
        OPTIONS = ("dim", "bigrams")

        def __init__(self, name, **kwargs):
            self.name = name
            self.config = HashConfig(**kwargs)

        @property
        def dim(self):  # read-only: the `dim` option cannot be set through it
            return self.config.dim

        @property
        def identity(self):
            return json.dumps({"method": "hash", "name": self.name, **asdict(self.config)})

        def encode(self, texts, *, role="document", instruction=None, batch_size=32):  # no show_progress
            out = np.zeros((len(texts), self.dim), np.float32)
            for i, text in enumerate(texts):
                for word in text.lower().split():
                    out[i, zlib.crc32(word.encode()) % self.dim] += 1.0
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            return out / np.where(norms == 0, 1.0, norms)


    def register(name="{name}"):
        from embedders import register_embedder

        register_embedder(name, lambda device=None, **kw: HashEmbedder(name, **kw), "hashing words (numpy)")
''')


def write_plugin(root: Path, module: str, name: str) -> Path:
    """``root/module.py``, a plugin registering ``name`` from its ``register()``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module}.py").write_text(PLUGIN.replace("{name}", name))
    return root


@pytest.fixture
def hash_embedder(tmp_path, monkeypatch):
    """The plugin's embedder class, imported in this process."""
    monkeypatch.syspath_prepend(str(write_plugin(tmp_path / "inproc", "facet_hash_inproc", "hash-inproc")))
    import facet_hash_inproc

    yield facet_hash_inproc.HashEmbedder
    sys.modules.pop("facet_hash_inproc", None)


def test_facet_plugins_registers_in_a_fresh_cli_process(tmp_path):
    """`PYTHONPATH=pkg facet embed -e toy hi` was "unknown embedder": nothing let a package
    register in another process (the CLI, the server, a detached `run-job` child). A plugin
    that does not import is named in a warning and the rest still works."""
    root = write_plugin(tmp_path / "pkg", "facet_hash_cli", "toy")
    env = {
        **os.environ,
        "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "FACET_PLUGINS": "facet_hash_cli, no_such_facet_plugin",
        "FACET_DATA_DIR": str(tmp_path / "data"),
    }

    def facet(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "app", *args], capture_output=True, text=True, env=env, timeout=120
        )

    listed = facet("embedders", "--json")
    assert listed.returncode == 0, listed.stderr
    kinds = {row["name"]: row["kind"] for row in json.loads(listed.stdout)}
    assert kinds["toy"] == "plugin" and kinds["minilm"] == "baseline"
    assert "no_such_facet_plugin" in listed.stderr and "ModuleNotFoundError" in listed.stderr
    embedded = facet("embed", "-e", "toy[bigrams=true]", "hi")
    assert embedded.returncode == 0, embedded.stderr
    payload = json.loads(embedded.stdout)
    assert payload["embedder"] == "toy" and payload["dim"] == 64
    assert np.isclose(np.linalg.norm(payload["vectors"][0]), 1.0)


def test_a_plugin_that_fails_is_named_when_a_name_is_unknown(monkeypatch):
    monkeypatch.setenv("FACET_PLUGINS", "no_such_facet_plugin")
    monkeypatch.setattr(registry, "_PLUGIN_ERRORS", {})
    registry.load_plugins()
    with pytest.raises(
        UnknownEmbedderError,
        match=r"plugin no_such_facet_plugin \(from FACET_PLUGINS\) failed "
        r"to load: ModuleNotFoundError",
    ):
        load_embedder("toy")
    assert "minilm" in registry.embedder_names()  # the rest still works


def test_an_installed_distribution_registers_through_its_entry_point(tmp_path, monkeypatch, registered):
    """A distribution declaring ``[facet.embedders]`` in its entry points is loaded with the
    packaged names (a dist-info folder on sys.path is what pip leaves)."""
    site = write_plugin(tmp_path / "site", "facet_hash_ep", "toy-ep")
    info = site / "facet_hash_ep-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: facet-hash-ep\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[facet.embedders]\ntoy-ep = facet_hash_ep:register\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv("FACET_PLUGINS", raising=False)
    monkeypatch.setattr(registry, "_PLUGIN_ERRORS", {})
    registered.append("toy-ep")
    registry.load_plugins()
    sys.modules.pop("facet_hash_ep", None)
    assert {i.name: i.kind for i in list_embedders()}["toy-ep"] == "plugin"
    assert load_embedder("toy-ep").encode(["a b"]).shape == (1, 64)
    assert registry._PLUGIN_ERRORS == {}


def test_a_model_not_named_as_registered_is_refused(hash_embedder, registered, minilm):
    """`toy2` building a model named `toy-hash2` indexed vectors that `search --embedder toy2`
    never found (the collection holds them under the model's name); `minilm-plain` building
    `minilm` wrote into the packaged model's vectors."""
    registered += ["toy2", "minilm-plain"]
    register_embedder("toy2", lambda device=None, **kw: hash_embedder("toy-hash2", **kw), "mismatch")
    with pytest.raises(
        PluginError,
        match=r"'toy2' .*built a model named 'toy-hash2'.*must carry the name "
        r"it is registered under \('toy2'",
    ):
        load_embedder("toy2")
    register_embedder("minilm-plain", lambda device=None, **kw: minilm, "a wrapper of the packaged minilm")
    with pytest.raises(PluginError, match="built a model named 'minilm'"):
        load_embedder("minilm-plain")


def test_a_factory_without_the_device_keyword_is_a_clear_error(hash_embedder, registered):
    registered.append("toy-noargs")
    register_embedder("toy-noargs", lambda: hash_embedder("toy-noargs"), "no args")
    with pytest.raises(
        PluginError,
        match=r"'toy-noargs' \(registered by tests\.embedders\.test_plugins\) "
        r"cannot be built: its factory is called as factory\(device=",
    ):
        load_embedder("toy-noargs")


def test_an_option_on_a_read_only_property_is_a_clear_error(hash_embedder, registered):
    """`toy[dim=16]` was an AttributeError traceback: `dim` is both an option and a read-only property."""
    registered.append("toy-opts")
    register_embedder("toy-opts", lambda device=None, **kw: hash_embedder("toy-opts", **kw), "options")
    assert load_embedder("toy-opts[bigrams=true]").config.bigrams is True
    with pytest.raises(
        InvalidInputError,
        match=r"option 'dim' of embedder 'toy-opts' cannot be set: "
        r"HashEmbedder\.dim is a read-only property",
    ):
        load_embedder("toy-opts[dim=16]")


def test_kind_and_explains_of_a_registered_embedder(hash_embedder, registered):
    """A plugin was listed as a "baseline", and `answers_questions` could not tell a plugin's
    explainer from any other embedder."""
    registered += ["toy-plain", "toy-explainer"]
    register_embedder("toy-plain", lambda device=None, **kw: hash_embedder("toy-plain"), "plain")
    register_embedder(
        "toy-explainer", lambda device=None, **kw: hash_embedder("toy-explainer"), "explains", explains=True
    )
    kinds = {i.name: i.kind for i in list_embedders()}
    assert kinds["toy-plain"] == "plugin" and kinds["minilm"] == "baseline"
    assert answers_questions("toy-plain") is None
    assert answers_questions("toy-explainer") is True
    assert answers_questions("minilm") is False


@pytest.mark.parametrize("cached", [True, False])
def test_eval_cache_encodes_with_an_encode_without_show_progress(hash_embedder, tmp_path, cached):
    """`facet eval` passed show_progress= to every encode: a plugin written to the documented
    `encode(texts, role=, instruction=, batch_size=)` failed with a TypeError."""
    from app.evaluation.cache import EmbeddingCache

    cache = EmbeddingCache(tmp_path / "cache" if cached else None, write_every=2)
    texts = ["one cat", "two dogs", "three birds", "one cat and a dog", "five"]
    model = hash_embedder("toy")
    vectors = cache.encode(model, texts, role="document", instruction=None, show_progress=True)
    assert np.allclose(vectors, model.encode(texts))


def test_a_plugin_labelled_checkpoint_is_listed_loadable_and_kept_when_the_checkpoint_folder_moves(
        registered) -> None:
    """``kind`` is a plugin's label (docs/plugins.md), but the registry told its own checkpoints
    by it: a plugin labelled "checkpoint" was listed "cannot be loaded: its config names no
    method" and was dropped when the settings set the checkpoint folder (``Facet.open()`` with
    FACET_CHECKPOINT_DIR: "unknown embedder")."""
    from embedders import registry

    class Labelled:
        dim, identity, name = 4, "{}", "labelled-ck"

        def encode(self, texts, *, role="document", instruction=None, batch_size=32):  # type: ignore[no-untyped-def]
            return np.tile(np.array([1, 0, 0, 0], np.float32), (len(texts), 1))

    registry.register_embedder("labelled-ck", lambda device=None, **kw: Labelled(), "a hashing plugin",
                               kind="checkpoint")
    registered.append("labelled-ck")
    info = next(i for i in registry.list_embedders() if i.name == "labelled-ck")
    assert info.description == "a hashing plugin" and "cannot be loaded" not in info.description
    before = registry._checkpoint_dir
    registry.set_checkpoint_dir(registry.checkpoint_dir())  # as the app's settings do
    try:
        assert "labelled-ck" in [i.name for i in registry.list_embedders()]
        assert registry.load_embedder("labelled-ck").encode(["a cat"]).shape == (1, 4)
    finally:
        registry.set_checkpoint_dir(before)
