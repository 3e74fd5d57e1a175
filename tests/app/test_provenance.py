"""The environment written into results.json and train_log.json (app/provenance.py): which
commit of Facet ran, read only where git tracks the running package's files."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from app import provenance

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def checkout(tmp_path) -> tuple[Path, str]:
    """A git repository holding a package `app` (its __init__.py committed)."""
    repo = tmp_path / "repo"
    (repo / "app").mkdir(parents=True)
    (repo / "app" / "__init__.py").write_text("")
    (repo / ".gitignore").write_text("/.venv/\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    return repo, _git(repo, "rev-parse", "HEAD")


def test_a_checkout_gives_its_commit_and_whether_tracked_files_changed(checkout):
    repo, sha = checkout
    assert provenance.source_commit(repo / "app") == {"commit": sha, "dirty": False}
    (repo / "notes.txt").write_text("untracked files do not make it dirty")
    assert provenance.source_commit(repo / "app") == {"commit": sha, "dirty": False}
    (repo / "app" / "__init__.py").write_text("x = 1\n")
    assert provenance.source_commit(repo / "app") == {"commit": sha, "dirty": True}


def test_an_installed_copy_inside_a_checkouts_ignored_venv_claims_no_commit(checkout):
    """A wheel installed into the checkout's .venv runs files git does not track: the
    checkout's commit says nothing about them."""
    repo, _ = checkout
    installed = repo / ".venv" / "lib" / "site-packages" / "app"
    installed.mkdir(parents=True)
    (installed / "__init__.py").write_text("")
    assert provenance.source_commit(installed) is None
    outside = repo.parent / "site-packages" / "app"
    outside.mkdir(parents=True)
    (outside / "__init__.py").write_text("")
    assert provenance.source_commit(outside) is None


def test_no_git_on_the_path_gives_no_commit(checkout, monkeypatch):
    repo, _ = checkout
    monkeypatch.setenv("PATH", str(repo / "nowhere"))
    assert provenance.source_commit(repo / "app") is None


def test_the_environment_names_the_thread_variables_set_and_the_cpu(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    env = provenance.run_environment()
    assert env["thread_variables"]["OMP_NUM_THREADS"] == "1" and "MKL_NUM_THREADS" not in env["thread_variables"]
    assert env.get("cpu") == provenance.cpu_model()
    if "model name" in (Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""):
        assert env["cpu"], env
