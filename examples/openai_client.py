"""The official ``openai`` client against ``facet serve``, checked against ``facet embed``.

Start a server first (``facet serve``), then::

    python examples/openai_client.py [--base-url http://127.0.0.1:8000/v1] [--model minilm]

For each encoding (the client's default, which asks for base64; ``float``; ``base64``) it
prints the smallest cosine between the API's vectors and ``facet embed``'s for the same
texts, with and without an instruction (Facet's fields go through ``extra_body``). With no
server there it says so in one line, before anything else runs.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys

import httpx
import numpy as np
from openai import OpenAI
from openai.types import Embedding

TEXTS = ["My card payment was declined at the shop.", "How long does a transfer take?",
         "I want to change my PIN", "Is there a fee for topping up by card?"]


def facet_embed(model: str, texts: list[str], *extra: str) -> np.ndarray:
    """Vectors printed by the ``facet embed`` command (a fresh process)."""
    out = subprocess.run([sys.executable, "-m", "app", "embed", "--embedder", model, *extra,
                          *texts], capture_output=True, text=True, check=True)
    return np.asarray(json.loads(out.stdout)["vectors"], dtype=np.float64)


def min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return float(np.sum(a * b, axis=1).min())


def as_array(data: list[Embedding]) -> np.ndarray:
    """Rows as float arrays, whether the client decoded them or left the base64 string."""
    rows = []
    for item in data:
        emb: object = item.embedding
        rows.append(np.frombuffer(base64.b64decode(emb), dtype="<f4") if isinstance(emb, str)
                    else np.asarray(emb, dtype=np.float64))
    return np.stack(rows).astype(np.float64)


def check_server(base_url: str) -> None:
    """Exit with one line unless a Facet server answers ``GET /health`` at the URL's root
    within 3 s: with none, two ``facet embed`` runs and the client's retries took ~70 s and
    ended in an ``APIConnectionError`` traceback."""
    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        status = httpx.get(f"{root}/health", timeout=3).status_code
    except httpx.HTTPError as e:
        sys.exit(f"no Facet server answers at {root} ({type(e).__name__}); start one with "
                 "`facet serve` (--port for another port than 8000) and run this again")
    if status != 200:
        sys.exit(f"{root}/health answered {status}, not a Facet server's 200; start one with "
                 "`facet serve` or pass its --base-url")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    parser.add_argument("--model", default="minilm")
    args = parser.parse_args()
    check_server(args.base_url)
    client = OpenAI(base_url=args.base_url, api_key=os.environ.get("FACET_API_KEY", "unused"))

    plain = facet_embed(args.model, TEXTS)
    instructed = facet_embed(args.model, TEXTS, "--role", "query", "--instruction",
                             "Find the customer's intent")
    for label, kwargs in (("client default (base64 on the wire)", {}),
                          ("encoding_format=float", {"encoding_format": "float"}),
                          ("encoding_format=base64", {"encoding_format": "base64"})):
        response = client.embeddings.create(model=args.model, input=TEXTS, **kwargs)  # type: ignore[arg-type]
        with_instruction = client.embeddings.create(
            model=args.model, input=TEXTS, **kwargs,  # type: ignore[arg-type]
            extra_body={"instruction": "Find the customer's intent", "role": "query"})
        vectors = as_array(response.data)
        cos, cos_i = min_cosine(vectors, plain), min_cosine(as_array(with_instruction.data), instructed)
        print(f"{label:37s} {vectors.shape[0]}x{vectors.shape[1]}: min cosine to facet embed "
              f"{cos:.7f} (1 - cos = {1 - cos:.1e}); with instruction + role=query {cos_i:.7f} "
              f"(1 - cos = {1 - cos_i:.1e}); usage {response.usage.prompt_tokens} tokens")


if __name__ == "__main__":
    main()
