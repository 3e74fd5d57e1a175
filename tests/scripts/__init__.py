"""Tests of the scripts under scripts/, which are files, not importable modules."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_script(relative: str) -> ModuleType:
    """Import ``scripts/<relative>`` (e.g. ``"gpu/pack.py"``) as a module."""
    path = ROOT / "scripts" / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
