"""The Collections tab's documents view, its handlers called in process (``UiHandlers``) over a
real facade with the session's minilm: a page of documents named as the person knows them (an
upload by its file's name, never its path in the server's data folder), paged, filtered by
status and by a key or file name's start; removing ticked documents only once the collection's
name is typed, refused while a job writes the collection; and the Index tab's upload box
offering only the suffixes the indexer reads. The view did not exist: a person could not see
which documents a collection held, nor remove one (only the whole collection)."""

from __future__ import annotations

import html
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import notes_facet

gr = pytest.importorskip("gradio")

UPLOADED = ["alpha-notes.txt", "beta-report.md", "gamma-log.txt"]


@pytest.fixture
def setup(minilm, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    from ui.handlers import UiHandlers

    facet = notes_facet(tmp_path, minilm)
    folder = facet.upload_folder("uploaded")  # as the Index tab stages uploads
    folder.mkdir(parents=True)
    for i, name in enumerate(UPLOADED):
        (folder / name).write_text(f"Upload {i}: the lighthouse keeper's garden, entry {i}.")
    facet.index(folder, "uploaded")
    try:
        yield facet, UiHandlers(facet, facet.settings)
    finally:
        facet.close()


def _choices(update: dict[str, Any]) -> list[tuple[str, str]]:
    return [tuple(c) for c in update["choices"]]  # type: ignore[misc]


def keys_last(remove: dict[str, Any]) -> str:
    """The last key a page's "remove" boxes offer."""
    return _choices(remove)[-1][1]


def test_a_page_of_uploads_names_each_by_its_file_name(setup) -> None:
    facet, h = setup
    rows, line, cursor, remove, previous, following = h.documents("uploaded", "all", "")
    assert [r[0] for r in rows] == UPLOADED
    assert all(r[2] == "indexed" and r[3] >= 1 for r in rows)
    data = str(facet.settings.data_dir)
    assert not any(data in str(cell) for r in rows for cell in r)  # no server path shown
    assert "documents 1–3 of 3" in line and cursor == {"after": None, "last": keys_last(remove)}
    # The checkboxes show the names; their values are the keys the facade removes by.
    names, keys = zip(*_choices(remove), strict=True)
    assert list(names) == UPLOADED and all(k.startswith(data) for k in keys)
    assert previous["interactive"] is False and following["interactive"] is False


def test_an_uploads_error_names_it_by_its_file_name(setup) -> None:
    """The status cell read "error: DATA/uploads/uploaded/empty.txt is empty: no text to index"
    (the server's data folder), where the Index tab's errors table names the upload alone."""
    facet, h = setup
    folder = facet.upload_folder("uploaded")
    (folder / "empty.txt").write_text("")
    facet.index(folder, "uploaded")
    rows, *_ = h.documents("uploaded", "error", "", 0)
    assert [(r[0], r[2]) for r in rows] == [("empty.txt", "error: empty.txt is empty: no text to index")]
    data = str(facet.settings.data_dir)
    assert not any(data in str(cell) for cell in rows[0])


def test_pages_status_and_prefix_filters(setup, monkeypatch) -> None:
    from ui import documents

    facet, h = setup
    monkeypatch.setattr(documents, "DOCUMENTS_PAGE", 4)
    # A record keyed by its id says the file it was read from (here a server folder's).
    notes = str(facet.settings.data_dir.parent / "notes.jsonl")
    rows, line, cursor, _, previous, following = h.documents_first("notes", "all", "")
    assert rows[0][0] == f"n0 (from {notes})"
    rows = [[r[0].removesuffix(f" (from {notes})"), *r[1:]] for r in rows]
    assert [r[0] for r in rows] == ["n0", "n1", "n2", "n3"]
    assert "documents 1–4 of 6" in line and "2 more not shown" in line
    assert previous["interactive"] is False and following["interactive"] is True
    rows, line, cursor, _, previous, following = h.documents_next("notes", "all", "", cursor)
    assert [r[0].split()[0] for r in rows] == ["n4", "n5"]
    assert cursor == {"after": "n3", "last": "n5"}
    assert "documents 5–6 of 6" in line and "not shown" not in line
    assert previous["interactive"] is True and following["interactive"] is False
    rows, *_ = h.documents_previous("notes", "all", "", cursor)
    assert [r[0].split()[0] for r in rows] == ["n0", "n1", "n2", "n3"]
    rows, line, *_ = h.documents_first("notes", "error", "")
    assert rows == [] and "No error documents" in line
    rows, *_ = h.documents_first("notes", "indexed", "n5")
    assert [r[0].split()[0] for r in rows] == ["n5"]
    # An upload's name typed as the prefix finds it (its key is a path in the data folder).
    rows, line, *_ = h.documents_first("uploaded", "all", "beta")
    assert [r[0] for r in rows] == ["beta-report.md"]
    assert "document 1 of 1 whose key or name starts with 'beta'" in html.unescape(line)
    # Shown as typed: a backslash was doubled (repr), "C:\\docs" for C:\docs.
    rows, line, *_ = h.documents_first("notes", "all", "C:\\docs")
    assert rows == [] and "starts with 'C:\\docs' in" in html.unescape(line), line


def test_pages_keep_their_place_while_another_process_writes(setup, monkeypatch,
                                                             tmp_path: Path) -> None:
    """Next paged by offset: a document removed by another process (a job, the CLI) while one
    paged made the next page skip one (n4 never shown), one indexed before the page's end made
    it repeat one (n3 twice). It pages after the last key shown, as `facet documents` does."""
    import json

    from ui import documents

    facet, h = setup
    monkeypatch.setattr(documents, "DOCUMENTS_PAGE", 4)
    rows, line, cursor, *_ = h.documents_first("notes", "all", "")
    assert [r[0].split()[0] for r in rows] == ["n0", "n1", "n2", "n3"]
    facet.remove_documents("notes", ["n1"])  # meanwhile, from the CLI
    rows, line, cursor, _, previous, following = h.documents_next("notes", "all", "", cursor)
    assert [r[0].split()[0] for r in rows] == ["n4", "n5"], rows
    assert "documents 4–5 of 5" in line and "not shown" not in line
    assert previous["interactive"] is True and following["interactive"] is False
    rows, line, cursor, _, previous, _ = h.documents_previous("notes", "all", "", cursor)
    assert [r[0].split()[0] for r in rows] == ["n0", "n2", "n3", "n4"]
    assert "documents 1–4 of 5" in line and previous["interactive"] is False
    # One indexed before the page's last key: the next page does not show that key again.
    extra = tmp_path / "extra.jsonl"
    extra.write_text(json.dumps({"id": "n10", "text": "A note added while paging."}) + "\n")
    facet.index(extra, "notes")
    rows, line, cursor, *_ = h.documents_next("notes", "all", "", cursor)
    assert [r[0].split()[0] for r in rows] == ["n5"] and "document 6 of 6" in line, line
    # The page on show refreshed in place (a removal's refresh) keeps its start too.
    rows, line, *_ = h.documents("notes", "all", "", cursor)
    assert [r[0].split()[0] for r in rows] == ["n5"]
    # Its last document removed from the page: the page that ends where it started is shown.
    *_, rows, line, cursor, _, previous, _, _ = h.remove_documents(
        "notes", ["n5"], "notes", "all", "", cursor)
    assert [r[0].split()[0] for r in rows] == ["n10", "n2", "n3", "n4"], rows
    assert "documents 2–5 of 5" in line and previous["interactive"] is True
    assert cursor == {"after": "n0", "last": "n4"}
    rows, line, cursor, _, previous, _ = h.documents_previous("notes", "all", "", cursor)
    assert [r[0].split()[0] for r in rows] == ["n0", "n10", "n2", "n3"]
    assert "documents 1–4 of 5" in line and previous["interactive"] is False


def test_previous_reads_where_the_page_starts_now(setup, monkeypatch) -> None:
    """The view kept the keys it had paged through in the server's session: the first page's
    documents removed by another process, Previous stayed enabled on what was now the first
    page and showed it again; a server restart (or the session dropped) sent Next and Previous
    to the first page. The page keeps its place (a key, the last key shown) in a hidden box,
    and Previous counts what sorts before the page when pressed."""
    from ui import documents
    from ui.handlers import UiHandlers

    facet, h = setup
    monkeypatch.setattr(documents, "DOCUMENTS_PAGE", 2)
    *_, cursor, _, _, _ = h.documents_first("notes", "all", "")
    *_, cursor, _, _, _ = h.documents_next("notes", "all", "", cursor)
    rows, line, cursor, _, previous, _ = h.documents_next("notes", "all", "", cursor)
    assert [r[0].split()[0] for r in rows] == ["n4", "n5"] and "documents 5–6 of 6" in line
    assert cursor == {"after": "n3", "last": "n5"} and previous["interactive"] is True
    # Another server process (as after a restart) pages from the box's value alone.
    again = UiHandlers(facet, facet.settings)
    # A value no page made (the page's API) is the first page.
    for forged in ("n3", {"after": 7}, {"after": "x" * 5000}, ["n3"], {"last": None}):
        rows, *_ = again.documents_next("notes", "all", "", forged)
        assert [r[0].split()[0] for r in rows] == ["n0", "n1"], forged
    rows, *_ = again.documents_previous("notes", "all", "", cursor)
    assert [r[0].split()[0] for r in rows] == ["n2", "n3"]
    facet.remove_documents("notes", ["n2"])  # meanwhile, from the CLI
    rows, line, *_ = again.documents_previous("notes", "all", "", cursor)
    assert [r[0].split()[0] for r in rows] == ["n1", "n3"] and "documents 2–3 of 5" in line
    facet.remove_documents("notes", ["n0", "n1", "n3"])  # all that sorted before the page
    rows, line, cursor, _, previous, _ = again.documents("notes", "all", "", cursor)
    assert [r[0].split()[0] for r in rows] == ["n4", "n5"] and "documents 1–2 of 2" in line
    assert previous["interactive"] is False and cursor["after"] is None


def test_an_uploaded_csvs_records_are_named_with_it_and_found_by_its_name(setup) -> None:
    """An uploaded csv's records are keyed by their ids: the page showed "t1", "t2" (which
    upload?), and "tickets" typed in the "Key or file name starts with" box found nothing."""
    facet, h = setup
    folder = facet.upload_folder("uploaded")
    (folder / "tickets.csv").write_text("id,text\nt1,card declined at the shop\n"
                                        "t2,refund still not arrived\n")
    facet.index(folder, "uploaded")
    rows, line, _, remove, *_ = h.documents_first("uploaded", "all", "tickets")
    assert [r[0] for r in rows] == ["t1 (from tickets.csv)", "t2 (from tickets.csv)"]
    assert "documents 1–2 of 2 whose key or name starts with 'tickets'" in html.unescape(line)
    assert [c[1] for c in _choices(remove)] == ["t1", "t2"]  # removed by their keys
    data = str(facet.settings.data_dir)
    assert not any(data in str(cell) for r in rows for cell in r)
    # The uploads' own files are found as before, and a record id's start still finds it.
    rows, *_ = h.documents_first("uploaded", "all", "beta")
    assert [r[0] for r in rows] == ["beta-report.md"]
    rows, *_ = h.documents_first("uploaded", "all", "t2")
    assert [r[0] for r in rows] == ["t2 (from tickets.csv)"]
    rows, *_ = h.documents_first("uploaded", "all", "./tickets.csv")  # as a shell names it
    assert [r[0] for r in rows] == ["t1 (from tickets.csv)", "t2 (from tickets.csv)"]
    # One record removed: the csv, whose other record stays indexed, stays staged, and the
    # next upload job brings the record back. The toast said "1 file still in the folder
    # indexed: indexing it again adds them back unless they are deleted there".
    from ui import documents

    report = facet.remove_documents("uploaded", ["t1"])
    said = documents.removed_text(report, facet.upload_folder("uploaded").resolve())
    assert said == (f"Removed 1 document (1 chunk) from uploaded: t1 (from tickets.csv) (job "
                    f"{report.job_id}). 1 record of tickets.csv, which holds other indexed "
                    "records, stays in the upload: the next upload job into this collection adds "
                    "it back; to keep it out, upload that file again without it, or remove every "
                    "record of it.")
    assert (folder / "tickets.csv").exists()
    facet.index(folder, "uploaded")  # the next upload job (any upload)
    assert [d.key for d in facet.documents("uploaded", prefix="t")] == ["t1", "t2"]
    # Both records removed: their one file goes with them, counted once (it said "2 uploaded
    # files deleted with them"), as `facet delete -d` counts it.
    both = facet.remove_documents("uploaded", ["t1", "t2"])
    assert documents.removed_text(both, folder.resolve()).endswith(
        f"(job {both.job_id}). 1 uploaded file deleted with them: a later upload job does not "
        "add it back.")
    assert not (folder / "tickets.csv").exists()
    # A server folder's file is the user's to delete there.
    notes = facet.remove_documents("notes", ["n0", "n1"])
    assert documents.removed_text(notes, None).endswith(
        "1 file still in the folder indexed: indexing it again adds its documents back unless "
        "it is deleted there.")


def test_removal_asks_for_the_name_then_removes_and_deletes_the_upload(setup) -> None:
    facet, h = setup
    *_, remove, _, _ = h.documents("uploaded", "all", "")
    key = dict(_choices(remove))["beta-report.md"]
    with pytest.raises(gr.Error, match="Tick the documents"):
        h.remove_documents("uploaded", [], "uploaded", "all", "")
    with pytest.raises(gr.Error, match=r"To remove 1 document \(beta-report.md\) from 'uploaded', "
                                       "type the collection's name"):
        h.remove_documents("uploaded", [key], "", "all", "")
    with pytest.raises(gr.Error, match="does not match"):
        h.remove_documents("uploaded", [key], "upload", "all", "")
    assert len(facet.documents("uploaded")) == 3  # nothing removed yet
    collections, jobs, rows, line, *_, confirm = h.remove_documents(
        "uploaded", [key], " uploaded ", "all", "")
    assert [r[0] for r in rows] == ["alpha-notes.txt", "gamma-log.txt"] and confirm == ""
    assert "documents 1–2 of 2" in line
    assert [d.key for d in facet.documents("uploaded")] == [
        str(facet.upload_folder("uploaded").resolve() / n) for n in ("alpha-notes.txt",
                                                                     "gamma-log.txt")]
    assert not (facet.upload_folder("uploaded") / "beta-report.md").exists()
    row = next(r for r in collections if r[0] == "uploaded")
    assert row[1] == 2  # the counts refreshed
    assert jobs[0][1] == "uploaded"  # the removal's job, newest
    # Its message names the file as uploaded, not by its path in the server's data folder (the
    # UI exploration of the third session of 2026-12-07: "... on request: /srv/data/uploads/...").
    assert jobs[0][-1].startswith("removed 1 document (1 chunk) on request: beta-report.md;"), jobs[0][-1]
    assert str(facet.settings.data_dir) not in jobs[0][-1]


def test_ticked_documents_removed_meanwhile_are_skipped_and_said(setup) -> None:
    """Two pages showing the same documents: the second's removal of one the first removed was
    refused whole ("no document ...; keys are as `facet search` shows them"), its list kept the
    removed document, and the ticked one still there stayed."""
    facet, h = setup
    *_, remove, _, _ = h.documents("uploaded", "all", "")
    keys = dict(_choices(remove))
    facet.remove_documents("uploaded", [keys["alpha-notes.txt"]])  # the other page's removal
    with pytest.warns(UserWarning, match=r"1 ticked document \(alpha-notes.txt\) no longer in "
                                         r"uploaded: removed meanwhile, from another page or by "
                                         r"a job; the others were removed"):
        collections, _, rows, line, *_, confirm = h.remove_documents(
            "uploaded", [keys["alpha-notes.txt"], keys["beta-report.md"]], "uploaded", "all", "")
    assert [r[0] for r in rows] == ["gamma-log.txt"] and "document 1 of 1" in line
    assert next(r for r in collections if r[0] == "uploaded")[1] == 1 and confirm == ""
    assert [Path(d.key).name for d in facet.documents("uploaded")] == ["gamma-log.txt"]
    # All of them gone: nothing to confirm, the list refreshed, the confirmation not asked for.
    with pytest.warns(UserWarning, match="nothing else was removed. The list is refreshed."):
        *_, rows, line, _, _, _, _, confirm = h.remove_documents(
            "uploaded", [keys["alpha-notes.txt"]], "", "all", "")
    assert [r[0] for r in rows] == ["gamma-log.txt"] and confirm == ""


def test_removal_is_refused_while_a_job_writes_the_collection(setup) -> None:
    from app.services.indexing import _collection_lock

    facet, h = setup
    *_, remove, _, _ = h.documents("uploaded", "all", "")
    key = dict(_choices(remove))["alpha-notes.txt"]
    with _collection_lock("uploaded"), pytest.raises(gr.Error) as refused:
        h.remove_documents("uploaded", [key], "uploaded", "all", "")
    assert refused.value.title == "Conflict"
    assert "is writing 'uploaded'" in str(refused.value.message)
    assert "nothing was removed" in str(refused.value.message)
    assert len(facet.documents("uploaded")) == 3


def test_no_collection_picked_lists_nothing_and_says_so(setup) -> None:
    _, h = setup
    rows, line, *_ = h.documents_first(None, "all", "")
    assert rows == [] and "Pick a collection" in line
    *_, documents, lists = h.picker_choices()
    # The choices alone: the value is the page's (``KEEP_PICKS_JS`` moves it off one gone).
    assert documents["choices"] == lists["collections"] and "value" not in documents
    assert lists["collections"][0] == "notes"  # the first, by name


def test_the_upload_box_offers_only_the_suffixes_the_indexer_reads(tmp_path) -> None:
    from app.core import Facet
    from app.settings import FacetSettings
    from ui.app import build_ui

    facet = Facet.for_serving(FacetSettings(data_dir=tmp_path / "data"))
    try:
        demo = build_ui(facet, export_dir=tmp_path / "exports")
        box = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "index-files")
        assert box.file_types == list(Facet.supported_suffixes())
        assert box.get_config()["file_types"] == [".csv", ".docx", ".htm", ".html", ".json",
                                                  ".jsonl", ".markdown", ".md", ".pdf", ".txt"]
        # Gradio's own server check is left to the handler, which names each file it refuses.
        from gradio.data_classes import FileData

        photo = tmp_path / "photo.png"
        photo.write_bytes(b"\x89PNG")
        assert box.preprocess(FileData(path=str(photo))) == [str(photo)]
    finally:
        facet.close()


def test_resume_or_cancel_of_a_job_whose_collection_is_gone_says_it_in_the_pages_words(setup,
                                                                                     tmp_path) -> None:
    """Resume (or Cancel) of a job whose collection another page deleted said "no index job 2
    (a job is deleted with its collection: `facet collections` lists those left)", a command
    line on the page."""
    facet, h = setup
    src = tmp_path / "gone-src"
    src.mkdir()
    (src / "a.txt").write_text("a note about herons")
    job_id = facet.index(src, "doomed").job_id
    facet.delete_collection("doomed")
    for press in (lambda: h.resume_index(job_id), lambda: h.cancel_job(job_id, 1)):
        with pytest.raises(gr.Error) as said:
            press()
        assert said.value.message == (f"no index job {job_id} (a job is deleted with its "
                                      "collection: the Collections tab lists those left)")


def test_the_weak_instruction_note_names_what_this_page_refuses(setup) -> None:
    """The Search tab's "barely steers" note offered `minilm[instruction_weight=1]`, which the
    page then refused ("not available here: minilm is, but with options only where
    FACET_API_MODELS lists the spec exactly"); it now says so, as the HTTP API's does."""
    _facet, h = setup
    _results, summary = h.search("lighthouse garden", "Find the topic", "notes", "minilm", 3, "",
                                 False, None, True, "dense")
    text = html.unescape(_results + summary)  # (the summary's line is cut; the results say it whole)
    assert "the instruction barely steers: minilm mixes it in at 0.25" in text, text
    assert "this server does not serve minilm[instruction_weight=1]" in text, text
    with pytest.raises(gr.Error, match="not available here"):
        h.search("lighthouse garden", "Find the topic", "notes", "minilm[instruction_weight=1]", 3,
                 "", False, None, True, "dense")
    # The Compare tab offered it too.
    compared = html.unescape(h.compare("lighthouse garden", "Find the topic", "Find the place",
                                       "notes", "minilm", 3, ""))
    assert "the instruction barely steers" in compared, compared
    assert "this server does not serve minilm[instruction_weight=1]" in compared, compared


def test_the_pickers_default_reads_the_default_embedder_as_the_cli_does(minilm, tmp_path) -> None:
    """FACET_DEFAULT_EMBEDDER=minilm[instruction_weight=1] on a collection of minilm: the CLI and
    the API (naming no embedder) read the instruction at weight 1, while the UI, whose picker
    sends the vector's name, read it at the recorded 0.25 and said it barely steers."""
    from app.core import Facet
    from app.encoding import EmbedderCache
    from app.services.search import SearchRequest
    from app.settings import FacetSettings
    from ui.handlers import UiHandlers

    first = notes_facet(tmp_path, minilm)
    first.close()
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    settings = FacetSettings(data_dir=tmp_path / "data", default_embedder="minilm[instruction_weight=1]")
    facet = Facet.for_serving(settings, embedders=cache)
    try:
        h = UiHandlers(facet, settings)
        picker, _examples = h.collection_changed("notes")
        assert picker["value"] == "minilm"
        results, summary = h.search("lighthouse garden", "Find the topic", "notes", picker["value"],
                                    3, "", False, None, False, "dense")
        assert "barely steers" not in html.unescape(results + summary)
        core = facet.search(SearchRequest("lighthouse garden", "notes", instruction="Find the topic",
                                          mode="dense", top_k=3))
        assert core.embedder_spec == "minilm[instruction_weight=1]" and core.note is None
        for hit in core.results:
            assert f"{hit.score:.3f}" in html.unescape(results), hit.score
    finally:
        facet.close()


def test_keys_that_differ_only_in_unicode_form_say_how_they_write_their_accents(tmp_path) -> None:
    """The i18n review of the fifth session of 2026-12-06: a server folder's file named in NFC
    and another in NFD (from macOS) are two documents the table and the removal boxes named
    alike, "résumé.txt" twice. Such twins (``DocumentList.twins``, the facade's) say how each
    writes its accents; others as before. Rows written through the metadata layer alone."""
    import unicodedata

    from app.core import Facet
    from app.settings import FacetSettings
    from tests.app.test_document_listing import add_rows
    from ui import documents as view

    nfc, nfd = (unicodedata.normalize(form, "/srv/résumé.txt") for form in ("NFC", "NFD"))
    other = unicodedata.normalize("NFD", "/srv/café.txt")
    mixed = ["/m/re\u0301sum\u00e9.txt", "/m/r\u00e9sume\u0301.txt"]
    facet = Facet(FacetSettings(data_dir=tmp_path / "data"))
    try:
        add_rows(facet, "c", [{"key": key} for key in (nfc, nfd, other)])
        add_rows(facet, "mix", [{"key": key} for key in mixed])
        docs = facet.documents("c")
        assert dict(view.removal_choices(docs, None)) == {
            "/srv/résumé.txt (accents as single characters, NFC)": nfc,
            f"{nfd} (accents as separate marks, NFD)": nfd, other: other}
        assert [row[0] for row in view.document_rows(docs, None)] == [
            label for label, _ in view.removal_choices(docs, None)]
        # A page of the facade names the twins of the whole collection: one whose other form
        # is on another page is told apart too.
        page = facet.documents("c", limit=1, after=other)
        assert view.removal_choices(page, None) == [(f"{nfd} (accents as separate marks, NFD)", nfd)]
        # Two keys that each write their accents both ways read apart by their marks, escaped.
        labels = {key: label for label, key in view.removal_choices(facet.documents("mix"), None)}
        assert labels[mixed[0]].endswith("(accents written both ways: /m/re\\u0301sumé.txt)")
        assert labels[mixed[1]].endswith("(accents written both ways: /m/résume\\u0301.txt)")
    finally:
        facet.close()


def test_a_removal_names_a_twin_as_the_page_does(setup, tmp_path) -> None:
    """The UI review of the sixth session of 2026-12-06: with "résumé.txt" in NFC and in NFD
    listed apart, ticking one asked "To remove 1 document (…/résumé.txt)" and said "Removed …
    résumé.txt": either of the two. They say how it writes its accents, as its box does."""
    import unicodedata

    from ui import documents as view

    facet, h = setup
    folder = tmp_path / "twins"
    folder.mkdir()
    for form in ("NFC", "NFD"):
        (folder / unicodedata.normalize(form, "résumé.txt")).write_text(f"The {form} copy of the CV.")
    facet.index(folder, "tw")
    *_, remove, _, _ = h.documents("tw", "all", "")
    boxes = dict(_choices(remove))
    nfc = next(key for label, key in boxes.items() if label.endswith("(accents as single characters, NFC)"))
    with pytest.raises(gr.Error, match=r"To remove 1 document \(.*résumé\.txt \(accents as single "
                                       r"characters, NFC\)\) from 'tw'"):
        h.remove_documents("tw", [nfc], "", "all", "")
    twins = facet.documents("tw").twins
    report = facet.remove_documents("tw", [nfc])
    assert "(accents as single characters, NFC)" in view.removed_text(report, None, twins)
    assert "(accents as single characters, NFC)" in view.gone_text([nfc], "tw", None, others=False,
                                                                   twins=twins)
    assert [d.key for d in facet.documents("tw")] == [str(folder / unicodedata.normalize("NFD", "résumé.txt"))]
