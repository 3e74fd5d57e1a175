"""What a damaged or half-changed data folder is told, and what a refused job is called
(the data-care exploration). Real minilm, SQLite and edge store; the files really cut.

* A facet.db cut short said "cannot open the metadata database ...: database disk image is
  malformed; check the data folder", exit 1: now it is damaged, a data error (exit 4, as for a
  collection's damaged store files), restored with qdrant-edge/ from the same backup.
* A `facet delete` killed part-way (store dropped first, the metadata's commit after) left a
  note that said only "restored from another time than the database?": it allows for the
  interrupted delete too, and says running it again finishes it.
* A job refused before anything was written (FACET_MIN_FREE_MB above the free space) said
  "stopped before writing more"; it is "refused before writing anything", and "stopped before
  writing more" is kept for a job that did write.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.errors import DataError, UnavailableError
from app.services.collections import CollectionService, points_missing_text
from app.services.context import open_database
from app.services.indexing import IndexService
from app.settings import FacetSettings
from tests.app.cli_runner import invoke_cli

from .conftest import write_corpus

BACKUP = '"Backup, restore and moving the embedded data folder"'


def _indexed(make_ctx, tmp_path: Path, name: str = "big") -> Path:
    write_corpus(tmp_path / "src", 3)
    ctx = make_ctx()
    assert IndexService(ctx).index(tmp_path / "src", name).docs_indexed == 3
    ctx.close()
    return ctx.settings.data_dir


@pytest.mark.parametrize("how", ["cut in half", "header garbled"])
def test_a_damaged_metadata_database_says_so_and_how_back(make_ctx, tmp_path, how) -> None:
    data = _indexed(make_ctx, tmp_path)
    db = data / "facet.db"
    if how == "cut in half":
        with open(db, "r+b") as f:
            f.truncate(db.stat().st_size // 2)
        why = "database disk image is malformed"
    else:
        with open(db, "r+b") as f:
            f.write(b"not a database, garbled")
        why = "file is not a database"
    with pytest.raises(DataError) as damaged:
        open_database(FacetSettings(data_dir=data))
    said = str(damaged.value)
    assert said.startswith(f"the metadata database {db} is damaged ({why}): "), said
    assert f"restore facet.db together with {data / 'qdrant-edge'} from the same backup" in said
    assert BACKUP in said and "docs/deploy.md" in said, said
    for args in (["collections"], ["jobs"], ["search", "card", "-c", "big"]):
        done = invoke_cli(*args, env={"FACET_DATA_DIR": str(data)})
        assert (done.returncode, "Traceback" in done.stderr) == (4, False), (args, done.stderr)
        assert done.stderr.startswith(f"error: the metadata database {db} is damaged ({why})"), \
            (args, done.stderr)
        assert "check the data folder" not in done.stderr, done.stderr


def test_an_interrupted_delete_is_named_and_running_it_again_finishes_it(make_ctx, tmp_path) -> None:
    data = _indexed(make_ctx, tmp_path)
    folder = data / "qdrant-edge" / "big"
    # Killed in the store's rmtree: its segments and WAL gone, its side files still there (the
    # metadata's rows kept: its commit comes after the drop).
    shutil.rmtree(folder / "segments")
    shutil.rmtree(folder / "wal")
    ctx = make_ctx()
    [info] = CollectionService(ctx).list_all()
    assert (info.chunks, info.points) == (3, 0)
    assert info.store_note == (
        "0 points for 3 chunks: the vectors of 3 chunks are missing from the store, and searches "
        "cannot find them: restored from another time than the database? index its sources "
        "again (`facet index`) to write them; or a `facet delete` of it interrupted part-way? run "
        "it again to finish it")
    deleted = CollectionService(ctx).delete("big")  # as it says: it finishes
    assert deleted.name == "big"
    assert CollectionService(ctx).list_all() == [] and not folder.exists()
    # A search says the same (after "collection 'big': ").
    assert points_missing_text(1, 2).endswith("or a `facet delete` of it interrupted part-way? "
                                              "run it again to finish it")


def test_a_refused_job_is_not_called_stopped_and_a_stopped_one_still_is(make_ctx, tmp_path) -> None:
    write_corpus(tmp_path / "src", 2)
    no_room = shutil.disk_usage(tmp_path).free / 2**20 * 4
    ctx = make_ctx(min_free_mb=no_room)
    service = IndexService(ctx)
    with pytest.raises(UnavailableError) as refused:
        service.index(tmp_path / "src", "room")  # nothing written yet
    assert str(refused.value).startswith("refused before writing anything: the disk of the data "
                                         f"folder {ctx.settings.data_dir} has "), refused.value
    assert "stopped" not in str(refused.value)
    with pytest.raises(UnavailableError, match=r"^refused before writing anything: .* MiB free, "
                                               r"under FACET_MIN_FREE_MB"):
        service.prepare(tmp_path / "src", "room", runner="thread")  # POST /jobs, --background
    # Between the batches of a running job (``check_cancelled``'s check): it did write.
    with pytest.raises(UnavailableError, match=r"^stopped before writing more: the disk of the "
                                               r"data folder .* MiB free, under FACET_MIN_FREE_MB"):
        service.check_room()
    done = invoke_cli("index", str(tmp_path / "src"), "-c", "room", "-e", "minilm",
                      env={"FACET_DATA_DIR": str(tmp_path / "cli"), "FACET_MIN_FREE_MB": str(no_room)})
    assert done.returncode == 7, done.stderr
    assert done.stderr.startswith("error: refused before writing anything: the disk of the data "
                                  "folder"), done.stderr


@pytest.mark.parametrize("content", ["", '["x"]', "{not json"])
def test_a_damaged_term_vector_side_file_is_the_collections_damage_not_a_traceback(
        make_ctx, tmp_path, content) -> None:
    """`facet_lexical.json` cut short (a power loss: side files are renamed in, not synced) or
    garbled: `facet collections` failed whole on a JSONDecodeError traceback, and so did a word
    search; `facet_vectors.json` damaged the same way was already that collection's note."""
    from app.services.search import SearchRequest, SearchService

    write_corpus(tmp_path / "src", 2)
    ctx = make_ctx()
    IndexService(ctx).index(tmp_path / "src", "c")
    IndexService(ctx).index(tmp_path / "src", "d")
    side = ctx.settings.data_dir / "qdrant-edge" / "c" / "facet_lexical.json"
    assert side.is_file()
    ctx.close()
    side.write_text(content)
    ctx = make_ctx()
    listed = {c.name: c for c in CollectionService(ctx).list_all()}
    assert set(listed) == {"c", "d"}  # the other collection is still listed
    assert "facet_lexical.json is damaged" in (listed["c"].store_damaged or ""), listed["c"]
    assert listed["d"].store_damaged is None
    with pytest.raises(DataError, match=r"facet_lexical\.json is damaged"):  # exit 4
        SearchService(ctx).search(SearchRequest(query="topic note", collection="c", mode="lexical"))
    ctx.close()


def test_a_damaged_payload_index_record_is_made_again_not_a_traceback(make_ctx, tmp_path, caplog) -> None:
    """`facet_payload_indexes.json` only records which fields have an index: cut short, every
    filtered search and index run of the collection failed on a JSONDecodeError traceback."""
    from app.services.search import SearchRequest, SearchService

    write_corpus(tmp_path / "src", 3)
    ctx = make_ctx()
    IndexService(ctx).index(tmp_path / "src", "c")
    side = ctx.settings.data_dir / "qdrant-edge" / "c" / "facet_payload_indexes.json"
    name = next(iter(sorted((tmp_path / "src").iterdir()))).name
    found = SearchService(ctx).search(SearchRequest(query="topic note", collection="c",
                                                    filters={"title": name}))
    assert [r.title for r in found.results] == [name] and side.is_file()
    ctx.close()
    side.write_text("")
    ctx = make_ctx()
    again = SearchService(ctx).search(SearchRequest(query="topic note", collection="c",
                                                    filters={"title": name}))
    assert [r.title for r in again.results] == [name]
    (tmp_path / "src" / "new.txt").write_text("a new note about rivers")
    assert IndexService(ctx).index(tmp_path / "src", "c").docs_indexed == 1
    assert "facet_payload_indexes.json is damaged" in caplog.text
    ctx.close()
