"""A grouped search's ``more_chunks`` lists only the document's other chunks that pass
``score_threshold`` (the real minilm, a real edge collection).

``facet search -c docs "which animal purrs" -k 5 --score-threshold 0.3`` said cats "(+6 more
chunks)" where ``--per-chunk`` showed one other cats chunk at 0.3 or more: the document's chunks
were grouped before the threshold, so every candidate chunk was counted."""

from __future__ import annotations

from app.services.indexing import IndexService
from app.services.search import SearchRequest, SearchService

# One long document (several 64-token chunks) whose parts are near the query or far from it.
CATS = [
    "Cats purr when they are content, and a purring cat is usually a relaxed and happy animal.",
    "Domestic cats purr by vibrating the muscles of the larynx while they breathe in and out.",
    "The household budget should list rent, electricity, water and the monthly phone bill.",
    "Kittens purr while nursing so that their mother knows they are feeding well.",
    "Tax returns are due at the end of April; late filing costs a fee and interest.",
    "Cats sleep for most of the day and hunt mice and birds at dusk and dawn.",
    "Replace the air filter of the car every year and check the tyre pressure monthly.",
    "A railway timetable lists departures, platforms and connections for each station.",
]
QUERY = "which animal purrs"


def test_more_chunks_lists_only_the_other_chunks_above_the_threshold(make_ctx, tmp_path) -> None:
    src = tmp_path / "docs"
    src.mkdir()
    (src / "cats.txt").write_text(" ".join(f"{s} {s}" for s in CATS))  # chunks of a few sentences
    (src / "dogs.txt").write_text("Dogs bark at strangers and wag their tails when happy.")
    (src / "soup.txt").write_text("Simmer the onions slowly before adding the stock.")
    ctx = make_ctx()
    IndexService(ctx).index(src, "docs")
    service = SearchService(ctx)
    cats = str(src / "cats.txt")

    every = service.search(SearchRequest(QUERY, "docs", top_k=100, mode="dense"))
    scores = [r.score for r in every.results if r.doc_id == cats]
    assert len(scores) >= 4, scores  # several chunks, ranked best first
    # Between its second and third best chunk: one other chunk passes, the rest do not.
    threshold = (scores[1] + scores[2]) / 2

    unfiltered = service.search(SearchRequest(QUERY, "docs", top_k=5, mode="dense",
                                              group_by_document=True))
    assert len(next(r for r in unfiltered.results if r.doc_id == cats).more_chunks) >= 3

    grouped = service.search(SearchRequest(QUERY, "docs", top_k=5, mode="dense",
                                           group_by_document=True, score_threshold=threshold))
    per_chunk = service.search(SearchRequest(QUERY, "docs", top_k=100, mode="dense",
                                             score_threshold=threshold))
    passing = [r.chunk_no for r in per_chunk.results if r.doc_id == cats]
    hit = next(r for r in grouped.results if r.doc_id == cats)
    assert hit.chunk_no == passing[0]
    assert hit.more_chunks == passing[1:], (hit.more_chunks, passing, threshold)
    assert len(hit.more_chunks) == 1
    # Every result (each document's best chunk) passes the threshold; the others are dropped.
    assert all(r.score >= threshold for r in grouped.results)
    assert {r.doc_id for r in grouped.results} == {r.doc_id for r in per_chunk.results}
