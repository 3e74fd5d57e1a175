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


def _tables(url: str) -> set[str]:
    """The tables of the database ``url`` (a refusal, or a "no", must leave it as it was)."""
    engine = create_engine(md.engine_url(url))
    try:
        with engine.connect() as conn:
            return set(inspect(conn).get_table_names())
    finally:
        engine.dispose()


def test_after_a_move_a_command_without_the_url_refuses_and_makes_no_facet_db(
        tmp_path, postgres) -> None:  # noqa: F811
    """A shell or service started without FACET_DATABASE_URL after the move made a new, empty
    facet.db: every collection was then a stray 'facet delete cars removes', and deleting
    destroyed the vectors PostgreSQL owns. The move's record refuses it, naming the target."""
    import json

    from app.errors import NotFoundError
    from app.services.context import ServiceContext, check_database
    from app.settings import FacetSettings

    data = tmp_path / "data"
    _sqlite_source(data)
    url = _database(postgres, "recorded")
    assert _move(data, url).returncode == 0
    [renamed] = [p.name for p in data.glob("facet.db.moved-*Z")]
    record = json.loads((data / "metadata-moved.json").read_text())
    assert record["renamed"] == renamed and PASSWORD not in json.dumps(record)
    said = (f"the metadata of this data folder ({data}) was moved to "
            f"{url.replace(PASSWORD, '***')} on {record['moved_at']} (facet move-metadata): set "
            f"FACET_DATABASE_URL to it; to undo the move, rename {renamed} back to facet.db (and "
            "remove metadata-moved.json)")
    for args in (("collections",), ("delete", "alpha", "-y"), ("jobs",)):
        refused = invoke_cli(*args, env={"FACET_DATA_DIR": str(data)})
        assert (refused.returncode, refused.stderr.strip()) == (3, f"error: {said}"), refused
    with pytest.raises(NotFoundError, match="was moved to"):
        check_database(FacetSettings(data_dir=data))  # `facet serve`'s check at start
    with pytest.raises(NotFoundError, match="was moved to"):
        ServiceContext(FacetSettings(data_dir=data))
    assert not (data / "facet.db").exists()
    again = _move(data, url)  # (a second move says the same, exit 3)
    assert again.returncode == 3 and said in again.stderr
    # Undone: facet.db back wins over the record.
    (data / renamed).rename(data / "facet.db")
    listed = invoke_cli("collections", env={"FACET_DATA_DIR": str(data)})
    assert listed.returncode == 0 and "alpha" in listed.stdout, listed


_SIGNALLED = """
import os, signal, sys
import app.services.metadata_move as m
url, signum = sys.argv[1], getattr(signal, sys.argv[2])
rename = m._rename_aside
def aside(*args):
    done = rename(*args)  # facet.db renamed, the target's commit not yet made
    os.kill(os.getpid(), signum)
    return done
m._rename_aside = aside
from app.cli import main
sys.argv = ["facet", "move-metadata", "--to", url, "-y"]
main()
"""


@pytest.mark.parametrize("signame, code", [("SIGTERM", 143), ("SIGINT", 130)])
def test_a_signal_between_the_rename_and_the_commit_moves_nothing(
        tmp_path, postgres, signame, code) -> None:  # noqa: F811
    """SIGTERM (a service manager, `kill`) killed the process with facet.db renamed and the
    target empty: now the rename is undone and the transaction rolled back, as for Ctrl-C."""
    import os
    import subprocess
    import sys

    data = tmp_path / "data"
    _sqlite_source(data)
    url = _database(postgres, f"signalled_{signame.lower()}")
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-c", _SIGNALLED, url, signame], cwd=root,
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, FACET_DATA_DIR=str(data), PYTHONPATH=str(root)))
    assert done.returncode == code, (done.returncode, done.stderr)
    assert done.stderr.strip() == "interrupted: nothing was moved; facet.db is as it was", done.stderr
    assert (data / "facet.db").exists() and not list(data.glob("facet.db.moved-*"))
    assert not (data / "metadata-moved.json").exists() and _rows(url) == (0, 0)


def test_a_move_killed_before_its_commit_is_named_by_the_next_one(tmp_path) -> None:
    """SIGKILL between the rename and the commit leaves facet.db.moved-* and no record: the
    next run said only 'point FACET_DATA_DIR at the folder you indexed into'."""
    data = tmp_path / "data"
    _sqlite_source(data)
    (data / "facet.db").rename(data / "facet.db.moved-20261130T101010Z")
    again = _move(data, "postgresql://facet:pw@127.0.0.1:1/none")
    assert again.returncode == 3, again.stderr
    assert ("a facet.db.moved-20261130T101010Z is here: a move to another database was made or "
            "interrupted; rename it back to facet.db to move again") in again.stderr


def test_an_idle_server_on_the_folder_refuses_the_move(tmp_path, postgres) -> None:  # noqa: F811
    """An idle `facet serve` (no collection open) holds only server.lock, and its connection to
    facet.db: a job posted to it after the move landed in the renamed file. Refused (exit 5),
    and nothing is created in the target."""
    import json
    import os
    import subprocess
    import sys

    data = tmp_path / "data"
    _sqlite_source(data)
    target = _database(postgres, "beside_an_idle_server")
    hold = ("import fcntl, json, os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
            "os.write(fd, json.dumps({'pid': os.getpid(), 'command': 'facet serve', "
            "'address': '127.0.0.1:8123'}).encode())\n"
            "print('locked', flush=True)\ntime.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", hold, str(data / "server.lock")],
                              stdout=subprocess.PIPE, env=dict(os.environ))
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"locked"
        refused = _move(data, target)
        asked = invoke_cli("move-metadata", "--to", target, env={"FACET_DATA_DIR": str(data)})
    finally:
        holder.kill()
        holder.wait()
    assert refused.returncode == 5, refused.stderr
    assert (f"a Facet server (facet serve, pid {holder.pid}, on 127.0.0.1:8123) serves the data "
            "folder") in refused.stderr and refused.stderr.count("error:") == 1
    assert asked.returncode == 5 and "a Facet server (facet serve" in asked.stderr
    assert (data / "facet.db").exists() and _tables(target) == set()
    assert json.loads((data / "server.lock").read_text())["pid"] == holder.pid
    # Let go: the lock file alone (left by a server that ended) stops nothing.
    assert _move(data, target).returncode == 0


def test_a_no_or_a_refusal_writes_nothing_to_the_target(tmp_path, postgres) -> None:  # noqa: F811
    """Answering `n`, or a refusal, left Facet's 9-table schema in the target: the checks and
    the question read it only; only the move itself migrates it."""
    data = tmp_path / "data"
    source, coll_id = _sqlite_source(data)
    target = _database(postgres, "asked")
    said_no = invoke_cli("move-metadata", "--to", target, env={"FACET_DATA_DIR": str(data)},
                         input="n\n")
    assert said_no.returncode != 0 and (data / "facet.db").exists()
    assert _tables(target) == set()
    engine = md.make_engine(source)
    with md.Session(engine) as session:
        job_id = running_job(session, session.get(md.Collection, coll_id))
    engine.dispose()
    refused = _move(data, target)
    assert refused.returncode == 5 and f"job {job_id} (running" in refused.stderr
    assert _tables(target) == set()
