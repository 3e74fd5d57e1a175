"""Vectors of the data folder's own facet.db seen under another metadata database
(FACET_DATABASE_URL: a laptop's folder moved to PostgreSQL): listed as owned by facet.db, not as
strays to delete; `facet delete` refuses them unless --force; `facet serve` warns at start. A
collection of the embedded store listed under FACET_QDRANT_URL says the store in use lacks it,
not that its folder is missing. Real PostgreSQL 15 (test_postgres's cluster), SQLite, Qdrant
edge, the Qdrant stand-in, minilm; two-document corpora."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from unittest import mock

import pytest

from app.errors import ConflictError
from app.services.collections import FOLDER_DATABASE, CollectionService, unowned_store_collections
from app.services.indexing import IndexService
from app.settings import FacetSettings
from indexer import metadata as md
from tests.app.cli_runner import invoke_cli
from tests.app.services.test_postgres import Cluster, postgres  # noqa: F401 (the fixture)
from tests.app.web_stub import serving
from tests.worker import qdrant_standin

from .conftest import write_corpus

OWNED = ("the vectors of 'cars' belong to collection 'cars' of facet.db in this data folder: "
         "unset FACET_DATABASE_URL to use or delete it, or unset it and run `facet "
         "move-metadata --to URL` to move that database (docs/deploy.md)")
# What `facet index`, `facet search` and `facet cluster` say of such a name (they advised
# deleting it, which `facet delete` refuses; move-metadata refuses while the URL is set).
OWNED_NAME = ("'cars' is a collection of facet.db in this data folder: unset FACET_DATABASE_URL "
              "to use it, or unset it and run `facet move-metadata --to URL` to move that "
              "database")


@pytest.fixture
def laptop(make_ctx, tmp_path: Path) -> Path:
    """A data folder whose facet.db records 'cars' (2 documents), and the store also holds
    'bikes', which facet.db does not record (a true stray); nothing left open."""
    ctx = make_ctx()
    for name in ("cars", "bikes"):
        write_corpus(tmp_path / name, 2)
        IndexService(ctx).index(tmp_path / name, name)
    with ctx.sessions() as session:
        md.delete_collection(session, md.get_collection(session, "bikes"))
        session.commit()
    ctx.close()
    return tmp_path / "data"


def test_laptop_collections_under_postgres_are_owned_and_not_deleted(
        make_ctx, laptop: Path, postgres: Cluster) -> None:  # noqa: F811
    pg = make_ctx(database_url=postgres.url)
    catalog = CollectionService(pg)
    # Refused first: it deleted the laptop's vectors (the stray's advice).
    with pytest.raises(ConflictError) as refused:
        catalog.delete("cars")
    assert str(refused.value) == OWNED
    strays = {i.name: i for i in catalog.strays()}
    assert sorted(strays) == ["bikes", "cars"]
    assert strays["cars"].owner == FOLDER_DATABASE, strays["cars"]
    assert strays["bikes"].owner is None  # facet.db does not record it: a stray as before
    assert catalog.orphan("cars").owner == FOLDER_DATABASE
    assert pg.store.count("cars") > 0  # the laptop's vectors are still there
    pg.store.release("cars")
    # `facet serve`'s warning at start: how many, and that facet.db records them.
    said = unowned_store_collections(pg.settings)
    assert said is not None and "holds 2 collections (bikes, cars)" in said, said
    assert f"{FOLDER_DATABASE} records 1 of them" in said, said
    # A stray facet.db does not record is deleted as before; --force (deleting_owned) deletes
    # the owned one.
    catalog.delete("bikes")
    with catalog.deleting_owned("cars"):
        catalog.delete("cars")
    assert catalog.strays() == []


def _facet(data: Path, url: str, *args: str):
    return invoke_cli(*args, env={"FACET_DATA_DIR": str(data), "FACET_DATABASE_URL": url,
                                  "OMP_NUM_THREADS": "1"})


def test_the_cli_lists_and_refuses_them_under_postgres(laptop: Path,
                                                       postgres: Cluster) -> None:  # noqa: F811
    listed = _facet(laptop, postgres.url, "collections")
    assert listed.returncode == 0, listed.stderr
    [cars] = [line for line in listed.stdout.splitlines() if line.startswith("cars:")]
    assert "of collection 'cars' of facet.db in this data folder" in cars, cars
    assert "facet delete" not in cars and "facet move-metadata --to URL" in cars, cars
    [bikes] = [line for line in listed.stdout.splitlines() if line.startswith("bikes:")]
    assert "`facet delete bikes` removes them" in bikes, bikes
    # Strays first, in name order (docs/cli.md).
    assert listed.stdout.splitlines()[:2] == [bikes, cars]
    import json

    entries = json.loads(_facet(laptop, postgres.url, "collections", "--json").stdout)
    assert {e["name"]: e["owner"] for e in entries} == {"bikes": None, "cars": FOLDER_DATABASE}
    refused = _facet(laptop, postgres.url, "delete", "cars", "-y")
    assert (refused.returncode, refused.stderr.strip()) == (5, f"error: {OWNED}"), refused
    assert _facet(laptop, postgres.url, "collections", "cars", "--json").returncode == 0
    forced = _facet(laptop, postgres.url, "delete", "cars", "-y", "--force")
    assert forced.returncode == 0, forced.stderr
    assert "of collection 'cars' of facet.db in this data folder" in forced.stdout, forced.stdout
    assert not (laptop / "qdrant-edge" / "cars").exists()


def test_an_unreadable_folder_database_is_said_and_refuses(make_ctx, laptop: Path,
                                                           tmp_path: Path) -> None:
    for name in ("facet.db", "facet.db-wal", "facet.db-shm"):
        (laptop / name).unlink(missing_ok=True)
    (laptop / "facet.db").write_bytes(b"not a database, garbled" * 100)
    other = make_ctx(database_url=f"sqlite:///{tmp_path / 'elsewhere.db'}")
    catalog = CollectionService(other)
    with pytest.raises(ConflictError, match=r"may belong to a collection of facet\.db"):
        catalog.delete("cars")
    [_bikes, cars] = catalog.strays()
    assert cars.owner is not None and cars.owner.startswith(f"{FOLDER_DATABASE} (")
    assert "cannot be read" in cars.owner, cars.owner
    assert other.store.count("cars") > 0


def test_a_url_naming_facet_db_itself_is_no_other_database(laptop: Path) -> None:
    settings = FacetSettings(data_dir=laptop, database_url=f"sqlite:///{laptop / 'facet.db'}")
    assert unowned_store_collections(settings) is not None  # 'bikes' is unrecorded there
    assert "records" not in (unowned_store_collections(settings) or "")


def test_serve_warns_at_start_of_collections_its_database_does_not_own(
        laptop: Path, postgres: Cluster, caplog) -> None:  # noqa: F811
    """`facet serve` itself (uvicorn not started): one warning line at start."""
    from tests.app.served import free_port

    with mock.patch("uvicorn.run") as run, caplog.at_level(logging.WARNING):
        done = invoke_cli("serve", "--port", str(free_port()), "--preload", "",
                          env={"FACET_DATA_DIR": str(laptop), "FACET_DATABASE_URL": postgres.url,
                               "FACET_UI_MOUNT": "false"})
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert run.called
    [line] = [r.getMessage() for r in caplog.records if "does not record" in r.getMessage()]
    assert "2 collections (bikes, cars)" in line and "records 1 of them" in line, line


def test_an_edge_collection_under_a_qdrant_url_says_the_server_lacks_it(make_ctx,
                                                                       tmp_path: Path) -> None:
    laptop = make_ctx()
    write_corpus(tmp_path / "src", 2)
    IndexService(laptop).index(tmp_path / "src", "owner_edge_only")
    laptop.close()
    assert (tmp_path / "data" / "qdrant-edge" / "owner_edge_only").is_dir()
    with serving(qdrant_standin._Handler) as url:
        served = make_ctx(qdrant_url=url)
        [info] = [i for i in CollectionService(served).list_all() if i.name == "owner_edge_only"]
    note = info.store_note or ""
    assert "is missing" not in note, note
    assert "indexed into the embedded store (qdrant-edge/owner_edge_only)" in note, note
    assert "FACET_QDRANT_URL points at a Qdrant server that does not hold it" in note, note
    assert "unset FACET_QDRANT_URL" in note, note
    assert info.store_missing and info.store_in_use == "server" and info.backend == "edge"
    assert os.path.isdir(tmp_path / "data" / "qdrant-edge" / "owner_edge_only")


def test_index_search_and_cluster_name_the_owner_and_cluster_refuses_strays(
        make_ctx, laptop: Path, tmp_path: Path, postgres: Cluster) -> None:  # noqa: F811
    """Under FACET_DATABASE_URL, a name the data folder's facet.db records: indexing said
    "delete 'cars' (which removes those vectors) and index again", search "delete 'cars' to
    remove them", though delete refuses; cluster clustered the vectors' texts while search
    called the name unknown. A true stray ('bikes') is refused by cluster as by search."""
    from app.errors import NotFoundError
    from app.services.clustering import ClusterRequest, ClusterService
    from app.services.search import SearchRequest, SearchService

    pg = make_ctx(database_url=postgres.url)
    with pytest.raises(ConflictError) as indexing:
        IndexService(pg).index(tmp_path / "cars", "cars")
    assert OWNED_NAME in str(indexing.value) and "delete" not in str(indexing.value)
    with pytest.raises(NotFoundError) as searching:
        SearchService(pg).search(SearchRequest("a car", "cars"))
    assert OWNED_NAME in str(searching.value) and "delete" not in str(searching.value)
    clusters = ClusterService(pg)
    with pytest.raises(NotFoundError) as clustering:
        clusters.cluster(ClusterRequest("What?", collection="cars", k=2, embedder="minilm"))
    assert str(clustering.value) == str(searching.value)
    with pytest.raises(NotFoundError) as stray:
        clusters.cluster(ClusterRequest("What?", collection="bikes", k=2, embedder="minilm"))
    assert "unknown collection 'bikes'" in str(stray.value)
    assert "delete 'bikes' to remove them" in str(stray.value)
