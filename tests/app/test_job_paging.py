"""Paging through jobs and a job's errors.

`GET /jobs/{id}?errors=N` returned a job's first N per-document errors, at most 1,000, with no
offset: a job with 20,000 errors could never return error 1,001 over HTTP (``errors_total``
counted them all). `GET /jobs` had only `limit` (at most 1,000): older jobs past it could not be
listed. `offset` (GET /jobs, `facet jobs --offset`) skips the newest jobs, `errors_offset`
(GET /jobs/{id}, `facet jobs ID --errors-offset`) a job's first errors, both an SQL OFFSET.

Real SQLite, jobs and errors written through the metadata layer (no model is loaded).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from app.api import create_app
from app.core import Facet
from app.errors import InvalidRequestError
from app.services.collections import JobList
from app.settings import FacetSettings
from indexer import metadata as md
from tests.app.cli_runner import invoke_cli

JOBS = 25  # of collection "pg"; one more, of "other", between them
ERRORS = 1203  # of pg's first job: past MAX_JOB_ERRORS


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data folder whose metadata holds ``JOBS`` completed jobs of "pg" (the first with
    ``ERRORS`` errors, document keys e0, e1, ...) and one of "other" written after the 10th."""
    data = tmp_path / "data"
    facet = Facet(FacetSettings(data_dir=data))
    try:
        with facet.catalog.ctx.sessions.begin() as session:
            pg = md.create_collection(session, "pg", backend="edge", chunk_size=64,
                                      chunk_overlap=8, tokenizer="minilm")
            other = md.create_collection(session, "other", backend="edge", chunk_size=64,
                                         chunk_overlap=8, tokenizer="minilm")
            for n in range(JOBS):
                if n == 10:
                    session.add(md.IndexJob(collection_id=other.id, source="o", embedder="minilm",
                                            state="completed"))
                    session.flush()
                job = md.IndexJob(collection_id=pg.id, source=f"s{n}", embedder="minilm",
                                  state="completed", docs_failed=ERRORS if n == 0 else 0)
                session.add(job)
                session.flush()
                if n == 0:
                    session.add_all(md.JobError(job_id=job.id, document_key=f"e{i}", kind="error",
                                                message=f"bad {i}") for i in range(ERRORS))
    finally:
        facet.close()
    return data


@pytest.fixture
def facet(data_dir: Path) -> Iterator[Facet]:
    opened = Facet(FacetSettings(data_dir=data_dir))
    yield opened
    opened.close()


def _pg_ids(facet: Facet) -> list[int]:
    with facet.catalog.ctx.sessions() as session:
        pg = md.get_collection(session, "pg")
        assert pg is not None
        return [j.id for j in md.list_jobs(session, pg.id, 1000)]


def test_facade_pages_jobs_and_errors_in_sql(facet: Facet) -> None:
    every = _pg_ids(facet)
    assert len(every) == JOBS and every == sorted(every, reverse=True)
    statements: list[str] = []

    def seen(conn, cursor, statement, parameters, context, executemany) -> None:
        statements.append(statement)

    event.listen(facet.catalog.ctx.engine, "before_cursor_execute", seen)
    try:
        pages = [facet.jobs("pg", limit=10, offset=k) for k in (0, 10, 20)]
        first = facet.job(every[-1], errors=1000)
        rest = facet.job(every[-1], errors=1000, errors_offset=1000)
    finally:
        event.remove(facet.catalog.ctx.engine, "before_cursor_execute", seen)
    # Newest first, no gap, no repeat; the last page is short.
    assert [len(p) for p in pages] == [10, 10, 5]
    assert [j.id for p in pages for j in p] == every
    assert facet.jobs("pg", limit=10, offset=JOBS) == []
    assert facet.jobs("pg", limit=10, offset=10**30) == []  # past any table: no SQL overflow
    assert all(isinstance(p, JobList) for p in pages)
    assert [p.not_shown for p in pages if isinstance(p, JobList)][1:] == [5, 0]  # the older ones past the page
    # Errors 1,001 and later, in the order written; the total counts them all.
    assert [e["document"] for e in first.errors + rest.errors] == [f"e{i}" for i in range(ERRORS)]
    assert (len(rest.errors), rest.errors_total) == (ERRORS - 1000, ERRORS)
    assert rest.errors[0] == {"document": "e1000", "kind": "error", "message": "bad 1000"}
    assert [e["document"] for e in facet.job(every[-1], errors=None, errors_offset=1200).errors
            ] == ["e1200", "e1201", "e1202"]
    past = facet.job(every[-1], errors=5, errors_offset=ERRORS)
    assert past.errors == [] and past.errors_total == ERRORS
    # Pushed into SQL: an OFFSET, not a slice of every row read.
    assert any("FROM job_errors" in s and "OFFSET" in s for s in statements), statements
    assert any("FROM index_jobs" in s and "OFFSET" in s for s in statements), statements
    for bad in (-1, 2.5, True, "3"):
        with pytest.raises(InvalidRequestError, match="offset must be a whole number, 0 or more") as e:
            facet.jobs("pg", offset=bad)  # type: ignore[arg-type]
        assert e.value.param == "offset"
        with pytest.raises(InvalidRequestError, match="errors_offset must be a whole number") as e:
            facet.job(every[-1], errors_offset=bad)  # type: ignore[arg-type]
        assert e.value.param == "errors_offset"


def test_a_job_still_going_follows_the_first_page_only(facet: Facet) -> None:
    """The first page lists every older job that has not ended after its ``limit`` rows (as
    before); a later page is the ``limit`` jobs after ``offset``, no more, so each page's
    first ``limit`` rows concatenate to every job once."""
    every = _pg_ids(facet)
    with facet.catalog.ctx.sessions.begin() as session:
        old = session.get(md.IndexJob, every[-2])
        assert old is not None
        old.state = "queued"  # an old job still waiting
    first = facet.jobs("pg", limit=10)
    assert [j.id for j in first] == [*every[:10], every[-2]]
    later = [facet.jobs("pg", limit=10, offset=k) for k in (10, 20)]
    assert [j.id for p in [first[:10], *later] for j in p] == every
    assert later[1][-2].state == "queued"


def test_api_pages_jobs_and_errors(facet: Facet) -> None:
    every = _pg_ids(facet)
    with TestClient(create_app(facet)) as client:
        spec = client.get("/openapi.json").json()
        listed = {p["name"]: p for p in spec["paths"]["/jobs"]["get"]["parameters"]}
        assert listed["offset"]["schema"]["minimum"] == 0 and listed["offset"]["schema"]["default"] == 0
        one = {p["name"]: p for p in spec["paths"]["/jobs/{job_id}"]["get"]["parameters"]}
        assert one["errors_offset"]["schema"]["minimum"] == 0

        pages = [client.get("/jobs", params={"collection": "pg", "limit": 10, "offset": k})
                 for k in (0, 10, 20, 25, 1000)]
        assert all(r.status_code == 200 for r in pages), [r.text for r in pages]
        assert [j["id"] for r in pages for j in r.json()] == every
        assert pages[3].json() == [] and pages[4].json() == []
        # Only a page with older jobs behind it says so, with the next page's URL: following
        # the Links from the first page reads every job once, and the last page has none.
        # (The next page is before this one's last job: by offset, a job deleted meanwhile
        # shifted it, and as many jobs were never listed.)
        assert pages[0].headers["Link"] == \
            f'</jobs?limit=10&before={every[9]}&collection=pg>; rel="next"'
        assert pages[0].headers["X-Facet-Jobs-Not-Shown"] == "15"
        assert "Link" not in pages[2].headers and "Link" not in pages[3].headers
        followed, url = [], "/jobs?collection=pg&limit=10"
        while url:
            r = client.get(url)
            followed += [j["id"] for j in r.json()]
            url = r.headers.get("Link", "").partition(">")[0].removeprefix("<")
        assert followed == every
        assert spec["paths"]["/jobs"]["get"]["responses"]["200"]["headers"]["Link"]
        assert len(client.get("/jobs", params={"offset": 20}).json()) == JOBS + 1 - 20

        shown: list[str] = []
        for k in range(0, ERRORS + 1000, 1000):
            r = client.get(f"/jobs/{every[-1]}", params={"errors": 1000, "errors_offset": k})
            assert r.status_code == 200, r.text
            assert r.json()["errors_total"] == ERRORS
            shown += [e["document"] for e in r.json()["errors"]]
        assert shown == [f"e{i}" for i in range(ERRORS)]

        for params, param in (({"offset": -1}, "offset"), ({"offset": "x"}, "offset"),
                              ({"offset": "1.5"}, "offset")):
            r = client.get("/jobs", params=params)
            assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text
        r = client.get("/jobs", params={"offset": -1})
        assert r.json()["error"]["message"] == "offset must be a whole number, 0 or more, got -1"
        r = client.get(f"/jobs/{every[-1]}", params={"errors_offset": -3})
        assert r.status_code == 400 and r.json()["error"]["param"] == "errors_offset", r.text
        assert r.json()["error"]["message"] == ("errors_offset must be a whole number, 0 or "
                                                "more, got -3")


def test_cli_offset_and_errors_offset(data_dir: Path) -> None:
    env = {"FACET_DATA_DIR": str(data_dir)}
    every = list(range(JOBS + 1, 11, -1)) + list(range(10, 0, -1))  # "other" is job 11
    page = invoke_cli("jobs", "-c", "pg", "--limit", "10", "--offset", "10", "--json", env=env)
    assert page.returncode == 0, page.stderr
    assert [j["id"] for j in json.loads(page.stdout)] == every[10:20]
    # stdout is the list alone; the jobs left out are said on stderr, with the next page.
    assert page.stderr.strip() == ("… 5 older jobs not shown (--limit 10 --offset 20 shows the "
                                   "next ones; --limit N: N a page, up to 1000)")
    last = invoke_cli("jobs", "-c", "pg", "--limit", "10", "--offset", "20", "--json", env=env)
    assert len(json.loads(last.stdout)) == 5 and last.stderr == ""
    text = invoke_cli("jobs", "-c", "pg", "--limit", "10", "--offset", "10", env=env).stdout
    assert text.splitlines()[-1] == ("… 5 older jobs not shown (--limit 10 --offset 20 shows the "
                                     "next ones; --limit N: N a page, up to 1000)")
    assert invoke_cli("jobs", "-c", "pg", "--offset", "99", env=env).stdout == (
        "no index jobs past the newest 99: there are 25 of collection pg\n")

    errs = invoke_cli("jobs", "1", "--errors", "2", "--errors-offset", "1200", env=env)
    assert errs.returncode == 0, errs.stderr
    lines = errs.stdout.splitlines()
    assert lines[-4:] == [
        "  errors 1201 to 1202 of 1203:", "  error: e1200: bad 1200", "  error: e1201: bad 1201",
        "  ... 1 more (of 1203): facet jobs 1 --errors 2 --errors-offset 1202 shows the next ones "
        "(--errors N: N a page, up to 1000)"]
    as_json = json.loads(invoke_cli("jobs", "1", "--errors", "1000", "--errors-offset", "1000",
                                    "--json", env=env).stdout)
    assert [e["document"] for e in as_json["errors"]][:2] == ["e1000", "e1001"]
    assert len(as_json["errors"]) == ERRORS - 1000

    bad = invoke_cli("jobs", "--offset", "-1", env=env)
    assert bad.returncode == 2 and "offset must be a whole number, 0 or more, got -1" in bad.stderr
    assert invoke_cli("jobs", "--errors-offset", "5", env=env).returncode == 2
    assert invoke_cli("jobs", "1", "--offset", "5", env=env).returncode == 2


def test_keyset_pages_of_jobs_are_not_shifted_by_a_collection_deleted_meanwhile(
        facet: Facet) -> None:
    """The API review of the fifth session of 2026-12-06: a page of GET /jobs read, then a
    collection deleted (its jobs with it), then the Link followed: by offset the next page
    started as many jobs later, and those were never listed. ``before`` the last id read (the
    Link's now) is not shifted; ``not_shown`` counts past the page in the same terms."""
    with TestClient(create_app(facet)) as client:
        first = client.get("/jobs", params={"limit": 5})
        every = [j["id"] for j in first.json()]
        assert len(every) == 5 and first.headers["X-Facet-Jobs-Not-Shown"] == str(JOBS + 1 - 5)
        facet.delete_collection("other")  # its one job (11) goes, older than this page
        url = first.headers["Link"].partition(">")[0].removeprefix("<")
        assert f"before={every[-1]}" in url
        while url:
            r = client.get(url)
            assert r.status_code == 200, r.text
            every += [j["id"] for j in r.json()]
            url = r.headers.get("Link", "").partition(">")[0].removeprefix("<")
        assert every == [i for i in range(JOBS + 1, 0, -1) if i != 11]  # none skipped
        # Past the oldest, none; past any id, every job (it was a 500: SQLite's 64 bits);
        # a bad `before` is named.
        assert client.get("/jobs", params={"before": 1}).json() == []
        huge = client.get("/jobs", params={"before": 10**30, "limit": 1000})
        assert huge.status_code == 200 and len(huge.json()) == JOBS, huge.text
        for bad in (0, -2, "x"):
            r = client.get("/jobs", params={"before": bad})
            assert r.status_code == 400 and r.json()["error"]["param"] == "before", r.text
    older = facet.jobs("pg", limit=3, offset=1, before=20)
    assert [j.id for j in older] == [18, 17, 16]
    assert isinstance(older, JobList) and older.not_shown == 15 - 1  # 15..1, job 11 gone
    env = {"FACET_DATA_DIR": str(facet.settings.data_dir)}
    text = invoke_cli("jobs", "-c", "pg", "--limit", "3", "--before", "20", env=env).stdout
    assert text.splitlines()[-1] == ("… 15 older jobs not shown (--limit 3 --before 17 shows "
                                     "the next ones; --limit N: N a page, up to 1000)"), text
    # A first page names the next --before too (it named "--offset 3", which the collection
    # deleted above would have shifted), and following it from there lists every job once.
    first = invoke_cli("jobs", "-c", "pg", "--limit", "3", env=env).stdout.splitlines()
    ids = [int(line.split()[1].rstrip(":")) for line in first if line.startswith("job ")]
    assert first[-1] == (f"… {JOBS - 3} older jobs not shown (--limit 3 --before {ids[-1]} "
                         "shows the next ones; --limit N: N a page, up to 1000)"), first
    assert invoke_cli("jobs", "--before", "1", env=env).stdout == "no index jobs older than job 1\n"
    assert len(facet.jobs("pg", limit=1000, before=2**70)) == JOBS
