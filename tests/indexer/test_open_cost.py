"""What opening Facet costs: a metadata database already at the head revision is told so
without importing Alembic (0.25 s of every command's 0.56 s open, `facet embed`'s too)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from alembic import command
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, text

from indexer import migrate
from indexer.metadata import make_engine
from tests.app.services import test_postgres

# The throwaway PostgreSQL cluster of the services' tests (skipped where it cannot run).
postgres, postgres_url = test_postgres.postgres, test_postgres.postgres_url

ROOT = Path(__file__).resolve().parents[2]

# Open the facade as every command does; say whether Alembic was imported to do it.
_OPEN = ("import sys; from app.core import Facet; from app.settings import get_settings; "
         "Facet.open(get_settings()).close(); print('alembic' in sys.modules)")


def _open_imports_alembic(data: Path) -> bool:
    env = dict(os.environ, FACET_DATA_DIR=str(data), OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    done = subprocess.run([sys.executable, "-c", _OPEN], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1] == "True"


def test_opening_a_database_at_head_does_not_import_alembic(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert _open_imports_alembic(data)  # a new database: created and stamped by Alembic
    assert not _open_imports_alembic(data)  # at head: one SELECT, no Alembic


def test_the_head_read_from_the_files_is_alembics() -> None:
    """The revision files read without Alembic give its own head and revisions, so a new
    migration is never missed (an open would take a database behind it for current)."""
    script = ScriptDirectory(str(migrate.MIGRATIONS))
    head, known = migrate._revisions()
    assert head == script.get_current_head() == migrate.head_revision()
    assert known == {r.revision for r in script.walk_revisions()}


def _revisions_agree(url: str) -> None:
    """``current_revision`` reads what Alembic reads: none, head, a revision behind it; a
    database behind head is upgraded, one of a newer Facet refused."""
    engine = create_engine(url)

    def both() -> tuple[str | None, str | None]:
        with engine.connect() as conn:
            return migrate.current_revision(conn), \
                MigrationContext.configure(conn).get_current_revision()

    assert both() == (None, None)
    make_engine(url).dispose()
    assert both() == (migrate.head_revision(),) * 2
    with engine.begin() as conn:
        command.downgrade(migrate._config(conn), "0004")
    assert both() == ("0004", "0004")
    make_engine(url).dispose()  # as an open does: behind head, so upgraded
    assert both() == (migrate.head_revision(),) * 2
    assert migrate.upgrade(engine) == "current"
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0099'"))
    with pytest.raises(RuntimeError, match="revision 0099, which this Facet does not know"):
        migrate.upgrade(engine)
    engine.dispose()


def test_the_recorded_revision_is_read_as_alembic_reads_it(tmp_path: Path) -> None:
    _revisions_agree(f"sqlite:///{tmp_path / 'm.db'}")


def test_the_recorded_revision_is_read_as_alembic_reads_it_on_postgres(postgres_url) -> None:
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text("DROP DATABASE IF EXISTS open_cost"))
        conn.execute(text("CREATE DATABASE open_cost"))
    admin.dispose()
    _revisions_agree(postgres_url.rsplit("/", 1)[0] + "/open_cost")
