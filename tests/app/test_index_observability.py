"""What an operator sees of indexing in logs: `facet index` progress with stderr not a terminal,
the embedder's truncation line once per run (or per minute off the main thread), a job whose
documents failed logged as a WARNING with its message, the estimate of a running job's total on
its row, and a collection whose store folder is gone flagged in listings."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from app.core import Facet
from app.encoding import EmbedderCache
from app.settings import FacetSettings
from tests.app.cli_runner import invoke_cli, tiny_data_folder
from tests.app.services.conftest import write_corpus


def _facet_process(tmp_path: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """`facet ARGS` in a process of its own over a data folder under ``tmp_path``: the log
    handler writes to the real stderr, which CliRunner does not capture."""
    facet = Path(sys.executable).with_name("facet")
    return subprocess.run([str(facet), *args], capture_output=True, text=True, timeout=timeout,
                          env=os.environ | {"FACET_DATA_DIR": str(tmp_path / "data"),
                                            "OMP_NUM_THREADS": "1"})


def test_facet_index_prints_progress_lines_when_stderr_is_not_a_terminal(tmp_path) -> None:
    """Under cron, systemd or docker logs it printed nothing until its summary (95 s silent on
    600 documents)."""
    src = tmp_path / "src"
    write_corpus(src, 20, words=20)
    run = invoke_cli("index", str(src), "-c", "c", "-e", "minilm", "--batch-chunks", "2",
                     env={"FACET_DATA_DIR": str(tmp_path / "data"), "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    assert lines[0] == f"indexing {src} into collection c", run.stderr
    progress = [line for line in lines if re.match(r"  \d+/20 documents \(\d+%\), ", line)]
    assert 3 <= len(progress) <= 12, run.stderr  # about every tenth, not every batch
    assert progress[-1].startswith("  20/20 documents (100%)"), run.stderr
    assert "job 1 completed: 20 documents seen" in run.stdout


def test_truncation_is_said_once_per_index_run(tmp_path) -> None:
    """`--chunk-tokens 512` with minilm (256): a "N of N texts were truncated" log line per
    batch, after the run's own warning said so."""
    src = tmp_path / "src"
    write_corpus(src, 3, words=800)
    run = _facet_process(tmp_path, "index", str(src), "-c", "big", "-e", "minilm",
                         "--chunk-tokens", "512", "--batch-chunks", "2", timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("and were truncated") == 0, run.stderr
    assert re.search(r"warning: \d+ of \d+ chunks", run.stderr), run.stderr  # the count kept


def test_truncation_off_the_main_thread_is_said_once_a_minute_with_its_count(minilm, caplog) -> None:
    """A server's model thread encodes each request's pieces as separate calls: one POST
    /v1/embeddings of 70 long texts logged 26 lines, mostly "1 of 1 texts were truncated"."""
    from embedders.base import flush_truncation_notes

    flush_truncation_notes()  # what other tests left
    long = "word " * 600

    def pieces() -> None:
        for _ in range(5):
            minilm.encode([long, "short"])

    with caplog.at_level(logging.WARNING, logger="embedders.base"):
        thread = threading.Thread(target=pieces)
        thread.start()
        thread.join()
        said = [r.getMessage() for r in caplog.records if "were truncated" in r.getMessage()]
        assert len(said) == 1 and "1 of 2 texts were longer than" in said[0], said
        flush_truncation_notes()
    said = [r.getMessage() for r in caplog.records if "were truncated" in r.getMessage()]
    assert len(said) == 2 and re.search(r"4 of 8 texts over the last \d+s \(4 encode calls\)",
                                        said[1]), said


def test_a_server_closing_says_what_its_embedders_held(tmp_path, minilm, caplog) -> None:
    """The held count was said only by the process's exit hook, which a SIGTERM (`facet serve`
    stopped) never ran: a 70-text request was logged as "1 of 1 texts" and the rest lost."""
    from embedders.base import flush_truncation_notes

    flush_truncation_notes()  # what other tests left
    facet = _server(tmp_path, minilm)
    long = "word " * 600
    with caplog.at_level(logging.WARNING, logger="embedders.base"):
        try:
            thread = threading.Thread(target=lambda: [facet.embed([long, "short"], embedder="minilm")
                                                      for _ in range(3)])
            thread.start()
            thread.join()
        finally:
            facet.close()
    said = [r.getMessage() for r in caplog.records if "were truncated" in r.getMessage()]
    assert len(said) == 2 and "2 of 4 texts over the last" in said[1], said


def _server(tmp_path: Path, minilm) -> Facet:
    cache = EmbedderCache("cpu")
    cache.put("minilm", minilm)
    return Facet.for_serving(FacetSettings(data_dir=tmp_path / "data"), embedders=cache)


def test_a_job_whose_documents_failed_is_logged_as_a_warning_with_its_message(tmp_path, minilm,
                                                                             caplog) -> None:
    src = tmp_path / "bad"
    src.mkdir()
    for i in range(3):
        (src / f"b{i}.txt").write_bytes(b"\x00\x01\x02 binary " * 10)
    server = _server(tmp_path, minilm)
    try:
        with caplog.at_level(logging.INFO, logger="app.jobs"):
            job = server.submit_index(src, "notes")
            assert server.job_runner.join(timeout=120)  # type: ignore[attr-defined]
    finally:
        server.close()
    records = [r for r in caplog.records if r.name == "app.jobs"]
    assert records[0].getMessage() == f"job {job.id} started (notes, {src}, embedder minilm)"
    end = records[1]
    assert end.levelno == logging.WARNING, end.getMessage()
    assert end.getMessage().endswith(": 3 of 3 documents failed, 0 indexed: see the job's errors; "
                                     f"failed: {src / 'b0.txt'}, {src / 'b1.txt'}, {src / 'b2.txt'}")
    listed = invoke_cli("jobs", "-c", "notes", env={"FACET_DATA_DIR": str(tmp_path / "data")})
    line = listed.stdout.splitlines()[0]
    # (then the note on the collection made for it and left empty, cut to the line's width)
    assert line.startswith(f"job {job.id} completed") and (
        "· 3 of 3 documents failed, 0 indexed: see the job's errors; collection 'notes' was made "
        "for this job") in line, listed.stdout


def test_a_failed_jobs_log_line_names_its_collection(caplog) -> None:
    from app.jobs import InlineJobRunner
    from app.services.indexing import IndexOptions, PreparedJob

    def broken(job) -> None:
        raise RuntimeError("a bug")

    job = PreparedJob(job_id=9, collection="notes", source="/src", embedder="minilm",
                      options=IndexOptions())
    with caplog.at_level(logging.ERROR, logger="app.jobs"):
        InlineJobRunner(broken).submit(job)
    assert caplog.records[0].getMessage() == "index job 9 (collection notes) failed"


def test_a_running_jobs_row_holds_the_estimated_total(facet, tmp_path) -> None:
    """GET /jobs/ID and `facet jobs ID` said docs_total 0 until the end."""
    src = tmp_path / "src"
    write_corpus(src, 12, words=20)
    from app.services.indexing import IndexOptions

    seen: list[tuple[int, bool]] = []

    def look(p) -> None:
        if not seen:
            job = facet.jobs("c", limit=1)[0]
            seen.append((job.docs_total, job.docs_total_estimated))

    report = facet.index(src, "c", IndexOptions(embedder="minilm", batch_chunks=2), progress=look)
    assert seen == [(12, True)]
    done = facet.job(report.job_id)
    assert (done.docs_total, done.docs_total_estimated) == (12, False)


def test_a_collection_whose_store_folder_is_gone_says_so(tmp_path) -> None:
    """It showed "? points" (points: null) with no reason; only a search said the store was
    gone."""
    data = tiny_data_folder(tmp_path)
    env = {"FACET_DATA_DIR": str(data)}
    assert "store files missing" not in invoke_cli("collections", env=env).stdout  # intact
    shutil.rmtree(data / "qdrant-edge" / "tiny")
    listed = invoke_cli("collections", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "? points" in listed.stdout and "store files missing" in listed.stdout, listed.stdout
    shown = json.loads(invoke_cli("collections", "tiny", "--json", env=env).stdout)
    assert shown["points"] is None and shown["store_missing"] is True


def test_truncation_is_said_once_per_cluster_run(tmp_path) -> None:
    """`facet cluster` encodes in pieces of the batch (told on its bar): each piece's cut texts
    were a log line of their own (4 for 100 long texts). 40 texts are two pieces of the CLI's
    batch of 32, so one line per piece would be two."""
    texts = tmp_path / "long.txt"
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
    texts.write_text("\n".join(" ".join(words[(i + j) % 10] for j in range(400)) for i in range(40)))
    run = _facet_process(tmp_path, "cluster", str(texts), "--embedder", "minilm", "--explain", "",
                         "--k", "2", "--instruction", "topic", timeout=180)
    assert run.returncode == 0, run.stderr
    said = [line for line in run.stderr.splitlines() if "were truncated" in line]
    assert len(said) == 1 and "40 of 40 texts" in said[0], run.stderr
