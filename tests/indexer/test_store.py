"""The same store tests against every backend ("congruence"): qdrant-edge, qdrant-client local."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from indexer import lexical as lex
from indexer.errors import CollectionNotFoundError, StoreError
from indexer.store import (
    EdgeStore,
    Fusion,
    PointRecord,
    QdrantClientStore,
    StoreClosedError,
    VectorStore,
    point_id,
)

DIM = 8


def _open(kind: str, root: Path) -> VectorStore:
    if kind == "edge":
        return EdgeStore(root / "edge")
    if kind == "local":
        return QdrantClientStore(path=root / "local")
    return QdrantClientStore(path=":memory:")


@pytest.fixture(params=["edge", "local", "memory"])
def store(request, tmp_path: Path) -> Iterator[VectorStore]:
    s = _open(request.param, tmp_path)
    yield s
    s.close()


def _points(n: int, seed: int = 0) -> tuple[list[PointRecord], np.ndarray]:
    rng = np.random.default_rng(seed)
    vecs = rng.normal(size=(n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    points = [PointRecord(point_id(f"doc{i % 5}", i), {"m": vecs[i]},
                          {"doc_id": f"doc{i % 5}", "chunk_no": i, "text": f"t{i}",
                           "meta": {"lang": "en" if i % 2 else "fr", "year": 2000 + i % 3}})
              for i in range(n)]
    return points, vecs


def test_point_ids_are_deterministic_uuids() -> None:
    assert point_id("a", 0) == point_id("a", 0)
    assert point_id("a", 0) != point_id("a", 1) != point_id("b", 1)
    assert len(point_id("a", 0)) == 36


def test_upsert_search_count_and_no_duplicates(store: VectorStore) -> None:
    store.ensure_collection("c", {"m": DIM})
    points, vecs = _points(40)
    store.upsert("c", points)
    store.upsert("c", points[:10])  # same ids again: overwritten, not duplicated
    assert store.count("c") == 40
    query = vecs[3]
    hits = store.search("c", "m", query, limit=5, exact=True)
    expected = np.argsort(-(vecs @ query))[:5]
    assert [h.id for h in hits] == [points[i].id for i in expected]
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert hits[0].payload["text"] == "t3"


def test_filters(store: VectorStore) -> None:
    store.ensure_collection("c", {"m": DIM})
    points, vecs = _points(40)
    store.upsert("c", points)
    assert store.count("c", {"doc_id": "doc1"}) == 8
    assert store.count("c", {"doc_id": ["doc1", "doc2"]}) == 16
    assert store.count("c", {"meta.lang": "en"}) == 20
    assert store.count("c", {"meta.lang": "en", "meta.year": 2001}) == 7
    hits = store.search("c", "m", vecs[0], limit=40, filters={"meta.lang": "fr"})
    assert len(hits) == 20 and all(h.payload["meta"]["lang"] == "fr" for h in hits)


def test_boolean_and_mixed_filters_match_exactly_or_are_refused(store: VectorStore) -> None:
    """A payload true is not the integer 1. On the edge store a filter on true used to return
    the point whose field was 1 and miss the one whose field was true (its binding reads a bool
    as an int), so it is refused there; a list of booleans or of mixed types failed on the
    qdrant-client stores (MatchAny takes only all-string or all-integer lists)."""
    from indexer.errors import StoreError

    store.ensure_collection("c", {"m": DIM})
    values = [True, 1, False, 0, "a"]
    rng = np.random.default_rng(0)
    store.upsert("c", [PointRecord(str(uuid.UUID(int=i + 1)), {"m": rng.normal(size=DIM)},
                                   {"doc_id": f"d{i}", "f": v}) for i, v in enumerate(values)])

    def match(value: object) -> set[str]:
        hits = store.search("c", "m", rng.normal(size=DIM), limit=10, filters={"f": value})
        return {h.payload["doc_id"] for h in hits}

    assert match(1) == match([1]) == {"d1"}
    assert match(["a", 1]) == {"d1", "d4"}  # mixed types: any of them
    assert match([0, 1]) == {"d1", "d3"}
    if store.backend == "edge":
        for value in (True, [False], ["a", True]):
            with pytest.raises(StoreError, match="the edge store cannot match true/false"):
                match(value)
    else:
        assert match(True) == match([True]) == {"d0"}
        assert match([True, False]) == {"d0", "d2"}
        assert match(["a", False, 1]) == {"d1", "d2", "d4"}


def test_a_number_matches_a_field_holding_it_as_an_integer_or_a_float(store: VectorStore) -> None:
    """A float field could not be matched at all: Qdrant's exact match takes no floats (6.0 was
    refused) and matches an integer only to an integer field (6 found nothing)."""
    store.ensure_collection("c", {"m": DIM})
    values = [6.0, 6, 4.5, 2**62, "6"]
    rng = np.random.default_rng(0)
    store.upsert("c", [PointRecord(str(uuid.UUID(int=i + 1)), {"m": rng.normal(size=DIM)},
                                   {"doc_id": f"d{i}", "price": v}) for i, v in enumerate(values)])

    def match(value: object) -> set[str]:
        hits = store.search("c", "m", rng.normal(size=DIM), limit=10, filters={"price": value})
        assert store.count("c", {"price": value}) == len(hits)
        return {h.payload["doc_id"] for h in hits}

    assert match(6.0) == match(6) == {"d0", "d1"}
    assert match(4.5) == {"d2"} and match(4.0) == set()
    assert match([4.5, 6]) == {"d0", "d1", "d2"}
    assert match(2**62) == {"d3"}  # beyond a float's exact integers: the exact match alone
    assert match("6") == {"d4"}


def test_delete_by_id_and_by_document(store: VectorStore) -> None:
    store.ensure_collection("c", {"m": DIM})
    points, _ = _points(40)
    store.upsert("c", points)
    store.delete("c", [points[0].id, points[1].id])
    assert store.count("c") == 38
    store.delete_documents("c", ["doc2", "doc3"])
    assert store.count("c") == 38 - 16
    assert store.count("c", {"doc_id": "doc2"}) == 0
    assert len(store.scroll("c", limit=1000)) == 22


def test_update_vectors_keeps_payload_and_other_vectors(store: VectorStore) -> None:
    store.ensure_collection("c", {"m": DIM, "n": 3})
    points, _ = _points(4)
    store.upsert("c", points)
    store.update_vectors("c", "n", [p.id for p in points], np.eye(4, 3, dtype=np.float32)[:4] + 0.1)
    hit, vectors = store.retrieve("c", [points[0].id], with_vectors=True)[0]
    assert hit.payload["text"] == "t0"
    assert set(vectors) == {"m", "n"}
    best = store.search("c", "n", [1.0, 0.0, 0.0], limit=1, exact=True)
    assert best[0].id == points[0].id


def test_collection_management_and_errors(store: VectorStore) -> None:
    assert store.list_collections() == []
    store.ensure_collection("a", {"m": DIM})
    store.ensure_collection("a", {"m": DIM})  # idempotent
    assert store.vector_sizes("a") == {"m": DIM}
    with pytest.raises(StoreError, match="size 8, not 4"):
        store.ensure_collection("a", {"m": 4})
    with pytest.raises(CollectionNotFoundError, match="no collection 'zz'"):
        store.count("zz")
    with pytest.raises(StoreError, match="no vectors from 'other'"):
        store.search("a", "other", [0.0] * DIM, limit=1)
    for bad in ("../x", "nl\n", "a\nb", ""):  # "nl\n" passed and made a folder named so
        with pytest.raises(StoreError, match="invalid collection name"):
            store.ensure_collection(bad, {"m": DIM})
    # "use letters" refused "café" and "中文" without saying why: they are letters, not ASCII ones.
    with pytest.raises(StoreError, match=r"invalid collection name 'café': use 1-128 ASCII letters"):
        store.ensure_collection("café", {"m": DIM})
    # "a.lock" is collection a's lock file's name in the embedded store (any case: a disk
    # that takes names without case takes "a.LOCK" as it).
    for bad in ("a.lock", "a.LOCK"):
        with pytest.raises(StoreError, match=r"may not end in '\.lock'"):
            store.ensure_collection(bad, {"m": DIM})
    assert store.list_collections() == ["a"]
    assert store.drop_collection("a") is True
    assert store.drop_collection("a") is False
    assert store.list_collections() == []


def test_adding_a_named_vector_for_a_second_embedder(store: VectorStore) -> None:
    store.ensure_collection("c", {"m": DIM})
    if isinstance(store, EdgeStore):
        store.ensure_collection("c", {"m": DIM, "second": 3})
        assert store.vector_sizes("c") == {"m": DIM, "second": 3}
    else:  # qdrant-client cannot add a vector to an existing collection: say so, and how
        with pytest.raises(StoreError, match="cannot add one to an existing collection"):
            store.ensure_collection("c", {"second": 3})


@pytest.mark.parametrize("kind", ["edge", "local"])
def test_data_survives_reopening(kind: str, tmp_path: Path) -> None:
    s = _open(kind, tmp_path)
    s.ensure_collection("c", {"m": DIM})
    points, _ = _points(12)
    s.upsert("c", points)
    s.close()
    s = _open(kind, tmp_path)
    try:
        assert s.list_collections() == ["c"]
        assert s.count("c") == 12
    finally:
        s.close()


def _recording(call, outcome: list) -> Callable[[], None]:
    """A thread target that appends what ``call()`` returns, or what it raises, to ``outcome``."""

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as e:
            outcome.append(e)

    return run


class _ShardWrapper:
    """An edge shard whose close first runs ``before_close`` (the binding's objects take no
    attributes, so the test wraps them)."""

    def __init__(self, shard, before_close) -> None:
        self.shard, self.before_close = shard, before_close

    def flush(self) -> None:
        self.shard.flush()

    def close(self) -> None:
        self.before_close()
        self.shard.close()


def test_a_collection_opened_while_the_edge_store_closes_is_not_left_locked(tmp_path: Path) -> None:
    """A reader thread opening another collection mid-close waits for the close and then owns
    a tracked shard; it must not open one the close then forgets, its folder lock held."""
    from indexer.store import _LOCKS

    store = EdgeStore(tmp_path / "edge")
    for name in ("a", "b"):
        store.ensure_collection(name, {"m": DIM})
        store.upsert(name, _points(3)[0])
    store.release("b")  # only "a" open when close starts
    outcome: list[BaseException | int] = []

    thread = threading.Thread(target=_recording(lambda: store.count("b"), outcome))

    def open_b_mid_close() -> None:
        thread.start()
        thread.join(timeout=1.0)  # time for the reader to (wrongly) open "b" now

    store._shards["a"] = _ShardWrapper(store._shards["a"], open_b_mid_close)
    store.close()
    thread.join(timeout=30)
    # A closed store opens nothing again (2026-12-01: a call that waited for the close reopened
    # the shard, its folder lock held in a store nobody would close)
    assert len(outcome) == 1 and isinstance(outcome[0], StoreClosedError), outcome
    b_lock = str(store._lock_path("b"))
    assert b_lock not in _LOCKS._held and "b" not in store._shards
    store.close()
    assert b_lock not in _LOCKS._held and str(store._lock_path("a")) not in _LOCKS._held


class _BlockingSearch(_ShardWrapper):
    """A shard whose searches wait for ``go`` after signalling ``entered``."""

    def __init__(self, shard) -> None:
        super().__init__(shard, lambda: None)
        self.entered, self.go = threading.Event(), threading.Event()

    def search(self, request):
        self.entered.set()
        assert self.go.wait(timeout=30)
        return self.shard.search(request)


@pytest.mark.parametrize("closing", ["drop", "release", "close"])
def test_a_search_in_flight_finishes_before_its_shard_is_closed(tmp_path: Path, closing: str) -> None:
    """A search running when another thread drops, releases or closes the collection returns
    its hits; the close waits for it (before, the binding raised a bare "Shard is not
    initialized" into the search)."""
    store = EdgeStore(tmp_path / "edge")
    store.ensure_collection("c", {"m": DIM})
    points, vectors = _points(4)
    store.upsert("c", points)
    slow = store._shards["c"] = _BlockingSearch(store._shards["c"])
    found: list[BaseException | list] = []

    searcher = threading.Thread(target=_recording(lambda: store.search("c", "m", vectors[0], limit=2), found))
    searcher.start()
    assert slow.entered.wait(timeout=30)
    act = {"drop": lambda: store.drop_collection("c"), "release": lambda: store.release("c"),
           "close": store.close}[closing]
    closer = threading.Thread(target=act)
    closer.start()
    closer.join(timeout=0.5)
    assert closer.is_alive()  # waiting for the search, not closing the shard under it
    slow.go.set()
    searcher.join(timeout=30)
    closer.join(timeout=30)
    assert not closer.is_alive()
    assert len(found) == 1 and isinstance(found[0], list) and found[0][0].id == points[0].id, found
    if closing == "drop":
        with pytest.raises(CollectionNotFoundError):
            store.search("c", "m", vectors[0], limit=2)
    elif closing == "release":  # the next call opens the shard again
        assert store.count("c") == 4
    else:  # a closed store opens nothing again (since 2026-12-01)
        with pytest.raises(StoreClosedError):
            store.count("c")
    store.close()


def test_a_shard_that_fails_to_close_does_not_keep_the_others_open(tmp_path: Path) -> None:
    from indexer.store import _LOCKS

    store = EdgeStore(tmp_path / "edge")
    for name in ("a", "b"):
        store.ensure_collection(name, {"m": DIM})

    def fail() -> None:
        raise RuntimeError("disk gone")

    broken = store._shards["a"] = _ShardWrapper(store._shards["a"], fail)
    with pytest.raises(StoreError, match=r"cannot close edge shard .*a: disk gone"):
        store.close()
    assert store._shards == {}
    assert not any(str(store._lock_path(n)) in _LOCKS._held for n in ("a", "b"))
    reopened = EdgeStore(tmp_path / "edge")  # "b" was closed properly and opens again
    assert reopened.count("b") == 0
    reopened.close()
    broken.shard.close()


def test_an_edge_store_whose_folder_was_deleted_fails_with_one_line(tmp_path: Path, caplog) -> None:
    """Deleting the data folder under a running job ended it in a 69-line traceback: qdrant-edge
    raises bare ``Exception``s ("Service runtime error: Failed to flush id_tracker mapping ...
    No such file or directory") from ``flush``, and the job's ``release`` raised a second one.
    Each is now one StoreError line naming the folder; the folder lock is let go all the same;
    and a release while another error is on its way out logs its failure instead of raising
    it in that error's place."""
    import logging
    import shutil

    from indexer.store import _LOCKS

    root = tmp_path / "edge"
    store = EdgeStore(root)
    store.ensure_collection("c", {"m": DIM})
    points, vectors = _points(6)
    store.upsert("c", points[:5])
    store.flush()
    shutil.rmtree(root)
    store.upsert("c", points[5:])  # into the WAL it still has open
    folder = root / "c"
    with pytest.raises(StoreError) as flushed:
        store.flush()
    message = str(flushed.value)
    assert message.startswith(f"collection 'c': the vector store's files in {folder} are gone or "
                              "unreadable (the data folder deleted, moved or unmounted while in "
                              "use?); writing it to disk (flush) failed: "), message
    assert "\n" not in message and type(flushed.value.__cause__) is Exception
    with pytest.raises(StoreError, match=r"cannot read the vector store's folder .*No such file"):
        store.search("c", "m", vectors[0], limit=2)  # was a FileNotFoundError traceback
    with pytest.raises(StoreError, match=r"files in .*/c are gone or unreadable .* closing it failed"):
        store.release("c")
    assert not store.is_open("c") and str(store._lock_path("c")) not in _LOCKS._held

    # The same while another error is on its way out (a job's `finally`): that error stays.
    again = EdgeStore(tmp_path / "again")
    again.ensure_collection("c", {"m": DIM})
    again.upsert("c", points[:5])
    shutil.rmtree(tmp_path / "again")
    again.upsert("c", points[5:])
    with caplog.at_level(logging.DEBUG, logger="indexer.store"), \
            pytest.raises(KeyboardInterrupt):
        try:
            raise KeyboardInterrupt
        finally:
            again.release("c")
    logged = [r for r in caplog.records if "gone or unreadable" in r.getMessage()]
    assert logged and logged[0].levelno == logging.WARNING, caplog.text
    assert "not raised: it came while handling KeyboardInterrupt" in logged[0].getMessage()
    assert str(again._lock_path("c")) not in _LOCKS._held
    store.close()
    again.close()


def test_an_edge_binding_error_is_a_store_error_and_other_errors_pass(tmp_path: Path) -> None:
    """Any plain ``Exception`` the binding raises in a call on a shard is one StoreError line
    naming the collection's folder (a bare traceback before); Python's own errors (a bug) are
    not disguised."""
    store = EdgeStore(tmp_path / "edge")
    store.ensure_collection("c", {"m": DIM})
    real = store._shards["c"]

    class Failing:  # the binding's objects take no attributes: a stand-in shard
        def __init__(self, error: BaseException) -> None:
            self.error = error

        def count(self, _request):
            raise self.error

    store._shards["c"] = Failing(Exception("Wrong input: boom\nin two lines"))
    with pytest.raises(StoreError) as refused:
        store.count("c")
    assert str(refused.value) == (f"collection 'c': edge shard {tmp_path / 'edge' / 'c'}: counting "
                                  "its points failed: Wrong input: boom in two lines")
    store._shards["c"] = Failing(ValueError("ours"))
    with pytest.raises(ValueError, match="ours"):
        store.count("c")
    store._shards["c"] = real
    assert store.count("c") == 0  # the shard is still usable
    store.close()


def test_no_reader_reopens_an_edge_collection_while_it_is_being_dropped(tmp_path: Path, monkeypatch) -> None:
    """A reader thread that asks for the collection mid-drop waits, then finds it gone; it must
    not re-open the shard between its close and the folder's removal (its WAL files would make
    the removal fail and leave an open shard on a deleted collection)."""
    import shutil

    import indexer.store as store_module

    store = EdgeStore(tmp_path / "edge")
    store.ensure_collection("c", {"m": DIM})
    points, _ = _points(4)
    store.upsert("c", points)
    outcome: list[BaseException | int] = []

    real_rmtree = shutil.rmtree
    started: list[threading.Thread] = []

    def rmtree_with_a_reader_in_between(path, *args, **kwargs):
        thread = threading.Thread(target=_recording(lambda: store.count("c"), outcome))
        thread.start()
        started.append(thread)
        thread.join(timeout=1.0)  # time for the reader to (wrongly) open the shard
        real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(store_module.shutil, "rmtree", rmtree_with_a_reader_in_between)
    assert store.drop_collection("c") is True
    started[0].join(timeout=30)
    assert len(outcome) == 1 and isinstance(outcome[0], CollectionNotFoundError), outcome
    assert not (tmp_path / "edge" / "c").exists() and "c" not in store._shards
    store.close()


# ------------------------------------------------------------------ lexical and hybrid search

# The three texts with "cat" have different BM25 scores (term frequency, length), so rankings have no ties.
_TEXTS = ["Cats chase mice in the garden, and the cats win", "The stock market fell sharply today",
          "A cat sleeps on the warm sofa", "Quarterly earnings beat the market forecast",
          "Dogs and cats can live together in one big house with a garden and a pond",
          "Interest rates rose again this year"]


def _worded(n_texts: int = len(_TEXTS)) -> tuple[list[PointRecord], np.ndarray]:
    rng = np.random.default_rng(3)
    vecs = rng.normal(size=(n_texts, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    points = [PointRecord(point_id(f"doc{i}", 0), {"m": vecs[i]},
                          {"doc_id": f"doc{i}", "chunk_no": 0, "text": _TEXTS[i],
                           "meta": {"topic": "animals" if i in (0, 2, 4) else "money"}})
              for i in range(n_texts)]
    return points, vecs


def test_lexical_search_scores_the_words_with_bm25(store: VectorStore) -> None:
    store.ensure_collection("c", {"m": DIM}, lexical=True)
    points, _ = _worded()
    store.upsert("c", points)
    assert store.has_lexical("c")
    hits = store.search_lexical("c", "cat", limit=10)
    # "Cats" and "cat" are one term (stemmed, lower-cased); texts without it are not returned.
    assert {h.payload["doc_id"] for h in hits} == {"doc0", "doc2", "doc4"}
    assert all(h.score > 0 for h in hits)
    # A rarer term weighs more (IDF): "market" is in two texts, "sharply" in one.
    top = store.search_lexical("c", "market sharply", limit=2)
    assert top[0].payload["doc_id"] == "doc1"
    assert top[0].score > top[1].score
    assert [h.payload["doc_id"] for h in store.search_lexical("c", "cat", limit=10,
                                                               filters={"meta.topic": "money"})] == []
    assert store.search_lexical("c", "the of and", limit=5) == []  # only stopwords: no terms
    # Tied BM25 scores (the same word, texts of one length) come in point-id order, every time.
    store.upsert("c", [PointRecord(point_id(f"twin{i}", 0), {"m": points[0].vectors["m"]},
                                   {"doc_id": f"twin{i}", "chunk_no": 0, "text": "zebra crossing"})
                       for i in range(8)])
    twins = store.search_lexical("c", "zebra", limit=5)
    assert [h.id for h in twins] == sorted(point_id(f"twin{i}", 0) for i in range(8))[:5]
    assert len({h.score for h in twins}) == 1
    # Retrieval returns the dense vectors only; the term vectors stay in the store.
    _, vectors = store.retrieve("c", [points[0].id], with_vectors=True)[0]
    assert set(vectors) == {"m"}


def test_hybrid_search_is_reciprocal_rank_fusion_of_both_lists(store: VectorStore) -> None:
    store.ensure_collection("c", {"m": DIM}, lexical=True)
    points, vecs = _worded()
    store.upsert("c", points)
    query = vecs[1]  # dense: doc1 first; words: the cat texts
    dense = [h.id for h in store.search("c", "m", query, limit=6, exact=True)]
    words = [h.id for h in store.search_lexical("c", "cat", limit=6)]
    for fusion in (Fusion(k=2), Fusion(k=60, dense_weight=1.0, lexical_weight=2.0)):
        expected: dict[str, float] = {}
        for weight, ranked in ((fusion.dense_weight, dense), (fusion.lexical_weight, words)):
            for rank, pid in enumerate(ranked):
                # Qdrant's weighted RRF: a weight divides the list's 1-based ranks.
                expected[pid] = expected.get(pid, 0.0) + 1 / (fusion.k - 1 + (rank + 1) / weight)
        hits = store.search_hybrid("c", "m", query, "cat", limit=6, exact=True, fusion=fusion)
        assert [h.score for h in hits] == pytest.approx([expected[h.id] for h in hits], rel=1e-5)
        # Ties (k=2: a point at rank 2 of one list and one at rank 2 of the other) by point id.
        assert [h.id for h in hits] == sorted(expected, key=lambda p: (-round(expected[p], 7), p))
    only_money = store.search_hybrid("c", "m", query, "cat", limit=6, filters={"meta.topic": "money"})
    assert {h.payload["doc_id"] for h in only_money} == {"doc1", "doc3", "doc5"}
    with pytest.raises(StoreError, match="no vectors from 'other'"):
        store.search_hybrid("c", "other", query, "cat", limit=3)


def test_hybrid_search_ranks_the_same_whatever_the_limit(store: VectorStore) -> None:
    # Short texts from a small vocabulary tie often on BM25: the fused top must not depend on
    # how many results were asked for (Qdrant's own fusion ranked tied texts in an order that
    # moved with the candidate lists' length, so k=10 and k=90 disagreed on their first ten).
    store.ensure_collection("c", {"m": DIM}, lexical=True)
    rng = np.random.default_rng(7)
    words = ["card", "arrived", "not", "yet", "my", "when", "will", "the", "new", "come", "send",
             "post"]
    vecs = rng.normal(size=(400, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    store.upsert("c", [PointRecord(point_id(f"d{i}", 0), {"m": vecs[i]},
                                   {"doc_id": f"d{i}", "chunk_no": 0,
                                    "text": " ".join(rng.choice(words, size=rng.integers(2, 8)))})
                       for i in range(400)])
    query = vecs[0] + vecs[1]
    first = [h.id for h in store.search_hybrid("c", "m", query, "card arrived", limit=10)]
    for limit in (22, 90, 100):  # within Fusion.candidates (100); deeper lists may reorder
        hits = store.search_hybrid("c", "m", query, "card arrived", limit=limit)
        assert len(hits) == limit
        assert [h.id for h in hits[:10]] == first, limit


def test_overwritten_points_get_the_terms_of_their_new_text(store: VectorStore) -> None:
    store.ensure_collection("c", {"m": DIM}, lexical=True)
    points, vecs = _worded()
    store.upsert("c", points)
    changed = PointRecord(points[1].id, {"m": vecs[1]}, {**points[1].payload, "text": "zebras grazing"})
    store.upsert("c", [changed])
    assert [h.id for h in store.search_lexical("c", "zebra", limit=3)] == [points[1].id]
    assert [h.payload["doc_id"] for h in store.search_lexical("c", "sharply", limit=3)] == []
    # A dense-only update keeps the terms.
    store.update_vectors("c", "m", [points[1].id], vecs[2:3])
    assert [h.id for h in store.search_lexical("c", "zebra", limit=3)] == [points[1].id]


def test_a_collection_without_term_vectors_says_so(store: VectorStore) -> None:
    store.ensure_collection("c", {"m": DIM})
    points, vecs = _worded()
    store.upsert("c", points)
    assert not store.has_lexical("c")
    # What it says to do is what this backend can do (the edge store was named among those
    # that cannot add them, though the next index run adds them).
    if isinstance(store, EdgeStore):
        says = r"keeps no term vectors.*indexed before they existed: run `facet index` on its sources once more"
    else:
        says = r"keeps no term vectors.*the local backend cannot add them .*index its sources into a new collection"
    for search in (lambda: store.search_lexical("c", "cat", limit=3),
                   lambda: store.search_hybrid("c", "m", vecs[0], "cat", limit=3)):
        with pytest.raises(StoreError, match=says) as refused:
            search()
        assert ("cannot add" in str(refused.value)) != isinstance(store, EdgeStore), str(refused.value)
    store.ensure_collection("c", {"m": DIM}, lexical=True)
    if isinstance(store, EdgeStore):  # the edge shard adds them and fills them from the texts
        assert store.has_lexical("c")
        assert {h.payload["doc_id"] for h in store.search_lexical("c", "cat", limit=10)} == {
            "doc0", "doc2", "doc4"}
        assert store.search("c", "m", vecs[5], limit=1, exact=True)[0].id == points[5].id
    else:  # qdrant-client cannot add a sparse vector to an existing collection
        assert not store.has_lexical("c")
    for reserved in ("bm25", "bm25m"):  # each term definition's vector name
        with pytest.raises(StoreError, match="names the term vectors"):
            store.ensure_collection("d", {reserved: DIM})


_CJK = ["大熊猫是中国特有的动物，主要生活在四川的山区。它们每天花很多时间吃竹子。",
        "长城是中国古代的军事防御工程，全长两万多公里。",
        "東京は日本の首都です。人口が多い。"]


def _cjk_points() -> list[PointRecord]:
    rng = np.random.default_rng(5)
    return [PointRecord(point_id(f"z{i}", 0), {"m": rng.normal(size=DIM).astype(np.float32)},
                        {"doc_id": f"z{i}", "chunk_no": 0, "text": t}) for i, t in enumerate(_CJK)]


def test_lexical_search_finds_words_in_chinese_and_japanese_text(store: VectorStore) -> None:
    """The word tokenizer made each run of CJK text between punctuation one term, so a query
    word inside it ("竹子" in "...它们每天花很多时间吃竹子") matched nothing and hybrid was dense alone.
    Such runs are read as character pairs, so a word inside a longer one is found too ("熊猫" in
    "大熊猫", which Qdrant's dictionary-based multilingual tokenizer missed); and numbers are terms
    (that tokenizer dropped "404", "2020", "3.11")."""
    store.ensure_collection("c", {"m": DIM}, lexical=True)
    store.upsert("c", [*_worded()[0], *_cjk_points()])
    assert [h.payload["doc_id"] for h in store.search_lexical("c", "竹子", limit=3)] == ["z0"]
    assert [h.payload["doc_id"] for h in store.search_lexical("c", "大熊猫", limit=3)] == ["z0"]
    assert [h.payload["doc_id"] for h in store.search_lexical("c", "熊猫", limit=3)] == ["z0"]
    # A one-character word: documents keep single characters beside the pairs ("猫" alone was no
    # term: it was found only between punctuation).
    assert [h.payload["doc_id"] for h in store.search_lexical("c", "猫", limit=3)] == ["z0"]
    # Half-width katakana is an unspaced script too (the run was one word).
    store.upsert("c", [PointRecord(point_id("hw", 0), {"m": np.ones(DIM, np.float32)},
                                   {"doc_id": "hw", "chunk_no": 0, "text": "ﾊﾟﾝﾀﾞｶﾞｲﾙ動物園"})])
    assert [h.payload["doc_id"] for h in store.search_lexical("c", "ﾊﾟﾝﾀﾞ", limit=3)] == ["hw"]
    assert [h.payload["doc_id"] for h in store.search_lexical("c", "长城", limit=3)] == ["z1"]
    assert store.search_lexical("c", "日本の首都", limit=3)[0].payload["doc_id"] == "z2"
    store.upsert("c", [PointRecord(point_id("n", 0), {"m": np.ones(DIM, np.float32)},
                                   {"doc_id": "n", "chunk_no": 0,
                                    "text": "Server error 404 after the 2020 upgrade to Python 3.11"})])
    for number in ("404", "2020", "3.11"):
        assert [h.payload["doc_id"] for h in store.search_lexical("c", number, limit=3)] == ["n"], number
    # English reads as before: stemmed, lower-cased, stopwords dropped.
    assert {h.payload["doc_id"] for h in store.search_lexical("c", "Cats", limit=10)} == {
        "doc0", "doc2", "doc4"}


def test_a_collection_written_under_the_older_term_definition(store: VectorStore, monkeypatch,
                                                                caplog) -> None:
    """Collections written before the multilingual definition keep the word tokenizer's terms
    under the vector `bm25`: their queries are read that way (not mixed with the new terms); an
    edge collection is rewritten from its stored texts by the next index run
    (ensure_collection), a server / local-mode one cannot add a vector and keeps them."""
    older = "qdrant-bm25-en-v1"
    with monkeypatch.context() as m:
        m.setattr(lex, "LEXICAL_VERSION", older)
        m.setattr(lex, "LEXICAL_VECTOR", lex.vector_name(older))
        store.ensure_collection("c", {"m": DIM}, lexical=True)
    store.upsert("c", [*_worded()[0], *_cjk_points()])
    assert store.lexical_version("c") == older
    assert {h.payload["doc_id"] for h in store.search_lexical("c", "cat", limit=10)} == {
        "doc0", "doc2", "doc4"}
    assert store.search_lexical("c", "竹子", limit=3) == []  # the old definition's limit
    with caplog.at_level("WARNING", logger="indexer.store"):
        store.ensure_collection("c", {"m": DIM}, lexical=True)
    if isinstance(store, EdgeStore):
        assert "rewriting the term vectors of c's lexical search" in caplog.text
        assert store.lexical_version("c") == lex.LEXICAL_VERSION
        assert [h.payload["doc_id"] for h in store.search_lexical("c", "竹子", limit=3)] == ["z0"]
        assert {h.payload["doc_id"] for h in store.search_hybrid(
            "c", "m", np.ones(DIM, np.float32), "cat", limit=20)} >= {"doc0", "doc2", "doc4"}
        _, vectors = store.retrieve("c", [point_id("z0", 0)], with_vectors=True)[0]
        assert set(vectors) == {"m"}
    else:  # said, once per process: index runs into it went on silently
        assert store.lexical_version("c") == older
        assert "cannot rewrite them: index its sources into a new collection" in caplog.text
        # The released definition found numbers; only the unreleased multilingual one did not.
        assert f"(its word search misses {lex.MISSES[older]}: docs" in caplog.text
        assert "Korean or Thai text" in caplog.text and "numbers" not in caplog.text
        caplog.clear()
        store.ensure_collection("c", {"m": DIM}, lexical=True)
        assert "cannot rewrite" not in caplog.text


def test_term_vectors_survive_reopening_an_edge_store(tmp_path: Path) -> None:
    s = _open("edge", tmp_path)
    s.ensure_collection("new", {"m": DIM}, lexical=True)
    s.ensure_collection("old", {"m": DIM})
    points, _ = _worded()
    s.upsert("new", points)
    s.upsert("old", points)
    s.ensure_collection("old", {"m": DIM}, lexical=True)  # filled from the stored texts
    s.close()
    s = _open("edge", tmp_path)
    try:
        for name in ("new", "old"):
            assert s.has_lexical(name)
            assert [h.payload["doc_id"] for h in s.search_lexical(name, "sofa", limit=3)] == ["doc2"]
    finally:
        s.close()


def test_the_busy_message_names_the_holding_command() -> None:
    """'wait for it to finish' was the advice when the holder was a `facet serve`, which keeps
    a collection it read open until it stops."""
    from indexer.store import _busy_message

    served = _busy_message("c", {"pid": 7, "host": "h", "command": "facet serve"})
    assert served.startswith("collection 'c' is open in pid 7 on host h (facet serve)")
    # (a LangChain user was not told of base_url: the RAG exploration of the sixth session of 2026-12-02)
    assert ("send this work to it (its HTTP API or UI; from Python, FacetRetriever(base_url=...)) or "
            "stop it first") in served
    # It keeps the collections it used last, not every one until it stops (``MAX_OPEN_SHARDS``).
    assert "until it stops" not in served and "among the 8 it used last" in served
    indexing = _busy_message("c", {"pid": 7, "host": "h", "command": "facet index"})
    assert "(facet index)" in indexing and "wait for it to finish" in indexing
    assert _busy_message("c", None).startswith("collection 'c' is open in another process:")


def test_term_vectors_another_process_added_are_seen(tmp_path: Path) -> None:
    """A store that read a collection's term definition (none) sees the term vectors another
    process's job added later: a long-running server listed "no word index" until restarted."""
    reader = EdgeStore(tmp_path)
    reader.ensure_collection("c", {"m": DIM})
    points, _ = _worded()
    reader.upsert("c", points)
    assert not reader.has_lexical("c")
    reader.release("c")  # the writer's job takes the folder
    writer = EdgeStore(tmp_path)
    writer.ensure_collection("c", {"m": DIM}, lexical=True)
    writer.close()
    assert reader.has_lexical("c") and reader.lexical_version("c") == lex.LEXICAL_VERSION
    assert {h.payload["doc_id"] for h in reader.search_lexical("c", "cat", limit=10)} == {"doc0", "doc2", "doc4"}
    reader.close()
