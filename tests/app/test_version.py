"""``facet --version`` and ``app.__version__``: the installed distribution's version (there was
no way to ask which Facet was installed)."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

import app
from tests.app.cli_runner import invoke_cli

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_version_option_prints_the_distribution_version() -> None:
    expected = tomllib.loads(PYPROJECT.read_text())["project"]
    assert importlib.metadata.version(expected["name"]) == expected["version"]
    shown = invoke_cli("--version")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == f"facet-search {expected['version']}\n"
    assert app.__version__ == expected["version"]


def test_version_falls_back_to_pyproject_when_not_installed(monkeypatch) -> None:
    """A checkout run without installing it (``PYTHONPATH=.``) has no distribution metadata."""
    monkeypatch.setattr(app, "DISTRIBUTION", "facet-search-not-installed")
    assert app._version() == tomllib.loads(PYPROJECT.read_text())["project"]["version"]
