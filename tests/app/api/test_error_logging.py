"""What the HTTP edge answers and logs for the operator, never with a secret in it.

Before: a ``FACET_QDRANT_URL`` with credentials came back whole in a 503's body and in the
``ERROR app.api.errors: request failed: ...`` line; a collection whose store files no longer
parse was a 400 ``invalid_request_error`` ("another process may hold it") and logged nothing;
only 5xx answers were logged, without method, path or collection (a 429 for a database lock held
the whole wait, a wrong API key: nothing). Real parts: a served Facet over a temp data folder
(``serving_facet``, the session's minilm), a port nothing listens on, a real edge shard.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.api import create_app
from app.errors import BusyError, DataError, FacetError, UnavailableError, as_domain_error
from app.settings import FacetSettings
from tests.app.api.conftest import serving_facet

LOGGER = "app.api.errors"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER]


def test_an_unreachable_qdrant_url_is_masked_in_the_body_and_the_log(tmp_path: Path, caplog) -> None:
    from app.core import Facet

    url = f"http://admin:PWsecret@127.0.0.1:{_closed_port()}/?api_key=KEYsecret"
    facet = Facet.for_serving(FacetSettings(data_dir=tmp_path / "data", qdrant_url=url,
                                            ui_mount=False))
    try:
        with TestClient(create_app(facet)) as client:
            caplog.set_level(logging.INFO, logger=LOGGER)
            answer = client.get("/collections")
            ready = client.get("/ready")
    finally:
        facet.close()
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["code"] == "unavailable"
    for text in (answer.text, ready.text, caplog.text):
        assert "PWsecret" not in text and "KEYsecret" not in text, text
    assert "admin:***@127.0.0.1" in answer.json()["error"]["message"]
    assert "api_key=***" in answer.json()["error"]["message"]
    assert ready.status_code == 503 and "admin:***@" in ready.json()["checks"]["store"]
    [line] = _lines(caplog)
    assert line.levelno == logging.WARNING, line  # unavailable: the operator's, not a bug
    assert line.getMessage().startswith("GET /collections answered 503 (unavailable): cannot reach "
                                        "Qdrant at http://admin:***@"), line.getMessage()


def test_a_damaged_collection_is_unreadable_data_and_logged(minilm, tmp_path: Path, caplog) -> None:
    data = tmp_path / "data"
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.txt").write_text("Cats purr when they are happy.")
    first = serving_facet(data, minilm, ui_mount=False)
    try:
        first.index(notes, "c3")
    finally:
        first.close()  # lets the shard go: the next process reads its files again
    config = data / "qdrant-edge" / "c3" / "edge_config.json"
    config.write_text("{garbage\n")
    facet = serving_facet(data, minilm, ui_mount=False)
    try:
        with TestClient(create_app(facet)) as client:
            caplog.set_level(logging.INFO, logger=LOGGER)
            answer = client.post("/search", json={"query": "cats", "collection": "c3"})
    finally:
        facet.close()
    error = answer.json()["error"]
    assert answer.status_code == 422, answer.text
    assert error["code"] == "unreadable_data", error
    assert f"{config} is damaged (key must be a string" in error["message"], error
    assert "another process" not in error["message"], error
    [line] = _lines(caplog)
    assert line.levelno == logging.WARNING, line
    assert line.getMessage().startswith("POST /search answered 422 (unreadable_data): collection "
                                        "'c3': the vector store's files cannot be read"), line.getMessage()


def test_a_damaged_store_error_is_a_data_error() -> None:
    from indexer.errors import StoreDamagedError

    domain = as_domain_error(StoreDamagedError("collection 'c': ... is damaged", "c", "/x"))
    assert isinstance(domain, DataError), domain


def test_a_wrong_key_is_logged_once_with_the_client_never_the_key(minilm, tmp_path: Path,
                                                                   caplog) -> None:
    facet = serving_facet(tmp_path / "data", minilm, api_key="RIGHTkey1", ui_mount=False)
    try:
        with TestClient(create_app(facet)) as client:
            caplog.set_level(logging.DEBUG, logger=LOGGER)
            answer = client.get("/collections", headers={"Authorization": "Bearer WRONGkey2"})
    finally:
        facet.close()
    assert answer.status_code == 401, answer.text
    assert "WRONGkey2" not in caplog.text and "RIGHTkey1" not in caplog.text, caplog.text
    [line] = _lines(caplog)
    # INFO: the WARNING is the server's, once a minute per client (test_refused_keys_logged).
    assert line.levelno == logging.INFO, line
    assert line.getMessage() == ("GET /collections answered 401 (missing or wrong API key) to "
                                 "client testclient"), line.getMessage()


# The error the probe route raises (``probed``).
_RAISE: dict[str, FacetError] = {}


@pytest.fixture(scope="module")
def probed(minilm, tmp_path_factory) -> Iterator[TestClient]:
    """A served Facet (no UI, nothing indexed) with one more route, raising ``_RAISE["error"]``
    through the real handlers of ``create_app``."""
    facet = serving_facet(tmp_path_factory.mktemp("logging") / "data", minilm, ui_mount=False)
    app = create_app(facet)

    def failing() -> None:
        raise _RAISE["error"]

    app.add_api_route("/collections/{name}/probe", failing, methods=["POST"])
    try:
        with TestClient(app) as client:
            yield client
    finally:
        facet.close()


@pytest.mark.parametrize(("error", "status", "level"), [
    (BusyError("the metadata database (SQLite) stayed locked by another process's write for "
               "the whole wait (30 s); try again when it is done", retry_after_s=5.0),
     429, logging.WARNING),
    (UnavailableError("no worker answered on the 'query' queue"), 503, logging.WARNING),
    (FacetError("the metadata database at postgresql://facet:PWsecret@db/facet broke"), 500,
     logging.ERROR),
])
def test_busy_unavailable_and_failed_answers_are_logged_with_method_and_path(
        probed, error: FacetError, status: int, level: int, caplog) -> None:
    _RAISE["error"] = error
    caplog.set_level(logging.INFO, logger=LOGGER)
    answer = probed.post("/collections/bank/probe")
    assert answer.status_code == status, answer.text
    [line] = _lines(caplog)
    assert line.levelno == level, line
    said = line.getMessage()
    assert said.startswith(f"POST /collections/bank/probe answered {status}"), said
    assert "collection 'bank'" in said, said
    assert "PWsecret" not in said and "PWsecret" not in answer.text, (said, answer.text)


def test_a_client_mistake_is_logged_at_info_only(probed, caplog) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    answer = probed.post("/search", json={"query": " ", "collection": "bank"})
    assert answer.status_code == 400, answer.text
    [line] = _lines(caplog)
    assert line.levelno == logging.INFO, line
    assert line.getMessage().startswith("POST /search answered 400: "), line.getMessage()


def test_a_body_over_the_limit_is_logged_as_every_error_answer(minilm, tmp_path: Path, caplog) -> None:
    """A 413 from the body-size check answered before any route, and no line said so (docs/api.md:
    every error answer is logged)."""
    facet = serving_facet(tmp_path / "data", minilm, api_max_body_mb=0.01)
    try:
        with TestClient(create_app(facet)) as client:
            caplog.set_level(logging.INFO, logger=LOGGER)
            r = client.post("/v1/embeddings", content=b" " * 20_000,
                            headers={"content-type": "application/json"})
    finally:
        facet.close()
    assert r.status_code == 413, r.text
    [line] = _lines(caplog)
    assert line.getMessage().startswith("POST /v1/embeddings answered 413 (request_too_large): "
                                         "the request body is 20000 bytes"), line.getMessage()
