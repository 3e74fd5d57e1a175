"""What a CLI fuzzing round of the fourth session of 2026-12-05 found, each run through the real
CLI on a real data folder: endless input (``</dev/zero``) read until the out-of-memory killer
ended the command; `facet cluster <(...)` and a FIFO said "does not exist"; `facet index
<(...)` named /proc/N/fd/pipe:[M]; an empty path ("$UNSET") was the working folder;
`facet jobs ID -f --interval 1e12` and `facet train --device bogus` were tracebacks."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tests.app.cli_runner import invoke_cli, tiny_data_folder

TEXTS = "my card was lost\nmy card was stolen\nrates went up\nrates went down\n"


def _fifo(folder: Path, name: str, data: str) -> Path:
    """A FIFO at ``folder/name`` a thread writes ``data`` into once a reader opens it."""
    path = folder / name
    os.mkfifo(path)

    def write() -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(data)

    threading.Thread(target=write, daemon=True).start()
    return path


def test_endless_input_is_refused_at_a_bound(tmp_path) -> None:
    data = tiny_data_folder(tmp_path)
    env = {"FACET_DATA_DIR": str(data)}
    # A query: at most what 200,000 characters take.
    result = invoke_cli("search", "-", "-c", "tiny", input=b"a" * 900_000, env=env)
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "standard input holds more than 865.5 kB, the most read from it; a query takes at most 200,000" \
        in result.stderr, result.stderr
    # Keys or texts: at most 256 MiB, then refused (it read /dev/zero until memory ran out).
    result = invoke_cli("delete", "tiny", "--documents-from", "/dev/zero", "-y", env=env)
    assert result.returncode == 2 and "--documents-from /dev/zero holds more than 268.4 MB" in result.stderr, \
        (result.returncode, result.stderr)
    result = invoke_cli("cluster", "/dev/zero", "-i", "topic", "--explain", "", env=env)
    assert result.returncode == 2 and "/dev/zero holds more than 268.4 MB" in result.stderr, result.stderr
    assert invoke_cli("documents", "tiny", env=env).stdout.count("d") >= 2  # nothing was removed


def test_a_keys_file_missing_or_not_utf8_has_the_codes_of_every_such_file(tmp_path) -> None:
    """`--documents-from /nonexist` exited 2 ("cannot read it: [Errno 2] ..."), where a missing
    file is 3 everywhere else, and a file that is not UTF-8 text 4 (the exit-code audit of the
    fourth session of 2026-12-06)."""
    data = tiny_data_folder(tmp_path)
    env = {"FACET_DATA_DIR": str(data)}
    missing = invoke_cli("delete", "tiny", "--documents-from", str(tmp_path / "nothere"), "-y",
                         env=env)
    assert missing.returncode == 3, (missing.returncode, missing.stderr)
    assert f"--documents-from {tmp_path / 'nothere'} does not exist" in missing.stderr
    latin = tmp_path / "keys.txt"
    latin.write_bytes("caf\u00e9.txt\n".encode("latin-1"))
    bad = invoke_cli("delete", "tiny", "--documents-from", str(latin), "-y", env=env)
    assert bad.returncode == 4 and "is not UTF-8 text" in bad.stderr, (bad.returncode, bad.stderr)
    # Under a file (not a folder): missing too, as `facet cluster` says it (verification round).
    under = invoke_cli("delete", "tiny", "--documents-from", str(latin / "x"), "-y", env=env)
    assert under.returncode == 3, (under.returncode, under.stderr)
    folder = invoke_cli("delete", "tiny", "--documents-from", str(tmp_path), "-y", env=env)
    assert folder.returncode == 2 and "is a folder; give a file of keys" in folder.stderr, \
        folder.stderr
    assert invoke_cli("documents", "tiny", env=env).stdout.count("d") >= 2  # nothing was removed


def test_a_pipe_is_clustered_and_read_as_labels(tmp_path) -> None:
    texts = _fifo(tmp_path, "texts", TEXTS)
    labels = _fifo(tmp_path, "labels", "card\ncard\nrate\nrate\n")
    result = invoke_cli("cluster", str(texts), "--labels", str(labels), "-i", "topic", "--explain", "",
                        "--k", "2", env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert result.returncode == 0, result.stderr
    assert "V-measure 100.00 (out of 100) against 4 labels (2 classes)" in result.stdout + result.stderr
    empty = invoke_cli("cluster", "/dev/null", "-i", "topic", "--explain", "")
    assert empty.returncode == 2 and "/dev/null holds 0 texts; clustering needs at least 2" in empty.stderr


def test_a_pipe_is_no_source_to_index(tmp_path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for source in (str(fifo), "/dev/zero"):
        result = invoke_cli("index", source, "-c", "p", env={"FACET_DATA_DIR": str(tmp_path / "data")})
        assert result.returncode == 2, (source, result.returncode, result.stderr)
        assert f"{source} is a pipe or a device, not a file or folder: index reads files and folders" \
            in result.stderr, result.stderr


@pytest.mark.parametrize("args", [
    ("index", "", "-c", "x"), ("index", " ", "-c", "x"), ("cluster", "", "-i", "t"),
    ("cluster", "-", "-i", "t", "--labels", ""), ("cluster", "-", "-i", "t", "--out", ""),
    ("train", "causal-eos", "--out", ""), ("soup", "a", "b", "--out", ""),
    ("eval", "minilm", "--data-dir", ""), ("eval", "minilm", "--out", " "), ("eval", "minilm", "--cache-dir", ""),
])
def test_an_empty_path_is_refused_not_read_as_the_working_folder(args, tmp_path, monkeypatch) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    monkeypatch.chdir(tmp_path)
    result = invoke_cli(*args, env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "is empty; give a path" in result.stderr, result.stderr
    assert not (tmp_path / "data" / "qdrant-edge").exists()


@pytest.mark.parametrize("interval", ["inf", "1e12", "nan", "-1", "0"])
def test_a_follow_interval_out_of_range_is_refused(interval, tmp_path) -> None:
    data = tiny_data_folder(tmp_path)
    result = invoke_cli("jobs", "1", "-f", "--interval", interval, env={"FACET_DATA_DIR": str(data)})
    assert result.returncode == 2 and "--interval must be a number of seconds above 0, at most 86,400" \
        in result.stderr, (result.returncode, result.stderr)


def test_a_device_torch_cannot_use_is_said_in_words(tmp_path) -> None:
    import torch

    from embedders.backbone import pick_device
    from embedders.errors import CheckpointError

    result = invoke_cli("train", "causal-eos", "--out", str(tmp_path / "x"), "--device", "bogus")
    assert result.returncode == 2 and "--device 'bogus': use cpu, cuda, cuda:N" in result.stderr, result.stderr
    # One torch has no support for: said before the datasets are looked for (with none found
    # it was "datasets not found", exit 3).
    result = invoke_cli("train", "causal-eos", "--out", str(tmp_path / "x"), "--device", "mps",
                        "--data-dir", str(tmp_path / "no-data"))
    assert result.returncode == 7 and "device 'mps' was requested but" in result.stderr, result.stderr
    for device, said in (("bogus", "unknown device 'bogus'"), ("cuda:x", "unknown device 'cuda:x'"),
                         ("mps", "device 'mps' was requested but"),
                         *([] if torch.cuda.is_available() else
                           [("cuda:0", "device 'cuda:0' was requested but no CUDA GPU")])):
        with pytest.raises(CheckpointError, match=said):
            pick_device(device)
