"""`facet eval` and checkpoints: a damaged baseline is refused before any work, and a report
already in the results folder is kept as .bak with a note, not silently replaced."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli
from tests.app.evaluation.test_eval_command import _tiny_data_root


def _pairs(root: Path) -> Path:
    """Three STS pairs of a user's own (``--task sts:FILE``)."""
    pairs = root / "pairs.csv"
    pairs.write_text("a man plays a guitar,a man plays guitar,5\na dog runs,a puppy runs,4\n"
                     "stocks fell,someone cooks pasta,0\n")
    return pairs


@pytest.fixture(scope="module")
def tiny_checkpoint(smollm2_cut, tmp_path_factory) -> Path:
    """An untrained causal-eos checkpoint (rank-2 LoRA on q_proj) over SmolLM2 cut to two layers."""
    import torch

    from embedders.backbone import LoraSettings
    from embedders.methods.causal_eos import CausalEOSConfig, CausalEOSEmbedder

    torch.manual_seed(0)
    model = CausalEOSEmbedder(CausalEOSConfig(lora=LoraSettings(r=2, target_modules=("q_proj",)), max_length=32,
                                              backbone=smollm2_cut), device="cpu")
    return model.save(tmp_path_factory.mktemp("ckpt") / "model")


@pytest.mark.usefixtures("minilm")
def test_a_truncated_baseline_adapter_is_refused_before_any_work(tmp_path: Path, tiny_checkpoint: Path) -> None:
    """The up-front check read only the config: the main embedder ran every task, then the
    baseline's load failed (exit 4) and no report was written."""
    damaged = shutil.copytree(tiny_checkpoint, tmp_path / "damaged")
    adapter = damaged / "adapter.safetensors"
    adapter.write_bytes(adapter.read_bytes()[:-64])
    pairs = _pairs(tmp_path)
    result = CliRunner().invoke(cli, ["eval", "minilm", "--task", f"sts:{pairs}", "--baselines", str(damaged),
                                      "--out", str(tmp_path / "o"), "--no-cache", "--no-progress"])
    assert result.exit_code == 4, result.output
    assert f"{adapter} cannot be read (SafetensorError" in result.output
    assert "the checkpoint is damaged" in result.output
    assert "spearman" not in result.output  # refused before the main embedder ran
    assert not (tmp_path / "o").exists()


@pytest.mark.usefixtures("minilm")
def test_a_baseline_that_cannot_load_leaves_the_main_figures_written(tmp_path: Path,
                                                                     tiny_checkpoint: Path) -> None:
    """An adapter missing a LoRA tensor passes the up-front check (its header is sound): the
    baseline's load failed after the main embedder had run every task, and nothing was written
    (the verification round). The baseline is reported failed on each task, with why; the main
    figures are written; the exit code says some are missing."""
    from safetensors.torch import load_file, save_file

    damaged = shutil.copytree(tiny_checkpoint, tmp_path / "partial")
    adapter = damaged / "adapter.safetensors"
    tensors = load_file(str(adapter))
    del tensors[next(k for k in sorted(tensors) if "lora_B" in k)]
    save_file(tensors, str(adapter))
    pairs = _pairs(tmp_path)
    result = CliRunner().invoke(cli, ["eval", "minilm", "--task", f"sts:{pairs}", "--baselines", str(damaged),
                                      "--out", str(tmp_path / "o"), "--no-cache", "--no-progress"])
    assert result.exit_code == 4, result.output
    report = json.loads((tmp_path / "o" / "results.json").read_text())
    main, baseline = report["runs"]
    assert main["embedder"] == "minilm" and main["results"][0]["scores"]["spearman"] is not None
    assert baseline["embedder"] == str(damaged)
    assert baseline["results"][0]["error"].startswith("the baseline could not be loaded: ")
    assert "LoRA weights are incomplete" in baseline["results"][0]["error"]
    assert "1 task(s) have no score" in result.output


def test_an_earlier_report_in_the_folder_is_kept_as_bak_and_said(tmp_path: Path, tiny_checkpoint: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """`--tasks stsb` then `--tasks sick` of one checkpoint, and two checkpoints `a/model` and
    `b/model`, wrote to the same folder: the second report replaced the first without a word."""
    root = _tiny_data_root(tmp_path / "data")
    monkeypatch.chdir(tmp_path)
    for side in ("a", "b"):
        shutil.copytree(tiny_checkpoint, tmp_path / side / "model")

    def run(embedder: str, task: str, *more: str) -> str:
        result = CliRunner().invoke(cli, ["eval", embedder, "--suite", "full", "--tasks", task, "--data-dir",
                                          str(root), "--baselines", "", "--no-cache", "--no-progress", *more])
        assert result.exit_code == 0, result.output
        return result.output

    folder = Path("results") / "model-full"
    first = run("a/model", "stsb")
    assert "note:" not in first  # nothing there before
    second = run("a/model", "sick")
    assert (f"note: the earlier report in {folder} was moved to {folder / 'results.json.bak'} and "
            f"{folder / 'results.md.bak'}") in second
    assert "another embedder" not in second  # the same checkpoint, other tasks
    assert "| stsb |" in (folder / "results.md.bak").read_text()
    assert "| sick |" in (folder / "results.md").read_text()
    third = run("b/model", "stsb")
    assert (f"note: {folder} holds a report of another embedder, 'a/model' (the folder is named after the "
            "last part of 'b/model' alone; pass --out to keep both reports apart)") in third
    assert f"was moved to {folder / 'results.json.bak'}" in third
    assert json.loads((folder / "results.json.bak").read_text())["runs"][0]["embedder"] == "a/model"
    assert json.loads((folder / "results.json").read_text())["runs"][0]["embedder"] == "b/model"
    assert sorted(p.name for p in folder.iterdir()) == ["results.json", "results.json.bak", "results.md",
                                                        "results.md.bak"]
    # The same evaluation again refreshes its report in place: no .bak of itself (a rerun of a
    # committed results folder would leave one beside it).
    again = run("b/model", "stsb")
    assert "note:" not in again
    assert json.loads((folder / "results.json.bak").read_text())["runs"][0]["embedder"] == "a/model"
    # ... but the same tasks read otherwise (no instructions; a quick run's sizes) are another
    # evaluation: kept as .bak (a quick run replaced a full report without a word).
    other = run("b/model", "stsb", "--no-instructions")
    assert f"was moved to {folder / 'results.json.bak'}" in other
    assert json.loads((folder / "results.json.bak").read_text())["settings"]["use_instructions"] is True
