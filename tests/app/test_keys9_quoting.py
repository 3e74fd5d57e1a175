"""Quoting keys for a shell (``app.text.shell_word``) and finding a key typed in another Unicode
form (``unicode_twins``): a hint printed ``facet delete r2 --document '/d/bell\\x07.txt'`` (shlex
then printable), which pasted is a backslash and three characters, a key that is not there.
No model, no store."""

from __future__ import annotations

import subprocess
import unicodedata

import pytest

from app.text import printable, shell_word, unicode_twin_hint, unicode_twins

NAMES = ["/d/plain.txt", "/d/with space 'q' \"dq\".txt", "/d/bell\x07.txt", "/d/esc\x1b[31m.txt",
         "/d/new\nline.txt", "/d/tab\there.md", "/d/back\\slash\x07'q'", "/d/rtl\u202etxt.exe",
         "/d/c1\x85.txt", "/d/caf\u00e9.txt", "/d/-rf", "", "/d/emoji\U0001f600\x07"]


@pytest.mark.parametrize("name", NAMES)
def test_a_shell_word_pastes_back_as_the_exact_string(name: str) -> None:
    word = shell_word(name)
    assert printable(word) == word  # nothing a terminal acts on, nothing reordered
    said = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True,
                          env={"LC_ALL": "C.UTF-8"}, check=True).stdout
    assert said == name.encode(), (word, said)


def test_plain_text_keeps_shlex_quoting_and_controls_get_dollar_quotes() -> None:
    assert shell_word("/d/plain.txt") == "/d/plain.txt"
    assert shell_word("/d/a b.txt") == "'/d/a b.txt'"
    assert shell_word("/d/bell\x07.txt") == "$'/d/bell\\x07.txt'"
    assert shell_word("/d/it's\n") == "$'/d/it\\'s\\x0a'"
    # An undecodable byte of a file's name (surrogateescape) is that byte.
    word = shell_word("/d/caf\udce9\x07")
    said = subprocess.run(["bash", "-c", f"printf %s {word}"],
                          capture_output=True, check=True).stdout
    assert said == b"/d/caf\xe9\x07"


def test_a_key_typed_in_another_unicode_form_is_found_and_shown_escaped() -> None:
    nfd = unicodedata.normalize("NFD", "/d/r\u00e9sum\u00e9.txt")
    nfc = unicodedata.normalize("NFC", nfd)
    assert unicode_twins([nfc, "/d/none"], [nfd, "/d/other"]) == {nfc: [nfd]}
    assert unicode_twins([nfd], [nfd, nfc]) == {}  # both exist: the one named is there
    hint = unicode_twin_hint(nfc, [nfd])
    assert hint.startswith("$'/d/r\\u00e9sum\\u00e9.txt' differs from the key "
                           "$'/d/re\\u0301sume\\u0301.txt' only in its Unicode form"), hint
    assert shell_word(nfd, ascii_only=True) == "$'/d/re\\u0301sume\\u0301.txt'"
    said = subprocess.run(["bash", "-c", f"printf %s {shell_word(nfd, ascii_only=True)}"],
                          capture_output=True, env={"LC_ALL": "C.UTF-8"}, check=True).stdout
    assert said == nfd.encode()


def test_the_services_hints_quote_keys_to_paste_back() -> None:
    """The commands the services print (a kept version's removal) quote a key holding a control
    character as ``$'...'``: ``'/d/bell\\x07.txt'`` (shlex.quote, then escaped for the terminal)
    pasted into a shell named a key that does not exist."""
    from app.services.indexing import kept_version_message

    said = kept_version_message("it failed", "notes", "/d/bell\x07.txt")
    assert "`facet delete notes --document $'/d/bell\\x07.txt'` removes it" in said, said
    plain = kept_version_message("it failed", "my notes", "/d/a b.txt")
    assert "`facet delete 'my notes' --document '/d/a b.txt'`" in plain, plain
