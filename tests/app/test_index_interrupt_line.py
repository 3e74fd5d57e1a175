"""Ctrl-C while `facet index` loads the model, before its job is recorded: the line on stderr
said the collection's newest job, another run's ("job 1 completed: "), though nothing of this
run was written. A real SIGINT, sent by a plugin embedder to its own process as it loads."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.app.cli_runner import invoke_cli

PLUGIN = textwrap.dedent('''
    """An embedder whose loading is interrupted: Ctrl-C (SIGINT) arrives while it loads."""
    import os
    import signal
    import time


    def load(device=None, **kw):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(30)  # the KeyboardInterrupt is raised here
        raise AssertionError("not interrupted")


    def register():
        from embedders import register_embedder

        register_embedder("slow-to-load", load, "interrupted while it loads")
''')


def _default_sigint() -> None:
    # SIGINT at its default in the child, as in a terminal (a suite run in the background
    # inherits it ignored, and facet keeps an ignored SIGINT ignored).
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_while_the_model_loads_says_nothing_was_written_not_an_older_job(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("card payment declined twice")
    data = tmp_path / "data"
    env = {"FACET_DATA_DIR": str(data), "OMP_NUM_THREADS": "1"}
    first = invoke_cli("index", str(src), "-c", "notes", "-e", "minilm", env=env)
    assert first.returncode == 0, first.stderr
    assert "job 1 completed" in first.stdout, first.stdout
    (tmp_path / "plug").mkdir()
    (tmp_path / "plug" / "facet_slow_load.py").write_text(PLUGIN)
    run = subprocess.run(
        [sys.executable, "-m", "app", "index", str(src), "-c", "notes", "-e", "slow-to-load"],
        capture_output=True, text=True, timeout=120, preexec_fn=_default_sigint,
        env=os.environ | env | {"FACET_PLUGINS": "facet_slow_load", "PYTHONPATH": str(tmp_path / "plug")})
    assert run.returncode == 130, run.stderr
    assert "job 1 " not in run.stderr, run.stderr  # the earlier run's job, not this one's
    assert "interrupted before the job started" in run.stderr and "nothing was written" in run.stderr, run.stderr
    listed = invoke_cli("jobs", "-c", "notes", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert '"id": 2' not in listed.stdout  # no job of the interrupted run was kept
