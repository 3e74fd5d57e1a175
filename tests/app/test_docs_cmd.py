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
    # No name: the folder (it listed the documents, --path unheeded).
    folder = runner.invoke(cli, ["docs", "--path"])
    assert folder.exit_code == 0 and folder.output == f"{ROOT / 'docs'}\n", folder.output
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


def test_names_are_read_as_messages_and_links_write_them() -> None:
    """``Api.MD`` was refused, ``/etc/api.md`` printed Facet's api.md as if it had read that file,
    and a link's anchor (``indexing.md#lexical-and-hybrid-search``) was refused as part of the
    name: the suffix in any case, only Facet's docs/, and an anchor prints its section."""
    runner = CliRunner()
    api = (ROOT / "docs" / "api.md").read_text()
    for name in ("Api.MD", "./docs/api.md", " api "):
        shown = runner.invoke(cli, ["docs", name])
        assert shown.exit_code == 0 and shown.output == api, name
    for name in ("/etc/api.md", "../docs/api.md", "other/api.md"):
        refused = runner.invoke(cli, ["docs", name])
        assert refused.exit_code == 2, name
        assert f"error: {name!r} is not one of Facet's documents: give a name (api) or docs/NAME.md" in refused.output
    part = runner.invoke(cli, ["docs", "docs/indexing.md#lexical-and-hybrid-search"])
    assert part.exit_code == 0, part.output
    assert part.output.startswith("## Lexical and hybrid search\n")
    assert part.output in (ROOT / "docs" / "indexing.md").read_text()
    assert "\n## " not in part.output.rstrip("\n").split("\n", 1)[1]  # (up to the next section)
    near = runner.invoke(cli, ["docs", "indexing#lexical-and-hybrid"])
    assert near.exit_code == 2
    assert ("indexing.md has no section #lexical-and-hybrid (did you mean #lexical-and-hybrid-search?); "
            "`facet docs indexing.md` prints it whole") in near.output


def test_a_section_ends_at_its_level_and_skips_code_blocks() -> None:
    text = ("# Top\nintro\n## A: one, two!\nbody\n```sh\n# not a heading\n```\n### Sub\nmore\n"
            "## B\nother\n")
    assert docs_cmd.section(text, "a-one-two", "x.md") == (
        "## A: one, two!\nbody\n```sh\n# not a heading\n```\n### Sub\nmore\n")
    assert docs_cmd.section(text, "Sub", "x.md") == "### Sub\nmore\n"
    assert docs_cmd.section(text, "b", "x.md") == "## B\nother\n"


def test_every_section_the_docs_link_to_is_found() -> None:
    """Each ``NAME.md#anchor`` link of the README and docs/ prints a section with
    ``facet docs NAME.md#anchor`` (so a link to a renamed heading fails here)."""
    import re

    from app.errors import InvalidRequestError

    links = 0
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for m in re.finditer(r"\]\((?:docs/)?([a-z_]+)\.md#([^)\s]+)\)", doc.read_text()):
            target = ROOT / "docs" / f"{m[1]}.md"
            if target.is_file():
                links += 1
                try:
                    docs_cmd.section(target.read_text(), m[2], target.name)
                except InvalidRequestError as e:
                    raise AssertionError(f"{doc.name}: {e}") from None
    assert links >= 20


def test_the_folder_in_any_case_a_located_section_checked_and_a_long_name_cut() -> None:
    """``DOCS/API.md`` was refused while ``Api.MD`` was read; ``--path api#nosuch`` printed the
    path of a section that is not there; a name of 5,000 characters was echoed whole."""
    runner = CliRunner()
    shown = runner.invoke(cli, ["docs", "DOCS/API.md"])
    assert shown.exit_code == 0 and shown.output == (ROOT / "docs" / "api.md").read_text()
    located = runner.invoke(cli, ["docs", "--path", "indexing#lexical-and-hybrid-search"])
    assert located.exit_code == 0 and located.output.strip().endswith("indexing.md")
    missing = runner.invoke(cli, ["docs", "--path", "api#nosuch"])
    assert missing.exit_code == 2 and "api.md has no section #nosuch" in missing.output
    long = "x" * 5000
    for name in (long, f"api#{long}", f"other/{long}"):
        refused = runner.invoke(cli, ["docs", name])
        assert refused.exit_code == 2 and len(refused.output) < 600, (name[:10], refused.output[:200])
        assert "\u2026" in refused.output
