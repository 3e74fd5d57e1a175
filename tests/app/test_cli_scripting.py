"""`facet` driven from shell scripts: a stderr whose reader is gone or full, a closed stdin,
usage errors, help into a closed pipe, the time left after skipped documents, a cancelled
``--json`` run, and ``-`` as SOURCE. Until 2026-11-30 (seventh session) a closed stderr failed
the indexing job part-way and exited 0, ``<&-`` crashed `facet delete`, a usage error was
rich's box, `facet --help | head -1` exited 1, and `facet cluster -` said "- does not exist"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.app.cli_runner import invoke_cli, tiny_data_folder
from tests.app.services.conftest import write_corpus

ROOT = Path(__file__).resolve().parents[2]


def _facet(data: Path, *args: str, **kwargs: Any) -> subprocess.Popen[str]:
    env = dict(os.environ, FACET_DATA_DIR=str(data), OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT),
               COLUMNS="20")
    env.update(kwargs.pop("env", {}))
    return subprocess.Popen([sys.executable, "-m", "app", *args], cwd=ROOT, env=env, text=True,
                            **kwargs)


def _closed_pipe() -> tuple[int, int]:
    """A pipe whose read end is closed already: every write to the other end fails (EPIPE)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    return read_end, write_end


@pytest.mark.parametrize("stderr_is", ["closed pipe", "/dev/full"])
def test_index_finishes_when_stderr_fails(tmp_path, stderr_is) -> None:
    """`facet index big -c x --json 2>&1 | head -1`: the progress write raised BrokenPipeError,
    the job was recorded failed part-way and the command exited 0."""
    write_corpus(tmp_path / "src", 12, words=10)
    if stderr_is == "closed pipe":
        _, err_fd = _closed_pipe()
    else:
        err_fd = os.open("/dev/full", os.O_WRONLY)
    try:
        proc = _facet(tmp_path / "data", "index", str(tmp_path / "src"), "-c", "x", "-e", "minilm",
                      "--batch-chunks", "2", "--json", stdout=subprocess.PIPE, stderr=err_fd)
    finally:
        os.close(err_fd)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    report = json.loads(out)
    assert (report["state"], report["docs_indexed"], report["docs_failed"]) == ("completed", 12, 0)
    listed = invoke_cli("jobs", "--json", env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert '"completed"' in listed.stdout and '"failed"' not in listed.stdout, listed.stdout


def test_cluster_writes_its_out_file_when_stderr_is_a_closed_pipe(tmp_path) -> None:
    """`facet cluster ... -o file 2>&1 | head -1` wrote no file and exited 0."""
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(["card declined", "card blocked", "rain tomorrow", "sunny later",
                                "card stolen", "storm warning"]) + "\n")
    _, err_fd = _closed_pipe()
    try:
        proc = _facet(tmp_path / "data", "cluster", str(texts), "-i", "topic", "-e", "minilm",
                      "--explain", "", "--k", "2", "-o", str(tmp_path / "cl.json"),
                      stdout=subprocess.PIPE, stderr=err_fd)
    finally:
        os.close(err_fd)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    assert len(json.loads((tmp_path / "cl.json").read_text())["clusters"]) == 2


def _ask_delete(data: Path, stdin: Any, given: str | None = None) -> tuple[int, str]:
    proc = _facet(data, "delete", "tiny", stdin=stdin, stdout=subprocess.PIPE,
                  stderr=subprocess.PIPE)
    _, err = proc.communicate(given, timeout=60)
    return proc.returncode, err


def test_delete_with_stdin_closed_says_there_was_no_answer(tmp_path) -> None:
    """`facet delete NAME <&-`: AttributeError 'NoneType' object has no attribute 'readline'."""
    data = tiny_data_folder(tmp_path)
    read_end, write_end = os.pipe()
    os.close(write_end)
    proc = _facet(data, "delete", "tiny", stdin=read_end, stdout=subprocess.PIPE,
                  stderr=subprocess.PIPE, preexec_fn=lambda: os.close(0))
    os.close(read_end)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert err.strip().splitlines()[-1] == (
        "error: no answer on standard input (not a terminal?): nothing was deleted; give -y to "
        "delete without asking"), err


def test_delete_reads_an_answer_after_a_bom_and_names_invalid_input_in_lower_case(tmp_path) -> None:
    data = tiny_data_folder(tmp_path)
    rc, err = _ask_delete(data, subprocess.PIPE, "maybe\n")  # asked again, then no answer
    assert rc == 2, err
    assert "\nerror: invalid input 'maybe': answer y (yes) or n (no)\n" in err, err
    assert "Error:" not in err
    rc, err = _ask_delete(data, subprocess.PIPE, "\ufeffy\n")  # Windows' echo, a BOM first
    assert rc == 0, err
    assert "tiny" not in invoke_cli("collections", env={"FACET_DATA_DIR": str(data)}).stdout


@pytest.mark.parametrize(("args", "line"), [
    (("search", "x", "--collection", "mini", "--bogus"),
     "error: No such option: --bogus (facet search --help)"),
    (("jobs", "abc"), "error: Invalid value for 'job_id': "),
    (("search", "--collection", "mini"), "error: Missing argument 'query'. (facet search --help)"),
])
def test_a_usage_error_is_one_error_line(tmp_path, args, line) -> None:
    """It was typer's box of box-drawing characters, wrapped mid-phrase at COLUMNS=20."""
    proc = _facet(tmp_path / "data", *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert (out, len(err.splitlines())) == ("", 1), err
    assert err.startswith(line), err
    assert err.rstrip().endswith(f"(facet {args[0]} --help)"), err


def test_a_usage_error_in_process_is_one_line_with_its_hint() -> None:
    done = invoke_cli("search", "x", "--collection", "mini", "--jsn")
    assert done.returncode == 2
    assert done.stderr == ("error: No such option: --jsn (Possible options: --json) "
                           "(facet search --help)\n"), done.stderr


def test_a_collection_given_as_an_option_where_it_is_an_argument_says_so() -> None:
    """`facet documents -c NAME`, as `index`, `search` and `jobs` take it, was only "No such
    option: -c"."""
    for args, flag in ((("documents", "-c", "gamma"), "-c"), (("delete", "--collection", "g"), "--collection"),
                       (("collections", "-c", "gamma"), "-c")):
        done = invoke_cli(*args)
        assert done.returncode == 2
        assert done.stderr == (f"error: No such option: {flag} (this command takes the collection "
                               f"as an argument, not an option: drop {flag}) (facet {args[0]} "
                               "--help)\n"), done.stderr
    # Another command's unknown option is as it was.
    assert "takes the collection" not in invoke_cli("embedders", "-c", "x").stderr


@pytest.mark.parametrize("args", [("--help",), ("search", "--help")])
def test_help_into_a_closed_pipe_exits_0(tmp_path, args) -> None:
    """`facet --help | head -1` exited 1 (rich's on_broken_pipe)."""
    _, out_fd = _closed_pipe()
    try:
        proc = _facet(tmp_path / "data", *args, stdout=out_fd, stderr=subprocess.PIPE,
                      env={"COLUMNS": "80"})
    finally:
        os.close(out_fd)
    _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (0, "")


def test_time_left_counts_only_the_documents_encoded(monkeypatch) -> None:
    """After a resume 86 of 600 documents went by at once (unchanged); 10 more took 10 s. The
    line said "about 0s left" (10 s for 96 documents): 504 to go at 1 s each is 8m24s."""
    import io

    from app.commands.index import _log_lines
    from app.services.indexing import Progress

    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    update = _log_lines(None, 0.0, lambda: 0.0)
    update(Progress(86, 600, 0, 0.1, stage="encoding chunk 0/10 of this batch"))
    update(Progress(96, 600, 10, 10.1))
    last = err.getvalue().splitlines()[-1]
    # Some went by unchanged, so the rest may too: the time is an upper bound.
    assert "96/600 documents" in last, last
    assert "up to about 8m24s left (unchanged documents go faster)" in last, last
    # Nothing encoded yet (all unchanged so far): no time left is guessed.
    err.truncate(0)
    update = _log_lines(None, 0.0, lambda: 0.0)
    update(Progress(300, 600, 0, 0.5))
    assert " left" not in err.getvalue(), err.getvalue()
    # Every document so far encoded: the estimate alone, no "up to".
    err.truncate(0)
    err.seek(0)
    update = _log_lines(None, 0.0, lambda: 0.0)
    update(Progress(0, 600, 0, 0.0, stage="encoding chunk 0/10 of this batch"))
    update(Progress(60, 600, 60, 60.0))
    assert err.getvalue().splitlines()[-1].endswith("1m00s elapsed, about 9m00s left"), err.getvalue()


def test_a_cancelled_json_run_says_why_on_stderr(tmp_path, monkeypatch) -> None:
    """With --json a run cancelled from elsewhere exited 1 with nothing on stderr."""
    import app.commands.index as index_cmd

    write_corpus(tmp_path / "src", 6, words=10)
    opened: list[Any] = []
    real_open, real_bar = index_cmd.open_facet, index_cmd.progress_bar

    def open_facet(**kwargs: Any) -> Any:
        context = real_open(**kwargs)
        facet = context.__enter__()
        opened.append(facet)

        class Held:
            def __enter__(self) -> Any:
                return facet

            def __exit__(self, *exc: Any) -> Any:
                return context.__exit__(*exc)

        return Held()

    def progress_bar(start: Any = None, **kwargs: Any) -> Any:
        bar, update = real_bar(start, **kwargs)

        def cancelling(p: Any) -> None:
            if not cancelling.done:  # type: ignore[attr-defined]
                cancelling.done = True  # type: ignore[attr-defined]
                facet = opened[-1]
                facet.cancel_job(facet.jobs("x", limit=1)[0].id)
            update(p)

        cancelling.done = False  # type: ignore[attr-defined]
        return bar, cancelling

    monkeypatch.setattr(index_cmd, "open_facet", open_facet)
    monkeypatch.setattr(index_cmd, "progress_bar", progress_bar)
    done = invoke_cli("index", str(tmp_path / "src"), "-c", "x", "-e", "minilm", "--batch-chunks",
                      "1", "--json", env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["state"] == "cancelled"
    assert "error: job 1 was cancelled by a request (`facet jobs 1 --cancel`, the API or the " \
           "UI): " in done.stderr, done.stderr


def test_cluster_dash_reads_the_texts_from_stdin(tmp_path) -> None:
    """`facet cluster -` said "- does not exist" (exit 3); read as a .txt file is (BOM, CRLF)."""
    proc = _facet(tmp_path / "data", "cluster", "-", "-i", "topic", "-e", "minilm", "--explain",
                  "", "--k", "2", "--json", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                  stderr=subprocess.PIPE)
    out, err = proc.communicate("\ufeffcard declined\r\ncard blocked\r\nrain tomorrow\r\n\r\n"
                                "storm warning\r\n", timeout=120)
    assert proc.returncode == 0, err
    result = json.loads(out)
    assert sorted(result["texts"]) == ["card blocked", "card declined", "rain tomorrow",
                                       "storm warning"], result["texts"]
    proc = _facet(tmp_path / "data", "cluster", "-", "-i", "topic", "-e", "minilm",
                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, err = proc.communicate("only one\n", timeout=60)
    assert (proc.returncode, err) == (2, "error: standard input holds 1 text; clustering needs "
                                         "at least 2\n")


def test_index_dash_is_refused_in_one_line(tmp_path) -> None:
    done = invoke_cli("index", "-", "-c", "x", env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: facet index reads files and folders, not standard "
                                  "input ('-')"), done.stderr
    assert len(done.stderr.splitlines()) == 1


# A closed stdout (`facet ... 2>&1 | head -1`, `... | head -1`): until 2026-11-30 (seventh
# session) its EPIPE ended the command with exit 0 wherever it came (``output_error_exit``): a
# failed document's exit 4 was lost, and the `--out` file written after the printing was not.

def _with_closed_stdout(data: Path, *args: str, stderr_too: bool) -> tuple[int, str]:
    """``facet ARGS | head -0`` (``2>&1`` too where ``stderr_too``): its return code and stderr."""
    _, out_fd = _closed_pipe()
    try:
        proc = _facet(data, *args, stdout=out_fd,
                      stderr=out_fd if stderr_too else subprocess.PIPE)
    finally:
        os.close(out_fd)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err or ""


@pytest.mark.parametrize("stderr_too", [True, False])
def test_index_keeps_its_failure_exit_when_stdout_is_a_closed_pipe(tmp_path, stderr_too) -> None:
    """`facet index m_v -c x -e minilm 2>&1 | head -1` exited 0 with a failed document (4)."""
    write_corpus(tmp_path / "src", 2, words=10)
    (tmp_path / "src" / "zz.txt").write_bytes(b"bad\0bin")  # a document that fails
    rc, err = _with_closed_stdout(tmp_path / "data", "index", str(tmp_path / "src"), "-c", "x",
                                  "-e", "minilm", stderr_too=stderr_too)
    assert rc == 4, err
    if not stderr_too:  # its error lines still come, after the result line that could not
        assert "  error: " in err and "(--allow-failures to exit 0 anyway)" in err, err


def test_cluster_writes_its_out_file_when_stdout_is_a_closed_pipe(tmp_path) -> None:
    """`facet cluster t40.txt -i topic -e minilm --k 3 -o o1.json 2>&1 | head -1`: no file."""
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(["card declined", "card blocked", "rain tomorrow", "sunny later",
                                "card stolen", "storm warning"]) + "\n")
    rc, err = _with_closed_stdout(tmp_path / "data", "cluster", str(texts), "-i", "topic", "-e",
                                  "minilm", "--explain", "", "--k", "2", "-o",
                                  str(tmp_path / "cl.json"), stderr_too=True)
    assert rc == 0, err
    assert len(json.loads((tmp_path / "cl.json").read_text())["clusters"]) == 2


def test_bench_writes_its_out_file_when_stdout_is_a_closed_pipe(tmp_path) -> None:
    """`facet bench --parts index ... --out b.json | head -1` ended at its second line: no file."""
    write_corpus(tmp_path / "src", 4, words=10)
    rc, err = _with_closed_stdout(tmp_path / "data", "bench", "--parts", "index", "--source",
                                  str(tmp_path / "src"), "--rounds", "1", "--out",
                                  str(tmp_path / "b.json"), stderr_too=False)
    assert rc == 0, err
    assert json.loads((tmp_path / "b.json").read_text())["index"]["documents"] == 4


def test_jobs_into_a_closed_pipe_still_exits_0(tmp_path) -> None:
    rc, err = _with_closed_stdout(tmp_path / "data", "jobs", "--json", stderr_too=False)
    assert (rc, err) == (0, "")


def test_search_dash_refuses_stdin_that_is_not_utf8_as_cluster_does(tmp_path) -> None:
    """`printf 'caf\\xe9 refund\\n' | facet search - -c d` blamed "an unpaired surrogate" and
    asked for "paired \\u escapes" (exit 2); `facet cluster -` says "not UTF-8 text" (exit 4)."""
    env = dict(os.environ, FACET_DATA_DIR=str(tmp_path / "data"), OMP_NUM_THREADS="1",
               PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "app", "search", "-", "-c", "d"], cwd=ROOT,
                          env=env, input=b"caf\xe9 refund\n", capture_output=True, timeout=60)
    assert (done.returncode, done.stdout) == (4, b""), done.stderr
    assert done.stderr.decode() == ("error: standard input is not UTF-8 text (byte 3); send the "
                                    "query as UTF-8\n")
    clustered = subprocess.run([sys.executable, "-m", "app", "cluster", "-", "-i", "topic"],
                               cwd=ROOT, env=env, input=b"ok\ncaf\xe9\n", capture_output=True,
                               timeout=60)
    assert clustered.returncode == done.returncode, clustered.stderr
    assert clustered.stderr.decode().startswith("error: standard input is not UTF-8 text")


def test_search_dash_in_process_refuses_stdin_that_is_not_utf8(tmp_path) -> None:
    done = invoke_cli("search", "-", "-c", "d", input=b"caf\xe9 refund\n",
                      env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert (done.returncode, done.stderr) == (
        4, "error: standard input is not UTF-8 text (byte 3); send the query as UTF-8\n")


def test_an_option_missing_its_value_names_the_commands_help(tmp_path) -> None:
    """`facet search q -c d --rerank` said "error: Option '--rerank' requires an argument."
    alone: click's parser raises it without a context."""
    proc = _facet(tmp_path / "data", "search", "q", "-c", "d", "--rerank",
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out) == (2, "")
    assert err == "error: Option '--rerank' requires an argument. (facet search --help)\n", err
    done = invoke_cli("jobs", "--follow", "-c")
    assert (done.returncode, done.stderr) == (
        2, "error: Option '-c' requires an argument. (facet jobs --help)\n")


def test_a_piped_answer_ends_the_question_line(tmp_path) -> None:
    """`printf 'y\\n' | facet delete X 2>&1` said "...? [y/N]: deleted X: ..." on one line."""
    data = tiny_data_folder(tmp_path)
    rc, err = _ask_delete(data, subprocess.PIPE, "n\n")
    assert rc == 1, err
    # What was not done (a bare "Aborted." said neither that nor why).
    assert err.endswith("? [y/N]: \nnothing was deleted (the answer was no)\n"), repr(err)
    rc, err = _ask_delete(data, subprocess.PIPE, "maybe\n")  # one line break, not two
    assert "? [y/N]: \nerror: invalid input 'maybe'" in err, repr(err)
    rc, err = _ask_delete(data, subprocess.PIPE, "y\n")
    assert rc == 0, err
    assert err.endswith("? [y/N]: \n"), repr(err)


def test_eval_writes_its_report_when_stdout_is_a_closed_pipe(tmp_path) -> None:
    """`facet eval ... | head -1` printed its table first and ended there: no results.json."""
    from tests.app.test_eval_collection import write_beir

    beir = write_beir(tmp_path / "beir", {"d1": ("Cards", "card payment declined twice"),
                                          "d2": ("Rain", "rain and storms tomorrow")},
                      {"1": "declined card"}, {"1": {"d1": 1}})
    data = tmp_path / "data"
    done = invoke_cli("index", str(beir / "corpus.jsonl"), "-c", "sci", "-e", "minilm",
                      env={"FACET_DATA_DIR": str(data)})
    assert done.returncode == 0, done.stderr
    rc, err = _with_closed_stdout(data, "eval", "--collection", "sci", "--task", f"beir:{beir}",
                                  "--no-progress", "--out", str(tmp_path / "rep"),
                                  stderr_too=False)
    assert rc == 0, err
    assert (tmp_path / "rep" / "results.json").is_file(), err


def test_a_large_file_being_streamed_is_not_counted_done(monkeypatch) -> None:
    """One 8,000-word file streamed, 10% in: the line said "1/1 documents (100%) ... big.txt 10%"."""
    import io

    from app.commands.index import _log_lines
    from app.services.indexing import Progress

    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    update = _log_lines(None, 0.0, lambda: 0.0)
    update(Progress(1, 1, 32, 1.0, current="/data/big.txt", current_fraction=0.1))
    assert err.getvalue().splitlines()[-1].startswith("  0/1 documents (10%), 32 chunks written"), err.getvalue()
    update(Progress(1, 1, 320, 9.0))
    assert err.getvalue().splitlines()[-1].startswith("  1/1 documents (100%)"), err.getvalue()


def test_embed_from_stdin_takes_more_texts_than_one_api_call(tmp_path) -> None:
    """`seq 1 3000 | sed 's/^/text /' | facet embed - -e minilm` was refused by the API's bound
    on one request ("3000 texts in one call, more than the limit of 2048"): docs/cli.md names
    none. (The limit is set to 4 here; the vectors are those of one call.)"""
    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "FACET_MAX_TEXTS_PER_CALL": "4"}
    texts = [f"text {i}" for i in range(10)]
    done = invoke_cli("embed", "-", "-e", "minilm", env=env, input="\n".join(texts) + "\n")
    assert done.returncode == 0, done.stderr
    sliced = json.loads(done.stdout)["vectors"]
    whole = json.loads(invoke_cli("embed", *texts[:4], "-e", "minilm", env=env).stdout)["vectors"]
    assert len(sliced) == 10 and sliced[:4] == whole
