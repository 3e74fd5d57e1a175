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
