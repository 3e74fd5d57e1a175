"""A relative removal key that is a symlink names the link's own document, not its target's.

``facet delete up -d lnk/b_alias.txt`` (a link to an upload staged in the collection's folder,
both indexed) resolved the link first: it removed the target's document, deleted its staged
upload, and left the document the user named searchable. A walked folder keys a link by its own
path; the key is now read that way first (then with links resolved, for a working folder
reached through one). Real minilm, SQLite, Qdrant edge."""

from __future__ import annotations

from pathlib import Path

from app.services.indexing import IndexService
from indexer import metadata as md


def _keys(ctx, name: str) -> set[str]:
    with ctx.sessions() as session:
        coll = md.get_collection(session, name)
        return set(md.document_keys_under(session, coll.id, [], ""))


def test_a_relative_key_through_a_symlink_removes_the_links_document(make_ctx, tmp_path) -> None:
    ctx = make_ctx()
    staged = Path(ctx.settings.data_dir) / "uploads" / "up"
    staged.mkdir(parents=True)
    target = staged / "b.txt"
    target.write_text("Bananas are yellow and grow in bunches.")
    links = tmp_path / "lnk"
    links.mkdir()
    (links / "b_alias.txt").symlink_to(target)
    service = IndexService(ctx)
    service.index(staged, "up")
    service.index(links, "up")
    alias = str(links / "b_alias.txt")
    assert _keys(ctx, "up") == {str(target), alias}

    report = service.remove_documents("up", ["lnk/b_alias.txt"], base=tmp_path)

    assert [d.key for d in report.removed] == [alias]
    assert _keys(ctx, "up") == {str(target)}
    assert target.exists()  # the staged upload the user did not name is kept
