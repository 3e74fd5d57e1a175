"""A save whose files' modes cannot be set keeps what it wrote: `replace_dir` (checkpoint saves,
`facet soup`) gives the new folder and its files the umask's modes, and on a disk that refuses
chmod (FAT mounted with a mask, a FUSE driver without it: the exFAT/FAT exploration of the
fourth session of 2026-12-02) the error deleted the checkpoint just written. A real refusal: a
file made immutable (`chattr +i`, root on a disk that has the attribute, else skipped), whose
mode the kernel then will not change."""

from __future__ import annotations

import logging
import shutil
import subprocess
from pathlib import Path

import pytest

from embedders.training.trainer import replace_dir


def test_a_refused_chmod_is_a_warning_and_the_folder_is_kept(tmp_path: Path, caplog) -> None:
    if shutil.which("chattr") is None:
        pytest.skip("no chattr here")
    immutable: list[Path] = []

    def fill(folder: Path) -> None:
        (folder / "weights.bin").write_bytes(b"\x00" * 64)
        (folder / "config.json").write_text("{}")
        done = subprocess.run(["chattr", "+i", str(folder / "weights.bin")], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"chattr +i is refused here: {done.stderr.strip()}")
        immutable.append(folder / "weights.bin")

    try:
        with caplog.at_level(logging.WARNING, logger="embedders.training.trainer"):
            target = replace_dir(tmp_path / "ckpt", fill)
        assert sorted(p.name for p in target.iterdir()) == ["config.json", "weights.bin"]
        assert (target / "weights.bin").read_bytes() == b"\x00" * 64
        assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]  # nothing half-made left
        assert any("keep the modes they were written with" in r.getMessage()
                   and "weights.bin: Operation not permitted" in r.getMessage() for r in caplog.records), \
            caplog.text
    finally:
        for path in [tmp_path / "ckpt" / "weights.bin", *immutable]:
            subprocess.run(["chattr", "-i", str(path)], capture_output=True)
