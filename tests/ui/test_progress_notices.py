"""The UI tells the person who indexed or searched with texts the embedder's tokenizer cannot
read (mostly ``[UNK]``): only the server's log said so."""

from __future__ import annotations

import pytest

from tests.app.services.test_progress import THAI
from tests.ui.test_ui_api import _finished, _own_facet

pytest.importorskip("gradio")


def test_unreadable_texts_are_a_notice_of_the_index_tab_and_the_search(minilm, tmp_path) -> None:
    root = tmp_path / "allowed"
    folder = root / "thai"
    folder.mkdir(parents=True)
    for i, text in enumerate(THAI):
        (folder / f"th{i}.txt").write_text(text)
    facet, handlers = _own_facet(minilm, tmp_path, ui_allowed_roots=[root])
    try:
        job_id, total, *_ = handlers.index_folder(str(folder), None, "minilm", "thai")
        _finished(facet, job_id)
        html, rows, _timer = handlers.job_status(job_id, total)
        said = "4 of 4 chunks written are mostly unknown tokens to the tokenizer of minilm"
        assert said in html  # under the bar, not only in the table
        assert any(said in row[2] for row in rows)
        results, _ = handlers.search(THAI[0], "", "thai", "minilm", 3, "", False, None, False,
                                     "dense")
        assert "The query is mostly unknown tokens to the tokenizer of minilm" in results
        results, _ = handlers.search("lighthouse", "", "thai", "minilm", 3, "", False, None,
                                     False, "dense")
        assert "mostly unknown tokens" not in results
    finally:
        facet.close()
