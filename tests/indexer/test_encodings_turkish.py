"""Non-English plain text as `facet index` decodes it (``indexer.parsing.decode_text``).

Turkish cp1254 was read as cp1252 ("İstanbul'da ılık ... şehir" indexed as "Ýstanbul'da ýlýk
... þehir"), a UTF-32 file with a byte order mark as UTF-16 (a NUL after every character,
removed with a warning), and a .txt of invisible format characters (zero-width space, BOM) was
"indexed" with no chunks where a file of spaces is refused as empty.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from indexer.parsing import DocumentError, ParsedDocument, decode_text, parse_file

TURKISH = [
    "İstanbul'da ılık hava ve şehir.",
    "Şişli'de yaşıyorum.",
    "Öğretmen çocuklara şarkı söyledi.",
    "Bugün hava çok güzel, değil mi?",
    "Ağaç",
    "Türkiye Cumhuriyeti'nin başkenti Ankara'dır; en kalabalık şehri ise İstanbul'dur. " * 40,
    "Iğdır ve Muğla arasında uçakla yolculuk yapmak mümkün müdür? Evet, aktarmalı uçuşlar var.",
]

# cp1252 text the Turkish check must leave alone: Icelandic (þ, ð, ý are its own letters),
# German and French, and German naming an Icelandic place.
WESTERN = [
    "Þetta er ný bók, sagði hún",
    "Ég held að það sé gott veður í dag.",
    "Hann sagði að hún væri ný í bænum.",
    "Það er gott.",
    "Þingvellir er þjóðgarður á Íslandi og þar var Alþingi stofnað árið 930. " * 30,
    "Straße und Größe über Bürger",
    "L'élève a réussi à l'école, ça va.",
    "Die Gäste besuchten Guðrún in Reykjavík.",
]


@pytest.mark.parametrize("text", TURKISH)
def test_turkish_cp1254_is_read_as_cp1254(text: str) -> None:
    decoded = decode_text(text.encode("cp1254"), "tr.txt")
    assert isinstance(decoded, tuple), decoded
    assert decoded[0] == text  # was "Ýstanbul'da ýlýk hava ve þehir."
    assert len(decoded[1]) == 1 and decoded[1][0].endswith("decoded as cp1254"), decoded[1]


@pytest.mark.parametrize("text", WESTERN)
def test_icelandic_german_french_cp1252_stay_cp1252(text: str) -> None:
    decoded = decode_text(text.encode("cp1252"), "w.txt")
    assert isinstance(decoded, tuple), decoded
    assert decoded[0] == text
    assert decoded[1][0].endswith("decoded as cp1252"), decoded[1]


def test_a_turkish_file_is_indexed_with_its_letters(tmp_path: Path) -> None:
    path = tmp_path / "hava.txt"
    path.write_bytes("İstanbul'da ılık hava ve şehir.\n".encode("cp1254"))
    (doc,) = parse_file(path)
    assert isinstance(doc, ParsedDocument), doc
    assert doc.text == "İstanbul'da ılık hava ve şehir.\n"
    assert doc.warnings == [f"{path}: not UTF-8 (first non-UTF-8 byte at 0); decoded as cp1254"]


def test_a_large_turkish_file_streams_as_cp1254(tmp_path: Path) -> None:
    path = tmp_path / "uzun.txt"
    text = "Öğrenciler şehirde ılık bir gün geçirdi.\n" * 200
    path.write_bytes(text.encode("cp1254"))
    (doc,) = parse_file(path, stream_over_bytes=1000)
    assert not isinstance(doc, DocumentError), doc
    assert doc.warnings[-1].endswith("decoded as cp1254")
    assert "".join(doc.pieces()) == text


@pytest.mark.parametrize("codec", ["utf-32", "utf-32-le", "utf-32-be"])
def test_utf32_with_a_byte_order_mark_is_read_as_utf32(codec: str) -> None:
    text = "Grüße aus Zürich, 20 chars+"
    data = ("" if codec == "utf-32" else "\ufeff") + text
    decoded = decode_text(data.encode(codec), "u32.txt")
    assert isinstance(decoded, tuple), decoded
    assert decoded[0] == text  # was read as UTF-16: a NUL after every character
    assert decoded[1] == ["u32.txt: UTF-32 (byte order mark), not UTF-8"]


def test_utf32_file_indexed_and_streamed_without_nuls(tmp_path: Path) -> None:
    path = tmp_path / "u32.txt"
    text = "line one, ünïcode\nline two\n"
    path.write_bytes(text.encode("utf-32"))
    (doc,) = parse_file(path)
    assert isinstance(doc, ParsedDocument), doc
    assert doc.text == text
    assert doc.warnings == [f"{path}: UTF-32 (byte order mark), not UTF-8"]  # no "NUL ... removed"
    (streamed,) = parse_file(path, stream_over_bytes=10)
    assert not isinstance(streamed, DocumentError), streamed
    assert streamed.warnings == [f"{path}: UTF-32 (byte order mark), not UTF-8"]
    assert "".join(streamed.pieces()) == text
    assert streamed.content_hash == doc.content_hash


def test_utf16_with_a_byte_order_mark_still_reads_as_utf16() -> None:
    decoded = decode_text("hello wörld".encode("utf-16"), "u16.txt")
    assert decoded == ("hello wörld", ["u16.txt: UTF-16 (byte order mark), not UTF-8"])


@pytest.mark.parametrize("invisible", [
    "\u200b", "\u2060\u2060", "\ufeff", "\u00ad", "\u200b \n\u2060\t\ufeff\u00ad\u200d\n",
])
def test_only_format_characters_is_empty_as_whitespace_is(tmp_path: Path, invisible: str) -> None:
    path = tmp_path / "invisible.txt"
    path.write_text(invisible, encoding="utf-8")
    (result,) = parse_file(path)
    assert isinstance(result, DocumentError), result
    assert result.message == f"{path} is empty: no text to index"
    (streamed,) = parse_file(path, stream_over_bytes=0)
    assert isinstance(streamed, DocumentError), streamed
    assert streamed.message == f"{path} is empty: no text to index"
    spaces = tmp_path / "spaces.txt"
    spaces.write_text("  \n", encoding="utf-8")
    (blank,) = parse_file(spaces)
    assert isinstance(blank, DocumentError) and blank.message == f"{spaces} is empty: no text to index"


def test_a_word_among_format_characters_is_indexed(tmp_path: Path) -> None:
    path = tmp_path / "word.txt"
    path.write_text("\u200bhello\u2060", encoding="utf-8")
    (doc,) = parse_file(path)
    assert isinstance(doc, ParsedDocument) and "hello" in doc.text


def test_a_record_of_format_characters_has_empty_text(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"text": "\\u200b\\u2060"}\n{"text": "ok"}\n', encoding="utf-8")
    first, second = parse_file(path)
    assert isinstance(first, DocumentError) and "has empty text" in first.message
    assert isinstance(second, ParsedDocument) and second.text == "ok"
