"""What `facet search` says about the instruction: that BM25 alone did not read it, from the
response's own `instruction_read` (the API and the UI say it from the same field)."""

from __future__ import annotations

import pytest

from app.commands.search import print_results
from app.services.search import SearchResponse


@pytest.mark.parametrize(("mode", "reranker", "read"), [
    ("lexical", None, False), ("lexical", "minilm", True), ("dense", None, True), ("hybrid", None, True)])
def test_the_header_says_when_the_instruction_was_not_read(capsys, mode, reranker, read) -> None:
    response = SearchResponse("q", "Find refunds", "c", "bm25" if mode == "lexical" else "minilm",
                              reranker, [], {"total": 1.0}, mode)
    assert response.instruction_read is read
    print_results(response)
    out = capsys.readouterr().out
    assert "instruction: Find refunds" in out
    assert ("(not read: lexical search matches the words only)" in out) is not read


def test_no_instruction_is_never_read() -> None:
    assert SearchResponse("q", None, "c", "minilm", None, [], {}, "dense").instruction_read is False
    assert SearchResponse("q", None, "c", "minilm", None, [], {}).to_dict()["instruction_read"] is False
