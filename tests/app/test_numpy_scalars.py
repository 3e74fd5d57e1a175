"""numpy scalars (what pandas and numpy hand around in a notebook) are taken as the Python
numbers they are, everywhere a number is: ``IndexOptions(chunk_size=np.int64(128))`` passed the
int check and SQLite stored it as an 8-byte BLOB (the run failed with an untyped ValueError, the
collection kept the BLOB and every listing of collections failed), while ``SearchRequest``
refused ``top_k=np.int64(3)``, ``score_threshold=np.float32(0.1)`` and a filter value
``np.int64(1)``, and ``Facet.job`` an ``np.int64`` id. A bool is still no number."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from app.errors import InvalidRequestError
from app.services.clustering import ClusterRequest
from app.services.indexing import IndexOptions
from app.services.search import SearchRequest


def _records(tmp_path: Path) -> Path:
    path = tmp_path / "rows.jsonl"
    rows = [{"id": f"r{i}", "text": f"my card payment number {i} was declined", "n": i}
            for i in range(3)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_numpy_chunk_settings_are_stored_as_ints(facet, tmp_path: Path) -> None:
    report = facet.index(_records(tmp_path), "np",
                         IndexOptions(chunk_size=np.int64(128), chunk_overlap=np.int64(16),
                                      batch_chunks=np.int32(8)))
    assert report.state == "completed" and report.docs_indexed == 3
    [info] = facet.collections()
    assert (info.chunk_size, info.chunk_overlap) == (128, 16)
    assert type(info.chunk_size) is int and type(info.chunk_overlap) is int
    db = sqlite3.connect(Path(facet.settings.data_dir) / "facet.db")
    assert db.execute("select typeof(chunk_size), typeof(chunk_overlap) from collections "
                      "where name='np'").fetchall() == [("integer", "integer")]


def test_numpy_search_values_are_taken(facet, tmp_path: Path) -> None:
    facet.index(_records(tmp_path), "np")
    hits = facet.search(SearchRequest("card declined", "np", top_k=np.int64(2),
                                      score_threshold=np.float32(-1.0),
                                      rerank_depth=None)).results
    assert len(hits) == 2
    only = facet.search(SearchRequest("card declined", "np", filters={"n": np.int64(1)})).results
    assert [h.doc_id for h in only] == ["r1"]
    some = facet.search(SearchRequest("card", "np",
                                      filters={"n": [np.int64(0), np.int32(2)]})).results
    assert sorted(h.doc_id for h in some) == ["r0", "r2"]
    for bad in (True, np.bool_(True)):  # a bool is still refused as a number of results
        with pytest.raises(InvalidRequestError, match="whole number"):
            facet.search(SearchRequest("card", "np", top_k=bad))


def test_numpy_job_ids_and_limits(facet, tmp_path: Path) -> None:
    job_id = facet.index(_records(tmp_path), "np").job_id
    assert facet.job(np.int64(job_id)).id == job_id
    assert [j.id for j in facet.jobs("np", limit=np.int64(5), offset=np.int64(0))] == [job_id]


def test_cluster_request_takes_numpy_filter_values() -> None:
    request = ClusterRequest("what", collection="np", filters={"n": np.int64(1)}, k=np.int64(2))
    assert type(request.filters["n"]) is int and type(request.k) is int
