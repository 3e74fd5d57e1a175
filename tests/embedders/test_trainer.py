"""The training loop on a tiny real model: schedule, early stops, saved log."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from embedders.base import BaseEmbedder
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
    assert log["stopped"] == saved["stopped"] == "completed"


def test_stop_after_replays_the_first_steps_of_a_longer_schedule() -> None:
    full = train(_Linear(), _Sampler(), TrainConfig(steps=20, lr=0.05, warmup=4), progress=False)
    cut = train(_Linear(), _Sampler(), TrainConfig(steps=20, lr=0.05, warmup=4, stop_after=7), progress=False)
    assert cut["steps_done"] == 7
    # Ended on purpose, before its schedule's end: not "completed" (it was).
    assert cut["stopped"] == "stopped after 7 steps (--stop-after)" and full["stopped"] == "completed"
    # Same seed, same schedule: the cut run is the full run's first 7 steps exactly.
    for a, b in zip(cut["history"], full["history"][:7], strict=True):
        assert a["lr"] == b["lr"]
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-7)
    # A run whose schedule is 7 steps long decays differently.
    short = train(_Linear(), _Sampler(), TrainConfig(steps=7, lr=0.05, warmup=4), progress=False)
    assert short["history"][5]["lr"] != cut["history"][5]["lr"]


class _Truncating(_Linear):
    """Cuts one text of eight at every step, through the embedders' own truncation report."""

    name = "toy"
    _warn_truncated = BaseEmbedder._warn_truncated

    def training_loss(self, batch: _Batch) -> tuple[torch.Tensor, dict[str, float]]:
        self._warn_truncated(1, 8, 96)
        return super().training_loss(batch)


def test_truncation_is_reported_once_per_log_window(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="embedders.base"):
        train(_Truncating(), _Sampler(), TrainConfig(steps=25, lr=0.05, log_every=10), progress=False)
    said = [r.getMessage() for r in caplog.records if "were truncated" in r.getMessage()]
    # Two full windows and the last five steps, each summed: not 25 lines.
    assert said == [
        "toy: 10 of 80 texts were longer than 96 tokens and were truncated (split the texts into shorter ones "
        "to keep the rest)"] * 2 + [
        "toy: 5 of 40 texts were longer than 96 tokens and were truncated (split the texts into shorter ones "
        "to keep the rest)"]


def test_log_every_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="log_every"):
        TrainConfig(steps=5, log_every=0)


@pytest.mark.parametrize("stop_after", [0, 21])
def test_stop_after_out_of_range_is_refused(stop_after: int) -> None:
    with pytest.raises(ValueError, match="stop_after"):
        TrainConfig(steps=20, stop_after=stop_after)


def test_time_budget_stops_early() -> None:
    log = train(_Linear(), _Sampler(), TrainConfig(steps=1000, time_budget_s=0.0), progress=False)
    assert log["steps_done"] == 1 and log["stopped"] == "time budget"


class _OneSecondSteps(_Linear):
    """Each training step takes exactly one second of the trainer's (fake) clock."""

    def __init__(self, clock: list[float]) -> None:
        super().__init__()
        self.clock = clock

    def training_loss(self, batch: _Batch) -> tuple[torch.Tensor, dict[str, float]]:
        self.clock[0] += 1.0
        return super().training_loss(batch)


def _fake_clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    from embedders.training import trainer

    clock = [0.0]
    monkeypatch.setattr(trainer, "_clock", lambda: clock[0])
    return clock


def test_decay_over_time_reaches_the_floor_when_the_budget_runs_out(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _fake_clock(monkeypatch)
    config = TrainConfig(steps=1000, lr=0.1, warmup=2, time_budget_s=20.0, decay_over="time")
    log = train(_OneSecondSteps(clock), _Sampler(), config, progress=False)
    lrs = [h["lr"] for h in log["history"]]
    assert log["stopped"] == "time budget" and log["steps_done"] == 21
    # Halfway through the budget the rate is about halfway down; at its end, at the 10% floor.
    assert lrs[9] == pytest.approx(0.1 * (1 - 0.9 * 10 / 20))
    assert lrs[-1] == pytest.approx(0.01)
    # Decaying over the steps, the same 21 steps barely leave the peak.
    by_steps = train(_OneSecondSteps(_fake_clock(monkeypatch)), _Sampler(),
                     TrainConfig(steps=1000, lr=0.1, warmup=2, time_budget_s=20.0), progress=False)
    assert by_steps["history"][-1]["lr"] > 0.098


def test_a_time_budgeted_runs_progress_bar_ends_where_the_budget_does(monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """``--steps 100000 --time-budget-min 80`` must not show 100,000 steps and a 300-hour ETA."""
    clock = _fake_clock(monkeypatch)
    config = TrainConfig(steps=100_000, lr=0.1, warmup=2, time_budget_s=20.0, decay_over="time")
    log = train(_OneSecondSteps(clock), _Sampler(), config, progress=True)
    assert log["steps_done"] == 21
    last = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert "100000" not in last and "21/21" in last and "left=0min" in last


def test_decay_over_time_needs_a_budget() -> None:
    with pytest.raises(ValueError, match="time budget"):
        TrainConfig(steps=10, decay_over="time")
    with pytest.raises(ValueError, match="decay_over"):
        TrainConfig(steps=10, decay_over="epochs", time_budget_s=5.0)


class _Scripted:
    """A dev evaluator that returns pre-set scores and records the weight it saw."""

    def __init__(self, scores: list[float]) -> None:
        self.scores = list(scores)
        self.seen: list[float] = []

    def __call__(self, model: _Linear) -> dict[str, float]:
        self.seen.append(float(model.lin.weight[0, 0].detach()))
        return {"score": self.scores.pop(0), "toy/metric": 1.0}


def test_dev_selection_keeps_the_best_checkpoint_and_records_the_curve(tmp_path: Path) -> None:
    evaluator = _Scripted([10.0, 30.0, 20.0, 25.0])  # steps 0, 5, 10, 15 (end)
    log = train(_Linear(), _Sampler(), TrainConfig(steps=15, lr=0.05, warmup=2, eval_every=5), tmp_path / "ck",
                progress=False, evaluate=evaluator)
    assert [p["step"] for p in log["dev_curve"]] == [0, 5, 10, 15]
    assert log["best"]["step"] == 5 and log["best"]["score"] == 30.0
    assert log["weights_steps"] == 5
    saved = torch.load(tmp_path / "ck" / "toy.pt")
    assert float(saved["lin.weight"][0, 0]) == pytest.approx(evaluator.seen[1])  # the step-5 weights
    on_disk = json.loads((tmp_path / "ck" / "train_log.json").read_text())
    assert on_disk["best"]["step"] == 5 and len(on_disk["dev_curve"]) == 4 and on_disk["steps_done"] == 15


def test_eval_every_s_scores_by_training_time(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _fake_clock(monkeypatch)

    class Slow(_Scripted):  # an evaluation takes 3 s, which does not count as training time
        def __call__(self, model: _Linear) -> dict[str, float]:
            clock[0] += 3.0
            return super().__call__(model)

    log = train(_OneSecondSteps(clock), _Sampler(), TrainConfig(steps=12, lr=0.05, eval_every_s=4.0),
                progress=False, evaluate=Slow([float(i) for i in range(10)]))
    assert [p["step"] for p in log["dev_curve"]] == [0, 4, 8, 12]


def test_a_start_that_is_never_beaten_is_what_is_kept(tmp_path: Path) -> None:
    log = train(_Linear(), _Sampler(), TrainConfig(steps=4, lr=0.05, eval_every=2), tmp_path / "ck",
                progress=False, evaluate=_Scripted([50.0, 40.0, 30.0]), extra_log={"init_weights_steps": 100})
    assert log["best"]["step"] == 0 and log["weights_steps"] == 100
    assert float(torch.load(tmp_path / "ck" / "toy.pt")["lin.weight"].abs().sum()) == 0.0


def test_a_start_with_no_dev_score_is_beaten_by_the_first_score(tmp_path: Path) -> None:
    """A dev metric undefined at the start (NaN: every STS cosine equal) was never beaten,
    since no number is > NaN, so no trained step was ever kept."""
    log = train(_Linear(), _Sampler(), TrainConfig(steps=4, lr=0.05, eval_every=2), tmp_path / "ck",
                progress=False, evaluate=_Scripted([float("nan"), 40.0, 30.0]))
    assert log["best"]["step"] == 2 and log["best"]["score"] == 40.0


def test_an_interrupted_swap_is_recovered(tmp_path: Path) -> None:
    from embedders.training.trainer import recover_checkpoint, save_checkpoint

    target = tmp_path / "ck"
    save_checkpoint(_Linear(), target, {"steps_done": 1})
    # A kill between the two renames leaves only the old copy: the next run restores it.
    target.rename(tmp_path / ".ck.old")
    recover_checkpoint(target)
    assert (target / "toy.pt").is_file() and json.loads((target / "train_log.json").read_text())["steps_done"] == 1


_KILL_SCRIPT = """
import sys, time
sys.path.insert(0, {tests!r})
from test_trainer import _Linear, _Sampler
from embedders.training.trainer import TrainConfig, train

def slow_eval(model):
    time.sleep(0.05)
    return {{"score": float(time.perf_counter())}}  # always improves: a save at every eval
print("started", flush=True)
train(_Linear(), _Sampler(), TrainConfig(steps=100000, lr=0.01, eval_every=1), {out!r}, progress=False,
      evaluate=slow_eval)
print("returned", flush=True)
"""


def _run_then_signal(out: Path, signum: int, settle_s: float) -> tuple[int, str]:
    """Start ``_KILL_SCRIPT`` training into ``out``, wait for its first log and ``settle_s``
    more, send ``signum``; return the exit code and what it printed after "started"."""
    import subprocess
    import sys
    import time

    script = _KILL_SCRIPT.format(tests=str(Path(__file__).parent), out=str(out))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
        deadline = time.time() + 60
        while not (out / "train_log.json").is_file() and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(settle_s)
        proc.send_signal(signum)
        rest, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, rest


def test_sigkill_mid_run_leaves_a_loadable_checkpoint(tmp_path: Path) -> None:
    import signal

    out = tmp_path / "ck"
    _run_then_signal(out, signal.SIGKILL, 1.0)  # many saves happen in this second
    from embedders.training.trainer import recover_checkpoint

    recover_checkpoint(out)
    state = torch.load(out / "toy.pt")
    log = json.loads((out / "train_log.json").read_text())
    assert "lin.weight" in state and log["best"]["step"] >= 1
    assert log["stopped"] == "running"  # a killed run's last log never claims it completed


def test_sigterm_stops_like_ctrl_c_and_writes_the_log(tmp_path: Path) -> None:
    """``kill PID`` is how a background run is stopped: the best checkpoint stays and the log
    says it was interrupted (a SIGKILLed run's log still says "running", above)."""
    import signal

    out = tmp_path / "ck"
    code, rest = _run_then_signal(out, signal.SIGTERM, 0.5)
    assert code == 0 and rest.strip() == "returned"  # train() returned its log
    log = json.loads((out / "train_log.json").read_text())
    assert log["stopped"] == "interrupted" and log["best"]["step"] >= 1
    assert "lin.weight" in torch.load(out / "toy.pt")


def test_the_sigterm_handler_is_restored_after_training() -> None:
    import signal

    before = signal.getsignal(signal.SIGTERM)
    train(_Linear(), _Sampler(), TrainConfig(steps=3, lr=0.05), progress=False)
    assert signal.getsignal(signal.SIGTERM) is before


def test_grad_cache_is_refused_for_a_model_without_a_cached_path() -> None:
    with pytest.raises(ValueError, match="grad_cache must be >= 1"):
        TrainConfig(grad_cache=0)
    with pytest.raises(ValueError, match="no cached-gradient path"):
        train(_Linear(), _Sampler(), TrainConfig(steps=1, grad_cache=4))


def test_a_checkpoint_whose_swap_was_interrupted_loads_by_path_and_partials_are_cleaned(
        tmp_path: Path, minilm) -> None:
    """Only `facet train` undid a swap a kill interrupted: `facet embed --embedder PATH` (and
    eval, soup, search) said "unknown embedder" for the checkpoint kept as `.NAME.old`. And
    a save killed mid-write left `.NAME.new-*` folders no run ever removed."""
    import os
    import time

    from embedders.base import recover_checkpoint
    from embedders.registry import load_embedder

    target = tmp_path / "ck"
    minilm.save(target)
    target.rename(tmp_path / ".ck.old")
    model = load_embedder(str(target), device="cpu")
    assert target.is_dir() and not (tmp_path / ".ck.old").exists()
    assert model.encode(["a harbour"]).shape == (1, 384)
    stale, fresh = tmp_path / ".ck.new-abc123", tmp_path / ".ck.new-def456"
    stale.mkdir()
    fresh.mkdir()  # a save in progress right now: left alone
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    assert recover_checkpoint(target, partial_older_than_s=600) is False
    assert not stale.exists() and fresh.exists()


def test_a_stop_during_the_first_evaluation_does_not_claim_a_checkpoint_kept(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Ctrl-C or SIGTERM while the step-0 score ran said "keeping the best checkpoint so far",
    and then the command "nothing saved"."""

    def stopped(model: _Linear) -> dict[str, float]:
        raise KeyboardInterrupt

    with caplog.at_level("WARNING", logger="embedders.training.trainer"):
        log = train(_Linear(), _Sampler(), TrainConfig(steps=5, lr=0.05, warmup=1, eval_every=2),
                    tmp_path / "ck", progress=False, evaluate=stopped)
    assert log["stopped"] == "interrupted" and not log["best"]
    said = [r.getMessage() for r in caplog.records]
    assert said == ["interrupted after 0 steps, before any checkpoint was kept"], said
    assert not (tmp_path / "ck" / "toy.pt").exists()


def test_the_log_records_the_methods_own_settings(tmp_path: Path) -> None:
    """A continuation trains with its checkpoint's method settings (a distillation, a
    temperature, a refinement weight): no log said which."""

    class _Config:
        def to_dict(self) -> dict[str, object]:
            return {"temperature": 0.02, "refinement_weight": 5.0}

    model = _Linear()
    model.config = _Config()  # type: ignore[attr-defined]
    log = train(model, _Sampler(), TrainConfig(steps=2, lr=0.05, warmup=1), tmp_path, progress=False)
    on_disk = json.loads((tmp_path / "train_log.json").read_text())
    assert log["method_config"] == on_disk["method_config"] == {"temperature": 0.02, "refinement_weight": 5.0}
    plain = train(_Linear(), _Sampler(), TrainConfig(steps=1, lr=0.05, warmup=1), progress=False)
    assert plain["method_config"] is None  # (a model without a method configuration)
