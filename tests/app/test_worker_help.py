"""What `facet worker --help` and the settings say is what they do (a deployment audit):
the settings are read from the environment only, never from a .env file, which the help said;
the API key's description names every route open without it; and the image's build context
leaves out the .env file docker compose reads its secrets from."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

from app.settings import FacetSettings
from tests.app.cli_runner import invoke_cli

ROOT = Path(__file__).resolve().parents[2]


def test_worker_help_says_no_env_file_is_read(tmp_path: Path) -> None:
    shown = invoke_cli("worker", "--help", env={"FACET_DATA_DIR": str(tmp_path / "data"),
                                                "COLUMNS": "200"})
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.replace("│", " ").split())
    assert "environment or .env" not in text
    assert "from the environment only (no .env file is read" in text
    # UI uploads are staged in the server's data folder and read there by the worker.
    assert "FACET_DATA_DIR/uploads" in text and "shared storage" in text


def test_a_dotenv_file_is_indeed_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the help now says: a .env in the working directory sets nothing."""
    monkeypatch.delenv("FACET_DEFAULT_EMBEDDER", raising=False)
    (tmp_path / ".env").write_text("FACET_DEFAULT_EMBEDDER=from-dotenv\n")
    monkeypatch.chdir(tmp_path)
    assert FacetSettings(data_dir=tmp_path / "data").default_embedder == "minilm"


def test_the_api_key_description_names_both_open_routes() -> None:
    said = FacetSettings.model_fields["api_key"].description or ""
    assert "/health and /ready" in said


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's reading of .dockerignore, enough for these patterns: ``**/`` is any folder,
    the root included; a later ``!pattern`` lets a path back in."""
    ignored = False
    for pattern in patterns:
        keep = pattern.startswith("!")
        pattern = pattern.lstrip("!")
        forms = {pattern, pattern[3:]} if pattern.startswith("**/") else {pattern}
        if any(fnmatch.fnmatchcase(path, form) for form in forms):
            ignored = not keep
    return ignored


def test_the_image_leaves_out_dotenv_files() -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    for secret in (".env", ".env.local", ".env.production", "deploy/.env"):
        assert _ignored(secret, patterns), secret
    assert not _ignored("app/settings.py", patterns)


def test_the_image_keeps_the_docs_facet_docs_reads() -> None:
    """The wheel ships docs/*.md (`facet docs NAME`, which messages point at); with docs left
    out of the build context the image's `facet docs` exited 7, "no documentation found"."""
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    for page in ("docs/deploy.md", "docs/api.md", "docs/ui/cluster-agnews.png"):
        # Docker leaves out a path whose folder is left out: each folder above it checked too.
        for path in (page, *(str(p) for p in Path(page).parents if str(p) != ".")):
            assert not _ignored(path, patterns), (page, path)
    assert '"share/facet-search/docs" = ["docs/*.md"]' in (ROOT / "pyproject.toml").read_text()
