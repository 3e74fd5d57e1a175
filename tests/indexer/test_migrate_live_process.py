"""A schema migration under another live process with the SQLite database open is refused.

``_refuse_if_held`` looked only at the data folder's ``server.lock``, which servers write only
since 2026-11-30: every server old enough to need a migration never wrote it, so a new `facet
jobs` migrated a folder at 0004 to the head under an older `facet serve`, whose next POST /jobs
was a 500 ("NOT NULL constraint failed: index_jobs.queued_at"). Now the processes with the
database (or its -wal / -shm) open are found in /proc too; and a new process waiting for the
migration lock holds no connection, so two new processes opening an old folder at once do not
take each other for such a holder. Real processes, real SQLite files.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import create_engine, text

from app.commands.common import exit_code
from app.errors import ConflictError
from app.services.context import open_database
from app.settings import FacetSettings
from indexer import migrate
from indexer.metadata import make_engine
from tests.indexer.test_migrate_atomic import _revision

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(),
                                reason="open files are read from /proc (Linux)")


def _at_0004(path: Path) -> None:
    """A database an older Facet (before server.lock) made and left at revision 0004."""
    engine = create_engine(f"sqlite:///{path}")
    with engine.connect() as conn:
        command.upgrade(migrate._config(conn), "0004")
        conn.execute(text("INSERT INTO collections (name, backend, chunk_size, chunk_overlap, "
                          "tokenizer, created_at) VALUES ('old', 'edge', 200, 32, 'minilm', "
                          "'2026-01-01')"))
        conn.commit()
    engine.dispose()


# An older `facet serve` as the database sees it: a connection in WAL mode, read from, kept open.
_HOLD_DATABASE = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("PRAGMA journal_mode=WAL")
db.execute("SELECT count(*) FROM collections").fetchall()
print("held", flush=True)
sys.stdin.read()
"""


def _hold(path: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_DATABASE, str(path), "serve"],
                              cwd=ROOT, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_a_migration_under_another_process_with_the_database_open_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(migrate, "_HOLD_GRACE_S", 0.5, raising=False)  # (it stays)
    folder = tmp_path / "data"
    folder.mkdir()
    path = folder / "facet.db"
    _at_0004(path)
    holder = _hold(path)
    try:
        assert not (folder / "server.lock").exists()  # (an older server wrote none)
        with pytest.raises(migrate.FolderInUse) as refused:
            make_engine(f"sqlite:///{path}")
        said = str(refused.value)
        assert refused.value.pid == holder.pid
        program = os.path.basename(sys.executable)
        assert f"pid {holder.pid} ({program} -c " in said and said.endswith(
            "stop it first (it may be an older Facet, which the new schema would break), then "
            "run this command again"), said
        assert "needs a schema migration" in said and "has it open" in said
        # As a command says it: a conflict, exit 5.
        with pytest.raises(ConflictError) as conflict:
            open_database(FacetSettings(data_dir=folder))
        assert f"pid {holder.pid}" in str(conflict.value)
        assert exit_code(conflict.value) == 5
        assert _revision(path) == "0004"  # not migrated under it
    finally:
        holder.kill()
        holder.wait()
    make_engine(f"sqlite:///{path}").dispose()  # the holder gone: migrated
    assert _revision(path) == migrate.head_revision()


def test_the_command_line_refuses_with_exit_5(tmp_path: Path) -> None:
    """`facet jobs` (the command of the report) on a folder an older server has open."""
    folder = tmp_path / "data"
    folder.mkdir()
    _at_0004(folder / "facet.db")
    holder = _hold(folder / "facet.db")
    try:
        env = {**os.environ, "FACET_DATA_DIR": str(folder), "PYTHONPATH": str(ROOT),
               "OMP_NUM_THREADS": "1"}
        done = subprocess.run([sys.executable, "-c", "from app.cli import main; main()", "jobs",
                               "--limit", "1"], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 5, (done.returncode, done.stdout, done.stderr)
        assert f"pid {holder.pid}" in done.stderr and "stop it first" in done.stderr
        assert "migrated" not in done.stderr
        assert _revision(folder / "facet.db") == "0004"
    finally:
        holder.kill()
        holder.wait()


# A new Facet opening the database: the imports done, it waits for "go", then opens it.
_OPEN_WHEN_TOLD = """
import sys
from indexer import migrate
from indexer.metadata import make_engine
engine = make_engine(sys.argv[1], migrate=False)
print("ready", flush=True)
sys.stdin.readline()
try:
    print(migrate.upgrade(engine), flush=True)
except migrate.FolderInUse as e:
    print("refused:", e, flush=True)
"""


def test_new_processes_migrating_an_old_database_at_once_do_not_refuse_each_other(
        tmp_path: Path) -> None:
    """A server and a worker started together on an old folder: the first to take the
    migration lock migrates, the others wait for it holding no connection and find it
    current."""
    path = tmp_path / "facet.db"
    _at_0004(path)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    children = [subprocess.Popen([sys.executable, "-c", _OPEN_WHEN_TOLD, f"sqlite:///{path}"],
                                 cwd=ROOT, env=env, text=True, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                for _ in range(3)]
    for child in children:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    said = [child.communicate(timeout=120) for child in children]
    assert [child.returncode for child in children] == [0, 0, 0], said
    assert sorted(out.strip() for out, _ in said) == ["current", "current", "upgraded"], said
    assert _revision(path) == migrate.head_revision()


def test_this_process_holding_the_database_is_no_other(tmp_path: Path) -> None:
    """Another connection and another engine of this very process: not a holder."""
    path = tmp_path / "facet.db"
    _at_0004(path)
    mine = sqlite3.connect(path)
    mine.execute("PRAGMA journal_mode=WAL")
    mine.execute("SELECT count(*) FROM collections").fetchall()
    other = create_engine(f"sqlite:///{path}")
    with other.connect() as conn:  # (back in its pool, still open)
        conn.execute(text("SELECT count(*) FROM collections")).all()
    try:
        assert migrate._open_by_others(path) == []
        make_engine(f"sqlite:///{path}").dispose()
    finally:
        other.dispose()
        mine.close()
    assert _revision(path) == migrate.head_revision()


def test_a_database_at_the_head_is_opened_without_looking(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan runs only where there is a migration to run: a current or new database
    costs nothing, and another process with it open is no matter then."""
    path = tmp_path / "facet.db"
    make_engine(f"sqlite:///{path}").dispose()
    holder = _hold(path)

    def scanned(file: Path) -> list[tuple[int, str]]:
        raise AssertionError("scanned /proc for a database with nothing to migrate")

    monkeypatch.setattr(migrate, "_open_by_others", scanned)
    try:
        make_engine(f"sqlite:///{path}").dispose()
        make_engine(f"sqlite:///{tmp_path / 'new.db'}").dispose()
    finally:
        holder.kill()
        holder.wait()
