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
    # With the schema it writes and, from a checkout, its commit: a wheel rebuilt at the same
    # version (which pip keeps out as "already installed") is told apart by them.
    from app.provenance import source_commit
    from indexer.migrate import head_revision

    source = source_commit()
    build = f"metadata schema {head_revision()}"
    if source is not None:
        build += f", commit {source['commit'][:12]}" + (" with local changes" if source.get("dirty") else "")
    assert shown.stdout == f"facet-search {expected['version']} ({build})\n"
    assert app.__version__ == expected["version"]


def test_version_names_the_commit_only_where_git_tracks_the_running_code(monkeypatch) -> None:
    import app.provenance

    monkeypatch.setattr(app.provenance, "source_commit", lambda: {"commit": "ab" * 20, "dirty": False})
    assert invoke_cli("--version").stdout.endswith(", commit abababababab)\n")
    monkeypatch.setattr(app.provenance, "source_commit", lambda: None)
    assert "commit" not in invoke_cli("--version").stdout


def test_version_falls_back_to_pyproject_when_not_installed(monkeypatch) -> None:
    """A checkout run without installing it (``PYTHONPATH=.``) has no distribution metadata."""
    monkeypatch.setattr(app, "DISTRIBUTION", "facet-search-not-installed")
    assert app._version() == tomllib.loads(PYPROJECT.read_text())["project"]["version"]
