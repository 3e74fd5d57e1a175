"""``POST /collections/{name}/uploads`` of more files than the form parser takes in one request
(Starlette's ``max_files``, 1,000): a 413 ``request_too_large`` that names the limit and says to
split the upload, as a body over FACET_API_MAX_BODY_MB is refused. It was a 400 "Too many
files. Maximum number of files is 1000." with no advice, and docs/api.md named only the body
limit. Real minilm, SQLite, the app in process (TestClient)."""

from __future__ import annotations

import time
from pathlib import Path

from fastapi.testclient import TestClient

from app.api import create_app

from .conftest import serving_facet


def _tiny(n: int) -> list[tuple[str, tuple[str, bytes, str]]]:
    return [("files", (f"n{i}.txt", f"note {i}".encode(), "text/plain")) for i in range(n)]


def test_more_than_a_thousand_files_is_a_413_that_says_to_split(minilm, tmp_path: Path) -> None:
    facet = serving_facet(tmp_path / "data", minilm)
    try:
        with TestClient(create_app(facet)) as client:
            r = client.post("/collections/many/uploads", files=_tiny(1001))
            assert r.status_code == 413, r.text
            error = r.json()["error"]
            assert (error["code"], error["type"]) == ("request_too_large", "invalid_request_error")
            assert "1,000 files" in error["message"]
            assert "upload at most 1,000 files per request" in error["message"]
            assert not facet.upload_folder("many").exists()  # nothing staged
            assert "many" not in [c["name"] for c in client.get("/collections").json()]
            # The limit itself is still taken.
            r = client.post("/collections/many/uploads", files=_tiny(1000))
            assert r.status_code == 202, r.text
            assert len(r.json()["staged"]) == 1000
            job = r.json()["job"]["id"]
            client.post(f"/jobs/{job}/cancel")  # (indexing a thousand notes is not the point)
            deadline = time.monotonic() + 120
            while client.get(f"/jobs/{job}").json()["state"] in ("queued", "running"):
                assert time.monotonic() < deadline
                time.sleep(0.1)
            # Another multipart refusal keeps its 400: only "too many files" is mapped.
            r = client.post("/collections/many/uploads",
                            data={f"f{i}": "x" for i in range(1001)}, files=_tiny(1))
            assert r.status_code == 400, r.text
    finally:
        facet.close()


def test_the_route_documents_the_file_limit(minilm, tmp_path: Path) -> None:
    facet = serving_facet(tmp_path / "data", minilm)
    try:
        with TestClient(create_app(facet)) as client:
            op = client.get("/openapi.json").json()["paths"]["/collections/{name}/uploads"]["post"]
            assert "1,000 files" in op["responses"]["413"]["description"]
    finally:
        facet.close()


def test_a_name_with_a_long_suffix_is_refused_for_its_type_and_both_unicode_forms_are_one_file(
        minilm, tmp_path: Path) -> None:
    """"a." + 250 x's: only the stem was cut to fit, so the staged name was over the file
    system's 255 bytes, a 500 (OSError: File name too long). "bär.txt" typed on a Mac arrives
    decomposed (NFD): it was staged beside the composed one, two documents of one name."""
    import unicodedata

    from app.uploads import original_name

    assert original_name(Path(unicodedata.normalize("NFD", "bär.txt"))) == unicodedata.normalize("NFC", "bär.txt")
    facet = serving_facet(tmp_path / "data", minilm)
    try:
        with TestClient(create_app(facet), raise_server_exceptions=False) as client:
            r = client.post("/collections/names/uploads",
                            files=[("files", ("a." + "x" * 250, b"text", "text/plain")),
                                   ("files", (unicodedata.normalize("NFC", "bär.txt"), b"one", "text/plain"))])
            assert r.status_code == 202, r.text
            [refused] = r.json()["refused"]
            assert refused.startswith("a." + "x" * 20) and "files cannot be indexed" in refused, refused
            job = r.json()["job"]["id"]
            deadline = time.monotonic() + 120
            while client.get(f"/jobs/{job}").json()["state"] in ("queued", "running"):
                assert time.monotonic() < deadline
                time.sleep(0.1)
            r = client.post("/collections/names/uploads",
                            files=[("files", (unicodedata.normalize("NFD", "bär.txt"), b"two", "text/plain"))])
            assert r.status_code == 202, r.text
            staged = sorted(p.name for p in facet.upload_folder("names").iterdir())
            assert staged == [unicodedata.normalize("NFC", "bär.txt")], staged
    finally:
        facet.close()
