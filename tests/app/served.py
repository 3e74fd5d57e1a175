"""A real `facet serve` in a subprocess on a free port, for tests of its clients (the OpenAI
client, the LangChain retriever's HTTP mode)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until_healthy(proc: subprocess.Popen[str], port: int, start_s: float = 60) -> None:
    """Return once the `facet serve` ``proc`` answers ``/health`` on ``port``; the test fails
    with its output (the pipe it writes to, stdout else stderr) if it exits first, or if it is
    not up within ``start_s``."""
    deadline = time.monotonic() + start_s
    while True:
        if proc.poll() is not None:
            stream = proc.stdout or proc.stderr
            pytest.fail(f"facet serve exited with {proc.returncode}: {stream.read() if stream else ''}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"facet serve did not start within {start_s:g} s"
        time.sleep(0.2)


@contextlib.contextmanager
def facet_serve(env: dict[str, str], *, start_s: float) -> Iterator[str]:
    """``facet serve`` with ``env`` over the process's environment, until the block ends; yields
    its URL once ``/health`` answers (a test fails with the server's output if it exits first,
    or if it is not up within ``start_s``)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--port", str(port),
                             "--log-level", "warning"], env=dict(os.environ, **env), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(proc, port, start_s)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@contextlib.contextmanager
def uvicorn_in_a_thread(facet: Any) -> Iterator[int]:
    """A real uvicorn serving ``facet``'s app (``app.api.create_app``) on a free local port in a
    thread, stopped after the block; yields the port. What TestClient cannot show (connections,
    disconnects, a client over real HTTP), without a second process loading the model."""
    import threading

    import uvicorn

    from app.api import create_app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_app(facet), log_level="critical"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
            time.sleep(0.05)
        yield int(sock.getsockname()[1])
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


# Three customer messages on top-ups and exchange rates, with their intents: the records the
# LangChain tests serve.
TOPUP_RECORDS = [
    {"id": "t1", "text": "My money top-up failed again", "intent": "top_up_failed"},
    {"id": "t2", "text": "How do I top up my card with money", "intent": "top_up_by_card"},
    {"id": "t3", "text": "The exchange rate was wrong", "intent": "exchange_rate"},
]


@contextlib.contextmanager
def records_served(minilm: Any, base: Path, records: list[dict[str, Any]],
                   collection: str, api_key: str | None = None) -> Iterator[tuple[Any, str]]:
    """``records`` indexed as a jsonl into ``collection`` under ``base`` with minilm, and a real
    uvicorn serving them (``uvicorn_in_a_thread``; ``api_key``: the key it wants, if any):
    yields (the facade, the API's URL)."""
    import json

    from app.core import Facet
    from app.encoding import EmbedderCache
    from app.settings import FacetSettings

    source = base / "x.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    facet = Facet.for_serving(FacetSettings(data_dir=base / "data", api_key=api_key), embedders=cache)
    try:
        facet.index(source, collection)
        with uvicorn_in_a_thread(facet) as port:
            yield facet, f"http://127.0.0.1:{port}"
    finally:
        facet.close()
