"""LangChain edge: ``FacetRetriever`` (search a Facet collection) and ``FacetEmbeddings``
(Facet's embedders behind LangChain's ``Embeddings``, e.g. inside a vector store).

Both call the application core in process (``app.core.Facet``); by default the process-wide
``Facet.shared()`` over the ``FACET_*`` settings, so models load once and one process owns
the store. Pass ``facet=`` to use another. Needs the ``langchain`` extra (``langchain-core``
1.7.x)::

    from app.integrations.langchain import FacetRetriever

    retriever = FacetRetriever(collection="notes", instruction="Find the customer's intent", k=5)
    docs = retriever.invoke("card not working")                  # constructor settings
    docs = retriever.invoke("card not working", k=2,             # or per call
                            instruction="Find messages about the card's status")
    docs[0].metadata["score"], docs[0].metadata["doc_id"]

Async (``ainvoke``, ``aembed_*``) runs the same calls in a worker thread: the model work is on
the facade's encoder either way.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from app.core import Facet
from app.errors import InvalidRequestError
from app.services.search import MAX_TOP_K, SearchMode, SearchRequest, SearchResult
from app.text import check_texts
from embedders.contract import Role
from indexer.store import point_id

_CALL_OPTIONS = ("instruction", "k", "filter", "score_threshold", "rerank", "rerank_depth", "mode",
                 "group_by_document")
# Names other edges or LangChain habits use for a retriever option: said in the refusal.
_ALIASES = {"filters": "filter", "top_k": "k", "search_kwargs": "the options themselves (k=..., "
            "filter=...)", "instructions": "instruction", "score_treshold": "score_threshold"}


def _unknown(names: list[str], where: str, known: tuple[str, ...]) -> InvalidRequestError:
    hints = [f"{n} -> {_ALIASES[n]}" for n in names if n in _ALIASES]
    return InvalidRequestError(
        f"FacetRetriever got unknown {where} {', '.join(names)}"
        f"{' (' + '; '.join(hints) + ')' if hints else ''}; it takes {', '.join(known)}")


def _facet(facet: Facet | None) -> Facet:
    return facet if facet is not None else Facet.shared()


def to_document(result: SearchResult, collection: str, mode: str | None = None) -> Document:
    """A search result as a LangChain ``Document``.

    ``page_content`` is the chunk text; ``metadata`` holds the document's own metadata
    (``jsonl``/``csv`` fields) plus ``doc_id``, ``source``, ``title``, ``chunk_no``,
    ``start``/``end`` (character offsets in the document), ``score`` (rerank score when
    reranked, else the search's: cosine, BM25 or fused, by mode), ``vector_score``,
    ``rerank_score``, ``more_chunks`` (grouped by document: its other matching chunks),
    ``collection`` and ``mode`` (the search mode that ran, which says what kind of score
    ``score`` is: a fused score of 0.03 is a good hybrid hit, a cosine of 0.03 is not); on a
    clash the Facet field wins. ``id`` is the Qdrant point id.
    """
    metadata: dict[str, Any] = dict(result.metadata)
    metadata.update(doc_id=result.doc_id, source=result.source, title=result.title,
                    chunk_no=result.chunk_no, start=result.start, end=result.end,
                    score=result.score, vector_score=result.vector_score,
                    rerank_score=result.rerank_score, more_chunks=list(result.more_chunks),
                    collection=collection, mode=mode)
    return Document(page_content=result.text, metadata=metadata,
                    id=point_id(result.doc_id, result.chunk_no))


class FacetRetriever(BaseRetriever):
    """Retrieve chunks of a Facet collection for a query read under an instruction.

    Every field can be overridden per call: ``invoke(query, instruction=..., k=..., filter=...,
    score_threshold=..., rerank=..., rerank_depth=..., mode=..., group_by_document=...)``; a
    per-call ``None`` clears the retriever's value (``instruction=None``: search without one),
    except for ``k``, ``mode`` and ``group_by_document``, which keep it.

    Attributes:
        collection: the collection to search.
        embedder: which of the collection's embedders to search (default: the settings' one
            if the collection has it, else its first).
        instruction: what the query means ("Find the customer's intent"); None for none.
        k: chunks returned (documents with ``group_by_document``); 4 by default, as LangChain's
            own retrievers (every other edge of Facet returns 10).
        filter: payload filters, ``{"intent": "refund"}`` or ``{"intent": ["a", "b"]}`` (any of).
        score_threshold: drop documents scoring below this.
        rerank: an instruction embedder to rerank the candidates with.
        rerank_depth: candidates reranked (default 5 x k).
        mode: ``auto`` (hybrid without an instruction or score_threshold where the collection
            keeps term vectors, else dense), ``dense`` (the embedder), ``lexical`` (BM25) or
            ``hybrid`` (both, fused by rank).
        group_by_document: one chunk per document (its best; the others' numbers in the
            metadata's ``more_chunks``), so ``k`` distinct documents reach the chain.
        facet: the application core to use (default ``Facet.shared()``).
    """

    # A misspelt setting (``filters=``, ``top_k=``) is refused, not ignored: ignored, the
    # search ran unfiltered and nothing said so.
    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    collection: str
    embedder: str | None = None
    instruction: str | None = None
    k: int = Field(default=4, ge=1, le=MAX_TOP_K)
    filter: dict[str, Any] | None = None
    score_threshold: float | None = None
    rerank: str | None = None
    rerank_depth: int | None = None
    mode: SearchMode = "auto"
    group_by_document: bool = False
    facet: Facet | None = Field(default=None, exclude=True, repr=False)

    @model_validator(mode="before")
    @classmethod
    def _known_settings(cls, data: Any) -> Any:
        """The refusal of an unknown setting names the one meant (``filters`` -> ``filter``)."""
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(cls.model_fields))
            if unknown:
                raise _unknown(unknown, "setting(s)", tuple(
                    n for n in cls.model_fields if n not in BaseRetriever.model_fields))
        return data

    def _request(self, query: str, options: dict[str, Any]) -> SearchRequest:
        unknown = sorted(set(options) - set(_CALL_OPTIONS))
        if unknown:  # a FacetError, as a bad value of a known option is
            raise _unknown(unknown, "option(s)", _CALL_OPTIONS)

        def pick(name: str) -> Any:
            # A per-call None means none (no instruction, no filter, no rerank...); only ``k``
            # and ``mode``, which always have a value, keep the retriever's for None.
            if name not in options or (options[name] is None and
                                        name in ("k", "mode", "group_by_document")):
                return getattr(self, name)
            # The facade checks filters itself, with messages naming the field and value.
            return options[name] if name == "filter" else _call_option(name, options[name])

        return SearchRequest(query=query, collection=self.collection,
                             instruction=pick("instruction"), top_k=pick("k"),
                             filters=pick("filter") or {}, rerank=pick("rerank"),
                             rerank_depth=pick("rerank_depth"), embedder=self.embedder,
                             score_threshold=pick("score_threshold"), mode=pick("mode"),
                             group_by_document=pick("group_by_document"))

    def _search(self, query: str, options: dict[str, Any]) -> list[Document]:
        response = _facet(self.facet).search(self._request(query, options))
        return [to_document(r, self.collection, response.mode) for r in response.results]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        return self._search(query, kwargs)

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun,
                                       **kwargs: Any) -> list[Document]:
        return await asyncio.to_thread(self._search, query, kwargs)


_ADAPTERS: dict[str, TypeAdapter[Any]] = {}


def _call_option(name: str, value: Any) -> Any:
    """A per-call option read by its field's own rules, as the constructor reads it
    (``group_by_document="false"`` is False, ``k="3"`` is 3, ``k=0`` is refused)."""
    if name not in _ADAPTERS:
        field = FacetRetriever.model_fields[name]
        kind: Any = (Annotated[(field.annotation, *field.metadata)] if field.metadata
                     else field.annotation)
        _ADAPTERS[name] = TypeAdapter(kind)
    try:
        return _ADAPTERS[name].validate_python(value)
    except ValidationError as e:
        raise InvalidRequestError(f"FacetRetriever option {name}={value!r}: "
                                  f"{e.errors()[0]['msg']}") from None


_KEEP: Any = object()


class FacetEmbeddings(BaseModel, Embeddings):
    """A Facet embedder as LangChain ``Embeddings``: documents and queries each read under
    their own instruction (instruction-aware embedders need both).

    Attributes:
        model: embedder name or checkpoint path (``minilm``, ``backbone-prompteol``...); None
            (the default) is the facade's default embedder, ``FACET_DEFAULT_EMBEDDER``, the one
            its collections are indexed and searched with (a fixed ``minilm`` embedded with
            minilm whatever that was set to).
        query_instruction: instruction for ``embed_query`` (None: no instruction).
        document_instruction: instruction for ``embed_documents`` (None: no instruction).
        facet: the application core to use (default ``Facet.shared()``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    model: str | None = None
    query_instruction: str | None = None
    document_instruction: str | None = None
    facet: Facet | None = Field(default=None, exclude=True, repr=False)

    def with_instruction(self, query_instruction: str | None = _KEEP,
                         document_instruction: str | None = _KEEP) -> FacetEmbeddings:
        """A copy reading queries and/or documents under other instructions (None: none);
        an argument left out keeps this object's instruction."""
        update: dict[str, Any] = {}
        if query_instruction is not _KEEP:
            update["query_instruction"] = query_instruction
        if document_instruction is not _KEEP:
            update["document_instruction"] = document_instruction
        return self.model_copy(update=update)

    def _embed(self, texts: list[str], role: Role, instruction: str | None) -> list[list[float]]:
        check_texts(texts)  # before any slice is embedded, naming the text's own index
        facet = _facet(self.facet)
        step = facet.settings.max_texts_per_call
        out: list[list[float]] = []
        for start in range(0, len(texts), step):
            result = facet.embed(texts[start:start + step], embedder=self.model, role=role,
                                 instruction=instruction)
            out.extend(result.vectors.astype(float).tolist())
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Document vectors (role ``document``, ``document_instruction``), L2-normalised."""
        return self._embed(list(texts), Role.DOCUMENT, self.document_instruction)

    def embed_query(self, text: str) -> list[float]:
        """The query vector (role ``query``, ``query_instruction``), L2-normalised."""
        if isinstance(text, str) and not text.strip():  # it was "texts[0] is empty": no list given
            raise InvalidRequestError("the query is empty: give the text to embed")
        return self._embed([text], Role.QUERY, self.query_instruction)[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        return await asyncio.to_thread(self.embed_query, text)
