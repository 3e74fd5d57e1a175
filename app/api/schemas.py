"""Request bodies of the HTTP API (pydantic), and the response bodies /openapi.json
declares. Unknown request fields are refused, so a misspelt option is a 400 that names it
instead of being ignored.

The responses of search, cluster, jobs and collections are the services' dataclasses
(``SearchResponse``, ``JobInfo``...) as the routes render them; only the bodies the routes
build by hand (OpenAI's shapes, errors, search results with their point id) are modelled here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    WithJsonSchema,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from app.errors import InvalidRequestError
from app.services.clustering import MAX_K, MAX_SEED, SEARCH_RESULTS_CLUSTERED
from app.services.collections import (
    DEFAULT_JOB_ERRORS,
    MAX_DOCUMENTS_LISTED,
    MAX_JOB_ERRORS,
    MAX_JOBS_LISTED,
    CollectionInfo,
    DocumentStatus,
    JobInfo,
)
from app.services.search import (
    MAX_FILTER_VALUES,
    MAX_QUERY_CHARS,
    MAX_TOP_K,
    SearchMode,
    SearchResponse,
    SearchResult,
    check_filters,
)
from indexer.chunking import MAX_CHUNK_TOKENS
from indexer.store import _NAME as _STORE_NAME

_SCALAR = [{"type": "string"}, {"type": "number"}, {"type": "boolean"}]

# A collection name's longest (``indexer.store.validate_name``): a longer one is refused as a
# field that does not validate, without echoing it (a 200,001-character name came back whole in
# a 200 KB "invalid collection name" body).
MAX_COLLECTION_NAME = 128
# The names ``indexer.store.validate_name`` takes, as /openapi.json declares them (ECMA-262, as
# JSON Schema's ``pattern``; anchored, as validate_name's fullmatch): only documented, the check
# is the store's (its message names the rule).
COLLECTION_NAME_PATTERN = f"^(?:{_STORE_NAME.pattern})$"
# A text that must hold something besides white space (the query, a text to embed or cluster,
# a source): only documented, the services refuse a blank one with their own message.
NOT_BLANK = r"\S"
_DIGITS = re.compile(r"-?[0-9]+")


def _digits_only(value: Any) -> Any:
    """A query or path integer as digits only (a leading ``-`` allowed): pydantic's lax parsing
    read ``5.0``, ``+2``, ``" 2"`` and ``2_0`` as integers, where docs/api.md says an integer
    field refuses ``5.0``."""
    if isinstance(value, str) and not _DIGITS.fullmatch(value):
        shown = repr(value) if len(value) <= 40 else f"{value[:40]!r}… ({len(value):,} characters)"
        raise PydanticCustomError("int_parsing", "must be a whole number written in digits, got "
                                  "{value}", {"value": shown})
    return value


# An integer query or path parameter (``GET /jobs?limit=``, ``/jobs/{job_id}``).
QueryInt = Annotated[int, BeforeValidator(_digits_only)]
CollectionName = Annotated[str, Field(max_length=MAX_COLLECTION_NAME), WithJsonSchema({
    "type": "string", "minLength": 1, "maxLength": MAX_COLLECTION_NAME,
    "pattern": COLLECTION_NAME_PATTERN})]
# Documented only (``WithJsonSchema``): the facade's checks answer a blank or an over-long text
# (400, or 413 past ``MAX_QUERY_CHARS``) with their own messages and params.
NotBlank = Annotated[str, WithJsonSchema({"type": "string", "minLength": 1, "pattern": NOT_BLANK})]
SearchQuery = Annotated[str, WithJsonSchema({"type": "string", "minLength": 1, "pattern": NOT_BLANK,
                                       "maxLength": MAX_QUERY_CHARS})]
SearchInstruction = Annotated[str, WithJsonSchema({
    "type": "string", "maxLength": MAX_QUERY_CHARS,
    "description": "empty or blank: none"})]


def _checked_filters(filters: dict[str, Any]) -> dict[str, Any]:
    """The facade's own check (``check_filters``), run while the body is validated: typed as
    a union, {"stars": {"gte": 3}} was refused with pydantic's five type errors ("filters.stars.str:
    Input should be a valid string (and 4 more problems)") where every other edge says what a
    filter value may be."""
    try:
        check_filters(filters)
    except InvalidRequestError as e:
        raise PydanticCustomError("invalid_filter", "{reason}", {"reason": str(e)}) from None
    return filters


# Values are checked by ``_checked_filters``, not by their type: the schema only documents them.
Filters = Annotated[
    dict[str, Annotated[Any, WithJsonSchema({"anyOf": [*_SCALAR, {
        "type": "array", "minItems": 1, "maxItems": MAX_FILTER_VALUES,
        "items": {"anyOf": _SCALAR}}]})]],
    AfterValidator(_checked_filters),
    Field(description=f"payload field -> the value it must equal, or a non-empty list of at most "
                      f"{MAX_FILTER_VALUES} values (any of)"),
]


class _Body(BaseModel):
    """A JSON body. Strict: a value of the wrong JSON type is refused naming its field, not
    coerced (``"k": true`` searched with k=1, ``"k": "5"`` with 5, ``"exact": "no"`` read as
    false). Numbers may still be integers where a float is asked for (``"score_threshold": 0``);
    query parameters (``_Query``) arrive as strings and are parsed as before. ``null`` for an
    optional field is its default (``_null_is_the_default``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _null_is_the_default(cls, data: Any) -> Any:
        """An optional field sent as ``null`` takes its default, as an omitted one does: clients
        generated from /openapi.json (Java, C#, Go) send ``null`` for options left unset, and
        ``"mode": null`` or ``"filters": null`` were refused ("Input should be 'auto', ...").
        A required field sent as null is still refused, naming it."""
        if not isinstance(data, dict):
            return data
        fields = cls.model_fields
        return {key: value for key, value in data.items()
                if not (value is None and key in fields and not fields[key].is_required()
                        and fields[key].get_default(call_default_factory=True) is not None)}

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: core_schema.CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        """Each optional field's schema allows ``null``, as ``_null_is_the_default`` reads it:
        a client validating against /openapi.json could not send the ``null`` it is told to
        (``"k": null`` was declared an integer only)."""
        json_schema = handler.resolve_ref_schema(handler(schema))
        required = set(json_schema.get("required", ()))
        for name, prop in json_schema.get("properties", {}).items():
            if name not in required:
                json_schema["properties"][name] = _nullable(prop)
        return json_schema


_ANNOTATIONS = ("title", "description", "default", "examples")


def _nullable(prop: dict[str, Any]) -> dict[str, Any]:
    """``prop`` allowing null too (``anyOf`` with ``{"type": "null"}``), its title, description
    and default kept beside the ``anyOf``."""
    if prop.get("type") == "null" or any(a.get("type") == "null" for a in prop.get("anyOf", ())):
        return prop
    kept = {k: v for k, v in prop.items() if k in _ANNOTATIONS}
    value = {k: v for k, v in prop.items() if k not in _ANNOTATIONS}
    return {"anyOf": [value, {"type": "null"}], **kept}


class EmbeddingsBody(_Body):
    """``POST /v1/embeddings``: OpenAI's request plus ``instruction`` and ``role``.

    ``input`` is checked by hand (not typed ``str | list[str]``) so that a wrong item is
    answered with its index and what it is, and token-id arrays with why they are refused.
    """

    # Any for the check by hand; the schema says what that check lets through.
    # The list's maxItems (FACET_MAX_TEXTS_PER_CALL, a setting) is the served app's
    # (``server._openapi``).
    input: Annotated[Any, WithJsonSchema({"anyOf": [
        {"type": "string", "minLength": 1, "pattern": NOT_BLANK},
        {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1,
                                                   "pattern": NOT_BLANK}}]})]
    model: str
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(default=None, ge=1, description=(
        "the width expected: the model's (GET /v1/models) or omitted; checked before encoding"))
    user: str | None = None
    instruction: str | None = Field(default=None, description="empty or blank: none")
    role: Literal["query", "document"] = "document"


# POST /search's ``mode``, and POST /cluster's ``search.mode`` (the search whose results it groups).
_MODE_DESCRIPTION = ("auto: hybrid without an instruction or score_threshold where the collection "
                     "keeps term vectors, else dense; dense: the embedder's nearest chunks; "
                     "lexical: BM25 over the chunks' words; hybrid: both, fused by reciprocal rank")


class SearchBody(_Body):
    """``POST /search``."""

    query: SearchQuery
    collection: CollectionName
    instruction: SearchInstruction | None = None
    k: int = Field(default=10, ge=1, le=MAX_TOP_K)
    filters: Filters = Field(default_factory=dict)
    rerank: str | None = Field(
        default=None, description="the embedder that reranks the candidates; null or empty: no "
                                  "rerank (as `facet search --rerank ''`)")
    rerank_depth: int | None = Field(
        default=None, ge=1, le=MAX_TOP_K,
        description="candidates the reranker reads (default 5 x k); one below k is read as k, as "
                    "`facet search --rerank-depth` reads it: k results are always reranked")
    embedder: str | None = None
    score_threshold: float | None = None
    exact: bool = False
    group_by_document: bool = Field(
        default=True, description="one result per document (its best chunk, the others' numbers "
                                  "in more_chunks); false: one result per chunk")
    mode: SearchMode = Field(default="auto", description=_MODE_DESCRIPTION + ". The response's "
                                                         "mode is the one that ran")


def _k_or_choose(k: int | None) -> int | None:
    """``k`` 0 is an omitted k, as ``facet cluster --k 0`` and the UI's k box (0 by default)
    read it: the API refused it ("k: Input should be greater than or equal to 2") though
    omitting k already chose it. 1 or a negative k is still refused, saying how to choose."""
    if not k:
        return None
    if k < 2:
        raise PydanticCustomError(
            "k_too_small", "must be at least 2, got {k}; 0 or omit k to choose it by silhouette",
            {"k": k})
    return k


# Checked by ``_k_or_choose`` (a ``ge`` would refuse 0 in pydantic's words); the schema says it:
# 0, or 2 and more.
ClusterK = Annotated[
    Annotated[int, WithJsonSchema({"anyOf": [{"type": "integer", "const": 0},
                                             {"type": "integer", "minimum": 2}]})] | None,
    AfterValidator(_k_or_choose),
    Field(description="number of clusters, at least 2; 0 or omitted: chosen by silhouette, up to "
                      "max_k"),
]


class ClusterSearch(_Body):
    """The search whose results ``POST /cluster`` groups."""

    query: SearchQuery
    collection: CollectionName
    instruction: SearchInstruction | None = None
    k: int = Field(default=SEARCH_RESULTS_CLUSTERED, ge=2, le=MAX_TOP_K)
    filters: Filters = Field(default_factory=dict)
    embedder: str | None = None
    # POST /search's mode (its type and default): until 2026-12-01 none, every search ``auto``.
    mode: SearchMode = Field(default="auto", description=_MODE_DESCRIPTION)


class ClusterBody(_Body):
    """``POST /cluster``: exactly one of ``texts``, ``collection`` or ``search``."""

    instruction: NotBlank
    # At least 2 texts (the service's check); their maxItems (FACET_MAX_CLUSTER_TEXTS, a
    # setting) is the served app's (``server._openapi``).
    texts: Annotated[list[NotBlank], Field(json_schema_extra={"minItems": 2})] | None = None
    collection: CollectionName | None = None
    filters: Filters = Field(default_factory=dict)
    limit: int | None = Field(default=None, ge=2)
    search: ClusterSearch | None = None
    k: ClusterK = None
    max_k: int = Field(default=10, ge=2, le=MAX_K)
    embedder: str | None = None
    # "" (or blank) is none, as the CLI's `--explain ''`: it was a 404 "explainer '' is not
    # served here".
    explainer: Annotated[str | None, AfterValidator(lambda v: v if v is None or v.strip() else None)] = None
    keywords: int = Field(default=5, ge=1, le=50)
    members: int = Field(default=3, ge=1, le=50)
    answer_tokens: int | None = Field(default=None, ge=1, le=64)
    seed: int = Field(default=0, ge=0, le=MAX_SEED)


class JobBody(_Body):
    """``POST /jobs``: index a server-side path into a collection in the background."""

    source: NotBlank
    collection: CollectionName
    embedder: str | None = None
    sync: bool | None = Field(default=None, description="remove documents gone from the source; "
                                                        "default: yes for a folder, no for a file")
    chunk_tokens: int | None = Field(default=None, ge=1, le=MAX_CHUNK_TOKENS)
    chunk_overlap: int | None = Field(default=None, ge=0, le=MAX_CHUNK_TOKENS)
    text_column: str | None = Field(default=None, min_length=1,
                                    description="the csv column / jsonl field holding the text")


class CancelBody(_Body):
    """``POST /jobs/{job_id}/cancel``'s optional body; ``collection`` may be given as a query
    parameter instead (a body was ignored, unknown fields and all)."""

    collection: CollectionName | None = Field(
        default=None, description="the collection the job must be of: a job of another one is "
                                  "refused (400), as for GET /jobs/{job_id}")


class _Query(BaseModel):
    """A route's query parameters. Unknown ones are refused for every route in one place, from
    the parameters the route declares (``server._known_query``), not by each model."""


class JobListQuery(_Query):
    """``GET /jobs``. ``limit``'s bounds are the facade's check (its message names them), only
    declared here."""

    collection: CollectionName | None = Field(default=None,
                                              description="only this collection's jobs")
    limit: QueryInt = Field(default=20, json_schema_extra={"minimum": 1, "maximum": MAX_JOBS_LISTED})
    # Checked by the route (a 400 naming it), only declared here.
    offset: QueryInt = Field(
        default=0, json_schema_extra={"minimum": 0},
        description="skip the newest `offset` jobs (below `before` where it is given): past "
                    "the end, an empty list. Only the first page (0, no `before`) also lists "
                    "the older jobs that have not ended")
    # (Its limit inside the integer's branch, where generated clients read it: beside the
    # anyOf it was missed.)
    before: Annotated[QueryInt, WithJsonSchema({"type": "integer", "minimum": 1})] | None = Field(
        default=None,
        description="only the jobs whose id is below this one: the `Link` header's next page is "
                    "`before` the id of this page's last job of its newest `limit` (a keyset "
                    "page, which jobs sent or deleted while paging do not shift)")


class JobQuery(_Query):
    """``GET /jobs/{job_id}``."""

    collection: CollectionName | None = Field(
        default=None, description="the collection the job must be of: a job of another one is "
                                  "refused (400), as `facet jobs ID -c NAME` refuses it")
    # Its bounds are checked by the route (its message names them and the parameter), only
    # declared here.
    errors: QueryInt = Field(
        default=DEFAULT_JOB_ERRORS, json_schema_extra={"minimum": 0, "maximum": MAX_JOB_ERRORS},
        description="how many of the job's per-document errors to return (the first ones "
                    "after `errors_offset`); `errors_total` counts them all")
    errors_offset: QueryInt = Field(
        default=0, json_schema_extra={"minimum": 0},
        description="skip the job's first `errors_offset` per-document errors (in the order "
                    "written): the next page is `errors_offset` + `errors`, up to "
                    "`errors_total` (past it: no errors); a removal's `removed_keys` are "
                    "paged the same way (it has no errors)")


class DocumentListQuery(_Query):
    """``GET /collections/{name}/documents``. ``limit``'s and ``offset``'s bounds are the
    route's checks (a 400 naming them), only declared here."""

    limit: QueryInt = Field(default=20, json_schema_extra={"minimum": 1,
                                                           "maximum": MAX_DOCUMENTS_LISTED})
    offset: QueryInt = Field(
        default=0, json_schema_extra={"minimum": 0},
        description="skip the first `offset` documents (in key order; after `after` where it "
                    "is given): past the end, an empty list")
    after: str | None = Field(
        default=None, description="only the documents whose key sorts after this one: the "
                                  "`Link` header's next page is `after` this page's last key "
                                  "(a keyset page, which documents indexed or removed while "
                                  "paging do not shift), until a page comes without one")
    status: DocumentStatus | None = Field(
        default=None, description="only the documents of this status: `indexed`, `error` "
                                  "(could not be indexed; `error` says why) or `pending`")
    prefix: str | None = Field(
        default=None, description="only the documents whose key, or the file they were read "
                                  "from (`source`), starts with this (a folder's path, a "
                                  "csv/jsonl file's path, a record id's start; case kept, no "
                                  "wildcards)")


# --------------------------------------------------------------------------- responses


class ErrorDetail(BaseModel):
    """What went wrong (OpenAI's error object)."""

    message: str = Field(description="what was wrong and how to fix it")
    type: str = Field(description="invalid_request_error, authentication_error, permission_error "
                                  "(403), not_found_error, conflict_error, rate_limit_error or "
                                  "server_error")
    param: str | None = Field(description="the request field at fault, where there is one")
    # Every code the server answers (``errors.STATUS``, ``errors._NOT_FOUND_*``,
    # ``errors._HTTP_CODES``, the removal route's document_not_found).
    code: str | None = Field(description="what went wrong, for a client to switch on: "
                                         "collection_not_found, job_not_found, source_not_found, "
                                         "document_not_found, route_not_found, model_not_found "
                                         "(404), method_not_allowed (405), invalid_api_key (401), "
                                         "cross_site_request (403), untrusted_host (400), "
                                         "request_too_large (413), unreadable_data (422), busy "
                                         "(429), unavailable (503) or model_error (500); else "
                                         "null")


class ErrorResponse(BaseModel):
    """Every 4xx/5xx body: ``{"error": {"message", "type", "param", "code"}}``."""

    error: ErrorDetail


class Embedding(BaseModel):
    object: Literal["embedding"]
    index: int
    embedding: list[float] | str = Field(
        description="floats, or with encoding_format=base64 their little-endian float32 bytes "
                    "in base64")


class Usage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class EmbeddingsResponse(BaseModel):
    """``POST /v1/embeddings``: OpenAI's shape."""

    object: Literal["list"]
    data: list[Embedding]
    model: str = Field(description="the model as requested, options included")
    usage: Usage


class ModelInfo(BaseModel):
    """One model ``model`` may name (OpenAI's model object)."""

    id: str
    object: Literal["model"]
    created: int = Field(description="Unix time this server started (Facet records no creation "
                                     "time for a model)")
    owned_by: str


class ModelList(BaseModel):
    """``GET /v1/models``."""

    object: Literal["list"]
    data: list[ModelInfo]


class Health(BaseModel):
    status: Literal["ok"]


class ReadinessChecks(BaseModel):
    """Each check of ``GET /ready``: ``"ok"``, or why it failed (one line, passwords masked)."""

    database: str = Field(description="the metadata database answers SELECT 1 (SQLite: its data "
                                      "folder can be written)")
    store: str = Field(description="the vector store answers (embedded: its folder can be "
                                   "written; a Qdrant server: it takes a connection)")
    broker: str = Field(description="the broker answers a ping; \"not configured\" where "
                                    "FACET_BROKER_URL is unset")
    query_workers: str = Field(description="where FACET_ENCODE_ON_WORKERS sends queries to the "
                                           "workers, one consumes the 'query' queue; \"not "
                                           "configured\" otherwise")


class Readiness(BaseModel):
    """``GET /ready``'s body, 200 and 503 alike (``Facet.readiness``)."""

    status: Literal["ready", "not ready"]
    checks: ReadinessChecks


@dataclass(kw_only=True)
class SearchHit(SearchResult):
    """A ``POST /search`` result: the service's ``SearchResult`` and its point id, so that an
    HTTP client can name the chunk as the LangChain adapter's ``Document.id`` does."""

    id: Annotated[str, Field(description="the chunk's point id in the vector store "
                                         "(indexer.store.point_id of doc_id and chunk_no)")]


@dataclass
class SearchAnswer(SearchResponse):
    """``POST /search``: the service's ``SearchResponse``, each result with its point id."""

    # Only declared (the route renders the service's response, adding each id): a list of the
    # subclass where the base has a list of SearchResult, which mypy's invariance refuses.
    results: list[SearchHit]  # type: ignore[assignment]
    # The mode that ran, as an enum in /openapi.json (the service's is a str): never "auto".
    mode: Literal["dense", "hybrid", "lexical"] = "dense"


@dataclass
class ListedCollection(CollectionInfo):
    """A ``GET /collections`` entry, and ``GET /collections/{name}``'s answer: the service's
    ``CollectionInfo``, and whether it is a "stray", as ``facet collections --json`` marks it."""

    stray: Annotated[bool, Field(description=(
        "true for vectors the embedded store holds under this name that no collection of this "
        "metadata database owns (that database, facet.db or the one FACET_DATABASE_URL names, "
        "lost or restored from another copy than qdrant-edge/, or another database's): only "
        "name, backend, points and disk_bytes are known, the counts "
        "are 0; `facet delete NAME` (the facade's delete_collection) removes them. Never true for "
        "a Qdrant server's collections, which may be other applications'"))] = False


class RemovedDocument(BaseModel):
    """One document ``DELETE /collections/{name}/documents`` removed."""

    key: str = Field(description="its key, as search results (`doc_id`) and job errors name it: "
                                 "a file's path, a record's id")
    source: str = Field(description="the file it was read from (a record's jsonl/csv file)")
    status: Literal["indexed", "error", "pending"] = Field(
        description="what it was: indexed, error (a failed document's entry) or pending")
    chunks: int = Field(description="the chunks (store points) removed with it")
    source_exists: bool = Field(
        description="its file is still there on the server: the next index job of that file, or "
                    "of a folder holding it, adds the document back unless it is deleted there")
    source_deleted: bool = Field(
        description="its file was an upload staged in the collection's upload folder on the "
                    "server (DATA_DIR/uploads/NAME, which every upload job indexes whole) and "
                    "was deleted with it (source_exists is then false); a file anywhere else is "
                    "never touched")


class UploadAnswer(BaseModel):
    """``POST /collections/{name}/uploads``'s answer (the facade's ``UploadResult``)."""

    job: JobInfo = Field(description="the queued job that indexes the collection's upload folder "
                                     "(GET /jobs/{id}, the Location header)")
    refused: list[str] = Field(description="each file not taken, with why: a type the indexer "
                                           "does not read, over the size limit")
    renamed: list[str] = Field(description="each file saved under another name, as another file "
                                           "of this upload has its name")
    removed: list[str] = Field(description="files an earlier upload job could not index at all "
                                           "(binary, empty, malformed), removed from the upload "
                                           "folder before this job")
    staged: list[str] = Field(description="where each file taken was saved on the server: a "
                                          "file's document key (GET/DELETE "
                                          "/collections/{name}/documents take it); a .jsonl or "
                                          ".csv file's records are keyed by their ids, or "
                                          "PATH#L<line> / PATH#row<n>")


class RemovedDocuments(BaseModel):
    """``DELETE /collections/{name}/documents``'s answer (the facade's ``RemoveReport``)."""

    job_id: int = Field(description="the job recording the removal (GET /jobs/{job_id}: source "
                                    "'remove: KEY', docs_deleted counting them); 0 where no job "
                                    "was made: with missing_ok, no key named a document")
    collection: str
    removed: list[RemovedDocument] = Field(description="each document removed, in the order "
                                                       "the keys were given")
    docs_deleted: int
    chunks_deleted: int
    elapsed_s: float
    skipped_keys: list[str] = Field(
        default_factory=list,
        description="with missing_ok, the keys (as given) that named no document of the "
                    "collection (removed already, or never there), skipped instead of refused; "
                    "empty without it")
