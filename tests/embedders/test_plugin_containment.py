"""What a plugin's model or module does wrong is put down to the plugin: an ``encode`` that
raises something of its own (or lacks the ``role`` keyword), an ``identity`` that is not a
string, a module that exits at import. Each is a ``PluginError`` (or a logged, skipped plugin)
naming it, not a traceback, an anonymous 500 or a silent exit of every command.

The plugin models are ``test_plugin_output_checks``' ``ChkEmbedder`` with one member broken.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from app.errors import ModelError, as_domain_error
from embedders import InvalidInputError, UnknownEmbedderError, load_embedder, registry
from embedders.registry import PluginError
from tests.embedders.test_plugin_output_checks import ChkBlend, ChkEmbedder, _register, plugin_module

OWNER = "tests.embedders.test_plugin_output_checks"  # where _register's factory is defined


class Raises(ChkEmbedder):
    """``encode`` raises what its mode names."""

    def encode(self, texts, *, role="document", instruction=None, batch_size=32):
        if self.mode == "runtime":
            raise RuntimeError("backend crashed")
        if self.mode == "invalid":
            raise InvalidInputError("I refuse texts with 'bark'")
        if self.mode == "interrupt":
            raise KeyboardInterrupt
        return super().encode(texts, role=role, instruction=instruction, batch_size=batch_size)


class NoRole(ChkEmbedder):
    """An ``encode`` written without the keywords Facet passes."""

    def encode(self, texts):
        return np.ones((len(texts), self.dim), np.float32)


class BlendRaises(ChkBlend):
    def encode_from_plain(self, plain, texts, *, role="document", instruction=None, batch_size=32):
        raise ValueError("plain vectors of another width")


def test_an_encode_that_raises_is_a_plugin_error_naming_it(registered):
    """`facet embed -e bad` printed a 30-line traceback and POST /v1/embeddings a bare 500
    "internal error (RuntimeError)"; a factory's error was already a PluginError naming it."""
    _register(registered, "chk-raise", "runtime", cls=Raises)
    model = load_embedder("chk-raise")
    with pytest.raises(PluginError, match=rf"^embedder 'chk-raise' \(registered by {OWNER}\) failed in "
                                          r"encode: RuntimeError: backend crashed$") as caught:
        model.encode(["a cat"], role="query")
    assert isinstance(caught.value.__cause__, RuntimeError)  # chained, for a traceback on demand
    domain = as_domain_error(caught.value)  # what the server answers: 500 model_error, the message
    assert isinstance(domain, ModelError) and "failed in encode: RuntimeError" in str(domain)


@pytest.mark.parametrize(("mode", "error"), [("invalid", InvalidInputError), ("interrupt", KeyboardInterrupt)])
def test_an_embedder_error_or_an_interrupt_from_encode_is_passed_on_as_it_is(registered, mode, error):
    _register(registered, f"chk-{mode}", mode, cls=Raises)
    with pytest.raises(error) as caught:
        load_embedder(f"chk-{mode}").encode(["a bark"])
    assert not isinstance(caught.value, PluginError)


def test_an_encode_without_the_role_keyword_is_a_plugin_error_saying_so(registered):
    """It was a TypeError traceback from deep in the caller."""
    _register(registered, "chk-norole", cls=NoRole)
    with pytest.raises(PluginError, match=r"^embedder 'chk-norole' .*failed in encode: TypeError: .*role.* "
                                          r"\(it does not take role, instruction: Facet calls encode\(texts, "
                                          r"\*, role=\.\.\."):
        load_embedder("chk-norole").encode(["a cat"], role="query", instruction="topic")


def test_encode_from_plain_is_guarded_too(registered):
    _register(registered, "chk-blend-raise", cls=BlendRaises)
    model = load_embedder("chk-blend-raise")
    with pytest.raises(PluginError, match=r"'chk-blend-raise' .*failed in encode_from_plain: ValueError: "
                                          r"plain vectors of another width"):
        model.encode_from_plain(np.ones((1, 16)), ["a"], role="query")


class ValueIdentity(ChkEmbedder):
    identity = None  # (set per test: the class attribute hides ChkEmbedder's property)


class PropertyIdentity(ChkEmbedder):
    @property
    def identity(self):
        return None


class BlankIdentityProperty(ChkEmbedder):
    @property
    def identity(self):
        return " "


BLANK = r" \(a blank string\); it must be a string that is not blank"


@pytest.mark.parametrize(("value", "said"), [
    (None, r".*\(NoneType\); it must be a string"), ({"method": "chk"}, r".*\(dict\); it must be a string"),
    (b"{}", r".*\(bytes\); it must be a string"),
    ("", "''" + BLANK), ("   ", "'   '" + BLANK), ("\n", r"'\\n'" + BLANK)])
def test_an_identity_that_is_not_a_string_or_is_blank_is_refused_at_load(registered, monkeypatch, value, said):
    """`identity = None` indexed a collection that recorded no embedder (every later search of it
    an IndexError); a dict was a SQLAlchemy traceback; `identity = ""` was accepted, so every
    setting of the plugin recorded the same (no) identity and a collection's vectors were never
    told apart from another setting's."""
    monkeypatch.setattr(ValueIdentity, "identity", value)
    _register(registered, "chk-ident", cls=ValueIdentity)
    with pytest.raises(PluginError, match=rf"^embedder 'chk-ident' \(registered by {OWNER}\) has identity {said}"):
        load_embedder("chk-ident")


@pytest.mark.parametrize(("cls", "said"), [(PropertyIdentity, r"None \(NoneType\); it must be a string"),
                                           (BlankIdentityProperty, r"' ' \(a blank string\)")])
def test_an_identity_property_is_checked_where_it_is_read(registered, cls, said):
    """(A property may digest the weights: it is not run at load, but its value is checked.)"""
    _register(registered, "chk-ident-prop", cls=cls)
    model = load_embedder("chk-ident-prop")
    with pytest.raises(PluginError, match=rf"'chk-ident-prop' .*has identity {said}"):
        model.identity  # noqa: B018
    _register(registered, "chk-ident-ok")
    assert isinstance(load_embedder("chk-ident-ok").identity, str)  # a string is as it was


class MemberRuns(ChkEmbedder):
    """``identity`` and ``dim`` are properties that run the plugin's code, broken as the mode
    says (``identity-raises``, ``dim-exits``, ``prints``)."""

    @property
    def identity(self):
        if self.mode == "identity-raises":
            raise RuntimeError("weights not found")
        if self.mode == "prints":
            print("digesting the weights")
        return super().identity

    @property
    def dim(self):
        if self.mode == "dim-exits":
            raise SystemExit(3)
        return 16


def test_a_property_that_raises_or_exits_is_a_plugin_error_naming_it(registered):
    """Only what a plugin's methods did was put down to the plugin: an identity property's
    RuntimeError came out as its own traceback, and a dim property's sys.exit(3) ended the command
    (or the server's worker) with status 3."""
    _register(registered, "chk-ident-raises", "identity-raises", cls=MemberRuns)
    model = load_embedder("chk-ident-raises")  # (an identity property is not run at load)
    with pytest.raises(PluginError, match=rf"^embedder 'chk-ident-raises' \(registered by {OWNER}\) failed "
                                          r"reading its identity: RuntimeError: weights not found$"):
        model.identity  # noqa: B018
    _register(registered, "chk-dim-exits", "dim-exits", cls=MemberRuns)
    with pytest.raises(PluginError, match=r"^embedder 'chk-dim-exits' .* failed reading its dim: SystemExit: 3$"):
        load_embedder("chk-dim-exits")


def test_what_a_property_prints_goes_to_standard_error(registered, capsys):
    """`facet embedders --json` and `facet embed` keep standard output for their own output."""
    _register(registered, "chk-prints", "prints", cls=MemberRuns)
    model = load_embedder("chk-prints")
    assert isinstance(model.identity, str) and model.dim == 16
    out, err = capsys.readouterr()
    assert "digesting" not in out and "digesting the weights" in err


@pytest.mark.parametrize("where", ["import", "register"])
def test_a_plugin_that_exits_is_logged_and_skipped(where, tmp_path, monkeypatch, caplog):
    """A plugin raising SystemExit at import ended every command (`facet embedders`, `facet
    serve`, `facet embed -e minilm`) with exit 3 and nothing printed."""
    module = f"chk_exits_{where}"
    body = ("raise SystemExit(3)\n" if where == "import" else
            "from embedders import register_embedder\n\n"
            "def register():\n"
            "    register_embedder('chk-exits-first', lambda device=None, **kw: None, 'first')\n"
            "    raise SystemExit(3)\n")
    with plugin_module(tmp_path, monkeypatch, module, body, "chk-exits-first"):
        with caplog.at_level(logging.WARNING, logger="embedders.registry"):
            registry.load_plugins()  # (raised SystemExit)
        label = f"{module} (from FACET_PLUGINS)"
        if where == "import":
            assert f"plugin {label} not loaded: SystemExit: 3" in caplog.text
            with pytest.raises(UnknownEmbedderError, match=rf"plugin {module} .*failed to load: SystemExit: 3"):
                load_embedder("chk-exits")
        else:
            assert f"plugin {label} failed partway: SystemExit: 3" in caplog.text
            assert "after it had registered chk-exits-first" in registry._PLUGIN_ERRORS[label]
        assert "minilm" in registry.embedder_names()  # the rest works
