"""`facet demo` stopped with Ctrl-C while it indexes the sample: it exited 130 saying nothing
but the log's "Ctrl-C: stopping at the next safe point", where `facet index` says which job
stopped, what was kept and how to go on (the review of less-travelled commands, the fourth
session of 2026-12-06). A real SIGINT, sent by a plugin embedder (minilm under another name)
to its own process at its second batch. And a typo in `--rerank` is refused before the sample
is indexed (it was found after, the collection written)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.app.cli_runner import invoke_cli

PLUGIN = textwrap.dedent('''
    """minilm, which sends its own process Ctrl-C (SIGINT) at its second batch of documents."""
    import os
    import signal
    import time


    class Stopping:
        def __init__(self, base):
            self._base, self._calls, self.name = base, 0, "minilm-stops"

        def __getattr__(self, key):
            return getattr(self._base, key)

        @property
        def identity(self):
            return self._base.identity.replace("minilm", "minilm-stops", 1)

        def encode(self, *args, **kwargs):
            self._calls += 1
            if self._calls == 2:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.5)
            return self._base.encode(*args, **kwargs)


    def load(device=None, **kw):
        from embedders.registry import load_embedder

        return Stopping(load_embedder("minilm", device=device))


    def register():
        from embedders import register_embedder

        register_embedder("minilm-stops", load, "minilm, stopped with Ctrl-C at its second batch")
''')


def _default_sigint() -> None:
    # SIGINT at its default in the child, as in a terminal.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_while_the_demo_indexes_says_which_job_stopped_and_how_to_go_on(tmp_path: Path) -> None:
    (tmp_path / "plug").mkdir()
    (tmp_path / "plug" / "facet_stops.py").write_text(PLUGIN)
    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "app", "demo", "-e", "minilm-stops"],
        capture_output=True, text=True, timeout=300, preexec_fn=_default_sigint,
        env=os.environ | env | {"FACET_PLUGINS": "facet_stops", "PYTHONPATH": str(tmp_path / "plug"),
                                "FACET_INDEX_BATCH_CHUNKS": "32"})
    assert run.returncode == 130, run.stderr
    assert "job 1 interrupted" in run.stderr, run.stderr
    assert "`facet demo -e minilm-stops` again" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


def test_a_rerank_typo_is_refused_before_the_sample_is_indexed(tmp_path: Path) -> None:
    env = {"FACET_DATA_DIR": str(tmp_path / "data")}
    done = invoke_cli("demo", "--rerank", "nosuch", env=env)
    assert done.returncode == 2, done.stderr
    assert "rerank 'nosuch'" in done.stderr and "unknown embedder" in done.stderr, done.stderr
    assert "indexing" not in done.stdout, done.stdout
    listed = invoke_cli("collections", "--json", env=env)
    assert "demo-banking77" not in listed.stdout, listed.stdout
    # An unknown -e too, before the "indexing ..." line (stdout held only that line).
    done = invoke_cli("demo", "-e", "bogus", env=env)
    assert done.returncode == 2 and done.stdout == "", (done.stdout, done.stderr)
    assert "embedder 'bogus': unknown embedder 'bogus'" in done.stderr, done.stderr
