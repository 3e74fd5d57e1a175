"""`facet serve` stops on SIGTERM while a UI page is open: uvicorn waited for every connection
to close, and an open page keeps one (Gradio's heartbeat stream), so the server logged "Waiting
for connections to close" and ran on until a second signal (the verification round of the
seventh session of 2026-12-06; `docker compose stop` then killed it at the grace period, the
job runner's shutdown never reached). A real server in a subprocess; a real streaming client."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.app.served import free_port, wait_until_healthy

ROOT = Path(__file__).resolve().parents[3]


def test_sigterm_stops_the_server_with_a_ui_page_open(tmp_path) -> None:
    from app.commands.serve import CONNECTIONS_GRACE_S

    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "FACET_API_KEY"}
    env |= {"FACET_DATA_DIR": str(tmp_path / "data"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--port", str(port),
                             "--preload", ""], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    page = None
    try:
        wait_until_healthy(proc, port)
        # As an open page does: Gradio's heartbeat, a stream the server keeps open.
        page = socket.create_connection(("127.0.0.1", port), timeout=10)
        page.sendall(f"GET /ui/gradio_api/heartbeat/page1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                     "Accept: text/event-stream\r\n\r\n".encode())
        assert page.recv(4096).startswith(b"HTTP/1.1 200"), "the heartbeat stream did not open"
        started = time.monotonic()
        proc.terminate()
        out, _ = proc.communicate(timeout=CONNECTIONS_GRACE_S + 30)
        took = time.monotonic() - started
    finally:
        if page is not None:
            page.close()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "Waiting for connections to close" in out, out  # it had one open
    assert took < CONNECTIONS_GRACE_S + 20, (took, out[-2000:])
    assert "Finished server process" in out, out[-2000:]
    # A planned close, said as such: uvicorn logged it as an ERROR and the stream's
    # CancelledError as "Exception in ASGI application" with a 100-line traceback.
    assert "Exception in ASGI application" not in out and "Traceback" not in out, out[-3000:]
    assert not [line for line in out.splitlines() if " ERROR" in line], out[-3000:]
