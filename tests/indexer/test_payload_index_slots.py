"""Payload indexes of filtered fields: a key no point holds (a typo) takes no index slot (edge), a
server gets indexes of filtered fields too, and an edge shard is flushed on release only when it
was written to."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from indexer.store import _MAX_INDEXED_FIELDS, EdgeStore, PointRecord, QdrantClientStore, point_id
from tests.worker import qdrant_standin

DIM = 8


def _points(n: int = 60) -> list[PointRecord]:
    rng = np.random.default_rng(0)
    return [
        PointRecord(
            point_id(f"d{i % 6}", i),
            {"m": rng.normal(size=DIM)},
            {
                "doc_id": f"d{i % 6}",
                "chunk_no": i,
                "meta": {"topic": ["news", "sports"][i % 2], "n": i % 5, "flag": bool(i % 3)},
            },
        )
        for i in range(n)
    ]


def _schema(store: EdgeStore) -> dict[str, str]:
    with store._using("c") as shard:
        return {k: str(v.data_type).split(".")[-1] for k, v in shard.info().payload_schema.items()}


def _edge(root: Path) -> EdgeStore:
    store = EdgeStore(root)
    store.ensure_collection("c", {"m": DIM})
    store.upsert("c", _points())
    return store


def test_filters_on_keys_no_point_holds_take_no_index_slot(tmp_path: Path) -> None:
    """More typos than there are slots, then a real field: it still gets its index, and the side
    file names no typo (before, each typo took one of the 32 slots for good)."""
    store = _edge(tmp_path)
    query = np.ones(DIM)
    for i in range(_MAX_INDEXED_FIELDS + 3):
        typo = {f"meta.topc{i}": "news"}
        assert store.search("c", "m", query, limit=5, filters=typo) == []
        assert store.count("c", typo) == 0 and store.scroll("c", filters=typo) == []
    assert store.search("c", "m", query, limit=5, filters={"meta.topic": "sports"})
    assert store.count("c", {"meta.n": 3}) == 12
    assert _schema(store) == {"doc_id": "Keyword", "meta.topic": "Keyword", "meta.n": "Integer"}
    store.close()
    side = json.loads((tmp_path / "c" / EdgeStore._INDEX_SIDE).read_text())
    assert side == {"meta.topic": ["str"], "meta.n": ["int"]}


def test_typo_slots_an_older_facet_recorded_are_free_again(tmp_path: Path) -> None:
    """A side file full of fields no point holds (what the old rule left behind) does not keep a
    real field from its index."""
    _edge(tmp_path).close()
    typos = {f"meta.topc{i}": [] for i in range(_MAX_INDEXED_FIELDS)}
    (tmp_path / "c" / EdgeStore._INDEX_SIDE).write_text(json.dumps(typos))
    store = EdgeStore(tmp_path)
    assert store.count("c", {"meta.topic": "news"}) == 30
    assert _schema(store).get("meta.topic") == "Keyword"
    store.close()
    assert json.loads((tmp_path / "c" / EdgeStore._INDEX_SIDE).read_text()) == {"meta.topic": ["str"]}


class _CountingShard:
    """The real shard, its flushes counted."""

    def __init__(self, shard: Any) -> None:
        self.shard, self.flushes = shard, 0

    def flush(self) -> None:
        self.flushes += 1
        self.shard.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.shard, name)


def _counted(store: EdgeStore) -> _CountingShard:
    store.hold("c")
    spy = _CountingShard(store._shards["c"])
    store._shards["c"] = spy
    return spy


def test_release_and_close_after_reads_only_do_not_flush(tmp_path: Path) -> None:
    _edge(tmp_path).close()
    store = EdgeStore(tmp_path)
    spy = _counted(store)
    assert store.count("c") == 60
    assert store.search("c", "m", np.ones(DIM), limit=3)
    store.flush()
    store.release("c")
    assert spy.flushes == 0  # nothing changed since the open: nothing to write
    spy = _counted(store)
    store.count("c", {"meta.topic": "news"})  # indexes the field: a write
    store.delete("c", [point_id("d0", 0)])
    store.release("c")
    assert spy.flushes == 1
    spy = _counted(store)
    assert store.count("c") == 59 and _schema(store).get("meta.topic") == "Keyword"
    store.close()
    assert spy.flushes == 0
    reopened = EdgeStore(tmp_path)
    spy = _counted(reopened)
    reopened.upsert("c", _points(1))
    reopened.close()
    assert spy.flushes == 1  # a write is flushed on close
    again = EdgeStore(tmp_path)
    assert again.count("c") == 60
    again.close()


# ------------------------------------------------------------------ a server (the test stand-in)


class _Indexes:
    """What the stand-in's server was asked to index, shown in its collection info as a server
    does (the stand-in's local mode keeps no payload indexes); ``fail``: refuse index requests."""

    made: ClassVar[dict[str, str]] = {}
    asked: ClassVar[list[tuple[str, str]]] = []
    fail = False


@pytest.fixture()
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    _Indexes.made, _Indexes.asked, _Indexes.fail = {}, [], False
    handle = qdrant_standin.handle

    def indexing(method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if path == "/collections/c/index" and method == "PUT":
            _Indexes.asked.append((body["field_name"], body["field_schema"]))
            if _Indexes.fail and body["field_name"] != "doc_id":
                return 500, "Service internal error: index refused (test)"
            _Indexes.made[body["field_name"]] = body["field_schema"]
        status, result = handle(method, path, body)
        if path == "/collections/c" and method == "GET" and status == 200:
            result["payload_schema"] = {k: {"data_type": v, "points": 0} for k, v in _Indexes.made.items()}
        return status, result

    monkeypatch.setattr(qdrant_standin, "handle", indexing)
    # The stand-in's engine is one per process: another test module's "c" (test_store_server's,
    # run before this one in the same worker) made the collection already, without its index ask.
    qdrant_standin._CLIENT.delete_collection("c")
    with qdrant_standin.in_process() as url:
        try:
            yield url
        finally:
            qdrant_standin._CLIENT.delete_collection("c")


def _server_store(url: str) -> QdrantClientStore:
    store = QdrantClientStore(url=url)
    store.ensure_collection("c", {"m": DIM})
    store.upsert("c", _points())
    return store


def test_a_server_indexes_a_filtered_field_once_by_its_filter_values(server: str) -> None:
    store = _server_store(server)
    assert _Indexes.asked == [("doc_id", "keyword")]  # made with the collection
    query = np.ones(DIM)
    assert store.search("c", "m", query, limit=5, filters={"meta.topc": "news"}) == []  # a typo
    assert store.count("c", {"meta.topic": "sport"}) == 0  # a value no point holds
    assert _Indexes.asked == [("doc_id", "keyword")]
    assert store.search("c", "m", query, limit=5, filters={"meta.topic": "sports"})
    assert store.search("c", "m", query, limit=5, filters={"meta.topic": ["news", "sports"]})
    assert store.count("c", {"meta.n": 3}) == 12  # an integer may match a float field: float
    assert store.scroll("c", filters={"meta.flag": True, "meta.topic": "news"})
    assert _Indexes.asked[1:] == [("meta.topic", "keyword"), ("meta.n", "float"), ("meta.flag", "bool")]
    other = QdrantClientStore(url=server)  # another process: the server has them already
    assert other.count("c", {"meta.n": 2.0}) == 12 and other.count("c", {"meta.topic": "news"}) == 30
    assert len(_Indexes.asked) == 4
    other.close()
    store.close()


def test_a_refused_index_never_fails_the_search(server: str, caplog: pytest.LogCaptureFixture) -> None:
    store = _server_store(server)
    _Indexes.fail = True
    with caplog.at_level(logging.DEBUG, logger="indexer.store"):
        hits = store.search("c", "m", np.ones(DIM), limit=5, filters={"meta.topic": "sports"})
    assert [h.payload["meta"]["topic"] for h in hits] == ["sports"] * 5
    assert _Indexes.asked[-1] == ("meta.topic", "keyword")  # asked, refused
    assert any("no payload index" in r.getMessage() and r.levelno == logging.DEBUG for r in caplog.records)
    assert store.count("c", {"meta.topic": "sports"}) == 30  # not asked again by this process
    assert len(_Indexes.asked) == 2
    store.close()
