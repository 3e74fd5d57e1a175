"""``facet docs``: the documents that messages and help texts name as docs/NAME.md, found in a
checkout and where an installed wheel puts them (``share/facet-search/docs``), which had none."""

from __future__ import annotations

import glob
import shutil
import site
import sys
import sysconfig
import tomllib
from pathlib import Path

from typer.testing import CliRunner

from app.cli import cli
from app.commands import docs as docs_cmd

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_ships_every_document() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    installed: dict[str, str] = {}
    for destination, patterns in config["tool"]["setuptools"]["data-files"].items():
        for pattern in patterns:
            for source in glob.glob(pattern, root_dir=ROOT):
                if (ROOT / source).is_file():
                    installed[Path(source).as_posix()] = destination
    files = sorted(p.relative_to(ROOT) for p in (ROOT / "docs").rglob("*") if p.is_file())
    assert any(f.suffix == ".md" for f in files)
    for file in files:  # (the UI's screenshots too: docs/ui.md shows them)
        assert installed.get(file.as_posix()) == (Path("share/facet-search") / file.parent).as_posix(), file


def test_facet_docs_lists_prints_and_locates_the_documents() -> None:
    runner = CliRunner()
    listing = runner.invoke(cli, ["docs"])
    assert listing.exit_code == 0, listing.output
    lines = listing.output.splitlines()
    assert lines[0].split()[0] == "api" and "HTTP API" in lines[0]
    assert {line.split()[0] for line in lines[:-1]} == {p.stem for p in (ROOT / "docs").glob("*.md")}
    assert lines[-1] == f"(in {ROOT / 'docs'}; `facet docs NAME` prints one)"
    # As messages name it (docs/api.md), or by its name
    for name in ("api", "docs/api.md", "API.md"):
        shown = runner.invoke(cli, ["docs", name])
        assert shown.exit_code == 0 and shown.output == (ROOT / "docs" / "api.md").read_text(), name
    where = runner.invoke(cli, ["docs", "deploy", "--path"])
    assert where.exit_code == 0 and where.output == f"{ROOT / 'docs' / 'deploy.md'}\n"
    wrong = runner.invoke(cli, ["docs", "plugin"])
    assert wrong.exit_code == 2
    assert "error: no document 'plugin' (did you mean 'plugins'?); the documents: api, cli, " in wrong.output


def test_an_installed_package_finds_them_under_the_environments_share(tmp_path, monkeypatch) -> None:
    package = tmp_path / "site-packages" / "app" / "commands"
    package.mkdir(parents=True)
    monkeypatch.setattr(docs_cmd, "__file__", str(package / "docs.py"))
    prefix = tmp_path / "venv"
    shutil.copytree(ROOT / "docs", prefix / "share" / "facet-search" / "docs",
                    ignore=shutil.ignore_patterns("ui"))
    monkeypatch.setattr(sys, "prefix", str(prefix))
    real_get_path = sysconfig.get_path
    monkeypatch.setattr(sysconfig, "get_path", lambda name, *a, **k: str(tmp_path / "none")
                        if name == "data" else real_get_path(name, *a, **k))
    monkeypatch.setattr(site, "USER_BASE", str(tmp_path / "no-user-base"))
    assert docs_cmd.docs_dir() == prefix / "share" / "facet-search" / "docs"
    shown = CliRunner().invoke(cli, ["docs", "plugins", "--path"])
    assert shown.output == f"{prefix / 'share' / 'facet-search' / 'docs' / 'plugins.md'}\n"
    shutil.rmtree(prefix / "share")
    missing = CliRunner().invoke(cli, ["docs"])
    assert missing.exit_code == 7, missing.output
    assert "Facet's documentation is not installed here" in missing.output
