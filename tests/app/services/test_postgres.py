"""A PostgreSQL metadata database works: a throwaway cluster started by the test."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.services.collections import CollectionService
from app.services.indexing import IndexService
from app.services.search import SearchRequest, SearchService

from .conftest import write_corpus

PG_BIN = Path("/usr/lib/postgresql/15/bin")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"PostgreSQL server binaries not found in {PG_BIN}")
    pytest.importorskip("psycopg", reason="install psycopg[binary] (the dev extra)")
    root = Path(tempfile.mkdtemp(prefix="facet-pg-"))
    data = root / "data"
    # postgres refuses to run as root: run the cluster as the postgres user when we are root.
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            pytest.skip("running as root and runuser is missing: cannot start postgres")
        shutil.chown(root, "postgres")
        prefix = ["runuser", "-u", "postgres", "--"]
    port = _free_port()
    subprocess.run([*prefix, str(PG_BIN / "initdb"), "-D", str(data), "-U", "facet", "-A", "trust",
                    "--no-sync"], check=True, capture_output=True)
    subprocess.run([*prefix, str(PG_BIN / "pg_ctl"), "-D", str(data), "-w", "-l",
                    str(root / "log"), "-o", f"-p {port} -k {root} -c listen_addresses=127.0.0.1 "
                    "-c fsync=off", "start"], check=True, capture_output=True)
    try:
        yield f"postgresql+psycopg://facet@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*prefix, str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate",
                        "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def test_index_and_search_with_postgres_metadata(make_ctx, tmp_path, postgres_url) -> None:
    write_corpus(tmp_path / "src", 5)
    ctx = make_ctx(database_url=postgres_url)
    assert ctx.engine.dialect.name == "postgresql"
    service = IndexService(ctx)
    first = service.index(tmp_path / "src", "pg")
    assert first.docs_indexed == 5 and first.state == "completed"
    again = service.index(tmp_path / "src", "pg")
    assert (again.docs_indexed, again.docs_skipped) == (0, 5)
    info = CollectionService(ctx).get("pg")
    assert info.documents_indexed == 5 and info.chunks == info.points == first.chunks_written
    hits = SearchService(ctx).search(SearchRequest("football", "pg", top_k=1)).results
    assert "football" in hits[0].text
    CollectionService(ctx).delete("pg")
    assert CollectionService(ctx).list_all() == []


def test_migrations_on_postgres_from_before_migrations(postgres_url) -> None:
    """The 0001 -> head upgrade (column adds, the rebuilt index_jobs) on PostgreSQL."""
    from sqlalchemy import create_engine, text

    from indexer.metadata import make_engine
    from tests.indexer.test_migrations import _diff, _issue6_database

    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text("DROP DATABASE IF EXISTS migrated"))
        conn.execute(text("CREATE DATABASE migrated"))
    admin.dispose()
    url = postgres_url.rsplit("/", 1)[0] + "/migrated"
    _issue6_database(url)
    engine = make_engine(url)
    assert _diff(engine) == []
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM index_jobs")).scalar() == 3
        assert conn.execute(text("SELECT count(*) FROM job_errors")).scalar() == 1
    engine.dispose()
