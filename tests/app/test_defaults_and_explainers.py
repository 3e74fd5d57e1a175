"""The default embedder on every edge, the explainers offered and refused, and a collection whose
embedder a plugin registered: real minilm (and plugins built on its weights, registered for the
test), real stores, the real CLI, LangChain class, UI handlers and cluster service."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.core import Facet
from app.encoding import EmbedderCache
from app.errors import InvalidRequestError, UnknownModelError
from app.services.clustering import ClusterRequest
from app.services.search import SearchRequest
from app.settings import FacetSettings
from embedders.baselines import EncoderMeanEmbedder
from embedders.registry import register_embedder, unregister_embedder
from tests.app.cli_runner import invoke_cli

REPO = Path(__file__).resolve().parents[2]
# Another packaged embedder, as cheap as minilm: it differs from it under an instruction.
OTHER = "minilm[instruction_weight=1]"
INSTRUCTION = "What is the topic?"
TEXTS = ["My card has not arrived yet", "Where is my new card?", "The card never came",
         "I want a refund", "Please give my money back", "Refund the payment"]


class _Counted(EncoderMeanEmbedder):
    """minilm's weights under a plugin's name, counting the texts it encodes."""

    encoded = 0

    def encode(self, texts: Sequence[str], **kwargs: Any) -> np.ndarray:
        type(self).encoded += len(texts)
        return super().encode(texts, **kwargs)


class _Namer(_Counted):
    """A plugin explainer: answers each text with its longest word (an ``AnswerGenerator``)."""

    def generate_answers(self, texts: Sequence[str], instruction: str | None,
                         max_new_tokens: int | None = None, batch_size: int = 16) -> list[str]:
        return [max(t.split(), key=len).lower() for t in texts]


@pytest.fixture
def plugin(minilm) -> Iterator[Any]:
    """``plugin(name, cls, explains=...)`` registers a model on minilm's backbone as a plugin
    (unregistered at teardown)."""
    names: list[str] = []

    def add(name: str, cls: type[_Counted] = _Counted, explains: bool | None = None) -> None:
        cls.encoded = 0
        register_embedder(name, lambda device=None, **_: cls(name=name, backbone=minilm.backbone),
                          "test plugin", explains=explains)
        names.append(name)

    yield add
    for name in names:
        unregister_embedder(name)


def _facet(minilm, tmp_path: Path, **settings: Any) -> Facet:
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    return Facet(FacetSettings(data_dir=tmp_path / "data", **settings), embedders=cache)


# --------------------------------------------------------------- 1. FACET_DEFAULT_EMBEDDER


def test_facet_embed_uses_the_default_embedder_setting(minilm, tmp_path) -> None:
    """`facet embed` without `-e` embedded with minilm whatever FACET_DEFAULT_EMBEDDER said."""
    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "FACET_DEFAULT_EMBEDDER": OTHER}

    def vectors(*args: str) -> np.ndarray:
        result = invoke_cli("embed", "-i", INSTRUCTION, *args, "a cat on the mat", env=env)
        assert result.returncode == 0, result.stderr
        out = json.loads(result.stdout)
        assert (out["embedder"], out["spec"]) == ("minilm", OTHER)  # the options said too
        return np.array(out["vectors"])

    by_default = vectors()
    assert np.allclose(by_default, vectors("-e", OTHER), atol=1e-6)
    plain = minilm.encode(["a cat on the mat"], instruction=INSTRUCTION)
    assert not np.allclose(by_default, plain, atol=1e-3)


def test_langchain_embeddings_use_the_facades_default_embedder(minilm, tmp_path) -> None:
    """``FacetEmbeddings().model`` was "minilm" whatever the facade's default embedder was."""
    pytest.importorskip("langchain_core")
    from app.integrations.langchain import FacetEmbeddings

    facet = _facet(minilm, tmp_path, default_embedder=OTHER)
    try:
        emb = FacetEmbeddings(facet=facet, document_instruction=INSTRUCTION,
                              query_instruction=INSTRUCTION)
        docs = np.array(emb.embed_documents(TEXTS[:2]))
        expected = facet.embed(TEXTS[:2], embedder=OTHER, instruction=INSTRUCTION).vectors
        plain = facet.embed(TEXTS[:2], embedder="minilm", instruction=INSTRUCTION).vectors
        assert np.allclose(docs, expected, atol=1e-6) and not np.allclose(docs, plain, atol=1e-3)
        query = facet.embed(TEXTS[:1], embedder=OTHER, role="query", instruction=INSTRUCTION)
        assert np.allclose(emb.embed_query(TEXTS[0]), query.vectors[0], atol=1e-6)
        # Named, it is what was named.
        named = FacetEmbeddings(model="minilm", facet=facet, document_instruction=INSTRUCTION)
        assert np.allclose(named.embed_documents(TEXTS[:2]), plain, atol=1e-6)
    finally:
        facet.close()


# --------------------------------------------------------------- 2. the UI's explainer picker


def test_the_ui_offers_every_allowed_model_that_answers_without_loading_any(plugin,
                                                                            tmp_path) -> None:
    """Only names containing "inbedder" were offered: an InBedder checkpoint in a folder of
    another name, or a plugin registered as an explainer, could be typed but was never listed;
    a checkpoint of a method that does not answer was listed for its folder's name."""
    from ui.handlers import NO_EXPLAINER, UiHandlers

    namer_dir, plain_dir = tmp_path / "namer", tmp_path / "my-inbedder-notes"
    for source, target in ((REPO / "checkpoints/inbedder", namer_dir),
                           (REPO / "checkpoints/causal-eos", plain_dir)):
        if not (source / "facet_config.json").is_file():
            pytest.skip(f"{source} not found")
        target.mkdir()  # the config alone: the picker reads only that
        shutil.copy(source / "facet_config.json", target / "facet_config.json")
    plugin("namer-plugin", _Namer, explains=True)
    plugin("plain-plugin", explains=False)
    plugin("unsaid-inbedder-plugin")  # it did not say: its name decides, as before
    plugin("unsaid-plugin")
    allowed = ["minilm", "inbedder", str(namer_dir), str(plain_dir), "namer-plugin",
               "plain-plugin", "unsaid-inbedder-plugin", "unsaid-plugin"]
    settings = FacetSettings(data_dir=tmp_path / "data", api_models=allowed)

    def no_facade() -> Facet:
        raise AssertionError("the picker needs no facade")

    handlers = UiHandlers(no_facade, settings, tmp_path / "exports")
    assert handlers.explainers() == [NO_EXPLAINER, "inbedder", str(namer_dir), "namer-plugin",
                                     "unsaid-inbedder-plugin"]
    assert _Counted.encoded == 0  # nothing was built to tell


# --------------------------------------------------------------- 3. refused before encoding


def _cluster(facet: Facet, explainer: str) -> tuple[list[str], Any]:
    stages: list[str] = []
    try:
        result = facet.cluster(ClusterRequest(INSTRUCTION, texts=TEXTS, k=2, explainer=explainer),
                               progress=lambda fraction, stage: stages.append(stage))
    except InvalidRequestError as e:
        return stages, e
    return stages, result


def test_an_explainer_that_does_not_answer_is_refused_before_any_text_is_encoded(
        minilm, plugin, tmp_path) -> None:
    """A plugin that did not say whether it answers was refused after the encoding and k-means
    ("45% ... answering", then the error); it is loaded first now. The message named InBedder
    checkpoints only, though a plugin registered as an explainer answers too."""
    plugin("unsaid-plugin")
    facet = _facet(minilm, tmp_path)
    try:
        for explainer in ("minilm", "unsaid-plugin"):  # known from the name / only by loading
            stages, error = _cluster(facet, explainer)
            assert isinstance(error, InvalidRequestError), error
            assert f"explainer {explainer!r} does not generate answers" in str(error)
            assert "registered as an explainer" in str(error)
            assert not any(s.startswith(("encoding", "k-means")) for s in stages), stages
        assert _Counted.encoded == 0
    finally:
        facet.close()


def test_an_explainer_only_loading_tells_is_loaded_first_and_names_the_clusters(
        minilm, plugin, tmp_path) -> None:
    plugin("unsaid-namer", _Namer)
    facet = _facet(minilm, tmp_path)
    try:
        stages, result = _cluster(facet, "unsaid-namer")
        assert not isinstance(result, Exception), result
        assert stages.index("loading the explainer unsaid-namer") < min(
            i for i, s in enumerate(stages) if s.startswith("encoding"))
        # The clusters are named by its answers (longest words), not by keywords.
        answers = [max(t.split(), key=len).lower() for t in TEXTS]
        assert result.answers == answers
        assert all(c.name in answers and c.name_count for c in result.clusters)
    finally:
        facet.close()


# --------------------------------------------------------------- 4. a missing plugin's collection


def test_a_collection_whose_plugin_is_not_registered_says_how_to_search_it(minilm, plugin,
                                                                           tmp_path) -> None:
    """"put it back, or search with an embedder naming a copy of the same weights" left out that
    a plugin loads only where it is registered, and that the words are searchable without it."""
    plugin("gone-plugin")
    (tmp_path / "docs").mkdir()
    for i, text in enumerate(TEXTS):
        (tmp_path / "docs" / f"{i}.txt").write_text(text)
    from app.services.indexing import IndexOptions

    facet = _facet(minilm, tmp_path)
    try:
        facet.index(tmp_path / "docs", "notes", IndexOptions(embedder="gone-plugin"))
    finally:
        facet.close()
    unregister_embedder("gone-plugin")  # another process, without the plugin
    facet = _facet(minilm, tmp_path)
    try:
        with pytest.raises(UnknownModelError) as info:
            facet.search(SearchRequest(query="refund", collection="notes"))
        message = str(info.value)
        assert "put it back (an embedder from a plugin loads only where the plugin is " \
               "registered: its package's `facet.embedders` entry point, or FACET_PLUGINS)" in message
        assert "mode lexical (`--mode lexical`)" in message
        hits = facet.search(SearchRequest(query="refund", collection="notes", mode="lexical"))
        assert hits.results and "refund" in hits.results[0].text.lower()
    finally:
        facet.close()
