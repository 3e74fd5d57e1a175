"""Removing named documents from a collection (``IndexService.remove_documents``), syncing a
file deleted since it was indexed (``--sync`` of a missing path), and what a run says of a
document that keeps its old indexed version or of records gone from a file indexed alone.

There was no way to take one document out of a collection (an erasure request): no command,
route or method; a file indexed on its own and then deleted could not be named again ("does
not exist"), and only indexing its whole folder removed it.
"""

from __future__ import annotations

import json

import pytest

from app.errors import ConflictError, InvalidRequestError, NotFoundError
from app.services.collections import CollectionService
from app.services.indexing import IndexOptions, IndexService
from app.services.search import SearchRequest, SearchService
from indexer import metadata as md

from .conftest import running_job, write_corpus


def _keys(ctx, collection: str) -> set[str]:
    with ctx.sessions() as session:
        coll = md.get_collection(session, collection)
        return {d.key for d in session.query(md.Document).filter_by(collection_id=coll.id)}


def _found(ctx, collection: str, query: str) -> set[str]:
    response = SearchService(ctx).search(SearchRequest(query, collection, top_k=20))
    return {r.doc_id for r in response.results}


def test_named_documents_are_removed_from_store_and_metadata_and_recorded_as_a_job(
        make_ctx, tmp_path) -> None:
    files = sorted(write_corpus(tmp_path / "src", 3))
    ctx = make_ctx()
    service = IndexService(ctx)
    service.index(tmp_path / "src", "ten")
    points = ctx.store.count("ten")

    report = service.remove_documents("ten", [files[0]])

    assert [(d.key, d.status, d.source_exists) for d in report.removed] == [
        (files[0], "indexed", True)]
    assert report.docs_deleted == 1 and report.chunks_deleted >= 1
    assert ctx.store.count("ten") == points - report.chunks_deleted
    assert _keys(ctx, "ten") == set(files[1:])
    assert files[0] not in _found(ctx, "ten", "bank card note 0")
    job = CollectionService(ctx).job(report.job_id)
    assert (job.state, job.source, job.docs_deleted, job.docs_seen) == (
        "completed", f"remove: {files[0]}", 1, 0)
    assert files[0] in (job.message or "")
    with ctx.sessions() as session:  # the lease is let go: the next writer is not refused
        assert md.get_collection(session, "ten").writer_job_id is None


def test_an_unknown_key_removes_nothing_and_names_it(make_ctx, tmp_path) -> None:
    files = sorted(write_corpus(tmp_path / "src", 2))
    ctx = make_ctx()
    service = IndexService(ctx)
    service.index(tmp_path / "src", "ten")
    jobs = len(CollectionService(ctx).jobs("ten"))

    with pytest.raises(NotFoundError) as caught:
        service.remove_documents("ten", [files[0], "nope.txt"])

    assert "'nope.txt'" in str(caught.value) and "nothing was removed" in str(caught.value)
    assert caught.value.param == "key"
    assert _keys(ctx, "ten") == set(files)  # the known one stays too
    assert len(CollectionService(ctx).jobs("ten")) == jobs  # no job row for a refusal


def test_a_record_file_named_instead_of_its_record_keys_says_which_keys(make_ctx, tmp_path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps({"_id": f"r{i}", "text": f"record {i} about trains"})
                            + "\n" for i in range(3)))
    ctx = make_ctx()
    service = IndexService(ctx)
    service.index(path, "recs")

    with pytest.raises(NotFoundError, match=r"is the file of 3 records \(keys 'r0', 'r1', 'r2'\)"):
        service.remove_documents("recs", [str(path)])
    report = service.remove_documents("recs", ["r1"])
    assert [d.key for d in report.removed] == ["r1"] and report.removed[0].source == str(path)
    assert _keys(ctx, "recs") == {"r0", "r2"}


def test_a_relative_path_is_read_from_base(make_ctx, tmp_path) -> None:
    files = sorted(write_corpus(tmp_path / "src", 2))
    ctx = make_ctx()
    service = IndexService(ctx)
    service.index(tmp_path / "src", "ten")

    with pytest.raises(NotFoundError):  # as given, no key
        service.remove_documents("ten", ["src/doc000.txt"])
    report = service.remove_documents("ten", ["src/doc000.txt"], base=tmp_path)
    assert [d.key for d in report.removed] == [files[0]]


def test_removal_is_refused_while_a_job_writes_the_collection(make_ctx, tmp_path) -> None:
    files = sorted(write_corpus(tmp_path / "src", 2))
    ctx = make_ctx()
    service = IndexService(ctx)
    service.index(tmp_path / "src", "ten")
    with ctx.sessions() as session:
        job_id = running_job(session, md.get_collection(session, "ten"))

    with pytest.raises(ConflictError, match=rf"job {job_id} .*one writer per collection"):
        service.remove_documents("ten", [files[0]])
    assert _keys(ctx, "ten") == set(files)


def test_removal_refuses_an_unknown_collection_and_bad_keys(make_ctx, tmp_path) -> None:
    write_corpus(tmp_path / "src", 1)
    ctx = make_ctx()
    service = IndexService(ctx)
    service.index(tmp_path / "src", "ten")
    with pytest.raises(NotFoundError, match=r"unknown collection 'nine' \(known: ten\)") as caught:
        service.remove_documents("nine", ["x"])
    assert caught.value.param == "collection"
    for keys in ([], "x", [""], [5]):
        with pytest.raises(InvalidRequestError):
            service.remove_documents("ten", keys)  # type: ignore[arg-type]


def test_a_collection_in_another_store_is_refused(make_ctx, tmp_path) -> None:
    files = sorted(write_corpus(tmp_path / "src", 1))
    ctx = make_ctx()
    service = IndexService(ctx)
    service.index(tmp_path / "src", "ten")
    with ctx.sessions() as session:
        md.get_collection(session, "ten").backend = "local"
        session.commit()

    with pytest.raises(ConflictError, match=r"not in the vector store in use.*nothing was removed"):
        service.remove_documents("ten", files)
    assert _keys(ctx, "ten") == set(files)


def test_a_deleted_file_is_removed_by_indexing_it_with_sync(make_ctx, tmp_path) -> None:
    inbox = tmp_path / "inbox"
    write_corpus(inbox, 2)
    letter = inbox / "letter.txt"
    letter.write_text("Dear bank, please erase my personal letter about the mortgage.")
    ctx = make_ctx()
    service = IndexService(ctx)
    service.index(letter, "ten")
    letter.unlink()

    with pytest.raises(NotFoundError, match=r"has 1 document from .*letter.txt: index it with --sync"):
        service.index(letter, "ten")
    report = service.index(letter, "ten", IndexOptions(sync=True))

    assert (report.state, report.docs_seen, report.docs_deleted) == ("completed", 0, 1)
    assert _keys(ctx, "ten") == set()
    job = CollectionService(ctx).job(report.job_id)
    assert "no longer exists: 1 document of it removed" in (job.message or "")
    # A path the collection never held is refused as before.
    with pytest.raises(NotFoundError, match="does not exist; pass a folder") as caught:
        service.index(inbox / "never.txt", "ten", IndexOptions(sync=True))
    assert "--sync" not in str(caught.value)


def test_a_file_that_fails_now_says_its_indexed_version_stays_searchable(make_ctx, tmp_path) -> None:
    src = tmp_path / "src"
    write_corpus(src, 1)
    ibis = src / "ibis.txt"
    ibis.write_text("The sacred ibis wades in the marsh looking for frogs.")
    ctx = make_ctx()
    service = IndexService(ctx)
    service.index(src, "birds")
    ibis.write_text("")

    report = service.index(src, "birds")

    [(key, message)] = report.errors
    assert key == str(ibis)
    assert "is empty" in message
    assert "its indexed version is kept and stays searchable" in message
    assert f"facet delete birds --document {ibis}" in message
    assert str(ibis) in _found(ctx, "birds", "sacred ibis marsh")


def test_records_gone_from_a_file_indexed_alone_are_said_to_be_kept(make_ctx, tmp_path) -> None:
    path = tmp_path / "r.jsonl"
    rows = [json.dumps({"_id": f"r{i}", "text": f"record {i} about trains"}) for i in range(3)]
    path.write_text("\n".join(rows) + "\n")
    ctx = make_ctx()
    service = IndexService(ctx)
    service.index(path, "recs")
    path.write_text(rows[0] + "\n")

    report = service.index(path, "recs")

    assert report.docs_deleted == 0
    [(where, message)] = report.warnings
    assert where == str(path)
    assert message.startswith(f"2 indexed records of {path} not in it any more")
    assert "--sync" in message
    assert _keys(ctx, "recs") == {"r0", "r1", "r2"}  # kept, as documented
    job = CollectionService(ctx).job(report.job_id)
    assert any(e["kind"] == "warning" and "not in it any more" in e["message"] for e in job.errors)
