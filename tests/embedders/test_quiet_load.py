"""Loading a trained checkpoint from Python (a notebook, a script using the facade) printed
transformers' "Loading weights" bar and a FutureWarning peft triggers (``is_gradient_checkpointing``
is deprecated): the CLI quiets both for its process, a library caller saw them on every load."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_checkpoint_loads_without_the_bar_and_the_deprecation_warning(tmp_path) -> None:
    code = ("from transformers.utils import logging\n"
            "before = logging.is_progress_bar_enabled()\n"
            "from embedders import load_embedder\n"
            "load_embedder('causal-eos')\n"
            "print('bar kept', logging.is_progress_bar_enabled() == before)\n")
    env = {**os.environ, "FACET_DATA_DIR": str(tmp_path), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-W", "default", "-c", code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "is_gradient_checkpointing" not in done.stderr, done.stderr
    assert "Loading weights" not in done.stderr, done.stderr
    assert done.stdout.strip() == "bar kept True"  # the caller's own setting is left as it was
