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
from app.services.indexing import IndexOptions, IndexService
from app.services.search import SearchRequest, SearchService
from indexer import metadata as md

from .conftest import write_corpus

PG_BIN = Path("/usr/lib/postgresql/15/bin")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """A throwaway PostgreSQL cluster: its URL, and a restart (as an operator's upgrade), or a
    stop and a start (an outage); ``restart`` is pg_ctl's command ending in "restart"."""

    def __init__(self, url: str, restart: list[str]) -> None:
        self.url, self._restart = url, restart

    def restart(self) -> None:
        subprocess.run(self._restart, check=True, capture_output=True)

    def stop(self) -> None:
        subprocess.run([*self._restart[:-1], "stop"], check=True, capture_output=True)

    def start(self) -> None:
        subprocess.run([*self._restart[:-1], "start"], check=True, capture_output=True)


@pytest.fixture(scope="module")
def postgres() -> Iterator[Cluster]:
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
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    subprocess.run([*prefix, str(PG_BIN / "pg_ctl"), "-D", str(data), "-w", "-l",
                    str(root / "log"), "-o", options, "start"], check=True, capture_output=True)
    try:
        yield Cluster(f"postgresql+psycopg://facet@127.0.0.1:{port}/postgres",
                      [*prefix, str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w",
                       "-l", str(root / "log"), "-o", options, "restart"])
    finally:
        subprocess.run([*prefix, str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate",
                        "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres: Cluster) -> str:
    return postgres.url


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


def _awkward_source(root: Path) -> dict[str, str]:
    """What SQLite stores and PostgreSQL refused (the whole batch, with a traceback): a record
    id over 1,024 characters, a file whose path is, NUL characters in a record's text and id
    and in a text file past the 8 KiB the binary check reads. Returns the keys by role."""
    import json

    root.mkdir(parents=True)
    records = [{"id": "x" * 1100, "text": "a record whose id is far too long"},
               {"id": "ok", "text": "a normal record about harbour ferries"},
               {"id": "n1", "text": "ferry \u0000timetables for the winter"},
               {"id": "bad\u0000id", "text": "an id holding a NUL"}]
    (root / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    late = root / "late.txt"
    late.write_bytes(b"words about trains. " * 500 + b"oops\x00 a NUL tail\n")
    deep = root
    for i in range(5):
        deep = deep / (f"{i}" * 220)
    deep.mkdir(parents=True)
    (deep / "deep.txt").write_text("a note filed far too deep")
    return {"long": "x" * 1100, "deep": str(deep / "deep.txt"), "late": str(late),
            "records": str(root / "records.jsonl")}


def _check_awkward(ctx, job_id: int, keys: dict[str, str]) -> None:
    job = CollectionService(ctx).job(job_id)
    assert job.state == "completed"
    # indexed: ok, n1, late.txt; refused: the long id, the NUL id, the deep file
    assert (job.docs_indexed, job.docs_failed) == (3, 3)
    errors = {e["document"]: e["message"] for e in job.errors if e["kind"] == "error"}
    assert "its id is 1,100 characters, over the 1,024" in errors[keys["long"]]
    assert "its path is" in errors[keys["deep"]] and "move it to a shorter path" in \
        errors[keys["deep"]]
    assert any("holds a NUL character" in m for m in errors.values())
    warnings = [e["message"] for e in job.errors if e["kind"] == "warning"]
    assert any("1 NUL character removed" in w and "'text'" in w for w in warnings)
    assert any(w.startswith(keys["late"]) and "NUL character removed" in w for w in warnings)
    texts = [h.payload["text"] for h in ctx.store.scroll("awk")]
    assert "ferry timetables for the winter" in texts and not any("\x00" in t for t in texts)
    info = CollectionService(ctx).get("awk")
    assert info.documents_indexed == 3 and info.points == info.chunks


def test_what_sqlite_stores_is_refused_per_document_not_a_crash_on_postgres(
        make_ctx, tmp_path, postgres_url) -> None:
    keys = _awkward_source(tmp_path / "src")
    ctx = make_ctx(database_url=postgres_url)
    report = IndexService(ctx).index(tmp_path / "src", "awk")
    _check_awkward(ctx, report.job_id, keys)
    # A text column named by a long csv header (a survey question), and a job on a folder
    # whose path is over 1,024 characters: both were VARCHARs PostgreSQL enforced.
    header = "How satisfied were you with the booking process, the ferry itself and the help " \
        "our staff gave you at the harbour on the day of travel?"
    (tmp_path / "survey").mkdir()
    (tmp_path / "survey" / "answers.csv").write_text(
        f'id,"{header}"\n1,very happy with the crossing\n')
    done = IndexService(ctx).index(tmp_path / "survey", "survey", IndexOptions(text_column=header))
    assert (done.state, done.docs_indexed) == ("completed", 1)
    deep = IndexService(ctx).index(Path(keys["deep"]).parent, "deep")
    assert (deep.state, deep.docs_failed) == ("completed", 1)
    assert "its path is" in deep.errors[0][1]
    CollectionService(ctx).delete("awk")
    CollectionService(ctx).delete("survey")


def test_the_worker_path_refuses_them_per_document_too_on_postgres(make_ctx, tmp_path,
                                                                   postgres_url) -> None:
    from app.services.distributed import ChunkedIndexService

    keys = _awkward_source(tmp_path / "src")
    ctx = make_ctx(database_url=postgres_url)
    service = ChunkedIndexService(ctx)
    prepared = IndexService(ctx).prepare(tmp_path / "src", "awk", runner="celery")
    for number in service.plan(prepared, 2):
        assert service.run_chunk(prepared.job_id, number).outcome == "done"
    _check_awkward(ctx, prepared.job_id, keys)
    CollectionService(ctx).delete("awk")


def test_a_job_id_past_postgres_integers_is_no_job(make_ctx, postgres_url) -> None:
    from app.errors import NotFoundError

    ctx = make_ctx(database_url=postgres_url)
    with pytest.raises(NotFoundError, match="no index job 2147483648"):
        CollectionService(ctx).job(2**31)
    with ctx.sessions() as session:
        assert md.get_job(session, 2**31) is None


def test_a_database_restart_costs_no_request(make_ctx, tmp_path, postgres) -> None:
    """`facet serve` answered the first request after PostgreSQL restarted with a 500 (a
    pooled connection the server had closed)."""
    ctx = make_ctx(database_url=postgres.url)
    service = CollectionService(ctx)
    assert service.list_all() == []
    postgres.restart()
    assert service.list_all() == []


def test_nul_characters_outside_text_are_no_crash_on_postgres(make_ctx, tmp_path, postgres_url) -> None:
    """A NUL in a field name quoted by a record's error failed the whole batch (the error text
    is stored); one in a collection name or a text column was a 500 over HTTP."""
    import json

    from app.errors import InvalidRequestError, NotFoundError

    src = tmp_path / "src"
    src.mkdir()
    (src / "n.jsonl").write_text(json.dumps({"id": "r4", "body": "ferry four"}) + "\n" +
                                 json.dumps({"id": "r5", "text": "x", "ta\u0000g": 1}) + "\n")
    ctx = make_ctx(database_url=postgres_url)
    report = IndexService(ctx).index(src, "nul", IndexOptions(text_column="body"))
    assert (report.state, report.docs_indexed, report.docs_failed) == ("completed", 1, 1)
    [error] = [e for e in CollectionService(ctx).job(report.job_id).errors if e["kind"] == "error"]
    assert "ta\\x00g" in error["message"]
    with pytest.raises(NotFoundError):
        CollectionService(ctx).get("a\x00b")
    with pytest.raises(InvalidRequestError, match="invalid collection name"):
        SearchService(ctx).search(SearchRequest("ferry", "n\x001", top_k=1))
    with pytest.raises(InvalidRequestError, match="text column's name holds a NUL"):
        IndexService(ctx).prepare(src, "zz", IndexOptions(text_column="bo\x00dy"))
    CollectionService(ctx).delete("nul")


def test_a_table_locked_too_long_is_busy_not_a_hang(tmp_path, postgres_url, monkeypatch) -> None:
    """A session holding a table's lock (idle in its transaction) held every command and API
    request for ever on PostgreSQL; with a lock_timeout set by hand, a 100-line traceback. Now
    the same wait as SQLite's busy timeout, then the same BusyError."""
    from sqlalchemy import create_engine, text

    from app.core import Facet
    from app.errors import BusyError
    from app.settings import FacetSettings

    monkeypatch.setattr(md, "SQLITE_BUSY_TIMEOUT_S", 1)
    facet = Facet(FacetSettings(data_dir=tmp_path / "data", database_url=postgres_url))
    other = create_engine(postgres_url)
    try:
        before = facet.collections()  # migrated, connected (the module's database is shared)
        facet.close()
        facet = Facet(FacetSettings(data_dir=tmp_path / "data", database_url=postgres_url))
        with other.connect() as holder:
            holder.execute(text("LOCK TABLE collections IN ACCESS EXCLUSIVE MODE"))
            with pytest.raises(BusyError, match=r"the metadata database \(PostgreSQL\) stayed "
                                                r"locked .* \(1 s\); try again"):
                facet.collections()
            holder.rollback()
        assert facet.collections() == before
    finally:
        facet.close()
        other.dispose()


def test_an_empty_filtered_search_names_missing_keys_on_postgres(make_ctx, tmp_path, postgres_url) -> None:
    """The hint reads the documents' metadata JSON in SQL (SearchService._field_values): the
    same expression on PostgreSQL, for strings and numbers as well as a missing key."""
    import json

    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps({"_id": f"r{i}", "text": f"ferry timetable {i}", "topic": "travel",
                                       "n": i}) + "\n" for i in range(3)))
    ctx = make_ctx(database_url=postgres_url)
    IndexService(ctx).index(src, "pgf")
    service = SearchService(ctx)

    def note(filters: dict) -> str | None:
        response = service.search(SearchRequest("ferry", "pgf", top_k=3, mode="dense", filters=filters))
        assert response.results == []
        return response.note

    try:
        assert note({"topik": "travel"}) == "no document has a field 'topik' (did you mean 'topic'?)"
        # A number no document holds: named, as a string value is (null until 2026-12-06).
        assert note({"n": 99}) == "no document has the number 99 in field 'n'"
        # A string value no document holds in a field of strings (the sixth session of
        # 2026-12-02): said, and close spellings read on PostgreSQL too.
        assert note({"topic": "cooking"}) == "no document has 'cooking' in field 'topic'"
        assert note({"topic": "Travel"}) == "no document has 'Travel' in field 'topic' (did you mean 'travel'?)"
    finally:
        CollectionService(ctx).delete("pgf")  # (the database is shared by the module's tests)


def test_a_relative_source_is_matched_in_any_case_on_postgres_as_on_sqlite(make_ctx, tmp_path,
                                                                          postgres_url) -> None:
    """`source=md/NOTE1.md` was told of .../md/note1.md on SQLite (whose LIKE ignores the case
    of ASCII letters) and of nothing on PostgreSQL (the PostgreSQL review of the fourth session
    of 2026-12-06)."""
    (tmp_path / "src" / "md").mkdir(parents=True)
    (tmp_path / "src" / "md" / "note1.md").write_text("ferry timetable for the winter")
    notes = {}
    for name, url in (("sqlite", None), ("postgres", postgres_url)):
        ctx = make_ctx(data_dir=tmp_path / name, database_url=url)
        IndexService(ctx).index(tmp_path / "src", "pgcase")
        try:
            response = SearchService(ctx).search(SearchRequest(
                "ferry", "pgcase", top_k=3, mode="dense", filters={"source": "md/NOTE1.md"}))
            assert response.results == []
            notes[name] = response.note or ""
        finally:
            CollectionService(ctx).delete("pgcase")
    want = f"source={tmp_path / 'src' / 'md' / 'note1.md'}"
    assert want in notes["postgres"] and want in notes["sqlite"], notes


def test_a_database_outage_under_a_running_server_is_unavailable_not_a_bug(make_ctx, tmp_path,
                                                                          postgres: Cluster) -> None:
    """PostgreSQL stopped under a running server: every request was a 500 "internal error
    (OperationalError)" with a traceback. It is a 503 naming the database, and the server
    answers again once it is back."""
    from app.core import Facet
    from app.errors import UnavailableError

    write_corpus(tmp_path / "src", 2)
    facet = Facet(context=make_ctx(database_url=postgres.url))
    try:
        facet.index(tmp_path / "src", "outage")
        postgres.stop()
        try:
            for call in (facet.collections, lambda: facet.search(SearchRequest("bank", "outage"))):
                with pytest.raises(UnavailableError) as caught:
                    call()
                assert str(caught.value).startswith("the metadata database (PostgreSQL) is out of "
                                                    "reach: "), caught.value
                assert str(caught.value).endswith("nothing was changed: retry when it is back "
                                                  "(FACET_DATABASE_URL)")
                assert caught.value.retry_after_s == 5.0  # (an API client's Retry-After)
        finally:
            postgres.start()
        assert [c.name for c in facet.collections()] == ["outage"]
        facet.delete_collection("outage")
    finally:
        facet.close()


def test_only_a_database_server_out_of_reach_asks_to_be_retried(tmp_path, postgres: Cluster) -> None:
    """A server down may come back (an API client's 503 carries ``Retry-After``); a database that
    is not there will not without someone acting, and a client should not poll it (every 503
    came without the header, whatever its cause)."""
    from app.errors import UnavailableError
    from app.services.context import open_database
    from app.settings import FacetSettings

    waits = {}
    for name, url in (("down", f"postgresql+psycopg://facet@127.0.0.1:{_free_port()}/facet"),
                      ("no such database", postgres.url.rsplit("/", 1)[0] + "/no_such_db")):
        with pytest.raises(UnavailableError) as caught:
            open_database(FacetSettings(data_dir=tmp_path / "data", database_url=url))
        waits[name] = caught.value.retry_after_s
    assert waits == {"down": 5.0, "no such database": None}, waits


def test_a_database_dropped_under_a_running_server_is_no_outage_to_wait_for(make_ctx, tmp_path,
                                                                           postgres: Cluster) -> None:
    """The server answers the connection with a refusal of its own (its database dropped): it
    read "out of reach ... retry when it is back", with Retry-After, for what waiting never
    mends (the verification round of the third session of 2026-12-07)."""
    from sqlalchemy import create_engine, text

    from app.core import Facet
    from app.errors import UnavailableError

    admin = create_engine(postgres.url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text("DROP DATABASE IF EXISTS dropped"))
        conn.execute(text("CREATE DATABASE dropped"))
    facet = Facet(context=make_ctx(database_url=postgres.url.rsplit("/", 1)[0] + "/dropped"))
    try:
        assert facet.collections() == []
        with admin.connect() as conn:
            conn.execute(text("DROP DATABASE dropped WITH (FORCE)"))
        with pytest.raises(UnavailableError) as caught:
            facet.collections()
        said = str(caught.value)
        assert said.startswith("the metadata database (PostgreSQL) refused the connection: "), said
        assert 'database "dropped" does not exist' in said and said.endswith(
            "check its database, user and password (FACET_DATABASE_URL)"), said
        assert caught.value.retry_after_s is None
    finally:
        facet.close()
        admin.dispose()


def test_the_slots_kept_for_superusers_are_a_connection_limit() -> None:
    """A full server's usual words to an application's role were read as a database that cannot
    be opened ("check FACET_DATABASE_URL"), with no Retry-After."""
    psycopg = pytest.importorskip("psycopg", reason="install psycopg[binary] (the dev extra)")
    from sqlalchemy.exc import OperationalError

    from app.errors import connection_limit

    for words in ("remaining connection slots are reserved for non-replication superuser "
                  "connections", "remaining connection slots are reserved for roles with the "
                  "SUPERUSER attribute"):
        refused = psycopg.OperationalError(f'connection failed: connection to server at '
                                           f'"127.0.0.1", port 5432 failed: FATAL:  {words}')
        assert connection_limit(OperationalError("connect", {}, refused)) == words


def test_a_database_out_of_reach_is_one_line_with_its_password_masked(tmp_path) -> None:
    """`facet serve`, `facet collections`... with FACET_DATABASE_URL's server down printed the
    URL with its password, after a 140-line traceback for `facet serve` (on every restart of a
    compose service). One line, the password masked, exit 7 (unavailable: retry later)."""
    pytest.importorskip("psycopg", reason="install psycopg[binary] (the dev extra)")
    from tests.app.cli_runner import invoke_cli

    url = f"postgresql+psycopg://facet:s3cret-pw@127.0.0.1:{_free_port()}/facet"  # nobody listens
    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "FACET_DATABASE_URL": url}
    for args in (["collections"], ["serve", "--port", str(_free_port())]):
        done = invoke_cli(*args, env=env)
        assert done.returncode == 7, (args, done.stdout, done.stderr)
        said = done.stderr.strip()
        assert said.startswith(f"error: cannot open the metadata database "
                               f"'postgresql+psycopg://facet:***@{url.split('@')[1]}': connection "
                               "failed: "), said
        assert said.endswith("; check FACET_DATABASE_URL") and "\n" not in said
        assert "s3cret-pw" not in done.stdout + done.stderr


@pytest.mark.parametrize(("password", "hidden"), [
    ("pa#ss9word", ["pa#ss9word", "ss9word"]),  # urlsplit read it as a fragment: printed whole
    ("p@ss9word", ["ss9word"]),  # an unencoded @: SQLAlchemy reads "ss9word@127..." as the host
    ("query", ["hunter3pw"]),  # ?password=... in the query
])
def test_every_form_of_a_database_password_is_hidden(tmp_path, password, hidden) -> None:
    """The verification round: a password holding '#' was printed whole (the masking parsed the
    URL otherwise than SQLAlchemy), one holding '@' spilled its tail into the driver's "failed to
    resolve host 'ss9@127.0.0.1'", and a query's password=... was printed as it was."""
    pytest.importorskip("psycopg", reason="install psycopg[binary] (the dev extra)")
    from tests.app.cli_runner import invoke_cli

    port = _free_port()
    url = (f"postgresql+psycopg://facet@127.0.0.1:{port}/facet?password=hunter3pw" if password == "query"
           else f"postgresql+psycopg://facet:{password}@127.0.0.1:{port}/facet")
    done = invoke_cli("collections", env={"FACET_DATA_DIR": str(tmp_path / "data"), "FACET_DATABASE_URL": url})
    assert done.returncode == 7, done.stderr
    assert done.stderr.startswith("error: cannot open the metadata database 'postgresql+psycopg://facet"), done.stderr
    assert not [h for h in hidden if h in done.stdout + done.stderr], done.stderr
    if "@" in password:
        assert "percent-encoded, %40 for @" in done.stderr


def test_a_host_whose_clock_runs_ahead_takes_no_live_lease_and_is_warned(
        make_ctx, postgres_url, monkeypatch, caplog) -> None:
    """Leases shared by several hosts through PostgreSQL were timed by each host's own clock: a
    host whose clock ran two minutes ahead found another host's live lease (60 s) expired and
    took it over. They are timed by the server's clock now, and a host whose clock is off by
    more than a quarter of a lease is told so when it opens the database. The skew is this
    process's clock made to run ahead (``md.utcnow``, what each host read); the server is real."""
    import datetime as dt
    import logging

    from app.services import leases

    ctx = make_ctx(database_url=postgres_url)
    with ctx.sessions() as s:
        coll = md.create_collection(s, "skew", backend="edge", chunk_size=64, chunk_overlap=8,
                                    tokenizer="t")
        first = md.IndexJob(collection_id=coll.id, source="a", embedder="minilm", state="running",
                            runner="inline", host="host-a", pid=1)
        second = md.IndexJob(collection_id=coll.id, source="b", embedder="minilm", state="queued",
                             runner="inline", host="host-b", pid=2)
        s.add_all([first, second])
        s.commit()
        assert leases.acquire(s, coll.id, first.id, 60.0) is None  # host A, clock right
        real = md.utcnow
        monkeypatch.setattr(md, "utcnow", lambda: real() + dt.timedelta(minutes=2))  # host B
        holder = leases.acquire(s, coll.id, second.id, 60.0)
        assert holder is not None and holder.job_id == first.id  # (it was taken over)
        with caplog.at_level(logging.WARNING, logger="app.services.leases"):
            offset = leases.warn_if_clock_off(ctx.engine, 60.0)
        assert offset is not None and 115 < offset < 125, offset
        assert "this host's clock is 120s ahead of the metadata database server's" in caplog.text
        monkeypatch.setattr(md, "utcnow", real)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="app.services.leases"):
            right = leases.warn_if_clock_off(ctx.engine, 60.0)
        assert right is not None and abs(right) < 5 and "clock" not in caplog.text
        s.execute(md.Collection.__table__.delete().where(md.Collection.id == coll.id))
        s.commit()


def test_a_server_at_its_connection_limit_is_said_so(postgres: Cluster, tmp_path) -> None:
    """The PostgreSQL exploration of the sixth session of 2026-12-05: with max_connections used
    up, every command said "cannot open the metadata database ...: too many clients already;
    check FACET_DATABASE_URL" (the URL was right) and every search "is out of reach". A role
    that may open no connection stands for a full server (the same SQLSTATE, 53300; a
    superuser's own limit is not enforced)."""
    from sqlalchemy import create_engine, text

    from app.errors import UnavailableError, as_domain_error, connection_limit_text
    from tests.app.cli_runner import invoke_cli

    admin = create_engine(postgres.url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text("DROP ROLE IF EXISTS full_up"))
        conn.execute(text("CREATE ROLE full_up LOGIN CONNECTION LIMIT 0"))
    admin.dispose()
    url = postgres.url.replace("://facet@", "://full_up@")
    done = invoke_cli("collections", env={"FACET_DATA_DIR": str(tmp_path / "data"),
                                          "FACET_DATABASE_URL": url})
    said = connection_limit_text('too many connections for role "full_up"')
    assert done.returncode == 7 and done.stderr.strip() == f"error: {said}", done.stderr
    engine = create_engine(md.engine_url(url))
    with pytest.raises(Exception) as e:
        engine.connect()
    engine.dispose()
    domain = as_domain_error(e.value)
    assert isinstance(domain, UnavailableError) and str(domain) == said


def test_a_poolers_passing_refusal_is_an_outage_to_wait_for() -> None:
    """PgBouncer answers "FATAL: pgbouncer cannot connect to server" while the database behind
    it is down: every FATAL was read as lasting (no Retry-After, "check its password"; the
    final read of the third session of 2026-12-07). Only the lasting ones are."""
    psycopg = pytest.importorskip("psycopg", reason="install psycopg[binary] (the dev extra)")
    from sqlalchemy.exc import OperationalError

    from app.errors import database_may_come_back

    def refused(words: str) -> OperationalError:
        return OperationalError("connect", {}, psycopg.OperationalError(
            f'connection failed: connection to server at "127.0.0.1", port 6432 failed: FATAL:  {words}'))

    for passing in ("pgbouncer cannot connect to server", "the database system is starting up",
                    "server login has been failing, try again later (server_login_retry)"):
        assert database_may_come_back(refused(passing)), passing
    for lasting in ('database "facet" does not exist', 'password authentication failed for user "f"',
                    'no pg_hba.conf entry for host "10.0.0.9"', 'role "f" is not permitted to log in'):
        assert not database_may_come_back(refused(lasting)), lasting
