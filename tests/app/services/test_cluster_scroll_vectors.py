"""Clustering a collection reads its chunks' stored vectors in the scroll that reads the chunks: it
scrolled the collection, then retrieved the same points again for their vectors
(``stored_vectors``). The identity check still applies, and a search's results (no scroll) are
still retrieved. Real minilm, the real edge store (a counting wrapper around its ``retrieve``)."""

from __future__ import annotations

from typing import Any

from app.services.clustering import ClusterRequest, ClusterService

from .conftest import SUPPORT_ROWS
from .test_cluster_stored_vectors import INSTRUCTION, _same_clustering


def _count_retrieves(ctx: Any, monkeypatch) -> list[tuple[str, list[str]]]:
    """The (collection, ids) of every ``retrieve`` the real store serves from now on."""
    calls: list[tuple[str, list[str]]] = []
    real = ctx.store.retrieve

    def retrieve(collection: str, ids: Any, with_vectors: bool = False) -> Any:
        calls.append((collection, list(ids)))
        return real(collection, ids, with_vectors=with_vectors)

    monkeypatch.setattr(ctx.store, "retrieve", retrieve)
    return calls


def test_a_collection_is_clustered_from_the_vectors_its_scroll_read(support_ctx, monkeypatch) -> None:
    retrieves = _count_retrieves(support_ctx, monkeypatch)
    got = ClusterService(support_ctx).cluster(ClusterRequest(INSTRUCTION, collection="support", k=3))
    assert got.stored_vectors_used and len(got.texts) == len(SUPPORT_ROWS)
    assert retrieves == []  # the scroll read the vectors: no second read of the same points
    want = ClusterService(support_ctx).cluster(ClusterRequest(INSTRUCTION, texts=got.texts, k=3))
    assert not want.stored_vectors_used
    _same_clustering(got, want)

    # Filtered and cut (fewer chunks than match): the same.
    part = ClusterService(support_ctx).cluster(ClusterRequest(INSTRUCTION, collection="support", k=2, limit=6))
    assert part.stored_vectors_used and len(part.texts) == 6 and retrieves == []
    _same_clustering(part, ClusterService(support_ctx).cluster(ClusterRequest(INSTRUCTION, texts=part.texts, k=2)))


def test_a_searchs_results_are_still_retrieved(support_ctx, monkeypatch) -> None:
    """No scroll read them: their vectors are read by id, once."""
    from app.services.search import SearchRequest

    retrieves = _count_retrieves(support_ctx, monkeypatch)
    search = SearchRequest("top up", "support", instruction=INSTRUCTION, top_k=6, mode="dense")
    found = ClusterService(support_ctx).cluster(ClusterRequest(INSTRUCTION, search=search, k=2))
    assert found.stored_vectors_used and len(retrieves) == 1 and len(retrieves[0][1]) == 6


def test_another_embedder_than_the_collections_does_not_use_the_scrolled_vectors(
    support_ctx, minilm_namesake, monkeypatch
) -> None:
    """A checkpoint named "minilm" of another identity: the vectors the scroll read under its name
    are not its own, so every chunk is encoded whole, as before."""
    path, namesake = minilm_namesake
    support_ctx.embedders.put(str(path), namesake)
    retrieves = _count_retrieves(support_ctx, monkeypatch)
    request = ClusterRequest(INSTRUCTION, collection="support", k=3, embedder=str(path))
    got = ClusterService(support_ctx).cluster(request)
    assert not got.stored_vectors_used and retrieves == []
    want = ClusterService(support_ctx).cluster(ClusterRequest(INSTRUCTION, texts=got.texts, k=3, embedder=str(path)))
    assert got.labels == want.labels and got.coordinates == want.coordinates
