"""Checkpoint weights that do not match their config are refused, not loaded half-trained:
an adapter file missing LoRA tensors, a max_length past the backbone's positions, and
damaged weight files found by ``check_embedder`` before any work."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from embedders.backbone import LoraSettings
from embedders.errors import CheckpointError, InvalidInputError
from embedders.methods.causal_eos import CausalEOSConfig, CausalEOSEmbedder
from embedders.methods.common import ADAPTER_FILE
from embedders.registry import check_embedder, load_checkpoint, load_embedder

LORA = LoraSettings(r=2, alpha=4, target_modules=("q_proj", "v_proj"))


def _save(backbone: str, folder: Path, lora: LoraSettings = LORA) -> Path:
    torch.manual_seed(0)
    model = CausalEOSEmbedder(CausalEOSConfig(lora=lora, max_length=32, backbone=backbone), device="cpu")
    return model.save(folder)


@pytest.fixture(scope="module")
def saved(smollm2_cut, tmp_path_factory) -> Path:
    """A tiny causal-eos checkpoint (rank-2 LoRA on q_proj and v_proj of SmolLM2 cut to two layers)."""
    return _save(smollm2_cut, tmp_path_factory.mktemp("ckpt") / "full")


def _copy_with_adapter(saved: Path, target: Path, adapter: dict[str, torch.Tensor]) -> Path:
    shutil.copytree(saved, target)
    save_file(adapter, str(target / ADAPTER_FILE))
    return target


def test_a_complete_adapter_still_loads(saved: Path) -> None:
    model = load_checkpoint(saved, device="cpu")
    assert model.encode(["a dog runs"]).shape[0] == 1


def test_an_adapter_missing_some_lora_tensors_is_refused(saved: Path, tmp_path: Path) -> None:
    """Every v_proj tensor removed: the load went ahead with v_proj's LoRA at its fresh init."""
    full = load_file(str(saved / ADAPTER_FILE))
    partial = {k: v for k, v in full.items() if "v_proj" not in k}
    assert 0 < len(partial) < len(full)
    folder = _copy_with_adapter(saved, tmp_path / "partial", partial)
    with pytest.raises(CheckpointError, match=r"adapter\.safetensors: LoRA weights are incomplete: 4 of the "
                                              r"configured adapter's LoRA tensors are missing \(such as "
                                              r"\S*v_proj\.lora_"):
        load_checkpoint(folder, device="cpu")


def test_an_adapter_of_one_non_lora_tensor_is_refused(saved: Path, tmp_path: Path) -> None:
    folder = _copy_with_adapter(saved, tmp_path / "x", {"x": torch.zeros(2)})
    with pytest.raises(CheckpointError, match="LoRA weights are incomplete: 8 of"):
        load_checkpoint(folder, device="cpu")


def test_an_adapter_of_fewer_layers_than_the_config_is_refused(smollm2_cut, saved: Path, tmp_path: Path) -> None:
    """An adapter trained on layer 1 alone under a config that adapts every layer."""
    top = _save(smollm2_cut, tmp_path / "top", LoraSettings(r=2, alpha=4, target_modules=("q_proj", "v_proj"),
                                                             layers=(1,)))
    folder = _copy_with_adapter(saved, tmp_path / "mixed", load_file(str(top / ADAPTER_FILE)))
    with pytest.raises(CheckpointError, match=r"4 of the configured adapter's LoRA tensors are missing "
                                              r"\(such as \S*layers\.0\."):
        load_checkpoint(folder, device="cpu")


def test_an_r0_checkpoint_has_no_adapter_and_loads(smollm2_cut, tmp_path: Path) -> None:
    folder = _save(smollm2_cut, tmp_path / "r0", LoraSettings(r=0))
    assert not (folder / ADAPTER_FILE).exists()
    assert load_checkpoint(folder, device="cpu").encode(["a dog runs"]).shape[0] == 1


def test_a_max_length_past_the_backbones_positions_is_refused(smollm2_cut, saved: Path, tmp_path: Path) -> None:
    """`ckpt[max_length=100000]` was accepted (only `>= 16` was checked)."""
    positions = json.loads((Path(smollm2_cut) / "config.json").read_text())["max_position_embeddings"]
    assert positions == 8192
    with pytest.raises(InvalidInputError, match=rf"option max_length='{positions + 1}': max_length "
                       rf"{positions + 1} is more than backbone .* can read: its position limit "
                       rf"\(max_position_embeddings\) is {positions} tokens"):
        load_embedder(f"{saved}[max_length={positions + 1}]", device="cpu")
    assert load_embedder(f"{saved}[max_length={positions}]", device="cpu").max_length == positions
    # A saved config past the limit: a CheckpointError naming the file, not a traceback.
    folder = shutil.copytree(saved, tmp_path / "long")
    meta = json.loads((folder / "facet_config.json").read_text())
    meta["config"]["max_length"] = 100000
    (folder / "facet_config.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=r"facet_config.json: max_length 100000 is more than backbone"):
        load_checkpoint(folder, device="cpu")


def test_check_embedder_reads_the_weight_files_headers(saved: Path, tmp_path: Path) -> None:
    """A truncated adapter passed the up-front check (config only) and failed at its load, after
    the embedders before it had run every task."""
    check_embedder(str(saved))
    folder = shutil.copytree(saved, tmp_path / "trunc")
    data = (folder / ADAPTER_FILE).read_bytes()
    (folder / ADAPTER_FILE).write_bytes(data[: len(data) - 100])
    with pytest.raises(CheckpointError, match=r"adapter\.safetensors cannot be read \(SafetensorError: .*\); "
                                              "the checkpoint is damaged"):
        check_embedder(str(folder))
    (folder / ADAPTER_FILE).write_bytes(b"")
    with pytest.raises(CheckpointError, match="the checkpoint is damaged"):
        check_embedder(str(folder))
    (folder / ADAPTER_FILE).unlink()
    with pytest.raises(CheckpointError, match=r"has no adapter\.safetensors but its config has LoRA r=2"):
        check_embedder(str(folder))
