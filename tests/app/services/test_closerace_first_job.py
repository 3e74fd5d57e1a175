"""A search of a collection during its first job answers one way until the job writes: no
results and a note "is being indexed (job N): nothing searchable yet". Before the job's
first write reached the vector store the first search raised NotFoundError ("has nothing
searchable yet: job 9 (running) has not written its first documents", a 404), the next ones
returned [] with a note, so a LangChain chain crashed or got an empty context depending on
timing. Real minilm, edge store, SQLite in a temp folder."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from app.core import Facet
from app.errors import NotFoundError
from app.services.indexing import IndexService
from app.services.search import SearchRequest, SearchService, why_no_results

from .conftest import write_corpus


def test_a_search_before_the_first_job_writes_returns_nothing_with_a_note(
        facet: Facet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.integrations.langchain import FacetRetriever

    write_corpus(tmp_path / "src", 12)
    store = facet.context.store
    creating, go_on = threading.Event(), threading.Event()
    create = store.ensure_collection

    def held(*args: Any, **kwargs: Any) -> None:  # the job running, its store not written yet
        creating.set()
        assert go_on.wait(60)
        create(*args, **kwargs)

    monkeypatch.setattr(store, "ensure_collection", held)
    job = facet.submit_index(tmp_path / "src", "docs")
    try:
        assert creating.wait(60)
        assert facet.job(job.id).state == "running" and not store.collection_exists("docs")
        note = (f"collection 'docs' is being indexed (job {job.id}): nothing searchable yet; "
                "a search finds only what it has written so far")
        for _ in range(3):  # the first search and the next ones alike
            for mode in ("auto", "dense", "hybrid", "lexical"):
                response = facet.search(SearchRequest("bank card", "docs", mode=mode))
                assert (response.results, response.note) == ([], note), mode
                assert response.mode == ("dense" if mode == "auto" else mode)
                assert response.embedder == ("bm25" if mode == "lexical" else "minilm")
                assert why_no_results(response, None).endswith(f"; {note}")  # the CLI, the UI
            retriever = FacetRetriever(collection="docs", k=3, facet=facet)
            assert retriever.invoke("bank card") == []
    finally:
        go_on.set()
    assert facet.job_runner.join(120)  # type: ignore[attr-defined]
    assert facet.job(job.id).state == "completed"
    assert facet.search(SearchRequest("bank card", "docs")).results  # written since


def test_a_queued_first_job_answers_the_same_and_clustering_still_refuses(facet: Facet,
                                                                         tmp_path: Path) -> None:
    write_corpus(tmp_path / "src", 3)
    job = IndexService(facet.context).prepare(tmp_path / "src", "fresh", runner="celery")
    response = facet.search(SearchRequest("ferry", "fresh"))
    assert response.results == []
    assert response.note == (f"collection 'fresh' is being indexed (job {job.job_id}, queued): "
                             "nothing searchable yet; a search finds only what it has written "
                             "so far")
    # What has no empty answer (the embedders of a collection to cluster) still says why.
    with pytest.raises(NotFoundError, match=r"'fresh' is being indexed .*nothing searchable yet"):
        SearchService(facet.context).vector_names("fresh")
