"""The cluster service reuses the embeddings of a clustering of the same texts under the same
instruction (another k, other counts): encoding was 97% of a clustering's time, paid again on
every run. Real minilm through the serving facade, whose model thread counts what it encodes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core import Facet
from app.encoding import EmbedderCache
from app.services.clustering import ClusterRequest, ClusterService
from app.settings import FacetSettings

TEXTS = [
    "My card has not arrived yet",
    "Where is my new card?",
    "The card I ordered never came",
    "The exchange rate you used is wrong",
    "What exchange rate do you apply?",
    "Currency conversion rate seems bad",
    "I forgot my PIN",
    "How do I reset my PIN code?",
    "My PIN is blocked after three tries",
]
INSTRUCTION = "What does the customer want?"


@pytest.fixture
def facet(minilm, tmp_path: Path) -> Iterator[Facet]:
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    with Facet.for_serving(FacetSettings(data_dir=tmp_path / "data"), embedders=cache) as facet:
        yield facet


def _encoded(facet: Facet) -> int:
    """Texts the facade's model thread has encoded so far."""
    return int(facet.encoder.stats.texts)  # type: ignore[attr-defined]


def test_another_k_of_the_same_texts_encodes_nothing_and_clusters_alike(facet) -> None:
    first = facet.cluster(ClusterRequest(INSTRUCTION, texts=TEXTS, k=3))
    assert _encoded(facet) == len(TEXTS) and "encode" in first.timings_ms
    other_k = facet.cluster(ClusterRequest(INSTRUCTION, texts=TEXTS, k=2, keywords=2, members=1))
    again = facet.cluster(ClusterRequest(f"  {INSTRUCTION} ", texts=TEXTS, k=3))  # as read: stripped
    assert _encoded(facet) == len(TEXTS)  # nothing encoded again
    for reused in (other_k, again):
        assert reused.encode_reused and reused.timings_ms["encode"] < 50
    # What the cache gives is what encoding gives: the same clusters and map, for either k.
    assert again.labels == first.labels and again.coordinates == first.coordinates
    fresh = ClusterService(facet.context).cluster(ClusterRequest(INSTRUCTION, texts=TEXTS, k=2, keywords=2, members=1))
    assert "encode" in fresh.timings_ms and fresh.labels == other_k.labels
    assert fresh.clusters == other_k.clusters and fresh.coordinates == other_k.coordinates


def test_other_texts_or_another_instruction_encode_again(facet) -> None:
    facet.cluster(ClusterRequest(INSTRUCTION, texts=TEXTS, k=3))
    asks = [
        ClusterRequest("What is the tone?", texts=TEXTS, k=3),
        ClusterRequest(INSTRUCTION, texts=[*TEXTS[:-1], "My PIN is blocked"], k=3),
        ClusterRequest(INSTRUCTION, texts=TEXTS[::-1], k=3),  # the same texts, reordered
        ClusterRequest(INSTRUCTION, texts=TEXTS, k=3, embedder="minilm[instruction_weight=1]"),
    ]
    for i, request in enumerate(asks, 2):
        result = facet.cluster(request)
        assert _encoded(facet) == i * len(TEXTS) and "encode" in result.timings_ms, request
    # A progress bar encodes in pieces (vectors the same within a tolerance): kept apart, reused.
    facet.cluster(ClusterRequest(INSTRUCTION, texts=TEXTS, k=3), progress=lambda f, s: None)
    facet.cluster(ClusterRequest(INSTRUCTION, texts=TEXTS, k=2), progress=lambda f, s: None)
    assert _encoded(facet) == (len(asks) + 2) * len(TEXTS)


def test_another_model_under_the_same_name_is_not_served_stale_vectors(facet, minilm_namesake) -> None:
    """A checkpoint retrained where the old one was: the same spec, another identity."""
    facet.cluster(ClusterRequest(INSTRUCTION, texts=TEXTS, k=3, embedder="minilm"))
    facet.embedder_cache.put("minilm", minilm_namesake[1])  # other prompts: other vectors
    result = facet.cluster(ClusterRequest(INSTRUCTION, texts=TEXTS, k=3, embedder="minilm"))
    assert _encoded(facet) == 2 * len(TEXTS) and "encode" in result.timings_ms


def test_the_cache_is_bounded(facet) -> None:
    cache = facet.clustering.embeddings
    from app.encoding import ENTRY_BYTES

    one = len(TEXTS) * 384 * 4 + ENTRY_BYTES  # minilm's float32 vectors of one clustering, and its key
    cache.max_bytes = one
    facet.cluster(ClusterRequest(INSTRUCTION, texts=TEXTS, k=3))
    facet.cluster(ClusterRequest("What is the tone?", texts=TEXTS, k=3))
    assert len(cache) == 1  # the first dropped for the second
    facet.cluster(ClusterRequest(INSTRUCTION, texts=TEXTS, k=2))
    assert _encoded(facet) == 3 * len(TEXTS)
    cache.max_bytes = one - 1  # a clustering larger than the whole cache is not kept
    for _ in range(2):
        facet.cluster(ClusterRequest("Which product?", texts=TEXTS, k=3))
    assert _encoded(facet) == 5 * len(TEXTS)


def test_a_long_instruction_is_kept_as_a_digest(facet) -> None:
    """The cache bounded its vectors' bytes, not its keys', which held the instruction whole:
    a server clustering 3 texts under each new 190 KB instruction (one long word is one
    unknown token: accepted) grew 337 KB a request, past any bound (the leak review of the
    seventh session of 2026-12-06). The keys hold a digest of it."""
    long = "What " + "x" * 150_000 + "?"
    facet.cluster(ClusterRequest(long, texts=TEXTS, k=3))
    again = facet.cluster(ClusterRequest(long, texts=TEXTS, k=2))
    assert again.encode_reused and _encoded(facet) == len(TEXTS)
    other = facet.cluster(ClusterRequest(long[:-1] + "!", texts=TEXTS, k=2))
    assert not other.encode_reused and _encoded(facet) == 2 * len(TEXTS)
    service = facet.clustering
    for keys in (list(service.embeddings._entries), list(service._unread)):
        assert len(keys) == 2
        assert all(len(repr(key)) < 600 for key in keys), [len(repr(k)) for k in keys]
