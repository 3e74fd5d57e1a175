"""Request bodies of the HTTP API (pydantic). Unknown fields are refused, so a misspelt
option is a 400 that names it instead of being ignored."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.services.clustering import MAX_SEED
from app.services.search import MAX_TOP_K, SearchMode
from indexer.chunking import MAX_CHUNK_TOKENS

Filters = dict[str, str | int | float | bool | list[str | int | float | bool]]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EmbeddingsBody(_Body):
    """``POST /v1/embeddings``: OpenAI's request plus ``instruction`` and ``role``.

    ``input`` is checked by hand (not typed ``str | list[str]``) so that a wrong item is
    answered with its index and what it is, and token-id arrays with why they are refused.
    """

    input: Any
    model: str
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = None
    user: str | None = None
    instruction: str | None = None
    role: Literal["query", "document"] = "document"


class SearchBody(_Body):
    """``POST /search``."""

    query: str
    collection: str
    instruction: str | None = None
    k: int = Field(default=10, ge=1, le=MAX_TOP_K)
    filters: Filters = Field(default_factory=dict)
    rerank: str | None = None
    rerank_depth: int | None = Field(default=None, ge=1, le=MAX_TOP_K)
    embedder: str | None = None
    score_threshold: float | None = None
    exact: bool = False
    group_by_document: bool = Field(
        default=True, description="one result per document (its best chunk, the others' numbers "
                                  "in more_chunks); false: one result per chunk")
    mode: SearchMode = Field(
        default="auto", description="auto: hybrid without an instruction or score_threshold where "
                                    "the collection keeps term vectors, else dense; dense: the embedder's "
                                    "nearest chunks; lexical: BM25 over the chunks' words; hybrid: "
                                    "both, fused by reciprocal rank. The response's mode is the one "
                                    "that ran")


class ClusterSearch(_Body):
    """The search whose results ``POST /cluster`` groups."""

    query: str
    collection: str
    instruction: str | None = None
    k: int = Field(default=100, ge=2, le=MAX_TOP_K)
    filters: Filters = Field(default_factory=dict)
    embedder: str | None = None


class ClusterBody(_Body):
    """``POST /cluster``: exactly one of ``texts``, ``collection`` or ``search``."""

    instruction: str
    texts: list[str] | None = None
    collection: str | None = None
    filters: Filters = Field(default_factory=dict)
    limit: int | None = Field(default=None, ge=2)
    search: ClusterSearch | None = None
    k: int | None = Field(default=None, ge=2)
    max_k: int = Field(default=10, ge=2, le=50)
    embedder: str | None = None
    explainer: str | None = None
    keywords: int = Field(default=5, ge=1, le=50)
    members: int = Field(default=3, ge=1, le=50)
    answer_tokens: int | None = Field(default=None, ge=1, le=64)
    seed: int = Field(default=0, ge=0, le=MAX_SEED)


class JobBody(_Body):
    """``POST /jobs``: index a server-side path into a collection in the background."""

    source: str
    collection: str
    embedder: str | None = None
    sync: bool | None = Field(default=None, description="remove documents gone from the source; "
                                                        "default: yes for a folder, no for a file")
    chunk_tokens: int | None = Field(default=None, ge=1, le=MAX_CHUNK_TOKENS)
    chunk_overlap: int | None = Field(default=None, ge=0, le=MAX_CHUNK_TOKENS)
    text_column: str | None = Field(default=None, min_length=1,
                                    description="the csv column / jsonl field holding the text")
