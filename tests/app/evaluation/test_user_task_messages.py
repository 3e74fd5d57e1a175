"""`facet eval --task`: the messages a user's own data and a mistyped `--task` get say what is
wrong, where, and what to do (a JSON line's problem with its column, counts in the singular,
a `@` with no split, an empty item, a comma in a path that does not exist, extra sts columns),
and the GoalEx "no goal" warning is not given where another instruction replaces the goal."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli
from app.errors import DataError
from app.evaluation import loaders
from app.evaluation.suites import build_user_tasks
from app.evaluation.tasks import size_label, size_warnings


def _beir(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text('{"_id": "d1", "text": "one"}\n{"_id": "d2", "text": "two"}\n')
    (root / "queries.jsonl").write_text('{"_id": "q1", "text": "first"}\n')
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    (root / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\n")
    return root


def _goalex(root: Path, data: dict[str, object]) -> Path:
    root.mkdir(parents=True)
    (root / "data.json").write_text(json.dumps(data))
    (root / "labels.json").write_text(json.dumps({"labels": [0, 0, 1, 1]}))
    return root


def _eval(tmp_path: Path, *task: str) -> tuple[int, str]:
    # An embedder that does not exist: a --task refused before it would be loaded is exit 2.
    args = ["eval", "no-such-embedder", "--baselines", "", "--no-cache", "--no-progress",
            "--out", str(tmp_path / "out")]
    for value in task:
        args += ["--task", value]
    result = CliRunner().invoke(cli, args)
    return result.exit_code, result.output


def test_an_unterminated_string_in_corpus_jsonl_is_named_with_file_line_and_column(tmp_path: Path) -> None:
    folder = _beir(tmp_path / "b")
    with (folder / "corpus.jsonl").open("a") as f:
        f.write('{"_id": "d3", "text": "never closed\n')
    with pytest.raises(DataError) as e:
        loaders.load_beir(folder)
    # It read "line 3: invalid JSON: Invalid control character at" (the newline, the column cut off).
    assert str(e.value) == (f"{folder / 'corpus.jsonl'}, line 3: invalid JSON "
                            "(unterminated string starting at column 23)")


def test_a_bad_queries_line_says_what_json_found_and_where(tmp_path: Path) -> None:
    folder = _beir(tmp_path / "b")
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "first"}\n{"_id": "q2" "text": "x"}\n')
    with pytest.raises(DataError, match=r"queries\.jsonl, line 2: invalid JSON \(expecting ',' delimiter at "
                                        r"column 14\)$"):
        loaders.load_beir(folder)


def test_counts_of_one_are_singular() -> None:
    assert size_label("retrieval", {"queries": 1, "documents": 1}) == "1 query, 1 doc"
    assert size_label("retrieval", {"queries": 1, "documents": 3, "dropped_queries": 1}) == "1 of 2 queries, 3 docs"
    assert size_label("retrieval", {"queries": 4, "documents": 9}) == "4 queries, 9 docs"
    assert size_label("sts", {"pairs": 1}) == "1 pair"
    assert size_label("clustering", {"texts": 1, "k": 1}) == "1 text, k=1"
    assert size_warnings("t", 1, "query", "queries") == ["only 1 query; a score on fewer than 10 says little"]
    assert size_warnings("t", 3, "query", "queries") == ["only 3 queries; a score on fewer than 10 says little"]


def test_a_one_query_beir_task_warns_in_the_singular(tmp_path: Path) -> None:
    (task,) = build_user_tasks([f"beir:{_beir(tmp_path / 'b')}"])
    task.prepare()
    assert task.warnings == ["only 1 query; a score on fewer than 10 says little"]  # type: ignore[attr-defined]


def test_a_split_left_empty_after_the_at_is_refused_naming_the_splits(tmp_path: Path) -> None:
    folder = _beir(tmp_path / "b")
    code, output = _eval(tmp_path, f"beir:{folder}@")
    assert code == 2, output  # it read qrels/test.tsv without a word
    assert "no split after '@'" in output and "(found: dev, test)" in output, output


@pytest.mark.parametrize(("value", "item"), [("beir:{b},,sts:{s}", "item 2 of 3"), ("beir:{b},", "item 2 of 2"),
                                             (",beir:{b}", "item 1 of 2")])
def test_an_empty_task_item_is_refused_naming_its_position(tmp_path: Path, value: str, item: str) -> None:
    folder = _beir(tmp_path / "b")
    (tmp_path / "s.csv").write_text("a,b,1\nc,d,2\n")
    code, output = _eval(tmp_path, value.format(b=folder, s=tmp_path / "s.csv"))
    assert code == 2, output  # the empty item was skipped: the others ran
    assert f"{item} is empty" in output, output


def test_a_comma_in_a_path_that_does_not_exist_is_explained(tmp_path: Path) -> None:
    code, output = _eval(tmp_path, f"beir:{tmp_path / 'my'},set")
    assert code == 2, output  # it said only "my does not exist"
    assert "item 2 of 2, 'set', is not KIND:PATH" in output, output
    assert "a path holding a comma is read whole only where it exists" in output, output


def test_a_comma_in_a_path_that_exists_still_reads(tmp_path: Path) -> None:
    folder = _beir(tmp_path / "my,set")
    (task,) = build_user_tasks([f"beir:{folder}"])
    assert task.name == "beir:my,set"
    _, output = _eval(tmp_path, f"beir:{folder}")
    assert "unknown embedder 'no-such-embedder'" in output, output  # the --task items passed


def test_no_goal_warning_when_the_task_instruction_replaces_the_goal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = _goalex(tmp_path / "g", {"texts": ["a", "b", "c", "d"]})
    with caplog.at_level(logging.WARNING, logger="app.evaluation.loaders"):
        (replaced,) = build_user_tasks([f"goalex:{folder}"], "Group them by topic")
        replaced.prepare()
        (dropped,) = build_user_tasks([f"goalex:{folder}"], "")
        dropped.prepare()
    assert not [r for r in caplog.records if 'no "goal"' in r.getMessage()], caplog.text
    with caplog.at_level(logging.WARNING, logger="app.evaluation.loaders"):
        (own,) = build_user_tasks([f"goalex:{folder}"])
        own.prepare()  # the goal is what it would embed under: still said
    assert 'no "goal", so the clustering runs with no instruction' in caplog.text


def test_extra_sts_columns_are_said_to_be_extra_columns(tmp_path: Path) -> None:
    path = tmp_path / "pairs.csv"
    path.write_text("a cat sits,a cat sat,4.5,train\nthe dog,a car,0.5,test\n")
    with pytest.raises(DataError) as e:
        loaders.load_sts_csv(path)
    message = str(e.value)
    # It advised only "quote sentences that contain commas".
    assert "got 4; the first three fields read as sentence1,sentence2,score and more follow" in message
    assert "(no option picks other columns); remove the extra columns" in message


def test_a_comma_in_an_sts_sentence_still_gets_the_quoting_advice(tmp_path: Path) -> None:
    path = tmp_path / "pairs.csv"
    path.write_text("a cat, sitting,a cat sat,4.5\n")
    with pytest.raises(DataError, match=r"got 4; quote sentences that contain commas$"):
        loaders.load_sts_csv(path)


def test_one_label_for_several_texts_is_singular(tmp_path: Path) -> None:
    folder = _goalex(tmp_path / "g", {"goal": "x", "texts": ["a", "b", "c", "d"]})
    (folder / "labels.json").write_text(json.dumps({"labels": [0]}))
    with pytest.raises(DataError, match=r"line 1: 1 label for 4 texts in "):  # "1 labels"
        loaders.load_goalex(folder)


def test_a_beir_folder_without_a_test_split_says_which_split_it_reads(tmp_path: Path) -> None:
    """Without qrels/test.tsv and without @SPLIT the first split by name was read silently: a
    dev figure could be reported as a test one. A note names it; a split given, or test
    found, says nothing."""
    folder = _beir(tmp_path / "b")
    (folder / "qrels" / "test.tsv").rename(folder / "qrels" / "train.tsv")
    code, out = _eval(tmp_path, f"beir:{folder}")
    assert code == 2, out  # (the embedder does not exist: refused after the tasks are read)
    assert "note: beir:b has no qrels/test.tsv; it reads qrels/dev.tsv (give beir:b@SPLIT" in out
    code, out = _eval(tmp_path, f"beir:{folder}@dev")
    assert code == 2 and "has no qrels/test.tsv" not in out, out
    code, out = _eval(tmp_path, f"beir:{_beir(tmp_path / 'c')}")
    assert code == 2 and "has no qrels/test.tsv" not in out, out


@pytest.mark.parametrize("field, value", [("text", 5), ("title", 7)])
def test_a_number_for_a_text_or_title_is_refused_as_a_list_is(tmp_path: Path, field: str, value: int) -> None:
    """The evaluation exploration of the sixth session of 2026-12-05: `"text": 5` was embedded
    as "5" where `"text": ["a"]` was refused; an `_id` that is a number still reads."""
    folder = _beir(tmp_path / "b")
    record = {"_id": 3, "text": "three", field: value}
    with (folder / "corpus.jsonl").open("a") as f:
        f.write(json.dumps(record) + "\n")
    with pytest.raises(DataError) as e:
        loaders.load_beir(folder)
    assert str(e.value) == f"{folder / 'corpus.jsonl'}, line 3: field {field!r} must be a string, got {value}"
    record[field] = "fine"
    (folder / "corpus.jsonl").write_text(json.dumps(record) + "\n" + '{"_id": "d1", "text": "one"}\n')
    assert "3" in loaders.load_beir(folder).corpus


@pytest.mark.parametrize("given", ["\u200b", " \u2060 ", ""])
def test_an_invisible_task_instruction_is_no_instruction(tmp_path: Path, given: str) -> None:
    """A --task-instruction of a zero-width space alone was recorded as the task's instruction
    (results.json: "\\u200b") while every embedder read none."""
    (task,) = build_user_tasks([f"beir:{_beir(tmp_path / 'b')}"], given)
    assert task.instruction is None
    (task,) = build_user_tasks([f"beir:{tmp_path / 'b'}"], " by topic\u200b ")
    assert task.instruction == "by topic\u200b"
