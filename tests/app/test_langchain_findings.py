"""FacetRetriever, in process and over HTTP (a real uvicorn serving the API on a local port):

- an unpaired surrogate in the query or the instruction (per call or the retriever's own) is the
  in-process search's ``InvalidRequestError`` over HTTP too, not httpx's ``UnicodeEncodeError``
  from encoding the body;
- an instruction the search did not read (``mode="lexical"``: BM25 matches the words only) is
  said: each document's metadata carries ``instruction`` and ``instruction_read`` as
  ``POST /search`` returns them, and one warning is logged per call. It was dropped without a
  word, where the CLI says "(not read: ...)" and the API ``instruction_read: false``."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from app.core import Facet
from app.errors import InvalidRequestError
from app.integrations.langchain import FacetRetriever

from .served import TOPUP_RECORDS, records_served

COLLECTION = "topups"
INSTRUCTION = "Find the customer's intent"
RECORDS = TOPUP_RECORDS
LOGGER = "app.integrations.langchain"


@pytest.fixture(scope="module")
def served(minilm, tmp_path_factory) -> Iterator[tuple[Facet, str]]:
    """(a facade over a small collection, the URL of the API serving it)."""
    with records_served(minilm, tmp_path_factory.mktemp("lcfind"), RECORDS, COLLECTION) as both:
        yield both


def _retriever(served: tuple[Facet, str], where: str, **settings: Any) -> FacetRetriever:
    facet, url = served
    how: dict[str, Any] = {"facet": facet} if where == "in process" else {
        "base_url": url, "api_key": ""}
    return FacetRetriever(collection=COLLECTION, k=3, **how, **settings)


async def test_an_unpaired_surrogate_is_the_in_process_refusal_over_http(served) -> None:
    """Over HTTP each raised ``UnicodeEncodeError: 'utf-8' codec can't encode character
    '\\ud800'`` from httpx; in process, ``InvalidRequestError``."""
    cases: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
        ("query \ud800", {}, {}),                                  # the query
        ("money top-up", {}, {"instruction": "Find \ud800"}),      # a per-call instruction
        ("money top-up", {"instruction": "Find \ud800"}, {}),      # the retriever's own
    ]
    for query, settings, options in cases:
        with pytest.raises(InvalidRequestError, match="unpaired surrogate") as local:
            _retriever(served, "in process", **settings).invoke(query, **options)
        remote = _retriever(served, "http", **settings)
        with pytest.raises(InvalidRequestError) as sync:
            remote.invoke(query, **options)
        with pytest.raises(InvalidRequestError) as not_sync:
            await remote.ainvoke(query, **options)
        # The same message, before anything was sent (no "(HTTP 400 from ...)" after it).
        assert str(sync.value) == str(not_sync.value) == str(local.value)
        assert sync.value.param == local.value.param


@pytest.mark.parametrize("where", ["in process", "http"])
def test_an_instruction_not_read_is_in_the_metadata_and_logged(served, where, caplog) -> None:
    """The repro: ``invoke("money top-up", mode="lexical")`` on a retriever with an instruction:
    neither ``instruction`` nor ``instruction_read`` in the metadata, nothing logged."""
    retriever = _retriever(served, where, instruction=INSTRUCTION)

    def run(**options: Any) -> tuple[list[Any], list[str]]:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            docs = retriever.invoke("money top-up", **options)
        return docs, [r.getMessage() for r in caplog.records if r.name == LOGGER]

    docs, logged = run(mode="lexical")
    assert docs
    assert all(d.metadata["instruction"] == INSTRUCTION for d in docs)
    assert all(d.metadata["instruction_read"] is False for d in docs)
    assert len(logged) == 1 and "instruction was not read" in logged[0], logged
    assert "lexical search matches the words only" in logged[0]
    # Read (dense; lexical with a reranker): said so, nothing logged.
    for options in ({"mode": "dense"}, {"mode": "lexical", "rerank": "minilm"}):
        docs, logged = run(**options)
        assert docs and all(d.metadata["instruction_read"] is True for d in docs), options
        assert all(d.metadata["instruction"] == INSTRUCTION for d in docs)
        # (minilm's weak blend is warned of once a process: test_lc_async_cancel.py)
        assert [m for m in logged if "barely steers" not in m] == [], options
    # No instruction: none to read, none said.
    docs, logged = run(mode="lexical", instruction=None)
    assert docs and all(d.metadata["instruction"] is None for d in docs)
    assert all(d.metadata["instruction_read"] is False for d in docs)
    assert logged == []


@pytest.mark.parametrize("where", ["in process", "http"])
def test_odd_filters_bytes_and_invisible_instructions_are_read_as_the_facade_reads_them(
        served, where) -> None:
    """The fifth session of 2026-12-05's fuzzing of the adapter: a per-call ``filter=""``,
    ``False`` or ``[]`` searched unfiltered (``or {}``); ``instruction=b"..."`` was decoded by
    pydantic where every other edge refuses bytes; ``instruction="\\u200b"`` turned the search
    dense and was said to be read, where the embedders read no instruction."""
    retriever = _retriever(served, where)
    for odd in ("", False, [], ()):
        with pytest.raises(InvalidRequestError, match="filters must map payload fields to values"):
            retriever.invoke("money top-up", filter=odd)
    assert retriever.invoke("money top-up", filter=None)  # none: no filter
    with pytest.raises(InvalidRequestError, match="not bytes: decode it first") as caught:
        retriever.invoke("money top-up", instruction=b"Find the intent")
    assert caught.value.param == "instruction"
    with pytest.raises(InvalidRequestError, match="not bytes: decode it first"):
        _retriever(served, where, instruction=b"Find the intent")
    # Numbers, a mode and a filter's field as bytes too (the verification round: k=b"3" was 3).
    for option, said in (({"k": b"3"}, "a number, not bytes"), ({"mode": b"dense"}, "not bytes"),
                         ({"filter": {b"intent": "x"}}, "not bytes")):
        with pytest.raises(InvalidRequestError, match=said):
            FacetRetriever(collection=COLLECTION, **option)
        if "filter" not in option:  # (a per-call filter is the facade's to check)
            with pytest.raises(InvalidRequestError, match=said):
                retriever.invoke("money top-up", **option)
    plain = retriever.invoke("money top-up")
    invisible = retriever.invoke("money top-up", instruction="\u200b\u2060")
    assert [d.metadata["score"] for d in invisible] == [d.metadata["score"] for d in plain]
    assert {(d.metadata["mode"], d.metadata["instruction"], d.metadata["instruction_read"])
            for d in invisible} == {("hybrid", None, False)}


def test_facet_embeddings_with_instruction_checks_its_values_as_the_constructor_does() -> None:
    """``with_instruction(5)`` gave an object refused only at its first embed, in words naming
    neither the method nor the setting; an invisible query named ``texts[0]``."""
    from app.integrations.langchain import FacetEmbeddings

    embeddings = FacetEmbeddings(model="minilm")
    for value, said in ((5, "query_instruction=5: Input should be a valid string"),
                        (b"Q", "not bytes: decode it first")):
        with pytest.raises(InvalidRequestError, match=said):
            embeddings.with_instruction(value)
    both = embeddings.with_instruction("Q").with_instruction(document_instruction="D")
    assert (both.model, both.query_instruction, both.document_instruction) == ("minilm", "Q", "D")
    with pytest.raises(InvalidRequestError, match=r"^the query is empty \(invisible characters "
                                                  r"alone\): give the text to embed$"):
        embeddings.embed_query("\u200b")
