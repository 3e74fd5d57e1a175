"""Command-line texts that are not UTF-8.

A query typed in a Latin-1 terminal (`facet search "$(printf 'caf\\xe9')"`) reaches Python as a
lone surrogate (surrogateescape), and was refused as holding "an unpaired surrogate ... send the
text as valid UTF-8 / paired \\u escapes" (exit 2): advice for JSON, not for a shell. Each text
argument of `facet search`, `facet cluster` and `facet embed` now says it is not UTF-8 text,
which byte, and what to do (exit 4, as standard input that is not UTF-8 text). A file path
stays any bytes: a file's name may be.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.app.cli_runner import invoke_cli, tiny_data_folder

LATIN1_CAFE = "caf\udce9"  # b"caf\xe9" as Python decodes an argument that is not UTF-8


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_data_folder(tmp_path_factory.mktemp("argv"))


def test_a_latin1_query_from_a_real_shell_is_named_as_such(data: Path) -> None:
    env = {**os.environ, "FACET_DATA_DIR": str(data), "PYTHONUTF8": "1"}
    done = subprocess.run([sys.executable.encode(), b"-m", b"app", b"search", b"caf\xe9",
                           b"-c", b"tiny"], capture_output=True, env=env, timeout=300)
    err = done.stderr.decode()
    assert done.returncode == 4, err
    assert err.strip().splitlines()[-1] == (
        "error: the query is not UTF-8 text (byte 0xE9 at character 4: caf\ufffd): the terminal "
        "or script passed another encoding (Latin-1?); pass it as UTF-8, or set the terminal "
        "to UTF-8")
    assert "surrogate" not in err


@pytest.mark.parametrize(("args", "named"), [
    (("search", "card", "-c", "tiny", "-i", LATIN1_CAFE), "--instruction"),
    (("search", "card", "-c", "tiny", "-f", f"topic={LATIN1_CAFE}"), "--filter"),
    (("cluster", "-c", "tiny", "-i", LATIN1_CAFE), "--instruction"),
    (("cluster", "-c", "tiny", "-i", "topic", "--query", LATIN1_CAFE), "--query"),
    (("embed", "fine", LATIN1_CAFE), "text 2"),
    (("embed", "fine", "-i", LATIN1_CAFE), "--instruction"),
])
def test_each_text_argument_says_which_is_not_utf8(data: Path, args: tuple[str, ...],
                                                    named: str) -> None:
    done = invoke_cli(*args, env={"FACET_DATA_DIR": str(data)})
    assert done.returncode == 4, done.stderr
    assert f"error: {named} is not UTF-8 text (byte 0xE9 at character " in done.stderr
    assert "surrogate" not in done.stderr


def test_a_utf8_query_is_searched_as_before(data: Path) -> None:
    done = invoke_cli("search", "café payment", "-c", "tiny", env={"FACET_DATA_DIR": str(data)})
    assert done.returncode == 0, done.stderr
    assert "card payment declined twice" in done.stdout


def test_utf8_typed_under_an_ascii_locale_is_read_as_utf8(data: Path) -> None:
    """Under LC_ALL=C with PYTHONUTF8=0 Python escapes every non-ASCII byte of the arguments and
    reads stdin as ASCII: "café" typed in UTF-8 was refused as "not UTF-8 text" (an argument)
    and "not ascii text" (`facet search -`), while `facet cluster -` read it."""
    env = {**os.environ, "FACET_DATA_DIR": str(data), "LC_ALL": "C", "LANG": "C",
           "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    env.pop("PYTHONIOENCODING", None)
    for args, stdin in (([b"search", "café payment".encode(), b"-c", b"tiny", b"--json"], None),
                        ([b"search", b"-", b"-c", b"tiny", b"--json"], "café payment".encode())):
        done = subprocess.run([sys.executable.encode(), b"-m", b"app", *args], input=stdin,
                              capture_output=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr.decode()
        found = json.loads(done.stdout)
        assert found["query"] == "café payment"
        assert found["results"][0]["text"] == "card payment declined twice"


def test_a_source_named_as_text_the_locale_cannot_write_is_a_refusal(tmp_path: Path) -> None:
    """POST /jobs with {"source": ".../ümlaut dir"} under LC_ALL=C and PYTHONUTF8=0 answered a
    500 (UnicodeEncodeError from resolving the path): now the locale's refusal, a 400."""
    folder = tmp_path / "ümlaut dir"
    folder.mkdir()
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0",
           "PYTHONCOERCECLOCALE": "0", "PYTHONIOENCODING": "utf-8"}
    probe = ("import sys; from pathlib import Path; from app.errors import InvalidRequestError\n"
             "from app.services.indexing import check_source_text\n"
             "try:\n    check_source_text(Path(sys.argv[1].encode().decode('unicode_escape')))\n"
             "except InvalidRequestError as e:\n    print(e.param, e)\n")
    done = subprocess.run([sys.executable, "-c", probe, str(folder).encode("unicode_escape").decode()],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("source ") and (
        "its name cannot be read in this locale's encoding (ascii); run Facet under a UTF-8 "
        "locale (LC_ALL=C.UTF-8)") in done.stdout, done.stdout
