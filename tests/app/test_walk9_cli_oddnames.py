"""`facet` given arguments that are not valid UTF-8 (a shell's ``$'caf\\xe9'``): each was a
UnicodeEncodeError traceback from the database driver (a TypeError from the store's client for
a filter); now one line, as `facet search -c` said of such a name, and exit 2 (invalid input)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.app.cli_runner import invoke_cli

BAD = "caf" + os.fsdecode(b"\xe9")


def test_arguments_that_are_not_utf8_are_one_line_and_exit_2(tmp_path: Path) -> None:
    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "OMP_NUM_THREADS": "1"}
    latdir = tmp_path / os.fsdecode(b"latdir\xe9")
    latdir.mkdir()
    (latdir / "h.txt").write_text("Latin folder about hedgehogs.")
    invalid = f"error: invalid collection name {BAD!r}: use 1-128 ASCII letters"
    renamed = f"error: {tmp_path}/latdir\\xe9: its name is not valid UTF-8; rename it"
    cases = [
        (["jobs", "-c", BAD], invalid),
        (["delete", BAD, "-y"], invalid),
        (["index", str(tmp_path), "-c", BAD, "-e", "minilm"], invalid),
        (["index", str(latdir), "-c", "r3", "-e", "minilm"], renamed),
        (["index", str(latdir / "h.txt"), "-c", "r3", "-e", "minilm", "--background"], renamed),
    ]
    for args, said in cases:
        done = invoke_cli(*args, env=env)
        assert (done.returncode, done.stderr.startswith(said)) == (2, True), (args, done.stderr)
        assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
