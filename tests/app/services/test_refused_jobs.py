"""A foreground index run refused before any work (the store busy: another process holds the
collection; the disk too full: ``FACET_MIN_FREE_MB``) leaves nothing behind: no empty collection
it created itself (`facet collections` listed a collection the user never got), and no failed
job "queued T, never started" cluttering `facet jobs` (the refusal is said on stderr, with its
exit code, and no job id was handed out). A job whose id was handed out (a background or worker
job) keeps its failed row. Real minilm, SQLite, edge store and a real process holding the lock."""

from __future__ import annotations

import shutil

import pytest

from app.errors import ConflictError, UnavailableError
from app.services.collections import CollectionService
from app.services.indexing import IndexOptions, IndexService
from tests.app.cli_runner import invoke_cli

from .conftest import locked_by_another_process, write_corpus

ROOM = r"^refused before writing anything: the disk of the data folder .* MiB free, under FACET_MIN_FREE_MB"


def _no_room_mb(path) -> float:
    """A FACET_MIN_FREE_MB this disk cannot meet."""
    return shutil.disk_usage(path).free / 2**20 * 4


def _names(ctx) -> list[str]:
    return [c.name for c in CollectionService(ctx).list_all()]


def test_a_refusal_leaves_no_collection_it_created(make_ctx, tmp_path) -> None:
    write_corpus(tmp_path / "src", 2)
    full = make_ctx(min_free_mb=_no_room_mb(tmp_path))
    with pytest.raises(UnavailableError, match=ROOM):
        IndexService(full).index(tmp_path / "src", "room")
    assert _names(full) == [] and list(CollectionService(full).jobs()) == []
    assert not full.store.collection_exists("room")
    ctx = make_ctx(store_wait_s=0.2)
    with locked_by_another_process(ctx.settings.data_dir, "busy") as holder:
        with pytest.raises(ConflictError, match=f"collection 'busy' is open in pid {holder.pid}"):
            IndexService(ctx).index(tmp_path / "src", "busy")
        assert _names(ctx) == [] and list(CollectionService(ctx).jobs()) == []
    # Free and roomy again: both are made by the runs that index them.
    for name in ("room", "busy"):
        report = IndexService(ctx).index(tmp_path / "src", name)
        assert (report.state, report.docs_indexed) == ("completed", 2)
    assert _names(ctx) == ["busy", "room"]


def test_a_refused_run_into_an_existing_collection_records_no_job(make_ctx, tmp_path) -> None:
    write_corpus(tmp_path / "src", 2)
    write_corpus(tmp_path / "more", 3)
    ctx = make_ctx(store_wait_s=0.2)
    first = IndexService(ctx).index(tmp_path / "src", "c")
    ctx.store.release("c")
    with locked_by_another_process(ctx.settings.data_dir, "c", opened=True), \
            pytest.raises(ConflictError, match="collection 'c' is open in pid"):
        IndexService(ctx).index(tmp_path / "more", "c", IndexOptions(sync=False))
    full = make_ctx(min_free_mb=_no_room_mb(tmp_path))
    with pytest.raises(UnavailableError, match=ROOM):
        IndexService(full).index(tmp_path / "more", "c", IndexOptions(sync=False))
    jobs = CollectionService(ctx).jobs("c")
    assert [(j.id, j.state) for j in jobs] == [(first.job_id, "completed")], \
        [(j.id, j.state, j.when()) for j in jobs]
    info = CollectionService(ctx).get("c")  # the collection as it was
    assert (info.documents, info.documents_indexed) == (2, 2)


def test_a_job_whose_id_was_handed_out_keeps_its_failed_row(make_ctx, tmp_path) -> None:
    """A background (or worker) job is prepared, its id given, then run, the disk full by then:
    refused, it stays failed with the reason, and the collection it was queued into stays."""
    write_corpus(tmp_path / "src", 2)
    full = make_ctx(min_free_mb=0)
    service = IndexService(full)
    prepared = service.prepare(tmp_path / "src", "room", runner="thread")
    full.settings.min_free_mb = _no_room_mb(tmp_path)  # the disk filled while it was queued
    with pytest.raises(UnavailableError, match=ROOM):
        service.run(prepared)
    [job] = CollectionService(full).jobs("room")
    assert (job.id, job.state, job.docs_indexed) == (prepared.job_id, "failed", 0)
    assert job.when() == f"queued {job.queued_at}, never started"
    assert job.message.endswith(f"; run `facet index {tmp_path / 'src'} --collection room --embedder "
                                "minilm` again once it is back to resume")  # (nothing indexed to keep)


def test_facet_index_refused_says_so_and_leaves_nothing(make_ctx, tmp_path) -> None:
    write_corpus(tmp_path / "src", 2)
    ctx = make_ctx()
    IndexService(ctx).index(tmp_path / "src", "c")
    ctx.store.release("c")
    env = {"FACET_DATA_DIR": str(ctx.settings.data_dir), "FACET_STORE_WAIT_S": "0.2",
           "FACET_CHUNK_TOKENS": "64", "FACET_CHUNK_OVERLAP": "8"}
    with locked_by_another_process(ctx.settings.data_dir, "c") as holder:
        busy = invoke_cli("index", str(tmp_path / "src"), "-c", "c", "-e", "minilm", env=env)
    assert busy.returncode == 5, busy.stderr
    assert busy.stderr.startswith(f"error: collection 'c' is open in pid {holder.pid}"), busy.stderr
    full = invoke_cli("index", str(tmp_path / "src"), "-c", "new", "-e", "minilm",
                      env={**env, "FACET_MIN_FREE_MB": str(_no_room_mb(tmp_path))})
    assert full.returncode == 7, full.stderr
    assert full.stderr.startswith("error: refused before writing anything: the disk of the data "
                                  "folder"), full.stderr
    listed = invoke_cli("jobs", env=env)
    assert listed.returncode == 0 and "never started" not in listed.stdout, listed.stdout
    assert len(listed.stdout.strip().splitlines()) == 1 and listed.stdout.startswith("job 1 completed")
    collections = invoke_cli("collections", env=env)
    assert collections.returncode == 0 and "new" not in collections.stdout, collections.stdout


@pytest.mark.parametrize("runner", ["thread", "process", "celery"])
def test_a_queued_job_on_a_full_disk_is_refused_when_submitted(make_ctx, tmp_path, runner) -> None:
    """`facet index --background` and POST /jobs on a disk under FACET_MIN_FREE_MB said
    "queued" (a 202), then failed the job the same second and left its new collection empty; a
    busy store was already refused at submit."""
    write_corpus(tmp_path / "src", 2)
    full = make_ctx(min_free_mb=_no_room_mb(tmp_path))
    with pytest.raises(UnavailableError, match=ROOM):
        IndexService(full).prepare(tmp_path / "src", "room", runner=runner)
    assert _names(full) == []
    with full.sessions() as session:
        from indexer import metadata as md

        assert session.query(md.IndexJob).count() == 0
