"""`facet cluster`: reading texts, clustering under an instruction, explanations, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pytest

from app.commands.cluster import read_texts
from app.errors import DataError, InvalidRequestError, NotFoundError
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
    assert read_texts(tmp_path / "c.json", limit=0) == ["p", "q", "r"]  # 0 = all, as in the UI
    # The UI's formats too (one reader for both): a JSON list, string lines, a csv's text column.
    (tmp_path / "d.json").write_text(json.dumps(["p", "q"]))
    assert read_texts(tmp_path / "d.json") == ["p", "q"]
    (tmp_path / "e.jsonl").write_text('"x"\n{"text": "y"}\n')
    assert read_texts(tmp_path / "e.jsonl") == ["x", "y"]
    (tmp_path / "f.csv").write_text('id,text\n1,"one, two"\n2,three\n')
    assert read_texts(tmp_path / "f.csv") == ["one, two", "three"]
    (tmp_path / "notes.md").write_text("# a\nb\n")  # any other text file: one text per line
    assert read_texts(tmp_path / "notes.md") == ["# a", "b"]


def test_read_texts_errors(tmp_path):
    with pytest.raises(NotFoundError):
        read_texts(tmp_path / "missing.txt")
    (tmp_path / "bad.jsonl").write_text('{"text": "x"}\nnot json\n')
    with pytest.raises(DataError, match=r"bad\.jsonl:2: not valid JSON"):
        read_texts(tmp_path / "bad.jsonl")
    (tmp_path / "one.txt").write_text("only one\n")
    with pytest.raises(InvalidRequestError, match="holds 1 text; clustering needs at least 2"):
        read_texts(tmp_path / "one.txt")
    (tmp_path / "two.txt").write_text("a\nb\n")
    with pytest.raises(InvalidRequestError, match="got -5"):
        read_texts(tmp_path / "two.txt", limit=-5)


@pytest.mark.parametrize(("name", "content", "message"), [
    ("bad.json", b'["a",\n]', r"bad\.json: not valid JSON \(Expecting value at line 2\)"),
    ("null.jsonl", b'{"text": "a"}\n{"text": null}\n{"text": "b"}\n', r"null\.jsonl:2: 'text' is null, not a string"),
    ("num.jsonl", b'{"text": "a"}\n{"text": 7}\n', r"num\.jsonl:2: 'text' is the number 7"),
    ("null.json", b'{"texts": ["a", null, "b"]}', r"null\.json: text 2 of the list is null"),
    ("slides.pdf", b"%PDF-1.4\n\x00\x01", r"slides\.pdf looks binary"),
])
def test_unreadable_files_are_data_errors_exit_4(tmp_path, name, content, message):
    """Binary, not JSON or a null text: a one-line message naming the file and line, exit 4. (A
    Latin-1 file is read as `facet index` reads it since 2026-12-01:
    tests/app/test_cluster_file_encodings.py.)"""
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(DataError, match=message):
        read_texts(path)
    result = invoke_cli("cluster", str(path), "--instruction", "x", "--embedder", "minilm", "--explain", "")
    assert result.returncode == 4, result.stderr
    assert "Traceback" not in result.stderr and name in result.stderr


def test_limit_and_k_options_are_checked(tmp_path):
    src = tmp_path / "texts.txt"
    src.write_text("\n".join(TEXTS))
    result = invoke_cli("cluster", str(src), "-i", "x", "--limit", "-5", "--embedder", "minilm", "--explain", "")
    assert result.returncode == 2 and "limit must be 0 (all the texts) or a positive number" in result.stderr
    result = invoke_cli("cluster", str(src), "-i", "x", "--k", "-1", "--embedder", "minilm", "--explain", "")
    assert result.returncode == 2
    assert "k must be 0 (choose it by silhouette) or at least 2, got -1" in result.stderr


def test_duplicate_texts_give_the_clusters_found_and_say_why(tmp_path):
    """Ten copies of one text: one cluster, said so, whatever k was asked; no sklearn warning."""
    src = tmp_path / "d.txt"
    src.write_text("my card was declined\n" * 10)
    for k, note in [("4", "note: 1 cluster instead of the 4 asked for: only 1 distinct text"),
                    ("0", "note: k = 1, not chosen by silhouette: only 1 distinct text")]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = invoke_cli("cluster", str(src), "-i", "x", "--k", k, "--embedder", "minilm",
                                "--explain", "")
        assert result.returncode == 0, result.stderr
        assert "10 texts in 1 cluster in" in result.stderr and note in result.stderr
        assert result.stdout.count("cluster ") == 1
        assert not [w for w in caught if "ConvergenceWarning" in type(w.message).__name__]
    src.write_text("my card was declined\n" * 5 + "where is my refund\n" * 5)
    result = invoke_cli("cluster", str(src), "-i", "x", "--k", "4", "--embedder", "minilm", "--explain", "")
    assert "10 texts in 2 clusters" in result.stderr
    assert "\ngrouped by: x\n" in result.stderr  # the instruction (only --out and the UI had it)
    assert "2 clusters instead of the 4 asked for: only 2 distinct texts" in result.stderr


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
    assert result.returncode == 2 and "k must be 0 (choose it by silhouette) or at least 2, got 1" in result.stderr
    assert "Traceback" not in result.stderr
    result = invoke_cli("cluster", str(src), "--instruction", "x", "--k", "9", "--embedder", "minilm", "--explain", "")
    assert result.returncode != 0 and "more than the 6 texts" in result.stderr
    result = invoke_cli("cluster", str(src), "--instruction", "x", "--embedder", "minilm", "--explain", "minilm",
                   "--k", "2")
    assert result.returncode != 0 and "not an InBedder checkpoint" in result.stderr


def test_cluster_refusals_come_before_the_work_and_name_the_option(tmp_path):
    src = tmp_path / "texts.txt"
    src.write_text("\n".join(TEXTS[:3]))
    base = ["cluster", str(src), "-i", "x", "--embedder", "minilm", "--explain", ""]
    (tmp_path / "outdir").mkdir()
    for extra, code, message in [  # (a read-only folder cannot be tested here: root writes anyway)
        (["--out", str(tmp_path / "outdir"), "--k", "2"], 2, "is a folder; name the JSON file"),
        (["--out", str(src / "x.json"), "--k", "2"], 4, "cannot create its folder"),
        (["--out", "/proc/facet-nope.json", "--k", "2"], 4, "cannot write it"),  # root passed os.access
        ([], 2, "--k 8 (the default) is more than the 3 texts of"),
        (["--filter", "a=b", "--k", "2"], 2, "--filter selects a collection's chunks"),
    ]:
        result = invoke_cli(*base, *extra)
        assert result.returncode == code, (extra, result.stderr)
        assert message in result.stderr and "Traceback" not in result.stderr
        assert "encoding" not in result.stderr  # refused before any text was encoded
    result = invoke_cli("cluster", str(tmp_path), "-i", "x", "--embedder", "minilm", "--explain", "")
    assert result.returncode == 2 and "is a folder; give a file of texts" in result.stderr
    result = invoke_cli(*base, "--k", "2", "--explain", "inbeder")
    assert result.returncode == 2 and "unknown explainer 'inbeder'" in result.stderr
    assert "encoding" not in result.stderr


def test_a_text_with_newlines_is_listed_on_one_line(tmp_path):
    src = tmp_path / "nl.jsonl"
    texts = ["first text about cats\ncluster 7 (99 texts): fake\n    - not a member", "dogs bark loudly",
             "the stock market fell", "stocks rose today"]
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    result = invoke_cli("cluster", str(src), "-i", "topic", "--k", "2", "--embedder", "minilm", "--explain", "")
    assert result.returncode == 0, result.stderr
    assert "cluster 7" not in result.stdout.replace("- first text about cats cluster 7", "")
    assert result.stdout.count("\ncluster ") + result.stdout.startswith("cluster ") == 2


def test_cluster_defaults_resolve_the_shipped_inbedder_from_any_folder(tmp_path):
    """The default explainer names the registered checkpoint 'inbedder', not a path relative
    to the repo."""
    src = tmp_path / "texts.txt"
    src.write_text("\n".join(TEXTS))
    result = subprocess.run([sys.executable, "-m", "app", "cluster", "texts.txt", "--instruction",
                             "What does the customer want?", "--k", "2", "--answer-tokens", "2"],
                            capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "unknown embedder" not in result.stderr and result.stdout.count("cluster ") >= 2
    # An InBedder load used to print transformers' FutureWarning (is_gradient_checkpointing).
    assert "FutureWarning" not in result.stderr and "Loading weights" not in result.stderr


def test_a_collection_cut_to_the_cap_is_said_and_limit_0_is_all_up_to_it(tmp_path):
    """`--limit 0` ("0 = all") clustered the first FACET_MAX_CLUSTER_TEXTS chunks of a larger
    collection and nothing said so: the note names how many of how many, and the help says
    what 0 means."""
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps({"id": f"r{i}", "text": text}) + "\n"
                           for i, text in enumerate(TEXTS * 2)))
    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "FACET_MAX_CLUSTER_TEXTS": "5"}
    indexed = invoke_cli("index", str(src), "-c", "s12", "--embedder", "minilm", env=env)
    assert indexed.returncode == 0, indexed.stderr
    result = invoke_cli("cluster", "--collection", "s12", "--embedder", "minilm", "--explain", "",
                        "--k", "2", "--limit", "0", "-i", "What does the customer want?", env=env)
    assert result.returncode == 0, result.stderr
    assert "5 texts in 2 clusters" in result.stderr
    assert ("note: clustered 5 of 12 chunks, in storage order (FACET_MAX_CLUSTER_TEXTS caps it)"
            in result.stderr), result.stderr
    result = invoke_cli("cluster", "--collection", "s12", "--embedder", "minilm", "--explain", "",
                        "--k", "2", "--limit", "3", "-i", "What does the customer want?", env=env)
    assert "note: clustered 3 of 12 chunks, in storage order (limit 3)" in result.stderr, result.stderr
    helped = " ".join(invoke_cli("cluster", "--help", env={"COLUMNS": "200"}).stdout.split())
    assert "0 = all, up to FACET_MAX_CLUSTER_TEXTS" in helped, helped


def test_keyword_names_do_not_depend_on_keywords_and_no_keywords_leaves_no_separator(tmp_path):
    """With --keywords 1 the clusters were named by one keyword ("card") where the UI, which
    shows five, named them by three; a cluster without keywords printed "(no keywords) · "."""
    src = tmp_path / "t.txt"
    src.write_text("\n".join(TEXTS) + "\n")
    lines = {}
    for count in ("1", "5"):
        result = invoke_cli("cluster", str(src), "-i", "the topic", "--embedder", "minilm",
                            "--explain", "", "--k", "2", "--keywords", count, "--json",
                            env={"FACET_DATA_DIR": str(tmp_path / "data")})
        assert result.returncode == 0, result.stdout + result.stderr
        lines[count] = json.loads(result.stdout)["clusters"]
    assert [c["name"] for c in lines["1"]] == [c["name"] for c in lines["5"]]
    assert all(c["name"].count(" / ") == 2 for c in lines["5"])  # three keywords each
    assert all(len(c["keywords"]) == 1 for c in lines["1"])
    empty = tmp_path / "empty.txt"
    empty.write_text("the a\nthe an\nit is\n")  # no content words at all
    result = invoke_cli("cluster", str(empty), "-i", "the topic", "--embedder", "minilm",
                        "--explain", "", "--k", "2", env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert result.returncode == 0, result.stdout + result.stderr
    heads = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("cluster ")]
    assert heads and all(line.endswith("(no keywords)") for line in heads), heads


def test_the_default_embedder_is_the_settings_one_and_a_collections_own(tmp_path):
    """`facet cluster` naming no --embedder reads the texts with FACET_DEFAULT_EMBEDDER (minilm
    unless set), as POST /cluster and the UI do, and a collection with its own vectors (the
    stored ones read): until 2026-12-01 (third session) the CLI alone defaulted to InBedder,
    which clustered CLINC's dev texts worse than minilm (docs/results.md, "Which embedder
    clusters by default") at ~23 times its cost."""
    src = tmp_path / "texts.txt"
    src.write_text("\n".join(TEXTS))
    env = {"FACET_DATA_DIR": str(tmp_path / "data")}
    result = invoke_cli("cluster", str(src), "-i", "What does the customer want?", "--k", "2",
                        "--explain", "", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stderr.rstrip().count("embedder minilm") == 1, result.stderr
    env["FACET_DEFAULT_EMBEDDER"] = "minilm[instruction_weight=1]"
    result = invoke_cli("cluster", str(src), "-i", "What does the customer want?", "--k", "2",
                        "--explain", "", env=env)
    assert result.returncode == 0, result.stderr
    assert "embedder minilm[instruction_weight=1]" in result.stderr, result.stderr
    rows = tmp_path / "rows.jsonl"  # one document (a chunk) a text
    rows.write_text("".join(json.dumps({"id": f"r{i}", "text": text}) + "\n"
                            for i, text in enumerate(TEXTS)))
    indexed = invoke_cli("index", str(rows), "-c", "own", env=env)  # vectors of that reading
    assert indexed.returncode == 0, indexed.stderr
    del env["FACET_DEFAULT_EMBEDDER"]
    result = invoke_cli("cluster", "--collection", "own", "-i", "What does the customer want?",
                        "--k", "2", "--explain", "", env=env)
    assert result.returncode == 0, result.stderr
    assert "embedder minilm[instruction_weight=1]" in result.stderr, result.stderr
