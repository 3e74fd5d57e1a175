"""What `facet serve` tells its operator at start: unknown FACET_* variables (a misspelt
FACET_API_KEY served everyone without a word), a non-loopback bind without a key, what is
served, timestamps on every line, and --log-level applying to Facet's own lines."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.app.served import free_port, wait_until_healthy

ROOT = Path(__file__).resolve().parents[2]
STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d (DEBUG|INFO|WARNING|ERROR|CRITICAL)[ :]")
# FACET_ words in the project that are no variables: constants, prefixes docs name, and the
# misspellings this file and docs/deploy.md give as examples.
NOT_VARIABLES = {"FACET_NAMESPACE", "FACET_KEYS", "FACET_BATCH_", "FACET_UI_", "FACET_APIKEY", "FACET_ZZZZ"}


def _serve(env: dict[str, str], *args: str, until: str | None = None) -> str:
    """`facet serve ARGS` on a free port until /health answers (and ``until`` was printed),
    then stopped; its output."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--port", str(port), *args],
        env=dict(os.environ, **env),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_until_healthy(proc, port)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert until is None or until in out, out
    return out


def test_every_facet_variable_the_project_reads_is_known() -> None:
    """Else a test run (or a deployment) setting one would be warned about."""
    from app.settings import OTHER_VARIABLES, known_variables

    found: set[str] = set()
    places = [
        "app",
        "embedders",
        "indexer",
        "worker",
        "ui",
        "scripts",
        "tests",
        "docs",
        "examples",
        "Makefile",
        "Dockerfile",
        "docker-compose.yml",
        "README.md",
    ]
    for place in places:
        path = ROOT / place
        files = (
            [path] if path.is_file() else [f for f in path.rglob("*") if f.is_file() and "__pycache__" not in f.parts]
        )
        for file in files:
            try:
                found |= set(re.findall(r"FACET_[A-Z0-9_]+", file.read_text(errors="ignore")))
            except OSError:
                continue
    assert {
        "FACET_CHECKPOINT_DIR",
        "FACET_SHARED_DATA_DIR",
        "FACET_STORE_WAIT_S",
        "FACET_BULK_PIECE_MS",
        "FACET_DTYPE",
        "FACET_PLUGINS",
    } <= known_variables()
    assert found - NOT_VARIABLES - known_variables() == set()
    assert set(OTHER_VARIABLES) <= found  # none listed that nothing reads any more


def test_unknown_variables_are_named_with_the_closest_known_one(caplog) -> None:
    from app.settings import warn_unknown_variables

    env = {"FACET_APIKEY": "s3cret", "facet_data_dri": "/x", "FACET_API_KEY": "k", "FACET_ZZZZ": "1", "HOME": "/root"}
    with caplog.at_level(logging.WARNING, logger="app.settings"):
        unknown = warn_unknown_variables(env)
    assert unknown == ["FACET_APIKEY", "FACET_ZZZZ", "facet_data_dri"]
    said = [r.getMessage() for r in caplog.records]
    assert said == [
        "FACET_APIKEY is not a Facet setting and is ignored (did you mean FACET_API_KEY?)",
        "FACET_ZZZZ is not a Facet setting and is ignored",
        "facet_data_dri is not a Facet setting and is ignored (did you mean FACET_DATA_DIR?)",
    ]
    assert "s3cret" not in caplog.text


def test_serve_says_what_it_serves_and_warns_an_open_bind(tmp_path) -> None:
    """`FACET_APIKEY=s3cret facet serve --host 0.0.0.0` served everyone and said only
    "Uvicorn running on ..."; no line had a time."""
    out = _serve(
        {
            "FACET_DATA_DIR": str(tmp_path / "data"),
            "FACET_UI_MOUNT": "false",
            "FACET_APIKEY": "s3cret",
            "FACET_BROKER_URL": "redis://user:pw0rd@127.0.0.1:1/0",
        },
        "--host",
        "0.0.0.0",
        until="INFO app.api.server: loaded minilm",
    )
    assert "Uvicorn running on" in out
    lines = out.strip().splitlines()
    assert lines and all(STAMP.match(line) for line in lines), out
    # Once, at the start (the settings are read more than once).
    assert out.count("FACET_APIKEY is not a Facet setting and is ignored (did you mean FACET_API_KEY?)") == 1, out
    assert re.search(
        r" WARNING app\.commands\.serve: listening on 0\.0\.0\.0 without an API "
        r"key: .*set FACET_API_KEY=",
        out,
    ), out
    served = re.search(r" INFO app\.commands\.serve: facet (\S+) serving: (.*)", out)
    assert served, out
    assert served.group(2) == (
        f"data folder {tmp_path / 'data'}, store edge, database SQLite in "
        "the data dir, broker redis://user:***@127.0.0.1:1/0, auth off, "
        "UI not mounted"
    )
    assert "s3cret" not in out and "pw0rd" not in out


def test_a_key_a_loopback_bind_and_a_database_password(tmp_path, caplog) -> None:
    from app.commands.serve import _log_start
    from app.settings import FacetSettings

    settings = FacetSettings(
        data_dir=tmp_path / "data",
        api_key="s3cret-key",
        database_url="postgresql+psycopg://facet:pw0rd@db:5432/facet",
        qdrant_url="http://qdrant:6333",
    )
    with caplog.at_level(logging.INFO, logger="app.commands.serve"):
        _log_start("127.0.0.1", settings, ui=True)
        _log_start("0.0.0.0", settings, ui=True)  # with a key: no warning either
    assert [r.levelname for r in caplog.records] == ["INFO", "INFO"]
    assert (
        caplog.records[0]
        .getMessage()
        .endswith(
            "store Qdrant at http://qdrant:6333, database postgresql+psycopg://facet:***@db:5432/"
            "facet, auth on (FACET_API_KEY), UI at /ui"
        )
    )
    assert "s3cret-key" not in caplog.text and "pw0rd" not in caplog.text


def test_log_level_warning_quiets_facets_info_lines_too(tmp_path) -> None:
    """`--log-level warning` quieted uvicorn alone: "loaded minilm" and the other INFO lines
    of the app still printed (the test above sees them at the default level)."""
    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "FACET_UI_MOUNT": "false"}
    quiet = _serve(env, "--preload", "minilm", "--log-level", "warning")
    assert " INFO " not in quiet and "loaded minilm" not in quiet, quiet


def test_an_unknown_log_level_is_one_line(tmp_path) -> None:
    from tests.app.cli_runner import invoke_cli

    result = invoke_cli("serve", "--log-level", "loud", env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert result.returncode == 2, result
    assert result.stderr.startswith(
        "error: --log-level 'loud' is not a level; use critical, error, warning, info, debug, trace"
    ), result.stderr


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("localhost", True),
        ("::1", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.1.2.3", False),
        ("example.org", False),
    ],
)
def test_which_binds_are_loopback(host: str, loopback: bool) -> None:
    from app.commands.serve import _loopback

    assert _loopback(host) is loopback
