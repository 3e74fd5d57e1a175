"""What the CLI prints as JSON (``--json``, ``facet embed``) and the collections it lists
never carry a character a terminal acts on. JSON escapes the C0 controls itself, but written
with ``ensure_ascii=False`` it left the C1 controls (0x9b/0x9d: CSI/OSC in one byte), the bidi
overrides and isolates and U+2028/U+2029 raw; ``printable_json`` writes them as ``\\uXXXX``
(the same strings once decoded) and keeps other non-ASCII text readable."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from app.text import printable, printable_json
from tests.app.cli_runner import invoke_cli

TITLE = "\x1b]0;PWNED\x07"  # set the window title (ESC ... BEL)
C1 = "\x9b2J\x9d0;PWNED\x9c"  # clear the screen and set the title with one-byte CSI/OSC
BIDI = "\u202e\u202a\u2066\u2069"  # RLO, LRE, LRI, PDI
SEPARATORS = "\u2028\u2029"
RAW = ("\x1b", "\x07", "\x9b", "\x9c", "\x9d", *BIDI, *SEPARATORS)


def assert_no_raw(output: str) -> None:
    for char in RAW:
        assert char not in output, f"{char!r} printed raw in {output!r}"


@pytest.fixture
def run(tmp_path: Path) -> Callable[..., object]:
    def invoke(*args: str):
        return invoke_cli(*args, env={"FACET_DATA_DIR": str(tmp_path / "data")})

    return invoke


def test_printable_json_escapes_what_a_terminal_acts_on_and_keeps_the_rest() -> None:
    value = {"text": f"café 中文 עברית {C1} {BIDI} a{SEPARATORS}b \x7f \x1b", "n": [1, 2.5, None]}
    out = printable_json(value)
    assert_no_raw(out)
    assert "\x7f" not in out
    assert json.loads(out) == value
    assert "café 中文 עברית \\u009b2J\\u009d0;PWNED\\u009c \\u202e\\u202a\\u2066\\u2069" in out
    assert "a\\u2028\\u2029b \\u007f \\u001b" in out
    # A file name's undecodable byte (a lone surrogate) is escaped too: UTF-8 cannot carry it.
    assert printable_json("x\udc80", indent=None) == '"x\\udc80"'
    assert printable_json({"a": 1}) == json.dumps({"a": 1}, indent=2)


def test_search_and_jobs_json_escape_c1_bidi_and_separators(tmp_path, run) -> None:
    src = tmp_path / f"notes café {C1}{BIDI[0]}"
    src.mkdir()
    text = f"card payment {C1} declined {BIDI} twice{SEPARATORS}today"
    (src / "a.txt").write_text(text)
    indexed = run("index", str(src), "-c", "notes", "--embedder", "minilm")
    assert indexed.returncode == 0, indexed.stderr

    found = run("search", "card payment", "-c", "notes", "--json")
    assert found.returncode == 0, found.stderr
    assert_no_raw(found.stdout)
    [hit] = json.loads(found.stdout)["results"]
    assert hit["text"] == text and hit["source"].endswith(str(src / "a.txt"))
    assert "notes café " in found.stdout  # readable, not caf\u00e9

    jobs = run("jobs", "--json")
    assert jobs.returncode == 0, jobs.stderr
    assert_no_raw(jobs.stdout)
    assert json.loads(jobs.stdout)[0]["source"] == str(src)
    assert "notes café \\u009b2J" in jobs.stdout


def test_collections_escape_a_checkpoint_path(tmp_path, run, minilm_namesake) -> None:
    """A collection's name cannot hold a control character (a folder name: ``validate_name``),
    nor can its embedders' names; the checkpoint directory it was indexed from can."""
    directory = tmp_path / f"ck{TITLE}{C1}{BIDI[0]}"
    shutil.move(minilm_namesake[0], directory)
    (tmp_path / "t.txt").write_text("card payment declined")
    indexed = run("index", str(tmp_path / "t.txt"), "-c", "notes", "--embedder", str(directory))
    assert indexed.returncode == 0, indexed.stderr

    listed = run("collections")
    assert listed.returncode == 0, listed.stderr
    assert_no_raw(listed.stdout)
    assert f"minilm (384-d, from {printable(str(directory))})" in listed.stdout
    assert "ck\\x1b]0;PWNED\\x07\\x9b2J\\x9d0;PWNED\\x9c\\u202e)" in listed.stdout

    as_json = run("collections", "notes", "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert_no_raw(as_json.stdout)
    assert json.loads(as_json.stdout)["sources"] == {"minilm": str(directory)}


def test_embed_prints_its_instruction_escaped(run) -> None:
    embedded = run("embed", "card", "--instruction", f"café {C1}{BIDI}")
    assert embedded.returncode == 0, embedded.stderr
    assert_no_raw(embedded.stdout)
    out = json.loads(embedded.stdout)
    assert out["instruction"] == f"café {C1}{BIDI}" and out["dim"] == 384
    assert '"instruction": "café \\u009b2J' in embedded.stdout
