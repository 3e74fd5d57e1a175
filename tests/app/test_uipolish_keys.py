"""Keys holding a tab or an invisible format character (Unicode category Cf: U+200B zero width
space, U+200D joiner, U+FEFF, U+2060 word joiner, ...): `facet search` printed them raw, so two
keys that differ by a U+200B read alike and a tab broke the aligned lines. ``printable`` shows
them escaped now, as it shows the controls and bidi controls; a joiner that visibly joins (an
emoji ZWJ sequence, a Persian ZWNJ) and a document's own text are left as they are, and
``shell_word`` quotes such a key so that it pastes back as the key."""

from __future__ import annotations

import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from app.text import printable, shell_word
from tests.app.cli_runner import invoke_cli

FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # one emoji: a ZWJ sequence
RAINBOW = "\U0001f3f3\ufe0f\u200d\U0001f308"
ENGLAND = "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"
PERSIAN = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"  # ZWNJ inside a word
DEVANAGARI = "\u0915\u094d\u200d\u0937"  # ZWJ: a half form


def _pasted(word: str) -> str:
    return subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, check=True,
                          env={"LC_ALL": "C.UTF-8"}).stdout.decode("utf-8", "surrogateescape")


@pytest.mark.parametrize(("key", "shown"), [
    ("/d/zw\u200bsp.txt", "/d/zw\\u200bsp.txt"),
    ("/d/tab\there.txt", "/d/tab\\x09here.txt"),
    ("\ufeff/d/bom.txt", "\\ufeff/d/bom.txt"),
    ("/d/w\u2060j.txt", "/d/w\\u2060j.txt"),
    ("/d/z\u200dj.txt", "/d/z\\u200dj.txt"),  # a ZWJ joining nothing
    ("/d/soft\u00adhyphen", "/d/soft\\xadhyphen"),
    ("/d/lrm\u200e.txt", "/d/lrm\\u200e.txt"),
    ("/d/tag\U000e0041.txt", "/d/tag\\U000e0041.txt"),  # a tag outside a flag
    ("/d/ls\u2028ps\u2029.txt", "/d/ls\\u2028ps\\u2029.txt"),
    (f"/d/\u200d{FAMILY}\u200d", f"/d/\\u200d{FAMILY}\\u200d"),  # around it, not inside
])
def test_a_label_shows_tabs_and_format_characters_escaped(key: str, shown: str) -> None:
    assert printable(key) == shown


@pytest.mark.parametrize("text", ["caf\u00e9 r\u00e9sume\u0301", "\u6f22\u5b57 \u304b\u306a",
                                  FAMILY, RAINBOW, ENGLAND, "\U0001f44d\U0001f3fd\u200d\u2642\ufe0f",
                                  PERSIAN, DEVANAGARI, "\u05e9\u05dc\u05d5\u05dd", "plain.txt"])
def test_ordinary_text_and_joiners_that_join_are_left_as_they_are(text: str) -> None:
    assert printable(text) == text
    assert shell_word(text) in (text, f"'{text}'")


def test_a_documents_own_text_keeps_its_tabs_and_format_characters() -> None:
    text = f"col\tcol2 zero\u200bwidth {FAMILY}\nnext\ufeff"
    assert printable(text, body=True) == text


def test_every_format_character_is_escaped_in_a_label() -> None:
    """Every Cf code point of the running Python's Unicode (the list in app/text.py is written
    out): between two ASCII letters, where none of them joins anything."""
    cf = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"]
    assert len(cf) > 150
    kept = [hex(ord(c)) for c in cf if printable(f"a{c}b") == f"a{c}b"]
    assert kept == []
    raw = [hex(ord(c)) for c in cf if c in shell_word(f"a{c}b")]
    assert raw == []


@pytest.mark.parametrize("key", ["/d/zw\u200bsp.txt", "/d/tab\there.txt", "\ufeff/d/bom.txt",
                                 "/d/w\u2060j.txt", "/d/it's\u200b", "/d/tag\U000e0041.txt",
                                 f"/d/{FAMILY}\u200b.txt", f"/d/{PERSIAN}\u2060"])
def test_a_shell_word_of_such_a_key_pastes_back_and_prints_as_it_is(key: str) -> None:
    word = shell_word(key)
    assert word.startswith("$'"), word
    assert printable(word) == word
    assert _pasted(word) == key


def test_search_prints_keys_that_differ_by_a_zero_width_space_apart(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    names = {"zw\u200bsp.txt": "volcanoes erupting lava", "zwsp.txt": "volcanoes and ash clouds",
             "tab\there.txt": "volcanoes under the sea"}
    for name, text in names.items():
        (src / name).write_text(f"A note about {text}.\n")
    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "OMP_NUM_THREADS": "1"}
    done = invoke_cli("index", str(src), "-c", "c", "-e", "minilm", env=env)
    assert done.returncode == 0, done.stderr
    found = invoke_cli("search", "volcano", "-c", "c", "--top-k", "5", env=env)
    assert found.returncode == 0, found.stderr
    out = found.stdout
    assert "\u200b" not in out and "\t" not in out, out
    assert f"{src}/zw\\u200bsp.txt" in out and f"{src}/zwsp.txt" in out
    assert f"{src}/tab\\x09here.txt" in out
    # The key as printed, pasted back, is refused with the word that names it.
    refused = invoke_cli("delete", "c", "-d", f"{src}/zw\\u200bsp.txt", "-y", env=env)
    assert refused.returncode == 3, refused.stderr
    word = f"$'{src}/zw\\u200bsp.txt'"
    assert word in refused.stderr, refused.stderr
    assert _pasted(word) == f"{src}/zw\u200bsp.txt"
