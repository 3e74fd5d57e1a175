"""The CLI's output streams and signals, in real processes: a stdout that cannot be written (a
full disk: one ``error:`` line, exit 4; a closed pipe: exit 0 without a word), Ctrl-C while the
CLI's modules import (exit 130, no traceback), and `facet delete`'s question on stderr with one
"deleted" line."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.app.cli_runner import tiny_data_folder

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory, minilm) -> Path:
    """A data folder with one tiny collection (and its job)."""
    return tiny_data_folder(tmp_path_factory.mktemp("cliout_streams"))


def _as_at_a_terminal() -> None:
    # SIGINT at its default in the child (a suite run in a shell's background inherits it
    # ignored, and facet keeps an ignored SIGINT ignored).
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _facet(data: Path, *args: str, **kwargs: object) -> subprocess.Popen[str]:
    env = dict(os.environ, FACET_DATA_DIR=str(data), OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "app", *args], cwd=ROOT, env=env, text=True,
                            preexec_fn=_as_at_a_terminal, **kwargs)  # type: ignore[call-overload]


@pytest.mark.parametrize("args", [("jobs",), ("collections", "--json")])
def test_a_full_stdout_is_one_error_line_and_exit_4(data: Path, args: tuple[str, ...]) -> None:
    with open("/dev/full", "w") as full:
        proc = _facet(data, *args, stdout=full, stderr=subprocess.PIPE)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 4, err
    assert err == "error: cannot write the output: No space left on device\n", err


def test_a_closed_pipe_exits_0_quietly(data: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone (`facet jobs | true`, `| head -1` once it has read)
    try:
        proc = _facet(data, "jobs", stdout=write_end, stderr=subprocess.PIPE)
    finally:
        os.close(write_end)
    _, err = proc.communicate(timeout=120)
    assert (proc.returncode, err) == (0, "")


def _wait_for_library(pid: int, name: str, timeout_s: float = 60.0) -> bool:
    """Whether the process ``pid`` mapped a shared library named ``name`` within ``timeout_s``
    (/proc/PID/maps): a mark of how far its imports have gone, whatever the machine's load."""
    maps = Path(f"/proc/{pid}/maps")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if name in maps.read_text():
                return True
        except OSError:  # it has ended
            return False
        time.sleep(0.002)
    return False


# Libraries loaded while `app.cli` imports (app.settings' pydantic, the services' numpy): the
# half second in which Ctrl-C printed a KeyboardInterrupt traceback through the imports.
@pytest.mark.parametrize("library", ["_pydantic_core", "_multiarray_umath"])
def test_ctrl_c_while_the_cli_imports_exits_130_without_a_traceback(data: Path, library: str) -> None:
    if not Path("/proc/self/maps").exists():
        pytest.skip("needs /proc to see how far the imports have gone")
    proc = _facet(data, "jobs", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert _wait_for_library(proc.pid, library), library
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and len(err.splitlines()) <= 1, err


def test_delete_asks_on_stderr_and_says_deleted_once(data: Path, tmp_path: Path) -> None:
    mine = tmp_path / "data"
    shutil.copytree(data, mine)
    proc = _facet(mine, "delete", "tiny", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                  stderr=subprocess.PIPE)
    out, err = proc.communicate("y\n", timeout=120)
    assert proc.returncode == 0, err
    # Nothing of the question in the output (the prompt's last character came through too).
    assert out == "deleted tiny: 2 documents, 2 points\n", out
    assert "delete 'tiny' (2 documents, 2 points)? [y/N]: " in err, err
    assert "deleted collection" not in err, err  # the service's INFO line said it again


def test_delete_without_an_answer_is_one_error_line(data: Path, tmp_path: Path) -> None:
    """No terminal and nothing piped (cron, CI): "Aborted." and exit 1, neither why nor -y."""
    mine = tmp_path / "data"
    shutil.copytree(data, mine)
    proc = _facet(mine, "delete", "tiny", stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                  stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and out == "", (out, err)
    assert err.splitlines()[-1] == ("error: no answer on standard input (not a terminal?): "
                                    "nothing was deleted; give -y to delete without asking"), err
    listed = _facet(mine, "collections", "--json", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert "tiny" in listed.communicate(timeout=120)[0]
