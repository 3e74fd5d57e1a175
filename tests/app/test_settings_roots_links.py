"""FACET_UI_ALLOWED_ROOTS with ``~`` expanded in each folder, as the folder settings are (it was
kept as written, "~/docs": a root named "~" in the working directory), and an empty item
refused naming the key; and the *default* data folder (FACET_DATA_DIR unset) checked for a
broken link as a given one is, one line naming the link's target and saying the variable is
unset (it read "FACET_DATA_DIR=PosixPath('...')", as if the variable were set to that)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.errors import InvalidRequestError
from app.settings import FacetSettings, get_settings
from ui.inputs import resolve_under_roots

ROOT = Path(__file__).resolve().parents[2]


def test_allowed_roots_expand_the_home_folder(environment, tmp_path) -> None:
    home = tmp_path / "home"
    (home / "docs" / "notes").mkdir(parents=True)
    environment.setenv("HOME", str(home))
    environment.setenv("FACET_UI_ALLOWED_ROOTS", '["~/docs", " ~/other "]')
    roots = FacetSettings().ui_allowed_roots
    assert roots == [home / "docs", home / "other"]
    assert resolve_under_roots("notes", roots) == (home / "docs" / "notes").resolve()
    assert resolve_under_roots(str(home / "docs" / "notes"), roots) == (
        home / "docs" / "notes").resolve()
    with pytest.raises(InvalidRequestError, match="outside the folders"):
        resolve_under_roots(str(tmp_path), roots)


def test_an_empty_allowed_root_is_refused_naming_the_key(environment) -> None:
    environment.setenv("FACET_UI_ALLOWED_ROOTS", '["/srv/a", " "]')
    get_settings.cache_clear()
    with pytest.raises(InvalidRequestError) as caught:
        get_settings()
    said = str(caught.value)
    assert "FACET_UI_ALLOWED_ROOTS=" in said and "item 2 is empty" in said, said


def _facet(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FACET_")}
    env |= {"HOME": str(home), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("dangling", ["facet", "share"])
def test_a_default_data_folder_that_is_a_broken_link_says_so(tmp_path, dangling) -> None:
    home = tmp_path / "home"
    share = home / ".local" / "share"
    gone = tmp_path / "gone"
    if dangling == "facet":
        share.mkdir(parents=True)
        (share / "facet").symlink_to(gone)
        where = "is a broken link"
    else:
        share.parent.mkdir(parents=True)
        share.symlink_to(gone)
        where = f"is inside {share}, which is a broken link"
    done = _facet(home, "collections")
    assert done.returncode != 0, done.stdout
    said = done.stderr.strip()
    assert "Traceback" not in said and len(said.splitlines()) == 1, said
    assert f"FACET_DATA_DIR (unset; its default {share / 'facet'}): {where} to {gone}" in said, said
    assert not gone.exists()


@pytest.mark.parametrize(("name", "value", "words"), [
    ("FACET_DATA_DIR", "~nosuchuser-facet/x", "FACET_DATA_DIR='~nosuchuser-facet/x': starts with "
                                              "'~nosuchuser-facet', which cannot be expanded"),
    ("FACET_UI_ALLOWED_ROOTS", '["/tmp", "~nosuchuser-facet/x"]',
     "item 2 starts with '~nosuchuser-facet', which cannot be expanded"),
])
def test_a_home_of_no_user_is_one_line(tmp_path, name, value, words) -> None:
    """``~nosuchuser/x`` was a RuntimeError traceback ("Could not determine home directory") at
    every command's start."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FACET_")}
    env |= {"FACET_DATA_DIR": str(tmp_path / "data"), name: value}
    done = subprocess.run([sys.executable, "-m", "app", "collections"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert words in done.stderr and "(a list is written as JSON" not in done.stderr
