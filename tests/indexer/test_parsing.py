from __future__ import annotations

import json
from pathlib import Path

import pytest

from indexer.errors import SourceNotFoundError, UnsupportedSourceError
from indexer.parsing import (
    DocumentError,
    ParsedDocument,
    StreamedDocument,
    discover,
    discover_files,
    parse_file,
    parse_source,
    supported_types,
)


def _one(path: Path, **kw) -> ParsedDocument | DocumentError:
    results = list(parse_file(path, **kw))
    assert len(results) == 1
    return results[0]


def test_formats(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("plain text")
    (tmp_path / "b.md").write_text("# Title here\n\nbody")
    (tmp_path / "c.html").write_text("<html><head><title>T</title><style>x{}</style></head>"
                                     "<body><p>Hello</p><script>var x;</script><p>world</p>"
                                     "</body></html>")
    (tmp_path / "d.jsonl").write_text(json.dumps({"_id": "x1", "title": "Tt", "text": "jtext",
                                                  "lang": "en"}) + "\n")
    (tmp_path / "e.csv").write_text("id,text,label\nr1,hello csv,pos\n")
    (tmp_path / ".hidden.txt").write_text("skip me")
    (tmp_path / "f.bin").write_bytes(b"\x00\x01")
    docs = {d.key: d for d in parse_source(tmp_path)}
    assert len(docs) == 5
    assert docs[str(tmp_path / "a.txt")].text == "plain text"
    assert docs[str(tmp_path / "b.md")].title == "Title here"
    html = docs[str(tmp_path / "c.html")]
    assert isinstance(html, ParsedDocument)
    assert html.text == "T\nHello\nworld" and html.title == "T"  # the title is embedded too
    rec = docs["x1"]
    assert isinstance(rec, ParsedDocument)
    assert rec.text == "Tt\njtext" and rec.metadata == {"lang": "en"}
    row = docs["r1"]
    assert isinstance(row, ParsedDocument)
    assert row.text == "hello csv" and row.metadata == {"label": "pos"}


def test_pdf(tmp_path: Path) -> None:
    from pypdf import PdfWriter

    writer = PdfWriter()
    writer.add_blank_page(width=200, height=200)
    path = tmp_path / "blank.pdf"
    with path.open("wb") as fh:
        writer.write(fh)
    result = _one(path)
    assert isinstance(result, DocumentError) and "empty" in result.message
    # A page without a text layer (a scan) is said so, with what to do.
    assert "a PDF without a text layer, such as a scan: run OCR on it first" in result.message
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 garbage")
    broken = _one(tmp_path / "broken.pdf")
    assert isinstance(broken, DocumentError) and "PDF" in broken.message


def test_bad_inputs_each_get_a_clear_message(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "binary.txt").write_bytes(bytes(range(256)) * 10)
    (tmp_path / "latin1.txt").write_bytes("café au lait, naïve résumé".encode("latin-1"))
    (tmp_path / "garbage.txt").write_bytes(bytes(range(128, 256)) * 20)
    (tmp_path / "big.txt").write_bytes(b"x" * 2048)
    assert "empty" in _msg(_one(tmp_path / "empty.txt"))
    assert "binary" in _msg(_one(tmp_path / "binary.txt"))
    assert "not UTF-8" in _msg(_one(tmp_path / "garbage.txt"))
    assert "limit" in _msg(_one(tmp_path / "big.txt", max_bytes=1024))
    latin = _one(tmp_path / "latin1.txt")
    assert isinstance(latin, ParsedDocument)
    assert latin.text == "café au lait, naïve résumé"
    assert "not UTF-8 (first non-UTF-8 byte at 3); decoded as cp1252" in latin.warnings[0]


@pytest.mark.parametrize(("text", "encoding", "named"), [
    ("Café crème", "latin-1", "cp1252"),  # charset-normalizer alone says cp1006 (Urdu)
    ("Caf\u00e9 cr\u00e8me \u2019quoted\u2019 for \u20ac5", "cp1252", "cp1252"),
    ("Der Bär läuft über die Straße.", "latin-1", "cp1252"),
    ("Привет мир, как дела? Всё хорошо.", "cp1251", "cp1251"),
    ("Zażółć gęślą jaźń", "cp1250", "cp1250"),
    ("こんにちは世界、元気ですか", "shift_jis", "cp932"),
    ("hello wörld", "utf-16", "UTF-16"),
])
def test_encodings_are_detected_and_named(tmp_path: Path, text: str, encoding: str,
                                          named: str) -> None:
    path = tmp_path / "doc.txt"
    path.write_bytes(text.encode(encoding))
    doc = _one(path)
    assert isinstance(doc, ParsedDocument)
    assert doc.text == text and "\ufffd" not in doc.text
    assert named in doc.warnings[0], doc.warnings


def test_utf8_with_one_stray_byte_is_still_read_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "mixed.txt"
    path.write_bytes("naïve ".encode() + b"\x81" + b" plain ascii" * 10)
    doc = _one(path)
    assert isinstance(doc, ParsedDocument)
    assert "\ufffd" in doc.text and "invalid UTF-8 from byte 7" in doc.warnings[0]


def _msg(result: ParsedDocument | DocumentError) -> str:
    assert isinstance(result, DocumentError), result
    return result.message


def test_malformed_jsonl_line_is_a_per_line_error(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"_id": "1", "text": "one"}\n{"_id": "2", "text": \n\n'
                    '{"_id": "3", "text": "three"}\n[1, 2]\n{"_id": "5"}\n')
    results = list(parse_file(path))
    ok = [r.key for r in results if isinstance(r, ParsedDocument)]
    errors = {r.key: r.message for r in results if isinstance(r, DocumentError)}
    assert ok == ["1", "3"]
    assert f"{path}:2: malformed JSON line" in errors[f"{path}#L2"]
    assert "expected a JSON object" in errors[f"{path}#L5"]
    assert "no text field" in errors[f"{path}#L6"]
    # and how to name another (the csv's message said it; a jsonl's did not)
    assert errors[f"{path}#L6"].endswith("as the text column (`facet index --text-column`, "
                                         "text_column in POST /jobs)")


def test_missing_and_unsupported_sources(tmp_path: Path) -> None:
    with pytest.raises(SourceNotFoundError, match="does not exist"):
        discover(tmp_path / "nope")
    (tmp_path / "x.xlsx").write_text("?")
    with pytest.raises(UnsupportedSourceError, match="unsupported file type"):
        discover(tmp_path / "x.xlsx")


def test_content_hash_changes_with_text_title_and_metadata() -> None:
    base = ParsedDocument("k", "s", "text", title="t", metadata={"a": 1})
    assert base.content_hash == ParsedDocument("k", "other", "text", title="t",
                                               metadata={"a": 1}).content_hash
    assert base.content_hash != ParsedDocument("k", "s", "text!", title="t",
                                               metadata={"a": 1}).content_hash
    assert base.content_hash != ParsedDocument("k", "s", "text", title="u",
                                               metadata={"a": 1}).content_hash
    assert base.content_hash != ParsedDocument("k", "s", "text", title="t",
                                               metadata={"a": 2}).content_hash


def test_csv_text_column_is_named_or_the_file_is_refused(tmp_path: Path) -> None:
    """Without a column named as a text column, the first column was embedded with a warning:
    the ids (`id` is the document id); refused now, as a jsonl without a text field is."""
    path = tmp_path / "reviews.csv"
    path.write_text("id,product,review\nr1,kettle,boils fast and quietly\n"
                    "r2,toaster,burns every slice\n")
    [refused] = list(parse_file(path))
    assert isinstance(refused, DocumentError), refused
    assert "no text column" in str(refused) and "(found id, product, review)" in str(refused)
    assert "--text-column" in str(refused)

    named = list(parse_file(path, text_column="review"))
    assert [(d.key, d.text, d.metadata) for d in named if isinstance(d, ParsedDocument)] == [
        ("r1", "boils fast and quietly", {"product": "kettle"}),
        ("r2", "burns every slice", {"product": "toaster"})]
    assert not any(d.warnings for d in named if isinstance(d, ParsedDocument))

    [missing] = list(parse_file(path, text_column="body_text"))
    assert isinstance(missing, DocumentError)
    assert "no column 'body_text'" in missing.message and "id, product, review" in missing.message
    assert "--text-column" not in missing.message  # it reaches POST /jobs and the UI too


def test_jsonl_text_column_overrides_the_usual_fields(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"_id": "1", "text": "short", "answer": "the long answer"}) + "\n"
                    + json.dumps({"_id": "2", "text": "no answer here"}) + "\n")
    first, second = list(parse_file(path, text_column="answer"))
    assert isinstance(first, ParsedDocument) and first.text == "the long answer"
    assert first.metadata == {"text": "short"}
    assert isinstance(second, DocumentError) and "no field 'answer'" in second.message
    assert "--text-column" not in second.message


def _docx(path: Path, paragraphs: list[str], title: str | None = None) -> Path:
    """A minimal real .docx (what Word writes, trimmed to the parts a reader needs)."""
    import zipfile

    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    body = "".join(f"<w:p><w:r><w:t>{p}</w:t></w:r></w:p>" for p in paragraphs)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        zf.writestr("word/document.xml", f'<w:document xmlns:w="{w}"><w:body>{body}'
                                         "</w:body></w:document>")
        if title:
            zf.writestr("docProps/core.xml",
                        '<cp:coreProperties xmlns:cp="x" xmlns:dc="http://purl.org/dc/elements/'
                        f'1.1/"><dc:title>{title}</dc:title></cp:coreProperties>')
    return path


def test_docx_json_and_the_list_of_skipped_files(tmp_path: Path) -> None:
    _docx(tmp_path / "memo.docx", ["Quarterly memo", "Card fees rise in May."], title="Memo")
    (tmp_path / "records.json").write_text(json.dumps([{"id": "a", "text": "first"},
                                                       {"id": "b", "text": "second"}, 3]))
    (tmp_path / "one.json").write_text(json.dumps({"text": "a single record", "lang": "en"}))
    (tmp_path / "sheet.xlsx").write_bytes(b"PK")
    (tmp_path / "photo.png").write_bytes(b"\x89PNG")
    (tmp_path / "broken.docx").write_bytes(b"not a zip")
    files, skipped = discover_files(tmp_path)
    assert [p.name for p in skipped] == ["photo.png", "sheet.xlsx"]
    assert ".docx" in supported_types() and ".json" in supported_types()
    results = {r.key: r for f in files for r in parse_file(f)}
    memo = results[str(tmp_path / "memo.docx")]
    assert isinstance(memo, ParsedDocument)
    assert (memo.text, memo.title) == ("Quarterly memo\nCard fees rise in May.", "Memo")
    assert [results[k].text for k in ("a", "b")] == ["first", "second"]  # type: ignore[union-attr]
    assert "item 2 is a number, expected an object or a string" in results[f"{tmp_path / 'records.json'}#item2"].message  # type: ignore[union-attr]
    one = results[str(tmp_path / "one.json")]
    assert isinstance(one, ParsedDocument) and one.metadata == {"lang": "en"}
    broken = results[str(tmp_path / "broken.docx")]
    assert isinstance(broken, DocumentError) and "not a readable .docx" in broken.message


@pytest.mark.parametrize(("name", "data"), [
    ("notes.md", ("# Big title\n\n" + "Café crème line\r\n" * 20_000).encode()),
    ("latin.txt", ("Café crème line\n" * 20_000).encode("latin-1")),
    ("bom.txt", b"\xef\xbb\xbf" + b"plain line\n" * 20_000),
    # Was "looks binary" once streamed (the sniff saw UTF-16's NULs before the BOM).
    ("utf16le.txt", ("\ufeff" + "lighthouses and the sea.\n" * 20_000).encode("utf-16-le")),
    ("utf16be.txt", ("\ufeff" + "Café by the sea.\n" * 20_000).encode("utf-16-be")),
    # NULs past the 8 KiB the binary check reads (a log's preallocated tail): dropped alike.
    ("padded.txt", b"a line of the log\n" * 1_000 + b"\x00" * 500 + b"after the gap\n" * 100),
])
def test_a_large_file_streams_with_the_hash_and_text_of_a_whole_read(tmp_path: Path, name: str,
                                                                      data: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    whole = _one(path)
    streamed = _one(path, stream_over_bytes=1000)
    assert isinstance(whole, ParsedDocument) and isinstance(streamed, StreamedDocument)
    assert streamed.content_hash == whole.content_hash  # unchanged, whichever way it is read
    assert "".join(streamed.pieces(777)) == whole.text
    assert (streamed.key, streamed.title) == (whole.key, whole.title)
    assert [w.split(";")[-1] for w in streamed.warnings] == [w.split(";")[-1] for w in whole.warnings]


def test_nul_characters_no_database_stores_are_dropped_or_refused(tmp_path: Path) -> None:
    """PostgreSQL cannot store a NUL: a late one in a text file, or a \\u0000 escape in a
    record, failed the whole batch there (SQLite stored it)."""
    padded = tmp_path / "padded.txt"
    padded.write_bytes(b"a line of the log\n" * 1_000 + b"\x00\x00tail")
    doc = _one(padded)
    assert isinstance(doc, ParsedDocument) and doc.text.endswith("log\ntail")
    assert doc.warnings == [f"{padded}: 2 NUL characters removed"]
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"id": "a", "title": "T\u0000", "text": "x\u0000y"}) + "\n" +
                    json.dumps({"id": "b\u0000", "text": "fine"}) + "\n")
    first, second = list(parse_file(path))
    assert isinstance(first, ParsedDocument) and (first.title, first.text) == ("T", "T\nxy")
    assert [w.split(": ", 1)[1] for w in first.warnings] == [
        "field 'text': 1 NUL character removed", "field 'title': 1 NUL character removed"]
    assert isinstance(second, DocumentError) and second.key == f"{path}#L2"
    assert "the record's id holds a NUL character" in second.message


def test_large_empty_or_binary_files_are_rejected_without_streaming(tmp_path: Path) -> None:
    (tmp_path / "blank.txt").write_bytes(b"  \n" * 10_000)
    (tmp_path / "blob.txt").write_bytes(b"\x00\x01" * 10_000)
    assert "is empty" in _msg(_one(tmp_path / "blank.txt", stream_over_bytes=1000))
    assert "looks binary" in _msg(_one(tmp_path / "blob.txt", stream_over_bytes=1000))


@pytest.mark.parametrize("name", ["zeros.jsonl", "zeros.csv", "zeros.json"])
def test_a_large_binary_record_file_is_refused_by_its_start(tmp_path: Path, name: str) -> None:
    """A record file has no size limit and was read and decoded whole before its binary check:
    2 GB of zeros named .jsonl took 18 s and 4.65 GB to be told it looks binary (the
    huge-inputs review of the seventh session of 2026-12-06). Its first 8 KiB tell."""
    import os
    import tracemalloc

    path = tmp_path / name
    with path.open("wb") as fh:  # 64 MiB, sparse
        fh.truncate(64 << 20)
    tracemalloc.start()
    try:
        result = _one(path, max_bytes=1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "looks binary (NUL or control bytes)" in _msg(result) and result.key == str(path)
    assert peak < 8 << 20, peak  # the file was not read whole
    os.remove(path)


@pytest.mark.parametrize("stream_over_bytes", [None, 1000])
def test_utf16_without_a_byte_order_mark_is_named_as_the_likely_cause(
        tmp_path: Path, stream_over_bytes: int | None) -> None:
    """A UTF-16 file saved without its mark was "looks binary (NUL or control bytes)" alone:
    the refusal stands (its encoding is not known for sure), and says how to save it."""
    from indexer.parsing import utf16_without_bom

    text = "Meeting notes: the lighthouse keeper's log, Привет, 日本語.\n" * 30
    for codec, name in (("utf-16-le", "UTF-16LE"), ("utf-16-be", "UTF-16BE")):
        path = tmp_path / f"{codec}.txt"
        path.write_bytes(text.encode(codec))
        kwargs = {} if stream_over_bytes is None else {"stream_over_bytes": stream_over_bytes}
        said = _msg(_one(path, **kwargs))
        assert said.startswith(f"{path} looks binary (NUL or control bytes), not text; it reads as "
                               f"{name} text without a byte order mark: save it as UTF-8"), said
    # Binary data is not taken for it.
    assert utf16_without_bom(b"\x00\x01" * 10_000) is None
    assert utf16_without_bom(bytes(range(256)) * 32) is None
    blob = tmp_path / "blob.txt"
    blob.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)
    said = _msg(_one(blob))
    assert "looks binary" in said and "reads as" not in said, said


def test_jsonl_values_no_store_can_hold_are_named_not_a_crash(tmp_path: Path) -> None:
    """NaN / Infinity (json.dumps writes them) in metadata crashed the job in the store; a
    broken surrogate escape in the text crashed the tokenizer; U+2028 inside a string split a
    line in two (both halves "malformed", later line numbers shifted)."""
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join([
        '{"id": "n1", "text": "wolves", "score": NaN, "rank": Infinity, "g": "a", '
        '"xs": [1.5, -Infinity], "bad": "half \\ud83d emoji"}',
        '{"id": "n2", "text": "broken emoji \\ud83d pigeons"}',
        '{"id": "n3", "text": "an owl", "title": "\\udc00"}',
        json.dumps({"id": "n4", "text": "owls\u2028here", "sep": "a\x85b"}, ensure_ascii=False),
        "[1, 2]",
        '{"id": "\\ud800", "text": "bad id"}',
    ]) + "\n", encoding="utf-8")
    results = {r.key: r for r in parse_file(path)}
    n1 = results["n1"]
    assert isinstance(n1, ParsedDocument) and n1.metadata == {"g": "a"}
    assert sorted(w.split(": ", 1)[1] for w in n1.warnings) == [
        "metadata field 'bad' not kept: it holds an unpaired surrogate (a broken \\u escape)",
        "metadata field 'rank' not kept: inf is not a finite number",
        "metadata field 'score' not kept: nan is not a finite number",
        "metadata field 'xs' not kept: -inf is not a finite number"]
    assert "field 'text' holds an unpaired surrogate at character 13" in _msg(results["n2"])
    assert "field 'title' holds an unpaired surrogate at character 0" in _msg(results["n3"])
    n4 = results["n4"]
    assert isinstance(n4, ParsedDocument) and n4.text == "owls\u2028here"
    assert n4.metadata == {"sep": "a\x85b"}
    assert "d.jsonl:5: expected a JSON object" in _msg(results[f"{path}#L5"])
    control = tmp_path / "c.jsonl"
    control.write_text('{"id": "x", "text": "a\tb\x01"}\n')
    (bad,) = list(parse_file(control))
    assert "malformed JSON line (Invalid control character at column" in _msg(bad)  # "at at"
    whole = tmp_path / "c.json"  # a .json file said it twice as well
    whole.write_text('{"id": "x", "text": "a\tb"}')
    (bad,) = list(parse_file(whole))
    assert "malformed JSON (Invalid control character at column" in _msg(bad), _msg(bad)
    assert "the record's id holds an unpaired surrogate" in _msg(results[f"{path}#L6"])


def test_discovery_names_what_it_leaves_out(tmp_path: Path) -> None:
    """A file name that is not UTF-8 crashed the whole run (in the database); links to folders
    and broken links vanished without a word; hidden folders were walked, then dropped."""
    import os

    from indexer.parsing import display_path, skip_reason

    (tmp_path / "ok.txt").write_text("cocoa")
    (tmp_path / os.fsdecode(b"caf\xe9.txt")).write_text("coffee")
    other = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    other.mkdir(exist_ok=True)
    (other / "far.txt").write_text("far away")
    (tmp_path / "linked").symlink_to(other, target_is_directory=True)
    (tmp_path / "dangling.txt").symlink_to(tmp_path / "missing.txt")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.txt").write_text("hidden")
    files, skipped = discover_files(tmp_path)
    assert [p.name for p in files] == ["ok.txt"]
    assert {display_path(p): skip_reason(p) for p in skipped} == {
        str(tmp_path / "caf\\xe9.txt"): "its name is not valid UTF-8; rename it",
        str(tmp_path / "dangling.txt"): "a broken link",
        str(tmp_path / "linked"): "a link to a folder, not followed (index that folder itself)"}


def test_csv_messages_say_what_is_wrong(tmp_path: Path) -> None:
    """A short row said "field 'text' is NoneType, expected a string"; a ;-separated file
    advised --text-column, which cannot help."""
    short = tmp_path / "short.csv"
    short.write_text("id,text\na,first\nb\n")
    results = {r.key: r for r in parse_file(short)}
    assert "row 3: no value in the 'text' column (the row has fewer fields than the header)" in \
        _msg(results["b"])
    semi = tmp_path / "semi.csv"
    semi.write_text("id;text\n1;a card was declined\n")
    (doc,) = list(parse_file(semi))
    assert isinstance(doc, ParsedDocument)
    assert any("looks ';'-separated" in w and "save it with commas" in w for w in doc.warnings)


_TRANSITIONAL = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def _docx_xml(path: Path, body: str, namespace: str = _TRANSITIONAL) -> Path:
    import zipfile

    mc = "http://schemas.openxmlformats.org/markup-compatibility/2006"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("word/document.xml", f'<w:document xmlns:w="{namespace}" xmlns:mc="{mc}" '
                                         f'xmlns:wps="x-wps" xmlns:v="x-v"><w:body>{body}</w:body></w:document>')
    return path


def test_docx_text_boxes_symbols_hyphens_and_strict_xml(tmp_path: Path) -> None:
    """Word writes a text box twice (mc:Choice and mc:Fallback), each a paragraph inside the
    paragraph holding it: its text was stored four times, glued to the word before it. A
    non-breaking hyphen and a symbol were dropped; Strict Open XML was 'empty'."""
    box = ("<w:p><w:r><w:t>See the diagram box:</w:t></w:r><w:r><mc:AlternateContent><mc:Choice>"
           "<wps:txbx><w:txbxContent><w:p><w:r><w:t>Muster point map</w:t></w:r></w:p></w:txbxContent>"
           "</wps:txbx></mc:Choice><mc:Fallback><v:textbox><w:txbxContent><w:p><w:r><w:t>Muster point "
           "map</w:t></w:r></w:p></w:txbxContent></v:textbox></mc:Fallback></mc:AlternateContent></w:r></w:p>"
           "<w:p><w:r><w:t>call 555</w:t><w:noBreakHyphen/><w:t>0199 at 25</w:t>"
           '<w:sym w:char="F0B0"/><w:t>C</w:t></w:r></w:p>')
    doc = _one(_docx_xml(tmp_path / "box.docx", box))
    assert isinstance(doc, ParsedDocument)
    assert doc.text == "See the diagram box:\nMuster point map\ncall 555-0199 at 25°C"
    strict = _one(_docx_xml(tmp_path / "strict.docx", "<w:p><w:r><w:t>Strict terms apply.</w:t></w:r></w:p>",
                            namespace="http://purl.oclc.org/ooxml/wordprocessingml/main"))
    assert isinstance(strict, ParsedDocument) and strict.text == "Strict terms apply."


def test_html_breaks_lines_at_blocks_only_and_drops_invisible_characters(tmp_path: Path) -> None:
    """A newline between every text node cut words that inline tags split ("gran<i>ola</i>"), and
    soft hyphens kept "Donau&shy;dampf" from matching "Donaudampf"."""
    (tmp_path / "p.html").write_text(
        "<html><body><nav><ul><li><a href='/'>Home</a></li><li><a href='/x'>About</a></li></ul></nav>"
        "<p>Try our <b>super</b>food "
        "and gran<i>ola</i>.\n  Twice   spaced.</p><table><tr><td>Espresso</td><td>$2.50</td></tr></table>"
        "<p>Donau&shy;dampf&#8203;schiff<br>next line</p></body></html>")
    doc = _one(tmp_path / "p.html")
    assert isinstance(doc, ParsedDocument)
    assert doc.text == ("Home\nAbout\nTry our superfood and granola. Twice spaced.\nEspresso | $2.50\n"
                        "Donaudampfschiff\nnext line")


def test_every_block_element_a_browser_lays_out_breaks_a_line(tmp_path: Path) -> None:
    """``center``, ``legend``, ``menu``, ``dir``, ``hgroup`` and ``search`` were read inline: two
    ``<center>`` lines were the word "TopNext"."""
    (tmp_path / "b.html").write_text(
        "<body><center>Top</center><center>Next</center><fieldset><legend>Legend</legend>field"
        "</fieldset><menu><li>one</li></menu><dir><li>two</li></dir><hgroup>grouped</hgroup>"
        "<search>searched</search></body>")
    doc = _one(tmp_path / "b.html")
    assert isinstance(doc, ParsedDocument)
    assert doc.text == "Top\nNext\nLegend\nfield\none\ntwo\ngrouped\nsearched"


@pytest.mark.parametrize(("content", "title"), [
    ("---\ntitle: 'Deployment Guide'\n---\nbody", "Deployment Guide"),
    ("```bash\n# Install the chart\n```\n# Client Reference\nbody", "Client Reference"),
    ("Deployment Guide\n================\n\nbody", "Deployment Guide"),
    ("   # Indented #\nbody", "Indented"),
    ("# Title with **bold** and [a link](http://x.y)\n", "Title with bold and a link"),
    ("#hashtag\nno heading", None),
])
def test_markdown_titles(tmp_path: Path, content: str, title: str | None) -> None:
    """The first `# ` line within 20 lines was the title, a comment in a code block included;
    front matter and underlined headings were not read."""
    (tmp_path / "m.md").write_text(content)
    doc = _one(tmp_path / "m.md")
    assert isinstance(doc, ParsedDocument) and doc.title == title


def test_record_titles_that_are_lists_or_the_text_column(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_text(
        json.dumps({"_id": "a", "title": "Headlamp 300", "price": 30}) + "\n")
    only = _one(tmp_path / "t.jsonl", text_column="title")
    assert isinstance(only, ParsedDocument) and only.text == "Headlamp 300"  # was stored twice
    (tmp_path / "l.jsonl").write_text(
        json.dumps({"_id": "p", "title": ["Camp", "Stove"], "text": "gas stove"}) + "\n"
        + json.dumps({"_id": "q", "title": {"en": "Stove"}, "text": "gas stove"}) + "\n")
    listed, nested = list(parse_file(tmp_path / "l.jsonl"))
    assert isinstance(listed, ParsedDocument) and listed.title == "Camp Stove"
    assert listed.text == "Camp Stove\ngas stove"  # was "['Camp', 'Stove']"
    assert isinstance(nested, ParsedDocument) and nested.title is None and nested.text == "gas stove"
    assert any("'title' is a JSON dict" in w for w in nested.warnings)


def _pdf_lines(path: Path, lines: list[str]) -> Path:
    """A one-page PDF written by hand: one text object per line, Helvetica."""
    return _pdf(path, [lines], deflate=False)


def test_pdf_words_hyphenated_at_a_line_end_are_joined(tmp_path: Path) -> None:
    """'opera-' at a line's end and 'tors.' on the next were two words no search found."""
    doc = _one(_pdf_lines(tmp_path / "r.pdf", ["key challenge for grid opera-", "tors. Fire-",
                                                "Safety rules apply -", "always."]))
    assert isinstance(doc, ParsedDocument)
    assert "grid operators. Fire-\nSafety rules apply -\nalways." in doc.text, doc.text



def test_json_nested_too_deeply_is_an_error_of_that_file_or_line(tmp_path: Path) -> None:
    """A .json file or a jsonl line nested thousands of levels deep raised RecursionError out of
    the parser: the whole run stopped with a traceback, the good files beside it unindexed."""
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "good.txt").write_text("a good file about granola")
    (tmp_path / "lines.jsonl").write_text('{"id": "a", "text": "first"}\n' + '{"x": ' * 5_000
                                          + '\n{"id": "b", "text": "third"}\n')
    results = {r.key: r for r in parse_source(tmp_path)}
    deep = results[str(tmp_path / "deep.json")]
    assert isinstance(deep, DocumentError) and "nested too deeply to read" in deep.message
    line = results[f"{tmp_path / 'lines.jsonl'}#L2"]
    assert isinstance(line, DocumentError)
    assert f"{tmp_path / 'lines.jsonl'}:2: JSON nested too deeply to read" in line.message
    assert [results[k].text for k in ("a", "b")] == ["first", "third"]  # type: ignore[union-attr]
    assert isinstance(results[str(tmp_path / "good.txt")], ParsedDocument)


def test_docx_xml_nested_too_deeply_is_an_error_of_that_file(tmp_path: Path) -> None:
    """Elements nested thousands deep in word/document.xml raised RecursionError out of the
    paragraph walk, stopping the run."""
    body = "<w:sdt>" * 5_000 + "<w:p><w:r><w:t>deep</w:t></w:r></w:p>" + "</w:sdt>" * 5_000
    assert "nested too deeply to read" in _msg(_one(_docx_xml(tmp_path / "deep.docx", body)))


def _docx_padded(path: Path, part: str, xml: str, unpacked: int) -> Path:
    """A .docx whose ``part`` is ``xml`` padded with spaces (legal after the root element) to
    ``unpacked`` bytes: a long run of one byte deflates ~1000:1, so the file stays a few KB."""
    import zipfile

    w = _TRANSITIONAL
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        if part != "word/document.xml":
            zf.writestr("word/document.xml", f'<w:document xmlns:w="{w}"><w:body><w:p><w:r><w:t>'
                                             "Card fees rise in May.</w:t></w:r></w:p></w:body></w:document>")
        zf.writestr(part, xml + " " * (unpacked - len(xml)))
    return path


def test_a_docx_metadata_part_over_1_mib_is_skipped_not_read(tmp_path: Path) -> None:
    """docProps/core.xml was read whatever its size: a 306 KB .docx unpacking it to 300 MB
    peaked at 933 MB. Over 1 MiB it is skipped, sized before it is unpacked; the text is still
    indexed, without a title, and a warning says why."""
    core = ('<cp:coreProperties xmlns:cp="x" xmlns:dc="http://purl.org/dc/elements/1.1/">'
            "<dc:title>Memo</dc:title></cp:coreProperties>")
    big_core = _docx_padded(tmp_path / "core.docx", "docProps/core.xml", core, 3 * 2**20 // 2)
    assert big_core.stat().st_size < 20_000
    doc = _one(big_core)
    assert isinstance(doc, ParsedDocument)
    assert (doc.text, doc.title) == ("Card fees rise in May.", None)
    assert any("docProps/core.xml) is 1.5 MiB unpacked, over the 1 MiB limit" in w
               for w in doc.warnings), doc.warnings
    small = _docx_padded(tmp_path / "small-core.docx", "docProps/core.xml", core, 2**20)
    assert _one(small).title == "Memo"  # type: ignore[union-attr]  # at the cap: read


def test_a_docx_text_part_over_4x_the_limit_is_refused_naming_it(tmp_path: Path) -> None:
    """word/document.xml was allowed to unpack to 10x the per-document limit: 200 MB of XML,
    ~3.5 GB while ElementTree parsed it. Over 4x it is refused before it is unpacked, the
    message naming the limit; at 4x it is read."""
    body = (f'<w:document xmlns:w="{_TRANSITIONAL}"><w:body><w:p><w:r><w:t>Quarterly memo'
            "</w:t></w:r></w:p></w:body></w:document>")
    limit = 64 * 1024  # max_bytes: the text part may unpack to 256 KiB
    over = _docx_padded(tmp_path / "over.docx", "word/document.xml", body, 5 * limit)
    assert over.stat().st_size < limit
    message = _msg(_one(over, max_bytes=limit))
    assert "its text part (word/document.xml) is 0.3 MiB unpacked, over the 0.2 MiB limit (4x " \
           "the 0.1 MiB per-document limit)" in message, message
    under = _docx_padded(tmp_path / "under.docx", "word/document.xml", body, 4 * limit)
    doc = _one(under, max_bytes=limit)
    assert isinstance(doc, ParsedDocument) and doc.text == "Quarterly memo"


def test_csv_fields_longer_than_the_csv_module_default_are_read(tmp_path: Path) -> None:
    """A field over csv's default limit of 131,072 characters ended the file: one "field larger
    than field limit" error, every later row silently dropped (and, on the first row, a second
    "has a header but no rows" error, with the line number one short)."""
    big = "granola " * 25_000  # 200,000 characters
    middle = tmp_path / "middle.csv"
    middle.write_text(f"id,text\na,first\nb,{big}\nc,third\nd,fourth\n")
    results = list(parse_file(middle))
    assert [type(r).__name__ for r in results] == ["ParsedDocument"] * 4, results
    assert [r.key for r in results] == ["a", "b", "c", "d"]
    assert results[1].text == big  # type: ignore[union-attr]
    first = tmp_path / "first.csv"
    first.write_text(f'id,text\nb,"{big}"\nc,third\n')
    assert [(type(r).__name__, r.key) for r in parse_file(first)] == [
        ("ParsedDocument", "b"), ("ParsedDocument", "c")]
    # Over the per-document limit: that row's error, the rows after it still read.
    results = {r.key: r for r in parse_file(middle, max_bytes=150_000)}
    assert f"{middle}: row 3: text is over the" in _msg(results["b"])
    assert [results[k].text for k in ("a", "c", "d")] == ["first", "third", "fourth"]  # type: ignore[union-attr]


def test_a_malformed_csv_row_names_its_line_and_the_rows_after_it_are_read(tmp_path: Path) -> None:
    """A malformed row ended the file (every later row silently dropped), and its line number was
    the previous good row's."""
    path = tmp_path / "cr.csv"
    path.write_text('id,text\na,"two\nlines"\nb,bad\rrow\nc,after the bad row\n')
    results = list(parse_file(path))
    assert [r.key for r in results] == ["a", f"{path}#row3", "c"]
    assert _msg(results[1]).startswith(f"{path}:4: malformed CSV row (a carriage return (\\r) "
                                       "inside an unquoted field;"), _msg(results[1])
    assert results[2].text == "after the bad row"  # type: ignore[union-attr]


def test_a_malformed_csv_header_is_an_error_of_that_file(tmp_path: Path) -> None:
    """A malformed header raised csv.Error out of the parser: the whole run stopped with a
    traceback."""
    header = tmp_path / "header.csv"
    header.write_text("id,te\rxt\na,first\n")
    assert _msg(_one(header)).startswith(f"{header}:1: malformed CSV header (a carriage return")


def test_deeply_nested_html_is_read_in_linear_time(tmp_path: Path) -> None:
    """Every block element's line breaks were inserted into the tree, and inserting after a tag
    walks all its descendants: 5,000 nested <div>s took ~4 s, 10,000 ~9 s (quadratic). One walk
    reads 15,000 in about a second (~45 s before)."""
    import time

    n = 15_000
    (tmp_path / "deep.html").write_text("<html><body>" + "<div>x " * n + "<b>gran</b>ola" + "</div>" * n
                                        + "</body></html>")
    start = time.perf_counter()
    doc = _one(tmp_path / "deep.html")
    elapsed = time.perf_counter() - start
    assert isinstance(doc, ParsedDocument)
    assert doc.text == "x\n" * (n - 1) + "x granola"
    assert elapsed < 6, f"{n} nested <div>s took {elapsed:.1f} s"


def _deflated_docx(path: Path, text: str) -> Path:
    """A .docx whose one paragraph is ``text``, deflated: repeated words shrink ~100:1."""
    import zipfile

    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("word/document.xml", f'<w:document xmlns:w="{_TRANSITIONAL}"><w:body><w:p><w:r>'
                                         f"<w:t>{text}</w:t></w:r></w:p></w:body></w:document>")
    return path


def test_docx_text_over_the_document_limit_is_rejected_not_truncated(tmp_path: Path) -> None:
    """Only word/document.xml was capped (at 4x max_bytes): a .docx under the limit whose text was
    up to 4x over it was indexed whole, where a text file or a record that size is rejected."""
    limit = 64 * 1024
    over = _deflated_docx(tmp_path / "over.docx", "granola " * 12_000)  # 96,000 bytes of text
    assert over.stat().st_size < limit
    message = _msg(_one(over, max_bytes=limit))
    assert f"{over}: its text is 0.1 MiB, over the 0.1 MiB per-document limit" in message, message
    under = _one(_deflated_docx(tmp_path / "under.docx", "granola " * 8_000), max_bytes=limit)
    assert isinstance(under, ParsedDocument) and len(under.text) == 8 * 8_000 - 1


def _flate_pdf(path: Path, pages: list[list[str]]) -> Path:
    """A PDF written by hand whose pages' content streams are deflated (as most PDFs' are)."""
    return _pdf(path, pages, deflate=True)


def _pdf_file(path: Path, objs: dict[int, bytes]) -> Path:
    """``objs`` (numbered from 1, the catalog first) written to ``path`` as a PDF, with its
    cross-reference table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = {}
    for i in sorted(objs):
        offsets[i] = len(out)
        out += b"%d 0 obj\n" % i + objs[i] + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % offsets[i] for i in sorted(objs))
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    path.write_bytes(bytes(out))
    return path


def _pdf(path: Path, pages: list[list[str]], *, deflate: bool) -> Path:
    """A PDF written by hand: one text object per line, Helvetica; ``deflate`` compresses
    each page's content stream."""
    import zlib

    n = len(pages)
    objs = {1: b"<< /Type /Catalog /Pages 2 0 R >>",
            2: b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % (4 + 2 * i)
                                                                        for i in range(n)), n),
            3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"}
    for i, lines in enumerate(pages):
        ops = "\n".join(f"BT /F1 11 Tf 72 {720 - 14 * j} Td ({line}) Tj ET" for j, line in enumerate(lines))
        stream = zlib.compress(ops.encode("latin-1")) if deflate else ops.encode("latin-1")
        objs[4 + 2 * i] = (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font "
                           b"<< /F1 3 0 R >> >> /Contents %d 0 R >>" % (5 + 2 * i))
        flate = b" /Filter /FlateDecode" if deflate else b""
        objs[5 + 2 * i] = (b"<< /Length %d%s >>\nstream\n" % (len(stream), flate) + stream
                           + b"\nendstream")
    return _pdf_file(path, objs)


def test_pdf_text_over_the_document_limit_is_rejected_without_reading_every_page(tmp_path: Path) -> None:
    """A PDF's size was the only check: deflated pages under the limit held text far over it,
    indexed whole. Reading stops at the page that goes over."""
    limit = 64 * 1024
    page = ["granola bar and trail mix " * 3] * 500  # ~39,000 bytes of text a page
    pdf = _flate_pdf(tmp_path / "big.pdf", [page, page, page])
    assert pdf.stat().st_size < limit
    message = _msg(_one(pdf, max_bytes=limit))
    assert f"{pdf} (read to page 2 of 3): its text is 0.1 MiB, over the 0.1 MiB per-document limit" \
           in message, message
    small = _one(_flate_pdf(tmp_path / "small.pdf", [page]), max_bytes=limit)
    assert isinstance(small, ParsedDocument) and "granola bar and trail mix" in small.text


def test_html_text_over_the_document_limit_is_rejected(tmp_path: Path) -> None:
    """An entity can hold more text than its source (&nGt; is 5 bytes, its text 6): HTML under
    the limit gave text over it, indexed whole."""
    (tmp_path / "e.html").write_text("<p>" + "&nGt;" * 20_000 + "</p>")  # 100,007 bytes
    message = _msg(_one(tmp_path / "e.html", max_bytes=110_000))
    assert "its text is 0.1 MiB, over the 0.1 MiB per-document limit" in message, message
    doc = _one(tmp_path / "e.html", max_bytes=120_000)
    assert isinstance(doc, ParsedDocument) and len(doc.text.encode()) == 120_000


def _stalling_pdf(path: Path, pages: int, ops: int) -> Path:
    """Pages that all share one deflated content stream of ``ops`` empty text objects (the
    security exploration's file: small on disk, slow to read page after page, no text)."""
    import zlib

    stream = zlib.compress(b"BT ET\n" * ops, 9)
    objs = {1: b"<< /Type /Catalog /Pages 2 0 R >>",
            2: b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % (4 + i) for i in range(pages)),
                                                             pages),
            3: b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream"}
    for i in range(pages):
        objs[4 + i] = (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R /Resources "
                       b"<< /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >> >>")
    return _pdf_file(path, objs)


def test_a_pdf_whose_pages_take_too_long_to_read_is_that_documents_error(tmp_path: Path, monkeypatch) -> None:
    """A 307 KB PDF of 1,000 pages sharing a 70 MB stream of drawing took ~7 s a page: two hours
    of a job that could not be cancelled, every other job waiting (the security exploration of
    the sixth session of 2026-12-02). Reading stops once the budget is spent (lowered here from
    300 s: the same file, a few pages of it, at a budget a tenth of a page's time)."""
    import time as time_module

    from indexer import parsing

    pdf = _stalling_pdf(tmp_path / "stall.pdf", 40, 300_000)
    t0 = time_module.monotonic()
    _one(_stalling_pdf(tmp_path / "one.pdf", 1, 300_000))  # one page: what a page costs here
    page_s = time_module.monotonic() - t0
    monkeypatch.setattr(parsing, "PDF_READ_BUDGET_S", page_s / 10)
    t0 = time_module.monotonic()
    message = _msg(_one(pdf))
    took = time_module.monotonic() - t0
    assert message.startswith(f"cannot read {pdf} in time: its text took over "), message
    assert "(read to page 1 of 40, 0 bytes of text so far)" in message, message
    assert took < 10 * page_s, (took, page_s)  # not the 40 pages
