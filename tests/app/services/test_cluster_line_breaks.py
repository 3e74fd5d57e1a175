"""`facet cluster`'s files and the UI's paste box split lines at LF, CRLF and CR alone, not at the
other breaks ``str.splitlines`` knows (U+2028, U+0085, a form feed, U+001C-U+001E): a .jsonl
whose string held a raw U+2028 (``json.dumps(..., ensure_ascii=False)`` writes it so), which
`facet index` reads, was refused ("not valid JSON (Unterminated string ...)"); a text holding a
form feed was two texts, so a labels file of as many lines "held 6 labels for the 7 texts".
A .json labels file's labels are stripped as a labels file's lines are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.services.clustering import read_label_file, read_text_file
from ui.inputs import pasted_texts

TEXTS = ["my card was stolen\u2028please help", "where is my parcel\x85now", "page one\x0cpage two",
         "group\x1cfile\x1drecord\x1eunit", "a refund, please", "the app crashes"]


def test_a_jsonl_with_a_raw_line_separator_in_a_string_reads_as_written(tmp_path: Path) -> None:
    path = tmp_path / "texts.jsonl"
    path.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in TEXTS),
                    encoding="utf-8")
    assert "\u2028" in path.read_text(encoding="utf-8")  # raw, not escaped
    assert read_text_file(path) == TEXTS


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])
def test_a_txt_is_one_text_per_line_whatever_its_line_ends(tmp_path: Path, end: str) -> None:
    texts, labels = tmp_path / "texts.txt", tmp_path / "labels.txt"
    texts.write_bytes(end.join(TEXTS).encode("utf-8") + end.encode())
    labels.write_bytes(end.join(f"label\x0c{i}" for i in range(6)).encode("utf-8"))
    assert read_text_file(texts) == [t.strip() for t in TEXTS]
    assert read_label_file(labels) == [f"label\x0c{i}" for i in range(6)]


def test_the_paste_box_keeps_a_line_separator_inside_its_text() -> None:
    assert pasted_texts("a\u2028b\r\nc d e\rf g\n\n") == ["a\u2028b", "c d e", "f g"]


def test_json_labels_are_stripped_as_line_labels_are_and_a_blank_one_is_refused(tmp_path: Path) -> None:
    from app.errors import DataError

    (tmp_path / "labels.json").write_text(json.dumps({"labels": ["card ", " card", "refund", 3]}))
    (tmp_path / "labels.txt").write_text("card \n card\nrefund\n3\n")
    assert read_label_file(tmp_path / "labels.json") == read_label_file(tmp_path / "labels.txt") == [
        "card", "card", "refund", "3"]
    (tmp_path / "blank.json").write_text(json.dumps(["card", " "]))
    with pytest.raises(DataError, match="label 2 of the list is blank"):
        read_label_file(tmp_path / "blank.json")
