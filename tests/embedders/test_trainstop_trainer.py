"""The trainer stopped (Ctrl-C, SIGTERM) before its first step saves nothing: it saved the
starting weights as a checkpoint, or rewrote the one an in-place continuation started from."""

from __future__ import annotations

from pathlib import Path

import torch

from embedders.training.trainer import TrainConfig, train
from tests.embedders.test_trainer import _Linear


class _StoppedAtOnce:
    def next_batch(self):
        raise KeyboardInterrupt


def test_an_interrupt_before_the_first_step_saves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "new"
    log = train(_Linear(), _StoppedAtOnce(), TrainConfig(steps=5), out, progress=False)
    assert log["stopped"] == "interrupted" and log["steps_done"] == 0 and log["history"] == []
    assert not out.exists()


def test_an_existing_checkpoint_is_left_untouched(tmp_path: Path) -> None:
    out = tmp_path / "ck"
    trained = _Linear()
    with torch.no_grad():
        trained.lin.weight.fill_(1.0)
    trained.save(out)
    (out / "train_log.json").write_text('{"steps_done": 7}')
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    train(_Linear(), _StoppedAtOnce(), TrainConfig(steps=5), out, progress=False)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
