"""uvicorn's access line under `facet serve` and `facet ui` masks key-like query parameters as
`***`, as `app.api.errors` masks its own lines (docs/api.md): a team's
`curl "$B/collections?api_key=$KEY"` wrote `"GET /collections?api_key=<the key> HTTP/1.1" 400`
to the server log in clear. Real servers in subprocesses, their output captured."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.app.served import free_port, wait_until_healthy

ROOT = Path(__file__).resolve().parents[3]
SECRETS = {"api_key": "s3cret-team-key-1234", "token": "T0KEN-5678", "password": "pw-9abc"}


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "FACET_API_KEY"}
    return env | {"FACET_DATA_DIR": str(tmp_path / "data"), "OMP_NUM_THREADS": "1"}


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.terminate()
    out, _ = proc.communicate(timeout=30)
    return out


def test_serve_access_lines_mask_key_like_query_parameters(tmp_path) -> None:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--port", str(port), "--preload", "",
                             "--log-level", "info"], env=_env(tmp_path), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until_healthy(proc, port)
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/collections?api_key={SECRETS['api_key']}").status_code == 400
        assert httpx.get(f"{base}/jobs?collection=c&token={SECRETS['token']}&limit=3").status_code == 400
        assert httpx.get(f"{base}/health?password={SECRETS['password']}").status_code == 400
        assert httpx.get(f"{base}/nowhere?API_KEY={SECRETS['api_key']}").status_code == 404
        # A name percent-encoded, a value holding a quote: each value masked whole.
        assert httpx.get(f"{base}/info?api%5Fkey={SECRETS['api_key']}").status_code == 400
        assert httpx.get(f"{base}/info?token=ab'{SECRETS['token']}&x=1").status_code == 400
    finally:
        out = _stop(proc)
    for secret in SECRETS.values():
        assert secret not in out, out
    assert '"GET /collections?api_key=*** HTTP/1.1" 400' in out, out
    assert '"GET /jobs?collection=c&token=***&limit=3 HTTP/1.1" 400' in out, out  # the rest kept
    assert '"GET /health?password=*** HTTP/1.1" 400' in out, out
    assert '"GET /nowhere?API_KEY=*** HTTP/1.1" 404' in out, out
    assert '"GET /info?api%5Fkey=*** HTTP/1.1" 400' in out, out
    assert '"GET /info?token=***&x=1 HTTP/1.1" 400' in out, out


def test_a_request_target_is_masked_whole_value_by_value() -> None:
    """``mask_query`` (the access line's request target): the whole value up to the next ``&``,
    ``;`` or ``#``, names read percent-decoded; other parameters and the fragment kept."""
    from indexer.errors import mask_query, mask_secrets

    assert mask_query("/c?api%5Fkey=ab'cd&x=1") == "/c?api%5Fkey=***&x=1"
    assert mask_query("/c?a=1;Access-Token=z\"z#frag") == "/c?a=1;Access-Token=***#frag"
    assert mask_query("/c?x=1&keyboard=qwerty&monkey=1") == "/c?x=1&keyboard=qwerty&monkey=1"
    assert mask_query("/c?api_key+=AK12&x=1") == "/c?api_key+=***&x=1"  # "api_key " to the API
    assert mask_query("/c?token") == "/c?token"  # no value
    # A signed URL's and a session's names (shown in clear until the third session of
    # 2026-12-07: the API exploration's "signature=", "bearer=", S3's "X-Amz-Signature=").
    assert mask_query("/h?signature=L1&session=L2&bearer=L3&jwt=L4&pass=L5&x=1") == (
        "/h?signature=***&session=***&bearer=***&jwt=***&pass=***&x=1")
    assert mask_query("/o?X-Amz-Signature=ab&X-Amz-Credential=cd&sig=ef&session_id=gh") == (
        "/o?X-Amz-Signature=***&X-Amz-Credential=***&sig=***&session_id=***")
    assert mask_query("/c?passage=1&signal=2&design=3&sign=4") == "/c?passage=1&signal=2&design=3&sign=4"
    # The short names only as a whole name ("first_pass" and "per_session" were masked), and
    # the session cookies' names of Java and PHP.
    kept = "/c?first_pass=1&two-pass=2&has_session=3&per_session=4&is_sig=5"
    assert mask_query(kept) == kept
    assert mask_query("/c?JSESSIONID=a1&PHPSESSID=b2&x=1") == "/c?JSESSIONID=***&PHPSESSID=***&x=1"
    assert mask_secrets("at http://h/app;jsessionid=A1B2 now") == "at http://h/app;jsessionid=*** now"
    assert mask_query("/c") == "/c"
    # In messages too, a percent-encoded name is masked.
    assert mask_secrets("see http://h/c?my%2Dapi%5Fkey=abc.") == "see http://h/c?my%2Dapi%5Fkey=***."


# `facet ui`: Gradio starts uvicorn at log level warning, so its access lines are off; opened
# here (after uvicorn's own log set-up) as a deployment's logging could, they must be masked.
UI_WITH_ACCESS_LOG = """
import logging, sys
import uvicorn.config
configure = uvicorn.config.Config.configure_logging
def configure_logging(self):
    configure(self)
    logging.getLogger("uvicorn.access").setLevel(logging.INFO)
uvicorn.config.Config.configure_logging = configure_logging
sys.argv = ["facet", "ui", "--port", sys.argv[1], "--preload", ""]
from app.cli import main
main()
"""


def test_ui_access_lines_mask_key_like_query_parameters(tmp_path) -> None:
    pytest.importorskip("gradio")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", UI_WITH_ACCESS_LOG, str(port)], env=_env(tmp_path),
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            try:
                answer = httpx.get(f"{base}/?api_key={SECRETS['api_key']}", timeout=2)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "facet ui did not start within 60 s"
                time.sleep(0.2)
        assert answer.status_code == 200
        httpx.get(f"{base}/config?x=1&token={SECRETS['token']}", timeout=5)
        time.sleep(0.3)  # the access lines are written after the response
    finally:
        out = _stop(proc)
    for secret in SECRETS.values():
        assert secret not in out, out
    assert '"GET /?api_key=*** HTTP/1.1" 200' in out, out
    assert "GET /config?x=1&token=*** HTTP/1.1" in out, out


def test_a_huge_request_target_is_cut_in_the_access_line() -> None:
    """uvicorn's access line logged a 5,000-character collection name in the path whole on
    every request, where the error line cuts it (the final read of the third session of
    2026-12-07). Its arguments as uvicorn passes them."""
    import logging

    from app.commands.common import _ACCESS_MASK

    target = "/collections/" + "u" * 5000 + "?api_key=s3cret"
    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1,
                               '%s - "%s %s HTTP/%s" %d', ("127.0.0.1:5", "GET", target, "1.1", 400),
                               None)
    assert _ACCESS_MASK.filter(record)
    line = record.getMessage()
    assert len(line) < 400 and "s3cret" not in line, line
    assert f"GET /collections/{'u' * 187}… (5,025 characters) HTTP/1.1" in line, line  # (its key masked first)
    short = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, '%s "%s %s"',
                              ("127.0.0.1:5", "GET", "/collections/notes?token=t1"), None)
    _ACCESS_MASK.filter(short)
    assert short.getMessage().endswith('"GET /collections/notes?token=***"')
