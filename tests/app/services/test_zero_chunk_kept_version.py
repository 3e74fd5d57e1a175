"""A document indexed with no chunk keeps nothing when it fails later.

Before 2026-12-01 a file of invisible characters only (zero-width spaces, a BOM) was indexed
with no chunk; since then it is empty, an error. After the upgrade every run failed it with
"... its indexed version is kept and stays searchable", of a version nothing could find, and
the collection counted it indexed. Real SQLite, edge store and minilm; the old reading is put
back for the first run (the parser's ``blank`` as it was: whitespace only).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core import Facet
from app.settings import FacetSettings
from indexer import metadata as md
from indexer import parsing


def test_an_indexed_document_with_no_chunk_is_not_said_to_stay_searchable(
        tmp_path: Path, minilm, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "ok.txt").write_text("The lighthouse keeper waters his garden.")
    (src / "invisible.txt").write_text("\u200b\u2060\ufeff\u200b")
    facet = Facet(FacetSettings(data_dir=tmp_path / "data"))
    facet.context.embedders.put("minilm", minilm)
    try:
        with monkeypatch.context() as old:
            old.setattr(parsing, "blank", lambda text: not text.strip())
            first = facet.index(src, "notes")
        # Read as text now, it cuts into no chunk, which fails it too (since the sixth session
        # of 2026-12-04): the row is put back as the old version wrote it, indexed with none.
        assert (first.docs_indexed, first.docs_failed) == (1, 1)
        with facet.context.sessions() as s:
            row = s.query(md.Document).filter(md.Document.key.endswith("invisible.txt")).one()
            row.status, row.error, row.n_chunks = "indexed", None, 0
            s.commit()
        again = facet.index(src, "notes")
        assert again.docs_failed == 1
        [(key, message)] = again.errors
        assert key.endswith("invisible.txt") and "is empty: no text to index" in message
        assert "stays searchable" not in message and "kept" not in message, message
        info = facet.collection("notes")
        assert (info.documents_indexed, info.documents_failed) == (1, 1)
        [listed] = facet.documents("notes", status="error")
        assert listed.key == key and listed.chunks == 0
    finally:
        facet.close()
