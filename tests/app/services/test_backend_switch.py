"""A data folder switched between vector stores (FACET_VECTOR_BACKEND edge <-> local,
FACET_QDRANT_URL set or unset): each collection row records the store it was indexed into.
Listings say where its vectors are and how to get back to them (not "its folder qdrant-edge/NAME
is missing" beside that folder); search and cluster refuse a collection of another store (an
older copy in the store in use may be stale: switched back after an index run under the other,
search served it without a word); `facet index` moves the collection into the store in use,
every document written again, and records it; `facet delete` says which store it cleared;
strays of local mode are listed as the edge store's are. Real Qdrant edge, qdrant-client's
local mode, the Qdrant server stand-in, SQLite, minilm; two- and three-document corpora."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from app.errors import ConflictError
from app.services.clustering import ClusterRequest, ClusterService
from app.services.collections import CollectionService
from app.services.indexing import IndexService
from app.services.search import SearchRequest, SearchService
from indexer import metadata as md
from tests.app.web_stub import serving
from tests.worker import qdrant_standin

from .conftest import write_corpus


def _info(ctx, name):
    [info] = [i for i in CollectionService(ctx).list_all() if i.name == name]
    return info


def _row_backend(ctx, name) -> str:
    with ctx.sessions() as session:
        coll = md.get_collection(session, name)
        assert coll is not None
        return coll.backend


def test_edge_collection_under_local_says_where_it_is_and_search_and_cluster_refuse(
        make_ctx, tmp_path: Path) -> None:
    edge = make_ctx()
    write_corpus(tmp_path / "src", 2)
    IndexService(edge).index(tmp_path / "src", "sw_edge")
    edge.close()
    local = make_ctx(vector_backend="local")
    info = _info(local, "sw_edge")
    note = info.store_note or ""
    assert info.backend == "edge" and info.store_in_use == "local", info
    assert "is missing" not in note, note
    assert "indexed into the embedded store (qdrant-edge/sw_edge)" in note, note
    assert "FACET_VECTOR_BACKEND=local is in use (qdrant-local/) that does not hold it" in note
    assert "unset FACET_VECTOR_BACKEND" in note and "`facet index`" in note, note
    with pytest.raises(ConflictError) as searching:
        SearchService(local).search(SearchRequest("bank card", "sw_edge"))
    said = str(searching.value)
    assert "\n" not in said and "restored apart" not in said, said
    assert "collection 'sw_edge' is not in the vector store in use: it was indexed into the " \
           "embedded store (qdrant-edge/sw_edge)" in said, said
    with pytest.raises(ConflictError) as clustering:
        ClusterService(local).cluster(ClusterRequest("What?", collection="sw_edge", k=2,
                                                     embedder="minilm"))
    assert str(clustering.value) == said


def test_index_under_local_moves_the_collection_and_edge_then_refuses_its_stale_copy(
        make_ctx, tmp_path: Path, caplog) -> None:
    """The explorer's case: indexed under local, the row kept `edge`; back under edge every
    document was "unchanged" and search served the old edge copy (a changed document not
    found)."""
    docs = write_corpus(tmp_path / "src", 3)
    edge = make_ctx()
    IndexService(edge).index(tmp_path / "src", "sw_move")
    edge.close()
    first = sorted(docs)[0]
    Path(first).write_text("zanzibar lighthouse keeper " * 8)
    local = make_ctx(vector_backend="local")
    with caplog.at_level(logging.WARNING):
        report = IndexService(local).index(tmp_path / "src", "sw_move")
    assert report.state == "completed" and report.docs_indexed == 3 and not report.docs_skipped, \
        report
    moved = [r.getMessage() for r in caplog.records if "moves from" in r.getMessage()]
    job = CollectionService(local).job(report.job_id)
    assert [e["message"] for e in job.errors if "moves from" in e["message"]] == moved, job.errors
    assert moved and ("collection 'sw_move' moves from the embedded store (qdrant-edge/sw_move) "
                      "to the local store (qdrant-local/collection/sw_move)") in moved[0], \
        moved
    assert "the old copy stays in the embedded store (qdrant-edge/sw_move)" in moved[0], moved
    assert _row_backend(local, "sw_move") == "local"
    found = SearchService(local).search(SearchRequest("zanzibar lighthouse", "sw_move", top_k=1))
    assert found.results[0].doc_id == first, found.results
    info = _info(local, "sw_move")
    assert info.store_in_use is None and info.store_note is None and info.points, info
    local.close()
    edge = make_ctx()
    info = _info(edge, "sw_move")
    assert info.store_in_use == "edge" and "set FACET_VECTOR_BACKEND=local" in (info.store_note
                                                                               or ""), info
    # The old edge copy is still there: searched, it would miss the changed document.
    assert (tmp_path / "data" / "qdrant-edge" / "sw_move").is_dir()
    with pytest.raises(ConflictError, match="it was indexed into the local store"):
        SearchService(edge).search(SearchRequest("zanzibar lighthouse", "sw_move"))
    # Indexed back under edge: the stale edge copy is dropped and every document written anew.
    report = IndexService(edge).index(tmp_path / "src", "sw_move")
    assert report.docs_indexed == 3 and not report.docs_skipped, report
    assert _row_backend(edge, "sw_move") == "edge"
    found = SearchService(edge).search(SearchRequest("zanzibar lighthouse", "sw_move", top_k=1))
    assert found.results[0].doc_id == first, found.results
    assert _info(edge, "sw_move").points == report.chunks_written


def test_delete_of_a_collection_of_another_store_says_its_vectors_stay(
        make_ctx, tmp_path: Path, caplog) -> None:
    write_corpus(tmp_path / "src", 2)
    edge = make_ctx()
    IndexService(edge).index(tmp_path / "src", "sw_del")
    edge.close()
    local = make_ctx(vector_backend="local")
    with caplog.at_level(logging.WARNING):
        info = CollectionService(local).delete("sw_del")
    assert info.store_in_use == "local"
    [line] = [r.getMessage() for r in caplog.records if "deleted collection sw_del" in
              r.getMessage()]
    assert "its vectors in the embedded store (qdrant-edge/sw_del) stay there" in line, line
    assert (tmp_path / "data" / "qdrant-edge" / "sw_del").is_dir()
    local.close()
    edge = make_ctx()
    strays = CollectionService(edge).strays()
    assert [s.name for s in strays] == ["sw_del"]  # `facet delete sw_del` under edge removes it


def test_strays_of_local_mode_are_listed(make_ctx, tmp_path: Path) -> None:
    write_corpus(tmp_path / "src", 2)
    local = make_ctx(vector_backend="local")
    IndexService(local).index(tmp_path / "src", "sw_stray")
    with local.sessions() as session:
        coll = md.get_collection(session, "sw_stray")
        md.delete_collection(session, coll)
        session.commit()
    [stray] = CollectionService(local).strays()
    assert stray.name == "sw_stray" and stray.backend == "local" and stray.points, stray


def test_an_edge_collection_indexed_under_a_qdrant_url_moves_to_the_server(
        make_ctx, tmp_path: Path, caplog) -> None:
    docs = write_corpus(tmp_path / "src", 2)
    edge = make_ctx()
    IndexService(edge).index(tmp_path / "src", "sw_server")
    edge.close()
    with serving(qdrant_standin._Handler) as url:
        served = make_ctx(qdrant_url=url)
        with caplog.at_level(logging.WARNING):
            report = IndexService(served).index(tmp_path / "src", "sw_server")
        assert report.docs_indexed == 2 and not report.docs_skipped, report
        assert any("moves from the embedded store (qdrant-edge/sw_server) to a Qdrant server"
                   in r.getMessage() for r in caplog.records), caplog.records
        assert _row_backend(served, "sw_server") == "server"
        found = SearchService(served).search(SearchRequest("bank card", "sw_server", top_k=1))
        assert found.results[0].doc_id in docs
        served.close()
    edge = make_ctx()
    note = _info(edge, "sw_server").store_note or ""
    assert "indexed into a Qdrant server, but the edge store (qdrant-edge/) is in use" in note
    assert "set FACET_QDRANT_URL to that server's URL" in note, note
    with pytest.raises(ConflictError, match="it was indexed into a Qdrant server"):
        SearchService(edge).search(SearchRequest("bank card", "sw_server"))


def test_a_move_to_a_server_never_replaces_the_servers_namesake(make_ctx, tmp_path: Path) -> None:
    """Another data folder's collection of the same name on the server: the move dropped it and
    wrote this folder's documents there (verification, 2026-11-30: the other folder's searches
    then returned this folder's documents). Refused, before the job, with the server's
    collection untouched."""
    mine = write_corpus(tmp_path / "mine", 2)
    theirs = write_corpus(tmp_path / "theirs", 3)
    edge = make_ctx()
    IndexService(edge).index(tmp_path / "mine", "sw_twin")
    edge.close()
    with serving(qdrant_standin._Handler) as url:
        other = make_ctx(qdrant_url=url, data_dir=tmp_path / "other")
        IndexService(other).index(tmp_path / "theirs", "sw_twin")
        served = make_ctx(qdrant_url=url)
        with pytest.raises(ConflictError, match="already holds a collection 'sw_twin', which may "
                                                "be another data folder's") as refused:
            IndexService(served).index(tmp_path / "mine", "sw_twin")
        assert refused.value.param == "collection"
        assert _row_backend(served, "sw_twin") == "edge"  # not moved
        found = SearchService(other).search(SearchRequest("bank card", "sw_twin", top_k=5))
        assert {h.doc_id for h in found.results} <= set(theirs) and not set(mine) & {
            h.doc_id for h in found.results}
        assert other.store.count("sw_twin") == 3


def test_a_move_names_the_collections_other_sources(make_ctx, tmp_path: Path, caplog) -> None:
    """Two folders in one collection, moved by a run of one of them: the other's documents stay
    pending (unsearchable) until it is indexed again, and the warning said only "index the
    other sources again too" (verification, 2026-11-30). It names them now."""
    write_corpus(tmp_path / "a", 2)
    write_corpus(tmp_path / "b", 2)
    edge = make_ctx()
    IndexService(edge).index(tmp_path / "a", "sw_two")
    IndexService(edge).index(tmp_path / "b", "sw_two")
    edge.close()
    local = make_ctx(vector_backend="local")
    with caplog.at_level(logging.WARNING):
        IndexService(local).index(tmp_path / "a", "sw_two")
    [moved] = [r.getMessage() for r in caplog.records if "moves from" in r.getMessage()]
    assert f"index its other sources again too, their documents unsearchable until then: " \
           f"facet index {tmp_path / 'b'} -c sw_two" in moved, moved
    assert f"facet index {tmp_path / 'a'} " not in moved, moved
