"""Facet's own child processes ignore the folder they are started from.

``facet index --background`` starts ``python -m app run-job ...``; ``-m`` puts the current
folder first on ``sys.path``, so a user's project holding a package named ``indexer`` or
``app`` (common folder names) shadowed Facet's: the job died on
``ImportError: cannot import name 'metadata' from 'indexer'`` and ``facet jobs N`` only said
the process that queued it had ended. The children are started with ``-P`` now.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.app.cli_runner import invoke_cli


def test_background_job_runs_from_a_folder_with_an_indexer_and_an_app_package(tmp_path: Path) -> None:
    project = tmp_path / "userproj"
    for package, module in (("indexer", "metadata"), ("app", "cli")):
        (project / package).mkdir(parents=True)
        (project / package / "__init__.py").write_text("")
        # In an editable install an empty package is completed from Facet's own modules; a
        # user's module of the same name (or a wheel install) is what broke the job.
        (project / package / f"{module}.py").write_text("raise ImportError('the user project')\n")
    corpus = tmp_path / "notes"
    corpus.mkdir()
    (corpus / "a.txt").write_text("My card was declined at the shop this morning.")
    (corpus / "b.txt").write_text("How do I change the PIN of my debit card?")
    data = tmp_path / "data"

    facet = Path(sys.executable).parent / "facet"  # the console script a user runs
    queued = subprocess.run(
        [str(facet), "index", str(corpus), "--collection", "c", "--embedder", "minilm", "--background", "--json"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, FACET_DATA_DIR=str(data)),
    )
    assert queued.returncode == 0, queued.stderr
    job_id = str(json.loads(queued.stdout)["id"])

    env = {"FACET_DATA_DIR": str(data)}
    followed = invoke_cli("jobs", job_id, "--follow", "--interval", "0.2", env=env)
    log = data / "logs" / f"job-{job_id}.log"
    assert followed.returncode == 0, (followed.stdout, followed.stderr, log.read_text() if log.exists() else "")
    job = json.loads(invoke_cli("jobs", job_id, "--json", env=env).stdout)
    assert (job["state"], job["runner"], job["docs_indexed"]) == ("completed", "process", 2), job
    listed = json.loads(invoke_cli("collections", "--json", env=env).stdout)
    assert [c["documents_indexed"] for c in listed if c["name"] == "c"] == [2], listed
