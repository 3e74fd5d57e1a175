"""`facet cluster FILE` reads a text file as `facet index` decodes plain text
(``indexer.parsing.decode_text``): a UTF-16 file with a byte order mark was refused as "looks
binary (it has NUL bytes)" and a Latin-1 one with "save it as UTF-8", though `facet index` read
both with a warning. And `facet index --help` said a csv without a text column "takes its first
column, with a warning", where such a csv is refused."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from app.errors import DataError
from app.services.clustering import read_label_file, read_text_file

LINES = ["café crème", "naïve façade", "Grüße aus Zürich"]


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-be", "utf-32"])
def test_a_file_with_a_byte_order_mark_is_read(tmp_path: Path, codec: str,
                                               caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "texts.txt"
    bom = "\ufeff" if codec.endswith("-be") else ""  # "utf-16" and "utf-32" write their own
    path.write_bytes((bom + "\n".join(LINES)).encode(codec))
    with caplog.at_level(logging.WARNING, logger="app.services.clustering"):
        assert read_text_file(path) == LINES  # was "looks binary (it has NUL bytes)"
    name = "UTF-32" if codec.startswith("utf-32") else "UTF-16"
    assert f"{path}: {name} (byte order mark), not UTF-8" in caplog.messages


def test_a_latin1_file_is_read_as_cp1252_with_a_warning(tmp_path: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "texts.txt"
    path.write_bytes("\n".join(LINES).encode("latin-1"))
    with caplog.at_level(logging.WARNING, logger="app.services.clustering"):
        assert read_text_file(path, name="texts.txt") == LINES  # was "save it as UTF-8"
    assert "texts.txt: not UTF-8 (first non-UTF-8 byte at 3); decoded as cp1252" in caplog.messages


def test_a_turkish_csv_is_read_as_cp1254(tmp_path: Path) -> None:
    path = tmp_path / "texts.csv"
    rows = ["İstanbul'da ılık hava", "Şişli'de yaşıyorum", "Öğretmen şarkı söyledi"]
    path.write_bytes(("text\n" + "\n".join(rows) + "\n").encode("cp1254"))
    assert read_text_file(path) == rows


def test_utf8_is_read_without_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "texts.txt"
    path.write_bytes("\ufeff".encode() + "\n".join(LINES).encode())
    with caplog.at_level(logging.WARNING, logger="app.services.clustering"):
        assert read_text_file(path) == LINES
    assert not caplog.messages


def test_binary_is_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "texts.json"
    path.write_bytes(b"\x00\x01binary")
    with pytest.raises(DataError, match=r"^texts\.json looks binary .*give a text file"):
        read_text_file(path, name="texts.json")


def test_a_utf16_label_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "labels.txt"
    path.write_bytes("sport\nmonde\n".encode("utf-16"))
    assert read_label_file(path) == ["sport", "monde"]


def test_standard_input_is_still_utf8_only(tmp_path: Path) -> None:
    """`facet cluster -` refuses non-UTF-8 input as `facet search -` does (and the same bytes in
    a file are read as Latin-1)."""
    path = tmp_path / "stdin.txt"
    path.write_bytes(b"ok\ncaf\xe9\n")
    with pytest.raises(DataError) as refused:
        read_text_file(path, name="standard input", utf8_only=True)
    # Its place in its line ("byte 6" was the offset in the whole input, past line 2's end);
    # after a byte order mark, counted without it.
    assert str(refused.value) == ("standard input is not UTF-8 text (line 2, byte 0xE9 at byte 4 "
                                  "of the line); save it as UTF-8"), refused.value
    marked = tmp_path / "marked.txt"
    marked.write_bytes(b"\xef\xbb\xbfab\xffc")
    with pytest.raises(DataError, match=r"\(line 1, byte 0xFF at byte 3 of the line\)"):
        read_text_file(marked, name="standard input", utf8_only=True)
    assert read_text_file(path) == ["ok", "café"]
    from tests.app.cli_runner import invoke_cli

    piped = invoke_cli("cluster", "-", "-i", "x", "--embedder", "minilm", "--explain", "",
                       env={"FACET_DATA_DIR": str(tmp_path / "data")}, input=b"ok\ncaf\xe9\n")
    assert piped.returncode == 4 and "standard input is not UTF-8 text" in piped.stderr, piped.stderr


def test_index_help_says_a_csv_without_a_text_column_is_refused() -> None:
    from typer.testing import CliRunner

    from app.cli import cli

    shown = CliRunner().invoke(cli, ["index", "--help"], terminal_width=200).output
    words = " ".join(re.sub(r"[│╭╮╰╯─]", " ", shown).split())
    assert "takes its first column, with a warning" not in words
    assert "a csv or record without them is refused" in words


def test_utf16_without_a_mark_is_named_for_cluster_files_too(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes("first note about cards\nsecond note about refunds\n".encode("utf-16-le"))
    with pytest.raises(DataError, match=r"looks binary \(NUL or control bytes\), not text; it reads "
                                        r"as UTF-16LE text without a byte order mark: save it as "
                                        r"UTF-8 \(or as UTF-16 with its mark\); give a text file"):
        read_text_file(path)

    from tests.app.cli_runner import invoke_cli

    piped = invoke_cli("cluster", "-", "-i", "x", "--embedder", "minilm", "--explain", "",
                       env={"FACET_DATA_DIR": str(tmp_path / "data")}, input=path.read_bytes())
    assert piped.returncode == 4 and ("standard input looks binary (it has NUL bytes), not text; it "
                                      "reads as UTF-16LE text without a byte order mark: save it "
                                      "as UTF-8") in piped.stderr, piped.stderr
