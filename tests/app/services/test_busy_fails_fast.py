"""A search or clustering of a collection another process holds is refused before any model loads.

An embedded collection is open in one process at a time (``EdgeStore``'s folder lock). A
`facet search` (or a LangChain ``FacetRetriever``, or `facet cluster`) of a collection that a
running `facet serve` or another process's index job held first loaded the embedder and encoded
the query (15-20 s with torch's import; minutes for an LLM embedder), and only then met the lock:
the same refusal, after the wait. The lock is now met before the embedder is loaded.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from app.core import Facet
from app.errors import ConflictError
from app.services.clustering import ClusterRequest
from app.services.context import EmbedderCache, ServiceContext
from app.services.indexing import IndexService
from app.services.search import SearchRequest
from app.settings import FacetSettings
from indexer.store import _busy_message

from .conftest import locked_by_another_process, write_corpus
from .test_listing_words_flag import _lease_to


def _aged(message: str) -> str:
    """``message`` less the age of a lease's heartbeat, which grows as the test runs."""
    return re.sub(r"heartbeat \d+s ago", "heartbeat Ns ago", message)


def _refused_at_once(facet: Facet, request: SearchRequest | ClusterRequest, message: str) -> None:
    """``request`` is refused with ``message`` in a few seconds, its embedder never loaded."""
    t0 = time.monotonic()
    with pytest.raises(ConflictError) as refused:
        if isinstance(request, SearchRequest):
            facet.search(request)
        else:
            facet.cluster(request)
    elapsed = time.monotonic() - t0
    assert _aged(str(refused.value)) == _aged(message)
    assert facet.context.embedders.peek("minilm") is None, "the embedder was loaded first"
    assert elapsed < 8, elapsed


@pytest.mark.parametrize("leased", [False, True], ids=["served", "indexed"])
def test_a_busy_collection_is_refused_before_the_embedder_loads(make_ctx, tmp_path, leased) -> None:
    write_corpus(tmp_path / "src", 2)
    first = make_ctx(store_wait_s=0.3)
    IndexService(first).index(tmp_path / "src", "c")
    first.store.release("c")
    data = first.settings.data_dir
    with locked_by_another_process(data, "c", shown_as="facet serve") as holder:
        holder_record = json.loads((data / "qdrant-edge" / "c.lock").read_text())
        assert holder_record["command"] == "facet serve"
        message = _busy_message("c", holder_record)
        assert f"is open in pid {holder.pid}" in message and "send this work to it" in message
        if leased:  # another process's index job: its lease names the job
            job_id = _lease_to(first, "c", holder.pid)
        # A fresh process's cache, as `facet search` or a LangChain retriever starts with.
        settings = FacetSettings(data_dir=data, chunk_tokens=64, chunk_overlap=8, store_wait_s=0.3)
        with ServiceContext(settings, embedders=EmbedderCache("cpu")) as ctx:
            facet = Facet(context=ctx)
            if leased:
                message = facet.catalog.busy_message("c", message)
                assert f"being indexed by job {job_id}" in message
            for request in (
                SearchRequest("card declined", "c"),  # auto: hybrid (no instruction)
                SearchRequest("card declined", "c", instruction="the customer's intent"),  # dense
                SearchRequest("card declined", "c", mode="dense", rerank="minilm"),
                ClusterRequest("What is it about?", collection="c"),
                ClusterRequest("What is it about?", search=SearchRequest("card", "c", mode="dense")),
            ):
                _refused_at_once(facet, request, message)
            # An unknown collection is still not found first (no lock to meet).
            with pytest.raises(Exception, match="unknown collection 'nope'"):
                facet.search(SearchRequest("card declined", "nope"))
    # Free again: the same context searches (the embedder loaded now, as it must be).
    with ServiceContext(settings, embedders=EmbedderCache("cpu")) as ctx:
        response = Facet(context=ctx).search(SearchRequest("card declined", "c", mode="dense"))
        assert response.results and ctx.embedders.peek("minilm") is not None
