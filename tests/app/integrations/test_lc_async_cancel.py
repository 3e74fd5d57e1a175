"""The LangChain adapter in async code: a cancelled ``aembed_documents`` stops encoding (it ran
``embed_documents`` in a worker thread, which went on through the whole list after a timeout,
and ``asyncio.run`` waited for it at exit), and a hybrid search whose word side found nothing,
what a paraphrase meets, is logged at INFO, not as a warning per query."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator

import pytest

pytest.importorskip("langchain_core")

from app.core import Facet
from app.encoding import EmbedderCache
from app.integrations.langchain import FacetEmbeddings, FacetRetriever
from app.settings import FacetSettings


@pytest.fixture
def serving(minilm, tmp_path) -> Iterator[Facet]:
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facet = Facet.for_serving(FacetSettings(data_dir=tmp_path / "data"), embedders=cache)
    yield facet
    facet.close()


async def test_a_cancelled_aembed_documents_stops_encoding(serving, minilm, monkeypatch) -> None:
    encoded: list[int] = []
    last = [time.monotonic()]
    lock = threading.Lock()
    real = minilm.encode

    def counting(texts, *args, **kwargs):
        out = real(texts, *args, **kwargs)
        with lock:
            encoded.append(len(texts))
            last[0] = time.monotonic()
        return out

    monkeypatch.setattr(minilm, "encode", counting)
    texts = [f"text number {i} about a card payment that was declined abroad, twice, on a "
             f"Tuesday afternoon in a small shop near the station ({i})" for i in range(1500)]
    embeddings = FacetEmbeddings(model="minilm", facet=serving)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(embeddings.aembed_documents(texts), timeout=0.3)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and time.monotonic() - last[0] < 1.5:
        await asyncio.sleep(0.1)  # until the encoder has been idle for 1.5 s
    assert sum(encoded) < len(texts) // 2, f"{sum(encoded)} of {len(texts)} encoded after the timeout"
    # The facade goes on serving.
    assert len(await embeddings.aembed_documents(["a card"])) == 1


def test_a_dense_only_hybrid_search_is_logged_at_info_other_notes_as_warnings(
        serving, tmp_path, caplog) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.md").write_text("My card payment was declined at the shop.\n", encoding="utf-8")
    (src / "b.md").write_text("How do I reset the password of my account?\n", encoding="utf-8")
    serving.index(src, "notes")
    retriever = FacetRetriever(collection="notes", facet=serving, mode="hybrid", k=2)
    with caplog.at_level(logging.INFO, logger="app.integrations.langchain"):
        docs = retriever.invoke("plastic refused")  # no word in common with either text
        assert docs and "word side found nothing" in docs[0].metadata["note"]
        said = [r for r in caplog.records if "word side found nothing" in r.getMessage()]
        assert [r.levelno for r in said] == [logging.INFO]
        caplog.clear()
        retriever.invoke("card", filter={"tpye": "x"})  # a misspelt key: still a warning
        assert [r.levelno for r in caplog.records if "tpye" in r.getMessage()] == [logging.WARNING]


def test_a_weak_instruction_is_warned_of_once_then_logged_at_info(serving, tmp_path, caplog) -> None:
    """minilm reads an instruction at its weak default blend: said in every document's note, and
    logged as a warning the first time only (a batch of 16 queries logged 16 warnings: the RAG
    exploration of the sixth session of 2026-12-02); it is the retriever's embedder, not the
    query."""
    from app.integrations import langchain

    langchain._WEAK_SAID.clear()  # (another test of this process may have said it)
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.md").write_text("My card payment was declined at the shop.\n", encoding="utf-8")
    serving.index(src, "weak")
    retriever = FacetRetriever(collection="weak", facet=serving, mode="dense", k=1,
                               instruction="Find messages of the same domain")
    with caplog.at_level(logging.INFO, logger="app.integrations.langchain"):
        batches = retriever.batch(["card declined", "shop payment", "declined twice"])
        said = [r for r in caplog.records if "barely steers" in r.getMessage()]
    assert all(docs[0].metadata["note"].startswith("the instruction barely steers: minilm") for docs in batches)
    assert sorted(r.levelno for r in said) == [logging.INFO, logging.INFO, logging.WARNING], said
    # Beside a note that is a warning (a misspelt filter key), the line said before is not
    # warned of again: the warning names the key, the weak note goes at INFO.
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="app.integrations.langchain"):
        docs = retriever.invoke("card declined", filter={"tpye": "x"})
    assert docs == []
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert len(warnings) == 1 and "tpye" in warnings[0] and "barely steers" not in warnings[0], warnings
    assert len(infos) == 1 and "barely steers" in infos[0], infos
