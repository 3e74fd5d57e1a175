"""A source moved, renamed or copied re-uses the vectors its content has in the collection.

Document keys are absolute paths, so `mv corpus corpus_new` (or the same folder on another
machine) gave every file a new key: the whole folder was encoded again (hours with an LLM
embedder) and every search hit came back twice, from the old path and the new. Now a new
document whose content is indexed already copies those vectors (nothing encoded), and an old
document whose file is gone is removed as moved; a copy whose original still exists keeps both.
Real minilm and the real edge store; what is encoded is counted at the context's encoder.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.services.collections import CollectionService
from app.services.context import EmbedderCache, ServiceContext
from app.services.indexing import IndexOptions, IndexService
from app.services.search import SearchRequest, SearchService
from app.settings import FacetSettings
from indexer import metadata as md

from .conftest import counting, write_corpus


def documents(ctx: ServiceContext, collection: str) -> dict[str, str]:
    """The collection's document rows, key -> source."""
    with ctx.sessions() as session:
        coll = md.get_collection(session, collection)
        assert coll is not None
        rows = session.query(md.Document).filter_by(collection_id=coll.id).all()
        return {r.key: r.source for r in rows}


def hits(ctx: ServiceContext, collection: str, query: str) -> list[tuple[str, float]]:
    response = SearchService(ctx).search(SearchRequest(query, collection, top_k=50, mode="dense"))
    return [(r.doc_id, round(r.score, 5)) for r in response.results]


def test_a_moved_folder_copies_its_vectors_and_is_one_document_each(make_ctx, tmp_path, monkeypatch):
    """The finding: `mv corpus corpus_new` then indexing corpus_new encoded all 5 files again
    and left 10 documents, each search hit twice."""
    write_corpus(tmp_path / "corpus", 5)
    ctx = make_ctx()
    first = IndexService(ctx).index(tmp_path / "corpus", "notes")
    before = hits(ctx, "notes", "bank card note")
    shutil.move(tmp_path / "corpus", tmp_path / "corpus_newuser")
    encoded = counting(ctx, monkeypatch)

    report = IndexService(ctx).index(tmp_path / "corpus_newuser", "notes")

    assert encoded == []  # nothing encoded again
    assert (report.docs_indexed, report.docs_moved) == (5, 5)
    assert report.chunks_reused == report.chunks_written == first.chunks_written
    new = tmp_path / "corpus_newuser"
    assert documents(ctx, "notes") == {str(new / f"doc{i:03d}.txt"): str(new / f"doc{i:03d}.txt") for i in range(5)}
    assert ctx.store.count("notes") == first.chunks_written
    after = hits(ctx, "notes", "bank card note")
    # Each document once, at its new path, ranked and scored as before the move.
    assert [(Path(k).name, s) for k, s in after] == [(Path(k).name, s) for k, s in before]
    assert all(k.startswith(str(new)) for k, _ in after)
    assert [m for k, m in report.warnings if k == "moved"] == [
        f"5 documents moved ({first.chunks_written} chunks of this run re-used stored vectors, "
        f"not encoded again): {tmp_path / 'corpus' / 'doc000.txt'} is now {new / 'doc000.txt'} "
        "and 4 others; their entries at the old paths, which no longer exist, were removed"
    ]
    # Nothing is left for a later run: the same folder again is all unchanged.
    again = IndexService(ctx).index(new, "notes")
    assert (again.docs_skipped, again.docs_indexed, encoded) == (5, 0, [])


def test_a_copy_keeps_both_and_a_changed_file_is_encoded(make_ctx, tmp_path, monkeypatch):
    """A copy (the original still there) is a second document of its own, its vectors copied;
    a file whose content changed in the move is encoded as any new one, and its old entry,
    whose content is not there any more, stays (``--sync`` of the old path removes it)."""
    write_corpus(tmp_path / "corpus", 4)
    ctx = make_ctx()
    first = IndexService(ctx).index(tmp_path / "corpus", "notes")
    shutil.copytree(tmp_path / "corpus", tmp_path / "copy")
    encoded = counting(ctx, monkeypatch)

    copy = IndexService(ctx).index(tmp_path / "copy", "notes")

    assert encoded == []
    assert (copy.docs_indexed, copy.docs_moved, copy.chunks_reused) == (4, 0, first.chunks_written)
    assert len(documents(ctx, "notes")) == 8
    assert not [k for k, _ in copy.warnings if k == "moved"]
    names = sorted(Path(k).parent.name for k, _ in hits(ctx, "notes", "mortgage rate note 1"))
    assert names == ["copy"] * 4 + ["corpus"] * 4

    shutil.move(tmp_path / "copy", tmp_path / "moved")
    changed = tmp_path / "moved" / "doc002.txt"
    changed.write_text(changed.read_text() + " A sentence added after the move.")
    moved = IndexService(ctx).index(tmp_path / "moved", "notes")

    assert encoded and set(encoded) <= set(c for c in chunk_texts(ctx, "notes", str(changed)))
    assert (moved.docs_indexed, moved.docs_moved) == (4, 3)
    assert sorted(documents(ctx, "notes")) == sorted(
        [str(tmp_path / "corpus" / f"doc{i:03d}.txt") for i in range(4)]
        + [str(tmp_path / "moved" / f"doc{i:03d}.txt") for i in range(4)]
        + [str(tmp_path / "copy" / "doc002.txt")]
    )


def chunk_texts(ctx: ServiceContext, collection: str, key: str) -> list[str]:
    with ctx.sessions() as session:
        coll = md.get_collection(session, collection)
        assert coll is not None
        row = md.documents_by_key(session, coll.id, [key])[key]
        return [c.text for c in row.chunks]


def test_a_renamed_records_file_keeps_its_records_vectors(make_ctx, tmp_path, monkeypatch):
    """Records with ids keep their keys when their file is renamed: they were encoded again
    only to record the new path; now their own vectors are copied under it."""
    rows = ["My card was declined", "How do I top up?", "The exchange rate was wrong"]
    path = tmp_path / "jan.jsonl"
    path.write_text("".join(json.dumps({"_id": f"r{i}", "text": t}) + "\n" for i, t in enumerate(rows)))
    ctx = make_ctx()
    IndexService(ctx).index(path, "support")
    path.rename(tmp_path / "records.jsonl")
    encoded = counting(ctx, monkeypatch)

    report = IndexService(ctx).index(tmp_path / "records.jsonl", "support")

    assert encoded == []
    assert (report.docs_indexed, report.chunks_reused, report.docs_moved) == (3, 3, 0)
    assert documents(ctx, "support") == {f"r{i}": str(tmp_path / "records.jsonl") for i in range(3)}
    response = SearchService(ctx).search(SearchRequest("card declined", "support", top_k=5, mode="dense"))
    assert {r.source for r in response.results} == {str(tmp_path / "records.jsonl")}
    assert response.results[0].doc_id == "r0"

    # Records under other ids with the same texts, their first file gone: two ids are two
    # records (copied vectors), never a move that removes the first ones.
    (tmp_path / "feb.jsonl").write_text("".join(json.dumps({"_id": f"f{i}", "text": t}) + "\n"
                                                for i, t in enumerate(rows)))
    (tmp_path / "records.jsonl").unlink()
    report = IndexService(ctx).index(tmp_path / "feb.jsonl", "support")
    assert encoded == []
    assert (report.docs_indexed, report.chunks_reused, report.docs_moved) == (3, 3, 0)
    assert sorted(documents(ctx, "support")) == ["f0", "f1", "f2", "r0", "r1", "r2"]

    # Records without ids are keyed by their file and line (`path#L2`): renamed with their
    # file, they are the same records, moved (they stayed at the old path, each hit twice).
    (tmp_path / "noid.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in rows))
    IndexService(ctx).index(tmp_path / "noid.jsonl", "support")
    (tmp_path / "noid.jsonl").rename(tmp_path / "renamed.jsonl")
    report = IndexService(ctx).index(tmp_path / "renamed.jsonl", "support")
    assert encoded == []
    assert (report.docs_indexed, report.docs_moved) == (3, 3)
    assert sorted(k for k in documents(ctx, "support") if "#" in k) == [
        f"{tmp_path / 'renamed.jsonl'}#L{i}" for i in (1, 2, 3)]


def test_a_moved_large_file_read_in_a_stream_copies_its_vectors(make_ctx, tmp_path, monkeypatch):
    """A file over ``stream_document_mb`` is chunked as it is read, batch by batch: each batch
    copies the donor's vectors, and the whole file copied is a move."""
    big = tmp_path / "old" / "log.txt"
    big.parent.mkdir()
    big.write_text(" ".join(f"line {i} of the service log, request handled." for i in range(300)))
    ctx = make_ctx(stream_document_mb=0.004, index_batch_chunks=4)
    first = IndexService(ctx).index(big.parent, "logs")
    assert first.chunks_written > 8  # several stream batches
    shutil.move(big.parent, tmp_path / "new")
    encoded = counting(ctx, monkeypatch)

    report = IndexService(ctx).index(tmp_path / "new", "logs")

    assert encoded == []
    assert (report.docs_moved, report.chunks_reused) == (1, first.chunks_written)
    assert documents(ctx, "logs") == {str(tmp_path / "new" / "log.txt"): str(tmp_path / "new" / "log.txt")}
    assert ctx.store.count("logs") == first.chunks_written


def test_a_moved_checkpoint_is_recorded_at_its_new_path(tmp_path, minilm, minilm_namesake):
    """A collection indexed from a checkpoint directory that was moved since: indexing with
    it at its new path worked, but the collection kept the old one, and every search naming
    no embedder failed for good. The same model at a new path is recorded there."""
    directory, _ = minilm_namesake
    rows = tmp_path / "records.jsonl"
    rows.write_text(
        "".join(
            json.dumps({"_id": f"r{i}", "text": t}) + "\n" for i, t in enumerate(["card declined", "top up failed"])
        )
    )

    def context() -> ServiceContext:  # a new process each time: nothing loaded from the folder
        cache = EmbedderCache("cpu")
        cache.put("minilm", minilm)
        return ServiceContext(
            FacetSettings(data_dir=tmp_path / "data", chunk_tokens=64, chunk_overlap=8), embedders=cache
        )

    ctx = context()
    try:
        IndexService(ctx).index(rows, "ck", IndexOptions(embedder=str(directory)))
    finally:
        ctx.close()
    moved = tmp_path / "ck2" / directory.name
    moved.parent.mkdir()
    shutil.move(directory, moved)
    ctx = context()
    try:
        report = IndexService(ctx).index(rows, "ck", IndexOptions(embedder=str(moved)))
        assert report.docs_skipped == 2
        assert CollectionService(ctx).get("ck").sources == {"minilm": str(moved)}
    finally:
        ctx.close()
    ctx = context()
    try:
        response = SearchService(ctx).search(SearchRequest("card", "ck", mode="dense"))
        assert response.results[0].doc_id == "r0"
    finally:
        ctx.close()


def test_a_folder_moved_as_another_embedder_joins_leaves_no_old_entries(make_ctx, tmp_path,
                                                                        notes_embedder):
    """A moved folder indexed with an embedder the collection did not hold yet: no stored
    document had that embedder's vectors, so none was taken as the old place of a moved one;
    each was encoded at its new path and its old entry stayed, every search hit coming back
    twice. The old entries now go as the new ones are written, moves without a copy."""
    write_corpus(tmp_path / "corpus", 3)
    ctx = make_ctx()
    first = IndexService(ctx).index(tmp_path / "corpus", "notes")
    shutil.move(tmp_path / "corpus", tmp_path / "moved")

    report = IndexService(ctx).index(tmp_path / "moved", "notes", IndexOptions(embedder=notes_embedder))

    new = tmp_path / "moved"
    assert sorted(documents(ctx, "notes")) == [str(new / f"doc{i:03d}.txt") for i in range(3)]
    assert ctx.store.count("notes") == first.chunks_written
    assert (report.docs_indexed, report.docs_moved, report.chunks_reused) == (3, 3, 0)
    assert [m for k, m in report.warnings if k == "moved"] == [
        f"3 documents moved (0 chunks of this run re-used stored vectors, not encoded again): "
        f"{tmp_path / 'corpus' / 'doc000.txt'} is now {new / 'doc000.txt'} and 2 others; their "
        "entries at the old paths, which no longer exist, were removed"]
    for embedder in ("minilm", "minilm-notes"):  # both vectors written at the new paths
        found = SearchService(ctx).search(SearchRequest("bank card note", "notes", top_k=10,
                                                        mode="dense", embedder=embedder))
        assert sorted(r.doc_id for r in found.results) == sorted(documents(ctx, "notes"))
    again = IndexService(ctx).index(new, "notes")
    assert (again.docs_skipped, again.docs_indexed) == (3, 0)


def test_no_sync_copies_a_moved_folders_vectors_and_keeps_its_old_entries(make_ctx, tmp_path,
                                                                          monkeypatch):
    """`--no-sync` says "keep what is gone": a move under it removed the old entries anyway
    (found by the verification round). It copies the vectors and keeps both."""
    write_corpus(tmp_path / "corpus", 3)
    ctx = make_ctx()
    IndexService(ctx).index(tmp_path / "corpus", "kept")
    shutil.move(tmp_path / "corpus", tmp_path / "moved")
    encoded = counting(ctx, monkeypatch)

    report = IndexService(ctx).index(tmp_path / "moved", "kept", IndexOptions(sync=False))

    assert encoded == [] and (report.docs_indexed, report.docs_moved) == (3, 0)
    assert report.warnings == []  # nothing said moved
    assert sorted(Path(k).parent.name for k in documents(ctx, "kept")) == ["corpus"] * 3 + ["moved"] * 3


def test_a_run_stopped_after_moving_some_documents_says_they_moved(facet, tmp_path, capsys):
    """Ctrl-C (or a server stopping) after a few batches of a moved folder: the moves of those
    batches are committed (their old entries gone), but only a completed run said so; the job
    and the CLI's stop line now say it too."""
    from app.commands.index import say_how_to_resume

    write_corpus(tmp_path / "corpus", 6)
    facet.index(tmp_path / "corpus", "notes")
    before = facet.jobs("notes", limit=1)[0].id
    shutil.move(tmp_path / "corpus", tmp_path / "moved")

    def ctrl_c_after_two(progress) -> None:
        if progress.docs_done >= 2 and not progress.stage:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        facet.index(tmp_path / "moved", "notes", IndexOptions(batch_chunks=2), progress=ctrl_c_after_two)
    say_how_to_resume(facet, "notes", tmp_path / "moved", before)

    job = facet.job(facet.jobs("notes", limit=1)[0].id)
    assert job.state == "interrupted" and job.docs_indexed == 2
    moved = [e["message"] for e in job.errors if e["document"] == "moved"]
    assert len(moved) == 1 and moved[0].startswith("2 documents moved (2 chunks of this run re-used")
    said = capsys.readouterr().err.splitlines()
    assert said[0].startswith(f"job {job.id} interrupted: stopped (Ctrl-C) with 2 documents indexed")
    assert said[1] == f"  warning: {moved[0]}"
    # The four not reached are still indexed at the old paths; running it again moves them.
    again = facet.index(tmp_path / "moved", "notes")
    assert (again.docs_moved, again.docs_skipped) == (4, 2)
    assert [k for k, _ in again.warnings].count("moved") == 1


def test_indexing_with_a_moved_checkpoint_says_what_the_collection_records(make_ctx, tmp_path,
                                                                           notes_embedder):
    """A collection indexed with a checkpoint that was moved since: a run with something to
    encode failed with a bare "unknown embedder '/old/path'" (search said which vectors and
    how to go on). It says what the collection records and how to point it at the new place."""
    from app.errors import UnknownModelError

    src = tmp_path / "src"
    write_corpus(src, 2)
    ctx = make_ctx()
    IndexService(ctx).index(src, "ck", IndexOptions(embedder=notes_embedder))
    moved = tmp_path / "elsewhere"
    shutil.move(notes_embedder, moved)
    (src / "new.txt").write_text("a new note about ferry fees")
    ctx.close()
    cache = EmbedderCache("cpu")  # another process: the checkpoint not loaded in it
    cache.put("minilm", ctx.embedders.get("minilm"))
    ctx = ServiceContext(ctx.settings, embedders=cache)

    with pytest.raises(UnknownModelError) as caught:
        IndexService(ctx).index(src, "ck")  # (its own context: closed below)
    assert str(caught.value).startswith(
        f"the 'minilm-notes' vectors of collection 'ck' were written by {notes_embedder!r}, which cannot "
        f"be loaded now (unknown embedder {notes_embedder!r}")
    assert str(caught.value).endswith("put it back, or index with --embedder (the API's `embedder`) "
                                      "naming the same weights where they are now: the collection "
                                      "then records that place")
    # Queued for later (`--background`, POST /jobs, a worker's job): refused now, with the same
    # message (the job was taken and failed seconds later).
    for runner in ("thread", "celery"):
        with pytest.raises(UnknownModelError, match="which cannot be loaded now"):
            IndexService(ctx).prepare(src, "ck", runner=runner)
    assert [j.state for j in CollectionService(ctx).jobs("ck")] == ["completed"]  # none queued
    try:
        report = IndexService(ctx).index(src, "ck", IndexOptions(embedder=str(moved)))
        assert report.docs_indexed == 1
        assert CollectionService(ctx).get("ck").sources["minilm-notes"] == str(moved)
    finally:
        ctx.close()
