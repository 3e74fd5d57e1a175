"""What a figure depends on below the command line: written into ``facet eval``'s results.json
and ``facet train``'s train_log.json as ``environment``.

The figures audit of the fourth session of 2026-12-02 re-ran the published rows and could not
say why the CLINC clustering figures moved at the second decimal: the runs recorded neither
versions, threads, the CPU (whose vector instructions pick the BLAS kernels) nor the code they
ran. Nothing here imports torch; its thread count is read only when it is already loaded.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

PACKAGES = ("facet-search", "torch", "numpy", "scikit-learn", "transformers")
# Variables that set the thread pools the BLAS and torch kernels run on.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def run_environment() -> dict[str, Any]:
    """Versions, torch's thread count (when torch is loaded), the thread variables set, the
    CPU model and the Facet source commit (when Facet runs from a git checkout)."""
    env: dict[str, Any] = {"python": platform.python_version()}
    for package in PACKAGES:
        try:
            env[package] = version(package)
        except PackageNotFoundError:
            continue
    torch = sys.modules.get("torch")  # (not imported for it: the minilm path needs no torch)
    if torch is not None:
        env["torch_threads"] = torch.get_num_threads()
    threads = {name: os.environ[name] for name in THREAD_VARIABLES if name in os.environ}
    if threads:
        env["thread_variables"] = threads
    cpu = cpu_model()
    if cpu:
        env["cpu"] = cpu
    source = source_commit()
    if source is not None:
        env["source"] = source
    return env


def cpu_model() -> str | None:
    """The CPU's model name from /proc/cpuinfo (Linux), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or None


def source_commit(package_dir: Path | None = None) -> dict[str, Any] | None:
    """``{"commit": sha, "dirty": bool}`` when the Facet package that runs is a file git tracks
    (a checkout, editable install), else None: an installed wheel has no commit to give, even
    inside a checkout's ignored ``.venv``. ``dirty``: tracked files differ from the commit."""
    here = package_dir or Path(__file__).resolve().parent

    def git(*args: str) -> subprocess.CompletedProcess[str] | None:
        try:
            return subprocess.run(["git", "-C", str(here), *args], capture_output=True, text=True,
                                  timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):  # no git, or it hung
            return None

    tracked = git("ls-files", "--error-unmatch", "__init__.py")
    if tracked is None or tracked.returncode != 0:
        return None
    head = git("rev-parse", "HEAD")
    if head is None or head.returncode != 0 or not head.stdout.strip():
        return None
    status = git("status", "--porcelain", "--untracked-files=no")
    source: dict[str, Any] = {"commit": head.stdout.strip()}
    if status is not None and status.returncode == 0:
        source["dirty"] = bool(status.stdout.strip())
    return source
