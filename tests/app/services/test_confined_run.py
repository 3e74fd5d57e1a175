"""A job of the API or the UI reads only files under the folders the server may index, checked
again as it reads its source: a link to a file elsewhere, made after the job was submitted
and checked, was followed and its text came back in searches (the security exploration of
the sixth session of 2026-12-02). Real SQLite, the edge store, minilm; a real symlink."""

from __future__ import annotations

from app.services.indexing import IndexOptions, IndexService
from app.services.search import SearchRequest, SearchService


def test_a_link_out_of_the_allowed_folders_is_not_read(make_ctx, tmp_path) -> None:
    allowed = tmp_path / "allowed"
    (allowed / "docs").mkdir(parents=True)
    (allowed / "docs" / "a.txt").write_text("notes about the card payment that was declined\n")
    (allowed / "docs" / "inside.txt").symlink_to(allowed / "docs" / "a.txt")  # a link within: read
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("zebras hold the launch codes\n")
    (allowed / "docs" / "leak.txt").symlink_to(secret)
    ctx = make_ctx()
    report = IndexService(ctx).index(allowed / "docs", "docs",
                                     IndexOptions(embedder="minilm", confine=(str(allowed),)))
    assert report.docs_indexed == 2, report
    leak = str(allowed / "docs" / "leak.txt")
    assert (leak, "a link to a file outside the folders this server may index, not read") in report.skipped_other
    found = SearchService(ctx).search(SearchRequest("zebras launch codes", "docs", mode="lexical"))
    assert found.results == [], [r.text for r in found.results]
    # Without confine (the CLI's own runs), the link is read as before.
    IndexService(ctx).index(allowed / "docs", "open", IndexOptions(embedder="minilm"))
    found = SearchService(ctx).search(SearchRequest("zebras launch codes", "open", mode="lexical"))
    assert [r.doc_id for r in found.results] == [leak]


def test_a_link_into_the_data_folder_is_not_read_on_any_edge(make_ctx, tmp_path) -> None:
    """The walk never enters the data folder, but read a link to a file in it: another
    collection's staged upload, linked from an allowed folder, was indexed and found by search
    (the API's and UI's checks looked only at the allowed roots, and the CLI has none)."""
    from app.roots import links_outside
    from app.services.distributed import ChunkedIndexService

    ctx = make_ctx()
    private = ctx.settings.data_dir / "uploads" / "private"
    private.mkdir(parents=True)
    (private / "secret.txt").write_text("The vault code is 4711, kept by the private collection.")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "public.txt").write_text("A public note about gardens.")
    (docs / "linked.txt").symlink_to(private / "secret.txt")
    assert links_outside(docs, [tmp_path], (ctx.settings.data_dir,)) == [docs / "linked.txt"]
    why = (str(docs / "linked.txt"), "a link to a file in Facet's own data folder (FACET_DATA_DIR), not read")
    report = IndexService(ctx).index(docs, "pub", IndexOptions(embedder="minilm"))
    assert report.docs_indexed == 1 and why in report.skipped_other, report
    service = ChunkedIndexService(ctx)
    prepared = IndexService(ctx).prepare(docs, "pub2", IndexOptions(embedder="minilm"), runner="celery")
    for number in service.plan(prepared, 2):
        service.run_chunk(prepared.job_id, number)
    for name in ("pub", "pub2"):
        found = SearchService(ctx).search(SearchRequest("vault code", name, mode="lexical"))
        assert found.results == [], [r.text for r in found.results]
    # From a folder that holds the data folder too: every file under the source was exempt
    # (as a collection's own upload folder's are), and the link was read and found (the
    # security review of 2026-12-06); the API's and the UI's pre-job check let it through too.
    assert ctx.settings.data_dir.parent == tmp_path
    assert links_outside(tmp_path, [tmp_path], (ctx.settings.data_dir,)) == [docs / "linked.txt"]
    wide = IndexService(ctx).index(tmp_path, "wide", IndexOptions(embedder="minilm"))
    assert why in wide.skipped_other, wide
    found = SearchService(ctx).search(SearchRequest("vault code", "wide", mode="lexical"))
    assert found.results == [], [r.text for r in found.results]
    # A collection's own upload folder still reads its own files.
    own = IndexService(ctx).index(private, "private", IndexOptions(embedder="minilm"))
    assert own.docs_indexed == 1 and not own.skipped_other, own
