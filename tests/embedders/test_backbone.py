from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from embedders import CheckpointError
from embedders.backbone import pick_device, resolve_model_path


def test_pick_device_defaults_to_cpu_fp32_without_gpu():
    spec = pick_device()
    if torch.cuda.is_available():
        assert spec.device.type == "cuda" and spec.dtype == torch.bfloat16
    else:
        assert spec.device.type == "cpu" and spec.dtype == torch.float32


def test_pick_device_rejects_unknown_dtype():
    with pytest.raises(CheckpointError, match="unknown dtype 'float8'"):
        pick_device("cpu", "float8")


def test_packaged_encoder_path_resolves():
    path = Path(resolve_model_path("all-minilm-l6-v2"))
    assert (path / "model.safetensors").is_file()


def test_unknown_local_path_is_a_clear_error(tmp_path):
    from embedders.backbone import load_decoder

    with pytest.raises(CheckpointError, match="cannot load decoder backbone"):
        load_decoder(str(tmp_path / "missing-model"))


@pytest.mark.slow
def test_two_processes_convert_the_gguf_once_into_a_fresh_cache(tmp_path):
    """Both processes end with a loadable model; the lock makes one wait for the other."""
    script = textwrap.dedent(
        f"""
        import sys
        from embedders import backbone
        backbone.set_cache_dir({str(tmp_path)!r})
        path = backbone.resolve_model_path("smollm2-135m-instruct")
        b = backbone.load_decoder("smollm2-135m-instruct", device="cpu")
        print(path, b.hidden_size)
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-2000:]
        assert out.strip().endswith("576")
    entries = sorted(x.name for x in tmp_path.iterdir())
    # One converted directory and its lock file; no leftover temporary directories.
    assert entries == ["smollm2-135m-instruct", "smollm2-135m-instruct.lock"]
    assert (tmp_path / "smollm2-135m-instruct" / "model.safetensors").is_file()
