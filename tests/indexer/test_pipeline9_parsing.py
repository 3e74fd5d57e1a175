"""A jsonl record's nested metadata and a repeated id, as the parser reports them.

Objects and lists holding objects, lists or null were dropped from a record's metadata without a
word (a filter on them then said only "no document has a field"); now each is a warning naming
the field and why, once per file per field. An id a file gives twice was the indexer's error
"duplicate document id 'd1' in f.jsonl: the file repeats it", naming neither line; now the later
line is an error naming both lines and which record was kept.
"""

from __future__ import annotations

import json
from pathlib import Path

from indexer.parsing import DocumentError, ParsedDocument, parse_file


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_nested_metadata_is_named_once_per_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "shapes.jsonl", [
        {"id": "s1", "text": "one", "authors": [{"name": "Ann"}], "labels": ["a", None],
         "geo": {"lat": 1.5}, "matrix": [[1, 2]], "flags": [True, False], "empty": "",
         "tags": [], "nullv": None},
        {"id": "s2", "text": "two", "geo": {"lat": 2.5}, "labels": ["b", None], "n": 1.5},
    ])
    s1, s2 = parse_file(path)
    assert isinstance(s1, ParsedDocument) and isinstance(s2, ParsedDocument)
    assert s1.metadata == {"flags": [True, False], "empty": "", "tags": []}
    assert s2.metadata == {"n": 1.5}
    said = [w.split(": ", 1)[1] for w in s1.warnings]
    assert [w.split(" (", 1)[0] for w in said] == [
        "metadata field 'authors' not kept: it is a list holding objects",
        "metadata field 'labels' not kept: it is a list holding null",
        "metadata field 'geo' not kept: it is an object",
        "metadata field 'matrix' not kept: it is a list holding lists"], said
    assert all(w.startswith(f"{path}:1: ") for w in s1.warnings)
    assert s2.warnings == []  # said once per file


def test_a_repeated_id_names_both_lines_and_the_one_kept(tmp_path: Path) -> None:
    path = _write(tmp_path / "dup.jsonl", [
        {"id": "d1", "text": "first version about mortgages"},
        {"id": "d2", "text": "a normal record"},
        {"id": "d1", "text": "second version about pensions"},
    ])
    d1, d2, again = parse_file(path)
    assert isinstance(d1, ParsedDocument) and d1.key == "d1" and isinstance(d2, ParsedDocument)
    assert isinstance(again, DocumentError), again
    assert again.key == f"{path}#L3"
    assert again.message == (f"{path}:3: duplicate id 'd1': line 1 has it too; the record of line "
                             "1 is the one indexed (the first wins), not this one (line 3); give "
                             "each record an id of its own")
    listed = tmp_path / "dup.json"
    listed.write_text(json.dumps([{"id": 7, "text": "a"}, {"id": 7, "text": "b"}]))
    _, twice = parse_file(listed)
    assert isinstance(twice, DocumentError) and twice.key == f"{listed}#item1"
    assert "duplicate id '7': item 0 has it too; the record of item 0 is the one indexed" in twice.message


def test_a_repeated_id_whose_first_record_failed_says_neither_is_indexed(tmp_path: Path) -> None:
    path = _write(tmp_path / "dup.jsonl", [
        {"id": "d1", "text": "   "},  # an error: no text
        {"id": "d1", "text": "second version about pensions"},
    ])
    first, again = parse_file(path)
    assert isinstance(first, DocumentError) and isinstance(again, DocumentError), (first, again)
    assert again.message == (f"{path}:2: duplicate id 'd1': line 1 has it too; that record is an "
                             "error (not indexed), and this one is not indexed either (line 2); "
                             "give each record an id of its own")


def test_the_ids_seen_cost_little_memory(tmp_path: Path) -> None:
    """Each id's first place was a "line N" string and a flag in a tuple: ~210 bytes a record
    with its key, 21 MB a 100,000 (helper-540's measurement of 2026-12-07); now one int."""
    import tracemalloc

    path = _write(tmp_path / "many.jsonl", [{"id": f"d{i}", "text": "x"} for i in range(20_000)])
    tracemalloc.start()
    try:  # read in a stream, so that what grows is the parser's own state, its id map
        for _ in parse_file(path, stream_over_bytes=0):
            pass
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak / 20_000 < 140, peak / 20_000  # bytes a record (185 before; 108 now)
