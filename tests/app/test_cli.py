"""The `facet` CLI foundation commands, run as a user would (a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np


def facet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=300)


def test_embedders_lists_builtins_as_json():
    result = facet("embedders", "--json")
    assert result.returncode == 0, result.stderr
    names = {row["name"] for row in json.loads(result.stdout)}
    assert {"minilm", "backbone-mean", "backbone-prompteol"} <= names


def test_embed_prints_normalised_vectors():
    result = facet("embed", "--embedder", "minilm", "--instruction", "Represent the topic", "a cat", "a dog")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    vectors = np.array(payload["vectors"])
    assert payload["dim"] == 384 and vectors.shape == (2, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)


def test_unknown_embedder_is_a_message_not_a_traceback():
    result = facet("embed", "--embedder", "nope", "x")
    assert result.returncode == 2
    assert "unknown embedder 'nope'" in result.stderr and "minilm" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_role_is_a_message_not_a_traceback():
    result = facet("embed", "--role", "passage", "x")
    assert result.returncode == 2
    assert "unknown role 'passage'" in result.stderr
    assert "Traceback" not in result.stderr
