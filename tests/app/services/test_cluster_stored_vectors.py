"""Clustering a collection with the embedder that wrote it reads the chunks' stored vectors: minilm
reads a chunk under an instruction as a blend of the chunk bare (its stored vector) and the chunk
after the instruction, and computes that blend from the stored vector (``encode_from_plain``),
encoding only the instructed half. Clustering encoded every chunk again, bare half included,
although the search service's rerank already read them so. Real minilm, real Qdrant local mode."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from app.services.clustering import ClusterRequest, ClusterService
from app.services.search import SearchRequest

from .conftest import SUPPORT_ROWS

INSTRUCTION = "What does the customer want?"


def _rows(model, run):
    """``run()``'s result and the texts it ran through ``model``'s backbone (a forward hook)."""
    seen: list[int] = []
    handle = model.backbone.base_model().register_forward_pre_hook(
        lambda _module, args, kwargs: seen.append(int(kwargs["input_ids"].shape[0])), with_kwargs=True
    )
    try:
        return run(), sum(seen)
    finally:
        handle.remove()


def _same_clustering(got, want) -> None:
    assert got.texts == want.texts and got.labels == want.labels
    assert np.asarray(got.coordinates) == pytest.approx(np.asarray(want.coordinates), abs=2e-5)
    assert [c.keywords for c in got.clusters] == [c.keywords for c in want.clusters]


def test_a_collection_clusters_from_its_stored_vectors_as_from_its_texts(support_ctx, minilm) -> None:
    """The same labels and map as encoding the same texts whole, with only the instructed half of
    each chunk run through minilm (the bare half is the stored vector); a search's results are
    chunks of the collection too."""
    got, rows = _rows(
        minilm, lambda: ClusterService(support_ctx).cluster(ClusterRequest(INSTRUCTION, collection="support", k=3))
    )
    assert len(got.texts) == len(SUPPORT_ROWS) and rows == len(SUPPORT_ROWS), rows  # encoding: 2 x len(SUPPORT_ROWS)
    assert got.stored_vectors_used and not got.encode_reused and "encode" in got.timings_ms
    want, rows = _rows(
        minilm, lambda: ClusterService(support_ctx).cluster(ClusterRequest(INSTRUCTION, texts=got.texts, k=3))
    )
    assert rows == 2 * len(SUPPORT_ROWS) and not want.stored_vectors_used  # given texts: encoded
    _same_clustering(got, want)

    # With a progress bar (in pieces): the same, told how far.
    told: list[str] = []
    barred, rows = _rows(
        minilm,
        lambda: ClusterService(support_ctx).cluster(
            ClusterRequest(INSTRUCTION, collection="support", k=3), progress=lambda f, stage: told.append(stage)
        ),
    )
    assert rows == len(SUPPORT_ROWS) and barred.stored_vectors_used and f"encoding 0/{len(SUPPORT_ROWS)} texts" in told
    _same_clustering(barred, want)

    search = SearchRequest("top up", "support", instruction=INSTRUCTION, top_k=6, mode="dense")
    found, rows = _rows(
        minilm, lambda: ClusterService(support_ctx).cluster(ClusterRequest(INSTRUCTION, search=search, k=2))
    )
    assert found.stored_vectors_used and rows == 2 + 6  # the query's blend, the chunks' instructed half
    _same_clustering(found, ClusterService(support_ctx).cluster(ClusterRequest(INSTRUCTION, texts=found.texts, k=2)))


def test_the_cache_still_comes_first(support_ctx, minilm) -> None:
    """Another k of the same collection encodes nothing: the embeddings kept (``encode_reused``)."""
    service = ClusterService(support_ctx)
    service.cluster(ClusterRequest(INSTRUCTION, collection="support", k=3))
    again, rows = _rows(minilm, lambda: service.cluster(ClusterRequest(INSTRUCTION, collection="support", k=2)))
    assert rows == 0 and again.encode_reused and not again.stored_vectors_used


def test_another_embedder_than_the_collections_encodes_the_texts(support_ctx, minilm, minilm_namesake) -> None:
    """A checkpoint named "minilm" that reads documents through other prompts (another identity,
    the same backbone): the stored vectors are not its own, so every chunk is encoded whole."""
    path, namesake = minilm_namesake
    support_ctx.embedders.put(str(path), namesake)
    request = ClusterRequest(INSTRUCTION, collection="support", k=3, embedder=str(path))
    got, rows = _rows(minilm, lambda: ClusterService(support_ctx).cluster(request))
    assert rows == 2 * len(SUPPORT_ROWS) and not got.stored_vectors_used
    want = ClusterService(support_ctx).cluster(ClusterRequest(INSTRUCTION, texts=got.texts, k=3, embedder=str(path)))
    assert got.labels == want.labels and got.coordinates == want.coordinates


def test_on_a_server_the_instructed_half_is_encoded_on_the_model_thread(support_ctx, minilm) -> None:
    """Through the query encoder's ``encode_from_plain``: every forward pass of a server's models
    stays on its model thread (in pieces, queries served between them)."""
    from app.encoding import BatchingQueryEncoder

    support_ctx.encoder = BatchingQueryEncoder(support_ctx.embedders, threads=1)
    names: list[str] = []
    handle = minilm.backbone.base_model().register_forward_pre_hook(
        lambda *_: names.append(threading.current_thread().name)
    )
    try:
        got = ClusterService(support_ctx).cluster(ClusterRequest(INSTRUCTION, collection="support", k=3))
    finally:
        handle.remove()
        support_ctx.encoder.close()
    assert got.stored_vectors_used and len(got.labels) == len(SUPPORT_ROWS)
    assert names and set(names) == {"facet-encoder"}, names
