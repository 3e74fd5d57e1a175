"""examples/rag.py end to end, as a user runs it: index, instruction retrieval, SmolLM2 answer."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rag.py"


@pytest.mark.slow
def test_rag_example_retrieves_with_the_instruction_and_answers_and_draws_no_loading_bar(tmp_path) -> None:
    """One run of the example, as a user runs it, asserts both: it retrieves with the
    instruction and answers, and it draws no transformers "Loading weights: 100%" bar (README's
    transcript of its output shows none; the example quiets the libraries as the CLI does).
    (The bar's fact was a second run of its own in tests/app/test_newcomer_findings.py.)"""
    # The two variables the example sets itself (quiet_libraries), unset as in a user's shell:
    # the test process may have set them (app.cli imported) and the child would inherit them.
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_DISABLE_PROGRESS_BARS", "TRANSFORMERS_VERBOSITY")}
    result = subprocess.run([sys.executable, str(EXAMPLE), "--k", "3", "--data-dir",
                             str(tmp_path / "data"), "--max-new-tokens", "24"],
                            capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    retrieved = re.findall(r"^\s+(\d\.\d{3})\s+\[(\w+\??)\] (.+)$", out, flags=re.M)
    assert len(retrieved) == 3, out
    # The instruction asks for card-payment problems: that is what comes back.
    assert all("card_payment" in intent for _, intent, _ in retrieved), retrieved
    scores = [float(s) for s, _, _ in retrieved]
    assert scores == sorted(scores, reverse=True)
    answer = out.split("SmolLM2-135M-Instruct):", 1)[1].strip()
    assert len(answer.split()) >= 5, out
    # Both models loaded (minilm for the index and the search, SmolLM2 for the answer): no bar.
    assert "Loading weights" not in result.stderr, result.stderr[-500:]
