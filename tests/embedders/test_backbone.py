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


def test_unknown_local_path_is_a_clear_error_at_once(tmp_path):
    """A name that is no local model retried the model hub for ~50 s before failing."""
    import time

    from embedders.backbone import load_decoder

    (tmp_path / "empty-model").mkdir()
    started = time.monotonic()
    for name, message in ((str(tmp_path / "missing-model"), "is not a packaged model, a local "
                           "model directory or a model in the Hugging Face cache"),
                          ("nosuch-org/nosuch-model", "Facet downloads nothing"),
                          (str(tmp_path / "empty-model"), "cannot load decoder backbone")):
        with pytest.raises(CheckpointError, match=message):
            load_decoder(name)
    assert time.monotonic() - started < 20  # no network retries


@pytest.mark.slow
def test_two_processes_convert_the_gguf_once_into_a_fresh_cache(tmp_path):
    """Both processes end with the converted model (the first loads it); the lock makes one
    wait for the other."""
    script = textwrap.dedent(
        f"""
        import os
        import sys
        from embedders import backbone
        backbone.set_cache_dir({str(tmp_path)!r})
        path = backbone.resolve_model_path("smollm2-135m-instruct")
        # Whichever waited on the lock returns a finished folder (written whole, then renamed).
        assert os.path.exists(os.path.join(path, ".facet-complete")), os.listdir(path)
        if sys.argv[1] == "0":  # one load shows the folder is a model; the other only waits
            path += " " + str(backbone.load_decoder(path, device="cpu").hidden_size)
        print(path)
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(i)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err), said in zip(procs, outs, (" 576", ""), strict=True):
        assert p.returncode == 0, err[-2000:]
        assert out.strip() == f"{tmp_path / 'smollm2-135m-instruct'}{said}", out
        # transformers' own tensor bar is drawn on a terminal only: it was 1.5 KB of carriage
        # returns in a server's log (stderr here is a pipe, as a log file is).
        assert "de-quantizing" not in err, err[-2000:]
    entries = sorted(x.name for x in tmp_path.iterdir())
    # One converted directory and its lock file; no leftover temporary directories.
    assert entries == ["smollm2-135m-instruct", "smollm2-135m-instruct.lock"]
    from gguf import GGUFReader, dequantize
    from safetensors.torch import load_file

    from embedders import backbone

    weights = load_file(tmp_path / "smollm2-135m-instruct" / "model.safetensors")
    # The conversion reuses one parse of the file: its tensors are still the GGUF's, de-quantized.
    reader = GGUFReader(backbone._package_dir(backbone._SMOLLM_PACKAGE) / backbone._SMOLLM_GGUF)
    tensors = {t.name: t for t in reader.tensors}
    for gguf_name, hf_name in (("token_embd.weight", "model.embed_tokens.weight"),
                               ("output_norm.weight", "model.norm.weight"),
                               ("blk.3.ffn_down.weight", "model.layers.3.mlp.down_proj.weight")):
        t = tensors[gguf_name]
        expected = torch.from_numpy(dequantize(t.data, t.tensor_type).copy()).float()
        assert torch.equal(weights[hf_name], expected.reshape(weights[hf_name].shape)), hf_name


def test_the_conversion_patch_is_undone_on_exit():
    import gguf

    from embedders import backbone

    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with pytest.raises(RuntimeError), backbone._gguf_parsed_once():
        assert gguf.GGUFReader is not reader and gguf.get_tensor_name_map is not name_map
        raise RuntimeError("a failed conversion")
    assert gguf.GGUFReader is reader and gguf.get_tensor_name_map is name_map


def test_a_relative_xdg_cache_home_is_ignored(monkeypatch, tmp_path) -> None:
    """The XDG spec: a relative XDG_CACHE_HOME is ignored (it put the model conversion cache
    under whatever folder a command ran from); an absolute one is used."""
    from embedders.backbone import default_cache_dir

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", "relcache")
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "facet" / "models"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "facet" / "models"
