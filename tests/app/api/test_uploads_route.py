"""``POST /collections/{name}/uploads``: files sent with the request are indexed into a
collection, as the UI's Index tab indexes its uploads (``Facet.upload``). Until 2026-12-01 a
client of the API could index only paths on the server (``POST /jobs``). Real minilm, edge
store, SQLite, the app in process (TestClient), multipart bodies as curl and httpx send them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api import create_app

from .conftest import serving_facet


def _ended(client: TestClient, job_id: int, within_s: float = 90.0) -> dict[str, Any]:
    deadline = time.monotonic() + within_s
    while (job := client.get(f"/jobs/{job_id}").json())["state"] in ("queued", "running"):
        assert time.monotonic() < deadline, job
        time.sleep(0.1)
    return job


def _files(*items: tuple[str, bytes]) -> list[tuple[str, tuple[str, bytes, str]]]:
    return [("files", (name, data, "application/octet-stream")) for name, data in items]


def test_uploaded_files_are_indexed_and_searchable(client: TestClient, facet) -> None:
    r = client.post("/collections/notes/uploads", files=_files(
        ("lighthouse.txt", b"The keeper polishes the lighthouse lens every evening."),
        ("garden.md", b"---\ntitle: Garden notes\ntags: [plants]\n---\nTomatoes need sun."),
        ("tool.exe", b"MZ")))
    assert r.status_code == 202, r.text
    answer = r.json()
    job = answer["job"]
    assert r.headers["location"] == f"/jobs/{job['id']}"
    assert job["collection"] == "notes" and job["state"] in ("queued", "running", "completed")
    assert answer["refused"] == ["tool.exe: .exe files cannot be indexed; upload "
                                 + ", ".join(facet.supported_suffixes())]
    assert answer["renamed"] == [] and answer["removed"] == []
    uploads = facet.upload_folder("notes").resolve()
    assert answer["staged"] == [str(uploads / "lighthouse.txt"), str(uploads / "garden.md")]
    done = _ended(client, job["id"])
    assert (done["state"], done["docs_indexed"]) == ("completed", 2)
    folder = facet.upload_folder("notes").resolve()
    listed = client.get("/collections/notes/documents").json()
    assert [d["key"] for d in listed] == [str(folder / "garden.md"),
                                                       str(folder / "lighthouse.txt")]
    found = client.post("/search", json={"query": "lighthouse lens", "collection": "notes",
                                         "k": 1}).json()["results"]
    assert found[0]["doc_id"] == str(folder / "lighthouse.txt")
    filtered = client.post("/search", json={"query": "sun", "collection": "notes",
                                            "filters": {"tags": "plants"}}).json()["results"]
    assert [x["doc_id"] for x in filtered] == [str(folder / "garden.md")]
    # The same name again updates its document; two of one name in one upload are both kept.
    r = client.post("/collections/notes/uploads", files=_files(
        ("lighthouse.txt", b"The keeper trims the lighthouse wick."),
        ("dup.txt", b"first of two"), ("dup.txt", b"second of two")))
    assert r.status_code == 202, r.text
    assert r.json()["renamed"] == ["dup.txt was saved as dup (2).txt: another file of this upload has "
                                   "that name"]
    assert r.json()["staged"] == [str(folder / n) for n in ("lighthouse.txt", "dup.txt", "dup (2).txt")]
    assert _ended(client, r.json()["job"]["id"])["state"] == "completed"
    assert sorted(p.name for p in folder.iterdir()) == ["dup (2).txt", "dup.txt", "garden.md",
                                                        "lighthouse.txt"]
    assert (folder / "lighthouse.txt").read_text() == "The keeper trims the lighthouse wick."
    assert client.get("/collections/notes").json()["documents"] == 4


def test_a_client_names_only_a_file_never_a_place(client: TestClient, facet, tmp_path: Path) -> None:
    """A multipart file name is the client's to choose: "../../x.txt" or a Windows path stay a
    name inside the collection's upload folder."""
    r = client.post("/collections/names/uploads", files=_files(
        ("../../escape.txt", b"a file that tried to climb out"),
        ("C:\\Users\\ann\\report.txt", b"a file from a Windows client"),
        (".hidden.txt", b"a hidden name")))
    assert r.status_code == 202, r.text
    assert _ended(client, r.json()["job"]["id"])["state"] == "completed"
    folder = facet.upload_folder("names")
    assert sorted(p.name for p in folder.iterdir()) == ["escape.txt", "hidden.txt", "report.txt"]
    data = Path(facet.settings.data_dir)
    assert not (data / "escape.txt").exists() and not (data.parent / "escape.txt").exists()


def test_a_refused_upload_stages_nothing(client: TestClient, facet) -> None:
    r = client.post("/collections/refused/uploads", files=_files(("a.exe", b"MZ"), ("b", b"no suffix")))
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "unreadable_data"
    assert error["message"].startswith("Nothing to index: a.exe: .exe files cannot be indexed")
    assert "b: no suffix files cannot be indexed" in error["message"]
    # An embedder the server does not serve: refused before anything is written.
    r = client.post("/collections/refused/uploads?embedder=nope", files=_files(("a.txt", b"text")))
    assert r.status_code == 404 and r.json()["error"]["param"] == "embedder", r.text
    assert not facet.upload_folder("refused").exists()
    assert "refused" not in [c["name"] for c in client.get("/collections").json()]
    # Not a collection name; no files at all.
    r = client.post("/collections/bad%20name/uploads", files=_files(("a.txt", b"text")))
    assert r.status_code == 400, r.text
    r = client.post("/collections/refused/uploads", data={"other": "x"})
    assert r.status_code == 400 and "files" in r.text, r.text
    # A part other than `files`: the embedder given as a form field (it is a query parameter)
    # indexed with the default, and a file under `file` was dropped, each a 202 without a word.
    for data, parts, named in (({"embedder": "nope"}, _files(("a.txt", b"text")), "embedder"),
                               ({}, [*_files(("b.txt", b"b")), ("file", ("c.txt", b"c", "text/plain"))], "file")):
        r = client.post("/collections/refused/uploads", data=data, files=parts)
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert error["param"] == named and error["message"].startswith(f"unknown form field '{named}'")
        assert "?embedder=NAME" in error["message"]
    assert not facet.upload_folder("refused").exists()
    assert "refused" not in [c["name"] for c in client.get("/collections").json()]


def test_an_upload_over_the_body_limit_is_a_413_that_says_so(minilm, tmp_path: Path) -> None:
    facet = serving_facet(tmp_path / "data", minilm, api_max_body_mb=0.01)
    try:
        with TestClient(create_app(facet)) as small:
            r = small.post("/collections/notes/uploads", files=_files(("big.txt", b"word " * 4000)))
            assert r.status_code == 413, r.text
            assert r.json()["error"]["code"] == "request_too_large"
            assert "upload fewer or smaller files" in r.json()["error"]["message"]
            assert not facet.upload_folder("notes").exists()
    finally:
        facet.close()


def test_the_route_is_in_the_openapi_document_as_multipart(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    op = spec["paths"]["/collections/{name}/uploads"]["post"]
    assert op["operationId"] == "uploadFiles"
    assert list(op["requestBody"]["content"]) == ["multipart/form-data"]
    assert {"202", "413", "422"} <= set(op["responses"])
    assert [p["name"] for p in op["parameters"]] == ["name", "embedder"]


@pytest.mark.parametrize("key", ["", "wrong"])
def test_an_upload_needs_the_key_where_one_is_set(minilm, tmp_path: Path, key: str) -> None:
    facet = serving_facet(tmp_path / "data", minilm, api_key="s3cret")
    try:
        with TestClient(create_app(facet)) as keyed:
            headers = {"authorization": f"Bearer {key}"} if key else {}
            r = keyed.post("/collections/notes/uploads", files=_files(("a.txt", b"text")),
                           headers=headers)
            assert r.status_code == 401, r.text
            assert not facet.upload_folder("notes").exists()
    finally:
        facet.close()


def test_a_page_of_another_site_cannot_upload_into_a_keyless_server(client: TestClient, facet) -> None:
    """A multipart POST is a request a browser sends cross-site without a preflight: any page a
    user of a keyless server opened could write files into it (CORS only hid the answer)."""
    r = client.post("/collections/csrf/uploads", files=_files(("a.md", b"planted")),
                    headers={"origin": "http://evil.example"})
    assert r.status_code == 403, r.text
    assert r.json()["error"]["code"] == "cross_site_request"
    assert "http://evil.example" in r.json()["error"]["message"]
    assert not facet.upload_folder("csrf").exists()
    # The server's own pages, and clients that send no Origin (curl, httpx), are not refused.
    r = client.post("/collections/csrf/uploads", files=_files(("a.md", b"mine")),
                    headers={"origin": "http://testserver"})
    assert r.status_code == 202, r.text
    _ended(client, r.json()["job"]["id"])


def test_a_site_listed_in_cors_origins_may_upload(minilm, tmp_path: Path) -> None:
    facet = serving_facet(tmp_path / "data", minilm, cors_origins=["https://app.example.com"])
    try:
        with TestClient(create_app(facet)) as listed:
            r = listed.post("/collections/notes/uploads", files=_files(("a.md", b"text")),
                            headers={"origin": "https://app.example.com"})
            assert r.status_code == 202, r.text
            assert r.headers["access-control-allow-origin"] == "https://app.example.com"
            _ended(listed, r.json()["job"]["id"])
    finally:
        facet.close()


def test_an_upload_into_a_full_temporary_folder_is_unavailable_and_says_where(
        client: TestClient, facet, monkeypatch: pytest.MonkeyPatch) -> None:
    """The resource-limits exploration of the third session of 2026-12-02: with TMPDIR full, an
    upload under 1 MB (copied there by the route) was a 500 with a traceback, and one over 1 MB
    (spooled there by the form parser) a 400 "the request body could not be read as JSON
    (OSError)". Both are now a 503 naming the folder. The full disk is stood in for by the
    write into it raising ENOSPC (a tmpfs cannot be mounted in CI): the route's copy, then the
    spool's move from memory to a file."""
    import errno
    import shutil
    import tempfile

    import app.api.server as server

    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(server.shutil, "copyfileobj", full)
        r = client.post("/collections/tmpfull/uploads", files=_files(("a.txt", b"a small file")))
    assert shutil.copyfileobj is not full
    with monkeypatch.context() as patched:
        patched.setattr(tempfile.SpooledTemporaryFile, "rollover", full)
        big = client.post("/collections/tmpfull/uploads", files=_files(("b.txt", b"word " * 300_000)))
    for answer in (r, big):
        assert answer.status_code == 503, answer.text  # (the old code: 500, then 400)
        error = answer.json()["error"]
        assert error["code"] == "unavailable", error
        # A full disk does not pass by itself: no Retry-After for a client to poll by.
        assert "retry-after" not in answer.headers, answer.headers
        assert error["message"] == (
            f"the server's temporary folder ({tempfile.gettempdir()}), where uploads are received, is "
            "full (No space left on device): free some space there, or point TMPDIR at a disk with "
            "room, and send it again; nothing was staged"), error
    assert not facet.upload_folder("tmpfull").exists()
