"""``check_embedder`` checks a spec's ``[key=value]`` options without loading any weights, with
``apply_option``'s messages: ``FACET_API_MODELS="minilm[bogus=1]"`` and ``FACET_WORKER_PRELOAD``
started fine and failed at the first request or task. Real registry, shipped checkpoints' configs
(no weights read), a numpy plugin; `facet serve` in process, uvicorn never started."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass
from unittest import mock

import numpy as np
import pytest

from app.errors import InvalidRequestError
from app.settings import FacetSettings
from embedders import load_embedder, register_embedder
from embedders.errors import InvalidInputError
from embedders.registry import apply_option, check_embedder, unregister_embedder


def _refusal(spec: str) -> str:
    with pytest.raises(InvalidInputError) as info:
        check_embedder(spec)
    return str(info.value)


def test_packaged_names_options_are_checked_without_loading(minilm) -> None:
    said = _refusal("minilm[bogus=1]")
    assert said == "embedder 'minilm' has no option 'bogus'; options: instruction_weight"
    with pytest.raises(InvalidInputError) as loaded:  # what loading it says: the same line
        apply_option(minilm, "bogus", "1")
    assert str(loaded.value) == said
    assert _refusal("backbone-prompteol[bogus=1]").startswith(
        "embedder 'backbone-prompteol' has no option 'bogus'; options: none")
    check_embedder("minilm[instruction_weight=1]")
    check_embedder("minilm[]")
    # Its values too (its config class is declared): they failed only at the first request.
    assert _refusal("minilm[instruction_weight=abc]") == \
        "option instruction_weight='abc': expected a number"
    assert _refusal("minilm[instruction_weight=2]").startswith("option instruction_weight='2': ")


def test_checkpoint_options_names_types_and_config_checks() -> None:
    assert _refusal("inbedder[bogus=1]") == (
        "embedder 'inbedder' has no option 'bogus'; options: gen_tokens, instruction_weight, "
        "max_length, pooling, text_quotes")
    assert _refusal("inbedder[max_length=abc]") == "option max_length='abc': expected a whole number"
    assert "pooling must be one of" in _refusal("inbedder[pooling=zzz]")
    assert "at most 64, got 2000" in _refusal("gircse[soft_tokens=2000]")  # the config's own check
    # Applied one after another, as loading applies them: refused in either order.
    for spec in ("causal2vec[context_placement=none,context_pooling=concat]",
                 "causal2vec[context_pooling=concat,context_placement=none]"):
        assert "needs" in _refusal(spec)
    check_embedder("causal2vec[context_placement=none,context_pooling=last]")
    check_embedder("inbedder[pooling=avg-gen,gen_tokens=2]")


@dataclass
class _Cfg:
    bigrams: bool = False
    width: int = 4

    def __post_init__(self) -> None:
        if self.width < 1:
            raise ValueError("width must be >= 1")


class _Toy:
    OPTIONS = ("bigrams", "width")
    config_class = _Cfg
    dim = 8

    def __init__(self, name: str, **kwargs: object) -> None:
        self.name = name
        self.config = _Cfg(**kwargs)  # type: ignore[arg-type]

    @property
    def identity(self) -> str:
        return self.name

    def encode(self, texts, *, role="document", instruction=None, batch_size=32, show_progress=False):
        return np.ones((len(texts), self.dim), dtype=np.float32)


def _toy(device: str | None = None, **kwargs: object) -> _Toy:
    return _Toy("toy-annotated", **kwargs)


@pytest.fixture
def toys() -> Iterator[None]:
    register_embedder("toy-annotated", _toy, "return annotation names its class")
    register_embedder("toy-declared", lambda device=None, **kw: _Toy("toy-declared", **kw), "declared",
                      model_class=_Toy)
    register_embedder("toy-unknown", lambda device=None, **kw: _Toy("toy-unknown", **kw), "not said")
    try:
        yield
    finally:
        for name in ("toy-annotated", "toy-declared", "toy-unknown"):
            unregister_embedder(name)


def test_a_plugin_s_options_when_its_class_is_known(toys) -> None:
    for name in ("toy-annotated", "toy-declared"):
        said = _refusal(f"{name}[bogus=1]")
        assert said == f"embedder '{name}' has no option 'bogus'; options: bigrams, width"
        with pytest.raises(InvalidInputError) as loaded:
            load_embedder(f"{name}[bogus=1]")
        assert str(loaded.value) == said
        assert _refusal(f"{name}[width=0]") == "option width='0': width must be >= 1"
        assert _refusal(f"{name}[bigrams=maybe]") == "option bigrams='maybe': expected a true or false"
        check_embedder(f"{name}[bigrams=true,width=2]")
    # Its class not known without calling the factory: checked when it loads, as before.
    check_embedder("toy-unknown[bogus=1]")
    with pytest.raises(InvalidInputError, match="has no option 'bogus'"):
        load_embedder("toy-unknown[bogus=1]")


def test_api_models_and_worker_preload_refuse_a_bogus_option(tmp_path) -> None:
    from app.api.server import check_api_models
    from worker.main import check_preload

    with pytest.raises(InvalidRequestError) as api:
        check_api_models(["minilm", "minilm[bogus=1]"])
    assert str(api.value) == ("FACET_API_MODELS names 'minilm[bogus=1]', which cannot be served: "
                              "embedder 'minilm' has no option 'bogus'; options: instruction_weight")
    with pytest.raises(InvalidRequestError) as malformed:
        check_api_models(["minilm[a]"])  # no key=value: an InvalidInputError too, escaped before
    assert str(malformed.value).startswith("FACET_API_MODELS names 'minilm[a]'"), malformed.value
    assert "not key=value" in str(malformed.value)
    settings = FacetSettings(data_dir=tmp_path / "data", worker_preload=["minilm[bogus=1]"])
    with pytest.raises(InvalidRequestError) as preload:  # domain_errors() maps it: exit 2
        check_preload(settings)
    assert str(preload.value) == ("FACET_WORKER_PRELOAD names 'minilm[bogus=1]', which cannot be "
                                  "loaded: embedder 'minilm' has no option 'bogus'; options: "
                                  "instruction_weight")
    # An empty list served nothing ("available: " and no name): refused at start.
    with pytest.raises(InvalidRequestError, match="FACET_API_MODELS is an empty list"):
        check_api_models([])
    check_api_models(None)  # unset: the registered names
    check_preload(settings.model_copy(update={"worker_preload": ["minilm[instruction_weight=1]"]}))
    # An empty list preloads none (it was read as unset: the default embedder loaded; the
    # distributed exploration of the fourth session of 2026-12-07); unset, the default.
    none = settings.model_copy(update={"worker_preload": [], "default_embedder": "nope"})
    assert none.preloaded() == []
    check_preload(none)  # (nothing to load: the unknown default is not checked)
    assert settings.model_copy(update={"worker_preload": None}).preloaded() == [settings.default_embedder]


def test_serve_exits_2_with_one_line_for_a_bogus_api_model_option(tmp_path) -> None:
    from tests.app.cli_runner import invoke_cli

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with mock.patch("uvicorn.run", side_effect=AssertionError("the server started")):
        result = invoke_cli("serve", "--port", str(port), env={
            "FACET_DATA_DIR": str(tmp_path / "data"), "FACET_API_MODELS": '["minilm[bogus=1]"]'})
    assert result.returncode == 2, result
    assert result.stderr.strip().splitlines() == [
        "error: FACET_API_MODELS names 'minilm[bogus=1]', which cannot be served: embedder 'minilm' "
        "has no option 'bogus'; options: instruction_weight"], result.stderr


def test_a_float_option_saved_as_a_whole_number_takes_a_fraction(minilm, tmp_path) -> None:
    """A checkpoint whose config saved a float field as 1 (the Python API, a hand-edited file)
    refused `[instruction_weight=0.5]`: "expected a whole number" (the type was read from the
    value, not the field)."""
    import json

    from embedders.baselines import EncoderMeanEmbedder

    EncoderMeanEmbedder("my-minilm", backbone=minilm.backbone, instruction_weight=1).save(tmp_path / "ck")
    assert json.loads((tmp_path / "ck" / "facet_config.json").read_text())["instruction_weight"] == 1
    model = load_embedder(f"{tmp_path / 'ck'}[instruction_weight=0.5]", device="cpu")
    assert model.config.instruction_weight == 0.5
    with pytest.raises(InvalidInputError, match=r"option instruction_weight='x': expected a number"):
        load_embedder(f"{tmp_path / 'ck'}[instruction_weight=x]", device="cpu")
