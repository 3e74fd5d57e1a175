"""Gradio's own copies of the page's files (its cache folder, ``GRADIO_TEMP_DIR``): an upload
indexed into a collection is removed from it at once (the collection's copy is the only one
left, and deleting the collection removes that), and the page's ``delete_cache`` removes the
rest (Cluster tab uploads, CSV exports) an hour on, and all of them when the server stops.
They stayed for good, served at ``/gradio_api/file=...`` after the collection was deleted and
the server restarted."""

from __future__ import annotations

import os
import re
import time
import uuid
from pathlib import Path

import httpx
import pytest
from gradio_client import handle_file

from ui import inputs

from .conftest import free_port


def wait_for_job(client, job_id: int, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while True:
        html, _errors, _timer = client.predict(job_id, api_name="/job_status")
        state = re.search(r'data-state="(\w+)"', html)
        if state and state.group(1) not in ("queued", "running"):
            return html
        assert time.monotonic() < deadline, html
        time.sleep(0.2)


def test_an_indexed_upload_leaves_no_copy_in_gradios_cache(ui_client, ui_server, tmp_path) -> None:
    from gradio import utils as gr_utils

    tag = uuid.uuid4().hex[:8]
    letter = tmp_path / f"letter-{tag}.txt"
    letter.write_text(f"Dear Dr Okafor, my diagnosis {tag} must stay private.")
    photo = tmp_path / f"photo-{tag}.png"  # refused: .png is not indexed
    photo.write_bytes(b"\x89PNG\r\n\x1a\n" + tag.encode())
    # The path Gradio gives this upload (its cache folder, a folder named by the bytes' hash):
    # the client's own upload below lands at the same one.
    with letter.open("rb") as fh:
        cached = Path(httpx.post(f"{ui_server.ui}gradio_api/upload",
                                 files={"files": (letter.name, fh)}, timeout=10).json()[0])
    assert cached.is_file() and cached.is_relative_to(gr_utils.get_upload_folder())
    job, status, *_ = ui_client.predict([handle_file(str(letter)), handle_file(str(photo))],
                                        "cache-letter", "minilm", api_name="/index_upload")
    assert "cannot be indexed" in status
    assert "1 indexed" in wait_for_job(ui_client, job)
    staged = ui_server.data_dir / "uploads" / "cache-letter" / letter.name
    assert staged.read_text() == letter.read_text()  # the collection's copy, read by the job
    cache = Path(gr_utils.get_upload_folder())
    # os.walk, not rglob: the cache is shared with other UI servers (another test process's),
    # whose delete_cache may remove a folder while it is walked (rglob raised
    # FileNotFoundError there).
    left = [Path(top, name) for top, _dirs, files in os.walk(cache)
            for name in (letter.name, photo.name) if name in files]
    assert left == [], f"Gradio's copies left in its cache: {left}"
    assert not cached.parent.exists()  # its hash-named folder went with it
    assert httpx.get(f"{ui_server.ui}gradio_api/file={cached}", timeout=10).status_code in (403, 404)
    ui_client.predict("cache-letter", "cache-letter", api_name="/delete_collection")
    assert not staged.exists()


def test_only_files_inside_gradios_cache_are_removed(tmp_path) -> None:
    cache = tmp_path / "gradio"
    upload = cache / "1f2e" / "notes.txt"
    upload.parent.mkdir(parents=True)
    upload.write_text("uploaded")
    twin = cache / "9a9a" / "a.txt"  # a folder holding another upload stays
    twin.parent.mkdir()
    twin.write_text("a")
    (cache / "9a9a" / "b.txt").write_text("b")
    mine = tmp_path / "mine" / "notes.txt"  # a caller's own file
    mine.parent.mkdir()
    mine.write_text("mine")
    link = cache / "77" / "link.txt"  # inside the cache, leading out of it
    link.parent.mkdir()
    link.symlink_to(mine)
    assert inputs.remove_cached_uploads([mine], None) == 0
    assert inputs.remove_cached_uploads([upload, twin, mine, link, cache, cache / "gone.txt"],
                                        cache) == 2
    assert not upload.parent.exists() and not twin.exists() and (cache / "9a9a" / "b.txt").exists()
    assert mine.read_text() == "mine" and link.is_symlink() and cache.is_dir()


def test_gradios_copies_of_exports_and_uploads_go_when_the_server_stops(ui_server, tmp_path,
                                                                         monkeypatch) -> None:
    """A CSV export is still served (the client downloads it); at a stop, Gradio removes what
    it cached for the page."""
    from gradio_client import Client

    from ui.app import DELETE_CACHE, launch_ui

    cache = tmp_path / "gradio"
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(cache))
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(["The striker scored a late goal", "The keeper saved a penalty",
                                "Shares fell after the earnings report",
                                "The bank raised its interest rate"]))
    demo = launch_ui(ui_server.facet, port=free_port(), block=False)
    try:
        assert demo.delete_cache == DELETE_CACHE and 0 < DELETE_CACHE[0] <= DELETE_CACHE[1] <= 86400
        client = Client(demo.local_url, verbose=False, download_files=str(tmp_path / "downloads"))
        summary, _plot, _table, csv_path = client.predict(
            "pasted or uploaded texts", "", "", 0, "", "", "", handle_file(str(texts)), None,
            "What is the topic of this text?", 2, "minilm", "keywords (no explainer)",
            api_name="/cluster")
        client.close()
        assert "<b>4</b> texts, <b>k = 2</b>" in summary
        assert "The bank raised its interest rate" in Path(csv_path).read_text()  # served
        held = sorted(p.name for p in cache.rglob("*") if p.is_file())
        assert "texts.txt" in held and any(n.endswith(".csv") for n in held), held
    finally:
        demo.close()
    # Empty folders (named by hashes) and an empty temp file of Gradio's own stay.
    assert [p for p in cache.rglob("*") if p.is_file() and p.stat().st_size] == []


def test_a_cluster_upload_gone_from_the_server_says_to_upload_it_again(tmp_path) -> None:
    for read in (inputs.read_text_list, inputs.read_labels):
        with pytest.raises(Exception, match=r"^data.json: the upload is gone from the server; "
                                            "upload it again$"):
            read(tmp_path / "data.json")
