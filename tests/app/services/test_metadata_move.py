"""`facet move-metadata --to URL`: a laptop's SQLite metadata moved into a real PostgreSQL.

Before it there was no way: under FACET_DATABASE_URL the collections were vectors no database
owns ("strays"), and rows copied by hand read well until the first write, which failed on
``index_jobs_pkey`` (PostgreSQL's id sequences were never advanced). One throwaway PostgreSQL
cluster for the module (``postgres``), one database of it per test.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

from app.services.collections import CollectionService
from app.services.indexing import IndexService
from app.services.search import SearchRequest, SearchService
from indexer import metadata as md
from tests.app.cli_runner import invoke_cli

from .conftest import locked_by_another_process, running_job, write_corpus
from .test_postgres import Cluster, postgres  # noqa: F401 (the fixture: a throwaway cluster)

PASSWORD = "s3cret-pw"


def _database(postgres: Cluster, name: str) -> str:  # noqa: F811
    """A new, empty database of the cluster, as a user would give it: ``postgresql://`` with a
    password (the test cluster trusts every connection, so any password opens it)."""
    admin = create_engine(postgres.url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {name}"))
        conn.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    host = postgres.url.split("@", 1)[1].rsplit("/", 1)[0]
    return f"postgresql://facet:{PASSWORD}@{host}/{name}"


def _rows(url: str) -> tuple[int, int]:
    """(collections, index jobs) in the database ``url`` (0, 0 where it has no schema)."""
    engine = create_engine(md.engine_url(url))
    try:
        with engine.connect() as conn:
            if not inspect(conn).has_table("collections"):
                return 0, 0
            return (int(conn.execute(text("SELECT count(*) FROM collections")).scalar_one()),
                    int(conn.execute(text("SELECT count(*) FROM index_jobs")).scalar_one()))
    finally:
        engine.dispose()


def _move(data: Path, url: str, **env: str):
    return invoke_cli("move-metadata", "--to", url, "-y",
                      env={"FACET_DATA_DIR": str(data), **env})


def test_a_laptops_metadata_moves_to_postgres_and_keeps_working(make_ctx, tmp_path, postgres) -> None:  # noqa: F811
    data = tmp_path / "data"
    write_corpus(tmp_path / "a", 3)
    write_corpus(tmp_path / "b", 2)
    write_corpus(tmp_path / "c", 1)
    ctx = make_ctx()
    indexing = IndexService(ctx)
    assert indexing.index(tmp_path / "a", "alpha").state == "completed"
    assert indexing.index(tmp_path / "b", "beta").state == "completed"
    # A deleted collection's job: SQLite never reuses its id, and neither may PostgreSQL.
    gone = indexing.index(tmp_path / "c", "gamma").job_id
    CollectionService(ctx).delete("gamma")
    before = {(c.name, c.documents, c.chunks, c.points) for c in CollectionService(ctx).list_all()}
    query = SearchRequest("football match", "alpha", top_k=3)
    hits = [(h.doc_id, h.chunk_no, round(h.score, 5)) for h in SearchService(ctx).search(query).results]
    ctx.close()

    url = _database(postgres, "moved")
    done = _move(data, url)
    assert done.returncode == 0, done.stderr
    assert PASSWORD not in done.stdout + done.stderr
    assert re.search(r"export FACET_DATABASE_URL=\S*facet:\*\*\*@", done.stdout), done.stdout
    assert "qdrant-edge" in done.stderr and "row counts checked" in done.stderr
    assert not (data / "facet.db").exists()
    assert len(list(data.glob("facet.db.moved-*Z"))) == 1

    jobs = invoke_cli("jobs", env={"FACET_DATA_DIR": str(data), "FACET_DATABASE_URL": url})
    assert jobs.returncode == 0, jobs.stderr
    assert "alpha" in jobs.stdout and "beta" in jobs.stdout

    ctx = make_ctx(database_url=url)
    catalog = CollectionService(ctx)
    assert {(c.name, c.documents, c.chunks, c.points) for c in catalog.list_all()} == before
    assert catalog.strays() == []
    assert [(h.doc_id, h.chunk_no, round(h.score, 5)) for h in SearchService(ctx).search(query).results] == hits
    # A write after the move: its job's id comes from PostgreSQL's sequence (at 1, it failed
    # on index_jobs_pkey), past the deleted collection's job too.
    (tmp_path / "a" / "doc000.txt").write_text("a changed note about harbour ferries")
    again = IndexService(ctx).index(tmp_path / "a", "alpha")
    assert again.state == "completed" and again.docs_indexed == 1
    assert again.job_id > gone


def _sqlite_source(data: Path) -> tuple[str, int]:
    """A data folder whose facet.db holds one collection, ``alpha``; its URL and the id."""
    data.mkdir(parents=True)
    url = f"sqlite:///{data / 'facet.db'}"
    engine = md.make_engine(url)
    with md.Session(engine) as session:
        coll = md.create_collection(session, "alpha", backend="edge", chunk_size=64,
                                    chunk_overlap=8, tokenizer="minilm")
        session.commit()
        coll_id = coll.id
    engine.dispose()
    return url, coll_id


def test_refusals_leave_facet_db_in_place_and_the_target_empty(tmp_path, postgres) -> None:  # noqa: F811
    data = tmp_path / "data"
    source, coll_id = _sqlite_source(data)

    # A target that holds a collection already.
    filled = _database(postgres, "filled")
    engine = md.make_engine(md.engine_url(filled))
    with md.Session(engine) as session:
        md.create_collection(session, "other", backend="edge", chunk_size=64, chunk_overlap=8,
                             tokenizer="minilm")
        session.commit()
    engine.dispose()
    refused = _move(data, filled)
    assert refused.returncode == 5, refused.stderr
    assert "already holds 1 collection and 0 index jobs" in refused.stderr
    assert refused.stderr.count("error:") == 1 and PASSWORD not in refused.stderr
    assert (data / "facet.db").exists() and _rows(filled) == (1, 0)

    empty = _database(postgres, "empty")
    # FACET_DATABASE_URL already set: the metadata is in that database.
    refused = _move(data, empty, FACET_DATABASE_URL=empty)
    assert refused.returncode == 2, refused.stderr
    assert "pg_dump" in refused.stderr and PASSWORD not in refused.stderr
    assert (data / "facet.db").exists() and _rows(empty) == (0, 0)

    # A job running (its lease alive: this process holds it).
    engine = md.make_engine(source)
    with md.Session(engine) as session:
        job_id = running_job(session, session.get(md.Collection, coll_id))
    engine.dispose()
    refused = _move(data, empty)
    assert refused.returncode == 5, refused.stderr
    assert f"job {job_id} (running, collection alpha)" in refused.stderr
    assert (data / "facet.db").exists() and _rows(empty) == (0, 0)


def test_a_collection_open_in_a_server_refuses_the_move(make_ctx, tmp_path, postgres) -> None:  # noqa: F811
    """A `facet serve` that searched a collection keeps it open, and its connection to
    facet.db: moved under it, it would go on writing the renamed file (a job submitted to it
    landing there, unseen). Its shard's folder lock names it; the move is refused."""
    data = tmp_path / "data"
    write_corpus(tmp_path / "a", 2)
    ctx = make_ctx()
    assert IndexService(ctx).index(tmp_path / "a", "alpha").state == "completed"
    ctx.close()
    target = _database(postgres, "beside_a_server")
    with locked_by_another_process(data, "alpha", shown_as="facet serve", opened=True) as holder:
        refused = _move(data, target)
    assert refused.returncode == 5, refused.stderr
    assert f"collection alpha (open in pid {holder.pid}" in refused.stderr
    assert "facet serve" in refused.stderr and refused.stderr.count("error:") == 1
    assert (data / "facet.db").exists() and _rows(target) == (0, 0)


def test_a_row_the_target_refuses_commits_nothing(tmp_path, postgres) -> None:  # noqa: F811
    """PostgreSQL enforces the key column's width, which SQLite does not: the copy fails at
    documents, after collections were written in its transaction, and none of it is kept."""
    data = tmp_path / "data"
    source, coll_id = _sqlite_source(data)
    engine = md.make_engine(source)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO documents (collection_id, key, source, status, n_chunks, "
                          "meta, updated_at) VALUES (:c, :k, 's', 'indexed', 0, '{}', "
                          "'2026-01-01 00:00:00')"), {"c": coll_id, "k": "x" * 2000})
    engine.dispose()
    target = _database(postgres, "refusing")
    failed = _move(data, target)
    assert failed.returncode == 4, failed.stderr
    assert "cannot copy table documents" in failed.stderr and PASSWORD not in failed.stderr
    assert failed.stderr.count("error:") == 1
    assert (data / "facet.db").exists() and not list(data.glob("facet.db.moved-*"))
    assert _rows(target) == (0, 0)


@pytest.mark.parametrize("url, said", [("mysql://u:pw@h/db", "a 'mysql' URL"),
                                       ("not a url", "not a URL")])
def test_a_target_facet_cannot_use_is_refused_as_facet_database_url_is(tmp_path, url, said) -> None:
    data = tmp_path / "data"
    _sqlite_source(data)
    refused = _move(data, url)
    assert refused.returncode == 2 and said in refused.stderr and "pw" not in refused.stderr
    assert (data / "facet.db").exists()
