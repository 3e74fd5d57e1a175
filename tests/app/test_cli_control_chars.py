"""Control characters from documents never reach the terminal: `facet search`, `cluster`, `index`
and `jobs` print them as visible escapes (``\\x1b``, ``\\x07``, ``\\u202e``), so a document
cannot clear the screen, set the window title (OSC 0), plant a link (OSC 8) or write the
clipboard (OSC 52), nor make a file name read as another with a bidi override. Piped output
kept them too: click strips colours (CSI) but not OSC. ``--json`` decodes to the same strings:
json escapes the C0 controls, ``printable_json`` the C1 and bidi controls and U+2028/9
(test_cli_json_escapes.py)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.text import printable
from tests.app.cli_runner import invoke_cli

# Clear the screen, set the window title, a hyperlink, a clipboard write; BEL ends an OSC.
CLEAR, TITLE = "\x1b[2J", "\x1b]0;PWNED\x07"
LINK, CLIPBOARD = "\x1b]8;;http://evil.example\x07here\x1b]8;;\x07", "\x1b]52;c;aGk=\x07"
RLO = "\u202e"  # right-to-left override: "invoice\u202efdp.exe" reads "invoiceexe.pdf"
RAW = ("\x1b", "\x07", "\x9b", "\x9d", RLO)  # ESC, BEL, CSI and OSC as C1 controls, RLO


def assert_no_raw_controls(output: str) -> None:
    for char in RAW:
        assert char not in output, f"{char!r} printed raw in {output!r}"


def test_printable_leaves_ordinary_text_as_it_is() -> None:
    for text in ("card payment", "café • naïve – 中文 日本語", "עברית ومرحبا", "C:\\Users\\me\\a.txt",
                 "", "…(108,000 characters)"):
        assert printable(text) == text
        assert printable(text, body=True) == text
    assert printable("line one\nline two", body=True) == "line one\nline two"
    # A tab stays in running text; in a label (a key, within the CLI's own aligned line) it is
    # escaped since 2026-12-01 (tests/app/test_uipolish_keys.py)
    assert printable("a\tb", body=True) == "a\tb"
    assert printable("a\tb") == "a\\x09b"


def test_printable_escapes_controls_in_one_form() -> None:
    assert (printable(f"card payment {CLEAR}{TITLE} more")
            == "card payment \\x1b[2J\\x1b]0;PWNED\\x07 more")
    assert printable("a\x00b\x08c\x7fd\x9be\x9df") == "a\\x00b\\x08c\\x7fd\\x9be\\x9df"
    assert printable("over\rwrite") == "over\\x0dwrite"
    # A label is one line: its newline is escaped, as is every bidi embedding/override/isolate.
    assert printable("id\nfake line") == "id\\x0afake line"
    assert (printable("invoice\u202efdp.exe \u202a\u202b\u202c\u202d \u2066\u2067\u2068\u2069")
            == "invoice\\u202efdp.exe \\u202a\\u202b\\u202c\\u202d \\u2066\\u2067\\u2068\\u2069")


def test_printable_body_keeps_its_lines_and_bidi_controls() -> None:
    # Body text is printed line by line: its breaks stay (one "\n" each, as splitlines reads
    # them), a lone CR cannot overwrite a line, and right-to-left text keeps its bidi controls.
    assert printable("a\r\nb\rc\x0cd\x85e", body=True) == "a\nb\nc\nd\ne"
    assert printable(f"x{TITLE}y", body=True) == "x\\x1b]0;PWNED\\x07y"
    assert printable("\u2067שלום\u2069 abc", body=True) == "\u2067שלום\u2069 abc"


def test_search_results_show_highlights_and_escape_what_precedes_them() -> None:
    """The highlight offsets index the raw snippet: escaping text before a highlight must not
    move the bold onto other characters."""
    from app.commands.search import print_results
    from app.services.search import SearchResponse, SearchResult

    snippet = f"x{TITLE} card payment"
    start = snippet.index("card")
    result = SearchResult(rank=1, score=0.5, doc_id=f"a{RLO}gpj.exe", title=None, source="f.jsonl",
                          chunk_no=0, text=snippet, snippet=snippet,
                          highlights=[(start, start + 4)], start=0, end=len(snippet),
                          metadata={"lang": f"en{CLIPBOARD}"}, vector_score=0.5)
    response = SearchResponse(query="card", instruction=None, collection="an", embedder="minilm",
                              reranker=None, results=[result], timings_ms={"total": 1.0})
    with CliRunner().isolation(color=True) as (out, _err, _both):
        print_results(response)
        printed = out.getvalue().decode()
    assert "x\\x1b]0;PWNED\\x07 \x1b[1mcard\x1b[0m payment" in printed
    assert "a\\u202egpj.exe  [a\\u202egpj.exe #0] lang=en\\x1b]52;c;aGk=\\x07" in printed
    assert_no_raw_controls(printed.replace("\x1b[1m", "").replace("\x1b[0m", ""))


@pytest.fixture
def run(tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    def invoke(*args: str) -> subprocess.CompletedProcess[str]:
        return invoke_cli(*args, env={"FACET_DATA_DIR": str(tmp_path / "data"),
                                      "FACET_CHUNK_TOKENS": "64", "FACET_CHUNK_OVERLAP": "8"})

    return invoke


def test_search_escapes_text_title_id_and_metadata_and_json_is_unchanged(tmp_path, run) -> None:
    records = [{"id": f"a{RLO}gpj.exe", "title": f"Fees {LINK}",
                "text": f"card payment {CLEAR}{TITLE} more", "lang": f"en{CLIPBOARD}"},
               {"id": "b", "text": "an ordinary card payment"}]
    path = tmp_path / "f.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    indexed = run("index", str(path), "-c", "an", "--embedder", "minilm")
    assert indexed.returncode == 0, indexed.stderr

    found = run("search", "card payment", "-c", "an")
    assert found.returncode == 0, found.stderr
    assert_no_raw_controls(found.stdout)
    assert "card payment \\x1b[2J\\x1b]0;PWNED\\x07 more" in found.stdout
    assert "Fees \\x1b]8;;http://evil.example\\x07here\\x1b]8;;\\x07" in found.stdout
    assert "[a\\u202egpj.exe #0] lang=en\\x1b]52;c;aGk=\\x07" in found.stdout
    assert "  b  [b #0]\n       an ordinary card payment\n" in found.stdout  # as it always was

    as_json = run("search", "card payment", "-c", "an", "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert "\x1b" not in as_json.stdout and "\\u001b]0;PWNED\\u0007" in as_json.stdout
    hit = next(r for r in json.loads(as_json.stdout)["results"] if r["doc_id"] != "b")
    assert (hit["doc_id"], hit["title"], hit["metadata"]["lang"]) == (
        records[0]["id"], records[0]["title"], records[0]["lang"])


def test_index_and_jobs_escape_file_names_in_their_messages(tmp_path, run) -> None:
    src = tmp_path / f"src{TITLE}"
    src.mkdir()
    (src / "good.txt").write_text("A note about bank cards and their fees.")
    (src / f"empty{TITLE}.txt").write_text("   ")  # fails: no text
    (src / f"sheet{RLO}xslx.xlsx").write_bytes(b"PK\x03\x04")  # skipped: unsupported type
    indexed = run("index", str(src), "-c", "notes", "--embedder", "minilm")
    assert indexed.returncode == 4, indexed.stderr
    assert_no_raw_controls(indexed.stdout + indexed.stderr)
    assert f"  error: {printable(str(src))}/empty\\x1b]0;PWNED\\x07.txt is empty" in indexed.stderr
    assert "unsupported types: sheet\\u202exslx.xlsx (supported:" in indexed.stderr

    listed = run("jobs")
    assert listed.returncode == 0, listed.stderr
    assert_no_raw_controls(listed.stdout)
    assert f"notes <- {tmp_path}/src\\x1b]0;PWNED\\x07 [minilm]" in listed.stdout

    job = run("jobs", "1")
    assert job.returncode == 0, job.stderr
    assert_no_raw_controls(job.stdout)
    assert "  error: " in job.stdout and "empty\\x1b]0;PWNED\\x07.txt is empty" in job.stdout

    as_json = run("jobs", "1", "--json")  # unchanged: json escapes the controls
    assert "\x1b" not in as_json.stdout and "\x07" not in as_json.stdout
    record = json.loads(as_json.stdout)
    assert record["source"] == str(src)
    assert any(f"empty{TITLE}.txt" in e["message"] for e in record["errors"])


def test_cluster_escapes_member_texts(tmp_path) -> None:
    src = tmp_path / "texts.jsonl"
    texts = [f"cats purr {TITLE} softly", f"cats sleep {LINK} all day", "dogs bark loudly",
             "dogs fetch the ball"]
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    result = invoke_cli("cluster", str(src), "-i", "topic", "--k", "2", "--embedder", "minilm",
                        "--explain", "", "--members", "4")
    assert result.returncode == 0, result.stderr
    assert_no_raw_controls(result.stdout)
    assert "    - cats purr \\x1b]0;PWNED\\x07 softly\n" in result.stdout
    assert "    - cats sleep \\x1b]8;;http://evil.example\\x07here\\x1b]8;;\\x07 all day" in result.stdout


def test_cluster_escapes_names_keywords_and_the_note(tmp_path, monkeypatch) -> None:
    """An explainer's answers name the clusters and give their keywords: a model that echoes a
    text's control characters must not send them to the terminal either."""
    from app.core import Facet
    from app.services.clustering import Cluster, ClusterResponse

    texts = [f"one {TITLE}", "two", "three"]
    cluster = Cluster(id=0, size=3, name=f"pay{TITLE}ments", keywords=[f"card{CLEAR}", f"fee{RLO}s"],
                      representatives=texts, representative_indices=[0, 1, 2], center=(0.0, 0.0),
                      name_count=2)
    response = ClusterResponse(
        instruction="x", embedder="minilm", explainer="stub", k=1, k_chosen=False, silhouette=None,
        texts=texts, labels=[0, 0, 0], coordinates=[(0.0, 0.0)] * 3, sources=[{}] * 3,
        answers=texts, clusters=[cluster], timings_ms={"embed": 1.0}, note=f"cut {CLIPBOARD}")
    monkeypatch.setattr(Facet, "cluster", lambda self, request, progress=None: response)
    src = tmp_path / "texts.txt"
    src.write_text("\n".join(texts))
    out = tmp_path / "out.json"
    result = invoke_cli("cluster", str(src), "-i", "x", "--k", "2", "--embedder", "minilm",
                        "--explain", "", "--out", str(out), env={
                            "FACET_DATA_DIR": str(tmp_path / "data")})
    assert result.returncode == 0, result.stderr
    assert_no_raw_controls(result.stdout + result.stderr)
    assert ("cluster 0 (3 texts): pay\\x1b]0;PWNED\\x07ments (2 of 3 answers) · "
            "card\\x1b[2J, fee\\u202es\n    - one \\x1b]0;PWNED\\x07\n") in result.stdout
    assert "note: cut \\x1b]52;c;aGk=\\x07" in result.stderr
    assert json.loads(out.read_text())["clusters"][0]["name"] == cluster.name  # the file: as given


def test_ordinary_file_names_print_as_before(tmp_path, run) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "notes café.txt").write_text("Card fees rise in May.")
    (src / "empty.txt").write_text(" ")
    indexed = run("index", str(src), "-c", "plain", "--embedder", "minilm")
    assert f"  error: {src}{os.sep}empty.txt is empty: no text to index\n" in indexed.stderr


def test_an_error_quoting_a_file_name_escapes_its_controls(tmp_path, run) -> None:
    """`error: ...` (every command's one-line error) quoted names raw: a file named with an
    OSC sequence set the window title through `facet cluster NAME`."""
    missing = run("cluster", str(tmp_path / f"nope{TITLE}.txt"), "--instruction", "topic")
    assert missing.returncode == 3, missing.stderr
    assert_no_raw_controls(missing.stderr)
    assert "nope\\x1b]0;PWNED\\x07.txt does not exist" in missing.stderr
