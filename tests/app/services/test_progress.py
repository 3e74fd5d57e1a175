"""What a person sees while long work runs: the index bar inside a batch, the explainer's
answers, and texts an embedder's tokenizer cannot read."""

from __future__ import annotations

import numpy as np

from app.encoding import longest_first, unread_counted, unread_documents, unread_message
from app.services import indexing
from app.services.collections import CollectionService
from app.services.indexing import IndexOptions, IndexService, Progress

from .conftest import write_corpus


def test_the_index_bar_and_the_job_row_move_while_a_batch_is_encoded(make_ctx, tmp_path, minilm,
                                                                     monkeypatch) -> None:
    """One batch of many chunks said nothing until it was written (minutes with an LLM
    embedder on a CPU): it is encoded in the encoder's pieces, and the bar (``stage``) and the
    job row (its message, what the UI and the API show) say how far, with the same vectors."""
    files = write_corpus(tmp_path / "src", 6, words=500)
    ctx = make_ctx()
    monkeypatch.setattr(indexing, "ENCODING_SHOWN_S", 0.0, raising=False)
    service = IndexService(ctx)
    seen: list[Progress] = []
    messages: list[str | None] = []

    def progress(p: Progress) -> None:
        seen.append(p)
        if p.stage and p.stage.startswith("encoding"):
            messages.append(CollectionService(ctx).job(1).message)

    report = service.index(tmp_path / "src", "docs", IndexOptions(batch_chunks=10_000),
                           progress=progress)
    n = report.chunks_written
    assert report.docs_indexed == 6 and n > 64  # one batch, more than two of the encoder's pieces
    stages = [p.stage for p in seen if p.stage and p.stage.startswith("encoding")]
    steps = [*range(0, n, 32), n]
    assert stages == [f"encoding chunk {i:,}/{n:,} of this batch" for i in steps]
    assert messages == stages  # the job row said it as it went
    assert all(p.docs_done == 0 for p in seen if p.stage in stages)  # counted once written
    job = CollectionService(ctx).job(report.job_id)
    assert job.state == "completed" and job.message is None
    # The same vectors as one call: the pieces are the batches that call makes.
    points = ctx.store.scroll("docs", limit=10_000)
    whole = minilm.encode([h.payload["text"] for h in points], role="document")
    for hit, vector in zip(points, whole, strict=True):
        top = ctx.store.search("docs", "minilm", vector, limit=1)[0]
        assert top.id == hit.id and top.score > 1 - 1e-5
    assert len(points) == n and len(files) == 6


def test_pieces_longest_first_give_exactly_the_vectors_of_one_call(minilm) -> None:
    texts = [("word " * (i * 7 % 50 + 1)).strip() for i in range(100)]
    whole = minilm.encode(texts, role="document", batch_size=32)
    out = np.empty_like(whole)
    for piece in longest_first(texts, 32):
        out[piece] = minilm.encode([texts[i] for i in piece], role="document", batch_size=32)
    assert np.array_equal(out, whole)


THAI = ["ภาษาไทยเป็นภาษาราชการของประเทศไทย", "กรุงเทพมหานครเป็นเมืองหลวง", "อาหารไทยมีรสชาติจัดจ้าน",
        "ฝนตกหนักในฤดูมรสุม"]


def test_chunks_the_tokenizer_cannot_read_are_a_warning_of_the_job(make_ctx, tmp_path) -> None:
    """All-MiniLM reads Thai as [UNK]: only the log said so, not the job (what the UI's table,
    the API's job record and the CLI's summary show)."""
    src = tmp_path / "src"
    src.mkdir()
    for i, text in enumerate(THAI):
        (src / f"th{i}.txt").write_text(text)
    (src / "en.txt").write_text("The lighthouse keeper wrote the log every evening.")
    ctx = make_ctx()
    report = IndexService(ctx).index(src, "docs")
    expected = ("4 of 5 chunks written are mostly unknown tokens to the tokenizer of minilm (a "
                "script or symbols it does not read, such as Thai or emoji, or unbroken strings "
                "too long for it to split, such as hashes or base64)")
    assert [(k, m[:len(expected)]) for k, m in report.warnings] == [("minilm", expected)]
    # ... and names the first of the documents they are in (a count alone left a user of a
    # large corpus to search for them).
    named = ", ".join(f'"{src / f"th{i}.txt"}"' for i in range(3))
    assert report.warnings[0][1].endswith(f"(e.g. causal2vec). They are in 4 documents: {named} and 1 more")
    assert unread_documents(report.warnings[0][1]) == ([str(src / f"th{i}.txt") for i in range(3)], 4)
    job = CollectionService(ctx).job(report.job_id)
    assert [(e["kind"], e["message"][:len(expected)]) for e in job.errors] == [("warning", expected)]
    # English only: nothing said.
    (src / "en.txt").write_text("The keeper's log for the winter.")
    for i in range(len(THAI)):
        (src / f"th{i}.txt").unlink()
    assert IndexService(ctx).index(src, "docs").warnings == []


def test_the_unread_warning_names_documents_it_can_read_back() -> None:
    """A worker job sums its chunk tasks' warnings into one: the names are read back from them,
    whatever characters the keys hold."""
    keys = ['a "quoted", name.txt', "back\\slash.txt", "ไทย.txt", "four.txt"]
    message = unread_message("minilm", 5, 9, "chunks written", keys)
    assert message.endswith('They are in 4 documents: "a \\"quoted\\", name.txt", "back\\\\slash.txt", '
                            '"ไทย.txt" and 1 more')
    assert unread_documents(message) == (keys[:3], 4)
    assert unread_counted(message) == 5
    one = unread_message("minilm", 1, 2, "chunks written", ["x.txt"])
    assert one.endswith('They are in 1 document: "x.txt"') and unread_documents(one) == (["x.txt"], 1)
    assert unread_documents(unread_message("minilm", 1, 2)) == ([], 0)
    # Counted in more documents than named (another chunk task's): "and N more".
    assert unread_message("m", 9, 9, "chunks", ["a"], 7).endswith('They are in 7 documents: "a" and 6 more')


def test_the_store_step_counts_the_documents_read_not_the_estimate(make_ctx, tmp_path) -> None:
    """A csv's quoted fields over several lines made the estimate count lines: a finished run's
    last progress line read "3/6 documents (50%) ... optimizing the store" (the CLI
    exploration of the third session of 2026-12-07). Once every document is read, their count
    is the total."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "m.csv").write_text('text,label\n"multi\nline one",a\n"multi\nline two",b\n'
                               '"multi\nline three",c\n')
    seen: list[Progress] = []
    report = IndexService(make_ctx()).index(src, "multi", progress=seen.append)
    assert report.docs_indexed == 3
    [last] = [p for p in seen if p.stage == "optimizing the store"]
    assert (last.docs_done, last.docs_total) == (3, 3), last
