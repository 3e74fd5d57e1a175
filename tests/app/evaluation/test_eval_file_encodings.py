"""`facet eval`'s readers take a user's file the way `facet index` and `facet cluster` read it:
a UTF-16 or UTF-32 file with its byte order mark (Excel's "Unicode Text" is UTF-16 tab-separated
text), and a file whose lines end in CR alone (an old Mac's "CSV (Macintosh)"). Both used to be
refused ("not UTF-8 text (byte 0 ...)", "a carriage return inside a field")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.errors import DataError
from app.evaluation import loaders

SICK = ("pair_ID\tsentence_A\tsentence_B\trelatedness_score\tSemEval_set\n"
        "1\ta cat sits\ta cat is sitting\t4.5\tTEST\n2\tthe sky\ta dog runs\t1\tTEST\n")
STS = 'a cat sits,a cat is sitting,4.5\n"the sky, blue",a dog runs,0.5\nthree,four,2\n'
LABELLED = "text\tlabel\nmy card was stolen\tcard\n\"two\rlines\"\thours\nwhen do you open\thours\nlost my card\tcard\n"


def _beir(root: Path, encode) -> Path:  # type: ignore[no-untyped-def]
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_bytes(encode('{"_id": "d1", "text": "one"}\n{"_id": "d2", "text": "two"}\n'))
    (root / "queries.jsonl").write_bytes(encode('{"_id": "q1", "text": "first"}\n'))
    (root / "qrels" / "test.tsv").write_bytes(encode("query-id\tcorpus-id\tscore\nq1\td2\t1\n"))
    return root


def _goalex(root: Path, encode) -> Path:  # type: ignore[no-untyped-def]
    root.mkdir(parents=True)
    (root / "data.json").write_bytes(encode(json.dumps({"goal": "topic", "texts": ["a", "b", "c"]}, indent=1)))
    (root / "labels.json").write_bytes(encode(json.dumps({"labels": [0, 1, 0]}, indent=1)))
    return root


def _read_all(root: Path, encode) -> list[Any]:  # type: ignore[no-untyped-def]
    root.mkdir(parents=True)
    (root / "sts.csv").write_bytes(encode(STS))
    (root / "SICK.txt").write_bytes(encode(SICK))
    (root / "train.tsv").write_bytes(encode(LABELLED))
    beir = loaders.load_beir(_beir(root / "beir", encode))
    view = loaders.load_goalex(_goalex(root / "goalex", encode))
    return [loaders.load_sts_csv(root / "sts.csv"), loaders.load_sick(root / "SICK.txt"),
            loaders.load_labelled_texts(root / "train.tsv", delimiter="\t"),
            (beir.corpus, beir.queries, beir.qrels), (view.texts, view.labels)]


def _utf8(text: str) -> bytes:
    return text.encode("utf-8")


@pytest.mark.parametrize("encode", [
    pytest.param(lambda text: text.encode("utf-16"), id="utf-16-bom"),
    pytest.param(lambda text: text.encode("utf-16-be").join([b"\xfe\xff", b""]), id="utf-16-be-bom"),
    pytest.param(lambda text: text.encode("utf-32"), id="utf-32-bom"),
    pytest.param(lambda text: text.replace("\n", "\r").encode("utf-8"), id="cr-line-ends"),
    pytest.param(lambda text: text.replace("\n", "\r").encode("utf-16"), id="utf-16-cr-line-ends"),
])
def test_every_reader_takes_a_wide_or_cr_file_as_its_utf8_twin(tmp_path: Path, encode) -> None:  # type: ignore[no-untyped-def]
    expected = _read_all(tmp_path / "utf8", _utf8)
    assert expected[0][1] == loaders.StsPair("the sky, blue", "a dog runs", 0.5)
    assert "two\rlines" in expected[2].texts  # a quoted CR, joined again by the csv reader
    assert _read_all(tmp_path / "other", encode) == expected


def test_a_bom_over_text_of_another_encoding_is_a_data_error(tmp_path: Path) -> None:
    path = tmp_path / "sts.csv"
    path.write_bytes(b"\xff\xfe" + "a,b,1\n".encode("utf-16-le") + b"\x00\xd8")  # a lone surrogate
    with pytest.raises(DataError, match="starts with a UTF-16 byte order mark but is not UTF-16 text"):
        loaders.load_sts_csv(path)


def test_a_stray_cr_in_a_file_with_lf_line_ends_is_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "sts.csv"
    path.write_bytes(b"x,y,1\nz,w\r,2\n")
    with pytest.raises(DataError, match="line 2: a carriage return inside a field"):
        loaders.load_sts_csv(path)


def _long_sts(lines: int) -> str:
    # An astral character (a surrogate pair in UTF-16) in every line, so that chunk boundaries
    # fall inside one; CRLF line ends, so that some fall between the CR and the LF.
    return "".join(f"pair {i} \U0001F600 cat,the {i}th sentence \u00e9t\u00e9,{i % 5}\r\n" for i in range(lines))


@pytest.mark.parametrize("codec", ["utf-16", "utf-32"])
def test_a_wide_file_of_many_chunks_reads_as_its_utf8_twin(tmp_path: Path, codec: str) -> None:
    text = _long_sts(6000)
    assert len(text.encode(codec)) > 4 * loaders.WIDE_CHUNK
    (tmp_path / "utf8.csv").write_bytes(text.encode("utf-8"))
    (tmp_path / "wide.csv").write_bytes(text.encode(codec))
    expected = loaders.load_sts_csv(tmp_path / "utf8.csv")
    assert len(expected) == 6000 and expected[-1].score == 4.0
    assert loaders.load_sts_csv(tmp_path / "wide.csv") == expected


def test_a_wide_file_is_read_a_chunk_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    path.write_bytes(_long_sts(40_000).encode("utf-16"))  # ~4.6 MB
    with path.open("rb") as f:
        lines = loaders._decoded_lines(path, f)
        assert next(lines) == "pair 0 \U0001F600 cat,the 0th sentence \u00e9t\u00e9,0\r\n"
        assert f.tell() <= 2 * loaders.WIDE_CHUNK  # the whole file was read first
        assert sum(1 for _ in lines) == 39_999


def test_text_of_another_encoding_after_the_first_chunk_is_a_data_error(tmp_path: Path) -> None:
    path = tmp_path / "sts.csv"
    path.write_bytes(_long_sts(3000).encode("utf-16") + b"\x00\xd8")  # a lone surrogate at the end
    with pytest.raises(DataError, match="starts with a UTF-16 byte order mark but is not UTF-16 text"):
        loaders.load_sts_csv(path)
