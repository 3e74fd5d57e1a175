"""Each tab's events driven through Gradio's own API with ``gradio_client``, against the UI
mounted at /ui of a real ``facet serve`` app (tests/ui/conftest.py): real store, SQLite,
minilm and index jobs; nothing is mocked."""

from __future__ import annotations

import csv
import json
import re
import time
from pathlib import Path

import pytest
from gradio_client import handle_file
from gradio_client.exceptions import AppError

from ui import render

from .conftest import (
    COLLECTION,
    HOSTILE_TEXT,
    PLANTED_ID,
    PLANTED_INSTRUCTION,
    PLANTED_QUERY,
    SAMPLE_SIZE,
)


def search(client, query: str, instruction: str = "", collection: str = COLLECTION, *,
           embedder: str = "minilm", k: int = 5, filters: str = "", rerank: bool = False,
           reranker: str = "minilm", group: bool = False, mode: str = "dense") -> tuple[str, str]:
    html, summary = client.predict(query, instruction, collection, embedder, k, filters, rerank,
                                   reranker, group, mode, api_name="/search")
    return html, summary


def rows_of(html: str) -> list[str]:
    return re.findall(r"<tr><td class=\"num\">.*?</tr>", html, flags=re.S)


def text_of(html: str) -> str:
    """What the HTML reads as, without its tags (user text sits in ``dir="auto"`` spans)."""
    return re.sub(r"<[^>]*>", "", html)


def wait_for_job(client, job_id: int, timeout: float = 120) -> tuple[str, list[list[str]]]:
    deadline = time.monotonic() + timeout
    while True:
        html, errors, _timer = client.predict(job_id, api_name="/job_status")
        state = re.search(r'data-state="(\w+)"', html)
        assert state, html
        if state.group(1) not in ("queued", "running"):
            return html, errors["data"]
        assert time.monotonic() < deadline, f"job {job_id} still {state.group(1)}"
        time.sleep(0.3)


# ------------------------------------------------------------------ search


def test_search_finds_the_planted_document_highlighted(ui_client) -> None:
    html, summary = search(ui_client, PLANTED_QUERY, PLANTED_INSTRUCTION)
    rows = rows_of(html)
    assert len(rows) == 5
    assert PLANTED_ID in rows[0]
    # Query terms are marked inside the escaped snippet; metadata is shown.
    assert "<mark>parcel</mark> <mark>locker</mark>" in rows[0]
    assert "intent=card_arrival" in text_of(rows[0])
    assert "5 results from <b>demo-banking77</b> (minilm) under the instruction" in summary


def test_word_and_hybrid_matching(ui_client) -> None:
    words, summary = search(ui_client, "parcel locker", k=5, mode="lexical")
    rows = rows_of(words)
    assert PLANTED_ID in rows[0] and "(bm25)" in summary  # the only text with both words
    assert all("<mark>" in r for r in rows)  # BM25 returns only texts holding a query word
    _, summary = search(ui_client, "parcel locker", PLANTED_INSTRUCTION, k=5, mode="lexical")
    assert "BM25 does not read the instruction" in summary
    hybrid, summary = search(ui_client, PLANTED_QUERY, PLANTED_INSTRUCTION, mode="hybrid")
    assert PLANTED_ID in rows_of(hybrid)[0] and "(minilm with BM25, fused by rank)" in summary
    # The radio's default, auto: hybrid without an instruction, the embedder alone with one.
    for instruction, shown in (("", "(minilm with BM25, fused by rank) without an instruction"),
                               (PLANTED_INSTRUCTION, "(minilm) under the instruction")):
        _, summary = ui_client.predict(PLANTED_QUERY, instruction, COLLECTION, "minilm", 5, "", False,
                                       "minilm", False, api_name="/search")
        assert shown in summary, summary


def test_document_html_is_escaped_not_rendered(ui_client) -> None:
    html, _ = search(ui_client, "card declined at the kiosk", k=3)
    hostile = next(r for r in rows_of(html) if "hostile-html" in r)
    assert "<script>" not in html and "<b>bold</b>" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in hostile
    assert "&amp; &lt;b&gt;bold&lt;/b&gt;" in hostile
    assert HOSTILE_TEXT not in html


def test_filters_rerank_and_the_instruction_change_results(ui_client) -> None:
    html, _ = search(ui_client, "where is my card", filters="intent=card_arrival", k=10)
    rows = rows_of(html)
    assert rows and all("intent=card_arrival" in text_of(r) for r in rows)
    several, _ = search(ui_client, "where is my card", k=10,
                        filters="intent=card_arrival; intent=lost_or_stolen_card")
    assert {m for r in rows_of(several) for m in re.findall(r"intent=(\w+)", text_of(r))} == \
        {"card_arrival", "lost_or_stolen_card"}
    reranked, summary = search(ui_client, PLANTED_QUERY, PLANTED_INSTRUCTION, rerank=True)
    assert "reranked by minilm" in summary and "vector 0." in reranked
    assert PLANTED_ID in rows_of(reranked)[0]
    with pytest.raises(AppError, match="Rerank is on but no reranker is picked"):
        search(ui_client, "card", rerank=True, reranker="")
    with pytest.raises(AppError, match="not available here"):
        search(ui_client, "card", rerank=True, reranker="../../etc")


def test_group_by_document_merges_chunks(ui_client, ui_server, tmp_path) -> None:
    long_doc = tmp_path / "long.txt"
    # ~300 words: several 64-token chunks of one document.
    long_doc.write_text(" ".join(f"Sentence {i} of the harbour report mentions the tide gauge."
                                 for i in range(30)))
    job, _, _, _, files = ui_client.predict([handle_file(str(long_doc))], "grouping", "minilm",
                                            api_name="/index_upload")
    assert files is None  # the upload box is emptied once the job is started
    wait_for_job(ui_client, job)
    flat, _ = search(ui_client, "harbour tide gauge report", collection="grouping", k=4)
    grouped, _ = search(ui_client, "harbour tide gauge report", collection="grouping", k=4,
                        group=True)
    assert len(rows_of(flat)) == 4
    assert len(rows_of(grouped)) == 1 and re.search(r"<small>([4-9]|\d\d) chunks</small>", grouped)
    assert "also matching: chunks " in grouped
    # k documents, as on every other edge (the UI grouped k chunks: here one row for k=2).
    other = tmp_path / "ferry.txt"
    other.write_text("The ferry timetable lists harbour departures at each high tide.")
    job, _, _, _, _ = ui_client.predict([handle_file(str(other))], "grouping", "minilm",
                                        api_name="/index_upload")
    wait_for_job(ui_client, job)
    two, summary = search(ui_client, "harbour tide gauge report", collection="grouping", k=2,
                          group=True)
    assert len(rows_of(two)) == 2 and "2 documents (" in summary
    assert [re.search(r'<td class="num">(\d+)</td>', row).group(1) for row in rows_of(two)] == [
        "1", "2"]


def test_compare_shows_two_rankings_side_by_side(ui_client) -> None:
    html = ui_client.predict("my card", "Find messages about a card that never arrived",
                             "Find messages about fees or exchange rates", COLLECTION, "minilm",
                             5, "", api_name="/compare")
    assert "A: Find messages about a card that never arrived" in text_of(html)
    assert "B: Find messages about fees or exchange rates" in text_of(html)
    assert re.search(r"\d of the top 5 results are shared; \d+ of them moved", html)
    assert len(re.findall(r"<tr><td class=\"num\">", html)) == 5
    with pytest.raises(AppError, match="Instructions A and B are the same"):
        ui_client.predict("my card", "same", "same", COLLECTION, "minilm", 5, "",
                          api_name="/compare")
    # Both instructions cut for length: both said so (B's notice was dropped).
    html = ui_client.predict("my card", "a" * 3000, "b" * 3000, COLLECTION, "minilm", 5, "",
                             api_name="/compare")
    assert "The instruction A had 3,000 characters" in html and "The instruction B had 3,000" in html


def test_compare_instructions_that_differ_past_the_limit_say_so(ui_client) -> None:
    """Two instructions of 2,383 characters differing only at the end were refused as "the
    same", after two "only the first 2,000 were used" toasts: what is compared is what is
    used, and the message says so."""
    a = "Find documents on the same topic. " * 70 + "AAA"
    b = "Find documents on the same topic. " * 70 + "BBB"
    with pytest.raises(AppError, match="Instructions A and B are the same in their first 2,000 "
                                       "characters, which is all that is used"):
        ui_client.predict("my card", a, b, COLLECTION, "minilm", 5, "", api_name="/compare")


def test_an_instruction_the_embedder_cannot_fit_is_named_in_words_the_page_can_act_on(
        ui_client) -> None:
    """A 1,688-character instruction, inside the page's 2,000, is more than minilm's 256 tokens:
    the toast said "the instruction" with two on the Compare tab, and named options only the
    command line has."""
    long = ("Find documents on the same topic. " * 50)[:1688]
    with pytest.raises(AppError) as info:
        ui_client.predict("my card", "Find messages about fees", long, COLLECTION, "minilm", 5, "",
                          api_name="/compare")
    message = str(info.value)
    assert message.startswith("Instruction B: the instruction is too long"), message
    assert "shorten the instruction" in message and "--max-length" not in message
    with pytest.raises(AppError, match="shorten the instruction") as info:
        search(ui_client, "my card", long)
    assert "--max-length" not in str(info.value)


# ----------------------------------------------------------------- cluster

TOPIC_TEXTS = (
    [f"The striker scored a goal in the {i}th minute of the football match" for i in range(6)]
    + [f"Shares of the bank fell {i} percent after the quarterly earnings report" for i in range(6)]
)


def test_cluster_texts_with_labels_gives_map_names_vmeasure_and_csv(ui_client, tmp_path) -> None:
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"labels": [0] * 6 + [1] * 6}))
    summary, plot, table, csv_path = ui_client.predict(
        "pasted or uploaded texts", "", "", 0, "", "", "\n".join(TOPIC_TEXTS), None,
        handle_file(str(labels)), "What is the topic of this text?", 2, "minilm",
        "keywords (no explainer)", api_name="/cluster")
    assert "<b>12</b> texts, <b>k = 2</b>" in summary
    assert "<b>V-measure 100.00</b> (out of 100) against 12 labels (2 classes)" in summary
    figure = json.loads(plot["plot"])
    points = [t for t in figure["data"] if t.get("mode") == "markers"]
    assert sorted(len(t["x"]) for t in points) == [6, 6]
    assert any("striker scored" in h for t in points for h in t["hovertext"])
    assert [row[1] for row in table["data"]] == [6, 6]
    names = " ".join(str(row[2]) + " " + str(row[3]) for row in table["data"])
    assert "football" in names or "striker" in names
    with open(csv_path, encoding="utf-8-sig") as fh:  # (with a byte-order mark, for spreadsheets)
        rows = list(csv.DictReader(fh))
    assert len(rows) == 12 and set(rows[0]) == {"index", "cluster", "cluster_name", "name_answers",
                                                 "name_texts", "cluster_keywords", "answer", "x", "y",
                                                 "text", "label"}
    # names of keywords; no explainer, no answers; how many texts hold a name word ("5 of 6")
    assert all(row["cluster_keywords"] and row["name_answers"] == row["answer"] == "" for row in rows)
    assert all(re.fullmatch(r"[1-6] of 6", row["name_texts"]) for row in rows), [r["name_texts"] for r in rows]
    by_cluster: dict[str, set[str]] = {}
    for row in rows:
        by_cluster.setdefault(row["cluster"], set()).add(row["label"])
    assert all(len(v) == 1 for v in by_cluster.values())  # each cluster is one topic


def test_cluster_a_collection_and_search_results(ui_client) -> None:
    summary, _, table, _ = ui_client.predict(
        "collection", COLLECTION, "", 30, "", "", "", None, None,
        "What does the customer want?", 0, "minilm", "keywords (no explainer)",
        api_name="/cluster")
    assert "<b>30</b> texts" in summary and "(chosen by silhouette)" in summary
    assert sum(row[1] for row in table["data"]) == 30
    summary, _, table, _ = ui_client.predict(
        "search results", COLLECTION, "", 12, "my card has not arrived", PLANTED_INSTRUCTION,
        "", None, None, "Why is the customer writing?", 3, "minilm", "keywords (no explainer)",
        api_name="/cluster")
    assert "<b>12</b> texts, <b>k = 3</b>" in summary and len(table["data"]) == 3
    # "0 = all" clustered 100 search results, and 2000 was refused as "top_k must be ... 1000".
    for limit, notice in ((0, None), (2000, "a search returns at most 1,000")):
        summary, _, table, _ = ui_client.predict(
            "search results", COLLECTION, "", limit, "card", "", "", None, None,
            "Why is the customer writing?", 3, "minilm", "keywords (no explainer)", api_name="/cluster")
        found = int(re.search(r"<b>([\d,]+)</b> texts", summary).group(1).replace(",", ""))
        assert found == SAMPLE_SIZE + 2 and (notice is None or notice in summary), summary  # every text


def test_cluster_bad_input_is_a_readable_error(ui_client, tmp_path) -> None:
    args = ["pasted or uploaded texts", "", "", 0, "", "", "one\ntwo\nthree", None, None]
    with pytest.raises(AppError, match="The instruction is empty"):
        ui_client.predict(*args, "", 2, "minilm", "keywords (no explainer)", api_name="/cluster")
    with pytest.raises(AppError, match="k=5 is more than the 3 texts"):
        ui_client.predict(*args, "Topic?", 5, "minilm", "keywords (no explainer)",
                          api_name="/cluster")
    # The box's own minimum answered first, naming no box ("Value -1 is less than minimum value 0").
    with pytest.raises(AppError, match=r"k must be 0 \(choose it by silhouette\) or at least 2, got -1"):
        ui_client.predict(*args, "Topic?", -1, "minilm", "keywords (no explainer)",
                          api_name="/cluster")
    labels = tmp_path / "short.txt"
    labels.write_text("a\nb\n")
    args[-1] = handle_file(str(labels))
    with pytest.raises(AppError, match="2 labels for 3 texts"):
        ui_client.predict(*args, "Topic?", 2, "minilm", "keywords (no explainer)",
                          api_name="/cluster")
    binary = tmp_path / "texts.json"
    binary.write_bytes(b"\x00\x01binary")
    with pytest.raises(AppError, match=r"texts\.json looks binary"):
        ui_client.predict("pasted or uploaded texts", "", "", 0, "", "", "", handle_file(
            str(binary)), None, "Topic?", 2, "minilm", "keywords (no explainer)",
            api_name="/cluster")


# ------------------------------------------------------------------- index


def test_index_uploads_runs_a_job_lists_per_document_errors(ui_client, tmp_path) -> None:
    good = tmp_path / "lighthouse.md"
    good.write_text("# Lighthouse\nThe keeper polishes the great lens every evening at dusk.")
    fake_text = tmp_path / "scan.txt"
    fake_text.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    image = tmp_path / "photo.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    job, status, errors, _, _ = ui_client.predict(
        [handle_file(str(p)) for p in (good, fake_text, image)], "uploads", "minilm",
        api_name="/index_upload")
    assert job > 0 and "photo.png: .png files cannot be indexed" in status
    html, errors = wait_for_job(ui_client, job)
    assert 'data-state="completed"' in html and "1 indexed" in html and "1 failed" in html
    assert "2/2 documents seen" in html and 'style="width:100%"' in html
    assert [(e[0], e[1]) for e in errors] == [("scan.txt", "error")]
    assert errors[0][2].startswith("scan.txt looks binary")  # not its path on the server
    found, _ = search(ui_client, "who polishes the lens", collection="uploads", k=1)
    assert "Lighthouse" in found and "keeper" in found


def test_a_refused_upload_touches_no_collection_and_a_deleted_ones_uploads_go(ui_client, ui_server,
                                                                              tmp_path) -> None:
    """'oops/mix' was reduced to the folder name 'mix': the upload landed in collection mix's
    folder and the refusal's clean-up deleted mix's own copy. And a deleted collection's
    uploads stayed, so a new collection of that name indexed them all again."""
    notes = tmp_path / "notes.txt"
    notes.write_text("The keeper of the lighthouse polishes the lens at dusk.")
    guide = tmp_path / "guide.md"
    guide.write_text("# Guide\nHow to trim the lamp wick.")
    job, _, _, _, _ = ui_client.predict([handle_file(str(notes)), handle_file(str(guide))], "mix",
                                        "minilm", api_name="/index_upload")
    assert "2 indexed" in wait_for_job(ui_client, job)[0]
    stored = ui_server.facet.settings.data_dir / "uploads" / "mix"  # Facet.upload_folder("mix")
    assert sorted(p.name for p in stored.iterdir()) == ["guide.md", "notes.txt"]
    with pytest.raises(AppError, match="invalid collection name 'oops/mix'"):
        ui_client.predict([handle_file(str(notes))], "oops/mix", "minilm", api_name="/index_upload")
    assert sorted(p.name for p in stored.iterdir()) == ["guide.md", "notes.txt"]
    ui_client.predict("mix", "mix", api_name="/delete_collection")
    assert not stored.exists()
    job, _, _, _, _ = ui_client.predict([handle_file(str(notes))], "mix", "minilm", api_name="/index_upload")
    html, _ = wait_for_job(ui_client, job)
    assert "1/1 documents seen" in html and "1 indexed" in html, html


def test_index_folder_only_under_the_allowed_roots(ui_client, ui_server) -> None:
    job, _, _, _ = ui_client.predict(str(ui_server.root / "notes"), "notes", "minilm",
                                     api_name="/index_folder")
    html, _ = wait_for_job(ui_client, job)
    assert "1 indexed" in html
    outside = ui_server.root.parent / "outside"
    for path in (str(outside), "../outside", "/etc", str(ui_server.root / ".." / "outside")):
        with pytest.raises(AppError, match="is outside the folders this server may index"):
            ui_client.predict(path, "notes", "minilm", api_name="/index_folder")
    link = ui_server.root / "sneaky"
    link.symlink_to(outside, target_is_directory=True)
    with pytest.raises(AppError, match="is outside the folders"):
        ui_client.predict(str(link), "notes", "minilm", api_name="/index_folder")
    with pytest.raises(AppError, match="not a folder on the server"):
        ui_client.predict("missing", "notes", "minilm", api_name="/index_folder")
    with pytest.raises(AppError, match="not available here"):
        ui_client.predict("notes", "notes", "/tmp/some-checkpoint", api_name="/index_folder")
    pickers = ui_client.predict(None, None, None, None, None, api_name="/pickers")
    assert ["notes", "notes"] in pickers[0]["choices"]


def test_upload_over_the_size_limit_is_refused(ui_client, ui_server, tmp_path) -> None:
    big = tmp_path / "big.txt"
    big.write_text("word " * 20_000)  # 100 kB > the fixture's 0.05 MB limit
    # Gradio's upload route refuses it first (max_file_size)...
    with pytest.raises(Exception, match="exceeds the maximum file size of 52428 bytes"):
        ui_client.predict([handle_file(str(big))], "uploads", "minilm", api_name="/index_upload")
    # ...and the handler has the same rule for anything that reaches it another way.
    from gradio import Error

    from ui.handlers import UiHandlers

    handlers = UiHandlers(ui_server.facet, ui_server.facet.settings, tmp_path / "exports")
    with pytest.raises(Error, match=r"big.txt is 0.1 MB, over the 0.05 MB upload limit"):
        handlers.index_upload([str(big)], "uploads", "minilm")


def test_a_page_loaded_mid_job_shows_that_jobs_bar(minilm, tmp_path) -> None:
    """Reloading the page while a job ran showed job 0 and an empty bar, with no way back to
    it on the Index tab."""
    from app.core import Facet
    from app.encoding import EmbedderCache
    from app.settings import FacetSettings
    from ui.handlers import UiHandlers

    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facet = Facet(FacetSettings(data_dir=tmp_path / "data"), embedders=cache)
    try:
        handlers = UiHandlers(facet, facet.settings, tmp_path / "exports")
        job_id, total, html, errors, timer = handlers.resume_job()
        assert (job_id, total, html, errors, timer.active) == (0, 0, "", [], False)
        source = tmp_path / "notes"
        source.mkdir()
        for i in range(3):
            (source / f"n{i}.txt").write_text(f"note {i} about the lighthouse")
        queued = facet.indexing.prepare(source, "notes", runner="celery")  # waits for a worker
        job_id, total, html, errors, timer = handlers.resume_job()
        assert (job_id, total, timer.active) == (queued.job_id, 3, True)
        assert 'data-state="queued"' in html, html
        assert "Also in progress" not in html

        # A second job takes the bar; the first one, still queued, keeps a line under it.
        second = facet.indexing.prepare(source, "more", runner="celery")
        job_id, _total, html, _errors, _timer = handlers.resume_job()
        assert job_id == second.job_id
        assert f"Also in progress: job {queued.job_id} into <b>notes</b> queued" in html, html
        html, _errors, timer = handlers.job_status(second.job_id, 3)
        assert f"job {queued.job_id} into <b>notes</b>" in html and timer.active
        # A finished job's bar keeps polling while another job goes on, then stops.
        done = facet.index(source, "done")
        html, _errors, timer = handlers.job_status(done.job_id, 3)
        assert 'data-state="completed"' in html and timer.active
        assert f"job {queued.job_id} into" in html and f"job {second.job_id} into" in html
        for job in (queued, second):
            facet.indexing.fail(job.job_id, "stopped by the test")
        html, _errors, timer = handlers.job_status(done.job_id, 3)
        assert "Also in progress" not in html and not timer.active
    finally:
        facet.close()


def _own_facet(minilm, tmp_path: Path, **settings):  # type: ignore[no-untyped-def]
    """A facade of its own (jobs stopped and files removed here touch no other test)."""
    from app.core import Facet
    from app.encoding import EmbedderCache
    from app.settings import FacetSettings
    from ui.handlers import UiHandlers

    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facet = Facet(FacetSettings(data_dir=tmp_path / "data", **settings), embedders=cache)
    return facet, UiHandlers(facet, facet.settings, tmp_path / "exports")


def _finished(facet, job_id: int, timeout: float = 120):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while (job := facet.job(job_id)).state in ("queued", "running"):
        assert time.monotonic() < deadline, f"job {job_id} still {job.state}"
        time.sleep(0.1)
    return job


def test_uploads_that_cannot_be_indexed_are_not_kept_for_the_next_job(minilm, tmp_path) -> None:
    """A binary .txt and an empty file stayed in the collection's upload folder: every later
    upload job listed their errors again, and the Collections tab counted them as failed."""
    facet, handlers = _own_facet(minilm, tmp_path)
    try:
        files = tmp_path / "in"
        files.mkdir()
        (files / "good.txt").write_text("The keeper polishes the great lens at dusk.")
        (files / "scan.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00" + bytes(range(256)))
        (files / "empty.txt").write_text("")
        (files / "later.txt").write_text("The ferry leaves the harbour at high tide.")
        folder = facet.upload_folder("up")
        job_id, total, *_ = handlers.index_upload(
            [str(files / n) for n in ("good.txt", "scan.txt", "empty.txt")], "up", "minilm")
        job = _finished(facet, job_id)
        assert job.docs_failed == 2
        html, errors, _timer = handlers.job_status(job_id, total)
        assert "Not kept in the uploads of up, as they cannot be indexed" in html
        assert "empty.txt, scan.txt." in html and len(errors) == 2  # the errors still say why
        assert sorted(p.name for p in folder.iterdir()) == ["good.txt"]
        # The next upload job lists no old errors, and the collection stops counting them.
        job_id, _, html, *_ = handlers.index_upload([str(files / "later.txt")], "up", "minilm")
        assert "Not kept" not in html  # (this page said so when the job ended: not again)
        job = _finished(facet, job_id)
        assert (job.state, job.docs_failed, job.errors) == ("completed", 0, [])
        assert facet.collection("up").documents_failed == 0
        # Its page closed before the job ended: the next upload takes the file out first.
        job_id, *_ = handlers.index_upload([str(files / "scan.txt")], "up", "minilm")
        assert _finished(facet, job_id).docs_failed == 1
        job_id, _, html, *_ = handlers.index_upload([str(files / "later.txt")], "up", "minilm")
        assert "Not kept in the uploads of up, as the last upload job could not index them: " \
               "scan.txt" in html
        job = _finished(facet, job_id)
        assert (job.docs_failed, job.errors) == (0, [])
        assert sorted(p.name for p in folder.iterdir()) == ["good.txt", "later.txt"]
    finally:
        facet.close()


def test_uploads_whose_long_names_gradio_cuts_to_one_are_all_indexed(minilm, tmp_path) -> None:
    """Gradio cuts an upload's name to 200 bytes: two long names alike up to there arrived with
    one name, and the upload was refused as "two uploads would both be ..." (the names the
    user picked differ). Each is indexed, the later one numbered before its suffix; two
    ``..md`` uploads keep their suffix too."""
    from gradio_client.utils import strip_invalid_filename_characters

    facet, handlers = _own_facet(minilm, tmp_path)
    try:
        long = "Quarterly report of the lighthouse keepers association on the state of the lenses " * 3
        uploads = []
        for i, (name, text) in enumerate([(long + "part one.txt", "The lens was polished in May."),
                                          (long + "part two.txt", "The ferry leaves at high tide."),
                                          ("..md", "# Tides\nSpring tides are the highest."),
                                          ("..md", "# Fog\nThe horn sounds every minute.")]):
            cut = strip_invalid_filename_characters(name)  # what Gradio names the upload
            (tmp_path / f"g{i}").mkdir()
            (tmp_path / f"g{i}" / cut).write_text(text)
            uploads.append(str(tmp_path / f"g{i}" / cut))
        assert Path(uploads[0]).name == Path(uploads[1]).name  # cut to one name
        job_id, total, html, *_ = handlers.index_upload(uploads, "up", "minilm")
        job = _finished(facet, job_id)
        assert (job.state, job.docs_failed, total) == ("completed", 0, 4)
        names = sorted(p.name for p in facet.upload_folder("up").iterdir())
        cut = Path(uploads[0]).name
        assert names == sorted([cut, cut.removesuffix("thou.txt") + " (2).txt", "upload.md", "upload (2).md"])
        assert all(len(n.encode()) <= 200 for n in names)
        assert "was saved as upload (2).md" in html
        assert facet.collection("up").documents == 4
        # A later job: a third such name replaced the first's file (its document lost); the
        # first uploaded again, unchanged, is the same file.
        (tmp_path / "g4").mkdir()
        (tmp_path / "g4" / cut).write_text("The keeper's log for the winter.")
        job_id, *_ = handlers.index_upload([str(tmp_path / "g4" / cut), uploads[0]], "up", "minilm")
        assert _finished(facet, job_id).docs_failed == 0
        third = facet.upload_folder("up") / (cut.removesuffix("thou.txt") + " (3).txt")
        assert third.read_text() == "The keeper's log for the winter."
        assert (facet.upload_folder("up") / cut).read_text() == "The lens was polished in May."
        assert facet.collection("up").documents == 5
    finally:
        facet.close()


def test_a_job_stopped_by_a_restart_is_shown_and_resumed_from_the_page(minilm, tmp_path) -> None:
    """An upload job stopped by a server restart was shown nowhere: the Index tab looked for
    queued or running jobs only, the jobs table said "interrupted" with no message, a search
    returned the indexed part as if complete, and only the command line could resume it."""
    from gradio import Error

    from app.services.indexing import IndexOptions

    root = tmp_path / "allowed"
    root.mkdir()
    facet, handlers = _own_facet(minilm, tmp_path, ui_allowed_roots=[root])
    try:
        folder = facet.upload_folder("notes")
        folder.mkdir(parents=True)
        for i in range(3):
            (folder / f"n{i}.txt").write_text(f"Note {i}: the lighthouse keeper's log for day {i}.")

        def stop(_progress: object) -> None:  # the server stops after the first batch
            facet.context.stop_reason = "the server stopping"  # as `facet ui` closes it
            facet.context.stopping.set()

        stopped = facet.index(folder, "notes", IndexOptions(batch_chunks=1), progress=stop)
        facet.context.stopping.clear()
        assert (stopped.state, stopped.docs_indexed) == ("interrupted", 1)

        _, jobs = handlers.collections()
        row = next(r for r in jobs if r[0] == stopped.job_id)
        assert row[2] == "interrupted"
        assert row[-1].startswith("stopped (the server stopping) with 1 document indexed; to go "
                                  "on, pick it as the stopped job on the Index tab and press Resume")
        assert "facet index" not in row[-1] and "--collection" not in row[-1]
        # The Index tab, loaded: the stopped job's bar, and the row to resume it.
        job_id, total, html, _errors, timer = handlers.resume_job()
        assert job_id == stopped.job_id and not timer.active
        assert total == 3  # what the folder holds: the 1 seen read "1/1", as if complete
        assert 'data-state="interrupted"' in html and "press Resume" in html
        row_update, picker = handlers.stopped_jobs()
        assert row_update["visible"] and picker["value"] == stopped.job_id
        assert picker["choices"] == [(f"job {stopped.job_id} into notes (1 document indexed before "
                                      "it stopped)", stopped.job_id)]
        # A search says its results may miss what the job had not reached.
        results, _ = handlers.search("lighthouse log", "", "notes", "minilm", 5, "", False, None,
                                     False, "dense")
        assert f"These results may miss documents: index job {stopped.job_id} into notes did not " \
               "finish" in results

        resumed_id, *_ = handlers.resume_index(stopped.job_id)
        resumed = _finished(facet, resumed_id)
        assert (resumed.state, resumed.docs_indexed, resumed.docs_skipped) == ("completed", 2, 1)
        assert resumed.resumed_from == stopped.job_id
        assert facet.collection("notes").documents_indexed == 3
        row_update, _ = handlers.stopped_jobs()
        assert not row_update["visible"]
        _, jobs = handlers.collections()
        assert next(r for r in jobs if r[0] == stopped.job_id)[-1].endswith(
            f"resumed by job {resumed_id}")
        with pytest.raises(Error, match="is completed, not stopped: there is nothing to resume"):
            handlers.resume_index(resumed_id)
        results, _ = handlers.search("lighthouse log", "", "notes", "minilm", 5, "", False, None,
                                     False, "dense")
        assert "may miss documents" not in results

        # One started from the command line, on a folder this page may not index: said so.
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        for i in range(2):
            (elsewhere / f"e{i}.txt").write_text(f"Entry {i} of the harbour master's book.")
        other = facet.index(elsewhere, "cli", IndexOptions(batch_chunks=1), progress=stop)
        facet.context.stopping.clear()
        _, jobs = handlers.collections()
        assert "this page cannot resume it" in next(r for r in jobs if r[0] == other.job_id)[-1]
        with pytest.raises(Error, match=f"Job {other.job_id} cannot be resumed here"):
            handlers.resume_index(other.job_id)
        assert not handlers.stopped_jobs()[0]["visible"]
        with pytest.raises(Error, match="Pick the stopped job to resume first"):
            handlers.resume_index(None)
    finally:
        facet.close()


# ------------------------------------------------------------ collections


def test_collections_tab_and_delete_with_confirmation(ui_client, ui_server) -> None:
    ui_server.facet.index(ui_server.root / "notes", "doomed")
    table, jobs = ui_client.predict(api_name="/collections")
    by_name = {row[0]: row for row in table["data"]}
    embedders, on_disk = (render.COLLECTION_COLUMNS.index(c) for c in ("embedders", "on disk"))
    assert by_name["doomed"][1] == 1 and "minilm (384-d)" in by_name["doomed"][embedders]
    assert by_name["doomed"][on_disk].endswith(" kB")  # a few documents' shard
    assert by_name[COLLECTION][1] == 50
    assert any(row[1] == "doomed" for row in jobs["data"])
    with pytest.raises(AppError, match="'doo' does not match 'doomed'"):
        ui_client.predict("doomed", "doo", api_name="/delete_collection")
    table, _, confirm = ui_client.predict("doomed", "doomed", api_name="/delete_collection")
    assert "doomed" not in {row[0] for row in table["data"]} and confirm == ""
    # The page still offers it (it was open before the delete): a readable error, not a trace.
    with pytest.raises(AppError, match="unknown collection 'doomed'"):
        search(ui_client, "lighthouse", collection="doomed")
    with pytest.raises(AppError, match="unknown collection 'doomed'"):
        ui_client.predict("collection", "doomed", "", 0, "", "", "", None, None, "Topic?", 2,
                          "minilm", "keywords (no explainer)", api_name="/cluster")


# -------------------------------------------------------------- bad input


def test_empty_and_huge_queries(ui_client) -> None:
    for empty in ("", "   \n ", "\u200b\u2060"):  # (the last got the search's own words)
        with pytest.raises(AppError, match="The query is empty: type one first"):
            search(ui_client, empty)
    huge = "card" * 25_000  # 100,000 characters
    html, summary = search(ui_client, huge, PLANTED_INSTRUCTION)
    assert "The query had 100,000 characters; only the first 2,000 were used" in html
    assert len(html) < 20_000 and huge not in html
    assert "5 results" in summary
    with pytest.raises(AppError, match="Pick a collection first"):
        search(ui_client, "card", collection="")
    with pytest.raises(AppError, match="filter 'intent' has no '='"):
        search(ui_client, "card", filters="intent")


def test_auth_from_settings() -> None:
    from app.errors import InvalidRequestError
    from app.settings import FacetSettings
    from ui.app import ui_auth

    assert ui_auth(FacetSettings()) is None
    pairs = ui_auth(FacetSettings(ui_auth="ana:s3cret, bo:pw2", api_key="k"))
    assert pairs is not None
    assert pairs("ana", "s3cret") and pairs("bo", "pw2")
    assert not pairs("ana", "pw2") and not pairs("eve", "k")
    key = ui_auth(FacetSettings(api_key="the-key"))
    assert key is not None and key("anyone", "the-key") and not key("anyone", "nope")
    with pytest.raises(InvalidRequestError, match="user:password"):
        ui_auth(FacetSettings(ui_auth="no-colon"))
    # A comma in a password: which part, and why, never the password's text.
    with pytest.raises(InvalidRequestError, match="its part 2, after a comma, has no ':': a "
                                                  "password cannot hold a comma") as e:
        ui_auth(FacetSettings(ui_auth="admin:pa,zq9"))
    assert "zq9" not in str(e.value) and "pa," not in str(e.value)


def test_mounted_ui_asks_for_a_login_when_a_key_is_set(ui_server, tmp_path: Path) -> None:
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from app.settings import FacetSettings
    from ui.app import mount_ui

    settings = FacetSettings(data_dir=tmp_path / "data", api_key="the-key")
    app = mount_ui(FastAPI(), ui_server.facet, settings, path="/ui")
    with TestClient(app) as client:
        assert client.get("/ui/config").status_code == 401
        login = client.post("/ui/login", data={"username": "me", "password": "wrong"})
        assert login.status_code == 400
        assert client.post("/ui/login", data={"username": "me", "password": "the-key"}).is_success
        assert client.get("/ui/config").status_code == 200


def test_standalone_launch_serves_the_same_page(ui_server) -> None:
    import httpx
    from gradio_client import Client

    from ui.app import launch_ui

    from .conftest import free_port

    demo = launch_ui(ui_server.facet, port=free_port(), block=False)
    try:
        assert httpx.get(demo.local_url, timeout=10).status_code == 200
        client = Client(demo.local_url, verbose=False)
        html, _ = search(client, PLANTED_QUERY, PLANTED_INSTRUCTION)
        assert PLANTED_ID in rows_of(html)[0]
        client.close()
    finally:
        demo.close()


def test_facet_ui_command_is_registered() -> None:
    from typer.testing import CliRunner

    from app.cli import cli

    result = CliRunner().invoke(cli, ["ui", "--help"])
    assert result.exit_code == 0 and "FACET_UI_ALLOWED_ROOTS" in result.output


@pytest.mark.slow
def test_inbedder_explainer_names_clusters_with_a_progress_bar(ui_server, tiny_inbedder_dir,
                                                               tmp_path) -> None:
    """The explainer picker offers allowed InBedder checkpoints; its answers name the clusters
    and the bar moves through encoding and answering (a tiny untrained InBedder: the code
    path, not the quality)."""
    from ui.handlers import UiHandlers

    explainer = str(tiny_inbedder_dir)
    settings = ui_server.facet.settings.model_copy(update={"api_models": ["minilm", explainer]})
    handlers = UiHandlers(ui_server.facet, settings, tmp_path)
    assert handlers.explainers() == ["keywords (no explainer)", explainer]
    stages: list[str] = []

    def progress(fraction: float, desc: str = "") -> None:
        stages.append(desc)

    summary, _, table, _ = handlers.cluster(
        "pasted or uploaded texts", None, "", 0, "", "", "\n".join(TOPIC_TEXTS[:3] +
                                                               TOPIC_TEXTS[6:9]),
        None, None, "What is the topic?", 2, "minilm", explainer,
        progress=progress)
    assert f"names from {explainer}" in summary and len(table) == 2
    assert any(s.startswith("encoding") for s in stages)
    assert any("answering" in s for s in stages) and stages[-1] == "done"


def test_a_collection_cut_by_the_limit_or_the_cap_is_said_above_the_summary(ui_client, minilm,
                                                                             tmp_path) -> None:
    """The Cluster tab cut a collection to FACET_MAX_CLUSTER_TEXTS (or its limit box) and
    nothing said so: the note above the summary says how many of how many chunks."""
    summary, *_ = ui_client.predict(
        "collection", COLLECTION, "", 30, "", "", "", None, None,
        "What does the customer want?", 2, "minilm", "keywords (no explainer)", api_name="/cluster")
    assert f"clustered 30 of {SAMPLE_SIZE + 2} chunks, in storage order (limit 30)" in summary, summary
    facet, handlers = _own_facet(minilm, tmp_path, max_cluster_texts=4)
    try:
        source = tmp_path / "rows.jsonl"
        source.write_text("".join(json.dumps({"id": f"r{i}", "text": f"my card {i} was declined"})
                                  + "\n" for i in range(9)))
        facet.index(source, "capped")
        summary, *_ = handlers.cluster("collection", "capped", "", 0, "", "", "", None, None,
                                       "What does the customer want?", 2, "minilm",
                                       "keywords (no explainer)", progress=lambda *a, **k: None)
        assert "<b>4</b> texts" in summary
        assert "clustered 4 of 9 chunks, in storage order (FACET_MAX_CLUSTER_TEXTS caps it)" in summary
        # Search results as the source: "0 = all, up to 4" was refused as "9 texts to cluster,
        # more than the limit of 4"; a box above the cap is said.
        for limit in (0, 6):
            summary, *_ = handlers.cluster("search results", "capped", "", limit, "card declined", "",
                                           "", None, None, "What does the customer want?", 2,
                                           "minilm", "keywords (no explainer)",
                                           progress=lambda *a, **k: None)
            assert "<b>4</b> texts" in summary, summary
            assert (limit == 0) != ("FACET_MAX_CLUSTER_TEXTS caps it" in summary), summary
        # Pasted texts too: more than the cap was refused whatever the box said.
        pasted = "\n".join(f"my card {i} was declined" for i in range(9))
        for limit in (0, 6):
            summary, *_ = handlers.cluster("pasted or uploaded texts", None, "", limit, "", "", pasted,
                                           None, None, "What does the customer want?", 2, "minilm",
                                           "keywords (no explainer)", progress=lambda *a, **k: None)
            assert "<b>4</b> texts" in summary and "FACET_MAX_CLUSTER_TEXTS caps it" in summary, summary
    finally:
        facet.close()


def test_a_job_with_many_errors_lists_the_first_ones_and_a_line_with_the_total(minilm,
                                                                              tmp_path) -> None:
    """The Index tab's job_status, polled every second, returned every error (20,000 rows at
    each poll): the first 100 and a line with how many more; the uploads that cannot be
    indexed are still all taken out, past the first 100."""
    facet, handlers = _own_facet(minilm, tmp_path)
    try:
        source = tmp_path / "e.jsonl"
        source.write_text(json.dumps({"id": "ok", "text": "valid"}) + "\n" + "".join(
            json.dumps({"id": f"r{i}", "text": "  "}) + "\n" for i in range(300)))
        report = facet.index(source, "errs")
        _html, errors, _timer = handlers.job_status(report.job_id, 301)
        assert len(errors) == 101 and errors[0][0] == "r0"
        assert errors[-1] == ["…", "", "200 more not listed: 300 errors and warnings in all, "
                                       "the first 100 above"]
        files = tmp_path / "in"
        files.mkdir()
        for i in range(105):
            (files / f"empty{i:03d}.txt").write_text("")
        (files / "good.txt").write_text("The keeper polishes the great lens at dusk.")
        job_id, total, *_ = handlers.index_upload(sorted(str(p) for p in files.iterdir()), "up",
                                                  "minilm")
        assert _finished(facet, job_id).docs_failed == 105
        html, errors, _timer = handlers.job_status(job_id, total)
        assert len(errors) == 101 and errors[-1][2].startswith("5 more not listed: 105 errors")
        # Every one taken out; the notice names the first ten (it listed all 105, a wall of names).
        assert "Not kept in the uploads of up" in html and "and 95 more." in html
        assert [p.name for p in facet.upload_folder("up").iterdir()] == ["good.txt"]
    finally:
        facet.close()


def _raw_call(ui_server, api_name: str, data: list) -> str:
    """One event through Gradio's HTTP API as any client may send it (gradio_client uploads a
    file first; a raw request can name any path): the event stream's text."""
    import httpx

    base = f"{ui_server.ui}gradio_api/call/{api_name}"
    event = httpx.post(base, json={"data": data}, timeout=30).json()["event_id"]
    return httpx.get(f"{base}/{event}", timeout=120).text


def test_a_client_cannot_make_the_mounted_page_read_a_server_file(ui_server) -> None:
    """Under `facet serve` Gradio checked no path a client sent (its check waits for a
    launch() that a mounted app never makes): a file field naming a file of the server's
    clustered it, and returned its lines, or indexed it into a collection."""
    secret = ui_server.root.parent / "outside" / "secret.txt"
    field = {"path": str(secret), "meta": {"_type": "gradio.FileData"}, "orig_name": "x.txt"}
    clustered = _raw_call(ui_server, "cluster", [
        "pasted or uploaded texts", None, "", 500, "", "", "", field, None, "topic", 2, "minilm",
        "keywords (no explainer)"])
    assert "event: error" in clustered and "not to be indexed" not in clustered, clustered
    indexed = _raw_call(ui_server, "index_upload", [[field], None, "minilm", "stolen"])
    assert "event: error" in indexed, indexed
    assert "stolen" not in [c.name for c in ui_server.facet.collections()]
    assert not (ui_server.data_dir / "uploads" / "stolen").exists()


def test_an_uploaded_documents_result_does_not_show_the_servers_data_folder(ui_client, ui_server,
                                                                            tmp_path) -> None:
    """Each result's name carried its source path as a tooltip: for an upload, the server's
    data folder (``DATA/uploads/C/...``), which the page shows nowhere else. A file of a
    folder on the server keeps it (the folder the user picked)."""
    import time

    given = tmp_path / "harbour-log.txt"
    given.write_text("The harbour master logs every tide and every ship.")
    job = ui_server.facet.upload("uploaded-here", [given]).job
    deadline = time.monotonic() + 90
    while ui_server.facet.job(job.id).state in ("queued", "running"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    try:
        html, _ = search(ui_client, "harbour master tide", collection="uploaded-here", k=1)
        assert "harbour-log.txt" in html
        assert str(ui_server.data_dir) not in html and "/uploads/" not in html, html
        html, _ = search(ui_client, PLANTED_QUERY, k=1)
        assert 'title="' + str(ui_server.data_dir.parent / "source" / "sample.jsonl") in html
    finally:
        ui_server.facet.delete_collection("uploaded-here")
