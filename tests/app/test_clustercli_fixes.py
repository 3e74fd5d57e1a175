"""`facet cluster`'s CLI, found by an explorer (2026-11-30): `-o` onto the `--labels` file
overwrote the gold labels (exit 0); with `--limit` the cap's and `--k`'s refusals counted the
texts taken as the file's ("msgs.txt holds 20 texts" of a file of 30); `--answer-tokens` with
`--explain ''` was silently ignored; and the CLI could not cluster a search's results
(`--collection C --query TEXT`, as POST /cluster's ``search``, the facade and the UI can)."""

from __future__ import annotations

import json

import pytest

from tests.app.cli_runner import invoke_cli

TEXTS = ["My card has not arrived yet.", "Where is my new card?", "The card I ordered never came.",
         "I want a refund for this.", "Please give my money back.", "Refund the payment, please."]
GOLD = ["card", "card", "card", "refund", "refund", "refund"]
BASE = ("-i", "What does the customer want?", "-e", "minilm", "--explain", "")


@pytest.fixture
def files(tmp_path):
    src = tmp_path / "texts.txt"
    src.write_text("\n".join(TEXTS) + "\n")
    labels = tmp_path / "labels.txt"
    labels.write_text("\n".join(GOLD) + "\n")
    return src, labels, {"FACET_DATA_DIR": str(tmp_path / "data")}


def test_out_onto_the_labels_file_is_refused_and_nothing_is_written(tmp_path, files) -> None:
    src, labels, env = files
    before = labels.read_bytes()
    link = tmp_path / "link.txt"
    link.symlink_to(labels)
    (tmp_path / "sub").mkdir()
    for out in (labels, tmp_path / "sub" / ".." / "labels.txt", link):
        done = invoke_cli("cluster", str(src), *BASE, "--k", "2", "--labels", str(labels),
                          "-o", str(out), env=env)
        assert done.returncode == 2, (out, done.stderr)
        assert done.stderr.strip() == (f"error: --out {out} is the --labels file; writing the "
                                       "result there would overwrite the labels: name another "
                                       "JSON file")
        assert labels.read_bytes() == before
    # (Another file is written as before.)
    other = tmp_path / "result.json"
    done = invoke_cli("cluster", str(src), *BASE, "--k", "2", "--labels", str(labels),
                      "-o", str(other), env=env)
    assert done.returncode == 0, done.stderr
    assert "v_measure" in json.loads(other.read_text()) and labels.read_bytes() == before


def test_limit_refusals_count_what_the_limit_took_of_the_file(tmp_path) -> None:
    src = tmp_path / "msgs.txt"
    src.write_text("".join(f"message number {i}\n" for i in range(30)))
    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "FACET_MAX_CLUSTER_TEXTS": "10"}
    over = invoke_cli("cluster", str(src), *BASE, "--limit", "20", env=env)
    assert over.returncode != 0
    assert over.stderr.strip() == (
        f"error: {src}: --limit 20 took 20 of its 30 texts, more than the 10 clustered at most "
        "(FACET_MAX_CLUSTER_TEXTS); cluster the first 10 with --limit 10, or raise "
        "FACET_MAX_CLUSTER_TEXTS")
    few = invoke_cli("cluster", str(src), *BASE, "--limit", "3", env=env)
    assert few.returncode == 2
    assert few.stderr.strip() == (
        f"error: --k 8 (the default) is more than the 3 texts clustered ({src}: --limit 3 took 3 "
        "of its 30 texts); give a smaller --k or a larger --limit, or --k 0 to choose it")
    # Without a cut (no --limit, or one over the file's count) the file's own count, as before.
    whole = invoke_cli("cluster", str(src), *BASE, "--limit", "40", env=env)
    assert f"error: {src} holds 30 texts, more than the 10 clustered" in whole.stderr


def test_answer_tokens_without_an_explainer_is_refused(files) -> None:
    src, _labels, env = files
    done = invoke_cli("cluster", str(src), *BASE, "--k", "2", "--answer-tokens", "4", env=env)
    assert done.returncode == 2
    assert done.stderr.strip() == ("error: --answer-tokens is how many tokens the explainer "
                                   "generates per text; --explain '' names none (the keywords "
                                   "come from the texts)")
    # A blank explainer names none either (the service reads it as ''): refused alike
    blank = [a if a != "" else " " for a in BASE]
    assert "--explain" in BASE and blank != list(BASE)
    spaced = invoke_cli("cluster", str(src), *blank, "--k", "2", "--answer-tokens", "4", env=env)
    assert spaced.returncode == 2 and "--answer-tokens is how many" in spaced.stderr, spaced.stderr
    # With the default explainer (inbedder) it is used: not refused (a --k over the 6 texts is,
    # before any model loads).
    used = invoke_cli("cluster", str(src), "-i", "x", "-e", "minilm", "--k", "9",
                      "--answer-tokens", "4", env=env)
    assert used.returncode == 2 and "--k 9 is more than the 6 texts" in used.stderr


DOCS = {"a": "My card payment was declined at the shop.",
        "b": "The card was declined twice this morning.",
        "c": "Why is my card declined online?",
        "d": "I want to open a savings account.",
        "e": "How do I close my savings account?",
        "f": "Weather is sunny and warm today."}


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """A collection ``notes`` of six one-chunk documents, indexed with minilm."""
    root = tmp_path_factory.mktemp("clustercli")
    src = root / "notes.jsonl"
    src.write_text("".join(json.dumps({"id": name, "text": text,
                                       "topic": "card" if name < "d" else "other"}) + "\n"
                           for name, text in DOCS.items()))
    env = {"FACET_DATA_DIR": str(root / "data")}
    done = invoke_cli("index", str(src), "-c", "notes", "-e", "minilm", env=env)
    assert done.returncode == 0, done.stderr
    return env


def _search(env, *args: str) -> list[str]:
    done = invoke_cli("search", *args, "-c", "notes", "--per-chunk", "--json", env=env)
    assert done.returncode == 0, done.stderr
    return [r["text"] for r in json.loads(done.stdout)["results"]]


def test_cluster_a_search_s_results(searched) -> None:
    env = searched
    done = invoke_cli("cluster", "--collection", "notes", "--query", "card declined",
                      "--top-k", "4", *BASE, "--k", "2", "--json", env=env)
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    # The search's top 4 (per chunk, as the facade's SearchRequest), clustered in its order.
    assert payload["texts"] == _search(env, "card declined", "-k", "4")
    assert len(payload["labels"]) == 4 and payload["source"] == "notes"
    assert all("score" in s and s["doc_id"] for s in payload["sources"])
    # The search is recorded, as POST /cluster's search reads it (a saved --query run read as a
    # plain --collection one).
    assert payload["search"] == {"query": "card declined", "collection": "notes", "instruction": None,
                                 "k": 4, "filters": {}, "embedder": None, "mode": "auto"}
    # --filter, --search-instruction, --mode and --search-embedder go to the search; the
    # query may come from standard input.
    filtered = invoke_cli("cluster", "-c", "notes", "--query", "-", "--filter", "topic=card",
                          "--search-instruction", "find the problem", "--mode", "dense",
                          "--search-embedder", "minilm", *BASE, "--k", "2", "--json",
                          env=env, input="card declined\n")
    assert filtered.returncode == 0, filtered.stderr
    texts = json.loads(filtered.stdout)["texts"]
    assert json.loads(filtered.stdout)["search"] == {
        "query": "card declined", "collection": "notes", "instruction": "find the problem", "k": 100,
        "filters": {"topic": "card"}, "embedder": "minilm", "mode": "dense"}
    assert sorted(texts) == sorted(DOCS[n] for n in "abc")
    assert texts == _search(env, "card declined", "-f", "topic=card", "-i", "find the problem",
                            "-m", "dense")


def test_query_options_refused_where_unused(files, searched) -> None:
    src, _labels, _env = files
    cases = [
        (("cluster", str(src), "--query", "card", *BASE),
         "error: --query clusters the results of a search of a collection (--collection NAME); "
         "a file's texts are all clustered"),
        (("cluster", "--query", "card", *BASE),
         "error: --query clusters the results of a search: give the collection to search with "
         "--collection NAME"),
        (("cluster", "-c", "notes", "--top-k", "5", *BASE),
         "error: --top-k is an option of the search whose results are clustered (--collection "
         "NAME --query TEXT)"),
        (("cluster", str(src), "--search-instruction", "x", *BASE),
         "error: --search-instruction is an option of the search whose results are clustered "
         "(--collection NAME --query TEXT)"),
        (("cluster", "-c", "notes", "--query", "card", "--limit", "5", *BASE),
         "error: --limit takes a file's or a collection's first texts; with --query, --top-k N "
         "is how many results are clustered"),
        (("cluster", "-c", "notes", "--query", "card", "--top-k", "1", *BASE),
         "error: --top-k is the number of results clustered: from 2 to 1,000 (a search returns "
         "at most 1,000), got 1"),
        (("cluster", "-c", "notes", "--query", "card", "--top-k", "4", *BASE),
         "error: --k 8 (the default) is more than the 4 results clustered (--top-k 4); give a "
         "smaller --k or a larger --top-k, or --k 0 to choose it"),
    ]
    for args, said in cases:
        done = invoke_cli(*args, env=searched)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.strip() == said


def test_help_names_the_search_options() -> None:
    done = invoke_cli("cluster", "--help", env={"COLUMNS": "200"})
    assert done.returncode == 0
    for flag in ("--query", "--search-instruction", "--top-k", "--mode", "--search-embedder"):
        assert flag in done.stdout
