"""Servers import what clustering needs in the background at start-up.

``app/services/clustering.py`` imports scikit-learn inside its functions (commands that never
cluster do not pay for it), so a server's first cluster request imported it: about 7 s on the
2-core CPU. ``facet serve`` and ``facet ui`` (``ui.app.launch_ui``) now start that import in a daemon thread
(``app.encoding.warm_up_clustering``) once they serve; the API is checked here (launching the
UI costs a minute of Gradio on the 2-core CPU). Each check runs in a fresh interpreter: this
test process has long imported scikit-learn."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The served facade as tests/app/api/conftest.py builds it (no model loaded: no preload).
API = """
import sys, threading, time
from fastapi.testclient import TestClient
from app.api import create_app
from app.core import Facet
from app.settings import FacetSettings

# Without the UI mounted at /ui (Gradio costs half a minute to build on the 2-core CPU).
facet = Facet.for_serving(FacetSettings(data_dir=sys.argv[1], ui_mount=False))
app = create_app(facet)
assert "sklearn" not in sys.modules, "imported before the server started"
with TestClient(app) as client:
    assert client.get("/health").json() == {"status": "ok"}
    deadline = time.monotonic() + 60
    while "sklearn.cluster" not in sys.modules and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "sklearn.cluster" in sys.modules, "sklearn.cluster not imported after start-up"
    warm = [t for t in threading.enumerate() if t.name == "facet-warm-up"]
    assert warm and warm[0].daemon, warm
facet.close()
print("warm")
"""

def _run(script: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script), str(data_dir)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)


def test_the_api_imports_the_clustering_modules_in_the_background(tmp_path) -> None:
    done = _run(API, tmp_path / "data")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "warm"


def test_commands_do_not_import_them(tmp_path) -> None:
    """The one-shot facade (every CLI command) never starts the warm-up."""
    script = """
    import sys, threading
    from app.core import Facet
    from app.settings import FacetSettings
    facet = Facet.open(FacetSettings(data_dir=sys.argv[1]))
    facet.close()
    assert "sklearn" not in sys.modules
    assert not [t for t in threading.enumerate() if t.name == "facet-warm-up"]
    print("cold")
    """
    done = _run(script, tmp_path / "data")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "cold"
