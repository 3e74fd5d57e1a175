"""Every log line Facet writes stamps its local time with the UTC offset as RFC 3339 / ISO 8601
extended has it, `+05:30` (time.strftime's `%z`, which logging uses, wrote `+0530`): the CLI's
lines (`facet -v ...`) and uvicorn's under `facet serve` (the formatters its log config builds).
Child processes: the zone is the process's (TZ), and logging is set up once per process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d"
PROBE = 'import logging\nlogging.getLogger("facet_probe").debug("probe debug line")\n'
ZONES = [("UTC", "+00:00"), ("Asia/Kolkata", "+05:30")]


@pytest.mark.parametrize(("zone", "offset"), ZONES)
def test_cli_log_lines_carry_an_rfc3339_offset(tmp_path, zone, offset) -> None:
    (tmp_path / "facet_stamp_probe.py").write_text(PROBE)
    facet = Path(sys.executable).with_name("facet")
    run = subprocess.run([str(facet), "-v", "embedders"], capture_output=True, text=True, timeout=120,
                         env=os.environ | {"FACET_DATA_DIR": str(tmp_path / "data"), "OMP_NUM_THREADS": "1",
                                           "FACET_PLUGINS": "facet_stamp_probe",
                                           "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path),
                                                                                      os.environ.get("PYTHONPATH")])),
                                           "TZ": zone})
    assert run.returncode == 0, run.stderr
    [line] = [ln for ln in run.stderr.splitlines() if ln.endswith("DEBUG facet_probe: probe debug line")]
    assert re.match(rf"{STAMP} DEBUG facet_probe: probe debug line$", line), line
    assert line[19:25] == offset, line


# The formatters `facet serve`'s uvicorn log config builds (as logging.config does), each
# formatting a record at a fixed moment.
SERVE_PROBE = '''
import logging, logging.config, sys
from app.commands.serve import _uvicorn_log_config
config = _uvicorn_log_config()
for name, spec in config["formatters"].items():
    formatter = logging.config.DictConfigurator(config).configure_formatter(dict(spec))
    record = logging.LogRecord("uvicorn.error", logging.INFO, "probe.py", 1, "probe %s", (name,), None)
    record.created = float(sys.argv[1])
    if name == "access":
        record.args = ("127.0.0.1:1234", "GET", "/health", "1.1", 200)
        record.msg = '%s - "%s %s HTTP/%s" %d'
    print(type(formatter).__mro__[1:3], formatter.format(record))
'''


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata", "America/St_Johns"])
def test_serve_log_config_formatters_write_an_rfc3339_offset(zone) -> None:
    moment = 1_795_000_000.0  # 2026-11-18, St John's at -03:30
    run = subprocess.run([sys.executable, "-c", SERVE_PROBE, str(moment)], capture_output=True, text=True,
                         timeout=60, cwd=Path(__file__).resolve().parents[2],
                         env=os.environ | {"TZ": zone, "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stderr
    expected = datetime.fromtimestamp(moment, ZoneInfo(zone)).isoformat(timespec="seconds")
    lines = run.stdout.splitlines()
    assert len(lines) == 2, run.stdout
    for line in lines:
        assert "uvicorn.logging" in line, line  # uvicorn's own formatters (level prefix, access line)
        stamp = line.split(") ", 1)[1].split(" ", 1)[0]
        assert re.fullmatch(STAMP, stamp) and stamp == expected, line
    assert any('"GET /health HTTP/1.1" 200' in line for line in lines), run.stdout
