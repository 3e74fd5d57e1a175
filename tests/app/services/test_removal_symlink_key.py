"""A relative removal key that is a symlink names the link's own document, not its target's.

``facet delete up -d lnk/b_alias.txt`` (a link to an upload staged in the collection's folder,
both indexed) resolved the link first: it removed the target's document, deleted its staged
upload, and left the document the user named searchable. A walked folder keys a link by its own
path; the key is now read that way first (then with links resolved, for a working folder
reached through one). Since the sixth session of 2026-12-04 a link into the data folder from
outside it is not read at all (the staged upload of another collection was indexed through one):
the target is a file of another folder here. Real minilm, SQLite, Qdrant edge."""

from __future__ import annotations

from app.services.indexing import IndexService
from indexer import metadata as md


def _keys(ctx, name: str) -> set[str]:
    with ctx.sessions() as session:
        coll = md.get_collection(session, name)
        return set(md.document_keys_under(session, coll.id, [], ""))


def test_a_relative_key_through_a_symlink_removes_the_links_document(make_ctx, tmp_path) -> None:
    ctx = make_ctx()
    staged = tmp_path / "files"
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
    assert target.exists()  # the file the user did not name is kept
