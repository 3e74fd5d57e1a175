"""Non-English files as an explorer indexed them: a large UTF-8 file with one bad byte read
whole as cp1252 once streamed, cp1251 Russian in mostly-ASCII text (HTML, a config note) read
as cp1252, short GBK / KOI8-R / cp1251 records guessed as other codecs, one "decoded as"
warning per csv row, `facet index` hiding all but 5 warnings without a word, and csv / jsonl
field names in decomposed Unicode (macOS) not matching a name typed composed."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest

from indexer.parsing import DocumentError, ParsedDocument, StreamedDocument, parse_file
from tests.app.cli_runner import invoke_cli


def _docs(path: Path, **kw) -> list[ParsedDocument | DocumentError | StreamedDocument]:
    return list(parse_file(path, **kw))


def test_a_streamed_utf8_file_with_one_bad_byte_is_read_as_utf8_like_a_whole_one(
        tmp_path: Path) -> None:
    text = ("Les élèves étudient l'économie à Genève. " * 300).encode()
    path = tmp_path / "r1.txt"
    path.write_bytes(text[:len(text) // 2] + b"\xff" + text[len(text) // 2:])
    whole, = _docs(path)
    streamed, = _docs(path, stream_over_bytes=1000)
    assert isinstance(whole, ParsedDocument) and isinstance(streamed, StreamedDocument)
    assert streamed.encoding.startswith("utf-8"), streamed.warnings  # was cp1252 ("Ã©")
    assert streamed.warnings == whole.warnings
    assert "1 characters replaced with U+FFFD" in streamed.warnings[0]
    assert "".join(streamed.pieces(500)) == whole.text
    assert streamed.content_hash == whole.content_hash


def test_a_streamed_cp1252_file_still_says_where_utf8_failed(tmp_path: Path) -> None:
    path = tmp_path / "w.txt"
    path.write_bytes(("Le garçon mange une crêpe à la fête.\n" * 200).encode("cp1252"))
    whole, = _docs(path)
    streamed, = _docs(path, stream_over_bytes=1000)
    assert isinstance(streamed, StreamedDocument) and streamed.encoding == "cp1252"
    assert streamed.warnings == whole.warnings == [
        f"{path}: not UTF-8 (first non-UTF-8 byte at 6); decoded as cp1252"]


@pytest.mark.parametrize(("name", "text", "codec", "named"), [
    ("code.md", "# Config\n\nSet timeout = 30 and retries = 5 in settings.yaml; "
                "комментарий: проверить\n", "cp1251", "cp1251"),
    ("report.txt", "Quarterly report for the Moscow office: revenue is up. Примечание: "
                   "данные предварительные.\n", "cp1251", "cp1251"),
    ("koi8.txt", "Москва - столица России.\n", "koi8_r", "koi8_r"),
    ("gbk.txt", "北京是中国的首都。\n", "gbk", "gbk"),
    ("ru.jsonl", '{"id": "k1", "text": "Москва зимой", "город": "Москва"}\n'
                 '{"id": "k2", "text": "Казань летом", "город": "Казань"}\n', "cp1251", "cp1251"),
    # Still right: Western, Polish, Greek and Japanese text.
    ("fr.txt", "Les élèves étudient l'économie à Genève.", "cp1252", "cp1252"),
    ("pl.txt", "Zażółć gęślą jaźń", "cp1250", "cp1250"),
    ("el.txt", "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας.\n", "cp1253", "cp1253"),
    ("ja.txt", "東京は日本の首都です。\n", "shift_jis", "cp932"),
])
def test_short_non_utf8_text_is_read_in_its_own_codec(tmp_path: Path, name: str, text: str,
                                                      codec: str, named: str) -> None:
    path = tmp_path / name
    path.write_bytes(text.encode(codec))
    first, *_ = _docs(path)
    assert isinstance(first, ParsedDocument), first
    assert f"decoded as {named}" in first.warnings[0], first.warnings
    if path.suffix != ".jsonl":
        assert first.text.strip() == text.strip()
    else:
        assert first.text == "Москва зимой" and first.metadata == {"город": "Москва"}


@pytest.mark.parametrize("meta", ['<meta charset="windows-1251">',
                                  '<meta http-equiv="Content-Type" '
                                  'content="text/html; charset=windows-1251">'])
def test_html_declared_charset_is_used_when_the_bytes_are_not_utf8(tmp_path: Path,
                                                                   meta: str) -> None:
    path = tmp_path / "ru.html"
    path.write_bytes(f"<html><head>{meta}<title>Москва</title></head><body><p>Москва зимой."
                     "</p></body></html>".encode("cp1251"))
    doc, = _docs(path)
    assert isinstance(doc, ParsedDocument)
    assert (doc.title, doc.text) == ("Москва", "Москва зимой.")  # was "Ìîñêâà"
    assert "decoded as cp1251" in doc.warnings[0]


def test_xml_declaration_names_the_codec(tmp_path: Path) -> None:
    path = tmp_path / "note.html"
    path.write_bytes('<?xml version="1.0" encoding="koi8-r"?><html><body><p>Привет, мир</p>'
                     "</body></html>".encode("koi8_r"))
    doc, = _docs(path)
    assert isinstance(doc, ParsedDocument) and doc.text == "Привет, мир"
    assert "decoded as koi8_r" in doc.warnings[0]


def test_a_charset_quoted_in_a_text_file_is_not_its_encoding(tmp_path: Path) -> None:
    """A cp1252 note quoting an HTML snippet was decoded as the Greek its example names
    ("Le cafι est prκt")."""
    path = tmp_path / "enc.md"
    path.write_bytes('# Notes\n\nLe café est prêt. Exemple:\n\n    <meta charset="iso-8859-7">\n'
                     .encode("cp1252"))
    doc, = _docs(path)
    assert isinstance(doc, ParsedDocument) and "Le café est prêt." in doc.text
    assert "decoded as cp1252" in doc.warnings[0]


def test_a_record_file_in_another_encoding_warns_once_not_per_record(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    path.write_bytes(("id,text\n" + "".join(f"r{i},Café numéro {i}\n" for i in range(30)))
                     .encode("cp1252"))
    docs = _docs(path)
    assert len(docs) == 30 and all(isinstance(d, ParsedDocument) for d in docs)
    warnings = [w for d in docs for w in d.warnings]  # type: ignore[union-attr]
    assert warnings == [f"{path}: not UTF-8 (first non-UTF-8 byte at 14); decoded as cp1252"]
    assert "decoded as cp1252" in docs[0].warnings[0]  # type: ignore[union-attr]


def test_decomposed_field_names_match_composed_ones_and_are_stored_composed(
        tmp_path: Path) -> None:
    nfd = lambda s: unicodedata.normalize("NFD", s)  # noqa: E731  (as macOS writes them)
    csv_path = tmp_path / "nfd.csv"
    csv_path.write_text(f"id,{nfd('énoncé')},{nfd('catégorie')}\nq1,Le musée ouvre à 9h,musée\n",
                        encoding="utf-8")
    row, = _docs(csv_path, text_column="énoncé")  # was "no column 'énoncé'"
    assert isinstance(row, ParsedDocument), row
    assert row.text == "Le musée ouvre à 9h" and row.metadata == {"catégorie": "musée"}
    assert list(row.metadata) == ["catégorie"]  # composed: `-f catégorie=musée` matches
    jsonl = tmp_path / "nfd.jsonl"
    jsonl.write_text(json.dumps({"id": "j1", nfd("énoncé"): "Une question",
                                 nfd("catégorie"): "musée"}, ensure_ascii=False) + "\n",
                     encoding="utf-8")
    rec, = _docs(jsonl, text_column="énoncé")
    assert isinstance(rec, ParsedDocument), rec
    assert rec.text == "Une question" and list(rec.metadata) == ["catégorie"]


def test_index_says_how_many_warnings_it_did_not_print(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for i in range(8):
        (src / f"n{i}.txt").write_bytes(f"Le café numéro {i} est chaud.".encode("cp1252"))
    done = invoke_cli("index", str(src), "-c", "w", "-e", "minilm",
                      env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("  warning: ") == 5
    assert "... and 3 more warnings: facet jobs 1 --errors 8" in done.stderr, done.stderr
