"""`facet train METHOD --init-lora-from CKPT --lora-r 16` (or --lora-layers / --lora-targets)
ignored the --lora-* options without a word: the adapter copied from CKPT fixes them. As with
--init-from, the options given that differ from the checkpoint's are named as ignored, with the
settings kept, before the model loads.

Real parts: SmolLM2 cut to two layers (tests/conftest.py), a real causal-eos checkpoint, the CLI."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from app.cli import cli


@pytest.fixture(scope="module")
def eos_ckpt(smollm2_cut, tmp_path_factory) -> Path:
    """A causal-eos checkpoint (rank-2 LoRA on q_proj, every layer: not the options' defaults)."""
    from embedders.backbone import LoraSettings
    from embedders.methods.causal_eos import CausalEOSConfig, CausalEOSEmbedder

    torch.manual_seed(0)
    lora = LoraSettings(r=2, alpha=4, target_modules=("q_proj",))
    model = CausalEOSEmbedder(CausalEOSConfig(lora=lora, max_length=32, backbone=smollm2_cut), device="cpu")
    return model.save(tmp_path_factory.mktemp("ckpt") / "eos")


def _lora_lines(caplog: pytest.LogCaptureFixture, eos_ckpt: Path, smollm2_cut: str, tmp_path: Path,
                *extra: str) -> list[str]:
    """The LoRA-settings lines of `facet train gircse --init-lora-from eos_ckpt EXTRA` up to its
    data (an unknown task, refused once the model is built)."""
    caplog.clear()
    result = CliRunner().invoke(cli, ["train", "gircse", "--out", str(tmp_path / "out"), "--init-lora-from",
                                      str(eos_ckpt), "--backbone", smollm2_cut, "--data-dir", str(tmp_path),
                                      "--max-length", "32", "--no-dev", "--threads", "1", "--tasks", "snli",
                                      *extra])
    assert result.exit_code != 0 and "nli_triplets_devtest.jsonl" in result.output, result.output
    return [r.getMessage() for r in caplog.records if "LoRA settings" in r.getMessage()]


def test_init_lora_from_names_the_lora_options_it_ignores(eos_ckpt, smollm2_cut, tmp_path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="app.commands.train")
    assert _lora_lines(caplog, eos_ckpt, smollm2_cut, tmp_path) == []  # none given: their defaults are no choice
    assert _lora_lines(caplog, eos_ckpt, smollm2_cut, tmp_path, "--lora-r", "2", "--lora-targets", "q_proj") == []
    lines = _lora_lines(caplog, eos_ckpt, smollm2_cut, tmp_path, "--lora-r", "16", "--lora-layers", "0-1",
                        "--lora-targets", "q_proj")
    assert len(lines) == 1, f"one line naming the --lora-* options ignored, got {lines}"
    [line] = lines
    assert line.startswith("--init-lora-from keeps the checkpoint's LoRA settings ({'r': 2,"), line
    assert "'q_proj'" in line, line
    assert line.endswith("; ignored: --lora-r 16, --lora-layers 0-1"), line


def test_a_damaged_adapter_to_start_from_is_one_line_before_the_model_loads(eos_ckpt, smollm2_cut,
                                                                             tmp_path, caplog) -> None:
    """A truncated adapter.safetensors under --init-lora-from was safetensors' own traceback,
    exit 1, after the backbone loaded; --init-from says it in one line, exit 4."""
    import shutil

    damaged = tmp_path / "damaged"
    shutil.copytree(eos_ckpt, damaged)
    adapter = damaged / "adapter.safetensors"
    adapter.write_bytes(adapter.read_bytes()[:100])
    caplog.set_level(logging.INFO)
    result = CliRunner().invoke(cli, ["train", "gircse", "--out", str(tmp_path / "out"), "--init-lora-from",
                                      str(damaged), "--backbone", smollm2_cut, "--data-dir", str(tmp_path),
                                      "--max-length", "32", "--no-dev", "--threads", "1", "--tasks", "snli"])
    assert result.exit_code == 4, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert f"{adapter} cannot be read" in result.output and "the checkpoint is damaged" in result.output
    assert not (tmp_path / "out").exists()


def test_an_adapter_of_nans_to_start_from_is_refused(eos_ckpt, smollm2_cut, tmp_path) -> None:
    """An adapter that reads but holds NaNs: every step was skipped ("non-finite loss"), then
    "nothing saved", exit 0; and loading such a checkpoint embedded every text as NaNs."""
    import shutil

    from safetensors.torch import load_file, save_file

    from embedders.errors import CheckpointError
    from embedders.methods.common import read_weights

    nans = tmp_path / "nans"
    shutil.copytree(eos_ckpt, nans)
    adapter = nans / "adapter.safetensors"
    weights = load_file(str(adapter))
    first = next(iter(weights))
    weights[first] = torch.full_like(weights[first], float("nan"))
    save_file(weights, str(adapter))
    result = CliRunner().invoke(cli, ["train", "gircse", "--out", str(tmp_path / "out"), "--init-lora-from",
                                      str(nans), "--backbone", smollm2_cut, "--data-dir", str(tmp_path),
                                      "--max-length", "32", "--no-dev", "--threads", "1", "--tasks", "snli"])
    assert result.exit_code == 4, result.output
    assert f"{adapter} holds weights that are not finite (NaN or infinite, in {first})" in result.output
    with pytest.raises(CheckpointError, match="not finite"):
        read_weights(adapter)
