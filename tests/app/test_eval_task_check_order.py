"""`facet eval` reports a task typo before a missing dataset root.

From a folder with no shared data (no ``../shared/data``, FACET_SHARED_DATA_DIR not set up),
``facet eval minilm --tasks bogus`` exited 3 "dataset root ... does not exist" rather than 2
"unknown task(s) bogus" (docs/evaluation.md's exit codes), and ``--instruction sick=x`` naming a
task not run the same: the names are now checked first, without the data."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli


@pytest.fixture
def no_shared_data(environment: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    missing = tmp_path / "no-shared-data"
    environment.setenv("FACET_SHARED_DATA_DIR", str(missing))
    environment.chdir(tmp_path)
    return missing


def _eval(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["eval", "minilm", "--baselines", "", "--no-progress", *args])
    return result.exit_code, result.output


def test_an_unknown_task_before_the_dataset_root(no_shared_data: Path) -> None:
    code, output = _eval("--tasks", "bogus")
    assert code == 2 and "unknown task(s) bogus" in output, output
    assert "does not exist" not in output, output
    code, output = _eval("--tasks", "stsb,bogus", "--instruction", "stsb=x")
    assert code == 2 and "unknown task(s) bogus" in output, output


def test_an_instruction_for_a_task_not_run_before_the_dataset_root(no_shared_data: Path) -> None:
    code, output = _eval("--tasks", "stsb", "--instruction", "sick=x")
    assert code == 2, output
    assert "--instruction names task 'sick', which is not being run (stsb)" in output, output
    code, output = _eval("--tasks", "stsb", "--instruction", "nonsense")
    assert code == 2 and "--instruction takes TASK=TEXT" in output, output


def test_the_dataset_root_is_still_reported(no_shared_data: Path) -> None:
    """Names that are right: the missing root, as before (exit 3)."""
    code, output = _eval("--tasks", "stsb", "--instruction", "stsb=x")
    assert code == 3 and f"dataset root {no_shared_data} does not exist" in output, output
