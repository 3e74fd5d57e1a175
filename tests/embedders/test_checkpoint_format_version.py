"""A checkpoint's ``format_version`` is read, not only written: a folder saved by a newer Facet
(format 2) loaded silently with this one's layout, where files it does not know are ignored and
known ones may mean something else; a version that is not a number loaded too. Real CLI on a copy
of the shipped Causal-EOS checkpoint with its config edited; every refusal comes before any model
loads. A config without the field (written before it was) still loads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from embedders.base import FORMAT_VERSION
from tests.app.cli_runner import invoke_cli

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "checkpoints" / "causal-eos"


def _with_version(tmp_path: Path, version: Any) -> Path:
    ck = tmp_path / "ck"
    shutil.copytree(SHIPPED, ck)
    meta = json.loads((ck / "facet_config.json").read_text())
    if version is None:
        meta.pop("format_version")
    else:
        meta["format_version"] = version
    (ck / "facet_config.json").write_text(json.dumps(meta))
    return ck


def test_a_checkpoint_of_a_newer_format_is_refused_by_every_command(tmp_path: Path) -> None:
    ck = _with_version(tmp_path, FORMAT_VERSION + 1)
    said = (f"{ck} was saved in checkpoint format {FORMAT_VERSION + 1} by a newer Facet; this one "
            f"reads format {FORMAT_VERSION}: upgrade Facet to load it")
    embedded = invoke_cli("embed", "--embedder", str(ck), "a cat")
    assert embedded.returncode == 4, (embedded.returncode, embedded.stdout, embedded.stderr)
    assert said in embedded.stderr and "Traceback" not in embedded.stderr, embedded.stderr
    assert embedded.stdout == ""
    trained = invoke_cli("train", "causal-eos", "--out", str(tmp_path / "out"), "--init-from", str(ck),
                         "--steps", "1", "--no-dev")
    assert trained.returncode == 4, trained.stderr
    assert trained.stderr.strip() == f"error: --init-from {str(ck)!r}: {said}", trained.stderr
    assert not (tmp_path / "out").exists()
    souped = invoke_cli("soup", str(ck), str(SHIPPED), "--out", str(tmp_path / "s"))
    assert souped.returncode == 4, souped.stderr
    assert said in souped.stderr and not (tmp_path / "s").exists(), souped.stderr


@pytest.mark.parametrize("version", ["1", 0, True, 1.5])
def test_a_format_version_that_is_not_one_is_damage(tmp_path: Path, version: Any) -> None:
    ck = _with_version(tmp_path, version)
    embedded = invoke_cli("embed", "--embedder", str(ck), "a cat")
    assert embedded.returncode == 4, (embedded.returncode, embedded.stderr)
    assert (f"{ck / 'facet_config.json'} has format_version {version!r}, which is not a checkpoint "
            f"format (this Facet reads format {FORMAT_VERSION}); the checkpoint is damaged"
            in embedded.stderr), embedded.stderr


def test_a_config_written_before_the_field_still_loads(tmp_path: Path) -> None:
    ck = _with_version(tmp_path, None)
    embedded = invoke_cli("embed", "--embedder", str(ck), "--json", "a cat")
    assert embedded.returncode == 0, embedded.stderr
    assert len(json.loads(embedded.stdout)["vectors"][0]) > 0
