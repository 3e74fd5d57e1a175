"""The services as a Python library reaches them: a request field of the wrong type is refused
with ``InvalidRequestError`` naming the field and the type expected (an instruction of 5 was an
AttributeError, ``chunk_size="100"`` a TypeError, ``exact="no"`` searched exactly); the result
types' docstrings name every field (``help()`` showed none for most); no deprecated SQLAlchemy
call warns on an ordinary read; an unknown collection's deletion names its field."""

from __future__ import annotations

import dataclasses
import json
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

from app.errors import InvalidRequestError, NotFoundError
from app.services.clustering import Cluster, ClusterRequest, ClusterResponse, ClusterService
from app.services.collections import CollectionInfo, CollectionService, JobInfo
from app.services.indexing import IndexOptions, IndexReport, IndexService
from app.services.search import SearchRequest, SearchResponse, SearchResult, SearchService

TEXTS = ["my card was declined", "top up failed again", "where is my refund"]


def _records(tmp_path: Path) -> Path:
    path = tmp_path / "few.jsonl"
    path.write_text("".join(json.dumps({"_id": f"f{i}", "text": t}) + "\n"
                            for i, t in enumerate(TEXTS)))
    return path


def _refused(call: Any, param: str, words: str) -> None:
    """``call()`` raises InvalidRequestError with ``param`` and ``words`` in its message."""
    with pytest.raises(InvalidRequestError) as caught:
        call()
    assert caught.value.param == param, (caught.value.param, str(caught.value))
    assert words in str(caught.value), str(caught.value)


@pytest.mark.parametrize(("fields", "param", "words"), [
    ({"instruction": 5}, "instruction", "instruction must be a str or None, got int 5"),
    ({"rerank": "minilm", "rerank_depth": "x"}, "rerank_depth", "rerank_depth must be an int"),
    ({"rerank": "minilm", "rerank_depth": True}, "rerank_depth", "rerank_depth must be an int"),
    ({"rerank": "minilm", "rerank_depth": 5.0}, "rerank_depth", "rerank_depth must be an int"),
    ({"exact": "no"}, "exact", "exact must be a bool"),
    ({"exact": 0}, "exact", "exact must be a bool"),
    ({"group_by_document": "no"}, "group_by_document", "group_by_document must be a bool"),
    ({"rerank": 5}, "rerank", "rerank must be a str or None"),
    ({"embedder": 5}, "embedder", "embedder must be a str or None"),
])
def test_a_search_field_of_the_wrong_type_is_refused(support_ctx, fields, param, words) -> None:
    service = SearchService(support_ctx)
    _refused(lambda: service.search(SearchRequest("card", "support", **fields)), param, words)


def test_the_right_types_still_search(support_ctx) -> None:
    response = SearchService(support_ctx).search(SearchRequest(
        "card declined", "support", instruction="the customer's problem", top_k=3,
        rerank="minilm", rerank_depth=6, exact=True, group_by_document=True))
    assert len(response.results) == 3 and response.reranker == "minilm"


@pytest.mark.parametrize(("options", "param", "words"), [
    ({"chunk_size": "100"}, "chunk_tokens", "chunk_size must be an int or None, got str '100'"),
    ({"chunk_size": 50.0}, "chunk_tokens", "chunk_size must be an int"),
    ({"chunk_overlap": "5"}, "chunk_overlap", "chunk_overlap must be an int or None, got str '5'"),
    ({"chunk_overlap": True}, "chunk_overlap", "chunk_overlap must be an int"),
    ({"batch_chunks": "5"}, "batch_chunks", "batch_chunks must be an int"),
    ({"sync": "no"}, "sync", "sync must be a bool (True or False) or None"),
    ({"text_column": 5}, "text_column", "text_column must be a str or None"),
    ({"embedder": 5}, "embedder", "embedder must be a str or None"),
])
def test_an_index_option_of_the_wrong_type_is_refused(make_ctx, tmp_path, options, param,
                                                       words) -> None:
    ctx, source = make_ctx(), _records(tmp_path)
    _refused(lambda: IndexService(ctx).index(source, "few", IndexOptions(**options)), param, words)
    assert CollectionService(ctx).list_all() == []  # refused before anything was made


def test_a_source_that_is_not_a_path_is_refused(make_ctx) -> None:
    service = IndexService(make_ctx())
    _refused(lambda: service.index(5, "few"), "source",  # type: ignore[arg-type]
             "the source must be a str or a path (pathlib.Path), got int 5")


def test_the_right_index_option_types_still_index(make_ctx, tmp_path) -> None:
    report = IndexService(make_ctx()).index(_records(tmp_path), "few", IndexOptions(
        embedder="minilm", chunk_size=32, chunk_overlap=4, sync=False, batch_chunks=2,
        text_column="text"))
    assert (report.state, report.docs_indexed) == ("completed", 3)


@pytest.mark.parametrize(("fields", "param", "words"), [
    ({"instruction": 5, "texts": TEXTS}, "instruction", "instruction must be a str, got int 5"),
    ({"instruction": None, "texts": TEXTS}, "instruction", "instruction must be a str"),
    ({"instruction": "intent?", "texts": 5}, "texts", "texts must be a list of str, got int 5"),
    ({"instruction": "intent?", "search": "card"}, "search", "search must be a SearchRequest"),
    ({"instruction": "intent?", "texts": TEXTS, "embedder": 5}, "embedder",
     "embedder must be a str or None"),
    ({"instruction": "intent?", "texts": TEXTS, "explainer": 5}, "explainer",
     "explainer must be a str or None"),
])
def test_a_cluster_field_of_the_wrong_type_is_refused(make_ctx, fields, param, words) -> None:
    service = ClusterService(make_ctx())
    _refused(lambda: service.cluster(ClusterRequest(**fields)), param, words)


@pytest.mark.parametrize("kind", [SearchResponse, SearchResult, CollectionInfo, JobInfo,
                                  IndexReport, IndexOptions, ClusterResponse, Cluster,
                                  SearchRequest, ClusterRequest])
def test_a_result_type_documents_every_field(kind) -> None:
    """Each field has its line in the docstring's Attributes (what ``help()`` shows): a field
    added without one fails here."""
    doc = kind.__doc__ or ""
    assert "Attributes:" in doc, kind.__name__
    missing = [f.name for f in dataclasses.fields(kind)
               if not re.search(rf"^\s+{f.name}:", doc, re.MULTILINE)]
    assert not missing, f"{kind.__name__} docstring lacks {missing}"


def test_reading_a_collection_warns_of_nothing(support_ctx) -> None:
    """``vectors_missing`` called the deprecated ``Result.tuples()`` (SADeprecationWarning under
    SQLAlchemy 2.1): a caller running with warnings as errors failed on every listing."""
    catalog = CollectionService(support_ctx)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        info = catalog.get("support")
        [listed] = catalog.list_all()
        response = SearchService(support_ctx).search(SearchRequest("card", "support", top_k=2))
    assert info.documents_indexed == listed.documents_indexed == 10
    assert info.vectors_missing == {} and len(response.results) == 2


def test_deleting_an_unknown_collection_names_the_field(support_ctx) -> None:
    """As a search of it does (``param="collection"``); it was None."""
    with pytest.raises(NotFoundError, match="unknown collection 'nope'") as caught:
        CollectionService(support_ctx).delete("nope")
    assert caught.value.param == "collection"
    with pytest.raises(NotFoundError) as searched:
        SearchService(support_ctx).search(SearchRequest("card", "nope"))
    assert searched.value.param == caught.value.param

