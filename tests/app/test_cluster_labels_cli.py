"""`facet cluster FILE --labels LABELS`: the V-measure against gold labels, as only the UI's
Cluster tab gave it (a CLI user scored the --json labels with a script of their own). The
labels are read as the UI's upload reads them; a count other than the texts' and a clustering
of a collection are refused with one line (exit 2)."""

from __future__ import annotations

import json

from sklearn.metrics import v_measure_score

from tests.app.cli_runner import invoke_cli

TEXTS = ["My card has not arrived yet.", "Where is my new card?", "The card I ordered never came.",
         "I want a refund for this.", "Please give my money back.", "Refund the payment, please."]
GOLD = ["card", "card", "card", "refund", "refund", "money"]


def _files(tmp_path):
    src = tmp_path / "texts.txt"
    src.write_text("\n".join(TEXTS))
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"labels": GOLD}))  # GoalEx's labels.json, as the UI reads it
    return src, labels, {"FACET_DATA_DIR": str(tmp_path / "data")}


def test_labels_give_the_v_measure_in_the_summary_and_json(tmp_path) -> None:
    src, labels, env = _files(tmp_path)
    base = ["cluster", str(src), "-i", "What does the customer want?", "--embedder", "minilm",
            "--explain", "", "--labels", str(labels)]
    result = invoke_cli(*base, "--k", "2", "--json", env=env)
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    expected = v_measure_score(GOLD, payload["labels"])
    assert abs(payload["v_measure"] - expected) < 1e-9
    assert f"V-measure {100 * expected:.2f} (out of 100) against 6 labels (3 classes)" in result.stderr
    # k chosen by silhouette, capped at 2 by --max-k, with labels of 6 classes: named.
    spread = tmp_path / "six.txt"
    spread.write_text("\n".join(f"c{i}" for i in range(6)))
    chosen = invoke_cli(*base[:-1], str(spread), "--k", "0", "--max-k", "2", env=env)
    assert chosen.returncode == 0, chosen.stderr
    assert "against 6 labels (6 classes); the labels have 6 classes: --k 6" in chosen.stderr


def test_labels_refused_for_a_wrong_count_or_a_collection(tmp_path) -> None:
    src, _labels, env = _files(tmp_path)
    short = tmp_path / "short.txt"
    short.write_text("card\nrefund\n")
    wrong = invoke_cli("cluster", str(src), "-i", "x", "--embedder", "minilm", "--explain", "",
                       "--labels", str(short), env=env)
    assert wrong.returncode == 2
    assert wrong.stderr.strip() == (f"error: --labels {short} holds 2 labels for the 6 texts of "
                                    f"{src}; give one label per text, in the same order")
    # Counted against the whole file, as the UI's upload: --limit then takes the first ones.
    limited = invoke_cli("cluster", str(src), "-i", "x", "--embedder", "minilm", "--explain", "",
                         "--labels", str(short), "--limit", "2", env=env)
    assert limited.returncode == 2 and "2 labels for the 6 texts" in limited.stderr
    other = invoke_cli("cluster", "--collection", "notes", "-i", "x", "--labels", str(short),
                       env=env)
    assert other.returncode == 2
    assert other.stderr.strip() == ("error: --labels scores the clustering of a file's texts "
                                    "(one label per text, in order); a collection's chunks have none")


def test_label_column_scores_a_csv_or_jsonl_against_its_own_labels(tmp_path) -> None:
    """A `text,category` csv (Banking77's shape) needed its labels cut into a file of their own:
    `--labels FILE.csv` counted the header as a label and refused. `--label-column` reads them
    from the file of texts, each with its text, so a blank text skips its label too."""
    env = {"FACET_DATA_DIR": str(tmp_path / "data")}
    src = tmp_path / "tickets.csv"
    rows = [["text", "Category"], *[[t, g] for t, g in zip(TEXTS[:3], GOLD[:3], strict=True)],
            ["   ", "never read"], *[[t, g] for t, g in zip(TEXTS[3:], GOLD[3:], strict=True)]]
    src.write_text("\n".join(",".join(f'"{c}"' for c in r) for r in rows) + "\n")
    base = ["cluster", str(src), "-i", "What does the customer want?", "--embedder", "minilm",
            "--explain", "", "--k", "2"]
    result = invoke_cli(*base, "--label-column", "category", "--json", env=env)
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["texts"] == TEXTS
    assert abs(payload["v_measure"] - v_measure_score(GOLD, payload["labels"])) < 1e-9
    lines = tmp_path / "tickets.jsonl"
    lines.write_text("\n".join(json.dumps({"body": t, "intent": g}) for t, g in zip(TEXTS, GOLD, strict=True)))
    limited = invoke_cli(*base[:1], str(lines), *base[2:], "--label-column", "intent", "--limit", "4",
                         "--json", env=env)
    assert limited.returncode == 0, limited.stderr
    payload = json.loads(limited.stdout)
    assert abs(payload["v_measure"] - v_measure_score(GOLD[:4], payload["labels"])) < 1e-9
    # Refused, each with one line: a column the file lacks (its columns named) and a blank
    # label (its row named) as data errors (exit 4, as --text-column's), a file of lines and
    # --labels as well as usage errors (exit 2).
    missing = invoke_cli(*base, "--label-column", "intent", env=env)
    assert missing.returncode == 4
    assert missing.stderr.strip() == (f"error: {src}: no column 'intent' (the label column asked for); "
                                      "its columns are 'text', 'Category'")
    blank = tmp_path / "blank.csv"
    blank.write_text('text,category\n"card never came",card\n"refund me",\n')
    refused = invoke_cli(*base[:1], str(blank), *base[2:], "--label-column", "category", env=env)
    assert refused.returncode == 4
    assert refused.stderr.strip() == (f"error: {blank}: row 3 (the header is row 1): its label 'category' "
                                      "is blank; give every text a label")
    # The labels file given as --labels: its count is off by the header; --label-column is named.
    counted = invoke_cli(*base[:1], str(src), *base[2:], "--labels", str(src), env=env)
    assert counted.returncode == 2 and "--label-column NAME instead" in counted.stderr, counted.stderr
    plain = tmp_path / "texts.txt"
    plain.write_text("\n".join(TEXTS))
    lines_only = invoke_cli(*base[:1], str(plain), *base[2:], "--label-column", "category", env=env)
    assert lines_only.returncode == 2 and "--label-column category: " in lines_only.stderr
    assert "read as one text per line" in lines_only.stderr
    both = invoke_cli(*base, "--label-column", "category", "--labels", str(plain), env=env)
    assert both.returncode == 2 and "give one of the two" in both.stderr


def test_json_lines_on_standard_input_are_read_as_records(tmp_path) -> None:
    """`jq -c '.[]' data.json | facet cluster -` clustered each record's JSON source (its id and
    label included) a line a text; JSON lines are now read as a .jsonl file is: the text field,
    --text-column and --label-column. `facet embed -` still reads lines as they are."""
    env = {"FACET_DATA_DIR": str(tmp_path / "data")}
    # (A raw U+2028 inside a string, as `jq -c` writes it: splitlines broke the line there.)
    lines = "".join(json.dumps({"id": i, "text": t, "label": g, "note": "a\u2028b\x85c"},
                               ensure_ascii=False) + "\n"
                    for i, (t, g) in enumerate(zip(TEXTS, GOLD, strict=True)))
    base = ["cluster", "-", "-i", "What does the customer want?", "--embedder", "minilm",
            "--explain", "", "--k", "2", "--json"]
    result = invoke_cli(*base, "--label-column", "label", env=env, input=lines)
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    members = sorted(m["text"] for c in payload["clusters"] for m in c["members"])
    assert members == sorted(TEXTS), members
    assert abs(payload["v_measure"] - v_measure_score(GOLD, payload["labels"])) < 1e-9
    assert "note: every line of standard input is a JSON object: read as JSON lines" in result.stderr
    by_label = invoke_cli(*base, "--text-column", "label", env=env, input=lines)
    assert by_label.returncode == 0, by_label.stderr
    assert {m["text"] for c in json.loads(by_label.stdout)["clusters"] for m in c["members"]} \
        == set(GOLD)
    # A line that is not a JSON object: lines, as before (the label column refused in words).
    mixed = lines + "plain words\n"
    refused = invoke_cli(*base, "--label-column", "label", env=env, input=mixed)
    assert refused.returncode == 2 and "standard input is read as one text per line" in refused.stderr
    embedded = invoke_cli("embed", "-", "-e", "minilm", "--json", env=env, input=lines)
    assert embedded.returncode == 0 and "JSON object" not in embedded.stderr, embedded.stderr
    assert len(json.loads(embedded.stdout)["vectors"]) == len(TEXTS)
