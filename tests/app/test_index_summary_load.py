"""`facet index`'s plain summary counts a model load made during the run: a re-run with a change
loads the model only once it has chunks to encode, timed apart as ``load_model`` (``--json``'s
timings), and the summary said "1 chunk in 0.2s" for a run of 9-14 s. The re-run is a fresh
process, as a user's is: one in this process finds the model loaded already."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.app.cli_runner import invoke_cli


def test_the_summary_adds_the_model_load_of_the_run(tmp_path: Path) -> None:
    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "FACET_DEFAULT_EMBEDDER": "minilm"}
    note = tmp_path / "note.txt"
    note.write_text("Card fees rise in May for foreign payments.")
    first = invoke_cli("index", str(note), "-c", "notes", env=env)
    assert first.returncode == 0, first.stderr
    # A new collection: the model loads before the run, timed apart too where this process had
    # not loaded its weights yet (run alone; after other tests, they are in memory and the load
    # takes no time to speak of: the line without it).
    assert re.search(r"; 1 chunk in [\d.]+s \((\+ [\d.]+s loading minilm; )?[\d.]+ docs/s\)$",
                     first.stdout.strip()), first.stdout

    note.write_text("Card fees fall in June for foreign payments.")
    again = subprocess.run(
        [sys.executable, "-m", "app", "index", str(note), "-c", "notes"],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ | env,
    )
    assert again.returncode == 0, again.stderr
    found = re.search(r"; 1 chunk in ([\d.]+)s \(\+ ([\d.]+)s loading minilm; [\d.]+ docs/s\)$", again.stdout.strip())
    assert found, again.stdout
    assert float(found[2]) > 0
