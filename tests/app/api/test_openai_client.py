"""``facet serve`` as a real uvicorn subprocess, driven by the official ``openai`` client:
its vectors equal ``facet embed``'s (float and base64), and bad requests come back as the
client's typed 4xx errors while the server keeps serving."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

openai = pytest.importorskip("openai")

from ..served import facet_serve  # noqa: E402

TEXTS = ["My card payment was declined at the shop.", "How long does a transfer take?",
         "I want to change my PIN"]


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("serve") / "data"
    # No Gradio UI at /ui (importing it was half the start-up): these tests use the API only.
    with facet_serve({"FACET_DATA_DIR": str(data), "FACET_API_KEY": "test-key", "FACET_UI_MOUNT": "false"},
                     start_s=180) as url:
        yield url


def facet_embed(*args: str) -> np.ndarray:
    """``facet embed ARGS`` (in this process: the server above is the subprocess under test)."""
    from tests.app.cli_runner import invoke_cli

    result = invoke_cli("embed", *args)
    assert result.returncode == 0, result.stderr
    return np.asarray(json.loads(result.stdout)["vectors"], dtype=np.float64)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return np.sum(a * b, axis=1)


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=f"{server}/v1", api_key="test-key", max_retries=0)


def test_openai_client_matches_facet_embed(client) -> None:
    want = facet_embed("--embedder", "minilm", *TEXTS)
    default = client.embeddings.create(model="minilm", input=TEXTS)  # the client asks for base64
    floats = client.embeddings.create(model="minilm", input=TEXTS, encoding_format="float")
    packed = client.embeddings.create(model="minilm", input=TEXTS, encoding_format="base64")
    for response in (default, floats):
        got = np.asarray([d.embedding for d in response.data], dtype=np.float64)
        assert got.shape == (3, 384)
        assert cosines(got, want).min() > 0.9999
    raw = [np.frombuffer(__import__("base64").b64decode(d.embedding), dtype="<f4")
           for d in packed.data]
    assert cosines(np.stack(raw).astype(np.float64), want).min() > 0.9999
    assert floats.model == "minilm" and floats.usage.prompt_tokens > 0

    # Facet's own fields go through extra_body.
    q = client.embeddings.create(model="minilm", input=TEXTS[:1], encoding_format="float",
                                 extra_body={"instruction": "Find the intent", "role": "query"})
    want_q = facet_embed("--embedder", "minilm", "--role", "query", "--instruction",
                         "Find the intent", TEXTS[0])
    assert cosines(np.asarray([q.data[0].embedding]), want_q)[0] > 0.9999
    assert cosines(np.asarray([q.data[0].embedding]), want[:1])[0] < 0.999  # it changed them


def test_bad_requests_are_typed_4xx_and_the_server_survives(client, server) -> None:
    cases = [
        (openai.BadRequestError, dict(model="minilm", input=[])),
        (openai.BadRequestError, dict(model="minilm", input=["ok", 3])),
        (openai.NotFoundError, dict(model="text-embedding-3-small", input="x")),
        (openai.BadRequestError, dict(model="minilm", input="x", encoding_format="base65")),
        (openai.APIStatusError, dict(model="minilm", input=["x"] * 10_000)),
    ]
    for error, kwargs in cases:
        with pytest.raises(error) as info:
            client.embeddings.create(**kwargs)
        assert 400 <= info.value.status_code < 500 and info.value.body["message"]
    assert info.value.status_code == 413
    nokey = openai.OpenAI(base_url=f"{server}/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        nokey.embeddings.create(model="minilm", input="x")
    missing = httpx.post(f"{server}/v1/embeddings", json={"model": "minilm", "input": "x"})
    assert missing.status_code == 401 and missing.json()["error"]["type"] == "authentication_error"
    assert client.embeddings.create(model="minilm", input="still up").data[0].embedding


def test_search_over_http(server, tmp_path) -> None:
    headers = {"Authorization": "Bearer test-key"}
    src = Path(tmp_path) / "notes.jsonl"
    src.write_text("".join(json.dumps({"id": f"n{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    job = httpx.post(f"{server}/jobs", json={"source": str(src), "collection": "notes"},
                     headers=headers).json()
    deadline = time.monotonic() + 120
    while job["state"] in ("queued", "running"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
        job = httpx.get(f"{server}/jobs/{job['id']}", headers=headers).json()
    assert job["state"] == "completed", job
    hits = httpx.post(f"{server}/search", json={"query": "PIN change", "collection": "notes",
                                                "k": 1}, headers=headers).json()["results"]
    assert hits[0]["doc_id"] == "n2"
