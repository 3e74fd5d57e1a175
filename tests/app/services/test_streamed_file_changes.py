"""A large file, read in a stream, that changes between its two reads (the corpus-changes
exploration of the third session of 2026-12-02). A streamed file is read once for its content
hash, again for its chunks; whatever the second read found went in under the first read's
hash. A file rewritten in place in between stayed half indexed for ever (the next run found its
restored text "unchanged" and skipped it, and a copy of it reused the half), an emptied one was
"indexed" with no chunk, and one deleted or given undecodable bytes in between failed the whole
job with a traceback (the files after it not indexed, no sync). The change is made at the
moment of the second read (``StreamedDocument.pieces``), on the real file; minilm, SQLite and the
edge store are real."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from app.services.indexing import IndexService
from indexer import metadata as md
from indexer.parsing import StreamedDocument

FULL = " ".join(f"line {i} word{i % 97}." for i in range(700))  # ~12 KB: streamed over 0.004 MiB


def _document(ctx: Any, key: Path) -> tuple[str, int, str | None, str | None]:
    """Its status, where its last chunk ends, its warning and its error."""
    with ctx.sessions() as s:
        doc = s.scalars(select(md.Document).where(md.Document.key == str(key))).one()
        return doc.status, max((c.end for c in doc.chunks), default=0), doc.warning, doc.error


def _before_the_second_read(monkeypatch: pytest.MonkeyPatch, change: Callable[[Path], None]) -> None:
    real = StreamedDocument.pieces

    def changed(self: StreamedDocument, chars: int = 1 << 20, digest: Any = None) -> Iterator[str]:
        change(self.path)
        yield from (real(self, chars) if digest is None else real(self, chars, digest))

    monkeypatch.setattr(StreamedDocument, "pieces", changed)


def test_a_file_rewritten_between_its_reads_is_read_whole_by_the_next_run(
        make_ctx, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "src"
    src.mkdir()
    big = src / "log.txt"
    big.write_text(FULL)
    ctx = make_ctx(stream_document_mb=0.004)
    _before_the_second_read(monkeypatch, lambda path: path.write_text(FULL[: len(FULL) // 2]))
    first = IndexService(ctx).index(src, "c")
    monkeypatch.undo()
    status, end, warning, _ = _document(ctx, big)
    assert first.docs_indexed == 1 and status == "indexed" and end == len(FULL) // 2, (status, end)
    assert warning == (f"{big} changed while it was indexed: what was read is indexed, and the next "
                       "run indexes it again"), warning
    big.write_text(FULL)  # the rewrite ends with the text it had
    second = IndexService(ctx).index(src, "c")
    assert (second.docs_indexed, second.docs_skipped) == (1, 0)  # (the old code: 0, 1)
    status, end, warning, _ = _document(ctx, big)
    assert status == "indexed" and end == len(FULL) and warning is None, (status, end, warning)
    third = IndexService(ctx).index(src, "c")  # and an unchanged file is unchanged
    assert (third.docs_indexed, third.docs_skipped) == (0, 1)


@pytest.mark.parametrize("change, said", [
    (lambda path: path.unlink(), "cannot read {big}: [Errno 2] No such file or directory"),
    (lambda path: path.write_bytes(FULL.encode() + b"\xff\xfe bad"), "cannot read {big}: 'utf-8' codec can't decode"),
    (lambda path: path.write_text(""), "{big} had no text when it was read for its chunks (emptied while it was "
                                       "indexed?): not indexed"),
])
def test_a_file_gone_undecodable_or_emptied_between_its_reads_is_one_failed_document(
        make_ctx, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: Callable[[Path], None],
        said: str) -> None:
    src = tmp_path / "src"
    src.mkdir()
    big = src / "log.txt"
    big.write_text(FULL)
    (src / "z.txt").write_text("a small file after it")
    ctx = make_ctx(stream_document_mb=0.004)
    _before_the_second_read(monkeypatch, change)
    report = IndexService(ctx).index(src, "c")  # (the old code: the error raised, the job failed)
    monkeypatch.undo()
    assert report.state == "completed" and (report.docs_indexed, report.docs_failed) == (1, 1), report
    [(key, message)] = report.errors
    assert key == str(big) and message.startswith(said.format(big=big)), message
    status, end, _, error = _document(ctx, big)
    assert status == "error" and end == 0 and error == message
