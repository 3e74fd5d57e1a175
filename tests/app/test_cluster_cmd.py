"""`facet cluster`: reading texts, clustering under an instruction, explanations, bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from app.commands.cluster import read_texts
from app.errors import InvalidRequestError, NotFoundError
from tests.app.cli_runner import invoke_cli

TEXTS = ["My card has not arrived yet.", "Where is my new card?", "The card I ordered never came.",
         "I want a refund for this.", "Please give my money back.", "Refund the payment, please."]


def test_read_texts_formats(tmp_path):
    (tmp_path / "a.txt").write_text("one\n\n two \nthree\n")
    assert read_texts(tmp_path / "a.txt") == ["one", "two", "three"]
    (tmp_path / "b.jsonl").write_text('{"text": "x"}\n{"text": "y"}\n')
    assert read_texts(tmp_path / "b.jsonl") == ["x", "y"]
    (tmp_path / "c.json").write_text(json.dumps({"goal": "g", "texts": ["p", "q", "r"]}))
    assert read_texts(tmp_path / "c.json", limit=2) == ["p", "q"]


def test_read_texts_errors(tmp_path):
    with pytest.raises(NotFoundError):
        read_texts(tmp_path / "missing.txt")
    (tmp_path / "bad.jsonl").write_text('{"text": "x"}\nnot json\n')
    with pytest.raises(InvalidRequestError, match=r"bad\.jsonl:2"):
        read_texts(tmp_path / "bad.jsonl")
    (tmp_path / "one.txt").write_text("only one\n")
    with pytest.raises(InvalidRequestError, match="at least 2"):
        read_texts(tmp_path / "one.txt")


def test_cluster_prints_and_writes_explained_clusters(tmp_path, tiny_inbedder_dir):
    src = tmp_path / "texts.txt"
    src.write_text("\n".join(TEXTS))
    out = tmp_path / "clusters.json"
    result = invoke_cli("cluster", str(src), "--instruction", "What does the customer want?", "--k", "2",
                        "--embedder", str(tiny_inbedder_dir), "--explain", str(tiny_inbedder_dir), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("cluster ") >= 2
    # Progress on stderr, one line per stage when it is not a terminal, answering included.
    stages = [line.strip() for line in result.stderr.splitlines() if line.startswith("  ")]
    assert any("encoding 0/6 texts" in line for line in stages), result.stderr
    assert any(line.endswith("answering 0/6 texts") for line in stages), result.stderr
    assert stages[-1].endswith("done")
    assert "6 texts in 2 clusters in" in result.stderr and "answers " in result.stderr
    payload = json.loads(out.read_text())
    assert len(payload["labels"]) == len(TEXTS) and len(payload["answers"]) == len(TEXTS)
    assert sum(c["size"] for c in payload["clusters"]) == len(TEXTS)
    assert all(c["representatives"] for c in payload["clusters"])


def test_cluster_bad_input_is_a_message(tmp_path):
    src = tmp_path / "texts.txt"
    src.write_text("\n".join(TEXTS))
    result = invoke_cli("cluster", str(src), "--instruction", "x", "--k", "1", "--embedder", "minilm", "--explain", "")
    assert result.returncode == 2 and "k must be at least 2" in result.stderr
    assert "Traceback" not in result.stderr
    result = invoke_cli("cluster", str(src), "--instruction", "x", "--k", "9", "--embedder", "minilm", "--explain", "")
    assert result.returncode != 0 and "more than the 6 texts" in result.stderr
    result = invoke_cli("cluster", str(src), "--instruction", "x", "--embedder", "minilm", "--explain", "minilm",
                   "--k", "2")
    assert result.returncode != 0 and "not an InBedder checkpoint" in result.stderr


def test_cluster_defaults_resolve_the_shipped_inbedder_from_any_folder(tmp_path):
    """The defaults name the registered checkpoint 'inbedder', not a path relative to the repo."""
    src = tmp_path / "texts.txt"
    src.write_text("\n".join(TEXTS))
    result = subprocess.run([sys.executable, "-m", "app", "cluster", "texts.txt", "--instruction",
                             "What does the customer want?", "--k", "2", "--answer-tokens", "2"],
                            capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "unknown embedder" not in result.stderr and result.stdout.count("cluster ") >= 2
