"""Errors raised by the indexer. The app layer maps them onto its domain errors."""

from __future__ import annotations


class IndexerError(Exception):
    """Base class for indexer failures."""


class SourceNotFoundError(IndexerError):
    """The path to index does not exist."""


class UnsupportedSourceError(IndexerError):
    """A single file was given whose type the parsers do not know."""


class StoreError(IndexerError):
    """The vector store refused an operation (missing collection, wrong size, locked folder).

    ``param``: the request field the refusal is about, where it is one (a filter the store
    cannot match: ``filters``); the application's domain error carries it on.
    """

    def __init__(self, *args: object, param: str | None = None) -> None:
        super().__init__(*args)
        self.param = param


class CollectionNotFoundError(StoreError):
    """A collection does not exist in the vector store."""


class StoreBusyError(StoreError):
    """An embedded store's collection is open in another process (its folder takes one).

    Attributes:
        collection: the collection.
        holder: what the other process wrote in the lock file (pid, host), if readable.
    """

    def __init__(self, message: str, collection: str, holder: dict[str, object] | None = None
                 ) -> None:
        super().__init__(message)
        self.collection = collection
        self.holder = holder or {}


class StoreUnavailableError(StoreError):
    """The vector store cannot serve now: a server out of reach (down, wrong URL, network), or an
    embedded store's folder that cannot be written (a read-only mount); may be transient."""
