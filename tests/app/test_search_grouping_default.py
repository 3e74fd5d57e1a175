"""`facet search` gives one result per document by default (as POST /search does, and as
measured on SciFact: +1 to +2 nDCG@10 in every mode, ten distinct documents in a top ten);
``--per-chunk`` gives the chunks as ranked, ``--group-by-document`` stays accepted."""

from __future__ import annotations

import json

import pytest

from tests.app.cli_runner import invoke_cli

LONG = {
    "a": "Aspirin lowers the risk of heart attacks. " * 12,
    "b": "Statins lower cholesterol and heart attacks. " * 12,
    "c": "Vitamin D does not prevent fractures. " * 12,
}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("grouping")
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in LONG.items()))
    done = invoke_cli("index", str(corpus), "-c", "g", "-e", "minilm", "--chunk-tokens", "16",
                      "--chunk-overlap", "0", env={"FACET_DATA_DIR": str(root / "data")})
    assert done.returncode == 0, done.stderr
    return root / "data"


def search(data, *args: str) -> list[tuple[str, int]]:
    done = invoke_cli("search", "heart attack", "-c", "g", "-k", "5", "--json", *args,
                      env={"FACET_DATA_DIR": str(data)})
    assert done.returncode == 0, done.stderr
    return [(r["doc_id"], r["chunk_no"]) for r in json.loads(done.stdout)["results"]]


def test_search_defaults_to_one_result_per_document(data) -> None:
    default = search(data)
    docs = [d for d, _ in default]
    assert len(docs) == len(set(docs)) == 3, default  # three documents, each once
    assert search(data, "--group-by-document") == default


def test_per_chunk_gives_the_chunks_as_ranked(data) -> None:
    chunks = search(data, "--per-chunk")
    assert len(chunks) == 5 and len({d for d, _ in chunks}) < 5, chunks  # a document twice


def test_help_names_both_forms() -> None:
    from typer.testing import CliRunner

    from app.cli import cli

    shown = CliRunner().invoke(cli, ["search", "--help"], terminal_width=200).output
    assert "--group-by-document" in shown and "--per-chunk" in shown
