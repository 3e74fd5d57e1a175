"""The HTTP ``FacetRetriever``'s errors carry ``param`` as the in-process retriever's do. Before,
``FacetRetriever(collection="nope", base_url=...).invoke("cats")`` raised a NotFoundError whose
``param`` was None ("; param collection" only inside its message), where the in-process one has
``e.param == "collection"`` (and "query" for an empty query): ``_http_error`` built the error
from the message alone. Against a real uvicorn in a thread (``records_served``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from app.errors import FacetError, InvalidRequestError, NotFoundError
from app.integrations.langchain import FacetRetriever

from ..served import TOPUP_RECORDS, records_served

COLLECTION = "tops"


@pytest.fixture(scope="module")
def served(minilm, tmp_path_factory) -> Iterator[tuple[Any, str]]:
    with records_served(minilm, tmp_path_factory.mktemp("lcparam"), TOPUP_RECORDS,
                        COLLECTION) as pair:
        yield pair


@pytest.mark.parametrize(("collection", "query", "error", "param"), [
    ("nope", "cats", NotFoundError, "collection"),
    (COLLECTION, "", InvalidRequestError, "query"),
    (COLLECTION, "   ", InvalidRequestError, "query"),
], ids=["unknown-collection", "empty-query", "blank-query"])
def test_the_http_error_names_its_param_as_in_process(served, collection: str, query: str,
                                                      error: type[FacetError], param: str) -> None:
    facet, url = served
    with pytest.raises(error) as local:
        FacetRetriever(collection=collection, facet=facet).invoke(query)
    with pytest.raises(error, match=r"HTTP (400|404) from ") as remote:
        FacetRetriever(collection=collection, base_url=url).invoke(query)
    assert local.value.param == param
    assert remote.value.param == param
    assert f"param {param}" in str(remote.value)  # still in the message as well


async def test_the_async_path_too(served) -> None:
    _, url = served
    with pytest.raises(NotFoundError) as e:
        await FacetRetriever(collection="nope", base_url=url).ainvoke("cats")
    assert e.value.param == "collection"
