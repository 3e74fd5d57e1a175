"""The slow-first file order of make test names files that exist (a renamed file would
silently fall back to the end of the queue and bring back the idle tail)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import SLOW_FILES

ROOT = Path(__file__).resolve().parents[1]


def test_slow_files_exist_and_are_listed_once() -> None:
    assert len(set(SLOW_FILES)) == len(SLOW_FILES)
    missing = [name for name in SLOW_FILES if not (ROOT / name).is_file()]
    assert not missing, missing
