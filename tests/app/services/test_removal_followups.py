"""Follow-ups of removing documents (`facet delete C --document KEY`): an interrupted removal
said to resume it with `facet index 'remove: KEY'` (exit 3) and the next removal was shown as
resuming it; the refusal during a job of this process named no job; a removal could not be
checked before it ran; an emptied record file said nothing of its kept records (and with --sync
asked to "fix the file"); a refused delete said "cancel it" twice; clustering a collection
naming no embedder used FACET_DEFAULT_EMBEDDER where its searches used the collection's own.
Real minilm, real SQLite, Qdrant edge."""

from __future__ import annotations

import json
import os

import pytest

from app.errors import ConflictError, NotFoundError
from app.services import indexing, leases
from app.services.clustering import ClusterRequest, ClusterService
from app.services.collections import CollectionService
from app.services.indexing import IndexOptions, IndexService
from indexer import metadata as md

from .conftest import write_corpus


def _indexed(make_ctx, tmp_path, n: int = 2):
    files = sorted(write_corpus(tmp_path / "src", n))
    ctx = make_ctx()
    IndexService(ctx).index(tmp_path / "src", "ten")
    return ctx, files


def test_a_killed_removal_says_to_run_the_removal_again_and_is_not_resumed(make_ctx, tmp_path) -> None:
    ctx, files = _indexed(make_ctx, tmp_path)
    with ctx.sessions() as session:  # its process killed inside it: running, its lease gone
        coll = md.get_collection(session, "ten")
        job = md.IndexJob(collection_id=coll.id, source=f"remove: {files[0]}", embedder="minilm",
                          state="running", runner="inline", host=leases.HOST, pid=os.getpid(),
                          started_at=md.utcnow())
        session.add(job)
        session.commit()
        killed = int(job.id)
    catalog = CollectionService(ctx)

    shown = catalog.job(killed)
    assert shown.state == "interrupted"
    assert "facet index" not in (shown.message or ""), shown.message
    assert "the removal may be partly done" in (shown.message or "")
    assert f"`facet delete ten --document {files[0]}`" in (shown.message or "")

    report = IndexService(ctx).remove_documents("ten", [files[0]])
    again = catalog.job(report.job_id)
    assert (again.state, again.resumed_from) == ("completed", None)
    assert "facet index" not in (catalog.job(killed).message or "")
    assert f"job {report.job_id} ran the same removal again" in (catalog.job(killed).message or "")


def test_a_removal_stopped_by_ctrl_c_is_interrupted_with_the_removal_hint(make_ctx, tmp_path,
                                                                        monkeypatch) -> None:
    ctx, files = _indexed(make_ctx, tmp_path, 4)

    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ctx.store, "delete", stop)
    with pytest.raises(KeyboardInterrupt):
        IndexService(ctx).remove_documents("ten", files[:3])
    [job] = [j for j in CollectionService(ctx).jobs("ten") if j.source.startswith("remove: ")]
    assert job.state == "interrupted"
    assert "facet index" not in (job.message or ""), job.message
    assert (f"run `facet delete ten --document {files[0]} --document {files[1]} --document {files[2]}` "
            "(DELETE /collections/ten/documents?key=…) again with all 3 keys it was given"
            ) in (job.message or ""), job.message


def test_the_refusal_during_a_job_of_this_process_names_it(make_ctx, tmp_path) -> None:
    ctx, files = _indexed(make_ctx, tmp_path)
    lock = indexing._collection_lock("ten")
    assert lock.acquire(blocking=False)
    with indexing._REGISTRY_LOCK:
        indexing._WRITING["ten"] = 77
    try:
        with pytest.raises(ConflictError) as refused:
            IndexService(ctx).remove_documents("ten", [files[0]])
    finally:
        with indexing._REGISTRY_LOCK:
            indexing._WRITING.pop("ten", None)
        lock.release()
    said = str(refused.value)
    assert "job 77" in said and "GET /jobs/77" in said and "nothing was removed" in said, said


def test_a_removal_is_checked_without_removing_anything(make_ctx, tmp_path, monkeypatch) -> None:
    ctx, files = _indexed(make_ctx, tmp_path)
    service = IndexService(ctx)
    monkeypatch.chdir(tmp_path)
    jobs = len(CollectionService(ctx).jobs("ten"))

    assert service.check_removal("ten", ["src/doc000.txt", files[1]], base=tmp_path) == files

    assert len(CollectionService(ctx).jobs("ten")) == jobs  # no job, nothing removed
    assert ctx.store.count("ten") >= 2
    with pytest.raises(NotFoundError, match=r"no document 'nope\.txt'"):
        service.check_removal("ten", ["nope.txt"], base=tmp_path)
    with pytest.raises(NotFoundError, match="unknown collection 'nine'"):
        service.check_removal("nine", [files[0]])


def test_an_emptied_record_file_says_its_records_are_kept_and_how_to_remove_them(make_ctx, tmp_path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps({"_id": f"r{i}", "text": f"record {i} about trains"}) + "\n"
                            for i in range(3)))
    ctx = make_ctx()
    service = IndexService(ctx)
    service.index(path, "recs")
    path.write_text("")

    report = service.index(path, "recs")
    [(key, message)] = report.errors
    assert key == str(path)
    assert "no records to index" in message
    assert "its 3 indexed records are kept and stay searchable" in message, message
    assert "`facet delete recs -d KEY` for each" in message
    assert f"`facet index {path} -c recs --sync`" in message

    synced = service.index(path, "recs", IndexOptions(sync=True))
    [(where, warning)] = synced.warnings
    assert where == str(path)
    assert "fix the file" not in warning, warning
    assert f"delete the file and run `facet index {path} -c recs --sync`" in warning


def test_a_delete_refused_for_a_queued_job_says_cancel_it_once(make_ctx, tmp_path) -> None:
    ctx, _ = _indexed(make_ctx, tmp_path)
    with ctx.sessions() as session:
        coll = md.get_collection(session, "ten")
        job = md.IndexJob(collection_id=coll.id, source="/srv/texts", embedder="minilm",
                          state="queued", runner="thread", host=leases.HOST, pid=os.getpid())
        session.add(job)
        session.commit()
        job_id = int(job.id)

    with pytest.raises(ConflictError) as refused:
        CollectionService(ctx).delete("ten")

    said = str(refused.value)
    assert said.count("cancel it") == 1, said
    assert said == (f"collection 'ten' has job {job_id} queued to index it: cancel it (`facet jobs "
                    f"{job_id} --cancel`, POST /jobs/{job_id}/cancel) or wait for it to end, then "
                    "delete the collection")


def test_clustering_a_collection_uses_the_embedder_its_searches_use(make_ctx, tmp_path) -> None:
    """FACET_DEFAULT_EMBEDDER names none of the collection's embedders: a search uses its
    first (minilm); clustering it loaded the setting's."""
    write_corpus(tmp_path / "src", 4)
    IndexService(make_ctx()).index(tmp_path / "src", "ten")
    ctx = make_ctx(default_embedder="nosuch-embedder")

    got = ClusterService(ctx).cluster(ClusterRequest("What is it about?", collection="ten", k=2))

    assert got.embedder == "minilm"
    assert len(got.texts) == 4
