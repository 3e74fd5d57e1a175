"""The GPU runbook's scripts: parse, name only files that exist, and call real commands.

The scripts themselves run on a lent GPU machine; `bash scripts/gpu/device.sh smoke` runs
their whole path on a CPU (minutes, not part of the suite)."""

from __future__ import annotations

import re
import subprocess

from tests.scripts import ROOT, load_script


def test_shell_scripts_parse():
    for name in ("device.sh", "train_all.sh"):
        result = subprocess.run(["bash", "-n", str(ROOT / "scripts" / "gpu" / name)], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr


def test_bundle_names_existing_data_and_installed_packages(shared_data):
    pack = load_script("gpu/pack.py")
    missing = [rel for rel in pack.DATA_FILES if not (shared_data / rel).is_file()]
    assert not missing, missing
    import importlib.metadata

    for name in pack.WHEELS:
        assert importlib.metadata.version(name)


def test_train_all_trains_every_registered_method_with_real_options():
    from embedders.registry import trainable_methods

    text = (ROOT / "scripts" / "gpu" / "train_all.sh").read_text()
    default = re.search(r'^METHODS=\$\{METHODS:-"([^"]+)"\}', text, flags=re.M)
    assert default, "train_all.sh names its default METHODS"
    trained = set(default.group(1).split())
    assert trained == set(trainable_methods())
    recipes = {name for case in re.findall(r"^\s+([\w|-]+)\) echo ", text, flags=re.M) for name in case.split("|")}
    assert trained <= recipes, sorted(trained - recipes)  # every method has its recipe in args_for
    from typer.main import get_command

    from app.cli import cli

    commands = get_command(cli).commands  # type: ignore[attr-defined]
    known = {opt for name in ("train", "eval") for p in commands[name].params
             for opt in [*p.opts, *getattr(p, "secondary_opts", [])]}
    joined = text.replace("\\\n", " ")  # continuation lines belong to their command
    # the train command itself, its step limits and each method's recipe
    lines = [line for line in joined.splitlines()
             if "-m app " in line or re.match(r"^\s*(LIMIT=|CORPUS_DEV=|[\w|-]+\) echo )", line)]
    used = {flag for line in lines for flag in re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", line)}
    assert {"--decay-over", "--eval-every-min", "--init-from", "--batch-size", "--dev-corpus",
            "--dev-sts-pairs"} <= used
    assert not used - known, sorted(used - known)


def _train_all_commands(tmp_path, methods: str, **env: str) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    """Run train_all.sh with a stand-in for python that records each `-m app train` command
    (arithmetic through `-c` still goes to the real interpreter); returns each run's command."""
    import os
    import sys

    stub = tmp_path / "py"
    stub.write_text(f'#!/bin/sh\nif [ "$1" = -c ]; then exec {sys.executable} "$@"; fi\necho "$@"\n')
    stub.chmod(0o755)
    out = tmp_path / "out"
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu" / "train_all.sh"), str(out)],
        env={**os.environ, "PYTHON": str(stub), "SMOKE": "1", "METHODS": methods, **env},
        capture_output=True, text=True, timeout=120,
    )
    logs = out / "logs"
    commands = {p.stem: p.read_text() for p in logs.glob("*.log")} if logs.is_dir() else {}
    return result, commands


def test_a_methods_entry_with_a_path_starts_that_run_from_the_path(tmp_path):
    candidate = tmp_path / "cand"
    candidate.mkdir()
    result, commands = _train_all_commands(tmp_path, f"causal-eos gircse-c2={candidate}")
    assert result.returncode == 0, result.stderr
    assert f"--init-from {ROOT / 'checkpoints' / 'causal-eos'} " in commands["causal-eos"]
    # a gircse-* run is GIRCSE with GIRCSE's recipe, from the path it was given
    assert commands["gircse-c2"].startswith("-m app train gircse --out checkpoints/gircse-c2 ")
    assert f"--init-from {candidate} " in commands["gircse-c2"]
    # a second call (INIT_ROOT holds the first call's runs) continues the run's own best instead
    first = tmp_path / "first"
    (first / "gircse-c2").mkdir(parents=True)
    result, commands = _train_all_commands(tmp_path, f"gircse-c2={candidate}", INIT_ROOT=str(first))
    assert result.returncode == 0, result.stderr
    assert f"--init-from {first / 'gircse-c2'} " in commands["gircse-c2"]


def test_a_methods_entry_whose_path_is_missing_stops_before_any_run(tmp_path):
    result, commands = _train_all_commands(tmp_path, f"causal-eos gircse-x={tmp_path / 'nowhere'}")
    assert result.returncode == 2
    assert "no checkpoint at" in result.stderr
    assert not commands  # every entry is checked before the first run starts


def test_gircse_lr2_is_gircses_recipe_at_twice_the_learning_rate(tmp_path):
    result, commands = _train_all_commands(tmp_path, "gircse gircse-lr2", LR_SCALE="0.5")
    assert result.returncode == 0, result.stderr
    plain, doubled = commands["gircse"], commands["gircse-lr2"]
    assert doubled.startswith("-m app train gircse --out checkpoints/gircse-lr2 ")
    assert f"--init-from {ROOT / 'checkpoints' / 'gircse'} " in doubled  # the committed GIRCSE
    assert " --lr 5e-05 " in plain + " " and " --lr 0.0001 " in doubled + " "
    # otherwise the same recipe
    strip = lambda c: re.sub(r"--lr \S+|--(last-)?out \S+", "", c)  # noqa: E731
    assert strip(plain) == strip(doubled)


def test_gircse_b256_is_gircses_lr2_recipe_at_four_times_the_batch_in_gradient_cache_chunks(tmp_path):
    result, commands = _train_all_commands(tmp_path, "gircse-lr2 gircse-b256")
    assert result.returncode == 0, result.stderr
    lr2, big = commands["gircse-lr2"], commands["gircse-b256"]
    assert big.startswith("-m app train gircse --out checkpoints/gircse-b256 ")
    assert f"--init-from {ROOT / 'checkpoints' / 'gircse'} " in big
    # SMOKE=1 shrinks the batch to 4 in chunks of 2 (so a CPU smoke run takes two chunks per step)
    assert re.search(r"--batch-size 4 --grad-cache 2 ", big) and "--grad-cache" not in lr2
    strip = lambda c: re.sub(r"--grad-cache \S+|--(last-)?out \S+", "", c).split()  # noqa: E731
    assert strip(lr2) == strip(big)  # otherwise lr2's recipe: the same lr, teacher and dev
    text = (ROOT / "scripts" / "gpu" / "train_all.sh").read_text()
    assert re.search(r"HUGE=256; CHUNK=64", text)  # on the device: 256 in chunks of 64


def test_gircse_later_is_gircses_lr2_recipe_with_the_penalty_on_the_later_step(tmp_path):
    from embedders.methods.gircse.config import GircseConfig

    result, commands = _train_all_commands(tmp_path, "gircse-lr2 gircse-later")
    assert result.returncode == 0, result.stderr
    lr2, later = commands["gircse-lr2"], commands["gircse-later"]
    assert later.startswith("-m app train gircse --out checkpoints/gircse-later ")
    assert f"--init-from {ROOT / 'checkpoints' / 'gircse'} " in later
    setting = re.search(r"--set (\S+)=(\S+)", later)
    assert setting and setting.groups() == ("refinement_target", "later")
    GircseConfig(**{setting.group(1): setting.group(2)})  # a value the method takes
    strip = lambda c: re.sub(r"--set \S+|--(last-)?out \S+", "", c).split()  # noqa: E731
    assert strip(lr2) == strip(later)  # otherwise lr2's recipe, its control


def test_instemb_steer_is_an_instemb_run_with_steer_quads_from_the_committed_weights(tmp_path):
    result, commands = _train_all_commands(tmp_path, "instemb-steer")
    assert result.returncode == 0, result.stderr
    command = commands["instemb-steer"]
    assert command.startswith("-m app train instemb --out checkpoints/instemb-steer ")
    assert f"--init-from {ROOT / 'checkpoints' / 'instemb'} " in command
    tasks = dict(item.split(":") for item in re.search(r"--tasks (\S+)", command).group(1).split(","))
    from embedders.training.instruct_data import LOADERS

    assert set(tasks) <= set(LOADERS), sorted(set(tasks) - set(LOADERS))
    assert abs(sum(map(float, tasks.values())) - 1) < 1e-9
    assert abs(float(tasks["banking77-steer"]) + float(tasks["emotion-steer"]) - 0.4) < 1e-9


def test_collect_brings_each_run_back_as_one_file_with_its_end_weights(tmp_path):
    """At most 8 files come back from a device call: one per run (best and end-of-run weights
    together) plus the logs, so five runs fit."""
    import os
    import tarfile

    work = tmp_path / "work"
    for run in ("gircse", "gircse-last", "causal-eos"):  # causal-eos: a run without --last-out
        (work / "out" / "checkpoints" / run).mkdir(parents=True)
        (work / "out" / "checkpoints" / run / "adapter.safetensors").write_text(run)
    (work / "out" / "logs").mkdir()
    (work / "out" / "logs" / "gircse.log").write_text("dev")
    (work / "train.log").write_text("gpu: 100 %")
    out = tmp_path / "o"
    out.mkdir()
    result = subprocess.run(["bash", str(ROOT / "scripts" / "gpu" / "device.sh"), "collect"],
                            env={**os.environ, "FACET_GPU_WORK": str(work), "OUT": str(out)},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["ckpt-causal-eos.tgz", "ckpt-gircse.tgz", "logs.tgz"]
    with tarfile.open(out / "ckpt-gircse.tgz") as tar:
        assert sorted(tar.getnames()) == ["gircse", "gircse-last", "gircse-last/adapter.safetensors",
                                          "gircse/adapter.safetensors"]
    with tarfile.open(out / "logs.tgz") as tar:
        assert {"logs/gircse.log", "logs/train.log"} <= set(tar.getnames())


def test_dev_sts_all_scores_every_stsb_dev_pair_in_the_corpus_runs_only(tmp_path):
    result, commands = _train_all_commands(tmp_path, "causal-eos gircse-lr2 inbedder", DEV_STS="all")
    assert result.returncode == 0, result.stderr
    assert all(c.rstrip().endswith("--dev-sts-pairs all") for c in (commands["causal-eos"], commands["gircse-lr2"]))
    assert "--dev-sts-pairs" not in commands["inbedder"]  # the instruction dev suite has no STS part
    result, commands = _train_all_commands(tmp_path, "causal-eos")
    assert "--dev-sts-pairs" not in commands["causal-eos"]  # unset: the trainer's 400 pairs


def test_a_second_call_runs_the_methods_of_the_first(tmp_path):
    """Each device call is a fresh shell: `cont` without METHODS (as the runbook wrote it) fell
    back to the default five, none of which the first call had trained ("no checkpoint at
    ...", exit 2), and its collect left a file named "ckpt-*.tgz" (the GPU review of
    2026-12-06). A stand-in train_all.sh records the METHODS it was given."""
    import os

    repo = tmp_path / "repo"
    (repo / "scripts" / "gpu").mkdir(parents=True)
    (repo / "scripts" / "gpu" / "train_all.sh").write_text(
        'mkdir -p "$1"; echo "$METHODS" > "$1/methods-seen"\n')
    work = tmp_path / "work"
    work.mkdir()
    (work / "env.sh").write_text("")
    (work / "methods").write_text("gircse-lr2 gircse-b256 gircse-later\n")  # the `all` call's
    out = tmp_path / "o"
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "METHODS"}
    result = subprocess.run(["bash", str(ROOT / "scripts" / "gpu" / "device.sh"), "cont"], cwd=repo,
                            env={**env, "FACET_GPU_WORK": str(work), "OUT": str(out), "DEADLINE_S": "20"},
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (work / "out2" / "methods-seen").read_text().split() == ["gircse-lr2", "gircse-b256", "gircse-later"]
    assert sorted(p.name for p in out.iterdir()) == ["logs.tgz"]  # no run kept weights: no "ckpt-*.tgz"


def test_a_part_fits_beside_the_working_tree_and_holds_the_wheels():
    """`--part-mb 39.25` (the Makefile's) and then 35 (the runbook's) outgrew the room beside a
    working tree that had grown to 30.9 MiB: every call carrying a part was refused (64 MiB a
    call). The size is worked out from the tree now, and refused where the first part could
    not hold the wheels whole."""
    import pytest

    pack = load_script("gpu/pack.py")
    mib = 2**20
    assert pack.part_bytes(31 * mib, 26 * mib, None) == 64 * mib - 31 * mib - pack.MARGIN_BYTES
    assert pack.part_bytes(31 * mib, 26 * mib, 30.0) == 30 * mib
    with pytest.raises(SystemExit, match=r"does not fit beside the 31\.0 MiB working tree"):
        pack.part_bytes(31 * mib, 26 * mib, 35.0)
    with pytest.raises(SystemExit, match="cannot hold the wheels"):
        pack.part_bytes(40 * mib, 26 * mib, None)
    tree = pack.tree_bytes()
    assert 5 * mib < tree < 64 * mib  # the checkout's own files, not the venv or .gpu
