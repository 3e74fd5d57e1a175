"""``facet ARGS`` in the test process (typer's CliRunner), returned like ``subprocess.run``'s
result so a test reads the same whether a command ran in-process or as a subprocess."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from unittest import mock


def invoke_cli(*args: str, env: dict[str, str] | None = None,
               input: str | bytes | None = None) -> subprocess.CompletedProcess[str]:
    """Run the CLI in this process with ``env`` added to the environment for the call and
    ``input`` on its standard input (none by default).

    The settings are read once per process, so their cache is cleared around the call; an
    exception other than the CLI's own exit is raised, not hidden in an exit code.
    """
    from typer.testing import CliRunner

    from app.cli import cli
    from app.settings import get_settings

    with mock.patch.dict(os.environ, env or {}):
        get_settings.cache_clear()
        try:
            result = CliRunner().invoke(cli, list(args), input=input)
        finally:
            get_settings.cache_clear()
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def tiny_data_folder(root: Path) -> Path:
    """A data folder under ``root`` holding one collection, ``tiny``, of two short documents
    indexed with minilm by `facet index` (its job 1); returns the folder."""
    src = root / "src"
    src.mkdir()
    for i, text in enumerate(("card payment declined twice", "open a savings account")):
        (src / f"d{i}.txt").write_text(text)
    done = invoke_cli("index", str(src), "-c", "tiny", "-e", "minilm",
                      env={"FACET_DATA_DIR": str(root / "data")})
    assert done.returncode == 0, done.stderr
    return root / "data"
