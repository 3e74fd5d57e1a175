"""examples/rag.py end to end, as a user runs it: index, instruction retrieval, SmolLM2 answer."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rag.py"


@pytest.mark.slow
def test_rag_example_retrieves_with_the_instruction_and_answers(tmp_path) -> None:
    result = subprocess.run([sys.executable, str(EXAMPLE), "--k", "3", "--data-dir",
                             str(tmp_path / "data"), "--max-new-tokens", "24"],
                            capture_output=True, text=True, timeout=600)
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
