"""Run a Python script in a private mount namespace where it can remount a folder read-only
under itself (a data folder bind-mounted `:ro` under a running server), for the tests of what
Facet says then. Needs root and `unshare`; the test is skipped where the mount cannot be made."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_beside_read_only_mount(folder: Path, script: str, *, timeout_s: float = 120
                               ) -> subprocess.CompletedProcess[str]:
    """``script`` run by this Python in its own mount namespace from the repository root, with
    ``folder`` as its first argument (the script makes the mount itself, once its store is
    open); skips the test where a read-only bind mount cannot be made here."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare to make a read-only bind mount")
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c",
         f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && ! touch {folder}/x"],
        capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a read-only bind mount here: {probe.stderr.strip()}")
    return subprocess.run(["unshare", "-m", sys.executable, "-c", script, str(folder)],
                          capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
