"""What the CLI prints, in-process: one job's or collection's ``--json`` is its object, the
vectors-only ("stray") collections are in the JSON listing, a job's timings read as text, ``~``
is expanded in `facet cluster`'s paths, NO_COLOR / TERM=dumb turn off the bold highlights, the
unknown-token warning is said once, torch's loggers stay at WARNING, and every option says what
it is for."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from unittest import mock

import pytest

from tests.app.cli_runner import invoke_cli, tiny_data_folder


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory, minilm) -> Path:
    """A data folder with one tiny collection (job 1)."""
    return tiny_data_folder(tmp_path_factory.mktemp("cliout_listings"))


def run(data: Path, *args: str):
    return invoke_cli(*args, env={"FACET_DATA_DIR": str(data)})


def test_one_job_or_collection_as_json_is_its_object(data: Path) -> None:
    job = json.loads(run(data, "jobs", "1", "--json").stdout)
    assert isinstance(job, dict) and job["id"] == 1 and job["collection"] == "tiny"
    jobs = json.loads(run(data, "jobs", "--json").stdout)
    assert isinstance(jobs, list) and [j["id"] for j in jobs] == [1]
    one = json.loads(run(data, "collections", "tiny", "--json").stdout)
    assert isinstance(one, dict) and one["name"] == "tiny" and one["stray"] is False
    listed = json.loads(run(data, "collections", "--json").stdout)
    assert [(c["name"], c["stray"]) for c in listed] == [("tiny", False)]
    # An empty name (`facet collections "$NAME" --json`, NAME unset) is a bad name, as for every
    # other command, not the whole listing with exit 0.
    for args in (("collections", ""), ("collections", "", "--json")):
        empty = run(data, *args)
        assert empty.returncode == 2 and "invalid collection name ''" in empty.stderr, empty
        assert empty.stdout == ""


def test_stray_vectors_are_in_the_json_too(data: Path, tmp_path: Path) -> None:
    # The store's folder without its database: vectors no collection of it owns.
    stray = tmp_path / "data"
    shutil.copytree(data / "qdrant-edge", stray / "qdrant-edge")
    text = run(stray, "collections")
    assert text.stdout.startswith("tiny: vectors only (2 points"), text.stdout
    listed = run(stray, "collections", "--json")
    assert listed.returncode == 0, listed.stderr
    [entry] = json.loads(listed.stdout)
    assert (entry["name"], entry["stray"], entry["points"]) == ("tiny", True, 2)
    one = run(stray, "collections", "tiny", "--json")
    assert one.returncode == 0, one.stderr  # it said "unknown collection", exit 3
    assert json.loads(one.stdout) == entry


def test_a_job_s_timings_read_as_text(data: Path) -> None:
    out = run(data, "jobs", "1").stdout
    [line] = [line for line in out.splitlines() if line.startswith("  timings")]
    assert "{" not in line and "'" not in line, line
    assert "encode " in line and line.rstrip().endswith("s"), line


def test_cluster_expands_home_in_its_file_and_out(tmp_path: Path, monkeypatch) -> None:
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    (home / "t.txt").write_text("card declined\nopen an account\nclose my account\n")
    monkeypatch.chdir(cwd)
    with mock.patch.dict(os.environ, {"HOME": str(home)}):
        # --k over the texts: refused once the file is read, before any model loads.
        done = invoke_cli("cluster", "~/t.txt", "-i", "topic", "-e", "minilm", "--explain", "",
                          "--k", "9", "--out=~/out/cl.json",
                          env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert done.returncode == 2, done.stderr  # it said ~/t.txt did not exist (3)
    assert "more than the 3 texts of" in done.stderr, done.stderr
    assert not (cwd / "~").exists()  # --out made a folder named ~ here
    assert (home / "out").is_dir()


@pytest.mark.parametrize("env, styled", [({"NO_COLOR": "1"}, False), ({"TERM": "dumb"}, False),
                                         ({"TERM": "xterm"}, True)])
def test_no_color_and_a_dumb_terminal_get_no_bold(data: Path, env: dict[str, str],
                                                  styled: bool) -> None:
    from typer.testing import CliRunner

    from app.cli import cli
    from app.settings import get_settings

    clean = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    with mock.patch.dict(os.environ, clean | env | {"FACET_DATA_DIR": str(data)}, clear=True):
        get_settings.cache_clear()
        try:
            # color=True: as on a terminal, where click keeps the styles it strips from a pipe.
            result = CliRunner().invoke(cli, ["search", "card", "-c", "tiny", "-k", "1"],
                                        color=True)
        finally:
            get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    assert "card" in result.stdout
    assert ("\x1b[" in result.stdout) is styled, repr(result.stdout)


def test_index_says_the_unknown_token_warning_once(tmp_path: Path, caplog, minilm) -> None:
    src = tmp_path / "thai"
    src.mkdir()
    (src / "t.txt").write_text("ภาษาไทยเป็นภาษาที่สวยงามมาก " * 3)
    with caplog.at_level(logging.INFO):
        done = invoke_cli("index", str(src), "-c", "thai", "-e", "minilm",
                          env={"FACET_DATA_DIR": str(tmp_path / "data")})
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("mostly unknown tokens") == 1, done.stderr  # the command's line
    logged = [r for r in caplog.records if "mostly unknown tokens" in r.getMessage()]
    assert logged == [], [r.getMessage() for r in logged]  # embedders.base's WARNING line too


def test_torch_loggers_stay_at_warning_unless_verbose(data: Path) -> None:
    torch_log = logging.getLogger("torch")
    before = torch_log.level
    try:
        torch_log.setLevel(logging.NOTSET)  # as before torch's import sets it (cut short by Ctrl-C)
        assert run(data, "jobs").returncode == 0
        assert torch_log.level == logging.WARNING
        torch_log.setLevel(logging.NOTSET)
        assert run(data, "-v", "jobs").returncode == 0
        assert torch_log.level == logging.NOTSET
    finally:
        torch_log.setLevel(before)


@pytest.mark.parametrize("command, options", [
    ("search", ("--collection", "--top-k", "--json")),
    ("jobs", ("--collection", "--json")),
    ("collections", ("--json",)),
    ("embed", ("--instruction",)),
])
def test_every_option_says_what_it_is_for(command: str, options: tuple[str, ...]) -> None:
    import typer.main

    from app.cli import cli

    group = typer.main.get_command(cli)
    params = {p.opts[0]: p for p in group.commands[command].params}  # type: ignore[attr-defined]
    for option in options:
        assert (getattr(params[option], "help", None) or "").strip(), f"{command} {option}"
