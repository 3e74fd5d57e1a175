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
             if "-m app " in line or re.match(r"^\s+(LIMIT=|[\w|-]+\) echo )", line)]
    used = {flag for line in lines for flag in re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", line)}
    assert {"--decay-over", "--eval-every-min", "--init-from", "--batch-size"} <= used
    assert not used - known, sorted(used - known)
