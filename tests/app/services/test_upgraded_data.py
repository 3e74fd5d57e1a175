"""Data folders written by older Facet versions, read by today's code.

Each test builds what the older version left, with today's code: term vectors written under an
older definition of a term (``indexer.lexical`` as it was), a job row as an older version
recorded it.
"""

from __future__ import annotations

import json

import pytest

from app.services.collections import CollectionService
from app.services.indexing import IndexService
from app.services.search import SearchRequest, SearchService, why_no_results
from indexer import lexical as lex
from indexer import metadata as md

OLDER = "qdrant-bm25-en-v1"  # the word tokenizer: a run of Chinese text was one term


def _records(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text(
        "".join(
            json.dumps({"_id": i, "text": t}) + "\n"
            for i, t in (
                ("panda", "大熊猫是中国特有的动物，主要生活在四川的山区。"),
                ("card", "My card was declined at the supermarket"),
            )
        )
    )
    return path


def _index_under_the_older_definition(ctx, path, monkeypatch) -> None:
    with monkeypatch.context() as m:  # what a Facet of before the character pairs wrote
        m.setattr(lex, "LEXICAL_VERSION", OLDER)
        m.setattr(lex, "LEXICAL_VECTOR", lex.vector_name(OLDER))
        IndexService(ctx).index(path, "zoo")


@pytest.mark.parametrize("backend", ["edge", "local"])
def test_a_word_search_of_older_term_vectors_says_so_and_what_rewrites_them(
    make_ctx, tmp_path, monkeypatch, backend
) -> None:
    """The word "熊猫" inside "大熊猫" is no term of the older definition: the search found nothing and
    said only "no indexed word of the query is in it", and on the local backend it stayed so
    (the index run's log alone said it cannot rewrite them). The response, its empty-result
    line and the collection's listing name the older definition and what to run."""
    path = _records(tmp_path)
    older = make_ctx(vector_backend=backend)
    _index_under_the_older_definition(older, path, monkeypatch)
    older.close()
    ctx = make_ctx(vector_backend=backend)  # a new process: nothing cached
    service = SearchService(ctx)
    response = service.search(SearchRequest("熊猫", "zoo", mode="lexical"))
    assert response.results == []
    why = why_no_results(response, None)
    assert why.startswith("no indexed word of the query is in it; ")
    assert f"keeps the term vectors of {OLDER}, an older definition" in why
    if backend == "edge":
        assert "run `facet index` on its sources once more to rewrite them" in why
    else:
        assert "the local backend cannot rewrite them: index its sources into a new collection" in why
    assert response.to_dict()["note"] == response.note  # the API's response carries it
    hybrid = service.search(SearchRequest("熊猫 card", "zoo", mode="hybrid"))
    assert hybrid.results and hybrid.note == response.note
    assert service.search(SearchRequest("card", "zoo", mode="dense")).note is None  # no words read
    assert CollectionService(ctx).get("zoo").lexical_note == response.note

    IndexService(ctx).index(path, "zoo")  # rewrites them on the edge store; local cannot
    response = SearchService(ctx).search(SearchRequest("熊猫", "zoo", mode="lexical"))
    if backend == "edge":
        assert [r.doc_id for r in response.results] == ["panda"] and response.note is None
        assert CollectionService(ctx).get("zoo").lexical_note is None
    else:
        assert response.results == [] and "cannot rewrite" in (response.note or "")


def test_a_collection_of_todays_term_vectors_has_no_note(make_ctx, tmp_path) -> None:
    ctx = make_ctx()
    IndexService(ctx).index(_records(tmp_path), "zoo")
    response = SearchService(ctx).search(SearchRequest("熊猫", "zoo", mode="lexical"))
    assert [r.doc_id for r in response.results] == ["panda"] and response.note is None
    nothing = SearchService(ctx).search(SearchRequest("giraffe", "zoo", mode="lexical"))
    assert why_no_results(nothing, None) == "no indexed word of the query is in it"
    assert CollectionService(ctx).get("zoo").lexical_note is None


def _job_row(ctx, source: str, state: str, message: str | None = None, docs_indexed: int = 0) -> int:
    """A finished job of collection "zoo" written into the metadata as it stands."""
    with ctx.sessions() as s:
        coll = md.get_collection(s, "zoo")
        assert coll is not None
        job = md.IndexJob(
            collection_id=coll.id,
            source=source,
            embedder="minilm",
            state=state,
            runner="inline",
            docs_seen=docs_indexed,
            docs_indexed=docs_indexed,
            chunks_written=docs_indexed,
            finished_at=md.utcnow(),
            message=message,
        )
        s.add(job)
        s.commit()
        return job.id


def _ctrl_c_row(ctx, source: str, docs_indexed: int) -> int:
    """A job stopped by Ctrl-C as an older Facet recorded it: ``failed``, the exception's name
    for message."""
    return _job_row(ctx, source, "failed", "KeyboardInterrupt: ", docs_indexed)


def test_a_job_an_older_facet_recorded_failed_for_a_ctrl_c_is_interrupted_and_resumed(
    make_ctx, tmp_path, caplog
) -> None:
    """`facet jobs N` showed it failed, with no hint, and the next `facet index` of its source
    went on with its documents without saying that it resumed it."""
    path = _records(tmp_path)
    ctx = make_ctx()
    IndexService(ctx).index(path, "zoo")
    stopped = _ctrl_c_row(ctx, str(path.resolve()), 1)
    catalog = CollectionService(ctx)
    info = catalog.job(stopped)
    assert info.state == "interrupted"
    assert info.message == (
        f"stopped (Ctrl-C) with 1 document indexed; run `facet index {path.resolve()} "
        "--collection zoo --embedder minilm` again to resume: what was indexed is kept"
    )
    assert [j.state for j in catalog.jobs("zoo")] == ["interrupted", "completed"]

    with caplog.at_level("INFO", logger="app.services.indexing"):
        again = IndexService(ctx).index(path, "zoo")
    assert f"resuming interrupted job {stopped} as job {again.job_id}" in caplog.text
    assert catalog.job(again.job_id).resumed_from == stopped
    info = catalog.job(stopped)
    assert (info.state, info.message) == (
        "interrupted",
        f"stopped (Ctrl-C) with 1 document indexed; resumed by job {again.job_id}",
    )


def test_an_older_ctrl_c_row_followed_by_a_completed_run_asks_for_nothing(make_ctx, tmp_path) -> None:
    """Run again under the older Facet already (which did not link them): no hint to run it again."""
    path = _records(tmp_path)
    ctx = make_ctx()
    IndexService(ctx).index(path, "zoo")
    stopped = _ctrl_c_row(ctx, str(path.resolve()), 1)
    later_id = _job_row(ctx, str(path.resolve()), "completed")
    info = CollectionService(ctx).job(stopped)
    assert (info.state, info.message) == (
        "interrupted",
        f"stopped (Ctrl-C) with 1 document indexed; job {later_id} indexed the same source since",
    )
    again = IndexService(ctx).index(path, "zoo")
    assert CollectionService(ctx).job(again.job_id).resumed_from is None  # the later run is the last


def test_a_failure_of_todays_is_still_failed(make_ctx, tmp_path) -> None:
    path = _records(tmp_path)
    ctx = make_ctx()
    IndexService(ctx).index(path, "zoo")
    failed = _job_row(ctx, str(path.resolve()), "failed", "RuntimeError: CUDA out of memory")
    assert CollectionService(ctx).job(failed).state == "failed"
    again = IndexService(ctx).index(path, "zoo")
    assert CollectionService(ctx).job(again.job_id).resumed_from is None


def test_the_ui_shows_the_note_beside_results(minilm, tmp_path, monkeypatch) -> None:
    """A hybrid search of older term vectors finds results, and the page said nothing of the
    words it could not match (the note showed only in the no-results line)."""
    pytest.importorskip("gradio")
    from tests.ui.test_ui_api import _own_facet

    path = _records(tmp_path)
    facet, handlers = _own_facet(minilm, tmp_path)
    try:
        with monkeypatch.context() as m:
            m.setattr(lex, "LEXICAL_VERSION", OLDER)
            m.setattr(lex, "LEXICAL_VECTOR", lex.vector_name(OLDER))
            facet.index(path, "zoo")
        facet.close()
        facet, handlers = _own_facet(minilm, tmp_path)  # a new process: nothing cached
        results, _ = handlers.search("熊猫 card", "", "zoo", "minilm", 3, "", False, None, False, "hybrid")
        assert "declined" in results and f"keeps the term vectors of {OLDER}, an older definition" in results
    finally:
        facet.close()
