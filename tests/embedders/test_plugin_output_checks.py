"""A plugin's model is held to the contract where the registry builds it: its vectors checked
(shape, finite, float32, unit rows), its factory's errors and missing members named, its names
refused where no command could use them. Facet's own models are not wrapped.

The plugin models are defined here (numpy only), as an outside package would define them.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
import pickle
import subprocess
import sys
import textwrap
import zlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass

import numpy as np
import pytest

import embedders
from embedders import InvalidInputError, load_embedder, register_embedder, registry
from embedders.contract import Embedder, EncodesFromPlain, HasTokenizer
from embedders.registry import PluginError, load_checkpoint, unregister_embedder

HERE = __name__  # the module the factories below are defined in: "registered by" it


@dataclass
class ChkConfig:
    scale: float = 1.0

    def __post_init__(self) -> None:
        if self.scale <= 0:
            raise ValueError(f"scale must be positive, got {self.scale}")


class ChkEmbedder:
    """A character-trigram hashing embedder whose output ``mode`` breaks the contract."""

    OPTIONS = ("scale",)
    dim = 16
    max_length = 32
    tokenizer = None

    def __init__(self, name: str, mode: str = "ok", **kwargs):
        self.name, self.mode = name, mode
        self.config = ChkConfig(**kwargs)
        self.calls = 0

    @property
    def identity(self) -> str:
        return json.dumps({"method": "chk", "name": self.name, **asdict(self.config)})

    @property
    def scale(self) -> float:  # an option set through a property, whose setter checks it
        return self.config.scale

    @scale.setter
    def scale(self, value: float) -> None:
        if value > 100:
            raise ValueError("scale at most 100")
        self.config.scale = value

    def encode(self, texts, *, role="document", instruction=None, batch_size=32):  # no show_progress
        self.calls += 1
        out = np.zeros((len(texts), self.dim), np.float64)
        for i, text in enumerate(texts):
            for j in range(max(1, len(text) - 2)):
                out[i, zlib.crc32(text[j:j + 3].encode()) % self.dim] += 1.0
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        out *= self.config.scale
        if self.mode == "nan":
            out[len(out) - 1, 0] = np.nan
        elif self.mode == "inf":
            out[0, 0] = np.inf
        elif self.mode == "fewer":
            out = out[:-1]
        elif self.mode == "short":
            out = out[:, :-1]
        elif self.mode == "flat":
            out = out.reshape(-1)
        elif self.mode == "zero":
            out[0] = 0.0
        elif self.mode == "text":
            return [["x"] * self.dim for _ in texts]
        elif self.mode == "list":
            return out.tolist()
        elif self.mode == "f64":
            return out
        return out.astype(np.float32)


class ChkBlend(ChkEmbedder):
    """With ``encode_from_plain`` (``EncodesFromPlain``), which returns what its mode says."""

    def encode_from_plain(self, plain, texts, *, role="document", instruction=None, batch_size=32):
        return np.full((len(texts), self.dim), np.nan if self.mode == "nan-plain" else 1.0)


@contextlib.contextmanager
def plugin_module(tmp_path, monkeypatch, module, source, *names) -> Iterator[None]:
    """``source`` as the module ``module`` that FACET_PLUGINS names, as a user installs a
    plugin by path, with no earlier plugin's errors; afterwards the embedders ``names`` it
    may have registered are unregistered and its import is forgotten."""
    (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("FACET_PLUGINS", module)
    monkeypatch.setattr(registry, "_PLUGIN_ERRORS", {})
    try:
        yield
    finally:
        for name in names:
            unregister_embedder(name)
        sys.modules.pop(module, None)


def _register(registered, name, mode="ok", cls=ChkEmbedder, **extra):
    registered.append(name)
    register_embedder(name, lambda device=None, **kw: cls(name, mode, **kw), f"chk {mode}", **extra)


def test_a_nan_is_refused_naming_the_embedder_and_its_plugin(registered):
    """A NaN went into the API's JSON (bare NaN, 200), `facet embed`'s output and the index
    ("the collection holds nothing searchable" afterwards)."""
    _register(registered, "chk-nan", "nan")
    model = load_embedder("chk-nan")
    with pytest.raises(PluginError, match=rf"^embedder 'chk-nan' \(registered by {HERE}\) returned non-finite "
                                          r"values .*for 1 of 2 texts \(the first: text 2\)"):
        model.encode(["a cat", "the dog"])  # texts counted from 1 (the last one was "text 1")
    _register(registered, "chk-inf", "inf")
    with pytest.raises(PluginError, match=r"'chk-inf' .*non-finite values .*for 1 of 3 texts \(the first: text 1\)"):
        load_embedder("chk-inf").encode(["a", "b", "c"])


@pytest.mark.parametrize(("mode", "said"), [
    ("fewer", r"returned 1 vector from encode for 2 texts; it must return one row of dim=16 values per "
              r"text, shape \(2, 16\)"),
    ("short", r"returned vectors of 15 values from encode for 2 texts"),
    ("flat", r"returned a 1-D array of shape \(32,\) from encode for 2 texts"),
    ("zero", r"returned an all-zero vector from encode for 1 of 2 texts \(the first: text 1\)"),
    ("text", r"returned list of <U1 from encode; it must return an array of numbers"),
])
def test_a_wrong_shape_or_type_is_refused(registered, mode, said):
    """One row for two texts was answered (200) with one vector, crashed the indexer with "zip()
    argument 2 is shorter" and the rerank with an IndexError; 127 columns under a dim of 128 went
    out as they were; a 1-D output was answered "embedding": 0.0."""
    _register(registered, f"chk-{mode}", mode)
    with pytest.raises(PluginError, match=rf"^embedder 'chk-{mode}' \(registered by {HERE}\) {said}"):
        load_embedder(f"chk-{mode}").encode(["a cat", "the dog"])


@pytest.mark.parametrize("mode", ["list", "f64", "ok"])
def test_vectors_are_float32_unit_rows_whatever_the_plugin_returned(registered, mode):
    """`facet embed --help` promises L2-normalised float32: a plugin's vectors of norm 7 (or
    float64, or a list) went out as they were."""
    _register(registered, f"chk-{mode}", mode)
    model = load_embedder(f"chk-{mode}[scale=7]")
    vectors = model.encode(["a cat", "the dog"], role="query")
    assert vectors.dtype == np.float32 and vectors.shape == (2, 16)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    raw = ChkEmbedder("x").encode(["a cat", "the dog"])
    assert np.allclose(vectors, raw, atol=1e-6)


def test_encode_from_plain_is_checked_too(registered):
    _register(registered, "chk-blend", "nan-plain", cls=ChkBlend)
    model = load_embedder("chk-blend")
    assert isinstance(model, EncodesFromPlain)
    with pytest.raises(PluginError, match=r"'chk-blend' .*non-finite values .*from encode_from_plain for 2 of 2"):
        model.encode_from_plain(np.ones((2, 16)), ["a", "b"], instruction="x")
    _register(registered, "chk-blend-ok", "ok", cls=ChkBlend)
    out = load_embedder("chk-blend-ok").encode_from_plain(np.ones((2, 16)), ["a", "b"])
    assert out.dtype == np.float32 and np.allclose(np.linalg.norm(out, axis=1), 1.0)


def test_the_wrapped_model_is_the_plugins_model_to_every_caller(registered):
    """Attributes, options (a property's setter too), protocols, class checks, the eval cache's
    show_progress check, identity caching and pickling keep working through the wrapper."""
    from app.encoding import EmbedderCache
    from app.evaluation.cache import EmbeddingCache

    _register(registered, "chk-ok")
    model = load_embedder("chk-ok[scale=3]")
    assert isinstance(model, registry.PluginModel) and isinstance(model, ChkEmbedder)
    assert isinstance(model, Embedder) and isinstance(model, HasTokenizer)
    assert not isinstance(model, EncodesFromPlain)  # it has no encode_from_plain
    assert (model.name, model.dim, model.max_length, model.tokenizer) == ("chk-ok", 16, 32, None)
    assert model.config.scale == 3.0 and model.scale == 3.0
    with pytest.raises(InvalidInputError, match="scale at most 100"):
        load_embedder("chk-ok[scale=500]")  # through the property's setter, as without a wrapper
    assert json.loads(model.identity)["scale"] == 3.0
    model.mode = "nan"  # set on the plugin's model
    assert registry.unwrapped(model).mode == "nan"
    model.mode = "ok"
    cache = EmbedderCache("cpu")
    assert cache.identity(model) == model.identity  # weak-referenceable
    vectors = EmbeddingCache(None).encode(model, ["a cat", "b"], role="document", instruction=None,
                                          show_progress=True)  # dropped: its encode does not take it
    assert vectors.shape == (2, 16)
    again = pickle.loads(pickle.dumps(model))
    assert isinstance(again, registry.PluginModel) and np.allclose(again.encode(["a cat"]), model.encode(["a cat"]))
    assert copy.copy(model).unwrapped is model.unwrapped


def test_facets_own_models_are_not_wrapped(minilm):
    """Facet's packaged embedders and checkpoint loaders are trusted: no wrapper, no check."""
    assert type(minilm) is not registry.PluginModel and not isinstance(minilm, registry.PluginModel)
    for name in ("minilm", "backbone-mean", "causal2vec"):
        info = registry._EMBEDDERS[name]
        assert registry._trusted(info.factory), name
    assert all(registry._trusted(loader) for loader in registry._LOADERS.values()
               if loader.__module__.startswith("embedders."))
    assert type(load_embedder("minilm", device="cpu")) is type(minilm)


def test_a_factory_that_raises_is_a_plugin_error_naming_it(registered):
    """A RuntimeError of the factory was a raw traceback (CLI) / anonymous 500."""
    def boom(device=None, **kw):
        raise RuntimeError("weights file missing: /nope/model.bin")

    def refuses(device=None, **kw):
        raise InvalidInputError("chk-refuses takes no such device")

    registered += ["chk-boom", "chk-refuses"]
    register_embedder("chk-boom", boom, "raises")
    register_embedder("chk-refuses", refuses, "raises its own error")
    with pytest.raises(PluginError, match=rf"^embedder 'chk-boom' \(registered by {HERE}\) failed to load: "
                                          r"RuntimeError: weights file missing: /nope/model.bin$"):
        load_embedder("chk-boom")
    with pytest.raises(InvalidInputError, match=r"^chk-refuses takes no such device$"):  # kept as it is
        load_embedder("chk-refuses")


def test_a_model_without_a_protocol_member_is_refused_at_load(registered):
    """A model without encode loaded, and a collection was created ("5 pending") before the
    AttributeError."""
    class NoEncode:
        name, dim, identity = "chk-noencode", 8, "{}"

    class BadDim(ChkEmbedder):
        dim = "wide"

    registered += ["chk-noencode", "chk-baddim"]
    register_embedder("chk-noencode", lambda device=None, **kw: NoEncode(), "no encode")
    register_embedder("chk-baddim", lambda device=None, **kw: BadDim("chk-baddim"), "bad dim")
    with pytest.raises(PluginError, match=r"'chk-noencode' .*built a model \(NoEncode\) without encode, which "
                                          r"the Embedder protocol requires"):
        load_embedder("chk-noencode")
    with pytest.raises(PluginError, match=r"'chk-baddim' .*has dim 'wide'"):
        load_embedder("chk-baddim")


def _nan_loader(directory, config, device):
    return ChkEmbedder(config["name"], config.get("mode", "ok"))


def test_a_plugins_checkpoint_loader_is_checked_too(tmp_path):
    """Checkpoints of a method a plugin registered (``register_method``) load its model, held to
    the same contract."""
    embedders.register_method("chk-method", _nan_loader)  # exported beside register_embedder
    try:
        for mode in ("ok", "nan"):
            folder = tmp_path / mode
            folder.mkdir()
            (folder / "facet_config.json").write_text(json.dumps({"method": "chk-method", "name": "chk-ck",
                                                                  "mode": mode}))
            model = load_checkpoint(folder)
            assert isinstance(model, registry.PluginModel)
            if mode == "ok":
                assert load_embedder(str(folder)).encode(["a"]).shape == (1, 16)
            else:
                with pytest.raises(PluginError, match=rf"checkpoint .*nan \(method 'chk-method', loaded by {HERE}\) "
                                                      r"returned non-finite"):
                    model.encode(["a", "b"])
    finally:
        registry._LOADERS.pop("chk-method", None)


@pytest.mark.parametrize("bad", ["", "  ", "a b", "x,y", "../evil", "a/b", "a\\b", "x[y=1]", "tab\tname", ".",
                                 "..", "bell\x07"])
def test_names_no_command_could_use_are_refused(bad, registered):
    with pytest.raises(PluginError, match=r"embedder name .* is refused"):
        register_embedder(bad, lambda device=None, **kw: ChkEmbedder(bad), "bad")
    assert bad.lower() not in registry._EMBEDDERS


@pytest.mark.parametrize("bad", ["a#b", "chk+x", "chk:y", "--help", "-e", "_x", "ünï", "ＭＩＮＩＬＭ", "emoji😀",
                                 "$HOME", "x" * 129])
def test_names_the_store_cannot_keep_vectors_under_are_refused(bad, registered):
    """They registered, were listed and embedded, and every `facet index` with them failed with
    the store's "invalid vector name", naming no plugin, leaving an empty collection (the plugin
    exploration of the sixth session of 2026-12-02). What is accepted, the store takes."""
    with pytest.raises(PluginError, match=r"must be 1-128 ASCII letters, digits, '_', '-' or '\.'"):
        register_embedder(bad, lambda device=None, **kw: ChkEmbedder(bad), "bad")
    assert bad.lower() not in registry._EMBEDDERS


def test_ordinary_names_are_still_accepted(registered):
    from indexer.store import validate_name

    for name in ("chk-Org.Model_v2", "9chk", "c" * 128):
        registered.append(name)
        register_embedder(name, lambda device=None, _n=name, **kw: ChkEmbedder(_n.lower()), "fine")
        assert name.lower() in registry.embedder_names()
        assert validate_name(name.lower(), "vector") == name.lower()


def test_a_keyboardinterrupt_a_plugin_raises_off_the_main_thread_is_its_error(registered):
    """A KeyboardInterrupt raised by a plugin's encode in a server's request thread ended the
    whole `facet serve` (the plugin exploration); there no Ctrl-C can have raised it. In the main
    thread it is passed on: a Ctrl-C stops the command."""
    import threading

    class Interrupting(ChkEmbedder):
        def encode(self, texts, **kwargs):
            raise KeyboardInterrupt

    registered.append("chk-ki")
    register_embedder("chk-ki", lambda device=None, **kw: Interrupting("chk-ki"), "interrupts")
    model = load_embedder("chk-ki")
    raised: list[BaseException] = []

    def in_a_thread() -> None:
        try:
            model.encode(["a"])
        except BaseException as e:  # (what came out is the test's)
            raised.append(e)

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join()
    assert len(raised) == 1 and isinstance(raised[0], PluginError), raised
    assert "chk-ki" in str(raised[0]) and "KeyboardInterrupt raised by its code" in str(raised[0])
    with pytest.raises(KeyboardInterrupt):
        model.encode(["a"])
    # Where Ctrl-C is ignored (a Celery worker's pool processes), none raised it, main thread or
    # not: it ended the pool process, the caller reading "WorkerLostError".
    import signal

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with pytest.raises(PluginError, match="KeyboardInterrupt raised by its code"):
            model.encode(["a"])
    finally:
        signal.signal(signal.SIGINT, previous)


def test_an_explainers_keyboardinterrupt_off_the_main_thread_is_its_error(registered):
    """An explainer's ``generate_answers`` was not guarded as ``encode`` is: a KeyboardInterrupt
    it raised killed `facet serve`'s encoder thread (every later encode hung) and a worker's pool
    process (the verification round of 2026-12-03)."""
    import threading

    class Explaining(ChkEmbedder):
        def generate_answers(self, texts, **kwargs):
            if texts == ["stop"]:
                raise KeyboardInterrupt
            return [f"about {t}" for t in texts]

    registered.append("chk-explain")
    register_embedder("chk-explain", lambda device=None, **kw: Explaining("chk-explain"), "explains")
    model = load_embedder("chk-explain")
    assert model.generate_answers(["cats"]) == ["about cats"]
    raised: list[BaseException] = []

    def in_a_thread() -> None:
        try:
            model.generate_answers(["stop"])
        except BaseException as e:  # (what came out is the test's)
            raised.append(e)

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join()
    assert len(raised) == 1 and isinstance(raised[0], PluginError), raised
    assert "'chk-explain'" in str(raised[0]) and "failed in generate_answers: KeyboardInterrupt" in str(raised[0])


def test_a_name_taken_is_not_met_with_advice_to_unregister_it(registered):
    """The refusal told a plugin to "call unregister_embedder first", which silently replaced
    the packaged minilm for every command (the plugin exploration)."""
    with pytest.raises(embedders.DuplicateRegistrationError) as refused:
        register_embedder("minilm", lambda device=None, **kw: ChkEmbedder("minilm"), "mine")
    assert "unregister" not in str(refused.value) and "pick another name" in str(refused.value)


PARTIAL = textwrap.dedent('''
    from embedders import register_embedder
    from {here} import ChkEmbedder
    {on_import}
    def register():
        register_embedder("{first}", lambda device=None, **kw: ChkEmbedder("{first}"), "first")
        register_embedder("{second}", lambda device=None, **kw: ChkEmbedder("{second}"), "clashes")
''')


@pytest.mark.parametrize("case", ["clash", "self"])
def test_a_plugin_that_fails_partway_says_what_it_registered(case, tmp_path, monkeypatch, caplog):
    """A register() stopped by a clash with `minilm` was "not loaded" though the names it had
    registered were listed and loaded; so was the module registering on import and in
    register() (docs/plugins.md's own warning), whose name works."""
    first = f"chk-part-{case}"
    module = f"chk_partial_{case}"
    on_import = (f'register_embedder("{first}", lambda device=None, **kw: ChkEmbedder("{first}"), "import")'
                 if case == "self" else "")
    source = PARTIAL.format(here=HERE, on_import=on_import, first=first,
                            second="minilm" if case == "clash" else first)
    with plugin_module(tmp_path, monkeypatch, module, source, first):
        with caplog.at_level(logging.WARNING, logger="embedders.registry"):
            registry.load_plugins()
        said = caplog.text
        assert "not loaded" not in said
        assert f"plugin {module} (from FACET_PLUGINS) failed partway: DuplicateRegistrationError" in said
        assert f"what it registered before that stays registered and loads: {first}" in said
        if case == "self":
            assert "registers the same name as it is imported and again in its register()" in said
        assert load_embedder(first).encode(["a"]).shape == (1, 16)
        assert f"after it had registered {first}" in registry._PLUGIN_ERRORS[f"{module} (from FACET_PLUGINS)"]


def test_facet_embed_refuses_a_plugins_nan_and_names_a_factory_error(tmp_path):
    """In a fresh CLI process: `facet embed` printed NaN (exit 0), and a factory's RuntimeError was
    a traceback."""
    (tmp_path / "chk_cli_plugin.py").write_text(textwrap.dedent('''
        import numpy as np

        class Nan:
            dim, identity = 4, "{}"
            def __init__(self):
                self.name = "chk-cli-nan"
            def encode(self, texts, *, role="document", instruction=None, batch_size=32):
                return np.full((len(texts), 4), np.nan, np.float32)

        def boom(device=None, **kw):
            raise RuntimeError("weights file missing")

        def register():
            from embedders import register_embedder
            register_embedder("chk-cli-nan", lambda device=None, **kw: Nan(), "nan")
            register_embedder("chk-cli-boom", boom, "boom")
    '''))
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "FACET_PLUGINS": "chk_cli_plugin", "FACET_DATA_DIR": str(tmp_path / "data"), "OMP_NUM_THREADS": "1"}

    def facet(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, env=env,
                              timeout=120)

    nan = facet("embed", "-e", "chk-cli-nan", "a cat")
    assert nan.returncode != 0 and "NaN" not in nan.stdout
    assert ("embedder 'chk-cli-nan' (registered by chk_cli_plugin) returned non-finite values" in nan.stderr)
    boom = facet("embed", "-e", "chk-cli-boom", "a cat")
    assert boom.returncode != 0 and "Traceback" not in boom.stderr
    assert ("embedder 'chk-cli-boom' (registered by chk_cli_plugin) failed to load: RuntimeError: "
            "weights file missing") in boom.stderr


def test_a_memoryerror_in_a_command_is_one_line(registered, tmp_path):
    """A plugin's (or any model's) MemoryError was a raw traceback, exit 1, naming nothing (the
    plugin exploration): one line, with what helps."""
    from tests.app.cli_runner import invoke_cli

    class Hungry(ChkEmbedder):
        def encode(self, texts, **kwargs):
            raise MemoryError

    registered.append("chk-mem")
    register_embedder("chk-mem", lambda device=None, **kw: Hungry("chk-mem"), "runs out")
    done = invoke_cli("embed", "-e", "chk-mem", "a text", env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert done.returncode == 1
    assert done.stderr.startswith("error: out of memory (MemoryError); give fewer or shorter texts"), done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr


def test_a_bfloat16_tensor_is_read_as_float32(registered):
    """An LLM embedder's usual return, a bfloat16 torch tensor, was refused ("Got unsupported
    ScalarType BFloat16"; the plugin exploration); it is cast, as float16 and float64 are."""
    torch = pytest.importorskip("torch")

    class Bf16(ChkEmbedder):
        def encode(self, texts, **kwargs):
            return torch.from_numpy(super().encode(texts, **kwargs)).to(torch.bfloat16)

    registered.append("chk-bf16")
    register_embedder("chk-bf16", lambda device=None, **kw: Bf16("chk-bf16"), "bfloat16")
    vectors = load_embedder("chk-bf16").encode(["a card", "a refund"])
    assert vectors.dtype == np.float32 and vectors.shape == (2, 16)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)


def test_a_plugins_keyboardinterrupt_in_an_index_job_is_its_error_not_a_ctrl_c(tmp_path):
    """While an index job runs in the main thread its first Ctrl-C only sets a flag (checked
    between batches), so a KeyboardInterrupt raised meanwhile is the plugin's own: it was
    recorded as "stopped (Ctrl-C)", exit 130, the job "interrupted" with a resume hint, and so
    was a detached ``--background`` job's, which no one can Ctrl-C. Real CLI processes."""
    import json as _json

    (tmp_path / "chk_ki_plugin.py").write_text(textwrap.dedent('''
        import numpy as np

        class Interrupting:
            dim, identity = 4, "{}"
            def __init__(self):
                self.name = "chk-ki-job"
            def encode(self, texts, *, role="document", instruction=None, batch_size=32):
                if any("poison" in t for t in texts):
                    raise KeyboardInterrupt
                return np.tile(np.array([1, 0, 0, 0], np.float32), (len(texts), 1))

        def register():
            from embedders import register_embedder
            register_embedder("chk-ki-job", lambda device=None, **kw: Interrupting(), "interrupts")
    '''))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("a plain text")
    (docs / "b.txt").write_text("a poison text")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "FACET_PLUGINS": "chk_ki_plugin", "FACET_DATA_DIR": str(tmp_path / "data"), "OMP_NUM_THREADS": "1"}

    def facet(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, env=env,
                              timeout=120)

    said = "embedder 'chk-ki-job' (registered by chk_ki_plugin) failed in encode: KeyboardInterrupt raised by its code"
    fore = facet("index", str(docs), "-e", "chk-ki-job", "-c", "fore")
    assert fore.returncode == 1, (fore.returncode, fore.stderr)
    assert said in fore.stderr and "stopped (Ctrl-C)" not in fore.stderr, fore.stderr
    back = facet("index", str(docs), "-e", "chk-ki-job", "-c", "back", "--background")
    assert back.returncode == 0, back.stderr
    job_id = back.stdout.split()[0]
    followed = facet("jobs", job_id, "--follow", "--interval", "0.2")
    assert followed.returncode == 1
    job = _json.loads(facet("jobs", job_id, "--json").stdout)
    assert job["state"] == "failed" and said in job["message"] and "stopped (Ctrl-C)" not in job["message"], job
