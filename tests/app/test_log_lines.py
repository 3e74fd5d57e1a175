"""What `facet -v` writes to its log: the time with its UTC offset (job times are UTC; a bare
local time read as another moment), no library DEBUG noise (PIL's ~40 "Importing ...Plugin"
lines), and Python warnings as log lines (two raw lines, no time). A subprocess: logging is set
up once per process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

PROBE = '''
import logging, warnings
logging.getLogger("PIL.Image").debug("Importing BlpImagePlugin")
logging.getLogger("facet_probe").debug("probe debug line")
warnings.warn("probe warning", UserWarning)
'''


def test_verbose_log_lines_carry_the_offset_and_no_library_noise(tmp_path) -> None:
    (tmp_path / "facet_log_probe.py").write_text(PROBE)
    facet = Path(sys.executable).with_name("facet")
    run = subprocess.run([str(facet), "-v", "embedders"], capture_output=True, text=True, timeout=120,
                         env=os.environ | {"FACET_DATA_DIR": str(tmp_path / "data"),
                                           "FACET_PLUGINS": "facet_log_probe",
                                           "PYTHONPATH": str(tmp_path), "TZ": "Asia/Kolkata"})
    assert run.returncode == 0, run.stderr
    stamp = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+05:30 "
    assert re.search(stamp + r"DEBUG facet_probe: probe debug line$", run.stderr, re.M), run.stderr
    assert re.search(stamp + r"WARNING py.warnings: .*UserWarning: probe warning", run.stderr, re.M), run.stderr
    assert "Importing BlpImagePlugin" not in run.stderr, run.stderr
