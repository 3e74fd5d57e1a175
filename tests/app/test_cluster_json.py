"""`facet cluster --json`: one JSON object on stdout, as `facet search --json` and `facet
collections --json` print theirs (it had no --json: a script parsed the listing or wrote a
file with --out)."""

from __future__ import annotations

import json

from indexer.store import point_id
from tests.app.cli_runner import invoke_cli, tiny_data_folder

TEXTS = ["My card has not arrived yet.", "Where is my new card?", "The card I ordered never came.",
         "I want a refund for this.", "Please give my money back.", "Refund the payment, please."]


def _members_cover_the_texts(payload: dict) -> None:
    seen = []
    for cluster in payload["clusters"]:
        assert {"id", "name", "size", "keywords", "representatives", "members"} <= set(cluster)
        assert len(cluster["members"]) == cluster["size"]
        for member in cluster["members"]:
            assert payload["labels"][member["index"]] == cluster["id"]
            assert member["text"] == payload["texts"][member["index"]]
            seen.append(member["index"])
    assert sorted(seen) == list(range(len(payload["texts"])))


def test_cluster_json_of_a_file(tmp_path) -> None:
    src = tmp_path / "texts.txt"
    # A C1 control character (CSI) and an accent: escaped and kept as the other --json do
    # (printable_json), where json.dumps' default would send the CSI to the terminal raw.
    src.write_text("\n".join([*TEXTS, "café refund \x9b31m please"]))
    env = {"FACET_DATA_DIR": str(tmp_path / "data")}
    base = ["cluster", str(src), "-i", "What does the customer want?", "--k", "2",
            "--embedder", "minilm", "--explain", "", "--seed", "3"]
    result = invoke_cli(*base, "--json", env=env)
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)  # the whole of stdout: no listing beside it
    assert "\\u009b31m" in result.stdout and "\x9b" not in result.stdout and "café" in result.stdout
    assert payload["k"] == 2 and payload["seed"] == 3 and payload["source"] == str(src)
    assert payload["instruction"] == "What does the customer want?" and payload["explainer"] is None
    assert sum(c["size"] for c in payload["clusters"]) == len(TEXTS) + 1
    _members_cover_the_texts(payload)
    assert "answer" not in payload["clusters"][0]["members"][0]  # no explainer, no answers
    assert "6 texts" not in result.stdout and "7 texts in 2 clusters" in result.stderr
    # With --out FILE too: the same object in the file, "wrote" on stderr (stdout stays JSON).
    out = tmp_path / "c.json"
    both = invoke_cli(*base, "--json", "--out", str(out), env=env)
    assert both.returncode == 0, both.stderr
    assert json.loads(both.stdout)["clusters"] == json.loads(out.read_text())["clusters"]
    assert f"wrote {out}" in both.stderr
    once = invoke_cli(*base, "--json", "-o", "-", env=env)  # printed once
    assert json.loads(once.stdout)["clusters"] == payload["clusters"]


def test_cluster_json_of_a_collection_gives_the_chunk_ids(tmp_path) -> None:
    data = tiny_data_folder(tmp_path)
    result = invoke_cli("cluster", "--collection", "tiny", "-i", "topic", "--k", "2",
                        "--embedder", "minilm", "--explain", "", "--json",
                        env={"FACET_DATA_DIR": str(data)})
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    _members_cover_the_texts(payload)
    members = [m for c in payload["clusters"] for m in c["members"]]
    assert {m["doc_id"].rsplit("/", 1)[-1] for m in members} == {"d0.txt", "d1.txt"}, members
    for m in members:  # the point id, as `facet search --json` and the API give it
        assert m["id"] == point_id(m["doc_id"], m["chunk_no"])


def test_cluster_json_with_an_explainer_gives_the_answers(tmp_path, tiny_inbedder_dir) -> None:
    src = tmp_path / "texts.txt"
    src.write_text("\n".join(TEXTS))
    result = invoke_cli("cluster", str(src), "-i", "What does the customer want?", "--k", "2",
                        "--embedder", "minilm", "--explain", str(tiny_inbedder_dir), "--json",
                        env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["explainer"] == str(tiny_inbedder_dir)
    _members_cover_the_texts(payload)
    for cluster in payload["clusters"]:
        for member in cluster["members"]:
            assert member["answer"] == payload["answers"][member["index"]]


def test_a_first_clustering_times_scikit_learns_import_apart_from_k_means(tmp_path) -> None:
    """In a fresh process scikit-learn's import (1-5 s here) was timed as k-means: 3 texts said
    "kmeans 3.3s". It is its own stage, ``imports``; a process that imported it already (a
    server warms it up at start-up) has none."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    src = tmp_path / "three.txt"
    src.write_text("my card is lost\nwhere is my card\nrefund my payment\n")
    done = subprocess.run([sys.executable, "-m", "app", "cluster", str(src), "-i", "x", "--k", "2",
                           "--embedder", "minilm", "--explain", "", "--json"],
                          env={**os.environ, "FACET_DATA_DIR": str(tmp_path / "data")},
                          cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    timings = json.loads(done.stdout)["timings_ms"]
    assert timings["imports"] >= 50 and timings["kmeans"] < timings["imports"], timings
    assert "imports" in done.stderr  # "where the time went" names it
    for _ in range(2):  # (the first may import it in this test process; the second never does)
        warm = invoke_cli("cluster", str(src), "-i", "x", "--k", "2", "--embedder", "minilm",
                          "--explain", "", "--json", env={"FACET_DATA_DIR": str(tmp_path / "data")})
        assert warm.returncode == 0, warm.stderr
    assert "imports" not in json.loads(warm.stdout)["timings_ms"], warm.stdout
