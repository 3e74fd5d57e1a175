"""A record whose metadata changed but whose text did not reuses its own vectors.

A nightly export that adds a field to every record (``exported_at``), or writes an int as a
float (pandas: ``"n": 1`` -> ``"n": 1.0``), re-encoded the whole corpus: the document's
content hash covers its metadata, and the skip and reuse checks compared that hash. Now such a
record keeps its vectors (nothing encoded), its payload and row rewritten (filters, lexical
search and the payload text right), while a changed text is encoded; every embedder of the
collection must hold its vectors for the record's content, else it is encoded as before.
Real minilm, the real edge store and SQLite; what is encoded is counted at the encoder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from app.services.context import ServiceContext
from app.services.indexing import IndexOptions, IndexService
from app.services.search import SearchRequest, SearchService
from indexer import metadata as md
from indexer.store import point_id

from .conftest import counting

RECORDS = [
    {"id": "r1", "text": "How do I reset my online banking password?", "title": "Password reset",
     "status": "open", "n": 1},
    {"id": "r2", "text": "My card payment was declined at the petrol station yesterday.",
     "status": "open", "n": 2},
    {"id": "r3", "text": "The exchange rate applied to my euro transfer was wrong.", "n": 3},
    {"id": "r4", "text": "Can I order a replacement card after losing my wallet?", "n": 4},
    {"id": "r5", "text": "Why was I charged a fee for topping up with a credit card?", "n": 5},
]


def write(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def stored(ctx: ServiceContext, collection: str, key: str) -> dict[str, Any]:
    """The point of ``key``'s first chunk: (payload, {vector name: float32 array})."""
    [(hit, vectors)] = ctx.store.retrieve(collection, [point_id(key, 0)], with_vectors=True)
    return {"payload": hit.payload, **{n: np.asarray(v, dtype=np.float32) for n, v in vectors.items()}}


def rows(ctx: ServiceContext, collection: str) -> dict[str, md.Document]:
    with ctx.sessions() as session:
        coll = md.get_collection(session, collection)
        assert coll is not None
        docs = session.query(md.Document).filter_by(collection_id=coll.id).all()
        for d in docs:
            _ = [c.text for c in d.chunks]
        session.expunge_all()
        return {d.key: d for d in docs}


def vector_hashes(ctx: ServiceContext, collection: str) -> dict[str, dict[str, str]]:
    with ctx.sessions() as session:
        coll = md.get_collection(session, collection)
        assert coll is not None
        docs = session.query(md.Document).filter_by(collection_id=coll.id).all()
        held = md.vector_hashes_by_embedder(session, {d.id for d in docs})
        return {d.key: held.get(d.id, {}) for d in docs}


def search(ctx: ServiceContext, collection: str, query: str, mode: str = "dense",
           **more: Any) -> list[str]:
    response = SearchService(ctx).search(SearchRequest(query, collection, top_k=10, mode=mode, **more))
    return [r.doc_id for r in response.results]


def nightly(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Day 2's export: a timestamp on every record, r2 closed, r3's int a float, r4's text new."""
    out = [dict(r, exported_at="2026-12-01T02:00:00Z") for r in records]
    out[1]["status"] = "closed"
    out[2]["n"] = 3.0
    out[3]["text"] = "Kangaroos hop across the outback at dawn."
    return out


def test_only_the_changed_text_is_encoded_and_the_metadata_is_rewritten(make_ctx, tmp_path,
                                                                         monkeypatch):
    path = tmp_path / "live.jsonl"
    write(path, RECORDS)
    ctx = make_ctx()
    IndexService(ctx).index(path, "live")
    before = {r["id"]: stored(ctx, "live", r["id"]) for r in RECORDS}
    write(path, nightly(RECORDS))
    encoded = counting(ctx, monkeypatch)

    report = IndexService(ctx).index(path, "live", IndexOptions(sync=True))

    assert encoded == ["Kangaroos hop across the outback at dawn."]
    assert (report.docs_indexed, report.docs_skipped, report.chunks_reused) == (5, 0, 4)
    assert report.cut_encoded.get("minilm", 0) == 1
    for key in ("r1", "r2", "r3", "r5"):  # the same vectors, bit for bit
        after = stored(ctx, "live", key)
        assert after["minilm"].tobytes() == before[key]["minilm"].tobytes()
        assert after["payload"]["meta"]["exported_at"] == "2026-12-01T02:00:00Z"
    assert stored(ctx, "live", "r3")["payload"]["meta"]["n"] == 3.0
    assert isinstance(stored(ctx, "live", "r3")["payload"]["meta"]["n"], float)
    assert stored(ctx, "live", "r4")["payload"]["text"] == "Kangaroos hop across the outback at dawn."
    got = rows(ctx, "live")
    assert got["r2"].meta["status"] == "closed" and got["r3"].meta["n"] == 3.0
    assert got["r4"].chunks[0].text == "Kangaroos hop across the outback at dawn."
    # Filters see the new values; dense and lexical search the new text, not the old.
    assert search(ctx, "live", "card payment", filters={"status": "closed"}) == ["r2"]
    assert search(ctx, "live", "card", filters={"status": "open"}) == ["r1"]
    assert sorted(search(ctx, "live", "password", filters={"exported_at": "2026-12-01T02:00:00Z"})) \
        == ["r1", "r2", "r3", "r4", "r5"]
    assert search(ctx, "live", "kangaroos outback", mode="lexical") == ["r4"]
    assert search(ctx, "live", "wallet replacement", mode="lexical") == []
    assert search(ctx, "live", "kangaroo hopping in Australia")[0] == "r4"
    assert search(ctx, "live", "reset banking password")[0] == "r1"
    # A rerun skips everything, and an older version's rule (vector hash == content hash) holds.
    again = IndexService(ctx).index(path, "live", IndexOptions(sync=True))
    assert (again.docs_skipped, again.docs_indexed, encoded[1:]) == (5, 0, [])
    hashes = vector_hashes(ctx, "live")
    assert all(hashes[k] == {"minilm": got[k].content_hash} for k in got)


def test_two_embedders_reuse_only_where_both_are_held(make_ctx, tmp_path, monkeypatch,
                                                      notes_embedder):
    path = tmp_path / "live.jsonl"
    write(path, RECORDS)
    ctx = make_ctx()
    IndexService(ctx).index(path, "two")
    IndexService(ctx).index(path, "two", IndexOptions(embedder=notes_embedder))
    before = {r["id"]: stored(ctx, "two", r["id"]) for r in RECORDS}
    assert all({"minilm", "minilm-notes"} <= b.keys() for b in before.values())
    # r5's notes vectors are not known to be its content's (cleared, as a left-out embedder's).
    with ctx.sessions() as session:
        coll = md.get_collection(session, "two")
        assert coll is not None
        r5 = md.documents_by_key(session, coll.id, ["r5"])["r5"]
        md.clear_vector_hashes(session, [r5], "minilm-notes")
        session.commit()
    write(path, nightly(RECORDS))
    encoded = counting(ctx, monkeypatch)

    report = IndexService(ctx).index(path, "two", IndexOptions(sync=True))

    r5_text = RECORDS[4]["text"]
    assert sorted(encoded) == sorted(["Kangaroos hop across the outback at dawn."] * 2 + [r5_text] * 2)
    assert (report.docs_indexed, report.chunks_reused) == (5, 3)
    for key in ("r1", "r2", "r3"):
        after = stored(ctx, "two", key)
        for name in ("minilm", "minilm-notes"):
            assert after[name].tobytes() == before[key][name].tobytes()
        assert after["payload"]["meta"]["exported_at"] == "2026-12-01T02:00:00Z"
    got = rows(ctx, "two")
    hashes = vector_hashes(ctx, "two")
    assert all(hashes[k] == {"minilm": got[k].content_hash, "minilm-notes": got[k].content_hash}
               for k in got)
    for name in ("minilm", "minilm-notes"):
        assert search(ctx, "two", "card payment", embedder=name, filters={"status": "closed"}) == ["r2"]
        assert search(ctx, "two", "kangaroo hopping in Australia", embedder=name)[0] == "r4"


def test_a_row_whose_vectors_are_not_its_contents_is_encoded_once(make_ctx, tmp_path, monkeypatch):
    """A vector hash other than the row's content hash (vectors written for other content, or
    by a version that recorded something else) is never taken as a match: encoded, once."""
    path = tmp_path / "live.jsonl"
    write(path, RECORDS[:2])
    ctx = make_ctx()
    IndexService(ctx).index(path, "old")
    with ctx.sessions() as session:
        coll = md.get_collection(session, "old")
        assert coll is not None
        r1 = md.documents_by_key(session, coll.id, ["r1"])["r1"]
        md.set_vector_hash(session, r1, "minilm", "0" * 64)
        session.commit()
    write(path, [dict(r, exported_at="2026-12-01") for r in RECORDS[:2]])
    encoded = counting(ctx, monkeypatch)

    report = IndexService(ctx).index(path, "old", IndexOptions(sync=True))

    assert encoded == [f"Password reset\n{RECORDS[0]['text']}"]  # (its title starts its text)
    assert (report.docs_indexed, report.chunks_reused) == (2, 1)
    again = IndexService(ctx).index(path, "old", IndexOptions(sync=True))
    assert (again.docs_skipped, encoded[1:]) == (2, [])


def test_a_changed_title_that_is_part_of_the_text_is_encoded(make_ctx, tmp_path, monkeypatch):
    """A record's title starts its text (what the embedder reads): a new title is new text."""
    path = tmp_path / "live.jsonl"
    write(path, RECORDS[:1])
    ctx = make_ctx()
    IndexService(ctx).index(path, "titled")
    first = rows(ctx, "titled")["r1"].chunks[0].text
    assert first.startswith("Password reset")
    write(path, [dict(RECORDS[0], title="Forgotten password")])
    encoded = counting(ctx, monkeypatch)

    report = IndexService(ctx).index(path, "titled", IndexOptions(sync=True))

    assert len(encoded) == 1 and encoded[0].startswith("Forgotten password")
    assert report.chunks_reused == 0
    assert stored(ctx, "titled", "r1")["payload"]["title"] == "Forgotten password"
