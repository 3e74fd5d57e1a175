"""Ctrl-C before `facet train`'s first step, and a --max-length too short for the training mix.

Stopped before its first step, a run saved its untrained weights (or, continued in place,
rewrote the checkpoint it started from) and printed a mean loss of 0.0000; stopped while
loading, it exited 130 without a word; and `--max-length 16` failed at the first step with
"the instruction is too long for this embedder ... shorten the instruction", though no
instruction was given. Ctrl-C is a KeyboardInterrupt raised where the signal would land.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli

TOY = ["--batch-size", "2", "--lora-r", "2", "--lora-targets", "q_proj", "--threads", "1", "--no-dev"]


@pytest.fixture(scope="module")
def tiny(smollm2_cut) -> list[str]:
    return [*TOY, "--backbone", smollm2_cut]


def _train(*args: str):
    return CliRunner().invoke(cli, ["train", *args])


@pytest.fixture(scope="module")
def ck(tmp_path_factory, shared_data, tiny) -> Path:
    out = tmp_path_factory.mktemp("trainstop") / "ck"
    result = _train("causal-eos", "--out", str(out), "--steps", "1", "--max-length", "32", "--tasks", "stsb:1",
                    "--data-dir", str(shared_data), *tiny)
    assert result.exit_code == 0, result.output
    return out


def _ctrl_c_at_the_first_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    from embedders.training.data import BatchSampler

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(BatchSampler, "next_batch", interrupted)


def test_ctrl_c_before_the_first_step_saves_nothing_and_shows_no_loss(tmp_path, shared_data, tiny, monkeypatch):
    _ctrl_c_at_the_first_batch(monkeypatch)
    out = tmp_path / "early"
    result = _train("causal-eos", "--out", str(out), "--steps", "5", "--max-length", "32", "--tasks", "stsb:1",
                    "--data-dir", str(shared_data), *tiny)
    assert result.exit_code == 130, result.output
    assert "nothing saved: stopped before the first step" in result.output
    assert "mean loss" not in result.output and "saved to" not in result.output
    assert not out.exists()


def test_an_in_place_continuation_stopped_before_its_first_step_is_left_as_it_was(ck, tmp_path, shared_data, tiny,
                                                                                  monkeypatch):
    here = tmp_path / "ck"
    shutil.copytree(ck, here)
    before = {p.name: p.read_bytes() for p in here.iterdir()}
    _ctrl_c_at_the_first_batch(monkeypatch)
    result = _train("causal-eos", "--out", str(here), "--init-from", str(here), "--steps", "5", "--max-length", "48",
                    "--tasks", "stsb:1", "--data-dir", str(shared_data), *tiny)
    assert result.exit_code == 130, result.output
    assert f"nothing saved: stopped before the first step ({here} is left as it was)" in result.output
    assert {p.name: p.read_bytes() for p in here.iterdir()} == before  # max_length 32 kept, log unchanged


def test_ctrl_c_while_loading_says_nothing_saved(tmp_path, shared_data, tiny, monkeypatch):
    import app.commands.train as command

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "_build", interrupted)
    out = tmp_path / "loading"
    result = _train("causal-eos", "--out", str(out), "--steps", "5", "--data-dir", str(shared_data), *tiny)
    assert result.exit_code == 130, result.output
    assert result.stderr.strip() == "nothing saved: stopped before the first step"
    assert result.stdout == "" and not out.exists()


def test_a_max_length_leaving_no_room_for_the_mixs_instructions_is_refused_in_training_terms(
        tmp_path, shared_data, tiny, monkeypatch):
    import app.commands.train as command

    def not_loaded(*args, **kwargs):
        raise AssertionError("the data loaded")

    monkeypatch.setattr(command, "_sampler", not_loaded)
    out = tmp_path / "short"
    result = _train("causal-eos", "--out", str(out), "--steps", "2", "--max-length", "16", "--tasks",
                    "stsb:1,scifact:1", "--data-dir", str(shared_data), *tiny)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (
        "error: --max-length 16 leaves no room for text under the training mix's instructions (the longest, "
        "scifact's, takes 25 tokens with the template): use --max-length 41 or more")
    assert "shorten the instruction" not in result.output and not out.exists()


def test_a_second_ctrl_c_while_the_first_ones_save_runs_says_what_is_kept(tmp_path, shared_data, tiny,
                                                                          monkeypatch):
    """The train exploration of the third session of 2026-12-02: with no dev suite, the first
    Ctrl-C saves the current weights; a second one during that save exited 130 without a word.
    The save is one swap: nothing of it is in --out, which says so."""
    import embedders.training.trainer as trainer
    from embedders.training.data import BatchSampler

    real = BatchSampler.next_batch
    calls: list[int] = []

    def once_then_ctrl_c(self):
        calls.append(1)
        if len(calls) > 1:
            raise KeyboardInterrupt
        return real(self)

    def second_ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(BatchSampler, "next_batch", once_then_ctrl_c)
    monkeypatch.setattr(trainer, "save_checkpoint", second_ctrl_c)
    out = tmp_path / "twice"
    result = _train("causal-eos", "--out", str(out), "--steps", "5", "--max-length", "32", "--tasks", "stsb:1",
                    "--data-dir", str(shared_data), *tiny)
    assert result.exit_code == 130, result.output
    assert f"stopped again while saving: nothing saved to {out}" in result.output, result.output
    assert not out.exists()


def test_ctrl_c_during_the_last_out_save_says_out_is_whole(tmp_path, shared_data, tiny, monkeypatch):
    """It said "stopped again while saving: OUT keeps the checkpoint it held before this save
    (0 steps in all)", though the run had ended and OUT was its complete best checkpoint."""
    import json

    import embedders.training.trainer as trainer

    real = trainer.save_checkpoint

    def ctrl_c_on_last(model, path, log):
        if Path(path).name == "last":
            raise KeyboardInterrupt
        return real(model, path, log)

    monkeypatch.setattr(trainer, "save_checkpoint", ctrl_c_on_last)
    out, last = tmp_path / "best", tmp_path / "last"
    result = _train("causal-eos", "--out", str(out), "--last-out", str(last), "--steps", "3", "--max-length", "32",
                    "--tasks", "stsb:1", "--data-dir", str(shared_data), *tiny)
    assert result.exit_code == 130, result.output
    log = json.loads((out / "train_log.json").read_text())
    assert log["stopped"] == "completed" and log["weights_steps"] == 3
    assert f"saved to {out}" in result.stdout and "stopped again" not in result.output
    assert result.stderr.strip().endswith(f"\nstopped while saving the last weights: nothing saved to {last}")
    assert not last.exists()


def test_sigterm_while_loading_says_nothing_saved(tmp_path, shared_data, tiny, monkeypatch):
    """`kill PID` while a background run loaded its model ended it with 143 and no word (the
    docs say 130 and "nothing saved", as for Ctrl-C). A real SIGTERM to this process."""
    import signal

    import app.commands.train as command

    def terminated(*args, **kwargs):
        _sigterm_here()
        raise AssertionError("SIGTERM was not taken")

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(command, "_build", terminated)
    out = tmp_path / "loading"
    result = _train("causal-eos", "--out", str(out), "--steps", "5", "--data-dir", str(shared_data), *tiny)
    assert result.exit_code == 130, result.output
    assert result.stderr.strip() == "nothing saved: stopped before the first step"
    assert not out.exists() and signal.getsignal(signal.SIGTERM) == before


def test_sigterm_during_the_last_out_save_says_out_is_whole(tmp_path, shared_data, tiny, monkeypatch):
    """`kill PID` while --last-out was saved exited 143 without a word (the training's SIGTERM
    handler had been given back). A real SIGTERM to this process."""

    import embedders.training.trainer as trainer

    real = trainer.save_checkpoint

    def sigterm_on_last(model, path, log):
        if Path(path).name == "last":
            _sigterm_here()
        return real(model, path, log)

    monkeypatch.setattr(trainer, "save_checkpoint", sigterm_on_last)
    out, last = tmp_path / "best", tmp_path / "last"
    result = _train("causal-eos", "--out", str(out), "--last-out", str(last), "--steps", "2", "--max-length", "32",
                    "--tasks", "stsb:1", "--data-dir", str(shared_data), *tiny)
    assert result.exit_code == 130, result.output
    assert result.stderr.strip().endswith(f"stopped while saving the last weights: nothing saved to {last}")
    assert f"saved to {out}" in result.stdout


def _sigterm_here() -> None:
    """A real SIGTERM to this process, where the command should take it as Ctrl-C: refused
    first where nothing would (the default action ends pytest itself)."""
    import os
    import signal
    import time

    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, signal.SIG_IGN, None):
        raise AssertionError("SIGTERM would end the run without a word")
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
