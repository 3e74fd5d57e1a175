"""``--help`` shows a value placeholder only where an option takes a value. typer 0.29's rich
help printed ``<bool>`` after every flag (``--json  <bool>  print the report as JSON``, even
``--help <bool>``), as if it took one; ``app.cli`` leaves flags bare, once for every command."""

from __future__ import annotations

import json
import re

import pytest

from tests.app.cli_runner import invoke_cli

# command: (flags, options with the placeholder each shows)
HELP = {
    (): (["--verbose", "--help"], {}),
    ("index",): (
        ["--json", "--allow-failures", "--background", "--sync", "--help"],
        {"--collection": "<str>", "--chunk-tokens": "<int>"},
    ),
    ("search",): (["--json", "--group-by-document", "--help"], {"--top-k": "<int>", "--mode": "<str>"}),
    ("jobs",): (["--json", "--follow", "--help"], {"--limit": "<int>", "--interval": "<float>"}),
    ("eval",): (["--json", "--list-tasks", "--no-cache", "--help"], {"--suite": "<str>", "--batch-size": "<int>"}),
}


def _row(help_text: str, option: str) -> str:
    """The help table's row for ``option``: the line it starts (after a required ``*``)."""
    start = re.compile(r"│[ *]{1,4}" + re.escape(option) + r"(?![\w-])")  # not a wrapped help line
    [line] = [ln for ln in help_text.splitlines() if start.match(ln)]
    return line


@pytest.mark.parametrize("command", list(HELP), ids=lambda c: " ".join(c) or "facet")
def test_flags_show_no_placeholder_and_value_options_keep_theirs(command, tmp_path) -> None:
    shown = invoke_cli(*command, "--help", env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert shown.returncode == 0, shown.stderr
    assert "<bool>" not in shown.stdout, shown.stdout
    flags, valued = HELP[command]
    for flag in flags:
        assert not re.search(r"<\w+>", _row(shown.stdout, flag)), _row(shown.stdout, flag)
    for option, placeholder in valued.items():
        assert placeholder in _row(shown.stdout, option), _row(shown.stdout, option)


def test_flags_still_work(tmp_path) -> None:
    env = {"FACET_DATA_DIR": str(tmp_path / "data")}
    jobs = invoke_cli("-v", "jobs", "--json", env=env)
    assert jobs.returncode == 0, jobs.stderr
    assert json.loads(jobs.stdout) == []
    tasks = invoke_cli("eval", "--list-tasks", "--json", env=env)
    assert tasks.returncode == 0, tasks.stderr
    assert "stsb" in [t["name"] for t in json.loads(tasks.stdout)]
    plain = invoke_cli("eval", "--list-tasks", env=env)
    assert plain.returncode == 0 and plain.stdout.startswith("stsb ")
