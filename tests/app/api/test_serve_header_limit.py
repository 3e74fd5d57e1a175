"""`facet serve` bounds a request's headers: uvicorn's default parser (httptools) read any size,
and one unauthenticated request of a 300 MB header held the event loop for 94 s (every client
stalled) and 0.9 GB (the security review of the seventh session of 2026-12-06). h11 answers 400
past ``MAX_HEADER_BYTES``; an ordinary large header (a long cookie) passes. A real server in a
subprocess; raw sockets."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.app.served import free_port, wait_until_healthy

ROOT = Path(__file__).resolve().parents[3]


def test_a_huge_header_is_refused_at_once_and_the_server_serves_on(tmp_path) -> None:
    from app.commands.serve import MAX_HEADER_BYTES

    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "FACET_API_KEY"}
    env |= {"FACET_DATA_DIR": str(tmp_path / "data"), "OMP_NUM_THREADS": "1",
            "FACET_API_KEY": "k" * 32}
    proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--port", str(port),
                             "--preload", ""], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        wait_until_healthy(proc, port)
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", port), timeout=20) as client:
            client.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ")
            try:
                for _ in range(32):  # 32 MB, unauthenticated
                    client.sendall(b"A" * (1 << 20))
                client.sendall(b"\r\n\r\n")
            except OSError:
                pass  # refused and closed while it still sent
            answer = client.recv(200)
        assert answer.startswith(b"HTTP/1.1 400"), answer
        assert time.monotonic() - started < 10
        base = f"http://127.0.0.1:{port}"
        long_cookie = {"Cookie": "c=" + "a" * (MAX_HEADER_BYTES // 2)}
        assert httpx.get(f"{base}/health", headers=long_cookie).status_code == 200
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
    assert "Invalid HTTP request received" in out, out[-2000:]
