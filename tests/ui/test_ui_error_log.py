"""Every error a UI page is shown is logged, as the API logs each error answer: an operator saw
nothing of the page's failures (a Qdrant server out of reach, an unknown collection), only its
start-up lines and failed logins (the logs review of the seventh session of 2026-12-06). Here
the handlers run in process over real facades: one on the session's minilm, one whose Qdrant
server refuses connections."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest

from .conftest import notes_facet

gr = pytest.importorskip("gradio")


def _records(caplog) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "ui.handlers"]


def test_a_persons_mistakes_are_logged_at_info(minilm, tmp_path: Path, caplog) -> None:
    from ui.handlers import UiHandlers

    facet = notes_facet(tmp_path, minilm)
    try:
        h = UiHandlers(facet, facet.settings)
        caplog.set_level(logging.INFO, logger="ui.handlers")
        with pytest.raises(gr.Error):
            h.documents_first("nope", "all", "")
        with pytest.raises(gr.Error, match="Tick the documents"):
            h.remove_documents("notes", [], "notes", "all", "")
        with pytest.raises(gr.Error, match="does not match"):
            h.remove_documents("notes", ["n0"], "nodes", "all", "")
        assert len(facet.documents("notes")) == 6  # nothing removed
    finally:
        facet.close()
    records = _records(caplog)
    assert records[0][0] == logging.INFO
    assert records[0][1].startswith("UI documents_first for an unknown client failed "
                                    "(NotFoundError): unknown collection 'nope'"), records
    assert records[1] == (logging.INFO, "UI remove_documents for an unknown client failed "
                                        "(InvalidRequestError): Tick the documents to remove "
                                        "first (the boxes under the documents table); nothing "
                                        "was removed."), records
    assert records[2][0] == logging.INFO and "does not match" in records[2][1], records
    assert len(records) == 3


def test_a_store_out_of_reach_is_a_warning_with_its_password_masked(tmp_path: Path,
                                                                    caplog) -> None:
    from app.core import Facet
    from app.services.context import EmbedderCache
    from app.settings import FacetSettings
    from ui.handlers import UiHandlers

    with socket.socket() as s:  # a port nothing listens on: connections are refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = FacetSettings(data_dir=tmp_path / "data", vector_backend="server",
                             qdrant_url=f"http://admin:s3cret-pw@127.0.0.1:{port}")
    facet = Facet.for_serving(settings, embedders=EmbedderCache("cpu"))
    try:
        caplog.set_level(logging.INFO, logger="ui.handlers")
        with pytest.raises(gr.Error):
            UiHandlers(facet, settings).collections()
    finally:
        facet.close()
    (level, message), = _records(caplog)
    assert level == logging.WARNING
    assert message.startswith("UI collections for an unknown client failed (UnavailableError): "
                              f"cannot reach Qdrant at http://admin:***@127.0.0.1:{port}"), message
    assert "s3cret" not in caplog.text


def test_a_failure_of_a_handler_another_calls_is_logged_once(caplog) -> None:
    """A removal refreshes the collections table by calling that handler: its failure (Qdrant
    gone after the removal) was logged by both, the second time at INFO as "refused by the
    page" (the verification round of the seventh session of 2026-12-06)."""
    from app.errors import UnavailableError
    from ui.handlers import ui_errors

    class Page:
        @ui_errors
        def inner(self) -> None:
            raise UnavailableError("cannot reach Qdrant at http://u:pw@q:6333: refused")

        @ui_errors
        def outer(self) -> None:
            self.inner()

        @ui_errors
        def own(self) -> None:
            raise gr.Error("Pick a collection first.")

    caplog.set_level(logging.INFO, logger="ui.handlers")
    with pytest.raises(gr.Error):
        Page().outer()
    with pytest.raises(gr.Error):
        Page().own()
    assert _records(caplog) == [
        (logging.WARNING, "UI inner for an unknown client failed (UnavailableError): cannot "
                          "reach Qdrant at http://u:***@q:6333: refused"),
        (logging.INFO, "UI own for an unknown client failed (refused by the page): Pick a "
                       "collection first.")]
