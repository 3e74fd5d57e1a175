"""`facet index` as a new user runs it, on a temp data dir: exit codes, messages, what is left
behind (issue 15). Exit codes and messages are checked in this process (CliRunner: no 5-8 s
interpreter, torch and model start per call); what only a fresh process shows (library noise,
the summary printed once) runs as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.app.cli_runner import invoke_cli


def facet(data: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    # In-process CLI tests (CliRunner) set the quiet switches in this process's environment
    # (app.cli sets them for the libraries); a user's shell has none of them.
    inherited = {k: v for k, v in os.environ.items()
                 if k not in ("HF_HUB_DISABLE_PROGRESS_BARS", "TRANSFORMERS_VERBOSITY")}
    environ = dict(inherited, FACET_DATA_DIR=str(data), FACET_CHUNK_TOKENS="64",
                   FACET_CHUNK_OVERLAP="8", **env)
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True,
                          timeout=300, env=environ)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def run(data: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``facet ARGS`` in this process with the same environment as ``facet`` gives a subprocess."""
    def invoke(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return invoke_cli(*args, env={"FACET_DATA_DIR": str(data), "FACET_CHUNK_TOKENS": "64",
                                      "FACET_CHUNK_OVERLAP": "8", **env})

    return invoke


def collections(run: Callable[..., subprocess.CompletedProcess[str]]) -> list[str]:
    listed = run("collections", "--json")
    assert listed.returncode == 0, listed.stderr
    return [c["name"] for c in json.loads(listed.stdout)]


def test_failed_documents_exit_non_zero_and_leave_no_empty_collection(tmp_path, run) -> None:
    big = tmp_path / "big30mb.txt"
    big.write_text("lorem ipsum dolor sit amet\n" * 2000)  # ~53 KiB over a 0.01 MiB limit
    one = run("index", str(big), "-c", "big", FACET_MAX_DOCUMENT_MB="0.01")
    assert one.returncode == 4, one.stderr
    assert "per-document limit" in one.stderr
    assert "1 of 1 documents failed" in one.stderr and "removed again" in one.stderr
    assert "big" not in collections(run)

    src = tmp_path / "src"
    src.mkdir()
    (src / "good.txt").write_text("A note about bank cards and their fees.")
    (src / "empty.txt").write_text("   ")
    (src / "binary.txt").write_bytes(b"\x00\x01\x02" * 100)
    two = run("index", str(src), "-c", "notes")
    assert two.returncode == 4, two.stderr
    assert "2 of 3 documents failed" in two.stderr and "--allow-failures" in two.stderr
    assert "notes" in collections(run)  # one document went in: the collection stays

    allowed = run("index", str(src), "-c", "notes", "--allow-failures", "--json")
    assert allowed.returncode == 0, allowed.stderr
    report = json.loads(allowed.stdout)
    assert (report["docs_failed"], report["docs_skipped"]) == (2, 1)


def test_csv_without_a_text_column_is_refused_and_text_column_picks_it(tmp_path, run) -> None:
    path = tmp_path / "reviews.csv"
    path.write_text("id,product,review\nr1,kettle,boils water fast and quietly\n"
                    "r2,toaster,burns every slice of bread\n")
    guessed = run("index", str(path), "-c", "guess")  # it embedded the ids, exit 0
    assert guessed.returncode == 4, guessed.stderr
    assert "no text column; expected one of text" in guessed.stderr and "--text-column" in guessed.stderr

    named = run("index", str(path), "-c", "reviews", "--text-column", "review")
    assert named.returncode == 0, named.stderr
    assert "first column" not in named.stderr
    found = run("search", "bread toaster", "-c", "reviews", "-k", "1", "--json")
    assert found.returncode == 0, found.stderr
    [hit] = json.loads(found.stdout)["results"]
    assert (hit["doc_id"], hit["text"]) == ("r2", "burns every slice of bread")
    assert json.loads(found.stdout)["mode"] == "hybrid"  # auto: the collection keeps its words
    # By the words alone: "slices" finds r2's "slice" (stemmed); the header names the mode.
    words = run("search", "slices", "-c", "reviews", "--mode", "lexical")
    assert words.returncode == 0, words.stderr
    assert "reviews · bm25 · lexical" in words.stdout and "r2" in words.stdout and "r1" not in words.stdout
    bad = run("search", "bread", "-c", "reviews", "--mode", "fuzzy")
    assert bad.returncode != 0 and "mode must be one of auto, dense, hybrid, lexical" in bad.stderr


def test_skipped_files_are_named_with_the_supported_types(tmp_path, run) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "notes.txt").write_text("Card fees rise in May.")
    (src / "records.json").write_text(json.dumps([{"id": "a", "text": "a refund request"}]))
    for name in ("budget.xlsx", "photo.png", "slides.pptx", "archive.zip"):
        (src / name).write_bytes(b"PK\x03\x04")
    (src / os.fsdecode(b"caf\xe9.txt")).write_text("coffee")  # crashed the whole run
    mixed = run("index", str(src), "-c", "mixed")
    assert mixed.returncode == 0, mixed.stderr
    assert "2 indexed" in mixed.stdout
    assert f"skipped {src}/caf\\xe9.txt: its name is not valid UTF-8; rename it" in mixed.stderr
    assert ("skipped 4 files of unsupported types: archive.zip, budget.xlsx, photo.png, "
            "slides.pptx (supported: .csv .docx .htm .html .json .jsonl .markdown .md .pdf "
            ".txt)") in mixed.stderr


def test_a_run_that_indexes_nothing_says_the_collection_was_not_created(tmp_path, run) -> None:
    """"job 1 completed: 0 documents seen", exit 0, then `facet search` said the collection was
    unknown: the summary never said that nothing was kept."""
    src = tmp_path / "pictures"
    src.mkdir()
    (src / "photo.png").write_bytes(b"\x89PNG")
    empty = run("index", str(src), "-c", "pics")
    assert empty.returncode == 0, empty.stderr
    assert (f"nothing to index in {src}: collection 'pics' was not created, and job 1 was removed "
            "with it") in empty.stderr
    assert run("collections").stdout.count("pics") == 0
    # Indexing into an existing collection finds nothing new: it stays, and nothing is said.
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("Card fees rise in May.")
    assert run("index", str(tmp_path / "notes"), "-c", "pics").returncode == 0
    again = run("index", str(src), "-c", "pics", "--no-sync")
    assert again.returncode == 0 and "was not created" not in again.stderr, again.stderr


def test_a_run_cancelled_from_elsewhere_exits_non_zero_with_how_to_resume(tmp_path, data) -> None:
    """`facet jobs N --cancel` from another terminal stopped a `facet index` that then exited
    0 with only its counts: `facet index ... && next-step` went on with half a collection."""
    import time

    from sqlalchemy import create_engine, text

    src = tmp_path / "src"
    src.mkdir()
    for i in range(300):
        (src / f"{i:03}.txt").write_text(f"note {i} about the ferry timetable and the winter crossing")
    environ = dict(os.environ, FACET_DATA_DIR=str(data), FACET_CHUNK_TOKENS="64",
                   FACET_CHUNK_OVERLAP="8")
    proc = subprocess.Popen([sys.executable, "-m", "app", "index", str(src), "-c", "c",
                             "--batch-chunks", "1"], env=environ, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        job_id = None
        while job_id is None and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
            if (data / "facet.db").exists():
                engine = create_engine(f"sqlite:///{data / 'facet.db'}")
                try:
                    with engine.connect() as conn:
                        job_id = conn.execute(text("SELECT id FROM index_jobs WHERE state = 'running' "
                                                   "AND docs_indexed > 0")).scalar()
                except Exception:  # the schema is still being created
                    job_id = None
                finally:
                    engine.dispose()
        assert job_id is not None, proc.communicate()
        cancel = invoke_cli("jobs", str(job_id), "--cancel", env={"FACET_DATA_DIR": str(data)})
        assert cancel.returncode == 0, cancel.stdout + cancel.stderr
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 1, (out, err)
    assert f"job {job_id} cancelled:" in out
    assert (f"error: job {job_id} was cancelled by a request (`facet jobs {job_id} --cancel`, the API "
            "or the UI): cancelled after ") in err
    assert "index the same source again to resume: what was indexed is kept" in err


def test_facet_jobs_says_a_records_location_once(tmp_path, run) -> None:
    """`facet jobs N` printed "recs.jsonl#L2: /…/recs.jsonl:2: malformed …"."""
    src = tmp_path / "recs.jsonl"
    src.write_text('{"id": "a", "text": "one"}\n{bad json\n{"id": "c", "text": "three"}\n')
    assert run("index", str(src), "-c", "recs", "--allow-failures").returncode == 0
    listed = run("jobs", "1").stdout
    assert f"  error: {src}:2: malformed JSON line" in listed, listed
    assert f"{src}#L2:" not in listed


def test_no_noise_one_summary_plurals_and_a_long_query_is_not_echoed(tmp_path, data) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("Card fees rise in May for foreign payments.")
    run = facet(data, "index", str(src), "-c", "one")
    assert run.returncode == 0, run.stderr
    both = run.stdout + run.stderr
    assert both.count("job 1 completed") == 1  # the summary once, not again as a log line
    assert "1 document seen" in run.stdout and "1 chunk in" in run.stdout
    assert "Loading weights" not in both and "FutureWarning" not in both

    query = "card fee " * 12_000  # 108,000 characters pasted as a query
    found = facet(data, "search", query, "-c", "one", "-k", "1")
    assert found.returncode == 0, found.stderr
    assert "(108,000 characters)" in found.stdout and len(found.stdout) < 2_000
    assert "Loading weights" not in found.stderr
    assert "Token indices sequence length" not in found.stderr  # the embedder's warning is enough
    assert "1 of 1 texts were longer than" in found.stderr

    # InBedder's load is checked for noise by test_cluster_cmd's default-embedder run. (MiniLM
    # loads without transformers since its tokenizer came from the tokenizers library: there is
    # no library output left for --verbose to keep in a minilm process.)


def test_set_type_errors_read_as_english() -> None:
    from app.commands.train import _typed
    from app.errors import InvalidRequestError
    from embedders.methods.inbedder import InBedderConfig

    with pytest.raises(InvalidRequestError, match=r"gen_tokens='many': expected an integer$"):
        _typed(InBedderConfig, InBedderConfig(), {"gen_tokens": "many"})


def test_readme_tells_how_to_run_facet_and_its_options_exist() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "source .venv/bin/activate" in readme and ".venv/bin/facet" in readme
    assert (Path(sys.executable).parent / "facet").is_file()  # the script the README names
    from typer.testing import CliRunner

    from app.cli import cli

    runner = CliRunner()
    index_help = runner.invoke(cli, ["index", "--help"], terminal_width=200).output
    search_help = runner.invoke(cli, ["search", "--help"], terminal_width=200).output
    for option in ("--no-sync", "--text-column", "--allow-failures"):
        assert option in readme and option in index_help, option
    assert "--per-chunk" in readme and "--per-chunk" in search_help  # grouped by default
    for suffix in (".txt", ".pdf", ".docx", ".json", ".jsonl", ".csv", ".html"):
        assert suffix in readme
    assert "FACET_MAX_DOCUMENT_MB" in readme and "exits 4" in readme


def test_out_of_range_numbers_are_exit_2_or_3_not_tracebacks(tmp_path, run) -> None:
    """`facet jobs 99999999999999999999`, a filter integer past 64 bits and `--seed -1` were
    tracebacks (exit 1); `facet jobs --limit -5` listed every job, `--limit 0` none."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.txt").write_text("my card was declined at the shop")
    (tmp_path / "src" / "b.txt").write_text("what is the exchange rate today")
    assert run("index", str(tmp_path / "src"), "-c", "c", "-e", "minilm").returncode == 0
    huge = "99999999999999999999"
    for args, code, fragment in [
        (("jobs", huge), 3, f"no index job {huge}"),
        (("jobs", "--limit", "0"), 2, "limit must be from 1 to 1000, got 0"),
        (("jobs", "--limit", "-5"), 2, "limit must be from 1 to 1000, got -5"),
        (("search", "card", "-c", "c", "-f", f"n:={huge}"), 2, "outside the 64-bit integers"),
        (("cluster", "--collection", "c", "-i", "x", "--seed", "-1", "-e", "minilm",
          "--explain", "", "--k", "0"), 2, "seed must be from 0 to 4294967295"),
        (("bench", "--parts", "search", "--points", "0"), 2, "--points"),  # was IndexError / ValueError
        (("bench", "--parts", "index", "--source", str(tmp_path / "nowhere")), 3, "does not exist"),
        (("bench", "--parts", "store", "--out", str(tmp_path)), 2, "is a folder"),
    ]:
        result = run(*args)
        assert (result.returncode, "Traceback" in result.stderr) == (code, False), (args, result.stderr)
        assert fragment in result.stderr, (args, result.stderr)


def test_bench_writes_its_json_into_a_new_folder_and_counts_recall_of_few_points(tmp_path, run) -> None:
    """`--out new/b.json` ran the whole benchmark, then lost it to a FileNotFoundError; on 5
    points recall@10 said 0.500 with every point found (it divided by 10), of "1000 clusters"."""
    out = tmp_path / "new" / "deeper" / "b.json"
    result = run("bench", "--parts", "store", "--points", "5", "--local-points", "5",
                 "--out", str(out))
    assert result.returncode == 0, result.stderr
    rows = json.loads(out.read_text())["store"]
    assert [(r["backend"], r["points"], r["vectors"]) for r in rows] == [
        ("edge", 5, "5 clusters"), ("local", 5, "5 clusters")]
    assert all(r["recall_at_10"] == r["exact_recall_at_10"] == 1.0 for r in rows)


def test_zero_chunk_tokens_is_refused_and_empty_results_say_why(tmp_path, run) -> None:
    """--chunk-tokens 0 said the new collection 'was created with chunk size 200' and left an
    empty collection behind; "no results (check the filters)" was printed with no filter."""
    (tmp_path / "a.txt").write_text("hi there")
    zero = run("index", str(tmp_path / "a.txt"), "-c", "ct", "--chunk-tokens", "0")
    assert zero.returncode == 2 and "chunk size must be at least 1, got 0" in zero.stderr
    assert "no collections yet" in run("collections").stdout
    assert run("index", str(tmp_path / "a.txt"), "-c", "ct").returncode == 0
    stop_words = run("search", "the of and", "-c", "ct", "--mode", "lexical")
    # Stopwords only: the query has no term at all (it said the collection lacked its words).
    assert ("no results (the query has no word the word index reads (symbols and stopwords are "
            "not indexed))") in stop_words.stdout, stop_words.stdout
    absent = run("search", "zebra", "-c", "ct", "--mode", "lexical")
    assert "no results (no indexed word of the query is in it)" in absent.stdout
    filtered = run("search", "hi", "-c", "ct", "-f", "lang=fr")
    assert "no results (check the filters; no document has a field 'lang')" in filtered.stdout
    # A number written key=value is a string: say how a field of numbers is matched.
    (tmp_path / "y.jsonl").write_text('{"id": "y1", "text": "hello", "year": 2020}\n')
    assert run("index", str(tmp_path / "y.jsonl"), "-c", "yr").returncode == 0
    numeric = run("search", "hello", "-c", "yr", "-f", "year=2020")
    assert "check the filters; a field of numbers (not a csv column) is matched with year:=2020" \
        in numeric.stdout
    assert "y1" in run("search", "hello", "-c", "yr", "-f", "year:=2020").stdout
    # The other way round: a csv column holds text, so a number (key:=5) never matches it (the
    # hint said only "check the filters").
    (tmp_path / "r.csv").write_text("id,text,stars\nr1,good food,5\n")
    assert run("index", str(tmp_path / "r.csv"), "-c", "rv").returncode == 0
    texts = run("search", "food", "-c", "rv", "-f", "stars:=5")
    assert "check the filters; a field of text (as every csv column is) is matched with stars=5" in texts.stdout
    assert "r1" in run("search", "food", "-c", "rv", "-f", "stars=5").stdout


def test_a_job_error_whose_message_names_no_document_is_listed_with_it(tmp_path, run, data) -> None:
    """A failed chunk's error (the same message for each of its documents) printed ten
    identical lines in `facet jobs N`: the documents were only in --json."""
    import sqlite3

    (tmp_path / "a.txt").write_text("hello there")
    assert run("index", str(tmp_path / "a.txt"), "-c", "je").returncode == 0
    message = "chunk 0 was started 3 times and its worker died each time"
    with sqlite3.connect(data / "facet.db") as db:
        db.executemany("INSERT INTO job_errors (job_id, document_key, kind, message) VALUES (1, ?, 'error', ?)",
                       [("doc-7", message), ("doc-8", message), ("doc-9", "doc-9: unreadable")])
    shown = run("jobs", "1").stdout
    assert f"error: doc-7: {message}" in shown and f"error: doc-8: {message}" in shown
    assert "error: doc-9: unreadable" in shown and "doc-9: doc-9" not in shown



def test_the_speed_of_a_run_of_few_large_documents_is_in_chunks() -> None:
    """One streamed 19 MB file: '1171 chunks in 116.7s (0.0 docs/s)'."""
    from app.commands.index import rate
    from app.services.indexing import IndexReport

    big = IndexReport(job_id=1, collection="c", embedder="minilm", state="completed", docs_seen=1,
                      docs_indexed=1, chunks_written=1171, elapsed_s=116.7)
    assert rate(big) == "10.0 chunks/s"
    many = IndexReport(job_id=2, collection="c", embedder="minilm", state="completed", docs_seen=50,
                       docs_indexed=50, chunks_written=60, elapsed_s=2.0)
    assert rate(many) == "25.0 docs/s, 30.0 chunks/s"
    assert rate(IndexReport(job_id=3, collection="c", embedder="minilm", state="completed")) == "0.0 docs/s"
    # Below one document a second the documents' rate stays, beside the chunks' (it switched to
    # chunks alone: of two embedders on one corpus the faster read "1.1 docs/s", the slower
    # "1.9 chunks/s").
    slow = IndexReport(job_id=4, collection="c", embedder="causal-eos", state="completed",
                       docs_seen=308, docs_indexed=308, chunks_written=616, elapsed_s=385.0)
    assert rate(slow) == "0.8 docs/s, 1.6 chunks/s"
    one_each = IndexReport(job_id=5, collection="c", embedder="minilm", state="completed",
                           docs_seen=40, docs_indexed=40, chunks_written=40, elapsed_s=2.0)
    assert rate(one_each) == "20.0 docs/s"


def test_delete_removes_vectors_no_collection_owns(tmp_path, run, data) -> None:
    """Indexing over a store collection the metadata does not know is refused with "delete
    'lost' (which removes those vectors)", but `facet delete lost` answered "unknown collection"
    and left them: only by hand could the name be used again."""
    src = tmp_path / "small.txt"
    src.write_text("the ferry leaves at noon")
    assert run("index", str(src), "--collection", "lost").returncode == 0
    for db in data.glob("facet.db*"):
        db.unlink()
    refused = run("index", str(src), "--collection", "lost")
    assert refused.returncode != 0 and "delete 'lost'" in refused.stderr
    assert "without its facet.db-wal" in refused.stderr  # the backup that loses it
    # The listing said "no collections yet" over them.
    listed = run("collections").stdout
    assert listed.startswith("lost: vectors only (1 point, ") and "no collections yet" not in listed
    assert "`facet delete lost` removes them" in listed
    assert run("collections", "lost").stdout == listed  # named, as listed (not "unknown")
    gone = run("delete", "lost", "--yes")
    assert gone.returncode == 0, gone.stderr
    assert "deleted lost: 1 point that no collection of this database owns" in gone.stdout
    assert run("index", str(src), "--collection", "lost").returncode == 0
    assert run("collections").stdout.startswith("lost: 1 document indexed")
    assert run("delete", "none", "--yes").returncode != 0  # neither known nor stray: not found


def test_bench_refuses_what_it_cannot_measure_before_any_part_runs(tmp_path, run) -> None:
    """`--rerank minilmm` was found when the search part started, after the store part had
    printed its figures, and no --out written; `--parts ""` measured nothing with exit 0; an
    empty --source was "0 docs ... ratio 0.000 ... non-encode share 100.0%"."""
    out = tmp_path / "b.json"
    small = ("--points", "5", "--local-points", "5", "--out", str(out))
    for args, code, fragment in [
        # Named by its option (the review of the fourth session of 2026-12-06: it was not).
        (("--parts", "store,search", "--rerank", "minilmm", *small), 2,
         "--rerank 'minilmm': unknown embedder 'minilmm'"),
        (("--parts", "store,gircse-cache", "--gircse", "nope", *small), 2,
         "--gircse 'nope': unknown embedder 'nope'"),
        (("--parts", "", *small), 2, "--parts names no part; pick from api-embed"),
        (("--parts", "index", "--source", str(tmp_path), *small), 2,
         f"--source {tmp_path} holds no file to index; give a folder or file of a supported type"),
        # Refused once the gircse-cache part started (a ValueError traceback), the store
        # figures before it lost.
        (("--parts", "store,gircse-cache", "--gircse", "causal-eos", *small), 2,
         "--gircse causal-eos: a causal-eos embedder, not a GIRCSE one"),
        (("--parts", "store,gircse-cache", "--gircse", "minilm", *small), 2,
         "--gircse minilm: an encoder-mean embedder, not a GIRCSE one"),
        (("--parts", "store,gircse-cache", "--soft-tokens", "65", *small), 2,
         "--soft-tokens must be from 1 to 64, not 65"),
        (("--parts", "store,api-search", "--threads", "0", *small), 2, "--threads"),
    ]:
        result = run("bench", *args)
        assert (result.returncode, "Traceback" in result.stderr) == (code, False), (args, result.stderr)
        assert fragment in result.stderr, (args, result.stderr)
        assert "store edge" not in result.stdout and not out.exists(), (args, result.stdout)
    (tmp_path / "only.bin").write_bytes(b"\0")
    binary = run("bench", "--parts", "index", "--source", str(tmp_path))
    assert binary.returncode == 2 and "(1 left out, e.g. only.bin: unsupported type '.bin')" in binary.stderr
    (tmp_path / "empty.txt").write_text("")
    blank = run("bench", "--parts", "index", "--source", str(tmp_path), "--rounds", "1")
    assert blank.returncode == 4 and "no text to index in it" in blank.stderr, blank.stderr
    # An option no wanted part uses is not looked at (--gircse names a checkpoint few have).
    from app.commands.bench import _embedders_used

    assert _embedders_used({"store", "index"}, "minilm", "r", "g", "gb") == {"minilm": "--embedder"}
    assert _embedders_used({"search", "gircse-cache"}, "minilm", "minilm", "g", "gb") == {
        "minilm": "--embedder", "g": "--gircse", "gb": "--gircse-baseline"}
    assert _embedders_used({"gircse-cache"}, "minilm", "r", "g", "gb") == {
        "g": "--gircse", "gb": "--gircse-baseline"}


def test_bench_prints_stage_timings_in_ms_and_rounds_drive_the_api_parts(monkeypatch, run) -> None:
    """The search lines printed `stage p50 {'encode_query': 103.12332649846212, ...}` (a dict,
    no unit); --rounds, documented for indexing only, now sets the api-* parts' rounds too."""
    from app.services import api_bench as ab
    from app.services import benchmark as bm

    stages = {"encode_query": 103.12332649846212, "vector_search": 0.4}
    built = {"points": 5, "dim": 384, "vectors": "5 clusters", "upsert_s": 0.1, "upsert_points_per_s": 50.0,
             "optimize_s": 0.0, "search_p50_ms": 0.1, "search_p95_ms": 0.2, "filtered_p50_ms": 0.1,
             "filtered_p95_ms": 0.2, "recall_at_10": 1.0, "exact_recall_at_10": 1.0, "load_average": 1.0}
    timing = {"p50_ms": 110.0, "p95_ms": 120.0, "stage_p50_ms": stages}
    calls = {}

    def api_search(*args, **kwargs):
        calls["rounds"] = kwargs.get("rounds")
        return {"searches": 40, "top_k": 10, "api_p50_ms": 120.0, "api_p95_ms": 130.0, "encode_p50_ms": 100.0,
                "encode_p95_ms": 110.0, "p50_minus_encode_ms": 20.0, "p50_ratio_to_encode": 1.2,
                "server_stage_p50_ms": stages | {"total": 110.0}, "http_and_client_p50_ms": 10.0}

    monkeypatch.setattr(bm, "build_search_bench_collection", lambda *a, **k: built)
    monkeypatch.setattr(bm, "bench_search_latency",
                        lambda *a, **k: {"no_rerank": timing, "rerank": timing, "rerank_depth": 30,
                                         "repeated_query": timing, "repeated_query_rerank": timing})
    monkeypatch.setattr(ab, "inprocess_search_latency", lambda *a, **k: timing | {"threads": 1})
    monkeypatch.setattr(ab, "api_search_latency", api_search)
    result = run("bench", "--parts", "search,api-search", "--rounds", "2", "--threads", "1")
    assert result.returncode == 0, result.stderr
    assert "{'" not in result.stdout and "103.1233" not in result.stdout
    assert "stage p50 without rerank encode_query 103.12 ms, vector_search 0.40 ms; with rerank " \
        "encode_query 103.12 ms" in result.stdout
    assert "thread(s): p50/p95 110.0/120.0 ms; stage p50 encode_query 103.12 ms, vector_search 0.40 ms" \
        in result.stdout
    assert "server stage p50 encode_query 103.12 ms, vector_search 0.40 ms, total 110.00 ms;" in result.stdout
    assert calls["rounds"] == 2


def test_api_search_rounds_print_their_own_median(monkeypatch) -> None:
    """"round 2/3: API p50 45.7 ms" was the median over rounds 1..2, not round 2's."""
    import contextlib
    import time

    import httpx

    from app.services import api_bench as ab

    posts = []

    class Response:
        def raise_for_status(self) -> None:
            pass

        def json(self) -> dict:
            return {"timings_ms": {"total": 1.0}}

    class Client:
        def __init__(self, **_) -> None:
            pass

        def __enter__(self):
            return self

        def __exit__(self, *_) -> None:
            pass

        def post(self, *_, **__) -> Response:
            posts.append(1)
            if 3 < len(posts) <= 6:  # after 3 warm-ups, round 1's three searches are slow
                time.sleep(0.06)
            return Response()

    class Model:
        def encode(self, *_, **__) -> None:
            pass

    monkeypatch.setattr(ab, "served", lambda *a, **k: contextlib.nullcontext("http://fake"))
    monkeypatch.setattr(ab, "_bare_model", lambda *a: Model())
    monkeypatch.setattr(httpx, "Client", Client)
    lines: list[str] = []
    ab.api_search_latency(Path("unused"), "bench", None, "minilm", ["a", "b", "c"], instruction="x",
                          rounds=2, log=lines.append)
    first, second = (float(line.split("API p50 ")[1].split(" ms")[0]) for line in lines)
    assert first >= 55 and second < 20, lines  # the running median of both rounds was ~30


def test_jobs_of_one_id_and_another_collection_is_refused(tmp_path, run) -> None:
    """`facet jobs 1 -c other` printed job 1 of its own collection: the filter was ignored."""
    src = tmp_path / "small.txt"
    src.write_text("the ferry leaves at noon")
    assert run("index", str(src), "--collection", "c1").returncode == 0
    assert "job 1 completed: c1" in run("jobs", "1", "-c", "c1").stdout
    for follow in ([], ["--follow"]):
        wrong = run("jobs", "1", "-c", "other", *follow)
        assert wrong.returncode == 2, follow
        assert "job 1 is not of collection 'other' but of 'c1'" in wrong.stderr


def test_jobs_of_a_job_with_many_errors_prints_the_first_ones_and_how_many_more(
        tmp_path, run, monkeypatch) -> None:
    """`facet jobs 1` printed every per-document error (20,002 lines for 20,000) and `--follow`
    read them all at each interval; `facet index` prints 20 and "... N more"."""
    from app.services.collections import CollectionService

    src = tmp_path / "e.jsonl"
    src.write_text(json.dumps({"id": "ok", "text": "valid"}) + "\n" + "".join(
        json.dumps({"id": f"r{i}", "text": "  "}) + "\n" for i in range(300)))
    indexed = run("index", str(src), "-c", "errs", "--embedder", "minilm")
    # The hint shows the rest: `facet jobs 1` alone prints the same first 20 again.
    assert "... 280 more: facet jobs 1 --errors 300\n" in indexed.stderr, indexed.stderr
    shown = run("jobs", "1")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert sum(line.startswith("  error: ") for line in lines) == 20, shown.stdout
    assert lines[-1] == ("  ... 280 more (of 300): facet jobs 1 --errors-offset 20 shows the next "
                         "ones (--errors N: N a page, up to 1000)")
    five = run("jobs", "1", "--errors", "5").stdout
    assert five.count("  error: ") == 5 and "  ... 295 more (of 300)" in five
    everything = run("jobs", "1", "--errors", "1000").stdout
    assert everything.count("  error: ") == 300 and " more (of " not in everything
    payload = json.loads(run("jobs", "1", "--json").stdout)
    assert len(payload["errors"]) == 100 and payload["errors_total"] == 300
    wrong = run("jobs", "1", "--errors", "1001")
    assert wrong.returncode == 2 and "errors must be from 0 to 1000, got 1001" in wrong.stderr
    assert run("jobs", "--errors", "5").returncode == 2
    followed = run("jobs", "1", "--follow", "--errors", "5")  # was silently ignored
    assert followed.returncode == 2 and "--follow shows no per-document errors" in followed.stderr
    asked: list[int | None] = []
    job = CollectionService.job

    def spy(self, job_id, errors=100, collection=None, **more):
        asked.append(errors)
        return job(self, job_id, errors, collection, **more)

    monkeypatch.setattr(CollectionService, "job", spy)
    followed = run("jobs", "1", "--follow", "--interval", "0.1")
    assert "job 1 completed" in followed.stdout and asked[1:] == [0], asked


def test_collections_counts_documents_a_stopped_job_left_pending(tmp_path, data, run) -> None:
    """After a kill -9 between a batch's writes, `facet collections` said "2 documents indexed,
    0 failed" of a collection of 3, its points counting the third, with nothing explaining it."""
    import sqlite3

    src = tmp_path / "src"
    src.mkdir()
    for i in range(3):
        (src / f"n{i}.txt").write_text(f"Note {i} about the lighthouse keeper's garden.")
    assert run("index", str(src), "-c", "notes", "--embedder", "minilm").returncode == 0
    with sqlite3.connect(data / "facet.db") as db:  # as a killed job leaves it
        db.execute("UPDATE documents SET status = 'pending' WHERE key LIKE '%n2.txt'")
    listed = run("collections").stdout
    assert ("notes: 2 documents indexed, 0 failed, 1 pending (a job stopped before finishing "
            "them: `facet jobs` says how to resume it), ") in listed, listed
    # A search answered from the other two without a word (only the listing said it).
    found = run("search", "lighthouse garden", "-c", "notes", "--json")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["note"] == (
        "collection 'notes': a job stopped before finishing 1 document (and any it had not "
        "reached yet), which this search may miss or find as they were: `facet jobs` says how "
        "to resume it (GET /jobs)")
    text = run("search", "lighthouse garden", "-c", "notes")
    assert "a job stopped before finishing 1 document" in text.stdout + text.stderr
    assert run("index", str(src), "-c", "notes", "--embedder", "minilm").returncode == 0
    again = json.loads(run("search", "lighthouse garden", "-c", "notes", "--json").stdout)
    assert again["note"] is None and len(again["results"]) == 3


def test_a_killed_first_job_is_named_interrupted_not_by_its_last_progress_line(tmp_path, data,
                                                                               run) -> None:
    """After a kill -9 of a collection's first job, a search said "none indexed (job 1:
    encoding chunk 0/124 of this batch)": its row's last progress text, as if the job's end."""
    import sqlite3

    src = tmp_path / "src"
    src.mkdir()
    for i in range(3):
        (src / f"n{i}.txt").write_text(f"Note {i} about the lighthouse keeper's garden.")
    assert run("index", str(src), "-c", "notes", "--embedder", "minilm").returncode == 0
    with sqlite3.connect(data / "facet.db") as db:  # as a kill -9 in its first batch leaves it
        db.execute("UPDATE documents SET status = 'pending'")
        db.execute("UPDATE index_jobs SET state = 'running', message = 'encoding chunk 0/124 of "
                   "this batch', finished_at = NULL")
    note = json.loads(run("search", "lighthouse", "-c", "notes", "--json").stdout)["note"]
    assert note.startswith("collection 'notes': a job stopped before finishing 3 documents (and "
                           "any it had not reached yet)"), note  # (its old points still found)
    from app.core import Facet
    from app.settings import FacetSettings

    facet = Facet(FacetSettings(data_dir=data))
    try:  # what a search that found nothing begins its note with
        said = facet.searching.nothing_searchable_note("notes")
    finally:
        facet.close()
    assert said is not None and said.startswith(
        "the collection holds nothing searchable: 3 documents, none indexed (job 1 interrupted: "
        "its writer stopped without finishing; run `facet index "), said
    assert "encoding chunk" not in said, said


def test_ctrl_c_as_the_jobs_row_is_recorded_leaves_no_row_and_says_so(tmp_path, monkeypatch) -> None:
    """A Ctrl-C landing just after the job's row was committed, before the run: the row stayed
    `queued` (`facet jobs`: interrupted, never started) and the CLI said "job 1 queued: "."""
    import app.services.indexing as indexing
    from tests.app.cli_runner import invoke_cli

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("a note about harbours")
    real = indexing.PreparedJob
    calls: list[int] = []

    def interrupted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(indexing, "PreparedJob", interrupted)
    env = {"FACET_DATA_DIR": str(tmp_path / "data")}
    done = invoke_cli("index", str(src), "-c", "r", "-e", "minilm", env=env)
    assert done.returncode == 130, done.stdout + done.stderr
    assert "interrupted before the job started" in done.stderr and "queued" not in done.stderr, done.stderr
    listed = invoke_cli("jobs", "--json", env=env)
    assert json.loads(listed.stdout) == [], listed.stdout


def test_a_collection_named_as_a_lock_file_is_refused_before_anything_is_made(
        tmp_path: Path) -> None:
    """`facet index src -c notes.lock` beside a collection `notes`: its folder name was the
    lock file of `notes` (a traceback, and a half-made row that `facet delete` could not
    remove). Refused as any name no collection can have, exit 2, nothing made."""
    from tests.app.cli_runner import invoke_cli, tiny_data_folder

    data = tiny_data_folder(tmp_path)
    env = {"FACET_DATA_DIR": str(data)}
    refused = invoke_cli("index", str(tmp_path / "src"), "-c", "tiny.lock", "-e", "minilm", env=env)
    assert refused.returncode == 2, (refused.returncode, refused.stderr)
    assert "invalid collection name 'tiny.lock': a name may not end in '.lock'" in refused.stderr
    listed = invoke_cli("collections", "--json", env=env)
    assert [c["name"] for c in json.loads(listed.stdout)] == ["tiny"]


def test_a_lock_named_collection_made_before_the_rule_is_still_listed_and_deleted(
        tmp_path: Path, monkeypatch) -> None:
    """The rule is for new names: refused when reading, a `notes.lock` indexed by an older Facet
    made `facet collections` (and GET /collections) fail as a whole, and could not be deleted."""
    import indexer.store
    from app.services import indexing
    from indexer.store import validate_name
    from tests.app.cli_runner import invoke_cli

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("card payment declined twice")
    env = {"FACET_DATA_DIR": str(tmp_path / "data")}
    with monkeypatch.context() as older:  # as Facet indexed it before the rule
        older.setattr(indexer.store, "validate_new_collection_name", validate_name)
        older.setattr(indexing, "validate_new_collection_name", validate_name)
        assert invoke_cli("index", str(src), "-c", "old.lock", "-e", "minilm", env=env).returncode == 0
    assert invoke_cli("index", str(src), "-c", "other", "-e", "minilm", env=env).returncode == 0
    listed = invoke_cli("collections", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert [c["name"] for c in json.loads(listed.stdout)] == ["old.lock", "other"]
    found = invoke_cli("search", "card", "-c", "old.lock", env=env)
    assert found.returncode == 0 and "a.txt" in found.stdout, found.stderr
    assert invoke_cli("delete", "old.lock", "-y", env=env).returncode == 0
    assert [c["name"] for c in json.loads(invoke_cli("collections", "--json", env=env).stdout)] \
        == ["other"]


def test_api_search_rebuilds_an_unfinished_or_another_embedders_collection(
        tmp_path, monkeypatch, run) -> None:
    """`--bench-dir`: a build interrupted part-way (its facet.db made) was "reused", and every
    later run failed on it; one built for another embedder was searched with this one's
    queries. Only a finished build of the same embedder is reused."""
    from app.services import api_bench as ab
    from app.services import benchmark as bm

    builds: list[str] = []
    build = bm.build_search_bench_collection

    def counted(data, cache, embedder, n):
        builds.append(embedder)
        return build(data, cache, embedder, n)

    timing = {"p50_ms": 1.0, "p95_ms": 1.0, "stage_p50_ms": {}}
    monkeypatch.setattr(bm, "build_search_bench_collection", counted)
    monkeypatch.setattr(ab, "inprocess_search_latency", lambda *a, **k: timing | {"threads": 1})
    monkeypatch.setattr(ab, "api_search_latency", lambda *a, **k: {
        "searches": 1, "top_k": 10, "api_p50_ms": 1.0, "api_p95_ms": 1.0, "encode_p50_ms": 1.0,
        "encode_p95_ms": 1.0, "p50_minus_encode_ms": 0.0, "p50_ratio_to_encode": 1.0,
        "server_stage_p50_ms": {}, "http_and_client_p50_ms": 0.0})
    bench_dir = tmp_path / "kept"
    data = bench_dir / "search-20"
    data.mkdir(parents=True)
    (data / "facet.db").write_bytes(b"")  # an interrupted build's
    args = ("bench", "--parts", "api-search", "--points", "20", "--bench-dir", str(bench_dir))
    first = run(*args)
    assert first.returncode == 0, first.stderr
    assert "holds an unfinished build or another embedder's collection: building it again" in first.stdout
    again = run(*args)
    assert again.returncode == 0 and f"reusing the 20-chunk collection in {data}" in again.stdout
    other = run(*args, "--embedder", "minilm[instruction_weight=0.5]")
    assert other.returncode == 0, other.stderr
    assert "building it again" in other.stdout
    assert builds == ["minilm", "minilm[instruction_weight=0.5]"]
