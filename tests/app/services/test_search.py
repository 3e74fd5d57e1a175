from __future__ import annotations

import json

import numpy as np
import pytest

from app.errors import InvalidRequestError, NotFoundError
from app.services.indexing import IndexService
from app.services.search import SearchRequest, SearchService, make_snippet, parse_filters, payload_filters


@pytest.fixture
def searchable(make_ctx, tmp_path):
    rows = [("c1", "My card was declined at the supermarket", "card"),
            ("c2", "How do I top up my account with a bank transfer?", "top_up"),
            ("c3", "The exchange rate you applied was wrong", "exchange"),
            ("c4", "I lost my card yesterday, please block it", "card"),
            ("c5", "Top up failed twice this morning", "top_up")]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps({"_id": i, "text": t, "intent": c, "n": k}) + "\n"
                            for k, (i, t, c) in enumerate(rows)))
    ctx = make_ctx()
    IndexService(ctx).index(path, "support")
    return ctx


def test_search_ranks_like_exact_cosine_and_returns_snippets(searchable, minilm) -> None:
    service = SearchService(searchable)
    response = service.search(SearchRequest("card blocked", "support",
                                            instruction="Find the intent", top_k=5, mode="dense"))
    assert response.mode == "dense"
    texts = [r.text for r in response.results]
    docs = minilm.encode(texts, role="document")
    q = minilm.encode(["card blocked"], role="query", instruction="Find the intent")[0]
    assert [r.score for r in response.results] == pytest.approx(list(docs @ q), abs=1e-4)
    assert response.results[0].doc_id == "c4"
    top = response.results[0]
    assert "card" in top.snippet and top.snippet[slice(*top.highlights[0])].lower() in ("card",
                                                                                        "blocked")
    assert top.metadata["intent"] == "card"


def test_filters_restrict_results(searchable) -> None:
    service = SearchService(searchable)
    response = service.search(SearchRequest("money", "support", top_k=5,
                                            filters=parse_filters(["intent=top_up"])))
    assert {r.doc_id for r in response.results} == {"c2", "c5"}
    typed = service.search(SearchRequest("money", "support", top_k=5,
                                         filters=parse_filters(["n:=2", "n:=3"])))
    assert {r.doc_id for r in typed.results} == {"c3", "c4"}
    none = service.search(SearchRequest("money", "support", filters={"intent": "nope"}))
    assert none.results == []
    # Spaces around '=' (typed in the UI's box): the value was " top_up" and matched nothing.
    assert parse_filters([" intent = top_up ", 'pad:=" x "']) == {"intent": "top_up", "pad": " x "}


def _filtered_ids(ctx, path, collection: str, query: str):
    """Index ``path`` into ``collection``; return the search service and a function from CLI
    filters (``key=value``, ``key:=JSON``) to the ids of the documents the query then finds."""
    IndexService(ctx).index(path, collection)
    service = SearchService(ctx)

    def ids(*filters: str) -> set[str]:
        request = SearchRequest(query, collection, top_k=5, filters=parse_filters(list(filters)))
        return {r.doc_id for r in service.search(request).results}

    return service, ids


def test_a_float_field_is_matched_by_a_number_filter(make_ctx, tmp_path) -> None:
    """`price:=6` found nothing for a field of 6.0, and `price:=6.0` was refused."""
    path = tmp_path / "p.jsonl"
    path.write_text('{"id":"a","text":"red apple","price":6.0,"year":2020}\n'
                    '{"id":"b","text":"green pear","price":4.5,"year":2021}\n')
    ctx = make_ctx()
    service, ids = _filtered_ids(ctx, path, "p", "fruit")
    assert ids("price:=6") == ids("price:=6.0") == ids("year:=2020.0") == {"a"}
    assert ids("price:=4.5") == {"b"} and ids("price=6.0") == set()  # key=value is a string
    with pytest.raises(InvalidRequestError, match="matches nothing; use a finite number"):
        service.search(SearchRequest("fruit", "p", filters={"price": float("nan")}))


def test_filters_on_any_metadata_key(make_ctx, tmp_path) -> None:
    """A key with a space was an invalid Qdrant path (a 500 / traceback); a dotted or bracketed
    key matched nothing (read as a nested path); a metadata column named like a point field
    needs `meta.`."""
    path = tmp_path / "odd.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in [
        {"id": "r1", "text": "a gold member's card", "customer type": "gold", "a.b": "x",
         "a[0]": "z", "source": "web"},
        {"id": "r2", "text": "a basic member's card", "customer type": "basic", "a.b": "y",
         "a[0]": "w", "source": "mail"}]))
    _, ids = _filtered_ids(make_ctx(), path, "odd", "card")
    assert ids("customer type=gold") == {"r1"}
    assert ids("a.b=y") == {"r2"}
    assert ids("a[0]=z") == {"r1"}
    assert ids("meta.source=mail") == {"r2"}
    assert ids(f"source={path}") == {"r1", "r2"}  # the point's own field: the file
    assert ids("meta.customer type=basic", "a.b=y") == {"r2"}
    with pytest.raises(InvalidRequestError, match="filter key 'a\"b' cannot be matched"):
        ids('a"b=1')


def test_rerank_reorders_by_the_rerank_embedder(searchable, minilm) -> None:
    service = SearchService(searchable)
    instruction = "Find messages about topping up"
    response = service.search(SearchRequest("it failed", "support", instruction=instruction,
                                            top_k=3, rerank="minilm", rerank_depth=5))
    assert response.reranker == "minilm"
    scores = [r.rerank_score for r in response.results]
    assert scores == sorted(scores, reverse=True)
    texts = [r.text for r in response.results]
    q = minilm.encode(["it failed"], role="query", instruction=instruction)[0]
    d = minilm.encode(texts, role="document", instruction=instruction)
    assert scores == pytest.approx(list(d @ q), abs=1e-4)
    assert float(np.max(d @ q)) == pytest.approx(scores[0], abs=1e-4)
    # The other reading (measured against the served one by scripts/hybrid_eval.py --rerank):
    # the chunks bare, as they were indexed.
    service.rerank_documents_instructed = False
    bare = service.search(SearchRequest("it failed", "support", instruction=instruction,
                                        top_k=3, rerank="minilm", rerank_depth=5))
    d_bare = minilm.encode([r.text for r in bare.results], role="document")
    assert [r.rerank_score for r in bare.results] == pytest.approx(list(d_bare @ q), abs=1e-4)
    assert not np.allclose(d_bare, minilm.encode([r.text for r in bare.results], role="document",
                                                 instruction=instruction), atol=1e-3)


def test_request_errors(searchable) -> None:
    service = SearchService(searchable)
    with pytest.raises(InvalidRequestError, match="query is empty"):
        service.search(SearchRequest("   ", "support"))
    with pytest.raises(NotFoundError, match=r"unknown collection 'nope'.*known: support"):
        service.search(SearchRequest("x", "nope"))
    with pytest.raises(InvalidRequestError, match="has no '='"):
        parse_filters(["intent"])
    with pytest.raises(InvalidRequestError, match="not JSON"):
        parse_filters(["n:=abc"])
    # A collection recorded by a queued job whose first documents are not written yet was
    # "unknown collection 'fresh' (known: fresh, support)", then a NotFoundError "has nothing
    # searchable yet"; now no results and a note, as once the job has begun writing.
    IndexService(searchable).prepare(searchable.settings.data_dir.parent / "records.jsonl", "fresh",
                                     runner="celery")
    fresh = service.search(SearchRequest("x", "fresh"))
    assert fresh.results == [] and fresh.note is not None
    assert fresh.note.startswith("collection 'fresh' is being indexed (job 2, queued): nothing searchable yet")


def test_lexical_mode_matches_words_without_the_embedder(searchable) -> None:
    class _NoEncoding:
        def encode(self, *args, **kwargs):
            raise AssertionError("lexical search must not embed the query")

    service = SearchService(searchable)
    service.encoder = _NoEncoding()  # type: ignore[assignment]
    response = service.search(SearchRequest("top up failed", "support", top_k=5, mode="lexical"))
    assert response.mode == "lexical" and response.embedder == "bm25"
    assert [r.doc_id for r in response.results] == ["c5", "c2"]  # only texts with the words
    assert response.results[0].score > response.results[1].score > 0  # c5 has two of them
    assert "encode_query" not in response.timings_ms
    filtered = service.search(SearchRequest("card", "support", mode="lexical",
                                            filters={"intent": "card"}, top_k=5))
    assert {r.doc_id for r in filtered.results} == {"c1", "c4"}


def test_lexical_terms_do_not_depend_on_how_an_accent_is_encoded(make_ctx, tmp_path) -> None:
    """"café" as one code point (NFC, what keyboards type) and as "e" + a combining accent (NFD,
    what some files and systems hold) were two terms: each found only the documents written its
    way, where dense search found both."""
    import unicodedata

    path = tmp_path / "u.jsonl"
    path.write_text(json.dumps({"_id": "nfc", "text": unicodedata.normalize("NFC", "Café crème in Paris")})
                    + "\n" + json.dumps({"_id": "nfd", "text": unicodedata.normalize("NFD", "Café noir in Lyon")})
                    + "\n")
    ctx = make_ctx()
    IndexService(ctx).index(path, "u")
    service = SearchService(ctx)
    for form in ("NFC", "NFD"):
        found = service.search(SearchRequest(unicodedata.normalize(form, "café"), "u", mode="lexical"))
        assert {r.doc_id for r in found.results} == {"nfc", "nfd"}, form


def test_hybrid_mode_fuses_the_dense_and_word_rankings(searchable) -> None:
    service = SearchService(searchable)
    query, instruction = "block a lost card", "Find the intent"
    dense = service.search(SearchRequest(query, "support", instruction=instruction, top_k=5,
                                         mode="dense"))
    words = service.search(SearchRequest(query, "support", top_k=5, mode="lexical"))
    hybrid = service.search(SearchRequest(query, "support", instruction=instruction, top_k=5,
                                          mode="hybrid"))
    assert hybrid.mode == "hybrid" and hybrid.embedder == "minilm" and "encode_query" in hybrid.timings_ms
    f = service.fusion
    expected: dict[str, float] = {}
    for weight, ranked in ((f.dense_weight, [r.doc_id for r in dense.results]),
                           (f.lexical_weight, [r.doc_id for r in words.results])):
        for rank, doc in enumerate(ranked):
            expected[doc] = expected.get(doc, 0.0) + 1 / (f.k - 1 + (rank + 1) / weight)
    assert [r.score for r in hybrid.results] == pytest.approx([expected[r.doc_id] for r in hybrid.results],
                                                              rel=1e-5)
    assert {r.doc_id for r in hybrid.results} == set(expected)
    with pytest.raises(InvalidRequestError, match="mode must be one of auto, dense, hybrid, lexical"):
        service.search(SearchRequest(query, "support", mode="fuzzy"))


def test_auto_mode_is_hybrid_without_an_instruction_where_the_collection_keeps_words(
        searchable, make_ctx, tmp_path) -> None:
    service = SearchService(searchable)
    query, instruction = "block a lost card", "Find the intent"

    def ranked(response):
        return [(r.doc_id, r.score) for r in response.results]

    def run(mode=None, **options):
        return service.search(SearchRequest(query, "support", top_k=5, **options,
                                            **({"mode": mode} if mode else {})))

    auto, hybrid = run(), run("hybrid")
    assert auto.mode == "hybrid" and ranked(auto) == ranked(hybrid)
    # The words cannot read an instruction: with one, auto is dense, so the instruction steers.
    instructed = run(instruction=instruction)
    assert instructed.mode == "dense" and ranked(instructed) == ranked(run("dense", instruction=instruction))
    # A score threshold is on the cosine scale, which fused scores are not: auto runs dense...
    dense = run("dense", score_threshold=0.2)
    thresholded = run(score_threshold=0.2)
    assert thresholded.mode == "dense" and ranked(thresholded) == ranked(dense)
    assert 0 < len(dense.results) < 5 and min(r.score for r in dense.results) >= 0.2
    # ... unless the threshold applies to rerank scores (cosines of the reranker).
    assert run(score_threshold=0.2, rerank="minilm").mode == "hybrid"
    # A collection without term vectors (indexed before they existed) searches dense.
    ctx = make_ctx(data_dir=tmp_path / "plain")
    IndexService(ctx).index(_one_record(tmp_path), "plain")
    ctx.store.drop_collection("plain")
    ctx.store.ensure_collection("plain", {"minilm": 384})
    plain = SearchService(ctx)
    assert plain.search(SearchRequest("card", "plain")).mode == "dense"
    with pytest.raises(NotFoundError):
        plain.search(SearchRequest("card", "nowhere"))


def test_auto_mode_falls_back_to_dense_on_term_vectors_of_another_definition(make_ctx, tmp_path,
                                                                              caplog) -> None:
    data = tmp_path / "other"
    ctx = make_ctx(data_dir=data)
    IndexService(ctx).index(_one_record(tmp_path), "old")
    ctx.close()
    [side] = data.rglob("facet_lexical.json")  # the edge store's record of its term vectors
    side.write_text(json.dumps({"version": "bm25-of-a-future-facet"}))
    service = SearchService(make_ctx(data_dir=data))
    with caplog.at_level("WARNING"):
        response = service.search(SearchRequest("card declined", "old"))
    assert response.mode == "dense" and [r.doc_id for r in response.results] == ["x"]
    assert "another definition" in caplog.text and "falls back to dense" in caplog.text
    with pytest.raises(InvalidRequestError, match="another definition"):
        service.search(SearchRequest("card declined", "old", mode="hybrid"))


def test_word_search_on_a_collection_without_term_vectors_says_what_to_do(make_ctx, tmp_path) -> None:
    ctx = make_ctx()
    IndexService(ctx).index(_one_record(tmp_path), "plain")
    # As a collection indexed before term vectors existed: its metadata, a store without them.
    ctx.store.drop_collection("plain")
    ctx.store.ensure_collection("plain", {"minilm": 384})
    service = SearchService(ctx)
    # The edge store adds them on the next index run: that is what it says to do.
    with pytest.raises(InvalidRequestError, match=r"keeps no term vectors.*run `facet index` on its sources"):
        service.search(SearchRequest("card", "plain", mode="hybrid"))
    assert service.search(SearchRequest("card", "plain")).results == []  # dense still answers
    IndexService(ctx).index(_one_record(tmp_path), "plain")
    assert [r.doc_id for r in service.search(SearchRequest("card", "plain", mode="hybrid")).results] == ["x"]


def _one_record(tmp_path):
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"_id": "x", "text": "card declined"}) + "\n")
    return path


def test_snippet_window_prefers_the_query_terms() -> None:
    text = "filler " * 100 + "the refund arrived late " + "padding " * 100
    snippet, highlights = make_snippet(text, "refund late", width=80)
    assert "refund arrived late" in snippet and snippet.startswith("…")
    assert [snippet[a:b] for a, b in highlights] == ["refund", "late"]


def test_snippet_highlights_words_with_combining_accents_and_cuts_at_newlines() -> None:
    """An accent written as a combining mark cut the word there, so "café" was not highlighted in
    text lexical search had matched; snippets of line-separated text began mid-word."""
    import unicodedata

    text = unicodedata.normalize("NFD", "Our Café serves crème brûlée")
    snippet, highlights = make_snippet(text, "café crème")
    assert [unicodedata.normalize("NFC", snippet[a:b]) for a, b in highlights] == ["Café", "crème"]
    lines = "\n".join(["Espresso", "Mocha", "Ristretto", "Cortado"] * 30) + "\nrefund here"
    snippet, _ = make_snippet(lines, "refund", width=60)
    first = snippet.removeprefix("…").split("\n")[0]
    assert first in {"Espresso", "Mocha", "Ristretto", "Cortado"}, snippet


def test_snippet_highlights_scripts_with_marks_and_without_spaces() -> None:
    """``\\w`` does not match most combining marks, so Hindi and vowelled Arabic words were cut
    into pieces and not highlighted ("दिल्ली" -> द, ल, ल); Chinese and Thai have no spaces, so a
    whole clause was one "word" and a query word inside it was never highlighted."""
    def marked(text: str, query: str) -> list[str]:
        snippet, highlights = make_snippet(text, query)
        return [snippet[a:b] for a, b in highlights]

    assert marked("भारत की राजधानी नई दिल्ली है", "दिल्ली") == ["दिल्ली"]
    assert marked("ذهب إلى المَدْرَسَةِ صباحا", "المَدْرَسَةِ") == ["المَدْرَسَةِ"]
    assert marked("北京是中国的首都，也是一座古城。", "北京的首都") == ["北京", "的首都"]
    assert marked("กรุงเทพมหานครเป็นเมืองหลวง", "เมืองหลวง") == ["เมืองหลวง"]
    assert marked("北京是中国的首都", "上海") == []
    # A one-character word (lexical search finds it since its documents keep single characters).
    assert marked("我喜欢猫。猫是一种很可爱的动物。", "猫") == ["猫", "猫"]
    assert marked("책을 읽는 것을 좋아해요", "책") == ["책"]
    # A Latin word or a number against Chinese text is a word of its own (it was part of one
    # long "word" with the Chinese, so "python" was never highlighted there).
    assert marked("Python是一种编程语言，python很流行", "python 编程") == ["Python", "编程", "python"]
    assert marked("我在2024年去了北京，iPhone很贵。", "iphone 2024") == ["2024", "iPhone"]
    assert marked("A cat and a dog", "cat dogs") == ["cat"]  # Latin text as before


def test_filters_match_either_unicode_form_of_a_value(make_ctx, tmp_path) -> None:
    """Payloads are stored as written; a value typed composed ("é" one code point) matched
    nothing stored decomposed ("e" + U+0301, as macOS writes file names), and the reverse."""
    import unicodedata

    nfd = unicodedata.normalize("NFD", "français")
    path = tmp_path / "langs.jsonl"
    path.write_text(json.dumps({"id": "d1", "text": "Le thé est chaud", "lang": nfd}) + "\n"
                    + json.dumps({"id": "d2", "text": "The tea is hot", "lang": "english"}) + "\n")
    _, ids = _filtered_ids(make_ctx(), path, "langs", "tea")
    assert ids("lang=français") == ids(f"lang={nfd}") == {"d1"}
    assert ids("lang=français", "lang=english") == {"d1", "d2"}  # any of them
    assert ids("lang=francais") == set()  # accents are not folded
    # A tuple of values, as a Python caller passes one, is a list: each in either form.
    assert payload_filters({"lang": ("français",)}) == payload_filters({"lang": ["français"]}) == {
        "meta.lang": ["français", nfd]}


def test_hybrid_grouped_by_document_ranks_as_the_chunks_do(make_ctx, tmp_path) -> None:
    """Grouping over-fetches 4 x k chunks; from k=26 that made the fused lists longer than a
    plain search's 100, other chunks entered the fused top, and the API's grouped default
    disagreed with the CLI's chunks (here, documents of one chunk each) from about rank 19.
    What it takes is the number of documents (over 4 x 50 candidates), not their length."""
    import random

    rng = random.Random(1)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
             "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon", "phi",
             "chi", "psi", "omega"]
    path = tmp_path / "greek.jsonl"
    path.write_text("".join(json.dumps({"id": f"t{i:03d}",
                                        "text": " ".join(rng.choice(words) for _ in range(20))}) + "\n"
                            for i in range(300)))
    ctx = make_ctx(chunk_tokens=400)  # one chunk per document
    IndexService(ctx).index(path, "greek")
    service = SearchService(ctx)

    def ranked(k: int, grouped: bool) -> list[str]:
        response = service.search(SearchRequest("alpha beta omega", "greek", top_k=k, mode="hybrid",
                                                group_by_document=grouped))
        return [r.doc_id for r in response.results]

    chunks = ranked(50, grouped=False)
    assert ranked(50, grouped=True) == chunks
    assert ranked(10, grouped=True) == chunks[:10] == ranked(10, grouped=False)


def test_group_by_document_gives_top_k_documents_with_their_other_chunks(make_ctx, tmp_path,
                                                                          minilm) -> None:
    src = tmp_path / "long"
    src.mkdir()
    # One long document about card fees (many chunks of 64 tokens), three short ones.
    (src / "fees.txt").write_text(" ".join(f"Card fee rule {i}: the card fee for foreign "
                                           f"payments is charged on day {i}." for i in range(40)))
    (src / "weather.txt").write_text("Tomorrow brings rain and wind over the coast.")
    (src / "pasta.txt").write_text("Cook the pasta for nine minutes in salted water.")
    (src / "travel.txt").write_text("Paying abroad with a card can cost a foreign fee.")
    ctx = make_ctx()
    IndexService(ctx).index(src, "long")
    service = SearchService(ctx)
    query = "card fee for foreign payments"
    per_chunk = service.search(SearchRequest(query, "long", top_k=3))
    fees = str(src / "fees.txt")
    assert [r.doc_id for r in per_chunk.results].count(fees) >= 2  # one document, two ranks

    grouped = service.search(SearchRequest(query, "long", top_k=3, group_by_document=True))
    docs = [r.doc_id for r in grouped.results]
    assert len(docs) == len(set(docs)) == 3
    assert {fees, str(src / "travel.txt")} <= set(docs)
    assert [r.rank for r in grouped.results] == [1, 2, 3]
    # Each document sits at its best chunk's score, in score order.
    assert [r.score for r in grouped.results] == sorted((r.score for r in grouped.results),
                                                        reverse=True)
    first_of = {}
    for r in per_chunk.results:
        first_of.setdefault(r.doc_id, (r.chunk_no, r.score))
    fee = next(r for r in grouped.results if r.doc_id == fees)
    assert (fee.chunk_no, fee.score) == pytest.approx(first_of[fees])
    assert len(fee.more_chunks) >= 2 and fee.chunk_no not in fee.more_chunks
    assert all(r.more_chunks == [] for r in grouped.results if r.doc_id != fees)

    # Reranked, the candidates were the first rerank_depth chunks, all of them the long
    # document's: one result where three documents were asked for.
    for mode in ("dense", "lexical"):  # (two of the documents hold the query's words)
        plain = service.search(SearchRequest(query, "long", top_k=3, group_by_document=True, mode=mode))
        reranked = service.search(SearchRequest(query, "long", top_k=3, group_by_document=True,
                                                rerank="minilm", rerank_depth=4, mode=mode))
        docs = [r.doc_id for r in reranked.results]
        assert len(docs) == len(set(docs)) == (3 if mode == "dense" else 2), (mode, docs)
        assert set(docs) == {r.doc_id for r in plain.results}
        assert fees in docs and reranked.results[0].rerank_score is not None


def test_an_option_in_the_request_encodes_the_query_whatever_is_loaded(searchable, minilm) -> None:
    """``embedder="minilm[instruction_weight=1]"`` searches minilm's vectors with the query read
    at that weight, though plain minilm is loaded already (it used to be ignored: the query went
    to whichever model the cache held under the vector's name). The weight is comparable across
    (documents carry no instruction), so the search goes ahead; reranking honours options too."""
    from embedders import load_embedder

    full = load_embedder("minilm[instruction_weight=1]", device="cpu")
    service = SearchService(searchable)
    instruction = "Find messages about topping up"
    for spec, model in (("minilm[instruction_weight=1]", full), ("minilm", minilm),
                        ("minilm[instruction_weight=1]", full)):
        response = service.search(SearchRequest("it failed", "support", instruction=instruction,
                                                top_k=5, embedder=spec, mode="dense"))
        assert response.embedder == "minilm"
        texts = [r.text for r in response.results]
        want = minilm.encode(texts, role="document") @ model.encode(
            ["it failed"], role="query", instruction=instruction)[0]
        assert [r.score for r in response.results] == pytest.approx(list(want), abs=1e-4), spec
    reranked = service.search(SearchRequest("it failed", "support", instruction=instruction, top_k=3,
                                            rerank="minilm[instruction_weight=1]", rerank_depth=5))
    assert reranked.reranker == "minilm"
    texts = [r.text for r in reranked.results]
    want = full.encode(texts, role="document", instruction=instruction) @ full.encode(
        ["it failed"], role="query", instruction=instruction)[0]
    assert [r.rerank_score for r in reranked.results] == pytest.approx(list(want), abs=1e-4)


def test_naming_the_vector_of_a_collection_indexed_with_options_keeps_them(make_ctx, tmp_path,
                                                                          minilm) -> None:
    """A collection indexed with ``minilm[instruction_weight=1]``: naming no embedder and naming
    the vector ``minilm`` (how the UI and the API pick one of a collection's embedders) both
    read the query as it was indexed; options given override. (For one session a bare name
    dropped the recorded options, and every UI search of such a collection lost them.)"""
    from app.services.indexing import IndexOptions
    from embedders import load_embedder

    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps({"_id": f"r{i}", "text": t}) + "\n" for i, t in enumerate([
        "My card was declined at the supermarket", "Top up failed twice this morning",
        "The exchange rate you applied was wrong", "I lost my card yesterday, please block it"])))
    ctx = make_ctx()
    IndexService(ctx).index(path, "opts", IndexOptions(embedder="minilm[instruction_weight=1]"))
    full = load_embedder("minilm[instruction_weight=1]", device="cpu")
    service = SearchService(ctx)
    instruction = "Find messages about topping up"
    for named, model in ((None, full), ("minilm", full),
                         ("minilm[instruction_weight=0.25]", minilm)):
        response = service.search(SearchRequest("it failed", "opts", instruction=instruction,
                                                top_k=4, embedder=named, mode="dense"))
        texts = [r.text for r in response.results]
        want = minilm.encode(texts, role="document") @ model.encode(
            ["it failed"], role="query", instruction=instruction)[0]
        assert [r.score for r in response.results] == pytest.approx(list(want), abs=1e-4), named


def test_naming_an_embedder_or_reranker_does_not_load_it_where_workers_encode(make_ctx, searchable, minilm) -> None:
    """Where another process encodes (Celery workers; here an encoder over a cache of its own), a
    search that names an embedder or a reranker reads its name from the registry or the checkpoint's
    config: the searching process loads no model for it (it loaded the reranker just to name it)."""
    from app.encoding import EmbedderCache, InlineQueryEncoder
    from app.services.context import ServiceContext

    workers = EmbedderCache("cpu")
    workers.put("minilm", minilm)
    ctx = ServiceContext(searchable.settings, embedders=EmbedderCache("cpu"), encoder=InlineQueryEncoder(workers))
    try:
        spec = "minilm[instruction_weight=1]"
        response = SearchService(ctx).search(SearchRequest("it failed", "support", instruction="Find top-ups",
                                                           embedder=spec, rerank=spec, top_k=2, mode="dense"))
        assert (response.embedder, response.reranker) == ("minilm", "minilm") and response.results
        assert ctx.embedders.peek(spec) is None and ctx.embedders.peek("minilm") is None
        assert workers.peek(spec) is not None  # the encoding side loaded it
    finally:
        ctx.close()


def test_loading_the_query_embedder_is_timed_apart_from_encoding(searchable) -> None:
    """A one-off `facet search` printed "(5322 ms)" for a query that took 50: the rest was
    loading the model, counted as encoding the query."""
    from app.services.context import EmbedderCache, ServiceContext

    searchable.close()  # a new process, nothing loaded
    ctx = ServiceContext(searchable.settings, embedders=EmbedderCache("cpu"))
    try:
        service = SearchService(ctx)
        first = service.search(SearchRequest("card", "support", top_k=2, mode="dense")).timings_ms
        again = service.search(SearchRequest("card", "support", top_k=2, mode="dense")).timings_ms
    finally:
        ctx.close()
    assert "load_model" in first and "load_model" not in again
    assert first["total"] >= first["load_model"] + first["encode_query"]


def test_a_first_instructed_auto_search_times_the_torch_import_as_loading(searchable) -> None:
    """A one-off `facet search -i ...` in auto mode printed "1405 ms, after 0.2 s loading
    minilm": asking the registry whether the embedder reads the instruction imported torch
    (1.2-1.5 s) before the timed load. A new process, so that torch is not imported yet."""
    from tests.app.services.conftest import first_search_timings

    timings = first_search_timings(searchable.settings.data_dir,
                                   "SearchRequest('card', 'support', instruction='Find refunds')")
    told = sum(v for k, v in timings.items() if k != "total")
    assert timings["total"] - told < 300, timings  # nothing of a second left unnamed


def test_loading_the_reranker_is_timed_apart_from_reranking(searchable, tiny_inbedder_dir) -> None:
    """A first rerank with InBedder read "rerank 16.9 s" for 12 chunks, nearly all of it
    loading the model."""
    service = SearchService(searchable)
    spec = str(tiny_inbedder_dir)
    assert searchable.embedders.peek(spec) is None
    first = service.search(SearchRequest("card", "support", top_k=2, mode="dense", rerank=spec)).timings_ms
    again = service.search(SearchRequest("card", "support", top_k=2, mode="dense", rerank=spec)).timings_ms
    assert "load_reranker" in first and "load_reranker" not in again and "load_model" not in first
    assert first["total"] >= first["load_reranker"] + first["rerank"]


def test_a_filter_value_nested_too_deeply_is_a_request_error() -> None:
    """`--filter 'a:=[[[[...'` thousands deep raised RecursionError (a traceback) where any other
    bad JSON after := is an InvalidRequestError."""
    for raw in ("[" * 100_000, "[" * 100_000 + "]" * 100_000, '{"a": ' * 50_000):
        with pytest.raises(InvalidRequestError, match="filter 'a': its JSON value is nested too "
                                                      "deeply to read"):
            parse_filters([f"a:={raw}"])
    with pytest.raises(InvalidRequestError, match="only strings, numbers and booleans"):
        parse_filters(["a:=[[1]]"])  # shallow: read, then refused as before


def test_a_filter_listing_more_values_than_the_cap_is_refused(searchable) -> None:
    """A list of 60,000 values took the store 33 s (155 s as strings under hybrid) on a
    5-document collection; the body limit allowed ~40 times more."""
    from app.services.search import MAX_FILTER_VALUES, check_filters

    check_filters({"n": list(range(MAX_FILTER_VALUES))})  # the cap itself is served
    with pytest.raises(InvalidRequestError, match=r"filter 'n' lists 1,001 values; at most 1,000"):
        check_filters({"n": list(range(MAX_FILTER_VALUES + 1))})
    with pytest.raises(InvalidRequestError, match="at most 1,000"):
        SearchService(searchable).search(SearchRequest(
            "card", "support", filters={"intent": [str(i) for i in range(5000)]}))


def test_filters_naming_more_fields_than_the_cap_are_refused(searchable) -> None:
    """50,000 filter keys took 43 s of the server's CPU for one request (the security
    exploration of the sixth session of 2026-12-02): at most MAX_FILTER_KEYS."""
    from app.services.search import MAX_FILTER_KEYS, check_filters

    check_filters({f"k{i}": "v" for i in range(MAX_FILTER_KEYS)})  # the cap itself is served
    with pytest.raises(InvalidRequestError, match=r"filters name 101 fields; at most 100 can be matched") as refused:
        SearchService(searchable).search(SearchRequest(
            "card", "support", filters={f"k{i}": "v" for i in range(MAX_FILTER_KEYS + 1)}))
    assert refused.value.param == "filters"


def test_a_query_or_instruction_over_the_cap_is_refused_as_too_large(searchable) -> None:
    """A 5 MB query took 18 s to answer (its words, its highlights); an embedder reads only its
    first few hundred tokens of it."""
    from app.errors import TooLargeError
    from app.services.search import MAX_QUERY_CHARS

    service = SearchService(searchable)
    assert service.search(SearchRequest("card " * (MAX_QUERY_CHARS // 5), "support", top_k=1)).results
    with pytest.raises(TooLargeError, match=r"the query has 200,001 characters, more than the 200,000"):
        service.search(SearchRequest("c" * (MAX_QUERY_CHARS + 1), "support"))
    with pytest.raises(TooLargeError, match=r"the instruction has 300,000 characters"):
        service.search(SearchRequest("card", "support", instruction="i" * 300_000))


def test_a_snippet_keeps_every_match_its_window_was_chosen_for() -> None:
    """The window holding most query words then moved its edges to whitespace, up to 20
    characters in: a match within them was cut off with its word (19 of 3,000 random texts
    lost a highlight), and the snippet then showed fewer matches than the window it chose."""
    import random
    import re

    rng = random.Random(0)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda"]
    lost = []
    for _ in range(3000):
        tokens = [rng.choice(words) for _ in range(rng.randint(40, 120))]
        for i in rng.sample(range(len(tokens)), 3):
            tokens[i] = "parcel"
        text = " ".join(tokens)
        snippet, highlights = make_snippet(text, "parcel", width=240)
        starts = [m.start() for m in re.finditer("parcel", text)]
        windows = [max(0, min(s - 60, len(text) - 240)) for s in starts]
        chosen = max(sum(1 for a in starts if w <= a and a + 6 <= w + 240) for w in windows)
        assert all(snippet[a:b] == "parcel" for a, b in highlights)
        if len(highlights) < chosen:
            lost.append(text)
    assert not lost, lost[:1]
