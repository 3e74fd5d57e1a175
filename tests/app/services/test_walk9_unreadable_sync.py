"""An archive's odd corners, indexed: a subfolder Facet cannot read lost its documents on the
next (synced) run, unsaid ("1 removed"), or the run ended in a PermissionError traceback; a
source path, collection name, document key or filter value that is not valid UTF-8 (a command
line's ``$'caf\\xe9'``) ended in a UnicodeEncodeError traceback from the database driver (or a
TypeError from the store's client). Run as root, the permission bits are made to count by
dropping this thread's DAC capabilities for the run (as `capsh --drop` does for a command)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.errors import InvalidRequestError
from app.services.collections import CollectionService
from app.services.indexing import IndexService
from app.services.search import SearchRequest, SearchService
from indexer import metadata as md
from tests.permissions import permissions_count


def _keys(ctx, name: str) -> set[str]:
    with ctx.sessions() as s:
        coll = md.get_collection(s, name)
        assert coll is not None
        return {str(d.key) for d in s.query(md.Document).filter_by(collection_id=coll.id)}


def test_a_sync_keeps_what_was_indexed_under_a_folder_it_cannot_read(make_ctx,
                                                                     tmp_path: Path) -> None:
    src = tmp_path / "r1"
    sub = src / "sub"
    sub.mkdir(parents=True)
    (src / "top.txt").write_text("Top note about harbours.")
    light = sub / "light.txt"
    light.write_text("Sub note about lighthouses.")
    ctx = make_ctx()
    service = IndexService(ctx)
    assert service.index(src, "r1").docs_indexed == 2
    both = {str(src / "top.txt"), str(light)}
    for mode in (0o000, 0o644):  # no r: listed as empty; no x: is_file() raised EACCES
        sub.chmod(mode)
        try:
            with permissions_count():
                report = service.index(src, "r1")  # a folder: synced by default
        finally:
            sub.chmod(0o755)
        assert (report.docs_seen, report.docs_deleted) == (1, 0), (oct(mode), report)
        assert report.skipped_other == [(str(sub), "cannot read this folder (Permission "
                                                   "denied)")], report.skipped_other
        warnings = dict(report.warnings)
        assert warnings[str(sub)].startswith(
            f"1 indexed document under {sub} not seen this run kept: it could not be read"), \
            report.warnings
        assert _keys(ctx, "r1") == both
        assert ctx.store.count("r1", {"doc_id": str(light)}) == 1  # still searchable
    # Readable again: nothing to do; deleted for real: the sync removes it.
    again = service.index(src, "r1")
    assert (again.docs_skipped, again.docs_deleted, again.warnings) == (2, 0, [])
    light.unlink()
    assert service.index(src, "r1").docs_deleted == 1
    assert _keys(ctx, "r1") == {str(src / "top.txt")}


def test_values_that_are_not_utf8_are_refused_before_any_query(make_ctx, tmp_path: Path) -> None:
    ctx = make_ctx()
    service = IndexService(ctx)
    src = tmp_path / "corpus"
    src.mkdir()
    (src / "a.txt").write_text("a note about owls")
    service.index(src, "odd")
    latdir = tmp_path / os.fsdecode(b"latdir\xe9")
    latdir.mkdir()
    (latdir / "h.txt").write_text("Latin folder about hedgehogs.")
    named = f"{tmp_path}/latdir\\xe9: its name is not valid UTF-8; rename it"
    for source in (latdir, latdir / "h.txt"):
        with pytest.raises(InvalidRequestError) as caught:
            service.index(source, "r3")
        assert (str(caught.value), caught.value.param) == (named, "source")
        with pytest.raises(InvalidRequestError, match="its name is not valid UTF-8"):
            service.prepare(source, "r3", runner="thread")  # --background
    bad = "caf" + os.fsdecode(b"\xe9")
    invalid = f"invalid collection name {bad!r}: use 1-128 ASCII letters"
    catalog = CollectionService(ctx)
    for call in (lambda: service.index(src, bad), lambda: catalog.jobs(bad),
                 lambda: catalog.get(bad), lambda: catalog.delete(bad),
                 lambda: catalog.job(1, collection=bad),
                 lambda: service.remove_documents(bad, ["x"])):
        with pytest.raises(InvalidRequestError) as caught:
            call()
        assert str(caught.value).startswith(invalid), caught.value
    assert [c.name for c in catalog.list_all()] == ["odd"]  # no r3, no café made
    with pytest.raises(InvalidRequestError) as caught:
        service.remove_documents("odd", [f"corpus/{bad}.txt"], base=tmp_path)
    assert (str(caught.value), caught.value.param) == (
        "corpus/caf\\xe9.txt: its name is not valid UTF-8, so no document has it (a folder "
        "walk skips such a file: rename it)", "key")
    with pytest.raises(InvalidRequestError) as caught:
        SearchService(ctx).search(SearchRequest("owls", "odd", filters={"doc_id": bad}))
    assert (str(caught.value), caught.value.param) == (
        f"filter 'doc_id': {bad!r} is not valid UTF-8 text, so it matches nothing", "filters")
    with pytest.raises(InvalidRequestError, match="is not valid UTF-8 text, so no field"):
        SearchService(ctx).search(SearchRequest("owls", "odd", filters={bad: "x"}))
    assert _keys(ctx, "odd") == {str(src / "a.txt")}


def test_a_worker_plan_keeps_a_file_it_cannot_look_at(tmp_path: Path) -> None:
    """A sync that was told nothing of the walk (a worker's plan reads ``discover`` alone)
    keeps a document whose file cannot be looked at: it may well be there."""
    from app.services.indexing import Seen

    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "light.txt").write_text("x")
    seen = Seen()
    sub.chmod(0o000)
    try:
        with permissions_count():
            held = seen.unreadable_folder(str(sub / "light.txt"))
            kept = seen.kept(str(sub / "light.txt"))
    finally:
        sub.chmod(0o755)
    assert (held, kept) == (str(sub), True)
    assert not seen.kept(str(sub / "light.txt"))  # readable: there, or seen to be gone
    assert seen.unreadable_folder(str(tmp_path / "gone.txt")) is None  # gone: not kept


def test_a_fifo_given_as_the_source_is_named(make_ctx, tmp_path: Path) -> None:
    """Given as the source itself, a FIFO is refused, named (it was skipped as "not a regular
    file" with nothing indexed, exit 0); inside a folder, it is skipped so."""
    from app.errors import InvalidRequestError

    fifo = tmp_path / "fifo.txt"
    os.mkfifo(fifo)
    with pytest.raises(InvalidRequestError, match=f"{fifo} is a pipe or a device, not a file or folder"):
        IndexService(make_ctx()).index(fifo, "ff")
    report = IndexService(make_ctx()).index(tmp_path, "ff")
    assert (report.docs_seen, report.skipped_other) == (0, [(str(fifo), "not a regular file")])


def test_a_copy_beside_an_indexed_file_under_an_unreadable_folder_is_indexed(make_ctx, tmp_path: Path) -> None:
    """A new copy of a file whose folder cannot be read now: whether the old path had moved
    was asked with ``Path.exists()``, which raised PermissionError, and every run of the source
    failed on that traceback until the folder could be read again. A path that cannot be looked
    at is no move: the copy is indexed, the old entry kept (as the sync keeps it)."""
    src = tmp_path / "s"
    (src / "sub1").mkdir(parents=True)
    (src / "sub2").mkdir()
    (src / "sub1" / "x.txt").write_text("hello unique text about zebras")
    (src / "sub2" / "o.txt").write_text("other doc")
    ctx = make_ctx()
    service = IndexService(ctx)
    assert service.index(src, "c").docs_indexed == 2
    (src / "sub2" / "y.txt").write_text("hello unique text about zebras")
    (src / "sub1").chmod(0o000)
    try:
        with permissions_count():
            report = service.index(src, "c")
    finally:
        (src / "sub1").chmod(0o755)
    assert (report.state, report.docs_indexed, report.docs_deleted) == ("completed", 1, 0), report
    assert not [w for w in report.warnings if "moved" in w[1]], report.warnings
    assert _keys(ctx, "c") == {str(src / "sub1" / "x.txt"), str(src / "sub2" / "o.txt"),
                               str(src / "sub2" / "y.txt")}
