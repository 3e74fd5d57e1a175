"""A long `facet cluster`: the encoding bar moves per batch, a long run on the CPU says so before
it starts, and Ctrl-C stops it with a line and exit 130.

A SciFact collection of 1,140 chunks sat at "encoding 0/1140 texts" for minutes with the
default InBedder on a CPU (steps of 128 texts, about 48 s a batch of 32 there), nothing said
how long the run would be, and a stop said nothing.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.app.cli_runner import invoke_cli

WORDS = ["card", "refund", "rate", "pin", "transfer", "account", "loan", "branch", "fee", "limit",
         "statement", "cheque", "balance", "deposit", "savings", "mortgage", "interest",
         "overdraft", "payment", "wallet"]


def _texts(n: int, words: int = 8) -> list[str]:
    """``n`` distinct texts of ``words`` words each (seeded by their number)."""
    return [" ".join(WORDS[(i * 7 + j * (i % 5 + 1)) % len(WORDS)] for j in range(words)) + f" {i}"
            for i in range(n)]


def test_the_encoding_bar_moves_after_each_batch(tmp_path: Path) -> None:
    """100 texts: told before each batch of the encoder's 32, each after the first with the
    time left as measured so far (they were one step of 128: "encoding 0/100" until the end)."""
    src = tmp_path / "texts.txt"
    src.write_text("\n".join(_texts(100)))
    result = invoke_cli("cluster", str(src), "-i", "the topic", "--k", "2", "--embedder", "minilm",
                        "--explain", "")
    assert result.returncode == 0, result.stderr
    counts = [int(m) for m in re.findall(r"encoding (\d+)/100 texts", result.stderr)]
    assert counts == [0, 32, 64, 96], result.stderr
    assert re.search(r"encoding 32/100 texts, ~\d+ s left", result.stderr), result.stderr
    assert "heads-up" not in result.stderr  # minilm alone on 100 texts: quick


def _as_at_a_terminal() -> None:
    """SIGINT at its default in the child, as in a terminal where a user presses Ctrl-C: a suite
    started in the background of a shell (`make test &`, CI) inherits it ignored, and an ignored
    SIGINT stays ignored in Python (the convention `facet` keeps), so the signal did nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_mid_encoding_stops_with_a_line_and_130(tmp_path: Path, tiny_inbedder_dir: Path) -> None:
    """A decoder embedding 3,000 texts (a run of minutes here): the heads-up comes before the
    encoding, and a SIGINT once the bar has moved ends the run within seconds, with exit 130
    and a line naming where it stopped."""
    src = tmp_path / "texts.txt"
    src.write_text("\n".join(_texts(3000, words=40)))
    env = os.environ | {"FACET_DATA_DIR": str(tmp_path / "data"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "cluster", str(src), "-i", "the topic", "--k", "2",
         "--embedder", str(tiny_inbedder_dir), "--explain", ""],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
        preexec_fn=_as_at_a_terminal)
    lines: list[str] = []
    moved = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if re.search(r"encoding [1-9]\d*/3000 texts", line):
                moved.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert moved.wait(timeout=120), "".join(lines)
        proc.send_signal(signal.SIGINT)
        sent = time.perf_counter()
        proc.wait(timeout=30)
        stopped_s = time.perf_counter() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=5)
    err = "".join(lines)
    assert proc.returncode == 130, err
    assert stopped_s < 10, (stopped_s, err)
    assert re.search(r"^stopped by Ctrl-C while encoding \d+/3000 texts; nothing was kept", err,
                     re.MULTILINE), err
    assert "Traceback" not in err
    heads_up = err.index("heads-up: 3,000 texts with embedder")
    assert heads_up < err.index("encoding 0/3000 texts") < err.index("stopped by Ctrl-C")
    # (--explain '' given already: only the advice not followed)
    assert "for a quicker run: --embedder minilm or --limit N." in err, err
