"""One ``facet serve`` app (API + the UI mounted at /ui) on a real uvicorn server in a thread,
over a temp data folder holding a small BANKING77 collection with a planted document, sharing
the session's minilm. Both the gradio_client tests and the browser test use it."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.api import create_app
from app.commands.demo import SAMPLE_FILE
from app.core import Facet
from app.encoding import EmbedderCache
from app.settings import FacetSettings

COLLECTION = "demo-banking77"
PLANTED_ID = "planted-parcel-locker"
PLANTED_TEXT = ("The parcel locker on Quayside Road swallowed my replacement card and the "
                "courier says it was delivered.")
# A query that shares words with the planted document, so it ranks first and is highlighted.
PLANTED_QUERY = "parcel locker swallowed my replacement card"
PLANTED_INSTRUCTION = "Find messages about a card that never arrived"
HOSTILE_TEXT = "Card <script>alert('x')</script> & <b>bold</b> declined at the kiosk"
SAMPLE_SIZE = 48  # texts of the bundled sample: every 6th, so many intents are present


NOTES = ["My card has not arrived yet.", "Where is my new card?", "The card I ordered never came.",
         "I want a refund for this.", "Please give my money back.", "Refund the payment, please."]


def notes_facet(folder: Path, minilm: Any) -> Facet:
    """A serving facade over ``folder`` holding collection ``notes`` (``NOTES``, indexed with the
    session's minilm): the handler-level UI tests' (close it)."""
    source = folder / "notes.jsonl"
    source.write_text("".join(json.dumps({"id": f"n{i}", "text": t}) + "\n"
                              for i, t in enumerate(NOTES)))
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facet = Facet.for_serving(FacetSettings(data_dir=folder / "data", default_embedder="minilm"),
                              embedders=cache)
    facet.index(source, "notes")
    return facet


@contextlib.contextmanager
def served_notes_ui(root: Path, minilm: Any, exports: Path) -> Iterator[tuple[Any, Facet]]:
    """The UI alone (``build_ui``, launched by Gradio on a free port) over ``notes_facet(root)``,
    with ``root`` its allowed root: the browser tests of the pickers and of accessibility."""
    from ui.app import build_ui, launch_options

    facet = notes_facet(root, minilm)  # the data folder is root / "data"
    settings = facet.settings.model_copy(update={"ui_allowed_roots": [root]})
    demo = build_ui(facet, settings, export_dir=exports)
    demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True,
                quiet=True, **launch_options(settings))
    try:
        yield demo, facet
    finally:
        demo.close()
        facet.close()


@dataclass
class UiServer:
    """The running server: its base URL, the facade behind it and its folders."""

    url: str
    facet: Facet
    root: Path       # the one allowed root of the Index tab
    data_dir: Path

    @property
    def ui(self) -> str:
        return f"{self.url}/ui/"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_collection_source(folder: Path) -> Path:
    """A small jsonl of the bundled sample plus the planted and a hostile (HTML) document."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in SAMPLE_FILE.read_text().splitlines() if line.strip()]
    picked = rows[::len(rows) // SAMPLE_SIZE][:SAMPLE_SIZE]
    picked.append({"_id": PLANTED_ID, "text": PLANTED_TEXT, "intent": "card_arrival"})
    picked.append({"_id": "hostile-html", "text": HOSTILE_TEXT, "intent": "declined_card_payment"})
    path = folder / "sample.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in picked))
    return path


@pytest.fixture(scope="session")
def ui_server(minilm, tmp_path_factory) -> Iterator[UiServer]:
    # Checked here rather than at collection: every xdist process collects every file, and
    # gradio takes ~4 s to import.
    pytest.importorskip("gradio")
    import uvicorn

    base = tmp_path_factory.mktemp("ui")
    root = base / "allowed"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "a.txt").write_text("Quarterly notes about the lighthouse keeper's garden.")
    (base / "outside").mkdir()
    (base / "outside" / "secret.txt").write_text("not to be indexed")
    settings = FacetSettings(
        data_dir=base / "data", chunk_tokens=64, chunk_overlap=8,
        ui_allowed_roots=[root], ui_max_upload_mb=0.05, ui_rerankers=["minilm"],
        ui_examples={COLLECTION: [PLANTED_INSTRUCTION]})
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facet = Facet.for_serving(settings, embedders=cache)
    facet.index(write_collection_source(base / "source"), COLLECTION)

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(facet), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on",
                                           timeout_graceful_shutdown=2))
    thread = threading.Thread(target=server.run, name="ui-test-server", daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive(), "the test server stopped during start-up"
        assert time.monotonic() < deadline, "the test server did not start within 60 s"
        time.sleep(0.05)
    assert httpx.get(f"{url}/ui/", timeout=10).status_code == 200
    yield UiServer(url, facet, root, settings.data_dir)
    # Open event streams are cut after the grace period; that is expected here, not news.
    logging.getLogger("uvicorn.error").setLevel(logging.CRITICAL)
    server.should_exit = True
    thread.join(timeout=30)
    facet.close()


@pytest.fixture(scope="session")
def ui_client(ui_server) -> Iterator[Any]:
    """A gradio_client over the mounted UI."""
    from gradio_client import Client

    client = Client(ui_server.ui, verbose=False)
    yield client
    client.close()
