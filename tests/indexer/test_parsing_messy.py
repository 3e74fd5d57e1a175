"""Messy real-world input (second parsing review, 2026-12-01): a PDF the reader fails on in
ways other than a PdfReadError, PDF ligatures, .docx tracked moves and tables, HTML tables,
Markdown front matter and .json shapes that are not a list of records."""

from __future__ import annotations

import base64
import json
import logging
import struct
import zlib
from pathlib import Path

import pytest

from indexer.parsing import DocumentError, ParsedDocument, parse_file, parse_source
from tests.indexer.test_parsing import _docx_xml, _pdf_lines

# A PDF encrypted with AES-128 and an empty user password (a "no copy/print" PDF), and a
# damaged one with an object that refers to itself (zlib-compressed, base64).
_AES_PDF = (
    "eNqNUz1oFEEUbnXSGRArmebsdOd/duE4yM8dioYcdyYikmJ2Z/ayctk9dudCIhGsrLQXLEQwpaV1CkELBRHRIpUoGtAy"
    "VQrB2csld7AW7i7LvO+9931v3syrtRdbl/EVBmrfvn/4BDBEMAvvgnodeO0808PI5LDuG6IjgrhSDdBoAJPqMoZMxd7c"
    "HhjotVXPFMBbyIaphRh41xNdwDuQucAOXJtKpZXUBWVVP+uBYw5YcneAtzy0/SR1thzZEwL2T23gLRmdqPlsy6ki9wpM"
    "oAyI0/Y6psiGeeS4ypxW5iocLTDkJ9zuc7Wn1qS2gOK4grbKnTmuZ6LPK/olI/C6w9COzBJ0HZhXhRlpeVdNf9PYJFLA"
    "a6ZRppO0B71bSTqXFskJMCUgpgRumLRn16EISn9hc6M2wItzB8Wzw+3Xb9/d3vt8QR/cb328OPN7Zp/vvTrz/MEs/7o5"
    "c3Z39v3R032w8mZH7s7/enL+0sbeyp8vhw8fHw0e/djZ/fmyFBvzjWXlRHZSiz9Vyypkrpflb1wVJr7rWss1E3pdq8er"
    "hdYS9Oaa3VUCTwOFQ4Z2vblZNtRbzKLlgUlhowHLvnftRmtMUBr5xGhDRgIWCEkC4s4r6Vt3JZ1TpVrl2t0RWBc8Do0J"
    "pTBMBDiUOmKhCg0PA4wj40sciJgGGkWxVihGKCDIpz4lkmGqJGZOfwXWDdUBj5AJFSWMB4TqkFJtpBSMI8TdRsOYGW6Y"
    "kdxXDAuGkLNFHMcKYeRPz8ZWbmKAYADQ6QMF55TDGJ5i2N2ikSedYDyoYBj7VcynFYxiXMEYquZyIqsYm4qzuUr6Jh+d"
    "dze5Z9w2vE6WWUiPZ+JaGmcQj9eLbtTqBCNCOGMqxpK4k4h9yQilAkutI4xx439C1kaTkW8PLPRPxq2wKrejZkpBQa3W"
    "XG6Bv29yTMU="
)
_SELF_REFERENCE_PDF = (
    "eNq9lN1O2zAYhs9zFd8JEkyCxPlpWglVKm0q0ICyEIkDtAO3+ZqYpnbmuGvhAncHu5Udz05LKQ3aNDQRRVb7+vvz81o5"
    "uBkMj8mJbxFwQIwfrNNTsJPHEsEeCq7Avl2MVf3XiATsM1rheucci++o2ISCHfGJSBnPwL5jvMcrthW6XQt5agq7jQY3"
    "NMMK7M8sreDe19sxtOq1bdavYPfFQjfydop4O0UukWcqB9dvmYBKSaRz6yzRgxMgBJIphC6EvgNJCsSH5NI67PWvIuiP"
    "rocXg+g6uehdwnnUG0Tx3SgeHEHyAMkn6zDJEZ5wLOmUVTnMqZzTgqYIpRRKTEQBY8wYryBHiSfbrF5R5hRKfSQQHGGi"
    "EaEeno7FQsG3hZjNKMxZJqligm/ToqQx8auBh0IolOuyBMRUwxiORsnriXURjWcDYAPKf5O2WaUZy60521eYMnomVnDv"
    "aKFFNK+Oq8HHWImFnGh3TH5td/1Dj1kndrvm1f7Uh6zA26jP3YO3bPL+r031edRSgKLFrNqAVto7UaKkx9s4JWRlyJmt"
    "gmW5ysWiQqA8BQpLLIqX0BkXSw4lFvpSv88j9188an2oR8GeR2HTI9IO3+vRzz94lEtEMKeHJdNdjBFLIVNYPRaizAVn"
    "k3ex9v7GernDuv2hrMM91p1G9z7V11Zkzx9Bdy+BOLsZTBUIh18WVOrDF48QYymkOtqJX0mcWo6GZjnbB1pB4AUwhRdN"
    "z1Hv8K1GnFZTC4OG5msn9rWg025o7U4jjjikEUfcoNGXeO1Xub+M5nvkRVOSsgJlDeWWPaG5JHb8QyjorP27sKYCanbx"
    "+iJrYjUa4ocd6+AgGg2t3ydl4ew="
)


def _unpacked(blob: str) -> bytes:
    return zlib.decompress(base64.b64decode(blob))


def _only(path: Path, **kw) -> ParsedDocument | DocumentError:
    results = list(parse_file(path, **kw))
    assert len(results) == 1
    return results[0]


def _has_cryptography() -> bool:
    try:
        import cryptography  # noqa: F401
    except ImportError:
        return False
    return True


def test_a_pdf_the_reader_fails_on_is_that_files_error_and_the_folder_is_read(tmp_path: Path) -> None:
    """DependencyError (AES without `cryptography`) and LimitReachedError (a self-referencing
    object) stopped the whole `facet index` run with a traceback."""
    (tmp_path / "aes.pdf").write_bytes(_unpacked(_AES_PDF))
    (tmp_path / "selfref.pdf").write_bytes(_unpacked(_SELF_REFERENCE_PDF))
    (tmp_path / "ok.txt").write_text("the rest of the folder")
    results = {Path(r.key).name: r for r in parse_source(tmp_path)}
    assert isinstance(results["ok.txt"], ParsedDocument)
    loop = results["selfref.pdf"]
    assert isinstance(loop, DocumentError) and "is not a readable PDF" in loop.message
    assert "\n" not in loop.message and "0x" not in loop.message
    aes = results["aes.pdf"]
    if not _has_cryptography():
        assert isinstance(aes, DocumentError)
        assert "is encrypted (AES)" in aes.message and "`cryptography` package" in aes.message


@pytest.mark.parametrize("error", [struct.error("unpack requires a buffer of 4 bytes"),
                                   zlib.error("Error -3 while decompressing data"),
                                   AssertionError(), RecursionError("maximum recursion depth"),
                                   IndexError("list index out of range")])
def test_any_failure_of_the_pdf_reader_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   error: Exception) -> None:
    import pypdf

    def fail(*args: object, **kw: object) -> None:
        raise error

    monkeypatch.setattr(pypdf, "PdfReader", fail)
    doc = _only(_pdf_lines(tmp_path / "d.pdf", ["text"]))
    assert isinstance(doc, DocumentError) and "is not a readable PDF (" in doc.message
    assert "()" not in doc.message and "\n" not in doc.message


def test_memory_error_in_the_pdf_reader_is_not_swallowed(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import pypdf

    def fail(*args: object, **kw: object) -> None:
        raise MemoryError

    monkeypatch.setattr(pypdf, "PdfReader", fail)
    with pytest.raises(MemoryError):
        _only(_pdf_lines(tmp_path / "d.pdf", ["text"]))


def test_a_password_protected_pdf_says_so(tmp_path: Path) -> None:
    """It said "is not a readable PDF (File has not been decrypted)"."""
    from pypdf import PdfWriter

    writer = PdfWriter(clone_from=_pdf_lines(tmp_path / "plain.pdf", ["secret text"]))
    writer.encrypt(user_password="pw", owner_password="owner", algorithm="RC4-128")
    with (tmp_path / "locked.pdf").open("wb") as fh:
        writer.write(fh)
    doc = _only(tmp_path / "locked.pdf")
    assert isinstance(doc, DocumentError)
    assert "is password-protected (encrypted)" in doc.message
    assert "has not been decrypted" not in doc.message


class _Seen(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_pypdf_log_lines_are_the_documents_warning_naming_the_file(tmp_path: Path) -> None:
    """"WARNING pypdf._reader: EOF marker not found" was printed (by the root logger's handler,
    as the CLI sets it up) without naming the file."""
    seen = _Seen()
    root = logging.getLogger()
    root.addHandler(seen)
    try:
        path = _pdf_lines(tmp_path / "shifted.pdf", ["still readable"])  # its offsets now wrong
        path.write_bytes(path.read_bytes().replace(b"%PDF-1.4\n", b"%PDF-1.4\n%junk\n"))
        doc = _only(path)
        noeof = _pdf_lines(tmp_path / "noeof.pdf", ["x"])
        noeof.write_bytes(noeof.read_bytes().replace(b"%%EOF", b""))
        error = _only(noeof)
        assert not [r for r in seen.records if r.name.startswith("pypdf")]
        logging.getLogger("pypdf.test").warning("outside a read")  # still reaches the log
        assert [r.getMessage() for r in seen.records] == ["outside a read"]
    finally:
        root.removeHandler(seen)
    assert isinstance(doc, ParsedDocument) and doc.text == "still readable"
    assert len(doc.warnings) == 1
    assert doc.warnings[0].startswith(f"{path}: the PDF reader noted: ")
    assert "incorrect startxref pointer" in doc.warnings[0]
    assert isinstance(error, DocumentError) and "EOF marker not found" in error.message


def test_pdf_ligatures_are_unfolded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """'\ufb01nancial work\ufb02ow' matched no search for "financial workflow"."""
    from pypdf import PageObject

    def ligatures(self: PageObject, *args: object, **kw: object) -> str:  # as a PDF's fonts map them
        return "The \ufb01nancial work\ufb02ow, \ufb00 \ufb03 \ufb04 \ufb05 \ufb06 e\ufb00ect-\nive"

    monkeypatch.setattr(PageObject, "extract_text", ligatures)
    doc = _only(_pdf_lines(tmp_path / "lig.pdf", ["x"]))
    assert isinstance(doc, ParsedDocument)
    assert doc.text == "The financial workflow, ff ffi ffl st st effective"


def test_docx_and_html_ligatures_are_unfolded_too(tmp_path: Path) -> None:
    doc = _only(_docx_xml(tmp_path / "l.docx", "<w:p><w:r><w:t>e\ufb03cient work\ufb02ow</w:t></w:r></w:p>"))
    assert isinstance(doc, ParsedDocument) and doc.text == "efficient workflow"
    (tmp_path / "l.html").write_text("<p>\ufb01nancial</p>")
    page = _only(tmp_path / "l.html")
    assert isinstance(page, ParsedDocument) and page.text == "financial"


def test_docx_text_moved_away_is_read_once_where_it_now_is(tmp_path: Path) -> None:
    """w:moveFrom (tracked: moved away) was indexed besides its w:moveTo copy."""
    body = ("<w:p><w:moveFrom w:id='1' w:author='a'><w:r><w:t>Moved sentence.</w:t></w:r></w:moveFrom>"
            "<w:r><w:t>First paragraph.</w:t></w:r><w:del w:id='2' w:author='a'><w:r>"
            "<w:delText>Deleted words.</w:delText></w:r></w:del></w:p>"
            "<w:moveFrom w:id='3' w:author='a'><w:p><w:r><w:t>A moved paragraph.</w:t></w:r></w:p></w:moveFrom>"
            "<w:p><w:r><w:t>Second paragraph. </w:t></w:r><w:moveTo w:id='4' w:author='a'><w:r>"
            "<w:t>Moved sentence.</w:t></w:r></w:moveTo></w:p>")
    doc = _only(_docx_xml(tmp_path / "m.docx", body))
    assert isinstance(doc, ParsedDocument)
    assert doc.text == "First paragraph.\nSecond paragraph. Moved sentence."


def _cell(text: str) -> str:
    return f"<w:tc><w:tcPr/><w:p><w:r><w:t>{text}</w:t></w:r></w:p></w:tc>" if text else "<w:tc><w:p/></w:tc>"


def test_docx_table_rows_are_lines_of_cells(tmp_path: Path) -> None:
    """Each cell was a line: 'Product\nPrice\nStock\nBlue widget\n12.50\n340'."""
    rows = [["Product", "Price", "Stock"], ["Blue widget", "12.50", "340"], ["Red widget", "", "7"]]
    table = "<w:tbl><w:tblPr/>" + "".join(
        "<w:tr><w:trPr/>" + "".join(_cell(c) for c in row) + "</w:tr>" for row in rows) + "</w:tbl>"
    doc = _only(_docx_xml(tmp_path / "t.docx", "<w:p><w:r><w:t>Prices:</w:t></w:r></w:p>" + table))
    assert isinstance(doc, ParsedDocument)
    assert doc.text == "Prices:\nProduct | Price | Stock\nBlue widget | 12.50 | 340\nRed widget | 7"


def test_html_table_rows_are_lines_of_cells(tmp_path: Path) -> None:
    (tmp_path / "t.html").write_text(
        "<html><body><p>Prices</p><table><tr><th>Product</th><th>Price</th></tr>"
        "<tr><td>Blue <b>widget</b></td><td> 12.50 </td></tr><tr><td></td><td>9</td></tr>"
        "</table><p>after</p></body></html>")
    doc = _only(tmp_path / "t.html")
    assert isinstance(doc, ParsedDocument)
    assert doc.text == "Prices\nProduct | Price\nBlue widget | 12.50\n9\nafter"


def test_markdown_front_matter_is_not_body_text(tmp_path: Path) -> None:
    """'---\ntitle: ...\ntags: [alpha, beta]\n---' was indexed as the first lines of the body."""
    (tmp_path / "f.md").write_text("---\ntitle: Release notes\ntags: [alpha, beta]\n---\n\nThe body.\n")
    doc = _only(tmp_path / "f.md")
    assert isinstance(doc, ParsedDocument)
    assert doc.title == "Release notes" and doc.text == "Release notes\n\nThe body.\n" and "tags" not in doc.text
    (tmp_path / "rule.md").write_text("---\nJust a rule above.\n---\nmore\n")  # no key: text
    rule = _only(tmp_path / "rule.md")
    assert isinstance(rule, ParsedDocument) and "Just a rule above." in rule.text
    (tmp_path / "open.md").write_text("---\ntitle: x\nnever closed\n")
    left = _only(tmp_path / "open.md")
    assert isinstance(left, ParsedDocument) and "never closed" in left.text


def test_json_records_nested_under_a_field_are_named(tmp_path: Path) -> None:
    path = tmp_path / "n.json"
    path.write_text(json.dumps({"data": [{"id": 1, "text": "a"}, {"id": 2, "text": "b"}]}))
    for column in (None, "data"):
        doc = _only(path, text_column=column)
        assert isinstance(doc, DocumentError)
        assert "the records are nested under 'data' (a list of 2 objects)" in doc.message
        assert "is list" not in doc.message and "--text-column" not in doc.message


def test_json_dotted_text_column_and_json_type_words(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"body": {"en": "hello"}}))
    dotted = _only(path, text_column="body.en")
    assert isinstance(dotted, DocumentError) and "nested fields are not supported" in dotted.message
    plain = _only(path)
    assert isinstance(plain, DocumentError) and "field 'body' is an object, expected a string" in plain.message
    (tmp_path / "l.jsonl").write_text("[1, 2]\n")
    line = _only(tmp_path / "l.jsonl")
    assert isinstance(line, DocumentError) and line.message.endswith("expected a JSON object, got a list")


def test_a_json_list_of_strings_is_a_document_each_and_of_numbers_one_line(tmp_path: Path) -> None:
    """500 strings gave 500 lines "item N is str, expected an object"; facet cluster reads each
    string as a text, and so does facet index now."""
    (tmp_path / "s.json").write_text(json.dumps([f"text {i}" for i in range(500)]))
    docs = list(parse_file(tmp_path / "s.json"))
    assert len(docs) == 500 and all(isinstance(d, ParsedDocument) for d in docs)
    assert (docs[7].key, docs[7].text) == (f"{tmp_path / 's.json'}#item7", "text 7")
    (tmp_path / "n.json").write_text(json.dumps(list(range(500))))
    (error,) = list(parse_file(tmp_path / "n.json"))
    assert isinstance(error, DocumentError) and "a list of 500 items, none an object or a string" in error.message
    (tmp_path / "m.json").write_text(json.dumps([1, {"text": "ok"}]))
    bad, good = list(parse_file(tmp_path / "m.json"))
    assert isinstance(bad, DocumentError) and "item 0 is a number, expected an object or a string" in bad.message
    assert isinstance(good, ParsedDocument)
