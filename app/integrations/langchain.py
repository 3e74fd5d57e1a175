"""LangChain edge: ``FacetRetriever`` (search a Facet collection) and ``FacetEmbeddings``
(Facet's embedders behind LangChain's ``Embeddings``, e.g. inside a vector store).

Both call the application core in process (``app.core.Facet``); by default the process-wide
``Facet.shared()`` over the ``FACET_*`` settings, so models load once and one process owns
the store. Pass ``facet=`` to use another. ``FacetRetriever(base_url=...)`` instead sends
each search to a running ``facet serve`` (``POST /search``): a process other than the one
owning the data folder retrieves without loading a model (a facade on a folder the server
holds is refused with ``ConflictError``). Needs the ``langchain`` extra (``langchain-core``
1.7.x, which brings httpx)::

    from app.integrations.langchain import FacetRetriever

    retriever = FacetRetriever(collection="notes", instruction="Find the customer's intent", k=5)
    docs = retriever.invoke("card not working")                  # constructor settings
    docs = retriever.invoke("card not working", k=2,             # or per call
                            instruction="Find messages about the card's status")
    docs[0].metadata["score"], docs[0].metadata["doc_id"]
    remote = FacetRetriever(collection="notes", base_url="http://127.0.0.1:8000")  # key: FACET_API_KEY

Async: ``aembed_*`` await ``Facet.aembed`` (cancelling one drops the pieces not encoded yet);
the in-process ``ainvoke`` runs the search in a worker thread; over HTTP ``ainvoke`` awaits
httpx's async client.

A search's ``note`` (a filter key no document holds: "no document has a field 'intnet'", term
vectors of an older definition) is logged as a warning on this module's logger, once per call
(at INFO where it only says that a hybrid search's word side found nothing, the results being
the dense side's: what a paraphrase meets, or, after its first time in the process, that the
embedder reads the instruction at a weak blend: minilm's default),
and put in each returned document's metadata as ``note``: a misspelt filter otherwise gave
the chain an empty context and nothing said why. An instruction the search did not read
(``mode="lexical"`` without ``rerank``: BM25 matches the words only) is logged the same way, and
each document's metadata carries ``instruction`` and ``instruction_read`` as ``POST /search``
returns them: the instruction was otherwise dropped without a word.

A record's own fields named as Facet's metadata keys (a ``score`` of 5, a ``source`` of "web",
its own ``note``) are kept under the metadata's ``record`` (see ``to_document``): Facet's keys
keep their meaning, and the record's values, which they overwrote, are no longer lost.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
import math
import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlsplit, urlunsplit

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.retrievers import BaseRetriever
except ModuleNotFoundError as e:  # a bare "No module named 'langchain_core'" named no fix
    if (e.name or "").partition(".")[0] != "langchain_core":
        raise
    raise ImportError("FacetRetriever and FacetEmbeddings need the langchain extra "
                      "(langchain-core missing): pip install 'facet-search[langchain]'") from e
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from app.errors import (
    AuthenticationError,
    BusyError,
    ConflictError,
    DataError,
    FacetError,
    InvalidRequestError,
    ModelError,
    NotFoundError,
    TooLargeError,
    UnavailableError,
    UnknownModelError,
)
from app.services.search import (
    DENSE_ONLY_NOTE,
    MAX_TOP_K,
    WEAK_INSTRUCTION_NOTE,
    SearchMode,
    SearchRequest,
    SearchResult,
    check_filters,
    plain_filters,
)
from app.text import blank, check_text_encodable, check_texts, empty_said, header_unsafe_at
from embedders.contract import Role
from indexer.errors import mask_secrets

if TYPE_CHECKING:  # imported when a facade is used: an HTTP-mode retriever never needs one
    import ssl

    from app.core import Facet

logger = logging.getLogger(__name__)

_CALL_OPTIONS = ("instruction", "k", "filter", "score_threshold", "rerank", "rerank_depth", "mode",
                 "group_by_document", "exact")
# Names other edges or LangChain habits use for a retriever option: said in the refusal.
_ALIASES = {"filters": "filter", "top_k": "k", "search_kwargs": "the options themselves (k=..., "
            "filter=...)", "instructions": "instruction", "score_treshold": "score_threshold"}
# The same for FacetEmbeddings' settings (HuggingFaceEmbeddings' model_name, the facade's names).
_EMBEDDINGS_ALIASES = {"model_name": "model", "embedder": "model",
                       "instruction": "query_instruction / document_instruction",
                       "query_instructions": "query_instruction",
                       "document_instructions": "document_instruction"}


def _unknown(names: list[str], where: str, known: tuple[str, ...], whose: str = "FacetRetriever",
             aliases: Mapping[str, str] = _ALIASES) -> InvalidRequestError:
    """The refusal of unknown settings or options, each with the name meant: another edge's name
    (``aliases``) or a close spelling of a known one (``modell`` -> ``model``)."""
    hints = []
    for n in names:
        meant = aliases.get(n) or next(iter(difflib.get_close_matches(n, known, n=1)), None)
        if meant:
            hints.append(f"{n} -> {meant}")
    return InvalidRequestError(
        f"{whose} got unknown {where} {', '.join(names)}"
        f"{' (' + '; '.join(hints) + ')' if hints else ''}; it takes {', '.join(known)}")


def _refuse_unknown_settings(data: Any, fields: tuple[str, ...], whose: str,
                             aliases: Mapping[str, str], shown: tuple[str, ...] | None = None) -> None:
    """Refuse the keys of a model's input ``data`` that are none of its ``fields``, each with
    the name meant (``_unknown``); ``shown``: the settings the refusal lists (default all)."""
    if isinstance(data, dict):
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise _unknown(unknown, "setting(s)", fields if shown is None else shown, whose, aliases)


def _not_a_bool(value: Any) -> Any:
    """A number field's value that is not a boolean (pydantic read ``k=True`` as 1) nor bytes
    (``k=b"3"`` was 3, where bytes for text are refused)."""
    if isinstance(value, bool):
        raise PydanticCustomError("bool_for_number", "Input should be a number, not a boolean")
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise PydanticCustomError("bytes_for_number", "Input should be a number, not bytes")
    return value


# A number setting or option: pydantic's lax rules ("3" is 3) except that a boolean is refused.
_Number = BeforeValidator(_not_a_bool)


def _not_bytes(value: Any) -> Any:
    """A text field's value that is not bytes: pydantic decoded ``instruction=b"..."`` as UTF-8,
    where the facade and ``FacetEmbeddings``' texts refuse bytes."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise PydanticCustomError("bytes_for_text", "Input should be a str, not bytes: " + _decode("it"))
    return value


# A text setting or option: a str (or None where optional); bytes are refused, not decoded.
_Text = BeforeValidator(_not_bytes)

# The longest HTTP timeout taken (~31 years): a socket's limit is 2**63 ns (~9.2e9 s), past
# which ``invoke`` raised a bare OverflowError ("timestamp out of range for platform time_t").
MAX_TIMEOUT_S = 1e9


def _not_negative(value: int) -> int:
    if value < 0:
        raise PydanticCustomError("greater_than_equal",
                                  f"Input should be from 1 to {MAX_TOP_K} (the candidates reranked)")
    return value

_SSL_LOCK = threading.Lock()
_SSL_CONTEXT: ssl.SSLContext | None = None


def _ssl_context() -> ssl.SSLContext:
    """The TLS context of every HTTP-mode client, built once per process on first use: httpx
    built one per client (certifi's CA bundle loaded, ~30 ms, even for http://), i.e. per
    search, and in ``ainvoke`` on the event loop. The same verification as httpx's default
    (``verify=True``: ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` if set when it is built, else
    certifi's bundle). Read-only once built, so shared by threads and event loops."""
    global _SSL_CONTEXT
    if _SSL_CONTEXT is None:
        with _SSL_LOCK:
            if _SSL_CONTEXT is None:
                import httpcore  # noqa: F401  (what a client imports on first use: off the loop too)
                import httpx

                _SSL_CONTEXT = httpx.create_ssl_context()
    return _SSL_CONTEXT


class _SharesTheFacade:
    """A copy (``copy.deepcopy``, ``model_copy(deep=True)``, what LangChain's configurable
    fields make) shares the facade, which holds the open store, its locks and models, and is
    not a value to copy; pickling one with ``facet=`` is refused saying why."""

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Any:
        memo = {} if memo is None else memo
        facet = getattr(self, "facet", None)
        if facet is not None:
            memo.setdefault(id(facet), facet)  # deepcopy returns the memo's object: the same
        return super().__deepcopy__(memo)  # type: ignore[misc]

    def __getstate__(self) -> dict[Any, Any]:
        if getattr(self, "facet", None) is not None:
            raise TypeError(f"a {type(self).__name__} made with facet= cannot be pickled: the "
                            "Facet holds the open store and its models; pickle one without facet= "
                            "(it then uses Facet.shared() where it is loaded)"
                            + (" or with base_url=" if isinstance(self, FacetRetriever) else ""))
        state: dict[Any, Any] = super().__getstate__()  # type: ignore[assignment]
        return state


def _facet(facet: Facet | None) -> Facet:
    if facet is not None:
        return facet
    from app.core import Facet

    return Facet.shared()


def to_document(result: SearchResult, collection: str, mode: str | None = None,
                note: str | None = None, instruction: str | None = None,
                instruction_read: bool = False) -> Document:
    """A search result as a LangChain ``Document``.

    ``page_content`` is the chunk text; ``metadata`` holds the document's own metadata
    (``jsonl``/``csv`` fields) plus ``doc_id``, ``source``, ``title``, ``chunk_no``,
    ``start``/``end`` (character offsets in the document), ``score`` (rerank score when
    reranked, else the search's: cosine, BM25 or fused, by mode), ``vector_score``,
    ``rerank_score``, ``more_chunks`` (grouped by document: its other matching chunks),
    ``collection`` and ``mode`` (the search mode that ran, which says what kind of score
    ``score`` is: a fused score of 0.03 is a good hybrid hit, a cosine of 0.03 is not); on a
    clash the Facet field wins (the record's value kept under ``record``, below). ``id`` is
    the Qdrant point id. ``note``: the search's note (``SearchResponse.note``), set only when
    it has one. ``instruction``: the search's instruction (None without one);
    ``instruction_read``: whether anything read it (``SearchResponse.instruction_read``: False
    for a lexical search without a reranker, BM25 matching the words only, and without one).

    ``record``: the record's own fields that a Facet key replaced (any of the names above, or
    ``note`` or ``record``), e.g. ``{"score": 5, "source": "web", "note": "vip"}``; set only
    when the record has such a field. ``note`` and ``record`` count as Facet's even where this
    search set none: ``metadata["note"]`` is always the search's, and the record's own ``note``
    (or ``record``) always under ``metadata["record"]``, not in one place or the other by search.
    """
    from indexer.store import point_id

    fields = {f: getattr(result, f) for f in _RESULT_FIELDS} | {"metadata": result.metadata}
    return _document(fields, result.text, collection, mode, note,
                     point_id(result.doc_id, result.chunk_no), instruction, instruction_read)


# A result's fields a Document's metadata carries, as SearchResult and /search's JSON name them.
_RESULT_FIELDS = ("doc_id", "source", "title", "chunk_no", "start", "end", "score",
                  "vector_score", "rerank_score", "more_chunks")
# Every metadata key that is Facet's: a record's own field of one of these names is kept under
# "record" (a record's "record" too: the dict of replaced fields is there whenever it has one).
_FACET_KEYS = frozenset((*_RESULT_FIELDS, "collection", "mode", "instruction",
                         "instruction_read", "note", "record"))


def _document(result: Mapping[str, Any], text: str, collection: str, mode: str | None,
              note: str | None, id: str | None, instruction: str | None = None,
              instruction_read: bool = False) -> Document:
    """``to_document``'s Document from a result's fields, in process or from /search's JSON."""
    own: dict[str, Any] = dict(result.get("metadata") or {})
    # The record's "score": 5 was overwritten by Facet's and lost, with no way to read it.
    metadata = {k: v for k, v in own.items() if k not in _FACET_KEYS}
    metadata.update({f: result.get(f) for f in _RESULT_FIELDS},
                    more_chunks=list(result.get("more_chunks") or ()), collection=collection,
                    mode=mode, instruction=instruction, instruction_read=instruction_read)
    if note:
        metadata["note"] = note
    replaced = {k: v for k, v in own.items() if k in _FACET_KEYS}
    if replaced:
        metadata["record"] = replaced
    return Document(page_content=text, metadata=metadata, id=id)


# The weak-instruction notes (``WEAK_INSTRUCTION_NOTE``) already logged as a warning by this
# process: each is said at WARNING once, then at INFO (a batch of 16 queries logged 16).
_WEAK_SAID: set[str] = set()
_WEAK_LOCK = threading.Lock()


def _note_parts(note: str) -> list[str]:
    """A search's note cut into its notes at each "; " outside parentheses: the weak-instruction
    note holds one in its own (a server's "...: docs/indexing.md; this server does not serve
    minilm[instruction_weight=1]: ...)"), whose second half was taken for another note and
    warned of on every call."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(note):
        depth += (char == "(") - (char == ")")
        if depth <= 0 and note.startswith("; ", i):
            parts.append(note[start:i])
            start = i + 2
    parts.append(note[start:])
    return parts


def _noted(docs: list[Document], note: str | None, collection: str, query: str,
           unread: bool = False) -> list[Document]:
    """The documents, the search's note and an instruction a lexical search did not read
    (``unread``) logged, in one warning (see the module's docstring); an embedder that reads no
    instruction says so in the note."""
    # The CLI's words; it was dropped without a word here.
    unread_said = (["the instruction was not read: lexical search matches the words only"]
                   if unread else [])
    said = ([note] if note else []) + unread_said
    if said:
        # The hybrid search's dense-only fallback alone is what a paraphrase meets (it shares
        # no word with the corpus): the usual case of semantic search, so INFO; it filled a
        # batched app's log with a WARNING per query. So is an instruction read at a weak blend
        # (minilm's default) once said: it is the retriever's embedder, not the query. Anything
        # else said stays a warning.
        parts = _note_parts(note or "")
        with _WEAK_LOCK:  # (a batch's searches run in threads: one of them says it)
            new = {part for part in parts if part.startswith(WEAK_INSTRUCTION_NOTE) and part not in _WEAK_SAID}
            _WEAK_SAID.update(new)
        repeated = [part for part in parts if part.startswith(WEAK_INSTRUCTION_NOTE) and part not in new]
        expected = not unread and all(part.startswith(DENSE_ONLY_NOTE) or part in repeated
                                      for part in parts)
        if expected:
            logger.info("FacetRetriever search of %r for %r: %s", collection, query[:80], "; ".join(said))
        else:
            # The warning without a weak-instruction note said before: beside another note (a
            # misspelt filter key) it was a warning on every call (docs/api.md: once, then INFO).
            warned = [part for part in parts if part and part not in repeated] + unread_said
            logger.warning("FacetRetriever search of %r for %r: %s", collection, query[:80], "; ".join(warned))
            if repeated:
                logger.info("FacetRetriever search of %r for %r: %s", collection, query[:80],
                            "; ".join(repeated))
    return docs


class FacetRetriever(_SharesTheFacade, BaseRetriever):
    """Retrieve chunks of a Facet collection for a query read under an instruction.

    Every field can be overridden per call: ``invoke(query, instruction=..., k=..., filter=...,
    score_threshold=..., rerank=..., rerank_depth=..., mode=..., group_by_document=...,
    exact=...)``; a per-call ``None`` clears the retriever's value (``instruction=None``: search
    without one), except for ``k``, ``mode``, ``group_by_document`` and ``exact``, which keep it.

    Attributes:
        collection: the collection to search.
        embedder: which of the collection's embedders to search (default: the settings' one
            if the collection has it, else its first).
        instruction: what the query means ("Find the customer's intent"); None for none.
        k: chunks returned (documents with ``group_by_document``); 4 by default, as LangChain's
            own retrievers (every other edge of Facet returns 10).
        filter: payload filters, ``{"intent": "refund"}`` or ``{"intent": ["a", "b"]}`` (any of).
        score_threshold: drop documents scoring below this (a finite number).
        rerank: an instruction embedder to rerank the candidates with.
        rerank_depth: candidates reranked (default 5 x k; from 1, one below k read as k).
        mode: ``auto`` (hybrid without an instruction or score_threshold where the collection
            keeps term vectors, else dense), ``dense`` (the embedder), ``lexical`` (BM25) or
            ``hybrid`` (both, fused by rank).
        group_by_document: one chunk per document (its best; the others' numbers in the
            metadata's ``more_chunks``), so ``k`` distinct documents reach the chain.
        exact: compare the query with every chunk (brute force) instead of the vector index
            (HNSW), as ``facet search --exact`` and ``POST /search``'s ``exact``.
        facet: the application core to use (default ``Facet.shared()``). A deep copy of the
            retriever shares it; a retriever with one cannot be pickled (``TypeError``).
        base_url: a running ``facet serve`` to send the searches to (``POST /search``), its
            http:// or https:// URL, e.g. ``http://127.0.0.1:8000`` (a trailing ``/v1``, the
            OpenAI clients' base URL, is dropped); None (the default) searches in process. Not
            with ``facet``.
        api_key: the server's ``FACET_API_KEY``, sent as ``Authorization: Bearer``; None (the
            default) reads this process's ``FACET_API_KEY`` when the retriever is made (HTTP
            mode), as the OpenAI client reads ``OPENAI_API_KEY``; ``""`` sends none. Never in
            the retriever's repr or dump; a pickle holds it (an unpickled retriever searches),
            so keep pickles as the key is kept.
        timeout: seconds to wait for the server's answer (HTTP mode); None waits as long as
            it takes (httpx's no timeout).

    Over HTTP the same options reach the same search and the documents carry the same
    metadata (``id``: the point id the server returns, None where it returns none); the
    server's error is raised as the class the in-process search raises (400
    ``InvalidRequestError``, 404 ``NotFoundError``, 409 ``ConflictError``...), its message
    followed by the status, the URL and the field at fault, and a server down or silent as
    ``UnavailableError`` naming the URL.

    A setting the retriever refuses (``k=0``, ``k=True``, ``rerank_depth=-1``) raises
    ``InvalidRequestError`` worded as the per-call option's refusal, not pydantic's
    ``ValidationError``.
    """

    # A misspelt setting (``filters=``, ``top_k=``) is refused, not ignored: ignored, the
    # search ran unfiltered and nothing said so.
    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    collection: Annotated[str, _Text]
    embedder: Annotated[str, _Text] | None = None
    instruction: Annotated[str, _Text] | None = None
    k: Annotated[int, _Number] = Field(default=4, ge=1, le=MAX_TOP_K)
    filter: dict[Annotated[str, _Text], Any] | None = None
    score_threshold: Annotated[float, _Number] | None = None
    rerank: Annotated[str, _Text] | None = None
    # A negative one refused here, as k=0 is; a 0 still reaches the search, which refuses it
    # (the server with its own 400, which callers rely on).
    rerank_depth: Annotated[int, _Number, AfterValidator(_not_negative)] | None = Field(
        default=None, le=MAX_TOP_K)
    mode: Annotated[SearchMode, _Text] = "auto"
    group_by_document: bool = False
    exact: bool = False
    # Any: a Facet, typed loosely so that HTTP mode never imports the core (app.core).
    facet: Any = Field(default=None, exclude=True, repr=False)
    base_url: Annotated[str, _Text] | None = None
    api_key: str | None = Field(default=None, exclude=True, repr=False)
    # Above the server's FACET_WORKER_TIMEOUT_S (60 s by default): with no worker taking its
    # queries, the server's own 503 ("no worker answered on the 'query' queue ... start one")
    # came 0.2 s after a retriever of 60 s had given up, saying only that it may be busy.
    timeout: Annotated[float, _Number] | None = Field(default=90.0, gt=0)

    def __repr_args__(self) -> Any:
        # A password in base_url (a proxy's) was shown by repr, as the key is not.
        for name, value in super().__repr_args__():
            yield name, (mask_secrets(value) if name == "base_url" and isinstance(value, str) else value)

    @field_serializer("base_url")
    def _masked_url(self, url: str | None) -> str | None:
        """``model_dump()`` and ``model_dump_json()`` mask it as repr does (they gave the
        password as typed; the key they leave out). A copy (``model_copy``, pickle) keeps it."""
        return None if url is None else mask_secrets(url)

    def __init__(self, **data: Any) -> None:
        """A bad setting is a ``FacetError`` as a bad per-call option is (``k=0`` raised
        pydantic's ValidationError here and ``InvalidRequestError`` from ``invoke``)."""
        try:
            super().__init__(**data)
        except ValidationError as e:
            raise _refusal(e) from None

    @model_validator(mode="after")
    def _one_way(self) -> FacetRetriever:
        if self.base_url is not None and self.facet is not None:
            raise InvalidRequestError("FacetRetriever takes facet= (search in process) or "
                                      "base_url= (search on a running facet serve), not both")
        if self.base_url is not None and self.api_key is None:
            # Next to a `facet serve` with FACET_API_KEY set, the server's own variable: without
            # it each search got a 401 until the key was passed by hand. "" opts out. Read as
            # the server reads its settings: surrounding spaces are not part of it.
            self.api_key = (os.environ.get("FACET_API_KEY") or "").strip() or None
        elif self.api_key is not None:
            # The same for a key given: one read from a file ends in a line break, which httpx
            # refused as a header ("no Facet server answered ...", the key printed in it).
            self.api_key = self.api_key.strip()
        if self.base_url is not None and self.api_key and "@" in urlsplit(self.base_url).netloc:
            # httpx sends a URL's user:password as its own Authorization header (Basic), in
            # place of the key's Bearer: every search was a 401 "the key sent was refused".
            raise InvalidRequestError(
                f"FacetRetriever setting base_url={mask_secrets(self.base_url)!r} holds a user "
                "and password, which would be sent in place of api_key (one Authorization "
                "header): give the server's URL without them (or api_key='' to send no key)",
                param="base_url")
        at = header_unsafe_at(self.api_key) if self.api_key else None
        if at is not None:
            # The server's own rule (``check_api_key``): a key it accepts, this sends.
            raise InvalidRequestError(
                f"api_key holds a character an HTTP header cannot carry (character {at + 1}: a "
                "line break, a tab or a letter outside ASCII); give the key as the server was "
                "given it", param="api_key")
        return self

    @field_validator("timeout")
    @classmethod
    def _bounded_timeout(cls, timeout: float | None) -> float | None:
        """``math.inf`` is None (wait as long as it takes); past ``MAX_TIMEOUT_S`` a socket
        cannot wait (``invoke`` raised a bare OverflowError, while ``ainvoke`` waited)."""
        if timeout is not None and math.isinf(timeout):
            return None
        if timeout is not None and timeout > MAX_TIMEOUT_S:
            raise PydanticCustomError(
                "less_than_equal", f"Input should be at most {MAX_TIMEOUT_S:g} seconds, or None to "
                "wait as long as it takes")
        return timeout

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        """An http(s) URL with a host: ``127.0.0.1:8000`` (no scheme) or ``ftp://x`` was taken
        and each search then failed as "no Facet server answered" with the server running."""
        if url is not None and _is_http_url(url) and (urlsplit(url).query or urlsplit(url).fragment):
            # The route was appended after it ("http://h:1/?api_key=k/search"): a wrong URL.
            raise InvalidRequestError(
                f"FacetRetriever setting base_url={mask_secrets(url)!r}: give the server's URL "
                "without a query string or fragment (the key goes in api_key=)", param="base_url")
        if url is None or _is_http_url(url):
            return url
        # A host:port without a scheme is shown with one, else the server's default URL.
        example = ("http://127.0.0.1:8000" if "://" in url or not _is_http_url(f"http://{url}")
                   else mask_secrets(f"http://{url}"))
        # Masked: a user:password in it was printed (twice, with the example).
        shown = url if "://" in url else f"http://{url}"
        shown = mask_secrets(shown) if "://" in url else mask_secrets(shown).removeprefix("http://")
        raise InvalidRequestError(f"FacetRetriever setting base_url={shown!r}: give the server's "
                                  f"URL with http:// or https://, e.g. {example}")

    @model_validator(mode="before")
    @classmethod
    def _known_settings(cls, data: Any) -> Any:
        """The refusal of an unknown setting names the one meant (``filters`` -> ``filter``)."""
        _refuse_unknown_settings(data, tuple(cls.model_fields), "FacetRetriever", _ALIASES,
                                 shown=tuple(n for n in cls.model_fields
                                             if n not in BaseRetriever.model_fields))
        return data

    def _request(self, query: str, options: dict[str, Any]) -> SearchRequest:
        return SearchRequest(query=query, collection=self.collection, embedder=self.embedder,
                             **self._options(options))

    def _options(self, options: dict[str, Any]) -> dict[str, Any]:
        """The search's settings (``SearchRequest``'s names): this call's, else the retriever's."""
        unknown = sorted(set(options) - set(_CALL_OPTIONS))
        if unknown:  # a FacetError, as a bad value of a known option is
            raise _unknown(unknown, "option(s)", _CALL_OPTIONS)

        def pick(name: str) -> Any:
            # A per-call None means none (no instruction, no filter, no rerank...); only ``k``,
            # ``mode`` and the flags, which always have a value, keep the retriever's for None.
            if name not in options or (options[name] is None and
                                        name in ("k", "mode", "group_by_document", "exact")):
                return getattr(self, name)
            # The facade checks filters itself, with messages naming the field and value.
            return options[name] if name == "filter" else _call_option(name, options[name])

        return dict(instruction=pick("instruction"), top_k=pick("k"),
                    filters=_no_filter_is_empty(pick("filter")), rerank=pick("rerank"),
                    rerank_depth=pick("rerank_depth"), score_threshold=pick("score_threshold"),
                    mode=pick("mode"), group_by_document=pick("group_by_document"),
                    exact=pick("exact"))

    def _search(self, query: str, options: dict[str, Any]) -> list[Document]:
        response = _facet(self.facet).search(self._request(query, options))
        read = bool(response.instruction_read)
        docs = [to_document(r, self.collection, response.mode, response.note,
                            response.instruction, read) for r in response.results]
        return _noted(docs, response.note, self.collection, query, response.words_alone)

    # ----------------------------------------------------------------- HTTP mode

    def _root(self) -> str:
        root = (self.base_url or "").rstrip("/")
        return root[:-len("/v1")] if root.endswith("/v1") else root

    def _http_request(self, query: str, options: dict[str, Any]) -> dict[str, Any]:
        """The ``POST /search`` call: url, body and headers (``httpx``'s keywords)."""
        if not isinstance(query, str):  # the facade's words: the body's would be the API's
            raise InvalidRequestError(f"the query must be a string, got "
                                      f"{type(query).__name__} {query!r:.80}")
        settings = self._options(options)
        # An unpaired surrogate: the facade's refusal (SearchService.validate, in its order), not
        # httpx's UnicodeEncodeError from encoding the body.
        check_text_encodable(query, "the query", param="query")
        if isinstance(settings["instruction"], str):
            check_text_encodable(settings["instruction"], "the instruction", param="instruction")
        # Numpy scalars and dates as the facade takes them (a date as its ISO text), then the
        # facade's messages: JSON-ready values.
        settings["filters"] = plain_filters(settings["filters"])
        check_filters(settings["filters"])
        threshold = settings["score_threshold"]
        if threshold is not None and not math.isfinite(threshold):
            # The facade's refusal (SearchService.validate), not the JSON encoder's bare
            # ValueError "Out of range float values are not JSON compliant".
            raise InvalidRequestError(f"score_threshold must be a finite number, got {threshold!r}",
                                      param="score_threshold")
        body = {"query": query, "collection": self.collection, "embedder": self.embedder,
                "k": settings.pop("top_k"), **settings}
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return {"url": f"{self._root()}/search", "json": body, "headers": headers}

    def _http_documents(self, query: str, url: str, response: Any) -> list[Document]:
        if response.status_code != 200:
            raise _http_error(response, url, self.api_key)
        try:
            answer = response.json()
        except ValueError:  # a 200 of another server (a web page): not Facet's JSON
            raise FacetError(_not_facet(response, url, "JSON")) from None
        note, instruction = answer.get("note"), answer.get("instruction")
        read = bool(answer.get("instruction_read"))
        docs = [_document(r, r["text"], self.collection, answer.get("mode"), note, r.get("id"),
                          instruction, read)
                for r in answer.get("results", [])]
        # (Not read by a search that was not lexical: an embedder that reads none, its note says.)
        return _noted(docs, note, self.collection, query,
                      instruction is not None and not read and answer.get("mode") == "lexical"
                      and not answer.get("reranker"))

    def _http_search(self, query: str, options: dict[str, Any]) -> list[Document]:
        import httpx

        call = self._http_request(query, options)
        try:
            with httpx.Client(timeout=self.timeout, verify=_ssl_context()) as client:
                response = client.post(**call)
        except httpx.TransportError as e:
            raise _unreachable(call["url"], self.timeout, e) from None
        return self._http_documents(query, call["url"], response)

    async def _ahttp_search(self, query: str, options: dict[str, Any]) -> list[Document]:
        call = self._http_request(query, options)
        # A client per call: an AsyncClient is bound to the event loop it first ran on. The TLS
        # context is the process's (built once, off the loop the first time): httpx built one
        # per client, blocking the event loop ~30 ms per call. The first call also imports
        # httpx there (its command-line part brings rich and pygments: ~170 ms on the loop).
        verify = _SSL_CONTEXT if _SSL_CONTEXT is not None else await asyncio.to_thread(_ssl_context)
        import httpx
        try:
            async with httpx.AsyncClient(timeout=self.timeout, verify=verify) as client:
                response = await client.post(**call)
        except httpx.TransportError as e:
            raise _unreachable(call["url"], self.timeout, e) from None
        return self._http_documents(query, call["url"], response)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        if self.base_url is not None:
            return self._http_search(query, kwargs)
        return self._search(query, kwargs)

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun,
                                       **kwargs: Any) -> list[Document]:
        if self.base_url is not None:
            return await self._ahttp_search(query, kwargs)
        return await asyncio.to_thread(self._search, query, kwargs)


# An API error's status (and code) -> the domain error the in-process search raises for it: the
# inverse of ``app.api.errors.STATUS``.
_HTTP_ERRORS: dict[tuple[int, str | None], type[FacetError]] = {
    (404, "model_not_found"): UnknownModelError, (413, None): TooLargeError,
    (400, None): InvalidRequestError, (401, None): AuthenticationError,
    (404, None): NotFoundError, (422, None): DataError, (409, None): ConflictError,
    (429, None): BusyError, (503, None): UnavailableError, (500, "model_error"): ModelError,
}


def _http_error(response: Any, url: str, api_key: str | None = None) -> FacetError:
    """The domain error for an error answer of the API (``{"error": {"message", "type",
    "param", "code"}}``): its message, then the status, the URL and the field at fault. An
    answer without that body (another server at base_url, a proxy's page) says so in one line.
    ``api_key``: the retriever's (``""``: none asked for; None: FACET_API_KEY was unset when it
    was made), for a 401's hint."""
    status = response.status_code
    url = mask_secrets(url)  # (a base_url's password was printed in every error's message)
    try:
        error = response.json()["error"]
        message, param, code = str(error["message"]), error.get("param"), error.get("code")
        where = f" (HTTP {status} from {url}{f'; param {param}' if param else ''})"
    except (ValueError, KeyError, TypeError):  # not Facet's body (a proxy's page...)
        # One line that says so: the message was the page's HTML, cut at 200 characters.
        message, param, code, where = _not_facet(response, url, "JSON error body"), None, None, ""
    cls = _HTTP_ERRORS.get((status, code)) or _HTTP_ERRORS.get((status, None), FacetError)
    if status == 401:
        try:
            # A key, not a base_url's user:password, which httpx sends as Basic.
            sent = response.request.headers.get("authorization", "").startswith("Bearer ")
        except (AttributeError, RuntimeError):  # a response without its request
            sent = True
        # With api_key="" it pointed at FACET_API_KEY, which that setting had just set aside; and
        # said "unset here" whether the variable was set or not: it says which is the case.
        where += ("; the key sent was refused" if sent else
                  f"; no key was sent ({_why_no_key(api_key)})") + (
            ": pass the server's key as FacetRetriever(api_key=...) or in FACET_API_KEY")
    # The field at fault as e.param, as the in-process retriever's error has it (it was only
    # in the message: e.param was None).
    field = str(param) if param else None
    retry = response.headers.get("retry-after", "")
    if cls is BusyError:
        return BusyError(message + where, float(retry) if retry.isdigit() else 1.0, param=field)
    if cls is UnavailableError:  # (a wait only where the outage may pass: the server's word)
        return UnavailableError(message + where, param=field,
                                retry_after_s=float(retry) if retry.isdigit() else None)
    return cls(message + where, param=field)


def _why_no_key(api_key: str | None) -> str:
    """Why a retriever sent no key: ``api_key=""``, or FACET_API_KEY unset when it was made."""
    if api_key == "":
        now = ("FACET_API_KEY is set here but not read" if os.environ.get("FACET_API_KEY")
               else "and FACET_API_KEY is unset here")
        return f"api_key='' sends none, {now}; api_key=None sends FACET_API_KEY"
    return ("api_key=None sends FACET_API_KEY, which was unset or empty when this retriever "
            "was made")


def _is_http_url(url: str) -> bool:
    """``url`` is http(s) with a host and, if it has one, a numeric port."""
    try:
        parts = urlsplit(url)
        return (parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
                and (parts.port is None or parts.port >= 0))  # (reading a bad port raises)
    except ValueError:
        return False


def _not_facet(response: Any, url: str, what: str) -> str:
    """An answer of a server that is not Facet (``python -m http.server``, a proxy's page)."""
    url = mask_secrets(url)  # (a password in base_url was printed: the security exploration)
    kind = response.headers.get("content-type", "").partition(";")[0].strip() or "no content type"
    return (f"the server at {url} answered HTTP {response.status_code} without Facet's {what} "
            f"({kind}): is base_url a facet serve?")


def _unreachable(url: str, timeout: float | None, error: Exception) -> UnavailableError:
    """What a failed connection says, with the hint that fits its cause: a timeout is a server
    busy or slow (raise ``timeout=``), https:// to a plain-HTTP server (or http:// to a TLS one)
    the wrong scheme; only a refused or unresolved connection suggests starting ``facet serve``
    (every case said "start one", to a user whose server was up)."""
    import httpx

    url = mask_secrets(url)  # (a password in base_url was printed: the security exploration)
    within = f" within {timeout:g} s" if timeout is not None else ""
    said = mask_secrets(f"{type(error).__name__}: {error}")
    scheme = urlsplit(url).scheme.lower()
    plain = urlunsplit(("http", *urlsplit(url)[1:]))
    tls = urlunsplit(("https", *urlsplit(url)[1:]))
    if isinstance(error, httpx.ConnectTimeout):
        return UnavailableError(
            f"no Facet server answered at {url}: the connection was not accepted{within}; the "
            "host may be down, unreachable (a firewall) or very busy: check base_url, or raise "
            "FacetRetriever(timeout=...)")
    if isinstance(error, httpx.TimeoutException):
        return UnavailableError(
            f"the Facet server at {url} did not answer{within} ({type(error).__name__}): it may be "
            "busy or the search slow (a large k, a reranker, a model loading on its first "
            "search); raise FacetRetriever(timeout=...) (None: wait as long as it takes)")
    text = str(error).upper()
    if scheme == "https" and ("WRONG_VERSION_NUMBER" in text or "RECORD_LAYER_FAILURE" in text
                              or "PACKET_LENGTH_TOO_LONG" in text or "HTTP_REQUEST" in text):
        return UnavailableError(
            f"the server at {url} does not speak HTTPS ({said}): it serves plain HTTP, as "
            f"`facet serve` does; use base_url={plain.removesuffix('/search')!r}")
    if scheme == "https" and "CERTIFICATE_VERIFY_FAILED" in text:
        # (A proxy's self-signed or internal CA's certificate: it advised starting a server.)
        return UnavailableError(
            f"the server at {url} answered with a certificate this process does not trust "
            f"({said}): point SSL_CERT_FILE (or SSL_CERT_DIR) at the CA that signed it, set before "
            "the first request, or check base_url")
    if scheme == "http" and isinstance(error, httpx.RemoteProtocolError | httpx.ReadError):
        return UnavailableError(
            f"the server at {url} closed the connection without an answer ({said}); if it "
            f"serves HTTPS (TLS), use base_url={tls.removesuffix('/search')!r}; else check that "
            "base_url is a `facet serve`")
    return UnavailableError(f"no Facet server answered at {url}: it could not be reached "
                            f"({said}); start one with `facet serve` (FACET_DATA_DIR its data "
                            "folder, --port its port) or check base_url")


def _refusal(error: ValidationError, whose: str = "FacetRetriever",
             options: tuple[str, ...] = _CALL_OPTIONS) -> InvalidRequestError:
    """A setting's ValidationError worded as ``_call_option`` words a bad option's refusal
    ("FacetRetriever option k=0: Input should be greater than or equal to 1")."""
    first = error.errors()[0]
    raised = (first.get("ctx") or {}).get("error")
    if isinstance(raised, InvalidRequestError):  # a validator's own refusal (a ValueError, so
        return raised  # pydantic wrapped it): as it was raised, not worded again
    # (A union's member is in the location too: "rerank_depth.int", "timeout.float".)
    name = str(first["loc"][0]) if first["loc"] else "?"
    what = "option" if name in options else "setting"
    # ``param`` names the field, as the facade's refusals do (k=0 and mode="semantic" had none:
    # the RAG exploration of the sixth session of 2026-12-02).
    if first["type"] == "missing":
        return InvalidRequestError(f"{whose} setting {name} is required", param=name)
    return InvalidRequestError(f"{whose} {what} {name}={first['input']!r}: {first['msg']}", param=name)


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
                                  f"{e.errors()[0]['msg']}", param=name) from None


def _no_filter_is_empty(value: Any) -> Any:
    """A filter option as the facade takes it: None is no filter ({}); anything else is checked
    there (``filter=""``, ``False`` or ``[]`` searched unfiltered, where ``FacetRetriever(filter=[])``
    and ``filter="intent"`` are refused)."""
    return {} if value is None else value


_KEEP: Any = object()


class TextTypeError(InvalidRequestError, TypeError):
    """An argument of ``FacetEmbeddings`` of the wrong type (bytes, a number, a list holding
    one): a ``TypeError``, as Python's own refusals of a wrong argument are, and the facade's
    ``InvalidRequestError``, as the refusal of a bare str always was."""


def _shown(value: Any) -> str:
    """``value``'s type and the start of its repr: ``bytes (b'abc')``."""
    shown = repr(value)
    return f"{type(value).__name__} ({shown if len(shown) <= 40 else shown[:39] + '…'})"


def _decode(what: str) -> str:
    """What to do with bytes given for text: they are not decoded here (which encoding?)."""
    return f"decode {what} first (data.decode('utf-8'))"


def _query_given(text: Any) -> str:
    """``text``, one query (a str that is not blank), or the refusal naming ``embed_query``."""
    if not isinstance(text, str):  # it was "texts[0] is bytes", naming a list not given
        if isinstance(text, (bytes, bytearray, memoryview)):
            hint = f": {_decode('it')}"
        elif isinstance(text, (list, tuple)):
            hint = ": use embed_documents for several"
        else:
            hint = ""
        raise TextTypeError(f"embed_query takes one text (a str), got {_shown(text)}{hint}")
    if isinstance(text, str) and blank(text):  # it was "texts[0] is empty": no list given
        raise InvalidRequestError(f"the query is {empty_said(text)}: give the text to embed")
    return text


def _documents_given(texts: Any) -> list[str]:
    """``texts`` as a list, refused with ``TextTypeError`` unless it is an iterable of str:
    bytes were embedded as one "text" per byte value ("texts[0] is int (97)"), and a list
    holding a number said "texts[1] is int (3)" without naming the call or what it takes."""
    if isinstance(texts, str):  # one vector per character, or "texts[4] is empty"
        raise TextTypeError("embed_documents takes a list of texts, got a str "
                            "(use embed_query for one)")
    if isinstance(texts, (bytes, bytearray, memoryview)):
        raise TextTypeError(f"embed_documents takes a list of texts (str), got {_shown(texts)}: "
                            f"{_decode('them')}, and give a list of texts")
    try:
        listed = list(texts)
    except TypeError:  # None, a number: "'NoneType' object is not iterable"
        raise TextTypeError(f"embed_documents takes a list of texts (str), got "
                            f"{_shown(texts)}") from None
    for i, item in enumerate(listed):
        if not isinstance(item, str):
            hint = f"; {_decode('it')}" if isinstance(item, (bytes, bytearray, memoryview)) else ""
            raise TextTypeError(f"embed_documents takes a list of texts (str); texts[{i}] is "
                                f"{_shown(item)}{hint}")
    return listed


class FacetEmbeddings(_SharesTheFacade, BaseModel, Embeddings):
    """A Facet embedder as LangChain ``Embeddings``: documents and queries each read under
    their own instruction (instruction-aware embedders need both).

    Attributes:
        model: embedder name or checkpoint path (``minilm``, ``backbone-prompteol``...); None
            (the default) is the facade's default embedder, ``FACET_DEFAULT_EMBEDDER``, the one
            its collections are indexed and searched with (a fixed ``minilm`` embedded with
            minilm whatever that was set to).
        query_instruction: instruction for ``embed_query`` (None: no instruction).
        document_instruction: instruction for ``embed_documents`` (None: no instruction).
        facet: the application core to use (default ``Facet.shared()``). A deep copy shares it;
            an object with one cannot be pickled (``TypeError``).

    A bad or misspelt setting (``modell=``) raises ``InvalidRequestError`` naming the one meant,
    as ``FacetRetriever``'s do.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as e:
            raise _refusal(e, "FacetEmbeddings", ()) from None

    @model_validator(mode="before")
    @classmethod
    def _known_settings(cls, data: Any) -> Any:
        """``modell=`` was pydantic's raw ValidationError, naming no setting meant."""
        _refuse_unknown_settings(data, tuple(cls.model_fields), "FacetEmbeddings", _EMBEDDINGS_ALIASES)
        return data

    model: Annotated[str, _Text] | None = None
    query_instruction: Annotated[str, _Text] | None = None
    document_instruction: Annotated[str, _Text] | None = None
    facet: Any = Field(default=None, exclude=True, repr=False)  # a Facet (``FacetRetriever``'s)

    def with_instruction(self, query_instruction: str | None = _KEEP,
                         document_instruction: str | None = _KEEP) -> FacetEmbeddings:
        """A copy reading queries and/or documents under other instructions (None: none);
        an argument left out keeps this object's instruction."""
        update: dict[str, Any] = {}
        if query_instruction is not _KEEP:
            update["query_instruction"] = query_instruction
        if document_instruction is not _KEEP:
            update["document_instruction"] = document_instruction
        # Validated as the constructor's settings are (a model_copy took with_instruction(5),
        # refused only at the first embed, in words naming neither).
        settings = {name: getattr(self, name) for name in type(self).model_fields}
        return type(self)(**{**settings, **update})

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
        return self._embed(_documents_given(texts), Role.DOCUMENT, self.document_instruction)

    def embed_query(self, text: str) -> list[float]:
        """The query vector (role ``query``, ``query_instruction``), L2-normalised."""
        return self._embed([_query_given(text)], Role.QUERY, self.query_instruction)[0]

    async def _aembed(self, texts: list[str], role: Role, instruction: str | None
                      ) -> list[list[float]]:
        """``_embed`` awaiting ``Facet.aembed``: a cancelled or timed-out call drops the pieces
        not encoded yet, as the facade's does. It ran ``embed_documents`` in a worker thread,
        which encoded the whole list after a timeout (and ``asyncio.run`` waited for it at
        exit), each pending call holding one of the loop's default threads."""
        check_texts(texts)
        # Opening the shared facade (the first call) loads settings and the store: not on the loop.
        facet = self.facet if self.facet is not None else await asyncio.to_thread(_facet, None)
        step = facet.settings.max_texts_per_call
        out: list[list[float]] = []
        for start in range(0, len(texts), step):
            result = await facet.aembed(texts[start:start + step], embedder=self.model,
                                        role=role, instruction=instruction)
            out.extend(result.vectors.astype(float).tolist())
        return out

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """``embed_documents`` for async callers (cancelling it stops the encoding)."""
        return await self._aembed(_documents_given(texts), Role.DOCUMENT, self.document_instruction)

    async def aembed_query(self, text: str) -> list[float]:
        """``embed_query`` for async callers (cancelling it stops the encoding)."""
        return (await self._aembed([_query_given(text)], Role.QUERY, self.query_instruction))[0]
