"""Alembic migrations: a new database, a database from before migrations, concurrent opens."""

from __future__ import annotations

import threading
from pathlib import Path

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, text

from indexer import migrate
from indexer.metadata import Base, make_engine


def _diff(engine) -> list:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return list(compare_metadata(MigrationContext.configure(conn), Base.metadata))


def test_a_new_database_is_created_at_head(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'new.db'}")
    with engine.connect() as conn:
        assert migrate.current_revision(conn) == migrate.head_revision()
    assert _diff(engine) == []
    assert migrate.upgrade(engine) == "current"


def _issue6_database(url: str) -> None:
    """A database as issue 6 left it: the 0001 schema, rows, and no alembic_version."""
    engine = create_engine(url)
    with engine.connect() as conn:
        command.upgrade(migrate._config(conn), migrate.BASELINE)
        conn.commit()
        conn.execute(text("INSERT INTO collections (name, backend, chunk_size, chunk_overlap, "
                          "tokenizer, created_at) VALUES ('old', 'edge', 200, 32, 'minilm', "
                          "'2026-01-01')"))
        for state in ("completed", "completed", "running"):
            conn.execute(text(
                "INSERT INTO index_jobs (collection_id, source, embedder, state, docs_seen, "
                "docs_indexed, docs_skipped, docs_failed, docs_deleted, chunks_written, parse_s, "
                "encode_s, store_s, metadata_s, started_at) VALUES (1, '/src', 'minilm', "
                f"'{state}', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, '2026-01-01')"))
        conn.execute(text("INSERT INTO job_errors (job_id, document_key, kind, message) VALUES "
                          "(2, '/src/bad.pdf', 'error', 'not a PDF')"))
        conn.execute(text("DROP TABLE alembic_version"))
        conn.commit()
    engine.dispose()


def test_a_database_from_before_migrations_is_upgraded_in_place(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    _issue6_database(url)
    engine = make_engine(url)
    assert _diff(engine) == []
    with engine.begin() as conn:
        jobs = conn.execute(text("SELECT id, state, runner FROM index_jobs ORDER BY id")).all()
        assert [tuple(j) for j in jobs] == [(1, "completed", "inline"), (2, "completed", "inline"),
                                             (3, "running", "inline")]
        assert conn.execute(text("SELECT writer_job_id FROM collections")).scalar() is None
        # Rebuilding index_jobs (0002) cascaded its drop to job_errors: every error was lost.
        assert [tuple(r) for r in conn.execute(text(
            "SELECT job_id, document_key, message FROM job_errors")).all()] == [
            (2, "/src/bad.pdf", "not a PDF")]
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1  # on again after it
        # Ids are not reused after the newest job is deleted (AUTOINCREMENT since 0002).
        conn.execute(text("DELETE FROM index_jobs WHERE id = 3"))
        conn.execute(text(
            "INSERT INTO index_jobs (collection_id, source, embedder, state, docs_seen, "
            "docs_indexed, docs_skipped, docs_failed, docs_deleted, chunks_written, parse_s, "
            "encode_s, store_s, metadata_s, queued_at, runner, chunks_total, chunks_done, "
            "docs_total) VALUES (1, '/src', 'minilm', 'queued', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, "
            "'2026-01-02', 'inline', 0, 0, 0)"))
        assert conn.execute(text("SELECT max(id) FROM index_jobs")).scalar() == 4


def test_rebuilding_index_jobs_keeps_its_id_counter(tmp_path: Path) -> None:
    """0005 rebuilds index_jobs on SQLite; the copy recorded only the largest id left, so the
    ids of jobs deleted with their collection were handed out again (a queued task of a deleted
    collection's job could then be taken for a new job's)."""
    insert = text("INSERT INTO index_jobs (collection_id, source, embedder, state, docs_seen, "
                  "docs_indexed, docs_skipped, docs_failed, docs_deleted, chunks_written, "
                  "parse_s, encode_s, store_s, metadata_s, started_at, runner, chunks_total, "
                  "chunks_done, docs_total) VALUES (1, '/src', 'minilm', 'completed', 0, 0, 0, "
                  "0, 0, 0, 0, 0, 0, 0, '2026-01-02', 'inline', 0, 0, 0)")
    # At head a job row needs its queue time (0006); its start is set once it runs.
    insert_at_head = text(insert.text.replace("started_at", "queued_at"))
    for keep in (1, 0):  # the newest jobs deleted; then every job
        url = f"sqlite:///{tmp_path / f'at0004-{keep}.db'}"
        engine = create_engine(url)
        with engine.connect() as conn:
            command.upgrade(migrate._config(conn), "0004")
            conn.execute(text("INSERT INTO collections (name, backend, chunk_size, chunk_overlap, "
                              "tokenizer, created_at) VALUES ('c', 'edge', 200, 32, 'minilm', "
                              "'2026-01-01')"))
            for _ in range(3):
                conn.execute(insert)
            conn.execute(text("DELETE FROM index_jobs WHERE id > :keep"), {"keep": keep})
            conn.commit()
        engine.dispose()
        engine = make_engine(url)  # upgrades to head
        with engine.begin() as conn:
            assert migrate.current_revision(conn) == migrate.head_revision()
            conn.execute(insert_at_head)
            assert conn.execute(text("SELECT max(id) FROM index_jobs")).scalar() == 4, keep
        engine.dispose()


def test_a_job_queue_time_is_kept_apart_from_its_start_and_back(tmp_path: Path) -> None:
    """0006: ``started_at`` was the queue time until a job ran, so a job that failed before it
    ran said "started" then. Each row's old ``started_at`` becomes its ``queued_at``; a job
    still queued has not started. The downgrade gives every job a start again."""
    url = f"sqlite:///{tmp_path / 'at0005.db'}"
    engine = create_engine(url)
    with engine.connect() as conn:
        command.upgrade(migrate._config(conn), "0005")
        conn.execute(text("INSERT INTO collections (name, backend, chunk_size, chunk_overlap, "
                          "tokenizer, created_at) VALUES ('c', 'edge', 200, 32, 'minilm', "
                          "'2026-01-01')"))
        for state, started in (("completed", "2026-01-02 10:00:00"),
                               ("failed", "2026-01-03 10:00:00"),
                               ("queued", "2026-01-04 10:00:00")):
            conn.execute(text(
                "INSERT INTO index_jobs (collection_id, source, embedder, state, docs_seen, "
                "docs_indexed, docs_skipped, docs_failed, docs_deleted, chunks_written, parse_s, "
                "encode_s, store_s, metadata_s, started_at, runner, chunks_total, chunks_done, "
                "docs_total) VALUES (1, '/src', 'minilm', :state, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, "
                ":started, 'inline', 0, 0, 0)"), {"state": state, "started": started})
        conn.execute(text("INSERT INTO job_errors (job_id, document_key, kind, message) VALUES "
                          "(2, '/src/bad.pdf', 'error', 'not a PDF')"))
        conn.execute(text("DELETE FROM index_jobs WHERE id = 3"))
        conn.execute(text("INSERT INTO index_jobs (collection_id, source, embedder, state, "
                          "docs_seen, docs_indexed, docs_skipped, docs_failed, docs_deleted, "
                          "chunks_written, parse_s, encode_s, store_s, metadata_s, started_at, "
                          "runner, chunks_total, chunks_done, docs_total) VALUES (1, '/src', "
                          "'minilm', 'queued', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, "
                          "'2026-01-04 10:00:00', 'inline', 0, 0, 0)"))  # id 4
        conn.commit()
    engine.dispose()
    engine = make_engine(url)  # upgrades to head
    assert _diff(engine) == []
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT id, state, queued_at, started_at FROM index_jobs "
                                 "ORDER BY id")).all()
        assert [tuple(r) for r in rows] == [
            (1, "completed", "2026-01-02 10:00:00", "2026-01-02 10:00:00"),
            (2, "failed", "2026-01-03 10:00:00", "2026-01-03 10:00:00"),
            (4, "queued", "2026-01-04 10:00:00", None)]
        assert conn.execute(text("SELECT count(*) FROM job_errors")).scalar() == 1
        with migrate._foreign_keys_off(conn):  # as upgrades run: a rebuild must not cascade
            command.downgrade(migrate._config(conn), "0005")
            conn.commit()
        rows = conn.execute(text("SELECT * FROM index_jobs ORDER BY id")).mappings().all()
        assert "queued_at" not in rows[0]
        assert [(r["id"], r["started_at"]) for r in rows] == [
            (1, "2026-01-02 10:00:00"), (2, "2026-01-03 10:00:00"), (4, "2026-01-04 10:00:00")]
        assert conn.execute(text("SELECT count(*) FROM job_errors")).scalar() == 1
        assert conn.execute(text("SELECT seq FROM sqlite_sequence WHERE name = 'index_jobs'")
                            ).scalar() == 4  # ids are still not reused
    engine.dispose()


def test_processes_opening_a_new_database_at_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'race.db'}"
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            make_engine(url).dispose()
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=open_it) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert _diff(create_engine(url)) == []


def test_a_new_database_waits_for_a_writer_before_switching_to_wal(tmp_path: Path) -> None:
    """SQLite refuses the switch to WAL at once ("database is locked", no busy wait) while
    another connection holds a write lock; make_engine waits for it instead of failing."""
    import sqlite3
    import time

    path = tmp_path / "busy.db"
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("CREATE TABLE scratch (i INTEGER)")
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT INTO scratch VALUES (1)")
    releaser = threading.Timer(0.5, lambda: writer.execute("COMMIT"))
    releaser.start()
    start = time.monotonic()
    try:
        engine = make_engine(f"sqlite:///{path}")
    finally:
        releaser.join()
        writer.close()
    assert time.monotonic() - start >= 0.4  # it did wait for the writer
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert migrate.current_revision(conn) == migrate.head_revision()  # and it was migrated


def test_removed_rows_are_overwritten_in_the_file(tmp_path: Path) -> None:
    """``secure_delete`` is set on every SQLite connection, so a document removed for a
    privacy request leaves no text in the file's free pages. This machine's SQLite is built
    with it on, so here the test passes without the setting too: it guards the builds whose
    default is off (Python.org's, macOS's)."""
    engine = make_engine(f"sqlite:///{tmp_path / 'facet.db'}")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA secure_delete").scalar() == 1
    engine.dispose()


def test_a_database_from_a_newer_facet_is_named_as_such(tmp_path: Path) -> None:
    """A database another, newer Facet migrated said "Can't locate revision identified by
    '0099'", which the caller's hint turned into "check FACET_DATABASE_URL"."""
    import pytest

    url = f"sqlite:///{tmp_path / 'newer.db'}"
    make_engine(url).dispose()
    with create_engine(url).begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0099'"))
    with pytest.raises(RuntimeError, match=r"revision 0099, which this Facet does not know .* a newer "
                                           r"Facet migrated it") as refused:
        make_engine(url)
    # A host whose rebuilt wheel pip kept out (same version: "already installed") reads how
    # to tell and what replaces it.
    assert "`facet --version` names the schema it knows" in str(refused.value)
    assert "pip install --force-reinstall --no-deps" in str(refused.value)
    # Every command says it as a conflict between versions, exit 5 (`facet move-metadata` says
    # so of such a target): it was exit 1, "any other failure" (the upgrade review of 2026-12-06).
    from tests.app.cli_runner import invoke_cli

    data = tmp_path / "data"
    data.mkdir()
    make_engine(f"sqlite:///{data / 'facet.db'}").dispose()
    with create_engine(f"sqlite:///{data / 'facet.db'}").begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0099'"))
    listed = invoke_cli("collections", env={"FACET_DATA_DIR": str(data)})
    assert listed.returncode == 5, (listed.returncode, listed.stderr)
    assert "revision 0099, which this Facet does not know" in listed.stderr
