"""A served Facet over a temp data folder holding the bundled BANKING77 sample, sharing the
session's minilm; the FastAPI app runs in process (TestClient) over it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.api import create_app
from app.commands.demo import SAMPLE_FILE
from app.core import Facet
from app.encoding import EmbedderCache
from app.settings import FacetSettings

COLLECTION = "bank"


def make_stray(facet: Facet, name: str) -> None:
    """Collection ``name`` made a stray: its record gone (facet.db lost, or restored from another
    copy), its vectors kept, and the store not holding it (as after a restart)."""
    from indexer import metadata as md

    with facet.catalog.ctx.sessions() as session:
        md.delete_collection(session, md.get_collection(session, name))
        session.commit()
    facet.catalog.store.release(name)


def serving_facet(data_dir: Path, minilm, **settings) -> Facet:
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    return Facet.for_serving(FacetSettings(data_dir=data_dir, **settings), embedders=cache)


@pytest.fixture(scope="module")
def facet(minilm, tmp_path_factory) -> Iterator[Facet]:
    facet = serving_facet(tmp_path_factory.mktemp("api") / "data", minilm)
    facet.index(SAMPLE_FILE, COLLECTION)
    yield facet
    facet.close()


@pytest.fixture(scope="module")
def client(facet) -> Iterator[TestClient]:
    with TestClient(create_app(facet)) as c:
        yield c
