"""A served Facet over a temp data folder holding the bundled BANKING77 sample, sharing the
session's minilm; the FastAPI app runs in process (TestClient) over it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api import create_app
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
def facet(minilm, tmp_path_factory, indexed_sample_copy) -> Iterator[Facet]:
    """Served over this module's own copy of the indexed sample (``SAMPLE_FILE`` as
    ``COLLECTION``, job 1)."""
    facet = serving_facet(indexed_sample_copy(tmp_path_factory.mktemp("api") / "data"), minilm)
    yield facet
    facet.close()


@pytest.fixture(scope="module")
def client(facet) -> Iterator[TestClient]:
    with TestClient(create_app(facet)) as c:
        yield c


def asgi_call(client: TestClient, method: str, path: str, headers: list[tuple[bytes, bytes]],
              receive: Callable[[], Awaitable[Any]]) -> list[dict[str, Any]]:
    """Call ``client``'s app through its raw ASGI interface with ``receive`` (for what a
    TestClient cannot send: a body cut off, a client that disconnects mid-request), from the
    client ``10.1.2.3``; the messages the app sent back."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
             "root_path": "", "client": ("10.1.2.3", 5555), "server": ("testserver", 80),
             "headers": headers, "state": {}}
    sent: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def call() -> None:
        await client.app(scope, receive, send)

    assert client.portal is not None
    client.portal.call(call)
    return sent
