"""`facet bench`'s own `facet serve` child (``api_bench.served``) may load the embedder it is
benchmarking, whatever it is: `facet bench --parts api-search -e 'minilm[instruction_weight=1]'`
ended in a 404 traceback at the first search (the server refused the spec, which
FACET_API_MODELS did not list), and a FACET_API_MODELS of the shell's did the same to a plain
name. A real server process."""

from __future__ import annotations

import httpx


def test_the_bench_server_serves_the_embedder_benchmarked(tmp_path, monkeypatch) -> None:
    from app.services.api_bench import served

    monkeypatch.setenv("FACET_API_MODELS", '["causal-eos"]')  # the shell's own, for its own server
    spec = "minilm[instruction_weight=1]"
    data = tmp_path / "data"
    data.mkdir()
    with served(data, preload=spec, timeout_s=120) as url:
        answer = httpx.post(f"{url}/v1/embeddings", json={"model": spec, "input": ["a parcel arrived"]}, timeout=60)
    assert answer.status_code == 200, answer.text
    assert len(answer.json()["data"][0]["embedding"]) == 384
