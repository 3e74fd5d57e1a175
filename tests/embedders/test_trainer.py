"""The training loop on a tiny real model: schedule, early stops, saved log."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from embedders.training.trainer import TrainConfig, train


@dataclass
class _Batch:
    x: torch.Tensor
    y: torch.Tensor
    task: str = "toy"


class _Sampler:
    def __init__(self) -> None:
        self.gen = torch.Generator().manual_seed(1)

    def next_batch(self) -> _Batch:
        x = torch.randn(16, 3, generator=self.gen)
        return _Batch(x, x @ torch.tensor([1.0, -2.0, 0.5]))


class _Linear(torch.nn.Module):
    """A least-squares model that satisfies the Trainable protocol."""

    method = "toy"

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 1, bias=False)
        torch.nn.init.zeros_(self.lin.weight)  # the same start in every test process

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return list(self.parameters())

    def training_loss(self, batch: _Batch) -> tuple[torch.Tensor, dict[str, float]]:
        loss = ((self.lin(batch.x).squeeze(-1) - batch.y) ** 2).mean()
        return loss, {"loss": loss.item()}

    def save(self, path: str | Path) -> Path:
        Path(path).mkdir(parents=True, exist_ok=True)
        torch.save(self.state_dict(), Path(path) / "toy.pt")
        return Path(path)


def test_loss_falls_and_log_is_saved(tmp_path: Path) -> None:
    log = train(_Linear(), _Sampler(), TrainConfig(steps=40, lr=0.2, warmup=2), tmp_path, progress=False)
    assert log["steps_done"] == 40
    assert log["history"][-1]["loss"] < 0.1 * log["history"][0]["loss"]
    saved = json.loads((tmp_path / "train_log.json").read_text())
    assert saved["steps_done"] == 40 and (tmp_path / "toy.pt").is_file()


def test_stop_after_replays_the_first_steps_of_a_longer_schedule() -> None:
    full = train(_Linear(), _Sampler(), TrainConfig(steps=20, lr=0.05, warmup=4), progress=False)
    cut = train(_Linear(), _Sampler(), TrainConfig(steps=20, lr=0.05, warmup=4, stop_after=7), progress=False)
    assert cut["steps_done"] == 7
    # Same seed, same schedule: the cut run is the full run's first 7 steps exactly.
    for a, b in zip(cut["history"], full["history"][:7], strict=True):
        assert a["lr"] == b["lr"]
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-7)
    # A run whose schedule is 7 steps long decays differently.
    short = train(_Linear(), _Sampler(), TrainConfig(steps=7, lr=0.05, warmup=4), progress=False)
    assert short["history"][5]["lr"] != cut["history"][5]["lr"]


@pytest.mark.parametrize("stop_after", [0, 21])
def test_stop_after_out_of_range_is_refused(stop_after: int) -> None:
    with pytest.raises(ValueError, match="stop_after"):
        TrainConfig(steps=20, stop_after=stop_after)


def test_time_budget_stops_early() -> None:
    log = train(_Linear(), _Sampler(), TrainConfig(steps=1000, time_budget_s=0.0), progress=False)
    assert log["steps_done"] == 1
