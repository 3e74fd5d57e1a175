"""Ingestion: parsing, token-aware chunking, the vector store (Qdrant) and metadata (SQLAlchemy).

Nothing here imports ``app``; the app services put these pieces together.
"""

from __future__ import annotations

from indexer.chunking import Chunk, ChunkingConfig, chunk_text, tokenizer_spans, whitespace_spans
from indexer.errors import (
    CollectionNotFoundError,
    IndexerError,
    SourceNotFoundError,
    StoreError,
    UnsupportedSourceError,
)
from indexer.parsing import DocumentError, ParsedDocument, discover, parse_file, parse_source
from indexer.store import (
    EdgeStore,
    Hit,
    PointRecord,
    QdrantClientStore,
    VectorStore,
    open_store,
    point_id,
)

__all__ = [
    "Chunk",
    "ChunkingConfig",
    "CollectionNotFoundError",
    "DocumentError",
    "EdgeStore",
    "Hit",
    "IndexerError",
    "ParsedDocument",
    "PointRecord",
    "QdrantClientStore",
    "SourceNotFoundError",
    "StoreError",
    "UnsupportedSourceError",
    "VectorStore",
    "chunk_text",
    "discover",
    "open_store",
    "parse_file",
    "parse_source",
    "point_id",
    "tokenizer_spans",
    "whitespace_spans",
]
