"""What `facet train`, `facet soup` and the GPU check say: the --lora-* options named as
ignored by --init-from only when given, a --max-length past the backbone's positions (with
the tokens the method generates after the text) refused before the weights load, a soup
made past an unreadable ingredient log with a warning, and the device named as it was set.

Real parts: SmolLM2 cut to two layers (tests/conftest.py), real checkpoints, the CLI."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from app.cli import cli

LORA_FLAGS = ["--lora-r", "2", "--lora-targets", "q_proj"]


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def ckpt(smollm2_cut, tmp_path_factory) -> Path:
    """A causal-eos checkpoint (rank-2 LoRA on q_proj, not the options' defaults)."""
    from embedders.backbone import LoraSettings
    from embedders.methods.causal_eos import CausalEOSConfig, CausalEOSEmbedder

    torch.manual_seed(0)
    lora = LoraSettings(r=2, alpha=4, target_modules=("q_proj",))
    model = CausalEOSEmbedder(CausalEOSConfig(lora=lora, max_length=32, backbone=smollm2_cut), device="cpu")
    return model.save(tmp_path_factory.mktemp("ckpt") / "eos")


def _continue(ckpt: Path, smollm2_cut: str, tmp_path: Path, *extra: str) -> str:
    """`facet train --init-from ckpt` up to its data (a source missing from the data folder,
    refused once the model is built: the LoRA line is logged while it is; an unknown task name
    is refused before anything loads)."""
    code, output = _invoke("train", "causal-eos", "--out", str(tmp_path / "out"), "--init-from", str(ckpt),
                           "--backbone", smollm2_cut, "--data-dir", str(tmp_path), "--no-dev", "--threads", "1",
                           "--tasks", "snli", *extra)
    assert code != 0 and "nli_triplets_devtest.jsonl" in output, output
    return output


def test_init_from_names_the_lora_options_ignored_only_when_given(ckpt, smollm2_cut, tmp_path, caplog) -> None:
    """With no --lora-* option it said "the --lora-* options are ignored" (their defaults differ)."""
    caplog.set_level(logging.INFO, logger="app.commands.train")
    _continue(ckpt, smollm2_cut, tmp_path)
    assert not [r for r in caplog.records if "LoRA settings" in r.getMessage()]
    _continue(ckpt, smollm2_cut, tmp_path, *LORA_FLAGS)  # given, and the checkpoint's own: nothing ignored
    assert not [r for r in caplog.records if "LoRA settings" in r.getMessage()]
    _continue(ckpt, smollm2_cut, tmp_path, "--lora-r", "4", "--lora-targets", "q_proj")
    [line] = [r.getMessage() for r in caplog.records if "LoRA settings" in r.getMessage()]
    assert line.startswith("--init-from keeps the checkpoint's LoRA settings ({'r': 2,")
    assert line.endswith("; ignored: --lora-r 4"), line


def test_a_max_length_past_the_positions_is_refused_before_the_weights_load(smollm2_cut, tmp_path) -> None:
    """The backbone folder holds its config alone (no weights): the refusal comes from the config.
    GIRCSE's soft tokens count, the training K (--set train_soft_tokens) too."""
    bare = tmp_path / "bare"
    bare.mkdir()
    config = json.loads((Path(smollm2_cut) / "config.json").read_text())
    (bare / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 64}))
    code, output = _invoke("train", "gircse", "--out", str(tmp_path / "out"), "--backbone", str(bare),
                           "--data-dir", str(tmp_path), "--no-dev", "--max-length", "60",
                           "--set", "train_soft_tokens=8", *LORA_FLAGS)
    assert code != 0 and "Traceback" not in output, output
    assert ("max_length 60 plus the 8 soft tokens GIRCSE generates after the text (train_soft_tokens=8) is 68 "
            "positions") in output, output
    assert "give max_length at most 56" in output and not (tmp_path / "out").exists()


def test_a_soup_with_an_unreadable_ingredient_log_warns_and_is_made(ckpt, tmp_path, caplog) -> None:
    a = Path(shutil.copytree(ckpt, tmp_path / "a"))
    b = Path(shutil.copytree(ckpt, tmp_path / "b"))
    (a / "train_log.json").write_bytes(b"\xff\x00 not json")
    caplog.set_level(logging.WARNING, logger="embedders.training.soup")
    code, output = _invoke("soup", str(a), str(b), "--out", str(tmp_path / "soup"))
    assert code == 0 and "Traceback" not in output, output
    [line] = [r.getMessage() for r in caplog.records if r.name == "embedders.training.soup"]
    assert line.startswith(f"{a / 'train_log.json'} cannot be read as JSON"), line
    assert (tmp_path / "soup" / "facet_config.json").is_file()


def test_a_soup_of_two_methods_is_a_bad_request_not_a_damaged_checkpoint(ckpt, tmp_path) -> None:
    """Exit 2, as a bad --weights is: it exited 4, a damaged checkpoint's code, so a script
    could not tell a wrong combination from a corrupt file (the review of less-travelled
    commands, the fourth session of 2026-12-06). A damaged ingredient stays 4."""
    import json

    a = Path(shutil.copytree(ckpt, tmp_path / "a"))
    other = Path(shutil.copytree(ckpt, tmp_path / "other"))
    meta = json.loads((other / "facet_config.json").read_text())
    meta["method"] = "causal2vec"
    (other / "facet_config.json").write_text(json.dumps(meta))
    code, output = _invoke("soup", str(a), str(other), "--out", str(tmp_path / "soup"))
    assert code == 2 and "a soup needs one method" in output, (code, output)
    from embedders.methods.common import ADAPTER_FILE

    b = Path(shutil.copytree(ckpt, tmp_path / "b"))
    (b / ADAPTER_FILE).write_bytes(b"not weights")
    code, output = _invoke("soup", str(a), str(b), "--out", str(tmp_path / "soup"))
    assert code == 4, (code, output)
    assert not (tmp_path / "soup").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a CUDA GPU")
def test_the_no_gpu_message_names_the_device_as_set(monkeypatch, tmp_path) -> None:
    """FACET_DEVICE=cuda:0 was said as 'cuda' (the embedders' own word) by the API and the worker."""
    from app.encoding import EmbedderCache
    from app.errors import UnavailableError
    from app.settings import get_settings
    from worker.main import check_device

    with pytest.raises(UnavailableError) as caught:
        EmbedderCache("cuda:0").get("minilm")
    assert str(caught.value) == ("device 'cuda:0' was requested but no CUDA GPU is available; use the cpu "
                                 "device (FACET_DEVICE=cpu)")
    # `facet worker`'s check, on the process-wide settings (read once: read again here).
    monkeypatch.setenv("FACET_DATA_DIR", str(tmp_path))
    try:
        for device in ("cuda:0", "cuda"):  # the second as before
            monkeypatch.setenv("FACET_DEVICE", device)
            get_settings.cache_clear()
            with pytest.raises(UnavailableError, match=rf"^device '{device}' was requested but no CUDA GPU"):
                check_device(get_settings())
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
