"""`facet cluster` findings: an --out that is the input, filter hints, the text column, how k
was chosen (--max-k), the explainer's name, cut and repeated representatives, --limit and the
cap's wording, the API's param. Real minilm, SQLite and the edge store; the CLI in process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.api import create_app
from app.commands.cluster import SHOWN_CHARS, _one_line, read_texts
from app.core import Facet
from app.errors import DataError, InvalidRequestError
from app.services.clustering import ClusterRequest, read_text_file
from tests.app.api.conftest import serving_facet
from tests.app.cli_runner import invoke_cli

TEXTS = ["my card was declined", "where is my refund", "the app crashes on login",
         "card payment failed again", "I want my money back", "login screen freezes",
         "my card does not work", "refund please", "cannot sign in", "card rejected at the shop",
         "return my payment", "app will not open"]
BARE = ["--embedder", "minilm", "--explain", ""]
ENV = {"OMP_NUM_THREADS": "1"}


@pytest.fixture
def texts_file(tmp_path: Path) -> Path:
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(TEXTS) + "\n")
    return path


# -- 1. --out the same file as the texts --------------------------------------------------------


def test_an_out_that_is_the_input_is_refused_before_any_work(tmp_path, texts_file, monkeypatch):
    """It was overwritten with the JSON result, exit 0."""
    before = texts_file.read_bytes()
    (tmp_path / "link.txt").symlink_to(texts_file)
    monkeypatch.chdir(tmp_path)
    for source, out in [(str(texts_file), str(texts_file)), ("texts.txt", "./texts.txt"),
                        ("link.txt", str(texts_file)), (str(texts_file), "sub/../texts.txt")]:
        result = invoke_cli("cluster", source, "-i", "x", *BARE, "--k", "2", "-o", out, env=ENV)
        assert result.returncode == 2, (source, out, result.stderr)
        assert "is the file of texts being clustered" in result.stderr, result.stderr
        assert "encoding" not in result.stderr
        assert texts_file.read_bytes() == before


# -- 2 and 8. A filter matching nothing says why; the API names the field ------------------------


@pytest.fixture(scope="module")
def years(minilm, tmp_path_factory) -> Iterator[tuple[Facet, Path]]:
    root = tmp_path_factory.mktemp("years")
    (root / "y.jsonl").write_text("".join(
        json.dumps({"id": f"d{i}", "text": t, "year": 2020 + i % 2}) + "\n" for i, t in enumerate(TEXTS)))
    facet = serving_facet(root / "data", minilm, max_cluster_texts=5)
    facet.index(root / "y.jsonl", "yc")
    yield facet, root
    facet.close()


def test_the_api_cluster_error_carries_the_filter_hint_and_names_filters(years):
    facet, _ = years
    with TestClient(create_app(facet)) as client:
        body = {"instruction": "x", "collection": "yc", "k": 2, "explainer": None}
        r = client.post("/cluster", json=body | {"filters": {"year": "2020"}})
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert "matched 0 chunks of collection 'yc'" in error["message"]
        assert 'in JSON with the number: {"year": 2020}' in error["message"], error
        assert error["param"] == "filters"
        r = client.post("/cluster", json=body | {"filters": {"intnt": "refund"}})
        assert "no document has a field 'intnt'" in r.json()["error"]["message"], r.text
        # 8: too many texts names the field too (it was null)
        r = client.post("/cluster", json={"instruction": "x", "texts": TEXTS, "k": 2})
        assert r.status_code == 413 and r.json()["error"]["param"] == "texts", r.text


def test_the_cli_says_the_filter_hint(tmp_path):
    src = tmp_path / "y.jsonl"
    src.write_text("".join(json.dumps({"id": f"d{i}", "text": t, "year": 2020 + i % 2}) + "\n"
                           for i, t in enumerate(TEXTS[:4])))
    env = ENV | {"FACET_DATA_DIR": str(tmp_path / "data")}
    assert invoke_cli("index", str(src), "-c", "yc", "--embedder", "minilm", env=env).returncode == 0
    for given, hint in [("year=2020", "is matched with year:=2020 in the CLI"),
                        ("intnt=2020", "no document has a field 'intnt'")]:
        result = invoke_cli("cluster", "-c", "yc", "--filter", given, "-i", "x", *BARE, "--k", "2", env=env)
        assert result.returncode == 2 and hint in result.stderr, result.stderr


# -- 3. The column or field of texts -------------------------------------------------------------


def test_the_text_column_is_found_as_facet_index_finds_it(tmp_path):
    (tmp_path / "a.csv").write_text("id,body\n1,first text\n2,second text\n")
    assert read_texts(tmp_path / "a.csv") == ["first text", "second text"]  # was ["1", "2"]
    (tmp_path / "b.jsonl").write_text('{"id": 1, "contents": "x"}\n{"id": 2, "content": "y"}\n')
    assert read_texts(tmp_path / "b.jsonl") == ["x", "y"]
    (tmp_path / "c.json").write_text(json.dumps([{"body": "p"}, {"text": "q"}, "r"]))
    assert read_texts(tmp_path / "c.json") == ["p", "q", "r"]
    (tmp_path / "one.csv").write_text("sentence\nfirst\nsecond\n")  # one column: the texts
    assert read_texts(tmp_path / "one.csv") == ["first", "second"]
    (tmp_path / "d.csv").write_text("id,label,note\n1,refund,a\n2,card,b\n")
    assert read_texts(tmp_path / "d.csv", text_column="label") == ["refund", "card"]
    with pytest.raises(DataError, match=r"'id' is the number 1, not a string"):
        read_texts(tmp_path / "b.jsonl", text_column="id")


def test_a_csv_without_a_text_column_is_refused_naming_its_columns(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("id,label\n1,refund\n2,card\n3,app\n")
    with pytest.raises(DataError, match=r"no column of texts .* among its columns 'id', 'label'; "
                                        r"name the one holding the texts with --text-column NAME"):
        read_texts(path)
    # The UI's upload (no --text-column there) is told to rename the column instead.
    with pytest.raises(DataError, match="rename the one holding the texts to 'text'"):
        read_text_file(path)
    result = invoke_cli("cluster", str(path), "-i", "x", *BARE, "--k", "2", env=ENV)
    assert result.returncode == 4 and "--text-column NAME" in result.stderr, result.stderr
    result = invoke_cli("cluster", str(path), "-i", "x", *BARE, "--k", "2", "--text-column", "nope", env=ENV)
    assert result.returncode == 4 and "no column 'nope'" in result.stderr, result.stderr
    result = invoke_cli("cluster", str(path), "-i", "x", *BARE, "--k", "2", "--text-column", "label", env=ENV)
    assert result.returncode == 0, result.stderr
    assert "- refund" in result.stdout and "- 1" not in result.stdout
    (tmp_path / "t.txt").write_text("a\nb\n")
    result = invoke_cli("cluster", str(tmp_path / "t.txt"), "-i", "x", *BARE, "--text-column", "x", env=ENV)
    assert result.returncode == 2 and "--text-column x" in result.stderr, result.stderr


# -- 4. How k was chosen, --max-k -----------------------------------------------------------------


def test_k_by_silhouette_says_its_score_range_and_top(texts_file):
    result = invoke_cli("cluster", str(texts_file), "-i", "x", *BARE, "--k", "0", "--max-k", "3", env=ENV)
    assert result.returncode == 0, result.stderr
    assert "chosen by silhouette (0." in result.stderr, result.stderr
    assert "the best of k = 2 to 3; 3 is the largest k tried (--max-k 3)" in result.stderr
    for extra, message in [(["--k", "0", "--max-k", "1"], "--max-k must be from 2 to 50, got 1"),
                           (["--k", "0", "--max-k", "51"], "--max-k must be from 2 to 50, got 51"),
                           (["--max-k", "4"], "--k 8 (the default) sets k itself"),
                           # Typed, it is no default ("--k 8 (the default)" of a typed --k 8).
                           (["--k", "8", "--max-k", "4"], "silhouette (--k 0); --k 8 sets k itself")]:
        result = invoke_cli("cluster", str(texts_file), "-i", "x", *BARE, *extra, env=ENV)
        assert result.returncode == 2 and message in result.stderr, (extra, result.stderr)
    # One k tried is no "best of k = 2 to 2", as the UI says it.
    result = invoke_cli("cluster", str(texts_file), "-i", "x", *BARE, "--k", "0", "--max-k", "2", env=ENV)
    assert result.returncode == 0, result.stderr
    assert "k = 2 the only one tried; 2 is the largest k tried (--max-k 2)" in result.stderr, result.stderr
    assert "k = 2 to 2" not in result.stderr


def test_the_response_says_the_largest_k_tried(years):
    facet, _ = years
    result = facet.cluster(ClusterRequest("x", texts=TEXTS[:5], max_k=10))
    assert result.k_chosen and result.max_k_tried == 4  # one less than the texts
    assert facet.cluster(ClusterRequest("x", texts=TEXTS[:5], k=2)).max_k_tried is None


# -- 5. An unknown explainer is named as one -----------------------------------------------------


def test_an_unknown_explainer_is_called_an_explainer(texts_file):
    result = invoke_cli("cluster", str(texts_file), "-i", "x", "--embedder", "minilm", "--explain", "nosuch",
                        "--k", "2", env=ENV)
    assert result.returncode == 2 and "unknown explainer 'nosuch'" in result.stderr, result.stderr


# -- 6. Representatives: cut with an ellipsis, distinct -------------------------------------------


def test_representatives_are_marked_when_cut_and_not_repeated(tmp_path):
    long = ("my card was declined at the grocery store yesterday and again this morning and the "
            "bank will not tell me why it keeps being declined")
    assert _one_line(long).endswith("why…") and len(_one_line(long)) <= SHOWN_CHARS
    assert _one_line("short\ntext") == "short text"
    path = tmp_path / "dup.txt"
    path.write_text("\n".join(["refund please"] * 4 + ["I want my money back", "return my payment",
                                                       long, "card rejected at the shop",
                                                       "my card does not work"]))
    result = invoke_cli("cluster", str(path), "-i", "x", *BARE, "--k", "2", env=ENV)
    assert result.returncode == 0, result.stderr
    shown = [line for line in result.stdout.splitlines() if line.startswith("    - ")]
    assert len(shown) == len(set(shown)) == 6, result.stdout
    assert any(line.endswith("…") for line in shown), result.stdout


# -- 7. --limit and the cap ----------------------------------------------------------------------


def test_limit_and_cap_messages_say_what_the_file_holds(texts_file):
    result = invoke_cli("cluster", str(texts_file), "-i", "x", *BARE, "--limit", "1", env=ENV)
    assert result.returncode == 2, result.stderr
    assert "texts.txt holds 12 texts; --limit 1 took 1; clustering needs at least 2" in result.stderr
    result = invoke_cli("cluster", str(texts_file), "-i", "x", *BARE, "--k", "2",
                        env=ENV | {"FACET_MAX_CLUSTER_TEXTS": "5"})
    assert result.returncode == 2, result.stderr
    assert "holds 12 texts, more than the 5 clustered at most" in result.stderr
    assert "--limit 5" in result.stderr and "encoding" not in result.stderr
    with pytest.raises(InvalidRequestError, match="holds 1 text; clustering needs at least 2"):
        (texts_file.parent / "one.txt").write_text("only\n")
        read_texts(texts_file.parent / "one.txt")


def test_a_tab_separated_file_of_lines_is_refused(tmp_path):
    """A .tsv (or a spreadsheet's text export) was clustered a whole line a text, its header
    and its gold label column included, where a semicolon-separated .csv is refused."""
    for name in ("tab.tsv", "export.txt"):
        path = tmp_path / name
        path.write_text("text\tlabel\nI love pizza, really\tfood\nThe train was late\ttravel\n")
        with pytest.raises(DataError, match=r"every line holds a tab: it looks tab-separated \(2 columns"):
            read_text_file(path)
    three = tmp_path / "three.txt"
    three.write_text("id\ttext\tlabel\n1\tpizza\tfood\n2\ttrain\ttravel\n")
    with pytest.raises(DataError, match=r"every line holds 2 tabs: it looks tab-separated \(3 columns") as said:
        read_text_file(three)
    assert 'to cluster each line whole, tabs included, save it as a .jsonl, one {"text": "..."} a line' \
        in str(said.value)
    # A row whose last cells are empty ends in tabs: the table is still one (a stripped count
    # missed it); a column of texts indented by a tab is none.
    empty_cells = tmp_path / "cells.txt"
    empty_cells.write_text("id\ttext\tlabel\n1\thello world\tgreet\n2\tgood bye\t\n3\tsee you\t\n")
    with pytest.raises(DataError, match=r"every line holds 2 tabs: it looks tab-separated \(3 columns"):
        read_text_file(empty_cells)
    indented = tmp_path / "indented.txt"
    indented.write_text("\tfirst text\n\tsecond text\n")
    assert read_text_file(indented) == ["first text", "second text"]
    one = tmp_path / "one.txt"  # a tab inside one text of many is a text's own
    one.write_text("a text with a\ttab\nanother text\n")
    assert read_text_file(one) == ["a text with a\ttab", "another text"]
    # Lines of code each holding inner tabs, as many as they happen to (no table's columns): they
    # were refused, with no way to cluster them as lines.
    code = tmp_path / "code.txt"
    code.write_text("if x:\treturn 1\nfor i in y:\tprint(i)\tcontinue\nwhile z:\tpass\n")
    assert read_text_file(code) == ["if x:\treturn 1", "for i in y:\tprint(i)\tcontinue", "while z:\tpass"]


def test_records_with_a_blank_text_are_said_to_be_skipped(tmp_path, caplog):
    """A csv row with an empty text cell was dropped without a word: the result's indexes and a
    labels file's count no longer matched the file's rows."""
    path = tmp_path / "c2.csv"
    path.write_text('id,text,label\n1,"Hello, world",a\n2,Café,b\n3,,b\n4,Last one,a\n\n')
    with caplog.at_level("WARNING", logger="app.services.clustering"):
        assert read_text_file(path) == ["Hello, world", "Café", "Last one"]
    assert (f"{path}: 1 record with a blank text skipped (row 4); the texts are numbered without it"
            in caplog.text), caplog.text
    caplog.clear()
    # A one-column csv's record of spaces is one too (it was taken for an empty line, unsaid:
    # the UI exploration of the fourth session of 2026-12-07); an empty line is none.
    one = tmp_path / "one.csv"
    one.write_text("text\nfirst\n   \n\nsecond\n")
    with caplog.at_level("WARNING", logger="app.services.clustering"):
        assert read_text_file(one) == ["first", "second"]
    assert f"{one}: 1 record with a blank text skipped (row 3)" in caplog.text, caplog.text
    caplog.clear()
    # A spreadsheet's trailing rows of empty cells are no records (the verification round).
    sheet = tmp_path / "sheet.csv"
    sheet.write_text("text,label\nfirst,x\nsecond,y\n,\n,\n")
    with caplog.at_level("WARNING", logger="app.services.clustering"):
        assert read_text_file(sheet) == ["first", "second"]
    assert "skipped" not in caplog.text, caplog.text
    caplog.clear()
    lines = tmp_path / "t.jsonl"
    lines.write_text('{"text": "a"}\n{"text": " "}\n\n{"text": "b"}\n{"text": ""}\n')
    with caplog.at_level("WARNING", logger="app.services.clustering"):
        assert read_text_file(lines) == ["a", "b"]
    assert "2 records with a blank text skipped (line 2, line 5); the texts are numbered without them" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="app.services.clustering"):  # (the CLI's log, in-process)
        result = invoke_cli("cluster", str(path), "-i", "topic", "--k", "2", "--explain", "")
    assert result.returncode == 0 and "1 record with a blank text skipped (row 4)" in caplog.text, result.stderr


def test_an_out_path_ending_in_a_slash_is_refused_as_a_folder(tmp_path, texts_file):
    """`-o results/` wrote a JSON file named `results` (Path drops the slash), where an existing
    folder is refused."""
    for command in (["cluster", str(texts_file), "-i", "topic", "--k", "2", "--explain", ""],
                    ["bench", "--parts", "store"]):
        result = invoke_cli(*command, "--out", str(tmp_path / "results") + "/")
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        assert "results/ names a folder (it ends in '/'); name the JSON file to write" in result.stderr
        assert not (tmp_path / "results").exists()


def test_texts_of_invisible_characters_alone_are_empty_and_a_drawn_format_character_is_not(tmp_path):
    """`facet cluster`, the API's texts and the UI's pasted lines took a text of a zero-width
    space alone (its vector was the prompt's), where eval, search and the indexer call it empty;
    and a sentence of one U+06DD (the end of ayah, drawn) was empty to all of them."""
    from app.text import blank, check_texts
    from ui.inputs import pasted_texts

    invisible = "\u200b\ufeff\u2060"
    with pytest.raises(InvalidRequestError, match=r"texts\[1\] is empty \(invisible characters alone\)"):
        check_texts(["a text", invisible])
    assert not blank("\u06dd") and not blank("\u0600") and blank("\u00ad \u200b")
    # Nor a letter with its mark, a Thai syllable, an emoji newer than Python's Unicode tables;
    # a mark with no letter is empty, as NUL or BEL alone is (fourth session of 2026-12-07).
    assert not any(blank(t) for t in ("e\u0301", "\u0e17\u0e35\u0e48", "\U0001fae8", "\x00a"))
    with pytest.raises(InvalidRequestError, match=r"texts\[0\] is empty \(control, private-use or "
                                                  r"combining characters alone\)"):
        check_texts(["\x00\x07", "a text"])
    check_texts(["\u06dd", "a text"])
    assert pasted_texts(f"one\n{invisible}\ntwo\n") == ["one", "two"]
    for name, body in (("t.txt", f"one\n{invisible}\ntwo\n"),
                       ("t.jsonl", f'{{"text": "one"}}\n{{"text": "{invisible}"}}\n{{"text": "two"}}\n'),
                       ("t.csv", f"text\none\n{invisible}\ntwo\n")):
        path = tmp_path / name
        path.write_text(body, encoding="utf-8")
        assert read_text_file(path) == ["one", "two"], name
