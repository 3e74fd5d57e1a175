"""A run stopped while it saves keeps a record that matches the weights on disk (the train
exploration of the third session of 2026-12-02). Ctrl-C or SIGTERM (``kill PID``, how a
background run is stopped) during the save of a new best left the earlier weights in the folder
under a train_log.json, and a summary, that said the new step; during the first save it ended in
a traceback (``.train_log.json.tmp``: no such file), or left a lone train_log.json in an empty
``--out``. And a kill while the replaced copy was being deleted left half of it under the name
``recover_checkpoint`` trusts as complete. The toy model of test_trainer, really saved; the
interrupt is raised from its ``save`` (the trainer turns SIGTERM into the same
KeyboardInterrupt), the kill from ``shutil.rmtree``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

import embedders.training.trainer as trainer
from embedders.base import recover_checkpoint
from embedders.training.trainer import TrainConfig, train

from .test_trainer import _Linear, _Sampler, _Scripted


class _InterruptedOnSave(_Linear):
    """Ctrl-C arriving while save number ``n`` (from 1) writes the checkpoint's files."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n, self.calls = n, 0

    def save(self, path: str | Path) -> Path:
        self.calls += 1
        if self.calls == self.n:
            raise KeyboardInterrupt("signal 15")
        return super().save(path)


def test_an_interrupt_during_a_best_save_leaves_a_log_that_matches_the_weights(tmp_path: Path) -> None:
    """Step 0 is saved; step 2 is better and its save is stopped: the folder keeps the step-0
    weights, so neither its log nor the run's (the summary's source) may say step 2."""
    out = tmp_path / "ck"
    log = train(_InterruptedOnSave(2), _Sampler(), TrainConfig(steps=6, lr=0.05, warmup=1, eval_every=2),
                out, progress=False, evaluate=_Scripted([10.0, 30.0, 20.0, 25.0]))
    assert log["stopped"] == "interrupted"
    assert float(torch.load(out / "toy.pt")["lin.weight"].abs().sum()) == 0.0  # step 0's weights
    on_disk = json.loads((out / "train_log.json").read_text())
    assert on_disk["best"]["step"] == 0 and on_disk["weights_steps"] == 0, on_disk["best"]
    assert log["best"]["step"] == 0
    assert [p["step"] for p in on_disk["dev_curve"]] == [0, 2]  # (the evaluation itself happened)


def test_an_interrupt_during_the_first_save_saves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "ck"
    log = train(_InterruptedOnSave(1), _Sampler(), TrainConfig(steps=6, lr=0.05, eval_every=2), out,
                progress=False, evaluate=_Scripted([10.0, 30.0]))
    assert log["stopped"] == "interrupted" and not log.get("best")
    assert not out.exists()
    empty = tmp_path / "empty"  # an --out made beforehand: left as it was, no lone log
    empty.mkdir()
    train(_InterruptedOnSave(1), _Sampler(), TrainConfig(steps=6, lr=0.05, eval_every=2), empty,
          progress=False, evaluate=_Scripted([10.0, 30.0]))
    assert list(empty.iterdir()) == []


def test_a_kill_while_the_replaced_copy_is_deleted_leaves_nothing_to_recover(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "ck"
    trainer.save_checkpoint(_Linear(), out, {"steps_done": 1})
    real_rmtree = shutil.rmtree

    def killed_midway(path: Any, ignore_errors: bool = False) -> None:
        if Path(path).name.startswith(".ck.old"):  # the replaced copy, under whatever name
            next(Path(path).rglob("toy.pt")).unlink()  # one file gone, then the process dies
            raise SystemExit("killed")
        real_rmtree(path, ignore_errors=ignore_errors)

    monkeypatch.setattr(trainer.shutil, "rmtree", killed_midway)
    with pytest.raises(SystemExit):
        trainer.save_checkpoint(_Linear(), out, {"steps_done": 2})
    monkeypatch.setattr(trainer.shutil, "rmtree", real_rmtree)
    assert json.loads((out / "train_log.json").read_text())["steps_done"] == 2  # the new one is in
    out.rename(tmp_path / "kept")  # the user moves the run away
    recover_checkpoint(out)
    assert not out.exists()  # (the old code put back the half copy: no toy.pt)
    trainer.save_checkpoint(_Linear(), out, {"steps_done": 3})  # the next save clears the leftover
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck", "kept"]


def test_an_interrupted_first_save_over_another_runs_checkpoint_of_the_same_step_leaves_its_log(
        tmp_path: Path) -> None:
    """Whether the stopped save had landed was read from the best step in the folder's log:
    another run's checkpoint whose best was step 0 (the shipped causal-eos's is) read as this
    run's step 0 saved, and this run's log went in over the other's weights ("keeping the best
    checkpoint so far", its 500 steps' record lost)."""
    out = tmp_path / "ck"
    trainer.save_checkpoint(_Linear(), out, {"method": "other-method", "run_id": "earlier",
                                             "best": {"step": 0, "score": 99.0}, "weights_steps": 500})
    before = (out / "toy.pt").read_bytes(), (out / "train_log.json").read_text()
    log = train(_InterruptedOnSave(1), _Sampler(), TrainConfig(steps=3, lr=0.1, eval_every=1), out,
                progress=False, evaluate=_Scripted([1.0, 2.0]))
    assert log["stopped"] == "interrupted" and not log.get("best")
    assert ((out / "toy.pt").read_bytes(), (out / "train_log.json").read_text()) == before


def test_a_skipped_batch_keeps_its_steps_evaluation_and_is_not_counted_as_a_weight_step(tmp_path: Path) -> None:
    """A non-finite loss's ``continue`` jumped over the step's dev evaluation and time-budget
    check, and ``weights_steps`` counted the skipped step as an optimiser step."""

    class NanAtFive(_Sampler):
        def __init__(self) -> None:
            super().__init__()
            self.n = 0

        def next_batch(self) -> Any:
            self.n += 1
            batch = super().next_batch()
            if self.n == 5:
                batch.y = batch.y * float("nan")
            return batch

    log = train(_Linear(), NanAtFive(), TrainConfig(steps=6, lr=0.05, eval_every=5), tmp_path / "ck",
                progress=False, evaluate=_Scripted([1.0, 2.0, 3.0]))
    assert (log["steps_done"], log["skipped"]) == (5, 1)
    assert [p["step"] for p in log["dev_curve"]] == [0, 5, 6]
    assert log["best"]["step"] == 6 and log["weights_steps"] == 5
