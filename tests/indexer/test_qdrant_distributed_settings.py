"""A Qdrant server's collection layout (FACET_QDRANT_SHARDS, FACET_QDRANT_REPLICATION_FACTOR,
FACET_QDRANT_WRITE_CONSISTENCY): sent in the create-collection request when set, nothing sent
when unset (Qdrant's defaults), refused in one line when not a whole number >= 1, and said once to
do nothing beside the embedded stores. And an API key over http:// is one log line per process,
not qdrant-client's two 3-line UserWarnings per command.

The requests are read as the real qdrant-client sends them to the Qdrant stand-in
(``tests.worker.qdrant_standin``), served in this process."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

import app.settings as settings_module
from app.services.context import ServiceContext
from app.settings import FacetSettings, InvalidSettingError
from indexer import store as store_module
from indexer.store import QdrantClientStore, open_store
from tests.worker import qdrant_standin

LAYOUT_KEYS = ("shard_number", "replication_factor", "write_consistency_factor")
NAME = "layout_c"


class _Seen:
    creates: ClassVar[list[dict[str, Any]]] = []


@pytest.fixture()
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The stand-in on a free port, recording the body of every create-collection request."""
    _Seen.creates = []
    handle = qdrant_standin.handle

    def recording(method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if method == "PUT" and path == f"/collections/{NAME}":
            _Seen.creates.append(body)
        return handle(method, path, body)

    monkeypatch.setattr(qdrant_standin, "handle", recording)
    if qdrant_standin._CLIENT.collection_exists(NAME):
        qdrant_standin._CLIENT.delete_collection(NAME)
    with qdrant_standin.in_process() as url:
        try:
            yield url
        finally:
            if qdrant_standin._CLIENT.collection_exists(NAME):
                qdrant_standin._CLIENT.delete_collection(NAME)


@pytest.fixture(autouse=True)
def _fresh_process_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts as a new process would: no layout pushed, nothing said yet."""
    monkeypatch.setattr(settings_module, "_warned_layout", False, raising=False)
    monkeypatch.setattr(store_module, "_said_insecure", set(), raising=False)
    for name in ("FACET_QDRANT_SHARDS", "FACET_QDRANT_REPLICATION_FACTOR",
                 "FACET_QDRANT_WRITE_CONSISTENCY", "FACET_QDRANT_URL", "FACET_QDRANT_API_KEY",
                 "FACET_VECTOR_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    yield


class _Opened:
    """A ``ServiceContext``'s store, closed with the context."""

    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx

    def ensure_collection(self, name: str, vectors: dict[str, int]) -> None:
        self.ctx.store.ensure_collection(name, vectors)

    def close(self) -> None:
        self.ctx.close()


def _create_through_the_app(url: str, data: Path, **layout: int) -> _Opened:
    """As a command or a worker does it: the store opened by ``ServiceContext`` from the
    settings, then a collection made."""
    opened = _Opened(ServiceContext(FacetSettings(data_dir=data, qdrant_url=url, **layout)))
    opened.ensure_collection(NAME, {"m": 4})
    return opened


def test_the_create_request_carries_the_layout_when_set(server: str, tmp_path: Path) -> None:
    store = _create_through_the_app(server, tmp_path, qdrant_shards=3,
                                    qdrant_replication_factor=2, qdrant_write_consistency=2)
    assert len(_Seen.creates) == 1
    body = _Seen.creates[0]
    assert (body.get("shard_number"), body.get("replication_factor"),
            body.get("write_consistency_factor")) == (3, 2, 2)
    assert body["vectors"]["m"]["size"] == 4  # the vectors as before
    # An existing collection keeps its layout: ensuring it again sends no create.
    store.ensure_collection(NAME, {"m": 4})
    assert len(_Seen.creates) == 1
    store.close()


def test_only_what_is_set_is_sent(server: str, tmp_path: Path) -> None:
    store = _create_through_the_app(server, tmp_path, qdrant_replication_factor=2)
    body = _Seen.creates[0]
    assert body.get("replication_factor") == 2
    assert "shard_number" not in body and "write_consistency_factor" not in body
    store.close()


def test_unset_sends_nothing_qdrant_decides(server: str, tmp_path: Path) -> None:
    store = _create_through_the_app(server, tmp_path)
    assert len(_Seen.creates) == 1
    assert not set(LAYOUT_KEYS) & set(_Seen.creates[0]), _Seen.creates[0]
    store.close()


def test_a_later_facet_without_the_settings_sends_none(server: str, tmp_path: Path) -> None:
    """Each context's store has its settings' layout: another Facet in the process, without
    them, sends none."""
    _create_through_the_app(server, tmp_path, qdrant_shards=2).close()
    qdrant_standin._CLIENT.delete_collection(NAME)
    _create_through_the_app(server, tmp_path).close()
    assert [body.get("shard_number") for body in _Seen.creates] == [2, None]


def test_a_store_given_its_own_layout(server: str) -> None:
    store = QdrantClientStore(url=server, layout={"shard_number": 4})
    store.ensure_collection(NAME, {"m": 4})
    assert _Seen.creates[0].get("shard_number") == 4
    store.close()


@pytest.mark.parametrize("value", ["0", "-1", "abc", "1.5", "2e3"])
@pytest.mark.parametrize("variable", ["FACET_QDRANT_SHARDS", "FACET_QDRANT_REPLICATION_FACTOR",
                                      "FACET_QDRANT_WRITE_CONSISTENCY"])
def test_a_bad_value_is_one_clear_line(variable: str, value: str,
                                       monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(InvalidSettingError) as caught:
        FacetSettings(data_dir=tmp_path)
    said = str(caught.value)
    assert said.startswith(f"{variable}={value!r}: must be a whole number, 1 or more"), said
    assert "\n" not in said


def test_good_values_and_blank(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FACET_QDRANT_SHARDS", " 6 ")
    monkeypatch.setenv("FACET_QDRANT_REPLICATION_FACTOR", "")  # empty: unset, as every setting
    settings = FacetSettings(data_dir=tmp_path, qdrant_url="http://q:6333")
    assert settings.qdrant_shards == 6 and settings.qdrant_replication_factor is None
    assert settings.qdrant_layout() == {"shard_number": 6}


def test_said_once_to_do_nothing_beside_an_embedded_store(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="app.settings")
    settings = FacetSettings(data_dir=tmp_path, qdrant_shards=2, qdrant_write_consistency=1)
    FacetSettings(data_dir=tmp_path, qdrant_shards=2)  # the same process: not again
    said = [r.getMessage() for r in caplog.records if "FACET_QDRANT_SHARDS" in r.getMessage()]
    assert said == ["FACET_QDRANT_SHARDS, FACET_QDRANT_WRITE_CONSISTENCY apply only for "
                    "collections created on a Qdrant server; the embedded store (no "
                    "FACET_QDRANT_URL) ignores them"]
    assert settings.qdrant_layout() == {"shard_number": 2, "write_consistency_factor": 1}
    # The embedded store is given it and creates as before.
    edge = open_store("edge", data_dir=tmp_path, layout=settings.qdrant_layout())
    edge.ensure_collection("e", {"m": 4})
    assert edge.vector_sizes("e") == {"m": 4}
    edge.close()


def test_local_mode_ignores_a_layout(tmp_path: Path) -> None:
    local = QdrantClientStore(path=":memory:", layout={"shard_number": 3, "replication_factor": 2})
    local.ensure_collection("l", {"m": 4})
    assert local.vector_sizes("l") == {"m": 4}
    local.close()


def test_a_server_url_with_the_local_backend_warns_too(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="app.settings")
    FacetSettings(data_dir=tmp_path, qdrant_url="http://q:6333", vector_backend="local",
                  qdrant_replication_factor=2)
    assert any("FACET_QDRANT_REPLICATION_FACTOR applies only" in r.getMessage()
               and "FACET_VECTOR_BACKEND=local" in r.getMessage() for r in caplog.records)


def test_an_api_key_over_http_is_one_log_line_not_warnings(
        server: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="indexer.store")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):  # two commands' worth of clients: each its store's and its probe's
            store = QdrantClientStore(url=server, api_key="s3cret-key")
            store.check_reachable(ask=True)
            store.close()
    insecure = [w for w in caught if "insecure connection" in str(w.message)]
    assert insecure == []
    port = server.rsplit(":", 1)[1]
    lines = [r for r in caplog.records if "FACET_QDRANT_API_KEY" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO
    assert f"127.0.0.1:{port}" in lines[0].getMessage()
    assert "s3cret-key" not in caplog.text


def test_https_or_no_key_says_nothing(server: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="indexer.store")
    QdrantClientStore(url=server).close()
    QdrantClientStore(url="https://127.0.0.1:1", api_key="k").close()
    assert "FACET_QDRANT_API_KEY" not in caplog.text


def test_more_acknowledging_replicas_than_replicas_is_refused(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    monkeypatch.setenv("FACET_QDRANT_REPLICATION_FACTOR", "2")
    monkeypatch.setenv("FACET_QDRANT_WRITE_CONSISTENCY", "3")
    with pytest.raises(InvalidSettingError) as caught:
        FacetSettings(data_dir=tmp_path)
    assert str(caught.value) == (
        "FACET_QDRANT_WRITE_CONSISTENCY='3': must be at most FACET_QDRANT_REPLICATION_FACTOR (2): "
        "a write waits for this many replicas of each shard")
    monkeypatch.setenv("FACET_QDRANT_WRITE_CONSISTENCY", "2")
    assert FacetSettings(data_dir=tmp_path).qdrant_write_consistency == 2
