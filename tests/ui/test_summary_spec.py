"""The Search and Cluster tabs' summaries name the embedder spec that ran, options included:
they named the collection's vector or the model ("minilm"), so a query read at
``minilm[instruction_weight=1]`` (the collection's recorded spec, or one picked) looked like
plain minilm, and a reranker's options were dropped too. Real handlers over a real store and
minilm; nothing is mocked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("gradio")

SPEC = "minilm[instruction_weight=1]"
OTHER = "minilm[instruction_weight=0.5]"
TEXTS = [
    ("lost", "the card I ordered never arrived in the post"),
    ("declined", "my card payment was declined at the shop"),
    ("top-up", "how do I top up my account with apple pay"),
    ("transfer", "my transfer to a friend has not shown up yet"),
]
QUERY, INSTRUCTION = "my new card has not come", "Find messages with the same customer intent"


@pytest.fixture(scope="module")
def facet(minilm, tmp_path_factory) -> Iterator[Any]:
    """A facade over ``c1``, indexed with ``SPEC``, and ``plain``, indexed with minilm."""
    from app.core import Facet
    from app.encoding import EmbedderCache
    from app.services.indexing import IndexOptions
    from app.settings import FacetSettings

    base = tmp_path_factory.mktemp("summary-spec")
    source = base / "corpus"
    source.mkdir()
    (source / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "text": t}) + "\n"
                                                 for i, t in TEXTS))
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facade = Facet(FacetSettings(data_dir=base / "data", ui_allowed_roots=[base]), embedders=cache)
    facade.index(source, "c1", IndexOptions(embedder=SPEC))
    facade.index(source, "plain", IndexOptions(embedder="minilm"))
    assert facade.collection("c1").sources == {"minilm": SPEC}
    yield facade
    facade.close()


def handlers(facet: Any, **settings: Any) -> Any:
    from ui.handlers import UiHandlers

    return UiHandlers(facet, facet.settings.model_copy(update=settings))


def summary(h: Any, embedder: str | None, *, collection: str = "c1", reranker: str | None = None,
            mode: str = "dense") -> str:
    _html, line = h.search(QUERY, INSTRUCTION, collection, embedder, 2, "", reranker is not None,
                           reranker, False, mode)
    return str(line)


def test_search_summary_names_the_recorded_spec(facet) -> None:
    """Picked as the picker offers it, by the vector's name, or not at all: the query is read
    at the recorded weight, and the summary said "(minilm)"."""
    h = handlers(facet)
    for picked in (SPEC, "minilm", None):
        assert f"<b>c1</b> ({SPEC}) under the instruction" in summary(h, picked), picked
    # A collection indexed without options is still named by its vector.
    assert "<b>plain</b> (minilm) under the instruction" in summary(h, "minilm", collection="plain")


def test_search_summary_names_a_picked_spec_and_the_rerankers_spec(facet) -> None:
    """A spec typed in the picker (listed in FACET_API_MODELS) overrides the recorded weight,
    and a reranker spec listed in FACET_UI_RERANKERS reranks with its options: both read as
    plain "minilm"."""
    h = handlers(facet, api_models=["minilm", OTHER], ui_rerankers=["minilm", SPEC])
    assert f"<b>c1</b> ({OTHER}) under" in summary(h, OTHER)
    assert f"<b>plain</b> ({OTHER}) under" in summary(h, OTHER, collection="plain")
    assert f"<b>c1</b> ({SPEC}, reranked by {SPEC}) under" in summary(h, SPEC, reranker=SPEC)
    assert f"<b>plain</b> (minilm, reranked by {SPEC}) under" in summary(
        h, "minilm", collection="plain", reranker=SPEC)
    assert "<b>plain</b> (minilm, reranked by minilm) under" in summary(
        h, "minilm", collection="plain", reranker="minilm")


def test_a_word_search_names_no_embedder(facet) -> None:
    """Lexical: no embedder ran, so the collection's spec is not named."""
    from indexer.lexical import LEXICAL_LABEL

    line = summary(handlers(facet), SPEC, mode="lexical")
    assert f"<b>c1</b> ({LEXICAL_LABEL}) by the words alone" in line and "minilm" not in line


def test_cluster_summary_names_the_spec(facet) -> None:
    """The Cluster tab encoded the texts with the spec and said "embedder minilm"."""
    h = handlers(facet)
    for picked, named in ((SPEC, SPEC), ("minilm", "minilm")):
        line, _figure, _rows, _csv = h.cluster("collection", "c1", "", 0, None, None, None, None,
                                               None, "What does the customer want?", 2, picked,
                                               None)
        assert f"embedder {named}, names from keywords" in line, picked
