"""Odd file names through the CLI: a key holding a control character, pasted back as `facet
search` prints it (``bell\\x07.txt``), was refused with no word of how to name it; one typed
composed (NFC) where the file's name is decomposed (NFD, macOS) was refused as if not there;
``--documents-from`` split a key at a mid-line CR, kept a BOM in the first key and could not
take a key holding a newline; `facet jobs` cut a removal's message at a newline inside a key;
an error split a path at its newline; `facet jobs ID` printed a 1,100-character path in full
before an error that cut it. Real minilm, SQLite, Qdrant edge, a few files."""

from __future__ import annotations

import json
import subprocess
import unicodedata
from pathlib import Path

from tests.app.cli_runner import invoke_cli

NFD = unicodedata.normalize("NFD", "r\u00e9sum\u00e9.txt")
NAMES = {"bell\x07.txt": "church bells ringing", NFD: "gardening roses and tulips",
         "cr\rreturn.txt": "typewriters and carriage returns", "new\nline.txt": "volcanoes",
         "plain.txt": "cats sleeping in the sun"}


def _indexed(tmp_path: Path) -> tuple[dict[str, str], Path]:
    src = tmp_path / "src"
    src.mkdir()
    for name, text in NAMES.items():
        (src / name).write_text(f"A note about {text}.\n")
    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "OMP_NUM_THREADS": "1"}
    done = invoke_cli("index", str(src), "-c", "c", "-e", "minilm", env=env)
    assert done.returncode == 0, done.stderr
    return env, src


def _keys(env: dict[str, str]) -> set[str]:
    found = invoke_cli("search", "note", "-c", "c", "--top-k", "20", "--json", env=env)
    assert found.returncode == 0, found.stderr
    return {r["doc_id"] for r in json.loads(found.stdout)["results"]}


def _pasted(word: str) -> str:
    """What a shell makes of ``word`` pasted on a command line."""
    return subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, check=True,
                          env={"LC_ALL": "C.UTF-8"}).stdout.decode()


def test_a_key_pasted_as_printed_or_in_another_unicode_form_is_named_as_a_word_to_paste(
        tmp_path: Path) -> None:
    env, src = _indexed(tmp_path)
    bell = f"{src}/bell\x07.txt"
    refused = invoke_cli("delete", "c", "-d", f"{src}/bell\\x07.txt", "-y", env=env)
    assert refused.returncode == 3, refused.stderr
    word = f"$'{src}/bell\\x07.txt'"
    assert f"'{src}/bell\\x07.txt' is how facet prints a key holding control characters, " \
           f"shown escaped; that key is {word} in a shell" in refused.stderr, refused.stderr
    assert _pasted(word) == bell
    typed = unicodedata.normalize("NFC", f"{src}/{NFD}")
    refused = invoke_cli("delete", "c", "-d", typed, "-y", env=env)
    assert refused.returncode == 3, refused.stderr
    word = f"$'{src}/re\\u0301sume\\u0301.txt'"
    assert f"$'{src}/r\\u00e9sum\\u00e9.txt' differs from the key {word} only in its Unicode " \
           "form" in refused.stderr, refused.stderr
    assert _pasted(word) == f"{src}/{NFD}"
    assert len(_keys(env)) == 5  # nothing picked, nothing removed
    done = invoke_cli("delete", "c", "-d", _pasted(word), "-d", bell, "-y", env=env)
    assert done.returncode == 0, done.stderr
    assert len(_keys(env)) == 3


def test_documents_from_reads_lines_at_newlines_only_without_a_bom_or_nul_separated(
        tmp_path: Path) -> None:
    env, src = _indexed(tmp_path)
    listed = tmp_path / "keys.txt"
    listed.write_bytes(f"\ufeff{src}/plain.txt\r\n{src}/cr\rreturn.txt\n".encode())
    done = invoke_cli("delete", "c", "--documents-from", str(listed), "-y", env=env)
    assert done.returncode == 0, done.stderr
    assert "removed 2 documents" in done.stdout, done.stdout
    nul = tmp_path / "keys0"
    nul.write_bytes(f"{src}/new\nline.txt\0{src}/bell\x07.txt\0".encode())
    done = invoke_cli("delete", "c", "--documents-from", str(nul), "--null", "-y", env=env)
    assert done.returncode == 0, done.stderr
    assert "removed 2 documents" in done.stdout, done.stdout
    assert _keys(env) == {f"{src}/{NFD}"}
    # The removal, on the list, names the key on its line (it was broken at its newline).
    listed_jobs = invoke_cli("jobs", env=env)
    # (The source part is whole; the message part is cut to the listing's width, where a
    # long temporary folder may cut it before the key.)
    [line] = [row for row in listed_jobs.stdout.splitlines() if row.startswith("job 3 ")]
    assert f"c <- remove: {src}/new\\x0aline.txt and 1 more [minilm]" in line, line
    alone = invoke_cli("delete", "c", "--null", "-y", env=env)
    assert alone.returncode == 2 and "give --documents-from too" in alone.stderr


def test_an_error_keeps_a_path_with_a_newline_on_one_line(tmp_path: Path) -> None:
    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "OMP_NUM_THREADS": "1"}
    gone = tmp_path / "dir\nx"
    done = invoke_cli("index", str(gone), "-c", "c", "-e", "minilm", env=env)
    assert done.returncode != 0
    assert f"error: {tmp_path}/dir\\x0ax does not exist" in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr


def test_a_long_path_in_a_jobs_errors_is_cut_as_its_message_cuts_it(tmp_path: Path) -> None:
    src = tmp_path / "src"
    deep = src
    for _ in range(6):
        deep /= "d" * 200
    deep.mkdir(parents=True)
    (deep / "deep.txt").write_text("Submarines diving deep.\n")
    (src / "plain.txt").write_text("Cats sleeping in the sun.\n")
    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "OMP_NUM_THREADS": "1"}
    invoke_cli("index", str(src), "-c", "c", "-e", "minilm", "--allow-failures", env=env)
    shown = invoke_cli("jobs", "1", env=env)
    assert shown.returncode == 0, shown.stderr
    error = next(line for line in shown.stdout.splitlines() if "deep.txt" in line)
    assert len(error) < 250 and "over the 1,024 a collection stores" in error, error
