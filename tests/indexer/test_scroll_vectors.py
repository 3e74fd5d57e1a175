"""``scroll_with_vectors``: a scroll reads the points' vectors in the same pass (clustering a
collection scrolled its chunks, then retrieved the same points again for their vectors), on every
backend; and a server's payload index of a number filter serves the whole condition sent for it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from indexer.store import EdgeStore, PointRecord, QdrantClientStore, VectorStore, point_id
from tests.worker import qdrant_standin

DIM = 8


@pytest.fixture(params=["edge", "local", "memory"])
def store(request, tmp_path: Path) -> Iterator[VectorStore]:
    s: VectorStore = (
        EdgeStore(tmp_path / "edge")
        if request.param == "edge"
        else QdrantClientStore(path=tmp_path / "local" if request.param == "local" else ":memory:")
    )
    yield s
    s.close()


def _fill(store: VectorStore, n: int = 30) -> dict[str, dict[str, np.ndarray]]:
    """``n`` points with vectors ``m`` and ``w`` and term vectors; returns id -> name -> vector."""
    rng = np.random.default_rng(0)
    store.ensure_collection("c", {"m": DIM, "w": 4}, lexical=True)
    written = {}
    points = []
    for i in range(n):
        vectors = {"m": rng.normal(size=DIM).astype(np.float32), "w": rng.normal(size=4).astype(np.float32)}
        pid = point_id(f"d{i % 3}", i)
        written[pid] = vectors
        points.append(PointRecord(pid, vectors, {"doc_id": f"d{i % 3}", "chunk_no": i, "text": f"word{i} text"}))
    store.upsert("c", points)
    return written


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)  # cosine collections store unit vectors


def test_a_scroll_reads_the_vectors_asked_for_beside_the_same_hits(store: VectorStore) -> None:
    written = _fill(store)
    hits = store.scroll("c", limit=100, filters={"doc_id": "d1"})
    assert len(hits) == 10 and all(type(h).__name__ == "Hit" for h in hits)  # unchanged without vectors

    one = store.scroll_with_vectors("c", "m", limit=100, filters={"doc_id": "d1"})
    assert [h for h, _ in one] == hits  # the same points, payloads and order
    for hit, vectors in one:
        assert set(vectors) == {"m"}
        assert np.asarray(vectors["m"]) == pytest.approx(_unit(written[hit.id]["m"]), abs=1e-6)

    every = store.scroll_with_vectors("c", True, limit=7)  # every dense vector, not the term vectors
    assert [h for h, _ in every] == store.scroll("c", limit=7)
    assert all(set(vectors) == {"m", "w"} for _, vectors in every)
    assert every[:1] == store.retrieve("c", [every[0][0].id], with_vectors=True)  # as retrieve reads it

    # A name the collection lacks: the points without vectors (qdrant-edge refused the request).
    assert store.scroll_with_vectors("c", "other", limit=100, filters={"doc_id": "d1"}) == [(h, {}) for h in hits]
    bare = store.scroll_with_vectors("c", "w", limit=3, with_payload=False)
    assert all(h.payload == {} and set(v) == {"w"} for h, v in bare)


def test_a_scroll_past_a_page_reads_every_points_vectors(tmp_path: Path) -> None:
    """Scrolls read pages of 1,000: the vectors of the second page come with it."""
    store = EdgeStore(tmp_path)
    store.ensure_collection("c", {"m": DIM})
    rng = np.random.default_rng(1)
    vecs = rng.normal(size=(1200, DIM)).astype(np.float32)
    store.upsert("c", [PointRecord(point_id("d", i), {"m": vecs[i]}, {"chunk_no": i}) for i in range(1200)])
    read = store.scroll_with_vectors("c", "m", limit=1100)
    assert len(read) == 1100 and len({h.id for h, _ in read}) == 1100
    got = np.asarray([v["m"] for _, v in read])
    want = np.asarray([_unit(vecs[h.payload["chunk_no"]]) for h, _ in read])
    assert got == pytest.approx(want, abs=1e-6)
    store.close()


# ------------------------------------------------------------------ a server (the test stand-in)


@pytest.fixture()
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, list[tuple[str, Any]]]]:
    """The stand-in server (qdrant-client's local mode behind its REST API), and the index and
    count requests it was sent (path, body)."""
    sent: list[tuple[str, Any]] = []
    handle = qdrant_standin.handle

    def recording(method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if path.startswith("/collections/c/") and (path.endswith("/index") or path.endswith("/count")):
            sent.append((path.rsplit("/", 1)[-1], body))
        return handle(method, path, body)

    monkeypatch.setattr(qdrant_standin, "handle", recording)
    qdrant_standin._CLIENT.delete_collection("c")  # another test module's "c" may be left there
    with qdrant_standin.in_process() as url:
        try:
            yield url, sent
        finally:
            qdrant_standin._CLIENT.delete_collection("c")


def test_a_number_filter_is_a_range_a_float_index_serves_on_a_server(server) -> None:
    """An integer filter matches a field of 6 and one of 6.0 alike, so the server's index of it is
    a float index (an integer one leaves 6.0 out of a range), and the condition sent is the range
    [6, 6] alone, which that index serves: it was ``should`` [exact match, range], whose exact
    branch no float index serves, so a server checked it against every point's payload."""
    url, sent = server
    store = QdrantClientStore(url=url)
    store.ensure_collection("c", {"m": DIM})
    rng = np.random.default_rng(0)
    values = [6, 6.0, 6.5, 7, 2**62]
    store.upsert(
        "c",
        [
            PointRecord(point_id(f"d{i}", 0), {"m": rng.normal(size=DIM)}, {"doc_id": f"d{i}", "meta": {"n": v}})
            for i, v in enumerate(values)
        ],
    )
    assert store.count("c", {"meta.n": 6}) == 2 and store.count("c", {"meta.n": 6.0}) == 2
    assert store.count("c", {"meta.n": [6, 7]}) == 3 and store.count("c", {"meta.n": 2**62}) == 1
    assert ("index", {"field_name": "meta.n", "field_schema": "float"}) in sent
    counted = [body["filter"]["must"][0] for kind, body in sent if kind == "count"]
    assert counted[0] == counted[1] == {"key": "meta.n", "range": {"gte": 6.0, "lte": 6.0}}
    assert counted[2] == {"should": [{"key": "meta.n", "range": {"gte": v, "lte": v}} for v in (6.0, 7.0)]}
    assert counted[3] == {"key": "meta.n", "match": {"value": 2**62}}  # past 2**53: exact alone
    store.close()
