"""A confined run (``IndexOptions.confine``: a job of the API or the UI) reads only files whose
real place, when they are read, lies under its folders. The check was made as the run walked
its source (``confined``), and the file was opened by its path later: whoever could write in an
allowed folder could, in between, make a checked file (or a folder on its path) a link to a
file elsewhere, and that file was read, indexed and readable through search (the
time-of-check/time-of-use finding of the security review, left open until now). Now what is
opened is checked (``OpenedUnder``) and read through that open file, in process and on a
worker (the plan's read and each chunk's), a streamed file's second read included.

Deterministic: each swap is made at the point between the check and the read (the walk's
check wrapped, or the step before a streamed file's second read, or between a worker's plan
and its chunks), with real SQLite, the edge store, real symlinks and a hashed-words embedder."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from app.services import distributed, indexing
from app.services.collections import CollectionService
from app.services.distributed import ChunkedIndexService
from app.services.indexing import OUTSIDE_ROOTS, IndexOptions, IndexService
from embedders.registry import register_embedder, unregister_embedder
from indexer import metadata as md

from .test_instruction_unread import WordHash

SECRET = "zebras hold the launch codes"


@pytest.fixture
def words() -> Iterator[str]:
    register_embedder("swap-words", lambda device=None, **kw: WordHash("swap-words"),
                      "hashed words (confine swap tests)")
    yield "swap-words"
    unregister_embedder("swap-words")


def _tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    """``allowed/docs`` (three notes, one in a subfolder) and a secret file outside it."""
    allowed = tmp_path / "allowed"
    docs = allowed / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.txt").write_text("notes about the card payment that was declined\n")
    (docs / "b.txt").write_text("a refund for the top-up arrived this morning\n")
    (docs / "sub" / "c.txt").write_text("the exchange rate on euros was wrong\n")
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "secret.txt").write_text(SECRET + "\n")
    (outside / "sub" / "c.txt").write_text(SECRET + " in a folder\n")
    return allowed, docs, outside


def _swap_file(path: Path, target: Path) -> None:
    """``path``, a regular file, made a link to ``target``."""
    path.unlink()
    path.symlink_to(target)


def _swap_folder(folder: Path, target: Path) -> None:
    """``folder``, a real folder, made a link to the folder ``target``."""
    shutil.rmtree(folder)
    folder.symlink_to(target, target_is_directory=True)


def _after_check(monkeypatch: pytest.MonkeyPatch, module: Any, swap: Callable[[], None]) -> None:
    """``module.confined`` (the walk's check) giving what it checked, and then making the swap
    before the run reads anything."""
    checked = indexing.confined

    def confined_then_swap(files: list[Path], roots: Any) -> tuple[list[Path], list[Path]]:
        result = checked(files, roots)
        if roots is not None:
            swap()
        return result

    monkeypatch.setattr(module, "confined", confined_then_swap)


def _chunk_texts(ctx: Any, collection: str) -> list[str]:
    with ctx.sessions() as session:
        return list(session.scalars(
            select(md.Chunk.text).join(md.Document).join(md.Collection)
            .where(md.Collection.name == collection)))


def _outside_warnings(ctx: Any, job_id: int) -> list[str]:
    job = CollectionService(ctx).job(job_id)
    return [e["message"] for e in job.errors if e["kind"] == "warning" and OUTSIDE_ROOTS in e["message"]]


def _confined(embedder: str, allowed: Path) -> IndexOptions:
    return IndexOptions(embedder=embedder, confine=(str(allowed),))


# ------------------------------------------------------------------------------ in process


def test_a_file_made_a_link_out_after_the_walk_checked_it_is_not_read(
        make_ctx, tmp_path, words, monkeypatch) -> None:
    allowed, docs, outside = _tree(tmp_path)
    _after_check(monkeypatch, indexing, lambda: _swap_file(docs / "a.txt", outside / "secret.txt"))
    ctx = make_ctx()
    report = IndexService(ctx).index(docs, "docs", _confined(words, allowed))
    texts = _chunk_texts(ctx, "docs")
    assert not any("zebras" in t for t in texts), texts
    assert (report.docs_indexed, report.docs_failed) == (2, 0), report
    assert (str(docs / "a.txt"), OUTSIDE_ROOTS) in report.skipped_other
    assert _outside_warnings(ctx, report.job_id) == [f"{docs / 'a.txt'}: skipped, {OUTSIDE_ROOTS}"]


def test_a_folder_made_a_link_out_after_the_walk_checked_its_files_is_not_read(
        make_ctx, tmp_path, words, monkeypatch) -> None:
    allowed, docs, outside = _tree(tmp_path)
    _after_check(monkeypatch, indexing, lambda: _swap_folder(docs / "sub", outside / "sub"))
    ctx = make_ctx()
    report = IndexService(ctx).index(docs, "docs", _confined(words, allowed))
    texts = _chunk_texts(ctx, "docs")
    assert not any("zebras" in t for t in texts), texts
    assert (report.docs_indexed, report.docs_failed) == (2, 0), report
    assert (str(docs / "sub" / "c.txt"), OUTSIDE_ROOTS) in report.skipped_other


def test_where_proc_cannot_name_the_open_file_the_fallback_still_refuses_the_swap(
        make_ctx, tmp_path, words, monkeypatch) -> None:
    allowed, docs, outside = _tree(tmp_path)
    monkeypatch.setattr(indexing, "PROC_FD", str(tmp_path / "no-proc"),  # (readlink fails)
                        raising=False)
    _after_check(monkeypatch, indexing, lambda: _swap_file(docs / "a.txt", outside / "secret.txt"))
    ctx = make_ctx()
    report = IndexService(ctx).index(docs, "docs", _confined(words, allowed))
    assert not any("zebras" in t for t in _chunk_texts(ctx, "docs"))
    assert (report.docs_indexed, report.docs_failed) == (2, 0), report
    assert (str(docs / "a.txt"), OUTSIDE_ROOTS) in report.skipped_other
    # The fallback reads what it checked: an ordinary confined run indexes everything.
    monkeypatch.undo()
    monkeypatch.setattr(indexing, "PROC_FD", str(tmp_path / "no-proc"), raising=False)
    (docs / "a.txt").unlink()
    (docs / "a.txt").write_text("notes about the card payment that was declined\n")
    again = IndexService(ctx).index(docs, "again", _confined(words, allowed))
    assert (again.docs_indexed, again.docs_failed, again.skipped_other) == (3, 0, []), again


def test_the_fallback_checks_again_after_the_read_a_swap_made_after_the_open(
        make_ctx, tmp_path, words, monkeypatch) -> None:
    allowed, docs, outside = _tree(tmp_path)
    monkeypatch.setattr(indexing, "PROC_FD", str(tmp_path / "no-proc"), raising=False)
    parse = indexing.parse_file

    def swap_then_parse(path: Path, **kwargs: Any) -> Any:
        if path.name == "a.txt":  # opened and checked already: made a link out before its read
            _swap_file(path, outside / "secret.txt")
        return parse(path, **kwargs)

    monkeypatch.setattr(indexing, "parse_file", swap_then_parse)
    ctx = make_ctx()
    report = IndexService(ctx).index(docs, "docs", _confined(words, allowed))
    assert not any("zebras" in t for t in _chunk_texts(ctx, "docs"))
    assert (report.docs_indexed, report.docs_failed) == (2, 0), report
    assert (str(docs / "a.txt"), OUTSIDE_ROOTS) in report.skipped_other


def test_a_streamed_file_made_a_link_out_between_its_two_reads_is_read_as_checked(
        make_ctx, tmp_path, words, monkeypatch) -> None:
    allowed, docs, outside = _tree(tmp_path)
    big = docs / "big.txt"
    big.write_text("".join(f"line {i} of the card statement for march\n" for i in range(400)))
    (outside / "secret.txt").write_text((SECRET + "\n") * 400)
    streamed = IndexService._process_streamed

    def swap_then_stream(self: IndexService, *args: Any, **kwargs: Any) -> None:
        _swap_file(big, outside / "secret.txt")  # after its hash pass, before its chunks
        streamed(self, *args, **kwargs)

    monkeypatch.setattr(IndexService, "_process_streamed", swap_then_stream)
    ctx = make_ctx(stream_document_mb=0.004)  # (about 4 KB: big.txt, 16 KB, is streamed)
    report = IndexService(ctx).index(docs, "docs", _confined(words, allowed))
    texts = _chunk_texts(ctx, "docs")
    assert not any("zebras" in t for t in texts), [t for t in texts if "zebras" in t][:1]
    assert any("card statement" in t for t in texts)
    assert (report.docs_indexed, report.docs_failed) == (4, 0), report
    assert not any("changed while it was indexed" in w for _, w in report.warnings), report.warnings


def test_an_ordinary_confined_run_and_an_unconfined_one_still_index_everything(
        make_ctx, tmp_path, words) -> None:
    allowed, docs, _outside = _tree(tmp_path)
    (docs / "inside.txt").symlink_to(docs / "b.txt")  # a link within the folders: read
    big = docs / "big.txt"
    big.write_text("".join(f"line {i} of the card statement for march\n" for i in range(400)))
    ctx = make_ctx(stream_document_mb=0.004)
    confined = IndexService(ctx).index(docs, "docs", _confined(words, allowed))
    assert (confined.docs_indexed, confined.docs_failed, confined.skipped_other) == (5, 0, [])
    unconfined = IndexService(ctx).index(docs, "open", IndexOptions(embedder=words))
    assert (unconfined.docs_indexed, unconfined.docs_failed) == (5, 0)
    assert sorted(_chunk_texts(ctx, "docs")) == sorted(_chunk_texts(ctx, "open"))
    # Run again, nothing changed: the confined run finds every document unchanged.
    again = IndexService(ctx).index(docs, "docs", _confined(words, allowed))
    assert (again.docs_indexed, again.docs_skipped, again.docs_failed) == (0, 5, 0), again


# ------------------------------------------------------------------------------ on a worker


def _run_on_workers(ctx: Any, docs: Path, options: IndexOptions,
                    between: Callable[[], None] | None = None) -> int:
    service = ChunkedIndexService(ctx)
    prepared = IndexService(ctx).prepare(docs, "docs", options, runner="celery")
    numbers = service.plan(prepared, 2)
    if between is not None:
        between()
    outcomes = [service.run_chunk(prepared.job_id, n) for n in numbers]
    assert {o.outcome for o in outcomes} <= {"done"}, outcomes
    return prepared.job_id


def test_a_workers_plan_does_not_read_a_file_made_a_link_out_after_its_check(
        make_ctx, tmp_path, words, monkeypatch) -> None:
    allowed, docs, outside = _tree(tmp_path)
    _after_check(monkeypatch, distributed,
                 lambda: _swap_file(docs / "a.txt", outside / "secret.txt"))
    ctx = make_ctx()
    job_id = _run_on_workers(ctx, docs, _confined(words, allowed))
    job = CollectionService(ctx).job(job_id)
    assert not any("zebras" in t for t in _chunk_texts(ctx, "docs"))
    assert (job.state, job.docs_indexed, job.docs_failed) == ("completed", 2, 0)
    assert _outside_warnings(ctx, job_id) == [f"{docs / 'a.txt'}: skipped, {OUTSIDE_ROOTS}"]


def test_a_workers_chunk_does_not_read_a_file_made_a_link_out_after_the_plan(
        make_ctx, tmp_path, words) -> None:
    allowed, docs, outside = _tree(tmp_path)
    ctx = make_ctx()

    def swap() -> None:
        _swap_file(docs / "a.txt", outside / "secret.txt")
        _swap_folder(docs / "sub", outside / "sub")

    job_id = _run_on_workers(ctx, docs, _confined(words, allowed), between=swap)
    job = CollectionService(ctx).job(job_id)
    assert not any("zebras" in t for t in _chunk_texts(ctx, "docs"))
    assert (job.state, job.docs_indexed, job.docs_failed) == ("completed", 1, 0)
    assert job.docs_total == job.docs_seen == 1
    assert sorted(_outside_warnings(ctx, job_id)) == [
        f"{docs / 'a.txt'}: skipped, {OUTSIDE_ROOTS}",
        f"{docs / 'sub' / 'c.txt'}: skipped, {OUTSIDE_ROOTS}"]


def test_an_ordinary_confined_worker_run_indexes_everything(make_ctx, tmp_path, words) -> None:
    allowed, docs, _outside = _tree(tmp_path)
    (docs / "inside.txt").symlink_to(docs / "b.txt")
    ctx = make_ctx()
    job_id = _run_on_workers(ctx, docs, _confined(words, allowed))
    job = CollectionService(ctx).job(job_id)
    assert (job.state, job.docs_indexed, job.docs_failed) == ("completed", 4, 0)
    assert _outside_warnings(ctx, job_id) == []
