"""`facet move-metadata --to URL`: a laptop's SQLite metadata moved into a real PostgreSQL.

Before it there was no way: under FACET_DATABASE_URL the collections were vectors no database
owns ("strays"), and rows copied by hand read well until the first write, which failed on
``index_jobs_pkey`` (PostgreSQL's id sequences were never advanced). One throwaway PostgreSQL
cluster for the module (``postgres``), one database of it per test.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
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
    assert record["state"] == "moved"
    said = (f"the metadata of this data folder ({data}) was moved to "
            f"{url.replace(PASSWORD, '***')} on {record['moved_at']} (facet move-metadata): set "
            f"FACET_DATABASE_URL to it; to undo the move, rename {renamed} back to facet.db (and "
            "remove metadata-moved.json): anything done since under the new database "
            "(collections indexed or deleted, jobs) lives only there; then unset "
            "FACET_DATABASE_URL and empty that database, or both own the same vectors")
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


def _script(code: str, data: Path, url: str, *args: str,
            wait: bool = True) -> subprocess.CompletedProcess[str] | subprocess.Popen[str]:
    """``code`` run by a new Python (``sys.argv[1]``: the target URL, then ``args``), which
    patches the move at a named point and then runs `facet move-metadata --to URL -y` (its
    ``main()``): a signal sent at that very point, as a service manager or `kill` would."""
    root = Path(__file__).resolve().parents[3]
    argv = [sys.executable, "-c", code + _MAIN, url, *args]
    env = dict(os.environ, FACET_DATA_DIR=str(data), PYTHONPATH=str(root))
    if not wait:
        return subprocess.Popen(argv, cwd=root, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, preexec_fn=_sigint_default)
    return subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=60, env=env,
                          preexec_fn=_sigint_default)


def _sigint_default() -> None:
    """Ctrl-C as a terminal gives it: a test run started in the background of a
    non-interactive shell (`make test &`, some CI runners) ignores SIGINT, its children inherit
    that, and Python then installs no KeyboardInterrupt handler, so the mover went on."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


_MAIN = """
from app.cli import main
sys.argv = ["facet", "move-metadata", "--to", sys.argv[1], "-y"]
main()
"""

_IN_A_GC_CALLBACK = """
import gc, os, signal, sys, time
import app.services.metadata_move as m
m.BATCH_ROWS = 1
signum = getattr(signal, sys.argv[2])
copy = m._copy_table
def callback(phase, info):
    if phase == "start" and callback.armed:
        callback.armed = False
        os.kill(os.getpid(), signum)
        time.sleep(0.01)
callback.armed = False
gc.callbacks.append(callback)
def copy_table(src, dst, table, step):
    if table.name == "documents":  # (collections copied: the copy half done)
        callback.armed = True
        gc.collect()
    return copy(src, dst, table, step)
m._copy_table = copy_table
"""


def _with_documents(data: Path, n: int = 5) -> str:
    """``_sqlite_source`` with ``n`` documents in alpha (each its own batch, BATCH_ROWS=1)."""
    source, coll_id = _sqlite_source(data)
    engine = md.make_engine(source)
    with engine.begin() as conn:
        for i in range(n):
            conn.execute(text("INSERT INTO documents (collection_id, key, source, status, "
                              "n_chunks, meta, updated_at) VALUES (:c, :k, 's', 'indexed', 0, "
                              "'{}', '2026-01-01 00:00:00')"), {"c": coll_id, "k": f"doc{i}"})
    engine.dispose()
    return source


@pytest.mark.parametrize("signame, code", [("SIGTERM", 143), ("SIGINT", 130)])
def test_a_signal_during_the_copy_stops_it_between_two_batches(
        tmp_path, postgres, signame, code) -> None:  # noqa: F811
    """The handler raised wherever Python was: in a GC callback (the progress bar's import)
    the exception was swallowed ("Exception ignored in ...") and the move went on to exit 0;
    inside psycopg's executemany pipeline it broke the copy ("cannot exit pipeline mode while
    busy", exit 4). Now it only notes the signal, and the copy stops at its next batch."""
    data = tmp_path / "data"
    _with_documents(data)
    url = _database(postgres, f"between_{signame.lower()}")
    done = _script(_IN_A_GC_CALLBACK, data, url, signame)
    assert isinstance(done, subprocess.CompletedProcess)
    assert done.returncode == code, (done.returncode, done.stderr)
    assert done.stderr.strip() == "interrupted: nothing was moved; facet.db is as it was", done.stderr
    assert (data / "facet.db").exists() and not list(data.glob("facet.db.moved-*"))
    assert not (data / "metadata-moved.json").exists() and _rows(url) == (0, 0)


_DURING_THE_COMMIT = """
import os, signal, sys, threading
import app.services.metadata_move as m
signum, delay = getattr(signal, sys.argv[2]), float(sys.argv[3])
rename = m._rename_aside
def aside(*args):
    done = rename(*args)  # facet.db renamed; the commit (2 s: the trigger) comes next
    threading.Timer(delay, os.kill, (os.getpid(), signum)).start()
    return done
m._rename_aside = aside
"""


@pytest.mark.parametrize("signame, delay", [("SIGTERM", 0.0), ("SIGTERM", 0.7), ("SIGINT", 0.7)])
def test_a_signal_during_the_rename_and_the_commit_is_noted_and_the_move_finishes(
        tmp_path, postgres, signame, delay) -> None:  # noqa: F811
    """A SIGTERM while the target's COMMIT was on its way (a deferred trigger makes it last
    2 s) raised in the client, which does not cancel a COMMIT: the move said "interrupted:
    nothing was moved" and renamed facet.db back, and the commit landed after it: two
    databases owned the store. Now no signal interrupts the rename and the commit: the move
    finishes, says so, and exits 0."""
    import json

    data = tmp_path / "data"
    _sqlite_source(data)
    url = _database(postgres, f"commit_{signame.lower()}_{int(delay * 10)}")
    engine = md.make_engine(md.engine_url(url))  # (the schema, for the trigger)
    with engine.begin() as conn:
        conn.execute(text("CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS "
                          "$$ BEGIN PERFORM pg_sleep(2); RETURN NULL; END $$"))
        conn.execute(text("CREATE CONSTRAINT TRIGGER slow AFTER INSERT ON collections "
                          "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "
                          "slow_commit()"))
    engine.dispose()
    done = _script(_DURING_THE_COMMIT, data, url, signame, str(delay))
    assert isinstance(done, subprocess.CompletedProcess)
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert (f"note: the move completed before the signal ({signame}) was acted on"
            in done.stderr), done.stderr
    assert "export FACET_DATABASE_URL=" in done.stdout
    assert not (data / "facet.db").exists() and len(list(data.glob("facet.db.moved-*Z"))) == 1
    assert json.loads((data / "metadata-moved.json").read_text())["state"] == "moved"
    assert _rows(url) == (1, 0)


_PAUSED = """
import os, sys, time
from pathlib import Path
import app.services.metadata_move as m
copy, ready, go = m._copy_table, Path(sys.argv[2]), Path(sys.argv[3])
def copy_table(*args):
    if not ready.exists():
        ready.touch()
        for _ in range(300):
            if go.exists():
                break
            time.sleep(0.1)
    return copy(*args)
m._copy_table = copy_table
"""


def test_a_server_started_during_the_move_is_refused(tmp_path, postgres) -> None:  # noqa: F811
    """A `facet serve` started while the move ran was not refused: it kept the renamed file,
    took jobs into it and made a new facet.db, after which the record was ignored. The move
    holds the folder's server.lock itself, naming itself."""
    import time

    from app.commands.common import serving_lock
    from app.errors import ConflictError
    from app.services.context import folder_server
    from app.settings import FacetSettings

    data = tmp_path / "data"
    _sqlite_source(data)
    url = _database(postgres, "beside_a_new_server")
    ready, go = tmp_path / "ready", tmp_path / "go"
    mover = _script(_PAUSED, data, url, str(ready), str(go), wait=False)
    assert isinstance(mover, subprocess.Popen)
    try:
        for _ in range(300):
            if ready.exists() or mover.poll() is not None:
                break
            time.sleep(0.1)
        assert ready.exists(), mover.communicate()
        holder = folder_server(data) or {}
        with pytest.raises(ConflictError) as refused, \
                serving_lock(FacetSettings(data_dir=data), "facet serve", "http://127.0.0.1:1"):
            pass
    finally:
        go.touch()
        _, err = mover.communicate(timeout=60)
    assert str(refused.value) == (
        f"the data folder's metadata ({data}) is being moved by facet move-metadata (pid "
        f"{mover.pid}): start the server once it ends, with FACET_DATABASE_URL set")
    assert holder.get("command") == "facet move-metadata" and holder.get("pid") == mover.pid
    assert mover.returncode == 0, err
    assert folder_server(data) is None and _rows(url) == (1, 0)


def test_without_its_record_the_renamed_file_still_refuses(tmp_path, postgres) -> None:  # noqa: F811
    """The guard rested on metadata-moved.json alone: removed, the next command made an empty
    facet.db and called every collection a stray that `facet delete` removes."""
    data = tmp_path / "data"
    _sqlite_source(data)
    url = _database(postgres, "unrecorded")
    assert _move(data, url).returncode == 0
    [renamed] = [p.name for p in data.glob("facet.db.moved-*Z")]
    (data / "metadata-moved.json").unlink()
    refused = invoke_cli("collections", env={"FACET_DATA_DIR": str(data)})
    assert (refused.returncode, refused.stderr.strip()) == (3, (
        f"error: a {renamed} is here ({data}): this folder's metadata was moved to another "
        "database, or a move was interrupted: set FACET_DATABASE_URL to where it went, or "
        "rename the file back to facet.db (anything done since under the new database "
        "(collections indexed or deleted, jobs) lives only there; then unset FACET_DATABASE_URL "
        "and empty that database, or both own the same vectors)")), refused
    assert not (data / "facet.db").exists()


_KILLED = """
import os, signal, sys
import app.services.metadata_move as m
rename = m._rename_aside
def aside(*args):
    rename(*args)
    os.kill(os.getpid(), signal.SIGKILL)  # facet.db renamed, the commit not made
m._rename_aside = aside
"""


def test_a_mover_killed_before_its_commit_leaves_a_moving_record(tmp_path, postgres) -> None:  # noqa: F811
    """SIGKILL between the rename and the record (the commit made or not) left no record: the
    next command made an empty facet.db. The record is written, "moving", before the rename:
    the next command says the move may not have been committed, how to tell and undo it."""
    import json

    data = tmp_path / "data"
    _sqlite_source(data)
    url = _database(postgres, "killed")
    done = _script(_KILLED, data, url)
    assert isinstance(done, subprocess.CompletedProcess) and done.returncode == -9, done.stderr
    [renamed] = [p.name for p in data.glob("facet.db.moved-*Z")]
    record = json.loads((data / "metadata-moved.json").read_text())
    assert record["state"] == "moving" and record["renamed"] == renamed
    for args in (("collections",), ("move-metadata", "--to", url, "-y")):
        refused = invoke_cli(*args, env={"FACET_DATA_DIR": str(data)})
        assert refused.returncode == 3, refused
        assert (f"a move of this data folder's metadata ({data}) to {url.replace(PASSWORD, '***')}"
                f" on {record['moved_at']} (facet move-metadata) did not finish (the process was "
                "killed): it may or may not have been committed there") in refused.stderr
        assert (f"if it holds none, undo the move: rename {renamed} back to facet.db and remove "
                "metadata-moved.json (once no session of the move is left on that database: a "
                "commit still hanging there lands later") in refused.stderr
    assert not (data / "facet.db").exists() and _rows(url) == (0, 0)


def test_the_vectors_of_a_move_killed_before_its_commit_are_no_strays_to_delete(tmp_path) -> None:
    """The kill exploration of the third session of 2026-12-02: killed between the rename and
    the target's commit, the move's refusal says to list the collections with FACET_DATABASE_URL
    set to the target; there they were vectors no database owns, "`facet delete tiny` removes
    them", and that delete (exit 0) destroyed the only vectors the renamed facet.db had. They
    are now that file's, and the delete is refused. A SQLite target: the move's own code, killed
    by SIGKILL at that point in a real process."""
    import json

    from tests.app.cli_runner import tiny_data_folder

    data = tiny_data_folder(tmp_path)
    target = f"sqlite:///{tmp_path / 'target.db'}"
    done = _script(_KILLED, data, target)
    assert isinstance(done, subprocess.CompletedProcess) and done.returncode == -9, done.stderr
    [renamed] = [p.name for p in data.glob("facet.db.moved-*Z")]
    env = {"FACET_DATA_DIR": str(data), "FACET_DATABASE_URL": target}
    listed = invoke_cli("collections", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    [tiny] = [c for c in json.loads(listed.stdout) if c["name"] == "tiny"]
    owner = f"{renamed} in this data folder (a facet move-metadata that did not finish)"
    assert tiny["owner"] == owner, tiny  # (the old code: None, "facet delete tiny removes them")
    shown = invoke_cli("collections", env=env).stdout
    assert "facet delete tiny` removes them" not in shown and owner in shown, shown
    refused = invoke_cli("delete", "tiny", "-y", env=env)
    assert refused.returncode == 5, (refused.returncode, refused.stdout, refused.stderr)
    assert (f"the vectors of 'tiny' belong to collection 'tiny' of {owner}, which this database does "
            "not hold (yet: the move's commit may still be under way): unset FACET_DATABASE_URL"
            ) in refused.stderr, refused.stderr
    assert (data / "qdrant-edge" / "tiny").is_dir()


def test_a_move_killed_before_its_commit_is_named_by_the_next_one(tmp_path) -> None:
    """A facet.db.moved-* and no record (a move killed before 2026-11-30's record, or the
    record removed): the next run said only 'point FACET_DATA_DIR at the folder you indexed
    into', and any other command made an empty facet.db."""
    data = tmp_path / "data"
    _sqlite_source(data)
    (data / "facet.db").rename(data / "facet.db.moved-20261130T101010Z")
    for again in (_move(data, "postgresql://facet:pw@127.0.0.1:1/none"),
                  invoke_cli("jobs", env={"FACET_DATA_DIR": str(data)})):
        assert again.returncode == 3, again.stderr
        assert ("a facet.db.moved-20261130T101010Z is here" in again.stderr
                and "or rename the file back to facet.db" in again.stderr)
    assert not (data / "facet.db").exists()


def test_an_idle_server_on_the_folder_refuses_the_move(tmp_path, postgres) -> None:  # noqa: F811
    """An idle `facet serve` (no collection open) holds only server.lock, and its connection to
    facet.db: a job posted to it after the move landed in the renamed file. Refused (exit 5),
    and nothing is created in the target."""
    import json

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


def test_a_move_beside_another_move_says_so(tmp_path, postgres) -> None:  # noqa: F811
    """Two moves at once: the second was told "a Facet server (facet move-metadata, pid N) serves
    the data folder; stop `facet serve`..." (the multi-process exploration of the fourth session
    of 2026-12-07). It names the other move and says to wait. A real process holds the lock as
    a move does (``holding_server_lock`` with ``MOVER``)."""
    data = tmp_path / "data"
    _sqlite_source(data)
    target = _database(postgres, "beside_a_move")
    hold = ("import sys, time\nfrom pathlib import Path\n"
            "from app.services.context import MOVER, holding_server_lock\n"
            "with holding_server_lock(Path(sys.argv[1]), MOVER):\n"
            "    print('locked', flush=True)\n    time.sleep(60)\n")
    holder = subprocess.Popen([sys.executable, "-c", hold, str(data)], stdout=subprocess.PIPE,
                              cwd=Path(__file__).resolve().parents[3],
                              env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[3])))
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"locked"
        refused = _move(data, target)
        asked = invoke_cli("move-metadata", "--to", target, env={"FACET_DATA_DIR": str(data)},
                           input="n\n")  # (without -y: the plan is checked first)
    finally:
        holder.kill()
        holder.wait()
    for done in (refused, asked):
        assert done.returncode == 5, done.stderr
        assert f"another `facet move-metadata` (pid {holder.pid})" in done.stderr, done.stderr
        assert "stop `facet serve`" not in done.stderr and "a Facet server" not in done.stderr
    assert _tables(target) == set()


def test_a_no_or_a_refusal_writes_nothing_to_the_target(tmp_path, postgres) -> None:  # noqa: F811
    """Answering `n`, or a refusal, left Facet's 9-table schema in the target: the checks and
    the question read it only; only the move itself migrates it."""
    data = tmp_path / "data"
    source, coll_id = _sqlite_source(data)
    target = _database(postgres, "asked")
    said_no = invoke_cli("move-metadata", "--to", target, env={"FACET_DATA_DIR": str(data)},
                         input="n\n")
    assert said_no.returncode == 1 and (data / "facet.db").exists()
    assert said_no.stderr.endswith("nothing was moved (the answer was no)\n"), said_no.stderr
    assert _tables(target) == set()
    engine = md.make_engine(source)
    with md.Session(engine) as session:
        job_id = running_job(session, session.get(md.Collection, coll_id))
    engine.dispose()
    refused = _move(data, target)
    assert refused.returncode == 5 and f"job {job_id} (running" in refused.stderr
    assert _tables(target) == set()


def test_a_target_naming_the_folders_own_facet_db_is_refused(tmp_path) -> None:
    """`--to sqlite:///DATA/facet.db` (through a link too) would copy facet.db onto itself."""
    data = tmp_path / "data"
    _sqlite_source(data)
    (tmp_path / "link").symlink_to(data)
    for url in (f"sqlite:///{data / 'facet.db'}", f"sqlite:///{tmp_path / 'link' / 'facet.db'}"):
        refused = _move(data, url)
        assert refused.returncode == 2, refused.stderr
        assert "--to names the data folder's own facet.db" in refused.stderr
        assert (data / "facet.db").exists() and not list(data.glob("facet.db.moved-*"))


def test_a_relative_sqlite_target_is_made_absolute(tmp_path, monkeypatch) -> None:
    """`--to sqlite:///meta.db` was kept relative, in the record and in the `export` line it
    printed: set from another folder, that URL made a new, empty database there."""
    import json

    from tests.app.cli_runner import tiny_data_folder

    data = tiny_data_folder(tmp_path)
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    moved = _move(data, "sqlite:///meta.db")
    assert moved.returncode == 0, moved.stderr
    absolute = f"sqlite:///{here / 'meta.db'}"
    assert f"export FACET_DATABASE_URL={absolute}" in moved.stdout, moved.stdout
    assert json.loads((data / "metadata-moved.json").read_text())["target"] == absolute
    assert _rows(absolute) == (1, 1)


def test_after_a_move_a_database_not_its_target_does_not_delete_the_moved_vectors(
        tmp_path) -> None:
    """After a finished move, FACET_DATABASE_URL mistyped (or a relative path read from another
    folder): the listing said the moved collections were vectors no database owns, "`facet
    delete tiny` removes them", and the delete (exit 0) removed the vectors the target's
    collection points to. They are the target's now, and the delete is refused."""
    import json

    from tests.app.cli_runner import tiny_data_folder

    data = tiny_data_folder(tmp_path)
    target = f"sqlite:///{tmp_path / 'target.db'}"
    assert _move(data, target).returncode == 0
    [renamed] = [p.name for p in data.glob("facet.db.moved-*Z")]
    env = {"FACET_DATA_DIR": str(data), "FACET_DATABASE_URL": f"sqlite:///{tmp_path / 'typo.db'}"}
    listed = invoke_cli("collections", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    [tiny] = [c for c in json.loads(listed.stdout) if c["name"] == "tiny"]
    owner = (f"{target} (where facet move-metadata moved this data folder's metadata; its copy "
             f"{renamed} is in this data folder)")
    assert tiny["owner"] == owner, tiny
    # The listing and the server's start say to set it to the target ("unset FACET_DATABASE_URL"
    # was wrong: every command then refuses, the metadata having moved).
    shown = invoke_cli("collections", env=env).stdout
    assert ("tiny: vectors only" in shown and f"of {owner}: FACET_DATABASE_URL names another "
            "database; set it to that one" in shown and "unset" not in shown), shown
    from app.services.collections import unowned_store_collections
    from app.settings import FacetSettings

    warned = unowned_store_collections(FacetSettings(data_dir=data,
                                                     database_url=env["FACET_DATABASE_URL"]))
    assert warned is not None and f"; {owner} records 1 of them" in warned, warned
    assert "set it to that one" in warned and "unset" not in warned, warned
    refused = invoke_cli("delete", "tiny", "-y", env=env)
    assert refused.returncode == 5, (refused.returncode, refused.stdout, refused.stderr)
    assert (f"the vectors of 'tiny' belong to collection 'tiny' of {owner}: FACET_DATABASE_URL "
            "names another database") in refused.stderr, refused.stderr
    assert (data / "qdrant-edge" / "tiny").is_dir()
    # Under the target itself, the collection is its own and deletes as any other.
    at_target = {"FACET_DATA_DIR": str(data), "FACET_DATABASE_URL": target}
    [tiny] = json.loads(invoke_cli("collections", "--json", env=at_target).stdout)
    assert tiny["name"] == "tiny" and tiny.get("owner") is None and not tiny.get("stray"), tiny
    assert invoke_cli("delete", "tiny", "-y", env=at_target).returncode == 0
    assert not (data / "qdrant-edge" / "tiny").exists()


def test_a_target_file_that_is_no_database_is_named_as_the_to_url(tmp_path) -> None:
    """`--to sqlite:///notes.txt` (a text file) said "the metadata database ... is damaged ...
    restore it together with qdrant-edge from a backup", exit 4, as if the data folder's own
    facet.db were broken."""
    data = tmp_path / "data"
    _sqlite_source(data)
    text = tmp_path / "notes.txt"
    text.write_text("these are notes, not a database\n" * 100)
    refused = _move(data, f"sqlite:///{text}")
    assert refused.returncode == 2, (refused.returncode, refused.stderr)
    assert "is not a SQLite database" in refused.stderr and str(text) in refused.stderr
    assert "restore" not in refused.stderr and "nothing was written" in refused.stderr
    assert (data / "facet.db").exists() and not list(data.glob("facet.db.moved-*"))
    assert text.read_text().startswith("these are notes")


def test_a_move_recorded_with_a_relative_target_never_lets_its_vectors_be_deleted(
        tmp_path, monkeypatch) -> None:
    """A move of before the relative-path fix recorded `sqlite:///meta.db`: from another folder
    the same URL names another file, which was taken for the target (the strings matched), and
    `facet delete tiny` removed the vectors the real target's collection points to."""
    import json

    from tests.app.cli_runner import tiny_data_folder

    data = tiny_data_folder(tmp_path)
    first = tmp_path / "first"
    first.mkdir()
    assert _move(data, f"sqlite:///{first / 'meta.db'}").returncode == 0
    record = data / "metadata-moved.json"
    old = json.loads(record.read_text()) | {"target": "sqlite:///meta.db"}  # as recorded then
    record.write_text(json.dumps(old))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    env = {"FACET_DATA_DIR": str(data), "FACET_DATABASE_URL": "sqlite:///meta.db"}
    refused = invoke_cli("delete", "tiny", "-y", env=env)
    assert refused.returncode == 5, (refused.returncode, refused.stdout, refused.stderr)
    assert (data / "qdrant-edge" / "tiny").is_dir()
    # It said "FACET_DATABASE_URL names another database; set it to that one", which it was.
    assert "set it to that one" not in refused.stderr, refused.stderr
    assert ("sqlite:///meta.db (where facet move-metadata moved this data folder's metadata, recorded "
            "relative, a file of that name in each working folder;") in refused.stderr, refused.stderr
    assert ('write that file\'s URL with its absolute path (sqlite:////PATH) as "target" in the data folder\'s '
            'metadata-moved.json'
            in refused.stderr), refused.stderr
    # With no FACET_DATABASE_URL, the folder's own advice named the relative URL to set.
    unset = invoke_cli("collections", env={"FACET_DATA_DIR": str(data)})
    assert unset.returncode == 3, (unset.returncode, unset.stderr)
    assert "set FACET_DATABASE_URL to it" not in unset.stderr, unset.stderr
    assert ("moved to sqlite:///meta.db on " in unset.stderr
            and "(recorded relative, a file of that name in each working folder): set FACET_DATABASE_URL "
            "to that file's URL with its absolute path (sqlite:////PATH" in unset.stderr), unset.stderr
    # From the folder it was made in, the database is the target: the collection is its own.
    monkeypatch.chdir(first)
    listed = json.loads(invoke_cli("collections", "--json", env=env).stdout)
    assert [c["name"] for c in listed] == ["tiny"] and not listed[0].get("stray"), listed
    # Done as it says, the collection is the target's from any folder, and deletes as any other.
    record.write_text(json.dumps(old | {"target": f"sqlite:///{first / 'meta.db'}"}))
    monkeypatch.chdir(elsewhere)
    absolute = env | {"FACET_DATABASE_URL": f"sqlite:///{first / 'meta.db'}"}
    assert invoke_cli("delete", "tiny", "-y", env=absolute).returncode == 0
    assert not (data / "qdrant-edge" / "tiny").exists()


def test_a_target_holding_another_applications_tables_is_refused(tmp_path) -> None:
    """`--to` a SQLite file of another application: Facet's tables were written in beside its
    own (and its alembic_version would have been taken for Facet's). An empty database of
    Facet's own is still a target."""
    import sqlite3

    from tests.app.cli_runner import tiny_data_folder

    def sqlite_file(name: str, *statements: str) -> Path:
        path = tmp_path / name
        with contextlib.closing(sqlite3.connect(path)) as db:
            for statement in statements:
                db.execute(statement)
            db.commit()
        return path

    data = tiny_data_folder(tmp_path)
    other = sqlite_file("other.db", "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)",
                        "INSERT INTO users VALUES (1, 'ann')")
    refused = _move(data, f"sqlite:///{other}")
    assert refused.returncode == 5, (refused.returncode, refused.stdout)
    assert (f"the target database sqlite:///{other} holds tables or views Facet does not make (users): "
            "move-metadata writes only into an empty database") in refused.stderr, refused.stderr
    with contextlib.closing(sqlite3.connect(other)) as db:
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == ["users"]
    assert (data / "facet.db").is_file() and not list(data.glob("facet.db.moved-*"))
    # Another application's Alembic history, alone.
    versioned = sqlite_file("versioned.db",
                            "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)",
                            "INSERT INTO alembic_version VALUES ('ae1027a6acf')")
    refused = _move(data, f"sqlite:///{versioned}")
    assert refused.returncode == 5 and "records schema revision 'ae1027a6acf', which is none of Facet's" \
        in refused.stderr, refused.stderr
    # Another application's view alone (the listing of tables left it out).
    viewed = sqlite_file("viewed.db", "CREATE VIEW app_report AS SELECT 1")
    refused = _move(data, f"sqlite:///{viewed}")
    assert refused.returncode == 5 and "Facet does not make (app_report)" in refused.stderr, refused.stderr
    # A table under one of Facet's names, with no revision of Facet's: the migration took the
    # file for a new database, wrote Facet's other tables in beside it, and the copy failed
    # (exit 4, "nothing was written"); an empty foreign `collections` failed cryptically.
    for name, statement in (("named.db", "CREATE TABLE documents (id INTEGER PRIMARY KEY, body TEXT)"),
                            ("coll.db", "CREATE TABLE collections (label TEXT)")):
        named = sqlite_file(name, statement)
        refused = _move(data, f"sqlite:///{named}")
        table = statement.split()[2]
        assert refused.returncode == 5, (refused.returncode, refused.stdout, refused.stderr)
        assert (f"holds tables named as Facet's ({table}) but records no schema revision of "
                "Facet's") in refused.stderr, refused.stderr
        with contextlib.closing(sqlite3.connect(named)) as db:
            assert [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] \
                == [table]
    # Two revision rows (a cryptic exit 1), and a newer Facet's revision (it was called another
    # application's).
    version_table = "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)"
    two = sqlite_file("two.db", version_table, "INSERT INTO alembic_version VALUES ('0010'), ('0011')")
    refused = _move(data, f"sqlite:///{two}")
    assert refused.returncode == 5 and "records 2 schema revisions (0010, 0011)" in refused.stderr, \
        (refused.returncode, refused.stderr)
    newer = sqlite_file("newer.db", version_table, "INSERT INTO alembic_version VALUES ('9999')")
    refused = _move(data, f"sqlite:///{newer}")
    assert refused.returncode == 5 and "records schema revision 9999, a newer Facet's" in refused.stderr, \
        (refused.returncode, refused.stderr)
    assert "another application" not in refused.stderr, refused.stderr
    # Facet's revision recorded beside a foreign `documents` (or beside no table): taken for
    # Facet's, the copy failed (exit 4, "no such table: collections") and the file's journal
    # mode was changed.
    for name, statements, said in (
            ("revised.db", ("CREATE TABLE documents (id INTEGER PRIMARY KEY, title TEXT, body TEXT)",),
             "no chunks, collection_embedders, collections, document_vectors ... tables"),
            ("bare.db", (), "no chunks, collection_embedders, collections, document_vectors ... tables")):
        revised = sqlite_file(name, version_table, "INSERT INTO alembic_version VALUES ('0011')", *statements)
        before = revised.read_bytes()
        refused = _move(data, f"sqlite:///{revised}")
        assert refused.returncode == 5, (refused.returncode, refused.stderr)
        assert f"records Facet's schema revision 0011 but its tables are not Facet's ({said})" in refused.stderr, \
            refused.stderr
        assert revised.read_bytes() == before
    assert (data / "facet.db").is_file() and not list(data.glob("facet.db.moved-*"))
    # A database of Facet's own with nothing in it is taken.
    empty = tmp_path / "empty-data"
    assert invoke_cli("collections", env={"FACET_DATA_DIR": str(empty)}).returncode == 0
    # The same with a column Facet's documents table never has: refused.
    altered = tmp_path / "altered.db"
    altered.write_bytes((empty / "facet.db").read_bytes())
    with contextlib.closing(sqlite3.connect(altered)) as db:
        db.execute("ALTER TABLE documents ADD COLUMN body TEXT")
        db.commit()
    refused = _move(data, f"sqlite:///{altered}")
    assert refused.returncode == 5 and "its tables are not Facet's (documents has columns Facet's does not: body)" \
        in refused.stderr, (refused.returncode, refused.stderr)
    moved = _move(data, f"sqlite:///{empty / 'facet.db'}")
    assert moved.returncode == 0, moved.stderr


def _late_write(engine, name: str) -> None:
    """A collection row ``name`` written through ``engine`` (opened before the move)."""
    with md.Session(engine) as session:
        md.create_collection(session, name, backend="edge", chunk_size=64, chunk_overlap=8,
                             tokenizer="minilm")
        session.commit()


def _collections_in(path: Path) -> set[str]:
    import sqlite3

    with contextlib.closing(sqlite3.connect(path)) as conn:
        return {name for (name,) in conn.execute("SELECT name FROM collections")}


@pytest.mark.parametrize("when", ["after", "during"])
def test_a_process_that_opened_facet_db_before_the_move_cannot_write_the_renamed_file(
        tmp_path, monkeypatch, when) -> None:
    """The metadata exploration of the sixth session of 2026-12-05: a `facet index` started a
    second before `facet move-metadata` (loading its model: no job row yet, so the move's
    checks passed) kept its SQLite connection, wrote its collection, job and documents into
    the renamed facet.db.moved-* and said "completed", exit 0; the target never had them, and
    its vectors were then "vectors no collection owns: `facet delete` removes them". Now a
    commit through a connection whose file was moved away is refused with the move's words
    (``after``); a writer waiting on facet.db's lock while the move copies (``during``) gets
    the lock only once the file is renamed (the move held it until then), and is refused too."""
    import threading

    from app.errors import NotFoundError, as_domain_error
    from app.services import metadata_move
    from indexer.errors import MetadataFileMovedError

    data = tmp_path / "data"
    url, _ = _sqlite_source(data)
    engine = md.make_engine(url)
    with md.Session(engine) as session:  # (its pooled connection now holds facet.db open)
        assert md.get_collection(session, "alpha") is not None
    outcome: list[BaseException | None] = []
    if when == "during":
        rename = metadata_move._rename_aside

        def aside(database, stamp):
            def write() -> None:
                try:
                    _late_write(engine, "late")
                    outcome.append(None)
                except BaseException as e:  # (what the writer met: asserted below)
                    outcome.append(e)

            writer = threading.Thread(target=write)
            writer.start()
            writer.join(1.0)  # (the old code had let the lock go: it wrote into facet.db here)
            done = rename(database, stamp)
            aside.writer = writer  # type: ignore[attr-defined]
            return done

        monkeypatch.setattr(metadata_move, "_rename_aside", aside)
    target = f"sqlite:///{tmp_path / 'target.db'}"
    moved = _move(data, target)
    assert moved.returncode == 0, moved.stderr
    try:
        if when == "after":
            try:
                _late_write(engine, "late")
                outcome.append(None)
            except MetadataFileMovedError as e:
                outcome.append(e)
        else:
            aside.writer.join(60)  # type: ignore[attr-defined]
        [error] = outcome
        assert isinstance(error, MetadataFileMovedError), error
        domain = as_domain_error(error)
        assert isinstance(domain, NotFoundError)
        assert f"was moved to {target}" in str(domain) and "was not kept" in str(domain), domain
    finally:
        engine.dispose()
    [renamed] = data.glob("facet.db.moved-*Z")
    assert _collections_in(renamed) == {"alpha"}  # (the old code: {"alpha", "late"})
    assert _rows(target) == (1, 0)
