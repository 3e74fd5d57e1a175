"""An embedded store's collection whose folder (or side file) this process cannot read: another
user's, or ``chmod 000``. `facet search -c NAME q` ended in a PermissionError traceback from
``EdgeStore.collection_exists``, while the listing said "store files unreadable: ..."; it is the
store's ``StoreUnavailableError``, one line naming the file and what to do (Facet's exit 7).

Tests run as root here, whom ``chmod`` does not deny: the code under test runs in a child
process without root's permission overrides (``capsh``), skipped where that cannot be had.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _drop_dac() -> list[str] | None:
    """The command prefix that runs a shell command without root's permission overrides; [] where
    not root (permissions refuse it already); None where neither can be had."""
    if os.geteuid() != 0:
        return []
    if shutil.which("capsh") is None:
        return None
    return ["capsh", "--drop=cap_dac_override,cap_dac_read_search,cap_fowner", "--", "-c"]


def _run(prefix: list[str], argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    line = shlex.join(argv)
    full = [*prefix, line] if prefix else ["sh", "-c", line]
    return subprocess.run(full, capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)


_PROBE = """
import sys
from indexer.errors import StoreUnavailableError
from indexer.store import EdgeStore

store = EdgeStore(sys.argv[1])
for call in (lambda: store.collection_exists("c"), lambda: store.vector_sizes("c")):
    try:
        print("answered:", call())
    except StoreUnavailableError as e:
        print("unavailable:", e)
"""


@pytest.mark.parametrize("what", ["folder", "side file"])
def test_an_unreadable_collection_is_the_stores_one_line_error(tmp_path: Path, what: str) -> None:
    prefix = _drop_dac()
    if prefix is None:
        pytest.skip("needs capsh to act, as root, as a user permissions refuse")
    from indexer.store import EdgeStore

    root = tmp_path / "edge"
    store = EdgeStore(root)
    store.ensure_collection("c", {"v": 4})
    store.close()
    folder = root / "c"
    target = folder if what == "folder" else folder / EdgeStore._SIDE
    target.chmod(0)
    try:
        done = _run(prefix, [sys.executable, "-c", _PROBE, str(root)],
                    dict(os.environ, OMP_NUM_THREADS="1"))
    finally:
        target.chmod(0o755 if what == "folder" else 0o644)
    assert (done.returncode, "Traceback" in done.stderr) == (0, False), done.stderr
    said = done.stdout.splitlines()
    assert len(said) == 2, done.stdout
    if what == "side file":  # its folder readable: the file is there, though not for this user
        assert said.pop(0) == "answered: True"
    for line in said:
        assert line.startswith(f"unavailable: collection 'c': Permission denied: {folder}/"
                               f"{EdgeStore._SIDE}; give its files back to this user "
                               f"(chown -R "), line
        assert f"or make them readable (chmod -R u+rwX {folder}), or run as their owner" in line


def test_a_search_of_an_unreadable_collection_is_one_line_and_exit_7(facet, tmp_path: Path) -> None:
    prefix = _drop_dac()
    if prefix is None:
        pytest.skip("needs capsh to act, as root, as a user permissions refuse")
    source = tmp_path / "src"
    source.mkdir()
    for i, text in enumerate(["my card was declined", "a refund has not arrived"]):
        (source / f"d{i}.txt").write_text(text)
    facet.index(str(source), "late")
    facet.close()
    folder = tmp_path / "data" / "qdrant-edge" / "late"
    folder.chmod(0)
    try:
        env = dict(os.environ, FACET_DATA_DIR=str(tmp_path / "data"), OMP_NUM_THREADS="1")
        done = _run(prefix, [sys.executable, "-c", "from app.cli import main; main()",
                             "search", "-c", "late", "card"], env)
    finally:
        folder.chmod(0o755)
    assert (done.returncode, "Traceback" in done.stderr) == (7, False), done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: collection 'late': Permission denied: {folder}/"), lines
    assert "run as their owner" in lines[0], lines
