"""A .jsonl or .csv file over the stream limit is parsed line by line as it is read, not whole.

Read whole, a record file was held three or four times over (its bytes, its text and its lines
at once): a 190 MB jsonl took 720 MB and a 180 MB csv 1 GB, and a BEIR corpus of gigabytes did
not fit (the huge-inputs review of the seventh session of 2026-12-06). Read in a stream, the same
documents, notes and refusals come out, at the cost of the largest record."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from indexer.parsing import DocumentError, ParsedDocument, parse_file

JSONL = "\n".join(json.dumps({"id": f"d{i}", "text": f"record {i} " + "word " * 20})
                  for i in range(40)) + "\n"

# Files whose reading has edge cases: encodings chosen, notes once per file, malformed lines,
# quotes spanning lines, separators JSON strings may hold raw.
CASES: dict[str, bytes] = {
    "plain.jsonl": JSONL.encode(),
    "crlf.jsonl": JSONL.replace("\n", "\r\n").encode(),
    "bom.jsonl": b"\xef\xbb\xbf" + JSONL.encode(),
    "utf16.jsonl": JSONL.encode("utf-16"),
    "cp1252.jsonl": '{"text": "caf\u00e9 cr\u00e8me \u2019quoted\u2019"}\n{"text": "na\u00efve"}\n'
                    .encode("cp1252") * 20,
    "one-bad-byte.jsonl": ('{"text": "caf\u00e9 \u00e9t\u00e9 d\u00e9j\u00e0"}\n' * 30).encode()
                          + b'{"text": "bad \xff byte"}\n',
    "separators.jsonl": json.dumps({"text": "a\u2028b\u0085c\u2029d"}, ensure_ascii=False)
                        .encode() + b"\n" + JSONL.encode(),
    "malformed.jsonl": b'{"text": "ok"}\n{"text": broken}\n[1, 2]\n\n   \n{"text": "last"}',
    "empty.jsonl": b"\n\n  \n",
    "plain.csv": ("id,text,tag\n" + "".join(f"r{i},row {i} text,t{i % 3}\n" for i in range(40)))
                 .encode(),
    "multiline.csv": b'id,text\n1,"a field\nover two lines"\n2,"and ""quoted"" text"\n3,plain\n',
    "unclosed.csv": b'id,text\n1,fine\n2,"never closed\n3,inside it\n',
    "semicolons.csv": b"id;text\n1;a\n2;b\n",
    "longer-rows.csv": b"id,text\n1,a,extra\n2,b\n",
    "header-only.csv": b"id,text\n",
    "cp1252.csv": "id,text\n1,caf\u00e9 \u2019x\u2019\n2,cr\u00e8me br\u00fbl\u00e9e\n"
                  .encode("cp1252") * 10,
    "binary.jsonl": b"\x00\x01\x02" * 5000,
}


def _seen(results) -> list[tuple]:
    out = []
    for r in results:
        if isinstance(r, ParsedDocument):
            out.append(("doc", r.key, r.text, r.title, r.metadata, r.warnings))
        else:
            assert isinstance(r, DocumentError), r
            out.append(("error", r.key, r.source, r.message))
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_streamed_record_file_reads_as_the_whole_file(tmp_path, name) -> None:
    path = tmp_path / name
    path.write_bytes(CASES[name])
    whole = _seen(parse_file(path))  # (no stream limit: read whole)
    streamed = _seen(parse_file(path, stream_over_bytes=0))
    assert streamed == whole
    assert whole  # every case gives something: documents, or what is wrong with the file


def _peak(path: Path, stream_over: int | None) -> tuple[int, int]:
    tracemalloc.start()
    try:
        docs = sum(isinstance(r, ParsedDocument) for r in parse_file(path, stream_over_bytes=stream_over))
        return docs, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_large_record_file_is_not_held_whole(tmp_path, suffix) -> None:
    path = tmp_path / f"big{suffix}"
    text = "caf\u00e9 " + "x" * 4000
    with path.open("w", encoding="utf-8") as fh:
        if suffix == ".csv":
            fh.write("id,text\n")
        for i in range(2000):  # 8 MB
            fh.write(json.dumps({"id": f"d{i}", "text": text}) + "\n" if suffix == ".jsonl"
                     else f"d{i},{text}\n")
    size = path.stat().st_size
    docs, peak = _peak(path, 1 << 20)
    assert docs == 2000
    assert peak < size / 4, (peak, size)  # a few records at a time
    whole_docs, whole_peak = _peak(path, None)  # (the same file under the limit: held whole)
    assert whole_docs == 2000 and whole_peak > size
    # Held whole, its lines are taken from the text one at a time: io.StringIO copied the text
    # at four bytes a character (six times the file in all; two to three times now).
    assert whole_peak < 3.5 * size, (whole_peak, size)


def test_a_file_changed_while_streamed_says_so(tmp_path) -> None:
    path = tmp_path / "moving.jsonl"
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": f"record {i} " + "word " * 20})
                            + "\n" for i in range(8000)), encoding="utf-8")  # 1 MB
    results = parse_file(path, stream_over_bytes=0)
    first = next(results)
    assert isinstance(first, ParsedDocument) and first.text.startswith("record 0")
    with path.open("r+b") as fh:  # its end, not read yet, is no longer UTF-8
        fh.seek(-50_000, 2)
        fh.write(b"\xff" * 50_000)
    rest = list(results)
    assert isinstance(rest[-1], DocumentError), rest[-1]
    read = len(rest)  # the first, and those before the error
    assert rest[-1].message == (f"cannot read {path}: it changed while it was read: it no longer "
                                f"decodes as utf-8-sig; the records after the first {read} were "
                                "not read, index it again")
    assert all(isinstance(r, ParsedDocument) for r in rest[:-1])


def test_a_malformed_line_is_placed_in_its_own_columns(tmp_path) -> None:
    # Lines are read with their "\n": json.loads put the error on the line after it ("column
    # 1"), or called an unterminated string an invalid control character.
    path = tmp_path / "m.jsonl"
    path.write_bytes(b'{"text": "unterminated\n{"a": 1\n{"a": 1\r\n{"text": "x" \n')
    for over in (None, 0):
        said = [r.message.split(": ", 1)[1] for r in parse_file(path, stream_over_bytes=over)]
        assert said == [
            "malformed JSON line (Unterminated string starting at column 10); fix or remove that line",
            "malformed JSON line (Expecting ',' delimiter at column 8); fix or remove that line",
            "malformed JSON line (Expecting ',' delimiter at column 9); fix or remove that line",
            "malformed JSON line (Expecting ',' delimiter at column 14); fix or remove that line",
        ], said
