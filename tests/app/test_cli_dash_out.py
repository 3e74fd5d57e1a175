"""``--out -`` / ``-o -`` is standard output, as Unix tools read it: it wrote a file named "-"
in the current folder (and said "wrote -"). One place reads it (``write_out_file`` and its
check, ``prepare_out_file``), so every command with an output file takes it."""

from __future__ import annotations

import json
from pathlib import Path

from app.commands.common import prepare_out_file, write_out_file
from tests.app.cli_runner import invoke_cli

TEXTS = ["My card has not arrived yet.", "Where is my new card?", "The card I ordered never came.",
         "I want a refund for this.", "Please give my money back.", "Refund the payment, please."]


def test_write_out_file_dash_is_stdout(tmp_path, monkeypatch, capsys) -> None:
    """The shared writer (`facet cluster --out`, `facet bench --out`): the text on stdout, no
    file "-" checked or written."""
    monkeypatch.chdir(tmp_path)
    prepare_out_file(Path("-"))
    write_out_file(Path("-"), '{"a": 1}')
    assert capsys.readouterr().out == '{"a": 1}\n'
    assert list(tmp_path.iterdir()) == []
    write_out_file(tmp_path / "-", "x")  # a file named "-", spelt with its folder, is a file
    assert (tmp_path / "-").read_text() == "x"


def test_cluster_out_dash_prints_the_file_content_on_stdout(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "texts.txt"
    src.write_text("\n".join(TEXTS))
    base = ["cluster", str(src), "-i", "What does the customer want?", "--k", "2",
            "--embedder", "minilm", "--explain", ""]
    env = {"FACET_DATA_DIR": str(tmp_path / "data")}
    to_file = invoke_cli(*base, "--out", str(tmp_path / "c.json"), env=env)
    assert to_file.returncode == 0, to_file.stderr
    dashed = invoke_cli(*base, "-o", "-", env=env)
    assert dashed.returncode == 0, dashed.stderr
    assert not (tmp_path / "-").exists(), "wrote a file named '-'"
    printed = json.loads(dashed.stdout)  # stdout is the JSON alone: no listing, no "wrote -"
    written = json.loads((tmp_path / "c.json").read_text())
    for varies in ("timings_ms", "encode_reused"):
        printed.pop(varies), written.pop(varies)
    assert printed == written
    # The listing the file's run printed on stdout went to stderr, whole.
    listing = [line for line in to_file.stdout.splitlines() if not line.startswith("wrote ")]
    assert listing and all(line in dashed.stderr.splitlines() for line in listing), dashed.stderr
    assert "wrote" not in dashed.stdout + dashed.stderr


def test_bench_out_dash_prints_the_json_alone_and_its_lines_on_stderr(tmp_path, monkeypatch) -> None:
    """`facet bench --out -` printed its measurement lines and "wrote -" on stdout around the
    JSON, so a script reading stdout got no JSON it could parse."""
    monkeypatch.chdir(tmp_path)
    done = invoke_cli("bench", "--parts", "store", "--points", "5", "--local-points", "5",
                      "--out", "-", env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["store"]  # stdout is the JSON alone
    assert [(r["backend"], r["points"]) for r in rows] == [("edge", 5), ("local", 5)]
    assert "load average" in done.stderr and "store edge 5 x" in done.stderr
    assert "wrote" not in done.stdout + done.stderr
    assert not (tmp_path / "-").exists()


def test_folder_outputs_refuse_dash_and_make_no_folder_named_dash(tmp_path, monkeypatch, shared_data) -> None:
    """`facet eval -o -`, `facet train -o -` and `facet soup -o -` made a folder named "-" (a
    report, a checkpoint: folders of files, which standard output cannot be)."""
    monkeypatch.chdir(tmp_path)
    env = {"FACET_DATA_DIR": str(tmp_path / "data")}
    for args in (("eval", "minilm", "--suite", "quick", "--data-dir", str(shared_data), "-o", "-"),
                 ("train", "causal-eos", "-o", "-"),
                 ("soup", "causal-eos", "causal-eos", "-o", "-")):
        done = invoke_cli(*args, env=env)
        assert (done.returncode, "Traceback" in done.stderr) == (2, False), (args, done.stderr)
        assert "- is standard output, but" in done.stderr, (args, done.stderr)
        assert not (tmp_path / "-").exists(), args


def test_an_out_that_is_a_dangling_link_or_a_fifo_is_written_through(tmp_path) -> None:
    """The writability probe opened the path and, where it had not existed, deleted it: a
    dangling link was itself deleted (its target left as an empty file, the output written where
    the link was); a fifo's reader took the probe's close for the end of its input, and the real
    write then waited for a reader for ever."""
    import os
    import threading

    (tmp_path / "target").mkdir()
    link = tmp_path / "out.json"
    link.symlink_to(tmp_path / "target" / "out.json")
    prepare_out_file(link)
    assert link.is_symlink() and not (tmp_path / "target" / "out.json").exists()
    write_out_file(link, '{"a": 1}')
    assert link.is_symlink() and (tmp_path / "target" / "out.json").read_text() == '{"a": 1}'

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    prepare_out_file(fifo)
    writer = threading.Thread(target=write_out_file, args=(fifo, '{"b": 2}'), daemon=True)
    writer.start()
    writer.join(10)
    reader.join(10)
    assert not writer.is_alive() and got == ['{"b": 2}']


def test_bench_without_the_banking77_data_says_so_before_measuring(tmp_path) -> None:
    """`facet bench` from a folder where ../shared/data is not: a 50-line FileNotFoundError
    traceback when the index part started (the scifact part said one line)."""
    env = {"FACET_DATA_DIR": str(tmp_path / "data"), "FACET_SHARED_DATA_DIR": str(tmp_path / "nodata")}
    done = invoke_cli("bench", "--parts", "index", "--index-docs", "5", "--rounds", "1", env=env)
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stderr.startswith(f"error: {tmp_path / 'nodata' / 'banking77' / 'train.csv'} not found, which the "
                                  "index part(s) read"), done.stderr
    assert "load average" not in done.stdout  # nothing measured
    for part, needed in (("gircse-cache", "stsb_en/stsb-en-train.csv"), ("scifact", "beir_scifact/corpus.jsonl")):
        done = invoke_cli("bench", "--parts", f"store,{part}", "--rounds", "1", env=env)
        assert done.returncode == 3 and f"{needed} not found, which the {part} part(s) read" in done.stderr, done.stderr
        assert "load average" not in done.stdout
