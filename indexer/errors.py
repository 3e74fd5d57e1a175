"""Errors raised by the indexer. The app layer maps them onto its domain errors."""

from __future__ import annotations


class IndexerError(Exception):
    """Base class for indexer failures."""


class SourceNotFoundError(IndexerError):
    """The path to index does not exist."""


class UnsupportedSourceError(IndexerError):
    """A single file was given whose type the parsers do not know."""


class StoreError(IndexerError):
    """The vector store refused an operation (missing collection, wrong size, locked folder)."""


class CollectionNotFoundError(StoreError):
    """A collection does not exist in the vector store."""
