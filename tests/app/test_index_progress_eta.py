"""`facet index`'s progress bar: its rate and ETA count documents over the time they took.

Between the encoder's pieces of a batch, indexing calls the bar with no new documents (to show
"encoding chunk 96/480 of this batch"); the bar took that as a tqdm rate interval of 0
documents, so the batch's documents then counted over the time since the last piece only: a
user saw 288 doc/s and 17 s left at 67/5000 documents, 38 s into a 33 minute run. These tests
drive the real tqdm bar the way indexing calls it, with real (short) waits between the calls.
"""

from __future__ import annotations

import io
import re
import sys
import time
from pathlib import Path

import pytest

from app.commands.index import progress_bar
from app.services.indexing import Progress
from tests.app.cli_runner import invoke_cli

TOTAL = 5000
PIECE_S = 0.2  # over tqdm's 0.1 s between redraws, as an encoder piece is


class Terminal(io.StringIO):
    """What the bar writes, from a stream that says it is a terminal (tqdm draws only there)."""

    def isatty(self) -> bool:
        return True


def shown(out: io.StringIO) -> tuple[float, float, str]:
    """The rate (doc/s), the ETA (seconds) and the whole of the bar as last drawn."""
    last = out.getvalue().split("\r")[-1]
    m = re.search(r"<(?:(\d+):)?(\d+):(\d+), ([\d.]+)doc/s", last)
    assert m, last
    hours, minutes, seconds, rate = m.groups()
    eta = int(hours or 0) * 3600 + int(minutes) * 60 + int(seconds)
    return float(rate), float(eta), last


def batch(update, docs_before: int, docs_after: int) -> None:
    """One batch as ``IndexingService._run`` reports it: the encoder's pieces (no documents
    written yet), then the store write, then the batch's documents."""
    for done in (32, 64, 96):
        time.sleep(PIECE_S)
        update(Progress(docs_before, TOTAL, docs_before * 2, 0.0,
                        stage=f"encoding chunk {done}/128 of this batch"))
    time.sleep(PIECE_S)  # writing the batch's vectors
    update(Progress(docs_after, TOTAL, docs_after * 2, 0.0))


def test_rate_and_eta_count_documents_over_the_time_since_the_start(monkeypatch) -> None:
    out = Terminal()
    monkeypatch.setattr(sys, "stderr", out)
    started = time.perf_counter()
    bar, update = progress_bar()
    try:
        for docs_before, docs_after in ((0, 60), (60, 120)):
            batch(update, docs_before, docs_after)
            elapsed = time.perf_counter() - started
            true_rate = docs_after / elapsed
            rate, eta, line = shown(out)
            # The old bar said ~4x the real rate after the first batch (60 docs over the
            # last 0.2 s, not the 0.8 s they took), and an ETA a quarter of the real one.
            assert true_rate / 1.5 < rate < true_rate * 1.5, (true_rate, line)
            expected_eta = (TOTAL - docs_after) / true_rate
            assert expected_eta / 1.5 < eta < expected_eta * 1.5, (expected_eta, line)
            assert f"{docs_after}/{TOTAL}" in line and f"chunks={docs_after * 2}" in line
        # The pieces still redraw the bar with what the wait is for.
        assert "encoding chunk 96/128 of this batch" in out.getvalue()
    finally:
        bar.close()


def test_a_log_or_pipe_gets_no_bar_only_plain_lines_and_the_summary(monkeypatch, tmp_path: Path) -> None:
    """Not a terminal: no bar (no carriage returns, no rate), plain progress lines instead (a
    log got nothing until the end), and `facet index` prints its one-line summary as before."""
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    bar, update = progress_bar()
    update(Progress(0, 3, 0, 0.0, stage="encoding chunk 32/64 of this batch"))
    update(Progress(2, 3, 4, 0.1))
    update(Progress(2, 3, 5, 0.2, current="big.txt", current_fraction=0.5))
    bar.close()
    lines = out.getvalue().splitlines()
    assert bar.disable and "\r" not in out.getvalue() and "doc/s" not in out.getvalue()
    # (The streamed file is counted once it is done, its half in the percentage: 1.5 of 3.)
    assert [line[:len("  2/3 documents (67%), ")] for line in lines] == [
        "  2/3 documents (67%), ", "  1/3 documents (50%), "] and lines[1].endswith("big.txt 50%"), lines
    monkeypatch.undo()

    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(3):
        (docs / f"d{i}.txt").write_text(f"document {i} about cell biology and proteins")
    run = invoke_cli("index", str(docs), "-c", "eta", "--embedder", "minilm",
                     env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert run.returncode == 0, run.stderr
    assert "doc/s" not in run.stderr and "\r" not in run.stderr, run.stderr
    assert re.search(r"job \d+ completed: 3 documents seen, 3 indexed, 0 unchanged, 0 failed",
                     run.stdout), run.stdout


@pytest.mark.parametrize("fraction", [0.25, 0.5])
def test_a_streamed_file_moves_the_bar_by_its_fraction(monkeypatch, fraction: float) -> None:
    """Inside a large file the bar stands at the fraction of it done (unchanged by the fix)."""
    out = Terminal()
    monkeypatch.setattr(sys, "stderr", out)
    bar, update = progress_bar()
    try:
        update(Progress(1, 2, 10, 0.1, current="/x/big.txt", current_fraction=fraction))
        assert bar.n == pytest.approx(fraction)
        assert f"big.txt {fraction:.0%}" in out.getvalue().split("\r")[-1]
    finally:
        bar.close()
