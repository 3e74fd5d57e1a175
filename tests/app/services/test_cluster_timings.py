"""A clustering's ``timings_ms`` always has ``encode``, and says reuse apart (``encode_reused``).

A clustering that reused the embeddings of an earlier one named its stage ``encode_reused``
instead of ``encode``: whatever read ``timings_ms["encode"]`` found nothing (a KeyError, or
a stage missing from a sum). Real minilm, through the service a server keeps.
"""

from __future__ import annotations

from app.services.clustering import ClusterRequest, ClusterService

from .test_cluster_cache import INSTRUCTION, TEXTS


def test_a_reused_clustering_still_times_encode_and_says_it_reused(make_ctx) -> None:
    service = ClusterService(make_ctx())  # one service: its embedding cache is kept
    first = service.cluster(ClusterRequest(INSTRUCTION, texts=TEXTS, k=3))
    again = service.cluster(ClusterRequest(INSTRUCTION, texts=TEXTS, k=2))
    assert "encode" in first.timings_ms and "encode" in again.timings_ms, again.timings_ms
    assert first.timings_ms["encode"] > 0 and not first.encode_reused
    assert 0 <= again.timings_ms["encode"] < 50 and again.encode_reused
    assert "encode_reused" not in again.timings_ms  # a flag, not a stage summed with the others
    assert list(again.timings_ms) == list(first.timings_ms)  # the same stages, in order
    assert first.to_dict()["encode_reused"] is False and again.to_dict()["encode_reused"] is True


def test_a_model_loaded_by_the_clustering_is_timed_apart_from_encoding(tmp_path, minilm) -> None:
    """``facet cluster`` said "encode 5.8s" for 8 texts: nearly all of it was loading the model,
    which index and search report apart. (The fixture's minilm shares its backbone with this
    load, so the load here is quick; the stage is what is checked.)"""
    from app.encoding import EmbedderCache
    from app.services.context import ServiceContext
    from app.settings import FacetSettings

    ctx = ServiceContext(FacetSettings(data_dir=tmp_path / "data"), embedders=EmbedderCache("cpu"))
    try:
        service = ClusterService(ctx)
        first = service.cluster(ClusterRequest(INSTRUCTION, texts=TEXTS, k=2, embedder="minilm"))
        again = service.cluster(ClusterRequest(INSTRUCTION, texts=TEXTS[:-1], k=2, embedder="minilm"))
    finally:
        ctx.close()
    assert "load_model" in first.timings_ms and first.timings_ms["load_model"] >= 0
    assert list(first.timings_ms)[:3] == ["texts", "load_model", "encode"]
    assert "load_model" not in again.timings_ms  # loaded once
