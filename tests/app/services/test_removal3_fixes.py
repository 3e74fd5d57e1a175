"""Removal defects found by verification (2026-11-30): a removed UI upload came back with the next
upload (the staged file stayed in DATA_DIR/uploads/NAME, which every upload job indexes whole);
naming a record file whose failed run had left an error row under its path "removed 1 document"
(the entry) and left every record searchable; a completed removal listed each key as an error
("removing"), errors_total N; a numpy string key showed its repr in the refusal. Real minilm,
real SQLite, Qdrant edge."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from app.errors import NotFoundError
from app.services.collections import CollectionService
from app.services.indexing import IndexOptions, IndexService
from indexer import metadata as md
from ui import render

from .conftest import write_corpus


def _keys(ctx, name: str) -> set[str]:
    with ctx.sessions() as session:
        coll = md.get_collection(session, name)
        return set(md.document_keys_under(session, coll.id, [], "")) if coll else set()


def test_removing_a_staged_upload_deletes_its_file_and_the_next_upload_keeps_it_out(
        make_ctx, tmp_path) -> None:
    ctx = make_ctx()
    staged = Path(ctx.settings.data_dir) / "uploads" / "up"
    staged.mkdir(parents=True)
    secret, garden = staged / "secret.txt", staged / "garden.txt"
    secret.write_text("My private bank account password is hunter2.")
    garden.write_text("Tomatoes need sun and water in the garden.")
    outside = tmp_path / "outside.txt"
    outside.write_text("A letter kept outside the upload folder.")
    service = IndexService(ctx)
    service.index(staged, "up")
    service.index(outside, "up")

    report = service.remove_documents("up", [str(secret), str(outside)])

    by_key = {d.key: d for d in report.removed}
    assert (by_key[str(secret)].source_deleted, by_key[str(secret)].source_exists) == (True, False)
    assert (by_key[str(outside)].source_deleted, by_key[str(outside)].source_exists) == (False, True)
    assert [d.key for d in report.uploads_deleted()] == [str(secret)]
    assert not secret.exists() and garden.exists() and outside.exists()  # outside: never touched
    job = CollectionService(ctx).job(report.job_id)
    assert "1 uploaded file deleted from the collection's upload folder" in (job.message or "")

    (staged / "new.txt").write_text("A new upload about roses.")
    service.index(staged, "up")  # the next upload job: the whole folder
    assert str(secret) not in _keys(ctx, "up"), _keys(ctx, "up")
    assert {str(garden), str(staged / "new.txt")} <= _keys(ctx, "up")


def test_a_staged_record_file_is_kept_while_other_records_of_it_are_indexed(make_ctx) -> None:
    ctx = make_ctx()
    staged = Path(ctx.settings.data_dir) / "uploads" / "recs"
    staged.mkdir(parents=True)
    path = staged / "r.jsonl"
    path.write_text("".join(json.dumps({"_id": f"r{i}", "text": f"record {i} about trains"}) + "\n"
                            for i in range(2)))
    service = IndexService(ctx)
    service.index(staged, "recs")

    first = service.remove_documents("recs", ["r0"])
    assert path.exists() and not first.removed[0].source_deleted
    assert first.removed[0].source_exists
    last = service.remove_documents("recs", ["r1"])  # its last record: the file goes too
    assert not path.exists() and last.removed[0].source_deleted


def _emptied_after_failed_sync(make_ctx, tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps({"_id": f"r{i}", "text": f"record {i} about trains"}) + "\n"
                            for i in range(3)))
    ctx = make_ctx()
    service = IndexService(ctx)
    service.index(path, "recs")
    path.write_text("")
    return ctx, service, path


def test_a_record_file_is_refused_alike_with_or_without_an_error_row_for_it(make_ctx,
                                                                          tmp_path) -> None:
    ctx, service, path = _emptied_after_failed_sync(make_ctx, tmp_path)
    with pytest.raises(NotFoundError) as before:
        service.remove_documents("recs", [str(path)])
    service.index(path, "recs", IndexOptions(sync=True))  # fails: an error row under the path
    assert str(path) in _keys(ctx, "recs")

    with pytest.raises(NotFoundError) as after:
        service.remove_documents("recs", [str(path)])
    with pytest.raises(NotFoundError):
        service.check_removal("recs", [str(path)])

    said = f"{str(path)!r} is the file of 3 records (keys 'r0', 'r1', 'r2'): name those keys"
    assert said in str(before.value) and said in str(after.value), (before.value, after.value)
    assert after.value.param == "key"
    assert {"r0", "r1", "r2"} <= _keys(ctx, "recs")  # nothing removed
    # Named with all its records, the file's entry goes with them.
    report = service.remove_documents("recs", [str(path), "r0", "r1", "r2"])
    assert report.docs_deleted == 4 and _keys(ctx, "recs") == set()


def test_a_removals_keys_are_no_errors_but_its_removed_keys(make_ctx, tmp_path) -> None:
    files = sorted(write_corpus(tmp_path / "src", 4))
    ctx = make_ctx()
    service = IndexService(ctx)
    service.index(tmp_path / "src", "ten")
    catalog = CollectionService(ctx)

    many = service.remove_documents("ten", files[:3])
    one = service.remove_documents("ten", [files[3]])

    job = catalog.job(many.job_id)
    assert (job.errors, job.errors_total) == ([], 0), job
    assert (job.removed_keys, job.removed_keys_total) == (files[:3], 3)
    capped = catalog.job(many.job_id, errors=2)
    assert (capped.removed_keys, capped.removed_keys_total) == (files[:2], 3)
    single = catalog.job(one.job_id)
    assert (single.removed_keys, single.removed_keys_total, single.errors_total) == (
        [files[3]], 1, 0)
    listed = {j.id: j for j in catalog.jobs("ten")}
    assert (listed[many.job_id].errors_total, listed[many.job_id].removed_keys_total) == (0, 3)
    assert listed[many.job_id].removed_keys == []
    index_job = min(listed.values(), key=lambda j: j.id)
    assert (index_job.removed_keys, index_job.removed_keys_total) == ([], 0)

    # The page's job view: what the removal removed, not "3 errors and warnings".
    rows = render.job_error_rows(job)
    assert [r[:2] for r in rows] == [[Path(f).name, "removed"] for f in files[:3]], rows
    assert "errors and warnings" not in " ".join(" ".join(r) for r in rows)
    assert "3 of 3 documents removed" in render.job_html(job, None)


def test_a_numpy_string_key_is_shown_as_plain_text(make_ctx, tmp_path) -> None:
    write_corpus(tmp_path / "src", 1)
    ctx = make_ctx()
    IndexService(ctx).index(tmp_path / "src", "ten")
    with pytest.raises(NotFoundError) as refused:
        IndexService(ctx).remove_documents("ten", [np.str_("nosuch")])
    assert "no document 'nosuch' in collection 'ten'" in str(refused.value), refused.value
    assert "np.str_" not in str(refused.value)


def test_a_removal_meeting_another_removal_names_it(make_ctx, tmp_path, monkeypatch) -> None:
    """Two removals of one collection at once: the second was refused "an index job of this
    process is writing 'c'", though no index job ran; it names the removal now."""
    from app.errors import ConflictError

    ctx = make_ctx()
    docs = sorted(write_corpus(tmp_path / "src", 3))
    service = IndexService(ctx)
    service.index(tmp_path / "src", "c")
    held = service._remove_held
    said: list[BaseException] = []

    def meanwhile(session, coll, job, keys):  # type: ignore[no-untyped-def]
        try:
            service.remove_documents("c", [docs[1]])
        except ConflictError as e:
            said.append(e)
        return held(session, coll, job, keys)

    monkeypatch.setattr(service, "_remove_held", meanwhile)
    report = service.remove_documents("c", [docs[0]])
    [refused] = said
    assert str(refused) == (f"removal job {report.job_id} of this process is removing documents "
                            "of 'c'; try again once it is done (one writer per collection); "
                            "nothing was removed"), refused
    monkeypatch.setattr(service, "_remove_held", held)
    assert service.remove_documents("c", [docs[1]]).docs_deleted == 1  # and it is let go


@pytest.mark.parametrize(("sync", "flag"), [(False, " --no-sync"), (True, " --sync"), (None, "")])
def test_a_jobs_resume_hint_repeats_its_sync_choice(make_ctx, tmp_path, sync, flag) -> None:
    """A `--no-sync` job of a folder stopped part-way said to run `facet index FOLDER ...` again
    without the flag: that run synced, and removed the documents kept on purpose."""
    from app.services.collections import resume_command

    ctx = make_ctx()
    write_corpus(tmp_path / "src", 2)
    prepared = IndexService(ctx).prepare(tmp_path / "src", "c", IndexOptions(sync=sync),
                                         runner="thread")
    with ctx.sessions() as session:
        job = md.get_job(session, prepared.job_id)
        assert job is not None and job.sync is sync
        assert resume_command(job) == (f"facet index {tmp_path / 'src'} --collection c "
                                       f"--embedder minilm{flag}")


def test_a_removal_right_after_a_job_ended_waits_for_it_to_let_go(make_ctx, tmp_path,
                                                                  monkeypatch) -> None:
    """A job's row says `completed` a moment before the job lets go of the collection (its shard,
    its lease, then this process's lock): a client that polled the job until it ended and then
    removed a document was refused "index job N of this process is writing" (the upload test's
    flake, 2026-12-07). The removal waits for a job that recorded its end; one still running is
    refused as before."""
    import threading
    import time

    from app.errors import ConflictError

    ctx = make_ctx()
    docs = sorted(write_corpus(tmp_path / "src", 3))
    service = IndexService(ctx)
    service.index(tmp_path / "src", "c")
    (tmp_path / "src" / "new.txt").write_text("A new note about the card's pin.")
    release = ctx.store.release

    def slow_release(name: str) -> None:
        time.sleep(0.5)  # the gap after the row's commit, made long
        release(name)

    def ended(count: int) -> None:
        deadline = time.monotonic() + 60
        while True:
            with ctx.sessions() as session:
                states = [j.state for j in session.query(md.IndexJob).order_by(md.IndexJob.id)]
            if len(states) == count and states[-1] not in ("queued", "running"):
                assert states[-1] == "completed", states
                return
            assert time.monotonic() < deadline, states
            time.sleep(0.02)

    # The gap before the lease goes (the shard's release, made long): checks, then a removal.
    monkeypatch.setattr(ctx.store, "release", slow_release)
    job = threading.Thread(target=service.index, args=(tmp_path / "src", "c"))
    job.start()
    try:
        ended(2)
        assert service.check_removal("c", [docs[0]]) == [docs[0]]
        assert service.removal_parts("c", [docs[0]]) == [[docs[0]]]
        assert service.remove_documents("c", [docs[0]]).docs_deleted == 1
    finally:
        job.join()
    monkeypatch.setattr(ctx.store, "release", release)
    # The gap after the lease went, before this process's lock does: a removal at once.
    dropped = service._drop_if_nothing_indexed

    def slow_end(*args, **kwargs):  # type: ignore[no-untyped-def]
        try:
            return dropped(*args, **kwargs)
        finally:
            time.sleep(0.5)

    monkeypatch.setattr(service, "_drop_if_nothing_indexed", slow_end)
    (tmp_path / "src" / "newest.txt").write_text("A note about a lost card.")
    job = threading.Thread(target=service.index, args=(tmp_path / "src", "c"))
    job.start()
    try:
        ended(4)  # (the removal's job row is the third)
        assert service.remove_documents("c", [docs[2]]).docs_deleted == 1
    finally:
        job.join()
    monkeypatch.setattr(service, "_drop_if_nothing_indexed", dropped)
    # A job that has not ended (held before its run, its row queued): refused at once.
    started, go = threading.Event(), threading.Event()
    held = service._run_job

    def running(*args, **kwargs):  # type: ignore[no-untyped-def]
        started.set()
        go.wait(60)
        return held(*args, **kwargs)

    monkeypatch.setattr(service, "_run_job", running)
    (tmp_path / "src" / "newer.txt").write_text("Another note, about a refund.")
    job = threading.Thread(target=service.index, args=(tmp_path / "src", "c"))
    job.start()
    try:
        assert started.wait(30)
        t0 = time.monotonic()
        with pytest.raises(ConflictError, match="of this process is writing 'c'"):
            service.remove_documents("c", [docs[1]])
        assert time.monotonic() - t0 < 1.5  # (not the wait for an ending job)
    finally:
        go.set()
        job.join()
