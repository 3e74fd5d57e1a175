"""Build the dependencies the services share from ``FacetSettings``: store, sessions, embedders."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from app.errors import FacetError, InvalidRequestError
from app.settings import FacetSettings
from indexer.errors import StoreError
from indexer.metadata import make_engine
from indexer.store import VectorStore, open_store

logger = logging.getLogger(__name__)


class EmbedderCache:
    """Loads each embedder once per process (models are large; services share them)."""

    def __init__(self, device: str | None = None) -> None:
        self.device = device
        self._models: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Any:
        from embedders import load_embedder

        with self._lock:
            model = self._models.get(name)
            if model is None:
                model = load_embedder(name, device=self.device)
                self._models[name] = model
                # The same model is reachable by its canonical name too.
                self._models.setdefault(model.name, model)
            return model

    def put(self, name: str, model: Any) -> None:
        """Register an already loaded model (tests share their session fixture this way)."""
        self._models[name] = model
        self._models.setdefault(model.name, model)


class ServiceContext:
    """The store, a session factory and the embedder cache, built from settings.

    One process owns an embedded store folder; close the context to release it.
    """

    def __init__(self, settings: FacetSettings, *, store: VectorStore | None = None,
                 embedders: EmbedderCache | None = None) -> None:
        self.settings = settings
        Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
        try:
            self.engine = make_engine(settings.resolved_database_url)
        except Exception as e:  # driver missing, server down, bad URL
            raise FacetError(f"cannot open the metadata database "
                             f"{settings.resolved_database_url!r}: {e}; check FACET_DATABASE_URL"
                             ) from e
        self.sessions: sessionmaker[Session] = sessionmaker(self.engine, expire_on_commit=False)
        if store is None:
            try:
                store = open_store(settings.vector_backend, data_dir=Path(settings.data_dir),
                                   url=settings.qdrant_url, api_key=settings.qdrant_api_key)
            except StoreError as e:
                raise InvalidRequestError(str(e)) from e
        self.store = store
        self.embedders = embedders or EmbedderCache(settings.device)

    def close(self) -> None:
        self.store.close()
        self.engine.dispose()

    def __enter__(self) -> ServiceContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
