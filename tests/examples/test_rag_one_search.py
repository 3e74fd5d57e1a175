"""examples/rag.py gives the model the documents it printed (one search, not a second one inside
the chain), and an answer stopped by --max-new-tokens ends with "…" and says it was cut."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("langchain_core")

from app.integrations.langchain import FacetRetriever

RAG = Path(__file__).resolve().parents[2] / "examples" / "rag.py"


def test_one_search_and_a_cut_answer_is_marked(tmp_path, monkeypatch, capsys) -> None:
    spec = importlib.util.spec_from_file_location("rag_example", RAG)
    assert spec and spec.loader
    rag = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rag)
    searches = []
    search = FacetRetriever._search
    monkeypatch.setattr(FacetRetriever, "_search",
                        lambda self, q, o: searches.append(q) or search(self, q, o))
    rag.run(argparse.Namespace(question=rag.QUESTION, instruction=rag.INSTRUCTION, k=2,
                               data_dir=tmp_path, max_new_tokens=4))
    out = capsys.readouterr().out
    assert searches == [rag.QUESTION], searches
    assert out.rstrip().endswith("…\n(cut at 4 tokens: raise --max-new-tokens)"), out
